"""Named patch sets: the model and loading ``patches/<name>/`` (planning is :mod:`.planner`).

A set is a directory::

    patches/glm5-debug/
      patchset.toml                 name, description, targets, files
      0001-deepseek-v2-dump.patch   unified diff, a/ b/ paths relative to site-packages

``patchset.toml``::

    name = "glm5-debug"
    description = "tensor dumps for the GLM-5 investigation"
    targets = [{distribution = "vllm", version = ">=0.33,<0.34"}]
    files = ["0001-deepseek-v2-dump.patch"]

A set may have several targets, one per distribution. The target ``{environment = true}`` is the environment
itself: the files of site-packages no distribution owns (``sitecustomize.py``, ``usercustomize.py``, ``.pth``
files, stray modules). It has no version; a set whose only target it is may not touch a file a distribution
installed.

``rebase`` appends a ``[[history]]`` table per release the set was carried from (string values: the
distribution, the ``version`` specifier it had, the ``release`` it was merged from, ``to``, ``rebased``
time, the old ``digest``, and ``kept``: the directory under the set holding its old toml and diffs).

unidiff parses the diffs; patchguard applies them: exact context (no fuzz), hunks may move by whole lines
(the offset is reported), files may be created and deleted, binary diffs are refused. Applying and
reverting are the same planner run forwards or backwards; every failing hunk is reported, not the first.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from unidiff.patch import PatchedFile

from .._fs import not_a_directory, parse_toml, read_input, read_regular
from ..config import load_config
from ..diffs import git_unquote, parse_patch
from ..errors import PatchguardError
from ..model import CaptureDocument

__all__ = [
    "FilePatch",
    "PatchSet",
    "PatchSetError",
    "RefusedDiff",
    "SetTarget",
    "find_set",
    "load_set",
    "load_sets",
    "patches_dir",
    "safe_relpath",
]

MAX_PATCH_BYTES = 16 << 20
SET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_KEYS = {"name", "description", "targets", "files", "history"}
_MODE = re.compile(r"^(?:new|deleted) file mode (10[0-7]{4})$", re.MULTILINE)


class PatchSetError(PatchguardError):
    """A patch set that cannot be used as written (bad TOML, unknown key, unsafe path, binary diff...)."""


class RefusedDiff(PatchSetError):
    """One file's part of a diff that cannot be used (binary, a rename, an unsafe path, no hunks): the
    message says why; :func:`parse_diff` collects every one of a diff file before it refuses the file."""


@dataclass(frozen=True, slots=True)
class SetTarget:
    """A distribution a set applies to, and the versions it was written for (a packaging specifier); or,
    with an empty ``distribution``, the environment itself (files no distribution owns, any version)."""

    distribution: str
    version: str

    @classmethod
    def environment(cls) -> SetTarget:
        return cls("", "")

    @property
    def is_environment(self) -> bool:
        return not self.distribution

    def __str__(self) -> str:
        """``vllm >=0.33,<0.34``, or ``environment`` (files no distribution owns)."""
        return "environment" if self.is_environment else f"{self.distribution} {self.version}".strip()

    def admits(self, version: str) -> bool:
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version

        try:
            return SpecifierSet(self.version).contains(Version(version), prereleases=True)
        except InvalidVersion:
            return False


@dataclass(frozen=True, slots=True)
class FilePatch:
    """One file's part of a diff: where (relative to site-packages), and its hunks as unidiff parsed them."""

    path: str
    source: str  # a/... or /dev/null
    target: str  # b/... or /dev/null
    patched: PatchedFile
    origin: str  # the .patch file it comes from

    @property
    def creates(self) -> bool:
        return self.source == "/dev/null"

    @property
    def deletes(self) -> bool:
        return self.target == "/dev/null"

    @property
    def mode(self) -> int | None:
        """The permission bits a ``new file mode`` / ``deleted file mode`` line gives (``None``: none)."""
        match = _MODE.search(str(self.patched.patch_info or ""))
        return int(match.group(1)[-4:], 8) & 0o7777 if match else None


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One ``[[history]]`` table of ``patchset.toml``: a rebase of the set's target ``distribution`` (its
    version then) from ``release`` to ``to``, when, by which patchguard, the digest of the form it carried
    and where that form is ``kept`` (``history/<release>``). Empty strings for what an entry does not say."""

    distribution: str = ""
    version: str = ""
    release: str = ""
    to: str = ""
    rebased: str = ""
    digest: str = ""
    tool: str = ""
    kept: str = ""
    # The table as read (or made): written back as it was, keys a newer patchguard added included.
    raw: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, raw: Mapping[str, str]) -> HistoryEntry:
        known = {f: raw[f] for f in _HISTORY_KEYS if f in raw}
        return cls(**known, raw=MappingProxyType(dict(raw)))


_HISTORY_KEYS = ("distribution", "version", "release", "to", "rebased", "digest", "tool", "kept")


@dataclass(frozen=True, slots=True)
class PatchSet:
    """A loaded, validated patch set. ``digest`` is the sha256 of its toml and diffs (what was applied)."""

    name: str
    description: str
    targets: tuple[SetTarget, ...]
    files: tuple[str, ...]
    directory: str
    digest: str
    patches: tuple[FilePatch, ...] = field(repr=False)
    history: tuple[HistoryEntry, ...] = ()  # one entry per rebase, oldest first

    @property
    def distributions(self) -> tuple[SetTarget, ...]:
        """Its targets that are distributions (not the environment itself)."""
        return tuple(t for t in self.targets if not t.is_environment)

    @property
    def paths(self) -> tuple[str, ...]:
        """Every file the set touches, each once, in order."""
        return tuple(dict.fromkeys(p.path for p in self.patches))

    def captured(self) -> CaptureDocument:
        """``capture``'s document: the set as written (:class:`~patchguard.model.CaptureDocument`)."""
        targets = tuple((t.distribution, t.version) for t in self.targets)
        return CaptureDocument(self.name, self.directory, targets, self.paths, self.digest)


