"""pyc evidence: was a source file imported since it was edited? Read from its ``__pycache__`` entries.

A pyc whose header matches the current source (mtime and size, or the source hash of a hash-based pyc)
proves the file was compiled, i.e. imported, after the edit; a stale or absent pyc while its neighbours have
one says it was not imported since. Only the 16-byte header is read; the pyc is never loaded.
"""

from __future__ import annotations

import importlib.util
import os
import struct

from ..._fs import PYCACHE, bytecode_of

__all__ = ["neighbours_compiled", "pyc_state"]


def pyc_state(py_path: str) -> tuple[str, str]:
    """("fresh" | "stale" | "absent", evidence) for the bytecode cache of ``py_path``."""
    try:
        pycs = bytecode_of(py_path)
        st = os.stat(py_path)
    except OSError:
        return "absent", "no compiled bytecode"
    if not pycs:
        return "absent", "no compiled bytecode"
    source: bytes | None = None
    for pyc in pycs:
        try:
            with open(pyc, "rb") as f:
                head = f.read(16)
        except OSError:
            continue
        if len(head) < 16:
            continue
        magic, flags = head[:4], struct.unpack("<I", head[4:8])[0]
        if flags & 1:  # hash-based pyc (PEP 552)
            if magic != importlib.util.MAGIC_NUMBER:
                continue  # another Python version's hash function: cannot tell
            if source is None:
                with open(py_path, "rb") as f:
                    source = f.read()
            if head[8:16] == importlib.util.source_hash(source):
                return "fresh", "hash-based pyc matches the edited source: imported since the edit"
            continue
        mtime, size = struct.unpack("<II", head[8:16])
        if mtime == int(st.st_mtime) & 0xFFFFFFFF and size == st.st_size & 0xFFFFFFFF:
            return "fresh", "pyc compiled after the edit: imported since it was changed"
    return "stale", "pyc older than the edit: not imported since it was changed"


def neighbours_compiled(py_path: str) -> bool:
    cache = os.path.join(os.path.dirname(py_path), PYCACHE)
    try:
        return any(n.endswith(".pyc") for n in os.listdir(cache))
    except OSError:
        return False
