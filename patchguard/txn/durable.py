"""Durable writes, and the write points where the reliability tests kill the process.

``PATCHGUARD_TEST_CRASH_AT=N`` makes the process ``os._exit(137)`` at the N-th write point (counted from 1
across the whole process); the reliability tests kill a transaction at every point this way.
``PATCHGUARD_TEST_WRITE_DELAY=S`` sleeps S seconds at each write point, so that a SIGKILL sent at a random
moment lands inside the transaction as often as outside it."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

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


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durable(path: str, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back while a commit writes: a handler that raises (Ctrl-C, a bisect told to
    stop) runs once the commit is whole — never between its commit point and its clean-up, which would leave
    a transaction's backups behind. Python runs handlers in the main thread, whichever thread the signal came
    to: the handlers are swapped for one that notes the signal, and each noted one is raised again, to the
    handlers put back, at the end. SIGKILL cannot be held back: the journal is for that. Off the main thread
    (where no handler can be set) nothing is held."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    held = {s: h for s in (signal.SIGINT, signal.SIGTERM) if (h := signal.getsignal(s)) is not None}
    for s in held:
        signal.signal(s, lambda signum, _frame: noted.append(signum))
    try:
        yield
    finally:
        for s, handler in held.items():
            signal.signal(s, handler)
        for signum in dict.fromkeys(noted):
            signal.raise_signal(signum)
