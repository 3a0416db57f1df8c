"""One document per host, as ``fleet`` reads it: a lock or a scan report boiled down to what makes two
environments the same — its :class:`~patchguard.results.fleet.Fingerprint` (both values, the fingerprint
and the :class:`~patchguard.results.fleet.HostDocument` holding it, are defined in :mod:`patchguard.results`).

A document's file name without ``.json`` names the host (what an Ansible ``fetch`` to
``<fleet_dir>/<inventory_hostname>.json`` writes); the host name the document gives itself is kept beside
it. Everything here comes from files other machines wrote: each is read bounded (a regular file of at most
:data:`~patchguard._fs.INPUT_LIMIT` bytes: never a FIFO, a device or a directory), every field is checked
for its type where it enters, and anything else is one :class:`FleetInputError` naming the file and what to
do. Names keep their origin's encoding decoded (``from_json_name``): the formats encode them again.

Both kinds of document give the same fingerprint of the same environment: distributions and versions,
the state of every file that is not as RECORD says (``sha256:<hex>`` modified, ``missing``,
``unexpected:sha256:<hex>`` or ``unexpected:dir``), the sets in place (name → digest) and the files no
distribution owns at the top of site-packages (path → ``sha256:<hex>``; ``dir`` for a directory). A lock
adds each distribution's digest of all its files (``builds``), compared when every document has one.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Sequence
from typing import Any

from ..._fs import parse_json, read_input
from ...errors import PatchguardError
from ...integrity.records import INSTALLER_FILES, canonicalize
from ...model import REPORT_SCHEMA, from_json_name
from ...results.fleet import Fingerprint, HostDocument
from .lockfile import LOCK_SCHEMA

__all__ = [
    "Fingerprint",
    "FleetInputError",
    "HostDocument",
    "gather",
    "read_document",
]


_WRITE_AGAIN = "write it again with patchguard lock, or patchguard scan --format json"


class FleetInputError(PatchguardError):
    """A document ``fleet`` was given cannot be read as one host's environment (or names no host)."""


_NO_DIGEST = "(no digest: unreadable)"  # a changed file the host could not read


def gather(paths: Sequence[str]) -> list[tuple[str, str]]:
    """``(host, file)`` for every document named: a file as it is, a directory's ``*.json`` files (not
    hidden ones, not below it), sorted by host. Two documents of one host, a path that does not exist and
    nothing to read at all are errors."""
    found: dict[str, str] = {}
    for given in paths:
        for path in _documents_at(given):
            host = os.path.basename(path)
            host = host[: -len(".json")] if host.endswith(".json") else host
            if host in found:
                raise FleetInputError(
                    f"a second document of host {host} (the first: {found[host]})",
                    path=path,
                    hint="keep one document per host: the file name without .json names the host",
                )
            found[host] = path
    if not found:
        raise FleetInputError(
            "no *.json documents",
            path=", ".join(paths) or None,
            hint="name the documents (one lock or scan report per host) or the directory holding them",
        )
    return sorted(found.items())


def _documents_at(given: str) -> Iterator[str]:
    """The document at ``given``, or the ``*.json`` documents of the directory at ``given``."""
    try:
        if not stat.S_ISDIR(os.stat(given).st_mode):
            yield given  # a file, or what reading it will refuse (a FIFO, a device)
            return
        names = sorted(e.name for e in os.scandir(given) if e.name.endswith(".json"))
    except OSError as exc:
        raise FleetInputError(
            f"cannot read ({exc.strerror or exc})",
            path=given,
            hint="name the documents (one lock or scan report per host) or the directory holding them",
        ) from None
    yield from (os.path.join(given, n) for n in names if not n.startswith("."))


def read_document(name: str, path: str) -> HostDocument:
    """Host ``name``'s document at ``path``, a lock or a scan report, checked field by field."""
    try:
        doc = parse_json(read_input(path))
    except OSError as exc:
        raise FleetInputError(
            f"cannot read ({exc.strerror or exc})", path=path, hint="fetch the host's document again"
        ) from None
    except ValueError as exc:
        raise FleetInputError(f"not JSON ({_short(str(exc))})", path=path, hint=_WRITE_AGAIN) from None
    if not isinstance(doc, dict):
        raise FleetInputError("not a lock or scan report (not a JSON object)", path=path, hint=_WRITE_AGAIN)
    schema = doc.get("schema")
    read = _Fields(path, doc)
    if schema == LOCK_SCHEMA:
        return _from_lock(name, path, read)
    if schema == REPORT_SCHEMA:
        return _from_report(name, path, read)
    what = f"a {_short(schema)} document" if isinstance(schema, str) else "a document of no known schema"
    raise FleetInputError(f"{what}, not a lock or scan report", path=path, hint=_WRITE_AGAIN)


