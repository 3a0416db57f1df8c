"""Files no RECORD lists: unexpected files in package directories, and startup hooks at the top.

Two places are searched:

* every package directory a distribution installed into (``vllm/``, ``torch/``): any file in it that no
  RECORD lists is unexpected — except ``__pycache__/*.pyc`` whose source *is* listed (the interpreter wrote
  it). An orphan ``.pyc`` whose source is not listed is reported;
* the top of each site-packages directory: unowned ``.pth`` files (an ``import`` line in one runs at every
  interpreter start), ``sitecustomize.py`` / ``usercustomize.py`` (imported at every start), and every other
  unowned file or directory.

Only names are looked at here; no file of the environment is imported or executed. ``.pth`` files are read
as text to find their ``import`` lines.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from .._fs import STATE_DIR, read_regular, source_of_bytecode
from ..model import Finding, Kind, RuleId, Severity
from .cache import DirListing, is_racy

__all__ = ["Ownership", "package_findings", "pth_import_lines", "toplevel_findings"]

_EXTENSION_SUFFIXES = (".so", ".pyd", ".dylib")
_STARTUP_MODULES = ("sitecustomize.py", "usercustomize.py")
# CPython ships this file in every site-packages directory it creates; no distribution owns it.
_CPYTHON_README = "This directory exists so that 3rd party packages can be installed"


@dataclass(frozen=True, slots=True)
class Ownership:
    """What the installed distributions of one site directory claim.

    ``files``: absolute paths listed in any RECORD. ``claimed_names``: top-level names claimed without a
    file list (``top_level.txt`` of a distribution without RECORD, metadata directories): left alone.
    """

    site_dir: str
    files: frozenset[str]
    claimed_names: frozenset[str]


def is_extension(name: str) -> bool:
    """``.so``/``.pyd``/``.dylib`` files, including versioned ones (``libnccl.so.2``)."""
    return name.endswith(_EXTENSION_SUFFIXES) or ".so." in name


def pth_import_lines(path: str) -> list[str]:
    """Lines of a ``.pth`` file that ``site`` executes (those starting with ``import`` + space or tab)."""
    try:
        data = read_regular(path, 1 << 20)
    except OSError:
        return []
    text = data.decode("utf-8", "replace")
    # site reads .pth files line by line with universal newlines (\n, \r\n, \r): split the same way.
    lines = io.StringIO(text, newline=None).readlines()
    return [line.strip() for line in lines if line.startswith(("import ", "import\t"))]


def _rel(site_dir: str, path: str) -> str:
    return os.path.relpath(path, site_dir).replace(os.sep, "/")


def _walk_files(top: str) -> Iterator[str]:
    """Every non-directory entry below ``top``; symlinked directories are not followed."""
    return _unowned_below(top, frozenset(), None, 0)


_UNEXPECTED: dict[str, tuple[Severity, RuleId, str]] = {
    "orphan": (
        Severity.MINOR,
        RuleId.ORPHAN_BYTECODE,
        "compiled file whose source is not installed (left over; Python never imports it)",
    ),
    "bytecode": (
        Severity.MODERATE,
        RuleId.UNEXPECTED_BYTECODE,
        "sourceless .pyc no distribution installed: importable code with no source to review",
    ),
    "python": (Severity.MODERATE, RuleId.UNEXPECTED_PYTHON, "Python file no distribution installed"),
    "extension": (Severity.HIGH, RuleId.UNEXPECTED_EXTENSION, "compiled extension no distribution installed"),
    "file": (Severity.MINOR, RuleId.UNEXPECTED_FILE, "file no distribution installed"),
}
"""What an unexpected file is, by its kind: severity, rule and message of its finding."""


def _unexpected_file(site_dir: str, path: str, owned: frozenset[str]) -> Finding | None:
    name = os.path.basename(path)
    what = "file"
    if name.endswith(".pyc"):
        source = source_of_bytecode(path)
        if source is not None and (source in owned or os.path.exists(source)):
            return None  # compiled from a listed source, or from an unexpected .py reported on its own
        what = "orphan" if source is not None else "bytecode"
    elif name.endswith(".py"):
        what = "python"
    elif is_extension(name):
        what = "extension"
    severity, rule, message = _UNEXPECTED[what]
    return Finding(
        kind=Kind.UNEXPECTED, severity=severity, rule=rule, path=_rel(site_dir, path), message=message
    )


# A directory listing is cached with its stamp (mtime_ns, ctime_ns, inode, device): creating, deleting or
# renaming an entry changes the directory's mtime, so an unchanged stamp means an unchanged listing.
# Editing a file does not touch its directory, but owned files are verified one by one anyway: only the
# *set of names* is cached here.


def _unowned_below(
    top: str, owned: frozenset[str], listings: dict[str, DirListing] | None, now_ns: int
) -> Iterator[str]:
    """Paths of files below ``top`` that no RECORD lists (and that are not bytecode of a listed source).

    With ``listings`` (valid only for this exact set of owned files), a directory whose stamp did not
    change is not listed again: a warm re-scan costs one ``stat`` per directory instead of a ``scandir``.
    """
    stack = [top]
    lstat = os.lstat
    while stack:
        d = stack.pop()
        try:
            st = lstat(d)
        except OSError:
            continue
        stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        seen = listings.get(d) if listings is not None else None
        prefix = d if d.endswith(os.sep) else d + os.sep
        if seen is not None and seen[0] == stamp:
            files, subdirs = seen[1], seen[2]
            stack.extend([prefix + name for name in subdirs])
        else:
            listed = _list_unowned(d, prefix, owned)
            if listed is None:
                continue
            files, subdirs = listed
            stack.extend([prefix + name for name in subdirs])
            if listings is not None:
                if is_racy(stamp[0], stamp[1], now_ns):
                    listings.pop(d, None)
                else:
                    listings[d] = (stamp, files, subdirs)
        for name in files:
            yield prefix + name


def _list_unowned(
    d: str, prefix: str, owned: frozenset[str]
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(the files no RECORD lists, the subdirectories) of directory ``d`` (``prefix``: its path and a
    separator); ``None`` when it cannot be listed."""
    files: list[str] = []
    subdirs: list[str] = []
    try:
        with os.scandir(d) as it:
            for e in it:
                name = e.name
                try:
                    # The entry's type from the directory itself (no system call). A directory is walked
                    # even where a RECORD lists that name as a file (one was swapped in).
                    is_dir = e.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                if is_dir:
                    subdirs.append(name)
                elif (path := prefix + name) not in owned and source_of_bytecode(path) not in owned:
                    files.append(name)
    except OSError:
        return None
    return tuple(files), tuple(subdirs)


