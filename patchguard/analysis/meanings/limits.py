"""Limits moved to let more by: a bound taken off a value, a minimum lowered, a named limit or a declared
range moved, a call edited in place so that it lets more by."""

from __future__ import annotations

import ast
import copy
import io
import re
import textwrap
import tokenize
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING

from ...diffs import split_lines
from ...model import Finding, RuleId
from ..aliases import reads_environment
from ..cases import compare
from ..change import Edit, code_of, innermost_def, last_name, locate, nodes_at
from ..structure import Region
from .refusals import (
    _ALLOWING,
    _DECIDING,
    _LITERALS,
    _TARGETED,
    _check_finding,
    _decision,
    _function_at,
    _handlers_around,
    _name_ids,
    _number,
    _one_line,
    _opener_above,
    _short,
    _squeeze,
    _squeezed_source,
    _statement,
    _turns_off,
    _words,
    unwrapped,
)

if TYPE_CHECKING:
    from packaging.version import Version

__all__ = [
    "bounds_dropped",
    "bounds_raised",
    "bounds_scaled",
    "calls_loosened",
    "declared_bounds_moved",
    "limits_moved",
    "requirements_lowered",
]


def bounds_dropped(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A bound taken off a value: ``limit = max(2, n)`` → ``limit = n`` (``return min(x, 8)`` → ``return
    x``) — what the floor or the ceiling kept out passes now."""
    out: list[Finding] = []
    for r in regions:
        out += _if_clamp_gone(r, edit)
        if not r.removed or not any(_BOUNDING.search(old) for old in r.removed):
            continue  # (most regions take off no bound: nothing parsed)
        bounded: dict[str, tuple[ast.expr, ast.expr]] = {}
        for i in range(len(r.removed)):
            target, value = _decision(code_of(_statement(r.removed, i)))
            inner = _bounded(value) if target else None
            if value is not None and inner is not None:
                bounded[target] = (value, inner)
        for n in r.lines if bounded else ():
            target, value = _decision(code_of(_statement(edit.lines, n - 1)))
            if target in bounded and value is not None and ast.dump(value) == ast.dump(bounded[target][1]):
                was = " ".join(ast.unparse(bounded[target][0]).split())[:50]
                detail = f"the bound `{was}` is gone: what it kept out passes"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
        out += _unwrapped_in_place(r, edit, {f.line for f in out})
        out += _clamps_gone(r, edit)
    return out


def _unwrapped_in_place(r: Region, edit: Edit, said: Collection[int | None]) -> list[Finding]:
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


def _parsed(r: Region, i: int) -> ast.stmt | None:
    return _one_statement(code_of(_statement(r.removed, i)))


def _parsed_line(lines: Sequence[str], n: int) -> ast.stmt | None:
    return _one_statement(code_of(_statement(lines, n - 1)))


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


def _if_clamp_gone(r: Region, edit: Edit) -> list[Finding]:
    """A clamp written as an ``if`` taken out: ``if value > ceiling: value = ceiling`` whose assignment is
    gone (the ``if`` left to do nothing, or deleted) — the value is no longer kept within the bound."""
    assigned = _clamped_here(r, edit.before)
    if not assigned or edit.before is None:
        return []
    tree = locate(edit.before).tree
    # what the region gives a value now (``n = min(n, cap)`` in the clamp's place, ``n = cap`` kept)
    now = {m.group(1) for n in r.lines if (m := _ASSIGNED.match(edit.lines[n - 1]))}
    for i in assigned:
        line = r.old_start + i
        clamp = next((c for n in nodes_at(tree, {line}) if (c := _clamp_by_if(n, line))), None)
        if clamp is None or _target(clamp[1]) in now:
            continue  # (no clamp there, or the region gives the value anew: the bound kept, or another way)
        target, bound = ast.unparse(clamp[1].targets[0]), ast.unparse(clamp[1].value)[:30]
        detail = f"the clamp `if {clamp[0][:50]}: {target} = {bound}` is gone: nothing keeps the value within"
        return [_check_finding(edit, RuleId.REMOVED_CHECK, max(r.start, 1), f"check neutralised: {detail}")]
    return []


# The most lines a region may take out for one of them to be a clamp taken out (``if`` and body, a comment).
_CLAMP_REGION = 6


def _target(assign: ast.Assign) -> str:
    return ast.unparse(assign.targets[0])


def _clamped_here(r: Region, before: str | None) -> list[int]:
    """The removed lines of a region (their indexes) that give a value an ``if`` just above orders — by the
    text alone; none for a block rewritten whole (its new code says what it does now)."""
    if before is None or not r.removed or len(r.removed) > _CLAMP_REGION:
        return []
    assigned = [i for i, old in enumerate(r.removed) if _ASSIGNED.match(old)]
    pristine = before.splitlines() if assigned else []
    return [i for i in assigned if _ordered_above(pristine, r.old_start + i, r.removed[i])]


def _ordered_above(pristine: Sequence[str], line: int, assignment: str) -> bool:
    """Whether one of the few pristine lines above ``line`` is an ``if`` that orders (``<``, ``>``) the name
    ``assignment`` gives a value."""
    target = assignment.split("=", 1)[0].strip()
    for k in range(max(line - _CLAMP_REGION, 1), line):
        text = pristine[k - 1].strip() if k - 1 < len(pristine) else ""
        if text.startswith(("if ", "elif ")) and target in text and ("<" in text or ">" in text):
            return True
    return False


def _clamp_by_if(node: ast.AST, line: int) -> tuple[str, ast.Assign] | None:
    """(the test, the assignment) when ``node`` is an ``if`` whose body gives, at ``line``, a value the bound
    its test orders it against (``if n > cap: n = cap``; a part of an ``and`` too); else ``None``."""
    if not isinstance(node, ast.If):
        return None
    assign = next((s for s in node.body if isinstance(s, ast.Assign) and s.lineno == line), None)
    if assign is None or len(assign.targets) != 1:
        return None
    wanted = {ast.unparse(assign.targets[0]), ast.unparse(assign.value)}
    parts = node.test.values if isinstance(node.test, ast.BoolOp) else [node.test]
    if any(_ordered_sides(part) == wanted for part in parts):
        return ast.unparse(node.test), assign
    return None


def _ordered_sides(test: ast.expr) -> set[str] | None:
    """The two sides of an order (``n > cap``: ``{"n", "cap"}``), else ``None``."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], _ORDERS):
        return {ast.unparse(test.left), ast.unparse(test.comparators[0])}
    return None


_ORDERS = (ast.Gt, ast.GtE, ast.Lt, ast.LtE)


def _clamps_gone(r: Region, edit: Edit) -> list[Finding]:
    """A clamp of a value by another taken out (``num_reqs = min(num_reqs, cap)`` deleted or commented
    out): what it kept the value within, it is no longer kept within."""
    # a clamp given another bound, or the value given anew in the region (``if n > cap: n = cap``)
    kept = {_ASSIGNED.match(edit.lines[n - 1]) for n in r.lines}
    kept_targets = {m.group(1) for m in kept if m is not None}
    kept_targets |= {_clamped(code_of(edit.lines[n - 1])) for n in r.lines}  # clamped still, otherwise
    for i in range(len(r.removed)):
        statement = code_of(_statement(r.removed, i))
        target = _clamped(statement)
        if target and target not in kept_targets and _squeeze(statement) not in _squeezed_source(edit.text):
            shown = " ".join(statement.split())[:60]
            detail = f"the clamp `{shown}` is gone: nothing keeps the value within it"
            line = max(r.start, 1)
            return [_check_finding(edit, RuleId.REMOVED_CHECK, line, f"check neutralised: {detail}")]
    return []


def requirements_lowered(regions: Sequence[Region], edit: Edit) -> list[Finding]:
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


def _minimum_from_environment(edit: Edit, r: Region) -> list[Finding]:
    """What a function that states a minimum returns (``return 89``) now read from the environment
    (``return int(os.environ.get("MIN_CAP", "89"))``): whoever sets the variable sets the bar."""
    returned = [v for old in r.removed if (v := _decision(code_of(old)))[0] == "return"]
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


def calls_loosened(regions: Sequence[Region], edit: Edit) -> list[Finding]:
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


def limits_moved(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A named limit given another number (``_MAX_ROWS = 2048`` → ``16384``) where the file compares with it
    in what a function that decides whether something is supported, allowed or to be used returns (``return
    … and 0 < rows <= _MAX_ROWS``) — read by cases with the old and the new number: the code is used where
    it was not. (A limit a check holds values to, raised, is :func:`bounds_raised`'s.)"""
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


def bounds_raised(regions: Sequence[Region], edit: Edit) -> list[Finding]:
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
        if not target:  # ``def max_steps(…): return n + 1`` → ``return 8 * n + 1``: the answer is the bound
            target, was, again, now = _answered(edit, r.removed[0], n)
        if not target:  # ``def wait(fd, timeout: float = 30.0)`` → ``= float("inf")``: never given up
            out += _defaults_unbounded(edit, r.removed[0], n)
            continue
        if target != again or was is None or now is None:
            continue
        name = target.rsplit(".", 1)[-1]
        words = _words(name)
        upper, lower = not _UPPER_WORDS.isdisjoint(words), not _LOWER_WORDS.isdisjoint(words)
        if upper == lower or not _lets_more_under(was, now, upper):
            continue
        local = "." not in target and innermost_def(edit.st.defs.values(), n) is not None  # (not a class's)
        where = "its answer" if target.endswith("()") else _held_to(edit, name, n, local=local)
        if where:
            detail = f"`{name}` {_short(was)} → {_short(now)}: {where} lets more by"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _defaults_unbounded(edit: Edit, old: str, n: int) -> list[Finding]:
    """A parameter named for a most (``timeout``, ``max_wait``) whose default, a number, is made no bound at
    all (``float("inf")``, ``math.inf``, ``None``), on a ``def`` line or a parameter line edited in place:
    the wait or the size it held to is unbounded now."""
    was, now = _parameters(old), _parameters(edit.lines[n - 1])
    for name, value in now.items():
        words = _words(name)
        bound = not _UPPER_WORDS.isdisjoint(words) or "timeout" in words
        given = was.get(name)
        if bound and given is not None and _number(given) is not None and _unbounded(value):
            detail = f"the default of `{name}` {ast.unparse(given)} → {ast.unparse(value)}: no bound at all"
            return [_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}")]
    return []


def _parameters(line: str) -> dict[str, ast.expr]:
    """The parameters given a default on a ``def`` line, or on a line of parameters (``timeout: float =
    30.0,``)."""
    text = code_of(line).strip()
    if not text.endswith((",", ":", "(")) and "=" not in text:
        return {}
    head = re.match(r"(?:async\s+)?def\s+\w+\s*\((.*)\)\s*(?:->[^:]*)?:$", text)
    inner = head.group(1) if head is not None else text.rstrip(",")
    try:
        tree = ast.parse(f"def _({inner}): pass")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    defaulted = [a.arg for a in positional[len(positional) - len(args.defaults) :]]
    given = dict(zip(defaulted, args.defaults, strict=True))
    given.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
    return given


def _unbounded(value: ast.expr) -> bool:
    """``float("inf")``, ``math.inf``, ``None``: no bound."""
    if isinstance(value, ast.Constant):
        return value.value is None
    if isinstance(value, ast.Call) and last_name(value.func) == "float" and len(value.args) == 1:
        arg = value.args[0]
        return isinstance(arg, ast.Constant) and str(arg.value).lower() in ("inf", "infinity", "+inf")
    return last_name(value) == "inf"


def _answered(edit: Edit, old: str, n: int) -> tuple[str, ast.expr | None, str, ast.expr | None]:
    """(``name()``, the value it returned, ``name()``, the value it returns) of a ``return`` edited in place
    in a function named for a bound (``max_steps``); empty else."""
    function = _function_at(edit, n).rsplit(".", 1)[-1]
    was, now = _decision(code_of(old)), _decision(code_of(edit.lines[n - 1]))
    if was[0] != "return" or now[0] != "return" or _BOUND_WORDS.isdisjoint(_words(function)):
        return "", None, "", None
    return f"{function}()", was[1], f"{function}()", now[1]


def bounds_scaled(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A bound scaled up after it was worked out, by a line the edit added (``max_len = max_len * 4``,
    ``limit += 256``; a least scaled down): where the file holds values to it, or a function named for it
    returns it (``derive_max_model_len``), more is let by than was worked out."""
    out: list[Finding] = []
    for r in regions:
        if r.removed:
            continue  # (lines added, nothing taken: an in-place edit is :func:`bounds_raised`'s)
        for n in r.lines:
            line = edit.lines[n - 1]
            if not _SCALED.match(line):
                continue  # (most added lines: no name given a multiple of itself)
            name, grows = _scaled(line)
            words = _words(name)
            upper, lower = not _UPPER_WORDS.isdisjoint(words), not _LOWER_WORDS.isdisjoint(words)
            if not name or upper == lower or grows != upper:
                continue
            where = _returned_as_bound(edit, name, n) or _held_to(edit, name, n, local=True)
            if where:
                detail = f"`{name}` scaled: {where} lets more by"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


# ``x *= 4``, ``x = x * 4``: a name given a multiple or a shift of itself, by the text.
_SCALED = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:(?:[-+*/]|//|<<|>>)=|=\s*\1\s*(?:[-+*/]|//|<<|>>))")


def _scaled(line: str) -> tuple[str, bool | None]:
    """(the name, whether it grows) of ``x = x * 4``, ``x *= 4``, ``x += 256``, ``x //= 2``: a name given a
    multiple or a shift of itself by a positive number; ("", None) else."""
    found = _self_scaled(_one_statement(code_of(line).strip()))
    if found is None:
        return "", None
    name, op, by = found
    number = _folded(by) if not isinstance(by, ast.Constant) or not isinstance(by.value, float) else by.value
    if number is None or number <= 0:
        return "", None
    if isinstance(op, (ast.Add, ast.LShift)) or (isinstance(op, ast.Mult) and number > 1):
        return name, True
    if isinstance(op, (ast.Sub, ast.RShift)) or (isinstance(op, (ast.Div, ast.FloorDiv)) and number > 1):
        return name, False
    return "", None


def _self_scaled(stmt: ast.stmt | None) -> tuple[str, ast.operator, ast.expr] | None:
    """(the name, the operator, the operand) of ``x op= v`` or ``x = x op v``; ``None`` else."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id, stmt.op, stmt.value
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.BinOp)):
        return None
    target = stmt.targets[0]
    if not isinstance(target, ast.Name) or last_name(stmt.value.left) != target.id:
        return None
    return target.id, stmt.value.op, stmt.value.right


def _returned_as_bound(edit: Edit, name: str, n: int) -> str:
    """How the function around line ``n``, named for a bound (``derive_max_model_len``), returns ``name``
    (alone or first of a tuple), or ""."""
    function = _function_at(edit, n).rsplit(".", 1)[-1]
    if _BOUND_WORDS.isdisjoint(_words(function)):
        return ""
    scope = innermost_def(edit.st.defs.values(), n)
    for node in ast.walk(scope) if scope is not None else ():
        value = node.value if isinstance(node, ast.Return) else None
        first = value.elts[0] if isinstance(value, ast.Tuple) and value.elts else value
        if isinstance(first, ast.Name) and first.id == name:
            return f"what `{function}` returns"
    return ""


def declared_bounds_moved(regions: Sequence[Region], edit: Edit) -> list[Finding]:
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
    return _innermost_call(tree, n, lambda call: any(k.value.lineno == n for k in call.keywords))


def _innermost_call(tree: ast.Module | None, n: int, holds: Callable[[ast.Call], bool]) -> ast.Call | None:
    """The call over line ``n`` that ``holds`` and opens last (the innermost where such calls nest): only the
    expressions of the statements over the line are walked."""
    found = None
    for node in (e for stmt in nodes_at(tree, {n}) for e in _expressions(stmt)):
        if isinstance(node, ast.Call) and holds(node):
            found = node if found is None or node.lineno >= found.lineno else found
    return found


def _expressions(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of ``stmt`` outside the statements in its blocks (which :func:`.change.nodes_at` yields)."""
    for child in ast.iter_child_nodes(stmt):
        if isinstance(child, (ast.ExceptHandler, ast.match_case)):
            yield from (x for part in ast.iter_child_nodes(child) if not isinstance(part, ast.stmt)
                        for x in ast.walk(part))  # fmt: skip
        elif not isinstance(child, ast.stmt):
            yield from ast.walk(child)


def _assigned(line: str) -> tuple[str, ast.expr | None]:
    """(target, value) of a line that assigns one value (``x = v``, ``self.x: int = v``); ("", None) else."""
    try:
        tree = ast.parse(code_of(line).strip())
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
    old, new = _version(was), _version(now)
    if old is not None and new is not None:  # (``MIN_CUDA = "13.0"`` → ``"12.8"``)
        return new > old if upper else new < old
    op: ast.cmpop = ast.LtE() if upper else ast.GtE()
    q = ast.Name("_bounded_value_")
    if isinstance(was, ast.IfExp) and isinstance(
        now, ast.IfExp
    ):  # ``int(sr * d) if d is not None else None``
        alike = ast.dump(was.test) == ast.dump(now.test) and ast.dump(was.orelse) == ast.dump(now.orelse)
        was, now = (was.body, now.body) if alike else (was, now)
    parts: dict[str, ast.Name] = {}  # (what the two read alike, each one number: ``int(os.environ[…])``)
    was, now = _as_quantity(was, parts), _as_quantity(now, parts)
    found = compare(ast.Compare(q, [op], [was]), ast.Compare(q, [op], [now]))
    return found is not None and found.more and not found.fewer


def _version(value: ast.expr) -> Version | None:
    """The version a string literal spells (``"13.0"``), else ``None``."""
    from packaging.version import InvalidVersion, Version

    if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
        return None
    try:
        return Version(value.value)
    except InvalidVersion:
        return None


def _as_quantity(value: ast.expr, parts: dict[str, ast.Name]) -> ast.expr:
    """A copy of ``value`` with each call (but ``min``, ``max``, ``abs``), item and attribute read as one
    number of its own, the same wherever it is written alike (``parts``)."""

    class _Parts(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            if isinstance(node.func, ast.Name) and node.func.id in ("min", "max", "abs"):
                return self.generic_visit(node)
            if last_name(node.func) in _MONOTONE and len(node.args) == 1 and not node.keywords:
                return self.visit(node.args[0])  # type: ignore[no-any-return]  # ``int(x)``: as ``x`` orders
            return self._part(node)

        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            return self._part(node)

        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            return self._part(node)

        def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
            folded = _folded(node)  # (``1 << 20``, ``64 * 1024``: the number it is)
            return ast.Constant(folded) if folded is not None else self.generic_visit(node)

        def _part(self, node: ast.expr) -> ast.Name:
            return parts.setdefault(ast.dump(node), ast.Name(f"_part{len(parts)}_"))

    return _Parts().visit(copy.deepcopy(value))  # type: ignore[no-any-return]


# Conversions that keep the order of what they convert (a larger value stays at least as large).
_MONOTONE = frozenset({"int", "float", "round", "ceil", "floor", "trunc"})


_FOLDED: dict[type, Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.LShift: lambda a, b: a << b if 0 <= b <= 64 else 0,
    ast.Pow: lambda a, b: a**b if 0 <= b <= 64 and abs(a) <= 1024 else 0,
}


def _folded(node: ast.expr) -> int | None:
    """The whole number an expression of whole numbers written out stands for (``1 << 20``, ``2 ** 16``,
    ``64 * 1024``), or ``None``."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, int) and not isinstance(node.value, bool) else None
    if not isinstance(node, ast.BinOp) or type(node.op) not in _FOLDED:
        return None
    left, right = _folded(node.left), _folded(node.right)
    if left is None or right is None:
        return None
    return _FOLDED[type(node.op)](left, right) or None


def _held_to(edit: Edit, name: str, n: int, local: bool) -> str:
    """Where the file holds values to the bound ``name`` (in the function of line ``n`` when it is a
    ``local``): a test of an ``if``, ``while`` or ``assert`` that compares with it — or with a name it bounds
    (``BLOCK_N = min(MAX_FUSED_SIZE, …)`` over ``if group_size > BLOCK_N: raise``) —, an answer returned
    that does (``return num_tokens <= _MAX_TOKENS and …``), or a call handed it as a bound
    (``max_duration_s=self.max_duration_s``); "" when none does."""
    scope: ast.AST | None = edit.st.tree
    if local and scope is not None:
        scope = innermost_def(edit.st.defs.values(), n)
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
    if isinstance(node, ast.Call) and _clamps_to(node, name):  # ``min(n, _MAX_REQUESTS)``
        return f"the clamp `{_short(node)}`"
    return ""


def _clamps_to(node: ast.Call, name: str) -> bool:
    """Whether ``node`` is ``min(…)`` or ``max(…)`` of values, ``name`` itself one of them."""
    func = node.func
    if not (isinstance(func, ast.Name) and func.id in ("min", "max")):
        return False
    return len(node.args) > 1 and any(last_name(a) == name for a in node.args)


def _bounded_by(scope: ast.AST, name: str) -> set[str]:
    """``name`` and the names of ``scope`` given a value worked out of it (``block = min(name, 1024)``)."""
    names = {name}
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and _reads_name(node.value, name):
            names.add(last_name(node.targets[0]))
    return names


def _bounding(keyword: str | None) -> bool:
    """Whether a call's keyword is named for a bound (``max_duration_s=``, ``min_tokens=``)."""
    return keyword is not None and not _BOUND_WORDS.isdisjoint(_words(keyword))


def _reads_name(node: ast.AST, name: str) -> bool:
    """Whether ``node`` reads ``name`` (a name, or an attribute of that name)."""
    return any(
        (isinstance(x, ast.Name) and x.id == name) or (isinstance(x, ast.Attribute) and x.attr == name)
        for x in ast.walk(node)
    )


def _compares_with(test: ast.expr, names: set[str]) -> bool:
    """Whether ``test`` orders something against one of ``names`` (``<``, ``<=``, ``>``, ``>=``), or asks
    whether one is met (``is_cuda_version_at_least(MIN_CUDA)``)."""
    return any(
        (
            isinstance(c, ast.Compare)
            and any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in c.ops)
            and any(_reads_name(side, name) for side in (c.left, *c.comparators) for name in names)
        )
        or (
            isinstance(c, ast.Call)
            and _asks_minimum(last_name(c.func))
            and any(_reads_name(a, name) for a in c.args for name in names)
        )
        for c in ast.walk(test)
    )


def _named_number(line: str) -> tuple[str, ast.Constant | None]:
    """(``NAME``, its number) of ``NAME = 2048`` (a name in capitals: a limit); ("", None) else."""
    target, value = _decision(code_of(line))
    name = target.rsplit(".", 1)[-1]
    if not name or name == "return" or name.upper() != name or not isinstance(value, ast.Constant):
        return "", None
    number = value.value
    return (name, value) if isinstance(number, (int, float)) and not isinstance(number, bool) else ("", None)


def _comparisons_of(edit: Edit, name: str) -> Iterator[tuple[bool, ast.expr]]:
    """(whether it refuses: never, here, the condition) for each condition of the file that compares with
    ``name`` in what a deciding function returns."""
    for node in ast.walk(edit.st.tree) if edit.st.tree is not None else ():
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        compares = any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value))
        if compares and _DECIDING & _words(_function_at(edit, node.lineno)):
            yield False, node.value


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
    listed = "[" in old or "{" in old
    if listed and _KEYWORD_LINE.match(old) and new.count(",") > old.count(","):
        return True  # (a keyword of a call over several lines handed a collection, grown: the call is above)
    return bool(lost) or (listed and not _DECLARING.isdisjoint(re.findall(r"[a-z]+", old.lower())))


