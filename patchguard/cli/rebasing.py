"""``patchguard rebase``: carry a patch set to another release of its distribution."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ..formats import REBASE
from ._common import EXIT_FINDINGS, environment_options, errors_to_exit, note, patches_option, source_options

if TYPE_CHECKING:
    from ..pristine.sources import SourceOptions

__all__ = ["rebase"]


@click.command()
@click.option("--set", "set_name", required=True, metavar="NAME", help="The patch set (patches/NAME/).")
@click.option(
    "--to-version", metavar="V", help="The release to carry it to (default: the installed version)."
)
@click.option(
    "--from-version",
    metavar="V",
    help="The release it was written for (default: the one it was applied on here, or its target).",
)
@click.option(
    "--target",
    "target",
    metavar="DIST",
    help="Of a set of several distributions, the one to carry (default: the one its version no longer "
    "admits).",
)
@click.option("--dry-run", is_flag=True, help="Say what would happen; write nothing.")
@click.option("--format", "fmt", type=click.Choice(REBASE.names), default=REBASE.default, show_default=True)
@patches_option
@environment_options
@source_options
@errors_to_exit
def rebase(
    set_name: str,
    to_version: str | None,
    from_version: str | None,
    dry_run: bool,
    fmt: str,
    patches: str | None,
    python: str | None,
    site_packages: tuple[str, ...],
    fetch: SourceOptions,
    target: str | None,
) -> None:
    """Carry a patch set to another release with a three-way merge against both pristine releases.

    The set is rewritten only when every file is carried; conflicts go to patches/NAME.rebase/ (never into
    site-packages or the set). Exit 0: carried (or nothing to do); 1: conflicts or lost files to resolve;
    2: it could not be done.
    """
    from ..patchsets.rebase import rebase_set

    result = rebase_set(
        set_name,
        to_version=to_version,
        from_version=from_version,
        patches=patches,
        site_packages=site_packages or None,
        python=python,
        fetch=fetch,
        dry_run=dry_run,
        target=target,
    )
    chosen = REBASE.get(fmt)
    for line in chosen.notes(result):
        note(line)
    click.echo(chosen.render(result), nl=False)
    if not result.complete:
        sys.exit(EXIT_FINDINGS)
