"""The integrity scan: environment → distributions → RECORD entries → verified files → a Report.

This module decides what each mismatch means (kind, rule, severity); :mod:`patchguard.fingerprint` only
says whether bytes match, and :mod:`patchguard.unowned` finds what no RECORD lists. Default severities
until code analysis refines them: modified ``.py`` moderate, modified compiled extension high, modified data
file minor, missing moderate, unexpected ``.py`` in a package moderate, unexpected data minor.
"""

from __future__ import annotations

import array
import contextlib
import fnmatch
import gc
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from . import __version__
from ._state import journal_path
from .cache import DirListing, StatCache
from .env import Target, resolve_target
from .errors import UsageError
from .fingerprint import Outcome, Status, Verifier
from .records import (
    META_SUFFIXES,
    Check,
    InstalledDistribution,
    RecordEntry,
    canonicalize,
    iter_metadata_dirs,
    load_distribution,
    package_dirs_in,
)
from .report import Environment, Finding, Kind, Report, Severity
from .unowned import Ownership, is_extension, package_findings, pth_import_lines, toplevel_findings

__all__ = ["scan", "select_distributions"]

ProgressCallback = Callable[[int, int], None]


def select_distributions(
    dists: Sequence[InstalledDistribution], names: Iterable[str] | None
) -> list[InstalledDistribution]:
    """The distributions named (PEP 503 normalised), all when ``names`` is empty.

    Raises :class:`UsageError` naming every requested distribution that is not installed.
    """
    wanted = [canonicalize(n) for n in names or ()]
    if not wanted:
        return list(dists)
    present = {d.canonical_name for d in dists}
    unknown = [n for n, c in zip(names or (), wanted, strict=True) if c not in present]
    if unknown:
        where = ", ".join(sorted({d.site_dir for d in dists})) or "the environment"
        raise UsageError(
            f"not installed: {', '.join(unknown)}",
            path=where,
            hint="check the name, or choose the environment with --python / --site-packages",
        )
    keep = set(wanted)
    return [d for d in dists if d.canonical_name in keep]


def display_path(target: Target, path: str) -> str:
    """POSIX path relative to the site dir holding ``path``, or absolute when outside all of them."""
    for site in target.site_packages:
        if path.startswith(os.path.join(site, "")):
            return os.path.relpath(path, site).replace(os.sep, "/")
    return path


@dataclass
class _Scan:
    """Working state of one scan; the result is the immutable :class:`Report`."""

    target: Target
    findings: list[Finding] = field(default_factory=list)

    def display(self, path: str) -> str:
        return display_path(self.target, path)

    def add(
        self,
        dist: InstalledDistribution | None,
        kind: Kind,
        sev: Severity,
        rule: str,
        path: str,
        message: str,
        line: int | None = None,
    ) -> None:
        self.findings.append(
            Finding(
                kind,
                sev,
                rule,
                path,
                message,
                distribution=dist.name if dist else None,
                version=dist.version if dist else None,
                line=line,
            )
        )


def _resolve_entry(dist: InstalledDistribution, entry_path: str, path: str) -> tuple[str, bool]:
    """Where a RECORD entry lives, and whether its location is known to exist.

    ``pip install --target`` writes RECORD before moving the tree, so ``../../bin/x`` points nowhere and the
    script sits in ``<target>/bin/x``: look there too. Returns ``(path, False)`` when neither location's
    directory exists (the entry cannot be checked, rather than being missing).
    """
    if not entry_path.startswith("../"):
        return path, True
    if os.path.lexists(path):
        return path, True
    parts = entry_path.split("/")
    while parts and parts[0] == "..":
        parts.pop(0)
    alt = os.path.join(dist.site_dir, *parts) if parts else path
    if os.path.lexists(alt):
        return alt, True
    return path, os.path.isdir(os.path.dirname(path))


def _placed(
    dist: InstalledDistribution, globs: Sequence[str], owned: set[str], claimed: set[str]
) -> tuple[list[str], list[int], int]:
    """Where ``dist``'s checked files are: ``(paths, positions in dist.checks, how many are nowhere)``.

    ``../../bin`` scripts may sit elsewhere (pip ``--target``: see :func:`_resolve_entry`; where they were
    found is added to ``owned`` and ``claimed``), and ``globs`` (``diff``/``restore --path``) keep only the
    files asked about.
    """
    moved = list(dist.check_paths)
    drop: set[int] = set()
    for pos, recorded_path in dist.outside:
        recorded = moved[pos]
        path, known = _resolve_entry(dist, recorded_path, recorded)
        if path != recorded:
            owned.add(path)
            claimed.add(os.path.dirname(path))
            moved[pos] = path
        if not known:
            drop.add(pos)
    misplaced = len(drop)
    if globs:
        entries = dist.entries
        rows = array.array("I")
        rows.frombytes(dist.check_rows)
        drop.update(
            pos
            for pos, n in enumerate(rows)
            if not any(fnmatch.fnmatchcase(entries[n].path, g) for g in globs)
        )
    if not drop:
        return moved, list(range(len(moved))), misplaced
    kept = [pos for pos in range(len(moved)) if pos not in drop]
    return [moved[pos] for pos in kept], kept, misplaced


