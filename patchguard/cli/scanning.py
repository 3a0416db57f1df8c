"""Commands that read an environment: ``scan``, ``diff``, ``check``, ``lock``, ``running``.

Each writes one document, in the format asked for by name from its registry in :mod:`patchguard.formats`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ..formats import CHECK, DIFF, LOCK, REPORT, RUNNING, CheckDocument, ReportDocument
from ..model import Severity, for_terminal

if TYPE_CHECKING:
    from ..env import Target
    from ..model import Report
    from ..pristine.sources import SourceOptions
    from ..results import Policy

from ._common import (
    EXIT_ERROR,
    EXIT_FINDINGS,
    FAIL_ON,
    Progress,
    against_option,
    environment_options,
    errors_to_exit,
    framework_option,
    note,
    output_option,
    patches_option,
    path_option,
    say_recovered,
    source_options,
    use_colour,
    write,
)


@click.command()
@click.argument("distributions", nargs=-1)
@environment_options
@source_options
@click.option(
    "--verify-record",
    is_flag=True,
    help="Also compare each installed RECORD with the pristine wheel's (catches edits to file and RECORD).",
)
@against_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(REPORT.names),
    default=REPORT.default,
    show_default=True,
    help="Output format (sarif: SARIF 2.1.0 for code scanning).",
)
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_ON),
    default=None,
    help="Exit 1 when a finding reaches this severity [default: fail_on of the configuration, else high].",
)
@click.option("--no-cache", is_flag=True, help="Hash every file; neither read nor write the stat cache.")
@click.option("--patches", "patches", metavar="DIR", help="Patch sets to attribute modifications to.")
@click.option("--no-analysis", is_flag=True, help="Integrity only: do not judge changed code.")
@click.option(
    "--entry", "entries", multiple=True, metavar="MODULE", help="Code reachable from this module is live."
)
@click.option(
    "--arch", "architectures", multiple=True, metavar="NAME", help="Model architecture being served."
)
@click.option(
    "--model-config", metavar="FILE", help="A model config.json: its architectures are being served."
)
@framework_option
@output_option
@click.option("--no-color", "no_color", is_flag=True, help="No colour, even on a terminal (also: NO_COLOR).")
@errors_to_exit
def scan(
    distributions: tuple[str, ...],
    environment: Target,
    fetch: SourceOptions,
    verify_record: bool,
    against: str,
    fmt: str,
    fail_on: str | None,
    no_cache: bool,
    patches: str | None,
    no_analysis: bool,
    entries: tuple[str, ...],
    architectures: tuple[str, ...],
    model_config: str | None,
    frameworks: tuple[str, ...],
    output: str | None,
    no_color: bool,
) -> None:
    """Fingerprint installed files against their wheels' RECORD.

    With no DISTRIBUTIONS, every distribution of the environment is checked, and the top of
    site-packages is searched for startup hooks (.pth files, sitecustomize) and unowned files.
    """
    from ..audit import scan as run_scan

    policy = _configured()
    if policy is not None:  # what the command line leaves unsaid, the operator's configuration says
        architectures = architectures or policy.architectures
        frameworks = frameworks or policy.frameworks
        model_config = model_config or policy.model_config
    threshold = _threshold(fail_on, policy)
    archs = _served(architectures, model_config)
    progress = Progress("verifying") if sys.stderr.isatty() else None
    try:
        report = run_scan(
            distributions,
            target=environment,
            use_cache=not no_cache,
            progress=progress,
            against=against,
            verify_record=verify_record,
            fetch=fetch,
            patches=patches,
            analyse=not no_analysis,
            entries=entries,
            architectures=archs,
            frameworks=frameworks,
        )
    finally:
        if progress is not None:
            progress.close()
    say_recovered(report.recovered)
    if report.trial is not None:
        note(f"warning: {report.trial} holds this environment in trial states: what is shown is a trial")
    _write_report(report, fmt, output, no_color, policy)
    if threshold is not None and report.at_or_above(threshold):
        sys.exit(EXIT_FINDINGS)


def _write_report(
    report: Report, fmt: str, output: str | None, no_color: bool, policy: Policy | None
) -> None:
    chosen = REPORT.get(fmt)
    wanted = policy.wanted_sets if policy is not None else frozenset()
    applied = _applied(report) if chosen.needs_applied_sets else ()
    write(chosen, ReportDocument(report, use_colour(output, no_color), wanted, applied), output, "the report")


def _served(architectures: tuple[str, ...], model_config: str | None) -> list[str]:
    """The architectures served: ``--arch``, and those of ``--model-config``'s ``config.json``."""
    if not model_config:
        return list(architectures)
    from ..analysis.reach import architectures_from_config

    return [*architectures, *architectures_from_config(model_config)]


def _configured() -> Policy | None:
    """The nearest policy (``patchguard.toml``, ``[tool.patchguard]``): what scan takes from it when the
    command line does not say — the sets it allows or requires, ``arch``, ``framework``, ``model_config``,
    ``fail_on``. ``None`` when there is none, or it is broken: ``check`` is the place that says so."""
    from ..deploy.check.policy import load_policy
    from ..errors import PatchguardError

    try:
        return load_policy()
    except PatchguardError:
        return None


def _threshold(fail_on: str | None, policy: Policy | None) -> Severity | None:
    """The severity at which scan exits 1: ``--fail-on``, else the configuration's ``fail_on``, else high."""
    if fail_on is None:
        return policy.fail_on if policy is not None else Severity.HIGH
    return None if fail_on == "never" else Severity.parse(fail_on)


def _applied(report: Report) -> tuple[str, ...]:
    """The sets in place in the scanned environment (patchguard's state, and sets applied by hand): what the
    scan found, as its report says."""
    return tuple(sorted(name for name, _digest in report.applied_sets))