def _short(text: object, limit: int = 80) -> str:
    """Text of a document quoted in an error: one line, bounded (the CLI escapes what is left)."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class _Fields:
    """A document's fields, each checked for its type as it is taken: the first that is not what a
    patchguard of this schema writes is a :class:`FleetInputError` naming it."""

    def __init__(self, path: str, doc: dict[str, Any]) -> None:
        self.path, self.doc = path, doc

    def bad(self, where: str, want: str) -> FleetInputError:
        what = f"malformed {self.doc.get('schema')} document: {where} must be {want}"
        return FleetInputError(what, path=self.path, hint=_WRITE_AGAIN)

    def text(self, value: object, where: str) -> str:
        if isinstance(value, str):
            return value
        raise self.bad(where, "a string")

    def maybe_text(self, value: object, where: str) -> str | None:
        return None if value is None else self.text(value, where)

    def table(self, value: object, where: str) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        raise self.bad(where, "an object")

    def texts(self, value: object, where: str) -> dict[str, str]:
        """An object of strings (names in the JSON name encoding, decoded)."""
        table = self.table(value, where)
        if not all(isinstance(v, str) for v in table.values()):
            raise self.bad(where, "an object of strings")
        return {_name(k): v for k, v in table.items()}

    def items(self, value: object, where: str) -> list[dict[str, Any]]:
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            return value
        raise self.bad(where, "a list of objects")

    def origin(self) -> tuple[str | None, str | None, str | None]:
        """(host, time, version) of the writer, each absent from documents older than fleet."""
        tool = self.doc.get("tool")
        version = self.maybe_text(tool.get("version"), "tool.version") if isinstance(tool, dict) else None
        host = self.maybe_text(self.doc.get("host"), "host")
        return (
            from_json_name(host) if host is not None else None,
            self.maybe_text(self.doc.get("time"), "time"),
            version,
        )


def _minor(python: str) -> str:
    """``3.11.7`` -> ``3.11``: what a lock keeps of the interpreter."""
    return ".".join(python.split(".")[:2])


_HEX = re.compile(r"[0-9a-f]{64}")
_ROW_ESCAPE = re.compile(r"\\(\\|t|n)")


def _lock_row_path(text: str) -> str:
    """A lock's ``unowned`` path as a name (the lock escapes backslash, tab and newline in its rows)."""
    return from_json_name(_ROW_ESCAPE.sub(lambda m: {"\\": "\\", "t": "\t", "n": "\n"}[m.group(1)], text))


def _lock_state(state: str) -> str:
    """A lock's state of a changed file as fleet writes it (``unexpected:sha256:<hex>``, not ``:<hex>``)."""
    if state.startswith("unexpected:") and _HEX.fullmatch(state[len("unexpected:") :]):
        return "unexpected:sha256:" + state[len("unexpected:") :]
    return state


def _from_lock(name: str, path: str, read: _Fields) -> HostDocument:
    doc = read.doc
    dists = read.table(doc.get("distributions"), "distributions")
    versions: dict[str, str] = {}
    builds: dict[str, str] = {}
    files: dict[str, dict[str, str]] = {}
    for key, raw in dists.items():
        release, digest, changes = _lock_distribution(read, key, raw)
        dist = canonicalize(_name(key))
        versions[dist], builds[dist] = release, digest
        files[dist] = {_name(p): _lock_state(s) for p, s in changes.items()}
    unowned: dict[str, str] = {}
    rows = doc.get("unowned", [])
    if not isinstance(rows, list) or not all(isinstance(r, str) and "\t" in r for r in rows):
        raise read.bad("unowned", "a list of 'path<TAB>digest' strings")
    for row in rows:
        where, _, state = row.rpartition("\t")
        unowned[_lock_row_path(where)] = "dir" if where.endswith("/") else _unowned_state(state)
    host, time, version = read.origin()
    fingerprint = Fingerprint(
        python=read.text(doc.get("python"), "python"),
        distributions=versions,
        builds=builds,
        files=files,
        sets=read.texts(doc.get("applied_sets", {}), "applied_sets"),
        unowned=unowned,
    )
    return HostDocument(
        name=name, path=path, kind="lock", host=host, time=time, version=version, fingerprint=fingerprint
    )


