"""Small file-system helpers every layer shares, each implemented once.

- where patchguard keeps its own state inside an environment (``<site-packages>/.patchguard``), so that a
  scan can ask whether a crash left a transaction unfinished without importing :mod:`patchguard.txn`;
- sha256 of a file and of bytes;
- reading a file only if it is a regular file (a FIFO or a device is never opened);
- writing patchguard's *own* files atomically (never a file of an environment: that is :mod:`patchguard.txn`);
- the bytecode caches (``__pycache__/<module>.*.pyc``) of a source file, and the source of a cached file;
- where patchguard keeps its caches, a file's stat key, and when a stat key is too fresh to trust.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import sys
from collections.abc import Iterator
from typing import Any

__all__ = [
    "INPUT_LIMIT",
    "JOURNAL",
    "PYCACHE",
    "STATE_DIR",
    "STATE_FILE",
    "StatKey",
    "bytecode_of",
    "cache_root",
    "is_racy",
    "journal_path",
    "not_a_directory",
    "parse_json",
    "parse_toml",
    "plain_relpath",
    "read_input",
    "read_regular",
    "read_regular_stat",
    "settled_before",
    "sha256_bytes",
    "sha256_file",
    "source_of_bytecode",
    "stat_key",
    "transaction_left",
    "user_cache_dir",
    "write_atomically",
]

STATE_DIR = ".patchguard"
STATE_FILE = "state.json"  # the applied patch sets: written only as one more file of a transaction
JOURNAL = "journal.json"
SESSION = "session.json"  # an environment held in trial states (bisect): put back by the next command
PYCACHE = "__pycache__"


def plain_relpath(path: str) -> bool:
    """Whether ``path`` (a wheel member, a RECORD row inside site-packages) is a plain relative POSIX path:
    not absolute, no ``..``, ``.`` or empty part, no backslash, no control character.

    >>> plain_relpath("vllm/platforms/cuda.py"), plain_relpath("pkg/../../etc/x"), plain_relpath("a\\nb")
    (True, False, False)
    """
    if not path or path.startswith("/") or "\\" in path:
        return False
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def journal_path(site_dir: str) -> str:
    """The journal an unfinished transaction leaves in ``site_dir``."""
    return os.path.join(site_dir, STATE_DIR, JOURNAL)


def transaction_left(site_dir: str) -> bool:
    """Whether a transaction left something to recover in ``site_dir``: its journal, or the journal's temp
    file (a crash while the journal was being written)."""
    journal = journal_path(site_dir)
    session = os.path.join(site_dir, STATE_DIR, SESSION)
    return os.path.exists(journal) or os.path.lexists(journal + ".tmp") or os.path.lexists(session)


def not_a_directory(path: str) -> str | None:
    """Why ``path`` is not a usable directory ("does not exist", "is not a directory"), or ``None``."""
    if os.path.isdir(path):
        return None
    return "is not a directory" if os.path.exists(path) else "does not exist"


def sha256_bytes(data: bytes | None) -> str | None:
    """sha256 hex of ``data``, ``None`` for ``None`` (a file that does not exist)."""
    return hashlib.sha256(data).hexdigest() if data is not None else None


def sha256_file(path: str) -> str | None:
    """sha256 hex of a regular file's bytes, ``None`` if it does not exist (``OSError`` for a FIFO, a
    device or a directory: never opened in a way that blocks)."""
    h = hashlib.sha256()
    try:
        fd = _open_regular(path)
    except FileNotFoundError:
        return None
    try:
        with open(fd, "rb", closefd=False) as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    finally:
        os.close(fd)
    return h.hexdigest()


def _open_regular(path: str) -> int:
    """A read-only descriptor of a regular file; ``OSError`` for anything else. Opened non-blocking (a FIFO
    swapped in between the stat and the open must not block) and checked again through the descriptor."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return fd


def read_regular(path: str, limit: int = -1) -> bytes:
    """The bytes of a regular file (at most ``limit``); ``OSError`` for anything else.

    Nothing but a regular file is opened: a FIFO named ``RECORD`` or ``x.pth`` would block a plain
    ``open()`` forever, and opening a device can have effects. What is read is checked again through the
    descriptor, so a file swapped in meanwhile is refused too.
    """
    return read_regular_stat(path, limit)[0]


def read_regular_stat(path: str, limit: int = -1) -> tuple[bytes, os.stat_result]:
    """:func:`read_regular`, with the file's stat taken through the same descriptor."""
    fd = _open_regular(path)
    try:
        with open(fd, "rb", closefd=False) as f:
            return f.read(limit), os.fstat(fd)
    finally:
        os.close(fd)


INPUT_LIMIT = 16 * 1024 * 1024
"""The most patchguard reads of one input it is given (policy, lock, set, model config, state, journal)."""


def read_input(path: str, limit: int = INPUT_LIMIT) -> bytes:
    """An input file's bytes: a regular file (never a FIFO or device: nothing blocks) of at most ``limit``
    bytes; ``OSError`` otherwise, with a reason a user can act on."""
    data = read_regular(path, limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit >> 20} MiB: not an input patchguard reads", path)
    return data


