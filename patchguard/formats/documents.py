"""What the formats are handed: the finished values of each document kind.

A result defined below :mod:`patchguard.formats` (a :class:`~patchguard.model.Report`, set states, file
diffs) is handed as it is, with what its command adds to it (colour, the sets in place). A result defined
above it (``check``'s verdict, ``running``'s processes, a rebase) is read through a view: a protocol naming
exactly the attributes its formats read, which the result satisfies as it is — formats never import the
stages that produce their documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..model import Finding, Report, SetState, Severity

__all__ = [
    "Backups",
    "BisectTrialView",
    "BisectUnitView",
    "BisectView",
    "CheckDocument",
    "CheckView",
    "DifferenceView",
    "FleetGroupView",
    "FleetHostView",
    "FleetView",
    "PolicyView",
    "ProcessView",
    "RebaseView",
    "RebasedFileView",
    "ReportDocument",
    "RunningView",
    "StatusDocument",
    "Unfinished",
]


@dataclass(frozen=True, slots=True)
class ReportDocument:
    """A scan's report as ``scan`` writes it."""

    report: Report
    colour: bool = False  # the table's severities in colour (the CLI decides: a terminal, no NO_COLOR)
    wanted: frozenset[str] = frozenset()  # sets the policy allows or requires: no hint reverts them
    applied_sets: tuple[str, ...] = ()  # the sets in place (gathered only when the format needs them)


class PolicyView(Protocol):
    """What a check's formats read of its policy (:class:`patchguard.deploy.policy.Policy`)."""

    @property
    def path(self) -> str | None: ...
    @property
    def fail_on(self) -> Severity | None: ...
    def ignores(self, f: Finding) -> bool: ...
    def violates(self, f: Finding) -> bool: ...


