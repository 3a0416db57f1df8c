"""Every rule id patchguard reports on code, with its default severity and a one-line rationale.

A table below both the judge (:mod:`patchguard.analysis`) and the formatters (SARIF names each rule): the ids
are part of the report contract (``rule``), and ``ignore = [{rule = ...}]`` in a policy names them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Severity

__all__ = ["FILE_RULES", "RULES", "Rule", "known_rule"]


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
        Rule("global-switch", Severity.MODERATE, "changes behaviour for the whole process"),
        Rule("swallowed-exception", Severity.MODERATE, "silences every error of the block"),
        Rule("env-mutation", Severity.MODERATE, "changes the process environment at run time"),
        Rule("removed-check", Severity.MODERATE, "a raise or assert of the pristine code was removed"),
        Rule("unparseable", Severity.MODERATE, "is not valid Python: importing it fails"),
        Rule("commented-out-code", Severity.MINOR, "code left behind in a comment"),
        Rule("functional-change", Severity.MINOR, "logic differs from the pristine wheel"),
        Rule("cosmetic-change", Severity.MINOR, "only comments, layout or docstrings differ"),
    )
}


FILE_RULES: dict[str, str] = {
    "modified-python": "a .py file differs from its RECORD hash",
    "modified-extension": "a compiled extension differs from its RECORD hash",
    "modified-script": "a console script differs from its RECORD hash",
    "modified-pth": "an owned .pth file differs from its RECORD hash",
    "modified-data": "a data file differs from its RECORD hash",
    "missing-file": "listed in RECORD, not on disk",
    "unexpected-python": "a .py file no distribution installed",
    "unexpected-extension": "a compiled extension no distribution installed",
    "unexpected-bytecode": "a sourceless .pyc no distribution installed",
    "orphan-bytecode": "a .pyc whose source is not installed",
    "unexpected-file": "a file no distribution installed",
    "unexpected-directory": "a top-level directory no distribution installed",
    "pth-import": "an unowned .pth file with an import line: runs at every interpreter start",
    "pth-path": "an unowned .pth file that adds paths",
    "sitecustomize": "sitecustomize.py / usercustomize.py: imported at every interpreter start",
    "record-row": "a malformed RECORD row",
    "record-hex": "RECORD hashes written in hex (uv_build before 0.8.13): files checked as hex, info",
    "record-wrong": "the wheel's own RECORD is wrong about a file: it is as shipped, info",
    "record-absent": "a distribution without RECORD",
    "files-elsewhere": "RECORD lists files outside the environment",
    "duplicate-metadata": "two metadata directories for one distribution",
    "unreadable": "a file that could not be checked",
    "record-tampered": "a file edited together with its RECORD row (--verify-record)",
    "record-added": "RECORD lists a file the wheel does not (--verify-record)",
    "record-differs": "a RECORD row differs from the wheel's (--verify-record)",
    "record-unverified": "RECORD could not be compared with the wheel's (--verify-record)",
    "vcs-install": "installed from a VCS URL: no wheel to diff against",
    "editable-unverifiable": "an editable install whose checkout cannot be compared",
}
"""The rule ids of findings about files rather than code (``kind`` other than a code change)."""


def known_rule(rule: str) -> bool:
    """Whether ``rule`` is a rule id some finding can carry."""
    return rule in RULES or rule in FILE_RULES
