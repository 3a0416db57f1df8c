"""Three-way merges and file similarity, for ``rebase``.

The merge is git's own ``git merge-file`` run through gitpython (a chosen dependency, and git's xdiff merge
is the one users know and can reproduce by hand: a carried file is byte for byte what ``git merge-file``
makes of the same three inputs). It runs outside any repository, with no user or system configuration, so
nothing but the three inputs decides the result. Conflicts are written in the ``diff3`` style: the base is
shown between the two sides; the markers are longer than any run of marker characters the inputs' lines
start with (``--marker-size``), so content is never taken for a marker.

git's merge also conflicts where the two sides' changes only *touch* (a line the set inserts right below a
``def`` line upstream re-annotated): neither side's own lines were changed by the other. Such a region is
merged line by line here only when that is certain — upstream modified lines in place (the same statement:
same indentation and first two tokens, half alike; a block header may be reformatted over several lines),
the set inserted lines or modified other lines in place, and no line of the region's base repeats — so every
base line is still there and every inserted line sits between the same two lines as before. Anything else (a
deletion, a reorder, a rewrite, an upstream insertion) stays git's conflict. Merged regions are counted in
``Merged.adjacent``: said, never silent. Everywhere else the result is git's output, byte for byte.
"""

from __future__ import annotations

import collections
import difflib
import os
import re
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import PatchguardError

__all__ = [
    "MergeFailed",
    "MergeJob",
    "Merged",
    "has_markers",
    "line_counts",
    "merge",
    "merge_all",
    "merge_file",
    "similarity",
]

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
    by: str = "lines"  # what carried it: "lines" (git's merge), "statements" (:mod:`.pymerge`)
    doubt: str = ""  # why a clean merge was not accepted (then its carried lines are conflicts to review)


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
    return _resolve_touching(out, _marks(size, labels), ours, theirs)


def _marks(size: int, labels: tuple[str, str, str]) -> tuple[bytes, bytes, bytes, bytes]:
    """The four marker lines of a ``diff3`` conflict (without their newline): ours, base, the
    separator, theirs — as ``git merge-file`` writes them."""
    return (
        b"<" * size + b" " + labels[0].encode(),
        b"|" * size + b" " + labels[1].encode(),
        b"=" * size,
        b">" * size + b" " + labels[2].encode(),
    )


def merge_file(path: str, ours: bytes, base: bytes, theirs: bytes, labels: tuple[str, str, str]) -> Merged:
    """The merge ``rebase`` makes of one file. Every file: git's line merge. A ``.py`` file whose three
    versions parse: where git conflicts, the merge by statement (:mod:`.pymerge`) is tried; a clean result
    of either is accepted only when it is certain (:func:`.pymerge.doubt`), otherwise the lines it carried
    become conflicts to review — never a silent wrong merge. When the whole file is not certain, each of
    the set's hunks is tried alone (:func:`_by_hunks`): the ones certain alone and together are carried,
    only the rest are left to review."""
    got = _merge_whole(path, ours, base, theirs, labels)
    if got.conflicts == 0 or not path.endswith(".py"):
        return got
    return _by_hunks(path, ours, base, theirs, labels) or got


_MAX_HUNKS = 64  # a file's hunks tried one by one (each is a merge of its own)


def _by_hunks(
    path: str, ours: bytes, base: bytes, theirs: bytes, labels: tuple[str, str, str]
) -> Merged | None:
    """The set's hunks that merge for certain one by one, and then all together, carried; the other hunks
    merged onto that result with it as their base — their conflicts are what is left to review. ``None``:
    no hunk is certain alone (or the file has one hunk, or very many)."""
    lines = base.splitlines(keepends=True)
    hunks = _hunks(lines, theirs.splitlines(keepends=True))
    if not 1 < len(hunks) <= _MAX_HUNKS:
        return None
    sure = [h for h in hunks if _merge_whole(path, ours, base, _applied(lines, [h]), labels).conflicts == 0]
    if not sure:
        return None
    placed = _applied(lines, sure)
    carried = _merge_whole(path, ours, base, placed, labels)
    if carried.conflicts:
        return None
    rest = _merge_whole(path, carried.data, placed, theirs, labels)
    if rest.conflicts == 0:
        from .pymerge import doubt

        return rest if doubt(base, theirs, ours, rest.data) is None else None
    return Merged(rest.data, rest.conflicts, carried.adjacent + rest.adjacent, rest.by, rest.doubt)


def _hunks(base: list[bytes], side: list[bytes]) -> list[list[Edit]]:
    """The edits base → side grouped as a unified diff's hunks (three lines of context)."""
    groups = difflib.SequenceMatcher(None, base, side, autojunk=False).get_grouped_opcodes(3)
    return [[(i1, i2, side[j1:j2]) for tag, i1, i2, j1, j2 in g if tag != "equal"] for g in groups]


