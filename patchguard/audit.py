"""One scan, orchestrated: integrity → explain → attribute → judge. The public ``scan`` and ``check``.

Each stage is a function of what the previous one produced and never calls back up:

1. :func:`patchguard.pristine.explain.survey`: every file verified against its RECORD, unowned files and
   startup hooks found, editable installs compared with their git checkout;
2. :func:`patchguard.patchsets.attribution.attribute`: modifications that a known patch set explains are
   named after it;
3. :func:`judge`: every modified or unexpected ``.py`` file judged by code analysis against its pristine
   source, each code finding given its reach; ``--verify-record`` compares RECORDs with the wheels';
4. for ``check``, :func:`patchguard.deploy.check.gate.evaluate` judges the result against a policy and a lock.

Code analysis (libcst) and the pristine sources are imported only when there is changed code to judge.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

# The types of the public signatures, imported for real: typing.get_type_hints(patchguard.check) must resolve
# them (pydantic, typer and sphinx read them so). None of them imports libcst or git.
from .env import Target
from .errors import PatchguardError
from .integrity.inventory import ChangedFile, ProgressCallback, Scanned
from .model import Finding, GateKind, Kind, Loaded, NoBaseline, Reach, Report, RuleId, UpgradePlan
from .pristine.sources import SourceOptions
from .results import CheckResult, Policy

if TYPE_CHECKING:
    from .analysis import CodeChange
    from .analysis.kept import KeptAnalyses
    from .analysis.reach import FileReach, ReachContext
    from .deploy.processes.running import Habit
    from .pristine.explain import Explainer

__all__ = ["Served", "check", "judge", "lock", "run", "scan", "with_sets"]


def scan(
    distributions: Iterable[str] | None = None,
    *,
    target: Target,
    use_cache: bool = True,
    cache_dir: str | None = None,
    workers: int | None = None,
    progress: ProgressCallback | None = None,
    against: str = "HEAD",
    verify_record: bool = False,
    patches: str | None = None,
    analyse: bool = True,
    entries: Sequence[str] = (),
    architectures: Sequence[str] = (),
    fetch: SourceOptions | None = None,
    frameworks: Sequence[str] = (),
) -> Report:
    """Fingerprint every installed file of ``target`` against its wheel's RECORD, judge what changed and
    name the sets in place (:func:`patchguard.scan` is its public face, which says what each keyword does)."""
    _named_patches(patches)
    return with_sets(
        run(
            distributions,
            target=target,
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
            fetch=fetch,
            frameworks=frameworks,
        ),
        patches,
    )


def _named_patches(patches: str | None) -> None:
    """A patches directory named on purpose (``--patches``, ``$PATCHGUARD_PATCHES``) must exist, changes
    or not."""
    if patches or os.environ.get("PATCHGUARD_PATCHES"):
        from .patchsets.model import patches_dir

        patches_dir(patches)


def with_sets(scanned: Scanned, patches: str | None) -> Report:
    """The scan's report with the sets in place in its environment (``applied_sets``): those patchguard
    applied and those applied by hand, as a lock lists them — what ``fleet`` compares."""
    from .deploy.identity.lockfile import applied_sets

    found = applied_sets(scanned.target, scanned.dists, patches)
    return replace(scanned.report, applied_sets=tuple(sorted(found.items())))


def run(
    distributions: Iterable[str] | None = None,
    *,
    target: Target,
    use_cache: bool = True,
    cache_dir: str | None = None,
    workers: int | None = None,
    progress: ProgressCallback | None = None,
    against: str = "HEAD",
    patches: str | None = None,
    analyse: bool = False,
    entries: Sequence[str] = (),
    architectures: Sequence[str] = (),
    verify_record: bool = False,
    fetch: SourceOptions | None = None,
    frameworks: Sequence[str] = (),
) -> Scanned:
    """:func:`scan`, returning the report with the distributions behind it (see :class:`Scanned`).

    Code analysis is off by default here (``lock`` works on the integrity findings, one per file).
    """
    from .pristine.explain import survey
    from .pristine.sources import SourceOptions

    started = time.perf_counter()
    scanned = survey(
        distributions,
        target=target,
        against=against,
        use_cache=use_cache,
        cache_dir=cache_dir,
        workers=workers,
        progress=progress,
    )
    if any(c.finding.kind in _ATTRIBUTED for c in scanned.changes):
        scanned = _attributed(_with_digests(scanned), patches)
    report = scanned.report
    if analyse or verify_record:
        served = Served(entries, architectures, cache_dir, use_cache, frameworks)
        report = judge(
            scanned,
            analyse=analyse,
            served=served,
            verify_record=verify_record,
            fetch=fetch or SourceOptions(),
            against=against,
        )
    # The whole run's wall time, analysis included (not only the integrity pass).
    return replace(scanned, report=replace(report, seconds=time.perf_counter() - started))


# What a patch set may explain: modified files, and files no distribution owns (startup hooks included).
_ATTRIBUTED = (Kind.MODIFIED, Kind.STARTUP_HOOK, Kind.UNEXPECTED)


def _attributed(scanned: Scanned, patches: str | None) -> Scanned:
    """The scan with modifications (and files no distribution owns) attributed to the known sets. Sets
    that cannot be loaded attribute nothing: the scan is not the place to fail."""
    from .patchsets.attribution import attribute
    from .patchsets.installed import SetEnvironment
    from .patchsets.model import load_sets

    try:
        sets = load_sets(patches)
    except PatchguardError:
        return scanned
    if not sets:
        return scanned
    env = SetEnvironment(scanned.target, tuple(scanned.dists))
    forms = [env.form_for(ps) for ps in sets]  # each set as written for the versions installed here
    return scanned.evolve(changes=attribute(scanned.changes, forms, scanned.target.site_packages))


def _with_digests(scanned: Scanned) -> Scanned:
    """The scan with the digest of each changed file's bytes on its finding (``sha256:<hex>``), what
    ``fleet`` compares: only the changed files are read, and never through a symbolic link (it may point
    anywhere) or a directory."""
    from ._fs import sha256_file

    told: list[ChangedFile] = []
    for c in scanned.changes:
        f, digest = c.finding, None
        if f.kind in _ATTRIBUTED and not f.path.endswith("/") and not os.path.islink(c.path):
            try:
                digest = sha256_file(c.path)
            except OSError:
                digest = None  # not a regular file, or unreadable: the finding says what it is
        told.append(c.told(replace(f, digest=f"sha256:{digest}")) if digest else c)
    return scanned.evolve(told)


@dataclass(frozen=True, slots=True)
class Served:
    """What the scan was told is served (``--entry``, ``--arch``), and where reach keeps its cache."""

    entries: Sequence[str] = ()
    architectures: Sequence[str] = ()
    cache_dir: str | None = None
    use_cache: bool = True
    frameworks: Sequence[str] = ()

    @property
    def asked(self) -> bool:
        """Whether anything was said to be served (then it is checked, even on a clean environment)."""
        return bool(self.entries or self.architectures or self.frameworks)


def judge(
    scanned: Scanned,
    *,
    analyse: bool,
    served: Served,
    verify_record: bool,
    fetch: SourceOptions,
    against: str,
) -> Report:
    """The scan's report with changed code judged (``analyse``) and RECORDs verified (``verify_record``).

    What is served is resolved first, whatever the findings: an architecture no installed framework serves,
    or an ``--entry`` that is not there, is a usage error even on a clean environment.
    """
    changed = any(f.kind is Kind.MODIFIED or f.rule == RuleId.RECORD_ROW for f in scanned.report.findings)
    code_files = any(_judged(c.finding) for c in scanned.changes)
    to_judge = verify_record or code_files or (analyse and changed)
    if not (to_judge or served.asked):
        return scanned.report  # nothing to judge and nothing served to check: analysis is not imported
    from .analysis.reach import ReachContext

    reach = ReachContext(
        scanned.target.site_packages,
        served.entries,
        served.architectures,
        cache_dir=served.cache_dir,
        use_cache=served.use_cache,
        frameworks=served.frameworks,
    )
    if analyse:
        reach.resolve()
    if not to_judge:
        return scanned.report  # nothing to judge: libcst is not even imported
    from .pristine.explain import Explainer

    # The pristine wheel of a changed distribution is fetched once (unless offline) and kept in the store.
    explainer = Explainer(fetch.open(scanned.target), against)
    scanned, findings = _judged_findings(
        scanned, explainer, reach, served, analyse=analyse and changed, code=analyse and code_files
    )
    if verify_record:
        from .pristine.explain import record_findings

        findings += record_findings(scanned, explainer)
    missing = _no_baseline(scanned, explainer, findings)
    return replace(
        scanned.report, findings=tuple(sorted(findings, key=lambda f: f.sort_key)), no_baseline=missing
    )


def _judged_findings(
    scanned: Scanned, explainer: Explainer, reach: ReachContext, served: Served, *, analyse: bool, code: bool
) -> tuple[Scanned, list[Finding]]:
    """The scan with RECORD rows' truths read (``analyse``), and its findings with changed code judged
    (``code``)."""
    if analyse:
        from .pristine.explain import record_truths

        scanned = record_truths(scanned, explainer)
    if not code:
        return scanned, list(scanned.report.findings)
    from .analysis.kept import KeptAnalyses

    kept = KeptAnalyses(served.cache_dir, served.use_cache)
    return scanned, judge_findings(scanned, explainer, reach, kept)


def _no_baseline(
    scanned: Scanned, explainer: Explainer, findings: Sequence[Finding]
) -> tuple[NoBaseline, ...]:
    """The distributions with changed files that no pristine source was found for, each with what to do."""
    from .pristine.sources import unlisted_hint

    out: list[NoBaseline] = []
    changed = {(f.distribution, f.version) for f in findings if f.kind in _NEEDS_BASELINE}
    for dist, exc in explainer.missing():
        if (dist.name, dist.version) in changed:
            reason = exc.message.split("; looked in:")[0]
            managed = exc.hint if dist.baseline != "RECORD" else None
            hint = managed or unlisted_hint(dist, explainer.sources)
            out.append(NoBaseline(dist.name, dist.version, reason, hint))
    return tuple(out)


# Kinds whose files a pristine source explains: without one, they are judged (or shown) without a baseline.
_NEEDS_BASELINE = frozenset(
    {Kind.MODIFIED, Kind.INJECTED_CODE, Kind.FUNCTIONAL_CHANGE, Kind.COSMETIC_CHANGE, Kind.RECORD_INVALID}
)


def judge_findings(
    scanned: Scanned, explainer: Explainer, reach: ReachContext, kept: KeptAnalyses | None = None
) -> list[Finding]:
    """The scan's findings with every modified or unexpected ``.py`` file judged by code analysis.

    A modified file's bare ``modified`` finding is replaced by one finding per changed region and rule,
    keeping its patch-set attribution; without a pristine source the whole file is judged (``baseline:
    none``). Each code finding gets the reach of its file, ``conditional`` when gated, ``dormant`` when dead.
    What analysis said of a file is kept (``kept``): a file judged before against the same pristine bytes is
    not judged again; the others are judged on every core.
    """
    from .analysis.kept import KeptAnalyses, analyse_many

    kept = kept if kept is not None else KeptAnalyses(enabled=False)

    # In the report's order: the findings of one file and line keep theirs.
    ordered = sorted(
        [*((f, None) for f in scanned.others), *((c.finding, c) for c in scanned.changes)],
        key=lambda pair: pair[0].sort_key,
    )
    targets = [c for f, c in ordered if c is not None and _judged(f)]
    judged = iter(_analysed(targets, explainer, reach, kept, analyse_many))
    habits = _Habits(scanned.target)
    out: list[Finding] = []
    for f, c in ordered:
        if c is None or not _judged(f):
            out.append(f)
            continue
        p = next(judged)
        if p.found is None:
            out.append(p.change.finding)  # not judged: the finding says why
        else:
            out += _noted(p.change, _with_reach(p.change, p.found, reach, habits))
    return out


def _analysed(
    targets: list[ChangedFile],
    explainer: Explainer,
    reach: ReachContext,
    kept: KeptAnalyses,
    analyse_many: Callable[[list[CodeChange]], list[list[Finding]]],
) -> list[_Prepared]:
    """Each changed file to judge, prepared (its pristine source found, what was kept of it asked) and the
    ones not kept analysed on every core; what they found is kept."""
    reach.prepare([c.path for c in targets])
    hot = reach.hot_path()
    prepared = [_prepare(c, explainer, kept, hot.of(c.path)) for c in targets]
    pending = [p for p in prepared if p.code is not None]
    for p, found in zip(pending, analyse_many([p.code for p in pending if p.code]), strict=True):
        kept.put(p.key, found)
        p.found = found
    return prepared


def _noted(c: ChangedFile, found: list[Finding]) -> list[Finding]:
    """The code findings of a file, its most severe one carrying the file's note (an edit made through an
    installer's hard link is in the cache too, and in the environments named)."""
    if not c.note or not found:
        return found
    worst = max(range(len(found)), key=lambda n: found[n].severity)
    found = list(found)
    found[worst] = replace(found[worst], message=f"{found[worst].message}; {c.note}")
    return found


