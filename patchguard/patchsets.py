"""Named patch sets: the model, loading ``patches/<name>/``, and planning hunks (in memory, never writing).

A set is a directory::

    patches/glm5-debug/
      patchset.toml                 name, description, targets, files
      0001-deepseek-v2-dump.patch   unified diff, a/ b/ paths relative to site-packages

``patchset.toml``::

    name = "glm5-debug"
    description = "tensor dumps for the GLM-5 investigation"
    targets = [{distribution = "vllm", version = ">=0.33,<0.34"}]
    files = ["0001-deepseek-v2-dump.patch"]

unidiff parses the diffs; patchguard applies them: exact context (no fuzz), hunks may move by whole lines
(the offset is reported), files may be created and deleted, binary diffs are refused. Applying and
reverting are the same planner run forwards or backwards; every failing hunk is reported, not the first.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .config import ConfigError, load_config, read_toml
from .diffs import split_lines
from .errors import PatchguardError

__all__ = [
    "FilePlan",
    "HunkFailure",
    "PatchSet",
    "PatchSetError",
    "PlanFailed",
    "Target",
    "load_set",
    "load_sets",
    "patches_dir",
    "plan_patches",
    "plan_set",
]

MAX_PATCH_BYTES = 16 << 20
SET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_KEYS = {"name", "description", "targets", "files"}


class PatchSetError(PatchguardError):
    """A patch set that cannot be used as written (bad TOML, unknown key, unsafe path, binary diff...)."""


@dataclass(frozen=True, slots=True)
class Target:
    """A distribution a set applies to, and the versions it was written for (a packaging specifier)."""

    distribution: str
    version: str

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
    patched: object  # unidiff.PatchedFile
    origin: str  # the .patch file it comes from

    @property
    def creates(self) -> bool:
        return self.source == "/dev/null"

    @property
    def deletes(self) -> bool:
        return self.target == "/dev/null"


@dataclass(frozen=True, slots=True)
class PatchSet:
    """A loaded, validated patch set. ``digest`` is the sha256 of its toml and diffs (what was applied)."""

    name: str
    description: str
    targets: tuple[Target, ...]
    files: tuple[str, ...]
    directory: str
    digest: str
    patches: tuple[FilePatch, ...] = field(repr=False)

    @property
    def paths(self) -> tuple[str, ...]:
        """Every file the set touches, each once, in order."""
        return tuple(dict.fromkeys(p.path for p in self.patches))


def patches_dir(explicit: str | None = None) -> str:
    """Where sets live: ``--patches``, ``$PATCHGUARD_PATCHES``, the config's ``patches``, ``./patches``."""
    if explicit:
        return os.path.abspath(explicit)
    env = os.environ.get("PATCHGUARD_PATCHES")
    if env:
        return os.path.abspath(env)
    configured = load_config().patches
    return configured or os.path.abspath("patches")


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
    from unidiff.patch import PatchSet as UnidiffPatchSet

    try:
        parsed = UnidiffPatchSet(text)
    except UnidiffParseError as exc:
        raise PatchSetError(
            f"not a unified diff ({exc})", path=origin, hint="regenerate it with patchguard diff"
        ) from None
    except (ValueError, IndexError, TypeError) as exc:  # unidiff on some malformed input
        raise PatchSetError(f"not a unified diff ({exc.__class__.__name__}: {exc})", path=origin) from None
    problems: list[str] = []
    out: list[FilePatch] = []
    for pf in parsed:
        source, target = pf.source_file or "", pf.target_file or ""
        if pf.is_binary_file or "Binary files" in str(pf.patch_info or ""):
            problems.append(f"{pf.path}: binary diffs are not supported (ship the file in a wheel instead)")
            continue
        src = "/dev/null" if source == "/dev/null" else _strip_prefix(source, "a/")
        dst = "/dev/null" if target == "/dev/null" else _strip_prefix(target, "b/")
        if src == "/dev/null" and dst == "/dev/null":
            problems.append("a file diff from /dev/null to /dev/null")
            continue
        rel = dst if dst != "/dev/null" else src
        if src != "/dev/null" and dst != "/dev/null" and src != dst:
            problems.append(f"{src} -> {dst}: renames are not supported")
            continue
        why = safe_relpath(rel)
        if why:
            problems.append(f"{rel}: {why}")
            continue
        if not len(pf) and not (src == "/dev/null" or dst == "/dev/null"):
            problems.append(f"{rel}: a file diff without hunks")
            continue
        out.append(
            FilePatch(
                rel,
                "/dev/null" if src == "/dev/null" else "a/" + rel,
                "/dev/null" if dst == "/dev/null" else "b/" + rel,
                pf,
                origin,
            )
        )
    if problems:
        raise PatchSetError("refused:\n  " + "\n  ".join(problems), path=origin)
    if not out:
        raise PatchSetError("the diff changes no file", path=origin)
    return out


