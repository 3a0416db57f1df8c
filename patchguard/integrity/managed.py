"""Packages another package manager installed — conda, dpkg — each verified against that manager's record.

In a conda environment, a package conda linked is judged by conda's record of it (``conda-meta/*.json``:
hash, size and path type of every file, the in-prefix hash of files whose prefix was rewritten), never by
the RECORD its ``.dist-info`` may also carry: that RECORD describes the wheel conda-build installed into the
build prefix, not what conda put here. In Debian's ``dist-packages``, a ``python3-*`` package is judged by
dpkg's ``md5sums``: its RECORD, when dh-python kept one, was written before ``dh_strip`` and Debian's patches
changed the files. A distribution pip installed beside them has no such record and keeps its RECORD.

When pip installed over a managed package (``pip install -U`` removes the old files through the RECORD and
writes its own ``.dist-info``), the manager's record is stale: the package is said once (``*-replaced``),
checked by pip's RECORD, never a page of missing files. See :mod:`.condarecord` and :mod:`.dpkgrecord`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, replace

from .._fs import read_regular
from ..env import Target
from .cache import StatCache
from .dpkgrecord import parse_status
from .records import (
    CONDA,
    DPKG,
    META_SUFFIXES,
    InstalledDistribution,
    canonicalize,
    discover,
    load_baseline,
    name_version,
)

__all__ = ["Managed", "installed_distributions", "managed_distributions"]


@dataclass(frozen=True)
class Managed:
    """The packages other package managers installed into an environment: each as a distribution, the
    metadata directories they own (not to be read again as pip's), and those pip replaced (with the
    metadata directory of the install that replaced them): not checked, said once each."""

    dists: tuple[InstalledDistribution, ...] = ()
    owned: frozenset[str] = frozenset()
    replaced: tuple[tuple[InstalledDistribution, str], ...] = ()


# What a managed package's own metadata directory may say in INSTALLER (anything else: pip, uv replaced it).
_OWN_INSTALLERS = {CONDA: ("", "conda"), DPKG: ("", "debian", "dpkg")}


def managed_distributions(target: Target, cache: StatCache) -> Managed:
    """Every conda and dpkg package of ``target``, read (or taken from the stat cache while its record keeps
    its stat key); an empty :class:`Managed` for a plain venv."""
    if not target.site_packages:
        return Managed()
    dists: list[InstalledDistribution] = []
    owned: set[str] = set()
    replaced: list[tuple[InstalledDistribution, str]] = []
    for dist in _records(target, cache):
        metas = [os.path.join(dist.site_dir, d) for d in dist.package_dirs if d.endswith(META_SUFFIXES)]
        dist = _as_python(dist, metas)
        instead = _installed_instead(dist.site_dir, metas, _OWN_INSTALLERS[dist.baseline])
        if instead is not None:
            replaced.append((dist, instead))
        else:
            owned.update(metas)
            dists.append(dist)
    return Managed(tuple(dists), frozenset(owned), tuple(replaced))


def installed_distributions(target: Target) -> list[InstalledDistribution]:
    """Every distribution of ``target``, each read from the record its installer kept: managed packages from
    their manager's record, the rest from their RECORD (for sets, capture and ``running``)."""
    managed = managed_distributions(target, StatCache.disabled())
    rest = (d for d in discover(target.site_packages) if d.metadata_dir not in managed.owned)
    return [*managed.dists, *rest]


def _records(target: Target, cache: StatCache) -> Iterator[InstalledDistribution]:
    if target.conda is not None:
        site = target.site_packages[0]
        for record_file, name, version in _conda_records(target.conda):
            yield cache.distribution(record_file) or load_baseline(record_file, site, name, version, CONDA)
    for site in target.site_packages:
        for record_file, name, version in _dpkg_records(site):
            yield cache.distribution(record_file) or load_baseline(record_file, site, name, version, DPKG)


# -- conda ----------------------------------------------------------------------------------------------


