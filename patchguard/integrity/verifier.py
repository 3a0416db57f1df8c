"""Verify installed files against their RECORD hashes: size first, then hash, in parallel.

The expensive part of a scan is reading bytes, so it is done once per file at most, never for a file whose
size already differs, and never for a file the stat cache vouches for. On a warm scan each file is stat'ed
as it is added and its stat key compared with the one remembered (all of a distribution's keys at once);
nothing else happens for an unchanged file. Everything else is hashed in the background, largest first,
while the caller goes on parsing RECORDs and walking directories: by threads while the work is small, by
helper processes of :mod:`patchguard.integrity.hashing` once it is large (a cold scan), since opening and
reading tens of thousands of small files does not scale across threads that share the GIL with the caller.
Files are read in bounded chunks; a large ``.so`` is never held in memory whole.

This module only knows paths and digests; what a mismatch *means* is decided by
:mod:`patchguard.integrity.inventory`.
"""

from __future__ import annotations

import collections
import contextlib
import enum
import errno
import os
import queue
import signal
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, NamedTuple

from .cache import is_racy, pack_key, pack_key_size, settled_before
from .hashing import (
    DIR_FD,
    DIR_FLAGS,
    SMALL,
    digest_length,
    read_exactly,
    read_frame,
    serve,
    verify_batch,
    write_frame,
)
from .records import Check as CheckTuple

if TYPE_CHECKING:
    import subprocess

    from .hashing import Result

__all__ = ["KEY_SIZE", "NO_KEY", "Check", "Outcome", "Status", "Verification", "Verifier"]

_BATCH = 128  # small files per task handed to a worker
_DEPTH = 3  # batches in flight per helper process, so it never waits for this process to send the next
# Pending work from which hashing moves to helper processes: below it, starting them costs more than it saves.
_HELPER_FILES = 1000
_HELPER_BYTES = 64 << 20
_PARALLEL_STAT = 4000  # deferred stat keys from which half are taken by a forked helper (start_stats)


class Status(enum.Enum):
    MODIFIED = "modified"
    MISSING = "missing"
    UNREADABLE = "unreadable"


class Check(NamedTuple):
    """A file to verify: where it is, and what RECORD says it must be (digest as unpadded base64)."""

    path: str
    algorithm: str
    digest: str
    size: int | None


@dataclass(frozen=True, slots=True)
class Outcome:
    """A file that did not verify. ``actual_size`` for modified files, ``reason`` for unreadable ones."""

    check: Check
    status: Status
    tag: object = None  # whatever the caller passed with the check (the inventory: its distribution)
    actual_size: int | None = None
    reason: str | None = None


@dataclass
class Verification:
    """What verifying a set of files found.

    ``failures``: the files that are not as RECORD says, in the order of the checks. ``known``: for each tag
    (by ``id``) whose files were read or changed since what the caller remembered, what to remember now:
    ``(keys, odd)`` as :meth:`Verifier.add` takes them. ``hashed``: how many files had their bytes read
    (zero on a warm re-scan of an unchanged environment).
    """

    failures: list[Outcome] = field(default_factory=list)
    known: dict[int, tuple[bytes, dict[int, str]]] = field(default_factory=dict)
    hashed: int = 0


def _unreadable(c: Check, reason: str, tag: object) -> Outcome:
    return Outcome(c, Status.UNREADABLE, tag, reason=reason)


def _error_outcome(c: Check, err: int, message: str, tag: object) -> Outcome:
    if err == errno.ENOENT:
        if os.path.islink(c.path):
            return _unreadable(c, "broken symlink", tag)
        return Outcome(c, Status.MISSING, tag)
    if err in (errno.EACCES, errno.EPERM):
        return _unreadable(c, "permission denied", tag)
    return _unreadable(c, message, tag)


def default_workers() -> int:
    """One hashing thread per core: hashing is CPU-bound once files are in the page cache."""
    return max(1, min(16, os.cpu_count() or 1))


