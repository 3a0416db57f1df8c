"""What becomes of each file of a set in a rebase: the values every stage of :mod:`.rebase` hands on.

They sit below the stages (:mod:`.review`, :mod:`.rewrite` and the driver :mod:`.rebase`) so that each
stage imports them from here and none imports another stage sideways. The finished ones (:class:`FileOutcome`,
:class:`RebasedFile`) are defined in :mod:`patchguard.results.rebase`, which the formats read; the working
one, :class:`Rebased` (with the bytes), is defined here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...results.rebase import FileOutcome, RebasedFile

__all__ = ["FileOutcome", "Rebased", "RebasedFile"]


@dataclass
class Rebased:
    """One file's outcome, the bytes the new set makes of it, and the target release's bytes."""

    file: RebasedFile
    result: bytes | None  # what the file becomes (``None``: absent)
    ours: bytes | None  # the target release's file (at ``file.new_path``)
    mode: int | None = None
