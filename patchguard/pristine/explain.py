"""Explain changes against pristine sources: diffs, and RECORD verification against the wheel.

A scan says *that* a file changed; this module says *how*, by finding each distribution's pristine
source (:mod:`.sources`, or the git checkout of an editable install) and diffing against it.
"""

from __future__ import annotations

import errno
import logging
import os
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from .._fs import read_regular
from ..diffs import FileDiff
from ..env import Target
from ..errors import PatchguardError, UsageError
from ..integrity.inventory import (
    FILE_KINDS,
    ChangedFile,
    ProgressCallback,
    Scanned,
    changed_files,
    dist_finding,
    take_inventory,
)
from ..integrity.records import (
    CONDA,
    INSTALLER_FILES,
    InstalledDistribution,
    RecordEntry,
    matches,
    parse_record,
)
from ..model import Finding, Kind, RuleId, Severity
from .sources import (
    NoPristineSource,
    Pristine,
    SourceOptions,
    Sources,
    candidates,
    find_pristine,
    sharing_environments,
    uv_cache_link,
)
from .vcs import EditableSource, direct_url, editable_source, vcs_findings
from .wheels import INSTALLED_LIMIT, READ_ERRORS

__all__ = [
    "INSTALLED_LIMIT",
    "WRONG_RECORD",
    "Explainer",
    "as_shipped",
    "cache_link_note",
    "diff",
    "read_installed",
    "record_findings",
    "record_truths",
    "survey",
    "uv_note",
]


def survey(
    distributions: Iterable[str] | None = None,
    *,
    target: Target,
    against: str = "HEAD",
    paths: Sequence[str] = (),
    use_cache: bool = True,
    cache_dir: str | None = None,
    workers: int | None = None,
    progress: ProgressCallback | None = None,
) -> Scanned:
    """The integrity scan (:func:`~patchguard.integrity.inventory.take_inventory`), with every editable
    install compared with its git checkout at ``against``: what ``diff`` and ``restore`` work on."""
    scanned = take_inventory(
        distributions,
        target=target,
        use_cache=use_cache,
        cache_dir=cache_dir,
        workers=workers,
        progress=progress,
        paths=paths,
    )
    _globs_match(scanned, paths)
    editable = [d for d in scanned.selected if os.path.join(d.metadata_dir, "direct_url.json") in d.paths]
    if editable:
        scanned = _with_vcs(scanned, editable, against)
    if any(c.finding.kind is Kind.MODIFIED for c in scanned.changes):
        scanned = scanned.evolve(changes=[_uv_linked(c) for c in scanned.changes])
    return scanned


def _with_vcs(scanned: Scanned, dists: Sequence[InstalledDistribution], against: str) -> Scanned:
    """The scan with what git says of its editable installs (a file finding's path is absolute)."""
    changes, others = list(scanned.changes), list(scanned.others)
    for dist in dists:
        for f in vcs_findings([dist], against):
            if f.kind in FILE_KINDS:  # a file git says changed: its path is absolute
                changes.append(ChangedFile(f, dist, None, f.path))
            else:
                others.append(f)
    return scanned.evolve(changes, others)


def _globs_match(scanned: Scanned, globs: Sequence[str]) -> None:
    """A ``--path`` glob that matches no file of the distributions (nor any change) is a mistake: exit 2,
    never a silent "nothing to do"."""
    if not globs:
        return
    import fnmatch

    shown = {f.path for f in scanned.report.findings}
    for d in scanned.selected:
        shown.update(scanned.display(p) for p in d.paths)
    for glob in globs:
        if not any(fnmatch.fnmatchcase(p, glob) for p in shown):
            raise UsageError(
                f"--path {glob!r} matches no file",
                hint="paths are relative to site-packages, e.g. --path '*/deepseek_v2.py'",
            )


def _uv_linked(c: ChangedFile) -> ChangedFile:
    """A modified file that is a hard link into uv's or conda's cache says so: the edit is in the cache too
    (and in every environment linked from it), and how to drop it."""
    if c.finding.kind is not Kind.MODIFIED:
        return c
    note = cache_link_note(c)
    if note is None:
        return c
    return c.told(replace(c.finding, message=f"{c.finding.message}; {note}"), note=note)


