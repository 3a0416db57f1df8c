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
import csv
import functools
import hashlib
import io
import marshal
import operator
import os
import posixpath
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, cast

from .._fs import read_regular
from ..errors import PatchguardError
from .condarecord import conda_rows, parse_conda_record
from .dpkgrecord import dpkg_rows
from .hashing import b64, digest_length, final_digest

__all__ = [
    "CONDA",
    "DPKG",
    "HASH_ALGORITHMS",
    "INSTALLER_FILES",
    "META_SUFFIXES",
    "Check",
    "InstalledDistribution",
    "RecordEntry",
    "RecordProblem",
    "discover",
    "iter_metadata_dirs",
    "load_baseline",
    "load_distribution",
    "matches",
    "name_version",
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


_as_entry = functools.partial(tuple.__new__, RecordEntry)  # RecordEntry._make without the Python frame


class RecordProblem(NamedTuple):
    """A RECORD row that does not follow the spec (1-based ``line`` in the RECORD file).

    ``hex`` marks a hash written as hex digits instead of urlsafe base64 (uv_build before 0.8.13 wrote
    them so, and installers copy them): the row still verifies its file, read as hex. ``duplicate`` marks a
    path listed again in a way installers really write (the same row twice, ``./x`` beside ``x``, pip's
    hashless row for bytecode it compiled over the wheel's own): a fact about the RECORD, not a fault — the
    file is checked against the one row that describes it as installed (:func:`_merged`).
    """

    line: int
    message: str
    path: str | None = None
    hex: bool = False
    duplicate: bool = False


HEX_NOTE = "hash written in hex, not urlsafe base64"


_B64_TEXT = re.compile(r"[A-Za-z0-9_-]+")
# Length of the unpadded urlsafe base64 text of each fixed-size digest (sha256: 43).
_B64_LENGTHS: dict[str, int] = {a: (4 * n + 2) // 3 for a, n in _DIGEST_SIZES.items()}


class InvalidHash(PatchguardError):
    """A RECORD hash that is not ``algo=urlsafe-base64-digest`` of a known algorithm: the message says why,
    and becomes the row's :class:`RecordProblem`."""


def _parse_hash(text: str) -> tuple[str, str]:
    """``sha256=AbC…`` → (algorithm, unpadded urlsafe base64 digest); :class:`InvalidHash` says what is wrong.

    The digest stays text: verifying compares the base64 text of the computed digest, so no row needs
    decoding (a RECORD of 20,000 rows is parsed in a few milliseconds).
    """
    algo, sep, b64 = text.partition("=")
    if not sep or not b64:
        raise InvalidHash(f"hash {text!r} is not of the form algo=digest")
    algo = algo.strip().lower()
    if algo not in HASH_ALGORITHMS:
        raise InvalidHash(f"unknown hash algorithm {algo!r}")
    b64 = b64.rstrip("=")
    if not _B64_TEXT.fullmatch(b64) or len(b64) % 4 == 1:
        raise InvalidHash(f"hash {text!r} is not urlsafe base64")
    expected = _B64_LENGTHS.get(algo)
    if expected is not None and len(b64) != expected:
        raise InvalidHash(f"{algo} digest {b64!r} has {len(b64)} base64 characters, expected {expected}")
    return algo, b64


def _from_hex(text: str) -> tuple[str, str] | None:
    """``sha256=<64 hex digits>`` → (algorithm, the digest as unpadded urlsafe base64), else ``None``."""
    algo, _, digits = text.partition("=")
    algo = algo.strip().lower()
    size = _DIGEST_SIZES.get(algo)
    if size is None or len(digits) != 2 * size or not re.fullmatch(r"[0-9a-fA-F]+", digits):
        return None
    return algo, b64(bytes.fromhex(digits))


def parse_record(text: str) -> tuple[list[RecordEntry], list[RecordProblem]]:
    """Parse the text of a RECORD file into entries and problems.

    A row with a path but a bad hash or size still yields an entry (without a hash, so the file stays owned
    but unverifiable) *and* a problem.

    >>> row = "pkg/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0"
    >>> entries, problems = parse_record(row)
    >>> entries[0].path, entries[0].algorithm, entries[0].size, problems
    ('pkg/__init__.py', 'sha256', 0, [])
    """
    entries = _parse_plain(text)
    if entries is not None:
        return entries, []
    try:
        # Not str.splitlines(): it also splits on \x85, \u2028 and friends, legal in file names.
        rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as exc:
        return [], [RecordProblem(1, f"not valid CSV ({exc})")]
    return _parse_rows(rows)


_PLAIN_HASHES = re.compile(r"(?:sha256=[A-Za-z0-9_-]{43})*")


# hot loop: the fast path for every RECORD of a cold scan (~40k rows of a large environment, in whole-RECORD
# passes). Not split: each check works on the same split columns (rows, paths, hashes, sizes) and bails out to
# _parse_rows; one frame keeps them local and the whole "is this RECORD plain?" predicate in one place.
def _parse_plain(text: str) -> list[RecordEntry] | None:
    """The entries of a RECORD whose every row is the plain kind an installer writes, else ``None``.

    Plain: ``\n``-terminated lines of three columns that need no CSV quoting, a non-empty path listed once,
    and either a well-formed ``sha256=`` hash with a decimal size or neither. That is every row of every
    RECORD pip, uv and installer write. It is checked column by column for the whole RECORD at once (one
    regular expression match for all the digests), several times faster than :func:`_parse_rows`, which
    takes any RECORD apart row by row and says what is wrong with it.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n")  # csv.writer's default line ending: pip writes it
    if '"' in text or "\r" in text or "\0" in text:
        return None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    rows = [line.split(",") for line in lines]
    if set(map(len, rows)) != {3}:
        return None
    paths, hashes, sizes = zip(*rows, strict=True)
    if "" in paths or len(set(paths)) != len(paths):
        return None
    joined = "".join(hashes)
    if not set(map(len, hashes)) <= {0, 50} or not _PLAIN_HASHES.fullmatch(joined):
        return None
    hashed_sizes = [size for h, size in zip(hashes, sizes, strict=True) if h]
    digits = "".join(hashed_sizes)
    if (
        "" in hashed_sizes
        or (digits and not (digits.isascii() and digits.isdigit()))
        or len(digits) != len("".join(sizes))
    ):
        return None
    return [
        _as_entry((path, "sha256", h[7:], int(size), n)) if h else _as_entry((path, None, None, None, n))
        for n, (path, h, size) in enumerate(rows, start=1)
    ]


def _row_size(text: str, lineno: int, path: str, problems: list[RecordProblem]) -> int | None:
    """A row's size column: a whole number, or none (empty, or a problem noted)."""
    if not text:
        return None
    if text.isascii() and text.isdigit():
        return int(text)
    problems.append(RecordProblem(lineno, f"size {text!r} is not a whole number", path))
    return None


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
        key = path if _normal(path) else posixpath.normpath(path)
        algo, digest = _row_hash(hash_text, lineno, path, problems) if hash_text else (None, None)
        entry = RecordEntry(path, algo, digest, _row_size(size_text, lineno, path, problems), lineno)
        first = seen.get(key)
        if first is None:
            seen[key] = len(entries)
            entries.append(entry)
            continue
        kept, why = _merged(entries[first], entry)
        entries[first] = kept
        problems.append(RecordProblem(lineno, why, path, duplicate=True))
    return entries, problems


def _row_hash(
    hash_text: str, lineno: int, path: str, problems: list[RecordProblem]
) -> tuple[str | None, str | None]:
    """(algorithm, digest) of a row's hash column; a bad one noted in ``problems`` (a hex digest is read, and
    noted as such)."""
    try:
        return _parse_hash(hash_text)
    except InvalidHash as exc:
        hexed = _from_hex(hash_text)
        problems.append(
            RecordProblem(lineno, HEX_NOTE, path, hex=True)
            if hexed
            else RecordProblem(lineno, exc.message, path)
        )
        return hexed if hexed is not None else (None, None)


def _normal(path: str) -> bool:
    """Whether a RECORD path is already in normal form (no ``./``, ``../``, ``//``, no leading ``/``): what
    needs no ``normpath`` (most rows: checked for all of them, so kept cheap)."""
    return not (path.startswith((".", "/")) or "/." in path or "//" in path)


def _merged(first: RecordEntry, again: RecordEntry) -> tuple[RecordEntry, str]:
    """The one row two rows of one path stand for, and what to say about the pair.

    Installers write such pairs: the same row twice; ``./x`` beside ``x``; and pip, byte-compiling a
    source over the ``__pycache__/*.pyc`` the wheel itself shipped, appends its own hashless row for the
    file it rewrote (numpy's ``conv_template.cpython-311.pyc``) — the file on disk is pip's, so the hashless
    row describes it and the wheel's hash no longer can. Otherwise the hashed row is kept (a file that can be
    verified is), and of two rows with different hashes the later one: the installer extracted members in
    order, so the last copy is the one on disk.
    """
    where = f"listed twice (first on line {first.line})"
    same = (first.algorithm, first.digest, first.size) == (again.algorithm, again.digest, again.size)
    if same:
        return first, f"{where}, the same row both times"
    hashless = [e for e in (first, again) if e.digest is None]
    if len(hashless) == 1:
        hashed = first if first.digest is not None else again
        if hashed.path.endswith(".pyc"):
            return hashless[0]._replace(path=first.path), (
                f"{where}: the wheel ships this bytecode and the installer compiled over it (its own row has "
                "no hash): not verifiable, like all bytecode an installer compiles"
            )
        return hashed._replace(path=first.path), f"{where}, once without a hash: checked against the hash"
    return again._replace(path=first.path), f"{where} with different hashes: checked against the last"


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
    rows: tuple[RecordEntry, ...] | None = field(compare=False)  # see ``entries``; filled in lazily
    problems: tuple[RecordProblem, ...]
    paths: tuple[str, ...] = ()  # absolute path of each entry, same order as ``entries``
    top_level: tuple[str, ...] = ()
    canonical_name: str = ""
    package_dirs: tuple[str, ...] = ()
    verifiable: tuple[Check, ...] | bytes = field(default=(), compare=False)  # see ``checks``; lazy
    check_rows: bytes = b""  # index into ``entries`` of each check, as array("I") bytes
    outside: tuple[tuple[int, str], ...] = ()  # (index into ``checks``, RECORD path) of ``../`` entries
    # What holds the rows: ``RECORD`` in ``metadata_dir``, or the package manager's record that
    # ``metadata_dir`` then names: :data:`CONDA` (``<prefix>/conda-meta/<name>-<version>-<build>.json``),
    # :data:`DPKG` (``<root>/var/lib/dpkg/info/<package>.md5sums``).
    baseline: str = "RECORD"

    @property
    def checks(self) -> tuple[Check, ...]:
        """One ``(path, algorithm, digest, size)`` per entry with a hash, in RECORD order.

        From the stat cache they come packed (:mod:`marshal`, without the paths) and are unpacked on first
        use: a warm scan of unchanged files needs only ``check_paths``.
        """
        checks = self.verifiable
        if isinstance(checks, bytes):
            algorithms, digests, sizes = marshal.loads(checks)
            checks = tuple(zip(self.check_paths, algorithms, digests, sizes, strict=True))
            object.__setattr__(self, "verifiable", checks)
        return checks

    @property
    def check_paths(self) -> Sequence[str]:
        """The absolute path of each of ``checks``, without unpacking them."""
        if not isinstance(self.verifiable, bytes):
            return [c[0] for c in self.verifiable]
        rows = array.array("I")
        rows.frombytes(self.check_rows)
        if len(rows) < 2:
            return [self.paths[n] for n in rows]
        return operator.itemgetter(*rows)(self.paths)  # type: ignore[no-any-return]

    def packed_checks(self) -> bytes:
        """``checks`` without their paths, as the stat cache keeps them (algorithms, digests, sizes)."""
        if isinstance(self.verifiable, bytes):
            return self.verifiable
        checks = self.verifiable
        return marshal.dumps(([c[1] for c in checks], [c[2] for c in checks], [c[3] for c in checks]))

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
            if self.baseline in _BASELINES:
                parsed = _BASELINES[self.baseline](self.record_path, raw, self.site_dir)[0] if raw else []
            else:
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
        """The file holding the rows: RECORD, or the conda-meta record."""
        return self.metadata_dir if self.baseline != "RECORD" else os.path.join(self.metadata_dir, "RECORD")

    def resolve(self, entry_path: str) -> str:
        """Absolute, normalised path of a RECORD entry (relative paths are relative to ``site_dir``)."""
        return resolve_record_path(self.site_dir, entry_path)


def resolve_record_path(site_dir: str, entry_path: str) -> str:
    """Absolute, normalised path of a RECORD path written relative to ``site_dir`` (or absolute)."""
    if os.sep == "/" and _normal(entry_path):
        return site_dir + "/" + entry_path  # already normal: the common case, kept cheap
    return os.path.normpath(os.path.join(site_dir, entry_path))


_SEPARATORS = re.compile(r"[-_.]+")


def canonicalize(name: str) -> str:
    """PEP 503 normalised name (``Foo.Bar_baz`` → ``foo-bar-baz``).

    PEP 503's own one-line definition rather than ``packaging.utils.canonicalize_name``: importing that
    module imports ``packaging.tags`` too, 20 ms of a cold scan for this regular expression (the tests check
    both agree).
    """
    return _SEPARATORS.sub("-", name).lower()


META_SUFFIXES = (".dist-info", ".egg-info")
# Files an installer writes into a .dist-info beside the wheel's own: not part of the build.
INSTALLER_FILES = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")


def matches(entry: RecordEntry, data: bytes) -> bool:
    """Whether ``data`` hashes to what the RECORD row says (encoded the way the scan's hashing encodes)."""
    if entry.algorithm is None or entry.digest is None:
        return False
    h = hashlib.new(entry.algorithm, data)
    return b64(final_digest(h, entry.algorithm, digest_length(entry.digest))) == entry.digest


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
        data = read_regular(path)
    except OSError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape")


def name_version(meta_dir: str) -> tuple[str | None, str | None]:
    """``Name`` and ``Version`` from a metadata directory's core metadata headers.

    ``METADATA`` (``.dist-info``) or ``PKG-INFO`` (``.egg-info``) is read directly, headers only: the body
    is the project's whole README, and parsing it as e-mail (what ``importlib_metadata``'s ``metadata``
    does) costs more than reading the RECORD. A directory with neither is left to importlib-metadata.
    """
    text: str | None = None
    for name in ("METADATA", "PKG-INFO"):
        try:
            text = read_regular(os.path.join(meta_dir, name)).decode("utf-8")
            break
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError):
            # Not UTF-8: importlib-metadata cannot read it either (the directory name is used). Not a
            # regular file: nothing may open it (a FIFO would block).
            return None, None
    if text is None:
        import importlib_metadata  # local: keep `patchguard --version` free of it

        try:
            md = importlib_metadata.Distribution.at(meta_dir).metadata
            return md["Name"], md["Version"]
        except (OSError, ValueError, KeyError, UnicodeDecodeError):
            return None, None
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the end of the headers
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if sep and key in ("name", "version") and key not in found:
            found[key] = value.strip()
    return found.get("name"), found.get("version")


def load_distribution(site_dir: str, meta_name: str) -> InstalledDistribution:
    """Read one ``*.dist-info`` or ``*.egg-info``: its name and version, and its RECORD parsed."""
    meta_dir = os.path.join(site_dir, meta_name)
    name, version = name_version_from_dirname(meta_name)
    if os.path.isdir(meta_dir):
        meta_name_, meta_version = name_version(meta_dir)
        name, version = meta_name_ or name, meta_version or version
    record_text: str | None = None
    entries: list[RecordEntry] = []
    problems: list[RecordProblem] = []
    top_level: tuple[str, ...] = ()
    if meta_name.endswith(".dist-info"):
        record_text, entries, problems = _read_record(os.path.join(meta_dir, "RECORD"))
    if record_text is None:
        top_level = _claimed_top_level(meta_dir, name)
    return _distribution(
        name, version, site_dir, meta_dir, record_text is not None, entries, problems, top_level
    )


def _distribution(
    name: str,
    version: str,
    site_dir: str,
    meta_dir: str,
    has_record: bool,
    entries: list[RecordEntry],
    problems: list[RecordProblem],
    top_level: tuple[str, ...] = (),
    baseline: str = "RECORD",
) -> InstalledDistribution:
    """A distribution of rows read from its installer's record: where each file is, and what to check."""
    paths, tops, outside = _locate(site_dir, entries)
    rows = array.array(
        "I", [n for n, e in enumerate(entries) if e.digest is not None and e.algorithm is not None]
    )
    # (rows holds only entries whose algorithm and digest are set)
    checks = cast(
        list[Check], [(paths[n], entries[n].algorithm, entries[n].digest, entries[n].size) for n in rows]
    )
    return InstalledDistribution(
        name=name,
        version=version,
        site_dir=site_dir,
        metadata_dir=meta_dir,
        has_record=has_record,
        rows=tuple(entries),
        problems=tuple(problems),
        paths=paths,
        top_level=top_level,
        canonical_name=canonicalize(name),
        package_dirs=tuple(sorted(tops)),
        verifiable=tuple(checks),
        check_rows=rows.tobytes(),
        outside=tuple(outside),
        baseline=baseline,
    )


CONDA = "conda-meta"
"""The baseline of a distribution conda installed: its conda-meta record (:mod:`.condarecord`)."""


def _conda_entries(
    record_file: str, text: str, site_dir: str
) -> tuple[list[RecordEntry], list[RecordProblem], bool]:
    """The rows of a conda-meta record as RECORD entries, its problems, and whether it has hashes."""
    try:
        record = parse_conda_record(record_file, text)
    except (ValueError, RecursionError) as exc:
        return [], [RecordProblem(0, f"not a readable conda-meta record ({exc})")], False
    rows, problems = conda_rows(record, site_dir)
    entries = [_as_entry(row) for row in rows]
    return entries, [RecordProblem(n, message, path) for n, message, path in problems], record.has_hashes


DPKG = "dpkg"
"""The baseline of a Debian package's files: dpkg's ``md5sums`` (:mod:`.dpkgrecord`)."""


def _dpkg_entries(
    record_file: str, text: str, site_dir: str
) -> tuple[list[RecordEntry], list[RecordProblem], bool]:
    rows, problems = dpkg_rows(record_file, text, site_dir)
    entries = [_as_entry(row) for row in rows]
    hashed = record_file.endswith(".md5sums")
    return entries, [RecordProblem(n, message, path) for n, message, path in problems], hashed


_BASELINES = {CONDA: _conda_entries, DPKG: _dpkg_entries}


def load_baseline(
    record_file: str, site_dir: str, name: str, version: str, baseline: str
) -> InstalledDistribution:
    """A package another package manager installed, as a distribution: its files from that manager's record
    at ``record_file`` (:data:`CONDA`: a conda-meta record; :data:`DPKG`: dpkg's md5sums), paths relative to
    ``site_dir`` (files elsewhere as ``../`` rows, like a wheel's scripts).

    ``name`` and ``version`` are the ones to show: the Python project's (from the metadata directory the
    package ships) when it has one, else the package's.
    """
    try:
        raw = read_regular(record_file).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        problems = [RecordProblem(0, f"cannot read {os.path.basename(record_file)} ({why})")]
        return _distribution(name, version, site_dir, record_file, False, [], problems, baseline=baseline)
    entries, problems, hashed = _BASELINES[baseline](record_file, raw, site_dir)
    return _distribution(name, version, site_dir, record_file, hashed, entries, problems, baseline=baseline)


def _read_record(record_file: str) -> tuple[str | None, list[RecordEntry], list[RecordProblem]]:
    """A RECORD's text (``None``: absent or unreadable), its entries, and every problem reading or parsing."""
    problems: list[RecordProblem] = []
    try:
        raw: bytes | None = read_regular(record_file)
    except FileNotFoundError:
        raw = None
    except OSError as exc:
        raw = None
        problems.append(RecordProblem(0, f"cannot read RECORD ({exc.strerror or exc})"))
    if raw is None:
        return None, [], problems
    try:
        record_text = raw.decode("utf-8")
    except UnicodeDecodeError:
        record_text = raw.decode("utf-8", "surrogateescape")
        problems.append(RecordProblem(0, "RECORD is not valid UTF-8"))
    entries, more = parse_record(record_text)
    problems.extend(more)
    return record_text, entries, problems


def _claimed_top_level(meta_dir: str, name: str) -> tuple[str, ...]:
    """Top-level names claimed without RECORD (``top_level.txt``, else guessed from ``name``): never empty."""
    top = _read_text(os.path.join(meta_dir, "top_level.txt")) if os.path.isdir(meta_dir) else None
    top_level = tuple(t.strip() for t in (top or "").splitlines() if t.strip())
    if not top_level:
        # No file list and no top_level.txt: the import name is most often the project name.
        guess = name.replace("-", "_").replace(".", "_")
        top_level = tuple(dict.fromkeys((guess, guess.lower(), guess + ".py", guess.lower() + ".py")))
    return top_level


def _locate(
    site_dir: str, entries: list[RecordEntry]
) -> tuple[tuple[str, ...], set[str], list[tuple[int, str]]]:
    """Each entry's absolute path, the top dirs holding them (never __pycache__), the hashed ``../`` ones."""
    # What a scan needs of the rows, in whole-list passes (this runs for every row of a cold scan).
    rels = [e.path for e in entries]
    joined = "\n" + "\n".join(rels)
    prefix = site_dir + "/"
    if os.sep == "/" and not any(bad in joined for bad in ("\n.", "\n/", "/.", "//")):
        # Every path is already normal (resolve_record_path's common case): no ../ entries either.
        paths = tuple([prefix + rel for rel in rels])
        tops = {rel.partition("/")[0] for rel in rels if "/" in rel}
        outside: list[tuple[int, str]] = []
    else:
        paths, tops, outside = _locate_unusual(site_dir, entries, rels)
    tops.discard("__pycache__")
    return paths, tops, outside


def _locate_unusual(
    site_dir: str, entries: list[RecordEntry], rels: list[str]
) -> tuple[tuple[str, ...], set[str], list[tuple[int, str]]]:
    """What :func:`_locate` returns, for RECORD paths of which some are not already normal (``../``)."""
    prefix = site_dir + "/"
    unusual = [n for n, rel in enumerate(rels) if not _normal(rel)]
    resolved = [prefix + rel for rel in rels]
    for n in unusual if os.sep == "/" else range(len(rels)):
        resolved[n] = resolve_record_path(site_dir, rels[n])
    paths = tuple(resolved)
    skip = set(unusual)
    tops = {rel.partition("/")[0] for n, rel in enumerate(rels) if "/" in rel and n not in skip}
    tops.update(package_dirs_in(site_dir, [paths[n] for n in unusual]))
    hashed = [n for n, e in enumerate(entries) if e.digest is not None and e.algorithm is not None]
    outside = [(k, rels[n]) for k, n in enumerate(hashed) if rels[n].startswith("../")]
    return paths, tops, outside


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
