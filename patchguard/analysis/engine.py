"""The engine of code analysis: one changed file in, its findings out.

Only what changed is judged: the installed file is compared with its pristine source, the changed lines
are mapped to statements, and those are matched against the rules (:mod:`.rules`) with import aliases
resolved (:mod:`.aliases`). A rule the pristine code already hits (vLLM's own legitimate ``torch.save``) is
not reported. Without a pristine source the whole file is judged and findings say ``baseline: none``.

libcst is imported by :mod:`.judge` only, and only when there is a change to judge.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import collections
import copy
import functools
import io
import keyword
import re
import textwrap
import tokenize
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..diffs import split_lines
from ..model import Finding, Gate, GateKind, Kind, RuleId, Severity
from .aliases import reads_environment, resolve
from .bounds import MAX_LINE, too_wild
from .cases import compare
from .families import (
    CHECKING_CALL,
    CHECKING_FLAG_NAME_WORDS,
    CHECKING_FLAG_WORDS,
    LENIENT_FLAG_NAME_WORDS,
    LENIENT_FLAG_WORDS,
    SUPPRESSORS,
)
from .rules import (
    LOG_METHODS,
    LOG_ONCE,
    RULES,
    could_hit,
    is_forward,
    loads_weights,
    on_hot_path,
    rule_for_call,
    runs_once,
)
from .structure import Region, Scope, Structure, changed_regions, same_code, structure

if TYPE_CHECKING:
    from .judge import Hit, Site, Unit

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
    # Functions of the file a framework's entry point elsewhere calls on every step → that entry point.
    hot: tuple[tuple[str, str], ...] = ()


@functools.lru_cache(maxsize=4)  # the pristine text is located for its scopes, then for the cosmetic test
def locate(source: str) -> Structure:
    """The structure of ``source``: read with ``ast``, else with libcst (a newer Python's syntax), else what
    a file no grammar parses still tells."""
    wild = _wild(source)
    if wild is not None:  # no parser sees it: a crash or gigabytes, not a verdict
        return Structure([], {}, set(), grammar=None, syntax_error=wild)
    tree = _tree_of(source)
    st = structure(source, tree) if tree is not None else None
    if st is None:
        from .newer import structure_of_newer

        st = structure_of_newer(source)
    return st


def _wild(source: str) -> tuple[int, str] | None:
    """:func:`.bounds.too_wild` of ``source``, asked only where it can say something: ``ast``, which CPython
    bounds, is tried first on a text too short to hold a line too long — one it parses nests no deeper than
    CPython's 200 brackets, so is not too wild (and its tree is kept for what asks next)."""
    if len(source) <= MAX_LINE and _tree_of(source) is not None:
        return None
    return too_wild(source)


@functools.lru_cache(maxsize=4)  # the pristine text: for the cosmetic test, then for its structure
def _tree_of(source: str) -> ast.Module | None:
    """``source`` parsed with ``ast`` (``None``: not by the running interpreter's grammar)."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


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


def _is_commented_code(line: str) -> bool:
    """A comment line holding code (``# torch.save(x, path)``), not prose."""
    return line.strip().startswith("#") and _looks_like_code(line)


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


_SOURCE_SHOWN = 500  # characters of a line a finding quotes


@dataclass(frozen=True, slots=True)
class _Maker:
    """Builds the findings of one file (its path, distribution, lines and baseline are shared)."""

    change: CodeChange
    lines: Sequence[str]
    baseline: tuple[str, ...]

    def __call__(
        self,
        kind: Kind,
        rule: RuleId,
        severity: Severity,
        line: int,
        end: int,
        function: str | None,
        message: str,
        gate: Gate | None = None,
    ) -> Finding:
        src = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        if len(src) > _SOURCE_SHOWN:  # a finding quotes its line, not a 5 MB data table
            src = src[:_SOURCE_SHOWN] + f"… ({len(src)} characters)"
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

    def cosmetic(self, st: Structure, line: int, end: int, message: str) -> Finding:
        return self(
            Kind.COSMETIC_CHANGE,
            RuleId.COSMETIC_CHANGE,
            Severity.MINOR,
            line,
            end,
            st.qualname_at(line),
            message,
        )

    def functional(self, st: Structure, line: int, end: int, message: str) -> Finding:
        return self(
            Kind.FUNCTIONAL_CHANGE,
            RuleId.FUNCTIONAL_CHANGE,
            Severity.MINOR,
            line,
            end,
            st.qualname_at(line),
            message,
        )

    def dead(self, st: Structure, line: int, end: int) -> Finding:
        """Code added where it cannot run: it changes nothing (reported, at the lowest severity)."""
        return self(
            Kind.FUNCTIONAL_CHANGE,
            RuleId.FUNCTIONAL_CHANGE,
            Severity.INFO,
            line,
            end,
            st.qualname_at(line),
            "code added where it cannot run (unreachable)",
        )

    def commented_out(self, st: Structure, n: int) -> Finding:
        return self(
            Kind.INJECTED_CODE,
            RuleId.COMMENTED_OUT_CODE,
            Severity.MINOR,
            n,
            n,
            st.qualname_at(n),
            "code left behind in a comment",
            st.gate_at(n),
        )


@dataclass(frozen=True, slots=True)
class _Edit:
    """One changed file as every step of :func:`analyse` reads it: the pristine text (``None`` without one),
    the structure and lines of the installed text, and the maker of its findings."""

    before: str | None
    st: Structure
    lines: Sequence[str]
    finding: _Maker

    @property
    def text(self) -> str:
        """The installed text (its lines joined)."""
        return "".join(self.lines)


def analyse(change: CodeChange) -> list[Finding]:
    """Findings for the changed code of one file (empty when nothing changed)."""
    after = _decode(change.after)
    before = _decode(change.before) if change.before is not None else None
    regions = changed_regions(before, after)
    if not regions:
        return []
    lines = split_lines(after)
    finding = _Maker(change, lines, () if before is not None else ("baseline: none",))
    st = locate(after)
    edit = _Edit(before, st.with_hot(dict(change.hot)) if change.hot else st, lines, finding)

    changed = {line for r in regions for line in r.lines}
    covered: set[int] = set()
    out = _judged(edit, changed, covered) if changed else []
    if edit.st.syntax_error is not None:
        out.append(_unparseable(edit, edit.st.syntax_error))
    if not out and before is not None and _cosmetic_only(regions, edit):
        return _cosmetic(edit, regions)
    out += _meanings(regions, edit, changed, out)
    for r in regions:
        _unexplained(edit, r, covered, out)
    out = _checks_voices(_scripts_are_not_library(out, edit.st.tree), regions)
    return sorted(_one_per_line(out), key=lambda f: (f.line or 0, f.rule))


def _cosmetic_only(regions: Sequence[Region], edit: _Edit) -> bool:
    """Whether the edit changed comments, layout or docstrings only: the text first (code words that differ
    are code changed), then the trees."""
    assert edit.before is not None
    return not _code_words_differ(regions, edit) and _only_cosmetic(edit.before, edit.st)


def _meanings(
    regions: Sequence[Region], edit: _Edit, changed: set[int], found: list[Finding]
) -> list[Finding]:
    """What the edit means beyond the rule hits ``found``: checks removed, narrowed, forced, loosened;
    handlers that let errors go; switches left on; gates forced open."""
    out = _removed_checks(regions, edit, found)
    for meaning in (_narrowed_checks, _forced_conditions, _flags_turned_off, _bounds_dropped):
        out += _shallow(meaning, regions, edit)
    out += _shallow(_requirements_lowered, regions, edit) + _shallow(_supported_grown, regions, edit)
    out += _shallow(_answer_widened, regions, edit) + _shallow(_calls_loosened, regions, edit)
    out += _shallow(_limits_moved, regions, edit) + _shallow(_answers_overridden, regions, edit)
    out += _shallow(_bounds_raised, regions, edit) + _shallow(_refusals_preempted, regions, edit)
    out += _shallow(_declared_bounds_moved, regions, edit)
    out += _shallow(_lookups_softened, regions, edit) + _shallow(_errors_kept_back, regions, edit)
    out += _shallow(_error_answers_dropped, regions, edit) + _shallow(_refusals_retried, regions, edit)
    out += _shallow(_disqualifiers_gone, regions, edit) + _shallow(_table_entries_dropped, regions, edit)
    out += _shallow(_checks_dropped, regions, edit)
    out += _widened_sets(edit, changed | {r.start for r in regions if r.removed and not r.lines})
    out += _new_handlers(edit, changed, [*found, *out], regions)
    out += _shallow(_handlers_widened, regions, edit) + _shallow(_switches_left_on, regions, edit)
    return out + _shallow(_checks_made_conditional, regions, edit) + _gates_forced_open(edit, changed)


def _shallow(
    meaning: Callable[[Sequence[Region], _Edit], list[Finding]], regions: Sequence[Region], edit: _Edit
) -> list[Finding]:
    """A reading of the edit's meaning, or none when its expressions nest deeper than Python's own
    recursion can follow (``not not … x`` two thousand times): no verdict on such code, never a crash."""
    try:
        return meaning(regions, edit)
    except (RecursionError, MemoryError):
        return []


def _checks_voices(out: list[Finding], regions: Sequence[Region]) -> list[Finding]:
    """A log line written where a check was taken out (``raise ValueError(…)`` → ``logger.warning(…)``) is
    the voice of the check the edit neutralised, reported there — not output added for its own sake."""
    checks = [f.line or 0 for f in out if f.rule == RuleId.REMOVED_CHECK]
    spans = [(r.start, max(r.end, r.start)) for r in regions]
    spans = [(a, b) for a, b in spans if any(a <= n <= b for n in checks)]
    return [
        replace(f, severity=Severity.MINOR)
        if f.rule == RuleId.LOGGING
        and f.severity > Severity.MINOR
        and any(a <= (f.line or 0) <= b for a, b in spans)
        else f
        for f in out
    ]


_SCRIPT_NOTE = ' (script code under `if __name__ == "__main__":`, which the library never runs)'


def _scripts_are_not_library(findings: list[Finding], tree: ast.Module | None) -> list[Finding]:
    """Code under a module's ``if __name__ == "__main__":`` runs only when the file is run as a script,
    never when the server imports it: its findings are minor at most, and say why. (``tree``: the file's
    ast, as locating it parsed it; ``None`` when ``ast`` does not parse it.)"""
    if tree is None:
        return findings
    spans = [
        (node.lineno, node.end_lineno or node.lineno)
        for node in tree.body
        if isinstance(node, ast.If) and _is_main_test(node.test)
    ]
    if not spans:
        return findings
    spans += _script_only(tree, spans)
    out = []
    for f in findings:
        inside = f.line is not None and any(a <= f.line <= b for a, b in spans)
        if inside and f.kind is Kind.INJECTED_CODE and f.severity > Severity.MINOR:
            f = replace(f, severity=Severity.MINOR, message=f.message + _SCRIPT_NOTE)
        out.append(f)
    return out


def _script_only(tree: ast.Module, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The module-level functions only the script block uses (a ``demo()`` it calls): named nowhere else in
    the file (``__all__`` included), and private or named for a script's role (a demo, an example, a test,
    a benchmark) — a public one may be imported by another module, which the file cannot tell."""
    defs = {
        node.name: (node.lineno, node.end_lineno or node.lineno)
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _script_role(node.name)
    }
    called: set[str] = set()  # by the script block
    used_elsewhere: set[str] = set()
    for node, name in _uses(tree, defs):
        line = node.lineno
        if any(a <= line <= b for a, b in spans):
            called.update([name] if isinstance(node, ast.Name) else [])
        elif not defs[name][0] <= line <= defs[name][1]:
            used_elsewhere.add(name)
    return [span for name, span in defs.items() if name in called and name not in used_elsewhere]


def _uses(tree: ast.Module, names: Collection[str]) -> Iterator[tuple[ast.Name | ast.Constant, str]]:
    """Each use of one of ``names`` in ``tree``: by name, or by string (``__all__``, ``getattr(module,
    "demo")``)."""
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else getattr(node, "value", None)
        if isinstance(node, (ast.Name, ast.Constant)) and isinstance(name, str) and name in names:
            yield node, name


_SCRIPT_WORDS = frozenset({"demo", "example", "test", "bench", "benchmark"})


def _script_role(name: str) -> bool:
    return name.startswith("_") or bool(_SCRIPT_WORDS & set(name.split("_")))


def _is_main_test(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, *test.comparators]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    values = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and values == ["__main__"]


def _unparseable(edit: _Edit, error: tuple[int, str]) -> Finding:
    """The finding of a file no Python grammar parses; its changed lines were judged one by one."""
    line = min(max(error[0], 1), max(len(edit.lines), 1))
    what = (
        "patchguard does not parse a file this large"
        if error[1].startswith("a line of")
        else "no Python grammar parses this file"
    )
    failing = "" if error[1].startswith("a line of") else " importing it fails;"
    message = (
        f"{what} ({error[1]} at line {error[0]}):{failing} "
        "its changed lines were matched against the rules one statement at a time"
    )
    return edit.finding(
        Kind.FUNCTIONAL_CHANGE, RuleId.UNPARSEABLE, Severity.MODERATE, line, line, None, message
    )


def _code_words_differ(regions: Sequence[Region], edit: _Edit) -> bool:
    """Whether, by the text alone, the edit changed code: the names, numbers and keywords of its removed
    lines and of its added lines differ (comments and string literals left out) — and no changed line is
    inside, or holds, a triple-quoted string (a docstring's words are not code). ``False`` is no answer: the
    trees are compared then (:func:`_only_cosmetic`); this spares parsing the pristine file for the common
    edit that changed code."""
    inside = _in_triple_quotes(edit.lines)
    old: collections.Counter[str] = collections.Counter()
    new: collections.Counter[str] = collections.Counter()
    for r in regions:
        lines = [edit.lines[n - 1] for n in r.lines]
        quoted = any(_TRIPLE.search(t) for t in (*lines, *r.removed))
        if quoted or any(inside[n - 1] for n in (*r.lines, r.start) if 0 < n <= len(inside)):
            return False
        old.update(w for line in r.removed for w in _code_words(line))
        new.update(w for line in lines for w in _code_words(line))
    return old != new


def _code_words(line: str) -> list[str]:
    return _WORD.findall(_STRING.sub(" ", _code_of(line)))


def _in_triple_quotes(lines: Sequence[str]) -> list[bool]:
    """For each line, whether it begins inside a triple-quoted string, by counting the triple quotes above
    it (a rough reading: a line it is wrong about is one whose region is compared by trees)."""
    out: list[bool] = []
    open_ = False
    for line in lines:
        out.append(open_)
        quotes = len(_TRIPLE.findall(line))
        if quotes:
            open_ = (open_ + quotes) % 2 == 1
    return out


_WORD = re.compile(r"[A-Za-z_]\w*|\d[\w.]*")
_TRIPLE = re.compile(r"\"\"\"|\'\'\'")
_STRING = re.compile(r"""[rbfuRBFU]{0,2}(?:'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*")""")


def _only_cosmetic(before: str, after: Structure) -> bool:
    """Whether the two sources differ in comments, layout or docstrings only."""
    if after.tree is None or _wild(before) is not None:
        return False
    tree = _tree_of(before)  # (its tree alone: the structure of the pristine file is not needed for this)
    return tree is not None and same_code(tree, after.tree)


def _cosmetic(edit: _Edit, regions: Sequence[Region]) -> list[Finding]:
    """The findings of a file whose code is unchanged: code left in comments, else one cosmetic change."""
    lines, st, finding = edit.lines, edit.st, edit.finding
    dead_code = [
        finding.commented_out(st, n) for r in regions for n in r.lines if _is_commented_code(lines[n - 1])
    ]
    if dead_code:
        return _commented_runs(dead_code, lines)
    first = next((r for r in regions if r.end >= r.start), regions[0])
    message = "only comments, layout or docstrings differ from the pristine wheel"
    return [finding.cosmetic(st, first.start, max(first.end, first.start), message)]


def _unexplained(edit: _Edit, r: Region, covered: set[int], out: list[Finding]) -> None:
    """Add to ``out`` what region ``r`` changed beyond the rule hits: the code left in comments, then one
    cosmetic or functional change for the rest."""
    added = _uncovered(r, edit.lines, covered)
    if not added:
        return
    for n in added:
        if _is_commented_code(edit.lines[n - 1]):
            out.append(edit.finding.commented_out(edit.st, n))
            covered.add(n)
    rest = [n for n in added if n not in covered]
    change = _rest_of_region(edit, r, rest, out)
    if change is not None:
        out.append(change)


def _uncovered(r: Region, lines: Sequence[str], covered: set[int]) -> list[int]:
    """The lines of region ``r`` that no rule hit covers.

    When the region holds a rule hit, its imports and block headers belong to that injected block.
    """
    added = [n for n in r.lines if n not in covered]
    if len(added) < len(r.lines):
        added = [n for n in added if lines[n - 1].strip() and not _scaffolding(lines[n - 1])]
    return added


def _rest_of_region(edit: _Edit, r: Region, rest: Sequence[int], out: Sequence[Finding]) -> Finding | None:
    """The cosmetic or functional change of the ``rest`` of region ``r`` (its added lines that nothing
    explains, and the lines it removed); none when a finding already sits on those lines."""
    code_added = [n for n in rest if not _is_comment_or_blank(edit.lines[n - 1])]
    code_removed = [x for x in r.removed if not _is_comment_or_blank(x)]
    if not rest and not code_removed:
        return None
    line = rest[0] if rest else max(r.start - 1, 1)
    end = rest[-1] if rest else line
    if not code_added and not code_removed:
        return edit.finding.cosmetic(edit.st, line, end, "only comments or layout changed here")
    return None if _said_within(out, line, end) else _change_of(edit, line, end, code_added, code_removed)


def _change_of(edit: _Edit, line: int, end: int, added: Sequence[int], removed: Sequence[str]) -> Finding:
    """The functional change of lines ``line`` to ``end``: code added where it cannot run (below a ``return``,
    under ``if False:``) is reported at info; without a pristine source, the code is unverifiable."""
    if edit.before is not None and not removed and _all_dead(edit.st, added):
        return edit.finding.dead(edit.st, line, end)
    what = "lines removed" if not added else "logic differs from the pristine wheel"
    return edit.finding.functional(edit.st, line, end, what if edit.before is not None else _UNVERIFIABLE)


_UNVERIFIABLE = "no pristine source to compare with: new or unverifiable code"


def _said_within(found: Sequence[Finding], line: int, end: int) -> bool:
    return any(f.line is not None and line <= f.line <= end for f in found)


def _all_dead(st: Structure, lines: Sequence[int]) -> bool:
    return bool(lines) and all(st.is_dead(n) for n in lines)


def _one_per_line(findings: list[Finding]) -> list[Finding]:
    """One injected-code finding per changed line: several rules on one line (``torch.save(x.cpu(), p)`` is a
    dump *and* a device sync) become the finding of the most severe, naming the others."""
    by_line: dict[int, list[Finding]] = {}
    rest: list[Finding] = []
    for f in findings:
        if f.kind is Kind.INJECTED_CODE and f.line is not None:
            by_line.setdefault(f.line, []).append(f)
        else:
            rest.append(f)
    for same in by_line.values():
        same.sort(key=lambda f: (-f.severity, _RULE_ORDER.get(f.rule, 99)))
        first = same[0]
        if len(same) > 1:
            first = replace(first, end_line=max(o.end_line or o.line or 0 for o in same))
        others = [o for o in same[1:] if o.rule != first.rule]  # (two readings of one rule are one finding)
        if others:
            also = ", ".join(dict.fromkeys(o.rule for o in others))
            message = f"{first.message} (also {also} on this line)"
            first = replace(first, message=message, evidence=(*first.evidence, f"also: {also}"))
        rest.append(first)
    return rest


_RULE_ORDER = {rule: n for n, rule in enumerate(RULES)}


def _one_per_site(hits: list[Hit], edit: _Edit) -> list[Finding]:
    """One finding per injection site: only a contiguous run of one rule in one block (ten prints in a row,
    the same gate, the same target) folds into the finding of its first line, which lists every line.
    Separate blocks, other targets or other gates stay separate findings, however close."""
    runs: list[list[Hit]] = []
    last: dict[str, list[Hit]] = {}  # rule -> its current run
    for h in sorted(hits, key=lambda h: (h.line, h.end_line)):
        run = last.get(h.rule)
        if run and _continues(run[-1], h, edit.lines):
            run.append(h)
            continue
        last[h.rule] = [h]
        runs.append(last[h.rule])
    return [_folded(run, edit) for run in runs]


def _continues(prev: Hit, h: Hit, lines: Sequence[str]) -> bool:
    """Whether ``h`` goes on the run ``prev`` ends: the same rule, gate and function, no other target
    (``h`` names none, or the same), in the same block (same indentation) with nothing but blank or comment
    lines between them."""
    same = (prev.rule, prev.gate_kind, prev.gate, prev.function, prev.dead)
    if same != (h.rule, h.gate_kind, h.gate, h.function, h.dead) or h.detail not in ("", prev.detail):
        return False
    if h.line <= prev.end_line:
        return True  # on a line of the same statement
    if h.line > len(lines):
        return False
    if any(not _is_comment_or_blank(lines[n - 1]) for n in range(prev.end_line + 1, h.line)):
        return False
    return _indent(lines[prev.end_line - 1]) == _indent(lines[h.line - 1])


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _folded(run: list[Hit], edit: _Edit) -> Finding:
    first = _injected(run[0], edit)
    if len({h.line for h in run}) == 1:
        return replace(first, end_line=max(h.end_line for h in run))
    lines = list(dict.fromkeys(h.line for h in run))
    numbers = ", ".join(map(str, lines))
    return replace(
        first,
        end_line=max(h.end_line for h in run),
        message=f"{first.message} ({len(lines)} lines in a row: {numbers})",
        evidence=(*first.evidence, f"lines: {numbers}"),
    )


def _commented_runs(found: list[Finding], lines: Sequence[str]) -> list[Finding]:
    """Code left in comments: one finding per run of such lines with nothing else between them."""
    out: list[Finding] = []
    for f in sorted(found, key=lambda f: f.line or 0):
        prev = out[-1] if out else None
        if prev is not None and prev.function == f.function and (prev.end_line or 0) + 1 == f.line:
            out[-1] = replace(prev, end_line=f.line)
        else:
            out.append(f)
    return out


def _judged(edit: _Edit, changed: set[int], covered: set[int]) -> list[Finding]:
    """The findings of the rule hits on ``changed`` lines, unit by unit, leaving out those the pristine
    unit has as often (moved or re-indented, not injected); the lines they span are added to ``covered``."""
    from .judge import judge_statements, units_for

    pristine: _Pristine | None = None  # located on first need: most changed units hit nothing
    reported: list[Hit] = []
    opened = _forced_open(edit.st, changed) if edit.before is not None else []
    if edit.before is None and edit.st.grammar == "ast":  # a whole file: statement by statement
        reported = list(judge_statements(edit.st, edit.lines))
    else:
        for unit, ulines in units_for(sorted(changed), edit.st, edit.lines).items():
            all_hits, hits = _unit_hits(edit, unit, ulines, opened)
            reported += _newly_live(all_hits, hits, opened)
            if not hits:
                continue
            if pristine is None and edit.before is not None:
                pristine = _Pristine.of(edit.before)
            baseline, loudest, checks = (
                pristine.counts(unit, edit.st) if pristine is not None else (None, (-1, -1), False)
            )
            reported += _new_hits(all_hits, hits, baseline, loudest, checks)
    for hit in reported:
        covered.update(range(hit.line, hit.end_line + 1))
    return _one_per_site(reported, edit)


def _new_hits(
    all_hits: Sequence[Hit],
    hits: Sequence[Hit],
    baseline: dict[Site, int] | None,
    loudest: tuple[int, int] = (-1, -1),
    checks: bool = False,
) -> list[Hit]:
    """Of a unit's ``hits`` on its changed lines, those the pristine unit (``baseline``: its hits counted by
    site; ``None``: no pristine source) has fewer of — not a value read that took another's place — each
    told whether the pristine unit had its rule already (a log line: at least as loud, ``loudest``: of its
    routine log lines, and of those with the warnings it gives when something went wrong — a debug line, or
    a warning that something failed, does not make an info line on the way familiar; it does another such
    warning; a device sync: only when the pristine unit reads the device to check its input, ``checks``)."""
    from .judge import site

    after_counts = Counter(site(h) for h in all_hits)
    done = {rule for rule, _q, _w in baseline} if baseline else set()
    moved = _reads(after_counts) <= _reads(baseline) if baseline is not None else False
    return [
        replace(h, familiar=h.rule in done and _familiar_kind(h, loudest, checks))
        for h in hits
        if (baseline is None or baseline.get(site(h), 0) < after_counts[site(h)])
        and not (moved and _value_read(h.rule, h.qualname))
    ]


def _familiar_kind(hit: Hit, loudest: tuple[int, int], checks: bool) -> bool:
    """Whether a hit whose rule the pristine unit has is of the kind it has: a log line as loud
    (:func:`_as_loud`), a device sync where the unit already reads the device to check (``checks``)."""
    if hit.rule == RuleId.LOGGING:
        return _as_loud(hit, loudest)
    return hit.rule != RuleId.DEVICE_SYNC or checks


def _loudness(qualname: str) -> int:
    """How loud a log call is by its method (``logger.debug`` 0 … ``critical`` 4; ``log(level, …)`` and
    what is not a level, as loud as a warning)."""
    method = qualname.rsplit(".", 1)[-1].removesuffix(LOG_ONCE)
    return _LOUDNESS.get(method, 2)


_LOUDNESS = {"debug": 0, "info": 1, "warning": 2, "warn": 2, "error": 3, "exception": 3, "critical": 4}


def _reads(counts: dict[Site, int]) -> int:
    """How many times a unit reads a tensor's values into Python, whatever the call (``.item()`` per
    element, or one ``.tolist()``): a read that took the place of another — no more of them than the
    pristine unit had — is no sync added."""
    return sum(n for (rule, qualname, _w), n in counts.items() if _value_read(rule, qualname))


def _value_read(rule: str, qualname: str) -> bool:
    """A device sync that reads values into Python objects (``x.item()``, ``x.tolist()``): one always
    waits, so one for another is the same wait — unlike a copy, whose blocking is what an edit changes."""
    return rule == RuleId.DEVICE_SYNC and qualname.rsplit(".", 1)[-1] in _VALUE_READS


# (``int(x.max())`` for ``x.max().item()`` is one read for another; a stream's wait for another's too)
_VALUE_READS = frozenset({"item", "tolist", "int", "float", "bool", "synchronize"})


def _forced_open(st: Structure, changed: set[int]) -> list[tuple[int, int, str]]:
    """The ``if`` statements the edit made always true (``if cond or True:``, ``if 1:``): (first and last
    line of the body that now always runs, the test)."""
    out = []
    for span in st.ifs:
        if span.start in changed and _always_true(span.test):
            last = (span.orelse - 1) if span.orelse is not None else span.end
            out.append((span.start + 1, last, span.test))
    return out


def _always_true(test: str) -> bool:
    """Whether a condition's source is true whatever it reads: a true constant, or ``… or True``."""
    try:
        node = ast.parse(test.strip(), mode="eval").body
    except SyntaxError:
        return False
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return any(isinstance(v, ast.Constant) and bool(v.value) for v in node.values)
    return False


def _newly_live(
    all_hits: Sequence[Hit], hits: Sequence[Hit], opened: Sequence[tuple[int, int, str]]
) -> list[Hit]:
    """The hits of code the pristine file had behind a gate that the edit forced open: unchanged lines, but
    they now run every time (a debug sync, a dump, behind ``if X or True:``)."""
    out = []
    for h in all_hits:
        gate = next(((first, test) for first, last, test in opened if first <= h.line <= last), None)
        if gate is not None and h not in hits:
            # reported from the gate the edit changed down to the code that now runs
            detail = f"its gate `if {gate[1].strip()[:60]}` is now always open"
            out.append(replace(h, line=gate[0] - 1, detail=detail))
    return out


def _unit_hits(
    edit: _Edit, unit: Unit, ulines: Sequence[int], opened: Sequence[tuple[int, int, str]] = ()
) -> tuple[list[Hit], list[Hit]]:
    """(every hit of the unit, for the counts; those on its changed lines ``ulines``, for the report).
    Without a pristine source every hit is reported. A unit whose changed lines hold nothing any rule could
    match is not parsed at all (:func:`.rules.could_hit`), and one with no hit on them is not walked whole,
    unless a gate the edit forced open is in it (what runs behind it now is its news)."""
    from .judge import called_every_step, judge_changed, judge_unit

    text = "".join(edit.lines[unit.start - 1 : unit.end])
    changed = text if edit.before is None else "".join(edit.lines[n - 1] for n in ulines)
    # a gate the edit forced open: what runs behind it now is news the changed lines do not show
    whole = any(unit.start <= first and last <= unit.end for first, last, _ in opened)
    every_step = called_every_step(edit.st, unit)
    tensors = lambda: _tensor_words(edit.st, unit)  # noqa: E731  (worked out only when a decision asks)
    if not whole and not could_hit(changed, text, edit.st.aliases, every_step, tensors, edit.st.class_names):
        return [], []
    if edit.before is None:
        all_hits = judge_unit(unit, None, edit.st, edit.lines)
        return all_hits, all_hits
    return judge_changed(unit, ulines, edit.st, edit.lines, whole)


def _tensor_words(st: Structure, unit: Unit) -> frozenset[str] | None:
    """The words that may name a tensor in a unit that is one def (``None`` for other units: not told)."""
    from .tensors import maybe_tensor_words

    fn = st.def_at(unit.start)
    if fn is None:
        return None
    fields = frozenset().union(*st.tensor_fields.values())
    return maybe_tensor_words(fn, st.bound_to("torch") | {"torch"}, fields)


@dataclass(frozen=True, slots=True)
class _Pristine:
    """The pristine source, located: what the hits of a changed unit are counted against."""

    st: Structure
    lines: Sequence[str]

    @classmethod
    def of(cls, before: str | None) -> _Pristine | None:
        return cls(locate(before), split_lines(before)) if before is not None else None

    def counts(self, unit: Unit, st: Structure) -> tuple[dict[Site, int], tuple[int, int], bool]:
        """(rule, qualified name) → hits of the pristine scope named like the one around ``unit`` in
        ``st`` (none when the pristine file has no such scope); how loud the loudest log line of that
        scope is outside its ``except`` blocks (:func:`_loudness`; -1: none), of its routine lines and of
        all; and whether the scope reads the device to check its input (:func:`_in_a_check`)."""
        from .judge import Unit, judge_unit, site

        scope = st.innermost(unit.start)
        match = [s for s in self.st.scopes if scope is not None and s.qualname == scope.qualname]
        if not match:
            return {}, (-1, -1), False
        b = match[0]
        text = self.lines[b.start - 1] if b.start - 1 < len(self.lines) else ""
        bunit = Unit(b.start, b.end, len(text) - len(text.lstrip()), unit.prefix)
        hits = judge_unit(bunit, None, self.st, self.lines)
        logs = [h for h in hits if h.rule == RuleId.LOGGING and not _in_handler(self.st, h.line)]
        routine = max((_loudness(h.qualname) for h in logs if not _anomaly(h)), default=-1)
        loudest = (routine, max(map(_loudness_of, logs), default=-1))
        checks = any(h.rule == RuleId.DEVICE_SYNC and _in_a_check(self.st.tree, h.line) for h in hits)
        return dict(Counter(site(h) for h in hits)), loudest, checks


def _anomaly(hit: Hit) -> bool:
    """Whether a log line warns that something went wrong: a warning or louder under an ``if`` (``if
    next_begin != -1: logger.warning("… discarding …")``), not what the code says each time."""
    return hit.gate_kind is not None and _loudness(hit.qualname) >= _LOUDNESS["warning"]


def _loudness_of(hit: Hit) -> int:
    return _loudness(hit.qualname)


def _as_loud(hit: Hit, loudest: tuple[int, int]) -> bool:
    """Whether the pristine unit logs as loud as ``hit`` already, of its kind (``loudest``: routine lines,
    and any outside a handler): a warning that something failed among others is familiar, a routine line
    among such warnings is not."""
    return _loudness(hit.qualname) <= loudest[1 if _anomaly(hit) else 0]


def _injected(hit: Hit, edit: _Edit) -> Finding:
    """The finding of a rule hit: the rule's severity, less for logging off the hot path, info when dead."""
    rule = RULES[hit.rule]
    name = hit.function.rsplit(".", 1)[-1]
    forward = is_forward(name)
    severity = _severity(hit, rule.severity, name, edit)
    gate = None if hit.gate_kind is None else Gate(hit.gate_kind, hit.gate)
    what = "check neutralised" if hit.rule == RuleId.REMOVED_CHECK else f"{hit.qualname} {rule.rationale}"
    message = (
        what
        + (f": {hit.detail}" if hit.detail else "")
        + (", on the forward path" if forward else "")
        + (f" (called from {hit.hot_caller})" if hit.hot_caller and hit.hot_caller != hit.function else "")
        + (", where it is handed tensors" if hit.device and not (forward or hit.hot_caller) else "")
        + (
            ", while the weights load"
            if severity < rule.severity and _at_load_time(name, edit.finding.change.path)
            else ""
        )
        + (" (the pristine function does the same already)" if _familiar(hit) else "")
        + (" (unreachable: it cannot run)" if hit.dead else "")
    )
    return edit.finding(
        Kind.INJECTED_CODE, hit.rule, severity, hit.line, hit.end_line, hit.function, message, gate
    )


def _severity(hit: Hit, severity: Severity, name: str, edit: _Edit) -> Severity:
    """A hit's severity where it stands: less for logging off the hot path, for a wait whose loop's job is
    waiting, for a command's own output; info when dead."""
    if hit.dead:
        return Severity.INFO
    path = edit.finding.change.path
    if _off_the_hot_path(hit, name, edit):
        severity = Severity.MINOR
    command = (_command_line(name) and "." not in hit.function) or path.endswith("__main__.py")
    if hit.rule in (RuleId.PRINT, RuleId.LOGGING, RuleId.GLOBAL_SWITCH) and command:
        severity = min(severity, Severity.MINOR)  # a command's own output and settings, not the library's
    if hit.rule in (RuleId.PRINT, RuleId.LOGGING) and _handed_the_command_line(edit.st, hit.line):
        severity = min(severity, Severity.MINOR)  # a subcommand's words to a person (its switches: the
        # engine it runs in this process has them)
    if _its_job(hit, name):
        severity = min(severity, Severity.MINOR)
    if hit.rule == RuleId.DEVICE_SYNC and hit.familiar and _in_a_check(edit.st.tree, hit.line):
        # one more check of the input, of the kind the function makes already: the host waits there anyway
        severity = min(severity, Severity.MINOR)
    return severity


def _in_a_check(tree: ast.Module | None, line: int) -> bool:
    """Whether ``line`` is in the test of a check of the input: an ``assert``, or the test of an ``if``
    whose block ends by raising."""
    for node in _nodes_at(tree, {line}):
        if isinstance(node, ast.Assert):
            return True
        if not isinstance(node, ast.If) or not isinstance(node.body[-1], ast.Raise):
            continue
        if node.test.lineno <= line <= (node.test.end_lineno or 0):
            return True
    return False


def _off_the_hot_path(hit: Hit, name: str, edit: _Edit) -> bool:
    """Whether a hit costs little where it stands: a log line where the code runs seldom (where the reach
    cannot tell, a function not run once — a constructor, a loader, a warm-up, what only they call — may
    well run per request), a wait for the device where it runs once, a backoff or a poll off the hot path
    (waiting is its job)."""
    once = _once_anyway(hit, name, edit)
    if once is not None:
        return once
    hot = (hit.loop and not hit.retry) or on_hot_path(name) or bool(hit.hot_caller) or hit.device
    if hot and hit.rule != RuleId.SLEEP:
        return False
    if hit.rule == RuleId.LOGGING:
        return _seldom(hit, name, edit)
    if hit.rule == RuleId.DEVICE_SYNC:
        return runs_once(name)
    return hit.rule == RuleId.SLEEP and hit.retry and not (on_hot_path(name) or hit.hot_caller or hit.device)


def _once_anyway(hit: Hit, name: str, edit: _Edit) -> bool | None:
    """Whether a log line or a wait for the device is off the hot path whatever its loop or its tensors
    say — a ``warning_once``, code that runs while the weights load (each weight, handed its tensors: once a
    process) — or ``None``: not told here."""
    if hit.rule == RuleId.LOGGING and hit.qualname.endswith(LOG_ONCE):
        return True  # ``logger.warning_once(…)``: logged the first time round, wherever it stands
    if hit.rule in (RuleId.DEVICE_SYNC, RuleId.LOGGING) and _at_load_time(name, edit.finding.change.path):
        return not (on_hot_path(name) or hit.hot_caller)
    return None


def _at_load_time(name: str, path: str) -> bool:
    """Whether code runs while the model's weights load: a function named for loading them
    (:func:`.rules.loads_weights`), or any function of a package named for loading models
    (``model_executor/model_loader/``, ``srt/model_loader/``)."""
    return loads_weights(name) or any("loader" in part.lower() for part in path.split("/")[:-1])


def _seldom(hit: Hit, name: str, edit: _Edit) -> bool:
    """Whether the code of a hit runs seldom: once in a process's life — at import, in a function that does
    by its role (:func:`.rules.runs_once`), in one the file calls only from such places (``build_engine``,
    called from ``main`` alone) — or only when something failed (an ``except`` block), or in a function
    whose pristine code logs already (one that reports: ``log_stats``)."""
    if _made_per_step(hit, name, edit):
        return False
    if not hit.function or runs_once(name) or _reports(name) or hit.familiar:
        return True
    if _in_handler(edit.st, hit.line) or _once_gated(edit.st.tree, hit.line):
        return True
    if _starts_processes(edit.st, hit.line):
        return True
    callers = _callers(name, edit.st, edit.lines)
    return bool(callers) and all(c is None or runs_once(c) or _command_line(c) for c in callers)


def _starts_processes(st: Structure, line: int) -> bool:
    """Whether the function around ``line`` starts another process (``mp.get_context("spawn").Process(…)``,
    ``subprocess.Popen(…)``, ``torch.multiprocessing.spawn(…)``): a server's or a worker's start, seldom —
    no step makes processes."""
    fn = _innermost_def(st.defs.values(), line)
    calls = (n.func for n in ast.walk(fn) if isinstance(n, ast.Call)) if fn is not None else ()
    return any(_last_name(f) in _SPAWNING for f in calls)


_SPAWNING = frozenset({"Process", "Popen", "spawn", "start_processes"})


def _made_per_step(hit: Hit, name: str, edit: _Edit) -> bool:
    """Whether a hit is in the ``__post_init__`` of a dataclass whose fields are tensors (a step's output,
    a batch's metadata): made each step, not once."""
    owner = hit.function.rsplit(".", 2)[-2] if hit.function.count(".") >= 1 else ""
    return name == "__post_init__" and bool(edit.st.tensor_fields.get(owner))


def _once_gated(tree: ast.Module | None, line: int) -> bool:
    """Whether ``line`` sits under a gate that closes itself: ``if self._first: self._first = False …``
    (or ``if not self._done: self._done = True``) — its block runs once."""
    for node in _nodes_at(tree, {line}):
        if not isinstance(node, ast.If) or not node.body or line < node.body[0].lineno:
            continue
        negated = isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)
        flag = ast.unparse(node.test.operand if isinstance(node.test, ast.UnaryOp) else node.test)
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
                closes = bool(stmt.value.value) == negated  # what makes the test false from now on
                if closes and flag in {ast.unparse(t) for t in stmt.targets}:
                    return True
    return False


def _reports(name: str) -> bool:
    """A function whose job is to say things (``log``, ``log_metrics``, ``print_summary``, ``show``,
    ``report_stats``) — not ``log_softmax`` or ``logprobs``, where *log* is arithmetic."""
    words = name.strip("_").lower().split("_")
    if words[0] == "log":
        return len(words) == 1 or words[1] not in _LOG_ARITHMETIC
    return words[0] in _REPORTING


_LOG_ARITHMETIC = frozenset({"softmax", "prob", "probs", "sum", "exp", "det", "likelihood", "normal", "add"})
_REPORTING = frozenset({print.__name__, "show", "report", "describe", "display", "summarize"})


def _in_handler(st: Structure, line: int) -> bool:
    """Whether ``line`` sits in an ``except`` block (the file's handlers, as its structure keeps them)."""
    return any(h.lineno <= line <= (h.end_lineno or h.lineno) for h in st.handlers)


def _callers(name: str, st: Structure, lines: Sequence[str]) -> list[str | None]:
    """The function around each call of ``name`` (``name(…)``, ``self.name(…)``) in the file — ``None`` at
    module level: its innermost scope's name, as the structure says it."""
    call = re.compile(rf"(?<![\w]){re.escape(name)}\(")
    out: list[str | None] = []
    for n, text in enumerate(lines, 1):
        code_part = _QUOTED.sub('""', _code_of(text))  # not in a comment, not in a string on the line
        if call.search(code_part) is None or text.lstrip().startswith(("def ", "async def ", '"', "'")):
            continue
        scope = st.qualname_at(n)
        out.append(scope.rsplit(".", 1)[-1] if scope else None)
    return out


def _its_job(hit: Hit, name: str) -> bool:
    """A save or checkpoint method writing where its caller tells it, or a function whose pristine code
    already has this effect (a build step that runs ninja, a client that posts) doing one more: its job
    — when it writes to no literal path (``/tmp``…) under no debug-style gate (an env var, a shape, a
    debug flag)."""
    stores = hit.rule in (RuleId.TENSOR_DUMP, RuleId.FILE_WRITE) and _storing(name)
    return (stores or _familiar(hit)) and not hit.detail and hit.gate_kind in (None, GateKind.CONDITION)


def _familiar(hit: Hit) -> bool:
    return hit.familiar and hit.rule in _ROLE_EFFECTS


# Effects a function may have as its job (not a debugger, an exit or a sync: never a job of library code).
_ROLE_EFFECTS = frozenset(
    {RuleId.SUBPROCESS, RuleId.NETWORK, RuleId.FILE_WRITE, RuleId.TENSOR_DUMP, RuleId.DYNAMIC_EXEC}
)


_STORING = re.compile(r"(?:^|_)(?:save|export|serialize|to_disk|write_checkpoint)(?:$|_)")


def _storing(name: str) -> bool:
    """A function whose role is to store: ``save``, ``_save``, ``save_pretrained``, ``save_checkpoint``,
    ``export``, ``serialize``, ``to_disk`` (not ``load_checkpoint``: loading is not storing)."""
    return bool(_STORING.search(name.lower()))


def _handed_the_command_line(st: Structure, line: int) -> bool:
    """Whether the function around ``line`` is handed the parsed command line (a parameter annotated
    ``argparse.Namespace``: a subcommand's ``cmd(args)``): what it writes, it writes to a person."""
    fn = _innermost_def(st.defs.values(), line)
    args = fn.args if fn is not None else None
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs] if args is not None else []
    return any(a.annotation is not None and _last_name(a.annotation) == "Namespace" for a in every)


def _command_line(name: str) -> bool:
    """A command-line entry function (``main``, ``cli``, ``run_cli``, ``serve_main``): it talks to a
    person."""
    bare = name.lstrip("_")
    return bare in ("main", "cli") or bare.endswith(("_main", "_cli")) or bare.startswith(("cli_", "main_"))


def _removed_checks(regions: Sequence[Region], edit: _Edit, found: Sequence[Finding] = ()) -> list[Finding]:
    """A ``raise`` or ``assert`` of the pristine code that is gone — not one that moved, was re-wrapped or
    strengthened (``assert a`` → ``assert a and b``), nor one that left with its whole function or class.
    The raise of an ``except`` block whose handler stays: the error is swallowed there (unless ``found``
    says so already, of the handler's own lines)."""
    out: list[Finding] = []
    if not _removes_checks(regions, edit):
        return out  # (most edits remove no raise, assert or bail-out: the whole files are not read for them)
    gone = _Gone.of(edit)
    sources = (_squeezed_source(edit.text), _squeezed_source(edit.before or ""))
    asserts = list(_assert_lines(edit.lines) - _assert_lines(gone.before_lines))  # the new ones
    for r in regions:
        out += _removed_in(r, edit, gone, (sources, asserts), found)
    return out


def _removed_in(
    r: Region, edit: _Edit, gone: _Gone, kept: tuple[tuple[str, str], list[str]], found: Sequence[Finding]
) -> list[Finding]:
    """The checks among one region's removed lines that are gone (:func:`_removed_checks`); ``kept`` is
    both files squeezed and the asserts the edit added."""
    out: list[Finding] = []
    line = max(r.start, 1)  # where the removed lines were (the first line after them for a deletion)
    added = [edit.lines[n - 1].strip() for n in r.lines]
    for i, old in enumerate(r.removed):
        s = old.strip()
        handler = _swallows_now(gone, r.old_start + i, s, line, found)
        if s.startswith(_EXITS) and not handler:
            checked = any(_CHECK_CALL.match(a) for a in added)  # another check took the guard's place
            out += [] if checked else _bail_gone(edit, gone, r, i, line)
            continue
        if not (handler or _checking(s, edit.before)):
            continue
        if gone.left_with(r, i) or (not handler and _still_asked(r, i, edit, gone, kept, added)):
            continue  # (a handler's raise is counted in its handler: a bare ``raise`` elsewhere is another)
        silenced = gone.silenced(r.old_start + i) if not handler and added else ""
        out += _gone_check(edit, line, s, handler, silenced)
    return out


def _swallows_now(gone: _Gone, old_line: int, text: str, line: int, found: Sequence[Finding]) -> bool:
    """Whether the removed line ``text`` (at ``old_line`` of the pristine file) was the raise of an
    ``except`` block whose handler stays, or one that passed on what it caught — the error is let go there
    now — unless ``found`` says so already of the handler's line."""
    at = gone.handler_raise(old_line, text, line)  # the except line of one that swallows now
    said = any(f.rule == RuleId.SWALLOWED_EXCEPTION and f.line == at for f in found)
    relays = text.startswith(("raise ", "raise(")) and gone.relays_caught(old_line)
    return (bool(at) or relays) and not said


def _removes_checks(regions: Sequence[Region], edit: _Edit) -> bool:
    """Whether a removed line may be a check (or a bail-out's exit) at all."""
    removed = [old.strip() for r in regions for old in r.removed]
    checks = any(_checking(t, edit.before) or _a_check(t) or _PROCESS_EXIT.match(t) for t in removed)
    return checks or _guard_exits(regions, edit)


def _bail_gone(edit: _Edit, gone: _Gone, r: Region, i: int, line: int) -> list[Finding]:
    """The finding of a bail-out taken out at removed line ``i`` of ``r`` — a targeted edit: a function
    rewritten around it (more than :data:`_TARGETED` lines removed) is another thing."""
    disabled = _commented_out(r, edit)  # the guard is still there, as a comment: switched off, not rewritten
    bail = gone.bail_out(r.old_start + i, disabled) if len(r.removed) <= _TARGETED else ""
    return [_check_finding(edit, RuleId.REMOVED_CHECK, line, f"check neutralised: {bail}")] if bail else []


def _commented_out(r: Region, edit: _Edit) -> bool:
    """Whether every line ``r`` removed is among its added lines as a comment (``# elif …``)."""
    commented = {_squeeze(line.strip().lstrip("#")) for n in r.lines if (line := edit.lines[n - 1]).strip()}
    return bool(r.removed) and all(_squeeze(old.strip()) in commented for old in r.removed if old.strip())


def _guard_exits(regions: Sequence[Region], edit: _Edit) -> bool:
    """Whether a removed line was, by the pristine text, the ``return``/``continue``/``break`` that ends the
    body of an ``if`` (the line below it is less indented, the header above ends with a colon)."""
    exits = [(r, i) for r in regions for i, old in enumerate(r.removed) if old.strip().startswith(_EXITS)]
    if not exits or edit.before is None:
        return False
    lines = split_lines(edit.before)
    return any(_ends_a_block(lines, r.old_start + i) for r, i in exits)


def _ends_a_block(lines: Sequence[str], line: int) -> bool:
    if not 0 < line <= len(lines):
        return False
    indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
    after = line - 1 + _statement(lines, line - 1).count("\n")  # past the lines the statement goes on over
    below = next((t for t in lines[after:] if t.strip() and not t.lstrip().startswith("#")), "")
    if below and len(below) - len(below.lstrip()) >= indent:
        return False
    header = _block_header(lines, line)
    return header.endswith(":") and not header.startswith(_NOT_IF_HEADERS)


def _block_header(lines: Sequence[str], line: int) -> str:
    """The header of the block ``lines[line - 1]`` sits in (the nearest code line above it that is less
    indented), stripped; "" at the top."""
    if not 0 < line <= len(lines):
        return ""
    indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
    for above in reversed(lines[: line - 1]):
        text = above.strip()
        if text and not text.startswith("#") and len(above) - len(above.lstrip()) < indent:
            return text
    return ""


_NOT_IF_HEADERS = ("else", "try", "except", "finally", "def ", "async ", "class ", "for ", "while ", "with ")


@functools.lru_cache(maxsize=4)  # the pristine and the installed text: for removed checks, clamps, handlers
def _squeezed_source(source: str) -> str:
    """A file's code without comments or whitespace: where a statement is looked for by its text."""
    return _squeeze("".join(map(_code_of, split_lines(source))))


def _assert_lines(lines: Sequence[str]) -> collections.Counter[str]:
    return collections.Counter(_squeeze(line) for line in lines if line.lstrip().startswith("assert"))


def _still_asked(
    r: Region, i: int, edit: _Edit, gone: _Gone, kept: tuple[tuple[str, str], list[str]], added: list[str]
) -> bool:
    """Whether the check at removed line ``i`` of ``r`` is still asked: moved, replaced, strengthened
    (:func:`_lives_on`), or an assertion with a part taken out into a name (:func:`_assert_inlined`)."""
    s = r.removed[i].strip()
    if s.startswith("assert") and _assert_inlined(gone, r.old_start + i, edit, max(r.start, 1)):
        return True  # (``assert n == sum(…)`` → ``total = sum(…)``; ``assert n == total``: the same test)
    if _collected_at_once(s, edit, max(r.start, 1)):
        return True
    return _lives_on(_squeeze(_statement(r.removed, i)), s, kept[0], kept[1], added)


def _collected_at_once(text: str, edit: _Edit, line: int) -> bool:
    """Whether a removed ``refused.append(x)`` (a case put among the refused ones) is a loop rewritten as a
    comprehension: the installed function around ``line`` gives ``refused`` a comprehension — the same
    cases collected at once."""
    kept = _KEPT_AMONG.match(text)
    fn = _innermost_def(edit.st.defs.values(), line) if kept is not None else None
    if kept is None or fn is None:
        return False
    target = text[: kept.end() - 1].rsplit(".", 1)[0]
    comprehensions = (ast.ListComp, ast.SetComp, ast.GeneratorExp)
    for node in ast.walk(fn):
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) else None
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if isinstance(value, comprehensions) and any(
            t is not None and ast.unparse(t) == target for t in targets
        ):
            return True
    return False


def _assert_inlined(gone: _Gone, old_line: int, edit: _Edit, line: int) -> bool:
    """Whether the pristine assertion at ``old_line`` is asked again in the installed function around
    ``line`` once the names that function gives (``total = sum(…)``) are put back in its tests — as many
    times as the pristine function asked it: a part taken out into a name, the same test."""
    tree = gone.before.tree if gone.before is not None else None
    was = next((n for n in _nodes_at(tree, {old_line}) if isinstance(n, ast.Assert)), None)
    fn = _innermost_def(edit.st.defs.values(), line)
    pristine = _innermost_def(gone.before.defs.values() if gone.before is not None else (), old_line)
    if was is None or fn is None or pristine is None:
        return False
    try:
        key = ast.dump(was.test)
        asked = sum(isinstance(s, ast.Assert) and ast.dump(s.test) == key for s in ast.walk(pristine))
        return _asserts_put_back(fn, key) >= asked
    except (RecursionError, MemoryError):
        return False  # (a test nested deeper than Python's recursion follows: not read)


def _asserts_put_back(fn: ast.AST, key: str) -> int:
    """How many assertions of ``fn`` ask the test ``key`` (an ``ast.dump``) once the names ``fn`` gives are
    put back in them."""
    nodes = list(ast.walk(fn))
    given = {
        s.targets[0].id: s.value
        for s in nodes
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
    }
    put_back = _PutBack(given)
    asserts = [s for s in nodes if isinstance(s, ast.Assert)]
    return sum(ast.dump(put_back.visit(copy.deepcopy(s.test))) == key for s in asserts)


class _PutBack(ast.NodeTransformer):
    """Names replaced by the expressions they were given."""

    def __init__(self, given: Mapping[str, ast.expr]) -> None:
        self.given = given

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return self.given.get(node.id, node) if isinstance(node.ctx, ast.Load) else node


def _lives_on(
    stmt: str, text: str, files: tuple[str, str], asserts: Sequence[str], added: Sequence[str]
) -> bool:
    """Whether a removed check lives on: moved (as many copies as before, ``files`` squeezed after and
    before: a copy of the same check elsewhere is not this one), a checking call given other arguments,
    strengthened, or replaced in the edit."""
    after, before = files
    moved = after.count(stmt) >= max(before.count(stmt), 1)
    call = _CHECK_CALL.match(stmt) or _VALIDATOR_CALL.match(stmt) or _KEPT_AMONG.match(stmt)
    call = call or _SAYS_WHY.match(stmt)
    if call is not None:  # a checking call (or an error collected) given other arguments is the same check
        callee = _squeeze(call.group())
        moved = moved or after.count(callee) >= max(before.count(callee), 1)
    return moved or _strengthened(stmt, [a for a in asserts if a != stmt]) or _replaced(text, added)


def _a_check(text: str) -> bool:
    """Whether a stripped line is a ``raise`` (a bare one too), an ``assert``, or a statement that is a call
    whose job is to raise (``_check_block_scale_support(x)``, ``self.validate()``)."""
    return text.startswith((*_CODE_START, "raise(")) or text == "raise" or _CHECK_CALL.match(text) is not None


# A statement that is a checking call: ``_check_x(...)``, ``self._validate(...)``, ``utils.verify_y(...)``.
_CHECK_CALL = re.compile(rf"(?:[A-Za-z_]\w*\.)*{CHECKING_CALL}\(")


def _checking(text: str, before: str | None) -> bool:
    """Whether a stripped line begins a check: ``raise``, ``assert``, a checking call (by its name or by
    what the function it calls does)."""
    return (
        text.startswith(_CODE_START)
        or bool(_CHECK_CALL.match(text) or _ORDERING.match(text) or _SAYS_WHY.match(text))
        or _calls_validator(text, before)
        or _calls_refusal(text)
    )


# A refusal recorded as its reason — a message given to a name that says why (``reason = "top-k sampling is
# not supported"``, ``self.error = f"…"``) — one branch of a chain that decides whether something may be done.
_SAYS_WHY = re.compile(
    r"(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*_)?(?:reason|why|error|err)\s*=(?!=)\s*(?:[rfb]?[\"']|\($)"
)


_CALLED = re.compile(r"(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)\(")


def _calls_refusal(text: str) -> bool:
    """Whether a stripped line is a call that ends the case in refusal by its name (``req.set_finish_with_
    abort(msg)``, ``self.reject(req)``), or puts it among the refused ones (``error_msg.append(…)``)."""
    call = _CALLED.match(text)
    if call is not None and not _REFUSING.isdisjoint(_words(call.group(1))):
        return True
    kept = _KEPT_AMONG.match(text)
    return kept is not None and not _REFUSED.isdisjoint(_words(kept.group(1)))


_KEPT_AMONG = re.compile(r"(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)\.(?:add|append|extend)\(")


# A statement that orders work between streams or ranks: a stream waits for an event or another stream, a
# tensor is kept alive for another stream, the ranks meet (``self.forward_stream.wait_event(done)``,
# ``dist.barrier()``); taken out, what came after may run before what it waited for is done — a check of
# order gone. (Not a host-wide ``synchronize()``: the host waiting less changes no order on one stream.)
_ORDERING = re.compile(r"(?:[A-Za-z_]\w*(?:\(\))?\.)*(?:wait_event|wait_stream|barrier|record_stream)\(")


# A statement that is a call of a function of the module, or of a method on ``self``/``cls``, by name.
_VALIDATOR_CALL = re.compile(r"(?:self\.|cls\.)?[A-Za-z_]\w*\(")


def _calls_validator(text: str, before: str | None) -> bool:
    """Whether a stripped line is a statement calling a function of the pristine file whose whole job is to
    refuse (:func:`_validators`) — ``_disjoint("out", out, x)`` — whatever its name says."""
    call = _VALIDATOR_CALL.match(text)
    if call is None or before is None:
        return False
    name = call.group().rstrip("(").rsplit(".", 1)[-1]
    return f"def {name}(" in before and _validator(before, name)  # (most calls: of another module's)


@functools.lru_cache(maxsize=64)
def _validator(source: str, name: str) -> bool:
    """Whether the file's function (or method) ``name`` has the whole job to refuse bad input: it raises,
    returns no value, and does nothing else — checks, local names worked out for them, loops over them (a
    validator by what it does, not by a name such as ``check_*``)."""
    tree = _tree_of(source)
    if tree is None:
        return False
    defs: list[ast.stmt] = list(tree.body)
    defs += [n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body]
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name == name
        and any(isinstance(n, ast.Raise) for n in _own_statements(node.body))
        and all(_only_refuses(n) for n in _own_statements(node.body[_docstring(node) :]))
        for node in defs
    )