def cache_link_note(c: ChangedFile) -> str | None:
    """What to tell when the installed file of ``c`` is a hard link of an installer's cache (uv, conda)."""
    if c.entry is None or c.dist is None:
        return None
    if c.dist.baseline == CONDA:
        from .conda import conda_cache_link, conda_note

        twin = conda_cache_link(c.path, c.dist)
        note = conda_note(twin, c.dist) if twin is not None else None
    else:
        twin = uv_cache_link(c.path, c.entry.path, c.dist)
        note = uv_note(c.dist.name, twin) if twin is not None else None
    if note is None or twin is None:
        return None
    return note + _shared_with(c)


def _shared_with(c: ChangedFile) -> str:
    """The other environments holding the same edited inode, and the command that puts each back."""
    assert c.dist is not None
    others, unfound = sharing_environments(c.path, c.dist.site_dir)
    if not others and not unfound:
        return ""
    said = ""
    if others:
        fixes = "; ".join(
            f"patchguard restore {shlex.quote(c.dist.name)} --python "
            f"{shlex.quote(os.path.join(e, 'bin', 'python'))}"
            for e in others
        )
        live = ", ".join(others)
        said = f"; the same edited file (one inode) is live in {live}: put it back there too ({fixes})"
    if unfound:
        said += f"; {unfound} more link{'s' if unfound != 1 else ''} of it found in no environment searched"
    return said


def uv_note(name: str, twin: str) -> str:
    """What to tell about an installed file that shares its inode with uv's cache."""
    return (
        f"a hard link of uv's cache ({twin}): the edit is in uv's cache too, and in every environment uv "
        f"installed it into; run `uv cache clean {name}` after restoring"
    )


def read_installed(path: str) -> bytes | None:
    """A regular file's bytes (``None``: it does not exist); anything else — a FIFO, a device, a file
    over :data:`INSTALLED_LIMIT`, permission denied — is an error naming the file. Never blocks."""
    try:
        data = read_regular(path, limit=INSTALLED_LIMIT + 1)
        if len(data) > INSTALLED_LIMIT:
            raise OSError(errno.EFBIG, f"larger than {INSTALLED_LIMIT >> 20} MiB")
        return data
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PatchguardError(f"cannot read ({exc.strerror or exc})", path=path) from None


_log = logging.getLogger("patchguard")  # -v on the command line shows these


@dataclass
class Explainer:
    """Finds and remembers the pristine source of each distribution, once."""

    sources: Sources
    against: str = "HEAD"
    _pristine: dict[str, Pristine | NoPristineSource] = field(default_factory=dict)
    _editable: dict[str, EditableSource | None] = field(default_factory=dict)
    _dists: dict[str, InstalledDistribution] = field(default_factory=dict)

    def editable(self, dist: InstalledDistribution) -> EditableSource | None:
        if dist.metadata_dir not in self._editable:
            url = direct_url(dist)
            src = editable_source(dist, url, self.against) if url is not None and url.editable else None
            self._editable[dist.metadata_dir] = src if isinstance(src, EditableSource) else None
        return self._editable[dist.metadata_dir]

    def pristine(self, dist: InstalledDistribution) -> Pristine:
        """The proven pristine source of ``dist``; raises :class:`NoPristineSource` (once per dist)."""
        got = self._pristine.get(dist.metadata_dir)
        self._dists[dist.metadata_dir] = dist
        if got is None:
            try:
                got = find_pristine(dist, self.sources)
                _log.info("pristine source of %s %s: %s", dist.name, dist.version, got.description)
            except NoPristineSource as exc:
                _log.info("no pristine source of %s %s", dist.name, dist.version)
                got = exc
            self._pristine[dist.metadata_dir] = got
        if isinstance(got, NoPristineSource):
            raise got
        return got

    def missing(self) -> list[tuple[InstalledDistribution, NoPristineSource]]:
        """The distributions a pristine source was looked for and not found, with why."""
        by_dir = {d: e for d, e in self._pristine.items() if isinstance(e, NoPristineSource)}
        return [(self._dists[d], e) for d, e in by_dir.items()]

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
        problem = None
        try:
            new = None if change.status == "deleted" else read_installed(change.path)
        except PatchguardError as exc:  # one unreadable file does not hide the diff of the others
            new, problem = None, str(exc)
        shown = change.finding.path
        if change.dist is not None and change.entry is not None and os.path.isabs(shown):
            shown = change.entry.path  # a script: its RECORD path, relative to site-packages
        src = self.editable(change.dist) if change.dist is not None else None
        if src is not None:
            shown = os.path.relpath(change.path, src.root).replace(os.sep, "/")
        mode = "100755" if os.access(change.path, os.X_OK) and change.status != "deleted" else "100644"
        return FileDiff(shown, old, new, mode, problem)