def patches_dir(explicit: str | None = None, *, must_exist: bool = True) -> str:
    """Where sets live: ``--patches``, ``$PATCHGUARD_PATCHES``, the config's ``patches``, ``./patches``.

    A directory named on purpose (the first three) that does not exist is an error, not an empty list
    (``must_exist=False``: ``capture`` makes it)."""
    for value, what in (
        (explicit, "--patches"),
        (os.environ.get("PATCHGUARD_PATCHES"), "$PATCHGUARD_PATCHES"),
    ):
        if value:
            return _existing(os.path.abspath(value), what, must_exist)
    configured = load_config().patches
    if configured:
        return _existing(configured, "the configuration's patches", must_exist)
    return os.path.abspath("patches")


def _existing(path: str, what: str, must_exist: bool) -> str:
    why = not_a_directory(path) if must_exist else None
    if why:
        raise PatchSetError(
            f"{what}: the patch set directory {why}", path=path, hint="pass the directory of your sets"
        )
    return path


def safe_relpath(path: str) -> str | None:
    """Why a path written in a diff is refused, or ``None`` when it is a plain path inside site-packages."""
    if not path or path.startswith("/") or path.startswith("\\") or re.match(r"^[A-Za-z]:", path):
        return "absolute paths are refused"
    parts = path.replace("\\", "/").split("/")
    if ".." in parts:
        return "paths with '..' are refused"
    if any(p in ("", ".") for p in parts):
        return "paths must be normalised (no '//' or '/./')"
    if "\0" in path:
        return "NUL in path"
    if parts[0].endswith((".dist-info", ".egg-info")) or parts[0] == ".patchguard":
        return "installed metadata and patchguard's state are never patched (RECORD stays the wheel's)"
    return None


def _strip_prefix(name: str, prefix: str) -> str:
    name = name.split("\t", 1)[0]
    return name[len(prefix) :] if name.startswith(prefix) else name


def parse_diff(text: str, origin: str) -> list[FilePatch]:
    """Parse one diff file into per-file patches, refusing binary diffs and unsafe paths (all reasons)."""
    from unidiff.errors import UnidiffParseError

    try:
        parsed = parse_patch(text)
    except UnidiffParseError as exc:
        raise PatchSetError(
            f"not a unified diff ({exc})", path=origin, hint="regenerate it with patchguard diff"
        ) from None
    except (ValueError, IndexError, TypeError) as exc:  # unidiff on some malformed input
        raise PatchSetError(f"not a unified diff ({exc.__class__.__name__}: {exc})", path=origin) from None
    problems: dict[str, str] = {}  # per file, its first problem (a binary diff is not also "no hunks")
    out: list[FilePatch] = []
    for pf in parsed:
        try:
            out.append(_file_patch(pf, origin))
        except RefusedDiff as exc:
            where = exc.message.split(": ", 1)[0]
            if where not in problems or "binary" in exc.message:  # what it is says more than "no hunks"
                problems[where] = exc.message
    if problems:
        first, *more = problems.values()
        raise PatchSetError(
            f"refused: {first}" + (f"; and {len(more)} more:\n  " + "\n  ".join(more) if more else ""),
            path=origin,
            hint="fix or remove it from the set" if not more else "fix or remove them from the set",
        )
    if not out:
        raise PatchSetError("the diff changes no file", path=origin)
    return out


