"""SARIF 2.1.0: the report for code scanning and CI annotations.

Pure: :func:`to_sarif` builds the log, :func:`format_sarif` returns it as text.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from ..model import Finding, Report, Severity, printable
from ..rulebook import RULES

__all__ = ["format_sarif", "to_sarif"]


_SARIF_LEVEL = {
    Severity.HIGH: "error",
    Severity.MODERATE: "warning",
    Severity.MINOR: "note",
    Severity.INFO: "note",
}


def _file_uri(path: str) -> str:
    return "file://" + quote(path if path.endswith("/") else path + "/")


def to_sarif(report: Report) -> dict[str, Any]:
    """The report as a SARIF 2.1.0 log (GitHub code scanning, CI annotations).

    Each rule id becomes a reporting descriptor; each finding a result whose location is relative to the
    ``SITE_PACKAGES`` base (absolute for files outside site-packages), with line numbers for code findings.
    """
    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    for f in report.findings:
        if f.rule not in rules:
            rules[f.rule] = _rule(f)
        results.append(_result(f, list(rules).index(f.rule)))
    base = report.environment.site_packages[0] if report.environment.site_packages else "/"
    return {
        "$schema": "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "patchguard",
                        "version": report.tool_version or "0",
                        "informationUri": "https://pypi.org/project/patchguard/",
                        "rules": list(rules.values()),
                    }
                },
                "originalUriBaseIds": {"SITE_PACKAGES": {"uri": _file_uri(printable(base))}},
                "results": results,
            }
        ],
    }


def _rule(f: Finding) -> dict[str, Any]:
    """The reporting descriptor of the rule ``f`` is the first finding of."""
    known = RULES.get(f.rule)
    text = known.rationale if known else f.kind.value.replace("-", " ")
    return {
        "id": f.rule,
        "name": "".join(part.capitalize() for part in f.rule.split("-")),
        "shortDescription": {"text": text},
        "defaultConfiguration": {"level": _SARIF_LEVEL[f.severity]},
        "properties": {"kind": f.kind.value},
    }


def _location(f: Finding) -> dict[str, Any]:
    """Where a finding is: relative to ``SITE_PACKAGES`` (or an absolute file URI), with its lines."""
    location: dict[str, Any] = {
        "uri": printable(f.path).lstrip("/")
        if not f.path.startswith("/")
        else _file_uri(printable(f.path)).rstrip("/")
    }
    if not f.path.startswith("/"):
        location["uriBaseId"] = "SITE_PACKAGES"
    physical: dict[str, Any] = {"artifactLocation": location}
    if f.line is not None:
        region: dict[str, Any] = {"startLine": f.line}
        if f.end_line is not None and f.end_line >= f.line:
            region["endLine"] = f.end_line
        if f.source:
            region["snippet"] = {"text": printable(f.source)}
        physical["region"] = region
    return {"physicalLocation": physical}


def _result(f: Finding, rule_index: int) -> dict[str, Any]:
    return {
        "ruleId": f.rule,
        "ruleIndex": rule_index,
        "level": _SARIF_LEVEL[f.severity],
        "message": {"text": printable(f.message)},
        "locations": [_location(f)],
        "properties": {
            "severity": f.severity.label,
            "kind": f.kind.value,
            "distribution": f.distribution,
            "version": f.version,
            "function": f.function,
            "gate": dict(f.gate) if f.gate else None,
            "reach": f.reach.value if f.reach is not None else None,
            "loaded": f.loaded.value if f.loaded is not None else None,
            "evidence": list(f.evidence),
            "patch_set": f.patch_set,
        },
    }


def format_sarif(report: Report) -> str:
    """The report as SARIF 2.1.0 JSON text."""
    return json.dumps(to_sarif(report), indent=2, ensure_ascii=False) + "\n"