def diff(
    distributions: Iterable[str] | None = None,
    *,
    target: Target,
    paths: Sequence[str] = (),
    against: str = "HEAD",
    fetch: SourceOptions | None = None,
    select: Callable[[Finding], bool] | None = None,
) -> list[FileDiff]:
    """The diff of every changed file of ``target`` against its pristine source (of those whose finding
    ``select`` keeps, when given); :func:`patchguard.diff` is its public face."""
    scanned = survey(distributions, target=target, against=against, paths=paths)
    explainer = Explainer((fetch or SourceOptions()).open(scanned.target), against)
    changes = [c for c in changed_files(scanned, paths) if select is None or select(c.finding)]
    diffs = [explainer.file_diff(c) for c in changes]
    # A file whose wheel shipped it as it is (a wrong upstream RECORD row) has nothing to show.
    return [d for d in diffs if d.problem is not None or d.old != d.new]


def as_shipped(change: ChangedFile, explainer: Explainer) -> bool | None:
    """Whether a file that does not match its RECORD row holds exactly what its wheel shipped (the wheel's
    own RECORD is wrong about it); ``None`` when no pristine source tells."""
    if change.dist is None or change.entry is None or explainer.editable(change.dist) is not None:
        return None
    if explainer.sources.store.has_entry(change.entry):
        return False  # its pristine bytes hash to the RECORD row, which the installed file does not
    try:
        before = explainer.pristine_bytes(change)
        now = read_installed(change.path)
    except PatchguardError:
        return None
    return None if before is None or now is None else before == now


WRONG_RECORD = "the wheel's own RECORD is wrong: the file is as shipped"


def record_truths(scanned: Scanned, explainer: Explainer) -> Scanned:
    """The scan with each file that reads as modified but holds its wheel's very bytes (a wrong upstream
    RECORD row, copied by the installer) told as ``record-wrong`` at info — no longer a change — and each
    malformed RECORD hash told as shipped, or as changed, or as undecided — by the pristine wheel."""
    changes: list[ChangedFile] = []
    others = [
        _malformed_row(scanned, explainer, f) if f.rule == RuleId.RECORD_ROW else f for f in scanned.others
    ]
    for c in scanned.changes:
        f = c.finding
        if f.kind is Kind.MODIFIED and f.patch_set is None and as_shipped(c, explainer):
            message = f"{WRONG_RECORD} ({f.message}: the wheel's RECORD row says so too)"
            wrong = replace(f, kind=Kind.RECORD_INVALID, severity=Severity.INFO, rule=RuleId.RECORD_WRONG)
            others.append(replace(wrong, message=message))
        else:
            changes.append(c)
    return scanned.evolve(changes, others)


def _malformed_row(scanned: Scanned, explainer: Explainer, f: Finding) -> Finding:
    """A RECORD row with a hash that cannot be read: the file against the pristine wheel's member."""
    found = _unreadable_hash(scanned, f)
    if found is None:
        return f  # not a hash problem (columns, size, a duplicate row): nothing a wheel settles
    dist, entry = found
    as_file = replace(f, kind=Kind.MODIFIED, path=scanned.display(dist.resolve(entry.path)))
    verdict = as_shipped(ChangedFile(as_file, dist, entry, dist.resolve(entry.path)), explainer)
    if verdict is None:
        return replace(
            f,
            message=f"{f.message}: could be either a RECORD shipped so or an edit (no pristine wheel to "
            "tell; pass --wheelhouse DIR or allow fetching)",
        )
    if verdict:
        return replace(
            f, severity=Severity.INFO, rule=RuleId.RECORD_WRONG, message=f"{WRONG_RECORD} ({f.message})"
        )
    return replace(f, message=f"{f.message}, and the file differs from its wheel's")


def _unreadable_hash(scanned: Scanned, f: Finding) -> tuple[InstalledDistribution, RecordEntry] | None:
    """(the distribution, its RECORD entry) of a finding about a row whose hash could not be read; ``None``
    for any other RECORD problem."""
    dist = next((d for d in scanned.selected if (d.name, d.version) == (f.distribution, f.version)), None)
    problem = next((p for p in dist.problems if p.line == f.line and p.path), None) if dist else None
    entry = next((e for e in dist.entries if problem and e.path == problem.path), None) if dist else None
    if dist is None or problem is None or entry is None or entry.digest is not None:
        return None
    return dist, entry