@dataclass
class _Habits:
    """The environment's running processes as bytecode evidence needs them, read from /proc once."""

    target: Target
    _found: list[Habit] | None = None

    def __call__(self) -> list[Habit]:
        if self._found is None:
            from .deploy.processes.running import bytecode_habits

            self._found = bytecode_habits(self.target)
        return self._found

    def truth(self, path: str, state: Loaded, why: str) -> tuple[Loaded, tuple[str, ...]]:
        """The bytecode verdict of ``path`` with what the processes say: none of them writes bytecode → it
        cannot tell (``unknown``, why); each visible process started before or after the edit."""
        habits = self()
        try:
            edited = os.stat(path).st_mtime
        except OSError:
            return state, (why,)
        timing = tuple(
            f"pid {h.pid} started before the edit: it runs the old code unless it imports the module only now"
            if h.started < edited
            else f"pid {h.pid} started after the edit: it runs this code once it imports the module"
            for h in habits[:5]
        )
        blind = [h for h in habits if not h.writes_bytecode]
        if blind:
            return Loaded.UNKNOWN, (f"bytecode cannot tell: pid {blind[0].pid} {blind[0].why}", *timing)
        return state, (why, *timing)


def _judged(f: Finding) -> bool:
    """Whether code analysis judges the file of ``f``: a modified or unexpected ``.py`` file, or a startup
    hook (``sitecustomize.py``, ``usercustomize.py``, the import lines of a ``.pth`` file)."""
    if f.line is not None:
        return False
    if f.kind is Kind.STARTUP_HOOK:
        return f.path.endswith((".py", ".pth"))
    return f.kind in (Kind.MODIFIED, Kind.UNEXPECTED) and f.path.endswith(".py")


