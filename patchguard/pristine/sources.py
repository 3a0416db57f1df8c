"""Pristine sources: find the wheel an installed distribution came from, prove it, and read its bytes.

Where a wheel is looked for, in this order (every place tried is reported when none fits):

1. wheelhouses: ``--wheelhouse DIR`` (repeatable), ``$PATCHGUARD_WHEELHOUSE`` (``os.pathsep``-separated),
   ``wheelhouse`` in ``[tool.patchguard]`` of the nearest ``pyproject.toml`` / ``patchguard.toml``;
2. pip's cache: locally built wheels (``wheels/``) and downloaded ones (``http-v2/*.body``; ``http/`` of
   pip before 23.3);
3. uv's cache: unpacked wheels (``archive-v*/<id>/``) and wheel files (``wheels-v*/``);
4. earlier downloads (patchguard's ``downloads/``), then the wheel file ``direct_url.json`` names;
5. unless offline: the find-links locations and indexes this box's pip (and uv) use, with patchguard's own
   index options first (:mod:`.index`): the wheels of ``name==version`` an installer of the environment
   accepts, best first, each downloaded only when the one before was not the build.

(The store, ``<cache>/pristine``, comes before all of them: callers look there first.)

A candidate is trusted only once it is **proven the same build**: every file both the installed RECORD and
the wheel's RECORD list must have the same hash (``+cu128`` and ``+cpu`` builds of one version differ). A
candidate that disagrees is rejected with the reason, and the next one is tried.

Bytes read from a wheel are checked against the installed RECORD hash and kept in a content-addressed
store (:mod:`.store`), so a second ``diff`` needs no wheel at all: the RECORD's sha256 is the store key.
Reading a wheel — a member bounded by its RECORD size, the wheel's own RECORD — is :mod:`.wheels`; reading
an index is :mod:`.index`. This module decides where to look and proves what it found.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import os
import sys
import urllib.parse
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from packaging.tags import Tag

    from ..env import Target
    from .index import IndexFile, IndexSettings

from .._fs import not_a_directory
from ..errors import PatchguardError, UsageError
from ..integrity.cache import cache_root, user_cache_dir
from ..integrity.records import (
    CONDA,
    DPKG,
    InstalledDistribution,
    RecordEntry,
    canonicalize,
    matches,
    name_version_from_dirname,
)
from .store import PristineStore
from .wheels import (
    INSTALLED_LIMIT,
    READ_ERRORS,
    Candidate,
    DownloadProgress,
    Rejected,
    SizeMismatch,
    UnpackedWheel,
    WheelFile,
    is_script_member,
    member_map,
    own_record_wrong,
    wheel_record,
)

__all__ = [
    "NoPristineSource",
    "Pristine",
    "Release",
    "ReleaseId",
    "SourceOptions",
    "Sources",
    "find_pristine",
    "remote",
    "sharing_environments",
    "uv_cache_link",
    "wheel_tags",
]


class NoPristineSource(PatchguardError):
    """No wheel of this exact build was found anywhere patchguard looked."""


class Release(Protocol):
    """A release of a distribution: what a wheel is looked for by (an installed distribution is one)."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def canonical_name(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ReleaseId:
    """A release that need not be installed (``rebase`` reads the one a set was written for)."""

    name: str
    version: str

    @property
    def canonical_name(self) -> str:
        return canonicalize(self.name)


# -- where to look ----------------------------------------------------------------------------------------


def pip_cache_dir() -> str:
    return user_cache_dir("PIP_CACHE_DIR", "pip")


def uv_cache_dir() -> str:
    return user_cache_dir("UV_CACHE_DIR", "uv")


