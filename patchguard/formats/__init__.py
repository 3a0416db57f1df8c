"""Formatters: finished values in, text out. No IO, nothing but the bottom layer below them: the model
(:mod:`patchguard.model`), the rule table, diff values and every command's result (:mod:`patchguard.results`),
read as they are.

This face is the registry: one :class:`~.interface.Formats` per kind of document, the only thing the CLI
takes from here besides the document values of :mod:`.documents`. The formats themselves live by family —
:mod:`.text` (people, and check's one-line status), :mod:`.jsondoc` (the JSON documents), :mod:`.sarif`,
:mod:`.prometheus`, and the tables of :mod:`.running`, :mod:`.rebase` and :mod:`.fleet` — and are imported
on first use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .documents import CheckDocument, ReportDocument
from .interface import Format, Formats

if TYPE_CHECKING:
    from ..diffs import FileDiff
    from ..model import (
        CaptureDocument,
        EnvironmentStatus,
        RestoreDocument,
        RollbackResult,
        SetChange,
        SetState,
        UpgradePlan,
    )
    from ..results import BisectResult, FleetResult, RebaseResult, Running

__all__ = [
    "BISECT",
    "CAPTURE",
    "CHECK",
    "DIFF",
    "FLEET",
    "LOCK",
    "PLAN",
    "REBASE",
    "REBASE_ALL",
    "REGISTRY",
    "REPORT",
    "RESTORE",
    "ROLLBACK",
    "RUNNING",
    "SETS",
    "SET_CHANGE",
    "STATUS",
    "CheckDocument",
    "Format",
    "Formats",
    "ReportDocument",
]


def _report() -> tuple[Format[ReportDocument], ...]:
    from .github import ReportGithub
    from .jsondoc import ReportJson
    from .prometheus import ReportGauges
    from .sarif import ReportSarif
    from .text import Table, TextTable

    return Table(), TextTable(), ReportJson(), ReportSarif(), ReportGauges(), ReportGithub()


def _check() -> tuple[Format[CheckDocument], ...]:
    from .jsondoc import CheckJson
    from .prometheus import CheckGauges
    from .sarif import CheckSarif
    from .text import CheckNagios, CheckStatus, CheckText

    return CheckText(), CheckJson(), CheckSarif(), CheckGauges(), CheckStatus(), CheckNagios()


def _diff() -> tuple[Format[Sequence[FileDiff]], ...]:
    from .jsondoc import DiffJson
    from .text import DiffText

    return DiffText(), DiffJson()


def _lock() -> tuple[Format[Mapping[str, Any]], ...]:
    from .jsondoc import LockJson

    return (LockJson(),)


def _fleet() -> tuple[Format[FleetResult], ...]:
    from .fleet import FleetTable
    from .jsondoc import FleetJson

    return FleetTable(), FleetJson()


def _running() -> tuple[Format[Running], ...]:
    from .jsondoc import RunningJson
    from .prometheus import RunningGauges
    from .running import RunningTable

    return RunningTable(), RunningJson(), RunningGauges()


def _bisect() -> tuple[Format[BisectResult], ...]:
    from .bisect import BisectText
    from .jsondoc import BisectJson

    return BisectText(), BisectJson()


def _rebase() -> tuple[Format[RebaseResult], ...]:
    from .jsondoc import RebaseJson
    from .rebase import RebaseText

    return RebaseText(), RebaseJson()


def _plan() -> tuple[Format[UpgradePlan], ...]:
    from .jsondoc import DocumentJson
    from .plan import PlanText

    return PlanText(), DocumentJson()


def _rebase_all() -> tuple[Format[Sequence[RebaseResult]], ...]:
    from .jsondoc import RebaseAllJson
    from .plan import RebaseAllText

    return RebaseAllText(), RebaseAllJson()


def _rollback() -> tuple[Format[RollbackResult], ...]:
    from .jsondoc import DocumentJson
    from .plan import RollbackText

    return RollbackText(), DocumentJson()


def _capture() -> tuple[Format[CaptureDocument], ...]:
    from .jsondoc import DocumentJson
    from .text import CaptureText

    return CaptureText(), DocumentJson()


def _restore() -> tuple[Format[RestoreDocument], ...]:
    from .jsondoc import DocumentJson
    from .text import RestoreText

    return RestoreText(), DocumentJson()


def _set_change() -> tuple[Format[SetChange], ...]:
    from .jsondoc import DocumentJson
    from .text import SetChangeText

    return SetChangeText(), DocumentJson()


def _sets() -> tuple[Format[Sequence[SetState]], ...]:
    from .text import SetsText

    return (SetsText(),)


def _status() -> tuple[Format[EnvironmentStatus], ...]:
    from .jsondoc import DocumentJson
    from .text import StatusText

    return StatusText(), DocumentJson()


# The kinds of document and their formats' names (the first is the default): scan's report, check's verdict,
# diff, lock, running, rebase, fleet, and the text of sets and status.
REPORT: Formats[ReportDocument] = Formats(
    "report", ("table", "text", "json", "sarif", "prometheus", "github"), _report
)
CHECK: Formats[CheckDocument] = Formats(
    "check", ("text", "json", "sarif", "prometheus", "status", "nagios"), _check
)
DIFF: Formats[Sequence[FileDiff]] = Formats("diff", ("text", "json"), _diff)
LOCK: Formats[Mapping[str, Any]] = Formats("lock", ("json",), _lock)
RUNNING: Formats[Running] = Formats("running", ("text", "json", "prometheus"), _running)
REBASE: Formats[RebaseResult] = Formats("rebase", ("text", "json"), _rebase)
REBASE_ALL: Formats[Sequence[RebaseResult]] = Formats("rebase-all", ("text", "json"), _rebase_all)
PLAN: Formats[UpgradePlan] = Formats("plan", ("text", "json"), _plan)
ROLLBACK: Formats[RollbackResult] = Formats("rollback", ("text", "json"), _rollback)
BISECT: Formats[BisectResult] = Formats("bisect", ("text", "json"), _bisect)
FLEET: Formats[FleetResult] = Formats("fleet", ("table", "json"), _fleet)
SET_CHANGE: Formats[SetChange] = Formats("set-change", ("text", "json"), _set_change)
RESTORE: Formats[RestoreDocument] = Formats("restore", ("text", "json"), _restore)
CAPTURE: Formats[CaptureDocument] = Formats("capture", ("text", "json"), _capture)
SETS: Formats[Sequence[SetState]] = Formats("sets", ("text",), _sets)
STATUS: Formats[EnvironmentStatus] = Formats("status", ("text", "json"), _status)

REGISTRY: Mapping[str, Formats[Any]] = {
    f.kind: f
    for f in (
        *(REPORT, CHECK, DIFF, LOCK, RUNNING, REBASE, REBASE_ALL, PLAN, ROLLBACK),
        *(BISECT, FLEET, SET_CHANGE, RESTORE, CAPTURE, SETS, STATUS),
    )
}
