"""Errors let go and settings left on: a ``try`` put around code that ran bare, a handler widened, an
error no longer handed on or answered with, a refusal made a retry, a process-wide setting no longer put
back."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Collection, Iterator, Mapping, Sequence

from ...model import Finding, Kind, RuleId, Severity
from ..aliases import resolve
from ..change import Edit, code_of, last_name, locate, nodes_at
from ..families import (
    SUPPRESSORS,
)
from ..reach.calls import statements_in
from ..rules import (
    rule_for_call,
)
from ..structure import Region, Structure
from .refusals import (
    _TARGETED,
    _block_below,
    _caught,
    _check_finding,
    _condition,
    _covers,
    _Gone,
    _handlers_around,
    _header_at,
    _imported,
    _names,
    _one_line,
    _raises,
    _short,
    _squeeze,
    _squeezed_source,
    _statement,
)

__all__ = [
    "error_answers_dropped",
    "errors_handed_back",
    "errors_kept_back",
    "failures_told_as_successes",
    "handlers_widened",
    "new_handlers",
    "refusals_retried",
    "switches_left_on",
]


def new_handlers(
    edit: Edit, changed: set[int], found: Sequence[Finding], regions: Sequence[Region] = ()
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
    taken = _callees_taken(regions, _imported(edit.st))
    for node in nodes:
        if not isinstance(node, ast.Try):
            continue
        wrapped = _wrapped_code(node, edit.lines, *kept, taken=taken)
        flagged = _found_within(node, found)
        for h in node.handlers:
            detail = "" if h.lineno in said or h.lineno not in changed else _let_go(h, wrapped, flagged)
            if detail:
                out.append(_check_finding(edit, RuleId.SWALLOWED_EXCEPTION, h.lineno, detail))
    return out


def _guards_edited(regions: Sequence[Region]) -> tuple[set[int], dict[int, str]]:
    """The lines of regions that replaced an ``except`` or a ``with`` line — a handler (a suppression)
    there was edited, not added (what an edited handler no longer passes on is :func:`removed_checks`' to
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


def handlers_widened(regions: Sequence[Region], edit: Edit) -> list[Finding]:
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


def switches_left_on(regions: Sequence[Region], edit: Edit) -> list[Finding]:
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
            call = _called(code_of(_statement(r.removed, i)))
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


def _new_guards(edit: Edit, changed: set[int], edited: Collection[int] = ()) -> list[ast.Try | ast.With]:
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
        node for node in statements_in(tree)
        if isinstance(node, kinds)
        and (node.lineno in changed or _all_new(getattr(node, "handlers", ()), changed, edited))
    ]  # fmt: skip


def _suppression_opened(edit: Edit, heads: Sequence[str]) -> bool:
    """Whether a changed line (``heads``: their text) opens a ``with`` of a suppressing context manager
    (``contextlib.suppress``, by any name the file binds it to)."""
    withs = [h for h in heads if h.startswith("with ")]
    if not withs:
        return False
    suppressors = {n for q in SUPPRESSORS for n in edit.st.bound_to(q.rsplit(".", 1)[0])}
    return any(not suppressors.isdisjoint(re.findall(r"\w+", h)) for h in withs)


