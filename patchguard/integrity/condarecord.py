"""conda's record of one installed package: ``<prefix>/conda-meta/<name>-<version>-<build>.json``.

conda (and mamba, micromamba, pixi, rattler) keep, for every package linked into an environment, the
package's file list with what ``info/paths.json`` said of each file: its ``path_type`` (``hardlink``,
``softlink``, ``directory``; ``pyc_file`` and entry points generated at install time), ``sha256`` and
``size_in_bytes`` of the file *as shipped*, and for a file whose build prefix was replaced by the
environment's at install (``prefix_placeholder``, ``file_mode`` text or binary) its hash after the rewrite,
``sha256_in_prefix``. Paths are relative to the environment's prefix.

That record is the baseline of a conda package's files, as RECORD is a wheel's: this module reads it
into rows like RECORD's (path relative to the site directory, sha256 as urlsafe base64, size), every
problem collected rather than raised, so one bad entry costs one finding. It imports nothing of RECORD
parsing: ``records`` builds its distributions from these rows.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass

from .hashing import b64

__all__ = [
    "CondaFile",
    "CondaRecord",
    "binary_replace",
    "conda_rows",
    "parse_conda_record",
    "prefix_of",
    "rewrite",
]

# (path relative to the site dir, algorithm, digest as urlsafe base64, size, 1-based entry number)
Row = tuple[str, "str | None", "str | None", "int | None", int]
# (entry number, message, path)
Problem = tuple[int, str, "str | None"]

_HEX64 = re.compile(r"[0-9a-f]{64}")
# Installed paths whose recorded hash is not of the file itself: a symlink (its target is checked as itself).
# Anything else with a sha256 is checked — console scripts conda or rattler generated included (their record
# holds the hash of the script as written); bytecode compiled at install has none, and is owned unchecked.
_UNCHECKED = frozenset({"softlink"})


@dataclass(frozen=True, slots=True)
class CondaFile:
    """One entry of ``paths_data``: ``sha256`` is the shipped file's, ``in_prefix`` the installed one's when
    the installer rewrote the build prefix in it (both lower-case hex, ``None`` when absent)."""

    path: str
    path_type: str
    sha256: str | None
    in_prefix: str | None
    size: int | None
    placeholder: str | None
    mode: str

    @property
    def rewritten(self) -> bool:
        return self.placeholder is not None


@dataclass(frozen=True, slots=True)
class CondaRecord:
    """A conda-meta record, checked field by field where it was read."""

    location: str  # the JSON file
    name: str
    version: str
    build: str
    archive_sha256: str | None  # of the package file (``.conda`` / ``.tar.bz2``) it was installed from
    archive_md5: str | None
    filename: str | None  # ``fn``: the package file's name
    extracted: str | None  # ``extracted_package_dir``: where the package cache unpacked it
    noarch: str | None  # ``python``: installed paths were moved from ``site-packages/``, ``python-scripts/``
    files: tuple[CondaFile, ...]
    has_hashes: bool  # ``paths_data`` was present (very old records list bare ``files`` only)
    problems: tuple[Problem, ...]

    @property
    def prefix(self) -> str:
        return os.path.dirname(os.path.dirname(self.location))


def prefix_of(record_path: str) -> str:
    """The environment prefix of the record at ``record_path`` (``<prefix>/conda-meta/x.json``)."""
    return os.path.dirname(os.path.dirname(record_path))


def _text(doc: dict[str, object], key: str) -> str | None:
    value = doc.get(key)
    return value if isinstance(value, str) and value else None


def _hex(value: object) -> str | None:
    return value.lower() if isinstance(value, str) and _HEX64.fullmatch(value.lower()) else None


def _file(n: int, item: object, problems: list[Problem]) -> CondaFile | None:
    if not isinstance(item, dict) or not isinstance(item.get("_path"), str) or not item["_path"]:
        problems.append((n, "a paths_data entry without a _path", None))
        return None
    path = item["_path"]
    ptype = item.get("path_type") if isinstance(item.get("path_type"), str) else "hardlink"
    size = item.get("size_in_bytes")
    placeholder = item.get("prefix_placeholder")
    entry = CondaFile(
        path=path,
        path_type=str(ptype),
        sha256=_hex(item.get("sha256")),
        in_prefix=_hex(item.get("sha256_in_prefix")),
        size=size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
        placeholder=placeholder if isinstance(placeholder, str) and placeholder else None,
        mode="binary" if item.get("file_mode") == "binary" else "text",
    )
    if item.get("sha256") is not None and entry.sha256 is None:
        problems.append((n, f"sha256 is not 64 hex digits: {str(item.get('sha256'))[:80]!r}", path))
    return entry


def parse_conda_record(location: str, text: str) -> CondaRecord:
    """The record in ``text`` (read from ``location``); ``ValueError`` when it is not a conda-meta record."""
    doc = json.loads(text)
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), str) for k in ("name", "version")):
        raise ValueError("not a conda-meta record (no name and version)")
    problems: list[Problem] = []
    paths_data = doc.get("paths_data")
    items = paths_data.get("paths") if isinstance(paths_data, dict) else None
    files: list[CondaFile] = []
    if isinstance(items, list):
        for n, item in enumerate(items, 1):
            entry = _file(n, item, problems)
            if entry is not None:
                files.append(entry)
    else:
        bare = doc.get("files")
        for item in bare if isinstance(bare, list) else []:
            if isinstance(item, str) and item:
                files.append(CondaFile(item, "hardlink", None, None, None, None, "text"))
    noarch = doc.get("noarch")
    if isinstance(noarch, dict):  # older records: {"type": "python"}
        noarch = noarch.get("type")
    return CondaRecord(
        location=location,
        name=str(doc["name"]),
        version=str(doc["version"]),
        build=_text(doc, "build") or "",
        archive_sha256=_hex(doc.get("sha256")),
        archive_md5=_text(doc, "md5"),
        filename=_text(doc, "fn"),
        extracted=_text(doc, "extracted_package_dir"),
        noarch=noarch if isinstance(noarch, str) else None,
        files=tuple(files),
        has_hashes=isinstance(items, list),
        problems=tuple(problems),
    )


def _normal(prefix_path: str) -> str | None:
    """``prefix_path`` (relative to the prefix) normalised; ``None`` when it leaves the prefix."""
    norm = posixpath.normpath(prefix_path)
    if posixpath.isabs(norm) or norm == ".." or norm.startswith("../"):
        return None
    return norm


def conda_rows(record: CondaRecord, site_dir: str) -> tuple[list[Row], list[Problem]]:
    """RECORD-like rows of ``record``'s files, relative to ``site_dir``, and every problem found.

    A file hashed as shipped is checked by ``sha256`` and size; one whose prefix the installer rewrote, by
    ``sha256_in_prefix`` (no size: the rewrite changes it). A rewritten file with no installed hash, a
    symlink and bytecode compiled at install are owned rows with no hash; directories are no row.
    """
    prefix = record.prefix
    site_rel = os.path.relpath(site_dir, prefix).replace(os.sep, "/")
    inside = site_rel + "/"
    up = "../" * (site_rel.count("/") + 1) if site_rel != "." else ""
    rows: list[Row] = []
    problems = list(record.problems)
    for n, f in enumerate(record.files, 1):
        if f.path_type == "directory":
            continue
        norm = _normal(f.path)
        if norm is None:
            problems.append((n, "the path leaves the environment's prefix: not checked", f.path))
            continue
        path = norm[len(inside) :] if norm.startswith(inside) else up + norm
        if f.path_type in _UNCHECKED or f.sha256 is None:
            rows.append((path, None, None, None, n))
        elif f.rewritten:
            digest = b64(bytes.fromhex(f.in_prefix)) if f.in_prefix else None
            rows.append((path, "sha256" if digest else None, digest, None, n))
        else:
            rows.append((path, "sha256", b64(bytes.fromhex(f.sha256)), f.size, n))
    return rows, problems


def _padded(placeholder: bytes, prefix: bytes) -> Callable[[re.Match[bytes]], bytes]:
    def replace(match: re.Match[bytes]) -> bytes:
        found = match.group()
        occurrences = found.count(placeholder)
        padding = (len(placeholder) - len(prefix)) * occurrences
        if padding < 0:
            raise ValueError("the prefix is longer than the placeholder: a binary file cannot hold it")
        return found.replace(placeholder, prefix) + b"\0" * padding

    return replace


def binary_replace(data: bytes, placeholder: bytes, prefix: bytes) -> bytes:
    """conda's rewrite of a binary file: each NUL-terminated string holding the placeholder gets the prefix
    instead, padded with NULs to its old length (``conda.core.portability.binary_replace``)."""
    pattern = re.compile(re.escape(placeholder) + b"([^\0]*?)\0")
    return pattern.sub(_padded(placeholder, prefix), data)


def rewrite(data: bytes, f: CondaFile, prefix: str) -> bytes:
    """The shipped bytes of ``f`` as the installer wrote them into the environment at ``prefix``."""
    if f.placeholder is None:
        return data
    old, new = f.placeholder.encode("utf-8"), prefix.encode("utf-8")
    if f.mode == "binary":
        return binary_replace(data, old, new)
    return data.replace(old, new)
