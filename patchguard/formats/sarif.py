"""SARIF 2.1.0: the report for code scanning and CI annotations.

Pure: :func:`to_sarif` builds the log, :func:`format_sarif` returns it as text; :class:`ReportSarif` and
:class:`CheckSarif` are the formats of ``scan`` and ``check`` (which decides what a policy expects).

Artifact URIs are the bytes of the file name percent-encoded (RFC 3986: only unreserved characters and ``/``
stay as they are), so a name with a space, ``%``, ``#``, ``?``, a quote, a control character or an
undecodable byte is a valid URI that decodes back to exactly those bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from ..model import Finding, Kind, Report, Severity, json_name, json_name_or_none, printable
from ..rulebook import FILE_RULES, RULES
from .documents import CheckDocument, ReportDocument
from .interface import Format
from .jsondoc import valid_text

__all__ = [
    "CheckSarif",
    "ReportSarif",
    "fingerprint",
    "format_check_sarif",
    "format_sarif",
    "to_sarif",
    "uri_path",
]


_SARIF_LEVEL = {
    Severity.HIGH: "error",
    Severity.MODERATE: "warning",
    Severity.MINOR: "note",
    Severity.INFO: "note",
}


def uri_path(path: str) -> str:
    """A file name as the path of a URI: its bytes (UTF-8, undecodable bytes as they were on disk)
    percent-encoded, ``/`` and RFC 3986's unreserved characters left as they are.
    ``urllib.parse.unquote_to_bytes`` gives the name's bytes back.

    >>> uri_path("minillm/a b%#?.py"), uri_path("raw\\udcff")
    ('minillm/a%20b%25%23%3F.py', 'raw%FF')
    """
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate no file name on disk gives: encoded as such, not lost
        raw = path.encode("utf-8", "surrogatepass")
    return quote(raw, safe="/")


def _file_uri(path: str) -> str:
    return "file://" + uri_path(path if path.endswith("/") else path + "/")


def to_sarif(report: Report, suppressed: Sequence[Finding] = (), justification: str = "") -> dict[str, Any]:
    """The report as a SARIF 2.1.0 log (GitHub code scanning, CI annotations).

    Each rule id becomes a reporting descriptor (descriptions, help saying what to do, ``security-severity``
    and tags); each finding a result whose location is relative to the ``SITE_PACKAGES`` base (absolute for
    files outside site-packages), with its lines (line 1 for a finding about a whole file) and a
    ``partialFingerprints`` entry that stays the same across runs and hosts while the finding does.
    ``suppressed`` findings (expected by a policy: ``justification``) are results marked suppressed.
    """
    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    for f, hidden in [*((f, False) for f in report.findings), *((f, True) for f in suppressed)]:
        if f.rule not in rules:
            rules[f.rule] = _rule(f)
        result = _result(f, list(rules).index(f.rule))
        if hidden:
            result["suppressions"] = [{"kind": "external", "justification": justification or "expected"}]
        results.append(result)
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
                        "rules": list(rules.values()),
                    }
                },
                "originalUriBaseIds": {"SITE_PACKAGES": {"uri": _file_uri(base)}},
                # One category per host: code scanning keeps the uploads of many hosts apart.
                "automationDetails": {"id": f"patchguard/{json_name(report.host or 'localhost')}/"},
                "results": results,
            }
        ],
    }


# What to do about a finding, by kind: the second half of every rule's help.
_ADVICE = {
    Kind.MODIFIED: "Put the file back with `patchguard restore DIST --path PATH`, or capture the change "
    "as a patch set (`patchguard capture`) if it is meant to stay.",
    Kind.MISSING: "Recreate it with `patchguard restore DIST`.",
    Kind.UNEXPECTED: "Find out who put it there; remove it (`patchguard restore DIST --remove-unexpected` "
    "inside a package, by hand elsewhere) or declare it in the policy's `expected_files`.",
    Kind.STARTUP_HOOK: "Delete it unless it is meant to run at every interpreter start: no distribution "
    "owns it.",
    Kind.RECORD_INVALID: "Reinstall the distribution "
    "(`pip install --force-reinstall --no-deps DIST==VERSION`).",
    Kind.UNVERIFIABLE: "Make the file readable to the user running patchguard, or reinstall the "
    "distribution.",
    Kind.INJECTED_CODE: "Remove the code: `patchguard revert --set NAME` when a patch set added it, else "
    "`patchguard restore DIST --path PATH`.",
    Kind.FUNCTIONAL_CHANGE: "Review the change (`patchguard diff DIST --path PATH`); restore the file or "
    "keep the change in a patch set.",
    Kind.COSMETIC_CHANGE: "Nothing runs differently; restore the file to keep the environment pristine.",
    Kind.DRIFT: "Re-apply or revert the patch set so its files are what it says.",
}
_SECURITY_SEVERITY = {
    Severity.HIGH: "8.0",
    Severity.MODERATE: "5.0",
    Severity.MINOR: "3.0",
    Severity.INFO: "1.0",
}


def _rule(f: Finding) -> dict[str, Any]:
    """The reporting descriptor of the rule ``f`` is the first finding of."""
    known = RULES.get(f.rule)
    short = known.rationale if known else FILE_RULES.get(f.rule, f.kind.value.replace("-", " "))
    meaning = f"{f.rule}: {'added code that ' + short if known else short}."
    advice = _ADVICE.get(f.kind, "")
    return {
        "id": f.rule,
        "name": _name(f.rule),
        "shortDescription": {"text": short},
        "fullDescription": {"text": meaning},
        "help": {"text": f"{meaning} {advice}".strip(), "markdown": f"**{meaning}**\n\n{advice}".strip()},
        "defaultConfiguration": {"level": _SARIF_LEVEL[f.severity]},
        "properties": {
            "kind": f.kind.value,
            "security-severity": _SECURITY_SEVERITY[(known.severity if known else f.severity)],
            "tags": ["security", "supply-chain", f.kind.value],
        },
    }


def _name(rule: str) -> str:
    """A reader's name for a rule, never equal to its id (SARIF1001): ``tensor-dump`` → ``TensorDump``,
    ``debugger`` → ``DebuggerFinding``."""
    name = "".join(part.capitalize() for part in rule.split("-"))
    return name + "Finding" if name.lower() == rule.lower() else name


def fingerprint(f: Finding) -> str:
    """Stable across runs and hosts while the finding is the same: its rule, distribution and path, and for
    code its function and source line (whitespace aside) — never a line number, a size or a time."""
    parts = [f.rule, f.distribution or "", json_name(f.path)]
    if f.source is not None:
        parts += [f.function or "", "".join(printable(f.source).split())]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _location(f: Finding) -> dict[str, Any]:
    """Where a finding is: relative to ``SITE_PACKAGES`` (or an absolute file URI), with its lines."""
    location: dict[str, Any] = {
        "uri": uri_path(f.path) if not f.path.startswith("/") else _file_uri(f.path).rstrip("/")
    }
    if not f.path.startswith("/"):
        location["uriBaseId"] = "SITE_PACKAGES"
    physical: dict[str, Any] = {"artifactLocation": location}
    region: dict[str, Any] = {"startLine": f.line or 1}  # a finding about a whole file: its first line
    if f.line is not None and f.end_line is not None and f.end_line >= f.line:
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
        "partialFingerprints": {"patchguardFinding/v1": fingerprint(f)},
        "properties": {
            "severity": f.severity.label,
            "kind": f.kind.value,
            "distribution": json_name_or_none(f.distribution),
            "version": json_name_or_none(f.version),
            "function": f.function,
            "gate": f.gate.to_json() if f.gate else None,
            "reach": f.reach.value if f.reach is not None else None,
            "loaded": f.loaded.value if f.loaded is not None else None,
            "evidence": list(f.evidence),
            "patch_set": json_name_or_none(f.patch_set),
        },
    }


def format_sarif(report: Report, suppressed: Sequence[Finding] = (), justification: str = "") -> str:
    """The report as SARIF 2.1.0 JSON text (no lone surrogate: text fields keep undecodable bytes as
    ``\\xNN``)."""
    log = valid_text(to_sarif(report, suppressed, justification))
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def format_check_sarif(document: CheckDocument) -> str:
    """``check``'s verdict as SARIF: the findings that violate the policy are results; those it expects (an
    allowed set, an expected file, an ignore rule) at or above its ``fail_on`` are results marked
    suppressed, the policy their justification; the rest are left out."""
    result = document.result
    policy, report = result.policy, result.report
    violating = tuple(f for f in report.findings if policy.violates(f))
    fail_on = policy.fail_on
    expected = [
        f for f in report.findings if fail_on is not None and f.severity >= fail_on and policy.ignores(f)
    ]
    why = f"expected by the policy {policy.path}" if policy.path else "expected by the policy"
    return format_sarif(replace(report, findings=violating), expected, why)


class ReportSarif(Format[ReportDocument]):
    name = "sarif"

    def render(self, document: ReportDocument) -> str:
        return format_sarif(document.report)


class CheckSarif(Format[CheckDocument]):
    name = "sarif"

    def render(self, document: CheckDocument) -> str:
        return format_check_sarif(document)
