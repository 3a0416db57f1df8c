"""Three-way merges and file similarity, for ``rebase``.

The merge is git's own ``git merge-file`` run through gitpython (a chosen dependency, and git's xdiff merge
is the one users know and can reproduce by hand: a carried file is byte for byte what ``git merge-file``
makes of the same three inputs). It runs outside any repository, with no user or system configuration, so
nothing but the three inputs decides the result. Conflicts are written in the ``diff3`` style: the base is
shown between the two sides.

git's merge also conflicts where the two sides' changes only *touch* (a line the set inserts right below a
``def`` line upstream re-annotated): neither side's own lines were changed by the other. Such a region is
merged line by line here — each side's edits of the base, applied together when no two of them overlap (an
insertion at the edge of the other side's range goes at that edge; two different insertions at one place, or
edits sharing a line, stay a conflict) — and counted in ``Merged.adjacent``, so it is said, never silent.
Everywhere else the result is git's output, byte for byte.
"""

from __future__ import annotations

import collections
import difflib
import os
import tempfile
from dataclasses import dataclass

from ..errors import PatchguardError

__all__ = ["MergeFailed", "Merged", "has_markers", "line_counts", "merge", "similarity"]

_CLEAN_GIT = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_COUNT": "0",
    "GIT_CEILING_DIRECTORIES": "/",
}
_MARKERS = (b"<<<<<<< ", b"||||||| ", b">>>>>>> ")


class MergeFailed(PatchguardError):
    """git could not run, or failed for a reason other than conflicts."""


@dataclass(frozen=True, slots=True)
class Merged:
    """What a merge made: the bytes (with conflict markers when ``conflicts``), how many regions still
    conflict, and how many regions git's merge left that were merged line by line (touching changes)."""

    data: bytes
    conflicts: int
    adjacent: int = 0


def merge(ours: bytes, base: bytes, theirs: bytes, labels: tuple[str, str, str]) -> Merged:
    """``git merge-file -p --diff3``: carry base→theirs onto ours. ``labels``: (ours, base, theirs)."""
    import git

    with tempfile.TemporaryDirectory(prefix="pg-merge-") as tmp:
        names = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(data)
            names.append(path)
        cmd = ["git", "merge-file", "-p", "--diff3"]
        for label in labels:
            cmd += ["-L", label]
        try:
            status, out, err = git.Git(tmp).execute(
                [*cmd, *names],
                with_extended_output=True,
                with_exceptions=False,
                stdout_as_string=False,
                strip_newline_in_stdout=False,
                env=_CLEAN_GIT,
            )
        except git.GitCommandNotFound:
            raise MergeFailed(
                "rebase merges with git, which is not installed", hint="install git (apt install git)"
            ) from None
    if not isinstance(out, bytes) or status < 0 or status > 127:
        raise MergeFailed(f"git merge-file failed (exit {status}): {err!s:.200}")
    if status == 0 or any(has_markers(x) for x in (ours, base, theirs)):
        return Merged(out, int(status))  # nothing to resolve, or markers in the inputs: git's word stands
    return _resolve_touching(out, labels)


Edit = tuple[int, int, list[bytes]]  # replace base lines [i1, i2) with these lines (i1 == i2: insert)


def _resolve_touching(merged: bytes, labels: tuple[str, str, str]) -> Merged:
    """git's output with every conflict region whose two sides' edits do not overlap merged."""
    heads = [
        b"<<<<<<< " + labels[0].encode(),
        b"||||||| " + labels[1].encode(),
        b"=======",
        b">>>>>>> " + labels[2].encode(),
    ]
    out: list[bytes] = []
    region: list[list[bytes]] | None = None  # ours, base, theirs lines while inside a conflict
    raw: list[bytes] = []
    conflicts = adjacent = 0
    for line in merged.splitlines(keepends=True):
        bare = line.rstrip(b"\r\n")
        if region is None:
            if bare == heads[0]:
                region, raw = [[]], [line]
            else:
                out.append(line)
            continue
        raw.append(line)
        if bare in (heads[1], heads[2]):
            region.append([])
        elif bare == heads[3] and len(region) == 3:
            together = _combine(region[1], region[0], region[2])
            if together is None:
                conflicts += 1
                out += raw
            else:
                adjacent += 1
                out += together
            region = None
        else:
            region[-1].append(line)
    if region is not None:  # unterminated (cannot happen with git's output): keep it as it was
        out += raw
        conflicts += 1
    return Merged(b"".join(out), conflicts, adjacent)


def _edits(base: list[bytes], side: list[bytes]) -> list[Edit]:
    ops = difflib.SequenceMatcher(None, base, side, autojunk=False).get_opcodes()
    return [(i1, i2, side[j1:j2]) for tag, i1, i2, j1, j2 in ops if tag != "equal"]


def _clash(a: Edit, b: Edit) -> bool:
    """Whether two edits of the base (one per side) cannot both be applied unambiguously."""
    (a1, a2, _), (b1, b2, _) = a, b
    if a1 == a2 and b1 == b2:
        return a1 == b1  # two insertions at one place: which first?
    if a1 == a2:
        return b1 < a1 < b2
    if b1 == b2:
        return a1 < b1 < a2
    return a1 < b2 and b1 < a2


def _combine(base: list[bytes], ours: list[bytes], theirs: list[bytes]) -> list[bytes] | None:
    """Both sides' edits of ``base`` applied together, or ``None`` when two of them overlap."""
    mine, other = _edits(base, ours), _edits(base, theirs)
    edits = mine + [e for e in other if e not in mine]  # the same edit on both sides counts once
    if any(_clash(a, b) for a in mine for b in other if a != b):
        return None
    out: list[bytes] = []
    at = 0
    for i1, i2, lines in sorted(edits, key=lambda e: (e[0], e[1] != e[0])):  # an insertion before a range
        out += base[at:i1] + lines
        at = max(at, i2)
    return out + base[at:]


def has_markers(data: bytes) -> bool:
    """Whether a file still holds conflict markers (at the start of a line)."""
    return any(line.startswith(_MARKERS) for line in data.splitlines())


def line_counts(data: bytes) -> collections.Counter[bytes]:
    """A file's non-blank lines (whitespace at the ends ignored), as a multiset: what :func:`similarity`
    compares; worth keeping when one file is compared with many."""
    return collections.Counter(s for s in (line.strip() for line in data.splitlines()) if s)


def similarity(a: bytes | collections.Counter[bytes], b: bytes | collections.Counter[bytes]) -> float:
    """How alike two files are, 0..1: shared non-blank lines (as a multiset, whitespace at the ends
    ignored) over the mean of their counts. A moved and lightly edited module scores well above 0.6."""
    ca = a if isinstance(a, collections.Counter) else line_counts(a)
    cb = b if isinstance(b, collections.Counter) else line_counts(b)
    total = ca.total() + cb.total()
    return 2 * (ca & cb).total() / total if total else 1.0
