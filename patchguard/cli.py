"""The ``patchguard`` command: parse arguments, call the library, print, map outcomes to exit codes.

Exit codes (stable): 0 nothing at or above the threshold / success; 1 findings at or above the threshold;
2 usage error or the operation could not be done. Expected errors print one line on stderr, never a
traceback.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from . import __version__
from .errors import PatchguardError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
_FAIL_ON = ("high", "moderate", "minor", "info", "never")


def _environment_options(func: F) -> F:
    """``--python`` / ``--site-packages``: the environment selectors every command accepts."""
    func = click.option(
        "--site-packages",
        "site_packages",
        multiple=True,
        metavar="DIR",
        help="Scan this site-packages directory (repeatable) instead of the running interpreter's.",
    )(func)
    func = click.option(
        "--python",
        "python",
        metavar="PATH",
        help="Scan the environment of this interpreter (asked in an isolated subprocess).",
    )(func)
    return func


def _errors_to_exit(func: F) -> F:
    """Turn expected errors into one line on stderr and exit 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except PatchguardError as exc:
            click.echo(f"patchguard: error: {exc}", err=True)
            sys.exit(EXIT_ERROR)
        except KeyboardInterrupt:
            click.echo("patchguard: interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


class _Progress:
    """A progress bar on stderr, only on a terminal and only once the work has taken a second."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.started = time.monotonic()
        self.bar: Any = None
        self.shown = 0

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if time.monotonic() - self.started < 1.0:
                return
            self.bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
            self.bar.__enter__()
        self.bar.update(done - self.shown)
        self.shown = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="patchguard", message="%(prog)s %(version)s")
def main() -> None:
    """Verify a hand-patched Python environment against the wheels it came from."""


# ``--path GLOB`` (diff, restore, capture): only the files whose RECORD path matches.
_path_option = click.option(
    "--path", "paths", multiple=True, metavar="GLOB", help="Only files whose path matches (repeatable)."
)


def _source_options(func: F) -> F:
    """``--wheelhouse`` / ``--offline``: where pristine wheels come from."""
    func = click.option(
        "--offline", is_flag=True, help="Never download: use wheelhouses and the pip/uv caches only."
    )(func)
    func = click.option(
        "--wheelhouse",
        "wheelhouse",
        multiple=True,
        metavar="DIR",
        help="A directory of wheels to take pristine files from (repeatable; also $PATCHGUARD_WHEELHOUSE).",
    )(func)
    return func


def _say_recovered(paths: tuple[str, ...]) -> None:
    if paths:
        click.echo(
            f"patchguard: rolled back an interrupted transaction first ({len(paths)} file"
            f"{'s' if len(paths) != 1 else ''} put back)",
            err=True,
        )


@main.command()
@click.argument("distributions", nargs=-1)
@_environment_options
@_source_options
@click.option(
    "--verify-record",
    is_flag=True,
    help="Also compare each installed RECORD with the pristine wheel's (catches edits to file and RECORD).",
)
@click.option(
    "--against", default="HEAD", show_default=True, help="Revision editable installs are compared with."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "sarif"]),
    default="table",
    show_default=True,
    help="Output format (sarif: SARIF 2.1.0 for code scanning).",
)
@click.option(
    "--fail-on",
    type=click.Choice(_FAIL_ON),
    default="high",
    show_default=True,
    help="Exit 1 when a finding reaches this severity.",
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
@_errors_to_exit
def scan(
    distributions: tuple[str, ...],
    python: str | None,
    site_packages: tuple[str, ...],
    wheelhouse: tuple[str, ...],
    offline: bool,
    verify_record: bool,
    against: str,
    fmt: str,
    fail_on: str,
    no_cache: bool,
    patches: str | None,
    no_analysis: bool,
    entries: tuple[str, ...],
    architectures: tuple[str, ...],
    model_config: str | None,
) -> None:
    """Fingerprint installed files against their wheels' RECORD.

    With no DISTRIBUTIONS, every distribution of the environment is checked, and the top of
    site-packages is searched for startup hooks (.pth files, sitecustomize) and unowned files.
    """
    from .report import Severity, format_json, format_sarif, format_table
    from .scanner import scan as run_scan

    archs = list(architectures)
    if model_config:
        from .analysis.reach import architectures_from_config

        archs += architectures_from_config(model_config)
    progress = _Progress("verifying") if sys.stderr.isatty() else None
    try:
        report = run_scan(
            distributions,
            site_packages=site_packages or None,
            python=python,
            use_cache=not no_cache,
            progress=progress,
            against=against,
            verify_record=verify_record,
            wheelhouse=wheelhouse,
            offline=offline,
            patches=patches,
            analyse=not no_analysis,
            entries=entries,
            architectures=archs,
        )
    finally:
        if progress is not None:
            progress.close()
    _say_recovered(report.recovered)
    formatter = {"json": format_json, "sarif": format_sarif, "table": format_table}[fmt]
    click.echo(formatter(report), nl=False)
    if fail_on != "never" and report.at_or_above(Severity.parse(fail_on)):
        sys.exit(EXIT_FINDINGS)


@main.command()
@click.argument("distributions", nargs=-1)
@_environment_options
@_source_options
@_path_option
@click.option(
    "--against", default="HEAD", show_default=True, help="Revision editable installs are compared with."
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@_errors_to_exit
def diff(
    distributions: tuple[str, ...],
    python: str | None,
    site_packages: tuple[str, ...],
    wheelhouse: tuple[str, ...],
    offline: bool,
    paths: tuple[str, ...],
    against: str,
    fmt: str,
) -> None:
    """Unified diff of every changed file against its pristine wheel.

    Paths are a/ b/ relative to site-packages, so `git apply -R` and patch sets accept the output.
    Missing files show as deletions, unexpected text files as additions.
    """
    import json

    from .diffs import hunks_json, unified_diff
    from .explain import diff as run_diff

    diffs = run_diff(
        distributions,
        site_packages=site_packages or None,
        python=python,
        paths=paths,
        wheelhouse=wheelhouse,
        offline=offline,
        against=against,
    )
    if fmt == "json":
        doc = {"schema": "patchguard.diff/1", "files": [hunks_json(d) for d in diffs]}
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        # Bytes as they are on disk: a non-UTF-8 file name must reach `git apply` unchanged.
        sys.stdout.flush()
        sys.stdout.buffer.write(unified_diff(diffs).encode("utf-8", "surrogateescape"))
        sys.stdout.buffer.flush()


@main.command()
@click.argument("distributions", nargs=-1, required=True)
@_environment_options
@_source_options
@_path_option
@click.option("--dry-run", is_flag=True, help="Say what would be restored; write nothing.")
@click.option(
    "--remove-unexpected",
    is_flag=True,
    help="Also move files no RECORD lists out of the packages (into the transaction's backup).",
)
@_errors_to_exit
def restore(
    distributions: tuple[str, ...],
    python: str | None,
    site_packages: tuple[str, ...],
    wheelhouse: tuple[str, ...],
    offline: bool,
    paths: tuple[str, ...],
    dry_run: bool,
    remove_unexpected: bool,
) -> None:
    """Put modified and missing files back to the wheel's bytes, all in one transaction."""
    from .report import Kind
    from .restoration import restore as run_restore

    result = run_restore(
        distributions,
        site_packages=site_packages or None,
        python=python,
        paths=paths,
        dry_run=dry_run,
        remove_unexpected=remove_unexpected,
        wheelhouse=wheelhouse,
        offline=offline,
    )
    _say_recovered(result.recovered)
    if not result.actions:
        click.echo("nothing to restore")
        return
    verb = {"restore": "restore", "recreate": "recreate", "remove": "remove"}
    for a in result.actions:
        click.echo(f"{'would ' if dry_run else ''}{verb[a.action]:<9}{a.shown}")
    if dry_run or result.after is None:
        return
    left = {f.path for f in result.after.findings if f.kind in (Kind.MODIFIED, Kind.MISSING)}
    still = [a.shown for a in result.actions if a.action != "remove" and a.shown in left]
    if still:
        # The transaction did commit: this is a finding about the result, not "nothing changed".
        click.echo(f"patchguard: restored, but still not pristine: {', '.join(still)}", err=True)
        sys.exit(EXIT_FINDINGS)
    assert result.committed is not None
    click.echo(
        f"{len(result.actions)} file{'s' if len(result.actions) != 1 else ''} restored in one transaction; "
        f"verified pristine against RECORD (originals kept in {result.committed.backup_dir})"
    )


def _patches_option(func: F) -> F:
    return click.option(
        "--patches",
        "patches",
        metavar="DIR",
        help="Where patch sets live (default: $PATCHGUARD_PATCHES, [tool.patchguard] patches, ./patches).",
    )(func)


def _describe(
    plan_path: str, before: bytes | None, after: bytes | None, offsets: tuple[int, ...], reverse: bool
) -> str:
    if reverse:
        what = "remove" if after is None else "recreate" if before is None else "revert"
    else:
        what = "create" if before is None else "delete" if after is None else "patch"
    moved = [o for o in offsets if o]
    note = f" (hunks moved by {', '.join(f'{o:+d}' for o in moved)} lines)" if moved else ""
    return f"{what:<9}{plan_path}{note}"


def _set_command(reverse: bool) -> Callable[..., None]:
    def command(
        set_name: str,
        patches: str | None,
        python: str | None,
        site_packages: tuple[str, ...],
        dry_run: bool,
        force_version: bool,
    ) -> None:
        from .setops import apply_set, revert_set

        run = revert_set if reverse else apply_set
        out = run(
            set_name,
            patches=patches,
            site_packages=site_packages or None,
            python=python,
            dry_run=dry_run,
            force_version=force_version,
        )
        _say_recovered(out.recovered)
        if out.action in ("already applied", "not applied"):
            click.echo(f"{out.name} is {out.action}; nothing to do")
            return
        verdicts = dict(out.verdicts)
        for f in out.files:
            line = ("would " if dry_run else "") + _describe(f.path, f.before, f.after, f.offsets, reverse)
            if f.path in verdicts:
                line += f": {verdicts[f.path]}"
            click.echo(line)
        if not dry_run:
            n = len(out.files)
            click.echo(f"{out.action} {out.name}: {n} file{'s' if n != 1 else ''} in one transaction")
            if any(v != "verified pristine" and not v.startswith("removed") for v in verdicts.values()):
                sys.exit(EXIT_FINDINGS)

    return command


for _name, _reverse, _help in (
    ("apply", False, "Apply a named patch set: all files or none. Already applied is a no-op."),
    ("revert", True, "Revert a named patch set, applied by patchguard or by hand; verify each file."),
):
    _cmd = _set_command(_reverse)
    _cmd = _errors_to_exit(_cmd)
    _cmd = click.option(
        "--force-version",
        is_flag=True,
        help="Try even if the installed version is outside the set's targets.",
    )(_cmd)
    _cmd = click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")(_cmd)
    _cmd = _environment_options(_cmd)
    _cmd = _patches_option(_cmd)
    _cmd = click.option(
        "--set", "set_name", required=True, metavar="NAME", help="The patch set (patches/NAME/)."
    )(_cmd)
    main.command(_name, help=_help)(_cmd)


@main.command("sets")
@_patches_option
@_environment_options
@_errors_to_exit
def sets_command(patches: str | None, python: str | None, site_packages: tuple[str, ...]) -> None:
    """List patch sets and where each stands in the environment."""
    from .setops import set_states

    states, recovered = set_states(patches=patches, site_packages=site_packages or None, python=python)
    _say_recovered(recovered)
    if not states:
        click.echo("no patch sets (looked in the patches directory; see --patches)")
        return
    w_name = max(len(s.name) for s in states)
    w_targets = max(len(s.targets) for s in states)
    for s in states:
        files = f"{s.files} file{'s' if s.files != 1 else ''}"
        click.echo(f"{s.name:<{w_name}}  {s.targets:<{w_targets}}  {s.state:<18} {files}")
        for d in s.detail:
            click.echo(f"{'':<{w_name}}  {d}")


@main.command()
@_patches_option
@_environment_options
@_errors_to_exit
def status(patches: str | None, python: str | None, site_packages: tuple[str, ...]) -> None:
    """Applied sets, drift, and unfinished transactions (rolled back on sight)."""
    from .env import resolve_target
    from .setops import read_state, set_states
    from .txn import pending

    target = resolve_target(python, site_packages or None)
    for site in target.site_packages:
        journal = pending(site)
        if journal is not None:
            click.echo(f"unfinished transaction {journal.get('txid')} ({journal.get('label')}) in {site}")
    states, recovered = set_states(patches=patches, site_packages=site_packages or None, python=python)
    if recovered:
        click.echo(f"  rolled back: {len(recovered)} file{'s' if len(recovered) != 1 else ''} put back")
    applied_any = False
    for site in target.site_packages:
        for name, rec in sorted(read_state(site)["applied"].items()):
            applied_any = True
            click.echo(
                f"applied  {name}  at {rec.get('time')}  ({len(rec.get('files', {}))} files, by patchguard "
                f"{rec.get('tool_version')})"
            )
    if not applied_any:
        click.echo("no set applied by patchguard")
    drift = False
    for s in states:
        if s.state in ("drifted", "partially applied", "conflict", "applied (by hand)"):
            drift = drift or s.state != "applied (by hand)"
            click.echo(f"{s.state:<18} {s.name}")
            for d in s.detail:
                click.echo(f"  {d}")
    if drift:
        sys.exit(EXIT_FINDINGS)


@main.command()
@click.argument("distribution")
@click.option(
    "--set", "set_name", required=True, metavar="NAME", help="Name of the set to write (patches/NAME/)."
)
@_path_option
@click.option(
    "--version", "version", metavar="SPEC", help="Versions the set targets (default: == the installed one)."
)
@click.option("--description", default="", help="One line saying what the set is for.")
@click.option("--force", is_flag=True, help="Overwrite an existing set of that name.")
@_patches_option
@_environment_options
@_source_options
@_errors_to_exit
def capture(
    distribution: str,
    set_name: str,
    paths: tuple[str, ...],
    version: str | None,
    description: str,
    force: bool,
    patches: str | None,
    python: str | None,
    site_packages: tuple[str, ...],
    wheelhouse: tuple[str, ...],
    offline: bool,
) -> None:
    """Write patches/NAME from the current modifications of DISTRIBUTION's files."""
    from .setops import capture_set

    ps = capture_set(
        set_name,
        distribution,
        paths=paths,
        version=version,
        description=description,
        force=force,
        patches=patches,
        site_packages=site_packages or None,
        python=python,
        wheelhouse=wheelhouse,
        offline=offline,
    )
    targets = ", ".join(f"{t.distribution} {t.version}" for t in ps.targets)
    click.echo(f"wrote {ps.directory} ({targets}): {', '.join(ps.paths)}")


@main.command("check")
@click.option(
    "--policy",
    metavar="FILE",
    help="Policy file (default: [tool.patchguard] of the nearest pyproject.toml or patchguard.toml).",
)
@click.option("--lock", "lock_file", metavar="FILE", help="Also require the environment to match this lock.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "sarif"]), default="text", show_default=True
)
@click.option("--no-cache", is_flag=True, help="Hash every file; neither read nor write the stat cache.")
@_patches_option
@_environment_options
@_errors_to_exit
def check_command(
    policy: str | None,
    lock_file: str | None,
    fmt: str,
    no_cache: bool,
    patches: str | None,
    python: str | None,
    site_packages: tuple[str, ...],
) -> None:
    """The pre-restart gate: scan, apply the policy (and a lock), exit 0 pass / 1 fail / 2 could not check."""
    import json
    from dataclasses import replace

    from .policy import check
    from .report import format_sarif

    result = check(
        policy=policy,
        lock=lock_file,
        site_packages=site_packages or None,
        python=python,
        patches=patches,
        use_cache=not no_cache,
    )
    report = result.report
    _say_recovered(report.recovered)
    if fmt == "json":
        doc = {
            "schema": "patchguard.check/1",
            "passed": result.passed,
            "violations": list(result.violations),
            "policy": result.policy.path,
            "report": report.to_json(),
        }
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
    elif fmt == "sarif":
        violating = tuple(f for f in report.findings if result.policy.violates(f))
        click.echo(format_sarif(replace(report, findings=violating)), nl=False)
    else:
        for line in result.violations:
            click.echo(line)
        n = len(result.violations)
        where = f" (policy: {result.policy.path})" if result.policy.path else ""
        summary = f"{report.files_checked} files in {len(report.distributions)} distributions"
        if result.passed:
            click.echo(f"check passed: {summary}, no violation{where}")
        else:
            click.echo(f"check failed: {n} violation{'s' if n != 1 else ''} in {summary}{where}")
    if not result.passed:
        sys.exit(EXIT_FINDINGS)


@main.command("lock")
@click.option("--output", "-o", metavar="FILE", help="Write the lock here instead of standard output.")
@_environment_options
@_errors_to_exit
def lock_command(output: str | None, python: str | None, site_packages: tuple[str, ...]) -> None:
    """Write a deterministic, content-addressed description of the environment (fleet identity)."""
    from .lockfile import dumps, make_lock
    from .scanner import run

    scanned = run(site_packages=site_packages or None, python=python)
    _say_recovered(scanned.recovered)
    text = dumps(make_lock(scanned))
    if output:
        from .cache import write_atomically

        try:
            write_atomically(output, text.encode(), make_dirs=False)
        except OSError as exc:
            raise PatchguardError(f"cannot write the lock ({exc.strerror or exc})", path=output) from None
    else:
        click.echo(text, nl=False)
