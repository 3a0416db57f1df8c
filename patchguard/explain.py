"""Explain changes against pristine sources: diffs, and RECORD verification against the wheel.

A scan says *that* a file changed; this module says *how*, by finding each distribution's pristine
source (:mod:`patchguard.pristine`, or the git checkout of an editable install) and diffing against it.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .analysis.reach import ReachContext
from .diffs import FileDiff
from .errors import PatchguardError
from .pristine import (
    READ_ERRORS,
    NoPristineSource,
    Pristine,
    Sources,
    candidates,
    find_pristine,
)
from .records import INSTALLER_FILES, InstalledDistribution, RecordEntry, matches, parse_record
from .report import Finding, Kind, Severity
from .scanner import Scanned, run
from .vcs import EditableSource, direct_url, editable_source

__all__ = ["ChangedFile", "Explainer", "changed_files", "diff", "record_findings"]

# Finding kinds that are about one file's bytes, in diff terms.
_FILE_KINDS = {
    Kind.MODIFIED: "modified",
    Kind.MISSING: "deleted",
    Kind.UNEXPECTED: "added",
    Kind.STARTUP_HOOK: "added",
}


@dataclass(frozen=True, slots=True)
class ChangedFile:
    """A file a scan found changed, located: its finding, distribution, RECORD row and absolute path."""

    finding: Finding
    dist: InstalledDistribution | None
    entry: RecordEntry | None
    path: str

    @property
    def status(self) -> str:
        return _FILE_KINDS[self.finding.kind]


def _wanted(path: str, globs: Sequence[str]) -> bool:
    return not globs or any(fnmatch.fnmatchcase(path, g) for g in globs)


def changed_files(scanned: Scanned, globs: Sequence[str] = ()) -> list[ChangedFile]:
    """Every modified, missing or unexpected file of a scan whose path matches one of ``globs``.

    An unexpected directory stands for every file in it.
    """
    out: list[ChangedFile] = []
    for f in scanned.report.findings:
        if f.kind not in _FILE_KINDS:
            continue
        dist, entry, path = scanned.locate(f)
        if f.path.endswith("/") and os.path.isdir(path):
            for dirpath, _dirs, files in os.walk(path):
                for name in sorted(files):
                    full = os.path.join(dirpath, name)
                    shown = scanned.display(full)
                    if _wanted(shown, globs):
                        sub = Finding(f.kind, f.severity, f.rule, shown, f.message, f.distribution, f.version)
                        out.append(ChangedFile(sub, dist, None, full))
            continue
        if os.path.islink(path):
            continue  # never read through a link: it may point anywhere (the scan reports it)
        if _wanted(f.path, globs):
            out.append(ChangedFile(f, dist, entry, path))
    return out


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PatchguardError(f"cannot read ({exc.strerror or exc})", path=path) from None


@dataclass
class Explainer:
    """Finds and remembers the pristine source of each distribution, once."""

    sources: Sources
    against: str = "HEAD"
    _pristine: dict[str, Pristine | NoPristineSource] = field(default_factory=dict)
    _editable: dict[str, EditableSource | None] = field(default_factory=dict)

    def editable(self, dist: InstalledDistribution) -> EditableSource | None:
        if dist.metadata_dir not in self._editable:
            url = direct_url(dist)
            src = editable_source(dist, url, self.against) if url is not None and url.editable else None
            self._editable[dist.metadata_dir] = src if isinstance(src, EditableSource) else None
        return self._editable[dist.metadata_dir]

    def pristine(self, dist: InstalledDistribution) -> Pristine:
        """The proven pristine source of ``dist``; raises :class:`NoPristineSource` (once per dist)."""
        got = self._pristine.get(dist.metadata_dir)
        if got is None:
            try:
                got = find_pristine(dist, self.sources)
            except NoPristineSource as exc:
                got = exc
            self._pristine[dist.metadata_dir] = got
        if isinstance(got, NoPristineSource):
            raise got
        return got

    def pristine_bytes(self, change: ChangedFile) -> bytes | None:
        """What the file was before it changed (``None``: it did not exist)."""
        if change.status == "added" or change.dist is None:
            return None
        src = self.editable(change.dist)
        if src is not None:
            return src.pristine(os.path.relpath(change.path, src.root))
        if change.entry is None:
            return None
        store = self.sources.store.for_entry(change.entry)
        if store is not None:  # content-addressed by the RECORD hash: no wheel needed
            return store
        return self.pristine(change.dist).bytes_for(change.entry)

    def file_diff(self, change: ChangedFile) -> FileDiff:
        old = self.pristine_bytes(change)
        new = None if change.status == "deleted" else _read(change.path)
        shown = change.finding.path
        if change.dist is not None and change.entry is not None and os.path.isabs(shown):
            shown = change.entry.path  # a script: its RECORD path, relative to site-packages
        src = self.editable(change.dist) if change.dist is not None else None
        if src is not None:
            shown = os.path.relpath(change.path, src.root).replace(os.sep, "/")
        mode = "100755" if os.access(change.path, os.X_OK) and change.status != "deleted" else "100644"
        return FileDiff(shown, old, new, mode)


def diff(
    distributions: Iterable[str] | None = None,
    *,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    paths: Sequence[str] = (),
    wheelhouse: Sequence[str] = (),
    offline: bool = False,
    against: str = "HEAD",
) -> list[FileDiff]:
    """The diff of every changed file against its pristine source.

    >>> import patchguard
    >>> for d in patchguard.diff(["vllm"], paths=["*/deepseek_v2.py"]):  # doctest: +SKIP
    ...     print(d.text())

    Raises :class:`~patchguard.pristine.NoPristineSource` (listing where it looked) when a changed file's
    distribution has no pristine source.
    """
    scanned = run(distributions, site_packages=site_packages, python=python, against=against, paths=paths)
    explainer = Explainer(Sources.default(wheelhouse, offline), against)
    return [explainer.file_diff(c) for c in changed_files(scanned, paths)]


def record_findings(scanned: Scanned, explainer: Explainer) -> list[Finding]:
    """``--verify-record``: the installed RECORD itself compared with the pristine wheel's.

    Catches a file edited *and* its RECORD row rewritten to match. The wheel is accepted as the same
    release when its ``METADATA`` is byte-identical to the installed one (the normal same-build proof
    cannot be used here: a tampered RECORD fails it by design).
    """
    out: list[Finding] = []
    sources = explainer.sources
    for dist in scanned.selected:
        if not dist.has_record or explainer.editable(dist) is not None:
            continue
        shown_record = scanned.display(os.path.join(dist.metadata_dir, "RECORD"))
        try:
            wheel = _same_release(dist, sources)
        except NoPristineSource as exc:
            first = str(exc).splitlines()[0]
            out.append(
                Finding(
                    Kind.UNVERIFIABLE,
                    Severity.INFO,
                    "record-unverified",
                    shown_record,
                    f"cannot verify RECORD: {first}",
                    dist.name,
                    dist.version,
                )
            )
            continue
        installed = {e.path: e for e in dist.entries}
        for path, theirs in wheel.wheel_record.items():
            ours = installed.get(path)
            if ours is None or theirs.digest is None or path.startswith("../"):
                continue
            if ours.algorithm == theirs.algorithm and ours.digest == theirs.digest:
                continue
            actual = _read(dist.resolve(path))
            shown = scanned.display(dist.resolve(path))
            if actual is not None and matches(ours, actual) and not matches(theirs, actual):
                msg = (
                    f"the file and its RECORD row were both changed: the wheel has {theirs.algorithm}="
                    f"{theirs.digest}, RECORD was rewritten to {ours.algorithm}={ours.digest}"
                )
                out.append(
                    Finding(
                        Kind.MODIFIED, Severity.HIGH, "record-tampered", shown, msg, dist.name, dist.version
                    )
                )
            else:
                msg = f"RECORD row differs from the wheel's ({theirs.algorithm}={theirs.digest})"
                out.append(
                    Finding(
                        Kind.RECORD_INVALID,
                        Severity.MODERATE,
                        "record-differs",
                        shown_record,
                        msg,
                        dist.name,
                        dist.version,
                    )
                )
        meta = os.path.basename(dist.metadata_dir)
        for path in installed:
            if path in wheel.wheel_record or path.startswith("../") or path.endswith(".pyc"):
                continue
            if path.startswith(meta + "/") and path.split("/", 1)[1] in INSTALLER_FILES:
                continue
            shown = scanned.display(dist.resolve(path))
            out.append(
                Finding(
                    Kind.UNEXPECTED,
                    Severity.HIGH,
                    "record-added",
                    shown,
                    "listed in the installed RECORD but not in the wheel: added along with its RECORD row",
                    dist.name,
                    dist.version,
                )
            )
    return out


def _same_release(dist: InstalledDistribution, sources: Sources) -> Pristine:
    tried: list[str] = []
    meta = os.path.basename(dist.metadata_dir)
    installed_metadata = _read(os.path.join(dist.metadata_dir, "METADATA"))
    for cand in candidates(dist, sources, tried):
        try:
            entries, _ = parse_record(cand.record_text())
            if cand.read(f"{meta}/METADATA") != installed_metadata:
                tried.append(f"rejected {cand.location}: METADATA differs")
                cand.close()
                continue
        except READ_ERRORS as exc:
            tried.append(f"rejected {cand.location}: {exc.__class__.__name__}: {exc}")
            cand.close()
            continue
        return Pristine.of(dist, cand, entries, sources.store)
    raise NoPristineSource(
        f"no wheel of {dist.name} {dist.version} found; looked in: " + ("; ".join(tried) or "nowhere"),
        path=dist.metadata_dir,
    )


def judge_findings(scanned: Scanned, explainer: Explainer, reach: ReachContext) -> list[Finding]:
    """The scan's findings with every modified or unexpected ``.py`` file judged by code analysis.

    A modified file's bare ``modified`` finding is replaced by one finding per changed region and rule,
    keeping its patch-set attribution; without a pristine source the whole file is judged (``baseline:
    none``). Each code finding gets the reach of its file, ``conditional`` when gated, ``dormant`` when dead.
    """
    from dataclasses import replace

    from .analysis import CodeChange, analyse

    out: list[Finding] = []
    for f in scanned.report.findings:
        partial = "" if f.patch_set_exact else f" ({f.patch_set} plus other edits)"
        if f.kind not in (Kind.MODIFIED, Kind.UNEXPECTED) or not f.path.endswith(".py") or f.line is not None:
            out.append(f)
            continue
        dist, entry, path = scanned.locate(f)
        after = _read(path)
        if after is None:
            out.append(f)
            continue
        before: bytes | None = None
        if f.kind is Kind.MODIFIED and dist is not None:
            try:
                before = explainer.pristine_bytes(ChangedFile(f, dist, entry, path))
            except PatchguardError:
                before = None
        code = analyse(CodeChange(f.path, before, after, f.distribution, f.version))
        if f.kind is Kind.UNEXPECTED:
            # The file itself stays an `unexpected` finding; analysis adds what its code does.
            out.append(f)
            code = [c for c in code if c.kind is Kind.INJECTED_CODE]
        if not code:
            if f.kind is not Kind.UNEXPECTED:
                out.append(f)
            continue
        file_reach, evidence = reach.reach(path)
        for c in code:
            gate_kind = (c.gate or {}).get("kind")
            r = (
                "dormant"
                if gate_kind == "dead"
                else ("conditional" if gate_kind and file_reach == "active" else file_reach)
            )
            out.append(
                replace(
                    c,
                    reach=r,
                    evidence=tuple(evidence) + c.evidence,
                    patch_set=f.patch_set,
                    patch_set_exact=f.patch_set_exact,
                    message=c.message + partial,
                )
            )
    return out
