"""The integrity scan: environment → distributions → RECORD entries → verified files → a Report.

This module decides what each mismatch means (kind, rule, severity); :mod:`.verifier` only
says whether bytes match, and :mod:`.unowned` finds what no RECORD lists. Default severities
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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .._fs import read_regular, sha256_file, transaction_left
from .._version import __version__
from ..env import Target, host_name, timestamp
from ..errors import UsageError
from ..model import Environment, Finding, Kind, Report, RuleId, Severity
from .cache import DirListing, StatCache
from .hashing import b64
from .managed import Managed, managed_distributions
from .records import (
    CONDA,
    DPKG,
    META_SUFFIXES,
    Check,
    InstalledDistribution,
    RecordEntry,
    canonicalize,
    iter_metadata_dirs,
    load_distribution,
    matches,
    package_dirs_in,
)
from .unowned import Ownership, is_extension, package_findings, pth_import_lines, toplevel_findings
from .verifier import Outcome, Status, Verifier

__all__ = [
    "FILE_KINDS",
    "ChangedFile",
    "Scanned",
    "changed_files",
    "display_path",
    "dist_finding",
    "select_distributions",
    "take_inventory",
]

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
        prefix = os.path.join(site, "")
        if path.startswith(prefix):
            rest = path[len(prefix) :]
            if "/." in rest or "//" in rest or rest.startswith("."):  # not plainly normalised: the slow way
                return os.path.relpath(path, site).replace(os.sep, "/")
            return rest.replace(os.sep, "/")
    return path


def dist_finding(
    dist: InstalledDistribution | None,
    kind: Kind,
    severity: Severity,
    rule: RuleId,
    path: str,
    message: str,
    line: int | None = None,
) -> Finding:
    """A finding about a file of ``dist`` (``None``: a file no distribution owns)."""
    return Finding(
        kind=kind,
        severity=severity,
        rule=rule,
        path=path,
        message=message,
        distribution=dist.name if dist else None,
        version=dist.version if dist else None,
        line=line,
    )


@dataclass
class _Scan:
    """Working state of one scan; the result is the immutable :class:`Scanned`."""

    target: Target
    findings: list[Finding] = field(default_factory=list)  # about metadata, RECORD, unreadable files
    changes: list[ChangedFile] = field(default_factory=list)  # about one file's bytes, with its origin
    _entries: dict[int, dict[str, RecordEntry]] = field(default_factory=dict)

    def display(self, path: str) -> str:
        return display_path(self.target, path)

    def add(
        self,
        dist: InstalledDistribution | None,
        kind: Kind,
        sev: Severity,
        rule: RuleId,
        path: str,
        message: str,
        line: int | None = None,
    ) -> None:
        self.findings.append(dist_finding(dist, kind, sev, rule, path, message, line))

    def changed(
        self, dist: InstalledDistribution, kind: Kind, sev: Severity, rule: RuleId, full: str, message: str
    ) -> None:
        """A finding about the bytes of ``dist``'s file at ``full``, kept with its RECORD row."""
        finding = dist_finding(dist, kind, sev, rule, self.display(full), message)
        self.changes.append(ChangedFile(finding, dist, self._entry(dist, full), full))

    def _entry(self, dist: InstalledDistribution, full: str) -> RecordEntry | None:
        """The RECORD row of the file at ``full`` (``None``: a script RECORD places elsewhere, moved)."""
        rows = self._entries.get(id(dist))
        if rows is None:  # only for distributions with a changed file: a handful
            rows = self._entries[id(dist)] = dict(zip(dist.paths, dist.entries, strict=True))
        return rows.get(full)


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


