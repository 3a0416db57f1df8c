"""The JSON documents: ``patchguard.report/1``, ``patchguard.check/1``, ``patchguard.diff/1``, the lock.

Pure: each takes finished values and returns the text, ending in a newline. The report's shape is defined
once, by :meth:`patchguard.model.Report.to_json`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..diffs import FileDiff, hunks_json
from ..model import Report

__all__ = ["CHECK_SCHEMA", "DIFF_SCHEMA", "format_check", "format_diff", "format_json", "format_lock"]

CHECK_SCHEMA = "patchguard.check/1"
DIFF_SCHEMA = "patchguard.diff/1"


def _dumps(doc: object) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def format_json(report: Report) -> str:
    """The report as the stable JSON document (``patchguard.report/1``)."""
    return _dumps(report.to_json())


def format_check(
    passed: bool,
    violations: Sequence[str],
    policy: str | None,
    report: Report,
    details: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The verdict of ``check`` (``patchguard.check/1``), the report behind it included: ``violations`` one
    line each for people, ``details`` the same as objects for programs."""
    return _dumps(
        {
            "schema": CHECK_SCHEMA,
            "passed": passed,
            "violations": list(violations),
            "details": [dict(d) for d in details],
            "policy": policy,
            "report": report.to_json(),
        }
    )


def format_diff(diffs: Sequence[FileDiff]) -> str:
    """Every changed file's hunks (``patchguard.diff/1``)."""
    return _dumps({"schema": DIFF_SCHEMA, "files": [hunks_json(d) for d in diffs]})


def format_lock(lock: Mapping[str, Any]) -> str:
    """An environment lock, keys sorted: the same environment always gives the same bytes."""
    return json.dumps(lock, indent=2, sort_keys=True) + "\n"
