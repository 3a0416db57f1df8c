"""What refuses, read from code: a ``raise`` and the guard above it, handlers and what they let go, answers
that say no, the pristine statements an edit took away (:class:`_Gone`). Shared by every reading of
:mod:`patchguard.analysis.meanings`."""

from __future__ import annotations

import ast
import builtins
import collections
import functools
import keyword
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ...diffs import split_lines
from ...model import Finding, Kind, RuleId, Severity
from ..change import STRING_LITERAL, Edit, code_of, innermost_def, last_name, locate, nodes_at
from ..families import (
    CHECKING_CALL,
    CHECKING_FLAG_WORDS,
    LENIENT_FLAG_WORDS,
)
from ..reach.calls import statements_in
from ..rules import (
    LOG_METHODS,
)
from ..structure import Region, Scope, Structure

__all__ = ["Guard"]


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


@functools.lru_cache(maxsize=4)  # the pristine and the installed text: for removed checks, clamps, handlers
def _squeezed_source(source: str) -> str:
    """A file's code without comments or whitespace: where a statement is looked for by its text."""
    return _squeeze("".join(map(code_of, split_lines(source))))


def _docstring(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = node.body[0]
    return int(isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant))


def _check_finding(edit: Edit, rule: RuleId, line: int, message: str) -> Finding:
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


def _short(test: ast.expr) -> str:
    return " ".join(ast.unparse(test).split())[:60]


# Words of a flag that says whether something may be done: ``_jit_mix_ok``, ``fast_path_supported``.
_FLAG_WORDS = frozenset(
    {"ok", "supported", "supports", "allowed", "valid", "eligible", "compatible", "usable"}
)


def _opener_above(lines: Sequence[str], n: int) -> int | None:
    """The line above ``n`` whose bracket, left open, holds line ``n`` (forty lines up at most); ``None``."""
    depth = 0
    for k in range(n - 1, max(n - 40, 0), -1):
        text = code_of(lines[k - 1])
        depth += sum(text.count(c) for c in ")]}") - sum(text.count(c) for c in "([{")
        if depth < 0:
            return k
    return None


_LITERALS = (ast.List, ast.Tuple, ast.Set)


def unwrapped(value: ast.expr) -> ast.expr:
    """The literal a ``frozenset(…)``, ``set(…)``, ``tuple(…)`` or ``list(…)`` of one is made from."""
    wrapper = isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _WRAPPERS
    return value.args[0] if wrapper and len(value.args) == 1 and not value.keywords else value  # type: ignore[attr-defined]


_WRAPPERS = frozenset({"frozenset", "set", "tuple", "list"})


_Literal = ast.List | ast.Tuple | ast.Set


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
    name = last_name(call.func)
    return bool(name) and _RAISING_NAME.fullmatch(name) is not None


_RAISING_NAME = re.compile(CHECKING_CALL)


def _one_line(statement: str) -> str:
    """A statement's lines joined, without comments."""
    return " ".join("".join(code_of(line + "\n") for line in statement.splitlines()).split())


def _number(node: ast.expr) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return -inner if inner is not None else None
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


# What a call that answers a question is named: a predicate (``is_*``, ``has_*``…), or one of these.
_ASKING = ("is_", "has_", "are_", "can_", "should_", "supports")


def _name_ids(node: ast.AST) -> set[str]:
    """The names a node reads or binds (taking a clamp off leaves no new one)."""
    return {x.id for x in ast.walk(node) if isinstance(x, ast.Name)}


# Words of a function whose answer is what is let through (``get_supported_dtypes``, ``allowed_backends``,
# ``supports_compute_capability``, ``can_implement``).
_ALLOWING = frozenset(
    {
        "support",
        "supported",
        "supports",
        "allowed",
        "allows",
        "valid",
        "accepted",
        "compatible",
        "permitted",
        "can",
    }
    | {"admits", "admitted", "accepts", "fits", "eligible", "usable", "applicable"}
)


def _answers_admission(function: str) -> bool:
    """Whether a function says whether something may go ahead: named for what it allows
    (``supports_fp8``, ``fits``), or a predicate of what is ready or available (``is_*_ready``,
    ``is_trainable``, ``can_implement``) or of a path to use (``should_use_*``)."""
    words = _words(function)
    asks = function.lstrip("_").startswith(_ASKING)
    # (``is_launchable``, ``_is_dispatchable``: a predicate of what something can be, by its ending)
    able = any(w.endswith(("able", "ible")) for w in words)
    # (``should_use_zentorch_sdpa``: whether a path is to be taken — as a flag named ``use_*`` picks one)
    return not _ALLOWING.isdisjoint(words) or (asks and (bool(_READY & words) or able or "use" in words))


