"""Rewriting a fully carried set for the target release, with its history.

The new set has the merged diffs (against the target release), ``version = "==<target>"`` for the target
carried, the other targets' diffs and versions as they were, and a ``[[history]]`` entry more. The old
toml and diffs are kept under ``history/<old release>/`` of the set, and every other file of the set
directory (earlier history, a README, notes) is carried over byte for byte with its mode — or, when one
cannot be (a symlink, a FIFO, an unreadable directory, a file over :data:`KEPT_LIMIT`), nothing is written.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..._fs import read_regular
from ..._version import __version__
from ...diffs import FileDiff
from ..capture import DiffText, set_header, write_set
from ..model import MAX_PATCH_BYTES, HistoryEntry, PatchSet, PatchSetError
from .inputs import RebaseInputs
from .outcome import Rebased

__all__ = ["KEPT_LIMIT", "rewrite"]

KEPT_LIMIT = 64 << 20


def rewrite(inputs: RebaseInputs, rebased: Sequence[Rebased]) -> tuple[bool, str | None]:
    """Write the set for the target release, the old one kept in its history; ``(False, None)`` when
    nothing is left to carry (the release has every change: the set is left as it is)."""
    diffs: list[DiffText] = []
    for r in rebased:
        path = r.file.new_path
        if path is None or r.result == r.ours:
            continue
        mode = "100755" if r.mode is not None and r.mode & 0o111 else "100644"
        diffs.append(FileDiff(path, r.ours, r.result, mode))
    if not diffs:
        return False, None
    part, base, target = inputs.ps, inputs.base, inputs.target
    ps = inputs.whole or part
    diffs += _other_targets_diffs(ps, part)
    kept = f"history/{base.version}"
    for n in range(2, 1000):  # a release the set was already carried from once (there and back again)
        if not os.path.lexists(os.path.join(ps.directory, *kept.split("/"))):
            break
        kept = f"history/{base.version}-{n}"
    entry = HistoryEntry.parse(
        {
            "distribution": part.distributions[0].distribution,
            "version": part.distributions[0].version,
            "release": base.version,
            "to": target.version,
            "rebased": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "digest": ps.digest,
            "tool": f"patchguard {__version__}",
            "kept": kept,
        }
    )
    carried = part.distributions[0]
    targets = [
        None if t.is_environment else (t.distribution, "==" + target.version if t == carried else t.version)
        for t in ps.targets
    ]
    header = set_header(ps.name, ps.description, targets)
    tables = "".join(
        "\n[[history]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in h.raw.items())
        for h in (*ps.history, entry)
    )
    write_set(
        os.path.dirname(ps.directory), ps.name, header, diffs, footer=tables, keep=_kept_files(ps, kept)
    )
    return True, os.path.join(ps.directory, kept)


@dataclass(frozen=True, slots=True)
class _KeptDiff:
    """A file's diff carried over as written (another target's, or the environment's)."""

    path: str
    body: str

    def text(self) -> str:
        return self.body


def _other_targets_diffs(ps: PatchSet, part: PatchSet) -> list[_KeptDiff]:
    """The diffs of the files of ``ps`` outside ``part``: a diff file of the set that holds none of
    ``part``'s files byte for byte, the others' file diffs as unidiff writes them."""
    if part is ps:
        return []
    mine = set(part.paths)
    out: list[_KeptDiff] = []
    for origin in dict.fromkeys(fp.origin for fp in ps.patches):
        fps = [fp for fp in ps.patches if fp.origin == origin]
        others = [fp for fp in fps if fp.path not in mine]
        if not others:
            continue
        if len(others) == len(fps):
            text = read_regular(origin, MAX_PATCH_BYTES + 1).decode("utf-8", "surrogateescape")
        else:
            text = "".join(str(fp.patched) for fp in others)
        out.append(_KeptDiff(others[0].path, text))
    return out


def _kept_files(ps: PatchSet, kept: str) -> dict[str, tuple[bytes, int]]:
    """What the rewritten set directory keeps, with each file's mode: the old set's toml and diffs under
    ``kept``, and every other file of the directory as it is (its history, a README, notes). What cannot be
    carried faithfully — a symlink, a FIFO, a file over 64 MiB, a directory that cannot be read — is refused
    before anything is written."""
    out: dict[str, tuple[bytes, int]] = {}
    for fname in ("patchset.toml", *ps.files):
        out[f"{kept}/{fname}"] = _kept(os.path.join(ps.directory, fname))
    replaced = {"patchset.toml", *ps.files}
    problems: list[str] = []
    history = os.path.join(ps.directory, "history")
    if os.path.lexists(history) and (os.path.islink(history) or not os.path.isdir(history)):
        problems.append("history: not a directory (rebase keeps earlier forms of the set there)")

    def unreadable(exc: OSError) -> None:
        problems.append(f"{exc.filename}: cannot be read ({exc.strerror})")

    for dirpath, dirs, names in os.walk(ps.directory, onerror=unreadable):
        for n in [*dirs, *names]:
            full = os.path.join(dirpath, n)
            rel = os.path.relpath(full, ps.directory).replace(os.sep, "/")
            st = os.lstat(full)
            if stat.S_ISDIR(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                problems.append(f"{rel}: not a regular file")
            elif st.st_size > KEPT_LIMIT:
                problems.append(f"{rel}: larger than {KEPT_LIMIT >> 20} MiB")
            elif rel not in replaced and rel not in out:
                out[rel] = _kept(full)
    if problems:
        raise PatchSetError(
            "cannot rewrite the set: its directory holds what rebase cannot carry over\n  "
            + "\n  ".join(problems),
            path=ps.directory,
            hint="move those out of the set directory, then run rebase again (nothing was written)",
        )
    return out


def _kept(path: str) -> tuple[bytes, int]:
    data = read_regular(path, KEPT_LIMIT + 1)
    if len(data) > KEPT_LIMIT:
        raise PatchSetError(f"larger than {KEPT_LIMIT >> 20} MiB", path=path)
    return data, stat.S_IMODE(os.stat(path).st_mode)
