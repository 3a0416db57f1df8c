"""Build real conda packages and install them with a real conda installer (py-rattler), offline.

Packages are written here in both of conda's formats — ``.tar.bz2`` and ``.conda`` (a zip of zstd
tarballs) — with ``info/index.json`` and ``info/paths.json`` as conda-build writes them, into a local
channel that rattler indexes (``repodata.json``); rattler solves against it and links the packages into a
prefix from its package cache, writing ``conda-meta/`` itself. Nothing of ``conda-meta`` is written here.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import sys
import tarfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PYVER = f"{sys.version_info[0]}.{sys.version_info[1]}"
SITE = f"lib/python{PYVER}/site-packages"
# conda-build's long placeholder (255 characters): any real prefix fits in it, in text and binary files.
PLACEHOLDER = "/opt/conda-bld/_h_env_" + "placehold_" * 23 + "placeh"
assert len(PLACEHOLDER) > 240


@dataclass
class Package:
    name: str
    version: str
    files: Mapping[str, bytes | str]
    build: str = "0"
    noarch: str | None = None
    text_prefix: Sequence[str] = ()  # files holding PLACEHOLDER, rewritten as text
    binary_prefix: Sequence[str] = ()  # ... rewritten in NUL-terminated strings
    softlinks: Mapping[str, str] = field(default_factory=dict)  # path -> link target
    entry_points: Sequence[str] = ()  # noarch python: "name = module:function", written by the installer
    depends: Sequence[str] = ()
    fmt: str = ".tar.bz2"

    @property
    def stem(self) -> str:
        return f"{self.name}-{self.version}-{self.build}"


def _tar(members: Mapping[str, bytes], links: Mapping[str, str] | None = None, bz2: bool = True) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:bz2") if bz2 else tarfile.open(fileobj=buf, mode="w") as t:
        for path, data in sorted(members.items()):
            ti = tarfile.TarInfo(path)
            ti.size, ti.mtime, ti.mode = len(data), 1700000000, 0o755 if path.startswith("bin/") else 0o644
            t.addfile(ti, io.BytesIO(data))
        for path, target in sorted((links or {}).items()):
            ti = tarfile.TarInfo(path)
            ti.type, ti.linkname, ti.mtime = tarfile.SYMTYPE, target, 1700000000
            t.addfile(ti)
    return buf.getvalue()


def _paths_json(pkg: Package, files: Mapping[str, bytes]) -> bytes:
    paths = []
    for p, data in sorted(files.items()):
        e: dict[str, object] = {
            "_path": p,
            "path_type": "hardlink",
            "sha256": hashlib.sha256(data).hexdigest(),
            "size_in_bytes": len(data),
        }
        if p in pkg.text_prefix or p in pkg.binary_prefix:
            e.update(prefix_placeholder=PLACEHOLDER, file_mode="text" if p in pkg.text_prefix else "binary")
        paths.append(e)
    for p in sorted(pkg.softlinks):
        paths.append(
            {
                "_path": p,
                "path_type": "softlink",
                "sha256": hashlib.sha256(b"").hexdigest(),
                "size_in_bytes": 0,
            }
        )
    return json.dumps({"paths": paths, "paths_version": 1}, indent=1).encode()


def build_package(channel: Path, pkg: Package) -> Path:
    """Write ``pkg`` into ``channel/<subdir>/`` in its format; the package file's path."""
    subdir = "noarch" if pkg.noarch else "linux-64"
    (channel / subdir).mkdir(parents=True, exist_ok=True)
    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    files = {p: (c.encode() if isinstance(c, str) else c) for p, c in pkg.files.items()}
    index: dict[str, object] = {
        "name": pkg.name, "version": pkg.version, "build": pkg.build, "build_number": 0,
        "depends": list(pkg.depends), "subdir": subdir, "timestamp": 1700000000000, "license": "MIT",
    }  # fmt: skip
    if pkg.noarch:
        index["noarch"] = pkg.noarch
    else:
        index.update(arch="x86_64", platform="linux")
    info = {
        "info/index.json": json.dumps(index).encode(),
        "info/paths.json": _paths_json(pkg, files),
        "info/files": ("\n".join(sorted([*files, *pkg.softlinks])) + "\n").encode(),
    }
    if pkg.entry_points:
        noarch = {"type": "python", "entry_points": list(pkg.entry_points)}
        link = {"noarch": noarch, "package_metadata_version": 1}
        info["info/link.json"] = json.dumps(link).encode()
    prefixed = [*pkg.text_prefix, *pkg.binary_prefix]
    if prefixed:
        info["info/has_prefix"] = "".join(
            f"{PLACEHOLDER} {'text' if p in pkg.text_prefix else 'binary'} {p}\n" for p in prefixed
        ).encode()
    out = channel / subdir / (pkg.stem + pkg.fmt)
    if pkg.fmt == ".tar.bz2":
        out.write_bytes(_tar({**files, **info}, pkg.softlinks))
    else:
        try:
            from compression import zstd  # type: ignore[import-not-found]
        except ImportError:
            from backports import zstd
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
            z.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
            z.writestr(f"pkg-{pkg.stem}.tar.zst", zstd.compress(_tar(files, pkg.softlinks, bz2=False)))
            z.writestr(f"info-{pkg.stem}.tar.zst", zstd.compress(_tar(info, bz2=False)))
    return out


def python_package() -> Package:
    """A stand-in for conda's ``python`` package: noarch packages need one to say where site-packages is."""
    return Package(
        "python",
        f"{PYVER}.0",
        {
            f"lib/python{PYVER}/os.py": "# the standard library, as conda ships it\n",
            "bin/python.txt": "stub\n",
        },
    )


def install(channel: Path, prefix: Path, cache: Path, specs: Sequence[str]) -> None:
    """Index ``channel`` and install ``specs`` from it into ``prefix`` with rattler (cache: its package
    cache), as conda/mamba/pixi would."""
    import rattler
    import rattler.index

    async def run() -> None:
        await rattler.index.index_fs(channel)
        records = await rattler.solve([channel.as_uri()], list(specs), platforms=["linux-64", "noarch"])
        await rattler.install(records, prefix, cache_dir=cache, show_progress=False)

    asyncio.run(run())