def uv_cache_link(path: str, relpath: str, dist: InstalledDistribution, uv: str | None = None) -> str | None:
    """The file of uv's cache that ``path`` (an installed file of ``dist``, at RECORD path ``relpath``) is a
    hard link of, if any: an edit made in place there is uv's cached copy edited too, and the next
    ``uv pip install`` links it into another environment. Only files with more than one link are looked up,
    and only in the cache entries of ``dist``'s own wheel."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_nlink < 2:
        return None
    for archive in _uv_archives(uv or uv_cache_dir()).get((dist.canonical_name, dist.version), ()):
        twin = os.path.join(archive, *relpath.split("/"))
        with contextlib.suppress(OSError):
            other = os.stat(twin)
            if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                return twin
    return None


# Where environments usually live on a serving box, searched (to a few levels) for the other environments
# that share an edited file's inode; ``$PATCHGUARD_ENV_ROOTS`` (``:``-separated) replaces them.
_ENV_ROOTS = ("/opt", "/srv", "/home", "/root", "/workspace", "/data", "/usr/local")
_ENV_DEPTH = 4
_ENV_DIRS = 20000  # directories looked at, at most: the search is bounded whatever the box holds
_SKIP_DIRS = frozenset({"site-packages", "dist-packages", "node_modules", "__pycache__", ".git"})


def _environments(roots: Sequence[str]) -> Iterator[str]:
    """Directories holding ``pyvenv.cfg`` or ``conda-meta/`` below ``roots``, breadth first, bounded."""
    queue = collections.deque((os.path.abspath(r), 0) for r in roots if os.path.isdir(r))
    seen: set[str] = set()
    visited = 0
    while queue and visited < _ENV_DIRS:
        top, depth = queue.popleft()
        if top in seen:
            continue
        seen.add(top)
        visited += 1
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        names = {e.name for e in entries}
        if "pyvenv.cfg" in names or "conda-meta" in names:
            yield top
        if depth >= _ENV_DEPTH:
            continue
        for e in sorted(entries, key=lambda e: e.name):
            with contextlib.suppress(OSError):
                if e.is_dir(follow_symlinks=False) and e.name not in _SKIP_DIRS:
                    queue.append((e.path, depth + 1))


def sharing_environments(path: str, site_dir: str) -> tuple[list[str], int]:
    """The other environments whose copy of ``path`` (an installed file in ``site_dir``, a hard link of an
    installer's cache entry) is the same inode, and how many more links exist that were not found.

    The same edit is live in each of them. Searched: the directory holding this environment's project (its
    siblings), and the usual places (:data:`_ENV_ROOTS`; ``$PATCHGUARD_ENV_ROOTS`` instead), a few levels
    deep."""
    try:
        st = os.stat(path)
    except OSError:
        return [], 0
    expected = st.st_nlink - 2  # this file and the cache's
    if expected <= 0:
        return [], 0
    rel = os.path.relpath(path, site_dir)
    own = os.path.realpath(site_dir)
    given = os.environ.get("PATCHGUARD_ENV_ROOTS")
    project = os.path.dirname(os.path.dirname(_env_of(site_dir)))
    roots = [project, *(given.split(os.pathsep) if given else _ENV_ROOTS)]
    found: list[str] = []
    for env in _environments([r for r in roots if r]):
        for lib in ("lib", "lib64"):
            with contextlib.suppress(OSError):
                for py in sorted(os.listdir(os.path.join(env, lib))):
                    site = os.path.join(env, lib, py, "site-packages")
                    if os.path.realpath(site) == own:
                        continue
                    with contextlib.suppress(OSError):
                        other = os.stat(os.path.join(site, rel))
                        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino) and env not in found:
                            found.append(env)
        if len(found) >= expected:
            break
    return found, max(expected - len(found), 0)


def _env_of(site_dir: str) -> str:
    """The environment directory of ``<env>/lib/pythonX.Y/site-packages``."""
    parts = os.path.normpath(site_dir).split(os.sep)
    return os.sep.join(parts[:-3]) if len(parts) > 3 and parts[-3] in ("lib", "lib64") else site_dir


_UV_ARCHIVES: dict[object, dict[tuple[str, str], list[str]]] = {}


def _uv_archives(uv: str) -> dict[tuple[str, str], list[str]]:
    """(distribution, version) → the unpacked wheels of uv's cache holding it; listed again only when an
    ``archive-v*`` directory changed (its mtime moves when uv adds or removes an entry)."""
    try:
        buckets = sorted(b for b in os.listdir(uv) if b.startswith("archive-v"))
        key: object = (uv, tuple((b, os.stat(os.path.join(uv, b)).st_mtime_ns) for b in buckets))
    except OSError:
        return {}
    if key not in _UV_ARCHIVES:
        found: dict[tuple[str, str], list[str]] = {}
        for bucket in buckets:
            with contextlib.suppress(OSError):
                for entry in sorted(os.listdir(os.path.join(uv, bucket))):
                    path = os.path.join(uv, bucket, entry)
                    with contextlib.suppress(OSError):
                        for sub in os.listdir(path):
                            if sub.endswith(".dist-info"):
                                name, version = name_version_from_dirname(sub)
                                found.setdefault((canonicalize(name), version), []).append(path)
        _UV_ARCHIVES.clear()  # one cache directory at a time
        _UV_ARCHIVES[key] = found
    return _UV_ARCHIVES[key]


@dataclass
class Sources:
    """Where pristine wheels may be found, and whether fetching them from an index is allowed."""

    wheelhouses: Sequence[str] = ()
    offline: bool = False
    pip_cache: str | None = None
    uv_cache: str | None = None
    download_dir: str | None = None
    store: PristineStore = field(default_factory=PristineStore)
    index: IndexSettings | None = None  # None: read from pip's configuration when first needed
    progress: DownloadProgress | None = None
    python_version: tuple[int, int] = (sys.version_info[0], sys.version_info[1])
    implementation: str = "cpython"
    prefix: str | None = None  # the environment's prefix: its own pip.conf counts
    index_url: str | None = None
    extra_index_urls: Sequence[str] = ()
    find_links: Sequence[str] = ()
    unlisted: set[tuple[str, str]] = field(default_factory=set)  # releases no index listed at all
    _published: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)

    def published(self, release: Release) -> dict[str, str]:
        """sha256 (hex) → where it is published, of every file the indexes list for ``release`` (asked once
        per release; nothing when offline or unreachable): what vouches for a wheel file's bytes without
        the RECORD inside it."""
        key = (release.canonical_name, release.version)
        if key not in self._published:
            found: dict[str, str] = {}
            if not self.offline:
                from . import index

                settings = self.index_settings()
                for place in settings.places:
                    try:
                        files = index.list_files(
                            release.name, release.version, place, settings, place in settings.indexes
                        )
                    except index.IndexError_:
                        continue
                    for f in files:
                        if f.sha256 and index.local_path(place) is None:  # a local directory vouches nothing
                            where = f"the sha256 {index.shown(place)} publishes for {f.filename}"
                            found.setdefault(f.sha256, where)
            self._published[key] = found
        return self._published[key]

    def index_settings(self) -> IndexSettings:
        if self.index is None:
            from .index import index_settings

            self.index = index_settings(
                self.prefix,
                index_url=self.index_url,
                extra_index_urls=self.extra_index_urls,
                find_links=self.find_links,
            )
        return self.index

    @classmethod
    def default(
        cls,
        wheelhouses: Sequence[str] = (),
        offline: bool = False,
        *,
        target: Target | None = None,
        index_url: str | None = None,
        extra_index_urls: Sequence[str] = (),
        find_links: Sequence[str] = (),
        progress: DownloadProgress | None = None,
    ) -> Sources:
        """The sources the command line and the configuration name: ``offline``, the index options and
        the wheelhouses add to ``offline``/``index_url``/``extra_index_url``/``find_links``/``wheelhouse``
        of ``[tool.patchguard]``, and ``$PATCHGUARD_WHEELHOUSE``."""
        from ..config import load_config
        from .index import python_version_of

        config = load_config()
        houses = list(wheelhouses)
        env = os.environ.get("PATCHGUARD_WHEELHOUSE")
        if env:
            houses += [p for p in env.split(os.pathsep) if p]
        houses += config.wheelhouse
        for house in houses:  # a wheelhouse named on purpose that is not there is a mistake, not "no wheel"
            why = not_a_directory(house)
            if why:
                raise UsageError(
                    f"wheelhouse {why}",
                    path=house,
                    hint="pass a directory of wheels to --wheelhouse (or fix $PATCHGUARD_WHEELHOUSE)",
                )
        return cls(
            wheelhouses=houses,
            offline=offline or config.offline,
            pip_cache=pip_cache_dir(),
            uv_cache=uv_cache_dir(),
            download_dir=os.path.join(cache_root(), "downloads"),
            progress=progress,
            python_version=python_version_of(target.python if target is not None else None),
            implementation=target.implementation if target is not None else sys.implementation.name,
            prefix=target.prefix if target is not None else sys.prefix,
            index_url=index_url or config.index_url,
            extra_index_urls=[*extra_index_urls, *config.extra_index_url],
            find_links=[*find_links, *config.find_links],
        )


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """What the command line says of pristine sources (``--wheelhouse``, ``--offline``, ``--index-url``,
    ``--extra-index-url``, ``--find-links``) and how to show a download; :meth:`open` adds the
    configuration and the environment's own pip configuration."""

    wheelhouse: Sequence[str] = ()
    offline: bool = False
    index_url: str | None = None
    extra_index_urls: Sequence[str] = ()
    find_links: Sequence[str] = ()
    progress: DownloadProgress | None = None

    @classmethod
    def of(
        cls, fetch: SourceOptions | None, wheelhouse: Sequence[str] = (), offline: bool = False
    ) -> SourceOptions:
        """``fetch`` with the plain ``wheelhouse``/``offline`` keywords of the library functions added."""
        base = fetch or cls()
        return cls(
            (*wheelhouse, *base.wheelhouse),
            offline or base.offline,
            base.index_url,
            base.extra_index_urls,
            base.find_links,
            base.progress,
        )

    def open(self, target: Target | None = None) -> Sources:
        return Sources.default(
            self.wheelhouse,
            self.offline,
            target=target,
            index_url=self.index_url,
            extra_index_urls=self.extra_index_urls,
            find_links=self.find_links,
            progress=self.progress,
        )


