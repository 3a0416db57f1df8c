"""The one place that writes into an environment: all files or none, crash-safe.

A :class:`Plan` says what every file must become (new bytes, or gone) and what it must be now. Committing it:

1. take the environment lock (``<site>/.patchguard/lock``, ``flock``; a second writer waits, then fails
   clearly), and roll back any transaction a crash left behind;
2. check every path (inside the site dir, not through a symlink leaving it, a regular file or absent) and
   every file's current bytes against the plan — if anything differs, nothing is written;
3. write the journal (what will change, where the backups and temp files go) and fsync it;
4. write each new file as a temp file in its own directory and fsync it; hard-link (or copy) each original
   into the transaction's backup directory;
5. ``os.replace`` each temp over its target (never write in place: uv hard-links installed files to its
   cache, and an in-place edit would change every environment sharing the inode), unlink deleted files,
   fsync the directories, remove stale ``__pycache__`` entries of touched ``.py`` files;
6. delete the journal: that is the commit.

Recovery (:func:`recover`) reads a leftover journal and puts every file whose bytes are not the before-state
back from its backup, removes files the transaction created and its temp files, then deletes the journal.
It is idempotent, so a crash during recovery is recovered by the next command. Either way every file ends
byte-identical to the full before-state or the full after-state.

``PATCHGUARD_TEST_CRASH_AT=N`` makes the process ``os._exit(137)`` at the N-th write point (counted from 1
across the whole process); the reliability tests kill a transaction at every point this way.
``PATCHGUARD_TEST_WRITE_DELAY=S`` sleeps S seconds at each write point, so that a SIGKILL sent at a random
moment lands inside the transaction as often as outside it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ._fs import JOURNAL as _JOURNAL
from ._fs import (
    PYCACHE,
    STATE_DIR,
    STATE_FILE,
    bytecode_of,
    journal_path,
    parse_json,
    read_input,
    read_regular,
    sha256_bytes,
    sha256_file,
    transaction_left,
)
from ._fs import SESSION as _SESSION
from .errors import PatchguardError
from .model import printable

__all__ = [
    "STATE_DIR",
    "Change",
    "Committed",
    "LockTimeout",
    "Plan",
    "SessionBusy",
    "TransactionError",
    "backups",
    "check_state_dir",
    "commit",
    "directory_lock",
    "environment_lock",
    "keep_backups",
    "live_session",
    "note_trial",
    "prune_backups",
    "recover",
    "recover_all",
    "refuse_during_session",
    "session",
    "write_point",
]

_LOCK = "lock"
JOURNAL_SCHEMA = "patchguard.journal/1"
_BACKUPS = "backups"
_SESSION_DIR = "session"  # a session's kept start bytes
_TRIALS = "trials"  # in it: the sha256 of every file a trial wrote, one "<hash>" a line
_TMP_MARK = ".pg-tmp-"


class TransactionError(PatchguardError):
    """The transaction could not be planned or committed; nothing was changed."""


class LockTimeout(TransactionError):
    """Another patchguard process holds the environment lock."""


class JournalError(TransactionError):
    """A leftover transaction journal that cannot be read or trusted: a person must look at it."""


@dataclass(frozen=True, slots=True)
class Change:
    """One file of a plan. ``path`` is absolute and inside the plan's root.

    ``new`` is the content to write, ``None`` to remove the file (it is moved into the transaction's
    backup, never just deleted). ``before`` is the sha256 hex the file must have now, ``None`` if it must
    not exist. ``mode`` applies to a file that did not exist (an existing file keeps its own).
    """

    path: str
    new: bytes | None
    before: str | None
    mode: int = 0o644


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything one transaction will write, decided before anything is written.

    ``root`` is the site-packages dir whose ``.patchguard/`` holds the lock, journal and backups; ``also``
    names further directories the plan may write in (another site dir, the scripts dir).
    """

    root: str
    changes: tuple[Change, ...]
    label: str = ""
    also: tuple[str, ...] = ()
    rmdirs: tuple[str, ...] = ()  # directories the changes leave empty, to remove (innermost first)


@dataclass(frozen=True, slots=True)
class Committed:
    """What a committed transaction did: its id, where the originals are kept, what was recovered first."""

    txid: str
    backup_dir: str
    recovered: tuple[str, ...] = ()
    removed_bytecode: tuple[str, ...] = field(default=())