def _lock_distribution(read: _Fields, key: str, raw: object) -> tuple[str, str, dict[str, str]]:
    """(version, digest, changes) of one distribution of a lock, each of the type a lock writes."""
    entry = raw if isinstance(raw, dict) else {}
    version, digest, changes = entry.get("version"), entry.get("digest"), entry.get("changes", {})
    if (
        isinstance(version, str)
        and isinstance(digest, str)
        and isinstance(changes, dict)
        and all(isinstance(v, str) for v in changes.values())
    ):
        return version, digest, changes
    where = f"distributions.{_short(key, 40)}"  # the slow way, to say which field is not what it must be
    read.table(raw, where)
    read.text(version, f"{where}.version")
    read.text(digest, f"{where}.digest")
    read.table(changes, f"{where}.changes")
    raise read.bad(f"{where}.changes", "an object of strings")


def _name(text: str) -> str:
    """A name in the JSON name encoding, decoded (most hold no backslash: they are themselves)."""
    return from_json_name(text) if "\\" in text else text


def _unowned_state(state: str) -> str:
    return f"sha256:{state}" if _HEX.fullmatch(state) else state


# Kinds of finding whose file is a distribution's and not as its RECORD says, by precedence: a file both
# unexpected and judged (its code findings) is unexpected.
_MISSING, _UNEXPECTED = "missing", "unexpected"
_UNOWNED_KINDS = ("startup-hook", "unexpected")


def _from_report(name: str, path: str, read: _Fields) -> HostDocument:
    doc = read.doc
    if "distributions" not in doc:
        raise FleetInputError(
            "a scan report that does not list its distributions (written by an earlier patchguard)",
            path=path,
            hint="write it again with this patchguard (or write a lock: patchguard lock)",
        )
    versions: dict[str, str] = {}
    for i, entry in enumerate(read.items(doc["distributions"], "distributions")):
        dist = read.text(entry.get("name"), f"distributions[{i}].name")
        release = read.text(entry.get("version"), f"distributions[{i}].version")
        versions.setdefault(canonicalize(from_json_name(dist)), from_json_name(release))
    files, unowned = _report_files(read)
    environment = read.table(doc.get("environment"), "environment")
    host, time, version = read.origin()
    fingerprint = Fingerprint(
        python=_minor(read.text(environment.get("python"), "environment.python")),
        distributions=versions,
        builds={},
        files=files,
        sets=read.texts(doc.get("applied_sets", {}), "applied_sets"),
        unowned=unowned,
    )
    return HostDocument(
        name=name, path=path, kind="report", host=host, time=time, version=version, fingerprint=fingerprint
    )


def _report_files(read: _Fields) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """From a report's findings: per distribution, the state of each file not as RECORD says; and the
    state of each file no distribution owns (what a lock keeps of the same environment)."""
    files: dict[str, dict[str, str]] = {}
    unowned: dict[str, str] = {}
    for i, f in enumerate(read.items(read.doc.get("findings"), "findings")):
        kind = read.text(f.get("kind"), f"findings[{i}].kind")
        where = from_json_name(read.text(f.get("path"), f"findings[{i}].path"))
        dist = read.maybe_text(f.get("distribution"), f"findings[{i}].distribution")
        digest = read.maybe_text(f.get("digest"), f"findings[{i}].digest")
        if where.startswith("/") or _installer_file(where):
            continue  # outside site-packages (scripts name their interpreter), or the installer's own
        if dist is None:
            if kind in _UNOWNED_KINDS:
                unowned[where] = "dir" if where.endswith("/") else digest or _NO_DIGEST
            continue
        states = files.setdefault(canonicalize(from_json_name(dist)), {})
        if kind == _MISSING:
            states[where] = _MISSING
        elif kind == _UNEXPECTED:
            states[where] = "unexpected:" + ("dir" if where.endswith("/") else digest or _NO_DIGEST)
        elif digest is not None and not states.get(where, "").startswith(_UNEXPECTED):
            states[where] = digest
    return files, unowned


def _installer_file(path: str) -> bool:
    """A metadata file the installer writes (``INSTALLER``, ``direct_url.json``, ...): locks leave it out."""
    first, _, rest = path.partition("/")
    return first.endswith(".dist-info") and rest in INSTALLER_FILES
