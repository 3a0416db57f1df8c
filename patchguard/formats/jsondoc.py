"""The JSON documents: ``patchguard.report/1``, ``patchguard.check/1``, ``patchguard.diff/1``, the lock.

Pure: each takes finished values and returns the text, ending in a newline. The report's shape is defined
once, by :meth:`patchguard.model.Report.to_json`.

Names of outside origin (paths, site directories, prefixes, command lines, set and distribution names) are
in the JSON name encoding of :func:`patchguard.model.json_name` (injective: valid UTF-8 without a backslash
is the name itself); other text (messages, source lines) has its undecodable bytes as ``\\xNN``. No document
holds a lone surrogate: every one encodes as UTF-8.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..diffs import FileDiff, hunks_json
from ..model import Report, json_name, printable

__all__ = [
    "CHECK_SCHEMA",
    "DIFF_SCHEMA",
    "format_check",
    "format_diff",
    "format_json",
    "format_lock",
    "format_running",
    "valid_text",
]

CHECK_SCHEMA = "patchguard.check/1"
DIFF_SCHEMA = "patchguard.diff/1"


def valid_text(doc: Any) -> Any:
    """``doc`` with every string that would not encode as UTF-8 (a lone surrogate) made printable: the last
    guard of a JSON document, for text fields no formatter chose an encoding for."""
    if isinstance(doc, str):
        return printable(doc)
    if isinstance(doc, Mapping):
        return {printable(str(k)): valid_text(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [valid_text(v) for v in doc]
    return doc


def _dumps(doc: object) -> str:
    return json.dumps(valid_text(doc), indent=2, ensure_ascii=False) + "\n"


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
            "details": [_detail(d) for d in details],
            "policy": json_name(policy) if policy is not None else None,
            "report": report.to_json(),
        }
    )


def _detail(detail: Mapping[str, Any]) -> dict[str, Any]:
    """A violation as an object: its set's name in the name encoding (the finding is already encoded)."""
    out = dict(detail)
    if isinstance(out.get("set"), str):
        out["set"] = json_name(out["set"])
    return out


def format_diff(diffs: Sequence[FileDiff]) -> str:
    """Every changed file's hunks (``patchguard.diff/1``)."""
    return _dumps({"schema": DIFF_SCHEMA, "files": [hunks_json(d) for d in diffs]})


def format_lock(lock: Mapping[str, Any]) -> str:
    """An environment lock, keys sorted: the same environment always gives the same bytes."""
    return json.dumps(lock, indent=2, sort_keys=True) + "\n"


# The fields of ``patchguard.running/1`` that name files or command lines (the rest is words, numbers).
_RUNNING_NAMES = ("command", "replaced_extensions", "imported_changed", "maybe_changed", "transactions")


def format_running(doc: Mapping[str, Any]) -> str:
    """``patchguard running --format json`` (``patchguard.running/1``, as ``Running.to_json`` gives it): its
    prefix, site directories, command lines and paths in the name encoding."""
    env = dict(doc.get("environment", {}))
    env["prefix"] = json_name(str(env.get("prefix", "")))
    env["site_packages"] = [json_name(p) for p in env.get("site_packages", ())]
    processes = []
    for process in doc.get("processes", ()):
        named = dict(process)
        for key in _RUNNING_NAMES:
            value = named.get(key)
            if isinstance(value, str):
                named[key] = json_name(value)
            elif isinstance(value, (list, tuple)):
                named[key] = [json_name(v) for v in value]
        processes.append(named)
    return _dumps({**doc, "environment": env, "processes": processes})
