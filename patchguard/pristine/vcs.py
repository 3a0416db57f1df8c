"""Editable and VCS installs (PEP 610 ``direct_url.json``).

An editable install's code is not in site-packages: it is a source tree, usually a git checkout. Its
pristine state is the commit (``HEAD``, or ``--against REV``), and the changes are what git sees: edited
tracked files (``modified``), deleted ones (``missing``), untracked files that are not ignored
(``unexpected``). A non-editable install from a VCS URL is verified against its RECORD like any other, but
there is no wheel of that build to diff against: that is said once, with the commit id.

gitpython is imported only when an editable install is found.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    import git

from ..errors import PatchguardError
from ..integrity.inventory import dist_finding
from ..integrity.records import InstalledDistribution
from ..model import Finding, Kind, Severity

__all__ = ["DirectUrl", "EditableSource", "direct_url", "editable_source"]


@dataclass(frozen=True, slots=True)
class DirectUrl:
    """What ``direct_url.json`` says: the URL, and whether it is an editable dir or a VCS checkout."""

    url: str
    editable: bool = False
    vcs: str | None = None
    commit_id: str | None = None

    @property
    def local_dir(self) -> str | None:
        parsed = urlparse(self.url)
        return unquote(parsed.path) if parsed.scheme == "file" else None


def direct_url(dist: InstalledDistribution) -> DirectUrl | None:
    """The parsed ``direct_url.json`` of ``dist``, or ``None`` (installed from an index, or malformed)."""
    path = os.path.join(dist.metadata_dir, "direct_url.json")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
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
    return DirectUrl(doc["url"], editable=editable)


@dataclass
class EditableSource:
    """A git checkout an editable distribution runs from, compared with a revision."""

    dist: InstalledDistribution
    root: str
    rev: str

    def changes(self) -> list[tuple[str, str]]:
        """(status, path relative to the repository root): ``M`` modified, ``D`` deleted, ``?`` untracked."""
        import git

        repo = safe_repo(self.root)
        out: list[tuple[str, str]] = []
        try:
            for d in repo.commit(self.rev).diff(None):  # the working tree against the revision
                if d.deleted_file:
                    out.append(("D", d.a_path or ""))
                elif d.new_file:
                    out.append(("A", d.b_path or ""))
                else:
                    out.append(("M", d.b_path or d.a_path or ""))
        except (git.BadName, ValueError) as exc:
            raise PatchguardError(
                f"unknown revision {self.rev!r} ({exc})",
                path=self.root,
                hint="pass an existing --against REV",
            ) from None
        out += [("?", p) for p in repo.untracked_files]
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


def editable_source(dist: InstalledDistribution, url: DirectUrl, rev: str = "HEAD") -> EditableSource | str:
    """The git checkout of an editable install, or why it cannot be compared."""
    src = url.local_dir
    if not src or not os.path.isdir(src):
        return f"its source directory {src or url.url} does not exist"
    import git

    try:
        repo = safe_repo(src, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return f"its source directory {src} is not a git checkout"
    root = repo.working_tree_dir
    if root is None:
        return f"{src} is a bare repository"
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
            findings.append(dist_finding(dist, Kind.UNVERIFIABLE, Severity.INFO, "vcs-install", meta, msg))
            continue
        if not url.editable:
            continue
        source = editable_source(dist, url, against)
        if isinstance(source, str):
            msg = f"editable install: {source}"
            findings.append(
                dist_finding(dist, Kind.UNVERIFIABLE, Severity.INFO, "editable-unverifiable", meta, msg)
            )
            continue
        for status, rel in source.changes():
            path = os.path.join(source.root, rel)
            py = rel.endswith(".py")
            code = Severity.MODERATE if py else Severity.MINOR
            if status == "M":
                rule, msg = ("modified-python" if py else "modified-data"), f"differs from {against}"
                findings.append(
                    dist_finding(dist, Kind.MODIFIED, code, rule, path, f"editable install: {msg}")
                )
            elif status == "D":
                msg = f"editable install: deleted since {against}"
                findings.append(
                    dist_finding(dist, Kind.MISSING, Severity.MODERATE, "missing-file", path, msg)
                )
            else:
                rule = "unexpected-python" if py else "unexpected-file"
                msg = f"editable install: not in {against}" + (" (untracked)" if status == "?" else "")
                findings.append(dist_finding(dist, Kind.UNEXPECTED, code, rule, path, msg))
    return findings