def _modified_finding(s: _Scan, dist: InstalledDistribution, o: Outcome, shown: str, outside: bool) -> None:
    c = o.check
    name = os.path.basename(c.path)
    if c.size is not None and o.actual_size is not None and o.actual_size != c.size:
        how = f"size {o.actual_size} bytes, RECORD says {c.size}"
    else:
        how = f"{c.algorithm} differs from RECORD"
    if is_extension(name):
        s.add(dist, Kind.MODIFIED, Severity.HIGH, "modified-extension", shown, f"compiled extension: {how}")
    elif name.endswith(".py"):
        s.add(dist, Kind.MODIFIED, Severity.MODERATE, "modified-python", shown, how)
    elif name.endswith(".pth"):
        imports = pth_import_lines(c.path)
        if imports:
            s.add(
                dist,
                Kind.MODIFIED,
                Severity.HIGH,
                "modified-pth",
                shown,
                f"{how}; executes at every interpreter start: {imports[0][:120]}",
            )
        else:
            s.add(dist, Kind.MODIFIED, Severity.MODERATE, "modified-pth", shown, how)
    elif outside:
        s.add(dist, Kind.MODIFIED, Severity.MODERATE, "modified-script", shown, how)
    else:
        s.add(dist, Kind.MODIFIED, Severity.MINOR, "modified-data", shown, how)


def _largest_first(site_dirs: Sequence[str]) -> list[tuple[str, str]]:
    """Metadata dirs ordered by the size of their RECORD, largest first.

    The biggest distribution (torch) usually holds the biggest file, and that one file bounds how soon
    hashing can end: reading it first gets its hash started while the rest is parsed.
    """

    def record_size(item: tuple[str, str]) -> int:
        try:
            return os.stat(os.path.join(item[0], item[1], "RECORD")).st_size
        except OSError:
            return 0

    found = [(site, meta) for site in site_dirs for meta in iter_metadata_dirs(site)]
    return sorted(found, key=record_size, reverse=True)


@dataclass
class Scanned:
    """A scan's report together with what it was computed from (for diff and restore)."""

    report: Report
    target: Target
    dists: list[InstalledDistribution]
    selected: list[InstalledDistribution]
    recovered: tuple[str, ...] = ()
    _rows: dict[int, dict[str, tuple[RecordEntry, str]]] = field(default_factory=dict, repr=False)

    def display(self, path: str) -> str:
        return display_path(self.target, path)

    def _rows_of(self, dist: InstalledDistribution) -> dict[str, tuple[RecordEntry, str]]:
        """Shown path → (RECORD row, absolute path) of one distribution, built once."""
        rows = self._rows.get(id(dist))
        if rows is None:
            rows = self._rows[id(dist)] = {
                self.display(path): (entry, path)
                for entry, path in zip(dist.entries, dist.paths, strict=True)
            }
        return rows

    def locate(self, finding: Finding) -> tuple[InstalledDistribution | None, RecordEntry | None, str]:
        """The distribution, RECORD entry (if any) and absolute path a file finding is about."""
        dist = next(
            (d for d in self.selected if (d.name, d.version) == (finding.distribution, finding.version)), None
        )
        if dist is not None and finding.path in self._rows_of(dist):
            entry, path = self._rows_of(dist)[finding.path]
            return dist, entry, path
        if os.path.isabs(finding.path):
            return dist, None, finding.path
        sites = [dist.site_dir] if dist is not None else list(self.target.site_packages)
        for site in sites:
            candidate = os.path.join(site, *finding.path.rstrip("/").split("/"))
            if os.path.lexists(candidate):
                return dist, None, candidate
        return dist, None, os.path.join(sites[0], *finding.path.split("/"))


