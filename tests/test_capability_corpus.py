"""The capabilities corpus (issue 23): edits the analysis should judge right once each capability is built.

fixtures/analysis/capabilities.toml holds injected and benign cases (``kind``) of eight capabilities
(``capability``) for two fixture packages (``package``: fixtures/minillm, fixtures/miniengine). An injected
case is checked exactly as an injected.toml case (:func:`tests.test_analysis.check_injected`). A benign case
is held to precision, not only to "nothing high": nothing at moderate or above beyond what it lists, and each
finding it lists on its line at its severity.

Which cases the analysis does not pass yet is data: ``fixtures/analysis/capabilities-pending.txt``. Each
listed case is ``xfail(strict=True)`` — the day its capability lands it passes, the test fails and the line
goes; a case not listed must pass. ``PATCHGUARD_CORPUS_STRICT=1`` runs every case unmarked, for whoever
builds a capability.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import patchguard
from patchguard import Severity

from .helpers import MINILLM_SRC, REPO
from .test_analysis import _cases, check_injected, expected_line, judged

# package name -> (fixture root, distribution, version) as the corpus cases' findings name them
PACKAGES: dict[str, tuple[Path, str, str]] = {
    "minillm": (MINILLM_SRC, "minillm", "0.4.0"),
    "miniengine": (REPO / "fixtures" / "miniengine", "miniengine", "0.2.0"),
}
CAPABILITIES = tuple(str(n) for n in range(1, 9))

CASES = _cases("capabilities.toml")
INJECTED = [c for c in CASES if c.get("kind") == "injected"]
BENIGN = [c for c in CASES if c.get("kind") == "benign"]


def judged_in_package(case: dict[str, Any]) -> tuple[list[patchguard.Finding], str, int]:
    root, distribution, version = PACKAGES[case.get("package", "minillm")]
    return judged(case, root, distribution, version)


def check_benign(case: dict[str, Any], findings: list[patchguard.Finding], after: str, start: int) -> None:
    """Nothing high; each listed finding on its line at its severity; nothing else at moderate or above."""
    assert not [f for f in findings if f.severity is Severity.HIGH], [
        (f.rule, f.line, f.message) for f in findings if f.severity is Severity.HIGH
    ]
    expected = set()
    for exp in case.get("expect", []):
        line = expected_line(after, start, exp["line_contains"])
        match = [f for f in findings if f.rule == exp["rule"] and f.line == line]
        assert match, f"expected {exp['rule']} on line {line}; got {[(f.rule, f.line) for f in findings]}"
        assert match[0].severity is Severity.parse(exp["severity"]), (match[0].severity, match[0].message)
        expected.add((exp["rule"], line))
    flagged = [
        (f.rule, f.line, f.severity.label)
        for f in findings
        if f.severity >= Severity.MODERATE and (f.rule, f.line) not in expected
    ]
    assert not flagged, f"a look-alike flagged: {flagged}"


CHECKS: dict[str, Callable[[dict[str, Any], list[patchguard.Finding], str, int], None]] = {
    "injected": check_injected,
    "benign": check_benign,
}


def run_case(case: dict[str, Any]) -> None:
    CHECKS[case["kind"]](case, *judged_in_package(case))


PENDING = {
    line.strip()
    for line in (REPO / "fixtures" / "analysis" / "capabilities-pending.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
}


def _params(cases: list[dict[str, Any]]) -> list[Any]:
    strict = os.environ.get("PATCHGUARD_CORPUS_STRICT") == "1"
    params = []
    for case in cases:
        marks = []
        if not strict and case["id"] in PENDING:
            reason = f"issue 23 capability {case['capability']}: not built yet"
            marks.append(pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason))
        params.append(pytest.param(case, id=case["id"], marks=marks))
    return params


def test_every_pending_case_exists() -> None:
    assert {c["id"] for c in CASES} >= PENDING


def test_the_corpus_covers_every_capability() -> None:
    assert len(INJECTED) >= 60 and len(BENIGN) >= 25
    assert len(INJECTED) + len(BENIGN) == len(CASES), "every case is injected or benign"
    for n in CAPABILITIES:
        assert [c for c in INJECTED if c["capability"] == n], f"no injected case for capability {n}"
        assert [c for c in BENIGN if c["capability"] == n], f"no benign case for capability {n}"
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    assert {c.get("package", "minillm") for c in CASES} <= set(PACKAGES)


@pytest.mark.parametrize("case", _params(INJECTED))
def test_capability_injected_case(case: dict[str, Any]) -> None:
    run_case(case)


@pytest.mark.parametrize("case", _params(BENIGN))
def test_capability_benign_case(case: dict[str, Any]) -> None:
    run_case(case)