class _Helper:
    """A hashing helper process fed by one thread and read by another.

    :meth:`submit` sends a batch (at most ``depth`` are in flight, so the helper never waits for this
    process to send the next one); a reader thread receives the results in order and appends them to
    ``done``. Its own thread keeps the results pipe drained, so neither side can block the other on a full
    pipe. If the helper dies or answers nonsense, the batches it still held are hashed by the reader
    thread and :meth:`submit` returns ``False`` from then on (the caller hashes in-process).
    """

    def __init__(
        self,
        process: tuple[int, int, int | subprocess.Popen[bytes]],
        done: list[tuple[list[_Work], list[Result]]],
        depth: int,
        abort: threading.Event,
    ) -> None:
        self._in, self._out, self._proc = process
        self._done = done
        self._abort = abort
        self._depth = depth
        self._slots = threading.Semaphore(depth)
        self._lock = threading.Lock()
        self._inflight: collections.deque[list[_Work]] = collections.deque()
        self._failed = False
        self._reader = threading.Thread(target=self._read, name="patchguard-hash-reader", daemon=True)
        self._reader.start()

    def submit(self, work: list[_Work]) -> bool:
        """Hand ``work`` to the helper; ``False`` once it has failed (then the caller hashes it)."""
        self._slots.acquire()
        with self._lock:
            if self._failed:
                self._slots.release()  # keep the slot free for the next caller, who will see this too
                return False
            self._inflight.append(work)
        try:
            write_frame(self._in, _batch_of(work))
        except OSError:
            self._kill()  # the reader sees the end of the stream and hashes what was in flight
        return True

    def _kill(self) -> None:
        if isinstance(self._proc, int):
            with contextlib.suppress(OSError):
                os.kill(self._proc, signal.SIGKILL)
        else:
            self._proc.kill()

    def _read(self) -> None:
        try:
            while True:
                results = read_frame(self._out)
                with self._lock:
                    if not isinstance(results, list) or len(results) != len(self._inflight[0]):
                        raise ValueError("malformed reply")  # what it held is hashed below
                    work = self._inflight.popleft()
                self._done.append((work, results))
                self._slots.release()
        except Exception:  # whatever ends the stream (exit, death, nonsense) ends it the same way
            pass
        with self._lock:
            self._failed = True
            leftovers = list(self._inflight)
            self._inflight.clear()
        try:
            if leftovers:
                self._kill()
            for work in leftovers if not self._abort.is_set() else ():
                self._done.append((work, verify_batch(_batch_of(work))))
        finally:  # wake a submit() waiting for a slot: it sees the failure (Verifier.finish redoes the rest)
            self._slots.release(self._depth + 1)

    def close(self) -> None:
        """Let the helper finish what it holds (its reader drains the answers), then end it."""
        _end_process((self._in, self._out, self._proc), then=self._reader.join)


