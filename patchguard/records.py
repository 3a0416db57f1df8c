"""RECORD parsing and distribution discovery.

RECORD is the CSV manifest a wheel installer writes into ``*.dist-info`` (PyPA "Recording installed
projects"): one row per installed file, ``path,algo=urlsafe-b64-digest-without-padding,size``. Paths are
relative to the directory holding the ``.dist-info`` (``../../bin/x`` for console scripts) or absolute. The
hash may be blank (RECORD itself, ``.pyc`` files): such a file cannot be verified, which is not a failure.

Parsing collects every problem instead of stopping at the first, so one bad row costs one finding and the
rest of the distribution is still verified.
"""

from __future__ import annotations

import array
import base64
import csv
import hashlib
import io
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .errors import PatchguardError

__all__ = [
    "HASH_ALGORITHMS",
    "INSTALLER_FILES",
    "META_SUFFIXES",
    "Check",
    "InstalledDistribution",
    "RecordEntry",
    "RecordProblem",
    "b64_digest",
    "discover",
    "iter_metadata_dirs",
    "load_distribution",
    "matches",
    "name_version_from_dirname",
    "package_dirs_in",
    "parse_record",
    "resolve_record_path",
]

# Any algorithm every Python has; the digest size is checked where it is fixed (not for shake_*).
HASH_ALGORITHMS: frozenset[str] = frozenset(hashlib.algorithms_guaranteed)
_DIGEST_SIZES: dict[str, int] = {
    a: hashlib.new(a).digest_size for a in HASH_ALGORITHMS if not a.startswith("shake_")
}


class RecordEntry(NamedTuple):
    """One RECORD row. ``algorithm``/``digest`` are ``None`` when the row has no usable hash.

    A named tuple rather than a dataclass: an environment has tens of thousands of rows, and tuples are
    built several times faster.

    ``digest`` is the urlsafe base64 text of the digest, without padding, as the row has it.
    """

    path: str
    algorithm: str | None
    digest: str | None
    size: int | None
    line: int


# What verifying one file needs: (absolute path, algorithm, digest as unpadded urlsafe base64, size).
Check = tuple[str, str, str, "int | None"]


class RecordProblem(NamedTuple):
    """A RECORD row that does not follow the spec (1-based ``line`` in the RECORD file)."""

    line: int
    message: str
    path: str | None = None


