"""The steps of a commit, each on a plan decided in memory: the check of every file's current bytes, the
journal's entries, the bytecode a changed ``.py`` drops, the temp files staged beside their targets and
the ``os.replace`` of each over its target."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import replace

from .._fs import (
    bytecode_of,
    sha256_bytes,
    sha256_file,
)
from .durable import fsync_dir, write_durable, write_point
from .paths import _inside, _missing_dirs, check_path
from .values import _TMP_MARK, Change, JournalEntry, Plan, TransactionError


def _new_txid() -> str:
    """A transaction's id: sorts by time (to the microsecond), so the oldest backups are pruned first."""
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(now))
    return f"{stamp}.{int(now % 1 * 1e6):06d}-{os.urandom(4).hex()}"


def _check_before(root: str, plan: Plan) -> None:
    """Raises :class:`TransactionError` listing every file whose bytes now are not the plan's ``before``."""
    mismatched = []
    for c in plan.changes:
        now = sha256_file(c.path)
        if now != c.before:
            what = "missing" if now is None else "differs from what was planned against"
            mismatched.append(f"{c.path}: {what}")
    if mismatched:
        raise TransactionError(
            "the environment changed since the plan was made; nothing was written\n  "
            + "\n  ".join(mismatched),
            path=root,
            hint="run the command again",
        )


def _journal_entries(plan: Plan, txid: str, backup_dir: str) -> tuple[JournalEntry, ...]:
    """One journal entry per change, in plan order: path, before/after hashes, its temp file and backup."""
    entries: list[JournalEntry] = []
    made: set[str] = set()
    for n, c in enumerate(plan.changes):
        directory, name = os.path.split(c.path)
        # the directories this transaction creates (outermost first): removed by a rollback
        mkdirs = tuple(d for d in _missing_dirs(directory) if d not in made) if c.new is not None else ()
        made.update(mkdirs)
        entries.append(
            JournalEntry(
                c.path,
                c.before,
                sha256_bytes(c.new),
                os.path.join(directory, f".{name}{_TMP_MARK}{txid}") if c.new is not None else None,
                os.path.join(backup_dir, f"{n:05d}-{name}") if c.before is not None else None,
                mkdirs,
            )
        )
    return tuple(entries)


def _with_bytecode(root: str, plan: Plan) -> tuple[Plan, list[str]]:
    """``plan`` plus the deletion of every ``__pycache__`` entry of a ``.py`` it writes or deletes (it was
    compiled from other source): inside the transaction, so a rollback puts them back too."""
    planned = {c.path for c in plan.changes}
    extra: list[Change] = []
    for c in plan.changes:
        if not c.path.endswith(".py"):
            continue
        for pyc in sorted(_bytecode(c.path)):
            if pyc in planned or check_path(root, pyc, plan.also) is not None:
                continue
            try:
                digest = sha256_file(pyc)
            except OSError:
                continue
            if digest is not None:
                planned.add(pyc)
                extra.append(Change(pyc, None, digest))
    if not extra:
        return plan, []
    return replace(plan, changes=(*plan.changes, *extra)), [c.path for c in extra]


def _dirs_to_remove(root: str, plan: Plan) -> list[tuple[str, int]]:
    """``plan.rmdirs`` that are real directories inside the environment, with their modes."""
    out: list[tuple[str, int]] = []
    for d in plan.rmdirs:
        if not _inside((root, *plan.also), d):
            continue
        try:
            st = os.lstat(d)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            out.append((d, stat.S_IMODE(st.st_mode)))
    return out


def _stage(plan: Plan, entries: Sequence[JournalEntry], backup_dir: str) -> None:
    os.makedirs(backup_dir, exist_ok=True)
    for c, e in zip(plan.changes, entries, strict=True):
        tmp, backup = e.tmp, e.backup
        if tmp is not None and c.new is not None:
            os.makedirs(os.path.dirname(c.path), exist_ok=True)  # a file of a deleted subpackage
            mode = c.mode
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(c.path)
                mode = stat.S_IMODE(st.st_mode)
            write_point()
            write_durable(tmp, c.new, mode & 0o777)
            with contextlib.suppress(FileNotFoundError, PermissionError):
                st = os.stat(c.path)
                if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (0, 0):
                    os.chown(tmp, st.st_uid, st.st_gid)
            os.chmod(tmp, mode)  # after the chown, which clears setuid/setgid; and umask must not narrow it
        if backup is not None:
            write_point()
            try:
                os.link(c.path, backup)  # the original inode stays untouched: a link is a full backup
            except OSError:
                import shutil  # only when writing: a scan imports this module for recovery

                shutil.copy2(c.path, backup)
    fsync_dir(backup_dir)


def apply_changes(plan: Plan, entries: Sequence[JournalEntry]) -> set[str]:
    touched: set[str] = set()
    for c, e in zip(plan.changes, entries, strict=True):
        write_point()
        tmp = e.tmp
        if tmp is not None:
            os.makedirs(os.path.dirname(c.path), exist_ok=True)
            os.replace(tmp, c.path)
        else:
            os.unlink(c.path)
        touched.add(os.path.dirname(c.path))
    return touched


def _bytecode(py_path: str) -> list[str]:
    try:
        return bytecode_of(py_path)
    except OSError:  # no __pycache__ beside it: nothing to drop
        return []
