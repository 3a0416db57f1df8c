"""Read and hash files, in a thread of the scanning process or in a helper process.

A helper process is forked from the scanning process when that has a single thread (Linux), and otherwise
started as ``python -I -S`` this file: standard library only and free of relative imports, it starts with
nothing but this file (no site, no ``.pth`` file, no user site, no environment variables, no current
directory), and imports none of the scanned environment's code either way. A helper reads batches from
one pipe and writes results to another (stdin and stdout when started as a script), one frame each:
4-byte little-endian length, then a :mod:`marshal` payload.

A batch is a list of ``(path, algorithm, expected_size, digest_length)`` (``expected_size`` -1 when RECORD
has none); the result is one tuple per file, in order:

* ``("h", digest, key)``: read and hashed; ``digest`` is urlsafe base64 without padding (as RECORD writes
  it), ``key`` the ``(size, mtime_ns, ctime_ns, inode, device)`` of the file that was read;
* ``("s", key)``: its size differs from ``expected_size``, so it was not read;
* ``("n", key)``: not a regular file (a directory, a FIFO, a device), never read;
* ``("e", errno, message)``: it could not be opened or read.

Each file is stat'ed first (nothing but a regular file of the right size is ever opened), then opened once
(``O_NONBLOCK``, so a FIFO swapped in meanwhile cannot hang the scan) and ``fstat``-ed through that
descriptor, so the key always describes the bytes that were hashed. Files are opened relative to their
directory's descriptor, kept while consecutive files share it: a RECORD lists a directory's files together,
and the kernel then resolves one name instead of the whole path. Files up to 4 MiB are read with one
system call; larger ones are streamed through a 1 MiB buffer (memory stays bounded for any file size).
"""

from __future__ import annotations

import base64
import binascii
import gc
import hashlib
import marshal
import os
import stat
import sys
import threading

TYPE_CHECKING = False  # typing is not imported: a helper process starts faster without it
if TYPE_CHECKING:
    from typing import Any

    Result = tuple[Any, ...]  # one of the tuples described above

SMALL = 4 << 20
CHUNK = 1 << 20
_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_DIRECTORY", 0)
# Files can be opened and stat'ed relative to an open directory (POSIX).
DIR_FD = os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd and os.sep == "/"
_READV = hasattr(os, "readv")
_local = threading.local()


def _buffer() -> bytearray:
    buf: bytearray | None = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = bytearray(CHUNK)
    return buf


def digest_fd(fd: int, algorithm: str, size: int, length: int) -> bytes:
    """Digest of the bytes of an open file, read to its end (``size``: what fstat said, a hint)."""
    h = hashlib.new(algorithm)
    if size <= SMALL:
        data = os.read(fd, size + 1)
        h.update(data)
        # Grew since fstat, or a short read (network and FUSE file systems may return less): read on.
        more = len(data) != size
    else:
        more = True
    if more and _READV:  # large, or more to read: stream the rest through one reused buffer
        buf = _buffer()
        view = memoryview(buf)
        while n := os.readv(fd, [buf]):
            h.update(view[:n])
    elif more:
        while data := os.read(fd, CHUNK):
            h.update(data)
    return final_digest(h, algorithm, length)


def final_digest(h: Any, algorithm: str, length: int) -> bytes:
    """``h``'s digest; ``length`` bytes of it for the ``shake_*`` algorithms, whose size RECORD chooses."""
    if algorithm.startswith("shake_"):
        return h.digest(length)  # type: ignore[no-any-return]
    return h.digest()  # type: ignore[no-any-return]


def digest_length(recorded: str) -> int:
    """How many bytes a digest written as ``recorded`` (unpadded base64) has."""
    return len(recorded) * 6 // 8


def b64(raw: bytes) -> str:
    """A digest as RECORD writes it: urlsafe base64 without padding."""
    return binascii.b2a_base64(raw, newline=False).rstrip(b"=").translate(_URLSAFE).decode("ascii")


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def b64_hex(text: str) -> str:
    """A digest as RECORD writes it (urlsafe base64, padding optional), as lower-case hex."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).hex()


# hot loop: runs once per hashed file (~40k on a cold scan), mostly in a helper process that must start fast.
# Not split: a helper call per file (for the directory-descriptor switch or the stat/fstat verdicts) would add
# a Python frame to every file of the scan, and the bound locals (opn, stat_, ...) would have to be passed on.
def verify_batch(batch: list[tuple[str, str, int, int]]) -> list[Result]:
    """Stat, open, fstat and hash each file of ``batch``: one result tuple per file (module docstring).

    A file is stat'ed before it is opened: opening a device (a path replaced by, or linking to, a watchdog
    or tape device) can have effects, and a scan has none. One whose size differs is not opened either.
    """
    out: list[Result] = []
    dir_name: str | None = None
    dir_fd = -1
    opn, stat_, fstat, close, isreg = os.open, os.stat, os.fstat, os.close, stat.S_ISREG
    try:
        for path, algorithm, expected, length in batch:
            try:
                if DIR_FD:
                    parent, _, name = path.rpartition("/")
                    if parent != dir_name:
                        if dir_fd >= 0:
                            close(dir_fd)
                            dir_fd = -1
                        dir_name = parent
                        try:
                            dir_fd = opn(parent or "/", DIR_FLAGS)
                        except OSError:
                            dir_fd = -1
                    if dir_fd < 0:
                        name = path
                    st = stat_(name, dir_fd=dir_fd) if dir_fd >= 0 else stat_(path)
                else:
                    name = path
                    st = stat_(path)
                key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
                if not isreg(st.st_mode):
                    out.append(("n", key))
                    continue
                if expected >= 0 and st.st_size != expected:
                    out.append(("s", key))
                    continue
                fd = opn(name, _FLAGS, dir_fd=dir_fd) if dir_fd >= 0 else opn(path, _FLAGS)
                try:
                    st = fstat(fd)  # the key must describe the bytes read, whatever happened since the stat
                    key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
                    if not isreg(st.st_mode):
                        out.append(("n", key))
                    elif expected >= 0 and st.st_size != expected:
                        out.append(("s", key))
                    else:
                        out.append(("h", b64(digest_fd(fd, algorithm, st.st_size, length)), key))
                finally:
                    close(fd)
            except OSError as exc:
                out.append(("e", exc.errno or 0, exc.strerror or str(exc)))
            except ValueError:  # an algorithm this Python cannot compute (a FIPS build without md5, ...)
                out.append(("e", 0, f"{algorithm} is not available in this Python"))
    finally:
        if dir_fd >= 0:
            close(dir_fd)
    return out


def read_exactly(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


_MAX_FRAME = 1 << 28  # far above any real batch: a larger length is a broken stream, not a reason to allocate


def read_frame(fd: int) -> object:
    """One frame from ``fd``; ``EOFError`` at the end of the stream, ``ValueError`` for a broken one."""
    size = int.from_bytes(read_exactly(fd, 4), "little")
    if size > _MAX_FRAME:
        raise ValueError(f"frame of {size} bytes")
    return marshal.loads(read_exactly(fd, size))


def write_frame(fd: int, payload: Any) -> None:
    data = marshal.dumps(payload)
    data = len(data).to_bytes(4, "little") + data
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def serve(requests: int, replies: int) -> None:
    """Answer batches read from ``requests`` on ``replies`` until the end of ``requests``."""
    while True:
        try:
            batch = read_frame(requests)
        except EOFError:
            return
        write_frame(replies, verify_batch(batch))  # type: ignore[arg-type]


def main() -> int:
    gc.disable()  # nothing here makes a reference cycle: collections would only cost time
    serve(sys.stdin.fileno(), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