def _applied(base: list[bytes], hunks: list[list[Edit]]) -> bytes:
    """``base`` with these hunks' edits made (they do not overlap: one diff's)."""
    return b"".join(_with_edits(base, [e for h in hunks for e in h]))


def _merge_whole(path: str, ours: bytes, base: bytes, theirs: bytes, labels: tuple[str, str, str]) -> Merged:
    """The merge of the file's whole change at once (see :func:`merge_file`)."""
    got = _merge_python(path, ours, base, theirs, labels)
    if got.conflicts == 0 or not path.endswith(".py"):
        return got
    from .pymerge import doubt_outside

    view = _target_side(got.data, _marks(marker_size(ours, base, theirs), labels))
    why = doubt_outside(base, theirs, ours, view)
    return got if why is None else _whole_conflict(ours, base, theirs, labels, why)


def _target_side(data: bytes, marks: tuple[bytes, bytes, bytes, bytes]) -> bytes:
    """A merge with conflicts, each taken as the target has it (what is carried outside them stays)."""
    out: list[bytes] = []
    side = ""
    sides = dict(zip(marks, ("ours", "base", "theirs", ""), strict=True))
    for line in data.splitlines(keepends=True):
        mark = line.rstrip(b"\r\n")
        if mark in sides:
            side = sides[mark]
        elif side in ("", "ours"):
            out.append(line)
    return b"".join(out)


def _whole_conflict(
    ours: bytes, base: bytes, theirs: bytes, labels: tuple[str, str, str], why: str
) -> Merged:
    """One conflict over the whole file — the target's, the base's and the set's — when what a merge
    carried outside its conflicts is not certain: a person sees all of it."""
    head, middle, between, tail = _marks(marker_size(ours, base, theirs), labels)
    parts = (
        head,
        b"\n",
        _ended(ours),
        middle,
        b"\n",
        _ended(base),
        between,
        b"\n",
        _ended(theirs),
        tail,
        b"\n",
    )
    return Merged(b"".join(parts), 1, doubt=why)


def _merge_python(path: str, ours: bytes, base: bytes, theirs: bytes, labels: tuple[str, str, str]) -> Merged:
    from .pymerge import doubt, parses

    got = merge(ours, base, theirs, labels)
    if not path.endswith(".py") or _certain_at_once(got, base, theirs, ours):
        return got
    if not all(parses(x) for x in (ours, base, theirs)):
        return got
    why: str | None = ""
    if got.conflicts == 0:
        why = doubt(base, theirs, ours, got.data)
        if why is None:
            return got
    carried = _by_statements(got, base, theirs, ours, labels)
    if carried is not None:
        return carried
    return got if got.conflicts else _to_review(got.data, ours, labels, why or "")


def _certain_at_once(got: Merged, base: bytes, theirs: bytes, ours: bytes) -> bool:
    """A clean merge that changed nothing, or put every hunk where its whole context is, once, under the
    same definitions, and parses: certain without reading statements."""
    from .pymerge import by_context, parses

    if got.conflicts:
        return False
    return got.data == ours or (by_context(base, theirs, ours) == got.data and parses(got.data))


def _by_statements(
    got: Merged, base: bytes, theirs: bytes, ours: bytes, labels: tuple[str, str, str]
) -> Merged | None:
    """What the statements carry for certain, the rest of the set's edits through the line merge; ``None``
    when that is no better than ``got``."""
    from .pymerge import doubt, split

    parts = split(base, theirs, ours)
    if parts is None or parts.ours == ours or doubt(base, parts.placed, ours, parts.ours) is not None:
        return None
    rest = merge(parts.ours, base, parts.rest, labels) if parts.rest != base else Merged(parts.ours, 0)
    if rest.conflicts == 0:
        if doubt(base, theirs, ours, rest.data) is None:
            return Merged(rest.data, 0, rest.adjacent, by="statements")
        return None
    if got.conflicts and got.conflicts <= rest.conflicts:
        return got
    return Merged(rest.data, rest.conflicts, rest.adjacent, by="statements")


MergeJob = tuple[str, bytes, bytes, bytes, tuple[str, str, str]]  # merge_file's arguments
_PARALLEL_FROM = 8  # files: below this, forking helpers costs more than it saves