def _hook_source(path: str, data: bytes) -> bytes:
    """What of a startup hook runs, as Python: a ``.pth`` file's import lines (the others blank, so line
    numbers hold); a ``.py`` hook whole."""
    if not path.endswith(".pth"):
        return data
    return b"".join(
        line if line.startswith((b"import ", b"import\t")) else b"\n"
        for line in data.splitlines(keepends=True)
    )


@dataclass
class _Prepared:
    """One file on its way through analysis: ``found`` once analysis has spoken (kept from an earlier run,
    or nothing to read), else ``code`` to judge under ``key``; the change's finding says why when neither
    (the file could not be read)."""

    change: ChangedFile
    found: list[Finding] | None = None
    key: str = ""
    code: CodeChange | None = None


def _prepare(
    c: ChangedFile, explainer: Explainer, kept: KeptAnalyses, hot: tuple[tuple[str, str], ...]
) -> _Prepared:
    """What analysis says of one file if it is known, else the change to judge (``hot``: its functions on
    the framework's hot path from elsewhere)."""
    from .analysis import CodeChange
    from .pristine.explain import read_installed

    f, entry = c.finding, c.entry
    try:
        after = read_installed(c.path)
    except PatchguardError as exc:  # one unreadable file is a note on its finding, not the end of the scan
        note = f"its code was not judged: {exc.message}"
        return _Prepared(c.told(replace(f, message=f"{f.message}; {note}", evidence=(*f.evidence, note))))
    if after is None:
        return _Prepared(c, found=[])
    recorded = f"{entry.algorithm}={entry.digest}" if entry is not None and entry.digest else None
    if f.kind is Kind.MODIFIED and c.dist is not None and recorded is not None:
        key = kept.key(f.path, f.distribution, f.version, recorded, after, hot)
        found = kept.get(key)
        if found is not None:
            return _Prepared(c, found=found)
        try:
            before = explainer.pristine_bytes(c)
        except PatchguardError:
            before = None
        if before is not None:
            code = CodeChange(f.path, before, after, f.distribution, f.version, hot)
            return _Prepared(c, key=key, code=code)
    # A file nobody installed is all added (its baseline is empty); a modified one without a pristine
    # source is judged whole, and may be upstream code (``baseline: none``).
    added = f.kind in (Kind.UNEXPECTED, Kind.STARTUP_HOOK)
    if f.kind is Kind.STARTUP_HOOK:
        after = _hook_source(c.path, after)
    key = kept.key(f.path, f.distribution, f.version, "added" if added else "none", after, hot)
    found = kept.get(key)
    if found is not None:
        return _Prepared(c, found=found)
    code = CodeChange(f.path, b"" if added else None, after, f.distribution, f.version, hot)
    return _Prepared(c, key=key, code=code)


