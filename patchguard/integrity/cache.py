"""The persistent stat cache: a warm re-scan reads no RECORD and hashes no file that did not change.

One file per environment (keyed by its site directories) under ``$PATCHGUARD_CACHE_DIR``, else
``$XDG_CACHE_HOME/patchguard``, else ``~/.cache/patchguard``. Per distribution it keeps:

* what a scan needs of the parsed RECORD and metadata (paths relative to the site directory, the checks
  packed, problems), valid while ``RECORD`` and ``METADATA`` keep their stat key — a changed RECORD drops
  the distribution's entries and is parsed again (the rows themselves are parsed again from the unchanged
  RECORD when a command needs them, so the cache does not keep them);
* per verified file, the stat key it had when it was last hashed (all in one bytes object, compared in one
  go on a warm scan), and the digests that were not RECORD's (the modified files).

A stat key is (size, mtime_ns, ctime_ns, inode, device); all five must be unchanged to reuse a verdict.
``ctime`` is what makes this safe: resetting mtime with ``touch -d`` or keeping the size does not reset
ctime, so such an edit is still re-hashed. Racily clean files (git's term) are never remembered: a file
whose ctime/mtime lies within the timestamp granularity of the moment it was stat'ed could be edited again
in the same clock tick without any stat field changing.

Format: a magic line, the sha256 of the payload, then the payload in :mod:`marshal` format (plain tuples,
lists, dicts, str and int only; about 4x faster to load than JSON for 30k files, which is most of what a
warm scan costs). A file that fails the checksum, does not load or has the wrong shape is discarded; a
cache that cannot be written is skipped. The cache lives outside the environment, so writing it is not
subject to the transaction rules.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._fs import StatKey, cache_root, is_racy, settled_before, stat_key, user_cache_dir, write_atomically
from .records import InstalledDistribution, RecordProblem

__all__ = [
    "StatCache",
    "StatKey",
    "cache_root",
    "is_racy",
    "pack_key",
    "settled_before",
    "stat_key",
    "user_cache_dir",
]

_MAGIC = b"patchguard-statcache/8\n"  # 8: conda-meta records as baselines

# A stat key packed into 40 bytes. A distribution's keys are kept as one bytes object (40 bytes per verified
# file): a warm scan compares them all at once, and loading 30k files' keys is loading one object.
_KEY = struct.Struct("<QqqQQ")
pack_key = _KEY.pack
pack_key_size = _KEY.size


def _metadata_keys(metadata_dir: str) -> tuple[StatKey, StatKey] | None:
    if metadata_dir.endswith((".json", ".md5sums", ".list")):  # conda's or dpkg's record: all in one file
        try:
            key = stat_key(os.stat(metadata_dir))
        except OSError:
            return None
        return key, key
    try:
        return stat_key(os.stat(os.path.join(metadata_dir, "RECORD"))), stat_key(
            os.stat(os.path.join(metadata_dir, "METADATA"))
        )
    except OSError:
        return None


@dataclass
class _DistEntry:
    keys: tuple[StatKey, StatKey]  # of RECORD and METADATA
    dist: InstalledDistribution
    slots: bytes  # which RECORD rows were verified, in order (4 bytes each): what ``known`` lines up with
    known: bytes  # packed stat key per verified file (zeros: none)
    odd: dict[int, str]  # verified file (index into slots) -> its digest, where that is not RECORD's


# (mtime_ns, ctime_ns, inode, device) of a directory, its unowned file names, its subdirectory names.
DirListing = tuple[tuple[int, int, int, int], tuple[str, ...], tuple[str, ...]]


@dataclass
class StatCache:
    """Parsed distributions, file digests and directory listings of one environment, from the last scan.

    ``listings`` hold, per directory below the packages, which of its files no RECORD owns; they are valid
    for one set of RECORDs only (``listings_stamp``) and are dropped when any RECORD changes.
    """

    path: str | None
    entries: dict[str, _DistEntry] = field(default_factory=dict)
    listings_stamp: str = ""
    listings: dict[str, DirListing] = field(default_factory=dict)
    dirty: bool = False
    _listings_loaded: dict[str, DirListing] = field(default_factory=dict)
    _seen: dict[str, tuple[StatKey, StatKey] | None] = field(default_factory=dict, repr=False)

    @classmethod
    def for_environment(cls, site_dirs: Sequence[str], root: str | None = None) -> StatCache:
        """Load the cache of the environment made of ``site_dirs``; empty when absent or corrupt."""
        ident = "\0".join(sorted(os.path.realpath(d) for d in site_dirs))
        name = hashlib.sha256(ident.encode("utf-8", "surrogateescape")).hexdigest()[:24]
        cache = cls(os.path.join(root or cache_root(), "statcache", name + ".bin"))
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
                blob = f.read()
        except OSError:
            return
        try:
            self.entries, self.listings_stamp, self.listings = _decode(blob)
            self._listings_loaded = dict(self.listings)
        except (ValueError, TypeError, KeyError, IndexError, EOFError):
            # Corrupt, truncated or from another version: start afresh, and overwrite it on save.
            self.entries, self.listings_stamp, self.listings = {}, "", {}
            self.dirty = True

    # -- distributions -----------------------------------------------------------------------------------

    def _keys(self, metadata_dir: str) -> tuple[StatKey, StatKey] | None:
        """RECORD's and METADATA's stat keys, taken once per scan: before the RECORD is parsed, so that a
        RECORD rewritten meanwhile is remembered with the key of the version that was read."""
        if metadata_dir not in self._seen:
            self._seen[metadata_dir] = _metadata_keys(metadata_dir)
        return self._seen[metadata_dir]

    def distribution(self, metadata_dir: str) -> InstalledDistribution | None:
        """The parsed distribution as remembered, if its RECORD and METADATA did not change since.

        Call it before parsing a distribution that is not remembered: its keys are taken here.
        """
        if self.path is None:
            return None
        keys = self._keys(metadata_dir)
        entry = self.entries.get(metadata_dir)
        return entry.dist if entry is not None and keys == entry.keys else None

    def known(self, dist: InstalledDistribution, slots: bytes) -> tuple[bytes, dict[int, str]] | None:
        """What was remembered of ``dist``'s files when the same RECORD rows (``slots``) were verified."""
        entry = self.entries.get(dist.metadata_dir)
        if entry is None or entry.dist is not dist or entry.slots != slots:
            return None
        return entry.known, entry.odd

    def remember(
        self, dist: InstalledDistribution, slots: bytes, known: bytes, odd: dict[int, str], now_ns: int
    ) -> None:
        """Remember a distribution and its files (not if its RECORD/METADATA are racily clean)."""
        if self.path is None or not dist.has_record:
            return
        old = self.entries.get(dist.metadata_dir)
        if old is not None and old.dist is dist:
            if (old.slots, old.known, old.odd) != (slots, known, odd):
                old.slots, old.known, old.odd = slots, known, odd
                self.dirty = True
            return
        keys = self._keys(dist.metadata_dir)
        if keys is None or any(is_racy(k[1], k[2], now_ns) for k in keys):
            if old is not None:
                del self.entries[dist.metadata_dir]
                self.dirty = True
            return
        self.entries[dist.metadata_dir] = _DistEntry(keys, dist, slots, known, odd)
        self.dirty = True

    def dir_listings(self, metadata_dirs: Sequence[str], now_ns: int) -> dict[str, DirListing] | None:
        """The directory listings to reuse and update, or ``None`` when they cannot be trusted now.

        Valid while every RECORD keeps its stat key; a RECORD changed within the racy window makes
        listings unusable for this scan (the set of owned files could still change unseen).
        """
        if self.path is None:
            return None
        h = hashlib.sha256()
        for meta in sorted(metadata_dirs):
            keys = self._keys(meta)
            if keys is not None:
                key = keys[0]
            else:  # no METADATA, or no RECORD (egg-info): RECORD's key alone, if any
                try:
                    key = stat_key(os.stat(os.path.join(meta, "RECORD")))
                except OSError:
                    key = (0, 0, 0, 0, 0)
            if is_racy(key[1], key[2], now_ns):
                self.listings = {}
                return None
            h.update(f"{meta}\0{key}\0".encode("utf-8", "surrogateescape"))
        stamp = h.hexdigest()
        if stamp != self.listings_stamp:
            self.listings_stamp, self.listings = stamp, {}
        return self.listings

    def forget_missing(self, present: set[str], in_dirs: Sequence[str]) -> None:
        """Drop distributions of ``in_dirs`` that are no longer installed."""
        prefixes = tuple(os.path.join(d, "") for d in in_dirs)
        for meta in [m for m in self.entries if m.startswith(prefixes) and m not in present]:
            del self.entries[meta]
            self.dirty = True

    def save(self) -> None:
        """Write the cache atomically (temp file + replace); failures are ignored: it is only a cache."""
        if self.path is None:
            return
        if self.listings != self._listings_loaded:
            self.dirty = True
        if not self.dirty:
            return
        try:
            write_atomically(self.path, _encode(self.entries, self.listings_stamp, self.listings))
        except OSError:
            return  # only a cache
        self.dirty = False
        self._listings_loaded = dict(self.listings)


