"""What the formats are handed besides the finished result itself: the result with what its command adds
to it.

Every result the formats write is a value of a layer below them: a :class:`~patchguard.model.Report`, set
states and file diffs in :mod:`patchguard.model` and :mod:`patchguard.diffs`, and every command's result
(``check``'s verdict, ``running``'s processes, a rebase, a bisect, a fleet) in :mod:`patchguard.results`.
A formatter imports those types and reads them as they are. Two documents wrap a result with what the CLI
adds for its formats: :class:`ReportDocument` (a scan's report, with colour and the sets in place) and
:class:`CheckDocument` (``check``'s :class:`~patchguard.results.check.CheckResult`, with whether a lock was
compared and the sets in place).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..model import Report

if TYPE_CHECKING:  # building the command line (``patchguard --version``) imports no result's module
    from ..results import CheckResult

__all__ = ["CheckDocument", "ReportDocument"]


@dataclass(frozen=True, slots=True)
class ReportDocument:
    """A scan's report as ``scan`` writes it."""

    report: Report
    colour: bool = False  # the table's severities in colour (the CLI decides: a terminal, no NO_COLOR)
    wanted: frozenset[str] = frozenset()  # sets the policy allows or requires: no hint reverts them
    applied_sets: tuple[str, ...] = ()  # the sets in place (gathered only when the format needs them)


@dataclass(frozen=True, slots=True)
class CheckDocument:
    """``check``'s verdict as it writes it."""

    result: CheckResult
    lock_checked: bool = False  # a lock was compared (``--lock``): its match is a gauge
    applied_sets: tuple[str, ...] = ()  # the sets in place (gathered only when the format needs them)