def _walk(top: str, suffix: str) -> Iterator[str]:
    for dirpath, _dirnames, filenames in os.walk(top):
        for n in filenames:
            if n.endswith(suffix):
                yield os.path.join(dirpath, n)


def _wheel_matches(filename: str, name: str, version: str) -> bool:
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    try:
        wname, wversion, _build, _tags = parse_wheel_filename(os.path.basename(filename))
        return wname == canonicalize_name(name) and wversion == Version(version)
    except (InvalidWheelFilename, InvalidVersion):
        return False


def _http_body_is(path: str, dist: Release) -> bool:
    """pip's http-v2 cache keeps downloaded wheels as ``<hash>.body``; pip before 23.3 kept whole responses
    in ``http/`` (``cc=4,`` and msgpack, the wheel's bytes inside — which ``zipfile`` reads as they are).
    Look inside for the dist-info."""
    return any(canonicalize(n) == dist.canonical_name and v == dist.version for n, v in _body_releases(path))


def candidates(dist: Release, sources: Sources, tried: list[str]) -> Iterator[Candidate]:
    """Every local candidate wheel for ``dist``, in the order of the module docstring."""
    for house in sources.wheelhouses:
        yield from _wheelhouse(house, dist, tried)
    if sources.pip_cache:
        yield from _pip_cache(sources.pip_cache, dist, tried)
    if sources.uv_cache:
        yield from _uv_cache(sources.uv_cache, dist, tried)
    if sources.download_dir and os.path.isdir(sources.download_dir):
        for p in sorted(_walk(sources.download_dir, ".whl")):
            if _wheel_matches(p, dist.name, dist.version):
                tried.append(f"earlier download {p}")
                yield WheelFile("download", p)


