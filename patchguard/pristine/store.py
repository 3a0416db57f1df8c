"""The pristine store: content-addressed bytes (``<cache>/pristine/<hh>/<sha256 hex>``) of every member
read from a proven wheel, so a second ``diff`` or ``restore`` needs no wheel at all — the RECORD's sha256 is
the key, and what is read back is verified against it.
"""

from __future__ import annotations

import contextlib
import os

from .._fs import sha256_bytes, write_atomically
from ..integrity.cache import cache_root
from ..integrity.hashing import b64_hex
from ..integrity.records import RecordEntry

__all__ = ["PristineStore"]


class PristineStore:
    """Content-addressed bytes: ``<root>/<hh>/<sha256 hex>``. Reads verify the hash; writes are atomic."""

    def __init__(self, root: str | None = None) -> None:
        self.root = root or os.path.join(cache_root(), "pristine")

    def _path(self, hexdigest: str) -> str:
        return os.path.join(self.root, hexdigest[:2], hexdigest)

    def get(self, hexdigest: str) -> bytes | None:
        try:
            with open(self._path(hexdigest), "rb") as f:
                data = f.read()
        except OSError:
            return None
        return data if sha256_bytes(data) == hexdigest else None

    def put(self, data: bytes) -> str:
        hexdigest = sha256_bytes(data)
        assert hexdigest is not None
        path = self._path(hexdigest)
        if not os.path.exists(path):
            with contextlib.suppress(OSError):  # only a cache
                write_atomically(path, data)
        return hexdigest

    def has_entry(self, entry: RecordEntry) -> bool:
        """Whether the store holds bytes for a sha256 RECORD row (a stat, nothing read)."""
        if entry.algorithm != "sha256" or entry.digest is None:
            return False
        return os.path.isfile(self._path(b64_hex(entry.digest)))

    def for_entry(self, entry: RecordEntry) -> bytes | None:
        """The bytes a sha256 RECORD row names, if the store has them."""
        if entry.algorithm != "sha256" or entry.digest is None:
            return None
        return self.get(b64_hex(entry.digest))