def _conda_records(prefix: str) -> Iterator[tuple[str, str, str]]:
    """``(record, name, version)`` of every package in ``<prefix>/conda-meta``; name and version from
    ``<name>-<version>-<build>.json`` (versions and builds hold no ``-``)."""
    meta = os.path.join(prefix, "conda-meta")
    try:
        names = sorted(os.listdir(meta))
    except OSError:
        return
    for n in names:
        if n.endswith(".json"):
            parts = n[: -len(".json")].rsplit("-", 2)
            yield os.path.join(meta, n), parts[0], parts[1] if len(parts) == 3 else ""


# -- dpkg -----------------------------------------------------------------------------------------------

_DEBIAN_SITES = (("usr", "lib", "python3", "dist-packages"),)


def debian_root(site: str) -> str | None:
    """The root dpkg installed ``site`` under (``/`` for ``/usr/lib/python3/dist-packages``; a chroot's or a
    mounted image's root likewise), when its ``var/lib/dpkg/info`` exists."""
    parts = os.path.normpath(site).split(os.sep)
    for tail in _DEBIAN_SITES:
        if tuple(parts[-len(tail) :]) == tail:
            root = os.sep.join(parts[: -len(tail)]) or os.sep
            if os.path.isdir(os.path.join(root, "var", "lib", "dpkg", "info")):
                return root
    return None


def _dpkg_records(site: str) -> Iterator[tuple[str, str, str]]:
    """``(md5sums, package, version)`` of every Debian package with files in ``site``: the packages whose
    ``.list`` names a path below it (read as bytes: one pass over ``info/``)."""
    root = debian_root(site)
    if root is None:
        return
    admin = os.path.join(root, "var", "lib", "dpkg")
    info = os.path.join(admin, "info")
    below = ("/" + os.path.relpath(site, root).replace(os.sep, "/") + "/").encode()
    try:
        versions = parse_status(read_regular(os.path.join(admin, "status")).decode("utf-8", "replace"))
        names = sorted(os.listdir(info))
    except OSError:
        return
    for n in names:
        if not n.endswith(".list"):
            continue
        try:
            if below not in read_regular(os.path.join(info, n)):
                continue
        except OSError:
            continue
        package = n[: -len(".list")]
        base = package.partition(":")[0]
        md5sums = os.path.join(info, package + ".md5sums")
        record = md5sums if os.path.exists(md5sums) else os.path.join(info, n)
        yield record, base, versions.get(package) or versions.get(base, "")


# -- both -----------------------------------------------------------------------------------------------


def _as_python(dist: InstalledDistribution, metas: list[str]) -> InstalledDistribution:
    """Shown by the Python project's name and version when the package ships one metadata directory."""
    present = [m for m in metas if os.path.isdir(m)]
    if len(present) != 1:
        return dist
    name, version = name_version(present[0])
    if not name or not version or (name, version) == (dist.name, dist.version):
        return dist  # (the same object: the stat cache knows its files by it)
    return replace(dist, name=name, version=version, canonical_name=canonicalize(name))


def _installer(meta_dir: str) -> str:
    try:
        return read_regular(os.path.join(meta_dir, "INSTALLER"), 256).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _installed_instead(site: str, metas: list[str], own: tuple[str, ...]) -> str | None:
    """The metadata directory of another installer's install of the package's project, when it replaced the
    package: another ``.dist-info`` where the package's is gone, or the same one with pip's ``INSTALLER``."""
    foreign = [m for m in metas if os.path.isdir(m) and _installer(m) not in own]
    if foreign:
        return foreign[0]
    gone = [m for m in metas if not os.path.isdir(m)]
    if not gone:
        return None
    wanted = {canonicalize(_project(os.path.basename(m))) for m in gone}
    try:
        names = os.listdir(site)
    except OSError:
        return None
    for n in sorted(names):
        full = os.path.join(site, n)
        if n.endswith(META_SUFFIXES) and full not in gone and canonicalize(_project(n)) in wanted:
            return full
    return None


def _project(meta_name: str) -> str:
    return meta_name.rsplit(".", 1)[0].split("-", 1)[0]