@click.command()
@click.argument("distributions", nargs=-1)
@environment_options
@source_options
@path_option
@against_option
@click.option("--format", "fmt", type=click.Choice(DIFF.names), default=DIFF.default, show_default=True)
@output_option
@errors_to_exit
def diff(
    distributions: tuple[str, ...],
    environment: Target,
    fetch: SourceOptions,
    paths: tuple[str, ...],
    against: str,
    fmt: str,
    output: str | None,
) -> None:
    """Unified diff of every changed file against its pristine wheel.

    Paths are a/ b/ relative to site-packages, so `git apply -R` and patch sets accept the output.
    Missing files show as deletions, unexpected text files as additions.
    """
    from ..pristine.explain import diff as run_diff

    diffs = run_diff(
        distributions,
        target=environment,
        paths=paths,
        fetch=fetch,
        against=against,
    )
    # Bytes as they are on disk: a non-UTF-8 file name must reach `git apply` unchanged.
    write(DIFF.get(fmt), diffs, output, "the diff")
    unread = [d for d in diffs if d.problem is not None]
    for d in unread:
        click.echo(
            f"patchguard: error: {for_terminal(d.problem or '')}: not diffed, the other files were", err=True
        )
    if unread:
        sys.exit(EXIT_ERROR)


@click.command("check")
@click.option(
    "--policy",
    metavar="FILE",
    help="Policy file (default: [tool.patchguard] of the nearest pyproject.toml or patchguard.toml).",
)
@click.option("--lock", "lock_file", metavar="FILE", help="Also require the environment to match this lock.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(CHECK.names),
    default=CHECK.default,
    show_default=True,
)
@click.option("--no-cache", is_flag=True, help="Hash every file; neither read nor write the stat cache.")
@patches_option
@environment_options(unresolved=lambda exc, kwargs: _could_not_check(exc, kwargs["fmt"], kwargs["output"]))
@source_options
@click.option(
    "--arch", "architectures", multiple=True, metavar="NAME", help="Model architecture being served."
)
@click.option(
    "--model-config", metavar="FILE", help="A model config.json: its architectures are being served."
)
@framework_option
@output_option
@errors_to_exit
def check(
    policy: str | None,
    lock_file: str | None,
    fmt: str,
    no_cache: bool,
    patches: str | None,
    environment: Target,
    fetch: SourceOptions,
    architectures: tuple[str, ...],
    model_config: str | None,
    frameworks: tuple[str, ...],
    output: str | None,
) -> None:
    """The pre-restart gate: scan, apply the policy (and a lock), exit 0 pass / 1 fail / 2 could not check.

    The exit codes are what health checkers read (node-problem-detector's custom plugins, Slurm's NHC: 0 ok,
    1 problem, other unknown); --format status writes their one line (OK:, PROBLEM:, UNKNOWN:).
    """
    from ..audit import check as run_check

    chosen = CHECK.get(fmt)
    try:
        result = run_check(
            policy=policy,
            lock=lock_file,
            target=environment,
            patches=patches,
            use_cache=not no_cache,
            architectures=architectures,
            model_config=model_config,
            frameworks=frameworks,
            fetch=fetch,
        )
    except Exception as exc:
        _could_not_check(exc, fmt, output)
        raise
    report = result.report
    say_recovered(report.recovered)
    for line in result.warnings:
        note(f"warning: {line}")
    applied = _applied(report) if chosen.needs_applied_sets else ()
    write(chosen, CheckDocument(result, lock_file is not None, applied), output, "the verdict")
    if not result.passed:
        sys.exit(chosen.exits[1])


def _could_not_check(exc: Exception, fmt: str, output: str | None) -> None:
    """The check could not be done: said on stderr (errors_to_exit, after this) and in a health check's line
    (UNKNOWN); a monitoring system with its own code for "could not check" gets that code here."""
    from ..errors import PatchguardError
    from ._common import emit, error_line, internal_error

    chosen = CHECK.get(fmt)
    known = error_line(exc) if isinstance(exc, (PatchguardError, OSError)) else internal_error(exc)
    failed = chosen.failure(known)
    if failed:
        emit(failed, output, chosen.what or "the verdict")
    if chosen.exits[2] != EXIT_ERROR:
        click.echo(f"patchguard: error: {known}", err=True)
        sys.exit(chosen.exits[2])


@click.command("lock")
@output_option
@patches_option
@environment_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(LOCK.names),
    default=LOCK.default,
    show_default=True,
    help="json: the patchguard.lock/1 document (the only form a lock has).",
)
@errors_to_exit
def lock(output: str | None, patches: str | None, environment: Target, fmt: str) -> None:
    """Write a deterministic, content-addressed description of the environment (fleet identity)."""
    from ..audit import run
    from ..deploy.identity.lockfile import make_lock

    scanned = run(target=environment)
    say_recovered(scanned.recovered)
    write(LOCK.get(fmt), make_lock(scanned, patches), output, "the lock")


@click.command("running")
@environment_options
@click.option("--format", "fmt", type=click.Choice(RUNNING.names), default=RUNNING.default, show_default=True)
@output_option
@errors_to_exit
def running(environment: Target, fmt: str, output: str | None) -> None:
    """Which running processes of the environment execute code older than its files (restart them).

    Reads /proc only: never signals, stops or attaches. Exit 0 all current, 1 any stale, 2 could not check.
    """
    from ..deploy.processes.running import running as find_running

    found = find_running(environment)
    write(RUNNING.get(fmt), found, output, "the report")
    if found.exit_code:
        sys.exit(found.exit_code)