# What a predicate asks when it says whether a path may be taken (``is_mega_moe_ready``, ``is_trainable``).
_READY = frozenset({"ready", "available", "trainable", "capable", "feasible"})


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


# Words of a function whose answer decides whether something may be done (``should_use_mega_gate``).
_DECIDING = _ALLOWING | {"should", "use", "enable", "eligible"}


def _words(name: str) -> set[str]:
    return {w for w in name.lower().split("_") if w}


def _turns_off(name: str, value: bool) -> bool:
    low = name.lower()
    if any(word in low for word in LENIENT_FLAG_WORDS):
        return value
    return not value and any(word in low for word in CHECKING_FLAG_WORDS)


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
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:  # ``supports_x: bool = …``
        return ast.unparse(stmt.target), stmt.value
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


def _answers_no(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Constant) and stmt.value.value is False


def _function_at(edit: Edit, line: int) -> str:
    return (edit.st.qualname_at(line) or "").rsplit(".", 1)[-1]


def _passes_a_refusal(tree: ast.Module | None, line: int) -> bool:
    """Whether the ``if`` at ``line`` lets a case by a refusal: its body leaves (``continue``, ``return``,
    ``break``) refusing nothing, and a later statement of the same block refuses (raises, asserts, warns)
    — ``if declared == wanted: continue`` before the ``raise`` of a mismatch."""
    around = list(nodes_at(tree, {line}))  # outermost first: the ``if``'s block is its parent's
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


def _header_at(tree: ast.Module | None, line: int, kind: type[ast.stmt]) -> ast.stmt | None:
    """The statement of ``kind`` whose header is at ``line``."""
    return next((n for n in nodes_at(tree, {line}) if isinstance(n, kind) and n.lineno == line), None)


def _output_only(stmt: ast.stmt) -> bool:
    """A statement that only prints or logs."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in _OUTPUT_CALLS


# What prints or logs, by the last name called (``print`` itself named by the builtin).
_OUTPUT_CALLS = LOG_METHODS | {print.__name__, "pprint"}


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
_REFUSING = frozenset({"abort", "reject", "fail", "refuse", "deny", "failure"})


_FAILING = frozenset({"fail", "failure", "failed"})  # (of those, the words of a failure reported)


def _raised_again(raised: ast.Raise) -> bool:
    """Whether a ``raise`` passes on an error that happened before it: raised from one held (``raise
    RuntimeError(…) from self.error``), one held raised again (``raise self.engine_client.dead_error``), one
    kept fetched (``raise errors[0]``)."""
    if raised.cause is not None and not isinstance(raised.cause, ast.Constant):
        return True
    if isinstance(raised.exc, (ast.Name, ast.Attribute)) and _tests_a_report(raised.exc):
        return True
    return _fetched(raised.exc)


def latched(fn: ast.FunctionDef | ast.AsyncFunctionDef, node: ast.If) -> bool:
    """Whether ``if T: return``, a statement of ``fn``'s body, is a latch: a later statement of the body makes
    ``T`` hold — ``T = True``, or, ``T`` being ``k in S``, ``S.add(k)`` or ``S[k] = …`` — a function's way of
    doing the rest once (per key), no check."""
    if node not in fn.body or node.orelse or len(node.body) != 1:
        return False
    if not (isinstance(node.body[0], ast.Return) and node.body[0].value is None):
        return False
    test = node.test
    later = fn.body[fn.body.index(node) + 1 :]
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In):
        key, held = ast.unparse(test.left), ast.unparse(test.comparators[0])
        return any(_adds(s, key, held) for s in later)
    flag = ast.unparse(test)  # (as written: a target's context is not a test's)
    return any(
        isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant) and s.value.value is True
        and [ast.unparse(t) for t in s.targets] == [flag]
        for s in later
    )  # fmt: skip


def _adds(stmt: ast.stmt, key: str, held: str) -> bool:
    """``S.add(k)``, ``S.append(k)`` or ``S[k] = …`` (``key``, ``held``: ``k`` and ``S`` as written)."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        func = call.func
        adding = isinstance(func, ast.Attribute) and func.attr in ("add", "append")
        return adding and ast.unparse(func.value) == held and [ast.unparse(a) for a in call.args] == [key]  # type: ignore[attr-defined]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else []
    subscripts = [t for t in targets if isinstance(t, ast.Subscript)]
    return any(ast.unparse(t.value) == held and ast.unparse(t.slice) == key for t in subscripts)


