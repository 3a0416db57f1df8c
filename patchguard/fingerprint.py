"""Verify installed files against their RECORD hashes: size first, then hash, in parallel.

The expensive part of a scan is reading bytes, so it is done once per file at most, never for a file whose
size already differs, and never for a file the stat cache vouches for. Each file is stat'ed in the calling
thread as it is added: missing files, size mismatches and stat-cache hits are settled there without
reading a byte. The files left are hashed by background threads (``hashlib`` and file reads release the
GIL, so threads scale across cores without the start-up cost of processes), largest first, while the
caller goes on parsing RECORDs and walking directories. Files are read in bounded chunks; a large ``.so``
is never held in memory whole.

This module only knows paths and digests; what a mismatch *means* is decided by :mod:`patchguard.scanner`.
"""

from __future__ import annotations

import enum
import hashlib
import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .cache import CachedDigest, StatKey, is_racy, pack_key
from .records import b64_digest

__all__ = ["Check", "Outcome", "Status", "Verification", "Verifier", "hash_file"]

_SMALL = 4 << 20  # files up to this size are read with one call
_CHUNK = 1 << 20  # streaming buffer for larger files, one per thread
_BATCH = 128  # small files per task handed to a worker
_local = threading.local()


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
    tag: object = None  # whatever the caller passed with the check (the scanner: its distribution)
    actual_size: int | None = None
    reason: str | None = None


@dataclass
class Verification:
    """What verifying a set of files found.

    ``failures``: the files that are not as RECORD says, in the order of the checks. ``digests``: for every
    file whose digest is known and not racily clean, what the stat cache may remember. ``rehashed_tags``: the
    tags (by ``id``) of checks that were read, i.e. whose remembered digests changed. ``hashed``: how many
    files had their bytes read (zero on a warm re-scan of an unchanged environment).
    """

    failures: list[Outcome] = field(default_factory=list)
    digests: dict[str, CachedDigest] = field(default_factory=dict)
    hashed: int = 0
    rehashed_tags: set[int] = field(default_factory=set)


def hash_file(path: str, algorithm: str, length: int = 0, size_hint: int = -1) -> bytes:
    """Digest of a file's bytes, read in bounded chunks (memory stays bounded for any file size).

    A file up to 4 MiB (``size_hint`` from a previous stat) is read with one system call; larger ones are
    streamed through a 1 MiB buffer reused by the calling thread, small enough to stay in the CPU cache
    between the read and the hash. ``length`` is the digest size of the ``shake_*`` algorithms.
    """
    h = hashlib.new(algorithm)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        if 0 <= size_hint <= _SMALL:
            data = os.read(fd, size_hint + 1)
            h.update(data)
            if len(data) > size_hint:  # grew since it was stat'ed: hash the rest too
                _stream(fd, h)
        else:
            _stream(fd, h)
    finally:
        os.close(fd)
    if algorithm.startswith("shake_"):
        return h.digest(length)  # type: ignore[call-arg]
    return h.digest()


def _stream(fd: int, h: Any) -> None:
    buf: bytearray | None = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = bytearray(_CHUNK)
    view = memoryview(buf)
    with open(fd, "rb", buffering=0, closefd=False) as f:
        while n := f.readinto(buf):
            h.update(view[:n])