def _new_suppressions(
    edit: Edit,
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
        if suppress is None or (node.lineno in was and _suppressed_before(was[node.lineno], suppress)):
            continue
        wrapped = _wrapped_code(node, edit.lines, *kept)
        if wrapped and _let_go_before(edit, wrapped[0], suppress):
            continue  # (the pristine file let its errors go already: a broader handler around it)
        if wrapped and node.lineno not in said:
            what, by = " ".join(ast.unparse(wrapped[0]).split())[:50], ast.unparse(suppress)[:40]
            detail = f"the errors of `{what}`, which stopped the call, are let go by `{by}`"
            out.append(_check_finding(edit, RuleId.SWALLOWED_EXCEPTION, node.lineno, detail))
    return out


def _let_go_before(edit: Edit, stmt: ast.stmt, suppress: ast.Call) -> bool:
    """Whether the pristine file ran ``stmt`` in a ``try`` whose handler lets go every error ``suppress``
    names, raising nothing (``try: os.remove(p)`` / ``except Exception: pass`` → ``with suppress(
    FileNotFoundError): os.remove(p)``): nothing more is let go than was."""
    before = locate(edit.before).tree if edit.before is not None else None
    text = _squeeze(ast.unparse(stmt))
    names = ", ".join(last_name(a) for a in suppress.args)
    for node in ast.walk(before) if before is not None else ():
        if not isinstance(node, ast.Try) or not any(_squeeze(ast.unparse(s)) == text for s in _within(node)):
            continue
        if any(_lets_go(h, names) for h in node.handlers):
            return True
    return False


def _within(node: ast.Try) -> Iterator[ast.AST]:
    return (s for b in node.body for s in ast.walk(b) if isinstance(s, ast.stmt))


def _lets_go(handler: ast.ExceptHandler, names: str) -> bool:
    """Whether a handler catches at least the errors ``names`` lists (a bare or broad one any) and raises
    nothing."""
    broad = handler.type is None or _caught(handler) in ("Exception", "BaseException")
    return (broad or _covers(handler, f"({names})")) and not _raises(handler)


def _suppressed_before(old: str, suppress: ast.Call) -> bool:
    """Whether the ``with`` line ``old`` suppressed every error ``suppress`` does (``Exception`` covers any
    of its kind): narrowed or kept, nothing more is let go."""
    before = set(re.findall(r"[A-Za-z_]\w*", old.split("suppress", 1)[-1]))
    now = {last_name(a) for a in suppress.args}
    if now <= before or "BaseException" in before:
        return True
    return "Exception" in before and now.isdisjoint({"BaseException", "KeyboardInterrupt", "SystemExit"})


def _found_within(node: ast.Try, found: Sequence[Finding]) -> bool:
    """Whether another rule found something high in a ``try`` body (a dump, a request, a write)."""
    last = max((b.end_lineno or b.lineno) for b in node.body)
    return any(node.lineno <= (f.line or 0) <= last for f in found if f.severity >= Severity.HIGH)


def _wrapped_code(
    node: ast.Try | ast.With,
    lines: Sequence[str],
    pristine: str,
    originals: Collection[str] = (),
    taken: Collection[str] = (),
) -> list[ast.stmt]:
    """The statements of a ``try`` (``with``) body that the pristine file has (squeezed): code that ran bare
    there — the call a statement gives a name too (``yield base, decode(parts)`` → ``scale = decode(parts)``
    in a ``try``) — or that calls the original of what a patch replaces (``_orig_close(self)``, ``_orig_close
    = shm.SharedMemory.close``): code that ran bare in its library; else those that call what the edit took
    out (``taken``: :func:`_callees_taken`)."""
    return _ran_bare_in(node, lines, pristine, originals) or [s for s in node.body if _calls_taken(s, taken)]


def _ran_bare_in(
    node: ast.Try | ast.With, lines: Sequence[str], pristine: str, originals: Collection[str]
) -> list[ast.stmt]:
    return [
        s for s in node.body
        if not isinstance(s, (ast.Import, ast.ImportFrom, ast.Pass))
        and (
            ((t := _squeeze("".join(map(code_of, lines[s.lineno - 1 : s.end_lineno])))) and t in pristine)
            or _calls_one_of(s, originals)
            or (isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and _ran_bare(s.value, pristine))
            or _lookup_ran_bare(s, pristine)
        )
    ]  # fmt: skip


def _lookup_ran_bare(stmt: ast.stmt, pristine: str) -> bool:
    """Whether a statement looks up by a name what the pristine file looked up bare (``self.vocab[token]``
    in a comprehension, now in a ``try``): the lookup's error stopped the call there."""
    return any(
        isinstance(n, ast.Subscript)
        and isinstance(n.slice, (ast.Name, ast.Attribute))
        and _squeeze(ast.unparse(n)) in pristine
        for n in ast.walk(stmt)
    )


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


def _callees_taken(regions: Sequence[Region], modules: Collection[str]) -> frozenset[str]:
    """What the lines a targeted edit took out called by a dotted name of the code's own objects
    (``quant_info.wrapper.run``, not a module's ``json.loads``): code that ran there bare, which a ``try``
    the edit put in may run now (through a helper it wrote: ``_safe_run(…)``)."""
    return frozenset(
        m
        for r in regions
        if len(r.removed) <= _TARGETED
        for old in r.removed
        for m in _DOTTED_CALL.findall(code_of(old))
        if m.split(".", 1)[0] not in modules
    )


_DOTTED_CALL = re.compile(r"((?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*)\s*\(")


def _calls_taken(stmt: ast.stmt, taken: Collection[str]) -> bool:
    """Whether a statement calls one of ``taken`` (dotted names, as written)."""
    return bool(taken) and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and ast.unparse(n.func) in taken
        for n in ast.walk(stmt)
    )