def _wheelhouse(house: str, dist: Release, tried: list[str]) -> Iterator[Candidate]:
    if not os.path.isdir(house):
        tried.append(f"wheelhouse {house}: not a directory")
        return
    found = [p for p in _walk(house, ".whl") if _wheel_matches(p, dist.name, dist.version)]
    tried.append(f"wheelhouse {house}: {len(found)} matching wheel{'s' if len(found) != 1 else ''}")
    for p in sorted(found):
        yield WheelFile("wheelhouse", p)


def _pip_cache(pip: str, dist: Release, tried: list[str]) -> Iterator[Candidate]:
    """Wheels pip built (``wheels/``) and wheels it downloaded (``http-v2/*.body``, older pips' ``http/``)."""
    built = [
        p for p in _walk(os.path.join(pip, "wheels"), ".whl") if _wheel_matches(p, dist.name, dist.version)
    ]
    bodies = [p for p in _walk(os.path.join(pip, "http-v2"), ".body") if _http_body_is(p, dist)]
    bodies += [p for p in _walk(os.path.join(pip, "http"), "") if _http_body_is(p, dist)]  # pip < 23.3
    tried.append(f"pip cache {pip}: {len(built) + len(bodies)} matching")
    for p in [*built, *bodies]:
        yield WheelFile("pip-cache", p)


def _uv_cache(uv: str, dist: Release, tried: list[str]) -> Iterator[Candidate]:
    """Unpacked wheels (``archive-v*/``) and wheel files (``wheels-v*/``) of uv's cache."""
    n = 0
    for bucket in sorted(os.listdir(uv)) if os.path.isdir(uv) else []:
        root = os.path.join(uv, bucket)
        if bucket.startswith("archive-v"):
            for entry in sorted(os.listdir(root)):
                path = os.path.join(root, entry)
                with contextlib.suppress(OSError):
                    for sub in os.listdir(path):
                        if sub.endswith(".dist-info") and _dist_info_matches(sub, dist):
                            n += 1
                            yield UnpackedWheel(path, sub)
        elif bucket.startswith("wheels-v"):
            for p in _walk(root, ".whl"):
                if _wheel_matches(p, dist.name, dist.version):
                    n += 1
                    yield WheelFile("uv-cache", p)
    tried.append(f"uv cache {uv}: {n} matching")


