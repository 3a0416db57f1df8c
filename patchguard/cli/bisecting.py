"""``patchguard bisect``: which hand-made change breaks a test."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ..formats import BISECT
from ._common import (
    environment_options,
    errors_to_exit,
    note,
    output_option,
    patches_option,
    source_options,
    write,
)

if TYPE_CHECKING:
    from ..env import Target
    from ..patchsets.bisect import Trial
    from ..pristine.sources import SourceOptions


@click.command()
@click.argument("distributions", nargs=-1)
@click.option(
    "--test", "test", required=True, metavar="CMD", help="Shell command: exit 0 good, 125 skip, else bad."
)
@click.option("--sets", "sets", metavar="A,B", default="", help="Bisect these applied patch sets instead.")
@click.option(
    "--by",
    type=click.Choice(["file", "hunk", "set"]),
    default="file",
    show_default=True,
    help="The unit: files (then the hunks of the culprit files), hunks, or sets.",
)
@click.option("--repeat", type=click.IntRange(1, 1000), default=1, show_default=True, help="Runs per trial.")
@click.option(
    "--timeout", type=click.FloatRange(0, min_open=True), default=None, help="Seconds: a hang is bad."
)
@click.option("--keep-going", is_flag=True, help="After the culprits, look for further independent ones.")
@click.option("--show-output", is_flag=True, help="Show the test's output (on stderr).")
@click.option("--format", "fmt", type=click.Choice(BISECT.names), default=BISECT.default, show_default=True)
@output_option
@environment_options
@source_options
@patches_option
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@errors_to_exit
def bisect(
    distributions: tuple[str, ...],
    test: str,
    sets: str,
    by: str,
    repeat: int,
    timeout: float | None,
    keep_going: bool,
    show_output: bool,
    fmt: str,
    output: str | None,
    environment: Target,
    fetch: SourceOptions,
    patches: str | None,
    quiet: bool,
) -> None:
    """Find which hand-made change breaks TEST: delta debugging over the changes against the pristine wheels
    (or over applied sets), each trial one transaction, every file put back at the end whatever happens.

    Exit 0 culprits found, 1 the test does not depend on these changes, 2 could not be done.
    """
    from ..deploy.bisecting import bisect as run

    def progress(t: Trial) -> None:
        if not quiet:
            note(f"trial {t.number}: {t.phase}, {len(t.included)} included: {t.outcome.value}")

    result = run(
        distributions,
        test=test,
        sets=[s for s in sets.split(",") if s],
        by="set" if sets else by,
        repeat=repeat,
        timeout=timeout,
        keep_going=keep_going,
        target=environment,
        fetch=fetch,
        patches=patches,
        output=sys.stderr.fileno() if show_output else None,
        progress=progress,
    )
    write(BISECT.get(fmt), result, output, "the bisect report")
    sys.exit(result.exit_code)