def _docstring(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = node.body[0]
    return int(isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant))


def _only_refuses(stmt: ast.stmt) -> bool:
    """A statement a validator may hold: a test, a raise, an assert, a bare return, a ``pass``, a local
    name worked out."""
    if isinstance(stmt, ast.Return):
        return stmt.value is None
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return all(isinstance(n, (ast.Name, ast.Tuple)) for n in targets)
    return isinstance(stmt, (ast.If, ast.Raise, ast.Assert, ast.Pass, ast.For, ast.Continue, ast.Break))


def _gone_check(edit: _Edit, line: int, text: str, handler: bool, silenced: str = "") -> list[Finding]:
    """The findings of a check taken away at ``line``: the raise of an ``except`` block is a check gone and
    the error it passed on now stops there — swallowed (one finding on the line, naming both rules); so is
    a raise whose error is ``silenced`` by its stand-in (:meth:`_Gone.silenced`: why)."""
    removed = _check_finding(edit, RuleId.REMOVED_CHECK, line, f"removed: {text[:100]}")
    if not (handler or silenced):
        return [removed]
    why = "the error caught is no longer raised" if handler else silenced
    return [removed, _check_finding(edit, RuleId.SWALLOWED_EXCEPTION, line, f"{why}: removed: {text[:100]}")]


def _check_finding(edit: _Edit, rule: RuleId, line: int, message: str) -> Finding:
    """A moderate finding of a check taken away or weakened, on one line of the installed file."""
    return edit.finding(
        Kind.INJECTED_CODE,
        rule,
        Severity.MODERATE,
        line,
        line,
        edit.st.qualname_at(line),
        message,
        edit.st.gate_at(line),
    )