def local_versions(name: str, sources: Sources) -> set[str]:
    """Every version of ``name`` a local source holds a wheel of (wheelhouses, pip's and uv's caches,
    earlier downloads): where ``rebase`` looks for the release a set written for a version range came from."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    wanted = canonicalize(name)
    found: set[str] = set()
    roots = _wheel_roots(sources)
    if sources.uv_cache and os.path.isdir(sources.uv_cache):
        found |= {v for (n, v) in _uv_archives(sources.uv_cache) if n == wanted}
    for root in roots:
        for p in _walk(root, ".whl") if root and os.path.isdir(root) else ():
            with contextlib.suppress(InvalidWheelFilename):
                wname, version, _build, _tags = parse_wheel_filename(os.path.basename(p))
                if wname == wanted:
                    found.add(str(version))
    if sources.pip_cache:
        for sub in ("http-v2", "http"):
            for p in _walk(os.path.join(sources.pip_cache, sub), ""):
                found |= {v for n, v in _body_releases(p) if canonicalize(n) == wanted}
    return found


def _wheel_roots(sources: Sources) -> list[str | None]:
    """The directories wheels of any release may be under: wheelhouses, the download directory, pip's
    wheel cache and uv's (``wheels-v*``)."""
    roots = [*sources.wheelhouses, sources.download_dir]
    roots += [os.path.join(sources.pip_cache, "wheels")] if sources.pip_cache else []
    if sources.uv_cache and os.path.isdir(sources.uv_cache):
        roots += [
            os.path.join(sources.uv_cache, b)
            for b in os.listdir(sources.uv_cache)
            if b.startswith("wheels-v")
        ]
    return roots


def _body_releases(path: str) -> list[tuple[str, str]]:
    """(name, version) of the dist-info in one of pip's cached responses (none: not a wheel)."""
    try:
        with open(path, "rb") as f:
            if not f.read(5).startswith((b"PK\x03\x04", b"cc=4,")):
                return []
        with zipfile.ZipFile(path) as zf:
            infos = {n.split("/", 1)[0] for n in zf.namelist() if n.endswith(".dist-info/METADATA")}
    except (OSError, zipfile.BadZipFile):
        return []
    return [name_version_from_dirname(i) for i in infos]


def _dist_info_matches(dirname: str, dist: Release) -> bool:
    name, version = name_version_from_dirname(dirname)
    return canonicalize(name) == dist.canonical_name and version == dist.version


# -- proving a candidate ----------------------------------------------------------------------------------


def vouch(cand: Candidate, dist: InstalledDistribution, sources: Sources) -> str | None:
    """What proves a candidate wheel file's bytes independently of the RECORD inside it, or ``None``.

    A RECORD vouches for a member only when the two agree; when they disagree (an upstream RECORD that is
    wrong, or a wheel whose member was swapped under a real RECORD) only this may: the sha256 an index
    published for the file (checked as it was downloaded, or the file's own sha256 found among those the
    box's indexes publish for the release), or the sha256 pip recorded in ``direct_url.json``. A local
    directory, a cache or a wheelhouse vouches for nothing by itself.
    """
    if not isinstance(cand, WheelFile):
        return None  # an unpacked wheel (uv's cache) may be the installed file itself, edited
    if cand.vouched is not None:
        return cand.vouched or None  # "": looked, and nothing vouches
    from .._fs import sha256_file
    from .vcs import direct_url

    try:
        digest = sha256_file(cand.location)
    except OSError:
        digest = None
    if digest is None:
        cand.vouched = ""
        return None
    url = direct_url(dist)
    if url is not None and url.sha256 == digest:
        cand.vouched = "the sha256 pip recorded in direct_url.json"
    else:
        cand.vouched = sources.published(dist).get(digest, "")
    return cand.vouched or None