def _modified_finding(s: _Scan, dist: InstalledDistribution, o: Outcome, outside: bool) -> None:
    c = o.check
    name = os.path.basename(c.path)
    if c.size is not None and o.actual_size is not None and o.actual_size != c.size:
        how = f"size {o.actual_size} bytes, {dist.baseline} says {c.size}"
    else:
        how = f"{c.algorithm} differs from {dist.baseline}"
    if is_extension(name):
        how = f"compiled extension: {how}"
        s.changed(dist, Kind.MODIFIED, Severity.HIGH, RuleId.MODIFIED_EXTENSION, c.path, how)
    elif name.endswith(".py"):
        s.changed(dist, Kind.MODIFIED, Severity.MODERATE, RuleId.MODIFIED_PYTHON, c.path, how)
    elif name.endswith(".pth"):
        imports = pth_import_lines(c.path)
        if imports:
            s.changed(
                dist,
                Kind.MODIFIED,
                Severity.HIGH,
                RuleId.MODIFIED_PTH,
                c.path,
                f"{how}; executes at every interpreter start: {imports[0][:120]}",
            )
        else:
            s.changed(dist, Kind.MODIFIED, Severity.MODERATE, RuleId.MODIFIED_PTH, c.path, how)
    elif outside:
        s.changed(dist, Kind.MODIFIED, Severity.MODERATE, RuleId.MODIFIED_SCRIPT, c.path, how)
    else:
        s.changed(dist, Kind.MODIFIED, Severity.MINOR, RuleId.MODIFIED_DATA, c.path, how)


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


def _order(c: ChangedFile) -> tuple[object, ...]:
    return c.finding.sort_key


# Finding kinds that are about one file's bytes, in diff terms.
FILE_KINDS = {
    Kind.MODIFIED: "modified",
    Kind.MISSING: "deleted",
    Kind.UNEXPECTED: "added",
    Kind.STARTUP_HOOK: "added",
}


@dataclass(frozen=True, slots=True)
class ChangedFile:
    """A file a scan found changed, with where it came from: its finding, distribution (``None``: no
    distribution owns it), RECORD row (``None``: RECORD does not list it) and absolute path. Made where the
    finding is made; every later stage (attribution, explain, judge, restore, lock) takes it as it is."""

    finding: Finding
    dist: InstalledDistribution | None
    entry: RecordEntry | None
    path: str
    # Said of the file whatever finding ends up telling about it (the code findings that replace a bare
    # ``modified`` one carry it too): an edit shared through an installer's hard link, and where.
    note: str = ""

    @property
    def status(self) -> str:
        return FILE_KINDS[self.finding.kind]

    def told(self, finding: Finding, note: str | None = None) -> ChangedFile:
        """The same file with another finding (a message added, a patch set named), and the note to carry."""
        return ChangedFile(finding, self.dist, self.entry, self.path, self.note if note is None else note)


@dataclass(frozen=True)
class Scanned:
    """A scan's report together with what it was computed from (for diff, restore, attribution, judging).

    ``changes`` are the findings about one file's bytes, each with its origin; ``others`` every other
    finding (metadata, RECORD problems, unreadable files). The report holds both, sorted; a later stage
    makes a new value with :meth:`evolve`, never changes this one.
    """

    report: Report
    target: Target
    dists: list[InstalledDistribution]
    selected: list[InstalledDistribution]
    changes: tuple[ChangedFile, ...] = ()
    others: tuple[Finding, ...] = ()
    recovered: tuple[str, ...] = ()

    def display(self, path: str) -> str:
        return display_path(self.target, path)

    def evolve(
        self, changes: Iterable[ChangedFile] | None = None, others: Iterable[Finding] | None = None
    ) -> Scanned:
        """This scan with other file findings (and other findings): the report is made again from them."""
        kept = tuple(sorted(changes, key=_order)) if changes is not None else self.changes
        rest = tuple(others) if others is not None else self.others
        found = sorted((*rest, *(c.finding for c in kept)), key=lambda f: f.sort_key)
        report = replace(self.report, findings=tuple(found))
        return replace(self, report=report, changes=kept, others=rest)


def _wanted(path: str, globs: Sequence[str]) -> bool:
    return not globs or any(fnmatch.fnmatchcase(path, g) for g in globs)


def changed_files(scanned: Scanned, globs: Sequence[str] = ()) -> list[ChangedFile]:
    """Every modified, missing or unexpected file of a scan whose path matches one of ``globs``.

    An unexpected directory stands for every file in it.
    """
    out: list[ChangedFile] = []
    for change in scanned.changes:
        f, dist, path = change.finding, change.dist, change.path
        if f.path.endswith("/") and os.path.isdir(path):
            for dirpath, _dirs, files in os.walk(path):
                for name in sorted(files):
                    full = os.path.join(dirpath, name)
                    shown = scanned.display(full)
                    if _wanted(shown, globs):
                        sub = Finding(
                            kind=f.kind,
                            severity=f.severity,
                            rule=f.rule,
                            path=shown,
                            message=f.message,
                            distribution=f.distribution,
                            version=f.version,
                        )
                        out.append(ChangedFile(sub, dist, None, full))
            continue
        if os.path.islink(path):
            continue  # never read through a link: it may point anywhere (the scan reports it)
        if _wanted(f.path, globs):
            out.append(change)
    return out


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