def _encode(entries: dict[str, _DistEntry], listings_stamp: str, listings: dict[str, DirListing]) -> bytes:
    dists: dict[str, Any] = {}
    for meta, e in entries.items():
        d = e.dist
        dists[meta] = (
            e.keys,
            (
                d.name,
                d.version,
                d.site_dir,
                d.has_record,
                d.top_level,
                d.canonical_name,
                d.package_dirs,
                d.baseline,
            ),
            _relative(d.site_dir, d.paths),
            tuple(map(tuple, d.problems)),
            d.packed_checks(),
            d.check_rows,
            d.outside,
            e.slots,
            e.known,
            e.odd,
        )
    body = marshal.dumps({"dists": dists, "listings": (listings_stamp, listings)})
    return _MAGIC + hashlib.sha256(body).digest() + body


# Paths are kept relative to their site directory (a third of the cache's size otherwise); one outside it
# is kept absolute behind a NUL, which no path contains.
def _relative(site_dir: str, paths: Sequence[str]) -> list[str]:
    prefix = os.path.join(site_dir, "")
    cut = len(prefix)
    return [p[cut:] if p.startswith(prefix) else "\0" + p for p in paths]


def _absolute(site_dir: str, stored: Sequence[str]) -> tuple[str, ...]:
    prefix = os.path.join(site_dir, "")
    return tuple([prefix + p if p[:1] != "\0" else p[1:] for p in stored])


