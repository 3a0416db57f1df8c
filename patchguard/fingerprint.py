"""Verify installed files against their RECORD hashes: size first, then hash, in parallel.

The expensive part of a scan is reading bytes, so it is done once per file at most, never for a file whose
size already differs, and never for a file the stat cache vouches for. Hashing runs in a thread pool:
``hashlib`` and file reads release the GIL, so threads scale across cores without the start-up cost of
processes. Files are streamed in bounded chunks; a large ``.so`` is never held in memory whole.

This module only knows paths and digests; what a mismatch *means* is decided by :mod:`patchguard.scan`.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .cache import CachedDigest, StatKey, is_racy

__all__ = ["Check", "Outcome", "Status", "hash_file", "verify"]

_SMALL = 4 << 20  # files up to this size are read in one call
_CHUNK = 16 << 20  # streaming buffer for larger files, one per thread
_BATCH = 64  # small files per task handed to a worker
_local = threading.local()


class Status(enum.Enum):
    OK = "ok"
    MODIFIED = "modified"
    MISSING = "missing"
    UNREADABLE = "unreadable"


@dataclass(frozen=True, slots=True)
class Check:
    """A file to verify: where it is, and what RECORD says it must be."""

    path: str
    algorithm: str
    digest: str  # urlsafe base64, unpadded, as in RECORD
    size: int | None


@dataclass(frozen=True, slots=True)
class Outcome:
    """The verdict on one :class:`Check`.

    ``actual_size`` is set for ``MODIFIED`` files; ``reason`` for ``UNREADABLE`` ones (``permission
    denied``, ``not a regular file``, ``broken symlink``). ``cached`` is what to remember in the stat cache
    (``None`` when the file was not hashed or is racily clean); ``hashed`` says whether bytes were read.
    """

    check: Check
    status: Status
    actual_size: int | None = None
    reason: str | None = None
    cached: CachedDigest | None = None
    hashed: bool = False


def hash_file(path: str, algorithm: str, length: int = 0, size_hint: int = -1) -> bytes:
    """Digest of a file's bytes, read in bounded chunks (memory stays bounded for any file size).

    Small files are read with one system call. Large ones are streamed through a 16 MiB buffer reused by
    the calling thread: few, long GIL-free calls, so a thread hashing ``libtorch_cpu.so`` does not queue
    for the GIL behind threads busy with small files after every megabyte. ``length`` is the digest size
    of the variable-length ``shake_*`` algorithms.
    """
    h = hashlib.new(algorithm)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        if 0 <= size_hint <= _SMALL:
            data = os.read(fd, size_hint + 1)
            h.update(data)
            if len(data) > size_hint:  # grew since stat: hash the rest too
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


def _b64(d: bytes) -> str:
    return base64.urlsafe_b64encode(d).rstrip(b"=").decode("ascii")


def _stat_check(c: Check, remembered: CachedDigest | None) -> Outcome | StatKey:
    """Everything short of reading bytes: an Outcome when stat settles it, else the key to hash under."""
    try:
        st = os.stat(c.path)
    except FileNotFoundError:
        if os.path.islink(c.path):
            return Outcome(c, Status.UNREADABLE, reason="broken symlink")
        return Outcome(c, Status.MISSING)
    except PermissionError:
        return Outcome(c, Status.UNREADABLE, reason="permission denied")
    except OSError as exc:
        return Outcome(c, Status.UNREADABLE, reason=exc.strerror or str(exc))
    if not stat.S_ISREG(st.st_mode):
        return Outcome(c, Status.UNREADABLE, reason="not a regular file")
    if c.size is not None and st.st_size != c.size:
        return Outcome(c, Status.MODIFIED, actual_size=st.st_size)
    key: StatKey = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
    if remembered is not None and remembered[0] == key and remembered[1] == c.algorithm:
        if remembered[2] == c.digest:
            return Outcome(c, Status.OK, cached=remembered)
        return Outcome(c, Status.MODIFIED, actual_size=st.st_size, cached=remembered)
    return key


def _hash_check(c: Check, key: StatKey, now_ns: int) -> Outcome:
    try:
        digest = _b64(hash_file(c.path, c.algorithm, len(c.digest) * 6 // 8, key[0]))
    except PermissionError:
        return Outcome(c, Status.UNREADABLE, reason="permission denied")
    except OSError as exc:
        return Outcome(c, Status.UNREADABLE, reason=exc.strerror or str(exc))
    cached = None if is_racy(key, now_ns) else (key, c.algorithm, digest)
    if digest == c.digest:
        return Outcome(c, Status.OK, cached=cached, hashed=True)
    return Outcome(c, Status.MODIFIED, actual_size=key[0], cached=cached, hashed=True)


def _hash_batch(batch: Sequence[tuple[int, Check, StatKey]], now_ns: int) -> list[tuple[int, Outcome]]:
    return [(i, _hash_check(c, key, now_ns)) for i, c, key in batch]


def default_workers() -> int:
    """One hashing thread per core: hashing is CPU-bound once files are in the page cache."""
    return max(1, min(16, os.cpu_count() or 1))


def _schedule(to_hash: list[tuple[int, Check, StatKey]]) -> list[list[tuple[int, Check, StatKey]]]:
    """Largest files first, each alone; then small files in batches.

    Hashing one file cannot be split, so the largest file bounds the wall time: starting it first lets the
    other threads work through everything else meanwhile (longest-processing-time-first scheduling).
    """
    ordered = sorted(to_hash, key=lambda t: t[2][0], reverse=True)
    big = [[t] for t in ordered if t[2][0] > _SMALL]
    small = ordered[len(big) :]
    return big + [small[i : i + _BATCH] for i in range(0, len(small), _BATCH)]


def verify(
    checks: Sequence[Check],
    remembered: Mapping[str, CachedDigest],
    *,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Outcome]:
    """Verify every check; results come back in the order of ``checks``.

    Two phases: every file is stat'ed in this thread (size mismatches, missing files and stat-cache hits
    are settled without reading a byte), then only the files left are hashed in a thread pool.
    ``remembered`` maps a path to its cached digest (from :class:`patchguard.cache.StatCache`).
    ``progress(done, total)`` is called from the calling thread.
    """
    now_ns = time.time_ns()
    results: list[Outcome | None] = [None] * len(checks)
    to_hash: list[tuple[int, Check, StatKey]] = []
    for i, c in enumerate(checks):
        r = _stat_check(c, remembered.get(c.path))
        if isinstance(r, Outcome):
            results[i] = r
        else:
            to_hash.append((i, c, r))
    total = len(checks)
    done = total - len(to_hash)
    if progress:
        progress(done, total)
    batches = _schedule(to_hash)
    n = workers or default_workers()
    if n <= 1 or len(batches) <= 1:
        finished: Iterable[list[tuple[int, Outcome]]] = (_hash_batch(b, now_ns) for b in batches)
        pool = None
    else:
        pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="patchguard-hash")
        finished = pool.map(lambda b: _hash_batch(b, now_ns), batches)
    try:
        for batch_result in finished:
            for i, o in batch_result:
                results[i] = o
            done += len(batch_result)
            if progress:
                progress(done, total)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return [r for r in results if r is not None]
