"""``patchguard fleet``: which hosts' environments differ, and in what, from one document per host."""

from __future__ import annotations

import sys

import click

from ..formats import FLEET
from ._common import EXIT_FINDINGS, errors_to_exit, output_option, write


@click.command("fleet")
@click.argument("documents", nargs=-1, required=True, metavar="FILE|DIR...")
@click.option(
    "--baseline",
    metavar="HOST|LOCK",
    help="The reference: a host (a document's file name without .json) or a lock file; default: the "
    "largest group of alike hosts.",
)
@click.option("--format", "fmt", type=click.Choice(FLEET.names), default=FLEET.default, show_default=True)
@output_option
@errors_to_exit
def fleet(documents: tuple[str, ...], baseline: str | None, fmt: str, output: str | None) -> None:
    """Group hosts whose environments are the same, and say what every other host differs in.

    Reads one lock (patchguard lock) or scan report (scan --format json) per host: FILEs, or DIRs of
    *.json files, the file name without .json naming the host (what an Ansible fetch writes). Exit 0 all
    alike, 1 some differ, 2 a document could not be read.
    """
    from ..deploy.identity.fleet import fleet as compare

    result = compare(documents, baseline)
    write(FLEET.get(fmt), result, output, "the fleet")
    if not result.alike:
        sys.exit(EXIT_FINDINGS)
