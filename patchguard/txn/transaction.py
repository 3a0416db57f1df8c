"""The protocol: commit a plan under the environment lock, recover what a crash left (a journal, then a
session), and hold an environment in a session of trials put back at the end."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence

from .._fs import JOURNAL as _JOURNAL
from .._fs import SESSION as _SESSION
from .._fs import (
    STATE_DIR,
    transaction_left,
)
from .backups import _after_commit, keep_backups
from .durable import fsync_dir, signals_held, write_point
from .journal import _discard_journal_tmp, _write_journal
from .locking import _lock_timeout, _locked, _locked_unless_held
from .paths import _check_paths
from .rollback import _recover_journal
from .sessions import (
    _drop_session,
    _emptied,
    _Held,
    _own_sessions,
    _read_session,
    _recovering,
    _save_start,
    _session_lock,
    _to_start,
    _trial_hashes,
    _validated_session,
    _write_session,
)
from .staging import (
    _check_before,
    _dirs_to_remove,
    _journal_entries,
    _new_txid,
    _stage,
    _with_bytecode,
    apply_changes,
)
from .values import _BACKUPS, SESSION_SCHEMA, Committed, Journal, JournalError, Plan, TransactionError


@contextlib.contextmanager
def environment_lock(
    root: str, *, allowed: Sequence[str] = (), lock_timeout: float | None = None
) -> Iterator[tuple[str, ...]]:
    """Hold the environment lock across planning *and* committing (a leftover journal is rolled back first).

    A second writer then waits and plans against what the first one wrote, instead of failing on a stale
    plan. Yields the paths recovery put back. :func:`commit` inside it must be called with ``locked=True``.
    """
    root = os.path.abspath(root)
    with _locked(root, _lock_timeout() if lock_timeout is None else lock_timeout):
        yield recover(root, allowed=allowed, _locked_already=True)


def commit(
    plan: Plan, *, lock_timeout: float | None = None, locked: bool = False, keep_backup: bool = True
) -> Committed:
    """Apply ``plan`` atomically (see the module docstring). Raises :class:`TransactionError`, with
    every reason listed, when anything about the plan does not hold; then nothing was written.

    ``keep_backup=False`` (a bisect's trials, which keep the start state themselves): the originals are
    dropped once committed, and the backups of earlier transactions are not pruned for this one."""
    root = os.path.abspath(plan.root)
    keep = keep_backups()  # read before anything is written: a bad setting changes nothing
    _check_paths(root, [c.path for c in plan.changes], plan.also)
    with _locked_unless_held(root, locked, lock_timeout) as state:
        recovered = recover(root, allowed=plan.also, _locked_already=True)
        _check_before(root, plan)
        plan, removed = _with_bytecode(root, plan)
        txid = _new_txid()
        backup_dir = os.path.join(state, _BACKUPS, txid)
        entries = _journal_entries(plan, txid, backup_dir)
        rmdirs = _dirs_to_remove(root, plan)
        journal = Journal(txid, plan.label, plan.also, entries, tuple(rmdirs))
        with signals_held():  # a Ctrl-C or SIGTERM handler runs once the commit is whole
            try:
                _write_journal(state, journal)
                _stage(plan, entries, backup_dir)
                touched_dirs = apply_changes(plan, entries)
                for d, _mode in rmdirs:
                    write_point()
                    os.rmdir(d)
                    touched_dirs.discard(d)
                    touched_dirs.add(os.path.dirname(d))
                for d in sorted(touched_dirs):
                    fsync_dir(d)
                write_point()
                os.unlink(os.path.join(state, _JOURNAL))  # the commit point
                fsync_dir(state)
                _after_commit(root, backup_dir, keep if keep_backup else None)
            except OSError as exc:
                # A write failed (ENOSPC, EROFS, EACCES): undo everything, then report.
                recover(root, allowed=plan.also, _locked_already=True)
                _discard_journal_tmp(state)
                raise TransactionError(
                    f"could not write ({exc.strerror or exc}{': ' + exc.filename if exc.filename else ''}); "
                    "nothing was changed",
                    path=root,
                    hint="free space or fix permissions, then run the command again",
                ) from None
    return Committed(txid, backup_dir, recovered, tuple(removed))


def recover_all(
    site_dirs: Sequence[str], allowed: Sequence[str], *, tolerant: bool = False
) -> tuple[str, ...]:
    """Roll back leftover transactions in every site dir of an environment (every command does this first).

    ``tolerant`` (read-only commands): a site dir that cannot be written or is locked is left as it is;
    a journal that cannot be trusted (:class:`JournalError`) is an error either way.
    """
    restored: list[str] = []
    for site in site_dirs:
        if not transaction_left(site):
            continue
        try:
            restored += recover(site, allowed=allowed)
        except JournalError:
            raise
        except (TransactionError, OSError):
            if not tolerant:
                raise
    return tuple(restored)


def recover(
    root: str,
    *,
    allowed: Sequence[str] = (),
    lock_timeout: float | None = None,
    _locked_already: bool = False,
) -> tuple[str, ...]:
    """Roll back a transaction a crash left behind; returns the paths put back (empty if none).

    Files already in their before-state are left alone; the others are restored from their backups
    (by replacing, never in place); files the transaction created are removed; its temp files go.

    The journal is not trusted beyond ``root`` and the directories the *caller* allows (``allowed``: the
    environment's other site dirs and scripts dir): an entry outside them is skipped, a temp file must sit
    beside its target with patchguard's temp marker, a backup must lie in this transaction's backup dir.
    """
    root = os.path.abspath(root)
    if not _locked_already:
        if not transaction_left(root):
            return ()
        with _locked(root, _lock_timeout() if lock_timeout is None else lock_timeout):
            return recover(root, allowed=allowed, _locked_already=True)
    state = os.path.join(root, STATE_DIR)
    restored = _recover_journal(root, state, allowed)
    # then a session killed on its way (a bisect): its start state back, over what the journal left
    return restored + _recover_session(root, state, allowed)


@contextlib.contextmanager
def session(root: str, paths: Sequence[str], *, label: str, also: Sequence[str] = ()) -> Iterator[None]:
    """Hold ``paths`` of an environment at their start state while the block commits trial states.

    The start bytes of every path (and of the bytecode compiled from it) are kept in ``.patchguard/session/``
    and described in ``session.json`` before the block runs. When the block ends — returning, raising, or
    interrupted — every path is committed back to its start bytes. A process killed inside the block leaves
    ``session.json``: the next command's recovery (:func:`recover`) commits the start state back then.
    While the block runs, a session lock is held: every other writer is refused (:class:`SessionBusy`)
    instead of changing files under the trials. Raises :class:`SessionBusy` when another session holds it.
    """
    root = os.path.abspath(root)
    with _locked(root, _lock_timeout()) as state:
        recover(root, allowed=also, _locked_already=True)
        try:
            held, dirs = _save_start(root, state, paths, also)
            doc = {
                "schema": SESSION_SCHEMA,
                "label": label,
                "pid": os.getpid(),
                "also": list(also),
                "files": [{"path": h.path, "start": h.start, "saved": h.saved, "mode": h.mode} for h in held],
                "dirs": dirs,
            }
            _write_session(state, doc)
            fd = _session_lock(root, state)  # under the environment lock: nobody can take it first
        except BaseException:
            _drop_session(state)
            raise
    _own_sessions.add(root)
    try:
        yield
    finally:
        try:
            _back_to_start(root, state, held, dirs, also, locked=False)
        finally:
            _own_sessions.discard(root)
            os.close(fd)  # after the session file is gone: then nobody finds it unlocked


def _back_to_start(
    root: str, state: str, held: Sequence[_Held], dirs: Sequence[str], also: Sequence[str], *, locked: bool
) -> None:
    """Commit every held file back to its start bytes (only those that differ), then forget the session.

    The files are read under the environment lock, after a trial cut short (Ctrl-C, SIGTERM inside its
    commit) is rolled back: planned before that roll-back, the plan would not match what is there."""
    with _locked_unless_held(root, locked):
        if not locked:
            recover(root, allowed=also, _locked_already=True)
        changes = _to_start(state, held)
        if changes:
            gone = {c.path for c in changes if c.new is None}
            plan = Plan(root, tuple(changes), "back to the start state", tuple(also), _emptied(dirs, gone))
            # A session put back by recovery (its process was killed) keeps what it replaces when that is no
            # trial's: a hot-fix someone made to a held file since is kept in the backups, not lost.
            trials = _trial_hashes(state) if locked else frozenset()
            foreign = locked and any(c.before not in trials for c in changes)
            commit(plan, locked=True, keep_backup=foreign)
        _drop_session(state)


def _recover_session(root: str, state: str, allowed: Sequence[str]) -> tuple[str, ...]:
    """Put back the start state a killed session left (the caller holds the environment lock). Raises
    :class:`SessionBusy` when the session's process is alive and holds it."""
    if root in _own_sessions or root in _recovering or not os.path.lexists(os.path.join(state, _SESSION)):
        return ()
    try:
        fd = _session_lock(root, state)
    except FileNotFoundError:
        return ()  # it ended between the look and the open
    try:
        held, dirs, also = _validated_session(_read_session(state), root, state, allowed)
        _recovering.add(root)
        try:
            _back_to_start(root, state, held, dirs, also, locked=True)
        finally:
            _recovering.discard(root)
    finally:
        os.close(fd)
    return tuple(h.path for h in held)