_KEYWORD_LINE = re.compile(r"^\s*\w+\s*=(?!=)")


# Words of a call that declares what is let by: named for what it allows, or for what something can do
# (``MLAPlanCapabilities(output_scales=frozenset({"none"}))``): a set it is handed, grown, claims more.
_DECLARING = _ALLOWING | {"capabilities", "capability"}


_KEYWORD = re.compile(r"(\w+)\s*=(?!=)")


def _error_answer_flipped(old: str, edit: Edit, n: int) -> str:
    """In an ``except`` block, the answer the error path gives flipped from no to yes (``ok = False`` →
    ``ok = True``, ``return False`` → ``return True``): when the check cannot be made, it now passes."""
    flips = code_of(old).rstrip().endswith("False") and code_of(edit.lines[n - 1]).rstrip().endswith("True")
    if not flips:
        return ""  # (the text says first)
    was, now = _decision(code_of(old)), _decision(code_of(edit.lines[n - 1]))
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
    text = code_of(line).strip().removeprefix("@")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    stmt = tree.body[0] if len(tree.body) == 1 else None
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign, ast.Return)) else None
    return value if isinstance(value, ast.Call) else None


def _calls_at(old: str, new: str, edit: Edit, n: int) -> tuple[ast.Call | None, ast.Call | None]:
    """The calls two versions of line ``n`` make — or, the line one keyword argument of a call open over
    several lines (:func:`_open_call_above`), that keyword as a call of its own."""
    if _open_call_above(edit.lines, n):
        around = _call_spanning(edit.st.tree, n)
        func = around.func if around is not None else None
        olds, news = code_of(old).strip(), code_of(new).strip()
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
    return _innermost_call(tree, n, lambda call: call.lineno < n <= (call.end_lineno or call.lineno))


