"""What ``bisect`` includes or leaves out: the changes of an environment cut into units — whole files,
hunks of a file, or applied patch sets — and the bytes of every file for any subset of them.

A file's states lie between its pristine bytes (the wheel's; ``None``: the wheel has no such file) and its
start bytes (what is installed now; ``None``: deleted). By hunk, a state is the pristine text with the
chosen hunks of the diff applied — the hunks ``patchguard diff`` shows, so a culprit is named as the diff
names it. By set, a state is the start with the sets left out reverted, last applied first.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ...diffs import FileDiff, is_binary, split_lines
from ...results.bisect import Unit, UnitKind
from ..model import PatchSet
from ..planner import PlanFailed, plan_patches

__all__ = ["FileChange", "StateImpossible", "Unit", "UnitKind", "Units", "by_files", "by_hunks", "by_sets"]


@dataclass(frozen=True, slots=True)
class FileChange:
    """One changed file: where it is, how it is shown, its pristine and its start bytes, its mode."""

    path: str
    shown: str
    pristine: bytes | None
    start: bytes | None
    mode: int = 0o644

    def diff(self) -> str:
        return FileDiff(self.shown, self.pristine, self.start).text()


class StateImpossible(Exception):
    """A subset whose files cannot be made (a set that does not revert over the others): a skipped trial."""


# A file's bytes for the units included: (included unit numbers) -> bytes or None (absent).
Compose = Callable[[frozenset[int]], "bytes | None"]


@dataclass
class Units:
    """The units and, for every file they touch, how to make its bytes for any subset."""

    units: list[Unit] = field(default_factory=list)
    files: dict[str, Compose] = field(default_factory=dict)  # absolute path -> its bytes for a subset
    start: dict[str, bytes | None] = field(default_factory=dict)  # absolute path -> its start bytes
    modes: dict[str, int] = field(default_factory=dict)

    def state(self, included: frozenset[int]) -> dict[str, bytes | None]:
        """Every file's bytes with the units ``included`` (raises :class:`StateImpossible`)."""
        return {path: make(included) for path, make in self.files.items()}

    def _add_file(self, change: FileChange, make: Compose) -> None:
        self.files[change.path] = make
        self.start[change.path] = change.start
        self.modes[change.path] = change.mode


def by_files(changes: Sequence[FileChange]) -> Units:
    """One unit per changed file: its start bytes when included, its pristine bytes when not."""
    out = Units()
    for change in changes:
        unit = Unit(len(out.units) + 1, UnitKind.FILE, change.shown, diff=change.diff())
        out.units.append(unit)
        out._add_file(change, _whole(unit.number, change))
    return out


def _whole(number: int, change: FileChange) -> Compose:
    return lambda included: change.start if number in included else change.pristine


def by_hunks(changes: Sequence[FileChange]) -> Units:
    """One unit per hunk of each text file's diff (a file added, deleted or binary is one unit)."""
    out = Units()
    for change in changes:
        old, new = change.pristine, change.start
        if old is None or new is None or is_binary(old) or is_binary(new) or not _text(old, new):
            unit = Unit(len(out.units) + 1, UnitKind.FILE, change.shown, diff=change.diff())
            out.units.append(unit)
            out._add_file(change, _whole(unit.number, change))
            continue
        a, b = split_lines(old.decode()), split_lines(new.decode())
        groups = list(difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(3))
        texts = _hunk_texts(change.diff())
        owner: list[tuple[tuple[str, int, int, int, int], int]] = []
        for n, group in enumerate(groups, 1):
            edits = [op for op in group if op[0] != "equal"]
            first, last = edits[0][3] + 1, max(edits[-1][4], edits[0][3] + 1)
            text = texts[n - 1] if n - 1 < len(texts) else ""
            unit = Unit(len(out.units) + 1, UnitKind.HUNK, change.shown, n, (first, last), text)
            out.units.append(unit)
            owner += [(op, unit.number) for op in edits]
        out._add_file(change, _hunked(a, b, owner))
    return out


def _text(old: bytes, new: bytes) -> bool:
    try:
        old.decode()
        new.decode()
    except UnicodeDecodeError:
        return False
    return True


def _hunk_texts(diff: str) -> list[str]:
    """Each hunk of a file's unified diff as a diff of its own (the file's header, then the hunk)."""
    lines = diff.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("@@")]
    head = "".join(lines[: starts[0]]) if starts else ""
    return ["".join([head, *lines[s:e]]) for s, e in zip(starts, [*starts[1:], len(lines)], strict=True)]


def _hunked(a: list[str], b: list[str], owner: list[tuple[tuple[str, int, int, int, int], int]]) -> Compose:
    """The pristine lines ``a`` with the edits of the included hunks taken from ``b``."""

    def make(included: frozenset[int]) -> bytes:
        out: list[str] = []
        pos = 0
        for (_tag, i1, i2, j1, j2), unit in owner:
            out += a[pos:i1]
            out += b[j1:j2] if unit in included else a[i1:i2]
            pos = i2
        out += a[pos:]
        return "".join(out).encode()

    return make


def by_sets(
    sets: Sequence[PatchSet], start: Callable[[str], bytes | None], site_path: Callable[[str], str]
) -> Units:
    """One unit per applied set (in the order applied): a state is the start with the sets left out reverted,
    last applied first. ``start`` reads a file by its path relative to the site dir, ``site_path`` makes
    it absolute."""
    out = Units()
    rels = sorted({fp.path for ps in sets for fp in ps.patches})
    starts = {rel: start(rel) for rel in rels}
    for ps in sets:
        out.units.append(Unit(len(out.units) + 1, UnitKind.SET, ps.name, diff=_set_diff(ps)))

    def overlay(included: frozenset[int]) -> dict[str, bytes | None]:
        files = dict(starts)
        for unit, ps in reversed(list(zip(out.units, sets, strict=True))):
            if unit.number in included:
                continue
            try:
                plans = plan_patches(ps.name, ps.patches, files.__getitem__, reverse=True)
            except PlanFailed as exc:
                raise StateImpossible(f"set {ps.name} does not revert over the others: {exc}") from None
            files.update({p.path: p.after for p in plans})
        return files

    memo: dict[frozenset[int], dict[str, bytes | None]] = {}
    for rel in rels:
        path = site_path(rel)
        out.files[path] = _from_overlay(rel, overlay, memo)
        out.start[path] = starts[rel]
        out.modes[path] = 0o644
    return out


def _from_overlay(
    rel: str,
    overlay: Callable[[frozenset[int]], dict[str, bytes | None]],
    memo: dict[frozenset[int], dict[str, bytes | None]],
) -> Compose:
    def make(included: frozenset[int]) -> bytes | None:
        if included not in memo:
            memo.clear()  # one state at a time
            memo[included] = overlay(included)
        return memo[included][rel]

    return make


def _set_diff(ps: PatchSet) -> str:
    return "".join(str(fp.patched) for fp in ps.patches)
