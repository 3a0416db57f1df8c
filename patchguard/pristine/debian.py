"""Pristine bytes of a Debian package's files: from the ``.deb`` apt downloaded, proven against dpkg's record.

A ``.deb`` is an ``ar`` archive of ``debian-binary``, ``control.tar.*`` (``control``: package, version;
``md5sums``) and ``data.tar.*`` (the files, as ``./usr/lib/python3/dist-packages/...``), compressed with xz,
gzip or zstd. apt keeps the ones it installed in ``/var/cache/apt/archives`` (until ``apt-get clean``);
``apt-get download PACKAGE=VERSION`` fetches one again. A ``.deb`` is used when its control file names the
installed package and version and its ``md5sums`` agrees with dpkg's for every file; each member is then
checked against dpkg's md5 as it is read, like every source. md5 is what dpkg keeps: it tells an edited
file from the shipped one, not a forged one from a real one.
"""

from __future__ import annotations

import glob
import gzip
import io
import lzma
import os
import tarfile
from collections.abc import Iterator, Sequence

from .._fs import read_regular
from ..integrity.dpkgrecord import dpkg_root, parse_status
from ..integrity.hashing import b64_hex
from ..integrity.records import InstalledDistribution
from .wheels import READ_ERRORS, Candidate, Rejected, SizeMismatch

__all__ = ["DebPackage", "deb_candidates"]

_CONTROL_LIMIT = 64 << 20
_DATA_LIMIT = 2 << 30  # what one package's files may hold, decompressed