def take_inventory(
    distributions: Iterable[str] | None = None,
    *,
    target: Target,
    use_cache: bool = True,
    cache_dir: str | None = None,
    workers: int | None = None,
    progress: ProgressCallback | None = None,
    paths: Sequence[str] = (),
) -> Scanned:
    """The integrity scan: every file verified against its RECORD, unowned files found, the cache updated.

    A transaction a crash left unfinished in any site directory is rolled back first. ``paths`` (globs on
    RECORD paths) limits which files are verified, for ``diff --path`` and ``restore --path``.
    """
    started = time.perf_counter()
    now_ns = time.time_ns()  # before anything is written or read: what is newer is racy
    when = timestamp()
    recovered: tuple[str, ...] = ()
    trial: str | None = None
    if any(transaction_left(site) for site in target.site_packages):
        from ..txn import live_session, recover_all  # only then: a clean scan does not import them

        recovered = recover_all(target.site_packages, target.roots, tolerant=True)
        trial = next((who for who in map(live_session, target.site_packages) if who), None)
    cache = StatCache.for_environment(target.site_packages, cache_dir) if use_cache else StatCache.disabled()
    with _collector_paused():
        walk = _Inventory(target, cache, list(distributions or ()), paths, now_ns)
        with Verifier(workers=workers) as verifier:
            all_dists, selected, unowned = walk.verify(verifier)
            verification = verifier.finish(progress)
        walk.failures(verification.failures)
        walk.shared(all_dists)
        walk.s.changes.extend(unowned)
        walk.remember(all_dists, selected, verification.known)
    report = Report(
        environment=Environment(target.python, target.prefix, target.site_packages),
        distributions=tuple((d.name, d.version) for d in selected),
        files_checked=sum(n for n, _ in walk.checked.values()),
        findings=(),
        tool_version=__version__,
        seconds=time.perf_counter() - started,
        files_hashed=verification.hashed,
        recovered=recovered,
        host=host_name(),
        time=when,
        trial=trial,
    )
    scanned = Scanned(report, target, all_dists, selected, recovered=recovered)
    return scanned.evolve(walk.s.changes, walk.s.findings)


