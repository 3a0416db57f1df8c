"""Pristine bytes of a conda package's files: from conda's package cache, proven against its record.

conda keeps every package it installed in a package cache (``pkgs/``): the package file it downloaded
(``.conda`` — a zip of ``info-*.tar.zst`` and ``pkg-*.tar.zst`` — or ``.tar.bz2``) and the directory it
extracted it to, from which the environment's files were hard-linked. That directory is no proof: an edit
through a hard link edits it too. So every member read is checked against the installed record's hash (what
:meth:`Pristine._member` does with every source), and a package file is used only when its ``info/paths.json``
gives every file the hash conda's record gives it — and, where the record names the package file's own
sha256, only that file. Files whose build prefix the installer rewrote are rewritten the same way before the
check (``sha256_in_prefix``).

``.conda`` members are read with ``conda-package-streaming`` (the conda project's own streaming reader),
imported only when a ``.conda`` file is opened.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import tarfile
from collections.abc import Iterator, Sequence

from .._fs import read_regular
from ..integrity.condarecord import CondaFile, CondaRecord, conda_rows, parse_conda_record, rewrite
from ..integrity.records import InstalledDistribution
from .wheels import READ_ERRORS, Candidate, Rejected, SizeMismatch

__all__ = ["CondaPackage", "conda_cache_link", "conda_candidates", "conda_note", "package_dirs"]

_INFO_LIMIT = 64 << 20  # info/paths.json of the largest packages (CUDA toolkits) is a few MiB
_KEEP_EACH = 4 << 20  # a source file, kept while streaming to another member ...
_KEEP_ALL = 128 << 20  # ... up to this much in all


_RECORDS: dict[tuple[str, int, int], CondaRecord] = {}


def _record(dist: InstalledDistribution) -> CondaRecord:
    """The conda-meta record of ``dist``, parsed once while the file keeps its size and mtime (a scan asks
    for it for every changed file of the package: pytorch's lists tens of thousands of paths)."""
    try:
        st = os.stat(dist.metadata_dir)
        key = (dist.metadata_dir, st.st_mtime_ns, st.st_size)
        if key not in _RECORDS:
            text = read_regular(dist.metadata_dir).decode("utf-8")
            _RECORDS.clear()  # one package at a time is what callers ask for
            _RECORDS[key] = parse_conda_record(dist.metadata_dir, text)
        return _RECORDS[key]
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Rejected(f"cannot read its conda-meta record ({exc})") from None


def _extracted_dirs(record: CondaRecord) -> list[str]:
    """Where the package may be extracted: the directory conda-meta names, then ``<cache>/<name-ver-build>``
    in every package cache of the environment."""
    stem = f"{record.name}-{record.version}-{record.build}"
    dirs = [record.extracted] if record.extracted else []
    return list(dict.fromkeys([*dirs, *(os.path.join(d, stem) for d in package_dirs(record.prefix))]))


def _shipped_path(f: CondaFile, record: CondaRecord) -> str:
    """Where ``f`` is in the package: a ``noarch: python`` package ships ``site-packages/`` and
    ``python-scripts/``, which the installer moves to the interpreter's site directory and ``bin/``."""
    if record.noarch == "python":
        parts = f.path.split("/")
        if (
            len(parts) > 3
            and parts[0] == "lib"
            and parts[1].startswith("python")
            and parts[2] == "site-packages"
        ):
            return "/".join(["site-packages", *parts[3:]])
        if len(parts) == 2 and parts[0] in ("bin", "Scripts"):
            return "python-scripts/" + parts[1]
    return f.path


class CondaPackage(Candidate):
    """One place a conda package's files may be read from: an extracted package directory or a package
    file. ``members_for`` proves it is the installed build and maps each installed row to its member."""

    def __init__(self, kind: str, location: str, record: CondaRecord) -> None:
        self.kind, self.location, self.record = kind, location, record
        self._rewrites: dict[str, CondaFile] = {}
        self._archive: _Archive | None = None

    def _info(self, name: str) -> bytes:
        if os.path.isdir(self.location):
            return read_regular(os.path.join(self.location, "info", name), _INFO_LIMIT)
        return self._open().member("info/" + name, _INFO_LIMIT, info=True)

    def _open(self) -> _Archive:
        if self._archive is None:
            self._archive = _Archive(self.location)
        return self._archive

    def members_for(self, dist: InstalledDistribution) -> dict[str, str]:
        """Installed row path → member, for every file this package holds with the installed hash as
        shipped; :class:`Rejected` when it is another build (any file's hash differs) or unreadable."""
        try:
            index = json.loads(self._info("index.json"))
            shipped = json.loads(self._info("paths.json")).get("paths", [])
        except (*READ_ERRORS, tarfile.TarError, AttributeError) as exc:
            raise Rejected(f"unreadable ({exc.__class__.__name__}: {exc})") from None
        record = self.record
        wanted = (record.name, record.version, record.build)
        if (
            not isinstance(index, dict)
            or (index.get("name"), index.get("version"), index.get("build")) != wanted
        ):
            raise Rejected("another package (its info/index.json names another name, version or build)")
        hashes = {p.get("_path"): p.get("sha256") for p in shipped if isinstance(p, dict)}
        rows, _ = conda_rows(record, dist.site_dir)
        members: dict[str, str] = {}
        compared = 0
        for path, _algorithm, digest, _size, n in rows:
            f = record.files[n - 1]
            member = _shipped_path(f, record)
            theirs = hashes.get(member)
            if digest is None or f.sha256 is None or not isinstance(theirs, str):
                continue
            if theirs.lower() != f.sha256:
                raise Rejected(
                    f"a different build: {f.path} is sha256={theirs} in it, {f.sha256} in conda-meta"
                )
            compared += 1
            members[path] = member
            if f.rewritten:
                self._rewrites[member] = f
        if compared == 0:
            raise Rejected("shares no hashed file with the conda-meta record")
        self._open().wanted = frozenset(members.values()) if not os.path.isdir(self.location) else frozenset()
        return members

    def record_text(self) -> str:
        raise Rejected("a conda package has no RECORD")

    def read(self, member: str, limit: int) -> bytes:
        f = self._rewrites.get(member)
        cap = limit  # (a rewritten file's recorded size is the shipped one's or the installed one's: unused)
        if os.path.isdir(self.location):
            norm = os.path.normpath(member)
            if norm.startswith("..") or os.path.isabs(norm):
                raise OSError(f"member {member!r} leaves the package")
            data = read_regular(os.path.join(self.location, norm), cap + 1)
        else:
            data = self._open().member(member, cap)
        if len(data) > cap:
            raise SizeMismatch(f"larger than the {cap} bytes conda-meta gives")
        return rewrite(data, f, self.record.prefix) if f is not None else data

    def close(self) -> None:
        if self._archive is not None:
            self._archive.close()
            self._archive = None


class _Archive:
    """A package file read member by member: ``.tar.bz2`` with :mod:`tarfile`, ``.conda`` (a zip of two
    zstd tarballs) with ``conda-package-streaming``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._tar: tarfile.TarFile | None = None
        self.wanted: frozenset[str] = frozenset()  # the members a restore may ask for next
        self._kept: dict[str, bytes] = {}  # small wanted members met while streaming to another
        self._kept_bytes = 0  # what they hold (at most _KEEP_ALL)

    def member(self, name: str, limit: int, info: bool = False) -> bytes:
        if self.path.endswith(".tar.bz2"):
            if self._tar is None:
                self._tar = tarfile.open(self.path, "r:bz2")  # noqa: SIM115 (closed by close())
            return _bounded(self._tar, self._tar.getmember(name), limit)
        kept = self._kept.pop(name, None)
        self._kept_bytes -= len(kept or b"")
        if kept is not None and not info:
            if len(kept) > limit:
                raise SizeMismatch(f"larger than the {limit} bytes conda-meta gives")
            return kept
        return self._streamed(name, limit, info)

    def _streamed(self, name: str, limit: int, info: bool) -> bytes:
        """``name`` read by streaming the component that holds it (a ``.conda`` cannot seek), keeping the
        small wanted members passed on the way: a restore of many files decompresses the package once."""
        from conda_package_streaming.package_streaming import (  # type: ignore[import-untyped]
            CondaComponent,
            stream_conda_component,
        )

        component = CondaComponent.info if info else CondaComponent.pkg
        with open(self.path, "rb") as f:
            stream = stream_conda_component(self.path, f, component)
            try:
                for tar, m in stream:
                    if m.name == name:
                        return _bounded(tar, m, limit)
                    if not info and self._keeps(m):
                        self._kept[m.name] = _bounded(tar, m, _KEEP_EACH)
                        self._kept_bytes += len(self._kept[m.name])
            finally:
                with contextlib.suppress(Exception):
                    stream.close()
        raise KeyError(f"{name} is not in {os.path.basename(self.path)}")

    def _keeps(self, m: tarfile.TarInfo) -> bool:
        small = m.isfile() and m.size <= _KEEP_EACH
        fresh = m.name in self.wanted and m.name not in self._kept
        return small and fresh and self._kept_bytes + m.size <= _KEEP_ALL

    def close(self) -> None:
        if self._tar is not None:
            self._tar.close()
            self._tar = None


def _bounded(tar: tarfile.TarFile, m: tarfile.TarInfo, limit: int) -> bytes:
    """A member's bytes, never more than ``limit`` (the header's size is checked, then the stream)."""
    if not m.isfile():
        raise KeyError(f"{m.name} is not a regular file in the package")
    if m.size > limit:
        raise SizeMismatch(f"larger than the {limit} bytes conda-meta gives")
    f = tar.extractfile(m)
    if f is None:
        raise KeyError(m.name)
    with f:
        return f.read(limit + 1)


def package_dirs(prefix: str) -> list[str]:
    """conda's package caches this environment may have used: ``$CONDA_PKGS_DIRS``, the installation's
    ``pkgs/`` (``<root>/envs/<name>`` → ``<root>/pkgs``; the base environment's own ``pkgs/``),
    ``~/.conda/pkgs``, and rattler's (pixi, py-rattler) cache."""
    found = [p for p in os.environ.get("CONDA_PKGS_DIRS", "").split(",") if p]
    parent = os.path.dirname(prefix)
    if os.path.basename(parent) == "envs":
        found.append(os.path.join(os.path.dirname(parent), "pkgs"))
    found.append(os.path.join(prefix, "pkgs"))
    found.append(os.path.expanduser("~/.conda/pkgs"))
    rattler = os.environ.get("RATTLER_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rattler", "cache"
    )
    found.append(os.path.join(rattler, "pkgs"))
    return [d for d in dict.fromkeys(found) if os.path.isdir(d)]


def _archive_proof(path: str, record: CondaRecord) -> str | None:
    """Why the package file at ``path`` is refused (``None``: it is the one conda-meta names, or conda-meta
    names no hash of it — then only the per-file checks prove its members)."""
    want, algorithm = (
        (record.archive_sha256, "sha256") if record.archive_sha256 else (record.archive_md5, "md5")
    )
    if not want:
        return None
    h = hashlib.new(algorithm)
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if h.hexdigest() != want.lower():
        return f"its {algorithm} is not the one conda-meta records for {record.filename}"
    return None


def conda_candidates(
    dist: InstalledDistribution, wheelhouses: Sequence[str], tried: list[str]
) -> Iterator[Candidate]:
    """Where ``dist``'s conda package may be read: the directory it was extracted to, then package files
    of that name in the package caches and ``--wheelhouse`` directories (each checked by its hash)."""
    try:
        record = _record(dist)
    except Rejected as exc:
        tried.append(exc.message)
        return
    stem = f"{record.name}-{record.version}-{record.build}"
    places = package_dirs(record.prefix)
    extracted = _extracted_dirs(record)
    for directory in extracted:
        if os.path.isdir(os.path.join(directory, "info")):
            yield CondaPackage("conda-pkgs", directory, record)
    names = [record.filename] if record.filename else [stem + ".conda", stem + ".tar.bz2"]
    homes = [os.path.dirname(record.extracted)] if record.extracted else []
    homes += [*places, *wheelhouses]
    seen = 0
    for home in dict.fromkeys(homes):
        for name in names:
            path = os.path.join(home, name)
            if not os.path.isfile(path):
                continue
            seen += 1
            why = _archive_proof(path, record)
            if why is not None:
                tried.append(f"rejected {path}: {why}")
                continue
            yield CondaPackage("conda-package", path, record)
    if not extracted and not seen:
        tried.append(f"no package cache holds {stem} (looked in {', '.join(places) or 'none found'})")


def conda_cache_link(path: str, dist: InstalledDistribution) -> str | None:
    """The file of conda's package cache that ``path`` (an installed file of the conda package ``dist``) is
    a hard link of, if any: conda links packages into environments, so an edit made in place is in the
    cache too, and in every environment that links that package."""
    try:
        st = os.stat(path)
        if st.st_nlink < 2:
            return None
        record = _record(dist)
    except (OSError, Rejected):
        return None
    rel = os.path.relpath(path, record.prefix).replace(os.sep, "/")
    f = next((f for f in record.files if f.path == rel), None)
    if f is None:
        return None
    for directory in _extracted_dirs(record):
        twin = os.path.join(directory, *_shipped_path(f, record).split("/"))
        with contextlib.suppress(OSError):
            other = os.stat(twin)
            if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                return twin
    return None


def conda_note(twin: str, dist: InstalledDistribution) -> str:
    """What to tell about an installed file that shares its inode with conda's package cache."""
    package = os.path.basename(dist.metadata_dir)[: -len(".json")]
    extracted = _package_root(twin, package)
    return (
        f"a hard link of conda's package cache ({twin}): the edit is in the cache too, and in every "
        f"environment conda linked {package} into; after restoring, run `rm -r {shlex.quote(extracted)}` "
        "(conda extracts the package again from its package file when next needed)"
    )


def _package_root(twin: str, package: str) -> str:
    head = twin
    while os.path.basename(head) != package and os.path.dirname(head) != head:
        head = os.path.dirname(head)
    return head if os.path.basename(head) == package else os.path.dirname(twin)
