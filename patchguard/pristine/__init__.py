"""Pristine sources: the bytes a file had in its wheel, found and proven the same build.

Wheel sources (wheelhouse, pip and uv caches, ``direct_url.json``) and the same-build proof
(:mod:`.sources`), the box's package indexes (:mod:`.index`), editable and VCS installs (:mod:`.vcs`), diffs
and RECORD verification (:mod:`.explain`) and putting files back (:mod:`.restore`).
"""
