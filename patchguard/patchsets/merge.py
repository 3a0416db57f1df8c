"""Three-way merges and file similarity, for ``rebase``.

The merge is git's own ``git merge-file`` run through gitpython (a chosen dependency, and git's xdiff merge
is the one users know and can reproduce by hand: a carried file is byte for byte what ``git merge-file``
makes of the same three inputs). It runs outside any repository, with no user or system configuration, so
nothing but the three inputs decides the result. Conflicts are written in the ``diff3`` style: the base is
shown between the two sides; the markers are longer than any run of marker characters the inputs' lines
start with (``--marker-size``), so content is never taken for a marker.

git's merge also conflicts where the two sides' changes only *touch* (a line the set inserts right below a
``def`` line upstream re-annotated): neither side's own lines were changed by the other. Such a region is
merged line by line here — each side's edits of the base, applied together when none clash — and counted in
``Merged.adjacent``, so it is said, never silent. Edits clash when they share a base line, when both insert
at one place, and when one inserts at the edge of the other's range unless that range is a like-for-like
modification (as many lines, each a modified version of its own): next to a deleted or rewritten block, what
an inserted line (a decorator, a guard) belongs to is unknown. Everywhere else the result is git's output,
byte for byte.
"""

from __future__ import annotations

import collections
import difflib
import os
import re
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
_MARKER_RUN = re.compile(rb"^(<{7,}|\|{7,}|={7,}|>{7,})", re.MULTILINE)

Edit = tuple[int, int, list[bytes]]  # replace base lines [i1, i2) with these lines (i1 == i2: insert)


class MergeFailed(PatchguardError):
    """git could not run, or failed for a reason other than conflicts."""


@dataclass(frozen=True, slots=True)
class Merged:
    """What a merge made: the bytes (with conflict markers when ``conflicts``), how many regions still
    conflict, and how many regions git's merge left that were merged line by line (touching changes)."""

    data: bytes
    conflicts: int
    adjacent: int = 0


def marker_size(*inputs: bytes) -> int:
    """7 (git's), or longer than any run of marker characters a line of the inputs starts with."""
    return max([7, *(len(m) + 1 for data in inputs for m in _MARKER_RUN.findall(data))])


def merge(ours: bytes, base: bytes, theirs: bytes, labels: tuple[str, str, str]) -> Merged:
    """``git merge-file -p --diff3``: carry base→theirs onto ours. ``labels``: (ours, base, theirs)."""
    import git

    size = marker_size(ours, base, theirs)
    with tempfile.TemporaryDirectory(prefix="pg-merge-") as tmp:
        names = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(data)
            names.append(path)
        cmd = ["git", "merge-file", "-p", "--diff3", f"--marker-size={size}"]
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
    if status == 0:
        return Merged(out, 0)
    heads = (
        b"<" * size + b" " + labels[0].encode(),
        b"|" * size + b" " + labels[1].encode(),
        b"=" * size,
        b">" * size + b" " + labels[2].encode(),
    )
    return _resolve_touching(out, heads, ours, theirs)


def has_markers(data: bytes, labels: tuple[str, str, str]) -> bool:
    """Whether a file still holds the conflict markers of a merge with these labels (any length)."""
    first, last = re.escape(labels[0].encode()), re.escape(labels[2].encode())
    pattern = rb"^(?:<{7,} " + first + rb"|>{7,} " + last + rb")\r?$"
    return re.search(pattern, data, re.MULTILINE) is not None


def _resolve_touching(merged: bytes, heads: tuple[bytes, ...], ours: bytes, theirs: bytes) -> Merged:
    """git's output with every conflict region whose two sides' edits do not clash merged."""
    lines = merged.splitlines(keepends=True)
    out: list[bytes] = []
    region: list[list[bytes]] | None = None  # ours, base, theirs lines while inside a conflict
    raw: list[bytes] = []
    conflicts = adjacent = 0
    for n, line in enumerate(lines):
        bare = line.rstrip(b"\r\n")
        if region is None:
            if bare == heads[0]:
                region, raw = [[]], [line]
            else:
                out.append(line)
            continue
        raw.append(line)
        if bare in (heads[1], heads[2]) and len(region) < 3:
            region.append([])
        elif bare == heads[3] and len(region) == 3:
            together = _combine(region[1], region[0], region[2])
            if together is not None and n == len(lines) - 1:
                together = _at_the_end(together, ours, theirs)
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


