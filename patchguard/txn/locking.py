"""The environment lock (``<site>/.patchguard/lock``, ``flock``) and directory locks: a second writer waits,
then fails clearly; the state directory is checked to be a real directory first."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from collections.abc import Iterator

from .._fs import (
    STATE_DIR,
)
from .values import _BACKUPS, _LOCK, _SESSION_DIR, JournalError, LockTimeout, TransactionError


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