def _innermost_def(
    defs: Iterable[ast.FunctionDef | ast.AsyncFunctionDef], line: int
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost of ``defs`` whose span holds ``line``."""
    found: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    for node in defs:
        if node.lineno <= line <= (node.end_lineno or 0) and (found is None or node.lineno > found.lineno):
            found = node
    return found


def _keepers(handler: ast.ExceptHandler, name: str) -> set[str]:
    """The names a handler keeps its caught error in: given it (``exception = e``) or a container it is put
    into (``errors.append(e)``, ``errors[k] = e``)."""
    out: set[str] = set()
    for node in ast.walk(handler):
        if isinstance(node, ast.Assign) and _is_name(node.value, name):
            out |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Call) and any(_is_name(a, name) for a in node.args):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                out.add(func.value.id)
    return out


def _caught_kept(handlers: Sequence[ast.ExceptHandler]) -> set[str]:
    """The names the handlers bind their caught errors to, and keep them in (:func:`_keepers`)."""
    return {k for h in handlers if h.name for k in {h.name} | _keepers(h, h.name)}


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _handlers_around(st: Structure, line: int) -> list[ast.ExceptHandler]:
    """The ``except`` handlers of a file whose span holds ``line``, outermost first."""
    return [h for h in st.handlers if h.lineno <= line <= (h.end_lineno or h.lineno)]


def _caught(handler: ast.ExceptHandler) -> str:
    return ast.unparse(handler.type) if handler.type is not None else ""


def _covers(handler: ast.ExceptHandler, caught: str) -> bool:
    """Whether a handler catches at least the errors ``caught`` names (``except AssertionError`` →
    ``except (AssertionError, RuntimeError)``)."""
    now = _caught(handler)
    if now == caught:
        return True
    return bool(caught) and bool(now) and _names(caught) <= _names(now)


def _names(caught: str) -> set[str]:
    return {n.strip() for n in caught.strip("()").split(",") if n.strip()}


def _stops_there(node: ast.AST) -> bool:
    """A ``raise``, or a statement that ends the process (``os._exit(1)``, ``sys.exit(…)``)."""
    if isinstance(node, ast.Raise):
        return True
    call = node.value if isinstance(node, ast.Expr) else None
    return isinstance(call, ast.Call) and bool(_PROCESS_EXIT.match(ast.unparse(call.func) + "("))


def _stops(handler: ast.AST) -> int:
    """How many statements of a handler raise or end the process."""
    return sum(_stops_there(n) for n in ast.walk(handler))


# The calls that end the process: what an error handler does instead of raising (``os._exit(1)``).
_PROCESS_EXIT = re.compile(r"(?:os\._exit|sys\.exit|os\.abort|exit|quit)\(")


def _raises(handler: ast.AST) -> int:
    """How many ``raise`` statements a handler (or a def) holds (fewer: an error that went on stops there)."""
    return sum(isinstance(n, ast.Raise) for n in ast.walk(handler))


def _narrowed_if(r: Region, edit: _Edit, n: int, before: list[ast.expr]) -> list[Finding]:
    """The finding of the ``if`` on line ``n`` made to fire less than the region's pristine conditions
    ``before`` (:func:`_narrowed_checks`)."""
    after = _condition(_one_line(_statement(edit.lines, n - 1)))
    detail = _narrowed_here(edit, n, before, after) if after else ""
    if not detail or _raise_added(edit, r, n):
        return []  # (the pristine ``if`` raised nothing: one that raises now adds a check)
    out = [_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}")]
    if after is not None and _tests_a_report(after) and _raises_below(edit.st.tree, n):
        # a failure a call reported, raised in fewer cases (``if result not in (0, 704):``): the
        # failures let by go unseen
        why = "fewer of the failures it tests are raised; the others go unseen"
        out.append(_check_finding(edit, RuleId.SWALLOWED_EXCEPTION, n, why))
    return out


def _narrowed_checks(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A check whose condition the edit made fire less: ``if bad:`` over a raise became ``if bad and X:``
    (it fires only when ``X`` also holds: ``backend == "__never__"``, a flag nobody sets), lost a part of an
    ``or``, allows more values (``x != a`` → ``x not in (a, b)``), or compares with a limit moved the
    lenient way (``temperature > 2.0`` → ``> 5.0``, ``n >= limit`` → ``n >= limit + 256``) — in a
    condition of one line, or in a part of one written over several lines."""
    out: list[Finding] = []
    for r in regions:
        before = [
            _condition(_one_line(_statement(r.removed, i)))
            for i, old in enumerate(r.removed)
            if old.lstrip().startswith(("if ", "elif "))
        ]
        for n in r.lines:
            if edit.lines[n - 1].lstrip().startswith(("if ", "elif ")):
                out += _narrowed_if(r, edit, n, [c for c in before if c is not None])
        out += _narrowed_inside(r, edit)
        out += _asserts_weakened(r, edit)
        out += _flags_loosened(r, edit)
    return out


def _raise_added(edit: _Edit, r: Region, n: int) -> bool:
    """Whether the ``if`` at line ``n`` raises where none of the ``if`` lines region ``r`` removed did in the
    pristine file (``if t1.pop(k) is None: t2.pop(k)`` → ``if … and t2.pop(k) is None: raise KeyError``): a
    check added, not one loosened."""
    if edit.before is None or not _raises_below(edit.st.tree, n):
        return False
    before = locate(edit.before)
    lines = [r.old_start + i for i, old in enumerate(r.removed) if old.lstrip().startswith(("if ", "elif "))]
    return bool(lines) and not any(_raises_below(before.tree, line) for line in lines)


def _raises_below(tree: ast.Module | None, line: int) -> bool:
    node = _if_at(tree, line)
    return node is not None and any(isinstance(s, ast.Raise) for s in node.body)


def _flags_loosened(r: Region, edit: _Edit) -> list[Finding]:
    """A flag named for what may be done given, on one line, a condition that holds in more cases
    (``self._graph_ok = not a and not b`` → ``not a``): :func:`_flag_holds_more` of each pair."""
    if not r.removed or not r.lines:
        return []
    was = {
        m.group(1): _statement(r.removed, i)
        for i, old in enumerate(r.removed)
        if (m := _FLAG_SET.match(old)) and _names_a_flag(m.group(1))
    }  # (each with the lines its brackets hold open: ``ok = a or (`` …)
    out: list[Finding] = []
    for n in r.lines:
        m = _FLAG_SET.match(edit.lines[n - 1])
        old = was.get(m.group(1)) if m else None
        detail = _flag_holds_more(old, _statement(edit.lines, n - 1)) if old is not None else ""
        if detail:
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


# ``name = …`` / ``self.name = …`` (not ``name = (`` opening over several lines: :data:`_FLAG_OPENED`).
_FLAG_SET = re.compile(r"^\s*((?:self\.)?[A-Za-z_]\w*)\s*=(?!=)\s*(?!\(\s*$)\S")


def _narrowed_here(edit: _Edit, n: int, before: Sequence[ast.expr], after: ast.expr) -> str:
    """How the ``if`` at line ``n`` lets more by than one of the conditions ``before`` it replaced: a
    refusal's condition that fires less, or the skip past a refusal below that holds more; "" else."""
    detail = next((d for cond in before if (d := _weaker(cond, after))), "")
    tree = edit.st.tree
    if detail and (_guards_raise(tree, n, _function_at(edit, n)) or _forced_off(tree, n, after)):
        return detail
    if detail and _bails_out(tree, n):
        return f"{detail}: the bail-out lets more through"
    gate = next((d for cond in before if (d := _gate_admits_more(cond, after))), "")
    return gate or _passes_more(edit, n, before, after) or _capability_widened(before, after)


def _capability_widened(before: Sequence[ast.expr], after: ast.expr) -> str:
    """A test of which devices or versions a path is for — an order against what names the device's
    capability, architecture or a version (``(10, 0) > get_device_capability() >= (8, 0)``) — that admits
    more now (``>= (7, 5)``): hardware it was not built or tuned for takes the path; "" else."""
    if not _asks_capability(after):
        return ""
    was = next((c for c in before if _asks_capability(c) and _weaker(after, c)), None)
    return f"the device test of a path admits more: {_changed_parts(was, after)}" if was is not None else ""


def _asks_capability(test: ast.expr) -> bool:
    """Whether a condition orders something named for a device's capability, architecture or a version."""
    for c in ast.walk(test):
        if isinstance(c, ast.Compare) and any(
            isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in c.ops
        ):
            named = {_last_name(n.func if isinstance(n, ast.Call) else n) for n in (c.left, *c.comparators)}
            if any(not _CAPABILITY_WORDS.isdisjoint(_words(name)) for name in named if name):
                return True
    return False


_CAPABILITY_WORDS = frozenset({"capability", "arch", "sm", "cc", "version", "compute"})


def _passes_more(edit: _Edit, n: int, before: Sequence[ast.expr], after: ast.expr) -> str:
    """How the ``if`` at line ``n`` holding more than one of ``before`` lets more by a refusal: its
    ``else`` refuses less, or it skips past a refusal below more often; "" else."""
    if before and _else_below(edit.lines, n) and _else_refuses(edit.st.tree, n):
        return _else_refuses_less(edit, n, before, after)
    if not (before and _passes_a_refusal(edit.st.tree, n)):
        return ""
    was = next((c for c in before if _weaker(after, c)), None)
    return f"{_widening(was, after)}: what passes the refusal below grew" if was else ""


def _widening(was: ast.expr, now: ast.expr) -> str:
    """How a condition was widened, in words: the parts an ``or`` gained (``… or path.startswith("/x")``),
    else the old and new condition."""
    ors = [c for c in (was, now) if isinstance(c, ast.BoolOp) and isinstance(c.op, ast.Or)]
    if len(ors) == 2 and isinstance(was, ast.BoolOp) and isinstance(now, ast.BoolOp):
        had = {ast.dump(v) for v in was.values}
        gained = [v for v in now.values if ast.dump(v) not in had]
        if gained and len(now.values) - len(gained) == len(had):
            return "the condition gained `" + " or ".join(_short(v) for v in gained)[:120] + "`"
    return f"`{_short(was)}` became `{_short(now)}`"


def _else_refuses_less(edit: _Edit, n: int, before: Sequence[ast.expr], after: ast.expr) -> str:
    """How the ``if`` at line ``n``, whose chain ends in an ``else`` that refuses, takes cases the refusal
    had (:func:`_passes_more`) — not cases another branch had, merged into it; or ""."""
    was = next((c for c in before if _weaker(after, c)), None)
    others = [c for c in (*before, *_chain_tests(edit.st.tree, n)) if c is not was]
    if was is None or _merged(was, after, others):
        return ""
    return f"`{_short(was)}` became `{_short(after)}`: what its `else` refuses shrank"


def _else_below(lines: Sequence[str], n: int) -> bool:
    """Whether, by the text, the ``if`` at line ``n`` has an ``else:`` (at its indentation, within 40
    lines, before anything else at that indentation but an ``elif``)."""
    indent = len(lines[n - 1]) - len(lines[n - 1].lstrip())
    for line in lines[n : n + 40]:
        text = line.strip()
        if not text or text.startswith("#") or len(line) - len(line.lstrip()) > indent:
            continue
        if len(line) - len(line.lstrip()) < indent or not text.startswith(("else", "elif")):
            return False
        if text.startswith("else"):
            return True
    return False


def _else_refuses(tree: ast.Module | None, line: int) -> bool:
    """Whether the ``if`` at ``line`` accepts: its ``else`` — the last of its chain of ``elif`` — raises
    what the conditions do not let by (``if major == 10 and minor == 7: arch = "sm107" else: raise …``)."""
    node = _if_at(tree, line)
    while node is not None and len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        node = node.orelse[0]  # (the chain's last ``else``: ``if a: … elif b: … else: raise``)
    return node is not None and bool(node.orelse) and isinstance(node.orelse[-1], ast.Raise)


def _chain_tests(tree: ast.Module | None, line: int) -> list[ast.expr]:
    """The tests of the ``elif`` branches that follow the ``if`` at ``line``."""
    node, out = _if_at(tree, line), []
    while node is not None and len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        node = node.orelse[0]
        out.append(node.test)
    return out


def _merged(was: ast.expr, after: ast.expr, others: Sequence[ast.expr]) -> bool:
    """Whether what a branch's test admits now, beyond what it did, came from another branch of its chain
    (``a == 1`` and ``elif a == 2`` made ``a in (1, 2)``): branches merged, nothing refused is let by."""
    new = _constants(after) - _constants(was)
    return bool(new) and any(new & _constants(o) for o in others)


def _constants(node: ast.expr) -> set[object]:
    return {c.value for c in ast.walk(node) if isinstance(c, ast.Constant)}


def _asserts_weakened(r: Region, edit: _Edit) -> list[Finding]:
    """An assertion that asks less than it did, in place: ``assert a and b`` → ``assert a``, ``assert n <= 8``
    → ``assert n <= 16``, ``assert all(ok(x) and x >= 0 …)`` → ``… ok(x) …`` — what it refused passes."""
    starts = [i for i, old in enumerate(r.removed) if _is_assert(old)]
    added = [n for n in r.lines if _is_assert(edit.lines[n - 1])]
    out: list[Finding] = []
    if len(starts) != 1 or len(added) != 1 or edit.before is None:
        return out  # one assertion edited in place (one split in two asks as much)
    # the whole pristine statement: its message may go on below the lines the edit touched
    olds = [_statement(split_lines(edit.before), r.old_start + starts[0] - 1)]
    for n in added:
        detail = _assertion_asks_less(olds[0], _statement(edit.lines, n - 1))
        if detail:
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _is_assert(line: str) -> bool:
    return line.lstrip().startswith("assert ")


def _assertion(statement: str) -> ast.expr | None:
    """The test of an ``assert`` statement's text (its lines joined), or ``None``."""
    try:
        tree = ast.parse(_one_line(statement))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    first = tree.body[0] if tree.body else None
    return first.test if isinstance(first, ast.Assert) else None


def _short(test: ast.expr) -> str:
    return " ".join(ast.unparse(test).split())[:60]


def _narrowed_inside(r: Region, edit: _Edit) -> list[Finding]:
    """A check narrowed on a line inside its condition (``and head_size > 256`` of an ``if (`` over several
    lines; a value added to the list an ``assert x in [`` spreads over several), its header unchanged: the
    pristine header is where the lines before the region put it."""
    if edit.before is None or not _spread_into(r, edit.lines):
        return []  # (nothing around the region leaves a statement open: none spreads into it)
    around = r.lines or (r.start,)
    headers = {h for n in around if (h := _header_above(edit.lines, n)) is not None and h < r.start}
    out: list[Finding] = []
    pristine = split_lines(edit.before)
    for h in sorted(headers):
        old = h - r.start + r.old_start
        if not 0 < old <= len(pristine):
            continue
        if _is_assert(edit.lines[h - 1]):
            detail = _assertion_asks_less(_statement(pristine, old - 1), _statement(edit.lines, h - 1))
        elif edit.lines[h - 1].lstrip().startswith("return"):
            detail = _answers_more(_statement(pristine, old - 1), _statement(edit.lines, h - 1), edit, h)
        elif _FLAG_OPENED.match(edit.lines[h - 1]):
            detail = _flag_holds_more(_statement(pristine, old - 1), _statement(edit.lines, h - 1))
        else:
            before = _condition(_one_line(_statement(pristine, old - 1)))
            after = _condition(_one_line(_statement(edit.lines, h - 1)))
            detail = _if_loosened(edit, h, before, after) if before is not None and after is not None else ""
        if detail:
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, r.start, f"check neutralised: {detail}"))
    return out


def _if_loosened(edit: _Edit, h: int, before: ast.expr, after: ast.expr) -> str:
    """How the ``if`` at line ``h`` lets more by: a refusal's condition that fires less, the gate of a
    path kept for what is supported that admits more (:func:`_gate_admits_more`), or a branch that passes
    a refusal more often (:func:`_passes_more`)."""
    detail = _weaker(before, after)
    if detail and _guards_raise(edit.st.tree, h, _function_at(edit, h)):
        return detail
    if detail and _bails_out(edit.st.tree, h):
        return f"{detail}: the bail-out lets more through"
    return (
        _gate_admits_more(before, after)
        or _passes_more(edit, h, [before], after)
        or _capability_widened([before], after)
    )


def _gate_admits_more(before: ast.expr, after: ast.expr) -> str:
    """An ``if`` that opens a path kept for what it supports — its condition asks a flag named for that
    (``self._jit_mix_ok and … and x.shape[0] <= 24``) — whose condition holds in more cases now: the limit
    someone measured for that path (a kernel's rows, a dtype) is let go, and inputs it was not built for
    take it."""
    named = {_last_name(n) for n in ast.walk(after) if isinstance(n, (ast.Name, ast.Attribute))}
    if all(_FLAG_WORDS.isdisjoint(_words(name.lower())) for name in named) or not _weaker(after, before):
        return ""
    return f"the gate of a path kept for what it supports admits more: {_changed_parts(before, after)}"


def _changed_parts(before: ast.expr, after: ast.expr) -> str:
    """``old`` → ``new`` of each part two conditions of as many parts differ in (the whole, else)."""
    pairs = [(before, after)]
    if (
        isinstance(before, ast.BoolOp)
        and isinstance(after, ast.BoolOp)
        and len(before.values) == len(after.values)
    ):
        pairs = [
            (b, a) for b, a in zip(before.values, after.values, strict=True) if ast.dump(b) != ast.dump(a)
        ]
    return "; ".join(f"`{_short(b)}` → `{_short(a)}`" for b, a in pairs)


def _names_a_flag(target: str) -> bool:
    return not _PATH_FLAG_WORDS.isdisjoint(_words(target.rsplit(".", 1)[-1]))


def _flag_holds_more(old: str, new: str) -> str:
    """How a flag named for what may be done (``self._jit_mix_ok = (…)``, ``supported = (…)``) is given a
    condition that holds in more cases now (statements' texts), or ""."""
    target, before = _decision(_one_line(old))
    again, after = _decision(_one_line(new))
    if not target or target != again or before is None or after is None:
        return ""
    if not _names_a_flag(target) or not _weaker(after, before):
        return ""
    return f"`{target}` holds in more cases: {_short(before)} → {_short(after)}"


# Words of a flag that says whether something may be done: ``_jit_mix_ok``, ``fast_path_supported``.
_FLAG_WORDS = frozenset(
    {"ok", "supported", "supports", "allowed", "valid", "eligible", "compatible", "usable"}
)
# …and of a flag set to pick a path (``use_packed_fma = major >= 10``): given a wider condition, the path is
# taken where it was kept out (not read in an ``if``'s test: a gate that asks for a path it uses).
_PATH_FLAG_WORDS = _FLAG_WORDS | {"use"}
# ``name = (`` / ``self.name = (``: an assignment whose value opens over several lines.
_FLAG_OPENED = re.compile(r"^\s*(?:self\.)?[A-Za-z_]\w*\s*=\s*\($")


def _answers_more(old: str, new: str, edit: _Edit, line: int) -> str:
    """How the condition a function that says whether something is supported or allowed returns (statements'
    texts) answers yes in more cases now, or ""."""
    if not _answers_admission(_function_at(edit, line)):
        return ""
    before, after = _returned_test(old), _returned_test(new)
    if before is None or after is None or not _weaker(after, before):
        return ""
    return f"{_short(before)} → {_short(after)}: it answers yes in more cases"


def _spread_into(r: Region, lines: Sequence[str]) -> bool:
    """Whether a statement may spread into region ``r``, by the text: the line above leaves one open, or
    the region's first line continues one (``and …``, ``)``)."""
    if not (r.removed or r.lines):
        return False
    first = lines[r.start - 1] if r.lines else r.removed[0]
    return _left_open(lines, r.start - 1) or first.lstrip().startswith(_CONTINUING)


def _left_open(lines: Sequence[str], n: int) -> bool:
    """Whether line ``n`` leaves a statement open, by its text: it ends with an opening bracket, a comma, an
    operator, ``and``/``or`` or a backslash — or is itself inside a bracket (an indented continuation)."""
    if not 0 < n <= len(lines):
        return False
    text = _code_of(lines[n - 1]).rstrip()
    return text.endswith(_OPEN_ENDS) or text.endswith((" and", " or", " not", " in"))


_CONTINUING = (
    *("and ", "or ", "not ", "in "),
    *(")", "]", "}", "+", "-", "*", "/", "%", "<", ">", "=", "!", "|", "&"),
)
_OPEN_ENDS = ("(", "[", "{", ",", "\\", "+", "-", "*", "/", "%", "<", ">", "=", "|", "&")


def _assertion_asks_less(old: str, new: str) -> str:
    """How the assertion ``new`` asks less than ``old`` (statements' texts), or "": it refuses where its
    test is false, so it asks less when the old test implies the new one."""
    before, after = _assertion(old), _assertion(new)
    if before is None or after is None or not _fires_less(after, before):
        return ""
    return f"the assertion asked `{_short(before)}`, now only `{_short(after)}`"


def _header_above(lines: Sequence[str], n: int) -> int | None:
    """The ``if``/``elif``/``assert``/``return`` line whose condition, open over several lines, holds line
    ``n`` (by brackets)."""
    k = _opener_above(lines, n)
    if k is None:
        return None
    text = _code_of(lines[k - 1])
    header = text.lstrip().startswith(("if ", "elif ", "assert ", "return "))
    return k if header or _FLAG_OPENED.match(text) else None


def _opener_above(lines: Sequence[str], n: int) -> int | None:
    """The line above ``n`` whose bracket, left open, holds line ``n`` (forty lines up at most); ``None``."""
    depth = 0
    for k in range(n - 1, max(n - 40, 0), -1):
        text = _code_of(lines[k - 1])
        depth += sum(text.count(c) for c in ")]}") - sum(text.count(c) for c in "([{")
        if depth < 0:
            return k
    return None


_LITERALS = (ast.List, ast.Tuple, ast.Set)
_Literal = ast.List | ast.Tuple | ast.Set


def _widened_sets(edit: _Edit, changed: set[int]) -> list[Finding]:
    """The values a check allows, grown: a literal list, tuple or set given more items (``supported =
    {bf16, f16}`` → ``{bf16, f16, f32}``) where a check tests membership of it (``if x not in supported:
    raise``, or return) — or, the other way, the values it refuses, fewer (``unsupported = [a, b]`` → ``[a]``
    where ``if x in unsupported: return False``); through the names the file gives it (``allowed =
    SUPPORTED_SIZES``): what it refused now passes."""
    inside = _in_literals(edit.lines, changed) if edit.before is not None else []
    if not inside or edit.before is None:
        return []  # (no changed line inside a literal list, tuple or set given a name: no tree walked)
    tree = edit.st.tree
    text = "".join(edit.lines)
    pristine = split_lines(edit.before)
    out: list[Finding] = []
    for target, items in _literal_sets(_nodes_at(tree, set(inside))):
        end = items.end_lineno or items.lineno
        lines = inside[bisect.bisect_left(inside, target.lineno) : bisect.bisect_right(inside, end)]
        name = _last_name(target)
        names = _names_for(tree, name, text) if lines else set()
        old = _pristine_literal(pristine, name) if names else None
        detail = _set_loosened(tree, text, name, names, old, items) if old is not None else ""
        if detail:
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, lines[0], f"check neutralised: {detail}"))
    return out


def _set_loosened(
    tree: ast.Module | None, text: str, name: str, names: set[str], old: _Literal, items: _Literal
) -> str:
    """How the collection ``name`` (also known as ``names``), ``old`` before and ``items`` now, lets more by:
    more values where a check tests membership of it, fewer where a check refuses its members; or ""."""
    was, now = {ast.dump(e) for e in old.elts}, {ast.dump(e) for e in items.elts}
    by_name = not isinstance(items, _Table)
    if was < now and any(_tested_in(tree, n, text, by_name) for n in names):
        more = [ast.unparse(e) for e in items.elts if ast.dump(e) not in was]
        return f"`{name}`, which a check tests membership of, allows more: {', '.join(more)[:60]}"
    if now < was and any(_refused_in(tree, n, text) for n in names):
        fewer = [ast.unparse(e) for e in old.elts if ast.dump(e) not in now]
        return f"`{name}`, whose members a check refuses, no longer holds {', '.join(fewer)[:60]}"
    return ""


def _names_for(tree: ast.Module | None, name: str, text: str) -> set[str]:
    """``name`` and the names the file gives it (``allowed = SUPPORTED_SIZES``) that some ``in`` tests,
    by the text; empty when none is."""
    names = {name}
    if f"= {name}" in text and re.search(rf"=\s*(?:[\w.]+\.)?{re.escape(name)}\s*$", text, re.M):
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and _last_name(node.value) == name:
                names.add(_last_name(node.targets[0]))
    return {n for n in names if n and (_asked_what_it_holds(n, text) or _handed_to_a_call(n, text))}


def _handed_to_a_call(name: str, text: str) -> bool:
    """Whether a collection named for what is let by (``ALLOWED_IMAGE_FORMATS``) or refused
    (``UNSUPPORTED_OPS``) is handed whole to a call, which enforces it (``Image.open(fp,
    formats=ALLOWED_IMAGE_FORMATS)``), by the text."""
    words = _words(name)
    if _ALLOWING.isdisjoint(words) and _REFUSED_WORDS.isdisjoint(words):
        return False
    return re.search(rf"[(,]\s*(?:\w+\s*=\s*)?(?:[\w.]+\.)?{re.escape(name)}\s*[,)]", text) is not None


# How a collection is asked what it holds, by the text around each place its name stands: ``x in name`` (or
# ``in mod.name``), ``keys & name``, before it; ``name.intersection(…)``, ``name & keys``, after it.
_ASKED_BEFORE = re.compile(r"(?:\bin\s+(?:[\w.]+\.)?|&\s*)\Z")
_ASKED_AFTER = re.compile(r"\s*(?:&|\.(?:intersection|isdisjoint|issuperset|issubset|get)\()")
_REACH = 200  # how far before a name ``in`` and a dotted prefix may stand


def _asked_what_it_holds(name: str, text: str) -> bool:
    """Whether ``text`` asks the collection ``name`` what it holds: ``x in name``, ``name.intersection(…)``,
    ``name & keys``, ``keys & name``, ``name.isdisjoint(…)`` (looked for where the name stands, not by a
    search of the whole file for each way of asking)."""
    at = text.find(name)
    while at >= 0:
        end = at + len(name)
        if end == len(text) or not _is_word_char(text[end]):  # (the whole name, not a longer one)
            before = text[max(0, at - _REACH) : at]
            if (before[-1:].isspace() or before.endswith((".", "&"))) and _ASKED_BEFORE.search(before):
                return True
            if (at == 0 or not _is_word_char(text[at - 1])) and _ASKED_AFTER.match(text, end):
                return True
        at = text.find(name, at + 1)
    return False


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _refused_in(tree: ast.Module | None, name: str, text: str = "") -> bool:
    """Whether an ``if`` that raises or leaves refuses the members of ``name`` (``if x in name:``, ``if
    any(a in name for a in xs):``), or an ``assert`` its non-members (``assert x not in name``) — or, for a
    collection named for what is refused (``_XGRAMMAR_UNSUPPORTED_KEYWORDS``), any use of it in ``text``."""
    if not _REFUSED_WORDS.isdisjoint(_words(name.lower())) and re.search(rf"\b{re.escape(name)}\b", text):
        return True
    refusing = lambda node: _guards_raise_node(node) or any(map(_answers_no, node.body))  # noqa: E731
    return _membership_refused(tree, name, refusing, ast.In, ast.NotIn)


def _membership_refused(
    tree: ast.Module | None, name: str, refusing: Callable[[ast.If], bool], in_if: type, in_assert: type
) -> bool:
    """Whether an ``if`` that is ``refusing`` tests ``name`` with the operator ``in_if`` (``in`` or ``not
    in``), or an ``assert`` with ``in_assert``."""
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.If) and refusing(node):
            wanted = in_if
        elif isinstance(node, ast.Assert):
            wanted = in_assert
        else:
            continue
        for cmp in ast.walk(node.test):
            pairs = zip(cmp.ops, cmp.comparators, strict=True) if isinstance(cmp, ast.Compare) else ()
            if any(isinstance(op, wanted) and _last_name(c) == name for op, c in pairs):
                return True
    return False


def _new_handlers(
    edit: _Edit, changed: set[int], found: Sequence[Finding], regions: Sequence[Region] = ()
) -> list[Finding]:
    """A ``try`` the edit put around code the pristine file ran bare, whose handler does not raise: its
    errors, which stopped the call, are let go now (logged, a fallback, a default). A new handler that does
    nothing at all (``except OSError: pass``) around code another rule found (a dump, a request) lets that
    code's errors go unseen."""
    edited, was = _guards_edited(regions)
    nodes = _new_guards(edit, changed, edited)
    if not nodes:
        return []
    pristine = _squeezed_source(edit.before or "")
    said = {f.line for f in found if f.rule == RuleId.SWALLOWED_EXCEPTION}
    kept = (pristine, _saved_originals(edit.st))  # (what ran bare: the pristine, the originals)
    out = _new_suppressions(edit, [n for n in nodes if isinstance(n, ast.With)], kept, said, was)
    for node in nodes:
        if not isinstance(node, ast.Try):
            continue
        wrapped = _wrapped_code(node, edit.lines, *kept)
        flagged = _found_within(node, found)
        for h in node.handlers:
            detail = "" if h.lineno in said or h.lineno not in changed else _let_go(h, wrapped, flagged)
            if detail:
                out.append(_check_finding(edit, RuleId.SWALLOWED_EXCEPTION, h.lineno, detail))
    return out


def _guards_edited(regions: Sequence[Region]) -> tuple[set[int], dict[int, str]]:
    """The lines of regions that replaced an ``except`` or a ``with`` line — a handler (a suppression)
    there was edited, not added (what an edited handler no longer passes on is :func:`_removed_checks`' to
    say) — and, for each, the ``with`` line it replaced."""
    edited: set[int] = set()
    was: dict[int, str] = {}
    for r in regions:
        for old in r.removed:
            head = old.lstrip()
            if head.startswith(("except", "with ")):
                edited.update(r.lines)
            if head.startswith("with "):
                was.update(dict.fromkeys(r.lines, old))
    return edited, was


