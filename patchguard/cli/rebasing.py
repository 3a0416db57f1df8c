"""``patchguard rebase``: carry a patch set to another release of its distribution."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from ..model import for_terminal
from ._common import EXIT_FINDINGS, environment_options, errors_to_exit, note, patches_option, source_options

if TYPE_CHECKING:
    from ..patchsets.rebase import RebaseResult
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
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
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
    if fmt == "json":
        from ..formats.jsondoc import valid_text

        click.echo(json.dumps(valid_text(result.to_json()), indent=2))
    else:
        _print(result)
    if not result.complete:
        sys.exit(EXIT_FINDINGS)


def _nothing_to_rebase(r: RebaseResult) -> str:
    what = f"is written for {r.distribution} {r.to_version}" if r.distribution else r.notes[0]
    return for_terminal(f"{r.name} {what}: nothing to rebase")


def _print(r: RebaseResult) -> None:
    if not r.files:
        click.echo(_nothing_to_rebase(r))
        return
    click.echo(for_terminal(f"rebase {r.name}: {r.distribution} {r.from_version} -> {r.to_version}"))
    note(f"  base:   {r.base_source}")
    note(f"  target: {r.target_source}")
    for f in r.files:
        where = f" -> {for_terminal(f.new_path)}" if f.new_path and f.new_path != f.path else ""
        plural = "s" if f.hunks != 1 else ""
        extra = {
            "moved": f" ({(f.similarity or 0):.0%} similar)",
            "upstream": f" ({r.to_version} already has this change)",
            "conflict": f" ({f.conflicting} of {f.hunks} hunk{plural} conflict, {f.regions} region"
            f"{'s' if f.regions != 1 else ''})",
            "lost": " (no file new in the release is similar enough"
            + (f"; the best was {f.similarity:.0%} alike" if f.similarity else "")
            + ")",
            "dropped": " (its changes left behind)",
        }.get(f.outcome.value, f" ({f.hunks} hunk{plural})")
        if f.adjacent:
            extra += f" ({f.adjacent} next to an upstream change, merged line by line: review it)"
        click.echo(f"  {f.outcome.value:<9} {for_terminal(f.path)}{where}{for_terminal(extra)}")
        if f.review and f.outcome.open and not r.dry_run:
            what = "edit" if f.outcome.value == "conflict" else "delete to drop"
            click.echo(f"            {what}: {for_terminal(f.review)}")
    for text in r.notes:
        note(f"note: {text}")
    total, carried, _left = r.hunks
    click.echo(
        f"{carried} of {total} hunks carried; {len(r.conflicts)} file{'s' if len(r.conflicts) != 1 else ''} "
        f"in conflict, {len(r.lost)} lost"
    )
    _print_outcome(r)


def _print_outcome(r: RebaseResult) -> None:
    """What became of the set, and the one thing to do next (names shown escaped)."""
    name, dist, to = for_terminal(r.name), for_terminal(r.distribution), for_terminal(r.to_version)
    if not r.complete:
        if r.dry_run:
            click.echo(
                f"→ would write the files to resolve to patches/{name}.rebase/; the set stays as it is"
            )
        else:
            click.echo(
                f"→ resolve them in {for_terminal(str(r.review_dir))} (SUMMARY.txt says how), then run "
                f"`patchguard rebase --set {name}` again; the set stays as it is until then"
            )
    elif r.written:
        click.echo(
            f"rewrote {name} for {dist} =={to} (the {for_terminal(r.from_version)} set is kept in "
            f"{for_terminal(str(r.history_dir))})\n→ patchguard apply --set {name}"
        )
    elif r.dry_run:
        click.echo(f"→ would rewrite {name} for {dist} =={to}")
    else:
        click.echo(
            f"{dist} {to} already has every change of {name}: nothing to carry "
            "(the set is left as it is; delete it once no environment needs it)"
        )
