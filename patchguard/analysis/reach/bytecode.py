"""Bytecode evidence: was a source file imported since it was last edited? Read from its ``__pycache__``.

* ``since-edit``: a pyc whose header matches the current source (mtime and size, or the source hash of a
  hash-based pyc) was compiled from it, so something imported the file after the edit;
* ``before-edit``: every pyc is older than the edit: nothing imported the file since, so the edit takes
  effect at the next restart (it is *not* dormant);
* ``never``: no pyc, while a module beside it was compiled after this file was written: imported since,
  and this one not (a pyc older than the file says nothing: an installer compiled it, or the file was
  written by patchguard, which removes the bytecode of what it writes);
* ``unknown``: no bytecode beside it to tell (bytecode writing off), or a timestamp pyc written in the same
  second as the edit — its header would match an edit that kept the size, imported or not (git's "racily
  clean"); a hash-based pyc still tells.

Only the 16-byte header and the pyc's own stat are read; the pyc is never loaded.
"""

from __future__ import annotations

import importlib.util
import os
import struct

from ..._fs import PYCACHE, bytecode_of, read_regular, read_regular_stat
from ...model import Loaded

__all__ = ["loaded"]

_WHY = {
    Loaded.SINCE_EDIT: "bytecode compiled from the edited source: loaded since the edit",
    Loaded.BEFORE_EDIT: "bytecode older than the edit: not loaded since, takes effect at the next restart",
    Loaded.NEVER: "no bytecode while modules beside it have some: never loaded here",
    Loaded.UNKNOWN: "no bytecode beside it to tell (bytecode writing off?)",
}
_NOT_SINCE = (
    "no bytecode of it, and nothing beside it compiled since it was written (a process that writes no "
    "bytecode, or one that has not imported the package since): cannot tell"
)
_RACY = "bytecode written in the same second as the edit: cannot tell whether it was loaded since"
_HASHED = "hash-based bytecode matches the edited source: loaded since the edit"
_UNCHECKED = (
    "unchecked hash-based bytecode of the old source: Python keeps running the old code until it is rebuilt"
)


def _header(pyc: str) -> tuple[bytes, os.stat_result] | None:
    try:  # a regular file only: a FIFO or a link to a device in __pycache__ never blocks a scan
        head, st = read_regular_stat(pyc, 16)
    except OSError:
        return None
    return (head, st) if len(head) == 16 else None


def _verdict(py_path: str, pyc: str, src: os.stat_result, source: list[bytes]) -> tuple[Loaded, str] | None:
    """What one pyc says (``None``: nothing — another interpreter's hash, an unreadable file)."""
    found = _header(pyc)
    if found is None:
        return None
    head, st = found
    magic, flags = head[:4], struct.unpack("<I", head[4:8])[0]
    if flags & 1:  # hash-based pyc (PEP 552)
        if magic != importlib.util.MAGIC_NUMBER:
            return None  # another Python version's hash function: cannot tell
        if not source:
            try:
                source.append(read_regular(py_path))
            except OSError:
                return None
        if head[8:16] == importlib.util.source_hash(source[0]):
            return Loaded.SINCE_EDIT, _HASHED
        if not flags & 2:  # unchecked: the interpreter uses this pyc without looking at the source
            return Loaded.BEFORE_EDIT, _UNCHECKED
        return Loaded.BEFORE_EDIT, _WHY[Loaded.BEFORE_EDIT]
    mtime, size = struct.unpack("<II", head[8:16])
    if mtime != int(src.st_mtime) & 0xFFFFFFFF or size != src.st_size & 0xFFFFFFFF:
        return Loaded.BEFORE_EDIT, _WHY[Loaded.BEFORE_EDIT]
    if int(st.st_mtime) == int(src.st_mtime):
        return Loaded.UNKNOWN, _RACY
    return Loaded.SINCE_EDIT, _WHY[Loaded.SINCE_EDIT]


def loaded(py_path: str) -> tuple[Loaded, str]:
    """(evidence, why) of the bytecode caches of ``py_path``: the strongest any of its pycs gives. Where no
    new bytecode can be written (a read-only file system, a ``__pycache__`` nobody may write), an old pyc or
    none says nothing: ``unknown``."""
    state, why = _loaded(py_path)
    if state in (Loaded.BEFORE_EDIT, Loaded.NEVER):
        blocked = _unwritable(os.path.join(os.path.dirname(py_path), PYCACHE))
        if blocked:
            return Loaded.UNKNOWN, f"bytecode cannot tell: {blocked}"
    return state, why


def _unwritable(cache: str) -> str:
    """Why no bytecode can be written into ``cache`` ('' : it can, as far as modes and mounts say)."""
    where = cache if os.path.isdir(cache) else os.path.dirname(cache)
    try:
        if os.statvfs(where).f_flag & os.ST_RDONLY:
            return f"{where} is on a read-only file system"
        if not os.stat(where).st_mode & 0o222:
            return f"nobody may write {where}"
    except OSError:
        return ""
    return ""


def _loaded(py_path: str) -> tuple[Loaded, str]:
    try:
        pycs = bytecode_of(py_path)
        src = os.stat(py_path)
    except OSError:
        pycs = []
    if not pycs:
        try:
            written = os.stat(py_path).st_mtime
        except OSError:
            return Loaded.UNKNOWN, _WHY[Loaded.UNKNOWN]
        compiled = _neighbours_compiled(py_path)
        if compiled is None:
            return Loaded.UNKNOWN, _WHY[Loaded.UNKNOWN]
        if compiled > written:
            return Loaded.NEVER, _WHY[Loaded.NEVER]
        return Loaded.UNKNOWN, _NOT_SINCE
    source: list[bytes] = []
    verdicts = [v for v in (_verdict(py_path, pyc, src, source) for pyc in sorted(pycs)) if v is not None]
    for wanted in (Loaded.SINCE_EDIT, Loaded.UNKNOWN, Loaded.BEFORE_EDIT):
        for verdict in verdicts:
            if verdict[0] is wanted:
                return verdict
    return Loaded.UNKNOWN, "bytecode of another Python only: cannot tell"


def _neighbours_compiled(py_path: str) -> float | None:
    """When a module beside ``py_path`` was last compiled (``None``: none has bytecode)."""
    cache = os.path.join(os.path.dirname(py_path), PYCACHE)
    newest: float | None = None
    try:
        names = [n for n in os.listdir(cache) if n.endswith(".pyc")]
    except OSError:
        return None
    for n in names:
        try:
            st = os.lstat(os.path.join(cache, n))
        except OSError:
            continue
        newest = st.st_mtime if newest is None else max(newest, st.st_mtime)
    return newest