def _handlers_widened(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A handler of named errors made to catch everything (``except NotSupportedError: return False`` →
    ``except Exception: return False``), raising nothing: every other error, which went on, stops there — a
    log line of it (``logger.warning(f"… {e}")``) lets it go all the same."""
    out: list[Finding] = []
    for r in regions:
        was = [_EXCEPT.match(old) for old in r.removed]
        before = [m.group(1) or "" for m in was if m is not None]
        if len(before) != 1 or _BROAD_CAUGHT & (_names(before[0]) or {""}):
            continue
        for h in edit.st.handlers:
            if h.lineno in r.lines and _broad_handler(h) and not _raises(h):
                caught = ast.unparse(h.type) if h.type is not None else "everything"
                detail = f"the handler catches `{caught}` now, not `{before[0]}`: every other error stops"
                out.append(_check_finding(edit, RuleId.SWALLOWED_EXCEPTION, h.lineno, detail))
    return out


_EXCEPT = re.compile(r"\s*except\b\s*(?:\*\s*)?([^:]*?)(?:\s+as\s+\w+)?\s*:")
_BROAD_CAUGHT = frozenset({"", "Exception", "BaseException", "builtins.Exception"})


def _broad_handler(h: ast.ExceptHandler) -> bool:
    """``except:``, ``except Exception``, ``except BaseException`` (alone or in a tuple)."""
    return h.type is None or not _BROAD_CAUGHT.isdisjoint(_names(ast.unparse(h.type)))


def _gates_forced_open(edit: _Edit, changed: set[int]) -> list[Finding]:
    """An ``if`` the edit made always true (``if True or envs.ALLOW_PICKLE:``, ``if allowed or 1:``) over
    code that does work: what it let run only when its condition held now always runs — the gate is gone."""
    if edit.before is None:
        return []
    out: list[Finding] = []
    for first, _last, test in _forced_open(edit.st, changed):
        node = _if_at(edit.st.tree, first - 1)
        if node is None or all(map(_output_only, node.body)):
            continue  # a debug print let out: the print is the finding
        shown = " ".join(test.split())[:60]
        detail = f"check neutralised: `if {shown}` always holds: what it gated always runs"
        out.append(_check_finding(edit, RuleId.REMOVED_CHECK, first - 1, detail))
    return out


def _checks_made_conditional(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A check that ran every time put under a condition the edit wrote (``self.verify_signature(…)`` →
    ``if signature is not None: self.verify_signature(…)``): when the condition fails, nothing is checked."""
    out: list[Finding] = []
    for r in regions:
        # (a raise ran under its own test already: moved under another, it is judged as a guard's edit)
        checks = {
            old.strip()
            for old in r.removed
            if _checking(old.strip(), edit.before) and not old.lstrip().startswith("raise")
        }
        for n in r.lines if checks else ():
            if edit.lines[n - 1].strip() not in checks:
                continue
            ifs = [x for x in _nodes_at(edit.st.tree, {n}) if isinstance(x, ast.If) and x.lineno < n]
            guard = max(ifs, key=lambda x: x.lineno, default=None)  # the innermost
            if guard is not None and guard.lineno in r.lines and not guard.orelse:
                detail = f"check neutralised: the check now runs only when `{_short(guard.test)}`"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, guard.lineno, detail))
    return out


def _switches_left_on(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A process-wide setting no longer put back: a call that sets it (``torch.set_default_dtype(old)`` in a
    ``finally``) taken out below where the function still sets it — what it switched stays switched for the
    whole process."""
    out: list[Finding] = []
    for r in regions:
        line = max(r.start, 1)
        scope = edit.st.innermost(line)
        if scope is None or not r.removed:
            continue
        aliases = edit.st.aliases_at(scope.qualname)
        above = "".join(edit.lines[scope.start - 1 : line - 1])  # where the function sets it, before
        for i in range(len(r.removed)):
            call = _called(_code_of(_statement(r.removed, i)))
            if call is None:
                continue
            written = ast.unparse(call.func)
            qualname = resolve(aliases, written)
            method = call.func.attr if isinstance(call.func, ast.Attribute) else None
            if rule_for_call(qualname, method, None) != RuleId.GLOBAL_SWITCH or f"{written}(" not in above:
                continue
            detail = f"`{written}(…)` no longer puts the setting back: it stays switched for the process"
            out.append(edit.finding(Kind.INJECTED_CODE, RuleId.GLOBAL_SWITCH, Severity.MODERATE, line, line,
                                    scope.qualname, detail, edit.st.gate_at(line)))  # fmt: skip
    return out


def _called(statement: str) -> ast.Call | None:
    """The call a statement of one call is (``torch.set_default_dtype(old)``), else ``None``."""
    try:
        tree = ast.parse(statement.strip())
    except (SyntaxError, ValueError, RecursionError):
        return None
    stmt = tree.body[0] if len(tree.body) == 1 else None
    return stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None


def _all_new(handlers: Sequence[ast.ExceptHandler], changed: set[int], edited: Collection[int]) -> bool:
    """Whether every handler of a ``try`` is on a changed line and none edited: it had none before (a
    ``try``/``finally``), so what propagated is caught now — a second handler beside one that was there is a
    choice of what the first did not handle."""
    return bool(handlers) and all(h.lineno in changed and h.lineno not in edited for h in handlers)


def _new_guards(edit: _Edit, changed: set[int], edited: Collection[int] = ()) -> list[ast.Try | ast.With]:
    """The ``try`` statements that begin on a changed line or were given a handler there — and the ``with
    …suppress(…)`` ones that begin on one (the tree is walked only when a changed line opens one)."""
    tree = edit.st.tree
    heads = [edit.lines[n - 1].lstrip() for n in changed]
    opened = any(h.startswith("try:") for h in heads)
    suppressed = _suppression_opened(edit, heads)
    handled = any(h.startswith("except") for h in heads)  # a handler added to a try that was there
    if tree is None or not (opened or suppressed or handled):
        return []
    kinds = (ast.Try, ast.With) if suppressed else (ast.Try,)
    return [
        node for node in ast.walk(tree)
        if isinstance(node, kinds)
        and (node.lineno in changed or _all_new(getattr(node, "handlers", ()), changed, edited))
    ]  # fmt: skip


def _suppression_opened(edit: _Edit, heads: Sequence[str]) -> bool:
    """Whether a changed line (``heads``: their text) opens a ``with`` of a suppressing context manager
    (``contextlib.suppress``, by any name the file binds it to)."""
    withs = [h for h in heads if h.startswith("with ")]
    if not withs:
        return False
    suppressors = {n for q in SUPPRESSORS for n in edit.st.bound_to(q.rsplit(".", 1)[0])}
    return any(not suppressors.isdisjoint(re.findall(r"\w+", h)) for h in withs)


def _new_suppressions(
    edit: _Edit,
    nodes: Sequence[ast.With],
    kept: tuple[str, frozenset[str]],
    said: set[int | None],
    was: Mapping[int, str],
) -> list[Finding]:
    """``with contextlib.suppress(KeyError):`` put around code the pristine file ran bare: the errors named,
    which stopped the call, are let go — as a new ``except KeyError: pass`` would. One that replaced a
    suppression (``was``: the line it replaced) is news only when it lets more go."""
    out: list[Finding] = []
    for node in nodes:
        calls = [i.context_expr for i in node.items if isinstance(i.context_expr, ast.Call)]
        aliases = edit.st.aliases_at(edit.st.qualname_at(node.lineno) or "")  # a def's own imports too
        suppress = next((c for c in calls if resolve(aliases, ast.unparse(c.func)) in SUPPRESSORS), None)
        if suppress is not None and node.lineno in was and _suppressed_before(was[node.lineno], suppress):
            continue
        wrapped = _wrapped_code(node, edit.lines, *kept) if suppress is not None else []
        if suppress is not None and wrapped and node.lineno not in said:
            what, by = " ".join(ast.unparse(wrapped[0]).split())[:50], ast.unparse(suppress)[:40]
            detail = f"the errors of `{what}`, which stopped the call, are let go by `{by}`"
            out.append(_check_finding(edit, RuleId.SWALLOWED_EXCEPTION, node.lineno, detail))
    return out


def _suppressed_before(old: str, suppress: ast.Call) -> bool:
    """Whether the ``with`` line ``old`` suppressed every error ``suppress`` does (``Exception`` covers any
    of its kind): narrowed or kept, nothing more is let go."""
    before = set(re.findall(r"[A-Za-z_]\w*", old.split("suppress", 1)[-1]))
    now = {_last_name(a) for a in suppress.args}
    if now <= before or "BaseException" in before:
        return True
    return "Exception" in before and now.isdisjoint({"BaseException", "KeyboardInterrupt", "SystemExit"})


def _found_within(node: ast.Try, found: Sequence[Finding]) -> bool:
    """Whether another rule found something high in a ``try`` body (a dump, a request, a write)."""
    last = max((b.end_lineno or b.lineno) for b in node.body)
    return any(node.lineno <= (f.line or 0) <= last for f in found if f.severity >= Severity.HIGH)


def _wrapped_code(
    node: ast.Try | ast.With, lines: Sequence[str], pristine: str, originals: Collection[str] = ()
) -> list[ast.stmt]:
    """The statements of a ``try`` (``with``) body that the pristine file has (squeezed): code that ran bare
    there — the call a statement gives a name too (``yield base, decode(parts)`` → ``scale = decode(parts)``
    in a ``try``) — or that calls the original of what a patch replaces (``_orig_close(self)``, ``_orig_close
    = shm.SharedMemory.close``): code that ran bare in its library."""
    return [
        s for s in node.body
        if not isinstance(s, (ast.Import, ast.ImportFrom, ast.Pass))
        and (
            ((t := _squeeze("".join(map(_code_of, lines[s.lineno - 1 : s.end_lineno])))) and t in pristine)
            or _calls_one_of(s, originals)
            or (isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and _ran_bare(s.value, pristine))
        )
    ]  # fmt: skip


def _ran_bare(call: ast.Call, pristine: str) -> bool:
    """Whether a call with arguments is in the pristine file (squeezed), as written."""
    return bool(call.args or call.keywords) and _squeeze(ast.unparse(call)) in pristine


def _saved_originals(st: Structure) -> frozenset[str]:
    """The names the module gives an attribute of what it imports (``_orig_close = shm.SharedMemory.close``):
    an original kept by a patch that calls it."""
    imported = _imported(st)
    top = st.tree.body if st.tree is not None else []
    return frozenset(
        t.id
        for s in top if isinstance(s, ast.Assign) and isinstance(s.value, ast.Attribute)
        and _root_name(s.value) in imported
        for t in s.targets if isinstance(t, ast.Name)
    )  # fmt: skip


def _root_name(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _calls_one_of(stmt: ast.stmt, names: Collection[str]) -> bool:
    calls = (n for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name))
    return bool(names) and any(c.func.id in names for c in calls)  # type: ignore[attr-defined]


def _let_go(h: ast.ExceptHandler, wrapped: Sequence[ast.stmt], flagged: bool) -> str:
    """What a new handler that does not raise lets go, or "" (one that raises; an ordinary handler of new
    code)."""
    if _raises(h) or _parsed_another_way(h, wrapped):
        return ""
    caught = ast.unparse(h.type) if h.type is not None else "everything"
    if wrapped:
        what = " ".join(ast.unparse(wrapped[0]).split())[:50]
        return f"the errors of `{what}`, which stopped the call, are caught by `except {caught}`"
    if flagged and all(isinstance(b, ast.Pass) or _is_ellipsis(b) for b in h.body):
        return f"`except {caught}: pass` lets the errors of the code above go unseen"
    return ""


def _parsed_another_way(h: ast.ExceptHandler, wrapped: Sequence[ast.stmt]) -> bool:
    """Whether a handler of a named error converts a value the wrapped statement converted in place, by
    another call (``args = json.loads(args)``; ``except json.JSONDecodeError: args = literal_eval(args)``):
    a second way to read the same input, whose own failure still raises — no error let go, unlike a default
    (``args = {}``), another computation put in the failed one's place, or a handler of everything."""
    given = wrapped[0] if len(wrapped) == 1 else None
    if h.type is None or _broad_handler(h) or not isinstance(given, ast.Assign) or len(given.targets) != 1:
        return False
    target = ast.unparse(given.targets[0])
    body = [b for b in h.body if not isinstance(b, (ast.Import, ast.ImportFrom))]
    return (
        bool(body)
        and target in _arguments(given.value)
        and all(
            isinstance(b, ast.Assign)
            and [ast.unparse(t) for t in b.targets] == [target]
            and target in _arguments(b.value)
            for b in body
        )
    )


def _arguments(value: ast.expr) -> set[str]:
    """The arguments of a call, as written (none: not a call)."""
    if not isinstance(value, ast.Call):
        return set()
    return {ast.unparse(a) for a in [*value.args, *(k.value for k in value.keywords)]}


def _is_ellipsis(stmt: ast.stmt) -> bool:
    value = stmt.value if isinstance(stmt, ast.Expr) else None
    return isinstance(value, ast.Constant) and value.value is Ellipsis


_WRAPPED = r"(?:(?:frozenset|set|tuple|list)\(\s*)?"  # ``frozenset({…})``: a literal set all the same
# (``NAME = BASE | frozenset({…})``, ``NAME = BASE + (…)``: a literal joined to a named collection, too)
_LITERAL_OPENING = re.compile(
    rf"^[ \t]*[\w.]+[ \t]*(?::[^=\n]+)?=[ \t]*(?:[\w.]+[ \t]*[|+][ \t]*)?{_WRAPPED}[\[({{]", re.MULTILINE
)


def _in_literals(lines: Sequence[str], changed: set[int]) -> list[int]:
    """The changed lines that are lines of ``name = [ … ]`` (a list, tuple or set written out), in order, by
    the text: each such opening, to where its brackets close."""
    ordered = sorted(changed)
    text = "".join(lines)
    k, at = 1, 0
    out: list[int] = []
    for m in _LITERAL_OPENING.finditer(text):
        k += text.count("\n", at, m.start())
        at = m.start()
        i = bisect.bisect_left(ordered, k)
        if i == len(ordered) or ordered[i] > k + 200:
            continue  # (no changed line near: the literal's end is not worked out)
        end = k - 1 + _statement(lines, k - 1).count("\n")
        out += ordered[i : bisect.bisect_right(ordered, end)]
    return out


def _literal_sets(nodes: Iterable[ast.AST]) -> Iterator[tuple[ast.expr, ast.List | ast.Tuple | ast.Set]]:
    """Of these statements, every ``name = [literal items]`` (a list, tuple or set; ``name: T = (…)`` too),
    as (the name given it, its items)."""
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], _unwrapped(node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, _unwrapped(node.value)
        else:
            continue
        if isinstance(value, _LITERALS):
            yield target, value
        elif isinstance(value, ast.Dict) and value.keys and all(k is not None for k in value.keys):
            # a table looked up: its keys are what it lets by
            yield target, ast.copy_location(_Table(elts=_entries(value)), value)
        elif isinstance(value, ast.BinOp) and (parts := _united(value)) is not None:
            yield target, ast.copy_location(ast.Set(elts=parts), value)  # (a union: what each part holds)


class _Table(ast.Set):
    """A dict written out, as the set of its keys: what a lookup lets by. Whether it refuses what it lacks
    is read from the code alone, never from its name (``_PREVIOUSLY_SUPPORTED_MODELS`` is a table of
    refusals whatever it says)."""


def _unwrapped(value: ast.expr) -> ast.expr:
    """The literal a ``frozenset(…)``, ``set(…)``, ``tuple(…)`` or ``list(…)`` of one is made from."""
    wrapper = isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _WRAPPERS
    return value.args[0] if wrapper and len(value.args) == 1 and not value.keywords else value  # type: ignore[attr-defined]


_WRAPPERS = frozenset({"frozenset", "set", "tuple", "list"})


def _united(value: ast.expr) -> list[ast.expr] | None:
    """What a union or concatenation of literal and named collections holds (``BASE | frozenset({"a"})``,
    ``SUPPORTED + ("b",)``): the literals' items and each named part as one whole (``*BASE``); ``None`` for
    anything else."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.BitOr)):
        left, right = _united(value.left), _united(value.right)
        return left + right if left is not None and right is not None else None
    value = _unwrapped(value)
    if isinstance(value, _LITERALS):
        return list(value.elts)
    if isinstance(value, (ast.Name, ast.Attribute)):
        return [ast.Starred(value=value, ctx=ast.Load())]
    return None


def _pristine_literal(lines: Sequence[str], name: str) -> ast.List | ast.Tuple | ast.Set | None:
    """The items the pristine file gives ``name`` where it writes ``name = [ … ]`` (once), read from the
    text: that statement alone is parsed."""
    opening = re.compile(
        rf"^\s*(?:[\w.]+\.)?{re.escape(name)}\s*(?::[^=]+)?=\s*(?:{_WRAPPED}[\[({{]|\w+\($|[\w.]+\s*[|+])"
    )
    at = [k for k, line in enumerate(lines) if opening.match(line)]
    if len(at) != 1:
        return None
    try:
        tree = ast.parse(textwrap.dedent(_statement(lines, at[0])))
    except (SyntaxError, ValueError, RecursionError):
        return None
    found = list(_literal_sets(tree.body))
    return found[0][1] if found else None


def _last_name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _tested_in(tree: ast.Module | None, name: str, text: str = "", by_name: bool = True) -> bool:
    """Whether an ``if`` that raises or leaves (or an ``assert``) tests ``x not in name`` (``x in name``) —
    or, for a collection named for what is supported or allowed (``_SUPPORTED_ARCHITECTURES``), any test of
    its members in ``text`` (a table of refusals tests it as much; ``enabled = x in SUPPORTED`` decides
    by it), or a call it is handed to (those two by its name: not ``by_name``, the code's tests alone) — or a
    lookup of it whose miss is refused (:func:`_lookup_refused`)."""
    named = by_name and not _ALLOWING.isdisjoint(_words(name.lower()))
    if named and re.search(rf"\bin\s+(?:[\w.]+\.)?{re.escape(name)}\b", text):
        return True
    if by_name and _handed_to_a_call(name, text):
        return True  # (``Image.open(fp, formats=ALLOWED_IMAGE_FORMATS)``: the call lets by what it lists)
    refusing = lambda node: _guards_raise_node(node) or isinstance(node.body[-1], _EXIT_NODES)  # noqa: E731
    return _membership_refused(tree, name, refusing, ast.NotIn, ast.In) or _lookup_refused(tree, name)


def _lookup_refused(tree: ast.Module | None, name: str) -> bool:
    """Whether a table ``name`` is looked up (``name.get(key)``) in the test of an ``if`` that answers what it
    found and passes a refusal below (``if backend := mapping.get(b): return backend`` … ``raise``), or that
    raises itself (``if mapping.get(b) is None: raise``): a key the table lacks is refused."""
    for node in ast.walk(tree) if tree is not None else ():
        if not isinstance(node, ast.If):
            continue
        looked = any(
            isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "get"
            and _last_name(c.func.value) == name
            for c in ast.walk(node.test)
        )  # fmt: skip
        if looked and (_guards_raise_node(node) or _passes_a_refusal(tree, node.lineno)):
            return True
    return False


def _guards_raise_node(node: ast.If) -> bool:
    """Whether an ``if``'s body raises or asserts, or calls what raises for it (``_raise_unsupported(…)``,
    ``self._fail_invalid(…)``: :data:`.families.CHECKING_CALL`)."""
    for s in (s for b in node.body for s in ast.walk(b)):
        if isinstance(s, (ast.Raise, ast.Assert)):
            return True
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and _raising_call(s.value):
            return True
    return False


def _raising_call(call: ast.Call) -> bool:
    name = _last_name(call.func)
    return bool(name) and _RAISING_NAME.fullmatch(name) is not None


_RAISING_NAME = re.compile(CHECKING_CALL)


def _one_line(statement: str) -> str:
    """A statement's lines joined, without comments."""
    return " ".join("".join(_code_of(line + "\n") for line in statement.splitlines()).split())


def _weaker(before: ast.expr, after: ast.expr) -> str:
    """How the condition of a check fires less now than it did, or "" — tuples compared read as their
    parts (``(major, minor) != (10, 7)`` is ``major != 10 or minor != 7``: ``major != 10`` lost a part)."""
    return _fires_less(_by_parts(before), _by_parts(after))


def _by_parts(test: ast.expr) -> ast.expr:
    """``(a, b) == (x, y)`` as ``a == x and b == y``, ``!=`` as ``a != x or b != y`` (inside ``and``/``or``/
    ``not`` too); anything else as it is."""
    if isinstance(test, ast.BoolOp):
        return ast.BoolOp(test.op, [_by_parts(v) for v in test.values])
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.UnaryOp(test.op, _by_parts(test.operand))
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return test
    op, left, right = test.ops[0], test.left, test.comparators[0]
    if not isinstance(op, (ast.Eq, ast.NotEq)):
        return test
    if not (isinstance(left, ast.Tuple) and isinstance(right, ast.Tuple)):
        return test
    if len(left.elts) != len(right.elts):
        return test
    parts: list[ast.expr] = [ast.Compare(a, [op], [b]) for a, b in zip(left.elts, right.elts, strict=True)]
    if len(parts) == 1:
        return parts[0]
    return ast.BoolOp(ast.And() if isinstance(op, ast.Eq) else ast.Or(), parts)


def _fires_less(before: ast.expr, after: ast.expr) -> str:
    by_form = (
        _inner_part_weaker(before, after)
        or _over_fewer(before, after)
        or _divisor_relaxed(before, after)
        or _and_more(before, after)
        or _fewer_ors(before, after)
        or _lenient_limit(before, after)
        or _fewer_refused(before, after)
        or _one_part_weaker(before, after)
        or _tolerance_moved(before, after)
    )
    if by_form:  # (``not xs or len(xs) == 0`` → ``not xs``: by its form a part gone, by cases the same)
        return "" if _same_by_cases(before, after) else by_form
    return _fewer_by_cases(before, after)


def _tolerance_moved(before: ast.expr, after: ast.expr) -> str:
    """A closeness test (``torch.allclose(a, b)``, ``math.isclose``) given a tolerance that lets more
    values count as close, the condition otherwise the same: under a ``not`` (``if not allclose(…):
    raise``) it holds in fewer cases (a tolerance made smaller does that where the test is not negated)."""
    pair = _closeness_pair(before, after)
    if pair is None:
        return ""
    was, call, defaults = pair
    old, new = _tolerances(was, defaults), _tolerances(call, defaults)
    if old is None or new is None or old == new:
        return ""
    looser = all(n >= o for n, o in zip(new, old, strict=True))
    tighter = all(n <= o for n, o in zip(new, old, strict=True))
    negated = _negations_above(after, call) % 2 == 1
    if not ((looser and negated) or (tighter and not negated)):
        return ""
    loose = call if looser else was  # (the side that counts more values as close: the edit's, in checks)
    given = ", ".join(f"{k.arg}={ast.unparse(k.value)}" for k in loose.keywords if k.arg in defaults)
    return f"`{ast.unparse(call.func)}` told `{given or 'its defaults'}`: more values count as close"


def _closeness_pair(before: ast.expr, after: ast.expr) -> tuple[ast.Call, ast.Call, dict[str, float]] | None:
    """The one closeness call of two conditions the same but for its tolerances: (its call in ``before``,
    in ``after``, its tolerances' defaults)."""
    found = [c for c in map(_closeness, ast.walk(after)) if c is not None]
    if len(found) != 1 or ast.dump(_without_tolerances(before)) != ast.dump(_without_tolerances(after)):
        return None
    call, defaults = found[0]
    func = ast.dump(call.func)
    was = next(c for c in ast.walk(before) if isinstance(c, ast.Call) and ast.dump(c.func) == func)
    return was, call, defaults


def _closeness(node: ast.AST) -> tuple[ast.Call, dict[str, float]] | None:
    """A call of a closeness test, with its tolerance keywords' defaults."""
    if not isinstance(node, ast.Call):
        return None
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    defaults = _CLOSENESS.get(name)
    return (node, defaults) if defaults is not None else None


# Closeness tests and the defaults of their tolerances (torch's and numpy's ``allclose``/``isclose``;
# ``math.isclose``'s own keywords).
_CLOSENESS: dict[str, dict[str, float]] = {
    "allclose": {"rtol": 1e-05, "atol": 1e-08},
    "isclose": {"rtol": 1e-05, "atol": 1e-08, "rel_tol": 1e-09, "abs_tol": 0.0},
}


def _tolerances(call: ast.Call, defaults: Mapping[str, float]) -> tuple[float, ...] | None:
    """Each tolerance of a closeness call as a number (its default where not given), or ``None`` when
    one is not a number as written."""
    given = {k.arg: k.value for k in call.keywords if k.arg in defaults}
    out: list[float] = []
    for key, default in defaults.items():
        value = given.get(key)
        if value is None:
            out.append(default)
        elif isinstance(value, ast.Constant) and isinstance(value.value, (int, float)):
            out.append(float(value.value))
        else:
            return None
    return tuple(out)


def _without_tolerances(test: ast.expr) -> ast.expr:
    """A copy of a condition with the tolerance keywords of its closeness calls taken off."""
    copied = copy.deepcopy(test)
    for node in ast.walk(copied):
        found = _closeness(node)
        if found is not None:
            found[0].keywords = [k for k in found[0].keywords if k.arg not in found[1]]
    return copied


def _negations_above(test: ast.expr, target: ast.AST) -> int:
    """How many ``not`` stand between a condition's top and ``target`` in it."""
    if test is target:
        return 0
    for child in ast.iter_child_nodes(test):
        if any(n is target for n in ast.walk(child)):
            below = _negations_above(child, target) if isinstance(child, ast.expr) else 0
            return below + (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not))
    return 0


def _same_by_cases(before: ast.expr, after: ast.expr) -> bool:
    """Whether two conditions, read by cases (:mod:`.cases`), hold in exactly the same cases."""
    found = compare(before, after)
    return found is not None and found.same


def _fewer_by_cases(before: ast.expr, after: ast.expr) -> str:
    """The new condition holds in fewer cases than the old one, read by cases (:mod:`.cases`): ``x not in
    (256, 448)`` → ``not 0 < x <= 448``, ``(a is None) ^ (b is not None)`` → ``a is None and b is None``."""
    found = compare(before, after)
    if found is None or not found.fewer:
        return ""
    when = f" (no longer when {found.example})" if found.example else ""
    return f"`{_short(before)}` became `{_short(after)}`: it holds in fewer cases{when}"


def _over_fewer(before: ast.expr, after: ast.expr) -> str:
    """``any(bad(x) for x in (a, b, c))`` → ``… in (c,)``: the same test over fewer of the values it lists
    (``all`` over more of them) fires less."""
    loops = _one_test_over(before, after)
    if loops is None:
        return ""
    kind, old, new = loops
    was, now = {ast.dump(e) for e in old.elts}, {ast.dump(e) for e in new.elts}
    if kind == "any" and now < was:
        gone = ", ".join(ast.unparse(e) for e in old.elts if ast.dump(e) not in now)[:60]
        return f"`{_short(before)}` no longer tests {gone}"
    if kind == "all" and was < now:
        return f"`{_short(after)}` asks of more values: it holds in fewer cases"
    return ""


def _one_test_over(before: ast.expr, after: ast.expr) -> tuple[str, _Literal, _Literal] | None:
    """(``any`` or ``all``, the values before, after) of two calls of it that test the same over a literal
    list of values each (``any(x in d for x in ("cpu", "disk"))``), or ``None``."""
    if not (isinstance(before, ast.Call) and isinstance(after, ast.Call)):
        return None
    kind = ast.unparse(before.func)
    one_arg = len(before.args) == len(after.args) == 1
    if kind not in ("any", "all") or ast.unparse(after.func) != kind or not one_arg:
        return None
    old, new = before.args[0], after.args[0]
    if not (isinstance(old, ast.GeneratorExp) and isinstance(new, ast.GeneratorExp)):
        return None
    if ast.dump(old.elt) != ast.dump(new.elt) or len(old.generators) != 1 or len(new.generators) != 1:
        return None
    g, h = old.generators[0], new.generators[0]
    same_loop = ast.dump(g.target) == ast.dump(h.target) and len(g.ifs) == len(h.ifs) == 0
    if not same_loop or not (isinstance(g.iter, _LITERALS) and isinstance(h.iter, _LITERALS)):
        return None
    return kind, g.iter, h.iter


def _inner_part_weaker(before: ast.expr, after: ast.expr) -> str:
    """``any(bad(x) for x in xs)`` (or ``all``) whose test fires less, the loop the same: so does the
    whole."""
    if not (isinstance(before, ast.Call) and isinstance(after, ast.Call)):
        return ""
    if ast.dump(before.func) != ast.dump(after.func) or ast.unparse(before.func) not in ("any", "all"):
        return ""
    if len(before.args) != 1 or len(after.args) != 1:
        return ""
    old, new = before.args[0], after.args[0]
    loops = (ast.GeneratorExp, ast.ListComp)
    if not (isinstance(old, loops) and isinstance(new, loops)):
        return ""
    if [ast.dump(g) for g in old.generators] != [ast.dump(g) for g in new.generators]:
        return ""
    return _fires_less(old.elt, new.elt)


def _divisor_relaxed(before: ast.expr, after: ast.expr) -> str:
    """``n % 64 != 0`` → ``n % 16 != 0``: a multiple of a divisor of the old one passes now (it fires
    less)."""
    old, new = _divisibility(before), _divisibility(after)
    if old is None or new is None or old[0] != new[0] or new[1] == old[1] or old[1] % new[1]:
        return ""
    return f"`{old[0][:40]}` need only be a multiple of {new[1]}, not of {old[1]}"


