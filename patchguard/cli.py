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
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--fail-on",
    type=click.Choice(_FAIL_ON),
    default="high",
    show_default=True,
    help="Exit 1 when a finding reaches this severity.",
)
@click.option("--no-cache", is_flag=True, help="Hash every file; neither read nor write the stat cache.")
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
) -> None:
    """Fingerprint installed files against their wheels' RECORD.

    With no DISTRIBUTIONS, every distribution of the environment is checked, and the top of
    site-packages is searched for startup hooks (.pth files, sitecustomize) and unowned files.
    """
    from .report import Severity, format_json, format_table
    from .scanner import scan as run_scan

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
        )
    finally:
        if progress is not None:
            progress.close()
    click.echo(format_json(report) if fmt == "json" else format_table(report), nl=False)
    if fail_on != "never" and report.at_or_above(Severity.parse(fail_on)):
        sys.exit(EXIT_FINDINGS)


@main.command()
@click.argument("distributions", nargs=-1)
@_environment_options
@_source_options
@click.option(
    "--path", "paths", multiple=True, metavar="GLOB", help="Only files whose path matches (repeatable)."
)
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
        click.echo(unified_diff(diffs), nl=False)


@main.command()
@click.argument("distributions", nargs=-1, required=True)
@_environment_options
@_source_options
@click.option(
    "--path", "paths", multiple=True, metavar="GLOB", help="Only files whose path matches (repeatable)."
)
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
        click.echo(f"patchguard: error: still not pristine after restore: {', '.join(still)}", err=True)
        sys.exit(EXIT_ERROR)
    assert result.committed is not None
    click.echo(
        f"{len(result.actions)} file{'s' if len(result.actions) != 1 else ''} restored in one transaction; "
        f"verified pristine against RECORD (originals kept in {result.committed.backup_dir})"
    )
