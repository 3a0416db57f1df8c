"""Editable and VCS installs (PEP 610 ``direct_url.json``).

An editable install's code is not in site-packages: it is a source tree, usually a git checkout. Its
pristine state is the commit (``HEAD``, or ``--against REV``), and the changes are what git sees: edited
tracked files (``modified``), deleted ones (``missing``), untracked files that are not ignored
(``unexpected``). A non-editable install from a VCS URL is verified against its RECORD like any other, but
there is no wheel of that build to diff against: that is said once, with the commit id.

gitpython is imported only when an editable install is found.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    import git

from .._fs import parse_json, read_input, read_regular
from ..errors import PatchguardError
from ..integrity.inventory import dist_finding
from ..integrity.records import InstalledDistribution
from ..model import Finding, Kind, RuleId, Severity

__all__ = ["DirectUrl", "EditableSource", "NoCheckout", "direct_url", "editable_source"]


@dataclass(frozen=True, slots=True)
class DirectUrl:
    """What ``direct_url.json`` says: the URL, and whether it is an editable dir or a VCS checkout."""

    url: str
    editable: bool = False
    vcs: str | None = None
    commit_id: str | None = None
    archive: bool = False  # ``archive_info``: a wheel or sdist file, at a URL or on disk
    sha256: str | None = None  # hex: the archive's hash pip recorded (``archive_info.hashes``/``hash``)

    @property
    def local_dir(self) -> str | None:
        parsed = urlparse(self.url)
        return unquote(parsed.path) if parsed.scheme == "file" else None


def direct_url(dist: InstalledDistribution) -> DirectUrl | None:
    """The parsed ``direct_url.json`` of ``dist``, or ``None`` (installed from an index, or malformed)."""
    path = os.path.join(dist.metadata_dir, "direct_url.json")
    try:
        doc = parse_json(read_input(path, limit=1 << 20))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("url"), str):
        return None
    dir_info, vcs_info = doc.get("dir_info"), doc.get("vcs_info")
    if isinstance(vcs_info, dict):
        return DirectUrl(
            doc["url"], vcs=str(vcs_info.get("vcs", "")), commit_id=str(vcs_info.get("commit_id", ""))
        )
    editable = isinstance(dir_info, dict) and dir_info.get("editable") is True
    archive = doc.get("archive_info")
    return DirectUrl(
        doc["url"],
        editable=editable,
        archive=isinstance(archive, dict),
        sha256=_archive_sha256(archive) if isinstance(archive, dict) else None,
    )


def _archive_sha256(info: dict[str, object]) -> str | None:
    """The sha256 (hex) ``archive_info`` records: ``hashes: {"sha256": …}``, else the older ``hash``."""
    hashes = info.get("hashes")
    value = hashes.get("sha256") if isinstance(hashes, dict) else None
    if not isinstance(value, str):
        old = info.get("hash")
        algo, _, value = old.partition("=") if isinstance(old, str) else ("", "", "")
        value = value if algo == "sha256" else None
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value.lower()):
        return value.lower()
    return None


@dataclass
class EditableSource:
    """A git checkout an editable distribution runs from, compared with a revision."""

    dist: InstalledDistribution
    root: str
    rev: str

    def changes(self) -> list[tuple[str, str]]:
        """(status, path relative to the repository root): ``M`` modified, ``D`` deleted, ``?`` untracked.

        Not ``git diff`` / ``git status``: to hash a work-tree file git runs the clean filter and eol
        conversion the checkout's ``.gitattributes`` and config name — a scanned checkout's own program.
        The revision's tree is listed (``ls-tree``: objects only) and each work-tree file's raw bytes are
        hashed here as a git blob; untracked files come from ``ls-files --others``, which hashes nothing.
        """
        import git

        repo = safe_repo(self.root)
        try:
            listing = repo.git.ls_tree("-r", "-z", "--full-tree", f"{self.rev}^{{tree}}")
            algo = repo.git.rev_parse("--show-object-format") or "sha1"
        except git.GitCommandError as exc:
            raise PatchguardError(
                f"unknown revision {self.rev!r} ({(exc.stderr or '').strip() or exc.status})",
                path=self.root,
                hint="pass an existing --against REV",
            ) from None
        out: list[tuple[str, str]] = []
        for row in filter(None, listing.split("\0")):
            meta, _, rel = row.partition("\t")
            mode, kind, oid = meta.split()
            if kind != "blob":
                continue  # a submodule: its own checkout
            status = _worktree_status(os.path.join(self.root, rel), mode, oid, algo)
            if status is not None:
                out.append((status, rel))
        untracked = repo.git.ls_files("--others", "--exclude-standard", "-z")
        out += [("?", p) for p in filter(None, untracked.split("\0"))]
        return sorted(set(out), key=lambda t: t[1])

    def pristine(self, relpath: str) -> bytes | None:
        """The file's bytes at the revision, ``None`` if it did not exist there."""

        repo = safe_repo(self.root)
        try:
            blob = repo.commit(self.rev).tree / relpath
        except KeyError:
            return None
        data: bytes = blob.data_stream.read()
        return data