def load_set(directory: str, name: str | None = None) -> PatchSet:
    """Load and validate ``patches/<name>/``. Every problem is a :class:`PatchSetError` naming the file.

    ``name`` is the name the set must have (default: its directory's name).
    """
    toml_path = os.path.join(directory, "patchset.toml")
    if not os.path.isfile(toml_path):
        raise PatchSetError(
            "no patchset.toml", path=directory, hint="a patch set is a directory with a patchset.toml"
        )
    try:
        doc = read_toml(toml_path)
    except ConfigError as exc:
        raise PatchSetError(exc.message, path=toml_path, hint=exc.hint) from None
    unknown = sorted(set(doc) - _KEYS)
    if unknown:
        raise PatchSetError(
            f"unknown key {unknown[0]!r}", path=toml_path, hint=f"known keys: {', '.join(sorted(_KEYS))}"
        )
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
    digest = hashlib.sha256()
    with open(toml_path, "rb") as f:
        digest.update(f.read())
    patches: list[FilePatch] = []
    for fname in files:
        if safe_relpath(fname) or "/" in fname:
            raise PatchSetError(
                f"file {fname!r} must be a plain name inside the set's directory", path=toml_path
            )
        fpath = os.path.join(directory, fname)
        try:
            st = os.stat(fpath)
            if st.st_size > MAX_PATCH_BYTES:
                raise PatchSetError(
                    f"larger than {MAX_PATCH_BYTES >> 20} MiB",
                    path=fpath,
                    hint="a patch set carries source edits, not artefacts",
                )
            with open(fpath, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            raise PatchSetError("listed in patchset.toml but missing", path=fpath) from None
        except OSError as exc:
            raise PatchSetError(f"cannot read ({exc.strerror or exc})", path=fpath) from None
        digest.update(b"\0" + fname.encode() + b"\0" + raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise PatchSetError("not UTF-8 text", path=fpath) from None
        patches.extend(parse_diff(text, fpath))
    return PatchSet(
        name,
        description,
        targets,
        tuple(files),
        os.path.abspath(directory),
        digest.hexdigest(),
        tuple(patches),
    )


def _targets(raw: object, toml_path: str) -> tuple[Target, ...]:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not isinstance(raw, list) or not raw:
        raise PatchSetError("targets must be a non-empty list of {distribution, version}", path=toml_path)
    out: list[Target] = []
    for t in raw:
        if (
            not isinstance(t, dict)
            or set(t) - {"distribution", "version"}
            or not isinstance(t.get("distribution"), str)
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
        out.append(Target(t["distribution"], version))
    return tuple(out)


def load_sets(directory: str | None = None) -> list[PatchSet]:
    """Every set in the patches directory (sorted by name); a broken set raises naming its file."""
    root = patches_dir(directory)
    if not os.path.isdir(root):
        return []
    return [
        load_set(os.path.join(root, n))
        for n in sorted(os.listdir(root))
        if os.path.isfile(os.path.join(root, n, "patchset.toml"))
    ]


def find_set(name: str, directory: str | None = None) -> PatchSet:
    root = patches_dir(directory)
    path = os.path.join(root, name)
    if safe_relpath(name) or "/" in name or not os.path.isdir(path):
        known = ", ".join(s.name for s in load_sets(directory)) or "none"
        raise PatchSetError(f"no patch set named {name!r}", path=root, hint=f"sets here: {known}")
    return load_set(path)


# -- planning ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HunkFailure:
    """A hunk that does not apply: where, and what it expected versus what the file has there."""

    path: str
    header: str
    expected: tuple[str, ...]
    found: tuple[str, ...]
    reason: str = "context does not match"

    def describe(self) -> str:
        lines = [f"{self.path}: hunk {self.header}: {self.reason}"]
        if self.expected or self.found:
            lines += ["    expected:"] + [f"      {line.rstrip(chr(10))}" for line in self.expected[:8]]
            lines += ["    found:"] + [f"      {line.rstrip(chr(10))}" for line in self.found[:8]]
        return "\n".join(lines)


class PlanFailed(PatchguardError):
    """Some hunks do not apply; nothing was written. ``failures`` lists every one."""

    def __init__(self, failures: Sequence[HunkFailure], what: str) -> None:
        text = "\n".join(f.describe() for f in failures)
        super().__init__(
            f"{what}: {len(failures)} hunk{'s' if len(failures) != 1 else ''} "
            f"do not apply; nothing was written\n{text}"
        )
        self.failures = tuple(failures)


@dataclass(frozen=True, slots=True)
class FilePlan:
    """What a set does to one file: ``before``/``after`` bytes (``None``: absent), and hunk offsets."""

    path: str
    before: bytes | None
    after: bytes | None
    offsets: tuple[int, ...] = ()


def _hunk_sides(hunk: Iterable[object]) -> tuple[list[str], list[str]]:
    """(source lines, target lines) of a hunk, with "no newline at end of file" applied."""
    src: list[str] = []
    dst: list[str] = []
    last: str | None = None
    for line in hunk:
        kind = getattr(line, "line_type", " ")
        value = getattr(line, "value", "")
        if kind == "\\":
            if last in (" ", "-") and src and src[-1].endswith("\n"):
                src[-1] = src[-1][:-1]
            if last in (" ", "+") and dst and dst[-1].endswith("\n"):
                dst[-1] = dst[-1][:-1]
            continue
        if kind in (" ", "-"):
            src.append(value)
        if kind in (" ", "+"):
            dst.append(value)
        last = kind
    return src, dst


def _apply_hunks(
    path: str, lines: list[str], fp: FilePatch, reverse: bool, failures: list[HunkFailure]
) -> tuple[list[str], list[int]]:
    """Apply one file's hunks to ``lines`` (exact context; offsets allowed, searched nearest first)."""
    out: list[str] = []
    pos = 0  # index in `lines` up to which everything is copied
    drift = 0  # offset carried from earlier hunks
    offsets: list[int] = []
    for hunk in fp.patched:  # type: ignore[attr-defined]
        src, dst = _hunk_sides(hunk)
        if reverse:
            src, dst = dst, src
        first = hunk.target_start if reverse else hunk.source_start
        length = hunk.target_length if reverse else hunk.source_length
        # A range of length 0 names the line *after which* the hunk goes ("@@ -5,0 +6,2 @@").
        start = first if length == 0 else first - 1
        header = f"@@ -{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length} @@"
        at = _find(lines, src, max(start + drift, pos), pos)
        if at is None:
            found = tuple(lines[max(start + drift, 0) : max(start + drift, 0) + len(src)])
            failures.append(HunkFailure(path, header, tuple(src), found))
            continue
        offsets.append(at - start)
        drift = at - start
        out.extend(lines[pos:at])
        out.extend(dst)
        pos = at + len(src)
    out.extend(lines[pos:])
    return out, offsets


def _find(lines: Sequence[str], src: Sequence[str], guess: int, floor: int) -> int | None:
    """Where ``src`` occurs exactly in ``lines`` at or after ``floor``, nearest to ``guess`` first."""
    n = len(src)
    limit = len(lines) - n
    if limit < floor:
        return None
    guess = min(max(guess, floor), limit)
    for delta in range(0, max(guess - floor, limit - guess) + 1):
        for at in (guess - delta, guess + delta) if delta else (guess,):
            if floor <= at <= limit and list(lines[at : at + n]) == list(src):
                return at
    return None


def plan_set(ps: PatchSet, read: Callable[[str], bytes | None], *, reverse: bool = False) -> list[FilePlan]:
    """What applying (or reverting) ``ps`` does to each file, given ``read(relpath) -> bytes | None``.

    Files touched by several diffs are patched in order, in memory. Raises :class:`PlanFailed` listing every
    hunk that does not apply; raises nothing and writes nothing otherwise.
    """
    return plan_patches(ps.name, ps.patches, read, reverse=reverse)


def plan_patches(
    name: str, patches: Sequence[FilePatch], read: Callable[[str], bytes | None], *, reverse: bool = False
) -> list[FilePlan]:
    """:func:`plan_set` for any sequence of file patches (one file's part of a set, say)."""
    state: dict[str, bytes | None] = {}
    original: dict[str, bytes | None] = {}
    offsets: dict[str, list[int]] = {}
    failures: list[HunkFailure] = []
    order = list(reversed(patches)) if reverse else list(patches)
    for fp in order:
        if fp.path not in state:
            state[fp.path] = original[fp.path] = read(fp.path)
        current = state[fp.path]
        creates, deletes = (fp.deletes, fp.creates) if reverse else (fp.creates, fp.deletes)
        if creates and current is not None:
            failures.append(HunkFailure(fp.path, "(new file)", (), (), "the file to create already exists"))
            continue
        if not creates and current is None:
            failures.append(HunkFailure(fp.path, "(whole file)", (), (), "the file to patch does not exist"))
            continue
        text = (current or b"").decode("utf-8", "surrogateescape")
        lines = split_lines(text)
        n_before = len(failures)
        new_lines, offs = _apply_hunks(fp.path, lines, fp, reverse, failures)
        if len(failures) > n_before:
            continue
        offsets.setdefault(fp.path, []).extend(offs)
        if deletes:
            if new_lines:
                failures.append(
                    HunkFailure(
                        fp.path,
                        "(deleted file)",
                        (),
                        tuple(new_lines[:8]),
                        "the file to delete has more content than the diff removes",
                    )
                )
                continue
            state[fp.path] = None
        else:
            state[fp.path] = "".join(new_lines).encode("utf-8", "surrogateescape")
    if failures:
        raise PlanFailed(failures, f"{'reverting' if reverse else 'applying'} {name}")
    return [FilePlan(p, original[p], state[p], tuple(offsets.get(p, ()))) for p in state]