def _remainder_nonzero(test: ast.expr) -> ast.BinOp | None:
    """The ``n % d`` of a test ``n % d != 0`` (or ``0 != n % d``)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotEq)):
        return None
    sides = [test.left, test.comparators[0]]
    mods = [e for e in sides if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mod)]
    zero = [e for e in sides if isinstance(e, ast.Constant) and e.value == 0]
    return mods[0] if len(mods) == 1 and len(zero) == 1 else None


def _divisibility(test: ast.expr) -> tuple[str, int] | None:
    """(``n``, 64) of ``n % 64 != 0`` (or ``0 != n % 64``)."""
    mod = _remainder_nonzero(test)
    if mod is None:
        return None
    divisor = mod.right.value if isinstance(mod.right, ast.Constant) else None
    if not isinstance(divisor, int) or isinstance(divisor, bool) or divisor <= 0:
        return None
    return ast.unparse(mod.left), divisor


def _one_part_weaker(before: ast.expr, after: ast.expr) -> str:
    """``a and b and c`` → ``a and b' and c`` (or the same of an ``or``) with ``b'`` firing less than
    ``b``: so does the whole — and so it does when several parts changed, each firing less (``m % 16 != 0
    or n % 16 != 0`` → ``m % 8 != 0 or n % 8 != 0``: each part alone, where the whole has too many cases)."""
    if not (isinstance(before, ast.BoolOp) and isinstance(after, ast.BoolOp)):
        return ""
    if type(before.op) is not type(after.op) or len(before.values) != len(after.values):
        return ""
    pairs = [(b, a) for b, a in zip(before.values, after.values, strict=True) if ast.dump(b) != ast.dump(a)]
    details = [_fires_less(*pair) for pair in pairs]
    return details[0] if details and all(details) else ""


def _fewer_refused(before: ast.expr, after: ast.expr) -> str:
    """A membership test that lets more through: ``x != a`` or ``x not in (a, b)`` → ``x not in (a, b,
    c)`` (the values that pass grew), ``x == a`` or ``x in (a, b)`` → ``x in (a,)`` (fewer refused)."""
    old, new = _membership(before), _membership(after)
    if old is None or new is None or ast.dump(old[0]) != ast.dump(new[0]) or old[1] != new[1]:
        return ""
    subject, allowed, members = new
    was, now = {ast.dump(e) for e in old[2]}, {ast.dump(e) for e in members}
    if allowed and was < now:
        more = [ast.unparse(e) for e in members if ast.dump(e) not in was]
        return f"the values `{ast.unparse(subject)[:40]}` may take grew: {', '.join(more)[:60]}"
    if not allowed and now < was:
        return f"fewer values of `{ast.unparse(subject)[:40]}` are refused"
    return ""


def _membership(test: ast.expr) -> tuple[ast.expr, bool, list[ast.expr]] | None:
    """(the subject, whether the values listed are the allowed ones, the values) of ``x != a``, ``x not in
    (a, b)``, ``not x in (…)`` (allowed) or ``x == a``, ``x in (a, b)`` (refused)."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    inner = test.operand if isinstance(test, ast.UnaryOp) else test
    if not isinstance(inner, ast.Compare) or len(inner.ops) != 1:
        return None
    op, right = inner.ops[0], inner.comparators[0]
    if isinstance(op, (ast.Eq, ast.NotEq)):
        members: list[ast.expr] | None = [right]
    elif isinstance(op, (ast.In, ast.NotIn)):
        members = _members(right)
    else:
        return None
    return (inner.left, isinstance(op, (ast.NotEq, ast.NotIn)) != negated, members) if members else None


def _members(container: ast.expr) -> list[ast.expr] | None:
    """What a container tested by ``in`` holds: a literal's items, a named collection as one whole
    (``*NAME``), and both of a concatenation or a union (``SUPPORTED + (a, b)``, ``NAMES | {x}``, ``(*NAMES,
    x)``) — enough to see a collection grow by what was added to it."""
    if isinstance(container, _LITERALS):
        return list(container.elts)
    if isinstance(container, (ast.Name, ast.Attribute)):
        return [ast.Starred(value=container, ctx=ast.Load())]
    if isinstance(container, ast.BinOp) and isinstance(container.op, (ast.Add, ast.BitOr)):
        left, right = _members(container.left), _members(container.right)
        return left + right if left is not None and right is not None else None
    return None


def _and_more(before: ast.expr, after: ast.expr) -> str:
    """``bad`` → ``bad and X``: it fires only when ``X`` also holds."""
    dump = ast.dump(before)
    if not isinstance(after, ast.BoolOp) or not isinstance(after.op, ast.And):
        return ""
    if dump not in map(ast.dump, after.values):
        return ""
    extra = [ast.unparse(v) for v in after.values if ast.dump(v) != dump]
    return f"the check now fires only when also `{' and '.join(extra)[:60]}`"


def _fewer_ors(before: ast.expr, after: ast.expr) -> str:
    """``a or b`` → ``a``: it no longer fires for ``b``."""
    if not isinstance(before, ast.BoolOp) or not isinstance(before.op, ast.Or):
        return ""
    if isinstance(after, ast.BoolOp) and not isinstance(after.op, ast.Or):
        return ""
    kept = [ast.dump(v) for v in after.values] if isinstance(after, ast.BoolOp) else [ast.dump(after)]
    if not set(kept) < {ast.dump(v) for v in before.values}:
        return ""
    gone = [ast.unparse(v) for v in before.values if ast.dump(v) not in kept]
    return f"the check no longer fires when `{' or '.join(gone)[:60]}`"


def _lenient_limit(before: ast.expr, after: ast.expr) -> str:
    """An ordering comparison moved so that it fires less: read as "``big`` exceeds ``small``" (``a < b`` is
    ``b`` exceeding ``a``), the new ``big`` is no larger, the new ``small`` no smaller, and the comparison no
    less strict, one of them for certain — ``x > 2.0`` → ``x > 5.0``, ``n >= limit`` → ``n > limit + 256``,
    ``free < need`` → ``free * 1.3 < need``, ``v < parse("2.5")`` → ``v < parse("2.3")``."""
    old, new = _ordering(before), _ordering(after)
    if old is None or new is None:
        return ""
    big, small = _moved(old[0], new[0]), _moved(old[1], new[1])
    if big is None or small is None or big > 0 or small < 0 or (old[2] and not new[2]):
        return ""
    if big == 0 and small == 0 and old[2] == new[2]:
        return ""
    return f"`{_short(before)}` became `{_short(after)}`: it fires less"


_ORDER = {ast.Gt: (0, 1, True), ast.GtE: (0, 1, False), ast.Lt: (1, 0, True), ast.LtE: (1, 0, False)}


def _ordering(test: ast.expr) -> tuple[ast.expr, ast.expr, bool] | None:
    """(``big``, ``small``, strict) of a comparison that holds when ``big`` exceeds ``small`` (``a > b``,
    ``b < a``; strict unless ``>=``/``<=``)."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or type(test.ops[0]) not in _ORDER:
        return None
    sides = (test.left, test.comparators[0])
    i, j, strict = _ORDER[type(test.ops[0])]
    return sides[i], sides[j], strict


def _moved(old: ast.expr, new: ast.expr) -> int | None:
    """Which way ``new`` lies from ``old`` for certain: 0 the same, 1 larger, -1 smaller, ``None`` unknown —
    two numbers, the same expression given a margin (``+ 8``, ``* 1.3``, ``2 * x``, ``- 8``, ``/ 2``), or the
    same expression but for one literal: a number, or a version string (``parse("2.5.0")``)."""
    if ast.dump(old) == ast.dump(new):
        return 0
    a, b = _number(old), _number(new)
    if a is not None and b is not None:
        return (b > a) - (b < a)
    pair = _numbers(old), _numbers(new)
    if pair[0] is not None and pair[1] is not None and len(pair[0]) == len(pair[1]):
        return (pair[1] > pair[0]) - (pair[1] < pair[0])  # (major, minor) tuples, in order
    margin = _margin_moved(old, new) if isinstance(new, ast.BinOp) else None
    return margin if margin is not None else _one_literal_moved(old, new)


def _margin_moved(old: ast.expr, new: ast.BinOp) -> int | None:
    """``old`` given a margin in ``new``: 1 larger (``+ 8``, ``* 1.3``, ``2 * x``), -1 smaller (``- 8``,
    ``/ 2``), ``None`` when it is not that."""
    for inner, amount, left in ((new.left, new.right, True), (new.right, new.left, False)):
        value = _number(amount)
        if value is None or value <= 0 or ast.dump(inner) != ast.dump(old):
            continue
        if isinstance(new.op, ast.Add) or (isinstance(new.op, ast.Mult) and value > 1):
            return 1
        divides = isinstance(new.op, (ast.Div, ast.FloorDiv)) and value > 1
        if left and (isinstance(new.op, ast.Sub) or divides):
            return -1
    return None


def _one_literal_moved(old: ast.expr, new: ast.expr) -> int | None:
    """Two expressions the same but for one constant, a number or a version string: which way it moved."""
    was = [n for n in ast.walk(old) if isinstance(n, ast.Constant)]
    now = [n for n in ast.walk(new) if isinstance(n, ast.Constant)]
    if len(was) != len(now) or ast.dump(_blanked(old)) != ast.dump(_blanked(new)):
        return None
    differ = [(x.value, y.value) for x, y in zip(was, now, strict=True) if x.value != y.value]
    if len(differ) != 1:
        return None
    x, y = differ[0]
    if not (isinstance(x, str) and isinstance(y, str)):
        return None  # a number inside an expression: an index, an argument — no telling which way
    from packaging.version import InvalidVersion, Version

    try:
        vx, vy = Version(x), Version(y)
    except InvalidVersion:
        return None
    return (vy > vx) - (vy < vx)


def _numbers(node: ast.expr) -> tuple[float, ...] | None:
    """A tuple of numbers (``(9, 0)``) as its values."""
    if not isinstance(node, ast.Tuple) or not node.elts:
        return None
    values = [_number(e) for e in node.elts]
    return None if any(v is None for v in values) else tuple(v for v in values if v is not None)


def _blanked(node: ast.expr) -> ast.expr:
    """A copy of ``node`` with every constant made ``None``: its shape alone."""
    shape = copy.deepcopy(node)  # (not unparsed and parsed again: the tree is at hand)
    for n in ast.walk(shape):
        if isinstance(n, ast.Constant):
            n.value = None
    return shape


def _number(node: ast.expr) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return -inner if inner is not None else None
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _forced_conditions(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A condition the code worked out, replaced by a constant: ``return a > 1 and any(…)`` became
    ``return False``, ``full = free < margin`` became ``full = False`` — the decision it made is gone."""
    out: list[Finding] = []
    for r in regions:
        made = {m.group(1) for n in r.lines if (m := _CONSTANT_DECISION.match(edit.lines[n - 1]))}
        if not made:
            continue  # (most regions hand on no constant: their removed lines are not parsed)
        worked = {}
        for i, old in enumerate(r.removed):
            head = _CONSTANT_TARGET.match(old)
            if head is None or head.group(1) not in made:
                continue
            statement = _statement(r.removed, i)  # (``return (`` over several lines: its test below)
            if not _DECIDES.search(statement):
                continue
            target, value = _decision(_code_of(statement))
            if value is not None and target and _decided(value):
                worked[target] = value
        out += _made_constant(edit, r, worked) if worked else []
    return out


def _answers_overridden(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """An ``if`` put in that turns a no into a yes: ``if not sup.served: sup = dataclasses.replace(sup,
    served=True, reason=None)``, ``if not ok: ok = True`` — its body does nothing but give the answer it
    tested True (and clear what went with the no). The decision the code worked out above is overridden
    exactly where it said no; a latch (``if not self._done: self._setup(); self._done = True``) does work."""
    out: list[Finding] = []
    for r in regions:
        for n in r.lines:
            if not edit.lines[n - 1].lstrip().startswith("if not "):
                continue  # (most added lines test nothing negated: no tree is asked)
            node = _if_at(edit.st.tree, n)
            test = node.test if node is not None else None
            tested = ast.unparse(test.operand) if isinstance(test, ast.UnaryOp) and _negation(test) else ""
            said = [_says_yes(s, tested) for s in node.body] if node is not None and tested else []
            if node is None or node.orelse or not any(x is True for x in said) or None in said:
                continue
            detail = (
                f"where `{tested[:50]}` said no, it is made yes: the decision worked out above is overridden"
            )
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _checks_dropped(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A check taken out of a list of checks: an item removed from a literal list, tuple or set that holds
    checks by its name or by what it is (``def get_default_validity_checks(): return [single_softmax_rule,
    …]``, ``VALIDATORS = (check_shape, …)``, an item named ``validate_*``) — the check is no longer run."""
    out: list[Finding] = []
    for r in regions:
        gone = [item for old in r.removed if _ITEM.match(old) and not keyword.iskeyword(item := _item(old))]
        if not gone or any(_ITEM.match(edit.lines[n - 1]) is None for n in r.lines):
            continue  # (only bare items taken out)
        holder = _holder_of(edit, max(r.start - 1, 1))
        named = not _CHECKS_WORDS.isdisjoint(_words(holder.lower()))
        checks = [g for g in gone if named or not _CHECKS_WORDS.isdisjoint(_words(g.rsplit(".", 1)[-1]))]
        if checks and holder:
            detail = f"check neutralised: `{checks[0][:50]}` taken out of `{holder}`: it is no longer run"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, max(r.start, 1), detail))
    return out


def _item(line: str) -> str:
    return _code_of(line).strip().rstrip(",").strip()


_ITEM = re.compile(r"^\s*[A-Za-z_][\w.]*\s*,?\s*(?:#.*)?$")  # a bare name as an item of a list
# Words of what holds checks, or is one.
_CHECKS_WORDS = frozenset(
    {"check", "checks", "checker", "checkers", "validator", "validators", "validity", "validation"}
    | {"validations", "validate", "verifier", "verifiers", "verify", "guards", "sanity"}
)


def _holder_of(edit: _Edit, line: int) -> str:
    """The name a literal list at ``line`` is given to: the assignment's target, or the function that
    returns it ("" when neither)."""
    for node in reversed(list(_nodes_at(edit.st.tree, {line}))):
        if isinstance(node, ast.Assign) and isinstance(node.value, (*_LITERALS, ast.Call)):
            return _last_name(node.targets[0])
        if isinstance(node, ast.Return) and isinstance(node.value, _LITERALS):
            return _function_at(edit, line)
    return ""


def _errors_kept_back(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A handler that handed on what it caught — to a future, a queue, a callback (``fut.set_exception(e)``,
    ``errors.put(e)``), or kept it for later (``self._grammar = e``) — and no longer does
    (``fut.set_result({})``, ``= None``): whoever waited for the error gets a default and never sees it.
    The installed handler that still catches it hands the name on nowhere but to a log line, and raises
    nothing."""
    caught = (
        set(_CAUGHT_AS.findall(edit.before)) if edit.before is not None and "except" in edit.before else set()
    )
    if not caught or not any(_hands_on_text(old, caught) for r in regions for old in r.removed):
        return []  # (no removed line hands on what an ``except … as e`` caught: no tree asked)
    gone = _Gone.of(edit)
    if gone.before is None:
        return []
    out: list[Finding] = []
    for r in regions:
        for i, old in enumerate(r.removed):
            name = _handed_on(gone.before, r.old_start + i, old)
            if not name:
                continue
            now = next(iter(_handlers_around(edit.st, max(r.start, 1))[-1:]), None)
            if now is None or now.name != name or _raises(now) or _hands_on(now, name):
                continue
            detail = f"the error caught as `{name}` is no longer handed on: `{old.strip()[:60]}` is gone"
            out.append(_check_finding(edit, RuleId.SWALLOWED_EXCEPTION, max(r.start, 1), detail))
            break
    return out


def _error_answers_dropped(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A handler that answered its caller with the error (``return self.create_error_response(msg)``, ``return
    error_reply(e)``: a service's way of raising) and no longer answers at all — it sets a default and
    lets the code below run on (``chunks = None``): the caller gets a result, never the error. The
    installed handler around the edit neither raises nor returns."""
    answers = [(r, a) for r in regions if (a := next((o for o in r.removed if _ERROR_ANSWER.match(o)), None))]
    if not answers or edit.before is None or "except" not in edit.before:
        return []  # (no removed line answered with an error: the pristine file is not located)
    before = locate(edit.before)
    out: list[Finding] = []
    for r, answer in answers:
        if not _handlers_around(before, r.old_start):
            continue
        now = next(iter(_handlers_around(edit.st, max(r.start, 1))[-1:]), None)
        if now is None or any(isinstance(n, (ast.Raise, ast.Return)) for n in ast.walk(now)):
            continue
        detail = f"the handler no longer answers with the error: `{answer.strip()[:60]}` is gone"
        out.append(_check_finding(edit, RuleId.SWALLOWED_EXCEPTION, max(r.start, 1), detail))
    return out


# A ``return`` of what a call named for an error makes (``create_error_response(…)``, ``error_reply(e)``).
_ERROR_ANSWER = re.compile(r"^\s*return\s+(?:[\w.]+\.)?\w*(?:error|fail|failure)\w*\(", re.IGNORECASE)


def _handed_on(before: Structure, line: int, text: str) -> str:
    """The name a handler binds what it caught to, when its line ``line`` (``text``) hands that on or keeps
    it (``fut.set_exception(e)``, ``self.error = e``) — not to a log line; "" else."""
    handler = next(iter(_handlers_around(before, line)[-1:]), None)
    name = handler.name if handler is not None else None
    stmt = next((s for s in reversed(list(_nodes_at(handler, {line}))) if not hasattr(s, "body")), None)
    call = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
    if not name or _logs(text) or (call is not None and _logs(ast.unparse(call.func))):
        return ""  # (a line of a log call over several lines, ``f"… {str(e)}"``, hands on nothing)
    handed = rf"\(\s*{re.escape(name)}\s*[,)]|=\s*{re.escape(name)}\s*(?:#.*)?$"
    return name if re.search(handed, text) else ""


_CAUGHT_AS = re.compile(r"^[ \t]*except\b[^:\n]*\bas\s+(\w+)\s*:", re.MULTILINE)
_HANDS_ON = re.compile(r"\w\(\s*(\w+)\s*[,)]|=\s*(\w+)\s*(?:#.*)?$")


def _hands_on_text(line: str, caught: set[str]) -> bool:
    """Whether, by the text, ``line`` hands one of the ``caught`` names to a call or keeps it."""
    return any(name in caught for m in _HANDS_ON.finditer(line) for name in m.groups() if name)


def _logs(line: str) -> bool:
    return re.search(r"\b(?:log|logger|logging|warnings|print)\b", line) is not None


def _hands_on(handler: ast.ExceptHandler, name: str) -> bool:
    """Whether a handler hands ``name`` to a call other than a log line's, or keeps it (``self.error =
    e``)."""
    for node in ast.walk(handler):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == name:
            return True
        if not isinstance(node, ast.Call) or _logs(ast.unparse(node.func)):
            continue
        if any(isinstance(a, ast.Name) and a.id == name for a in node.args):
            return True
    return False


def _lookups_softened(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A lookup that raised on a missing key made to skip it: ``param = params[name]`` → ``param =
    params.get(name)`` and ``if param is None: continue`` — the ``KeyError`` that stopped a wrong name
    (a weight the model does not have) is gone, and the case passes unseen."""
    out: list[Finding] = []
    for r in regions:
        looked = {m.group(1, 2, 3) for old in r.removed if (m := _LOOKUP.match(_code_of(old)))}
        for n in r.lines if looked else ():
            got = _GOT.match(_code_of(edit.lines[n - 1]))
            if got is None or got.group(1, 2, 3) not in looked:
                continue
            target = got.group(1)
            skip = next((k for k in r.lines if k > n and _skips_missing(edit.st.tree, k, target)), 0)
            if skip:
                shown = f"{got.group(2)}[{got.group(3)}]"
                detail = f"`{shown}` became `.get()`: a missing key is skipped, not an error"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


_LOOKUP = re.compile(r"^\s*([\w.]+)\s*=\s*([\w.]+)\[([^\[\]]+)\]\s*$")  # x = table[key]
_GOT = re.compile(r"^\s*([\w.]+)\s*=\s*([\w.]+)\.get\(([^,()]+)\)\s*$")  # x = table.get(key)


def _skips_missing(tree: ast.Module | None, line: int, name: str) -> bool:
    """Whether the ``if`` at ``line`` tests ``name`` for missing (``is None``, ``not``) and leaves."""
    node = _if_at(tree, line)
    if node is None or not node.body or not isinstance(node.body[-1], _EXIT_NODES):
        return False
    test = node.test
    missing = _negation(test) and ast.unparse(test.operand) == name  # type: ignore[attr-defined]
    return missing or (
        isinstance(test, ast.Compare)
        and ast.unparse(test.left) == name
        and isinstance(test.ops[0], (ast.Is, ast.Eq))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    )


def _says_yes(stmt: ast.stmt, tested: str) -> bool | None:
    """``True`` when ``stmt`` gives the answer ``tested`` True (``ok = True``, ``res.ok = True``, ``res =
    replace(res, ok=True, …)``, ``res = res._replace(ok=True)``), ``False`` when it clears something else to
    ``None`` (what went with the no: its reason), ``None`` for anything else (work done)."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return None
    target, value = ast.unparse(stmt.targets[0]), stmt.value
    if isinstance(value, ast.Constant) and value.value is True and target == tested:
        return True
    if isinstance(value, ast.Constant) and value.value is None and target != tested:
        return False
    holder, _, field = tested.rpartition(".")
    forced = isinstance(value, ast.Call) and any(
        k.arg == field and isinstance(k.value, ast.Constant) and k.value.value is True for k in value.keywords
    )
    return True if forced and target == holder else None


def _made_constant(edit: _Edit, r: Region, worked: dict[str, ast.expr]) -> list[Finding]:
    """The findings of region ``r``'s lines that give a constant to what the pristine lines worked out."""
    out: list[Finding] = []
    for n in r.lines:
        if not _CONSTANT_DECISION.match(edit.lines[n - 1]):
            continue
        target, value = _decision(_code_of(edit.lines[n - 1]))
        if target not in worked or not isinstance(value, ast.Constant) or not isinstance(value.value, bool):
            continue
        if _turns_off(target.rsplit(".", 1)[-1], not value.value):
            continue  # a checking switch forced on (``_DEBUG_ASSERT = True``): stricter, not neutralised
        was = " ".join(ast.unparse(worked[target]).split())[:60]
        what = "it returns" if target == "return" else f"`{target}` is"
        detail = f"{what} always {value.value} now, where the code worked out `{was}`"
        out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _decided(value: ast.expr) -> bool:
    """Whether ``value`` is a decision worked out: a comparison, ``and``/``or``/``not``, or a call that
    answers a question (``x.is_contiguous()``, ``torch.equal(a, b)``, ``isinstance(…)``, ``any(…)``)."""
    if isinstance(value, (ast.Compare, ast.BoolOp)) or _negation(value):
        return True
    func = value.func if isinstance(value, ast.Call) else None
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    # (a call named for what it answers counts too: ``moe_permute_unpermute_supported()``)
    answers = name.startswith(_ASKING) or name in _ANSWERING or not _ALLOWING.isdisjoint(_words(name))
    return bool(name) and answers


# What a call that answers a question is named: a predicate (``is_*``, ``has_*``…), or one of these.
_ASKING = ("is_", "has_", "are_", "can_", "should_", "supports")
_ANSWERING = frozenset(
    {"equal", "allclose", "isinstance", "issubclass", "all", "any", "exists", "isfile", "isdir"}
)
_CONSTANT_DECISION = re.compile(r"^\s*(return|[\w.]+)\s*=?\s*\(?\s*(?:True|False)\b")
_CONSTANT_TARGET = re.compile(r"^\s*(return|[\w.]+)\b\s*=?")
_DECIDES = re.compile(
    r"[<>]|[=!]=|\b(?:and|or|not|in|is)\b|\b(?:is|has|are|can|should|supports)_?\w*\(|"
    r"\b(?:equal|allclose|isinstance|issubclass|all|any|exists|isfile|isdir)\(|"
    r"_(?:supported|supports|allowed|valid|compatible|permitted|accepted)\("
)


_FLAG = re.compile(r"\b([A-Za-z_]\w*)\s*=\s*(True|False)\b")
_QUOTED = re.compile(r"""(["'])(?:\\.|(?!\1).)*\1""")


def _unquoted(line: str) -> str:
    """A line with its string literals emptied: ``"pass strict=False to …"`` is a message, not a flag."""
    return _QUOTED.sub('""', line)


_GIVEN = re.compile(r"\b([A-Za-z_]\w*)\s*=(?!=)\s*([^,)\n]+)")  # a keyword or a name given a value


def _bounds_dropped(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A bound taken off a value: ``limit = max(2, n)`` → ``limit = n`` (``return min(x, 8)`` → ``return
    x``) — what the floor or the ceiling kept out passes now."""
    out: list[Finding] = []
    for r in regions:
        if not r.removed or not any(_BOUNDING.search(old) for old in r.removed):
            continue  # (most regions take off no bound: nothing parsed)
        bounded: dict[str, tuple[ast.expr, ast.expr]] = {}
        for i in range(len(r.removed)):
            target, value = _decision(_code_of(_statement(r.removed, i)))
            inner = _bounded(value) if target else None
            if value is not None and inner is not None:
                bounded[target] = (value, inner)
        for n in r.lines if bounded else ():
            target, value = _decision(_code_of(_statement(edit.lines, n - 1)))
            if target in bounded and value is not None and ast.dump(value) == ast.dump(bounded[target][1]):
                was = " ".join(ast.unparse(bounded[target][0]).split())[:50]
                detail = f"the bound `{was}` is gone: what it kept out passes"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
        out += _unwrapped_in_place(r, edit, {f.line for f in out})
        out += _clamps_gone(r, edit)
    return out


def _unwrapped_in_place(r: Region, edit: _Edit, said: Collection[int | None]) -> list[Finding]:
    """A statement the same but for a clamp taken off what it kept in bounds, wherever it stood — an index,
    an argument, a returned value: ``all_ids[idx, pos.clamp(0, n - 1)]`` → ``all_ids[idx, pos]``, ``return
    mx.clip(mx.where(mx.isnan(x), -1e30, x), -1e30, 1e30)`` → ``return x``."""
    if len(r.removed) > _TARGETED or len(r.lines) > _TARGETED:
        return []  # (a function rewritten: not a clamp taken off)
    was = [t for i in range(len(r.removed)) if _BOUNDING.search(r.removed[i]) and (t := _parsed(r, i))]
    out: list[Finding] = []
    for n in r.lines if was else ():
        now = _parsed_line(edit.lines, n)
        shown = _taken_off(was, now) if now is not None else ""
        if shown and n not in said:
            detail = f"the clamp `{shown}` is taken off: what it kept in bounds passes as it is"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _taken_off(was: Sequence[ast.stmt], now: ast.stmt) -> str:
    """The clamp (shown) one of the old statements ``was`` had that ``now`` is without; "" when none."""
    names = _name_ids(now)
    return next((c for old in was if names <= _name_ids(old) and (c := _unclamped(old, now))), "")


def _name_ids(node: ast.AST) -> set[str]:
    """The names a node reads or binds (taking a clamp off leaves no new one)."""
    return {x.id for x in ast.walk(node) if isinstance(x, ast.Name)}


def _parsed(r: Region, i: int) -> ast.stmt | None:
    return _one_statement(_code_of(_statement(r.removed, i)))


def _parsed_line(lines: Sequence[str], n: int) -> ast.stmt | None:
    return _one_statement(_code_of(_statement(lines, n - 1)))


def _one_statement(text: str) -> ast.stmt | None:
    try:
        tree = ast.parse(textwrap.dedent(text).strip())
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tree.body[0] if len(tree.body) == 1 else None


def _unclamped(old: ast.stmt, new: ast.stmt, depth: int = 3) -> str:
    """The clamp (shown) whose removal — one, or one inside another, up to ``depth`` — makes ``old`` the
    statement ``new``; "" when none does."""
    wanted = ast.dump(new)
    for call, operand in _clamp_operands(old):
        if _bound_kept(old, call, operand):
            continue  # ``n = min(n, cap)`` → ``n = cap``: the bound given, not the clamp taken off
        peeled = _with_replaced(old, call, operand)
        if ast.dump(peeled) == wanted or (depth > 1 and _unclamped(peeled, new, depth - 1)):
            return " ".join(ast.unparse(call).split())[:60]
    return ""


def _bound_kept(stmt: ast.stmt, call: ast.Call, operand: ast.expr) -> bool:
    """Whether ``stmt`` clamps its own target (``n = min(n, cap)``) and ``operand`` is the bound, not it."""
    if not (isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1):
        return False
    target = ast.unparse(stmt.targets[0])  # (by its text: a target is stored, an argument loaded)
    return any(ast.unparse(a) == target for a in call.args) and ast.unparse(operand) != target


def _clamp_operands(tree: ast.AST) -> Iterator[tuple[ast.Call, ast.expr]]:
    """Every clamp call of ``tree`` with each operand it may be keeping in bounds."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for operand in _clamps(node):
                yield node, operand


def _with_replaced(tree: ast.stmt, node: ast.AST, by: ast.expr) -> ast.stmt:
    """A copy of ``tree`` with ``node`` (one of its nodes) replaced by a copy of ``by``."""
    nodes = list(ast.walk(tree))
    copied = copy.deepcopy(tree)
    twins = dict(zip(map(id, nodes), ast.walk(copied), strict=True))
    target, replacement = twins[id(node)], copy.deepcopy(by)

    class _Swap(ast.NodeTransformer):
        def visit(self, n: ast.AST) -> ast.AST:
            return replacement if n is target else self.generic_visit(n)

    swapped = _Swap().visit(copied)
    assert isinstance(swapped, ast.stmt)  # (a statement's node is replaced, never the statement)
    return swapped


_BOUNDING = re.compile(r"\b(?:min|max|clamp\w*|clip\w*|where|nan_to_num)\(")
_ASSIGNED = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*=[^=]")


def _clamped(statement: str) -> str:
    """``x`` of a statement that keeps ``x`` within bounds: ``x = min(x, cap)``, ``x = max(floor, x)``,
    ``x = x.clamp(0, n)``, ``x = torch.clip(x, lo, hi)``, ``x.clamp_(max=n)``; else ""."""
    try:
        tree = ast.parse(statement.strip())
    except (SyntaxError, ValueError, RecursionError):
        return ""
    stmt = tree.body[0] if len(tree.body) == 1 else None
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return _clamped_in_place(stmt.value)
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call)):
        return ""
    target = ast.unparse(stmt.targets[0])
    return target if target in map(ast.unparse, _clamps(stmt.value)) else ""


def _clamped_in_place(call: ast.Call) -> str:
    """What a clamp call as a statement keeps within bounds: the tensor it writes into (``out=x``), or its
    receiver when it works in place (``x.clamp_(max=n)``); else ""."""
    if not _clamps(call):
        return ""
    out = next((k.value for k in call.keywords if k.arg == "out"), None)
    if out is not None:
        return ast.unparse(out)
    func = call.func
    return ast.unparse(func.value) if isinstance(func, ast.Attribute) and func.attr.endswith("_") else ""


# What keeps a value within bounds, by the last name called: the builtins, and the tensor and array methods
# and functions (``x.clamp(…)``, ``torch.clip(x, …)``, ``np.clip``, ``x.nan_to_num()``; a trailing ``_``: in
# place); and a ``where`` that puts a value right where its test finds it wrong.
_CLAMPS = frozenset({min.__name__, max.__name__, "clamp", "clip", "clamp_min", "clamp_max", "nan_to_num"})


def _clamps(call: ast.Call) -> list[ast.expr]:
    """What a call may be keeping within bounds: the arguments of ``min``/``max``; the receiver or the first
    argument of a clamp (``x.clamp(lo, hi)``, ``torch.clamp(x, lo, hi)``); the value a ``where`` keeps where
    its test, which reads that value, holds or not (``torch.where(f > 0, f, 1.0)``: ``f``); nothing for any
    other call."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name == "where" and isinstance(func, ast.Attribute) and len(call.args) == 3:
        tested = {ast.dump(n) for n in ast.walk(call.args[0])}
        return [a for a in call.args[1:] if ast.dump(a) in tested and not isinstance(a, ast.Constant)]
    if name.rstrip("_") not in _CLAMPS:
        return []
    if name in (min.__name__, max.__name__):
        return list(call.args) if isinstance(func, ast.Name) else []
    return [func.value, *call.args[:1]] if isinstance(func, ast.Attribute) else list(call.args[:1])


def _clamps_gone(r: Region, edit: _Edit) -> list[Finding]:
    """A clamp of a value by another taken out (``num_reqs = min(num_reqs, cap)`` deleted or commented
    out): what it kept the value within, it is no longer kept within."""
    # a clamp given another bound, or the value given anew in the region (``if n > cap: n = cap``)
    kept = {_ASSIGNED.match(edit.lines[n - 1]) for n in r.lines}
    kept_targets = {m.group(1) for m in kept if m is not None}
    kept_targets |= {_clamped(_code_of(edit.lines[n - 1])) for n in r.lines}  # clamped still, otherwise
    for i in range(len(r.removed)):
        statement = _code_of(_statement(r.removed, i))
        target = _clamped(statement)
        if target and target not in kept_targets and _squeeze(statement) not in _squeezed_source(edit.text):
            shown = " ".join(statement.split())[:60]
            detail = f"the clamp `{shown}` is gone: nothing keeps the value within it"
            line = max(r.start, 1)
            return [_check_finding(edit, RuleId.REMOVED_CHECK, line, f"check neutralised: {detail}")]
    return []


def _requirements_lowered(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A minimum asked for made lower, one literal the only change of a line: the argument of a call that
    asks whether a minimum is met (``has_device_capability(89)`` → ``(80)``, ``is_triton_available("3.4.0")``
    → ``"3.3.0"``), or the value a function that states a minimum returns (``get_min_capability``: ``return
    80`` → ``return 75``) — what it kept out passes now. Numbers compare as numbers, strings as versions."""
    out: list[Finding] = []
    for r in regions:
        out += _minimum_from_environment(edit, r)
        if not r.removed or len(r.removed) != len(r.lines):
            continue
        for old, n in zip(r.removed, r.lines, strict=True):
            pair = _one_literal_changed(old, edit.lines[n - 1])
            if pair is None:
                continue
            before, after, where = pair
            function = (edit.st.qualname_at(n) or "").rsplit(".", 1)[-1]
            asks = where is not None and _asks_minimum(where)
            states = where is None and not {"min", "minimum"}.isdisjoint(_words(function))
            if (asks or states) and _lower(after, before):
                what = f"`{where}(…)` asks for" if asks else f"{function} states"
                detail = f"{what} less: {before} → {after}"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _table_entries_dropped(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """An entry taken out of a table the code checks entry by entry — a literal a ``for`` loop walks
    (itself, its ``.items()``, or a name given it) whose body raises: ``for name, expected in {"block_size":
    128, …}.items(): if cfg.get(name) != expected: raise …``. Each entry is a requirement: one commented
    out or deleted is a check gone (one still written in the installed file, moved, is kept)."""
    if edit.before is None or not any(old.rstrip().endswith(",") for r in regions for old in r.removed):
        return []  # (an entry of a table over several lines ends with a comma)
    before, lines = locate(edit.before), split_lines(edit.before)
    out: list[Finding] = []
    for r in regions:
        gone = set(range(r.old_start, r.old_start + len(r.removed)))
        for entries, loop in _tables_at(before, gone, edit.before):
            dropped = [e for e in entries if e.lineno in gone and (e.end_lineno or 0) in gone]
            shown = next((t for e in dropped if not _written(t := _entry_text(lines, e), edit)), "")
            if shown:
                detail = f"check neutralised: `{shown[:60]}` left a table checked entry by entry (`{loop}`)"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, max(r.start, 1), detail))
    return out


def _tables_at(before: Structure, lines: set[int], text: str) -> list[tuple[list[ast.expr], str]]:
    """The literal tables holding pristine ``lines`` that a loop whose body raises walks: each one's
    entries and the loop — the loop's own literal, or one a name is given that a loop walks (found by the
    text first: the whole file is walked only then)."""
    out: list[tuple[list[ast.expr], str]] = []
    for node in _nodes_at(before.tree, lines):
        if isinstance(node, ast.For):
            out += _checked(node, _table_walked(node, {}))
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.value, _TABLES):
            continue
        named = node.targets[0]
        if (
            isinstance(named, ast.Name)
            and before.tree is not None
            and re.search(rf"\bin\s+{named.id}\b", text)
        ):
            given = {named.id: node.value}
            loops = [n for n in ast.walk(before.tree) if isinstance(n, ast.For)]
            out += [t for loop in loops for t in _checked(loop, _table_walked(loop, given))]
    return out


