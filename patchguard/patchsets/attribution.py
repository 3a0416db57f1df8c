"""Attribution: which known patch set explains each changed file. A function of the scan's changed files
(each with its RECORD row and path) and the sets; it reads those files, writes nothing and scans nothing."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from ..errors import PatchguardError
from ..integrity.inventory import ChangedFile
from ..integrity.records import RecordEntry, canonicalize, matches
from ..model import Finding, Kind
from .installed import reader
from .model import PatchSet
from .planner import Reader, plan_patches

__all__ = ["attribute"]


def attribute(
    changes: Sequence[ChangedFile], sets: Sequence[PatchSet], site_dirs: Sequence[str]
) -> list[ChangedFile]:
    """``changes``, each modification that one of ``sets`` explains attributed to it (and each file no
    distribution owns that a set of the environment made).

    A modified file is the work of a set when reverse-applying that set's part for the file gives back
    exactly its RECORD hash; a set that reverses cleanly but leaves other differences is named too, with
    "plus other changes".
    """
    out: list[ChangedFile] = []
    for c in changes:
        f = c.finding
        site = _site_of(c, site_dirs)
        modified = f.kind is Kind.MODIFIED and f.distribution is not None and c.entry is not None
        unowned = f.kind in (Kind.STARTUP_HOOK, Kind.UNEXPECTED) and f.distribution is None
        relative = not os.path.isabs(f.path) and not f.path.endswith("/")
        if (modified or unowned) and site is not None and relative:
            c = c.told(_attributed(f, sets, c.entry, reader(site)))
        out.append(c)
    return out


def _site_of(c: ChangedFile, site_dirs: Sequence[str]) -> str | None:
    """The site dir a changed file's set paths are relative to."""
    if c.dist is not None:
        return c.dist.site_dir
    return next((s for s in site_dirs if c.path.startswith(os.path.join(s, ""))), None)


def _targeted(ps: PatchSet, distribution: str | None) -> bool:
    """Whether ``ps`` targets ``distribution`` (``None``: the environment, files no one owns)."""
    if distribution is None:
        return any(t.is_environment for t in ps.targets)
    return canonicalize(distribution) in {canonicalize(t.distribution) for t in ps.distributions}


def _attributed(f: Finding, sets: Sequence[PatchSet], entry: RecordEntry | None, read: Reader) -> Finding:
    for ps in sets:
        if f.path not in ps.paths or not _targeted(ps, f.distribution):
            continue
        try:
            (fp,) = plan_patches(ps.name, [x for x in ps.patches if x.path == f.path], read, reverse=True)
        except (PatchguardError, ValueError):  # hunks that do not apply, a file that cannot be read
            continue
        # No RECORD row: the file is the set's own when reverting the set removes it.
        exact = fp.after is None if entry is None else fp.after is not None and matches(entry, fp.after)
        message = f.message if exact else f"{f.message} (patch set {ps.name} plus other changes)"
        return replace(f, patch_set=ps.name, message=message, patch_set_exact=exact)
    return f