def _at_the_end(together: list[bytes], ours: bytes, theirs: bytes) -> list[bytes] | None:
    """A region merged at the end of the file: git ends each side's last line with a newline; give the file
    back the end both sides have (``None``: the sides differ there, git's conflict stands)."""
    ours_nl, theirs_nl = ours.endswith(b"\n") or not ours, theirs.endswith(b"\n") or not theirs
    if ours_nl != theirs_nl:
        return None
    if not ours_nl and together and together[-1].endswith(b"\n"):
        last = together[-1][:-2] if together[-1].endswith(b"\r\n") else together[-1][:-1]
        return [*together[:-1], last]
    return together


def _edits(base: list[bytes], side: list[bytes]) -> list[Edit]:
    ops = difflib.SequenceMatcher(None, base, side, autojunk=False).get_opcodes()
    return [(i1, i2, side[j1:j2]) for tag, i1, i2, j1, j2 in ops if tag != "equal"]


def _like(old: bytes, new: bytes) -> bool:
    """``new`` is a modified version of ``old``: half alike, or both still open a block (``def …:``
    reformatted over several lines ends in ``):``)."""
    o, n = old.strip(), new.strip()
    if o.endswith(b":") and n.endswith(b":"):
        return True
    return difflib.SequenceMatcher(None, o, n, autojunk=False).ratio() >= 0.5


def _forward(lines: list[bytes]) -> bool:
    """Inserted lines that belong to what follows them (a decorator, a comment), not to what precedes."""
    last = next((line.strip() for line in reversed(lines) if line.strip()), b"")
    return last.startswith((b"@", b"#"))


def _clash(a: Edit, b: Edit, base: list[bytes]) -> bool:
    """Whether two edits of the base, one per side, cannot both be applied with certainty.

    An insertion at the edge of the other side's range is safe when the line it belongs to is still there:
    the unchanged line on its other side, or — when it belongs to the edited edge (a statement after a
    re-annotated ``def``, a decorator before one) — that line's modified version at the same edge. Next to
    a deleted or rewritten block, what it belongs to is gone: a conflict."""
    if a[0] == a[1] and b[0] == b[1]:
        return a[0] == b[0]  # two insertions at one place: which first?
    if b[0] == b[1]:
        a, b = b, a
    (a1, a2, inserted), (b1, b2, new) = a, b
    if a1 != a2:
        return a1 < b2 and b1 < a2
    if b1 < a1 < b2:
        return True
    forward = _forward(inserted)
    if a1 == b1 and forward:  # before the range, belonging to its first line
        return not (new and _like(base[b1], new[0]))
    if a1 == b2 and not forward:  # after the range, belonging to its last line
        return not (new and _like(base[b2 - 1], new[-1]))
    return False


def _combine(base: list[bytes], ours: list[bytes], theirs: list[bytes]) -> list[bytes] | None:
    """Both sides' edits of ``base`` applied together, or ``None`` when two of them clash."""
    mine, other = _edits(base, ours), _edits(base, theirs)
    edits = mine + [e for e in other if e not in mine]  # the same edit on both sides counts once
    if any(_clash(a, b, base) for a in mine for b in other if a != b):
        return None
    out: list[bytes] = []
    at = 0
    for i1, i2, lines in sorted(edits, key=lambda e: (e[0], e[1] != e[0])):  # an insertion before a range
        out += base[at:i1] + lines
        at = max(at, i2)
    return out + base[at:]


def line_counts(data: bytes) -> collections.Counter[bytes]:
    """A file's non-blank lines (whitespace at the ends ignored), as a multiset: what :func:`similarity`
    compares; worth keeping when one file is compared with many."""
    return collections.Counter(s for s in (line.strip() for line in data.splitlines()) if s)


def similarity(a: bytes | collections.Counter[bytes], b: bytes | collections.Counter[bytes]) -> float:
    """How alike two files are, 0..1: shared non-blank lines (as a multiset, whitespace at the ends
    ignored) over the mean of their counts; 0 when either has none (an empty ``__init__.py`` is like every
    other, which says nothing about where it went)."""
    ca = a if isinstance(a, collections.Counter) else line_counts(a)
    cb = b if isinstance(b, collections.Counter) else line_counts(b)
    if not ca or not cb:
        return 0.0
    return 2 * (ca & cb).total() / (ca.total() + cb.total())