def _ar_members(path: str) -> dict[str, tuple[int, int]]:
    """``name → (offset, size)`` of the members of the ``ar`` archive at ``path``."""
    out: dict[str, tuple[int, int]] = {}
    with open(path, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            raise ValueError("not a .deb (no ar header)")
        while True:
            header = f.read(60)
            if len(header) < 60:
                return out
            if header[58:60] != b"`\n":
                raise ValueError("a malformed ar member header")
            name = header[:16].decode("ascii", "replace").strip().rstrip("/")
            size = int(header[48:58].decode("ascii").strip() or "0")
            out[name] = (f.tell(), size)
            f.seek(size + (size & 1), os.SEEK_CUR)


def _decompressed(name: str, data: bytes, limit: int) -> bytes:
    if name.endswith(".xz"):
        raw = lzma.LZMADecompressor().decompress(data, limit + 1)
    elif name.endswith(".gz"):
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as g:
            raw = g.read(limit + 1)
    elif name.endswith(".zst"):
        try:
            from compression import zstd  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            from backports import zstd  # type: ignore[no-redef,unused-ignore]
        raw = zstd.ZstdDecompressor().decompress(data, limit + 1)
    elif name.endswith(".tar"):
        raw = data
    else:
        raise ValueError(f"{name}: a compression patchguard does not read")
    if len(raw) > limit:
        raise SizeMismatch(f"{name} is larger than {limit >> 20} MiB decompressed")
    return raw


class DebPackage(Candidate):
    """A ``.deb`` file; ``members_for`` proves it is the installed package and maps each row to a member."""

    def __init__(self, location: str, package: str, version: str) -> None:
        self.kind, self.location, self.package, self.version = "deb", location, package, version
        self._files: dict[str, bytes] | None = None
        self._wanted: set[str] = set()

    def _tar(self, prefix: str, limit: int) -> tarfile.TarFile:
        members = _ar_members(self.location)
        name = next((n for n in members if n.startswith(prefix)), None)
        if name is None:
            raise ValueError(f"no {prefix}* in the .deb")
        offset, size = members[name]
        with open(self.location, "rb") as f:
            f.seek(offset)
            data = f.read(size)
        return tarfile.open(fileobj=io.BytesIO(_decompressed(name, data, limit)))

    def members_for(self, dist: InstalledDistribution) -> dict[str, str]:
        try:
            with self._tar("control.tar", _CONTROL_LIMIT) as t:
                control = _extract(t, "control")
                md5sums = _extract(t, "md5sums")
        except (*READ_ERRORS, tarfile.TarError) as exc:
            raise Rejected(f"unreadable ({exc.__class__.__name__}: {exc})") from None
        fields = dict(
            (k.strip().lower(), v.strip())
            for k, _, v in (line.partition(":") for line in control.decode("utf-8", "replace").splitlines())
        )
        if (fields.get("package"), fields.get("version")) != (self.package, self.version):
            raise Rejected(f"another package: {fields.get('package')} {fields.get('version')}")
        theirs: dict[str, str] = {}
        for line in md5sums.decode("utf-8", "replace").splitlines():
            digest, _, path = line.partition("  ")
            theirs[path.strip()] = digest.lower()
        return self._matched(dist, theirs)

    def _matched(self, dist: InstalledDistribution, theirs: dict[str, str]) -> dict[str, str]:
        root = dpkg_root(dist.metadata_dir)
        members: dict[str, str] = {}
        for entry in dist.entries:
            if entry.digest is None:
                continue
            rel = os.path.relpath(os.path.normpath(os.path.join(dist.site_dir, entry.path)), root)
            ours = b64_hex(entry.digest)
            shipped = theirs.get(rel.replace(os.sep, "/"))
            if shipped is None:
                continue
            if shipped != ours:
                raise Rejected(f"a different build: {rel} is md5 {shipped} in it, {ours} in dpkg's md5sums")
            members[entry.path] = "./" + rel.replace(os.sep, "/")
        if not members:
            raise Rejected("shares no file with dpkg's md5sums")
        self._wanted = set(members.values())
        return members

    def record_text(self) -> str:
        raise Rejected("a .deb has no RECORD")

    def read(self, member: str, limit: int) -> bytes:
        if self._files is None:  # one pass over data.tar: every file of the package that is wanted
            files: dict[str, bytes] = {}
            with self._tar("data.tar", _DATA_LIMIT) as t:
                for m in t:
                    name = m.name if m.name.startswith("./") else "./" + m.name
                    if name in self._wanted and m.isfile():
                        f = t.extractfile(m)
                        if f is not None:
                            files[name] = f.read()
            self._files = files
        data = self._files.get(member)
        if data is None:
            raise KeyError(f"{member} is not in {os.path.basename(self.location)}")
        if len(data) > limit:
            raise SizeMismatch(f"larger than {limit} bytes")
        return data


def _extract(t: tarfile.TarFile, name: str) -> bytes:
    for m in t.getmembers():
        if m.name in (name, "./" + name) and m.isfile():
            f = t.extractfile(m)
            if f is not None:
                return f.read(_CONTROL_LIMIT)
    raise KeyError(f"no {name} in control.tar")


def _installed(dist: InstalledDistribution) -> tuple[str, str, str] | None:
    """(package, version, the root) of the Debian package ``dist`` is."""
    root = dpkg_root(dist.metadata_dir)
    package = os.path.basename(dist.metadata_dir).rsplit(".", 1)[0]
    versions = _versions(os.path.join(root, "var", "lib", "dpkg", "status"))
    if versions is None:
        return None
    version = versions.get(package)
    base = package.partition(":")[0]
    return (base, version, root) if version else None


_STATUS: dict[tuple[str, int, int], dict[str, str]] = {}


def _versions(status: str) -> dict[str, str] | None:
    """dpkg's installed versions (:func:`parse_status`), read once while ``status`` keeps its size and mtime
    (its hundreds of KiB are asked for per package: for its .deb, then for the hint)."""
    try:
        st = os.stat(status)
        key = (status, st.st_mtime_ns, st.st_size)
        if key not in _STATUS:
            text = read_regular(status).decode("utf-8", "replace")
            _STATUS.clear()
            _STATUS[key] = parse_status(text)
        return _STATUS[key]
    except OSError:
        return None


def deb_name(package: str, version: str) -> str:
    """How apt names the package file (an epoch's ``:`` as ``%3a``), without the architecture."""
    return f"{package}_{version.replace(':', '%3a')}_"


def deb_candidates(
    dist: InstalledDistribution, wheelhouses: Sequence[str], tried: list[str]
) -> Iterator[Candidate]:
    """``.deb`` files of the installed package and version: apt's cache, then ``--wheelhouse`` directories."""
    found = _installed(dist)
    if found is None:
        tried.append("dpkg's status does not list the package as installed")
        return
    package, version, root = found
    homes = [os.path.join(root, "var", "cache", "apt", "archives"), *wheelhouses]
    seen = False
    for home in dict.fromkeys(homes):
        for path in sorted(
            glob.glob(os.path.join(glob.escape(home), glob.escape(deb_name(package, version)) + "*.deb"))
        ):
            seen = True
            yield DebPackage(path, package, version)
    if not seen:
        tried.append(f"no {package} {version} .deb in {', '.join(dict.fromkeys(homes))}")


def deb_hint(dist: InstalledDistribution) -> str:
    found = _installed(dist)
    package, version = (found[0], found[1]) if found else (dist.name, dist.version)
    return (
        f"apt keeps the .deb files it installs until `apt-get clean`: `apt-get download {package}={version}` "
        "fetches it again; pass --wheelhouse DIR holding it"
    )
