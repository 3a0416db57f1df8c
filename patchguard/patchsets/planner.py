"""Planning a set: what applying or reverting it does to each file, in memory, never writing.

unidiff parses the diffs (:mod:`.model`); this module applies them: exact context (no fuzz), hunks may move
by whole lines (the offset is reported), files may be created and deleted. Applying and reverting are the
same planner run forwards or backwards; every failing hunk is reported, not the first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..diffs import split_lines
from ..errors import PatchguardError
from .model import FilePatch, PatchSet

__all__ = ["FilePlan", "HunkFailure", "PlanFailed", "Reader", "plan_patches", "plan_set"]

Reader = Callable[
    [str], "bytes | None"
]  # a file's bytes by its path relative to site-packages (None: absent)


@dataclass(frozen=True, slots=True)
class HunkFailure:
    """A hunk that does not apply: where, and what it expected versus what the file has there."""

    path: str
    header: str
    expected: tuple[str, ...]
    found: tuple[str, ...]
    reason: str = "context does not match"

    def describe(self) -> str:
        lines = [f"{self.path}: hunk {self.header}: {self.reason}"]
        if self.expected or self.found:
            lines += ["    expected:"] + [f"      {line.rstrip(chr(10))}" for line in self.expected[:8]]
            lines += ["    found:"] + [f"      {line.rstrip(chr(10))}" for line in self.found[:8]]
        return "\n".join(lines)


class PlanFailed(PatchguardError):
    """Some hunks do not apply; nothing was written. ``failures`` lists every one."""

    def __init__(self, failures: Sequence[HunkFailure], what: str) -> None:
        text = "\n".join(f.describe() for f in failures)
        super().__init__(
            f"{what}: {len(failures)} {'hunks do' if len(failures) != 1 else 'hunk does'} not apply; "
            f"nothing was written\n{text}",
            hint="the files are not what the set expects: see each hunk below; rebase or recapture the set",
        )
        self.failures = tuple(failures)


@dataclass(frozen=True, slots=True)
class FilePlan:
    """What a set does to one file: ``before``/``after`` bytes (``None``: absent), and hunk offsets."""

    path: str
    before: bytes | None
    after: bytes | None
    offsets: tuple[int, ...] = ()
    mode: int | None = None  # for a file the plan creates: the mode its diff records


def _hunk_sides(hunk: Iterable[object]) -> tuple[list[str], list[str]]:
    """(source lines, target lines) of a hunk, with "no newline at end of file" applied."""
    src: list[str] = []
    dst: list[str] = []
    last: str | None = None
    for line in hunk:
        kind = getattr(line, "line_type", " ")
        value = getattr(line, "value", "")
        if kind == "\\":
            if last in (" ", "-") and src and src[-1].endswith("\n"):
                src[-1] = src[-1][:-1]
            if last in (" ", "+") and dst and dst[-1].endswith("\n"):
                dst[-1] = dst[-1][:-1]
            continue
        if kind in (" ", "-"):
            src.append(value)
        if kind in (" ", "+"):
            dst.append(value)
        last = kind
    return src, dst


def _apply_hunks(
    path: str, lines: list[str], fp: FilePatch, reverse: bool, failures: list[HunkFailure]
) -> tuple[list[str], list[int]]:
    """Apply one file's hunks to ``lines`` (exact context; offsets allowed, searched nearest first)."""
    out: list[str] = []
    pos = 0  # index in `lines` up to which everything is copied
    drift = 0  # offset carried from earlier hunks
    offsets: list[int] = []
    for hunk in fp.patched:
        src, dst = _hunk_sides(hunk)
        if reverse:
            src, dst = dst, src
        first = hunk.target_start if reverse else hunk.source_start
        length = hunk.target_length if reverse else hunk.source_length
        # A range of length 0 names the line *after which* the hunk goes ("@@ -5,0 +6,2 @@").
        start = first if length == 0 else first - 1
        header = f"@@ -{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length} @@"
        at = _find(lines, src, max(start + drift, pos), pos)
        if at is None:
            found = tuple(lines[max(start + drift, 0) : max(start + drift, 0) + len(src)])
            failures.append(HunkFailure(path, header, tuple(src), found))
            continue
        offsets.append(at - start)
        drift = at - start
        out.extend(lines[pos:at])
        out.extend(dst)
        pos = at + len(src)
    out.extend(lines[pos:])
    return out, offsets


