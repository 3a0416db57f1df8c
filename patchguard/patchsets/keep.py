"""Restore that keeps the sets in place: a set is protected by what is on disk, not by who applied it.

:func:`patchguard.pristine.restore.restore` puts files back to their wheels' bytes and refuses to undo a set
patchguard applied (its state says so); the sets a person applied by hand — the normal state right after
``capture`` — are known only to this room, which reads the patches directory. This is the ``restore`` of the
command line and of the API.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from ..env import Target
from ..errors import PatchguardError
from ..integrity.inventory import Scanned
from ..model import SetStatus
from ..pristine.restore import RestoreResult
from ..pristine.restore import restore as restore_files
from ..pristine.sources import SourceOptions
from .model import load_sets
from .status import states_of

__all__ = ["by_hand", "restore"]


def by_hand(scanned: Scanned, patches: str | None = None) -> dict[str, str]:
    """The files of every set in place that patchguard did not apply (by hand, or right after ``capture``):
    absolute path → set name. A patches directory that cannot be read names none."""
    try:
        sets = {ps.name: ps for ps in load_sets(patches)}
        states = states_of(scanned.target, scanned.dists, patches) if sets else []
    except PatchguardError:
        return {}
    out: dict[str, str] = {}
    for s in states:
        if s.state is SetStatus.BY_HAND:
            for site in scanned.target.site_packages:
                out.update({os.path.join(site, *rel.split("/")): s.name for rel in sets[s.name].paths})
    return out


def restore(
    distributions: Iterable[str],
    *,
    target: Target,
    paths: Sequence[str] = (),
    dry_run: bool = False,
    remove_unexpected: bool = False,
    fetch: SourceOptions | None = None,
    force: bool = False,
    patches: str | None = None,
) -> RestoreResult:
    """Restore every modified and missing file of ``distributions`` in ``target`` to its wheel's bytes
    (:func:`patchguard.pristine.restore.restore`), refusing — unless ``force``, and in a dry run as in the
    real one — to undo a set in place, whoever applied it: a set is protected by what is on disk, not by
    who put it there (``patches``: where the sets are, as for ``sets``). :func:`patchguard.restore` is its
    public face."""
    return restore_files(
        distributions,
        target=target,
        paths=paths,
        dry_run=dry_run,
        remove_unexpected=remove_unexpected,
        fetch=fetch,
        force=force,
        protect=lambda scanned: by_hand(scanned, patches),
    )