# -- crash points (tests) ---------------------------------------------------------------------------------

_write_points = 0


def write_point() -> None:
    """A write point: the reliability tests make the process die here."""
    global _write_points
    _write_points += 1
    delay = os.environ.get("PATCHGUARD_TEST_WRITE_DELAY")
    if delay:  # the random-kill tests widen the window between write points, so kills land inside
        with contextlib.suppress(ValueError):
            time.sleep(min(float(delay), 1.0))
    crash = os.environ.get("PATCHGUARD_TEST_CRASH_AT")
    if crash and crash.isdigit() and int(crash) == _write_points:
        os._exit(137)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durable(path: str, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


# -- lock -------------------------------------------------------------------------------------------------


def check_state_dir(root: str, *, writing: bool = True) -> None:
    """``.patchguard/``, its ``backups/`` and a session's kept files must be real directories inside
    ``root``: a symlink there would send the lock, the journal, backups and their clean-up anywhere."""
    state = os.path.join(root, STATE_DIR)
    for d in (state, os.path.join(state, _BACKUPS), os.path.join(state, _SESSION_DIR)):
        if os.path.islink(d):
            raise JournalError(
                "is a symlink: patchguard keeps its state only in a real directory",
                path=d,
                hint="remove the link (and look at who made it)",
            )
        if writing and os.path.lexists(d) and not os.path.isdir(d):
            raise JournalError(
                "is not a directory: patchguard keeps its state in a directory of that name",
                path=d,
                hint="move the file away (and look at who made it); reading commands do not need it",
            )


def _open_lock_file(root: str, lock: str) -> int:
    """The lock file, opened (created if need be) as a regular file of the state directory: never through a
    symlink (a dangling link would make root create the file it points to, anywhere), never a FIFO."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    if os.path.islink(lock):
        raise JournalError(
            "is a symlink: patchguard's lock file must be a regular file",
            path=lock,
            hint="remove the link (and look at who made it)",
        )
    try:
        os.makedirs(os.path.dirname(lock), exist_ok=True)
        fd = os.open(lock, flags | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        raise TransactionError(
            f"cannot write into the environment ({exc.strerror or exc})",
            path=root,
            hint="run as a user who can write to site-packages",
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise JournalError(
            "is not a regular file: patchguard's lock file must be one",
            path=lock,
            hint="remove it (and look at who made it)",
        )
    return fd


def _open_lock_dir(path: str, where: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise TransactionError(f"cannot lock {where} ({exc.strerror or exc})", path=path) from None


def _locked_unless_held(
    root: str, held: bool, timeout: float | None = None
) -> contextlib.AbstractContextManager[str]:
    """The environment lock, taken (waiting ``timeout``, else the configured time) unless the caller
    ``held`` it already; either way the state directory."""
    if held:
        return contextlib.nullcontext(os.path.join(root, STATE_DIR))
    return _locked(root, _lock_timeout() if timeout is None else timeout)


@contextlib.contextmanager
def _locked(root: str, timeout: float) -> Iterator[str]:
    state = os.path.join(root, STATE_DIR)
    check_state_dir(root)
    fd = _open_lock_file(root, os.path.join(state, _LOCK))
    with _held(fd, os.path.join(state, _LOCK), timeout, "the environment lock"):
        yield state


@contextlib.contextmanager
def directory_lock(path: str, what: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on directory ``path`` itself (nothing is left in it: a patches directory
    kept in git stays clean), waiting up to ``$PATCHGUARD_LOCK_TIMEOUT`` for another patchguard process."""
    with _held(_open_lock_dir(path, what), path, _lock_timeout(), what):
        yield


@contextlib.contextmanager
def _held(fd: int, path: str, timeout: float, what: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``fd`` (``path`` in messages), waited for up to ``timeout`` seconds; the
    descriptor is closed, and the lock released, when the block ends."""
    import fcntl

    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout(
                        f"another patchguard process has held {what} for {timeout:.0f} s",
                        path=path,
                        hint="wait for it to finish, then run the command again",
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing releases the flock


# -- path safety ------------------------------------------------------------------------------------------


def check_path(root: str, path: str, also: Sequence[str] = ()) -> str | None:
    """Why ``path`` may not be written through a transaction rooted at ``root``, or ``None`` if it may.

    Refused: paths outside ``root`` and ``also`` (after resolving symlinks of every parent directory),
    and targets that are symlinks or not regular files.
    """
    if not os.path.isabs(path):
        return "not an absolute path"
    norm = os.path.normpath(path)
    if norm != path.rstrip(os.sep):
        return "not a normalised path"
    if not _inside((root, *also), norm):
        return f"resolves outside {root} (through a symlink?)"
    # patchguard's own state: only its state file, named as such (never through an alias)
    if _inside((os.path.join(root, STATE_DIR),), norm) and norm != os.path.join(
        os.path.abspath(root), STATE_DIR, STATE_FILE
    ):
        return f"is inside patchguard's own state ({STATE_DIR}/), through a symlink or by name"
    try:
        st = os.lstat(norm)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot stat ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    return None


# -- commit -----------------------------------------------------------------------------------------------


def _lock_timeout() -> float:
    """Seconds to wait for another writer: ``$PATCHGUARD_LOCK_TIMEOUT`` (a number of seconds, 0 or more),
    default 30. Anything else is an error, not a silent 30."""
    raw = os.environ.get("PATCHGUARD_LOCK_TIMEOUT", "").strip()
    if not raw:
        return 30.0
    if re.fullmatch(r"[0-9]+(\.[0-9]*)?", raw) is None:
        raise TransactionError(
            f"$PATCHGUARD_LOCK_TIMEOUT={raw!r}: expected a number of seconds, 0 or more",
            hint="fix or unset it",
        )
    return float(raw)


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
        journal: dict[str, object] = {
            "schema": JOURNAL_SCHEMA,
            "txid": txid,
            "label": plan.label,
            "also": list(plan.also),
            "entries": entries,
            "rmdirs": rmdirs,  # [path, mode]: a rollback makes them again
        }
        try:
            _write_journal(state, journal)
            _stage(plan, entries, backup_dir)
            touched_dirs = _apply(plan, entries)
            for d, _mode in rmdirs:
                write_point()
                os.rmdir(d)
                touched_dirs.discard(d)
                touched_dirs.add(os.path.dirname(d))
            for d in sorted(touched_dirs):
                _fsync_dir(d)
            write_point()
            os.unlink(os.path.join(state, _JOURNAL))  # the commit point
            _fsync_dir(state)
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


def _new_txid() -> str:
    """A transaction's id: sorts by time (to the microsecond), so the oldest backups are pruned first."""
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(now))
    return f"{stamp}.{int(now % 1 * 1e6):06d}-{os.urandom(4).hex()}"


def _after_commit(root: str, backup_dir: str, keep: int | None) -> None:
    """Prune the oldest backups beyond ``keep``; ``None``: drop this transaction's own instead."""
    if keep is not None:
        prune_backups(root, keep)
        return
    import shutil

    shutil.rmtree(backup_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(backup_dir))  # only if no other transaction keeps backups


DEFAULT_KEEP_BACKUPS = 5


def keep_backups() -> int:
    """How many committed transactions keep their backups: ``$PATCHGUARD_KEEP_BACKUPS``, else
    ``keep_backups`` in ``[tool.patchguard]``, else :data:`DEFAULT_KEEP_BACKUPS`."""
    raw = os.environ.get("PATCHGUARD_KEEP_BACKUPS")
    if raw is not None and raw.strip():
        if re.fullmatch(r"[0-9]+", raw.strip()) is None:
            raise TransactionError(
                f"$PATCHGUARD_KEEP_BACKUPS={raw!r}: expected a whole number, 0 or more",
                hint="fix or unset it",
            )
        return int(raw.strip())
    from .config import load_config

    configured = load_config().keep_backups
    return DEFAULT_KEEP_BACKUPS if configured is None else configured


def _backup_names(top: str) -> list[str]:
    """Transaction ids with backups kept in the backups directory ``top``, oldest first."""
    try:
        return sorted(n for n in os.listdir(top) if not n.startswith("."))
    except OSError:
        return []


def backups(root: str) -> list[tuple[str, int]]:
    """(transaction id, bytes) of every transaction's backups kept in ``root``, oldest first."""
    top = os.path.join(root, STATE_DIR, _BACKUPS)
    out: list[tuple[str, int]] = []
    for name in _backup_names(top):
        size = 0
        for dirpath, _dirs, files in os.walk(os.path.join(top, name)):
            for f in files:
                with contextlib.suppress(OSError):
                    size += os.lstat(os.path.join(dirpath, f)).st_size
        out.append((name, size))
    return out


def prune_backups(root: str, keep: int) -> list[str]:
    """Delete the backups of all but the newest ``keep`` committed transactions (and of prunes a crash
    cut short); returns the transaction ids pruned. Only ever after a commit, under the lock."""
    import shutil

    top = os.path.join(root, STATE_DIR, _BACKUPS)
    if pending(root) is not None:
        return []  # an unfinished transaction's backups are not ours to judge
    kept = _backup_names(top)
    old = kept[: max(len(kept) - keep, 0)]
    with contextlib.suppress(OSError):
        old += [n for n in os.listdir(top) if n.startswith(".pruning-")]
    for name in old:
        path = os.path.join(top, name)
        doomed = path if name.startswith(".pruning-") else os.path.join(top, ".pruning-" + name)
        with contextlib.suppress(OSError):
            if doomed != path:
                os.rename(path, doomed)  # a prune cut short is recognisable, and finished next time
            shutil.rmtree(doomed)
    return [n for n in old if not n.startswith(".pruning-")]


def _check_paths(root: str, paths: Sequence[str], also: Sequence[str]) -> None:
    """Raises :class:`TransactionError` listing every path that :func:`check_path` refuses."""
    problems = [f"{p}: {why}" for p in paths if (why := check_path(root, p, also))]
    if problems:
        raise TransactionError(
            f"refused, nothing written: {len(problems)} path{'s' if len(problems) != 1 else ''} may not be "
            "written\n  " + "\n  ".join(problems),
            path=root,
            hint="every write stays inside the environment, on regular files, never through a symlink",
        )


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


def _journal_entries(plan: Plan, txid: str, backup_dir: str) -> list[dict[str, Any]]:
    """One journal entry per change, in plan order: path, before/after hashes, its temp file and backup."""
    entries: list[dict[str, Any]] = []
    made: set[str] = set()
    for n, c in enumerate(plan.changes):
        directory, name = os.path.split(c.path)
        mkdirs = [d for d in _missing_dirs(directory) if d not in made] if c.new is not None else []
        made.update(mkdirs)
        entries.append(
            {
                "path": c.path,
                "before": c.before,
                "after": sha256_bytes(c.new),
                "tmp": os.path.join(directory, f".{name}{_TMP_MARK}{txid}") if c.new is not None else None,
                "backup": os.path.join(backup_dir, f"{n:05d}-{name}") if c.before is not None else None,
                "mkdirs": mkdirs,  # created by this transaction (outermost first): removed by a rollback
            }
        )
    return entries


def _missing_dirs(directory: str) -> list[str]:
    """The ancestors of ``directory`` (itself included) that do not exist yet, outermost first."""
    missing: list[str] = []
    while directory and not os.path.isdir(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return missing[::-1]


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


def _inside(roots: Sequence[str], path: str) -> bool:
    """Whether ``path`` (normalised) has its parent directory, symlinks resolved, inside one of ``roots``."""
    if os.path.normpath(path) != path:
        return False
    real = os.path.realpath(os.path.dirname(path))
    return any(real == r or real.startswith(r + os.sep) for r in map(os.path.realpath, roots))


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


def _discard_journal_tmp(state: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(state, _JOURNAL + ".tmp"))


def _write_journal(state: str, journal: dict[str, object]) -> None:
    tmp = os.path.join(state, _JOURNAL + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    write_point()
    _write_durable(tmp, json.dumps(journal, indent=1).encode(), 0o644)
    write_point()
    os.replace(tmp, os.path.join(state, _JOURNAL))
    _fsync_dir(state)


def _stage(plan: Plan, entries: Sequence[dict[str, Any]], backup_dir: str) -> None:
    os.makedirs(backup_dir, exist_ok=True)
    for c, e in zip(plan.changes, entries, strict=True):
        tmp, backup = e["tmp"], e["backup"]
        if isinstance(tmp, str) and c.new is not None:
            os.makedirs(os.path.dirname(c.path), exist_ok=True)  # a file of a deleted subpackage
            mode = c.mode
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(c.path)
                mode = stat.S_IMODE(st.st_mode)
            write_point()
            _write_durable(tmp, c.new, mode & 0o777)
            with contextlib.suppress(FileNotFoundError, PermissionError):
                st = os.stat(c.path)
                if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (0, 0):
                    os.chown(tmp, st.st_uid, st.st_gid)
            os.chmod(tmp, mode)  # after the chown, which clears setuid/setgid; and umask must not narrow it
        if isinstance(backup, str):
            write_point()
            try:
                os.link(c.path, backup)  # the original inode stays untouched: a link is a full backup
            except OSError:
                import shutil  # only when writing: a scan imports this module for recovery

                shutil.copy2(c.path, backup)
    _fsync_dir(backup_dir)


def _apply(plan: Plan, entries: Sequence[dict[str, Any]]) -> set[str]:
    touched: set[str] = set()
    for c, e in zip(plan.changes, entries, strict=True):
        write_point()
        tmp = e["tmp"]
        if isinstance(tmp, str):
            os.makedirs(os.path.dirname(c.path), exist_ok=True)
            os.replace(tmp, c.path)
        else:
            os.unlink(c.path)
        touched.add(os.path.dirname(c.path))
    return touched


# -- recovery ---------------------------------------------------------------------------------------------


def pending(root: str) -> dict[str, object] | None:
    """The journal an interrupted transaction left in ``root``, if any."""
    path = journal_path(root)
    try:
        doc = parse_json(read_input(path))
    except (FileNotFoundError, NotADirectoryError):  # a stray file named .patchguard holds no journal
        return None
    except (OSError, ValueError) as exc:
        raise JournalError(
            f"unreadable transaction journal ({exc})",
            path=path,
            hint="inspect it; the backups it names are in .patchguard/backups/",
        ) from None
    if not isinstance(doc, dict):
        raise JournalError(
            "malformed transaction journal", path=path, hint="inspect it, then delete it by hand"
        )
    return doc


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


def _recover_journal(root: str, state: str, allowed: Sequence[str]) -> tuple[str, ...]:
    journal = pending(root)
    if journal is None:
        _discard_journal_tmp(state)  # a crash while the journal was being written: nothing else began
        return ()
    check_state_dir(root)
    journal_file = journal_path(root)
    txid, entries, also = _validated(journal, journal_file)
    backup_dir = os.path.join(state, _BACKUPS, txid)
    trusted = [a for a in (also if isinstance(also, list) else []) if a in allowed]
    restored: list[str] = []
    skipped = False
    _make_removed_dirs(root, trusted, journal.get("rmdirs"))
    for e in entries:
        outcome = _recover_entry(root, backup_dir, trusted, e)
        if outcome is None:
            skipped = True
        elif outcome:
            restored.append(outcome)
    _remove_made_dirs(root, trusted, entries)
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
    _fsync_dir(state)
    return tuple(restored)


def _make_removed_dirs(root: str, trusted: Sequence[str], rmdirs: object) -> None:
    """Make again, outermost first and with their modes, the directories the transaction removed."""
    if not isinstance(rmdirs, list):
        return
    wanted = [r for r in rmdirs if isinstance(r, list) and len(r) == 2 and isinstance(r[0], str)]
    for d, mode in sorted(wanted, key=lambda r: len(r[0])):
        if not _inside((root, *trusted), d):
            continue
        mode = mode if isinstance(mode, int) else 0o755
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, mode)
            os.chmod(d, mode)


def _remove_made_dirs(root: str, trusted: Sequence[str], entries: Sequence[dict[str, object]]) -> None:
    """Remove, innermost first, the directories the rolled-back transaction created (if still empty)."""
    made: list[str] = []
    for e in entries:
        dirs = e.get("mkdirs")
        if isinstance(dirs, list):
            made += [d for d in dirs if isinstance(d, str)]
    for d in sorted(set(made), key=len, reverse=True):
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


def _validated(journal: dict[str, object], journal_file: str) -> tuple[str, list[dict[str, object]], object]:
    """The journal's txid (a plain name), entries (all dicts) and ``also``, or :class:`JournalError`."""
    schema = journal.get("schema", JOURNAL_SCHEMA)
    if schema != JOURNAL_SCHEMA:  # a newer patchguard's: its rollback rules may not be these
        raise JournalError(
            f"a transaction journal of another format ({printable(str(schema))[:40]!r}) is pending",
            path=journal_file,
            hint="finish it with the patchguard that wrote it",
        )
    txid, entries, also = journal.get("txid"), journal.get("entries"), journal.get("also", [])
    valid_txid = isinstance(txid, str) and txid and os.sep not in txid and txid not in (".", "..")
    if not valid_txid or not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise JournalError(
            "malformed transaction journal", path=journal_file, hint="inspect it, then delete it by hand"
        )
    assert isinstance(txid, str)
    return txid, entries, also


def _recover_entry(root: str, backup_dir: str, trusted: Sequence[str], e: dict[str, object]) -> str | None:
    """Put one journal entry back: its path if restored, ``""`` if it needed nothing, ``None`` if skipped."""
    path, before, tmp, backup = e.get("path"), e.get("before"), e.get("tmp"), e.get("backup")
    if not isinstance(path, str) or check_path(root, path, trusted) is not None:
        # Never follow a journal outside the environment, nor into patchguard's own state (check_path
        # allows only the state file, which commits and rolls back with the files it describes).
        return None
    if isinstance(tmp, str) and (
        os.path.dirname(tmp) != os.path.dirname(path) or _TMP_MARK not in os.path.basename(tmp)
    ):
        tmp = None
    if isinstance(backup, str) and os.path.dirname(os.path.abspath(backup)) != backup_dir:
        backup = None
    now = sha256_file(path)
    restored = ""
    if now != before:
        if before is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        elif isinstance(backup, str) and os.path.exists(backup):
            _put_back(backup, path)
        else:
            return None
        restored = path
        _fsync_dir(os.path.dirname(path))
    if isinstance(tmp, str):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return restored


# -- sessions: an environment held in trial states, put back at the end ------------------------------------

SESSION_SCHEMA = "patchguard.session/1"
_own_sessions: set[str] = set()  # the roots this process holds a session on (its commits do not undo it)


class SessionBusy(TransactionError):
    """Another process holds the environment in trial states (a running ``bisect``)."""


@dataclass(frozen=True, slots=True)
class _Held:
    """One file of a session: its start bytes' hash (``None``: absent), where they are kept, its mode."""

    path: str
    start: str | None
    saved: str | None
    mode: int


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


def note_trial(root: str, digests: Sequence[str | None]) -> None:
    """Remember, before a trial's commit, the hashes of what it writes: a killed session put back later
    tells its own trials' bytes from someone's edit made since (kept aside then)."""
    path = os.path.join(os.path.abspath(root), STATE_DIR, _SESSION_DIR, _TRIALS)
    lines = "".join(f"{d}\n" for d in digests if d)
    if lines:
        with open(path, "a", encoding="ascii") as f:
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())


def _trial_hashes(state: str) -> frozenset[str]:
    try:
        text = read_regular(os.path.join(state, _SESSION_DIR, _TRIALS), 64 << 20).decode("ascii", "replace")
    except OSError:
        return frozenset()
    return frozenset(text.split())


def live_session(root: str) -> str | None:
    """Who holds ``root`` in trial states right now (``"bisect (pid 4242)"``), or ``None``: no session, its
    process died (the next writer's recovery puts it back), or this very process holds it."""
    import fcntl

    root = os.path.abspath(root)
    state = os.path.join(root, STATE_DIR)
    path = os.path.join(state, _SESSION)
    if root in _own_sessions or not os.path.lexists(path):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            doc = _read_session(state)
        except JournalError:
            doc = None
        return _holder(doc, "bisect")
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def _holder(doc: object, default: str) -> str:
    """Who a session file says holds the environment: its label (escaped, cut short) and pid."""
    entry = doc if isinstance(doc, dict) else {}
    label, pid = entry.get("label"), entry.get("pid")
    who = printable(label)[:40] if isinstance(label, str) else default
    return who + (f" (pid {pid})" if isinstance(pid, int) and not isinstance(pid, bool) else "")


def refuse_during_session(roots: Sequence[str]) -> None:
    """Refuse a write command while a session holds one of ``roots`` in trial states: what it would read
    and change is a trial, and the session puts its own start back at the end (one line naming it)."""
    for root in roots:
        who = live_session(root)
        if who is not None:
            raise SessionBusy(
                f"{who} holds this environment in trial states: nothing is changed while it runs",
                path=root,
                hint="wait for it to end, or stop it (Ctrl-C: it puts every file back first)",
            )


def _session_lock(root: str, state: str) -> int:
    """An exclusive ``flock`` on the session file itself, taken without waiting: its process holds it for
    the session's whole life (and deletes the file before letting go), so a session file nobody holds is
    one whose process died. Raises :class:`SessionBusy` when it is held."""
    import fcntl

    path = os.path.join(state, _SESSION)
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK
    try:
        fd = os.open(path, flags)
    except OSError as exc:  # gone (its session ended just now: nothing to do), or a symlink
        if isinstance(exc, FileNotFoundError):
            raise
        raise JournalError(
            f"cannot open the session file ({exc.strerror or exc})",
            path=path,
            hint="patchguard keeps it as a regular file; inspect it (and look at who changed it)",
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise JournalError("is not a regular file", path=path, hint="inspect it (and look at who made it)")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SessionBusy(
            f"{_holder(_read_session(state), 'a bisect')} holds this environment in trial states",
            path=root,
            hint="wait for it to end, or stop it (Ctrl-C: it puts every file back first)",
        ) from None
    return fd


def _save_start(
    root: str, state: str, paths: Sequence[str], also: Sequence[str]
) -> tuple[list[_Held], list[str]]:
    """Keep the start bytes of ``paths`` and of their bytecode; the directories a trial may create."""
    wanted: list[str] = []
    for p in paths:
        wanted.append(p)
        if p.endswith(".py"):
            with contextlib.suppress(OSError):
                wanted += sorted(bytecode_of(p))
    _check_paths(root, wanted, also)
    check_state_dir(root)
    saved_dir = os.path.join(state, _SESSION_DIR)
    import shutil

    shutil.rmtree(saved_dir, ignore_errors=True)
    os.makedirs(saved_dir)
    held: list[_Held] = []
    dirs: list[str] = []
    for n, p in enumerate(dict.fromkeys(wanted)):
        try:
            st = os.stat(p)
        except FileNotFoundError:
            held.append(_Held(p, None, None, 0o644))
            dirs += [d for d in _missing_dirs(os.path.dirname(p)) if d not in dirs]
            continue
        name = f"{n:05d}"
        # A copy, never a hard link: a test that appends to the file in place would change a linked
        # "start" with it, and the way back would keep the test's bytes.
        shutil.copyfile(p, os.path.join(saved_dir, name), follow_symlinks=False)
        held.append(_Held(p, sha256_file(os.path.join(saved_dir, name)), name, stat.S_IMODE(st.st_mode)))
    _fsync_dir(saved_dir)
    return held, dirs


def _write_session(state: str, doc: dict[str, object]) -> None:
    tmp = os.path.join(state, _SESSION + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    _write_durable(tmp, json.dumps(doc, indent=1).encode(), 0o644)
    os.replace(tmp, os.path.join(state, _SESSION))
    _fsync_dir(state)


def _read_session(state: str) -> object:
    try:
        return parse_json(read_input(os.path.join(state, _SESSION)))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise JournalError(
            f"unreadable session file ({exc})",
            path=os.path.join(state, _SESSION),
            hint=f"the start state is in {_SESSION_DIR}/ beside it; inspect both",
        ) from None


def _drop_session(state: str) -> None:
    """Forget a finished session: its file first (then nothing is pending), then its kept bytes."""
    import shutil

    for name in (_SESSION, _SESSION + ".tmp"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(state, name))
    _fsync_dir(state)
    shutil.rmtree(os.path.join(state, _SESSION_DIR), ignore_errors=True)


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


def _to_start(state: str, held: Sequence[_Held]) -> list[Change]:
    """The changes that put every held file that differs back to its start bytes — and the start bytecode of
    a ``.py`` they write, even where it is unchanged (writing a ``.py`` drops its bytecode: ``sed -i``)."""
    changes: list[Change] = []
    kept: list[_Held] = []  # held bytecode already at its start
    for h in held:
        now = sha256_file(h.path)
        if now == h.start:
            if h.saved is not None and os.sep + PYCACHE + os.sep in h.path:
                kept.append(h)
            continue
        data = read_regular(os.path.join(state, _SESSION_DIR, h.saved)) if h.saved is not None else None
        changes.append(Change(h.path, data, now, h.mode))
    if changes and kept:
        dropped = {pyc for c in changes if c.path.endswith(".py") for pyc in _bytecode(c.path)}
        for h in kept:
            if h.path in dropped and h.saved is not None:
                data = read_regular(os.path.join(state, _SESSION_DIR, h.saved))
                changes.append(Change(h.path, data, h.start, h.mode))
    return changes


def _bytecode(py_path: str) -> list[str]:
    try:
        return bytecode_of(py_path)
    except OSError:  # no __pycache__ beside it: nothing to drop
        return []


def _emptied(dirs: Sequence[str], gone: set[str]) -> tuple[str, ...]:
    """Of the directories trials may have created, those the plan leaves empty (innermost first)."""
    out: list[str] = []
    for d in sorted(dirs, key=len, reverse=True):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        if all(os.path.join(d, n) in gone or os.path.join(d, n) in out for n in names):
            out.append(d)
    return tuple(out)


_recovering: set[str] = set()  # the roots whose killed session this process is putting back


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


def _validated_session(
    doc: object, root: str, state: str, allowed: Sequence[str]
) -> tuple[list[_Held], list[str], list[str]]:
    """The files, created directories and other roots of a session file, each checked, or
    :class:`JournalError`: a file outside the environment, kept bytes that are not the start's."""
    if not isinstance(doc, dict) or doc.get("schema") != SESSION_SCHEMA:
        raise _bad_session(state, "a session file of another format")
    also = [a for a in doc.get("also", []) if isinstance(a, str) and a in allowed]
    files, dirs = doc.get("files"), doc.get("dirs", [])
    if not isinstance(files, list) or not isinstance(dirs, list):
        raise _bad_session(state, "malformed session file")
    held = [_held_entry(f, root, state, also) for f in files]
    inside = [d for d in dirs if isinstance(d, str) and _inside((root, *also), d)]
    return held, inside, also


def _bad_session(state: str, why: str) -> JournalError:
    return JournalError(
        f"{why}; the start state was not put back",
        path=os.path.join(state, _SESSION),
        hint=f"inspect it and the kept files in {_SESSION_DIR}/ beside it, then delete both",
    )


def _held_entry(f: object, root: str, state: str, also: Sequence[str]) -> _Held:
    """One file of a session file, checked: writable by a transaction, its kept bytes the start's."""
    entry = f if isinstance(f, dict) else {}
    path, start, saved, mode = (entry.get(k) for k in ("path", "start", "saved", "mode"))
    if not isinstance(path, str) or check_path(root, path, also) is not None:
        raise _bad_session(state, f"it names a file patchguard may not write ({printable(str(path))[:80]})")
    mode = _tame(path, mode)
    if start is None:
        return _Held(path, None, None, mode)
    valid_name = isinstance(saved, str) and saved not in ("", ".", "..") and os.path.basename(saved) == saved
    kept = os.path.join(state, _SESSION_DIR, saved) if valid_name and isinstance(saved, str) else ""
    if not isinstance(start, str) or not kept or sha256_file(kept) != start:
        raise _bad_session(state, f"the kept start bytes of {printable(path)} are missing or changed")
    return _Held(path, start, os.path.basename(kept), mode)


def _tame(path: str, mode: object) -> int:
    """A mode read from a session file (which anyone who could write ``.patchguard/`` could have written),
    as it may be given back: permission bits only, and setuid, setgid, sticky or world-write only where the
    file has them now (a session kept them as it found them; it never grants them)."""
    if not isinstance(mode, int) or isinstance(mode, bool):
        return 0o644
    try:
        now = stat.S_IMODE(os.lstat(path).st_mode)
    except OSError:
        now = 0
    risky = 0o7002
    return (mode & 0o777 & ~risky) | (mode & now & risky)