def _fetched(exc: ast.expr | None) -> bool:
    """Whether a raised error is fetched from where it was kept rather than made at the raise: an item
    (``errors[0]``), or what a call of no class gives (``next(iter(failures.values()))``, ``errors.pop()``)
    — an exception is made by calling its class, whose name is capitalized."""
    if isinstance(exc, ast.Subscript):
        return True
    if not isinstance(exc, ast.Call):
        return False
    name = last_name(exc.func)
    return bool(name) and not name[0].isupper()


def _says_it_failed(raised: ast.Raise) -> bool:
    """Whether a raise's message says something that was done failed (``"Failed to stop the thread"``,
    ``"could not connect"``, ``"timed out"``) — a failure that happened, not an input refused."""
    exc = raised.exc
    message = exc.args[0] if isinstance(exc, ast.Call) and exc.args else None
    parts = message.values if isinstance(message, ast.JoinedStr) else [message]
    text = " ".join(p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str))
    return _FAILED.search(text) is not None


# What a message says when something done failed (not what an input is refused for).
_FAILED = re.compile(
    r"\b(?:failed|could not|couldn't|unable to|timed out|did not (?:stop|finish|respond))\b", re.I
)


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
    return not _REFUSED.isdisjoint(_words(last_name(func.value)))


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


def _a_value_named(text: str) -> bool:
    """Whether a string names a value (a backend, a dtype, a mode: ``"flashinfer"``, ``"fp8_e4m3"``) — not a
    message, nor a reason code that says no (``"num_tokens_not_allowlisted"``, ``"unsupported_dtype"``)."""
    return bool(_IDENTIFIER_LIKE.fullmatch(text)) and _SAYS_NO.isdisjoint(re.split(r"[\W_]+", text.lower()))


_IDENTIFIER_LIKE = re.compile(r"[A-Za-z_][\w.:/-]*")
# Words of a reason code that refuses.
_SAYS_NO = frozenset(
    {"not", "no", "non", "unsupported", "invalid", "unavailable", "disabled", "failed", "error", "denied"}
    | {"missing", "mismatch", "too", "exceeds", "unknown", "forbidden", "rejected", "incompatible"}
)


