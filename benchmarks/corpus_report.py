"""Recall and false alarms of the code analysis on the three edit corpora, per capability and per rule.

    python benchmarks/corpus_report.py

The corpora are fixtures/analysis/injected.toml, benign.toml and capabilities.toml (issue 23; its cases
name their ``kind``, ``capability`` and ``package``). Each case is applied to its pristine fixture file and
judged by :func:`patchguard.analysis.analyse`, the way tests/test_analysis.py does. For an injected case:

- found: every expected finding is at its exact line — a finding on that line names the rule, as its own or
  as an "also" of the line's finding;
- exact: found, at the expected severity, and nothing else at moderate or above (what the tests check,
  gate and function aside).

For a benign case, flagged: some finding at moderate or above. Always exits 0: this is a measure, not a gate.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from patchguard import Finding, Severity  # noqa: E402
from patchguard.analysis import CodeChange, analyse  # noqa: E402

CORPUS = REPO / "fixtures" / "analysis"
CORPORA = ("injected.toml", "benign.toml", "capabilities.toml")
PACKAGES = {
    "minillm": (REPO / "fixtures" / "minillm", "minillm", "0.4.0"),
    "miniengine": (REPO / "fixtures" / "miniengine", "miniengine", "0.2.0"),
}
CAPABILITY_NAMES = {
    "1": "families beyond closed lists",
    "2": "receivers resolved in scope",
    "3": "process-wide switches",
    "4": "device syncs by value",
    "5": "hot path from the framework",
    "6": "swallowed by the handler",
    "7": "neutralised checks",
    "8": "precision",
}


@dataclass
class Verdict:
    corpus: str
    kind: str  # injected / benign
    capability: str  # "" outside capabilities.toml
    found: bool = False
    exact: bool = False
    flagged: bool = False
    rules_found: list[tuple[str, bool]] = field(default_factory=list)  # (rule, found at its line)
    flagged_rules: set[str] = field(default_factory=set)


def _edit(case: dict[str, Any], root: Path) -> tuple[str, str, int]:
    before = (root / case["file"]).read_text(encoding="utf-8")
    anchor = case["anchor"]
    at = before.index(anchor)
    if "replace" in case:
        return before, before[:at] + case["replace"] + before[at + len(anchor) :], at
    end = at + len(anchor)
    return before, before[:end] + case["insert"] + before[end:], end


def _line_of(after: str, start: int, needle: str) -> int:
    offset = after.index(needle, after.rfind("\n", 0, start) + 1)
    return after.count("\n", 0, offset) + 1


def _also(f: Finding) -> list[str]:
    return [r for e in f.evidence if e.startswith("also: ") for r in e[6:].split(", ")]


def judge(corpus: str, case: dict[str, Any]) -> Verdict:
    kind = case.get("kind", "benign" if corpus == "benign.toml" else "injected")
    root, distribution, version = PACKAGES[case.get("package", "minillm")]
    before, after, start = _edit(case, root)
    findings = analyse(CodeChange(case["file"], before.encode(), after.encode(), distribution, version))
    v = Verdict(corpus, kind, str(case.get("capability", "")))
    loud = [f for f in findings if f.severity >= Severity.MODERATE]
    if kind == "benign":
        v.flagged = bool(loud)
        v.flagged_rules = {f.rule for f in loud}
        return v
    expected: set[tuple[str, int]] = set()
    exact = True
    for exp in case.get("expect", []):
        line = _line_of(after, start, exp["line_contains"])
        expected.add((exp["rule"], line))
        hits = [f for f in findings if f.line == line and exp["rule"] in (f.rule, *_also(f))]
        v.rules_found.append((exp["rule"], bool(hits)))
        if not hits:
            exact = False
            continue
        want = Severity.parse(exp["severity"])
        f = hits[0]
        if (f.severity is not want) if f.rule == exp["rule"] else (f.severity < want):
            exact = False
    v.found = all(ok for _rule, ok in v.rules_found)
    extra = [f for f in loud if (f.rule, f.line) not in expected]
    v.exact = v.found and exact and not extra
    return v


def _cases(name: str) -> list[dict[str, Any]]:
    path = CORPUS / name
    if not path.exists():
        return []
    cases: list[dict[str, Any]] = tomllib.loads(path.read_text(encoding="utf-8")).get("case", [])
    return cases


def _ratio(k: int, n: int) -> str:
    return f"{k}/{n}" if n else "-"


def _table(title: str, header: list[str], rows: list[list[str]]) -> None:
    """A text table: the first column left-aligned, the figures right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        first, *rest = zip(cells, widths, strict=True)
        return "  " + "  ".join([first[0].ljust(first[1]), *(c.rjust(w) for c, w in rest)])

    print(f"\n{title}")
    for row in [header, *rows]:
        print(line(row))


def main() -> int:
    verdicts: list[Verdict] = []
    errors: list[str] = []
    for corpus in CORPORA:
        for case in _cases(corpus):
            try:
                verdicts.append(judge(corpus, case))
            except Exception as exc:  # a case that cannot be judged is reported, not fatal
                errors.append(f"{corpus}:{case.get('id')}: {type(exc).__name__}: {exc}")

    rows = []
    for corpus in CORPORA:
        mine = [v for v in verdicts if v.corpus == corpus]
        inj = [v for v in mine if v.kind == "injected"]
        ben = [v for v in mine if v.kind == "benign"]
        rows.append(
            [
                corpus,
                _ratio(sum(v.found for v in inj), len(inj)),
                _ratio(sum(v.exact for v in inj), len(inj)),
                _ratio(sum(v.flagged for v in ben), len(ben)),
            ]
        )
    _table(
        "By corpus (injected: found at the exact line, judged exactly; benign: flagged at moderate or above)",
        ["corpus", "found", "exact", "benign flagged"],
        rows,
    )

    caps = [v for v in verdicts if v.corpus == "capabilities.toml"]
    rows = []
    for n, name in CAPABILITY_NAMES.items():
        inj = [v for v in caps if v.capability == n and v.kind == "injected"]
        ben = [v for v in caps if v.capability == n and v.kind == "benign"]
        rows.append(
            [
                f"{n} {name}",
                _ratio(sum(v.found for v in inj), len(inj)),
                _ratio(sum(v.exact for v in inj), len(inj)),
                _ratio(sum(v.flagged for v in ben), len(ben)),
            ]
        )
    _table("By capability (capabilities.toml)", ["capability", "found", "exact", "benign flagged"], rows)

    found: dict[str, Counter[str]] = defaultdict(Counter)  # rule -> corpus -> expectations found
    total: dict[str, Counter[str]] = defaultdict(Counter)
    flagged: dict[str, Counter[str]] = defaultdict(Counter)  # rule -> corpus -> benign cases it flags
    for v in verdicts:
        for rule, ok in v.rules_found:
            total[rule][v.corpus] += 1
            found[rule][v.corpus] += ok
        for rule in v.flagged_rules:
            flagged[rule][v.corpus] += 1
    rules = sorted(set(total) | set(flagged))
    rows = [
        [
            rule,
            _ratio(found[rule]["injected.toml"], total[rule]["injected.toml"]),
            _ratio(found[rule]["capabilities.toml"], total[rule]["capabilities.toml"]),
            str(flagged[rule]["benign.toml"]),
            str(flagged[rule]["capabilities.toml"]),
        ]
        for rule in rules
    ]
    _table(
        "By rule (expectations found at their exact line; benign cases the rule flags at moderate or above)",
        ["rule", "injected.toml", "capabilities", "benign.toml flags", "capabilities flags"],
        rows,
    )
    for err in errors:
        print(f"\nnot judged: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