def _checked(
    loop: ast.For, table: ast.Dict | ast.List | ast.Tuple | ast.Set | None
) -> list[tuple[list[ast.expr], str]]:
    """(the entries, the loop) of a table a loop whose body raises walks; none else."""
    if table is None or not any(isinstance(s, ast.Raise) for s in _own_statements(loop.body)):
        return []
    return [(_entries(table), f"for {ast.unparse(loop.target).strip('()')} in …")]


def _entries(table: ast.Dict | ast.List | ast.Tuple | ast.Set) -> list[ast.expr]:
    """A literal table's entries: a dict's keys, a list's, tuple's or set's items."""
    return [k for k in table.keys if k is not None] if isinstance(table, ast.Dict) else list(table.elts)


def _entry_text(lines: Sequence[str], entry: ast.expr) -> str:
    """An entry of a table as written on the pristine ``lines`` (a dict's key with its value: ``"block_size":
    128``)."""
    line = lines[entry.lineno - 1] if entry.lineno else ""
    return _code_of(line).strip().rstrip(",") if entry.lineno == entry.end_lineno else ast.unparse(entry)


def _written(text: str, edit: _Edit) -> bool:
    """Whether the installed file still holds an entry's text as code (not commented out)."""
    return _squeeze(text) in _squeezed_source(edit.text)


def _table_walked(
    loop: ast.For, given: Mapping[str, ast.expr]
) -> ast.Dict | ast.List | ast.Tuple | ast.Set | None:
    """The literal table a ``for`` loop walks: itself, its ``.items()``/``.keys()``/``.values()``, or the
    literal a name was ``given``."""
    walked = loop.iter
    if isinstance(walked, ast.Call) and isinstance(walked.func, ast.Attribute) and not walked.args:
        walked = walked.func.value if walked.func.attr in ("items", "keys", "values") else walked
    table = given.get(walked.id) if isinstance(walked, ast.Name) else walked
    return table if isinstance(table, _TABLES) else None


_TABLES = (*_LITERALS, ast.Dict)


def _minimum_from_environment(edit: _Edit, r: Region) -> list[Finding]:
    """What a function that states a minimum returns (``return 89``) now read from the environment
    (``return int(os.environ.get("MIN_CAP", "89"))``): whoever sets the variable sets the bar."""
    returned = [v for old in r.removed if (v := _decision(_code_of(old)))[0] == "return"]
    if len(returned) != 1 or returned[0][1] is None or _number(returned[0][1]) is None:
        return []
    for n in r.lines:
        function = (edit.st.qualname_at(n) or "").rsplit(".", 1)[-1]
        line = edit.lines[n - 1]
        states = not {"min", "minimum"}.isdisjoint(_words(function))
        if states and line.lstrip().startswith("return") and reads_environment(line):
            was = ast.unparse(returned[0][1])
            detail = f"check neutralised: {function} states what the environment says now, not {was}"
            return [_check_finding(edit, RuleId.REMOVED_CHECK, n, detail)]
    return []


def _supported_grown(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """What a function that says what is supported or allowed returns, grown (``get_supported_head_sizes``:
    ``return [32, 64, …]`` given 48 and 576): the function is the check, what it left out passes now."""
    out: list[Finding] = []
    for r in regions:
        if not r.removed or not any(old.lstrip().startswith("return") for old in r.removed):
            continue
        if _ALLOWING.isdisjoint(_words((edit.st.qualname_at(r.start) or "").rsplit(".", 1)[-1])):
            continue  # (most functions do not say what is allowed: nothing parsed)
        was = [v for i in range(len(r.removed)) if (v := _returned_literal(_statement(r.removed, i)))]
        for n in r.lines if was else ():
            detail = _returns_more(edit, n, was[0])
            if detail:
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _returns_more(edit: _Edit, n: int, was: _Literal | ast.Dict) -> str:
    """How the literal list returned at line ``n`` by a function that says what is allowed holds more than
    ``was``, or ""."""
    now = _returned_literal(_statement(edit.lines, n - 1))
    function = (edit.st.qualname_at(n) or "").rsplit(".", 1)[-1]
    if now is None or _ALLOWING.isdisjoint(_words(function)):
        return ""
    if isinstance(was, ast.Dict) or isinstance(now, ast.Dict):
        more = _limits_grown(was, now) if isinstance(was, ast.Dict) and isinstance(now, ast.Dict) else ""
        return f"{function} allows more: {more}" if more else ""
    old = {ast.dump(e) for e in was.elts}
    if not old < {ast.dump(e) for e in now.elts}:
        return ""
    more = ", ".join(ast.unparse(e) for e in now.elts if ast.dump(e) not in old)[:60]
    return f"{function} allows more: {more}"


def _limits_grown(was: ast.Dict, now: ast.Dict) -> str:
    """How a table of what is allowed, each key to its limit (``{"image": 1}``), allows more now: a key
    added, a number raised, a number made ``None`` (no limit) — none lowered; or ""."""
    before = {ast.dump(k): v for k, v in zip(was.keys, was.values, strict=True) if k is not None}
    grown: list[str] = []
    for k, v in zip(now.keys, now.values, strict=True):
        old = before.pop(ast.dump(k), None) if k is not None else None
        if k is None or old is None:
            grown.append(ast.unparse(k) if k is not None else "**")
        elif _limit_raised(old, v):
            grown.append(f"{ast.unparse(k)}: {ast.unparse(old)} → {ast.unparse(v)}")
        elif ast.dump(old) != ast.dump(v):
            return ""  # a limit lowered or changed otherwise: not only more
    return ", ".join(grown)[:80] if grown and not before else ""


def _limit_raised(old: ast.expr, new: ast.expr) -> bool:
    """Whether a number was raised, or made ``None`` (no limit)."""
    a, b = _number(old), _number(new)
    unlimited = isinstance(new, ast.Constant) and new.value is None and a is not None
    return (a is not None and b is not None and b > a) or unlimited


# Words of a function whose answer is what is let through (``get_supported_dtypes``, ``allowed_backends``,
# ``supports_compute_capability``, ``can_implement``).
_ALLOWING = frozenset(
    {"supported", "supports", "allowed", "allows", "valid", "accepted", "compatible", "permitted", "can"}
    | {"admits", "admitted", "accepts", "fits", "eligible", "usable", "applicable"}
)


def _answers_admission(function: str) -> bool:
    """Whether a function says whether something may go ahead: named for what it allows
    (``supports_fp8``, ``fits``), or a predicate of what is ready or available (``is_*_ready``,
    ``is_trainable``, ``can_implement``)."""
    words = _words(function)
    asks = function.lstrip("_").startswith(_ASKING)
    return not _ALLOWING.isdisjoint(words) or (asks and bool(_READY & words))


# What a predicate asks when it says whether a path may be taken (``is_mega_moe_ready``, ``is_trainable``).
_READY = frozenset({"ready", "available", "trainable", "capable", "feasible"})


def _answer_widened(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """What a function that says whether something is supported or allowed answers, true in more cases
    (read by cases, :mod:`.cases`): ``return capability.major in [9, 10]`` → ``return capability.major >=
    9``, ``return n % 8 == 0`` → ``return n % 8 == 0 or n % 2 == 0`` — the function is the check."""
    out: list[Finding] = []
    for r in regions:
        function = (edit.st.qualname_at(r.start) or "").rsplit(".", 1)[-1]
        if not r.removed or not _answers_admission(function):
            continue  # (most functions do not say what is allowed: nothing parsed)
        was = [v for i in range(len(r.removed)) if (v := _returned_value(_statement(r.removed, i)))]
        for n in r.lines if len(was) == 1 else ():
            now = _returned_value(_statement(edit.lines, n - 1))
            if now is not None and _yes_more_often(was[0], now) and not _refuses_more_now(edit, n):
                detail = f"{_short(was[0])} → {_short(now)}: it answers yes in more cases"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _refuses_more_now(edit: _Edit, line: int) -> bool:
    """Whether the installed function around ``line`` raises in more places than the pristine one: it
    answers yes where it checked first (``validate(); return True`` for ``return False``)."""
    scope = edit.st.innermost(line)
    fn = edit.st.def_at(scope.start) if scope is not None else None
    before = locate(edit.before) if edit.before is not None else None
    if fn is None or scope is None or before is None:
        return False
    had = next((s for s in before.scopes if s.qualname == scope.qualname), None)
    was = before.def_at(had.start) if had is not None else None
    return _raises(fn) > (_raises(was) if was is not None else 0)


def _returned_value(statement: str) -> ast.expr | None:
    target, value = _decision(_code_of(statement))
    return value if target == "return" else None


def _yes_more_often(before: ast.expr, after: ast.expr) -> bool:
    """Whether an answer holds in more cases: read by cases, or the same answer given an ``or`` part
    (``return is_supported(…)`` → ``return is_supported(…) or hidden in (4096, 7168)``)."""
    widened = isinstance(after, ast.BoolOp) and isinstance(after.op, ast.Or)
    if widened and any(ast.dump(v) == ast.dump(before) for v in after.values):  # type: ignore[attr-defined]
        return True
    if isinstance(after, ast.Constant) and after.value is True:  # (``return False`` → ``return True``)
        return not (isinstance(before, ast.Constant) and before.value is True)
    if not isinstance(before, _TESTS) or not isinstance(after, _TESTS):
        return False
    found = compare(before, after)
    return found is not None and found.more


_TESTS = (ast.Compare, ast.BoolOp, ast.UnaryOp)


def _calls_loosened(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A call edited in place so that it lets more by: a literal list it is given grown where its name says
    it says what is supported or allowed (``@supported_compute_capability([89, 90])`` → ``([80, 86, 89,
    90])``), or a keyword that kept it safe dropped (``tl.store(p, x, mask=mask)`` → ``tl.store(p, x)``: a
    write with no bounds; ``load(f, strict=True)`` → ``load(f)``)."""
    out: list[Finding] = []
    for r in regions:
        if not r.removed or len(r.removed) != len(r.lines) or len(r.lines) > _TARGETED:
            continue  # (lines edited in place only)
        for i, (old, n) in enumerate(zip(r.removed, r.lines, strict=True)):
            new = edit.lines[n - 1]
            detail = _loosened(*_calls_at(old, new, edit, n)) if _may_loosen(old, new) else ""
            detail = detail or (_unsafe_now(edit, r.old_start + i, n) if _SAFE.search(old) else "")
            detail = detail or _error_answer_flipped(old, edit, n)
            if detail:
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _limits_moved(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A named limit given another number (``_MAX_ROWS = 2048`` → ``16384``) where the file compares with it
    in what a function that decides whether something is supported, allowed or to be used returns (``return
    … and 0 < rows <= _MAX_ROWS``) — read by cases with the old and the new number: the code is used where
    it was not. (A limit a check holds values to, raised, is :func:`_bounds_raised`'s.)"""
    out: list[Finding] = []
    for r in regions:
        if len(r.removed) != 1 or len(r.lines) != 1:
            continue  # (one constant given another value, in place)
        name, was = _named_number(r.removed[0])
        again, now = _named_number(edit.lines[r.lines[0] - 1])
        if not name or name != again or was is None or now is None or was == now:
            continue
        where = next((w for w in _comparisons_of(edit, name) if _lets_more(w, name, was, now)), None)
        if where is not None:
            detail = f"`{name}` {was.value!r} → {now.value!r}: `{_short(where[1])}` lets more by"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, r.lines[0], f"check neutralised: {detail}"))
    return out


# Words of a name that holds a bound: the most a check lets by (``MAX_RATIO``, ``max_prompts``, ``limit``), or
# the least (``min_tokens``).
_UPPER_WORDS = frozenset({"max", "maximum", "limit", "most", "upper"})
_LOWER_WORDS = frozenset({"min", "minimum", "least", "lower"})
_BOUND_WORDS = _UPPER_WORDS | _LOWER_WORDS


def _bounds_raised(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A bound moved to let more by, one assignment edited in place: a most made larger (``MAX_RATIO = 200``
    → ``2000``, ``max_prompts = envs.MAX_PROMPTS`` → ``envs.MAX_PROMPTS * 16``, ``limit = min(a, b)`` →
    ``max(min(a, b), 64)``), a least made smaller — read by cases (:mod:`.cases`): the values under the bound
    before are under it now, and more. Only where the file holds values to it (:func:`_held_to`): a limit
    raised is a check loosened."""
    out: list[Finding] = []
    for r in regions:
        if len(r.removed) != 1 or len(r.lines) != 1:
            continue  # (one assignment edited in place)
        n = r.lines[0]
        target, was = _assigned(r.removed[0])
        again, now = _assigned(edit.lines[n - 1])
        if not target or target != again or was is None or now is None:
            continue
        name = target.rsplit(".", 1)[-1]
        words = _words(name)
        upper, lower = not _UPPER_WORDS.isdisjoint(words), not _LOWER_WORDS.isdisjoint(words)
        if upper == lower or not _lets_more_under(was, now, upper):
            continue
        where = _held_to(edit, name, n, local="." not in target and edit.st.qualname_at(n) is not None)
        if where:
            detail = f"`{name}` {_short(was)} → {_short(now)}: {where} lets more by"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _declared_bounds_moved(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A range a call declares (``Field(min_length=1, max_length=1024)``, ``conint(ge=0, le=64)``: its other
    bound a number as written) with one of its bounds moved to let more by (``max_length=65536``), one
    keyword edited in place: a declared range is a check, what it refused passes now. A lone bound
    (``compile(max_threads=16)``) is a setting, and bounds worked out (``min_seqlen_q=1, max_seqlen_q=m``)
    are what a kernel is told."""
    out: list[Finding] = []
    for r in regions:
        if len(r.removed) != 1 or len(r.lines) != 1 or not _BOUND_KEYWORD.search(r.removed[0]):
            continue  # (one keyword that names a bound, edited in place)
        n = r.lines[0]
        old, new = _calls_at(r.removed[0], edit.lines[n - 1], edit, n)
        if old is None or new is None or len(old.keywords) != len(new.keywords):
            continue
        call = _call_holding(edit.st.tree, n) or new
        for was, now in zip(old.keywords, new.keywords, strict=True):
            detail = _bound_moved(was, now, call)
            if detail:
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _bound_moved(was: ast.keyword, now: ast.keyword, call: ast.Call | None) -> str:
    """How a keyword naming a bound lets more by, where ``call`` declares the other bound too; or ""."""
    side = _bound_side(was.arg)
    if side is None or call is None or was.arg != now.arg or ast.dump(was.value) == ast.dump(now.value):
        return ""
    if not any(_bound_side(k.arg) == (not side) and _a_number(k.value) for k in call.keywords):
        return ""  # (a lone bound: a setting, ``max_threads=16``; one worked out: what a kernel is told)
    if not _lets_more_under(was.value, now.value, side):
        return ""
    return f"`{was.arg}={_short(was.value)}` → `{_short(now.value)}`: the declared range lets more by"


# A keyword argument named for a bound, by the text (``max_length=``, ``min_tokens=``, ``le=``).
_BOUND_KEYWORD = re.compile(
    r"\b(?:\w*_)?(?:max|min|maximum|minimum|limit|most|least)(?:_\w*)?\s*=(?!=)|\b(?:le|lt|ge|gt)\s*=(?!=)",
    re.IGNORECASE,
)


def _a_number(value: ast.expr) -> bool:
    """A number written as one (``1024``, ``-1``, ``1e-6``)."""
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        value = value.operand
    number = value.value if isinstance(value, ast.Constant) else None
    return isinstance(number, (int, float)) and not isinstance(number, bool)


def _bound_side(keyword: str | None) -> bool | None:
    """``True`` for a keyword naming a most (``max_length``, ``le``, ``lt``), ``False`` for a least
    (``min_length``, ``ge``, ``gt``), else ``None``."""
    if keyword is None:
        return None
    if keyword in ("le", "lt") or not _UPPER_WORDS.isdisjoint(_words(keyword)):
        return True
    if keyword in ("ge", "gt") or not _LOWER_WORDS.isdisjoint(_words(keyword)):
        return False
    return None


def _call_holding(tree: ast.Module | None, n: int) -> ast.Call | None:
    """The innermost call one of whose keywords begins at line ``n``."""
    return _innermost_call(tree, lambda call: any(k.value.lineno == n for k in call.keywords))


def _innermost_call(tree: ast.Module | None, holds: Callable[[ast.Call], bool]) -> ast.Call | None:
    """The call of ``tree`` that ``holds`` and opens last (the innermost where such calls nest)."""
    found = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and holds(node):
            found = node if found is None or node.lineno >= found.lineno else found
    return found


def _disqualifiers_gone(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A test that turns a path off taken out: ``if is_contiguous and M * H > 2**31 - 1: is_contiguous =
    False`` deleted — what it disqualified (an input past a limit, a dtype) takes the path, which the code
    below still decides by the flag. Not when the same test stays in the file (moved)."""
    out: list[Finding] = []
    for r in regions:
        if r.lines or edit.st.tree is None:
            continue  # (lines deleted, nothing put in their place)
        for i in range(len(r.removed)):
            test = _condition(_one_line(_statement(r.removed, i)))
            if not isinstance(test, (ast.Compare, ast.BoolOp)):
                continue
            name = _turned_off(r.removed, i)
            if name and _read_in(edit.st.tree, name) and not _if_stays(edit, test):
                detail = f"`if {_short(test)}:` no longer turns `{name}` off: what it kept out goes through"
                line = max(r.start, 1)
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, line, f"check neutralised: {detail}"))
    return out


def _turned_off(lines: Sequence[str], i: int) -> str:
    """The name the block of the ``if`` at ``lines[i]`` only sets to ``False`` (``use_fast = False``); or
    ""."""
    body = _block_below(lines, i)
    m = _SET_FALSE.match(body[0]) if len(body) == 1 else None
    return m.group(1) if m else ""


_SET_FALSE = re.compile(r"^((?:self\.)?[A-Za-z_]\w*)\s*=\s*False$")


def _read_in(tree: ast.Module, name: str) -> bool:
    """Whether the file reads ``name`` (a test of it, a call handed it: ``contiguous=is_contiguous``)."""
    names = (n for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.Attribute)))
    return any(isinstance(n.ctx, ast.Load) and ast.unparse(n) == name for n in names)


def _if_stays(edit: _Edit, test: ast.expr) -> bool:
    """Whether the installed file has as many ``if`` statements of ``test`` as the pristine one (moved)."""
    before = locate(edit.before) if edit.before is not None else None
    return _ifs_of(edit.st.tree, test) >= _ifs_of(before.tree if before is not None else None, test)


def _ifs_of(tree: ast.Module | None, test: ast.expr) -> int:
    key = ast.dump(test)
    ifs = (n for n in ast.walk(tree) if isinstance(n, ast.If)) if tree is not None else iter(())
    return sum(ast.dump(n.test) == key for n in ifs)


def _refusals_retried(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A refusal made a retry: ``if state == "ERR": raise PostError(…)`` became ``while state == "ERR":
    time.sleep(…); state = post()`` — the failure is tried again until it passes, never raised (the raise
    gone is reported of its own)."""
    out: list[Finding] = []
    for r in regions:
        tests = [(_condition(_one_line(_statement(r.removed, i))), i) for i in range(len(r.removed))]
        refused = {ast.dump(test) for test, i in tests if test is not None and _raises_next(r.removed, i)}
        for n in r.lines if refused else ():
            loop = _while_at(edit.st.tree, n)
            if loop is not None and ast.dump(loop.test) in refused and _redoes(loop):
                why = f"`if {_short(loop.test)}:` raised; now it is tried again until it passes, never raised"
                out.append(_check_finding(edit, RuleId.SWALLOWED_EXCEPTION, n, why))
    return out


def _raises_next(lines: Sequence[str], i: int) -> bool:
    """Whether the block of the ``if`` at ``lines[i]`` (its next lines, deeper) raises."""
    return any(line.startswith("raise") for line in _block_below(lines, i))


def _block_below(lines: Sequence[str], i: int) -> list[str]:
    """The lines, stripped, of the block under the header at ``lines[i]``, by the text: those that follow it
    indented deeper (blank lines skipped)."""
    indent = len(lines[i]) - len(lines[i].lstrip())
    out: list[str] = []
    for line in lines[i + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        if line.strip():
            out.append(line.strip())
    return out


def _while_at(tree: ast.Module | None, line: int) -> ast.While | None:
    """The ``while`` whose header is at ``line``."""
    found = _header_at(tree, line, ast.While)
    return found if isinstance(found, ast.While) else None


def _redoes(loop: ast.While) -> bool:
    """Whether a loop's body gives again a name its test reads (``state = post()``): it tries again."""
    read = {n.id for n in ast.walk(loop.test) if isinstance(n, ast.Name)}
    assigned = [s for s in ast.walk(loop) if isinstance(s, ast.Assign)]
    given = {t.id for s in assigned for t in s.targets if isinstance(t, ast.Name)}
    return bool(read & given)


def _refusals_preempted(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """An answer typed in just above the refusal a block ends on (``if binary.major == device.major: return
    (0, binary.minor)`` above the last ``return None``; above a ``return False``, a ``raise``): the cases it
    answers were refused, and are let by now."""
    out: list[Finding] = []
    tree = edit.st.tree
    for r in regions:
        if r.removed or not r.lines or tree is None or not _an_if_that_returns(edit.lines, r):
            continue  # (lines added, nothing taken away: an ``if`` whose last line returns, by the text)
        added = _if_at(tree, r.start)
        below = _refusal_answered(tree, added) if added is not None and added.end_lineno == r.end else None
        if added is not None and below is not None:
            detail = f"`if {_short(added.test)}:` answers before `{ast.unparse(below)[:40]}`: it refuses less"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, r.start, f"check neutralised: {detail}"))
    return out


def _refusal_answered(tree: ast.Module, added: ast.If) -> ast.stmt | None:
    """The refusal its block ends on, just below an ``if`` whose body ends by answering (not refusing), or
    ``None`` — nor for a message above a validator's ``return None``, which passes (a refusal added)."""
    answer = added.body[-1]
    if added.orelse or not isinstance(answer, ast.Return) or _refuses(answer):
        return None
    below = _next_statement(tree, added)
    if below is None or not _refuses(below) or _next_statement(tree, below) is not None:
        return None
    return None if _a_message(answer.value) and isinstance(below, ast.Return) else below


def _an_if_that_returns(lines: Sequence[str], r: Region) -> bool:
    first, last = lines[r.start - 1].lstrip(), lines[r.end - 1].lstrip()
    return first.startswith("if ") and last.startswith("return")


def _a_message(value: ast.expr | None) -> bool:
    """A string or an f-string: what a validator answers when it refuses."""
    if isinstance(value, ast.JoinedStr):
        return True
    return isinstance(value, ast.Constant) and isinstance(value.value, str)


def _refuses(stmt: ast.stmt) -> bool:
    """``return None``, ``return False``, ``return`` or a ``raise``: a refusal."""
    if isinstance(stmt, ast.Raise):
        return True
    if not isinstance(stmt, ast.Return):
        return False
    value = stmt.value
    return value is None or (isinstance(value, ast.Constant) and value.value in (None, False))


def _next_statement(tree: ast.Module, stmt: ast.stmt) -> ast.stmt | None:
    """The statement after ``stmt`` in its block, or ``None``."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and stmt in block:
                i = block.index(stmt)
                return block[i + 1] if i + 1 < len(block) else None
    return None


def _assigned(line: str) -> tuple[str, ast.expr | None]:
    """(target, value) of a line that assigns one value (``x = v``, ``self.x: int = v``); ("", None) else."""
    try:
        tree = ast.parse(_code_of(line).strip())
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "", None
    stmt = tree.body[0] if len(tree.body) == 1 else None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        return ast.unparse(stmt.targets[0]), stmt.value
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        return ast.unparse(stmt.target), stmt.value
    return "", None


def _lets_more_under(was: ast.expr, now: ast.expr, upper: bool) -> bool:
    """Whether a bound ``was`` → ``now`` lets more values by (``q <= was`` → ``q <= now`` holds in more cases
    and in no fewer; ``>=`` for a least)."""
    op: ast.cmpop = ast.LtE() if upper else ast.GtE()
    q = ast.Name("_bounded_value_")
    parts: dict[str, ast.Name] = {}  # (what the two read alike, each one number: ``int(os.environ[…])``)
    was, now = _as_quantity(was, parts), _as_quantity(now, parts)
    found = compare(ast.Compare(q, [op], [was]), ast.Compare(q, [op], [now]))
    return found is not None and found.more and not found.fewer


def _as_quantity(value: ast.expr, parts: dict[str, ast.Name]) -> ast.expr:
    """A copy of ``value`` with each call (but ``min``, ``max``, ``abs``), item and attribute read as one
    number of its own, the same wherever it is written alike (``parts``)."""

    class _Parts(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            if isinstance(node.func, ast.Name) and node.func.id in ("min", "max", "abs"):
                return self.generic_visit(node)
            return self._part(node)

        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            return self._part(node)

        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            return self._part(node)

        def _part(self, node: ast.expr) -> ast.Name:
            return parts.setdefault(ast.dump(node), ast.Name(f"_part{len(parts)}_"))

    return _Parts().visit(copy.deepcopy(value))  # type: ignore[no-any-return]


def _held_to(edit: _Edit, name: str, n: int, local: bool) -> str:
    """Where the file holds values to the bound ``name`` (in the function of line ``n`` when it is a
    ``local``): a test of an ``if``, ``while`` or ``assert`` that compares with it — or with a name it bounds
    (``BLOCK_N = min(MAX_FUSED_SIZE, …)`` over ``if group_size > BLOCK_N: raise``) —, an answer returned
    that does (``return num_tokens <= _MAX_TOKENS and …``), or a call handed it as a bound
    (``max_duration_s=self.max_duration_s``); "" when none does."""
    scope: ast.AST | None = edit.st.tree
    if local and scope is not None:
        scope = next((f for f in _functions(scope) if f.lineno <= n <= (f.end_lineno or f.lineno)), None)
    if scope is None:
        return ""
    names = _bounded_by(scope, name)
    return next((where for node in ast.walk(scope) if (where := _holds_to(node, name, names))), "")


def _holds_to(node: ast.AST, name: str, names: set[str]) -> str:
    """How one node holds values to the bound ``name`` (or to a name it bounds, ``names``), or ""."""
    if isinstance(node, (ast.If, ast.While, ast.Assert)) and _compares_with(node.test, names):
        return f"`{_short(node.test)}`"
    answer = node.value if isinstance(node, ast.Return) else None  # ``return n <= _MAX_TOKENS and …``
    if isinstance(answer, (ast.Compare, ast.BoolOp)) and _compares_with(answer, names):
        return f"the answer `{_short(answer)}`"
    if isinstance(node, ast.keyword) and _bounding(node.arg) and _reads_name(node.value, name):
        return f"`{node.arg}=`"
    return ""


def _bounded_by(scope: ast.AST, name: str) -> set[str]:
    """``name`` and the names of ``scope`` given a value worked out of it (``block = min(name, 1024)``)."""
    names = {name}
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and _reads_name(node.value, name):
            names.add(_last_name(node.targets[0]))
    return names


def _bounding(keyword: str | None) -> bool:
    """Whether a call's keyword is named for a bound (``max_duration_s=``, ``min_tokens=``)."""
    return keyword is not None and not _BOUND_WORDS.isdisjoint(_words(keyword))


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions of ``tree``, innermost first where they nest."""
    found = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return iter(sorted(found, key=lambda f: (f.end_lineno or f.lineno) - f.lineno))


def _reads_name(node: ast.AST, name: str) -> bool:
    """Whether ``node`` reads ``name`` (a name, or an attribute of that name)."""
    return any(
        (isinstance(x, ast.Name) and x.id == name) or (isinstance(x, ast.Attribute) and x.attr == name)
        for x in ast.walk(node)
    )


def _compares_with(test: ast.expr, names: set[str]) -> bool:
    """Whether ``test`` orders something against one of ``names`` (``<``, ``<=``, ``>``, ``>=``)."""
    return any(
        isinstance(c, ast.Compare)
        and any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in c.ops)
        and any(_reads_name(side, name) for side in (c.left, *c.comparators) for name in names)
        for c in ast.walk(test)
    )


def _named_number(line: str) -> tuple[str, ast.Constant | None]:
    """(``NAME``, its number) of ``NAME = 2048`` (a name in capitals: a limit); ("", None) else."""
    target, value = _decision(_code_of(line))
    name = target.rsplit(".", 1)[-1]
    if not name or name == "return" or name.upper() != name or not isinstance(value, ast.Constant):
        return "", None
    number = value.value
    return (name, value) if isinstance(number, (int, float)) and not isinstance(number, bool) else ("", None)


def _comparisons_of(edit: _Edit, name: str) -> Iterator[tuple[bool, ast.expr]]:
    """(whether it refuses: never, here, the condition) for each condition of the file that compares with
    ``name`` in what a deciding function returns."""
    for node in ast.walk(edit.st.tree) if edit.st.tree is not None else ():
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        compares = any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value))
        if compares and _DECIDING & _words(_function_at(edit, node.lineno)):
            yield False, node.value


# Words of a function whose answer decides whether something may be done (``should_use_mega_gate``).
_DECIDING = _ALLOWING | {"should", "use", "enable", "eligible"}
# Words of a collection named for what is refused: ``_UNSUPPORTED_KEYWORDS``, ``DENYLIST``, ``BLOCKED_OPS``.
_REFUSED_WORDS = frozenset(
    {"unsupported", "disallowed", "forbidden", "banned", "blocked", "blocklist", "denied", "deny", "denylist"}
    | {"blacklist", "rejected", "refused", "incompatible", "unallowed", "prohibited"}
)


def _lets_more(where: tuple[bool, ast.expr], name: str, was: ast.Constant, now: ast.Constant) -> bool:
    refuses, test = where
    old, new = _with_number(test, name, was), _with_number(test, name, now)
    found = compare(old, new)
    return found is not None and (found.fewer if refuses else found.more)


def _with_number(test: ast.expr, name: str, number: ast.Constant) -> ast.expr:
    """A copy of ``test`` with every ``name`` read as ``number``."""

    class _Put(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return ast.Constant(number.value) if node.id == name else node

    return _Put().visit(copy.deepcopy(test))  # type: ignore[no-any-return]


def _may_loosen(old: str, new: str) -> bool:
    """Whether, by the text, a call line edited in place may have lost a keyword or grown a list."""
    if "(" not in old and "=" not in old:
        return False  # (a call, or a line of a call's arguments: ``a, b, strict=True``)
    lost = set(_KEYWORD.findall(old)) - set(_KEYWORD.findall(new))
    return bool(lost) or ("[" in old and not _ALLOWING.isdisjoint(re.findall(r"[a-z]+", old.lower())))


_KEYWORD = re.compile(r"(\w+)\s*=(?!=)")


def _error_answer_flipped(old: str, edit: _Edit, n: int) -> str:
    """In an ``except`` block, the answer the error path gives flipped from no to yes (``ok = False`` →
    ``ok = True``, ``return False`` → ``return True``): when the check cannot be made, it now passes."""
    flips = _code_of(old).rstrip().endswith("False") and _code_of(edit.lines[n - 1]).rstrip().endswith("True")
    if not flips:
        return ""  # (the text says first)
    was, now = _decision(_code_of(old)), _decision(_code_of(edit.lines[n - 1]))
    if was[0] != now[0] or not was[0] or not _handlers_around(edit.st, n):
        return ""
    if not (_is_constant(was[1], False) and _is_constant(now[1], True)):
        return ""
    what = "it returns" if was[0] == "return" else f"`{was[0]}` is"
    return f"on an error {what} True now, where it was False"


def _is_constant(value: ast.expr | None, wanted: bool) -> bool:
    return isinstance(value, ast.Constant) and value.value is wanted


def _call_of(line: str) -> ast.Call | None:
    """The call a line of one statement (a decorator's too) makes, outermost, or ``None``."""
    text = _code_of(line).strip().removeprefix("@")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    stmt = tree.body[0] if len(tree.body) == 1 else None
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign, ast.Return)) else None
    return value if isinstance(value, ast.Call) else None


def _calls_at(old: str, new: str, edit: _Edit, n: int) -> tuple[ast.Call | None, ast.Call | None]:
    """The calls two versions of line ``n`` make — or, the line one keyword argument of a call open over
    several lines (:func:`_open_call_above`), that keyword as a call of its own."""
    if _open_call_above(edit.lines, n):
        around = _call_spanning(edit.st.tree, n)
        func = around.func if around is not None else None
        olds, news = _code_of(old).strip(), _code_of(new).strip()
        if around is None:  # a line of a signature: ``level: Annotated[int, Query(ge=0, le=2)] = 1,``
            return _parameter_or_arguments(olds), _parameter_or_arguments(news)
        return _arguments_alone(olds, func), _arguments_alone(news, func)
    return _call_of(old), _call_of(new)


def _parameter_or_arguments(line: str) -> ast.Call | None:
    return _parameter_call(line) or _arguments_alone(line)


def _parameter_call(line: str) -> ast.Call | None:
    """The one call a line of a def's parameters makes, in an annotation or a default; else ``None``."""
    try:
        tree = ast.parse(f"def _({line.rstrip(',')}): pass")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call)]
    return calls[0] if len(calls) == 1 else None