def _refused_by_value(value: ast.expr) -> bool:
    """Whether a returned value says the case is refused: a message, a "no" and its reason, an answer made
    to say no, an error made and handed back."""
    if isinstance(value, ast.JoinedStr):
        return True
    if isinstance(value, ast.Constant):  # a message or a reason, not a value's name (``return "flashinfer"``)
        return isinstance(value.value, str) and not _a_value_named(value.value)
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
        fn = innermost_def(self.before.defs.values() if self.before is not None else (), line)
        nodes = list(statements_in(fn))
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
        if self.concludes_failure(line):
            return "the failure it reported goes unseen"
        return "the failure it passed on goes unseen" if self.reports_failure(line) else ""

    def concludes_failure(self, line: int) -> bool:
        """Whether pristine ``line`` is a call named for ending the work in failure (``self.conclude_failure(
        room, reason)``, ``req.mark_failed()``): what went wrong is reported there."""
        if self.before is None or self.before.tree is None:
            return False
        nodes = list(nodes_at(self.before.tree, {line}))
        stmt = next((n for n in reversed(nodes) if isinstance(n, ast.Expr) and n.lineno == line), None)
        call = stmt.value if stmt is not None and isinstance(stmt.value, ast.Call) else None
        return call is not None and not _FAILING.isdisjoint(_words(last_name(call.func)))

    def raiser(self, line: int) -> bool:
        """Whether pristine ``line`` is the ``raise`` that is the whole body of its function
        (``def failure_exception(self): raise …``, a template's ``raise_exception(message)``)."""
        if self.before is None or self.before.tree is None:
            return False
        fn = innermost_def(self.before.defs.values(), line)
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
        nodes = list(nodes_at(self.before.tree, {line}))
        raised = nodes[-1] if nodes else None
        if not isinstance(raised, ast.Raise) or raised.lineno != line:
            return False
        if _raised_again(raised):
            return True
        guard = nodes[-2] if len(nodes) >= 2 and isinstance(nodes[-2], ast.If) else None
        if guard is None or raised not in guard.body:
            return False
        # (``raise RuntimeError("Failed to stop the thread cleanly")``: what happened, by its message)
        return _says_it_failed(raised) or self._tests_failures(guard, line)

    def _tests_failures(self, guard: ast.If, line: int) -> bool:
        """Whether the pristine ``guard`` around ``line`` tests what a call reported, or what the function's
        ``except`` blocks collected."""
        assert self.before is not None
        fn = innermost_def(self.before.defs.values(), line)
        return _tests_a_report(guard.test) or (fn is not None and _filled_by_handlers(fn, guard.test))

    def unhandled_case(self, line: int) -> bool:
        """Whether pristine ``line`` is a ``raise`` that answers the case nobody handled: the whole ``else``
        of an ``if``/``elif`` chain whose branches do the work (``else: raise NotImplementedError(…)``), or
        a function's last statement below an ``if`` whose branches return. Replaced by a default or a
        warning, the error it raised is silenced, not only its check."""
        if self.before is None or self.before.tree is None:
            return False
        nodes = list(nodes_at(self.before.tree, {line}))
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
    def of(cls, edit: Edit) -> _Gone:
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
                n for n in nodes_at(self.before.tree, {line})
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
        if not self._bail_out_gone(node, line):
            return ""
        word = type(node.body[-1]).__name__.lower()
        return f"`if {ast.unparse(node.test)[:60]}:` no longer does `{word}`: what it guarded runs"

    def _bail_out_gone(self, node: ast.If, line: int) -> bool:
        """Whether the pristine ``if`` at ``line`` bails out and is gone: not an answer returned early (``if
        cached is not None: return cached``: a dispatch), not a latch (what runs every call now is the
        engine's to report, by its rules), not kept elsewhere."""
        return _bails(node) and not self._latch(node) and not self._guard_lives_on(node, line)

    def _latch(self, node: ast.If) -> bool:
        """Whether a pristine bail-out is a latch (:func:`latched`)."""
        fn = innermost_def(self.before.defs.values(), node.lineno) if self.before is not None else None
        return fn is not None and latched(fn, node)

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
        if fn is None:
            return False
        return _raises_on(fn, test) or _guard_folded(node, fn, pristine) or _inverted_in(fn, node.test)

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
        guard = self._guard(line)
        names = _tested_names(statement, guard)
        if not names:
            return False
        pristine = "".join(self.before_lines)
        if any(not _binds_attribute(a, pristine) for a in _own_attributes(statement, guard)):
            return False  # (``self.model_tokenizer`` a base class sets: the object still has it)
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
                out |= set(_NAME_WORD.findall(STRING_LITERAL.sub(" ", made[0]))) - _NOT_SUBJECTS
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
    tested = {last_name(n) for n in ast.walk(test) if isinstance(n, (ast.Name, ast.Attribute))}
    return any(not _FAILURE_WORDS.isdisjoint(_words(name)) for name in tested if name)


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
        spans = nodes_at(st.tree, {scope.end})
        root = next((n for n in spans if isinstance(n, _SCOPES) and (n.end_lineno or 0) == scope.end), None)
    out: collections.Counter[Guard] = collections.Counter()
    for node in statements_in(root):
        if isinstance(node, ast.If) and _no_else(node) and isinstance(node.body[-1], _EXIT_NODES):
            out[(where, ast.dump(node.test), type(node.body[-1]).__name__)] += 1
    return out


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _raises_on(fn: ast.FunctionDef | ast.AsyncFunctionDef, test: str) -> bool:
    """Whether ``fn`` has an ``if`` on the test ``test`` (its dump) whose body raises: the guard refuses
    now (``if not found: raise …``), stricter, not taken out."""
    ifs = (n for n in statements_in(fn) if isinstance(n, ast.If))
    return any(ast.dump(n.test) == test and _guards_raise_node(n) for n in ifs)


def _kept_wider(guards: collections.Counter[Guard], key: Guard) -> bool:
    """Whether a guard of the same def leaves the same way on a test that holds the old one (``… or n >
    cap``)."""
    return any(k[2] == key[2] and key[1] in k[1] for k in guards)