class _Inventory:
    """Working state of one integrity scan: what is owned, what was checked, the findings so far."""

    def __init__(
        self, target: Target, cache: StatCache, names: list[str], paths: Sequence[str], now_ns: int
    ) -> None:
        self.target = target
        self.cache = cache
        self.names = names
        self.paths = paths
        self.now_ns = now_ns
        self.s = _Scan(target)
        self.owned_files: set[str] = set()
        self.claimed_dirs: set[str] = set()  # where --target scripts really are (e.g. <target>/bin)
        self.checked: dict[int, tuple[int, bytes]] = {}  # per distribution: files checked, which rows

    def check(self, dist: InstalledDistribution, verifier: Verifier) -> None:
        """Hand ``dist``'s files to the verifier (with what the stat cache remembers of them)."""
        self.owned_files.update(dist.paths)
        files: Sequence[str] = dist.check_paths
        rows = dist.check_rows  # which RECORD rows the checks are, for the stat cache
        kept: list[int] | None = None  # which of the distribution's checks, when not all as recorded
        misplaced = 0
        if dist.outside or self.paths:
            files, kept, misplaced = _placed(dist, self.paths, self.owned_files, self.claimed_dirs)
            if len(kept) != len(dist.check_paths):
                every = array.array("I")
                every.frombytes(rows)
                rows = array.array("I", (every[pos] for pos in kept)).tobytes()

        def checks() -> Sequence[Check]:  # built only if some file needs more than a stat
            full = dist.checks
            if kept is None:
                return full
            return [(path, *full[pos][1:]) for path, pos in zip(files, kept, strict=True)]

        self.checked[id(dist)] = (len(files), rows)
        remembered = self.cache.known(dist, rows)
        verifier.add(checks, dist, *(remembered or (None, None)), paths=files, root=dist.site_dir)
        _metadata_findings(self.s, dist, misplaced)

    def verify(
        self, verifier: Verifier
    ) -> tuple[list[InstalledDistribution], list[InstalledDistribution], list[ChangedFile]]:
        """Read every distribution, start verifying, and find unowned files while the hashing runs.

        Returns (all distributions, the selected ones, the unowned-file findings).
        """
        # Without names, each distribution is verified as soon as it is read: the hashing threads start on
        # the first RECORD instead of waiting for the last.
        names, cache = self.names, self.cache
        managed = managed_distributions(self.target, cache)
        all_dists: list[InstalledDistribution] = []
        for dist in managed.dists:  # conda's packages hold the largest files (CUDA, torch): hashed first
            all_dists.append(dist)
            if not names:
                self.check(dist, verifier)
        for site, meta in _largest_first(self.target.site_packages):
            if os.path.join(site, meta) in managed.owned:
                continue  # judged by its manager's record, not by a RECORD conda-build or dh-python left
            dist = cache.distribution(os.path.join(site, meta)) or load_distribution(site, meta)
            all_dists.append(dist)
            if not names:
                self.check(dist, verifier)
        all_dists.sort(key=lambda d: (d.site_dir, d.metadata_dir))
        selected = select_distributions(all_dists, names)
        selected_ids = {id(d) for d in selected}
        for dist in all_dists:
            if names and id(dist) in selected_ids:
                self.check(dist, verifier)
            elif id(dist) not in selected_ids:
                self.owned_files.update(dist.paths)
        verifier.start_stats()  # a warm scan's stat keys: half of them taken in a helper from here on
        _duplicate_findings(self.s, selected)
        _replaced_findings(self.s, managed, selected)
        # The directory walk is system calls too: it runs while the threads hash.
        listings = cache.dir_listings([d.metadata_dir for d in all_dists], self.now_ns)
        unowned = _unowned_findings(
            self.target,
            all_dists,
            selected_ids,
            frozenset(self.owned_files),
            self.claimed_dirs,
            not names,
            listings,
            self.now_ns,
        )
        return all_dists, selected, unowned

    def failures(self, failures: Iterable[Outcome]) -> None:
        """A finding for every file that is not as its RECORD says."""
        s = self.s
        for o in failures:
            owner = o.tag  # the distribution check() passed with the file
            assert isinstance(owner, InstalledDistribution)
            if o.status is Status.MODIFIED:
                outside = not o.check.path.startswith(os.path.join(owner.site_dir, ""))
                _modified_finding(s, owner, o, outside)
            elif o.status is Status.MISSING:
                s.changed(
                    owner,
                    Kind.MISSING,
                    Severity.MODERATE,
                    RuleId.MISSING_FILE,
                    o.check.path,
                    f"listed in {owner.baseline} but not installed",
                )
            else:
                s.add(
                    owner,
                    Kind.UNVERIFIABLE,
                    Severity.MINOR,
                    RuleId.UNREADABLE,
                    s.display(o.check.path),
                    f"could not check: {o.reason}",
                )

    def shared(self, all_dists: Sequence[InstalledDistribution]) -> None:
        """A modified file that another distribution lists too belongs to one of them: the one whose RECORD
        row it matches, else the one installed last (its RECORD is the newest) — ``torch_c_dlpack_ext`` and
        ``flashinfer-python`` both ship a top-level ``build_backend.py``, and the second install replaced the
        first's copy. The others are told so (``overwritten``, minor, naming the owner): no change of theirs
        to diff or restore, since restoring their copy would break the owner."""
        s = self.s
        modified = [c for c in s.changes if c.finding.kind is Kind.MODIFIED and c.dist is not None]
        owners = _owners({c.path for c in modified}, all_dists)
        if not owners:
            return
        reported = {(c.path, id(c.dist)) for c in modified}
        kept = []
        for c in s.changes:
            owner = owners.get(c.path) if c.finding.kind is Kind.MODIFIED else None
            # The file is told the owner's: it matches the owner's row, or the owner's own check reports it
            # (a file that matches no row stays a change of someone's; a scan of one distribution keeps it).
            if owner is None or owner[0] is c.dist or not (owner[1] or (c.path, id(owner[0])) in reported):
                kept.append(c)
                continue
            s.findings.append(_overwritten(c.finding, *owner))
        s.changes = kept

    def remember(
        self,
        all_dists: Sequence[InstalledDistribution],
        selected: Sequence[InstalledDistribution],
        known: Mapping[int, tuple[bytes, dict[int, str]]],
    ) -> None:
        """Store what this scan learnt in the stat cache."""
        cache = self.cache
        for dist in selected if not self.paths else ():  # a --path subset would shrink what the cache holds
            learnt = known.get(id(dist))
            if learnt is not None:  # else: nothing of it changed, what the cache holds is what it would write
                cache.remember(dist, self.checked[id(dist)][1], *learnt, self.now_ns)
        if not self.names:
            conda_meta = [os.path.join(self.target.conda, "conda-meta")] if self.target.conda else []
            cache.forget_missing(
                {d.metadata_dir for d in all_dists}, [*self.target.site_packages, *conda_meta]
            )
        cache.save()