def _single_threaded() -> bool:
    """Whether this process has one thread only (then forking it is safe: no lock can be held)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _start_helpers(n: int) -> list[tuple[int, int, int | subprocess.Popen[bytes]]]:
    """Start up to ``n`` helper processes: ``(requests fd, replies fd, pid or Popen)`` each.

    Forked where this process is single-threaded on Linux (no interpreter start-up, nothing imported
    again), else started as ``python -I -S hashing.py``. Fewer (or none) where that fails.
    """
    started: list[tuple[int, int, int | subprocess.Popen[bytes]]] = []
    try:
        return _start(n, started)
    except BaseException:  # Ctrl-C while starting them: none may outlive the scan
        for process in started:
            _end_process(process)
        raise


def _end_process(
    process: tuple[int, int, int | subprocess.Popen[bytes]], then: Callable[[], object] | None = None
) -> None:
    """Close a helper's requests (it exits at the end of its input), run ``then`` (a reader draining its
    answers), close its replies and wait for it."""
    requests, replies, proc = process

    def shut(fd: int, stream: IO[bytes] | None) -> None:
        with contextlib.suppress(OSError):
            if isinstance(proc, int):
                os.close(fd)
            elif stream is not None:
                stream.close()

    shut(requests, None if isinstance(proc, int) else proc.stdin)
    if then is not None:
        then()
    shut(replies, None if isinstance(proc, int) else proc.stdout)
    if isinstance(proc, int):
        with contextlib.suppress(OSError):
            os.waitpid(proc, 0)
    else:
        proc.wait()


def _start(
    n: int, started: list[tuple[int, int, int | subprocess.Popen[bytes]]]
) -> list[tuple[int, int, int | subprocess.Popen[bytes]]]:
    if sys.platform == "linux" and hasattr(os, "fork") and _single_threaded():
        return _forked(n, started)
    import subprocess  # here: a scan that starts no helper does not import it

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hashing.py")
    if not sys.executable or not os.path.isfile(script):
        return started
    for _ in range(n):
        try:
            # The same file-name encoding as this process: -I ignores PYTHONUTF8, so UTF-8 mode is passed on.
            utf8 = ["-X", "utf8"] if sys.flags.utf8_mode else []
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", *utf8, script],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                bufsize=0,
            )
        except OSError:
            break
        assert proc.stdin is not None and proc.stdout is not None
        started.append((proc.stdin.fileno(), proc.stdout.fileno(), proc))
    return started


def _forked(
    n: int, started: list[tuple[int, int, int | subprocess.Popen[bytes]]]
) -> list[tuple[int, int, int | subprocess.Popen[bytes]]]:
    """``n`` helpers forked from this (single-threaded) process, each serving over a pair of pipes."""
    for _ in range(n):
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            for fd in (req_r, req_w, rep_r, rep_w):
                os.close(fd)
            break
        if pid == 0:  # the helper: serve, then leave without running anything of the parent's
            try:
                for fd in (req_w, rep_r, *(f for h in started for f in h[:2])):
                    os.close(fd)
                serve(req_r, rep_w)
            finally:
                os._exit(0)
        os.close(req_r)
        os.close(rep_w)
        started.append((req_w, rep_r, pid))
    return started


KEY_SIZE = pack_key_size
NO_KEY = bytes(KEY_SIZE)  # "no stat key remembered": matches no file (real files have an inode)


@dataclass(frozen=True, slots=True)
class _Added:
    """What one :meth:`Verifier.add` was given: checks ``base`` to ``base + len(paths)``."""

    tag: object
    base: int
    paths: Sequence[str]
    keys: bytes | None  # what was remembered (None: nothing, every file is hashed)
    odd: Mapping[int, str]
    checks: Callable[[], Sequence[CheckTuple]]
    root: tuple[int, str]  # open descriptor of the files' directory (-1: none) and its path prefix


# A file to hash: (sequence number, check, caller's tag).
_Work = tuple[int, "CheckTuple", object]  # a Check or a plain tuple: a Check is built only for a failure


def _batch_of(work: list[_Work]) -> list[tuple[str, str, int, int]]:
    return [(c[0], c[1], -1 if c[3] is None else c[3], digest_length(c[2])) for _, c, _ in work]


class Verifier:
    """Verifies files as they are added, hashing in the background while the caller goes on.

    A file with nothing remembered is queued for hashing at once, largest first (longest-processing-time-
    first), so the one huge ``.so`` that bounds the wall time starts as soon as it is seen; the hashing
    side stats, opens and reads it. With remembered stat keys (a warm scan) the files are stat'ed once
    everything is added (:meth:`start_stats`, :meth:`finish`), and missing files, size mismatches and
    unchanged files end there without a byte read. :meth:`finish` waits and returns the
    :class:`Verification`.

    Hashing runs in one thread per core. Once the pending work is large (a cold scan), each thread hands
    its batches to a helper process of its own (:mod:`patchguard.integrity.hashing`): ``hashlib`` releases the
    GIL, but opening and reading tens of thousands of small files does not scale across threads that
    share it with the caller's RECORD parsing, and processes share nothing. Where no helper can be
    started, the thread hashes itself. ``processes``: ``None`` decides by the pending work, ``False``
    never starts helpers, ``True`` always does.
    """

    def __init__(self, *, workers: int | None = None, processes: bool | None = None) -> None:
        self._workers = workers or default_workers()
        self._processes = processes
        self._now_ns = time.time_ns()
        self._failures: dict[int, Outcome] = {}
        self._count = 0
        self._keys: list[bytes] = []  # per check, the packed stat key to remember (NO_KEY: nothing)
        self._odd: dict[int, str] = {}  # per check whose digest is not RECORD's: the digest
        self._added: list[_Added] = []
        self._batch: list[_Work] = []
        self._batch_bytes = 0
        self._queue: queue.PriorityQueue[tuple[int, int, list[_Work]]] = queue.PriorityQueue()
        self._seq = 0
        self._threads: list[threading.Thread] = []
        self._done: list[tuple[list[_Work], list[Result]]] = []
        self._queued = 0
        self._queued_bytes = 0
        self._abort = threading.Event()
        self._roots: dict[str, tuple[int, str]] = {}
        self._submitted: list[list[_Work]] = []  # every batch handed over, to check each got its results
        self._pending: list[_Added] = []  # added warm, stat keys not taken yet (start_stats, finish)
        self._stat_child: tuple[int, int, int, int] | None = None  # (pid, pipe, first file, files)

    def add(
        self,
        checks: Sequence[CheckTuple] | Callable[[], Sequence[CheckTuple]],
        tag: object = None,
        keys: bytes | None = None,
        odd: Mapping[int, str] | None = None,
        *,
        paths: Sequence[str] | None = None,
        root: str | None = None,
    ) -> None:
        """Verify ``checks`` (``tag`` comes back on their failures).

        A check is a :class:`Check` or a plain ``(path, algorithm, digest, size)`` tuple. ``keys`` and ``odd``
        are what :class:`Verification` said to remember for the same checks last time: the packed stat key
        each file had when it was hashed (:data:`KEY_SIZE` bytes per check, :data:`NO_KEY` where none) and,
        by check index, the digests that were not RECORD's. A file whose stat key is unchanged is not read
        again. Without ``keys`` nothing is stat'ed here: the hashing side opens, fstats and reads each file.

        ``checks`` may be a function returning them, with ``paths`` (the checks' paths, in order): it is
        called only if some file needs more than a stat (a warm scan of an unchanged environment never
        builds the checks of its files). ``root``: the directory most of the files are in (site-packages).
        """
        given = checks
        get: Callable[[], Sequence[CheckTuple]] = given if callable(given) else lambda: given
        if paths is None:
            paths = [t[0] for t in get()]
        base, n = self._count, len(paths)
        self._count += n
        added = _Added(tag, base, paths, keys, odd or {}, get, self._root(root))
        self._added.append(added)
        self._keys.extend([NO_KEY] * n)  # filled in as stat keys are taken and files hashed
        if keys is None:
            batch, submit = self._batch, self._submit
            for j, t in enumerate(get(), start=base):  # inline _queue_work: once per file of a cold scan
                size = t[3] or 0
                if size > SMALL:
                    submit([(j, t, tag)], size)
                    continue
                batch.append((j, t, tag))
                self._batch_bytes += size
                if len(batch) >= _BATCH:
                    self._flush()
                    batch = self._batch
            return
        # Warm: the stat keys are taken once every distribution is added (start_stats, finish): with many
        # files, half of them by a forked helper while this process takes the other half.
        self._pending.append(added)

    def _stat_range(self, lo: int, hi: int) -> list[bytes]:
        """Packed stat keys of the deferred files ``lo`` to ``hi`` (counted across distributions, in order).

        This loop runs once per installed file on every warm scan: one stat and one pack each. Files below a
        distribution's root are stat'ed by their name relative to its open descriptor: the kernel then
        resolves a few path components instead of the whole site-packages path, every time.
        """
        stat_, pack = os.stat, pack_key
        now: list[bytes] = []
        append = now.append
        start = 0
        for added in self._pending:
            paths, (root_fd, prefix) = added.paths, added.root
            end = start + len(paths)
            if end > lo and start < hi:
                cut = len(prefix)
                for path in paths[max(lo - start, 0) : min(hi, end) - start]:
                    try:
                        if root_fd >= 0 and path.startswith(prefix):
                            st = stat_(path[cut:], dir_fd=root_fd)
                        else:
                            st = stat_(path)
                    except OSError:
                        append(NO_KEY)
                        continue
                    append(pack(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev))
            start = end
        return now

    def start_stats(self) -> None:
        """Have a forked helper start on half of the deferred stat keys (many files, Linux, one thread).

        ``stat`` is a system call per file: on a warm scan of 20k files it is most of the work, and two
        processes take it in half the time. :meth:`finish` takes the rest, and all of it if no helper ran.
        """
        total = sum(len(a.paths) for a in self._pending)
        if (
            self._stat_child is not None
            or total < _PARALLEL_STAT
            or self._threads
            or sys.platform != "linux"
            or not hasattr(os, "fork")
            or not _single_threaded()
        ):
            return
        half = total // 2
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return
        if pid == 0:  # the helper: take the second half, hand it over, leave without running anything else
            try:
                os.close(r)
                view = memoryview(b"".join(self._stat_range(half, total)))
                while view:
                    view = view[os.write(w, view) :]
            finally:
                os._exit(0)
        os.close(w)
        self._stat_child = (pid, r, half, total)

    def _settle_stats(self) -> None:
        """Take (or collect) the deferred stat keys and settle each distribution as :meth:`add` describes."""
        if not self._pending:
            return
        total = sum(len(a.paths) for a in self._pending)
        child, self._stat_child = self._stat_child, None
        half = child[2] if child is not None else total
        now = self._stat_range(0, half)
        if child is not None:
            pid, r, _, _ = child
            try:
                blob = read_exactly(r, (total - half) * KEY_SIZE)
                now += [blob[k : k + KEY_SIZE] for k in range(0, len(blob), KEY_SIZE)]
            except (OSError, EOFError):  # the helper died: take its half here
                now += self._stat_range(half, total)
            finally:
                os.close(r)
                with contextlib.suppress(OSError):
                    os.waitpid(pid, 0)
        pending, self._pending = self._pending, []
        start = 0
        for a in pending:
            mine = now[start : start + len(a.paths)]
            start += len(a.paths)
            self._keys[a.base : a.base + len(mine)] = mine
            if b"".join(mine) != a.keys or NO_KEY in mine:
                self._changed(a.checks(), a.tag, a.base, mine, a.keys or b"", a.odd)
                continue
            if a.odd:
                all_checks = a.checks()
                for j, digest in a.odd.items():
                    self._odd[a.base + j] = digest
                    c = Check._make(all_checks[j])
                    self._failures[a.base + j] = Outcome(c, Status.MODIFIED, a.tag, actual_size=c.size)

    def _changed(
        self,
        checks: Sequence[CheckTuple],
        tag: object,
        base: int,
        now: list[bytes],
        keys: bytes,
        odd: Mapping[int, str],
    ) -> None:
        """Settle, file by file, the checks of a distribution whose stat keys are not all as remembered."""
        for j, t in enumerate(checks):
            i = base + j
            key = now[j]
            c = Check._make(t)
            if key != NO_KEY and key == keys[j * KEY_SIZE : (j + 1) * KEY_SIZE]:
                if j in odd:
                    self._odd[i] = odd[j]
                    self._failures[i] = Outcome(c, Status.MODIFIED, tag, actual_size=c.size)
                continue
            self._keys[i] = NO_KEY
            try:
                st = os.stat(c.path)
            except OSError as exc:
                self._failures[i] = _error_outcome(c, exc.errno or 0, exc.strerror or "", tag)
                continue
            if not stat.S_ISREG(st.st_mode):
                self._failures[i] = _unreadable(c, "not a regular file", tag)
            elif c.size is not None and st.st_size != c.size:
                self._failures[i] = Outcome(c, Status.MODIFIED, tag, actual_size=st.st_size)
            else:
                self._queue_work((i, t, tag), st.st_size)

    def _root(self, root: str | None) -> tuple[int, str]:
        """An open descriptor of ``root`` (-1 where there is none) and the prefix of the paths below it."""
        if root is None or not DIR_FD:
            return -1, "\0"
        got = self._roots.get(root)
        if got is None:
            try:
                fd = os.open(root, DIR_FLAGS)
            except OSError:
                fd = -1
            got = self._roots[root] = (fd, os.path.join(root, ""))
        return got

    def _queue_work(self, work: _Work, size: int) -> None:
        if size > SMALL:
            self._submit([work], size)
        else:
            self._batch.append(work)
            self._batch_bytes += size
            if len(self._batch) >= _BATCH:
                self._flush()

    def _flush(self) -> None:
        if self._batch:
            self._submit(self._batch, self._batch_bytes)
            self._batch, self._batch_bytes = [], 0

    def _submit(self, work: list[_Work], weight: int) -> None:
        self._seq += 1
        self._queued += len(work)
        self._queued_bytes += weight
        self._submitted.append(work)
        if self._workers <= 1:
            self._done.append((work, verify_batch(_batch_of(work))))
            return
        self._queue.put((-weight, self._seq, work))
        if not self._threads and self._want_helpers():
            self._start(helpers=True)

    def _want_helpers(self) -> bool:
        if self._processes is not None:
            return self._processes
        return self._queued >= _HELPER_FILES or self._queued_bytes >= _HELPER_BYTES

    def _start(self, helpers: bool) -> None:
        """Start the hashing threads (and first their helper processes: forking wants a single thread).

        Nothing starts while the pending work is small: a warm scan with a few changed files hashes them
        in :meth:`finish` without starting any process.
        """
        processes = _start_helpers(self._workers) if helpers else []
        for n in range(self._workers):
            process = processes[n] if n < len(processes) else None
            t = threading.Thread(target=self._work, args=(process,), name=f"patchguard-hash-{n}", daemon=True)
            t.start()
            self._threads.append(t)

    def _start_pending(self) -> None:
        if not self._threads and not self._queue.empty():
            self._start(helpers=self._want_helpers())

    def _work(self, process: tuple[int, int, int | subprocess.Popen[bytes]] | None) -> None:
        helper = None
        if process is not None:
            try:
                helper = _Helper(process, self._done, _DEPTH, self._abort)
            except Exception:  # no reader thread (a thread limit): this thread hashes instead
                _end_process(process)
        try:
            while True:
                _, _, work = self._queue.get()
                if not work:  # sentinel
                    return
                try:
                    if helper is None or not helper.submit(work):
                        self._done.append((work, verify_batch(_batch_of(work))))
                except Exception:  # the batch stays unanswered: finish() hashes it again
                    continue
        finally:
            if helper is not None:
                helper.close()

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(abort=exc_type is not None)

    def close(self, *, abort: bool = False) -> None:
        """Stop the threads after the work queued so far, or at once with ``abort`` (an error, Ctrl-C: the
        work not yet started is dropped, helpers are not replaced); safe to call more than once."""
        if self._stat_child is not None:  # never collected (an error before finish): end it
            pid, r, _, _ = self._stat_child
            self._stat_child = None
            os.close(r)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        if abort:
            self._abort.set()
            self._batch = []
            with contextlib.suppress(queue.Empty):
                while True:
                    self._queue.get_nowait()
        else:
            self._flush()
            self._start_pending()
        for _ in self._threads:
            self._queue.put((1, 0, []))  # sorts after all real work
        for t in self._threads:
            t.join()
        self._threads = []
        for fd, _ in self._roots.values():
            if fd >= 0:
                os.close(fd)
        self._roots.clear()

    def finish(self, progress: Callable[[int, int], None] | None = None) -> Verification:
        """Wait for the hashing threads; every added file has its verdict after this."""
        self._wait(progress)
        result = Verification()
        self._collect(result)
        keys, odd = self._keys, self._odd
        for a in self._added:
            base, n = a.base, len(a.paths)
            now = b"".join(keys[base : base + n])
            now_odd = {i - base: d for i, d in odd.items() if base <= i < base + n} if odd else {}
            if now != a.keys or now_odd != a.odd:
                result.known[id(a.tag)] = (now, now_odd)
        result.failures = [self._failures[i] for i in sorted(self._failures)]
        return result

    def _wait(self, progress: Callable[[int, int], None] | None) -> None:
        """Queue what is left, wait for the threads and stop them: every submitted batch has results after."""
        self._settle_stats()
        self._flush()
        self._start_pending()
        total = self._count
        if progress:
            while self._threads and (n_done := sum(len(w) for w, _ in self._done)) < self._queued:
                progress(total - self._queued + n_done, total)
                time.sleep(0.1)
            progress(total, total)
        self.close()
        answered = {id(work) for work, _ in self._done}
        for work in self._submitted:  # a thread that died left its batch unanswered: never a silent pass
            if id(work) not in answered:
                self._done.append((work, verify_batch(_batch_of(work))))

    def _collect(self, result: Verification) -> None:
        """Turn every hashing result into its failure, stat key and odd digest; counts them in ``result``."""
        # This loop runs once per hashed file (every file of a cold scan): its body stays inline.
        failures, keys, odd, now_ns = self._failures, self._keys, self._odd, self._now_ns
        settled = settled_before(now_ns)
        for work, results in self._done:
            for (i, t, tag), got in zip(work, results, strict=True):
                for trusted in (False, True):
                    try:  # a helper's answer is checked by using it: a malformed one is redone here
                        code = got[0]
                        if code == "h":
                            _, digest, key = got
                            packed = pack_key(*key)
                            if not isinstance(digest, str):
                                raise TypeError(digest)
                            result.hashed += 1
                            if max(key[1], key[2]) < settled or not is_racy(key[1], key[2], now_ns):
                                keys[i] = packed
                            if digest != t[2]:
                                odd[i] = digest
                                failures[i] = Outcome(
                                    Check._make(t), Status.MODIFIED, tag, actual_size=key[0]
                                )
                        elif code == "s" or code == "n":
                            size = int(got[1][0])
                            if code == "s":
                                failures[i] = Outcome(Check._make(t), Status.MODIFIED, tag, actual_size=size)
                            else:
                                failures[i] = _unreadable(Check._make(t), "not a regular file", tag)
                        elif code == "e":
                            failures[i] = _error_outcome(Check._make(t), int(got[1]), str(got[2]), tag)
                        else:
                            raise ValueError(code)
                        break
                    except (TypeError, ValueError, IndexError, struct.error):
                        if trusted:
                            raise
                        got = verify_batch(_batch_of([(i, t, tag)]))[0]