def _with_reach(
    change: ChangedFile, code: list[Finding], reach: ReachContext, habits: _Habits
) -> list[Finding]:
    """The findings analysis made of a changed file, with its reach, bytecode evidence and patch set."""
    from .analysis.reach import FileReach, loaded

    f, path = change.finding, change.path
    kept_file = f.kind in (Kind.UNEXPECTED, Kind.STARTUP_HOOK)
    if kept_file:
        # The file itself stays an `unexpected` / `startup-hook` finding; analysis adds what its code does.
        code = [c for c in code if c.kind is Kind.INJECTED_CODE]
    if not code:
        return [f]
    file_reach = (
        reach.reach(path)
        if f.kind is not Kind.STARTUP_HOOK
        else FileReach(Reach.ACTIVE, ("a startup hook: it runs at every interpreter start",))
    )
    state: Loaded | None
    why: tuple[str, ...] = ()
    if path.endswith(".pth"):
        state = None  # not a module: no bytecode to tell
    else:
        state, why = habits.truth(path, *loaded(path))
    partial = "" if f.patch_set_exact else f" ({f.patch_set} plus other edits)"
    judged = [
        replace(
            c,
            reach=_code_reach(c, file_reach),
            loaded=state,
            evidence=(*file_reach.evidence, *why, *c.evidence),
            patch_set=f.patch_set,
            patch_set_exact=f.patch_set_exact,
            digest=f.digest,
            message=c.message + partial,
        )
        for c in code
    ]
    return [f, *judged] if kept_file else judged


