"""The persistent stat cache: a warm re-scan hashes nothing that did not change.

One JSON file per environment (keyed by its site directories) under ``$PATCHGUARD_CACHE_DIR``, else
``$XDG_CACHE_HOME/patchguard``, else ``~/.cache/patchguard``. For every verified file it keeps the digest
computed last time together with the stat fields that must all be unchanged to reuse it: size, mtime_ns,
ctime_ns, inode and device. ``ctime`` is what makes the cache safe: resetting mtime with ``touch -d`` or
keeping the size does not reset ctime, so such an edit is still re-hashed.

Two more guards against hiding an edit:

* per distribution, the sha256 of its RECORD: a changed RECORD drops every entry of that distribution;
* racily clean files (git's term) are never stored: a file whose ctime/mtime is within the timestamp
  granularity of the moment it was stat'ed could be edited again in the same clock tick without any stat
  field changing, so its digest is not remembered.

A cache file that cannot be read or parsed is discarded; a cache that cannot be written is skipped. The
cache lives outside the environment, so writing it is not subject to the transaction rules.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CachedDigest", "StatCache", "StatKey", "cache_root"]

_SCHEMA = "patchguard.statcache/1"

# (size, mtime_ns, ctime_ns, inode, device)
StatKey = tuple[int, int, int, int, int]
# (stat key, algorithm, urlsafe-b64 digest)
CachedDigest = tuple[StatKey, str, str]

_NS = 1_000_000_000
# Timestamp granularity assumed for a file system that keeps nanoseconds (Linux coarse clocks tick at most
# every 10 ms) and for one that keeps whole seconds only (FAT keeps 2 s).
_FINE_WINDOW_NS = 50_000_000
_COARSE_WINDOW_NS = 2 * _NS


def cache_root() -> str:
    """Where patchguard keeps its caches, per the environment variables above."""
    explicit = os.environ.get("PATCHGUARD_CACHE_DIR")
    if explicit:
        return explicit
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "patchguard")


def is_racy(key: StatKey, observed_at_ns: int) -> bool:
    """True when an edit right after ``observed_at_ns`` could leave every stat field as it was."""
    _, mtime, ctime, _, _ = key
    coarse = mtime % _NS == 0 and ctime % _NS == 0
    window = _COARSE_WINDOW_NS if coarse else _FINE_WINDOW_NS
    return max(mtime, ctime) >= observed_at_ns - window


@dataclass
class StatCache:
    """Digests remembered per distribution (metadata dir) and file (absolute path)."""

    path: str | None
    dists: dict[str, tuple[str, dict[str, CachedDigest]]] = field(default_factory=dict)
    dirty: bool = False

    @classmethod
    def for_environment(cls, site_dirs: Sequence[str], root: str | None = None) -> StatCache:
        """Load the cache of the environment made of ``site_dirs``; empty when absent or corrupt."""
        ident = "\0".join(sorted(os.path.realpath(d) for d in site_dirs))
        name = hashlib.sha256(ident.encode("utf-8", "surrogateescape")).hexdigest()[:24]
        cache = cls(os.path.join(root or cache_root(), "statcache", name + ".json"))
        cache._load()
        return cache

    @classmethod
    def disabled(cls) -> StatCache:
        return cls(None)

    def _load(self) -> None:
        if self.path is None:
            return
        try:
            with open(self.path, "rb") as f:
                doc = json.loads(f.read())
            self.dists = _decode(doc)
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError, KeyError, IndexError):
            # Corrupt or from another version: start afresh, and overwrite it on save.
            self.dists = {}
            self.dirty = True

    def for_distribution(self, metadata_dir: str, record_digest: str) -> Mapping[str, CachedDigest]:
        """Remembered digests of one distribution, or nothing if its RECORD changed since."""
        got = self.dists.get(metadata_dir)
        if got is None or got[0] != record_digest:
            return {}
        return got[1]

    def update_distribution(
        self, metadata_dir: str, record_digest: str, files: dict[str, CachedDigest]
    ) -> None:
        old = self.dists.get(metadata_dir)
        if old is None or old[0] != record_digest or old[1] != files:
            self.dists[metadata_dir] = (record_digest, files)
            self.dirty = True

    def forget_missing(self, present: set[str], in_dirs: Sequence[str]) -> None:
        """Drop distributions of ``in_dirs`` that are no longer installed."""
        prefixes = tuple(os.path.join(d, "") for d in in_dirs)
        for meta in [m for m in self.dists if m.startswith(prefixes) and m not in present]:
            del self.dists[meta]
            self.dirty = True

    def save(self) -> None:
        """Write the cache atomically (temp file + replace); failures are ignored: it is only a cache."""
        if self.path is None or not self.dirty:
            return
        directory = os.path.dirname(self.path)
        tmp: str | None = None
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".statcache-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
                json.dump(_encode(self.dists), f, separators=(",", ":"))
            os.replace(tmp, self.path)
            tmp = None
            self.dirty = False
        except OSError:
            pass
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def _encode(dists: Mapping[str, tuple[str, Mapping[str, CachedDigest]]]) -> dict[str, Any]:
    return {
        "schema": _SCHEMA,
        "dists": {
            meta: {"record": rec, "files": {p: [*key, algo, dig] for p, (key, algo, dig) in files.items()}}
            for meta, (rec, files) in dists.items()
        },
    }


def _decode(doc: Any) -> dict[str, tuple[str, dict[str, CachedDigest]]]:
    if not isinstance(doc, dict) or doc.get("schema") != _SCHEMA:
        raise ValueError("not a patchguard stat cache")
    out: dict[str, tuple[str, dict[str, CachedDigest]]] = {}
    for meta, d in doc["dists"].items():
        files: dict[str, CachedDigest] = {}
        for p, v in d["files"].items():
            # Values of the wrong type simply never equal a real stat key: a miss, not a wrong hit.
            size, mtime, ctime, ino, dev, algo, dig = v
            files[p] = ((size, mtime, ctime, ino, dev), algo, dig)
        out[str(meta)] = (str(d["record"]), files)
    return out
