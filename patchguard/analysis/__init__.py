"""Judge every change: injected debug code, its severity, its gate, and whether it is on the live path.

Only what changed is judged: the installed file is compared with its pristine source, the changed lines
are mapped to statements, and those are matched against the rules (:mod:`.rules`) with import aliases
resolved. A rule the pristine code already hits (vLLM's own legitimate ``torch.save``) is not reported.
Without a pristine source the whole file is judged and findings say ``baseline: none``.

libcst is imported by :mod:`.judge` only, and only when there is a change to judge.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..diffs import split_lines
from ..model import Finding, Kind, Severity
from .rules import RULES
from .structure import Region, Structure, changed_regions, strip_docstrings, structure

__all__ = ["CodeChange", "analyse"]

_CODE_START = ("raise ", "raise\n", "assert ", "assert(")


@dataclass(frozen=True, slots=True)
class CodeChange:
    """One changed ``.py`` file to judge; ``before`` is ``None`` when no pristine source was found."""

    path: str  # as shown in findings
    before: bytes | None
    after: bytes
    distribution: str | None = None
    version: str | None = None


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _is_comment_or_blank(line: str) -> bool:
    s = line.strip()
    return not s or s.startswith("#")


_SCAFFOLD = (
    "import ",
    "from ",
    "if ",
    "elif ",
    "else:",
    "try:",
    "except",
    "finally:",
    "with ",
    "for ",
    "while ",
)


def _scaffolding(line: str) -> bool:
    """Imports and block headers: the frame of an injected block, not a change of their own."""
    s = line.split("#", 1)[0].strip()  # a trailing comment ("if x:  # why") does not make it code
    return s.startswith(("import ", "from ")) or (s.startswith(_SCAFFOLD) and s.endswith(":"))


def _looks_like_code(comment: str) -> bool:
    text = comment.strip().lstrip("#").strip()
    if not text or (text[0].isupper() and " " in text and not text.endswith(")")):
        return False
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return any(
        isinstance(n, (ast.Call, ast.Assign, ast.Import, ast.ImportFrom, ast.Return)) for n in ast.walk(tree)
    )


@dataclass(frozen=True, slots=True)
class _Maker:
    """Builds the findings of one file (its path, distribution, lines and baseline are shared)."""

    change: CodeChange
    lines: Sequence[str]
    baseline: tuple[str, ...]

    def __call__(
        self,
        kind: Kind,
        rule: str,
        severity: Severity,
        line: int,
        end: int,
        function: str | None,
        message: str,
        gate: dict[str, str] | None = None,
    ) -> Finding:
        src = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        c = self.change
        return Finding(
            kind=kind,
            severity=severity,
            rule=rule,
            path=c.path,
            message=message,
            distribution=c.distribution,
            version=c.version,
            line=line,
            end_line=end,
            function=function or None,
            gate=gate,
            reach=None,
            evidence=self.baseline,
            patch_set=None,
            source=src,
        )

    def commented_out(self, st: Structure, n: int) -> Finding:
        return self(
            Kind.INJECTED_CODE,
            "commented-out-code",
            Severity.MINOR,
            n,
            n,
            st.qualname_at(n),
            "code left behind in a comment",
            st.gate_at(n),
        )


def analyse(change: CodeChange) -> list[Finding]:
    """Findings for the changed code of one file (empty when nothing changed)."""
    after = _decode(change.after)
    before = _decode(change.before) if change.before is not None else None
    regions = changed_regions(before, after)
    if not regions:
        return []
    st = structure(after)
    lines = split_lines(after)
    finding = _Maker(change, lines, () if before is not None else ("baseline: none",))

    out: list[Finding] = []
    changed = {line for r in regions for line in r.lines}
    covered: set[int] = set()
    if changed:
        out += _judged(st, lines, before, changed, covered, finding)
    if not out and before is not None and st.tree is not None:
        try:
            cosmetic = strip_docstrings(ast.parse(before)) == strip_docstrings(ast.parse(after))
        except (SyntaxError, ValueError):
            cosmetic = False
        if cosmetic:
            dead_code = [
                finding.commented_out(st, n)
                for r in regions
                for n in r.lines
                if lines[n - 1].strip().startswith("#") and _looks_like_code(lines[n - 1])
            ]
            if dead_code:
                return _one_per_region_and_rule(dead_code, regions)
            first = next((r for r in regions if r.end >= r.start), regions[0])
            message = "only comments, layout or docstrings differ from the pristine wheel"
            end = max(first.end, first.start)
            return [
                finding(
                    Kind.COSMETIC_CHANGE,
                    "cosmetic-change",
                    Severity.MINOR,
                    first.start,
                    end,
                    st.qualname_at(first.start),
                    message,
                )
            ]

    out = _one_per_region_and_rule(out, regions)
    out += _removed_checks(regions, st, after, finding)
    for r in regions:
        added = [n for n in r.lines if n not in covered]
        if len(added) < len(r.lines):
            # The region holds a rule hit: its imports and block headers belong to that injected block.
            added = [n for n in added if lines[n - 1].strip() and not _scaffolding(lines[n - 1])]
        if not added:
            continue
        for n in added:
            if lines[n - 1].strip().startswith("#") and _looks_like_code(lines[n - 1]):
                out.append(finding.commented_out(st, n))
                covered.add(n)
        rest = [n for n in added if n not in covered]
        code_added = [n for n in rest if not _is_comment_or_blank(lines[n - 1])]
        code_removed = [x for x in r.removed if not _is_comment_or_blank(x)]
        if not rest and not code_removed:
            continue
        line = rest[0] if rest else max(r.start - 1, 1)
        end = rest[-1] if rest else line
        if not code_added and not code_removed:
            out.append(
                finding(
                    Kind.COSMETIC_CHANGE,
                    "cosmetic-change",
                    Severity.MINOR,
                    line,
                    end,
                    st.qualname_at(line),
                    "only comments or layout changed here",
                )
            )
        elif not any(f.line is not None and line <= f.line <= end for f in out):
            what = "lines removed" if not code_added else "logic differs from the pristine wheel"
            if before is None:
                what = "no pristine source to compare with: new or unverifiable code"
            out.append(
                finding(
                    Kind.FUNCTIONAL_CHANGE,
                    "functional-change",
                    Severity.MINOR,
                    line,
                    end,
                    st.qualname_at(line),
                    what,
                )
            )
    return sorted(out, key=lambda f: (f.line or 0, f.rule))


def _one_per_region_and_rule(findings: list[Finding], regions: Sequence[Region]) -> list[Finding]:
    """One finding per changed region and rule (the first line it hits): a debug block of ten prints is
    one print finding, not ten."""
    seen: set[tuple[object, str]] = set()
    out: list[Finding] = []
    for f in sorted(findings, key=lambda f: (f.line or 0, f.rule)):
        region = next((i for i, r in enumerate(regions) if r.start <= (f.line or 0) <= r.end), -1)
        # In one function, an edit split by difflib into several regions is still one edit.
        where: object = f.function if f.function else region
        if region >= 0 and (where, f.rule) in seen:
            continue
        seen.add((where, f.rule))
        out.append(f)
    return out


def _judged(
    st: Structure,
    lines: Sequence[str],
    before: str | None,
    changed: set[int],
    covered: set[int],
    finding: _Maker,
) -> list[Finding]:
    from .judge import Unit, hit_counts, judge_unit, units_for

    before_st = structure(before) if before is not None else None
    before_lines = split_lines(before) if before is not None else []
    out: list[Finding] = []
    for unit, ulines in units_for(sorted(changed), st, lines).items():
        # One walk of the unit: every hit, for the counts, then those on changed lines, for the report.
        all_hits = judge_unit(unit, None, st, lines)
        mine = set(ulines)
        hits = (
            all_hits
            if before is None
            else [h for h in all_hits if any(n in mine for n in range(h.line, h.end_line + 1))]
        )
        if not hits:
            continue
        baseline: dict[tuple[str, str], int] = {}
        after_counts = Counter((h.rule, h.qualname) for h in all_hits)
        if before_st is not None:
            scope = st.innermost(unit.start)
            match = [s for s in before_st.scopes if scope is not None and s.qualname == scope.qualname]
            if match:
                b = match[0]
                text = before_lines[b.start - 1] if b.start - 1 < len(before_lines) else ""
                bunit = Unit(b.start, b.end, len(text) - len(text.lstrip()), unit.prefix)
                baseline = dict(hit_counts(bunit, before_st, before_lines))
        for hit in hits:
            key = (hit.rule, hit.qualname)
            if before_st is not None and baseline.get(key, 0) >= after_counts[key]:
                continue  # the pristine unit already does this: moved or re-indented, not injected
            rule = RULES[hit.rule]
            forward = hit.function.rsplit(".", 1)[-1].startswith("forward")
            severity = rule.severity
            if hit.rule == "logging" and not (hit.loop or forward):
                severity = Severity.MINOR
            if hit.dead:
                severity = Severity.INFO
            gate = None if hit.gate_kind == "none" else {"kind": hit.gate_kind, "condition": hit.gate}
            message = (
                f"{hit.qualname} {rule.rationale}"
                + (f": {hit.detail}" if hit.detail else "")
                + (", on the forward path" if forward else "")
                + (" (unreachable: it cannot run)" if hit.dead else "")
            )
            out.append(
                finding(
                    Kind.INJECTED_CODE,
                    hit.rule,
                    severity,
                    hit.line,
                    hit.end_line,
                    hit.function,
                    message,
                    gate,
                )
            )
            covered.update(range(hit.line, hit.end_line + 1))
    return out


def _removed_checks(regions: Sequence[Region], st: Structure, after: str, finding: _Maker) -> list[Finding]:
    out: list[Finding] = []
    remaining = {line.strip() for line in split_lines(after)}
    for r in regions:
        line = max(r.start, 1)  # where the removed lines were (the first line after them for a deletion)
        for old in r.removed:
            s = old.strip()
            if s.startswith(_CODE_START) and s not in remaining:
                out.append(
                    finding(
                        Kind.INJECTED_CODE,
                        "removed-check",
                        Severity.MODERATE,
                        line,
                        line,
                        st.qualname_at(line),
                        f"removed: {s[:100]}",
                        st.gate_at(line),
                    )
                )
    return out