def parse_json(data: bytes | str) -> Any:
    """``json.loads``, with nesting too deep for the parser a ``ValueError`` like any other malformation."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def parse_toml(data: bytes) -> dict[str, Any]:
    """``tomllib.loads`` of UTF-8 bytes; any malformation (syntax, encoding, nesting) is a ``ValueError``."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        doc: dict[str, Any] = tomllib.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply") from None
    return doc


def write_atomically(path: str, data: bytes, *, make_dirs: bool = True) -> None:
    """Write one of patchguard's *own* files (cache, store, lock output): temp file, then rename.

    Never for files of an environment: those go through :mod:`patchguard.txn`. Raises ``OSError``.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if make_dirs:
        os.makedirs(directory, exist_ok=True)
    # What tempfile.mkstemp does (a new file nobody else can have opened, mode 0600), without importing
    # tempfile on every cold scan.
    tmp = os.path.join(directory, f".tmp-{os.urandom(8).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def bytecode_of(py_path: str) -> list[str]:
    """Every ``__pycache__/<module>.*.pyc`` of ``py_path``, of any interpreter (OSError: no cache dir)."""
    directory, name = os.path.split(py_path)
    cache = os.path.join(directory, PYCACHE)
    stem = name[:-3] + "."
    return [os.path.join(cache, n) for n in os.listdir(cache) if n.startswith(stem) and n.endswith(".pyc")]


def source_of_bytecode(pyc_path: str) -> str | None:
    """``pkg/__pycache__/mod.cpython-311.opt-1.pyc`` → ``pkg/mod.py`` (``None``: not a cached pyc)."""
    head, name = os.path.split(pyc_path)
    parent, cache_dir = os.path.split(head)
    if cache_dir != PYCACHE or not name.endswith(".pyc"):
        return None
    return os.path.join(parent, name.split(".", 1)[0] + ".py")


# (size, mtime_ns, ctime_ns, inode, device)
StatKey = tuple[int, int, int, int, int]

_NS = 1_000_000_000
# Timestamp granularity assumed for a file system that keeps nanoseconds (Linux coarse clocks tick at most
# every 10 ms) and for one that keeps whole seconds only (FAT keeps 2 s).
_FINE_WINDOW_NS = 50_000_000
_COARSE_WINDOW_NS = 2 * _NS


def user_cache_dir(env_var: str, name: str) -> str:
    """``$env_var``, else ``$XDG_CACHE_HOME/name``, else ``~/.cache/name`` (patchguard's, pip's, uv's)."""
    explicit = os.environ.get(env_var)
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, name)


def cache_root() -> str:
    """Where patchguard keeps its caches, per the environment variables above."""
    return user_cache_dir("PATCHGUARD_CACHE_DIR", "patchguard")


def stat_key(st: os.stat_result) -> StatKey:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def is_racy(mtime: int, ctime: int, observed_at_ns: int) -> bool:
    """True when an edit right after ``observed_at_ns`` could leave mtime and ctime as they were.

    ``observed_at_ns`` may be earlier than the actual stat (the start of the scan): that only makes more
    entries racy, never fewer.
    """
    coarse = mtime % _NS == 0 and ctime % _NS == 0
    window = _COARSE_WINDOW_NS if coarse else _FINE_WINDOW_NS
    return max(mtime, ctime) >= observed_at_ns - window


def settled_before(observed_at_ns: int) -> int:
    """A time before which no mtime or ctime is racy (a quick first test before :func:`is_racy`)."""
    return observed_at_ns - _COARSE_WINDOW_NS


@contextlib.contextmanager
def staged_dir(final: str, what: str, hint: str) -> Iterator[str]:
    """A new hidden directory beside ``final`` to build its next version in. When the block ends it takes
    ``final``'s place in one step (:func:`replace_dir`); when the block raises it is removed and ``final``
    is untouched. One that cannot be made is a usage error: ``cannot write {what} here``, with ``hint``."""
    import shutil
    import tempfile  # here, not at the top: a cold scan never needs it

    from .errors import UsageError

    parent = os.path.dirname(final)
    try:
        os.makedirs(parent, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f".{os.path.basename(final)}.tmp-", dir=parent)
    except OSError as exc:
        raise UsageError(
            f"cannot write {what} here ({exc.strerror or exc})", path=parent, hint=hint
        ) from None
    try:
        yield staging
        replace_dir(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def put_file(path: str, data: bytes, mode: int | None = None) -> None:
    """Write a new file (its directories made) inside a directory being staged; ``mode``: its permission
    bits (default: the umask's)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    if mode is not None:
        os.chmod(path, mode)


def replace_dir(staging: str, final: str) -> None:
    """Put directory ``staging`` in the place of ``final`` (which may not exist) in one step, and remove
    what was there: a reader, or a kill at any moment, sees the old directory or the new one, never none.

    Linux swaps the two with ``renameat2(RENAME_EXCHANGE)``; elsewhere (or on a filesystem without it) the
    old directory is renamed aside first, a window of two renames."""
    if not os.path.lexists(final):
        os.rename(staging, final)
        return
    if not _exchange(staging, final):
        aside = f"{staging}-replaced"
        os.rename(final, aside)
        os.rename(staging, final)
        staging = aside
    import shutil

    shutil.rmtree(staging, ignore_errors=True)  # now the old directory


def _exchange(a: str, b: str) -> bool:
    """Swap two paths atomically (Linux ``renameat2``); ``False`` when the system cannot."""
    if sys.platform != "linux":
        return False
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), b)