def _calls_one_of(stmt: ast.stmt, names: Collection[str]) -> bool:
    calls = (n for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name))
    return bool(names) and any(c.func.id in names for c in calls)  # type: ignore[attr-defined]


def _let_go(h: ast.ExceptHandler, wrapped: Sequence[ast.stmt], flagged: bool) -> str:
    """What a new handler that does not raise lets go, or "" (one that raises; an ordinary handler of new
    code; one that tells the failure on: ``TransferResult(job_id=j, success=False)``)."""
    if _raises(h) or _parsed_another_way(h, wrapped) or _tells_failure(h):
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


def errors_kept_back(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A handler that handed on what it caught — to a future, a queue, a callback (``fut.set_exception(e)``,
    ``errors.put(e)``), or kept it for later (``self._grammar = e``) — and no longer does
    (``fut.set_result({})``, ``= None``): whoever waited for the error gets a default and never sees it.
    The installed handler that still catches it hands the name on nowhere but to a log line, and raises
    nothing."""
    caught = (
        set(_CAUGHT_AS.findall(edit.before)) if edit.before is not None and "except" in edit.before else set()
    )
    if not caught or not any(_hands_on_text(old, caught) for r in regions for old in r.removed):
        return []  # (no removed line names what an ``except … as e`` caught: no tree asked)
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
            if now is None or _raises(now) or (now.name is not None and _hands_on(now, now.name)):
                continue  # (the handler still there lets it go: it names it nowhere, or only to a log line)
            detail = f"the error caught as `{name}` is no longer handed on: `{old.strip()[:60]}` is gone"
            out.append(_check_finding(edit, RuleId.SWALLOWED_EXCEPTION, max(r.start, 1), detail))
            break
    return out


def error_answers_dropped(regions: Sequence[Region], edit: Edit) -> list[Finding]:
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


def failures_told_as_successes(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A handler that reported the failure it caught and now reports a success: a value named for one
    (``success``, ``ok``) — a parameter of the call by the file's own ``def`` (``state.task_done(False, t)``
    → ``task_done(True, t)``), a keyword, a name — given ``True`` where it was given ``False``. Whoever
    reads the outcome never learns of the error."""
    if edit.before is None or "except" not in edit.before:
        return []
    before = locate(edit.before)
    out: list[Finding] = []
    for r in regions:
        now = next(iter(_handlers_around(edit.st, max(r.start, 1))[-1:]), None)
        was = next(iter(_handlers_around(before, r.old_start)[-1:]), None)
        if not r.removed or not r.lines or now is None or was is None:
            continue
        told = _successes(now, set(r.lines), edit.st.tree)
        said = _successes(was, set(range(r.old_start, r.old_start + len(r.removed))), before.tree)
        flipped = sorted(k for k, v in told.items() if v and said.get(k) is False)
        if flipped:
            detail = f"the failure caught is told as a success now: `{flipped[0][1]}` False → True"
            out.append(_check_finding(edit, RuleId.SWALLOWED_EXCEPTION, r.start, detail))
    return out


def _successes(
    handler: ast.ExceptHandler, lines: set[int], tree: ast.Module | None
) -> dict[tuple[str, str], bool]:
    """(where, the name) → the truth value a handler's statements on ``lines`` give a name for success: a
    call's argument (its parameter by the file's ``def`` of that name, or its keyword), a name assigned."""
    found: dict[tuple[str, str], bool] = {}
    for node in ast.walk(handler):
        end = getattr(node, "end_lineno", 0) or 0
        if not lines.intersection(range(getattr(node, "lineno", 0), end + 1)):
            continue
        where, given = _given(node, tree)
        for name, value in given:
            if _for_success(name) and isinstance(value, ast.Constant) and isinstance(value.value, bool):
                found[(where, name)] = value.value
    return found


def _given(node: ast.AST, tree: ast.Module | None) -> tuple[str, list[tuple[str, ast.expr]]]:
    """(where, the values a node gives, each with the name it is given to): a call's arguments (named by the
    file's ``def`` of the callee, or by their keywords), an assignment's value to each target."""
    if isinstance(node, ast.Call):
        callee = last_name(node.func)
        told = any(isinstance(a, ast.Constant) and isinstance(a.value, bool) for a in node.args)
        names = _parameter_names(tree, callee) if told else []  # (a truth value handed by position)
        given = [(names[i] if i < len(names) else "", a) for i, a in enumerate(node.args)]
        return callee, given + [(k.arg or "", k.value) for k in node.keywords]
    if isinstance(node, ast.Assign):
        return "=", [(last_name(t), node.value) for t in node.targets]
    return "", []


def _tells_failure(h: ast.ExceptHandler) -> bool:
    """Whether a handler gives a value named for success ``False`` (a keyword, a name): it tells the failure
    on rather than letting it go."""
    lines = set(range(h.lineno, (h.end_lineno or h.lineno) + 1))
    return False in _successes(h, lines, None).values()


def _parameter_names(tree: ast.Module | None, name: str) -> list[str]:
    """The parameters of the file's function or method ``name`` (``self``/``cls`` aside) — [] when it has
    none of that name, or more than one."""
    found = _parameters_by_name(tree).get(name, []) if tree is not None and name else []
    if len(found) != 1:
        return []
    names = found[0]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


@functools.lru_cache(maxsize=4)  # (a tree's functions are read once, not per call on a handler's lines)
def _parameters_by_name(tree: ast.Module) -> dict[str, list[list[str]]]:
    """Each function name of a file → the parameter names of each function so named."""
    found: dict[str, list[list[str]]] = {}
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(n.name, []).append([a.arg for a in (*n.args.posonlyargs, *n.args.args)])
    return found


def _for_success(name: str) -> bool:
    return not _SUCCESS_WORDS.isdisjoint(name.lower().strip("_").split("_"))


_SUCCESS_WORDS = frozenset({"success", "succeeded", "successful", "ok", "passed"})


# A ``return`` of what a call named for an error makes (``create_error_response(…)``, ``error_reply(e)``), or
# of an HTTP response told an error status (4xx, 5xx: ``Response("…", status_code=400)``).
_ERROR_ANSWER = re.compile(
    r"^\s*return\s+(?:(?:[\w.]+\.)?\w*(?:error|fail|failure)\w*\(|.*\bstatus(?:_code)?\s*=\s*[45]\d\d\b)",
    re.IGNORECASE,
)


def _handed_on(before: Structure, line: int, text: str) -> str:
    """The name a handler binds what it caught to, when its line ``line`` (``text``) hands that on, or what
    was made of it (``msg = f"… {e}"``): to a call (``fut.set_exception(e)``), into a field (``self.error =
    e``, ``req.to_finish = FINISH_ABORT(msg)``), or back to the caller (``return f"cannot import: {e}"``) —
    not to a log line; "" else."""
    handler = next(iter(_handlers_around(before, line)[-1:]), None)
    name = handler.name if handler is not None else None
    stmt = next((s for s in reversed(list(nodes_at(handler, {line}))) if not hasattr(s, "body")), None)
    call = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
    if not name or handler is None or stmt is None or _logs(text) or (call and _logs(ast.unparse(call.func))):
        return ""  # (a line of a log call over several lines, ``f"… {str(e)}"``, hands on nothing)
    return name if _passes_on(stmt, _made_of(handler, name)) else ""


def _made_of(handler: ast.ExceptHandler, name: str) -> set[str]:
    """``name`` and the local names a handler gives values made of it (``msg = f"… {e}"``), to a fixed
    point."""
    names = {name}
    assigns = [n for n in ast.walk(handler) if isinstance(n, ast.Assign)]
    grew = True
    while grew:
        grew = False
        for node in assigns:
            if _reads(node.value, names):
                for t in node.targets:
                    if isinstance(t, ast.Name) and t.id not in names:
                        names.add(t.id)
                        grew = True
    return names


def _passes_on(stmt: ast.stmt, names: set[str]) -> bool:
    """Whether a statement hands one of ``names`` on: returns it, puts it in a field or an item, or gives it
    to a call other than a log line's."""
    if isinstance(stmt, ast.Return):
        return stmt.value is not None and _reads(stmt.value, names)
    if isinstance(stmt, ast.Assign) and _reads(stmt.value, names):
        return any(not isinstance(t, ast.Name) for t in stmt.targets) or isinstance(stmt.value, ast.Name)
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and not _logs(ast.unparse(n.func))]
    return any(_reads(a, names) for c in calls for a in (*c.args, *(k.value for k in c.keywords)))