def _names(pf: PatchedFile) -> tuple[str, str]:
    """The ``---``/``+++`` names of one file's diff, unquoted: git quotes a name holding control characters,
    quotes or backslashes, and so does patchguard."""
    try:
        return git_unquote(pf.source_file or ""), git_unquote(pf.target_file or "")
    except ValueError as exc:
        raise RefusedDiff(str(exc)) from None


def _file_patch(pf: PatchedFile, origin: str) -> FilePatch:
    """One file's part of a diff (``pf``: a ``unidiff.PatchedFile``); :class:`RefusedDiff` says why it is
    refused."""
    if pf.is_binary_file or "Binary files" in str(pf.patch_info or ""):
        raise RefusedDiff(f"{pf.path}: binary diffs are not supported (ship the file in a wheel instead)")
    src, dst = _sides(pf)
    rel = dst if dst != "/dev/null" else src
    why = safe_relpath(rel)
    if why:
        raise RefusedDiff(f"{rel}: {why}")
    if not len(pf) and not (src == "/dev/null" or dst == "/dev/null"):
        raise RefusedDiff(f"{rel}: a file diff without hunks")
    return FilePatch(
        rel,
        "/dev/null" if src == "/dev/null" else "a/" + rel,
        "/dev/null" if dst == "/dev/null" else "b/" + rel,
        pf,
        origin,
    )


def _sides(pf: PatchedFile) -> tuple[str, str]:
    """The file a diff reads and the one it writes, without their ``a/``/``b/`` prefixes (``/dev/null`` for
    a file made or removed); :class:`RefusedDiff` for a rename or nothing on both sides."""
    source, target = _names(pf)
    src = "/dev/null" if source == "/dev/null" else _strip_prefix(source, "a/")
    dst = "/dev/null" if target == "/dev/null" else _strip_prefix(target, "b/")
    if src == "/dev/null" and dst == "/dev/null":
        raise RefusedDiff("a file diff from /dev/null to /dev/null")
    if src != "/dev/null" and dst != "/dev/null" and src != dst:
        raise RefusedDiff(f"{src} -> {dst}: renames are not supported")
    return src, dst