def _open_call_above(lines: Sequence[str], n: int) -> bool:
    """Whether line ``n`` stands inside a call's parentheses opened on a line above it (by brackets)."""
    k = _opener_above(lines, n)
    return k is not None and code_of(lines[k - 1]).rstrip().endswith(("(", ","))


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


def _unsafe_now(edit: Edit, old_line: int, n: int) -> str:
    """:func:`_safe_variant_dropped` of the statements that begin at pristine ``old_line`` and installed line
    ``n`` (a call over several lines read whole)."""
    if edit.before is None:
        return ""
    old = _one_line(_statement(split_lines(edit.before), old_line - 1))
    return _safe_variant_dropped(_call_of(old), _call_of(_one_line(_statement(edit.lines, n - 1))))


def _call_words(func: ast.expr) -> set[str]:
    """The words of a callee's last name, snake_case and CamelCase split (``ImmutableSandboxedEnvironment``
    → immutable, sandboxed, environment)."""
    name = last_name(func)
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
    return f"`{last_name(old.func)}` no longer given `{guarding[0]}=`: what it kept safe is not"


def _list_grown(old: ast.Call, new: ast.Call) -> str:
    """The one literal list, tuple or set argument of a call named for what is supported or allowed — or
    handed as a keyword so named (``get_nvcc_flags_list(supported_major_versions=[9, 10])``) — given more
    items."""
    pairs = [(what, unwrapped(a), unwrapped(b)) for what, a, b in _arguments_changed(old, new)]
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
    name = last_name(old.func)
    allowing = not _DECLARING.isdisjoint(_words(name.lower()) | _call_words(old.func))
    if len(old.args) != len(new.args) or [k.arg for k in old.keywords] != [k.arg for k in new.keywords]:
        return []
    pairs = [(name, a, b) for a, b in zip(old.args, new.args, strict=True) if allowing]
    pairs += [
        (k.arg, k.value, n.value)
        for k, n in zip(old.keywords, new.keywords, strict=True)
        if k.arg and (allowing or not _DECLARING.isdisjoint(_words(k.arg.lower())))
    ]
    return [(what, a, b) for what, a, b in pairs if ast.dump(a) != ast.dump(b)]


