"""The engine of code analysis: one changed file in, its findings out.

Only what changed is judged: the installed file is compared with its pristine source, the changed lines
are mapped to statements, and those are matched against the rules (:mod:`.rules`) with import aliases
resolved (:mod:`.aliases`). A rule the pristine code already hits (vLLM's own legitimate ``torch.save``) is
not reported. Without a pristine source the whole file is judged and findings say ``baseline: none``. What
the edit means beyond the rule hits (a check taken out, an error let go) is read by :mod:`.meanings`.

libcst is imported by :mod:`.judge` only, and only when there is a change to judge."""

from __future__ import annotations

import ast
import collections
import re
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..diffs import split_lines
from ..model import Finding, Gate, GateKind, Kind, RuleId, Severity
from .change import (
    QUOTED,
    STRING_LITERAL,
    CodeChange,
    Edit,
    Maker,
    _tree_of,
    _wild,
    code_of,
    forced_open,
    innermost_def,
    last_name,
    locate,
    nodes_at,
)
from .meanings import meanings
from .meanings.refusals import _docstring, latched
from .reach.calls import statements_in
from .rules import (
    LOG_ONCE,
    RULES,
    could_hit,
    is_forward,
    loads_weights,
    on_hot_path,
    runs_once,
)
from .structure import Region, Scope, Structure, changed_regions, same_code

if TYPE_CHECKING:
    from .judge import Hit, Site, Unit


__all__ = ["CodeChange", "analyse", "locate"]


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


def analyse(change: CodeChange) -> list[Finding]:
    """Findings for the changed code of one file (empty when nothing changed)."""
    after = _decode(change.after)
    before = _decode(change.before) if change.before is not None else None
    regions = changed_regions(before, after)
    if not regions:
        return []
    lines = split_lines(after)
    finding = Maker(change, lines, () if before is not None else ("baseline: none",))
    st = locate(after)
    edit = Edit(before, st.with_hot(dict(change.hot)) if change.hot else st, lines, finding)

    changed = {line for r in regions for line in r.lines}
    covered: set[int] = set()
    out = _judged(edit, changed, covered) if changed else []
    out += _one_per_site(_live_past_latches(edit, regions), edit)  # (a latch taken out: lines removed)
    if edit.st.syntax_error is not None:
        out.append(_unparseable(edit, edit.st.syntax_error))
    if not out and before is not None and _cosmetic_only(regions, edit):
        return _cosmetic(edit, regions)
    out += meanings(regions, edit, changed, out)
    for r in regions:
        _unexplained(edit, r, covered, out)
    out = _checks_voices(_scripts_are_not_library(out, edit.st.tree), regions)
    return sorted(_one_per_line(out), key=lambda f: (f.line or 0, f.rule))


def _cosmetic_only(regions: Sequence[Region], edit: Edit) -> bool:
    """Whether the edit changed comments, layout or docstrings only: the text first (code words that differ
    are code changed), then the trees."""
    assert edit.before is not None
    return not _code_words_differ(regions, edit) and _only_cosmetic(edit.before, edit.st)


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


def _unparseable(edit: Edit, error: tuple[int, str]) -> Finding:
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


def _code_words_differ(regions: Sequence[Region], edit: Edit) -> bool:
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
    return _WORD.findall(STRING_LITERAL.sub(" ", code_of(line)))


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


def _only_cosmetic(before: str, after: Structure) -> bool:
    """Whether the two sources differ in comments, layout or docstrings only."""
    if after.tree is None or _wild(before) is not None:
        return False
    tree = _tree_of(before)  # (its tree alone: the structure of the pristine file is not needed for this)
    return tree is not None and same_code(tree, after.tree)


def _cosmetic(edit: Edit, regions: Sequence[Region]) -> list[Finding]:
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


def _unexplained(edit: Edit, r: Region, covered: set[int], out: list[Finding]) -> None:
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


def _rest_of_region(edit: Edit, r: Region, rest: Sequence[int], out: Sequence[Finding]) -> Finding | None:
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