def load_set(directory: str, name: str | None = None) -> PatchSet:
    """Load and validate ``patches/<name>/``. Every problem is a :class:`PatchSetError` naming the file.

    ``name`` is the name the set must have (default: its directory's name).
    """
    toml_path = os.path.join(directory, "patchset.toml")
    doc, header = _read_header(directory, toml_path)
    expected_name = name or os.path.basename(os.path.normpath(directory))
    name = doc.get("name")
    if not isinstance(name, str) or not SET_NAME.fullmatch(name):
        raise PatchSetError("name must be letters, digits, '.', '_' or '-'", path=toml_path)
    if name != expected_name:
        raise PatchSetError(f"name {name!r} differs from its directory", path=toml_path)
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise PatchSetError("description must be a string", path=toml_path)
    targets = _targets(doc.get("targets"), toml_path)
    files = doc.get("files")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        raise PatchSetError("files must be a non-empty list of diff file names", path=toml_path)
    digest = hashlib.sha256(header)
    patches: list[FilePatch] = []
    for fname in files:
        raw = _read_diff(directory, fname, toml_path)
        digest.update(b"\0" + fname.encode() + b"\0" + raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise PatchSetError("not UTF-8 text", path=os.path.join(directory, fname)) from None
        patches.extend(parse_diff(text, os.path.join(directory, fname)))
    return PatchSet(
        name,
        description,
        targets,
        tuple(files),
        os.path.abspath(directory),
        digest.hexdigest(),
        tuple(patches),
        _history(doc.get("history", []), toml_path),
    )


def _read_header(directory: str, toml_path: str) -> tuple[dict[str, Any], bytes]:
    """The parsed ``patchset.toml`` of a set directory, with no key patchguard does not know, and its
    bytes (read once: what was parsed is what is digested)."""
    if not os.path.lexists(toml_path):
        raise PatchSetError(
            "no patchset.toml", path=directory, hint="a patch set is a directory with a patchset.toml"
        )
    try:
        raw = read_input(toml_path, limit=1 << 20)
        doc = parse_toml(raw)
    except OSError as exc:
        raise PatchSetError(f"cannot read ({exc.strerror or exc})", path=toml_path) from None
    except ValueError as exc:
        raise PatchSetError(f"invalid TOML ({exc})", path=toml_path, hint="fix the syntax") from None
    unknown = sorted(set(doc) - _KEYS)
    if unknown:
        raise PatchSetError(
            f"unknown key {unknown[0]!r}", path=toml_path, hint=f"known keys: {', '.join(sorted(_KEYS))}"
        )
    return doc, raw


def _read_diff(directory: str, fname: str, toml_path: str) -> bytes:
    """The bytes of one diff file a set lists (a plain name in its directory, of bounded size)."""
    if safe_relpath(fname) or "/" in fname:
        raise PatchSetError(f"file {fname!r} must be a plain name inside the set's directory", path=toml_path)
    fpath = os.path.join(directory, fname)
    try:
        data = read_regular(fpath, MAX_PATCH_BYTES + 1)  # a regular file only: a FIFO never blocks
        if len(data) > MAX_PATCH_BYTES:
            raise PatchSetError(
                f"larger than {MAX_PATCH_BYTES >> 20} MiB",
                path=fpath,
                hint="a patch set carries source edits, not artefacts",
            )
        return data
    except FileNotFoundError:
        raise PatchSetError("listed in patchset.toml but missing", path=fpath) from None
    except OSError as exc:
        raise PatchSetError(f"cannot read ({exc.strerror or exc})", path=fpath) from None


def _history(raw: object, toml_path: str) -> tuple[HistoryEntry, ...]:
    if not isinstance(raw, list) or not all(
        isinstance(h, dict) and all(isinstance(v, str) for v in h.values()) for h in raw
    ):
        raise PatchSetError(
            "history must be a list of tables of strings ([[history]] entries rebase writes)", path=toml_path
        )
    return tuple(HistoryEntry.parse(h) for h in raw)


def _targets(raw: object, toml_path: str) -> tuple[SetTarget, ...]:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not isinstance(raw, list) or not raw:
        raise PatchSetError("targets must be a non-empty list of {distribution, version}", path=toml_path)
    out: list[SetTarget] = []
    for t in raw:
        if isinstance(t, dict) and "environment" in t:
            if len(t) != 1 or t["environment"] is not True:
                raise PatchSetError(
                    f"bad target {t!r}: the environment target is {{environment = true}}, alone in its table",
                    path=toml_path,
                )
            if SetTarget.environment() in out:
                raise PatchSetError("the environment target is listed twice", path=toml_path)
            out.append(SetTarget.environment())
            continue
        if (
            not isinstance(t, dict)
            or set(t) - {"distribution", "version"}
            or not isinstance(t.get("distribution"), str)
            or not t["distribution"].strip()
        ):
            raise PatchSetError(
                f'bad target {t!r}: needs distribution = "...", version = "..."', path=toml_path
            )
        version = t.get("version", "")
        if not isinstance(version, str):
            raise PatchSetError(f"version of {t['distribution']} must be a string", path=toml_path)
        try:
            SpecifierSet(version)
        except InvalidSpecifier:
            raise PatchSetError(
                f"version {version!r} of {t['distribution']} is not a version specifier",
                path=toml_path,
                hint='e.g. ">=0.33,<0.34" or "==0.4.0"',
            ) from None
        out.append(SetTarget(t["distribution"], version))
    return tuple(out)


def load_sets(directory: str | None = None) -> list[PatchSet]:
    """Every set in the patches directory (sorted by name); a broken set raises naming its file. Hidden
    directories are not sets (``capture`` and ``rebase`` stage a set in one before renaming it)."""
    root = patches_dir(directory)
    if not os.path.isdir(root):
        return []
    return [
        load_set(os.path.join(root, n))
        for n in sorted(os.listdir(root))
        if not n.startswith(".") and os.path.lexists(os.path.join(root, n, "patchset.toml"))
    ]


def find_set(name: str, directory: str | None = None) -> PatchSet:
    root = patches_dir(directory)
    path = os.path.join(root, name)
    if safe_relpath(name) or "/" in name or not os.path.isdir(path):
        known = ", ".join(s.name for s in load_sets(directory)) or "none"
        raise PatchSetError(f"no patch set named {name!r}", path=root, hint=f"sets here: {known}")
    return load_set(path)