def merge_all(jobs: Sequence[MergeJob]) -> list[Merged]:
    """:func:`merge_file` of every job, in order — in helper processes on a machine with cores to spare
    (reading each version's statements is most of a rebase's time). Errors are raised as they would be."""
    workers = min(os.cpu_count() or 1, 4)
    if len(jobs) < _PARALLEL_FROM or workers < 2 or threading.active_count() > 1:
        return [merge_file(*job) for job in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            return list(pool.map(_merge_job, jobs, chunksize=max(1, len(jobs) // (workers * 4))))
    except (OSError, ValueError):  # no fork here, or no room for a process: one at a time
        return [merge_file(*job) for job in jobs]


def _merge_job(job: MergeJob) -> Merged:
    return merge_file(*job)


def _to_review(merged: bytes, ours: bytes, labels: tuple[str, str, str], why: str) -> Merged:
    """A clean merge that is not certain, as conflicts: each region it changed in the target between
    markers (the target's lines, then the merge's), for a person to confirm or move."""
    head, middle, between, tail = (m + b"\n" for m in _marks(marker_size(merged, ours), labels))
    a, b = ours.splitlines(keepends=True), merged.splitlines(keepends=True)
    out: list[bytes] = []
    regions = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            out += a[i1:i2]
            continue
        regions += 1
        out += [head, *(_ended(x) for x in a[i1:i2]), middle, between, *(_ended(x) for x in b[j1:j2]), tail]
    return Merged(b"".join(out), max(regions, 1), doubt=why)


def _ended(data: bytes) -> bytes:
    """``data`` ending in a newline (empty stays empty): what goes between markers."""
    return data if not data or data.endswith(b"\n") else data + b"\n"


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


_KEY = re.compile(rb"\s*(\w+|\S)\s*(\w+|\S)?")


def _same_line(old: bytes, new: bytes) -> bool:
    """``new`` is ``old`` modified in place: the same indentation and first two tokens (``def f``,
    ``x =``, ``return x``), and at least half alike — a ``def`` re-annotated, a value changed; not another
    statement put in its place."""
    ko, kn = _KEY.match(old), _KEY.match(new)
    if ko is None or kn is None or old[: len(old) - len(old.lstrip())] != new[: len(new) - len(new.lstrip())]:
        return False
    if ko.groups() != kn.groups():
        return False
    return difflib.SequenceMatcher(None, old.strip(), new.strip(), autojunk=False).ratio() >= 0.5


def _reformatted_header(old: bytes, new: list[bytes]) -> bool:
    """One block header (``def f(a, b):``) written over several lines (``def f(`` … ``):``), still the same
    statement: what follows it is still its body, what precedes it still before it."""
    if len(new) < 2 or not old.rstrip().endswith(b":") or not new[-1].rstrip().endswith(b":"):
        return False
    indent = new[0][: len(new[0]) - len(new[0].lstrip())]
    return _same_line(old, indent + b" ".join(line.strip() for line in new) + b"\n")


def _in_place(edits: list[Edit], base: list[bytes], inserts: bool) -> bool:
    """Every edit keeps every base line where it is: line-for-line modifications of the same statements, a
    block header reformatted over several lines (and, when ``inserts``, pure insertions) — nothing deleted,
    reordered or put in another's place."""
    for i1, i2, lines in edits:
        if i1 == i2:
            if not inserts:
                return False
        elif i2 - i1 == 1 and _reformatted_header(base[i1], lines):
            continue
        elif i2 - i1 != len(lines) or not all(
            _same_line(o, n) for o, n in zip(base[i1:i2], lines, strict=True)
        ):
            return False
    return True


def _combine(base: list[bytes], ours: list[bytes], theirs: list[bytes]) -> list[bytes] | None:
    """Both sides' edits of ``base`` applied together, or ``None`` (git's conflict stands) unless this is
    certain: upstream only modified lines in place, the set only inserted lines or modified other lines in
    place, and no base line of the region repeats (so which line an edit is about cannot be mistaken). Then
    every base line is still there, and every inserted line sits between the same two lines as before."""
    keys = [line.strip() for line in base]
    if len(set(keys)) != len(keys):
        return None
    upstream, mine = _edits(base, ours), _edits(base, theirs)
    if not (_in_place(upstream, base, inserts=False) and _in_place(mine, base, inserts=True)):
        return None
    touched = {i for i1, i2, _ in upstream for i in range(i1, i2)}
    if any(i in touched for i1, i2, _ in mine for i in range(i1, i2)):
        return None  # both modified one line
    return _with_edits(base, upstream + mine)


def _with_edits(base: list[bytes], edits: list[Edit]) -> list[bytes]:
    """``base`` with ``edits`` made, in order of where they start (an insertion before a change there)."""
    out: list[bytes] = []
    at = 0
    for i1, i2, lines in sorted(edits, key=lambda e: (e[0], e[1] != e[0])):
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