@dataclass
class Pristine:
    """A proven pristine source for one installed distribution — and, should one of its files not be the
    wheel's any more (a uv cache entry edited through a hard link), the next proven candidates."""

    dist: InstalledDistribution
    candidate: Candidate | None
    members: dict[str, str]
    store: PristineStore
    description: str
    wheel_record: dict[str, RecordEntry] = field(default_factory=dict)
    more: Iterator[Candidate] = field(default_factory=lambda: iter(()))
    notes: list[str] = field(default_factory=list)  # candidates skipped for a file, and why
    # Installed RECORD paths whose row the wheel's own RECORD got wrong: the wheel file (proven the same
    # build by every other row) holds other bytes than its RECORD says, and the installer copied the row.
    record_wrong: set[str] = field(default_factory=set)
    sources: Sources | None = None  # what may vouch for a wheel whose own RECORD is wrong (:func:`vouch`)
    _alternates: list[tuple[Candidate, dict[str, str]]] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        dist: InstalledDistribution,
        cand: Candidate,
        wheel_entries: Sequence[RecordEntry],
        sources: Sources,
        more: Iterator[Candidate] | None = None,
    ) -> Pristine:
        """The pristine source ``cand`` gives ``dist``, once it is trusted (proven or same release)."""
        members = member_map(wheel_entries, dist)
        by_member = {e.path: e for e in wheel_entries}
        return cls(
            dist,
            cand,
            members,
            sources.store,
            f"{cand.kind} {cand.location}",
            {p: by_member[m] for p, m in members.items()},
            more if more is not None else iter(()),
            sources=sources,
        )

    def bytes_for(self, entry: RecordEntry) -> bytes:
        """The pristine bytes of an installed RECORD entry, checked against that entry's hash.

        Callers look in the store first (:meth:`PristineStore.for_entry`): this reads the wheel. A member
        that is missing, unreadable or not the RECORD's bytes sends it to the next proven candidate (finally
        ``pip download``, unless offline); :class:`NoPristineSource` lists them all when none has it.
        """
        tried: list[str] = []
        for cand, members in self._sources():
            got = self._member(cand, members, entry, tried)
            if got is not None:
                self.store.put(got)
                return got
        tried += [n for n in self.notes if n.startswith("rejected ") and n not in tried]
        raise NoPristineSource(
            f"no pristine copy of {entry.path}: " + "; ".join(tried),
            path=self.dist.metadata_dir,
            hint="point --wheelhouse at an untouched copy of the wheel",
        )

    def _sources(self) -> Iterator[tuple[Candidate, dict[str, str]]]:
        if self.candidate is not None:
            yield self.candidate, self.members
        yield from self._alternates
        for cand in self.more:
            try:
                members = _proven_members(self.dist, cand)
            except Rejected as exc:
                self.notes.append(f"rejected {cand.location}: {exc.message}")
                _drop(cand)
                continue
            self._alternates.append((cand, members))
            yield self._alternates[-1]

    def _member(
        self, cand: Candidate, members: dict[str, str], entry: RecordEntry, tried: list[str]
    ) -> bytes | None:
        """The entry's bytes from one candidate, or ``None`` with the reason added to ``tried``.

        Bytes are the entry's when they hash to its row. When they do not — by hash, or by size — they are
        taken only if the wheel's own RECORD gives the member the installed row (the upstream RECORD is
        wrong, and the installer copied it) *and* something independent of that RECORD vouches for the wheel
        file (:func:`vouch`): a member swapped under a real RECORD is never called pristine.
        """
        member = members.get(entry.path)
        if member is None:
            tried.append(f"{cand.location} has no such file (generated at install time?)")
            return None
        script = is_script_member(member)
        limit = entry.size if entry.size is not None and not script else INSTALLED_LIMIT
        why = "edited through a hard link?" if cand.kind == "uv-cache" else "modified?"
        try:
            data = cand.read(member, limit)
        except SizeMismatch as exc:
            if not self._vouched(cand, member, entry, tried):
                tried.append(
                    f"{member} of {cand.location} does not match the installed RECORD: {exc} ({why})"
                )
                self.notes.append(tried[-1])
                return None
            try:
                data = cand.read(member, INSTALLED_LIMIT)  # the wheel file itself is proven: read it whole
            except READ_ERRORS as again:
                tried.append(f"cannot read {member} of {cand.location} ({again})")
                return None
            self.record_wrong.add(entry.path)
            return data
        except READ_ERRORS as exc:
            tried.append(f"cannot read {member} of {cand.location} ({exc})")
            return None
        if script and data.startswith(b"#!python"):
            data = self._rewrite_shebang(entry, data)
        if entry.digest is not None and not matches(entry, data):
            if self._vouched(cand, member, entry, tried):
                self.record_wrong.add(entry.path)
                return data
            tried.append(f"{member} of {cand.location} does not match the installed RECORD hash ({why})")
            self.notes.append(tried[-1])
            logging.getLogger("patchguard").info("skipped: %s", tried[-1])
            return None
        return data

    def _vouched(self, cand: Candidate, member: str, entry: RecordEntry, tried: list[str]) -> bool:
        """Whether bytes of ``member`` that disagree with the installed row may still be taken as shipped:
        the wheel's own RECORD row is the installed one, and :func:`vouch` proves the wheel file."""
        if not own_record_wrong(cand, member, entry):
            return False
        proof = vouch(cand, self.dist, self.sources) if self.sources is not None else None
        if proof is None:
            tried.append(
                f"{member} of {cand.location} is not what its own RECORD says, and nothing independent of "
                "that RECORD vouches for the wheel file (no sha256 published by an index, none in "
                "direct_url.json): refused"
            )
            self.notes.append(tried[-1])
            return False
        logging.getLogger("patchguard").info("%s: the wheel's own RECORD is wrong; %s vouches", member, proof)
        return True

    def _rewrite_shebang(self, entry: RecordEntry, data: bytes) -> bytes:
        """Installers rewrite ``#!python`` to the interpreter: find the rewrite matching the RECORD hash."""
        body = data.split(b"\n", 1)[1] if b"\n" in data else b""
        options: list[bytes] = []
        with contextlib.suppress(OSError):
            with open(self.dist.resolve(entry.path), "rb") as f:
                first = f.readline()
            if first.startswith(b"#!"):
                options.append(first)
        options.append(b"#!" + os.fsencode(sys.executable) + b"\n")
        for shebang in options:
            candidate = shebang + body
            if matches(entry, candidate):
                return candidate
        return data


