"""Rolling back a journal a crash left behind: every file not in its before-state put back from its
backup, files the transaction created removed, its temp files gone. Idempotent."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence

from .._fs import (
    journal_path,
    sha256_file,
)
from .durable import fsync_dir
from .journal import _discard_journal_tmp, pending
from .locking import check_state_dir
from .paths import _inside, check_path
from .values import _BACKUPS, _TMP_MARK, JournalEntry


def _recover_journal(root: str, state: str, allowed: Sequence[str]) -> tuple[str, ...]:
    journal = pending(root)
    if journal is None:
        _discard_journal_tmp(state)  # a crash while the journal was being written: nothing else began
        return ()
    check_state_dir(root)
    journal_file = journal_path(root)
    backup_dir = os.path.join(state, _BACKUPS, journal.txid)
    trusted = [a for a in journal.also if a in allowed]
    restored: list[str] = []
    skipped = False
    _make_removed_dirs(root, trusted, journal.rmdirs)
    for e in journal.entries:
        outcome = _recover_entry(root, backup_dir, trusted, e)
        if outcome is None:
            skipped = True
        elif outcome:
            restored.append(outcome)
    _remove_made_dirs(root, trusted, journal.entries)
    _discard_journal_tmp(state)
    if not skipped:
        # Every file is in its before-state: the originals are not needed. Gone *before* the journal, so a
        # crash in between leaves a journal whose next recovery finds nothing to do, never orphaned backups.
        import shutil

        shutil.rmtree(backup_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.join(state, _BACKUPS))  # only if no committed transaction keeps backups
    with contextlib.suppress(FileNotFoundError):
        os.unlink(journal_file)
    fsync_dir(state)
    return tuple(restored)


def _make_removed_dirs(root: str, trusted: Sequence[str], rmdirs: Sequence[tuple[str, int]]) -> None:
    """Make again, outermost first and with their modes, the directories the transaction removed."""
    for d, mode in sorted(rmdirs, key=lambda r: len(r[0])):
        if not _inside((root, *trusted), d):
            continue
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, mode)
            os.chmod(d, mode)


def _remove_made_dirs(root: str, trusted: Sequence[str], entries: Sequence[JournalEntry]) -> None:
    """Remove, innermost first, the directories the rolled-back transaction created (if still empty)."""
    made = {d for e in entries for d in e.mkdirs}
    for d in sorted(made, key=len, reverse=True):
        if not _inside((root, *trusted), d):
            continue  # never follow a journal outside the environment
        with contextlib.suppress(OSError):
            os.rmdir(d)


def _put_back(backup: str, path: str) -> None:
    """Replace ``path`` by the original in ``backup``: the same inode again (owner, mode, links — a uv
    cache link included), through a link; a copy with its owner and mode where links cannot be made."""
    staging = path + _TMP_MARK + "recover"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(staging)
    try:
        os.link(backup, staging)
    except OSError:
        import shutil

        shutil.copy2(backup, staging)
        st = os.stat(backup)
        with contextlib.suppress(PermissionError):
            os.chown(staging, st.st_uid, st.st_gid)
        os.chmod(staging, stat.S_IMODE(st.st_mode))
    os.replace(staging, path)


def _recover_entry(root: str, backup_dir: str, trusted: Sequence[str], e: JournalEntry) -> str | None:
    """Put one journal entry back: its path if restored, ``""`` if it needed nothing, ``None`` if skipped."""
    path, before, tmp, backup = e.path, e.before, e.tmp, e.backup
    if path is None or check_path(root, path, trusted) is not None:
        # Never follow a journal outside the environment, nor into patchguard's own state (check_path
        # allows only the state file, which commits and rolls back with the files it describes).
        return None
    if tmp is not None and (
        os.path.dirname(tmp) != os.path.dirname(path) or _TMP_MARK not in os.path.basename(tmp)
    ):
        tmp = None
    if backup is not None and os.path.dirname(os.path.abspath(backup)) != backup_dir:
        backup = None
    now = sha256_file(path)
    restored = ""
    if now != before:
        if before is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        elif backup is not None and os.path.exists(backup):
            _put_back(backup, path)
        else:
            return None
        restored = path
        fsync_dir(os.path.dirname(path))
    if tmp is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return restored
