"""Commands that put things back or change them: ``restore``, ``apply``, ``revert``, ``capture``; and where
patch sets stand: ``sets``, ``status``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from ..formats import CAPTURE, RESTORE, SET_CHANGE, SETS, STATUS
from ..model import for_terminal
from ._common import (
    EXIT_FINDINGS,
    environment_options,
    errors_to_exit,
    note,
    patches_option,
    path_option,
    say_recovered,
    source_options,
)

if TYPE_CHECKING:
    from ..env import Target
    from ..pristine.sources import SourceOptions


@click.command()
@click.argument("distributions", nargs=-1, required=True)
@environment_options
@source_options
@path_option
@click.option("--dry-run", is_flag=True, help="Say what would be restored; write nothing.")
@click.option(
    "--remove-unexpected",
    is_flag=True,
    help="Also move files no RECORD lists out of the packages (into the transaction's backup).",
)
@click.option("--force", is_flag=True, help="Restore files that hold a set in place too (undoing it).")
@patches_option
@click.option(
    "--format", "fmt", type=click.Choice(RESTORE.names), default=RESTORE.default, show_default=True,
    help="json: the patchguard.restore/1 document.",
)
@errors_to_exit
def restore(
    distributions: tuple[str, ...],
    environment: Target,
    fetch: SourceOptions,
    paths: tuple[str, ...],
    dry_run: bool,
    remove_unexpected: bool,
    force: bool,
    patches: str | None,
    fmt: str,
) -> None:
    """Put modified and missing files back to the wheel's bytes, all in one transaction."""
    from ..patchsets.keep import restore as run_restore

    result = run_restore(
        distributions,
        target=environment,
        paths=paths,
        dry_run=dry_run,
        remove_unexpected=remove_unexpected,
        fetch=fetch,
        force=force,
        patches=patches,
    )
    say_recovered(result.recovered)
    for text in result.notes:
        note(f"note: {text}")
    document = result.document()
    click.echo(RESTORE.get(fmt).render(document), nl=False)
    if document.still:
        # The transaction did commit: this is a finding about the result, not "nothing changed".
        still = for_terminal(", ".join(document.still))
        click.echo(f"patchguard: restored, but still not pristine: {still}", err=True)
        sys.exit(EXIT_FINDINGS)
    if document.txid is not None:
        _say_restart(environment)


def _say_restart(environment: Target) -> None:
    """After a write: the running processes of the environment that now run older code (restart them)."""
    from ..deploy.processes.running import Verdict, running
    from ..errors import PatchguardError

    try:
        found = running(environment)
    except (OSError, PatchguardError):
        return  # no /proc to read: nothing to say
    for p in found.processes:
        if p.verdict is Verdict.STALE:
            # Not a note: -q never hides a restart that is needed.
            command = for_terminal(p.command[:80])
            click.echo(
                f"restart needed: pid {p.pid} runs the code from before this change ({command})", err=True
            )


def _set_command(name: str, reverse: bool, help_text: str) -> click.Command:
    def command(
        set_name: str,
        patches: str | None,
        environment: Target,
        dry_run: bool,
        force_version: bool,
        fmt: str,
    ) -> None:
        from ..patchsets.ops import apply_set, revert_set

        run = revert_set if reverse else apply_set
        out = run(
            set_name,
            patches=patches,
            target=environment,
            dry_run=dry_run,
            force_version=force_version,
        )
        say_recovered(out.recovered)
        if out.action.changed and not dry_run:
            _say_restart(environment)
        document = out.document(reverse)
        click.echo(SET_CHANGE.get(fmt).render(document), nl=False)
        if document.changed and not dry_run and not document.clean:
            sys.exit(EXIT_FINDINGS)  # a reverted file is still not its wheel's

    decorators: list[Callable[[Callable[..., None]], Callable[..., None]]] = [
        click.option(
            "--set", "set_name", required=True, metavar="NAME", help="The patch set (patches/NAME/)."
        ),
        patches_option,
        environment_options,
        click.option("--dry-run", is_flag=True, help="Say what would change; write nothing."),
        click.option(
            "--force-version",
            is_flag=True,
            help="Try even if the installed version is outside the set's targets.",
        ),
        click.option(
            "--format", "fmt", type=click.Choice(SET_CHANGE.names), default=SET_CHANGE.default,
            show_default=True, help="json: the patchguard.set-change/1 document.",
        ),
        errors_to_exit,
    ]
    func: Callable[..., None] = command
    for decorate in reversed(decorators):
        func = decorate(func)
    return click.command(name, help=help_text)(func)


apply = _set_command(
    "apply", False, "Apply a named patch set: all files or none. Already applied is a no-op."
)
revert = _set_command(
    "revert", True, "Revert a named patch set, applied by patchguard or by hand; verify each file."
)


@click.command("sets")
@patches_option
@environment_options
@errors_to_exit
def sets(patches: str | None, environment: Target) -> None:
    """List patch sets and where each stands in the environment."""
    from ..patchsets.status import set_states

    states, recovered = set_states(target=environment, patches=patches)
    say_recovered(recovered)
    click.echo(SETS.get().render(states), nl=False)


@click.command()
@patches_option
@environment_options
@click.option(
    "--format", "fmt", type=click.Choice(STATUS.names), default=STATUS.default, show_default=True,
    help="json: the patchguard.status/1 document.",
)
@errors_to_exit
def status(patches: str | None, environment: Target, fmt: str) -> None:
    """Applied sets, drift, and unfinished transactions (rolled back on sight)."""
    from ..patchsets.status import environment_status

    document = environment_status(target=environment, patches=patches)
    click.echo(STATUS.get(fmt).render(document), nl=False)
    if document.troubled:
        sys.exit(EXIT_FINDINGS)


@click.command()
@click.argument("distributions", nargs=-1)
@click.option(
    "--set", "set_name", required=True, metavar="NAME", help="Name of the set to write (patches/NAME/)."
)
@click.option(
    "--unowned",
    is_flag=True,
    help="Also capture files no distribution owns (sitecustomize.py, .pth files, ...: "
    "the target {environment = true}); --path narrows them.",
)
@path_option
@click.option(
    "--version", "version", metavar="SPEC", help="Versions the set targets (default: == the installed one)."
)
@click.option("--description", default="", help="One line saying what the set is for.")
@click.option("--force", is_flag=True, help="Overwrite an existing set of that name.")
@patches_option
@environment_options
@source_options
@click.option(
    "--format", "fmt", type=click.Choice(CAPTURE.names), default=CAPTURE.default, show_default=True,
    help="json: the patchguard.capture/1 document.",
)
@errors_to_exit
def capture(
    distributions: tuple[str, ...],
    set_name: str,
    paths: tuple[str, ...],
    version: str | None,
    description: str,
    force: bool,
    patches: str | None,
    environment: Target,
    fetch: SourceOptions,
    unowned: bool,
    fmt: str,
) -> None:
    """Write patches/NAME from the current modifications of DISTRIBUTIONS' files (one target each), and
    with --unowned of the files no distribution owns."""
    from ..patchsets.capture import capture_set

    ps = capture_set(
        set_name,
        distributions,
        unowned=unowned,
        paths=paths,
        version=version,
        description=description,
        force=force,
        patches=patches,
        target=environment,
        fetch=fetch,
    )
    click.echo(CAPTURE.get(fmt).render(ps.captured()), nl=False)