def _hash_batch(batch: Sequence[tuple[Check, StatKey]]) -> list[str | OSError]:
    out: list[str | OSError] = []
    for c, key in batch:
        try:
            out.append(b64_digest(hash_file(c.path, c.algorithm, len(c.digest) * 6 // 8, key[0])))
        except OSError as exc:
            out.append(exc)
    return out


def _unreadable(c: Check, exc: OSError, tag: object) -> Outcome:
    reason = "permission denied" if isinstance(exc, PermissionError) else (exc.strerror or str(exc))
    return Outcome(c, Status.UNREADABLE, tag, reason=reason)


def _stat_failure(c: Check, exc: OSError, tag: object) -> Outcome:
    if isinstance(exc, FileNotFoundError):
        if os.path.islink(c.path):
            return Outcome(c, Status.UNREADABLE, tag, reason="broken symlink")
        return Outcome(c, Status.MISSING, tag)
    return _unreadable(c, exc, tag)


def default_workers() -> int:
    """One hashing thread per core: hashing is CPU-bound once files are in the page cache."""
    return max(1, min(16, os.cpu_count() or 1))


# A file to hash: (sequence number, check, stat key it was seen with, caller's tag).
_Work = tuple[int, Check, StatKey, object]


class Verifier:
    """Verifies files as they are added, hashing in background threads while the caller goes on.

    :meth:`add` stats a file at once (missing files, size mismatches and stat-cache hits are settled
    without reading a byte) and queues the rest for hashing. The caller can keep parsing the next RECORD
    while the threads hash: the largest queued work is taken first (longest-processing-time-first), so the
    one huge ``.so`` that bounds the wall time starts as soon as it is seen. :meth:`finish` waits and
    returns the :class:`Verification`. Threads start only once there is something to hash.
    """

    def __init__(self, *, workers: int | None = None) -> None:
        self._workers = workers or default_workers()
        self._now_ns = time.time_ns()
        self._failures: dict[int, Outcome] = {}
        self._digests: dict[str, CachedDigest] = {}
        self._count = 0
        self._batch: list[_Work] = []
        self._batch_bytes = 0
        self._queue: queue.PriorityQueue[tuple[int, int, list[_Work]]] = queue.PriorityQueue()
        self._seq = 0
        self._threads: list[threading.Thread] = []
        self._done: list[tuple[list[_Work], list[str | OSError]]] = []
        self._queued = 0

    def add(
        self,
        checks: Iterable[tuple[str, str, str, int | None]],
        tag: object = None,
        remembered: Mapping[str, CachedDigest] = {},
    ) -> None:
        """Verify ``checks`` (``tag`` comes back on their failures); ``remembered``: cached digests by path.

        A check is a :class:`Check` or a plain ``(path, algorithm, digest, size)`` tuple. This loop runs once
        per installed file on every scan, warm or cold: it is kept flat on purpose (no object is built for a
        file the stat cache vouches for).
        """
        stat_, isreg, pack = os.stat, stat.S_ISREG, pack_key
        get = remembered.get
        digests = self._digests
        i = self._count
        for t in checks:
            i += 1
            path, algorithm, digest, expected_size = t
            try:
                st = stat_(path)
            except OSError as exc:
                self._failures[i] = _stat_failure(Check._make(t), exc, tag)
                continue
            if not isreg(st.st_mode):
                bad = Check._make(t)
                self._failures[i] = Outcome(bad, Status.UNREADABLE, tag, reason="not a regular file")
                continue
            size = st.st_size
            if expected_size is not None and size != expected_size:
                self._failures[i] = Outcome(Check._make(t), Status.MODIFIED, tag, actual_size=size)
                continue
            known = get(path)
            if (
                known is not None
                and known[0] == pack(size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
                and known[1] == algorithm
            ):
                digests[path] = known
                if known[2] != digest:
                    self._failures[i] = Outcome(Check._make(t), Status.MODIFIED, tag, actual_size=size)
                continue
            key: StatKey = (size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
            c = Check._make(t)
            if size > _SMALL:
                self._submit([(i, c, key, tag)], size)
            else:
                self._batch.append((i, c, key, tag))
                self._batch_bytes += size
                if len(self._batch) >= _BATCH:
                    self._flush()
        self._count = i

    def _flush(self) -> None:
        if self._batch:
            self._submit(self._batch, self._batch_bytes)
            self._batch, self._batch_bytes = [], 0

    def _submit(self, work: list[_Work], weight: int) -> None:
        if not self._threads and self._workers > 1:
            for n in range(self._workers):
                t = threading.Thread(target=self._work, name=f"patchguard-hash-{n}", daemon=True)
                t.start()
                self._threads.append(t)
        self._seq += 1
        self._queued += len(work)
        if self._threads:
            self._queue.put((-weight, self._seq, work))
        else:
            self._done.append((work, _hash_batch([(c, k) for _, c, k, _ in work])))

    def _work(self) -> None:
        while True:
            _, _, work = self._queue.get()
            if not work:  # sentinel
                return
            self._done.append((work, _hash_batch([(c, k) for _, c, k, _ in work])))

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the threads (after the work queued so far); safe to call more than once."""
        self._flush()
        for _ in self._threads:
            self._queue.put((1, 0, []))  # sorts after all real work
        for t in self._threads:
            t.join()
        self._threads = []

    def finish(self, progress: Callable[[int, int], None] | None = None) -> Verification:
        """Wait for the hashing threads; every added file has its verdict after this."""
        self._flush()
        total = self._count
        if progress:
            while self._threads and (n_done := sum(len(w) for w, _ in self._done)) < self._queued:
                progress(total - self._queued + n_done, total)
                time.sleep(0.1)
            progress(total, total)
        self.close()
        result = Verification(digests=self._digests, hashed=self._queued)
        for work, hashed in self._done:
            for (i, c, key, tag), got in zip(work, hashed, strict=True):
                result.rehashed_tags.add(id(tag))
                if isinstance(got, OSError):
                    self._failures[i] = _unreadable(c, got, tag)
                    continue
                if not is_racy(key[1], key[2], self._now_ns):
                    self._digests[c.path] = (pack_key(*key), c.algorithm, got)
                if got != c.digest:
                    self._failures[i] = Outcome(c, Status.MODIFIED, tag, actual_size=key[0])
        result.failures = [self._failures[i] for i in sorted(self._failures)]
        return result
