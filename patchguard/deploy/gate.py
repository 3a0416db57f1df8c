"""The pre-restart gate: a scanned environment judged against a policy, the required sets and a lock."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..env import Target
from ..integrity.inventory import Scanned
from ..integrity.records import canonicalize
from ..model import Finding, Report
from ..patchsets.status import SetState
from .lockfile import compare_locks, make_lock, read_lock
from .policy import Policy

__all__ = ["CheckResult", "evaluate"]


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict of a check: ``passed``, every violation (one line each), and the scan behind it."""

    passed: bool
    violations: tuple[str, ...]
    report: Report
    policy: Policy = field(default_factory=Policy)
    # The violations as objects, in the same order: {"type": "finding"|"required-set"|"lock"|"running", ...}.
    details: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()  # said on stderr, not violations (policy running = "warn")


def _line(f: Finding) -> str:
    where = f.path + (f":{f.line}" if f.line else "")
    return f"{f.severity.label.upper()} {where} {f.rule}: {f.message}"


def evaluate(
    scanned: Scanned, policy: Policy, states: Sequence[SetState] | None, lock: str | None
) -> CheckResult:
    """Judge a scanned environment: findings against the policy, the required sets (``states``: where
    every set stands, needed only when the policy requires some) and the lock file, if any."""
    report = scanned.report
    expected_lock = read_lock(lock) if lock is not None else None
    here = make_lock(scanned) if expected_lock is not None else None
    violating = [f for f in report.findings if policy.violates(f)]
    violations = [_line(f) for f in violating]
    details: list[dict[str, Any]] = [
        {"type": "finding", "text": text, "finding": f.to_json()}
        for f, text in zip(violating, violations, strict=True)
    ]
    if policy.required_sets:
        by_name = {s.name: s for s in states or ()}
        for name in policy.required_sets:
            s = by_name.get(name)
            if s is None:
                violations.append(f"required patch set {name} does not exist in the patches directory")
                details.append({"type": "required-set", "text": violations[-1], "set": name})
            elif not s.state.in_place:
                violations.append(f"required patch set {name} is {s.state.value}")
                details.append({"type": "required-set", "text": violations[-1], "set": name})
    if expected_lock is not None and here is not None:
        local = [
            f"{canonicalize(f.distribution)}:{f.kind.value} {f.path}"
            for f in report.findings
            if f.distribution
        ]
        lock_lines = [f"LOCK {d}" for d in compare_locks(expected_lock, here, local)]
        violations += lock_lines
        details += [{"type": "lock", "text": line} for line in lock_lines]
    warnings: list[str] = []
    if policy.running != "ignore":
        stale = stale_processes(scanned.target)
        if policy.running == "fail":
            violations += stale
            details += [{"type": "running", "text": line} for line in stale]
        else:
            warnings += stale
    return CheckResult(not violations, tuple(violations), report, policy, tuple(details), tuple(warnings))


def stale_processes(target: Target) -> list[str]:
    """One line per running process of the environment that runs code older than its files."""
    from .running import Verdict, running

    found = running(site_packages=target.site_packages)
    return [
        f"RUNNING pid {p.pid} runs code older than the environment ({p.command[:80]}): restart it"
        for p in found.processes
        if p.verdict is Verdict.STALE
    ]
