"""The pre-restart gate: a scanned environment judged against a policy, the required sets and a lock.

It makes ``check``'s verdict, a :class:`~patchguard.results.check.CheckResult` (``patchguard.check/1``),
defined with the policy in :mod:`patchguard.results.check`."""

from __future__ import annotations

from collections.abc import Sequence

from ...env import Target
from ...integrity.inventory import Scanned
from ...integrity.records import canonicalize
from ...model import Finding, SetState, SetStatus, Violation
from ...results.check import CHECK_SCHEMA, CheckResult, Policy
from ..identity.lockfile import compare_locks, make_lock, read_lock

__all__ = ["CHECK_SCHEMA", "CheckResult", "evaluate"]


def _line(f: Finding) -> str:
    where = f.path + (f":{f.line}" if f.line else "")
    return f"{f.severity.label.upper()} {where} {f.rule}: {f.message}"


def evaluate(
    scanned: Scanned, policy: Policy, states: Sequence[SetState] | None, lock: str | None
) -> CheckResult:
    """Judge a scanned environment: findings against the policy, the required sets (``states``: where
    every set stands, needed only when the policy requires some), the lock file if any, and the running
    processes when the policy asks."""
    report = scanned.report
    violating = [f for f in report.findings if policy.violates(f)]
    details = [Violation("finding", _line(f), finding=f) for f in violating]
    details += _required_sets(policy, states)
    if lock is not None:
        details += [Violation("lock", line) for line in _lock_lines(scanned, lock, policy.patches)]
    warnings: list[str] = []
    if policy.running != "ignore":
        stale = stale_processes(scanned.target)
        if policy.running == "fail":
            details += [Violation("running", line) for line in stale]
        else:
            warnings += stale
    violations = tuple(d.text for d in details)
    return CheckResult(not violations, violations, report, policy, tuple(details), tuple(warnings))


def _required_sets(policy: Policy, states: Sequence[SetState] | None) -> list[Violation]:
    """A violation for each required set that does not exist or is not in place."""
    by_name = {s.name: s for s in states or ()}
    out: list[Violation] = []
    for name in policy.required_sets:
        s = by_name.get(name)
        if s is None:
            text = f"required patch set {name} does not exist in the patches directory"
        elif not s.state.in_place:
            text = f"required patch set {name} is {s.state.value}"
            if s.state is SetStatus.NOT_APPLICABLE and s.detail:
                text += f": {s.detail[0]}"
        else:
            continue
        out.append(Violation("required-set", text, set_name=name))
    return out


def _lock_lines(scanned: Scanned, lock: str, patches: str | None = None) -> list[str]:
    """What differs between the lock file and this environment, one ``LOCK …`` line each."""
    expected = read_lock(lock)
    local = [
        f"{canonicalize(f.distribution)}:{f.kind.value} {f.path}"
        for f in scanned.report.findings
        if f.distribution
    ]
    return [f"LOCK {d}" for d in compare_locks(expected, make_lock(scanned, patches), local)]


def stale_processes(target: Target) -> list[str]:
    """One line per running process of the environment that runs code older than its files."""
    from ..processes.running import Verdict, running

    found = running(target)
    return [
        f"RUNNING pid {p.pid} runs code older than the environment ({p.command[:80]}): restart it"
        for p in found.processes
        if p.verdict is Verdict.STALE
    ]