def scan(
    distributions: Iterable[str] | None = None,
    *,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    use_cache: bool = True,
    cache_dir: str | None = None,
    workers: int | None = None,
    progress: ProgressCallback | None = None,
    against: str = "HEAD",
    verify_record: bool = False,
    wheelhouse: Sequence[str] = (),
    offline: bool = False,
    patches: str | None = None,
    analyse: bool = True,
    entries: Sequence[str] = (),
    architectures: Sequence[str] = (),
) -> Report:
    """Fingerprint every installed file of an environment against its wheel's RECORD.

    With no arguments, scans the environment of the running interpreter. ``distributions`` limits the
    scan to those names (then the top of site-packages is not searched for startup hooks).
    ``site_packages`` / ``python`` choose another environment, as ``--site-packages`` / ``--python`` do.

    >>> import patchguard
    >>> report = patchguard.scan(["pip"])  # doctest: +SKIP
    >>> report.worst >= patchguard.Severity.HIGH  # doctest: +SKIP
    False

    Raises :class:`~patchguard.errors.PatchguardError` subclasses for environments that cannot be read
    and for distributions that are not installed; everything about individual files is a finding.
    Editable installs are compared with their git checkout at ``against``. ``verify_record`` also
    compares each installed RECORD with the pristine wheel's (found in ``wheelhouse``, pip's and uv's
    caches, or downloaded unless ``offline``), catching a file edited together with its RECORD row.

    With ``analyse`` (the default), every modified or unexpected ``.py`` file is judged by code analysis
    (:mod:`patchguard.analysis`): its pristine source comes from the pristine store, ``wheelhouse`` or the
    pip/uv caches (a scan never downloads), and the live path is told from bytecode caches, ``entries``
    (modules) and ``architectures`` (model architectures, through the framework's registry).
    """
    return run(
        distributions,
        site_packages=site_packages,
        python=python,
        use_cache=use_cache,
        cache_dir=cache_dir,
        workers=workers,
        progress=progress,
        against=against,
        patches=patches,
        analyse=analyse,
        entries=entries,
        architectures=architectures,
        verify_record=verify_record,
        wheelhouse=wheelhouse,
        offline=offline,
    ).report