def _change_of(edit: Edit, line: int, end: int, added: Sequence[int], removed: Sequence[str]) -> Finding:
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


def _one_per_site(hits: list[Hit], edit: Edit) -> list[Finding]:
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


def _folded(run: list[Hit], edit: Edit) -> Finding:
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


def _judged(edit: Edit, changed: set[int], covered: set[int]) -> list[Finding]:
    """The findings of the rule hits on ``changed`` lines, unit by unit, leaving out those the pristine
    unit has as often (moved or re-indented, not injected); the lines they span are added to ``covered``."""
    from .judge import judge_statements, units_for

    pristine: _Pristine | None = None  # located on first need: most changed units hit nothing
    reported: list[Hit] = []
    opened = forced_open(edit.st, changed) if edit.before is not None else []
    if edit.before is None and edit.st.grammar == "ast":  # a whole file: statement by statement
        reported = list(judge_statements(edit.st, edit.lines))
    else:
        for first, last, test in opened:
            reported += _live_through_calls(edit, first, last, test)
        reported += _live_behind_flags(edit, changed)
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
    done = {_effect(rule, q) for rule, q, _w in baseline} if baseline else set()
    moved = _reads(after_counts) <= _reads(baseline) if baseline is not None else False
    return [
        replace(h, familiar=_effect(h.rule, h.qualname) in done and _familiar_kind(h, loudest, checks))
        for h in hits
        if (baseline is None or baseline.get(site(h), 0) < after_counts[site(h)])
        and not (moved and _value_read(h.rule, h.qualname))
    ]


def _effect(rule: str, qualname: str) -> str:
    """What a hit does, for what a function already does: a text document dumped into a file is a file
    written (``writer.write(self.to_json_string())`` made ``json.dump(self.to_dict(), writer)``) — a
    tensor's or a pickle's dump is not."""
    if rule == RuleId.TENSOR_DUMP and qualname.rsplit(".", 2)[-2:] in _TEXT_DOCUMENTS:
        return RuleId.FILE_WRITE
    return rule


# Dumps that write an object as a text document (the libraries' docs: JSON, YAML, TOML text to the file).
_TEXT_DOCUMENTS = (["json", "dump"], ["yaml", "dump"], ["yaml", "safe_dump"], ["toml", "dump"])


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


def _live_through_calls(edit: Edit, first: int, last: int, test: str) -> list[Hit]:
    """What runs every time now in the functions of the file a gate forced open calls (``if True:  # was:
    VALIDATE`` over ``self._validate_pages(k, v)``): their hits, reported from the gate — the code behind
    it is unchanged, what it calls is where the work is."""
    from .judge import judge_unit

    out: list[Hit] = []
    st, called = edit.st, _called_between(edit.st, first, last)
    caller = st.qualname_at(first) or ""
    if called and _computes(innermost_def(st.defs.values(), first), caller, st):
        # (called each time a function that computes on tensors runs: as hot as its caller)
        st = st.with_hot({**st.hot, **{scope.qualname: caller for scope in called}})
    for scope in called:
        detail = f"its gate `if {test.strip()[:60]}` is now always open: `{scope.qualname}` runs every time"
        for h in judge_unit(_unit_of(scope, edit.lines), None, st, edit.lines):
            if not h.dead:
                out.append(replace(h, line=first - 1, end_line=first - 1, detail=detail))
    return out


def _live_behind_flags(edit: Edit, changed: set[int]) -> list[Hit]:
    """What runs every time now behind the tests of a module's flag the edit forced to a constant
    (``dump_generated_mlir = int(os.environ.get("WAVE_DUMP_MLIR", 0))`` → ``= 1``): the code under each
    ``if flag:`` — or below each ``if not flag: return`` — anywhere in the file, and what it calls; reported
    from the flag."""
    out: list[Hit] = []
    for n in sorted(changed):
        forced = _FLAG_FORCED.match(edit.lines[n - 1])
        if forced is None or edit.before is None or not _worked_out(edit.before, forced.group(1)):
            continue
        name, truthy = forced.group(1), forced.group(2) in ("True", "1")
        for first, last, test in _flag_spans(edit.st, name, truthy):
            detail = f"`{name}` is forced to {forced.group(2)}: what `if {test}` kept from running runs"
            for h in _hits_between(edit, first, last) + _live_through_calls(edit, first, last, test):
                out.append(replace(h, line=n, end_line=n, detail=detail))
    return out


