"""Every rule id patchguard reports on code, with its default severity and a one-line rationale.

A table below both the judge (:mod:`patchguard.analysis`) and the formatters (SARIF names each rule): the ids
are part of the report contract (``rule``), and ``ignore = [{rule = ...}]`` in a policy names them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Severity

__all__ = ["RULES", "Rule"]


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    severity: Severity
    rationale: str


RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule("tensor-dump", Severity.HIGH, "writes tensors or objects to disk"),
        Rule("file-write", Severity.HIGH, "writes a file from library code"),
        Rule("debugger", Severity.HIGH, "stops the server waiting for a debugger"),
        Rule("process-exit", Severity.HIGH, "ends or signals the process"),
        Rule("subprocess", Severity.HIGH, "runs another program"),
        Rule("network", Severity.HIGH, "opens a network connection"),
        Rule("dynamic-exec", Severity.HIGH, "executes code built at run time"),
        Rule("print", Severity.MODERATE, "prints from library code (on a hot path it costs every request)"),
        Rule("logging", Severity.MODERATE, "logs on a hot path"),
        Rule("sleep", Severity.MODERATE, "sleeps in library code"),
        Rule("device-sync", Severity.MODERATE, "forces a device synchronisation in a forward pass"),
        Rule("monkeypatch", Severity.MODERATE, "changes another module's attributes at run time"),
        Rule("swallowed-exception", Severity.MODERATE, "silences every error of the block"),
        Rule("removed-check", Severity.MODERATE, "a raise or assert of the pristine code was removed"),
        Rule("unparseable", Severity.MODERATE, "is not valid Python: importing it fails"),
        Rule("commented-out-code", Severity.MINOR, "code left behind in a comment"),
        Rule("functional-change", Severity.MINOR, "logic differs from the pristine wheel"),
        Rule("cosmetic-change", Severity.MINOR, "only comments, layout or docstrings differ"),
    )
}
