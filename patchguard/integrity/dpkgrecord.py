"""dpkg's record of one installed Debian package: ``<root>/var/lib/dpkg/info/<package>.md5sums``
(or, for a package without one, its ``.list``: the paths alone).

Debian's ``python3-*`` packages install into ``/usr/lib/python3/dist-packages`` with no usable RECORD
(dh-python drops it, or keeps one written before ``dh_strip`` and Debian's patches changed the files). What
dpkg keeps of every package is ``md5sums``: one ``<md5 hex>  <path relative to the root>`` line per file it
unpacked (conffiles excepted). md5 is what dpkg has, so it is what patchguard checks: it finds edits, not a
forger who crafts an md5 collision. Rows are read into the shape of RECORD's (path relative to the site
directory, ``md5`` as urlsafe base64, no size); every bad line is a problem, not an exception.
"""

from __future__ import annotations

import os
import re

from .hashing import b64

__all__ = ["dpkg_root", "dpkg_rows", "parse_status"]

Row = tuple[str, "str | None", "str | None", "int | None", int]
Problem = tuple[int, str, "str | None"]

_ON_DISK = frozenset({"installed", "unpacked", "half-configured", "triggers-awaited", "triggers-pending"})
_LINE = re.compile(r"([0-9a-fA-F]{32}) [ *](.+)")
_INFO = os.path.join("var", "lib", "dpkg", "info")


def dpkg_root(record_file: str) -> str:
    """The root dpkg installed into, from ``<root>/var/lib/dpkg/info/<package>.md5sums``."""
    info = os.path.dirname(record_file)
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(info)))) or os.sep


def _within(path: str, directory: str) -> bool:
    return path.startswith(directory + os.sep)


def dpkg_rows(record_file: str, text: str, site_dir: str) -> tuple[list[Row], list[Problem]]:
    """RECORD-like rows of the package's files in ``site_dir`` and in ``<root>/usr/bin`` (its scripts),
    relative to ``site_dir``; files elsewhere (``/usr/share/doc``) are not the Python environment's."""
    root = dpkg_root(record_file)
    scripts = os.path.normpath(os.path.join(root, "usr", "bin"))
    rows: list[Row] = []
    problems: list[Problem] = []
    listed = record_file.endswith(".list")  # no md5sums: the paths dpkg unpacked, owned and not checked
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _LINE.fullmatch(line) if not listed else None
        if m is None and not listed:
            problems.append((n, f"not an md5sums line: {line[:80]!r}", None))
            continue
        rel = m.group(2) if m is not None else line
        norm = os.path.normpath(os.path.join(root, rel.lstrip("/")))
        if norm == os.path.normpath(root):
            continue  # ``/.`` in a .list
        if not _within(norm, root.rstrip(os.sep)) and root != os.sep:
            problems.append((n, "the path leaves the root dpkg installed into: not checked", rel))
            continue
        if not (_within(norm, site_dir) or _within(norm, scripts)):
            continue
        path = os.path.relpath(norm, site_dir).replace(os.sep, "/")
        if m is None:
            if not os.path.isdir(norm):
                rows.append((path, None, None, None, n))
            continue
        rows.append((path, "md5", b64(bytes.fromhex(m.group(1))), None, n))
    return rows, problems


def parse_status(text: str) -> dict[str, str]:
    """``package`` (and ``package:arch``) → installed version, from dpkg's ``status`` file."""
    versions: dict[str, str] = {}
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") or ":" not in line:
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        name, version = fields.get("package"), fields.get("version")
        # Installed, or unpacked and not yet configured: either way the files on disk are the .deb's.
        if not name or not version or fields.get("status", "").rpartition(" ")[2] not in _ON_DISK:
            continue
        versions[name] = version
        if fields.get("architecture"):
            versions[f"{name}:{fields['architecture']}"] = version
    return versions