def _reads(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


_CAUGHT_AS = re.compile(r"^[ \t]*except\b[^:\n]*\bas\s+(\w+)\s*:", re.MULTILINE)


def _hands_on_text(line: str, caught: set[str]) -> bool:
    """Whether, by the text, ``line`` names one of the ``caught`` names: a line that may hand it on, or make
    something of it that does."""
    return not caught.isdisjoint(re.findall(r"\w+", line))


def _logs(line: str) -> bool:
    return re.search(r"\b(?:log|logger|logging|warnings|print)\b", line) is not None


def _hands_on(handler: ast.ExceptHandler, name: str) -> bool:
    """Whether a handler hands ``name`` (or what it made of it) on anywhere (:func:`_passes_on`)."""
    names = _made_of(handler, name)
    return any(_passes_on(s, names) for b in handler.body for s in ast.walk(b) if isinstance(s, ast.stmt))


def errors_handed_back(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A call told, by a keyword the edit wrote, to hand its errors back or let them go rather than raise
    them (``asyncio.gather(*tasks, return_exceptions=True)``, ``ignore_errors=True``,
    ``raise_on_error=False``):
    the failures come back as values, or not at all, where they were raised."""
    if edit.before is None or not any(
        _ERRORS_FLAG.search(edit.lines[n - 1]) for r in regions for n in r.lines
    ):
        return []  # (no line the edit wrote names such a keyword: no tree asked)
    out: list[Finding] = []
    for r in regions:
        for n in r.lines:
            line = edit.lines[n - 1]
            for m in _ERRORS_FLAG.finditer(line):
                told = f"{m.group(1)}={m.group(2)}"
                if _lets_errors_go(m.group(1), m.group(2) == "True") and told not in edit.before:
                    why = f"`{told}`: the call's errors are no longer raised"
                    out.append(_check_finding(edit, RuleId.SWALLOWED_EXCEPTION, n, why))
    return out


# A keyword naming errors or exceptions given a boolean (``return_exceptions=True``,
# ``raise_on_error=False``).
_ERRORS_FLAG = re.compile(r"\b(\w*(?:error|exception|raise)\w*)\s*=\s*(True|False)\b")


def _lets_errors_go(keyword: str, value: bool) -> bool:
    """Whether a keyword given ``value`` tells a call to let its errors go: one that raises them turned off
    (``raise_on_error=False``), or one that returns, ignores or suppresses them turned on."""
    words = set(keyword.lower().split("_"))
    if "raise" in words:
        return not value
    handed = not words.isdisjoint({"return", "ignore", "suppress", "skip", "swallow"})
    return value and handed and not words.isdisjoint({"error", "errors", "exception", "exceptions"})


def refusals_retried(regions: Sequence[Region], edit: Edit) -> list[Finding]:
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