def _call_spanning(tree: ast.Module | None, n: int) -> ast.Call | None:
    """The innermost call opened above line ``n`` whose arguments run over it."""
    return _innermost_call(tree, lambda call: call.lineno < n <= (call.end_lineno or call.lineno))


def _open_call_above(lines: Sequence[str], n: int) -> bool:
    """Whether line ``n`` stands inside a call's parentheses opened on a line above it (by brackets)."""
    k = _opener_above(lines, n)
    return k is not None and _code_of(lines[k - 1]).rstrip().endswith(("(", ","))


def _arguments_alone(text: str, func: ast.expr | None = None) -> ast.Call | None:
    """A line of arguments of a call over several lines (``supported_major_versions=[9, 10],``, ``a, b,
    strict=True``), read as a call of them alone (``zip(a, b, strict=True)``: of ``func``, the call they
    belong to, when it is known); else ``None``."""
    try:
        value = ast.parse(f"_({text.rstrip().rstrip(',')})", mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(value, ast.Call):
        return None
    if func is not None:
        value.func = func
    return value


def _loosened(old: ast.Call | None, new: ast.Call | None) -> str:
    """How ``new``, the same call as ``old`` otherwise, lets more by; "" when it does not."""
    if old is None or new is None or ast.dump(old.func) != ast.dump(new.func):
        return ""
    return _keyword_dropped(old, new) or _list_grown(old, new)


def _safe_variant_dropped(old: ast.Call | None, new: ast.Call | None) -> str:
    """A call of the safe variant of something (``ImmutableSandboxedEnvironment(…)``, ``yaml.safe_load(s)``,
    ``SecureLoader``) replaced by one of a name without the safety (``jinja2.Environment(…)``,
    ``yaml.load(s)``), given the same arguments: what the variant kept out is let in."""
    if old is None or new is None or ast.dump(old.func) == ast.dump(new.func):
        return ""
    if [ast.dump(a) for a in old.args] != [ast.dump(a) for a in new.args]:
        return ""
    was, now = _call_words(old.func), _call_words(new.func)
    safety = was & _SAFETY_WORDS
    if not safety or not now.isdisjoint(_SAFETY_WORDS) or not now & (was - _SAFETY_WORDS):
        return ""
    return (
        f"`{ast.unparse(old.func)}` became `{ast.unparse(new.func)}`: the {sorted(safety)[0]} variant is gone"
    )


def _unsafe_now(edit: _Edit, old_line: int, n: int) -> str:
    """:func:`_safe_variant_dropped` of the statements that begin at pristine ``old_line`` and installed line
    ``n`` (a call over several lines read whole)."""
    if edit.before is None:
        return ""
    old = _one_line(_statement(split_lines(edit.before), old_line - 1))
    return _safe_variant_dropped(_call_of(old), _call_of(_one_line(_statement(edit.lines, n - 1))))


def _call_words(func: ast.expr) -> set[str]:
    """The words of a callee's last name, snake_case and CamelCase split (``ImmutableSandboxedEnvironment``
    → immutable, sandboxed, environment)."""
    name = _last_name(func)
    return {
        w.lower() for part in name.split("_") for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", part)
    }


# What a safe variant of a call is named for: a sandbox, safety, a restricted or secure mode.
_SAFETY_WORDS = frozenset({"sandboxed", "sandbox", "safe", "secure", "restricted"})
_SAFE = re.compile(r"(?i)sandbox|safe|secure|restricted")


def _keyword_dropped(old: ast.Call, new: ast.Call) -> str:
    """A keyword that kept the call safe (:func:`_guarding`), the only difference, dropped."""
    dropped = {k.arg for k in old.keywords} - {k.arg for k in new.keywords}
    kept = [ast.dump(k) for k in old.keywords if k.arg not in dropped]
    if not dropped or kept != [ast.dump(k) for k in new.keywords]:
        return ""
    guarding = [k.arg for k in old.keywords if k.arg in dropped and _guarding(k)]
    if not guarding:
        return ""
    return f"`{_last_name(old.func)}` no longer given `{guarding[0]}=`: what it kept safe is not"


def _list_grown(old: ast.Call, new: ast.Call) -> str:
    """The one literal list, tuple or set argument of a call named for what is supported or allowed — or
    handed as a keyword so named (``get_nvcc_flags_list(supported_major_versions=[9, 10])``) — given more
    items."""
    pairs = _arguments_changed(old, new)
    if len(pairs) != 1 or not (isinstance(pairs[0][1], _LITERALS) and isinstance(pairs[0][2], _LITERALS)):
        return ""
    what, before, after = pairs[0]
    was = {ast.dump(e) for e in before.elts}  # type: ignore[attr-defined]
    more = [ast.unparse(e) for e in after.elts if ast.dump(e) not in was]  # type: ignore[attr-defined]
    grown = bool(more) and was < {ast.dump(e) for e in after.elts}  # type: ignore[attr-defined]
    return f"`{what}` allows more: {', '.join(more)[:60]}" if grown else ""


def _arguments_changed(old: ast.Call, new: ast.Call) -> list[tuple[str, ast.expr, ast.expr]]:
    """(what names it, before, after) of each argument that differs between two calls of the same shape
    — its arguments when the call is named for what it allows, its keywords when they are."""
    name = _last_name(old.func)
    allowing = not _ALLOWING.isdisjoint(_words(name.lower()))
    if len(old.args) != len(new.args) or [k.arg for k in old.keywords] != [k.arg for k in new.keywords]:
        return []
    pairs = [(name, a, b) for a, b in zip(old.args, new.args, strict=True) if allowing]
    pairs += [
        (k.arg, k.value, n.value)
        for k, n in zip(old.keywords, new.keywords, strict=True)
        if k.arg and (allowing or not _ALLOWING.isdisjoint(_words(k.arg.lower())))
    ]
    return [(what, a, b) for what, a, b in pairs if ast.dump(a) != ast.dump(b)]


def _guarding(keyword: ast.keyword) -> bool:
    """A keyword that keeps a call safe: the ``mask`` of a masked load or store (its bounds), or a checking
    flag given ``True`` (``strict=True``, ``weights_only=True``): dropped, the call does without."""
    if keyword.arg is None:
        return False
    on = isinstance(keyword.value, ast.Constant) and keyword.value.value is True
    return keyword.arg == "mask" or (on and _turns_off(keyword.arg, False))


def _returned_test(statement: str) -> ast.expr | None:
    """The condition a ``return`` hands back (a comparison, ``and``/``or``, ``not``), or ``None``."""
    target, value = _decision(_code_of(statement))
    return value if target == "return" and isinstance(value, (ast.Compare, ast.BoolOp, ast.UnaryOp)) else None


def _returned_literal(statement: str) -> ast.List | ast.Tuple | ast.Set | ast.Dict | None:
    target, value = _decision(_code_of(statement))
    return value if target == "return" and isinstance(value, _TABLES) else None


def _asks_minimum(name: str) -> bool:
    """Whether a call named ``name`` asks if a minimum is met: a predicate (``has_device_capability``,
    ``meets_min_version``) or an ``is_`` one that says so (``is_triton_available``, ``is_sm_at_least``),
    or ``version_at_least`` — not ``min``/``max`` themselves, nor ``is_device_capability`` (an equality)."""
    words = name.lower().strip("_").split("_")
    if words[0] in ("has", "supports", "meets", "satisfies"):
        return True
    asked = {"least", "minimum", "min"}
    return (len(words) > 1 and not asked.isdisjoint(words)) or (words[0] == "is" and "available" in words)


def _words(name: str) -> set[str]:
    return {w for w in name.lower().split("_") if w}


def _one_literal_changed(old: str, new: str) -> tuple[str, str, str | None] | None:
    """(the literal before, after, the name of the call it is an argument of — ``None`` for the value of a
    ``return``) when one number or string is all that differs between two lines of code; else ``None``."""
    if _LITERAL.sub("#", _code_of(old)).split() != _LITERAL.sub("#", _code_of(new)).split():
        return None  # (most changed lines differ in more than a literal: not tokenized)
    a, b = _tokens(old), _tokens(new)
    if a is None or b is None or len(a) != len(b):
        return None
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    if len(diff) != 1:
        return None
    i = diff[0]
    (kind_a, before), (kind_b, after) = a[i], b[i]
    if kind_a != kind_b or kind_a not in (tokenize.NUMBER, tokenize.STRING):
        return None
    if i == 1 and a[0] == (tokenize.NAME, "return"):
        return before, after, None
    called = _call_around(a, i)
    return (before, after, called) if called else None


def _call_around(tokens: Sequence[tuple[int, str]], i: int) -> str:
    """The name of the call whose brackets hold token ``i`` (a tuple it is part of, ``f((7, 5))``, seen
    through); "" when it is in no call's."""
    depth = 0
    for k in range(i - 1, 0, -1):  # back to the bracket the literal sits in: the call's name before it
        depth += {")": 1, "(": -1}.get(tokens[k][1], 0)
        if depth < 0 and tokens[k - 1][0] == tokenize.NAME:
            return tokens[k - 1][1]
        if depth < 0 and tokens[k - 1][1] not in ("(", ","):
            return ""
        depth = max(depth, 0)
    return ""


# A number or a one-line string: what is blanked out to see whether two lines differ in literals alone.
_LITERAL = re.compile(r"""\b\d[\w.]*|(["'])(?:\\.|(?!\1).)*\1""")


def _tokens(line: str) -> list[tuple[int, str]] | None:
    """The significant tokens of one line of code (comments and layout aside), or ``None``."""
    out: list[tuple[int, str]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line.strip()).readline):
            if tok.type in (tokenize.NAME, tokenize.NUMBER, tokenize.STRING, tokenize.OP):
                out.append((tok.type, tok.string))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # (a line of a statement open over several lines: what it holds so far)
    return out or None


def _lower(after: str, before: str) -> bool:
    """Whether literal ``after`` asks for less than ``before``: numbers by value, strings as versions."""
    from packaging.version import InvalidVersion, Version

    try:
        new, old = ast.literal_eval(after), ast.literal_eval(before)
        if isinstance(new, str) and isinstance(old, str):
            return Version(new) < Version(old)
        numbers = (int, float)
        return isinstance(new, numbers) and isinstance(old, numbers) and new < old
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, InvalidVersion):
        return False


def _bounded(value: ast.expr | None) -> ast.expr | None:
    """``x`` of ``max(2, x)``/``min(x, 8)`` (a bound by a number), else ``None``."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and len(value.args) == 2):
        return None
    if value.func.id not in ("max", "min") or value.keywords:
        return None
    numbers = [a for a in value.args if _number(a) is not None]
    rest = [a for a in value.args if _number(a) is None]
    return rest[0] if len(numbers) == 1 and len(rest) == 1 else None


def _flags_turned_off(regions: Sequence[Region], edit: _Edit) -> list[Finding]:
    """A flag that makes a call — or the code — check, turned the other way on the same line: a keyword
    (``raise_exception=True`` → ``False``, ``strict=True`` → ``False``, ``skip_validation=False`` →
    ``True``) or a name (``_DEBUG_ASSERT = envs.IN_CI.get()`` → ``False``): off, whatever it said before."""
    out: list[Finding] = []
    for r in regions:
        # what each name was given: True, False, or another value ("?": from the environment, a setting)
        was = {
            k: ("?" if v.strip() not in ("True", "False") else v.strip())
            for old in r.removed
            for k, v in _GIVEN.findall(_unquoted(_code_of(old)))
        }
        out += _flags_overridden(r, edit) if not r.removed else _values_forced(r, edit)
        out += _flags_defaulted(r, edit)
        called = len(r.removed) == len(r.lines) and any("(" in old for old in r.removed)  # a call edited
        if not was and not called:
            continue
        for n in r.lines:
            for name, value in _flags_given(_unquoted(_code_of(edit.lines[n - 1])), was, called):
                detail = f"`{name}` is {value} now: the check it asked for is off"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _flags_given(code: str, was: Mapping[str, str], called: bool) -> Iterator[tuple[str, str]]:
    """The flags of a line of ``code`` that turn a check off: given the other way than ``was``, or given now
    to a call that was not told (``np.load(f)`` → ``np.load(f, allow_pickle=True)``: the default kept it
    safe)."""
    for name, value in _FLAG.findall(code):
        given = was.get(name, value) != value or (called and name not in was and _in_call(name, code))
        if given and _turns_off(name, value == "True"):
            yield name, value


def _in_call(keyword: str, code: str) -> bool:
    return re.search(rf"[(,]\s*{re.escape(keyword)}\s*=(?!=)", code) is not None


def _flags_overridden(r: Region, edit: _Edit) -> list[Finding]:
    """A line put in that gives a flag of the pristine code a constant turning its check off
    (``trust_remote_code = True`` below the code that worked it out, ``self.strict = False``)."""
    out: list[Finding] = []
    for n in r.lines:
        forced = _OVERRIDE.match(_code_of(edit.lines[n - 1]))
        if forced is None or edit.before is None:
            continue
        name, value = forced.group(1), forced.group(2)
        bare = name.rsplit(".", 1)[-1]
        if _flag_turned_off(bare, value == "True") and re.search(rf"\b{re.escape(bare)}\b", edit.before):
            detail = f"`{name}` is forced to {value}: the check it asked for is off"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
        elif value == "True" and _ALLOWING & _words(bare) and _worked_out_above(edit.lines, n, name):
            detail = f"`{name}` is forced to True below the code that worked out whether it holds"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
        elif _tested_next(edit.lines, n, name):
            detail = f"`{name}` is set to {value} just above the `if` that tests it: it no longer decides"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _values_forced(r: Region, edit: _Edit) -> list[Finding]:
    """A value the code worked out replaced by a constant just above the ``if`` that tests it (``available
    = _host_memory()`` → ``available = None`` over ``if available is not None:`` and the cap under it): the
    test no longer decides."""
    out: list[Finding] = []
    for n in r.lines:
        forced = _FORCED.match(_code_of(edit.lines[n - 1]))
        if forced is None:
            continue
        name, value = forced.group(1), forced.group(2)
        given = re.compile(rf"^\s*{re.escape(name)}\s*=(?!=)\s*(.+)$")
        was = [m.group(1).strip() for old in r.removed if (m := given.match(_code_of(old)))]
        if was and was[0] not in ("True", "False", "None") and _tested_next(edit.lines, n, name):
            detail = (
                f"`{name}` is given {value} in place of `{was[0][:40]}` just above the `if` that tests it"
            )
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


# ``name = <constant>`` / ``self.name = <constant>`` on a line of its own (the constants given as the group).
_GIVEN_CONSTANT = r"^\s*((?:self\.)?[A-Za-z_]\w*)\s*=\s*({})\s*$"
_FORCED = re.compile(_GIVEN_CONSTANT.format("True|False|None"))


def _tested_next(lines: Sequence[str], n: int, name: str) -> bool:
    """Whether the statement after line ``n`` (at its indentation) is an ``if`` whose whole test is ``name``
    or ``not name`` (``self._warm = True`` above ``if not self._warm:``), or asks whether it is ``None``."""
    indent = len(lines[n - 1]) - len(lines[n - 1].lstrip())
    for line in lines[n:]:
        text = _code_of(line).strip()
        if not text:
            continue
        if len(line) - len(line.lstrip()) != indent:
            return False
        return text in (f"if {name}:", f"if not {name}:", f"if {name} is None:", f"if {name} is not None:")
    return False


def _worked_out_above(lines: Sequence[str], n: int, name: str) -> bool:
    """Whether a line above line ``n``, in the same block or an outer one, gives ``name`` a value that is
    not a constant (``round_robin_supported = (groups > 1 and …)``): the answer worked out, then forced."""
    indent = len(lines[n - 1]) - len(lines[n - 1].lstrip())
    given = re.compile(rf"^\s*{re.escape(name)}\s*(?::[^=]+)?=(?!=)\s*(.*)$")
    for k in range(n - 1, max(n - 60, 0), -1):
        line = lines[k - 1]
        width = len(line) - len(line.lstrip())
        if line.strip() and width < indent and line.lstrip().startswith(("def ", "async def ", "class ")):
            return False  # the def it is in begins: nothing above it counts
        found = given.match(line)
        if found and width <= indent:
            return found.group(1).strip() not in ("True", "False", "None", "")
    return False


def _flag_turned_off(name: str, value: bool) -> bool:
    """Whether a flag named ``name`` (its whole snake-case words: not ``gradient_checkpointing``, not a state
    such as ``verified``) given ``value`` turns a check off."""
    words = set(name.lower().strip("_").split("_"))
    if not words.isdisjoint(LENIENT_FLAG_NAME_WORDS):
        return value
    return not value and not words.isdisjoint(CHECKING_FLAG_NAME_WORDS)


_OVERRIDE = re.compile(_GIVEN_CONSTANT.format("True|False"))


def _flags_defaulted(r: Region, edit: _Edit) -> list[Finding]:
    """A flag that turns a check off made to default that way when nobody says otherwise (``"trust_remote_
    code": trust_remote_code`` → ``True if trust_remote_code is None else trust_remote_code``)."""
    had = {m.group(2) for old in r.removed if (m := _DEFAULTED.search(_code_of(old)))}
    out: list[Finding] = []
    for n in r.lines:
        m = _DEFAULTED.search(_code_of(edit.lines[n - 1]))
        if m is not None and m.group(2) not in had and _turns_off(m.group(2), m.group(3) == "True"):
            detail = (
                f"`{m.group(2)}` is {m.group(3)} unless someone says otherwise: the check it asked for is off"
            )
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


# ``name=True if name is None else name`` / ``"name": True if … is None else …``: a flag given a default.
_DEFAULTED = re.compile(
    r"""(?<!\w)(["']?)([A-Za-z_]\w*)\1\s*[:=]\s*(True|False)\s+if\s+[\w.]+\s+is\s+None\s+else\s+[\w.]+"""
)


def _turns_off(name: str, value: bool) -> bool:
    low = name.lower()
    if any(word in low for word in LENIENT_FLAG_WORDS):
        return value
    return not value and any(word in low for word in CHECKING_FLAG_WORDS)


def _negation(value: ast.expr | None) -> bool:
    return isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)


def _decision(text: str) -> tuple[str, ast.expr | None]:
    """A statement that hands on a value — ``return X`` (target ``return``), ``name = X`` or a keyword
    argument on a line of its own (``name=X,``) — as (its target, ``X``); ("", None) for anything else."""
    try:
        tree = ast.parse(text.strip())
    except (SyntaxError, ValueError, RecursionError):
        return "", None
    if len(tree.body) != 1:
        return "", None
    stmt = tree.body[0]
    if isinstance(stmt, ast.Return) and stmt.value is not None:
        return "return", stmt.value
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        value = stmt.value
        if isinstance(value, ast.Tuple) and len(value.elts) == 1 and text.rstrip().endswith(","):
            value = value.elts[0]  # a keyword argument on a line of its own: ``use_fma=major >= 10,``
        return ast.unparse(stmt.targets[0]), value
    return "", None


def _condition(line: str) -> ast.expr | None:
    """The test of an ``if``/``elif`` line (``None`` for any other line)."""
    text = line.strip()
    for word in ("if ", "elif "):
        if text.startswith(word) and text.endswith(":"):
            try:
                return ast.parse(text[len(word) : -1].strip(), mode="eval").body
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
    return None


def _guards_raise(tree: ast.Module | None, line: int, function: str = "") -> bool:
    """Whether the ``if`` at ``line`` refuses what its condition names: its body raises or asserts, warns
    (``logger.warning``, ``warnings.warn``), hands back an error message (``return error_msg``, ``return f"…
    exceeds …"``), aborts or fails the case (``req.set_finish_with_abort(msg)``, ``failed.add(i)``), or —
    in a function that says whether something is supported, allowed or to be used (``function``) — answers
    no: a validator that reports instead of raising is a check as much."""
    node = _if_at(tree, line)
    if node is None:
        return False
    says_no = not _DECIDING.isdisjoint(_words(function)) and any(map(_answers_no, node.body))
    refuses = any(map(_refusal, _own_statements(node.body)))
    return _guards_raise_node(node) or refuses or _sanitizes(node) or says_no


def _answers_no(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Constant) and stmt.value.value is False


def _function_at(edit: _Edit, line: int) -> str:
    return (edit.st.qualname_at(line) or "").rsplit(".", 1)[-1]


def _passes_a_refusal(tree: ast.Module | None, line: int) -> bool:
    """Whether the ``if`` at ``line`` lets a case by a refusal: its body leaves (``continue``, ``return``,
    ``break``) refusing nothing, and a later statement of the same block refuses (raises, asserts, warns)
    — ``if declared == wanted: continue`` before the ``raise`` of a mismatch."""
    around = list(_nodes_at(tree, {line}))  # outermost first: the ``if``'s block is its parent's
    at = next((k for k, n in enumerate(around) if isinstance(n, ast.If) and n.lineno == line), None)
    if at is None or tree is None:
        return False
    node = around[at]
    assert isinstance(node, ast.If)
    last = node.body[-1]
    if not isinstance(last, _EXIT_NODES) or _refusal(last) or _guards_raise_node(node):
        return False
    later = _after_in_block(around[at - 1] if at else tree, node)
    return any(isinstance(s, (ast.Raise, ast.Assert)) or _refusal(s) for s in _own_statements(later))


def _after_in_block(parent: ast.AST, node: ast.stmt) -> list[ast.stmt]:
    """The statements after ``node`` in the block of ``parent`` that holds it."""
    blocks = [getattr(parent, f, None) for f in ("body", "orelse", "finalbody")]
    blocks += [h.body for h in getattr(parent, "handlers", [])]
    block = next((b for b in blocks if isinstance(b, list) and node in b), [])
    return block[block.index(node) + 1 :] if block else []


def _bails_out(tree: ast.Module | None, line: int) -> bool:
    """Whether the ``if`` at ``line`` is a bail-out (:func:`_bails`: it leaves with nothing, or says so
    first) or a checklist of what disqualifies the code below (:func:`_checklist`): taken out, a bail-out
    is a check gone (:meth:`_Gone.bail_out`); firing less, either lets more through — unless what it skips
    is a refusal (``if ok: continue`` above a ``raise``: firing less, it refuses more)."""
    node = _if_at(tree, line)
    if node is None or not _no_else(node) or not isinstance(node.body[-1], _EXIT_NODES):
        return False
    return (_bails(node) or _checklist(node.test)) and not _passes_a_refusal(tree, line)