def _decode(blob: bytes) -> tuple[dict[str, _DistEntry], str, dict[str, DirListing]]:
    if not blob.startswith(_MAGIC):
        raise ValueError("not a patchguard stat cache")
    digest, body = blob[len(_MAGIC) : len(_MAGIC) + 32], blob[len(_MAGIC) + 32 :]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("stat cache checksum mismatch")
    payload = marshal.loads(body)
    if not isinstance(payload, dict):
        raise ValueError("stat cache payload is not a mapping")
    out: dict[str, _DistEntry] = {}
    # Stored as marshal writes them: no per-file rebuilding beyond the named tuples. (A payload that passed
    # the checksum but holds values of the wrong type can only make stat keys compare unequal: a cache miss.)
    for meta, (keys, info, paths, problems, checks, check_rows, outside, slots, known, odd) in payload[
        "dists"
    ].items():
        name, version, site_dir, has_record, top_level, canonical_name, package_dirs, baseline = info
        if (
            not isinstance(check_rows, bytes)
            or not isinstance(checks, bytes)
            or not isinstance(slots, bytes)
            or not isinstance(known, bytes)
            or not isinstance(odd, dict)
            or len(known) * 4 != len(slots) * pack_key_size
        ):
            raise ValueError("bad distribution entry")
        dist = InstalledDistribution(
            name=str(name),
            version=str(version),
            site_dir=str(site_dir),
            metadata_dir=str(meta),
            has_record=bool(has_record),
            rows=None,  # parsed from RECORD again if they are needed
            problems=tuple(map(RecordProblem._make, problems)),
            paths=_absolute(str(site_dir), paths),
            top_level=tuple(top_level),
            canonical_name=str(canonical_name),
            package_dirs=tuple(package_dirs),
            verifiable=checks,
            check_rows=check_rows,
            outside=tuple(map(tuple, outside)),
            baseline=str(baseline),
        )
        out[str(meta)] = _DistEntry((tuple(keys[0]), tuple(keys[1])), dist, slots, known, odd)
    listings_stamp, listings = payload["listings"]
    if not isinstance(listings_stamp, str) or not isinstance(listings, dict):
        raise ValueError("bad directory listings")
    return out, listings_stamp, listings