def _proven_members(dist: InstalledDistribution, cand: Candidate) -> dict[str, str]:
    """Installed path → member of a candidate proven the same build (:class:`Rejected` when it is not)."""
    members = cand.members_for(dist)
    return members if members is not None else member_map(_prove(dist, cand), dist)


def _prove(dist: InstalledDistribution, cand: Candidate) -> list[RecordEntry]:
    """The wheel's RECORD if ``cand`` is the same build as ``dist``; :class:`Rejected` says why it is not."""
    wheel_entries = wheel_record(cand)
    members = member_map(wheel_entries, dist)
    by_member = {e.path: e for e in wheel_entries}
    installed = {e.path: e for e in dist.entries}
    compared = 0
    for path, member in members.items():
        ours, theirs = installed.get(path), by_member[member]
        if ours is None or ours.digest is None or theirs.digest is None or is_script_member(member):
            continue
        if ours.algorithm != theirs.algorithm:
            continue
        compared += 1
        if ours.digest != theirs.digest:
            raise Rejected(
                f"a different build: {path} is {theirs.algorithm}={theirs.digest} in the wheel, "
                f"{ours.algorithm}={ours.digest} in the installed RECORD"
            )
    if compared == 0:
        raise Rejected("shares no hashed file with the installed RECORD")
    return wheel_entries


def wheel_tags(dist: InstalledDistribution) -> frozenset[Tag]:
    """The tags the installed ``WHEEL`` file names (empty: none, or a file someone edited)."""
    from packaging.tags import parse_tag

    try:
        with open(os.path.join(dist.metadata_dir, "WHEEL"), encoding="utf-8") as f:
            lines = f.read(1 << 16).splitlines()
        return frozenset(t for line in lines if line.startswith("Tag:") for t in parse_tag(line[4:].strip()))
    except (OSError, UnicodeDecodeError, ValueError):  # ValueError: packaging's InvalidTag
        return frozenset()


def _direct(dist: Release, sources: Sources, tried: list[str]) -> Iterator[Candidate]:
    """The wheel ``direct_url.json`` says the distribution was installed from (a file, or a URL)."""
    if not isinstance(dist, InstalledDistribution):
        return
    from .vcs import direct_url

    url = direct_url(dist)
    if url is None or not url.archive:
        return
    from . import index

    name = urllib.parse.unquote(urllib.parse.urlsplit(url.url).path.rsplit("/", 1)[-1])
    if not _wheel_matches(name, dist.name, dist.version):
        tried.append(f"direct_url.json names {index.shown(url.url)}: not a wheel of this release")
        return
    local = url.local_dir
    if local is not None:
        tried.append(f"direct_url.json: {local}" + ("" if os.path.isfile(local) else " (no longer there)"))
        if os.path.isfile(local):
            yield WheelFile("direct-url", local)
        return
    if sources.offline:
        tried.append(f"direct_url.json: {index.shown(url.url)} (not fetched: offline)")
        return
    assert sources.download_dir is not None
    if os.path.exists(os.path.join(sources.download_dir, name)):
        return  # downloaded before: already tried as an earlier download
    got = _fetch(index.IndexFile(name, url.url, None, url.url), sources, tried)
    if got is not None:
        yield got


def _fetch(file: IndexFile, sources: Sources, tried: list[str]) -> Candidate | None:
    from . import index

    assert sources.download_dir is not None
    try:
        path = index.fetch(file, sources.download_dir, sources.index_settings(), sources.progress)
    except index.IndexError_ as exc:
        tried.append(f"download of {file.filename} from {index.shown(file.where)} failed: {exc}")
        return None
    tried.append(f"downloaded {file.filename} from {index.shown(file.where)}")
    vouched = f"the sha256 {index.shown(file.where)} publishes for it" if file.sha256 else None
    return WheelFile("download", path, vouched)


def _listed_line(place: str, usable: int, other: int) -> str:
    """What a place listed, for the tried lines: ``https://…: 2 wheels, 3 for other platforms``."""
    skipped = f", {other} for other platforms" if other else ""
    return f"{place}: {usable} wheel{'s' if usable != 1 else ''}{skipped}"


