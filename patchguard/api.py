"""The public functions of ``import patchguard``: the edge where an environment is named.

Every function here takes the environment as the command line does — ``site_packages`` (directories) or
``python`` (an interpreter), neither for the running one — resolves it into a
:class:`~patchguard.env.Target` once, and hands that on: no stage below takes the pair (an architecture test
holds it). The plain ``wheelhouse``/``offline`` keywords are folded into the stage's
:class:`~patchguard.pristine.sources.SourceOptions` here too. The stages are imported when a function is
called, so ``import patchguard`` stays light.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any

# The types of the public signatures, imported for real: typing.get_type_hints(patchguard.check) must resolve
# them (pydantic, typer and sphinx read them so). None of them imports libcst or git.
from .diffs import FileDiff
from .env import resolve_target
from .integrity.inventory import ProgressCallback
from .model import EnvironmentStatus, Finding, Report, RollbackResult, SetState, UpgradePlan
from .patchsets.model import PatchSet
from .patchsets.ops import SetOutcome
from .pristine.restore import RestoreResult
from .pristine.sources import SourceOptions
from .results import BisectResult, By, CheckResult, Policy, RebaseResult, Trial

__all__ = [
    "apply_set",
    "bisect",
    "capture_set",
    "check",
    "diff",
    "environment_status",
    "lock",
    "plan",
    "rebase_all",
    "rebase_set",
    "restore",
    "revert_set",
    "rollback",
    "scan",
    "set_states",
]


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
    fetch: SourceOptions | None = None,
    frameworks: Sequence[str] = (),
) -> Report:
    """Fingerprint every installed file of an environment against its wheel's RECORD.

    With no arguments, scans the environment of the running interpreter. ``distributions`` limits the
    scan to those names (then the top of site-packages is not searched for startup hooks).
    ``site_packages`` / ``python`` choose another environment, as ``--site-packages`` / ``--python`` do.

    Raises :class:`~patchguard.errors.PatchguardError` subclasses for environments that cannot be read
    and for distributions that are not installed; everything about individual files is a finding.
    Editable installs are compared with their git checkout at ``against``; ``verify_record`` compares
    each installed RECORD with the pristine wheel's (a file edited together with its RECORD row).

    With ``analyse`` (the default), changed code is judged (:mod:`patchguard.analysis`) against its
    pristine source: the store, ``wheelhouse``, the pip/uv caches, or — unless ``offline`` — the wheel
    fetched once from this box's indexes (``fetch``: index options, progress); a file holding its wheel's
    very bytes is a wrong upstream RECORD (``record-wrong``, info). The live path: bytecode, ``entries``,
    ``architectures`` (the framework's registry), ``frameworks`` (what serves, by-name modules included).
    """
    from .audit import scan as run_scan

    return run_scan(
        distributions,
        target=resolve_target(python, site_packages),
        use_cache=use_cache,
        cache_dir=cache_dir,
        workers=workers,
        progress=progress,
        against=against,
        verify_record=verify_record,
        patches=patches,
        analyse=analyse,
        entries=entries,
        architectures=architectures,
        fetch=SourceOptions.of(fetch, wheelhouse, offline),
        frameworks=frameworks,
    )


def check(
    *,
    policy: Policy | str | None = None,
    lock: str | None = None,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    patches: str | None = None,
    use_cache: bool = True,
    architectures: Sequence[str] = (),
    model_config: str | None = None,
    frameworks: Sequence[str] = (),
    fetch: SourceOptions | None = None,
    wheelhouse: Sequence[str] = (),
    offline: bool = False,
) -> CheckResult:
    """The pre-restart gate: scan, apply the policy (and compare with a lock), and judge.

    >>> import patchguard
    >>> result = patchguard.check(policy="/srv/patchguard.toml")  # doctest: +SKIP
    >>> result.passed, result.violations  # doctest: +SKIP
    (True, ())

    Raises :class:`~patchguard.errors.PatchguardError` when the check itself cannot be done (bad policy,
    unreadable lock, missing environment); violations are results, not errors. What is served
    (``architectures``, ``model_config``, ``frameworks``) and where pristine wheels come from (``fetch``)
    are judged as ``scan`` judges them (``wheelhouse``/``offline``: the plain keywords of ``fetch``), the
    policy's keys (``arch``, ``model_config``, ``framework``, ``wheelhouse``, ``offline``, the index keys)
    added."""
    from .audit import check as run_check

    return run_check(
        target=resolve_target(python, site_packages),
        policy=policy,
        lock=lock,
        patches=patches,
        use_cache=use_cache,
        architectures=architectures,
        model_config=model_config,
        frameworks=frameworks,
        fetch=SourceOptions.of(fetch, wheelhouse, offline) if wheelhouse or offline else fetch,
    )


def lock(
    *,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    patches: str | None = None,
    output: str | None = None,
) -> dict[str, Any]:
    """The environment's lock (``patchguard.lock/1``): what ``patchguard lock`` writes — versions, each
    distribution's digest and changed files, the sets in place, the startup hooks. With ``output``, it is
    also written there (atomically: complete or absent).

    >>> import patchguard
    >>> doc = patchguard.lock(python="/srv/venv/bin/python", output="env.lock")  # doctest: +SKIP
    >>> patchguard.check(python="/srv/venv/bin/python", lock="env.lock").passed  # doctest: +SKIP
    True
    """
    from .audit import lock as make_lock

    return make_lock(target=resolve_target(python, site_packages), patches=patches, output=output)


def plan(
    requirements: Sequence[str] = (),
    *,
    requirement_files: Sequence[str] = (),
    report: str | None = None,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    patches: str | None = None,
    fetch: SourceOptions | None = None,
) -> UpgradePlan:
    """What an upgrade to ``requirements`` (pinned: ``vllm==0.34.0``; also requirement files, and pip's
    ``--dry-run --report`` of what it would install) does to the hand patches, before it happens: for
    each set it touches, what ``rebase --all`` will do after it, file by file (carries, already upstream,
    needs review, lost); the changed files it replaces (carried by a set, or in no set: lost); and the
    startup hooks. The new releases' pristine files are fetched from the box's indexes (or ``fetch``'s
    wheelhouses); nothing in the environment changes.

    >>> import patchguard
    >>> p = patchguard.plan(["vllm==0.34.0"])  # doctest: +SKIP
    >>> [(s.name, s.verdict.value) for s in p.sets]  # doctest: +SKIP
    [('sm120-support', 'carries')]
    """
    from .audit import plan as make_plan

    return make_plan(
        requirements,
        target=resolve_target(python, site_packages),
        requirement_files=requirement_files,
        report=report,
        patches=patches,
        fetch=fetch,
    )


def diff(
    distributions: Iterable[str] | None = None,
    *,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    paths: Sequence[str] = (),
    wheelhouse: Sequence[str] = (),
    offline: bool = False,
    against: str = "HEAD",
    fetch: SourceOptions | None = None,
    select: Callable[[Finding], bool] | None = None,
) -> list[FileDiff]:
    """The diff of every changed file against its pristine source (of those whose finding ``select``
    keeps, when given).

    >>> import patchguard
    >>> for d in patchguard.diff(["vllm"], paths=["*/deepseek_v2.py"]):  # doctest: +SKIP
    ...     print(d.text())

    Raises :class:`~patchguard.pristine.sources.NoPristineSource` (listing where it looked) when a changed
    file's distribution has no pristine source.
    """
    from .pristine.explain import diff as make_diff

    return make_diff(
        distributions,
        target=resolve_target(python, site_packages),
        paths=paths,
        against=against,
        fetch=SourceOptions.of(fetch, wheelhouse, offline),
        select=select,
    )


def restore(
    distributions: Iterable[str],
    *,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    paths: Sequence[str] = (),
    dry_run: bool = False,
    remove_unexpected: bool = False,
    wheelhouse: Sequence[str] = (),
    offline: bool = False,
    fetch: SourceOptions | None = None,
    force: bool = False,
    patches: str | None = None,
) -> RestoreResult:
    """Restore every modified and missing file of ``distributions`` to its wheel's bytes, all in one
    transaction, refusing — unless ``force``, and in a dry run as in the real one — to undo a set in place,
    whoever applied it: a set is protected by what is on disk, not by who put it there (``patches``: where
    the sets are, as for ``sets``).

    >>> import patchguard
    >>> result = patchguard.restore(["vllm"], paths=["*/deepseek_v2.py"])  # doctest: +SKIP
    >>> [a.shown for a in result.actions]  # doctest: +SKIP
    ['vllm/model_executor/models/deepseek_v2.py']

    Raises :class:`~patchguard.pristine.sources.NoPristineSource` when a file has no pristine source and
    :class:`~patchguard.txn.TransactionError` when the environment cannot be written; in both cases
    nothing was changed.
    """
    from .patchsets.keep import restore as run_restore

    return run_restore(
        distributions,
        target=resolve_target(python, site_packages),
        paths=paths,
        dry_run=dry_run,
        remove_unexpected=remove_unexpected,
        fetch=SourceOptions.of(fetch, wheelhouse, offline),
        force=force,
        patches=patches,
    )


def apply_set(
    name: str,
    *,
    patches: str | None = None,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    dry_run: bool = False,
    force_version: bool = False,
) -> SetOutcome:
    """Apply a named set: all files or none. Already applied (by patchguard or by hand) is a no-op.

    >>> import patchguard
    >>> patchguard.apply_set("sm120-support", dry_run=True).files  # doctest: +SKIP
    """
    from .patchsets.ops import apply_set as run_apply

    target = resolve_target(python, site_packages)
    return run_apply(name, target=target, patches=patches, dry_run=dry_run, force_version=force_version)


def revert_set(
    name: str,
    *,
    patches: str | None = None,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    dry_run: bool = False,
    force_version: bool = False,
) -> SetOutcome:
    """Revert a named set, whether patchguard applied it or the same edits were made by hand.

    After reverting, each file is checked against its RECORD hash: ``verified pristine``, or what still
    touches it.

    >>> import patchguard
    >>> [v.text for v in patchguard.revert_set("glm5-debug").verdicts]  # doctest: +SKIP
    ['verified pristine', 'verified pristine']
    """
    from .patchsets.ops import revert_set as run_revert

    target = resolve_target(python, site_packages)
    return run_revert(name, target=target, patches=patches, dry_run=dry_run, force_version=force_version)


def capture_set(
    name: str,
    distribution: str | Sequence[str],
    *,
    paths: Sequence[str] = (),
    version: str | None = None,
    description: str = "",
    force: bool = False,
    patches: str | None = None,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    wheelhouse: Sequence[str] = (),
    offline: bool = False,
    fetch: SourceOptions | None = None,
    unowned: bool = False,
) -> PatchSet:
    """Write ``patches/<name>/`` from the current modifications of ``distribution``'s files — of several
    distributions' (one target each) when it names more than one — and with ``unowned``, of the files no
    distribution owns (``sitecustomize.py``, ``.pth`` files, ...: the target ``{environment = true}``).

    Targets are pinned to ``version`` (a specifier, one distribution only; default ``==`` the installed
    version). Refuses to overwrite an existing set unless ``force``. The set is written to a temporary
    directory and renamed into place, so a failure leaves no half-written set.
    """
    from .patchsets.capture import capture_set as run_capture

    return run_capture(
        name,
        distribution,
        target=resolve_target(python, site_packages),
        paths=paths,
        version=version,
        description=description,
        force=force,
        patches=patches,
        fetch=SourceOptions.of(fetch, wheelhouse, offline),
        unowned=unowned,
    )


def set_states(
    *, patches: str | None = None, site_packages: Sequence[str] | None = None, python: str | None = None
) -> tuple[list[SetState], tuple[str, ...]]:
    """Every set of the patches directory and its state in the environment (plus what recovery put back)."""
    from .patchsets.status import set_states as states

    return states(target=resolve_target(python, site_packages), patches=patches)


def environment_status(
    *, patches: str | None = None, site_packages: Sequence[str] | None = None, python: str | None = None
) -> EnvironmentStatus:
    """``status``: the interrupted transactions of each site directory (read before opening the environment
    rolls them back), what that recovery put back, the sets patchguard applied, every set's state, the
    backups. The environment is resolved once; a bad backups setting is refused before anything is rolled
    back, and an error after the rollback still says what was rolled back."""
    from .patchsets.status import environment_status as status

    return status(target=resolve_target(python, site_packages), patches=patches)


def rebase_set(
    name: str,
    *,
    to_version: str | None = None,
    from_version: str | None = None,
    patches: str | None = None,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    wheelhouse: Sequence[str] = (),
    offline: bool = False,
    dry_run: bool = False,
    fetch: SourceOptions | None = None,
    target: str | None = None,
) -> RebaseResult:
    """Carry set ``name`` to ``to_version`` (default: the installed version of its distribution).

    A set of several distributions is carried one target at a time (``target``; by default the one
    whose installed release its version no longer admits): that target's files are merged, its version
    pinned and a history entry written for it; the other targets' files and versions stay as they are.
    Files no distribution owns (the environment target) are never rebased.

    Never writes into the environment. Writes the set (when every file is carried) or the review directory
    ``patches/NAME.rebase/`` (when conflicts or lost files remain); nothing with ``dry_run``.

    >>> import patchguard
    >>> r = patchguard.rebase_set("sm120-support")  # doctest: +SKIP
    >>> r.complete, [f.path for f in r.conflicts]  # doctest: +SKIP
    (True, [])
    """
    from .patchsets.rebase import rebase_set as run_rebase

    return run_rebase(
        name,
        environment=resolve_target(python, site_packages),
        to_version=to_version,
        from_version=from_version,
        patches=patches,
        dry_run=dry_run,
        fetch=SourceOptions.of(fetch, wheelhouse, offline),
        target=target,
    )


def rebase_all(
    *,
    patches: str | None = None,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    wheelhouse: Sequence[str] = (),
    offline: bool = False,
    dry_run: bool = False,
    fetch: SourceOptions | None = None,
) -> tuple[RebaseResult, ...]:
    """Carry every set to the releases installed now: each target of each set whose version does not admit
    its installed release, or that was applied on another release, as :func:`rebase_set` does — rewritten
    where the merge is certain, the rest left for review. What ``plan`` said before the upgrade is what this
    does after it."""
    from .patchsets.rebase import rebase_all as run_rebase_all

    return run_rebase_all(
        environment=resolve_target(python, site_packages),
        patches=patches,
        dry_run=dry_run,
        fetch=SourceOptions.of(fetch, wheelhouse, offline),
    )


def rollback(
    lock: str,
    *,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    patches: str | None = None,
    fetch: SourceOptions | None = None,
    dry_run: bool = False,
) -> RollbackResult:
    """Put the environment back as the lock at ``lock`` says: every distribution whose release differs
    reinstalled from its proven wheel, one the upgrade added removed, the lock's sets applied again — all
    of it in one transaction, or nothing when anything cannot be had or proven.

    >>> import patchguard
    >>> r = patchguard.rollback("before-upgrade.lock")  # doctest: +SKIP
    >>> [(d.name, d.from_version, d.to_version) for d in r.distributions]  # doctest: +SKIP
    [('vllm', '0.34.0', '0.33.0')]
    """
    from .deploy.upgrades.rollback import rollback as run_rollback

    return run_rollback(
        lock, target=resolve_target(python, site_packages), patches=patches, fetch=fetch, dry_run=dry_run
    )


def bisect(
    distributions: Sequence[str] = (),
    *,
    test: str,
    sets: Sequence[str] = (),
    by: str | By = By.FILE,
    repeat: int = 1,
    timeout: float | None = None,
    keep_going: bool = False,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    wheelhouse: Sequence[str] = (),
    offline: bool = False,
    fetch: SourceOptions | None = None,
    patches: str | None = None,
    output: IO[Any] | int | None = None,
    progress: Callable[[Trial], None] | None = None,
) -> BisectResult:
    """Find the hand-made changes a test needs to fail: delta debugging over the changes of
    ``distributions`` against their pristine wheels (or over the applied ``sets``), each trial one
    transaction, the environment put back byte for byte at the end, whatever happens.

    ``test`` is a shell command: exit 0 good, 125 cannot tell, anything else bad (``timeout`` seconds: a
    hang is bad). ``by``: ``file`` (then the hunks of the culprit files), ``hunk`` or ``set``.

    >>> import patchguard
    >>> result = patchguard.bisect(["vllm"], test="pytest tests/test_coherence.py")  # doctest: +SKIP
    >>> [u.label for u in result.culprits]  # doctest: +SKIP
    ['vllm/model_executor/models/deepseek_v2.py hunk 2 (lines 606-612)']

    Raises :class:`~patchguard.patchsets.bisect.BisectError` when the test fails without any change
    (nothing changed then); ``result.found`` is false when it passes with every change.
    """
    from .deploy.bisecting import bisect as run_bisect

    return run_bisect(
        distributions,
        target=resolve_target(python, site_packages),
        test=test,
        sets=sets,
        by=by,
        repeat=repeat,
        timeout=timeout,
        keep_going=keep_going,
        fetch=SourceOptions.of(fetch, wheelhouse, offline),
        patches=patches,
        output=output,
        progress=progress,
    )
