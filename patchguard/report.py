"""Findings, the report, and the pure formatters that turn a report into text.

Nothing here does IO: a formatter takes a finished :class:`Report` and returns a string; the CLI prints it.
The JSON shape is the stable contract of DESIGN.md (``schema: patchguard.report/1``).
"""

from __future__ import annotations

import enum
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "REPORT_SCHEMA",
    "Environment",
    "Finding",
    "Kind",
    "Report",
    "Severity",
    "format_json",
    "format_sarif",
    "format_table",
    "printable",
]

REPORT_SCHEMA = "patchguard.report/1"


class Severity(enum.IntEnum):
    """How bad a finding is; ordered, so ``report.worst >= Severity.HIGH`` reads as it should.

    ``NONE`` is never the severity of a finding: it is the :attr:`Report.worst` of a clean report.
    """

    NONE = 0
    INFO = 1
    MINOR = 2
    MODERATE = 3
    HIGH = 4

    @property
    def label(self) -> str:
        """The lowercase name used in JSON and on the command line (``"high"``)."""
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        """``"moderate"`` → ``Severity.MODERATE``; raises ``ValueError`` for anything else."""
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r}") from None


class Kind(str, enum.Enum):
    """What a finding is about (the ``kind`` field of the report JSON)."""

    MODIFIED = "modified"
    MISSING = "missing"
    UNEXPECTED = "unexpected"
    STARTUP_HOOK = "startup-hook"
    RECORD_INVALID = "record-invalid"
    UNVERIFIABLE = "unverifiable"
    INJECTED_CODE = "injected-code"
    FUNCTIONAL_CHANGE = "functional-change"
    COSMETIC_CHANGE = "cosmetic-change"
    DRIFT = "drift"


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing patchguard found wrong (or worth knowing) in the environment.

    ``path`` is POSIX and relative to the site-packages directory that holds the file, or absolute when the
    file lies outside every site directory (console scripts). ``distribution`` is ``None`` for files no
    distribution owns (a stray ``.pth``, ``sitecustomize.py``).
    """

    kind: Kind
    severity: Severity
    rule: str
    path: str
    message: str
    distribution: str | None = None
    version: str | None = None
    line: int | None = None
    end_line: int | None = None
    function: str | None = None
    gate: Mapping[str, str] | None = None
    reach: str | None = None
    evidence: tuple[str, ...] = ()
    patch_set: str | None = None
    source: str | None = None  # the installed line a code finding points at
    # Whether the file's modification is exactly the patch set's (False: the set plus other changes).
    patch_set_exact: bool = True

    def to_json(self) -> dict[str, Any]:
        """The finding as the stable JSON object of DESIGN.md."""
        return {
            "kind": self.kind.value,
            "severity": self.severity.label,
            "rule": self.rule,
            "distribution": self.distribution,
            "version": self.version,
            "path": printable(self.path),
            "line": self.line,
            "end_line": self.end_line,
            "function": self.function,
            "gate": dict(self.gate) if self.gate is not None else None,
            "reach": self.reach,
            "evidence": list(self.evidence),
            "patch_set": self.patch_set,
            "message": printable(self.message),
            "source": printable(self.source) if self.source is not None else None,
        }

    @property
    def sort_key(self) -> tuple[str, str, int]:
        return (self.distribution or "~", self.path, self.line or 0)


@dataclass(frozen=True, slots=True)
class Environment:
    """The interpreter and site directories a report is about."""

    python: str
    prefix: str
    site_packages: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Report:
    """The result of a scan: what was checked and every finding, worst first within each distribution.

    >>> r = Report(environment=Environment("3.11.7", "/venv", ("/venv/lib/python3.11/site-packages",)),
    ...            distributions=(), files_checked=0, findings=())
    >>> r.worst >= Severity.HIGH
    False
    """

    environment: Environment
    distributions: tuple[tuple[str, str], ...]
    files_checked: int
    findings: tuple[Finding, ...]
    tool_version: str = ""
    seconds: float = 0.0
    files_hashed: int = 0
    recovered: tuple[str, ...] = ()  # files an interrupted transaction's rollback put back first

    @property
    def worst(self) -> Severity:
        """The highest severity among the findings, ``Severity.NONE`` when there are none."""
        return max((f.severity for f in self.findings), default=Severity.NONE)

    def at_or_above(self, threshold: Severity) -> list[Finding]:
        """Findings whose severity reaches ``threshold`` (what ``--fail-on`` counts)."""
        return [f for f in self.findings if f.severity >= threshold]

    def counts(self) -> dict[str, int]:
        """Number of findings per severity label, every label present."""
        c = Counter(f.severity for f in self.findings)
        return {s.label: c.get(s, 0) for s in reversed(Severity) if s is not Severity.NONE}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "tool": {"name": "patchguard", "version": self.tool_version},
            "environment": {
                "python": self.environment.python,
                "prefix": printable(self.environment.prefix),
                "site_packages": [printable(p) for p in self.environment.site_packages],
            },
            "summary": {
                "distributions": len(self.distributions),
                "files_checked": self.files_checked,
                "findings": self.counts(),
            },
            "findings": [f.to_json() for f in self.findings],
        }


def printable(text: str) -> str:
    """Make a string safe to print or encode as UTF-8.

    File names that are not valid UTF-8 arrive as lone surrogates (``surrogateescape``); they are shown as
    ``\\xNN`` escapes instead of crashing the output.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def format_json(report: Report) -> str:
    """The report as the stable JSON document (``patchguard.report/1``)."""
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"