class CheckView(Protocol):
    """``check``'s verdict (:class:`patchguard.deploy.gate.CheckResult`)."""

    @property
    def passed(self) -> bool: ...
    @property
    def violations(self) -> Sequence[str]: ...
    @property
    def report(self) -> Report: ...
    @property
    def policy(self) -> PolicyView: ...
    @property
    def details(self) -> Sequence[Mapping[str, Any]]: ...
    def to_json(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class CheckDocument:
    """``check``'s verdict as it writes it."""

    result: CheckView
    lock_checked: bool = False  # a lock was compared (``--lock``): its match is a gauge
    applied_sets: tuple[str, ...] = ()  # the sets in place (gathered only when the format needs them)


class VerdictView(Protocol):
    @property
    def value(self) -> str: ...


class ProcessView(Protocol):
    """One process of ``running`` (:class:`patchguard.deploy.running.Process`)."""

    @property
    def pid(self) -> int: ...
    @property
    def command(self) -> str: ...
    @property
    def started(self) -> float: ...
    @property
    def verdict(self) -> VerdictView: ...
    @property
    def replaced_extensions(self) -> Sequence[str]: ...
    @property
    def imported_changed(self) -> Sequence[str]: ...
    @property
    def maybe_changed(self) -> Sequence[str]: ...
    @property
    def transactions(self) -> Sequence[str]: ...
    @property
    def reason(self) -> str: ...


class RunningView(Protocol):
    """The processes of an environment (:class:`patchguard.deploy.running.Running`)."""

    @property
    def processes(self) -> Sequence[ProcessView]: ...
    def to_json(self) -> Mapping[str, Any]: ...


class OutcomeView(Protocol):
    @property
    def value(self) -> str: ...
    @property
    def open(self) -> bool: ...


class RebasedFileView(Protocol):
    """One file of a rebase (:class:`patchguard.patchsets.rebase.RebasedFile`)."""

    @property
    def path(self) -> str: ...
    @property
    def outcome(self) -> OutcomeView: ...
    @property
    def new_path(self) -> str | None: ...
    @property
    def hunks(self) -> int: ...
    @property
    def conflicting(self) -> int: ...
    @property
    def regions(self) -> int: ...
    @property
    def similarity(self) -> float | None: ...
    @property
    def review(self) -> str | None: ...
    @property
    def adjacent(self) -> int: ...
    @property
    def merged_by(self) -> str: ...
    @property
    def doubt(self) -> str: ...


class RebaseView(Protocol):
    """What ``rebase`` did (:class:`patchguard.patchsets.rebase.RebaseResult`)."""

    @property
    def name(self) -> str: ...
    @property
    def distribution(self) -> str: ...
    @property
    def from_version(self) -> str: ...
    @property
    def to_version(self) -> str: ...
    @property
    def files(self) -> Sequence[RebasedFileView]: ...
    @property
    def base_source(self) -> str: ...
    @property
    def target_source(self) -> str: ...
    @property
    def review_dir(self) -> str | None: ...
    @property
    def written(self) -> bool: ...
    @property
    def dry_run(self) -> bool: ...
    @property
    def history_dir(self) -> str | None: ...
    @property
    def notes(self) -> Sequence[str]: ...
    @property
    def conflicts(self) -> Sequence[RebasedFileView]: ...
    @property
    def lost(self) -> Sequence[RebasedFileView]: ...
    @property
    def complete(self) -> bool: ...
    @property
    def hunks(self) -> tuple[int, int, int]: ...
    def to_json(self) -> Mapping[str, object]: ...


@dataclass(frozen=True, slots=True)
class StatusDocument:
    """``status``: what recovery put back, the sets patchguard applied (their state records), every set."""

    recovered: Sequence[str]
    applied: Sequence[tuple[str, Mapping[str, Any]]]
    states: Sequence[SetState]


@dataclass(frozen=True, slots=True)
class Unfinished:
    """An interrupted transaction found in a site directory (said before it is rolled back)."""

    site: str
    journal: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class Backups:
    """The transactions' backups kept in one site directory: (transaction id, bytes) each, and how many
    the setting keeps."""

    site: str
    kept: Sequence[tuple[str, int]]
    keep: int


class ValueView(Protocol):
    @property
    def value(self) -> str: ...


class BisectUnitView(Protocol):
    """One change ``bisect`` included or left out (:class:`patchguard.patchsets.units.Unit`)."""

    @property
    def number(self) -> int: ...
    @property
    def label(self) -> str: ...
    @property
    def diff(self) -> str: ...


class BisectTrialView(Protocol):
    """One trial of a bisect (:class:`patchguard.patchsets.bisect.Trial`)."""

    @property
    def number(self) -> int: ...
    @property
    def phase(self) -> str: ...
    @property
    def included(self) -> tuple[int, ...]: ...
    @property
    def outcome(self) -> ValueView: ...
    @property
    def runs(self) -> int: ...
    @property
    def failures(self) -> int: ...
    @property
    def seconds(self) -> float: ...
    @property
    def overhead(self) -> float: ...
    @property
    def note(self) -> str: ...


class BisectView(Protocol):
    """What ``bisect`` found (:class:`patchguard.patchsets.bisect.BisectResult`)."""

    @property
    def culprits(self) -> Sequence[BisectUnitView]: ...
    @property
    def units(self) -> Sequence[BisectUnitView]: ...
    @property
    def trials(self) -> Sequence[BisectTrialView]: ...
    @property
    def unsplit(self) -> Sequence[tuple[int, ...]]: ...
    @property
    def runs(self) -> int: ...
    @property
    def repeat(self) -> int: ...
    @property
    def changes(self) -> int: ...
    @property
    def confidence(self) -> float: ...
    @property
    def flakiness(self) -> float | None: ...
    @property
    def running(self) -> tuple[int, ...]: ...
    @property
    def touched(self) -> tuple[str, ...]: ...
    @property
    def outside(self) -> tuple[str, ...]: ...
    def to_json(self) -> Mapping[str, Any]: ...


class DifferenceView(Protocol):
    """One difference of a fleet's group (:class:`patchguard.deploy.fleet.Difference`)."""

    @property
    def aspect(self) -> VerdictView: ...
    @property
    def change(self) -> VerdictView: ...
    @property
    def name(self) -> str: ...
    @property
    def reference(self) -> str | None: ...
    @property
    def here(self) -> str | None: ...
    @property
    def distribution(self) -> str | None: ...


class FleetHostView(Protocol):
    """One host's document (:class:`patchguard.deploy.hostdocs.HostDocument`)."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def host(self) -> str | None: ...
    @property
    def time(self) -> str | None: ...


class FleetGroupView(Protocol):
    """Hosts with one environment (:class:`patchguard.deploy.fleet.FleetGroup`)."""

    @property
    def hosts(self) -> Sequence[FleetHostView]: ...
    @property
    def reference(self) -> bool: ...
    @property
    def differences(self) -> Sequence[DifferenceView]: ...


class FleetView(Protocol):
    """A fleet's environments (:class:`patchguard.deploy.fleet.FleetResult`)."""

    @property
    def groups(self) -> Sequence[FleetGroupView]: ...
    @property
    def chosen(self) -> VerdictView: ...
    @property
    def baseline(self) -> FleetHostView | None: ...
    @property
    def tied(self) -> int: ...
    @property
    def differing(self) -> Sequence[FleetHostView]: ...
    def to_json(self) -> Mapping[str, Any]: ...