def package_findings(
    ownership: Ownership,
    package_dirs: Sequence[str],
    attribute: dict[str, tuple[str, str]],
    listings: dict[str, DirListing] | None = None,
    now_ns: int = 0,
) -> list[Finding]:
    """Unexpected files below ``package_dirs`` (absolute), attributed to the distribution owning the dir.

    ``attribute`` maps a package directory to the (name, version) of the distribution that installed it
    (the first one, for namespace directories several distributions share). ``listings``: see
    :func:`_unowned_below`.
    """
    findings: list[Finding] = []
    for top in package_dirs:
        dist = attribute.get(top)
        for path in _unowned_below(top, ownership.files, listings, now_ns):
            f = _unexpected_file(ownership.site_dir, path, ownership.files)
            if f is not None:
                if dist is not None:
                    f = _with_dist(f, dist)
                findings.append(f)
    return findings


def _with_dist(f: Finding, dist: tuple[str, str]) -> Finding:
    return replace(f, distribution=dist[0], version=dist[1])


def _is_cpython_readme(path: str) -> bool:
    try:
        return read_regular(path, len(_CPYTHON_README)).decode("ascii", "replace") == _CPYTHON_README
    except OSError:
        return False


def _count_files(top: str) -> tuple[int, bool]:
    n = 0
    code = False
    for p in _walk_files(top):
        n += 1
        code = code or p.endswith((".py", ".pyc")) or is_extension(p)
    return n, code