def _owners(
    paths: set[str], all_dists: Sequence[InstalledDistribution]
) -> dict[str, tuple[InstalledDistribution, bool]]:
    """Of ``paths``, those two or more distributions list, each with its owner (:func:`_owner`)."""
    listed: dict[str, list[tuple[InstalledDistribution, RecordEntry]]] = {}
    for dist in all_dists if paths else ():
        if paths.isdisjoint(dist.paths):
            continue
        rows = dict(zip(dist.paths, dist.entries, strict=True))
        for path in paths & rows.keys():
            listed.setdefault(path, []).append((dist, rows[path]))
    return {path: _owner(rows) for path, rows in listed.items() if len(rows) > 1}


def _overwritten(finding: Finding, dist: InstalledDistribution, matched: bool) -> Finding:
    """A modified file's finding told as another distribution's copy over this one's (minor)."""
    how = "the file matches its RECORD" if matched else "installed after it; the file matches neither"
    return replace(
        finding,
        severity=Severity.MINOR,
        rule=RuleId.OVERWRITTEN,
        message=f"installed by {dist.name} {dist.version} too, whose copy is here ({how}): "
        f"{finding.distribution}'s own copy was overwritten; restoring it would break "
        f"{dist.name}",
        owned_by=(dist.name, dist.version),
    )


def _owner(rows: Sequence[tuple[InstalledDistribution, RecordEntry]]) -> tuple[InstalledDistribution, bool]:
    """Which of the distributions listing one path owns the file there, and whether it matches that one's
    row: the one it matches, else the one installed last (the newest RECORD)."""
    for dist, entry in rows:
        if _file_matches(entry, dist.resolve(entry.path)):
            return dist, True

    def installed_at(dist: InstalledDistribution) -> int:
        try:
            return os.stat(dist.record_path).st_mtime_ns
        except OSError:
            return 0

    return max((d for d, _ in rows), key=installed_at), False


def _file_matches(entry: RecordEntry, path: str) -> bool:
    """Whether the regular file at ``path`` has the hash ``entry`` gives it."""
    if entry.algorithm is None or entry.digest is None:
        return False
    try:
        if entry.algorithm == "sha256":
            hexed = sha256_file(path)
            return hexed is not None and b64(bytes.fromhex(hexed)) == entry.digest
        return matches(entry, read_regular(path))
    except OSError:
        return False


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
                RuleId.DUPLICATE_METADATA,
                s.display(d.metadata_dir),
                f"{len(group)} metadata directories for one distribution ({dirs}): which files belong to "
                f"which install is ambiguous; reinstall {d.name}",
            )


_MANAGERS = {CONDA: "conda", DPKG: "Debian"}
_NO_HASHES = {
    CONDA: "its conda-meta record lists files without hashes (no paths_data)",
    DPKG: "dpkg keeps no md5sums for it",
}


def _replaced_findings(s: _Scan, managed: Managed, selected: Sequence[InstalledDistribution]) -> None:
    """A conda or Debian package another installer replaced is said once, on the replacement's record."""
    if not managed.replaced:
        return
    by_meta = {d.metadata_dir: d for d in selected}
    for package, meta in managed.replaced:
        instead = by_meta.get(meta)
        if instead is None:
            continue  # not selected
        s.add(
            instead,
            Kind.UNVERIFIABLE,
            Severity.INFO,
            RuleId.MANAGED_REPLACED,
            s.display(meta),
            f"installed over the {_MANAGERS[package.baseline]} package {package.name} {package.version} "
            f"({os.path.basename(package.metadata_dir)}): its files are checked against this RECORD; "
            f"{_MANAGERS[package.baseline]}'s record of them is stale",
        )