def run(
    distributions: Iterable[str] | None = None,
    *,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    use_cache: bool = True,
    cache_dir: str | None = None,
    workers: int | None = None,
    progress: ProgressCallback | None = None,
    against: str = "HEAD",
    target: Target | None = None,
    patches: str | None = None,
    analyse: bool = False,
    entries: Sequence[str] = (),
    architectures: Sequence[str] = (),
    verify_record: bool = False,
    wheelhouse: Sequence[str] = (),
    offline: bool = False,
    paths: Sequence[str] = (),
) -> Scanned:
    """:func:`scan`, returning the report with the distributions behind it (see :class:`Scanned`).

    A transaction a crash left unfinished in any site directory is rolled back first. ``paths`` (globs on
    RECORD paths) limits which files are verified, for ``diff --path`` and ``restore --path``. Code
    analysis is off by default here: ``diff`` and ``restore`` work on the integrity findings (one per file).
    """
    with _collector_paused():
        scanned = _integrity(
            distributions,
            site_packages,
            python,
            use_cache,
            cache_dir,
            workers,
            progress,
            against,
            target,
            paths,
        )
    if any(f.kind is Kind.MODIFIED for f in scanned.report.findings):
        from dataclasses import replace

        from .setops import attribute

        scanned.report = replace(scanned.report, findings=tuple(attribute(scanned, patches)))
    if analyse or verify_record:
        scanned.report = _judged(
            scanned, analyse, entries, architectures, verify_record, wheelhouse, offline, against
        )
    return scanned


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a scan builds its tables, and as it was afterwards.

    A scan allocates hundreds of thousands of tuples and strings, none in a reference cycle, and each
    allocation burst sets off a collection that walks them all again: 60-80 ms of a cold scan of 30k files.
    Reference counting frees everything anyway; only code analysis (libcst) makes cycles, and it runs after.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _integrity(
    distributions: Iterable[str] | None,
    site_packages: Sequence[str] | None,
    python: str | None,
    use_cache: bool,
    cache_dir: str | None,
    workers: int | None,
    progress: ProgressCallback | None,
    against: str,
    target: Target | None,
    paths: Sequence[str],
) -> Scanned:
    """The integrity part of :func:`run`: files verified, unowned files found, the cache updated."""
    started = time.perf_counter()
    now_ns = time.time_ns()
    target = target or resolve_target(python, site_packages)
    recovered: tuple[str, ...] = ()
    if any(os.path.exists(journal_path(site)) for site in target.site_packages):
        from .txn import recover_all  # only then: a clean scan does not import the transaction machinery

        recovered = recover_all(target.site_packages, target.roots, tolerant=True)
    cache = StatCache.for_environment(target.site_packages, cache_dir) if use_cache else StatCache.disabled()
    names = list(distributions or ())
    s = _Scan(target)
    owned_files: set[str] = set()
    claimed_dirs: set[str] = set()  # where --target scripts really are (e.g. <target>/bin)
    checked: dict[int, tuple[int, bytes]] = {}  # per distribution: how many files checked, which rows

    def check(dist: InstalledDistribution, verifier: Verifier) -> None:
        owned_files.update(dist.paths)
        files: Sequence[str] = dist.check_paths
        rows = dist.check_rows  # which RECORD rows the checks are, for the stat cache
        kept: list[int] | None = None  # which of the distribution's checks, when not all as recorded
        misplaced = 0
        if dist.outside or paths:
            files, kept, misplaced = _placed(dist, paths, owned_files, claimed_dirs)
            if len(kept) != len(dist.check_paths):
                every = array.array("I")
                every.frombytes(rows)
                rows = array.array("I", (every[pos] for pos in kept)).tobytes()

        def checks() -> Sequence[Check]:  # built only if some file needs more than a stat
            full = dist.checks
            if kept is None:
                return full
            return [(path, *full[pos][1:]) for path, pos in zip(files, kept, strict=True)]

        checked[id(dist)] = (len(files), rows)
        remembered = cache.known(dist, rows)
        verifier.add(checks, dist, *(remembered or (None, None)), paths=files, root=dist.site_dir)
        _metadata_findings(s, dist, misplaced)

    with Verifier(workers=workers) as verifier:
        # Without names, each distribution is verified as soon as it is read: the hashing threads start on
        # the first RECORD instead of waiting for the last.
        all_dists: list[InstalledDistribution] = []
        for site, meta in _largest_first(target.site_packages):
            dist = cache.distribution(os.path.join(site, meta)) or load_distribution(site, meta)
            all_dists.append(dist)
            if not names:
                check(dist, verifier)
        all_dists.sort(key=lambda d: (d.site_dir, d.metadata_dir))
        selected = select_distributions(all_dists, names)
        selected_ids = {id(d) for d in selected}
        for dist in all_dists:
            if names and id(dist) in selected_ids:
                check(dist, verifier)
            elif id(dist) not in selected_ids:
                owned_files.update(dist.paths)
        verifier.start_stats()  # a warm scan's stat keys: half of them taken in a helper from here on
        _duplicate_findings(s, selected)
        # The directory walk is system calls too: it runs while the threads hash.
        listings = cache.dir_listings([d.metadata_dir for d in all_dists], now_ns)
        unowned = _unowned_findings(
            target, all_dists, selected_ids, frozenset(owned_files), claimed_dirs, not names, listings, now_ns
        )
        verification = verifier.finish(progress)

    for o in verification.failures:
        owner = o.tag  # the distribution check() passed with the file
        assert isinstance(owner, InstalledDistribution)
        shown = s.display(o.check.path)
        if o.status is Status.MODIFIED:
            outside = not o.check.path.startswith(os.path.join(owner.site_dir, ""))
            _modified_finding(s, owner, o, shown, outside)
        elif o.status is Status.MISSING:
            s.add(
                owner,
                Kind.MISSING,
                Severity.MODERATE,
                "missing-file",
                shown,
                "listed in RECORD but not installed",
            )
        else:
            s.add(
                owner, Kind.UNVERIFIABLE, Severity.MINOR, "unreadable", shown, f"could not check: {o.reason}"
            )
    s.findings.extend(unowned)
    if any(os.path.join(d.metadata_dir, "direct_url.json") in d.paths for d in selected):
        from .vcs import vcs_findings

        s.findings.extend(vcs_findings(selected, against))

    for dist in selected if not paths else ():  # a --path subset would shrink what the cache holds
        known = verification.known.get(id(dist))
        if known is not None:  # else: nothing of it changed, what the cache holds is what it would write
            cache.remember(dist, checked[id(dist)][1], *known, now_ns)
    if not names:
        cache.forget_missing({d.metadata_dir for d in all_dists}, target.site_packages)
    cache.save()

    report = Report(
        environment=Environment(target.python, target.prefix, target.site_packages),
        distributions=tuple((d.name, d.version) for d in selected),
        files_checked=sum(n for n, _ in checked.values()),
        findings=tuple(sorted(s.findings, key=lambda f: f.sort_key)),
        tool_version=__version__,
        seconds=time.perf_counter() - started,
        files_hashed=verification.hashed,
        recovered=recovered,
    )
    return Scanned(report, target, all_dists, selected, recovered)