def _code_reach(c: Finding, file: FileReach) -> Reach:
    """A code finding's reach: its file's; ``dormant`` when the code cannot run; ``conditional`` when a gate
    guards it on the live path. Module-level code may reach further than the file's functions: a model module
    of another architecture that the server imports runs its module-level code, not its model."""
    gate_kind = c.gate.kind if c.gate is not None else None
    if gate_kind is GateKind.DEAD:
        return Reach.DORMANT
    reach = file.module_level if file.module_level is not None and c.function is None else file.reach
    if gate_kind and reach is Reach.ACTIVE:
        return Reach.CONDITIONAL
    return reach


def _served_by(pol: Policy, architectures: Sequence[str], model_config: str | None) -> list[str]:
    """The architectures served: the caller's and the policy's, and those of either's ``config.json``."""
    from .analysis.reach import architectures_from_config

    archs = [*architectures, *pol.architectures]
    for config in (model_config, pol.model_config):
        archs += architectures_from_config(config) if config else []
    return archs


def _not_a_trial(scanned: Scanned) -> None:
    """A trial state (a bisect under way) is not the environment the gate is asked about: could not check."""
    if scanned.report.trial is not None:
        from .txn import SessionBusy

        raise SessionBusy(
            f"{scanned.report.trial} holds this environment in trial states: it cannot be judged now",
            path=scanned.target.site_packages[0],
            hint="check again when the bisect has ended (it puts every file back first)",
        )


