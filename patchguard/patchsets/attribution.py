"""Attribution: which known patch set explains each modified file. A pure function of the findings, the
sets and a way to read each file; it writes nothing and scans nothing."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace

from ..errors import PatchguardError
from ..integrity.records import RecordEntry, canonicalize, matches
from ..model import Finding, Kind
from .model import PatchSet
from .planner import Reader, plan_patches

__all__ = ["Located", "attribute"]

# For a finding: the RECORD row of its file (None: no distribution owns it) and a reader of its site dir,
# or None when it cannot be read.
Located = Callable[[Finding], "tuple[RecordEntry | None, Reader] | None"]


def attribute(findings: Sequence[Finding], sets: Sequence[PatchSet], locate: Located) -> list[Finding]:
    """``findings``, with each modification that one of ``sets`` explains attributed to it.

    A modified file is the work of a set when reverse-applying that set's part for the file gives back
    exactly its RECORD hash; a set that reverses cleanly but leaves other differences is named too, with
    "plus other changes".
    """
    out = list(findings)
    for i, f in enumerate(out):
        if os.path.isabs(f.path) or f.path.endswith("/"):
            continue
        modified = f.kind is Kind.MODIFIED and f.distribution is not None
        unowned = f.kind in (Kind.STARTUP_HOOK, Kind.UNEXPECTED) and f.distribution is None
        if not (modified or unowned):
            continue
        where = locate(f)
        if where is not None:
            out[i] = _attributed(f, sets, *where)
    return out


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