def _judged(
    scanned: Scanned,
    analyse: bool,
    entries: Sequence[str],
    architectures: Sequence[str],
    verify_record: bool,
    wheelhouse: Sequence[str],
    offline: bool,
    against: str,
) -> Report:
    findings = list(scanned.report.findings)
    code_files = any(f.kind in (Kind.MODIFIED, Kind.UNEXPECTED) and f.path.endswith(".py") for f in findings)
    if not verify_record and not code_files:
        return scanned.report  # nothing to judge: not even the analysis modules are imported
    from dataclasses import replace

    from .analysis.reach import ReachContext
    from .explain import Explainer, judge_findings, record_findings
    from .pristine import Sources

    # Analysis never downloads (a scan stays offline and fast); --verify-record may, unless --offline.
    if analyse and code_files:
        explainer = Explainer(Sources.default(wheelhouse, offline=True), against)
        reach = ReachContext(scanned.target.site_packages, entries, architectures)
        findings = judge_findings(scanned, explainer, reach)
    if verify_record:
        findings += record_findings(scanned, Explainer(Sources.default(wheelhouse, offline), against))
    return replace(scanned.report, findings=tuple(sorted(findings, key=lambda f: f.sort_key)))


def _duplicate_findings(s: _Scan, selected: Sequence[InstalledDistribution]) -> None:
    by_name: dict[str, list[InstalledDistribution]] = {}
    for d in selected:
        by_name.setdefault(d.canonical_name, []).append(d)
    for group in by_name.values():
        if len(group) < 2:
            continue
        dirs = ", ".join(s.display(d.metadata_dir) for d in group)
        for d in group:
            s.add(
                d,
                Kind.UNVERIFIABLE,
                Severity.MODERATE,
                "duplicate-metadata",
                s.display(d.metadata_dir),
                f"{len(group)} metadata directories for one distribution ({dirs}): which files belong to "
                f"which install is ambiguous; reinstall {d.name}",
            )


def _metadata_findings(s: _Scan, dist: InstalledDistribution, misplaced: int) -> None:
    record = s.display(dist.record_path)
    if not dist.has_record and not dist.problems:
        kind = (
            "egg-info" if dist.metadata_dir.endswith(".egg-info") else "RECORD stripped by a distro package?"
        )
        s.add(
            dist,
            Kind.UNVERIFIABLE,
            Severity.INFO,
            "record-absent",
            s.display(dist.metadata_dir),
            f"no RECORD ({kind}): its files cannot be verified",
        )
    for p in dist.problems:
        what = f"{p.path}: {p.message}" if p.path else p.message
        s.add(dist, Kind.RECORD_INVALID, Severity.MODERATE, "record-row", record, what, line=p.line or None)
    if misplaced:
        s.add(
            dist,
            Kind.UNVERIFIABLE,
            Severity.INFO,
            "files-elsewhere",
            record,
            f"{misplaced} file{'s' if misplaced != 1 else ''} RECORD places outside site-packages "
            "(e.g. ../../bin scripts) are not where it says: installed with pip --target?",
        )


def _unowned_findings(
    target: Target,
    all_dists: Sequence[InstalledDistribution],
    selected_ids: set[int],
    owned_files: frozenset[str],
    claimed_dirs: set[str],
    toplevel: bool,
    listings: dict[str, DirListing] | None,
    now_ns: int,
) -> list[Finding]:
    findings: list[Finding] = []
    for site in target.site_packages:
        claimed = {os.path.basename(d) for d in claimed_dirs if os.path.dirname(d) == site}
        owned_dirs: set[str] = set()
        installed_into: dict[str, tuple[str, str]] = {}
        for dist in all_dists:
            if dist.site_dir == site:
                claimed.add(os.path.basename(dist.metadata_dir))
                claimed.update(dist.top_level)
                dirs = dist.package_dirs
            else:  # several site dirs (purelib and platlib apart): a RECORD may reach into this one too
                dirs = package_dirs_in(site, dist.paths)
            owned_dirs.update(dirs)
            if id(dist) in selected_ids:
                for first in dirs:
                    installed_into.setdefault(first, (dist.name, dist.version))
        attribute = {
            os.path.join(site, first): dist_version
            for first, dist_version in installed_into.items()
            if not first.endswith(META_SUFFIXES)
        }
        ownership = Ownership(site, owned_files, frozenset(claimed))
        findings.extend(package_findings(ownership, sorted(attribute), attribute, listings, now_ns))
        if toplevel:
            findings.extend(toplevel_findings(ownership, frozenset(owned_dirs)))
    return findings