def _metadata_findings(s: _Scan, dist: InstalledDistribution, misplaced: int) -> None:
    record = s.display(dist.record_path)
    if not dist.has_record and not dist.problems:
        kind = _NO_HASHES.get(dist.baseline) or (
            "egg-info" if dist.metadata_dir.endswith(".egg-info") else "RECORD stripped by a distro package?"
        )
        s.add(
            dist,
            Kind.UNVERIFIABLE,
            Severity.INFO,
            RuleId.RECORD_ABSENT,
            s.display(dist.metadata_dir),
            f"no RECORD ({kind}): its files cannot be verified",
        )
    _record_problems(s, dist, record)
    if misplaced:
        s.add(
            dist,
            Kind.UNVERIFIABLE,
            Severity.INFO,
            RuleId.FILES_ELSEWHERE,
            record,
            f"{misplaced} file{'s' if misplaced != 1 else ''} RECORD places outside site-packages "
            "(e.g. ../../bin scripts) are not where it says: installed with pip --target?",
        )


def _record_problems(s: _Scan, dist: InstalledDistribution, record: str) -> None:
    """What is wrong with a RECORD's rows: hashes in hex, rows doubled (info: each said once), and every
    other bad row (moderate)."""
    hexed = [p for p in dist.problems if p.hex]
    if hexed:
        s.add(
            dist,
            Kind.RECORD_INVALID,
            Severity.INFO,
            RuleId.RECORD_HEX,
            record,
            f"the wheel's own RECORD is wrong: {len(hexed)} hash{'es' if len(hexed) != 1 else ''} written in "
            "hex, not urlsafe base64 (as uv_build before 0.8.13 wrote them); each file was checked against "
            "its hex digest",
            line=hexed[0].line,
        )
    doubled = [p for p in dist.problems if p.duplicate]
    if doubled:
        first = doubled[0]
        more = len(doubled) - 1
        what = f"{first.path}: {first.message}" + (f" (and {more} more such rows)" if more else "")
        rule = RuleId.RECORD_DUPLICATE
        s.add(dist, Kind.RECORD_INVALID, Severity.INFO, rule, record, what, line=first.line)
    for p in dist.problems:
        if p.hex or p.duplicate:
            continue
        what = f"{p.path}: {p.message}" if p.path else p.message
        s.add(
            dist, Kind.RECORD_INVALID, Severity.MODERATE, RuleId.RECORD_ROW, record, what, line=p.line or None
        )


def _owners_in(
    site: str, all_dists: Sequence[InstalledDistribution], selected_ids: set[int], claimed: set[str]
) -> tuple[set[str], dict[str, InstalledDistribution]]:
    """The top-level directories of ``site`` that distributions own, and which selected distribution was
    installed into each; adds to ``claimed`` the names the site's own distributions claim."""
    owned_dirs: set[str] = set()
    installed_into: dict[str, InstalledDistribution] = {}
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
                installed_into.setdefault(first, dist)
    return owned_dirs, installed_into


def _unowned_findings(
    target: Target,
    all_dists: Sequence[InstalledDistribution],
    selected_ids: set[int],
    owned_files: frozenset[str],
    claimed_dirs: set[str],
    toplevel: bool,
    listings: dict[str, DirListing] | None,
    now_ns: int,
) -> list[ChangedFile]:
    changes: list[ChangedFile] = []
    for site in target.site_packages:
        claimed = {os.path.basename(d) for d in claimed_dirs if os.path.dirname(d) == site}
        owned_dirs, installed_into = _owners_in(site, all_dists, selected_ids, claimed)
        attribute = {
            os.path.join(site, first): dist
            for first, dist in installed_into.items()
            if not first.endswith(META_SUFFIXES)
        }
        by_release = {(d.name, d.version): d for d in attribute.values()}
        named = {top: (d.name, d.version) for top, d in attribute.items()}
        ownership = Ownership(site, owned_files, frozenset(claimed))
        found = package_findings(ownership, sorted(attribute), named, listings, now_ns)
        if toplevel:
            found += toplevel_findings(ownership, frozenset(owned_dirs))
        for f in found:
            owner = by_release.get((f.distribution, f.version or "")) if f.distribution else None
            changes.append(ChangedFile(f, owner, None, os.path.join(site, *f.path.rstrip("/").split("/"))))
    return changes