def _checklist(test: ast.expr) -> bool:
    """A condition that lists what disqualifies (three or more parts of an ``or``, or of an ``and`` under
    ``not``): ``if x.dtype != bf16 or not x.is_cuda or x.data_ptr() % 32 != 0: return fallback(x)``."""
    inner = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else None
    if isinstance(inner, ast.BoolOp):
        return isinstance(inner.op, ast.And) and len(inner.values) >= _CHECKLIST
    return isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and len(test.values) >= _CHECKLIST


_CHECKLIST = 3


def _forced_off(tree: ast.Module | None, line: int, test: ast.expr) -> bool:
    """Whether the ``if`` at ``line``, its condition made never to hold (``if False and …``), held code that
    does work — not output alone (a debug print switched off is no check taken out)."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else []
    never = _falsy(test) or any(map(_falsy, parts))
    node = _if_at(tree, line)
    return never and node is not None and not all(map(_output_only, node.body))


def _if_at(tree: ast.Module | None, line: int) -> ast.If | None:
    """The ``if`` whose header is at ``line``."""
    found = _header_at(tree, line, ast.If)
    return found if isinstance(found, ast.If) else None


def _header_at(tree: ast.Module | None, line: int, kind: type[ast.stmt]) -> ast.stmt | None:
    """The statement of ``kind`` whose header is at ``line``."""
    return next((n for n in _nodes_at(tree, {line}) if isinstance(n, kind) and n.lineno == line), None)


def _falsy(test: ast.expr) -> bool:
    return isinstance(test, ast.Constant) and not test.value


def _output_only(stmt: ast.stmt) -> bool:
    """A statement that only prints or logs."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in _OUTPUT_CALLS


# What prints or logs, by the last name called (``print`` itself named by the builtin).
_OUTPUT_CALLS = LOG_METHODS | {print.__name__, "pprint"}


def _sanitizes(node: ast.If) -> bool:
    """An ``if`` whose body puts right the value its condition found wrong (``if top_k <= 0 or top_k > V:
    top_k = V``): a check that mends instead of refusing."""
    tested = {ast.unparse(n) for n in ast.walk(node.test) if isinstance(n, (ast.Name, ast.Attribute))}
    return any(
        isinstance(stmt, ast.Assign) and any(ast.unparse(t) in tested for t in stmt.targets)
        for stmt in node.body
    )


def _own_statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a block and of the blocks nested in it, not of a def or a class inside."""
    for stmt in body:
        yield stmt
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                yield from _own_statements(getattr(stmt, field, ()))


_WARNINGS = frozenset({"warning", "warn", "error", "critical", "exception", "fatal"})
# Words of a call that ends a case in refusal (``req.set_finish_with_abort(msg)``, ``self.reject(r)``), and of
# a collection whose entries are the cases refused (``failed_req_idxs.add(i)``).
_REFUSING = frozenset({"abort", "reject", "fail", "refuse", "deny"})
_REFUSED = frozenset(
    {"failed", "failures", "rejected", "refused", "aborted", "invalid", "errors", "error", "problems"}
    | {"violations", "unsupported"}
)


def _refusing_call(call: ast.Call) -> bool:
    """A call that refuses the case by its words: named to abort, reject or fail it, or putting it among the
    failed ones."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if not _REFUSING.isdisjoint(_words(name)):
        return True
    if not (isinstance(func, ast.Attribute) and func.attr in ("add", "append", "extend", "update")):
        return False
    return not _REFUSED.isdisjoint(_words(_last_name(func.value)))


_ERROR_WORDS = frozenset({"err", "error", "errors", "msg", "message", "reason", "problem"})


def _refusal(stmt: ast.stmt) -> bool:
    """A statement that says the case is refused: a warning or an error logged, the case aborted or counted
    failed, or an error message returned."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        return (isinstance(func, ast.Attribute) and func.attr in _WARNINGS) or _refusing_call(stmt.value)
    if isinstance(stmt, ast.Return) and stmt.value is not None:
        return _refused_by_value(stmt.value)
    return False


def _refused_by_value(value: ast.expr) -> bool:
    """Whether a returned value says the case is refused: a message, a "no" and its reason, an answer made
    to say no, an error made and handed back."""
    if isinstance(value, ast.JoinedStr):
        return True
    if isinstance(value, ast.Constant):
        return isinstance(value.value, str)
    if isinstance(value, ast.Tuple) and value.elts:  # a "no" and its reason: ``return False, why``
        first = value.elts[0]
        return isinstance(first, ast.Constant) and first.value in (False, None) and len(value.elts) > 1
    if isinstance(value, ast.Call) and _says_no(value):
        return True  # a decision made and handed back: ``AuthDecision(allowed=False, …)``
    if isinstance(value, ast.Call):  # an error made and handed back: create_error_response(...)
        value = value.func
    name = value.attr if isinstance(value, ast.Attribute) else getattr(value, "id", "")
    return not _ERROR_WORDS.isdisjoint(name.lower().split("_"))


def _says_no(call: ast.Call) -> bool:
    """Whether a call makes an answer that says no: a keyword named for what may be done given ``False``
    (``AuthDecision(allowed=False)``, ``Verdict(ok=False, reason=…)``)."""
    return any(
        k.arg is not None
        and not _FLAG_WORDS.isdisjoint(_words(k.arg))
        and isinstance(k.value, ast.Constant)
        and k.value.value is False
        for k in call.keywords
    )


def _code_of(line: str) -> str:
    """A line without its comment (``pass  # assert x`` is ``pass``): a check written into a comment is not
    a check that moved. Quotes are followed so that a ``#`` inside a string stays."""
    if "#" not in line:
        return line
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote and line[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return line[:i] + "\n"
    return line


def _squeeze(text: str) -> str:
    return "".join(text.split())


def _statement(lines: Sequence[str], i: int) -> str:
    """The statement starting at ``lines[i]``, with the lines that follow while its brackets are open."""
    depth, out = 0, []
    for line in lines[i:]:
        out.append(line)
        depth += sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")
        if depth <= 0:
            break
    return "".join(out)


_VOID_ASSERTS = ("assert True", "assert 1", "assert(True)")


def _replaced(old: str, added: Sequence[str]) -> bool:
    """The same edit puts another check in its place: a raise rewritten (a new message, an f-string), an
    assert changed, an assert turned into ``if not …: raise ValueError(…)`` (which ``python -O`` keeps) or
    back — not one made void (``assert True``), nor a bare ``raise`` for a ``raise`` that said what."""
    word = old.split(None, 1)[0].split("(", 1)[0]  # "raise" or "assert"
    return any(
        (
            a.split(None, 1)[0].split("(", 1)[0] in ("raise", "assert")
            and not a.startswith(_VOID_ASSERTS)
            and a != "raise"
            and a != word
        )
        or _CHECK_CALL.match(a) is not None  # a call whose name says it checks: ``pool.verify_all_free()``
        for a in added
        if a
    )


def _strengthened(stmt: str, asserts: Sequence[str]) -> bool:
    """``assert cond`` whose condition lives on inside a new assert (``assert cond and more``)."""
    if not stmt.startswith("assert"):
        return False
    cond = stmt[len("assert") :].split(",", 1)[0]
    return bool(cond) and any(cond in a for a in asserts)


@dataclass(frozen=True, slots=True)
class _Gone:
    """What of the pristine code the installed file no longer has: a whole def or class, or the things a
    check tested. A check that left with what it checked is a refactor, not a check taken away."""

    before: Structure | None
    before_lines: Sequence[str]
    after: Structure
    after_lines: Sequence[str]
    after_scopes: frozenset[str]  # the qualified names of the installed file's defs and classes

    def handler_raise(self, line: int, text: str, now: int) -> int:
        """The ``except`` line of the handler around installed line ``now`` when pristine ``line``
        (``text``) was a ``raise`` inside it (a bare one too) — or the exit of the process it made of the
        error (``os._exit(1)``) — and it still catches what it caught, stopping less now: its error no
        longer goes on (a handler that catches something else is another handler); else 0."""
        if not (text == "raise" or text.startswith(("raise ", "raise(")) or _PROCESS_EXIT.match(text)):
            return 0
        if self.before is None or self.before.tree is None or self.after.tree is None:
            return 0
        holding = [
            node
            for node in _handlers_around(self.before, line)
            if any(_stops_there(r) and getattr(r, "lineno", 0) == line for r in ast.walk(node))
        ]
        around = _handlers_around(self.after, now)
        inner = max(around, key=lambda n: n.lineno, default=None)
        if not holding or inner is None or not _covers(inner, _caught(holding[-1])):
            return 0
        return inner.lineno if _stops(inner) < _stops(holding[-1]) else 0

    def relays_caught(self, line: int) -> bool:
        """Whether pristine ``line`` is a ``raise`` after the handlers of its function that passes on an
        error one of them caught and kept — ``exception = e`` then ``raise exception``, ``errors.append(e)``
        then ``raise errors[0]`` or ``raise RuntimeError(…) from errors[0]``: taken out, those errors stop
        there."""
        fn = _innermost_def(self.before.defs.values() if self.before is not None else (), line)
        nodes = list(ast.walk(fn)) if fn is not None else []
        raised = next((n for n in nodes if isinstance(n, ast.Raise) and n.lineno == line), None)
        handlers = [n for n in nodes if isinstance(n, ast.ExceptHandler)]
        if raised is None or any(h.lineno <= line <= (h.end_lineno or 0) for h in handlers):
            return False  # (a raise inside a handler is :meth:`handler_raise`'s)
        parts = [p for p in (raised.exc, raised.cause) if p is not None]
        return not _caught_kept(handlers).isdisjoint(_name_ids(ast.Tuple(parts)))

    def silenced(self, line: int) -> str:
        """Why the error of pristine ``line``, a ``raise`` given a stand-in, is silenced rather than only
        unchecked — the case nobody handled (:meth:`unhandled_case`), a failure that already happened passed
        on (:meth:`reports_failure`) — or ""."""
        if self.unhandled_case(line):
            return "the unhandled case goes on without its error"
        if self.raiser(line):
            return "a function whose job was to raise returns: its callers' errors go unseen"
        return "the failure it passed on goes unseen" if self.reports_failure(line) else ""

    def raiser(self, line: int) -> bool:
        """Whether pristine ``line`` is the ``raise`` that is the whole body of its function
        (``def failure_exception(self): raise …``, a template's ``raise_exception(message)``)."""
        if self.before is None or self.before.tree is None:
            return False
        fn = _innermost_def(self.before.defs.values(), line)
        body = fn.body[_docstring(fn) :] if fn is not None else []
        return len(body) == 1 and isinstance(body[0], ast.Raise) and body[0].lineno == line

    def reports_failure(self, line: int) -> bool:
        """Whether pristine ``line`` is a ``raise`` that passes on a failure that already happened — one
        raised from an error held (``raise RuntimeError(…) from self.error``), or under an ``if`` that tests
        what a call reported (``if result != 0:``, ``if self.error is not None:``, ``if status.failed:``) or
        what the function's ``except`` blocks collected (``missing.extend(e.hashes)``; ``if missing:``) —
        not one that refuses an input."""
        if self.before is None or self.before.tree is None:
            return False
        nodes = list(_nodes_at(self.before.tree, {line}))
        raised = nodes[-1] if nodes else None
        if not isinstance(raised, ast.Raise) or raised.lineno != line:
            return False
        if raised.cause is not None and not isinstance(raised.cause, ast.Constant):
            return True
        if isinstance(raised.exc, (ast.Name, ast.Attribute)) and _tests_a_report(raised.exc):
            return True  # an error held, raised again (``raise self.engine_client.dead_error``)
        guard = nodes[-2] if len(nodes) >= 2 and isinstance(nodes[-2], ast.If) else None
        return guard is not None and raised in guard.body and self._tests_failures(guard, line)

    def _tests_failures(self, guard: ast.If, line: int) -> bool:
        """Whether the pristine ``guard`` around ``line`` tests what a call reported, or what the function's
        ``except`` blocks collected."""
        assert self.before is not None
        fn = _innermost_def(self.before.defs.values(), line)
        return _tests_a_report(guard.test) or (fn is not None and _filled_by_handlers(fn, guard.test))

    def unhandled_case(self, line: int) -> bool:
        """Whether pristine ``line`` is a ``raise`` that answers the case nobody handled: the whole ``else``
        of an ``if``/``elif`` chain whose branches do the work (``else: raise NotImplementedError(…)``), or
        a function's last statement below an ``if`` whose branches return. Replaced by a default or a
        warning, the error it raised is silenced, not only its check."""
        if self.before is None or self.before.tree is None:
            return False
        nodes = list(_nodes_at(self.before.tree, {line}))
        raised = nodes[-1] if nodes else None
        parent = nodes[-2] if len(nodes) >= 2 else None
        if not isinstance(raised, ast.Raise) or raised.lineno != line:
            return False
        if isinstance(parent, ast.If) and parent.orelse == [raised]:
            return not any(isinstance(n, ast.Raise) for n in _own_statements(parent.body))
        body = getattr(parent, "body", None)
        if (
            not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef))
            or not body
            or body[-1] is not raised
        ):
            return False
        above = body[-2] if len(body) >= 2 else None
        return isinstance(above, ast.If) and isinstance(above.body[-1], ast.Return)

    @classmethod
    def of(cls, edit: _Edit) -> _Gone:
        scopes = frozenset(s.qualname for s in edit.st.scopes)
        if edit.before is None:
            return cls(None, (), edit.st, edit.lines, scopes)
        return cls(locate(edit.before), split_lines(edit.before), edit.st, edit.lines, scopes)

    def bail_out(self, line: int, disabled: bool = False) -> str:
        """What a pristine ``return``/``continue``/``break`` at ``line`` was when it ended a bail-out (``if
        bad: log(...); return``) that the installed file no longer has — the code below the guard now runs
        where it stopped — else "". The same guard kept, moved, or leaving otherwise, lives on."""
        if self.before is None or self.before.tree is None:
            return ""
        node = next(
            (
                n for n in _nodes_at(self.before.tree, {line})
                if isinstance(n, ast.If) and _no_else(n) and isinstance(n.body[-1], _EXIT_NODES)
                and n.body[-1].lineno == line and len(n.body) <= 3
            ),
            None,
        )  # fmt: skip
        if node is None:
            return ""
        rewritten = self.scope(line) or self.subject(line, f"assert {ast.unparse(node.test)}")
        if rewritten and not disabled:
            return ""  # what it guarded, or what it tested, left with a rewrite: not a guard taken out
        if not _bails(node):
            return ""  # an answer returned early (``if cached is not None: return cached``): a dispatch
        if self._guard_lives_on(node, line):
            return ""
        word = type(node.body[-1]).__name__.lower()
        return f"`if {ast.unparse(node.test)[:60]}:` no longer does `{word}`: what it guarded runs"

    def _guard_lives_on(self, node: ast.If, line: int) -> bool:
        """Whether the installed def keeps as many such guards as the pristine one had, or decides what the
        guard decided in an expression (``return a / n if n else 0.0``: :func:`_guard_folded`)."""
        assert self.before is not None
        scope = self.before.innermost(line)
        key = (scope.qualname if scope else "", ast.dump(node.test), type(node.body[-1]).__name__)
        now = next((s for s in self.after.scopes if scope is not None and s.qualname == scope.qualname), None)
        found = now is not None or scope is None  # the def is still there (or the guard is at the top)
        guards = _guards(self.after, now.start if now is not None else 0) if found else collections.Counter()
        if guards[key] >= _guards(self.before, line)[key] or _kept_wider(guards, key) or self._moved_out(key):
            return True
        return self._decided_in_def(node, key[1], now, scope)

    def _decided_in_def(self, node: ast.If, test: str, now: Scope | None, was: Scope | None) -> bool:
        """Whether the installed def ``now`` raises on the guard's test ``test`` itself, or folds what the
        guard decided into an expression (:meth:`_guard_lives_on`)."""
        fn = self.after.def_at(now.start) if now is not None else None
        pristine = self.before.def_at(was.start) if was is not None and self.before is not None else None
        return fn is not None and (_raises_on(fn, test) or _guard_folded(node, fn, pristine))

    def _moved_out(self, key: Guard) -> bool:
        """Whether a def the pristine file did not have holds a guard on the same test that leaves the same
        way: the guard went with the code it guarded into a helper (``run_*_warmup``)."""
        assert self.before is not None
        had = {s.qualname for s in self.before.scopes}
        fresh = [s for s in self.after.scopes if s.qualname not in had]
        return any(
            k[1:] == key[1:] or (k[2] == key[2] and key[1] in k[1])
            for s in fresh
            for k in _guards(self.after, s.start)
        )

    def scope(self, line: int) -> bool:
        """Whether a pristine line sat in a def or class the installed file no longer has at all."""
        if self.before is None:
            return False
        scope = self.before.innermost(line)
        return scope is not None and scope.qualname not in self.after_scopes

    def left_with(self, r: Region, i: int) -> bool:
        """Whether the check at removed line ``i`` of ``r`` left with what it checked: its def or class is
        gone (:meth:`scope`), or what it tested is (:meth:`subject`)."""
        line = r.old_start + i
        return self.scope(line) or self.subject(line, _statement(r.removed, i), r.removed)

    def subject(self, line: int, statement: str, taken: Sequence[str] = ()) -> bool:
        """Whether none of the names a removed check tested (an ``assert``'s condition, the ``if`` right
        above a ``raise``) is left in the installed def around it (or the file, at module level) — nor what
        a local made for the check alone, and ``taken`` out with it, was made of (:meth:`_made_from`)."""
        if self.before is None:
            return False
        names = _tested_names(statement, self._guard(line))
        if not names:
            return False
        scope = self.before.innermost(line)
        region: Sequence[str] = self.after_lines
        if scope is not None:
            now = next((s for s in self.after.scopes if s.qualname == scope.qualname), None)
            region = self.after_lines[now.start - 1 : now.end] if now is not None else region
        text = "".join(region)
        if any(re.search(rf"\b{re.escape(n)}\b", text) for n in names | self._made_from(names, scope, taken)):
            return False
        whole = "".join(self.after_lines)  # what the file defines, imports, reads elsewhere: no local subject
        imported = _imported(self.after)
        return not any(_kept_in_file(n, whole) or n in imported for n in names)

    def _made_from(self, names: set[str], scope: Scope | None, taken: Sequence[str]) -> set[str]:
        """The names the pristine def worked a local of ``names`` out of, where the local was made for the
        check alone — given its value in the lines ``taken`` out with the check, and read nowhere else in the
        def (``first = parsed[0][0]`` … ``if first != 1: raise``): gone with the check, it leaves what it was
        made of — a check taken out, not a refactor."""
        if scope is None or not taken:
            return set()
        body = "".join(self.before_lines[scope.start - 1 : scope.end])
        out: set[str] = set()
        for n in names:
            given = re.compile(rf"^\s*{re.escape(n)}\s*=(?!=)\s*(.+)$")
            made = [found.group(1) for line in taken if (found := given.match(line))]
            if len(made) == 1 and len(re.findall(rf"\b{re.escape(n)}\b", body)) == 2:
                out |= set(_NAME_WORD.findall(_STRING.sub(" ", made[0]))) - _NOT_SUBJECTS
        return out

    def _guard(self, line: int) -> str:
        """The header of the block pristine ``line`` sits in when it is an ``if``/``elif`` line, else ""."""
        header = _block_header(self.before_lines, line)
        return header if header.startswith(("if ", "elif ")) else ""


def _filled_by_handlers(fn: ast.AST, test: ast.expr) -> bool:
    """Whether a condition reads a name the ``except`` blocks of ``fn`` fill (``missing.extend(e.hashes)``,
    ``failed = True``): the errors caught, collected to be raised together."""
    tested = {ast.unparse(n) for n in ast.walk(test) if isinstance(n, (ast.Name, ast.Attribute))}
    for h in ast.walk(fn):
        if not isinstance(h, ast.ExceptHandler):
            continue
        for node in ast.walk(h):
            call = node.func if isinstance(node, ast.Call) else None
            if (
                isinstance(call, ast.Attribute)
                and call.attr in _FILLING
                and ast.unparse(call.value) in tested
            ):
                return True
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(ast.unparse(t) in tested for t in targets):
                return True
    return False


_FILLING = frozenset({"append", "extend", "add", "update", "put", "insert"})


def _tests_a_report(test: ast.expr) -> bool:
    """Whether a condition reads what a call reported (``result != 0``, ``self.error is not None``)."""
    tested = {_last_name(n) for n in ast.walk(test) if isinstance(n, (ast.Name, ast.Attribute))}
    return any(not _FAILURE_WORDS.isdisjoint(_words(name)) for name in tested if name)


_EXITS = ("return", "continue", "break")
_NAME_WORD = re.compile(r"[A-Za-z_]\w*")
# Words of what a call reported: its result or status code, the error it hit.
_FAILURE_WORDS = frozenset(
    {"result", "ret", "rc", "retcode", "returncode", "status", "err", "error", "errors", "exc", "exception"}
    | {"failed", "failure", "failures", "errno", "errored", "dead"}
)
_TARGETED = 12  # removed lines: at most this many, an edit of a guard rather than a rewrite of its function


Guard = tuple[str, str, str]  # a bail-out: the def around it, its test, how it leaves


def _guards(st: Structure, line: int) -> collections.Counter[Guard]:
    """The bail-outs — an ``if`` (no ``else``) whose body ends by leaving its function or loop — of the def
    or class around ``line`` (the module, at its top level), as (that def, the test, how it leaves)."""
    scope = st.innermost(line)
    where = scope.qualname if scope is not None else ""
    root: ast.AST | None = st.tree
    if scope is not None:
        spans = _nodes_at(st.tree, {scope.end})
        root = next((n for n in spans if isinstance(n, _SCOPES) and (n.end_lineno or 0) == scope.end), None)
    out: collections.Counter[Guard] = collections.Counter()
    for node in ast.walk(root) if root is not None else ():
        if isinstance(node, ast.If) and _no_else(node) and isinstance(node.body[-1], _EXIT_NODES):
            out[(where, ast.dump(node.test), type(node.body[-1]).__name__)] += 1
    return out


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _raises_on(fn: ast.FunctionDef | ast.AsyncFunctionDef, test: str) -> bool:
    """Whether ``fn`` has an ``if`` on the test ``test`` (its dump) whose body raises: the guard refuses
    now (``if not found: raise …``), stricter, not taken out."""
    return any(
        isinstance(n, ast.If) and ast.dump(n.test) == test and _guards_raise_node(n) for n in ast.walk(fn)
    )


def _kept_wider(guards: collections.Counter[Guard], key: Guard) -> bool:
    """Whether a guard of the same def leaves the same way on a test that holds the old one (``… or n >
    cap``)."""
    return any(k[2] == key[2] and key[1] in k[1] for k in guards)


def _guard_folded(
    guard: ast.If,
    fn: ast.FunctionDef | ast.AsyncFunctionDef | None,
    was: ast.FunctionDef | ast.AsyncFunctionDef | None = None,
) -> bool:
    """Whether the installed def decides what a removed guard decided, in an expression: a conditional
    expression tests, or a ``return`` hands back a comparison or a negation of, what the guard tested (or a
    local given it): ``if n == 0: return 0.0`` → ``return hit / n if n else 0.0``, ``if buf is None: return
    False`` + ``return True`` → ``return buf is not None``; a comprehension filters on it (a loop's ``if k in
    valid: continue`` → ``[k for k in names if k not in valid …]``). An expression the pristine def
    (``was``) had already decides something else (``return n <= self.max_size`` below the guard of ``n %
    16``)."""
    if fn is None:
        return False
    kinds = (ast.IfExp, ast.Return, ast.comprehension)
    had = {ast.dump(n) for n in ast.walk(was) if isinstance(n, kinds)} if was else set()
    tested = _standing_for(_names_in(guard.test), fn)
    return any(
        _decides(node, tested)
        for node in ast.walk(fn)
        if not (isinstance(node, kinds) and ast.dump(node) in had)
    )


def _decides(node: ast.AST, tested: set[str]) -> bool:
    """Whether an expression decides on what a guard ``tested``: a conditional expression's test, a
    comprehension's filter, a returned comparison or negation."""
    if isinstance(node, ast.IfExp):
        return bool(_names_in(node.test) & tested)
    if isinstance(node, ast.comprehension):
        return any(_filters_on(node, f, tested) for f in node.ifs)
    decided = node.value if isinstance(node, ast.Return) else None
    return isinstance(decided, (ast.Compare, ast.BoolOp, ast.UnaryOp)) and bool(_names_in(decided) & tested)


def _filters_on(loop: ast.comprehension, condition: ast.expr, tested: set[str]) -> bool:
    """Whether a comprehension's filter tests what a guard tested: all of it, or a name of it the
    comprehension does not bind itself."""
    names = _names_in(condition)
    return tested <= names or bool((names & tested) - _names_in(loop.target))


def _standing_for(tested: set[str], fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """``tested`` and the locals ``fn`` gives what it tested (``total = self.total``): they stand for it."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and _names_in(node.value) & tested:
            tested = tested | {t.id for t in node.targets if isinstance(t, ast.Name)}
    return tested


def _names_in(node: ast.expr) -> set[str]:
    """The names and attribute chains ``node`` reads (``self.total``, ``n``)."""
    return {ast.unparse(n) for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def _no_else(node: ast.If) -> bool:
    """An ``if`` with no ``else`` — or one whose ``else`` is the next test of a chain (``elif``): a case
    its branch turned away goes on to the next test once the branch is gone."""
    return not node.orelse or (len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If))


def _bails(node: ast.If) -> bool:
    """Whether an ``if`` that leaves is a bail-out: it says something first (a warning, a log line), or it
    leaves with nothing — ``continue``, ``break``, ``return``, ``return None``, a constant, an empty
    container — or it leaves when something is empty, zero or missing (``if n == 0: return total``)."""
    last = node.body[-1]
    value = last.value if isinstance(last, ast.Return) else None
    if len(node.body) > 1:  # it says something first — not work done, then left (a branch of a dispatch)
        return all(_output_only(s) or _refusal(s) or _notes(s) for s in node.body[:-1])
    if isinstance(value, ast.Constant) and _answers_by_case(node, value):
        return False  # ``if dt == bf16: return "bfloat16" elif dt == fp16: return "float16"``: a lookup
    if value is None or _refusal(last):  # ``return f"… must be non-negative"``
        return True
    if isinstance(value, ast.Constant) or (isinstance(value, (*_LITERALS, ast.Dict)) and not _items(value)):
        return True
    return _tests_nothing(node.test)


def _answers_by_case(node: ast.If, value: ast.Constant) -> bool:
    """Whether an ``if`` that returns a constant ``value`` is one case of a chain of answers: its ``elif``
    returns another constant (each case has its answer; none of them turns a case away) — not a truth
    value (``return False`` of a case is a refusal), nor a sentence (a validator's message)."""
    after = node.orelse[0] if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If) else None
    last = after.body[-1] if after is not None else None
    other = last.value if isinstance(last, ast.Return) else None
    answers = [value.value, other.value if isinstance(other, ast.Constant) else None]
    words = all(len(a.split()) == 1 for a in answers if isinstance(a, str))
    values = all(a is not None and not isinstance(a, bool) for a in answers)
    return words and values and answers[0] != answers[1]


def _notes(stmt: ast.stmt) -> bool:
    """A statement that only notes the refusal: a name or field given a constant or a message
    (``self.reason = "…"``, ``skipped += 1``, ``ok = False``)."""
    if isinstance(stmt, ast.AugAssign):
        return isinstance(stmt.value, ast.Constant)
    return isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(
        stmt.value, (ast.Constant, ast.JoinedStr)
    )


def _items(value: ast.expr) -> list[ast.expr | None]:
    return list(value.keys) if isinstance(value, ast.Dict) else list(getattr(value, "elts", []))


def _tests_nothing(test: ast.expr) -> bool:
    """``not x``, ``x is None``, ``x == 0``, ``len(x) == 0``: a test that something is empty or missing."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        right = test.comparators[0]
        empty = isinstance(right, ast.Constant) and right.value in (None, 0, "", False)
        return empty and isinstance(test.ops[0], (ast.Is, ast.Eq, ast.LtE))
    return False


def _nodes_at(tree: ast.AST | None, lines: set[int]) -> Iterator[ast.stmt]:
    """The statements whose lines hold one of ``lines``, outermost first (only their branches walked)."""
    todo = list(ast.iter_child_nodes(tree)) if tree is not None else []
    ordered = sorted(lines)
    while todo:
        node = todo.pop()
        if not isinstance(node, ast.stmt):
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        at = bisect.bisect_left(ordered, first)
        if at < len(ordered) and ordered[at] <= (node.end_lineno or node.lineno):
            yield node
            todo += ast.iter_child_nodes(node)
            todo += [s for h in getattr(node, "handlers", []) for s in h.body]


_EXIT_NODES = (ast.Return, ast.Continue, ast.Break)
_NOT_SUBJECTS = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | {"self", "cls"}


def _imported(st: Structure) -> set[str]:
    """The names the file's imports bind, at module level or in a function (the structure's aliases)."""
    return {name for aliases in (st.aliases, *st.local_aliases.values()) for name in aliases}


def _kept_in_file(name: str, text: str) -> bool:
    """Whether the file defines ``name`` at its top (a function, a class, a constant) or reads it as an
    attribute (``self.meta_path``, a method): what a check tested lives on outside its def."""
    n = re.escape(name)
    found = re.search(rf"^(?:async\s+def|def|class)\s+{n}\b|^{n}\s*[:=]|\.{n}\b|\bdef\s+{n}\(", text, re.M)
    return found is not None


def _tested_names(statement: str, guard: str) -> set[str]:
    """The names and attributes a check tests: an ``assert``'s whole statement, a ``raise``'s guard."""
    text = statement.strip()
    if text.startswith("raise"):
        if not guard:
            return set()
        text = guard.replace("elif ", "if ", 1) + " pass"
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in _NOT_SUBJECTS:
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
    return found