def _live_past_latches(edit: Edit, regions: Sequence[Region]) -> list[Hit]:
    """What runs every call now below a latch the edit took out (:func:`.meanings.refusals.latched`: ``if
    self._warned: return`` … ``self._warned = True``, ``if key in self._done: return`` … ``self._done.add(
    key)``): the log lines, prints and device reads of the rest of the function, reported where the edit
    took the latch out, as often as the function is called."""
    if edit.before is None or _LATCH.search(edit.before) is None:
        return []  # (most files have no latch: the pristine tree is not asked)
    out: list[Hit] = []
    pristine = locate(edit.before)
    for fn, test in _latches(pristine.tree):
        now = _unlatched(edit.st, pristine.qualname_at(fn.body[0].lineno) or "", test)
        if now is None:
            continue  # (the latch is still there, or the function is gone)
        at = [r.start for r in regions if now.lineno <= r.start <= (now.end_lineno or 0)]
        first = max(min(at, default=0), _first_statement(now).lineno)
        detail = f"its latch `if {test[:50]}: return` is gone: this runs every call"
        for h in _hits_between(edit, first, now.end_lineno or first):
            if h.rule in _EVERY_CALL:
                out.append(replace(h, line=first, end_line=first, detail=detail, loop=True))
    return out


def _unlatched(st: Structure, qualname: str, test: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The installed function ``qualname`` when it no longer tests ``test`` at the top of its body."""
    scope = next((s for s in st.scopes if s.qualname == qualname and s.kind != "class"), None)
    now = st.def_at(scope.start) if scope is not None else None
    kept = now is not None and any(isinstance(s, ast.If) and ast.unparse(s.test) == test for s in now.body)
    return None if kept else now


def _first_statement(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt:
    """The first statement of a function's body that is not its docstring (the docstring of one that has
    nothing else)."""
    return (fn.body[_docstring(fn) :] or fn.body)[0]


# What costs by how often it runs: a log line, a print, a read of the device.
_EVERY_CALL = frozenset({RuleId.LOGGING, RuleId.PRINT, RuleId.DEVICE_SYNC})
# ``if …:`` / ``return`` on the next line, by the text: a latch may begin there.
_LATCH = re.compile(r"^[ \t]*if [^\n]+:[ \t]*\n[ \t]*return[ \t]*$", re.M)


def _latches(tree: ast.Module | None) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """(the function, the test) of each latch of a function's body (:func:`.meanings.refusals.latched`)."""
    for fn in statements_in(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for stmt in fn.body:
                if isinstance(stmt, ast.If) and latched(fn, stmt):
                    yield fn, ast.unparse(stmt.test)


# A module's flag given a constant: ``DEBUG = 1``, ``_SANITY_CHECK: bool = True  # was: env``.
_FLAG_FORCED = re.compile(r"^([A-Za-z_]\w*)\s*(?::[^=]*)?=\s*(True|False|1|0)\s*(?:#.*)?$")


def _worked_out(source: str, name: str) -> bool:
    """Whether the pristine module gives ``name`` a value it works out (not a constant)."""
    given = re.compile(rf"^{re.escape(name)}\s*(?::[^=]*)?=(?!=)\s*(.+)$", re.M)
    found = given.search(source)
    return found is not None and found.group(1).split("#")[0].strip() not in _CONSTANTS


_CONSTANTS = ("True", "False", "0", "1", "None")


def _flag_spans(st: Structure, name: str, truthy: bool) -> list[tuple[int, int, str]]:
    """(first, last line, test) of the code a forced flag now always runs: the body of an ``if`` it makes
    always true, and the rest of the function below an ``if`` that left when it held, which it makes never
    true."""
    out: list[tuple[int, int, str]] = []
    for span in st.ifs:
        test = span.test.strip()
        if test not in (name, f"not {name}"):
            continue
        holds = (test == name) == truthy
        if holds:
            out.append((span.start + 1, (span.orelse - 1) if span.orelse is not None else span.end, test))
            continue
        node = next((x for x in nodes_at(st.tree, {span.start}) if isinstance(x, ast.If)), None)
        fn = innermost_def(st.defs.values(), span.start)
        leaves = node is not None and isinstance(node.body[-1], (ast.Return, ast.Continue, ast.Break))
        if leaves and span.orelse is None and fn is not None and fn.end_lineno:
            out.append((span.end + 1, fn.end_lineno, test))
    return out


def _hits_between(edit: Edit, first: int, last: int) -> list[Hit]:
    """The hits of the function around lines ``first..last`` on those lines, the whole function judged."""
    from .judge import judge_unit

    scopes = [s for s in edit.st.scopes if s.kind != "class" and s.start <= first <= s.end]
    scope = max(scopes, key=lambda s: s.start, default=None)
    if scope is None:
        return []
    hits = judge_unit(_unit_of(scope, edit.lines), None, edit.st, edit.lines)
    return [h for h in hits if first <= h.line <= last and not h.dead]


def _unit_of(scope: Scope, lines: Sequence[str]) -> Unit:
    """The unit a function of the file is judged as, whole."""
    from .judge import Unit

    text = lines[scope.start - 1]
    prefix = scope.qualname.rsplit(".", 1)[0] if "." in scope.qualname else ""
    return Unit(scope.start, scope.end, len(text) - len(text.lstrip()), prefix)


def _computes(fn: ast.FunctionDef | ast.AsyncFunctionDef | None, qualname: str, st: Structure) -> bool:
    """Whether a function runs with the step's tensors: it is hot, or it is handed a parameter declared a
    tensor."""
    if fn is None:
        return False
    from .tensors import declares_tensors

    return qualname in st.hot or on_hot_path(fn.name) or declares_tensors(fn)


def _called_between(st: Structure, first: int, last: int) -> list[Scope]:
    """The functions of the file called on lines ``first..last`` of one function: ``self.method(…)`` of its
    class, a module function by its name."""
    fn = innermost_def(st.defs.values(), first)
    where = st.qualname_at(first) or ""
    owner = where.rsplit(".", 1)[0] if "." in where else ""  # (the class of a method)
    wanted: set[str] = set()
    for node in ast.walk(fn) if fn is not None else ():
        if not isinstance(node, ast.Call) or not first <= node.lineno <= last:
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            wanted.add(f"{owner}.{func.attr}")
        elif isinstance(func, ast.Name):
            wanted.add(func.id)
    return [s for s in st.scopes if s.kind != "class" and s.qualname in wanted]


def _unit_hits(
    edit: Edit, unit: Unit, ulines: Sequence[int], opened: Sequence[tuple[int, int, str]] = ()
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


def _injected(hit: Hit, edit: Edit) -> Finding:
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
        + (
            " (the pristine function does the same already)"
            if _familiar(hit) and severity < rule.severity
            else ""
        )
        + (" (unreachable: it cannot run)" if hit.dead else "")
    )
    return edit.finding(
        Kind.INJECTED_CODE, hit.rule, severity, hit.line, hit.end_line, hit.function, message, gate
    )


def _severity(hit: Hit, severity: Severity, name: str, edit: Edit) -> Severity:
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
    for node in nodes_at(tree, {line}):
        if isinstance(node, ast.Assert):
            return True
        if not isinstance(node, ast.If) or not isinstance(node.body[-1], ast.Raise):
            continue
        if node.test.lineno <= line <= (node.test.end_lineno or 0):
            return True
    return False


def _off_the_hot_path(hit: Hit, name: str, edit: Edit) -> bool:
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


def _once_anyway(hit: Hit, name: str, edit: Edit) -> bool | None:
    """Whether a log line or a wait for the device is off the hot path whatever its loop or its tensors
    say — a ``warning_once``, code that runs while the weights load (each weight, handed its tensors: once a
    process) — or ``None``: not told here."""
    if hit.rule == RuleId.LOGGING and hit.qualname.endswith(LOG_ONCE):
        return True  # ``logger.warning_once(…)``: logged the first time round, wherever it stands
    if hit.rule in (RuleId.DEVICE_SYNC, RuleId.LOGGING) and _once_gated(edit.st.tree, hit.line):
        return True  # under ``if self._first: self._first = False``: the first time round too
    if hit.rule in (RuleId.DEVICE_SYNC, RuleId.LOGGING) and _at_load_time(name, edit.finding.change.path):
        return not (on_hot_path(name) or hit.hot_caller)
    return None


def _at_load_time(name: str, path: str) -> bool:
    """Whether code runs while the model's weights load: a function named for loading them
    (:func:`.rules.loads_weights`), or any function of a package named for loading models
    (``model_executor/model_loader/``, ``srt/model_loader/``)."""
    return loads_weights(name) or any("loader" in part.lower() for part in path.split("/")[:-1])


def _seldom(hit: Hit, name: str, edit: Edit) -> bool:
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
    fn = innermost_def(st.defs.values(), line)
    calls = (n.func for n in ast.walk(fn) if isinstance(n, ast.Call)) if fn is not None else ()
    return any(last_name(f) in _SPAWNING for f in calls)


_SPAWNING = frozenset({"Process", "Popen", "spawn", "start_processes"})


def _made_per_step(hit: Hit, name: str, edit: Edit) -> bool:
    """Whether a hit is in the ``__post_init__`` of a dataclass whose fields are tensors (a step's output,
    a batch's metadata): made each step, not once."""
    owner = hit.function.rsplit(".", 2)[-2] if hit.function.count(".") >= 1 else ""
    return name == "__post_init__" and bool(edit.st.tensor_fields.get(owner))


def _once_gated(tree: ast.Module | None, line: int) -> bool:
    """Whether ``line`` sits under a gate that closes itself: ``if self._first: self._first = False …``
    (or ``if not self._done: self._done = True``) — its block runs once."""
    for node in nodes_at(tree, {line}):
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
        code_part = QUOTED.sub('""', code_of(text))  # not in a comment, not in a string on the line
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


# Effects a function may have as its job (not a debugger, an exit or a sync: never a job of library code) —
# printing too: a function that prints already (a visualizer, a summary) printing one more line.
_ROLE_EFFECTS = frozenset(
    {RuleId.SUBPROCESS, RuleId.NETWORK, RuleId.FILE_WRITE, RuleId.TENSOR_DUMP, RuleId.DYNAMIC_EXEC}
    | {RuleId.PRINT}
)


_STORING = re.compile(r"(?:^|_)(?:save|export|serialize|to_disk|write_checkpoint)(?:$|_)")


def _storing(name: str) -> bool:
    """A function whose role is to store: ``save``, ``_save``, ``save_pretrained``, ``save_checkpoint``,
    ``export``, ``serialize``, ``to_disk`` (not ``load_checkpoint``: loading is not storing)."""
    return bool(_STORING.search(name.lower()))


def _handed_the_command_line(st: Structure, line: int) -> bool:
    """Whether the function around ``line`` is handed the parsed command line (a parameter annotated
    ``argparse.Namespace``: a subcommand's ``cmd(args)``): what it writes, it writes to a person."""
    fn = innermost_def(st.defs.values(), line)
    args = fn.args if fn is not None else None
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs] if args is not None else []
    return any(a.annotation is not None and last_name(a.annotation) == "Namespace" for a in every)


def _command_line(name: str) -> bool:
    """A command-line entry function (``main``, ``cli``, ``run_cli``, ``serve_main``): it talks to a
    person."""
    bare = name.lstrip("_")
    return bare in ("main", "cli") or bare.endswith(("_main", "_cli")) or bare.startswith(("cli_", "main_"))