_B64_TEXT = re.compile(r"[A-Za-z0-9_-]+")
# Length of the unpadded urlsafe base64 text of each fixed-size digest (sha256: 43).
_B64_LENGTHS: dict[str, int] = {a: (4 * n + 2) // 3 for a, n in _DIGEST_SIZES.items()}


def _parse_hash(text: str) -> tuple[str, str] | str:
    """``sha256=AbC…`` → (algorithm, unpadded urlsafe base64 digest), or an error message.

    The digest stays text: verifying compares the base64 text of the computed digest, so no row needs
    decoding (a RECORD of 20,000 rows is parsed in a few milliseconds).
    """
    algo, sep, b64 = text.partition("=")
    if not sep or not b64:
        return f"hash {text!r} is not of the form algo=digest"
    algo = algo.strip().lower()
    if algo not in HASH_ALGORITHMS:
        return f"unknown hash algorithm {algo!r}"
    b64 = b64.rstrip("=")
    if not _B64_TEXT.fullmatch(b64) or len(b64) % 4 == 1:
        return f"hash {text!r} is not urlsafe base64"
    expected = _B64_LENGTHS.get(algo)
    if expected is not None and len(b64) != expected:
        return f"{algo} digest {b64!r} has {len(b64)} base64 characters, expected {expected}"
    return algo, b64


def parse_record(text: str) -> tuple[list[RecordEntry], list[RecordProblem]]:
    """Parse the text of a RECORD file into entries and problems.

    A row with a path but a bad hash or size still yields an entry (without a hash, so the file stays owned
    but unverifiable) *and* a problem.

    >>> row = "pkg/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0"
    >>> entries, problems = parse_record(row)
    >>> entries[0].path, entries[0].algorithm, entries[0].size, problems
    ('pkg/__init__.py', 'sha256', 0, [])
    """
    try:
        # Not str.splitlines(): it also splits on \x85, \u2028 and friends, legal in file names.
        rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as exc:
        return [], [RecordProblem(1, f"not valid CSV ({exc})")]
    entries = _parse_plain_rows(rows)
    if entries is not None:
        return entries, []
    return _parse_rows(rows)


def _parse_plain_rows(rows: list[list[str]]) -> list[RecordEntry] | None:
    """The entries of a RECORD whose every row is the plain kind an installer writes, else ``None``.

    Plain: three columns, a non-empty path without NUL, listed once, and either a well-formed ``sha256=``
    hash with a decimal size or neither. That is every row of every RECORD pip, uv and installer write, and
    this loop checks it several times faster than :func:`_parse_rows`, which takes any RECORD apart row by
    row and says what is wrong with it. The digests are checked in one regular expression match for the
    whole RECORD.
    """
    entries: list[RecordEntry] = []
    append, entry = entries.append, RecordEntry
    digests: list[str] = []
    keep = digests.append
    for lineno, row in enumerate(rows, start=1):
        if len(row) != 3:
            if row and (len(row) > 1 or row[0].strip()):
                return None
            continue
        path, hash_text, size_text = row
        if not path or "\0" in path:
            return None
        if hash_text:
            if len(hash_text) != 50 or not hash_text.startswith("sha256=") or not size_text.isdigit():
                return None
            digest = hash_text[7:]
            keep(digest)
            append(entry(path, "sha256", digest, int(size_text), lineno))
        elif size_text:
            return None
        else:
            append(entry(path, None, None, None, lineno))
    if len({e.path for e in entries}) != len(entries):
        return None
    if digests and not _B64_TEXT.fullmatch("".join(digests)):
        return None
    return entries


def _parse_rows(rows: list[list[str]]) -> tuple[list[RecordEntry], list[RecordProblem]]:
    entries: list[RecordEntry] = []
    problems: list[RecordProblem] = []
    seen: dict[str, int] = {}
    for lineno, row in enumerate(rows, start=1):
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != 3:
            problems.append(
                RecordProblem(
                    lineno, f"expected 3 columns (path,hash,size), found {len(row)}", row[0] or None
                )
            )
            # Keep the path owned (it is not an unexpected file), but trust nothing else on the row.
            row = [row[0], "", ""]
        path, hash_text, size_text = row
        if not path or "\0" in path:
            problems.append(RecordProblem(lineno, "empty path" if not path else "NUL byte in path"))
            continue
        if path in seen:
            problems.append(RecordProblem(lineno, f"listed twice (first on line {seen[path]})", path))
            continue
        seen[path] = lineno
        algo: str | None = None
        digest: str | None = None
        if hash_text:
            parsed = _parse_hash(hash_text)
            if isinstance(parsed, str):
                problems.append(RecordProblem(lineno, parsed, path))
            else:
                algo, digest = parsed
        size: int | None = None
        if size_text:
            if size_text.isdigit():
                size = int(size_text)
            else:
                problems.append(RecordProblem(lineno, f"size {size_text!r} is not a whole number", path))
        entries.append(RecordEntry(path, algo, digest, size, lineno))
    return entries, problems


@dataclass(frozen=True, slots=True)
class InstalledDistribution:
    """A distribution found in a site directory, with its RECORD read and parsed.

    ``has_record`` is false when there is no RECORD (egg-info, Debian's dh-python strips it): nothing of it
    can be verified. ``top_level`` names the top-level packages it claims when only that is known.
    ``canonical_name`` (PEP 503) and ``package_dirs`` (top-level directories of the site dir its files
    are in) are derived once when the distribution is read, and cached with it.
    """

    name: str
    version: str
    site_dir: str
    metadata_dir: str
    has_record: bool
    rows: tuple[RecordEntry, ...] | None  # see ``entries``
    problems: tuple[RecordProblem, ...]
    paths: tuple[str, ...] = ()  # absolute path of each entry, same order as ``entries``
    top_level: tuple[str, ...] = ()
    canonical_name: str = ""
    package_dirs: tuple[str, ...] = ()
    checks: tuple[Check, ...] = ()  # one per entry with a hash, in RECORD order
    check_rows: bytes = b""  # index into ``entries`` of each check, as array("I") bytes
    outside: tuple[tuple[int, str], ...] = ()  # (index into ``checks``, RECORD path) of ``../`` entries

    @property
    def entries(self) -> tuple[RecordEntry, ...]:
        """The RECORD rows.

        A distribution from the stat cache has none until they are first asked for (a scan needs only
        ``checks`` and ``paths``): the cache is valid only while RECORD keeps its stat key, so they are
        parsed again from RECORD then. If RECORD changed since, :class:`PatchguardError` says so.
        """
        rows = self.rows
        if rows is None:
            raw = _read_text(self.record_path)
            parsed = parse_record(raw)[0] if raw is not None else []
            if [resolve_record_path(self.site_dir, e.path) for e in parsed] != list(self.paths):
                raise PatchguardError(
                    "RECORD changed while patchguard was reading it",
                    path=self.record_path,
                    hint="run the command again",
                )
            rows = tuple(parsed)
            object.__setattr__(self, "rows", rows)
        return rows

    @property
    def record_path(self) -> str:
        return os.path.join(self.metadata_dir, "RECORD")

    def resolve(self, entry_path: str) -> str:
        """Absolute, normalised path of a RECORD entry (relative paths are relative to ``site_dir``)."""
        return resolve_record_path(self.site_dir, entry_path)


def resolve_record_path(site_dir: str, entry_path: str) -> str:
    """Absolute, normalised path of a RECORD path written relative to ``site_dir`` (or absolute)."""
    if os.sep == "/" and not (entry_path.startswith((".", "/")) or "/." in entry_path or "//" in entry_path):
        return site_dir + "/" + entry_path  # already normal: the common case, kept cheap
    return os.path.normpath(os.path.join(site_dir, entry_path))


def canonicalize(name: str) -> str:
    """PEP 503 normalised name (``Foo.Bar_baz`` → ``foo-bar-baz``)."""
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


META_SUFFIXES = (".dist-info", ".egg-info")
# Files an installer writes into a .dist-info beside the wheel's own: not part of the build.
INSTALLER_FILES = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")


def b64_digest(raw: bytes) -> str:
    """A digest as RECORD writes it: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def matches(entry: RecordEntry, data: bytes) -> bool:
    """Whether ``data`` hashes to what the RECORD row says."""
    if entry.algorithm is None or entry.digest is None:
        return False
    h = hashlib.new(entry.algorithm, data)
    shake = entry.algorithm.startswith("shake_")
    raw = h.digest(len(entry.digest) * 6 // 8) if shake else h.digest()  # type: ignore[call-arg]
    return b64_digest(raw) == entry.digest


def package_dirs_in(site_dir: str, paths: Sequence[str]) -> tuple[str, ...]:
    """Top-level directories of ``site_dir`` holding any of ``paths`` (``torch``; never ``six.py``)."""
    prefix = os.path.join(site_dir, "")
    found: dict[str, None] = {}
    for path in paths:
        if path.startswith(prefix):
            first, sep, _ = path[len(prefix) :].partition(os.sep)
            if sep and first != "__pycache__":
                found[first] = None
    return tuple(found)


def name_version_from_dirname(dirname: str) -> tuple[str, str]:
    """``torch-2.13.0+cpu.dist-info`` → ("torch", "2.13.0+cpu"); egg-info names may carry a Python tag."""
    stem = dirname.rsplit(".", 1)[0]
    name, _, rest = stem.partition("-")
    version = rest.split("-", 1)[0] if rest else "unknown"
    return name, version


def _read_text(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape")


def load_distribution(site_dir: str, meta_name: str) -> InstalledDistribution:
    """Read one ``*.dist-info`` or ``*.egg-info``: metadata via importlib-metadata, RECORD parsed."""
    import email.parser

    import importlib_metadata  # local: keep `patchguard --version` free of it

    meta_dir = os.path.join(site_dir, meta_name)
    name, version = name_version_from_dirname(meta_name)
    if os.path.isdir(meta_dir):
        dist = importlib_metadata.Distribution.at(meta_dir)
        try:
            # Only the header block: the body is the project's whole README, and parsing it as e-mail
            # costs more than reading the RECORD.
            text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
            head = re.split(r"\r?\n\r?\n", text, maxsplit=1)[0]
            md = email.parser.HeaderParser().parsestr(head)
            name = md["Name"] or name
            version = md["Version"] or version
        except (OSError, ValueError, KeyError, UnicodeDecodeError):
            pass
    record_text: str | None = None
    entries: list[RecordEntry] = []
    problems: list[RecordProblem] = []
    top_level: tuple[str, ...] = ()
    if meta_name.endswith(".dist-info"):
        record_file = os.path.join(meta_dir, "RECORD")
        try:
            with open(record_file, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            raw = None
        except OSError as exc:
            raw = None
            problems.append(RecordProblem(0, f"cannot read RECORD ({exc.strerror or exc})"))
        if raw is not None:
            try:
                record_text = raw.decode("utf-8")
            except UnicodeDecodeError:
                record_text = raw.decode("utf-8", "surrogateescape")
                problems.append(RecordProblem(0, "RECORD is not valid UTF-8"))
            entries, more = parse_record(record_text)
            problems.extend(more)
    if record_text is None:
        top = _read_text(os.path.join(meta_dir, "top_level.txt")) if os.path.isdir(meta_dir) else None
        top_level = tuple(t.strip() for t in (top or "").splitlines() if t.strip())
        if not top_level:
            # No file list and no top_level.txt: the import name is most often the project name.
            guess = name.replace("-", "_").replace(".", "_")
            top_level = tuple(dict.fromkeys((guess, guess.lower(), guess + ".py", guess.lower() + ".py")))
    # One pass over the rows for everything a scan needs of them (this runs for every row of a cold scan).
    paths_l: list[str] = []
    checks: list[Check] = []
    rows = array.array("I")
    outside: list[tuple[int, str]] = []
    tops: dict[str, None] = {}
    prefix = site_dir + "/"
    plain = os.sep == "/"
    for n, e in enumerate(entries):
        rel = e.path
        if plain and not (rel.startswith((".", "/")) or "/." in rel or "//" in rel):
            path = prefix + rel  # already normal: resolve_record_path's common case, inline
            first, sep, _ = rel.partition("/")
            if sep and first not in tops and first != "__pycache__":
                tops[first] = None
        else:
            path = resolve_record_path(site_dir, rel)
            tops.update(dict.fromkeys(package_dirs_in(site_dir, (path,))))
        paths_l.append(path)
        if e.digest is not None and e.algorithm is not None:
            if rel.startswith("../"):
                outside.append((len(checks), rel))
            checks.append((path, e.algorithm, e.digest, e.size))
            rows.append(n)
    paths = tuple(paths_l)
    return InstalledDistribution(
        name=name,
        version=version,
        site_dir=site_dir,
        metadata_dir=meta_dir,
        has_record=record_text is not None,
        rows=tuple(entries),
        problems=tuple(problems),
        paths=paths,
        top_level=top_level,
        canonical_name=canonicalize(name),
        package_dirs=tuple(tops),
        checks=tuple(checks),
        check_rows=rows.tobytes(),
        outside=tuple(outside),
    )


def iter_metadata_dirs(site_dir: str) -> Iterator[str]:
    """Names of ``*.dist-info`` / ``*.egg-info`` entries directly in ``site_dir``, sorted."""
    try:
        names = sorted(os.listdir(site_dir))
    except OSError:
        return
    for n in names:
        if n.endswith(META_SUFFIXES):
            yield n


def discover(site_dirs: Sequence[str]) -> list[InstalledDistribution]:
    """Every distribution installed in ``site_dirs`` (metadata via importlib-metadata), RECORD parsed."""
    return [load_distribution(d, meta) for d in site_dirs for meta in iter_metadata_dirs(d)]