def _guarding(keyword: ast.keyword) -> bool:
    """A keyword that keeps a call safe: the ``mask`` of a masked load or store (its bounds), or a checking
    flag given ``True`` (``strict=True``, ``weights_only=True``): dropped, the call does without."""
    if keyword.arg is None:
        return False
    on = isinstance(keyword.value, ast.Constant) and keyword.value.value is True
    return keyword.arg == "mask" or (on and _turns_off(keyword.arg, False))


def _asks_minimum(name: str) -> bool:
    """Whether a call named ``name`` asks if a minimum is met: a predicate (``has_device_capability``,
    ``meets_min_version``) or an ``is_`` one that says so (``is_triton_available``, ``is_sm_at_least``),
    or ``version_at_least`` — not ``min``/``max`` themselves, nor ``is_device_capability`` (an equality)."""
    words = name.lower().strip("_").split("_")
    if words[0] in ("has", "supports", "meets", "satisfies"):
        return True
    asked = {"least", "minimum", "min"}
    return (len(words) > 1 and not asked.isdisjoint(words)) or (words[0] == "is" and "available" in words)


def _one_literal_changed(old: str, new: str) -> tuple[str, str, str | None] | None:
    """(the literal before, after, the name of the call it is an argument of — ``None`` for the value of a
    ``return``) when one number or string is all that differs between two lines of code; else ``None``."""
    if _LITERAL.sub("#", code_of(old)).split() != _LITERAL.sub("#", code_of(new)).split():
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
