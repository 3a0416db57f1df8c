"""The Prometheus text exposition format: a fleet's state in the monitoring it already runs.

Written for node_exporter's textfile collector (``-o /var/lib/node_exporter/textfile/patchguard.prom``, which
the CLI writes atomically). Pure: every function takes finished values and returns the text, valid UTF-8:
a label value is the name in the JSON name encoding (:func:`patchguard.model.json_name`: undecodable bytes as
``\\xNN``), then escaped as the exposition format says (backslash, double quote, line feed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from ..model import Report, Severity, json_name
from ..results import Running, Verdict
from .documents import CheckDocument, ReportDocument
from .interface import Format

__all__ = ["CheckGauges", "ReportGauges", "RunningGauges", "format_prometheus"]


_SEVERITIES = (Severity.HIGH, Severity.MODERATE, Severity.MINOR, Severity.INFO)


def _escape(value: str) -> str:
    """A label value as the text exposition format writes it."""
    return json_name(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _metric(name: str, help_text: str, samples: Iterable[tuple[Mapping[str, str], float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    for labels, value in samples:
        inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
        lines.append(f"{name}{{{inner}}} {value:g}" if inner else f"{name} {value:g}")
    return lines


def format_prometheus(
    report: Report | None = None,
    *,
    applied_sets: Sequence[str] = (),
    check_passed: bool | None = None,
    lock_match: bool | None = None,
    stale_processes: int | None = None,
    processes: int | None = None,
) -> str:
    """Gauges for what is given: findings by severity and kind, scan duration, applied sets, the check's
    verdict, the lock match, stale processes."""
    from .._version import __version__

    info = [({"version": __version__}, 1.0)]
    lines = _metric("patchguard_info", "The patchguard that wrote these gauges.", info)
    if report is not None:
        counts = Counter((f.severity.label, f.kind.value) for f in report.findings)
        samples = [({"severity": s, "kind": k}, float(n)) for (s, k), n in sorted(counts.items())]
        lines += _metric("patchguard_findings", "Findings of the last scan, by severity and kind.", samples)
        # The totals in a metric of their own: in the per-kind one, sum() would count them twice.
        totals = [
            ({"severity": s.label}, float(sum(1 for f in report.findings if f.severity is s)))
            for s in _SEVERITIES
        ]
        lines += _metric("patchguard_findings_by_severity", "Findings of the last scan, by severity.", totals)
        lines += _live(report)
        lines += _metric(
            "patchguard_scan_duration_seconds", "Wall time of the last scan.", [({}, report.seconds)]
        )
        lines += _metric(
            "patchguard_files_checked", "Installed files checked.", [({}, float(report.files_checked))]
        )
        lines += _metric(
            "patchguard_set_applied",
            "Patch sets patchguard applied (1 per set).",
            [({"set": name}, 1.0) for name in sorted(applied_sets)],
        )
    if check_passed is not None:
        lines += _metric(
            "patchguard_check_passed", "1 when the last check passed.", [({}, float(check_passed))]
        )
    if lock_match is not None:
        lines += _metric(
            "patchguard_lock_match", "1 when the environment matches its lock.", [({}, float(lock_match))]
        )
    if stale_processes is not None:
        lines += _metric(
            "patchguard_stale_processes",
            "Running processes of the environment that run code older than its files.",
            [({}, float(stale_processes))],
        )
        lines += _metric(
            "patchguard_processes", "Running processes of the environment.", [({}, float(processes or 0))]
        )
    return "\n".join(lines) + "\n"


_WHEN = {"since-edit": "now", "before-edit": "after-restart", "never": "after-restart", "unknown": "unknown"}


def _live(report: Report) -> list[str]:
    """Per changed file of code, when its change runs: ``now`` (bytecode compiled from the edited source:
    loaded since the edit), ``after-restart`` (not loaded since: the next start runs it), ``unknown``."""
    seen: dict[tuple[str, str], str] = {}
    for f in report.findings:
        if f.loaded is not None:
            seen.setdefault((f.distribution or "", f.path), _WHEN[f.loaded.value])
    samples = [({"distribution": d, "path": p, "when": when}, 1.0) for (d, p), when in sorted(seen.items())]
    return _metric(
        "patchguard_change_live",
        "A changed file's code: when it runs (now: loaded since the edit; after-restart; unknown).",
        samples,
    )


class ReportGauges(Format[ReportDocument]):
    """A scan's gauges: its findings, time and files, and the sets in place."""

    name = "prometheus"
    needs_applied_sets = True

    def render(self, document: ReportDocument) -> str:
        return format_prometheus(document.report, applied_sets=document.applied_sets)


class CheckGauges(Format[CheckDocument]):
    """A scan's gauges, and the check's verdict (and the lock's match, when a lock was compared)."""

    name = "prometheus"
    needs_applied_sets = True

    def render(self, document: CheckDocument) -> str:
        result = document.result
        lock_match = not any(d.kind == "lock" for d in result.details) if document.lock_checked else None
        text = format_prometheus(
            result.report,
            applied_sets=document.applied_sets,
            check_passed=result.passed,
            lock_match=lock_match,
        )
        # What the gate counted: findings the policy lets through (an allowed set's, an ignored rule, below
        # fail_on) are in patchguard_findings, not here — a dashboard that alerts on this agrees with it.
        counted = Counter(f.severity.label for f in result.report.findings if result.policy.violates(f))
        samples = [({"severity": s.label}, float(counted.get(s.label, 0))) for s in _SEVERITIES]
        gate = _metric(
            "patchguard_check_violating_findings",
            "Findings the last check's policy counts as violations, by severity.",
            samples,
        )
        gate += _metric(
            "patchguard_check_violations",
            "Violations of the last check (findings, required sets, lock differences).",
            [({}, float(len(result.violations)))],
        )
        return text + "\n".join(gate) + "\n"


class RunningGauges(Format[Running]):
    """How many processes of the environment run, and how many of them run stale code."""

    name = "prometheus"
    what = "the metrics"

    def render(self, document: Running) -> str:
        stale = sum(1 for p in document.processes if p.verdict is Verdict.STALE)
        return format_prometheus(stale_processes=stale, processes=len(document.processes))