def _find(lines: Sequence[str], src: Sequence[str], guess: int, floor: int) -> int | None:
    """Where ``src`` occurs exactly in ``lines`` at or after ``floor``, nearest to ``guess`` first."""
    n = len(src)
    limit = len(lines) - n
    if limit < floor:
        return None
    guess = min(max(guess, floor), limit)
    for delta in range(0, max(guess - floor, limit - guess) + 1):
        for at in (guess - delta, guess + delta) if delta else (guess,):
            if floor <= at <= limit and list(lines[at : at + n]) == list(src):
                return at
    return None


def plan_set(ps: PatchSet, read: Callable[[str], bytes | None], *, reverse: bool = False) -> list[FilePlan]:
    """What applying (or reverting) ``ps`` does to each file, given ``read(relpath) -> bytes | None``.

    Files touched by several diffs are patched in order, in memory. Raises :class:`PlanFailed` listing every
    hunk that does not apply; raises nothing and writes nothing otherwise.
    """
    return plan_patches(ps.name, ps.patches, read, reverse=reverse)


def _patched(
    fp: FilePatch, current: bytes | None, reverse: bool, failures: list[HunkFailure]
) -> tuple[bytes | None, list[int]] | None:
    """One file patch applied (or reverted) to the file's ``current`` bytes: its new bytes (``None``:
    deleted) and the hunks' offsets, or ``None`` with the reasons added to ``failures``."""
    creates, deletes = (fp.deletes, fp.creates) if reverse else (fp.creates, fp.deletes)
    refused = _cannot_start(fp.path, current, creates)
    if refused is not None:
        failures.append(refused)
        return None
    lines = split_lines((current or b"").decode("utf-8", "surrogateescape"))
    n_before = len(failures)
    new_lines, offs = _apply_hunks(fp.path, lines, fp, reverse, failures)
    if len(failures) > n_before:
        return None
    if deletes and new_lines:
        why = "the file to delete has more content than the diff removes"
        failures.append(HunkFailure(fp.path, "(deleted file)", (), tuple(new_lines[:8]), why))
        return None
    return (None if deletes else "".join(new_lines).encode("utf-8", "surrogateescape")), offs


def plan_patches(
    name: str, patches: Sequence[FilePatch], read: Callable[[str], bytes | None], *, reverse: bool = False
) -> list[FilePlan]:
    """:func:`plan_set` for any sequence of file patches (one file's part of a set, say)."""
    state: dict[str, bytes | None] = {}
    original: dict[str, bytes | None] = {}
    offsets: dict[str, list[int]] = {}
    modes: dict[str, int] = {}
    failures: list[HunkFailure] = []
    order = list(reversed(patches)) if reverse else list(patches)
    for fp in order:
        if fp.path not in state:
            state[fp.path] = original[fp.path] = read(fp.path)
        done = _patched(fp, state[fp.path], reverse, failures)
        if done is None:
            continue
        state[fp.path], offs = done
        offsets.setdefault(fp.path, []).extend(offs)
        if (fp.deletes if reverse else fp.creates) and fp.mode is not None:
            modes[fp.path] = fp.mode
    if failures:
        raise PlanFailed(failures, f"{'reverting' if reverse else 'applying'} {name}")
    return [FilePlan(p, original[p], state[p], tuple(offsets.get(p, ())), modes.get(p)) for p in state]


def _cannot_start(path: str, current: bytes | None, creates: bool) -> HunkFailure | None:
    """Why a file's patch cannot begin: the file it creates is there, or the one it patches is not."""
    if creates and current is not None:
        return HunkFailure(path, "(new file)", (), (), "the file to create already exists")
    if not creates and current is None:
        return HunkFailure(path, "(whole file)", (), (), "the file to patch does not exist")
    return None