def _worktree_status(path: str, mode: str, oid: str, algo: str) -> str | None:
    """``D`` when the tracked file is gone, ``M`` when its raw bytes (a symlink's target) are not the
    blob ``oid``, ``None`` when they are."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "D"
    except OSError:
        return "M"
    if mode == "120000":
        if not stat.S_ISLNK(st.st_mode):
            return "M"
        data = os.fsencode(os.readlink(path))
    elif not stat.S_ISREG(st.st_mode):
        return "M"  # a FIFO, a device, a directory where a file was: never opened
    else:
        try:
            data = read_regular(path)
        except OSError:
            return "M"
    digest = hashlib.new(algo, b"blob %d\0" % len(data))
    digest.update(data)
    return None if digest.hexdigest() == oid else "M"


@dataclass(frozen=True, slots=True)
class NoCheckout:
    """Why an editable install has no git checkout to compare with: not an error, a finding to report."""

    reason: str


def editable_source(
    dist: InstalledDistribution, url: DirectUrl, rev: str = "HEAD"
) -> EditableSource | NoCheckout:
    """The git checkout of an editable install, or why it cannot be compared."""
    src = url.local_dir
    if not src or not os.path.isdir(src):
        return NoCheckout(f"its source directory {src or url.url} does not exist")
    import git

    try:
        repo = safe_repo(src, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return NoCheckout(f"its source directory {src} is not a git checkout")
    root = repo.working_tree_dir
    if root is None:
        return NoCheckout(f"{src} is a bare repository")
    return EditableSource(dist, str(root), rev)


# A scanned checkout's own git config must not run anything (core.fsmonitor, hooks): overridden per call.
_SAFE_GIT = {
    "GIT_CONFIG_COUNT": "3",
    "GIT_CONFIG_KEY_0": "core.fsmonitor",
    "GIT_CONFIG_VALUE_0": "false",
    "GIT_CONFIG_KEY_1": "core.hooksPath",
    "GIT_CONFIG_VALUE_1": os.devnull,
    "GIT_CONFIG_KEY_2": "core.untrackedCache",
    "GIT_CONFIG_VALUE_2": "false",
}


def safe_repo(path: str, search_parent_directories: bool = False) -> git.Repo:
    """A gitpython Repo whose git commands ignore the checkout's command-running settings."""
    import git

    repo = git.Repo(path, search_parent_directories=search_parent_directories)
    repo.git.update_environment(**_SAFE_GIT)
    return repo


def vcs_findings(dists: Sequence[InstalledDistribution], against: str = "HEAD") -> list[Finding]:
    """Findings for editable installs (their git changes) and VCS installs (no wheel to diff against)."""
    findings: list[Finding] = []
    for dist in dists:
        if not any(e.path.endswith(".dist-info/direct_url.json") for e in dist.entries):
            continue
        url = direct_url(dist)
        if url is None:
            continue
        meta = os.path.basename(dist.metadata_dir)
        if url.vcs:
            msg = (
                f"installed from {url.vcs}+{url.url}@{url.commit_id}: verified against its RECORD, "
                "but no wheel of this build exists to diff against (pass one with --wheelhouse)"
            )
            findings.append(
                dist_finding(dist, Kind.UNVERIFIABLE, Severity.INFO, RuleId.VCS_INSTALL, meta, msg)
            )
            continue
        if not url.editable:
            continue
        source = editable_source(dist, url, against)
        if isinstance(source, NoCheckout):
            msg = f"editable install: {source.reason}"
            findings.append(
                dist_finding(dist, Kind.UNVERIFIABLE, Severity.INFO, RuleId.EDITABLE_UNVERIFIABLE, meta, msg)
            )
            continue
        for status, rel in source.changes():
            path = os.path.join(source.root, rel)
            py = rel.endswith(".py")
            code = Severity.MODERATE if py else Severity.MINOR
            if status == "M":
                rule, msg = (
                    (RuleId.MODIFIED_PYTHON if py else RuleId.MODIFIED_DATA),
                    f"differs from {against}",
                )
                findings.append(
                    dist_finding(dist, Kind.MODIFIED, code, rule, path, f"editable install: {msg}")
                )
            elif status == "D":
                msg = f"editable install: deleted since {against}"
                findings.append(
                    dist_finding(dist, Kind.MISSING, Severity.MODERATE, RuleId.MISSING_FILE, path, msg)
                )
            else:
                rule = RuleId.UNEXPECTED_PYTHON if py else RuleId.UNEXPECTED_FILE
                msg = f"editable install: not in {against}" + (" (untracked)" if status == "?" else "")
                findings.append(dist_finding(dist, Kind.UNEXPECTED, code, rule, path, msg))
    return findings