def remote(
    release: Release, sources: Sources, tried: list[str], tags: frozenset[Tag] = frozenset()
) -> Iterator[Candidate]:
    """The wheels of ``release`` that this box's find-links and indexes list, best first (see
    :mod:`.index`): local ones read in place, remote ones downloaded one at a time, only when the one
    before was not the build; nothing when offline."""
    from . import index

    if sources.offline:
        tried.append("indexes: not asked (--offline)")
        return
    settings = sources.index_settings()
    supported = index.supported_tags(sources.python_version, sources.implementation)
    assert sources.download_dir is not None
    listed = fetched = 0
    for place in settings.places:
        try:
            files = index.list_files(
                release.name, release.version, place, settings, place in settings.indexes
            )
        except index.IndexError_ as exc:
            tried.append(f"{index.shown(place)}: {exc}")
            continue
        usable, other = index.rank(files, tags, supported)
        listed += len(files)
        tried.append(_listed_line(index.shown(place), len(usable), len(other)))
        remote_page = index.local_path(place) is None
        for f in usable:
            local = index.local_path(f.url)
            if local is not None:
                if remote_page:
                    continue  # a remote page never names a file of this machine
                if os.path.isfile(local):
                    yield WheelFile("find-links" if place in settings.find_links else "index", local)
            elif not os.path.exists(os.path.join(sources.download_dir, f.filename)):
                if fetched >= index.FETCH_LIMIT:
                    tried.append(f"stopped after {fetched} downloads of {release.name} {release.version}")
                    return
                fetched += 1
                got = _fetch(f, sources, tried)
                if got is not None:
                    yield got
    if not listed:
        sources.unlisted.add((release.canonical_name, release.version))


def unlisted_hint(release: Release, sources: Sources) -> str:
    """What to do when no wheel of the release was found: the option naming where it comes from."""
    from . import index

    if sources.offline:
        return "allow fetching (drop --offline), or pass --wheelhouse DIR holding the wheel"
    pytorch = index.local_version_hint(release.version)
    if pytorch is not None and (release.canonical_name, release.version) in sources.unlisted:
        label = release.version.partition("+")[2]
        return f"pass --extra-index-url {pytorch} (the index serving +{label} builds)"
    return (
        "pass --extra-index-url URL of the index it was installed from, or --wheelhouse DIR holding the wheel"
    )


def _drop(cand: Candidate) -> None:
    """A candidate that is not the build: closed, and when patchguard downloaded it for this, not kept (a
    hostile page listing thousands of wheels must not fill the cache)."""
    cand.close()
    if cand.kind == "download" and isinstance(cand, WheelFile):
        with contextlib.suppress(OSError):
            os.unlink(cand.location)


def find_pristine(dist: InstalledDistribution, sources: Sources) -> Pristine:
    """A proven pristine source for ``dist``, or :class:`NoPristineSource` listing every place tried."""
    tried: list[str] = []
    if dist.baseline == CONDA:  # a conda build: its package, never a wheel of the same version
        from .conda import conda_candidates

        more: Iterator[Candidate] = conda_candidates(dist, sources.wheelhouses, tried)
    elif dist.baseline == DPKG:  # Debian's build: its .deb
        from .debian import deb_candidates

        more = deb_candidates(dist, sources.wheelhouses, tried)
    else:
        more = itertools.chain(
            candidates(dist, sources, tried),
            _direct(dist, sources, tried),
            remote(dist, sources, tried, wheel_tags(dist)),
        )
    for cand in more:
        try:
            members = cand.members_for(dist)
            if members is None:
                proof = _prove(dist, cand)
                return Pristine.of(dist, cand, proof, sources, more)
        except Rejected as exc:
            tried.append(f"rejected {cand.location}: {exc.message}")
            _drop(cand)
            continue
        # (``tried`` stays the notes: the package files refused later, while ``more`` is walked, say why)
        return Pristine(
            dist,
            cand,
            members,
            sources.store,
            f"{cand.kind} {cand.location}",
            more=more,
            notes=tried,
            sources=sources,
        )
    what = {CONDA: "conda package", DPKG: ".deb"}.get(dist.baseline, "wheel")
    raise NoPristineSource(
        f"no {what} of {dist.name} {dist.version} (this build) found; looked in: "
        + "; ".join(t.strip() for t in tried),
        path=dist.metadata_dir,
        hint=_managed_hint(dist) or unlisted_hint(dist, sources),
    )


def _managed_hint(dist: InstalledDistribution) -> str | None:
    """Where a conda or Debian package's pristine bytes are kept, and how to get them back."""
    if dist.baseline == DPKG:
        from .debian import deb_hint

        return deb_hint(dist)
    if dist.baseline != CONDA:
        return None
    package = os.path.basename(dist.metadata_dir)[: -len(".json")]
    return (
        f"conda keeps packages in its package cache (pkgs/): put {package}'s package file (.conda or "
        ".tar.bz2) back there (conda install --download-only), or pass --wheelhouse DIR holding it"
    )
