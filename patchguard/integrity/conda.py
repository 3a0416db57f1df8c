"""The packages conda installed into an environment, each verified against its conda-meta record.

In a conda environment, a package conda linked is judged by conda's record of it (``conda-meta/*.json``:
hash, size and path type of every file, the in-prefix hash of files whose prefix was rewritten), never by
the RECORD its ``.dist-info`` may also carry: that RECORD describes the wheel conda-build installed into the
build prefix, not what conda put here. A distribution pip installed into the conda environment has no
conda record and keeps its RECORD. See :mod:`.condarecord` for the record itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from .._fs import read_regular
from ..env import Target
from .cache import StatCache
from .records import META_SUFFIXES, InstalledDistribution, canonicalize, load_conda, name_version

__all__ = ["CondaInstall", "conda_distributions"]


@dataclass(frozen=True)
class CondaInstall:
    """The conda packages of an environment: each as a distribution, the metadata directories they own
    (not to be read again as pip's), and those pip replaced (their ``.dist-info`` is gone and another
    distribution of that name is installed): not checked, said once each."""

    dists: tuple[InstalledDistribution, ...] = ()
    owned: frozenset[str] = frozenset()
    replaced: tuple[tuple[InstalledDistribution, str], ...] = ()  # (the conda package, the pip metadata dir)


def _records(prefix: str) -> list[str]:
    meta = os.path.join(prefix, "conda-meta")
    try:
        names = sorted(os.listdir(meta))
    except OSError:
        return []
    return [os.path.join(meta, n) for n in names if n.endswith(".json")]


def _named(record_file: str) -> tuple[str, str]:
    """Name and version from ``<name>-<version>-<build>.json`` (versions and builds hold no ``-``)."""
    stem = os.path.basename(record_file)[: -len(".json")]
    parts = stem.rsplit("-", 2)
    return (parts[0], parts[1]) if len(parts) == 3 else (stem, "")


def _metadata_dirs(dist: InstalledDistribution) -> list[str]:
    return [os.path.join(dist.site_dir, d) for d in dist.package_dirs if d.endswith(META_SUFFIXES)]


def _as_python(dist: InstalledDistribution, metas: list[str]) -> InstalledDistribution:
    """Shown by the Python project's name and version when the package ships one ``.dist-info``."""
    present = [m for m in metas if os.path.isdir(m)]
    if len(present) != 1:
        return dist
    name, version = name_version(present[0])
    if not name or not version or (name, version) == (dist.name, dist.version):
        return dist  # (the same object: the stat cache knows its files by it)
    return replace(dist, name=name, version=version, canonical_name=canonicalize(name))


def conda_distributions(target: Target, cache: StatCache) -> CondaInstall:
    """Every package of ``target``'s conda-meta, read (or taken from the stat cache while its record keeps
    its stat key); an empty :class:`CondaInstall` outside conda environments."""
    if target.conda is None or not target.site_packages:
        return CondaInstall()
    site = target.site_packages[0]
    dists: list[InstalledDistribution] = []
    owned: set[str] = set()
    replaced: list[tuple[InstalledDistribution, str]] = []
    for record_file in _records(target.conda):
        dist = cache.distribution(record_file)
        if dist is None:
            dist = load_conda(record_file, site, *_named(record_file))
        metas = _metadata_dirs(dist)
        dist = _as_python(dist, metas)
        instead = _installed_instead(site, metas)
        if instead is not None:
            replaced.append((dist, instead))
        else:
            owned.update(metas)
            dists.append(dist)
    return CondaInstall(tuple(dists), frozenset(owned), tuple(replaced))


def _installer(meta_dir: str) -> str:
    try:
        return read_regular(os.path.join(meta_dir, "INSTALLER"), 256).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _installed_instead(site: str, metas: list[str]) -> str | None:
    """The metadata directory of another installer's install of the package's project, when it replaced
    conda's: ``pip install -U`` over a conda package removes conda's files through the RECORD and installs
    its own (another ``.dist-info``, or the same one rewritten with pip's ``INSTALLER``)."""
    foreign = [m for m in metas if os.path.isdir(m) and _installer(m) not in ("", "conda")]
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