# Kinds named in the summary line, in this order, with the words used there (one, several).
_SUMMARY_WORDS: Sequence[tuple[Kind, str, str]] = (
    (Kind.INJECTED_CODE, "injected", "injected"),
    (Kind.FUNCTIONAL_CHANGE, "changed", "changed"),
    (Kind.COSMETIC_CHANGE, "cosmetic", "cosmetic"),
    (Kind.MODIFIED, "modified", "modified"),
    (Kind.MISSING, "missing", "missing"),
    (Kind.UNEXPECTED, "unexpected", "unexpected"),
    (Kind.STARTUP_HOOK, "startup hook", "startup hooks"),
    (Kind.RECORD_INVALID, "invalid RECORD row", "invalid RECORD rows"),
    (Kind.UNVERIFIABLE, "unverifiable", "unverifiable"),
    (Kind.DRIFT, "drifted", "drifted"),
)


def summary_line(report: Report) -> str:
    """``6557 files in 3 distributions checked in 0.4 s: 2 modified, 1 missing, 3 unexpected``."""
    kinds = Counter(f.kind for f in report.findings)
    parts = [
        f"{kinds[k]} {one if kinds[k] == 1 else many}" for k, one, many in _SUMMARY_WORDS if kinds.get(k)
    ]
    n_dist = len(report.distributions)
    head = (
        f"{report.files_checked} files in {n_dist} distribution{'s' if n_dist != 1 else ''}"
        f" checked in {report.seconds:.1f} s"
    )
    return f"{head}: {', '.join(parts)}" if parts else f"{head}: no findings"


def _group(findings: Iterable[Finding]) -> dict[tuple[str | None, str | None], list[Finding]]:
    groups: dict[tuple[str | None, str | None], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.distribution, f.version), []).append(f)
    return groups


def _finding_lines(f: Finding, kind_w: int) -> list[str]:
    pad = " " * 11
    if f.source is not None and f.line is not None:
        # A code finding: where and which rule, the line itself, then its gate and reach.
        head = f"  {f.severity.label.upper():<9}{printable(f.path)}:{f.line}  {f.rule}"
        out = [head + (f"  {f.function}" if f.function else ""), pad + printable(f.source)]
        tail = []
        if f.gate:
            tail.append(f"gate: {f.gate.get('condition') or f.gate.get('kind')}")
        if f.reach:
            tail.append(f"reach: {f.reach}" + (f" ({f.evidence[0]})" if f.evidence else ""))
        if f.patch_set:
            tail.append(f"patch set: {f.patch_set}")
        if "baseline: none" in f.evidence:
            tail.append("baseline: none (no pristine source: the whole file was judged)")
        return [*out, pad + " · ".join(tail)] if tail else out
    where = printable(f.path) + (f":{f.line}" if f.line else "")
    detail = [printable(f.message)]
    if f.function:
        detail.insert(0, f.function)
    if f.patch_set:
        detail.append(f"patch set: {f.patch_set}")
    return [f"  {f.severity.label.upper():<9}{f.kind.value:<{kind_w + 2}}{where}", pad + " · ".join(detail)]


def format_table(report: Report) -> str:
    """A human table grouped by distribution, worst first, then the summary line."""
    lines: list[str] = []
    groups = _group(report.findings)
    # Distributions in name order; unowned files (distribution None) last, under their own heading.
    for dist, version in sorted(groups, key=lambda k: (k[0] is None, (k[0] or "").lower())):
        items = sorted(groups[(dist, version)], key=lambda f: (-f.severity, f.path, f.line or 0))
        lines.append(f"{dist} {version}" if dist else "not owned by any distribution")
        kind_w = max(len(f.kind.value) for f in items)
        for f in items:
            lines.extend(_finding_lines(f, kind_w))
        lines.append("")
    lines.append(summary_line(report))
    return "\n".join(lines) + "\n"


_SARIF_LEVEL = {
    Severity.HIGH: "error",
    Severity.MODERATE: "warning",
    Severity.MINOR: "note",
    Severity.INFO: "note",
}


def _file_uri(path: str) -> str:
    from urllib.parse import quote

    return "file://" + quote(path if path.endswith("/") else path + "/")


def to_sarif(report: Report) -> dict[str, Any]:
    """The report as a SARIF 2.1.0 log (GitHub code scanning, CI annotations).

    Each rule id becomes a reporting descriptor; each finding a result whose location is relative to the
    ``SITE_PACKAGES`` base (absolute for files outside site-packages), with line numbers for code findings.
    """
    from .analysis.rules import RULES

    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    for f in report.findings:
        if f.rule not in rules:
            known = RULES.get(f.rule)
            text = known.rationale if known else f.kind.value.replace("-", " ")
            rules[f.rule] = {
                "id": f.rule,
                "name": "".join(part.capitalize() for part in f.rule.split("-")),
                "shortDescription": {"text": text},
                "defaultConfiguration": {"level": _SARIF_LEVEL[f.severity]},
                "properties": {"kind": f.kind.value},
            }
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
        result: dict[str, Any] = {
            "ruleId": f.rule,
            "ruleIndex": list(rules).index(f.rule),
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": printable(f.message)},
            "locations": [{"physicalLocation": physical}],
            "properties": {
                "severity": f.severity.label,
                "kind": f.kind.value,
                "distribution": f.distribution,
                "version": f.version,
                "function": f.function,
                "gate": dict(f.gate) if f.gate else None,
                "reach": f.reach,
                "evidence": list(f.evidence),
                "patch_set": f.patch_set,
            },
        }
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
                        "informationUri": "https://pypi.org/project/patchguard/",
                        "rules": list(rules.values()),
                    }
                },
                "originalUriBaseIds": {"SITE_PACKAGES": {"uri": _file_uri(printable(base))}},
                "results": results,
            }
        ],
    }


def format_sarif(report: Report) -> str:
    """The report as SARIF 2.1.0 JSON text."""
    return json.dumps(to_sarif(report), indent=2, ensure_ascii=False) + "\n"