def record_findings(scanned: Scanned, explainer: Explainer) -> list[Finding]:
    """``--verify-record``: the installed RECORD itself compared with the pristine wheel's.

    Catches a file edited *and* its RECORD row rewritten to match. The wheel is accepted as the same
    release when its ``METADATA`` is byte-identical to the installed one (the normal same-build proof
    cannot be used here: a tampered RECORD fails it by design).
    """
    out: list[Finding] = []
    for dist in scanned.selected:
        if not dist.has_record or explainer.editable(dist) is not None:
            continue
        shown_record = scanned.display(os.path.join(dist.metadata_dir, "RECORD"))
        try:
            wheel = _same_release(dist, explainer.sources)
        except NoPristineSource as exc:
            first = str(exc).splitlines()[0]
            out.append(
                dist_finding(
                    dist,
                    Kind.UNVERIFIABLE,
                    Severity.INFO,
                    RuleId.RECORD_UNVERIFIED,
                    shown_record,
                    f"cannot verify RECORD: {first}",
                )
            )
            continue
        out += _rows_against_wheel(scanned, dist, wheel, shown_record)
        out += _rows_not_in_wheel(scanned, dist, wheel)
    return out


def _rows_against_wheel(
    scanned: Scanned, dist: InstalledDistribution, wheel: Pristine, shown_record: str
) -> list[Finding]:
    """Installed RECORD rows whose hash differs from the wheel's: tampered along with the file, or not."""
    out: list[Finding] = []
    installed = {e.path: e for e in dist.entries}
    for path, theirs in wheel.wheel_record.items():
        ours = installed.get(path)
        if ours is None or theirs.digest is None or path.startswith("../"):
            continue
        if ours.algorithm == theirs.algorithm and ours.digest == theirs.digest:
            continue
        actual = read_installed(dist.resolve(path))
        if actual is not None and matches(ours, actual) and not matches(theirs, actual):
            msg = (
                f"the file and its RECORD row were both changed: the wheel has {theirs.algorithm}="
                f"{theirs.digest}, RECORD was rewritten to {ours.algorithm}={ours.digest}"
            )
            shown = scanned.display(dist.resolve(path))
            out.append(dist_finding(dist, Kind.MODIFIED, Severity.HIGH, RuleId.RECORD_TAMPERED, shown, msg))
        else:
            msg = f"RECORD row differs from the wheel's ({theirs.algorithm}={theirs.digest})"
            out.append(
                dist_finding(
                    dist, Kind.RECORD_INVALID, Severity.MODERATE, RuleId.RECORD_DIFFERS, shown_record, msg
                )
            )
    return out


def _rows_not_in_wheel(scanned: Scanned, dist: InstalledDistribution, wheel: Pristine) -> list[Finding]:
    """Files the installed RECORD lists and the wheel does not: added together with their row."""
    out: list[Finding] = []
    meta = os.path.basename(dist.metadata_dir)
    for path in dict.fromkeys(e.path for e in dist.entries):  # each path once, as RECORD orders them
        if path in wheel.wheel_record or path.startswith("../") or path.endswith(".pyc"):
            continue
        if path.startswith(meta + "/") and path.split("/", 1)[1] in INSTALLER_FILES:
            continue
        msg = "listed in the installed RECORD but not in the wheel: added along with its RECORD row"
        shown = scanned.display(dist.resolve(path))
        out.append(dist_finding(dist, Kind.UNEXPECTED, Severity.HIGH, RuleId.RECORD_ADDED, shown, msg))
    return out


def _same_release(dist: InstalledDistribution, sources: Sources) -> Pristine:
    tried: list[str] = []
    meta = os.path.basename(dist.metadata_dir)
    installed_metadata = read_installed(os.path.join(dist.metadata_dir, "METADATA"))
    for cand in candidates(dist, sources, tried):
        try:
            entries, _ = parse_record(cand.record_text())
            if cand.read(f"{meta}/METADATA", INSTALLED_LIMIT) != installed_metadata:
                tried.append(f"rejected {cand.location}: METADATA differs")
                cand.close()
                continue
        except READ_ERRORS as exc:
            tried.append(f"rejected {cand.location}: {exc.__class__.__name__}: {exc}")
            cand.close()
            continue
        return Pristine.of(dist, cand, entries, sources)
    raise NoPristineSource(
        f"no wheel of {dist.name} {dist.version} found; looked in: " + ("; ".join(tried) or "nowhere"),
        path=dist.metadata_dir,
    )