def _policy_sources(pol: Policy, fetch: SourceOptions | None) -> SourceOptions:
    """The command line's pristine sources with the policy's (``wheelhouse``, ``offline``, index keys)."""
    from .pristine.sources import SourceOptions

    given, settings = fetch or SourceOptions(), pol.settings
    return SourceOptions(
        (*given.wheelhouse, *settings.wheelhouse),
        given.offline or settings.offline,
        given.index_url or settings.index_url,
        (*given.extra_index_urls, *settings.extra_index_url),
        (*given.find_links, *settings.find_links),
        given.progress,
    )


def check(
    *,
    target: Target,
    policy: Policy | str | None = None,
    lock: str | None = None,
    patches: str | None = None,
    use_cache: bool = True,
    architectures: Sequence[str] = (),
    model_config: str | None = None,
    frameworks: Sequence[str] = (),
    fetch: SourceOptions | None = None,
) -> CheckResult:
    """The pre-restart gate on ``target``: scan, apply the policy (and compare with a lock), and judge
    (:func:`patchguard.check` is its public face)."""
    from .deploy.check.gate import evaluate
    from .deploy.check.policy import load_policy

    pol = policy if isinstance(policy, Policy) else load_policy(policy)
    patches = patches or pol.patches
    if pol.allowed_sets:
        from .patchsets.model import load_sets, patches_dir

        pol.check_set_names([s.name for s in load_sets(patches)], patches_dir(patches))
    archs = _served_by(pol, architectures, model_config)
    scanned = run(
        target=target,
        patches=patches,
        use_cache=use_cache,
        analyse=True,
        architectures=archs,
        frameworks=[*frameworks, *pol.frameworks],
        fetch=_policy_sources(pol, fetch),
    )
    _not_a_trial(scanned)
    scanned = replace(scanned, report=with_sets(scanned, patches))
    states = None
    if pol.required_sets:
        from .patchsets.status import states_of

        states = states_of(scanned.target, scanned.dists, patches)
    return evaluate(scanned, pol, states, lock)


def lock(*, target: Target, patches: str | None = None, output: str | None = None) -> dict[str, Any]:
    """The lock of ``target`` (``patchguard.lock/1``), also written to ``output`` when given
    (:func:`patchguard.lock` is its public face)."""
    from .deploy.identity.lockfile import make_lock

    doc = make_lock(run(target=target), patches)
    if output is not None:  # the bytes `patchguard lock -o FILE` writes
        from ._fs import write_atomically
        from .deploy.identity.lockfile import lock_bytes

        write_atomically(output, lock_bytes(doc), make_dirs=False)
    return doc


def plan(
    requirements: Sequence[str] = (),
    *,
    target: Target,
    requirement_files: Sequence[str] = (),
    report: str | None = None,
    patches: str | None = None,
    fetch: SourceOptions | None = None,
) -> UpgradePlan:
    """What an upgrade of ``target`` to ``requirements`` does to the hand patches, before it happens
    (:func:`patchguard.plan` is its public face)."""
    from .deploy.upgrades.upgrade import plan_upgrade, read_targets
    from .pristine.sources import SourceOptions

    _named_patches(patches)
    targets = read_targets(requirements, requirement_files, report)
    scanned = run(target=target, patches=patches)
    return plan_upgrade(scanned, targets, patches=patches, fetch=fetch or SourceOptions())