def toplevel_findings(ownership: Ownership, owned_dirs: frozenset[str]) -> list[Finding]:
    """Findings for unowned entries directly in the site directory (startup hooks first of all).

    ``owned_dirs`` names the top-level directories distributions installed files into.
    """
    site = ownership.site_dir
    findings: list[Finding] = []
    try:
        entries = sorted(os.scandir(site), key=lambda e: e.name)
    except OSError:
        return findings
    for e in entries:
        name = e.name
        # Owned files, directories distributions installed into (walked by package_findings), names claimed
        # without a file list, and patchguard's own state are not findings here.
        if e.path in ownership.files or name in owned_dirs or name in ownership.claimed_names:
            continue
        if name != STATE_DIR:
            findings.extend(_toplevel_entry(ownership, e))
    return findings


def _toplevel_entry(ownership: Ownership, e: os.DirEntry[str]) -> list[Finding]:
    """The findings of an unowned entry of the site directory: its bytecode, a ``.pth`` file, a startup
    module, a directory, another file (not CPython's own ``README.txt``)."""
    name = e.name
    try:
        is_dir = e.is_dir(follow_symlinks=False)
    except OSError:
        is_dir = False
    if name == "__pycache__" and is_dir:
        return list(_toplevel_pycache(ownership, e.path))
    if name.endswith(".pth") and not is_dir:
        return [_pth_finding(name, e.path)]
    if name in _STARTUP_MODULES and not is_dir:
        return [_startup_module_finding(name)]
    if name == "README.txt" and _is_cpython_readme(e.path):
        return []
    if is_dir:
        return [_directory_finding(name, e.path)]
    f = _unexpected_file(ownership.site_dir, e.path, ownership.files)
    return [f] if f is not None else []


def _pth_finding(name: str, path: str) -> Finding:
    """The finding of an unowned ``.pth`` file: a startup hook with ``import`` lines, else unexpected."""
    imports = pth_import_lines(path)
    if imports:
        return Finding(
            kind=Kind.STARTUP_HOOK,
            severity=Severity.HIGH,
            rule=RuleId.PTH_IMPORT,
            path=name,
            message=f"executes at every interpreter start: {imports[0][:120]}"
            + (f" (+{len(imports) - 1} more lines)" if len(imports) > 1 else ""),
        )
    return Finding(
        kind=Kind.UNEXPECTED,
        severity=Severity.MODERATE,
        rule=RuleId.PTH_PATH,
        path=name,
        message=".pth file no distribution installed: adds directories to sys.path at every start",
    )


def _startup_module_finding(name: str) -> Finding:
    """The startup-hook finding for an unowned ``sitecustomize.py`` / ``usercustomize.py``."""
    return Finding(
        kind=Kind.STARTUP_HOOK,
        severity=Severity.MODERATE,
        rule=RuleId.SITECUSTOMIZE,
        path=name,
        message=f"{name[:-3]} is imported at every interpreter start and no distribution installed it",
    )


def _directory_finding(name: str, path: str) -> Finding:
    """The finding of an unowned top-level directory: moderate if it holds importable code, minor if it holds
    other files, info when empty (what an uninstall leaves behind: installers remove files, not always the
    directories that held them)."""
    count, code = _count_files(path)
    if not count:
        return Finding(
            kind=Kind.UNEXPECTED,
            severity=Severity.INFO,
            rule=RuleId.UNEXPECTED_DIRECTORY,
            path=name + "/",
            message="empty directory no distribution installed (left by an uninstall?)",
        )
    return Finding(
        kind=Kind.UNEXPECTED,
        severity=Severity.MODERATE if code else Severity.MINOR,
        rule=RuleId.UNEXPECTED_DIRECTORY,
        path=name + "/",
        message=f"directory no distribution installed ({count} file{'s' if count != 1 else ''}"
        + (", importable code)" if code else ")"),
    )


def _toplevel_pycache(ownership: Ownership, pycache: str) -> list[Finding]:
    out: list[Finding] = []
    for p in _walk_files(pycache):
        f = _unexpected_file(ownership.site_dir, p, ownership.files)
        if f is not None:
            out.append(f)
    return out
