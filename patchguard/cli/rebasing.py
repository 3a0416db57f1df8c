"""``patchguard rebase``: carry a patch set (or every set: ``--all``) to another release of its distribution;
``patchguard plan``: what an upgrade will do to the sets, before it happens."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ..errors import UsageError
from ..formats import PLAN, REBASE, REBASE_ALL, ROLLBACK
from ._common import EXIT_FINDINGS, environment_options, errors_to_exit, patches_option, source_options, write

if TYPE_CHECKING:
    from ..env import Target
    from ..pristine.sources import SourceOptions

__all__ = ["plan", "rebase", "rollback"]


@click.command()
@click.option("--set", "set_name", metavar="NAME", help="The patch set (patches/NAME/).")
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="Every set whose version does not admit the release installed, or that was applied on another "
    "release: carried to the releases installed now (after an upgrade).",
)
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
    set_name: str | None,
    every: bool,
    to_version: str | None,
    from_version: str | None,
    dry_run: bool,
    fmt: str,
    patches: str | None,
    environment: Target,
    fetch: SourceOptions,
    target: str | None,
) -> None:
    """Carry a patch set to another release with a three-way merge against both pristine releases.

    The set is rewritten only when every file is carried; conflicts go to patches/NAME.rebase/ (never into
    site-packages or the set). With --all, every set an upgrade replaced is carried to the releases now
    installed, each as with --set. Exit 0: carried (or nothing to do); 1: conflicts or lost files to
    resolve; 2: it could not be done.
    """
    from ..patchsets.rebase import rebase_all, rebase_set

    if every == bool(set_name) or (every and (to_version or from_version or target)):
        raise UsageError(
            "rebase takes --set NAME (with its options) or --all",
            hint="after an upgrade: patchguard rebase --all; one set: patchguard rebase --set NAME",
        )
    if every:
        results = rebase_all(
            environment=environment, patches=patches, fetch=fetch, dry_run=dry_run
        )
        write(REBASE_ALL.get(fmt), results, None, "the rebase report")
        if not all(r.complete for r in results):
            sys.exit(EXIT_FINDINGS)
        return
    assert set_name is not None
    result = rebase_set(
        set_name,
        to_version=to_version,
        from_version=from_version,
        environment=environment,
        patches=patches,
        fetch=fetch,
        dry_run=dry_run,
        target=target,
    )
    write(REBASE.get(fmt), result, None, "the rebase report")
    if not result.complete:
        sys.exit(EXIT_FINDINGS)


@click.command()
@click.argument("requirements", nargs=-1, metavar="REQUIREMENT...")
@click.option(
    "-r",
    "--requirement",
    "files",
    multiple=True,
    metavar="FILE",
    help="A requirements file of pinned releases (repeatable).",
)
@click.option(
    "--report",
    metavar="FILE",
    help="pip's installation report of the upgrade (pip install --dry-run --report FILE ...): every "
    "distribution pip would install, dependencies included.",
)
@click.option("--format", "fmt", type=click.Choice(PLAN.names), default=PLAN.default, show_default=True)
@patches_option
@environment_options
@source_options
@errors_to_exit
def plan(
    requirements: tuple[str, ...],
    files: tuple[str, ...],
    report: str | None,
    fmt: str,
    patches: str | None,
    environment: Target,
    fetch: SourceOptions,
) -> None:
    """What an upgrade will do to the hand patches, before it happens; nothing is changed.

    For every set the upgrade touches, file by file, what `rebase --all` will do after it: carries (by
    lines, by statements, moved), needs review (why), lost, or already upstream (the set can be retired);
    the changed files the upgrade replaces, carried by a set or in no set (lost); the startup hooks. The new
    releases' files are fetched from the box's indexes (or --wheelhouse). Exit 0: everything carries;
    1: something needs a look; 2: it could not be done.
    """
    from ..audit import plan as make_plan

    result = make_plan(
        requirements,
        requirement_files=files,
        report=report,
        target=environment,
        patches=patches,
        fetch=fetch,
    )
    write(PLAN.get(fmt), result, None, "the plan")
    if not result.complete:
        sys.exit(EXIT_FINDINGS)


@click.command()
@click.option("--lock", "lock", required=True, metavar="FILE", help="The lock written before the upgrade.")
@click.option("--dry-run", is_flag=True, help="Say what would be put back; write nothing.")
@click.option(
    "--format", "fmt", type=click.Choice(ROLLBACK.names), default=ROLLBACK.default, show_default=True
)
@patches_option
@environment_options
@source_options
@errors_to_exit
def rollback(
    lock: str,
    dry_run: bool,
    fmt: str,
    patches: str | None,
    environment: Target,
    fetch: SourceOptions,
) -> None:
    """Put the environment back as a lock says: the way back after an upgrade.

    Every distribution whose release differs from the lock's is reinstalled from its wheel (store, caches,
    wheelhouses, indexes: proven the very build the lock names), one the upgrade added is removed, and the
    sets the lock had in place are applied again — all in one transaction (a crash leaves the environment as
    it was before, or as the lock says). No pip runs. Exit 0: done (or nothing to do); 2: it could not be
    done, nothing changed.
    """
    from ..deploy.upgrades.rollback import rollback as roll_back

    result = roll_back(
        lock,
        target=environment,
        patches=patches,
        fetch=fetch,
        dry_run=dry_run,
    )
    write(ROLLBACK.get(fmt), result, None, "the rollback report")