def _inverted_in(fn: ast.FunctionDef | ast.AsyncFunctionDef, test: ast.expr) -> bool:
    """Whether ``fn`` tests the opposite of a bail-out's ``test`` in an ``if`` of its own: ``if not ready:
    return ids`` made ``if ready: ids = translate(ids)`` — the guard turned round to hold what it let by."""
    negated = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else None
    wanted = ast.dump(negated) if negated is not None else ast.dump(ast.UnaryOp(ast.Not(), test))
    return any(isinstance(n, ast.If) and ast.dump(n.test) == wanted for n in ast.walk(fn))


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
    16``). A stand-in for what it tested when that is empty (``(kv_params or {}).get(k)``) decides it too."""
    if fn is None:
        return False
    kinds = (ast.IfExp, ast.Return, ast.comprehension, ast.BoolOp)
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
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):  # ``(kv_params or {}).get(k)``
        first, last = node.values[0], node.values[-1]
        subject = isinstance(first, (ast.Name, ast.Attribute)) and ast.unparse(first) in tested
        return subject and len(node.values) == 2 and _a_stand_in(last)
    decided = node.value if isinstance(node, ast.Return) else None
    return isinstance(decided, (ast.Compare, ast.BoolOp, ast.UnaryOp)) and bool(_names_in(decided) & tested)


def _a_stand_in(value: ast.expr) -> bool:
    """A value written out to stand in for an empty one: a constant, an empty literal, ``dict()``."""
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
        return not (value.keys if isinstance(value, ast.Dict) else value.elts)
    return isinstance(value, ast.Call) and not value.args and not value.keywords


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
    if _search_stops(node):
        return False  # ``if lib is not None: break``: a search stops where it found what it looked for
    if len(node.body) > 1:  # it says something first — not work done, then left (a branch of a dispatch)
        return all(_output_only(s) or _refusal(s) or _notes(s) for s in node.body[:-1])
    if isinstance(value, ast.Constant) and _answers_by_case(node, value):
        return False  # ``if dt == bf16: return "bfloat16" elif dt == fp16: return "float16"``: a lookup
    if value is None or _refusal(last):  # ``return f"… must be non-negative"``
        return True
    if isinstance(value, ast.Constant):  # (a value's name handed back, ``return "float16"``: an answer)
        return not (isinstance(value.value, str) and _a_value_named(value.value))
    if isinstance(value, (*_LITERALS, ast.Dict)) and not _items(value):
        return True
    return _tests_nothing(node.test)


def _search_stops(node: ast.If) -> bool:
    """``if found is not None: break``: a loop leaves once it has what it looked for."""
    return len(node.body) == 1 and isinstance(node.body[0], ast.Break) and _found(node.test)


def _found(test: ast.expr) -> bool:
    """Whether a test asks that something be there: ``x is not None``, ``x``, ``bool(x)``."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot):
        right = test.comparators[0]
        return isinstance(right, ast.Constant) and right.value is None
    return isinstance(test, (ast.Name, ast.Attribute))


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


def _own_attributes(statement: str, guard: str) -> set[str]:
    """The attributes of ``self``/``cls`` a check tests (``if not self.model_tokenizer: raise``)."""
    tree = _check_tree(statement, guard)
    nodes = ast.walk(tree) if tree is not None else ()
    return {n.attr for n in nodes if isinstance(n, ast.Attribute) and _named(n.value, "self", "cls")}


def _named(node: ast.expr, *names: str) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _binds_attribute(name: str, text: str) -> bool:
    """Whether a file gives its objects the attribute ``name`` (``self.name = …``, ``name: int = …`` or
    ``def name`` in a class): else they have it from a base class elsewhere, and a check of it that is gone
    did not leave with it."""
    n = re.escape(name)
    found = re.search(rf"\.{n}\s*(?::[^=\n]*)?=(?!=)|^\s*{n}\s*:|^\s*{n}\s*=(?!=)|\bdef\s+{n}\(", text, re.M)
    return found is not None


def _check_tree(statement: str, guard: str) -> ast.Module | None:
    """A check parsed: an ``assert``'s whole statement, a ``raise``'s guard (``None``: neither parses)."""
    text = statement.strip()
    if text.startswith("raise"):
        if not guard:
            return None
        text = guard.replace("elif ", "if ", 1) + " pass"
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None


def _tested_names(statement: str, guard: str) -> set[str]:
    """The names and attributes a check tests: an ``assert``'s whole statement, a ``raise``'s guard."""
    tree = _check_tree(statement, guard)
    if tree is None:
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in _NOT_SUBJECTS:
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
    return found
