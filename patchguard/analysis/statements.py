"""The rules met in statements rather than calls: a ``raise SystemExit``, an ``os.environ`` item set or
deleted, a module attribute assigned (a monkeypatch, a process-wide switch, the breakpoint hook), a handler
that swallows every error, a check neutralised (``assert cond or True``, ``if False:`` over a raise, an early
``return`` before a check) and a tensor's value decided on the host.

Each rule is a function of one node kind and the scope it is met in (:class:`Scope`: the walk of
:mod:`.judge`), yielding what it saw; :data:`STATEMENT_RULES` registers them by node kind, and the walk
dispatches each node to the rules of its kind — it knows where it is, never what a rule looks for. Call
rules are the families' (:mod:`.families`) and the matchers of :mod:`.judge`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import libcst as cst
from libcst.helpers import get_full_name_for_node

from ..model import RuleId
from .aliases import reads_environment, resolve
from .cstwalk import Dispatch, find_all, walk
from .families import CHECKING_CALL, CLOCKS, WAIT_METHODS, class_named
from .rules import CALLS, SWITCH_ATTRIBUTES
from .tensors import ANY_NAME, decides_tensor

__all__ = ["STATEMENT_RULES", "Scope", "Seen", "code", "holds", "literal", "names_only", "nodes_of"]

TERMINAL = (cst.Return, cst.Raise, cst.Continue, cst.Break)


@dataclass(frozen=True, slots=True)
class Seen:
    """What a statement rule saw: the rule, what hit it, the node whose lines are reported, a detail."""

    rule: RuleId
    qualname: str
    node: cst.CSTNode
    detail: str = ""


class Scope(Protocol):
    """What a statement rule may ask of the walk: the import aliases in force, whether a node is on a
    changed line, the names of the current function known to hold tensors, and whether the code is on the
    hot path."""

    aliases: dict[str, str]

    def touches(self, node: cst.CSTNode) -> bool: ...

    def tensors(self) -> set[str]: ...

    def hosts(self) -> set[str]: ...  # names the current function binds to host values only

    def in_hot_path(self) -> bool: ...

    def on_device_path(self) -> bool: ...

    def own(self, name: str) -> bool: ...  # a name the current function binds itself (hiding a module's)

    def methods_of(self, name: str) -> frozenset[str] | None: ...  # of a class the file defines, by name

    def defines(self, name: str) -> bool: ...  # a function the file defines (at any depth), by name

    def keeps(self, name: str, value: str) -> bool: ...  # the unit gives ``name`` the value ``value``


def code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node).strip()


def literal(node: cst.BaseExpression | None) -> str:
    """A literal's value as text (a string without its quotes), else the expression's code, cut short."""
    if node is None:
        return ""
    if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
        return node.evaluated_value[:80]
    return code(node)[:80]


def env_key(target: cst.BaseExpression) -> str:
    """The variable of ``os.environ[KEY]``."""
    if isinstance(target, cst.Subscript) and target.slice:
        index = target.slice[0].slice
        if isinstance(index, cst.Index):
            return literal(index.value)
    return code(target)[:80]


class _Holds(Dispatch):
    """Whether a node holds one of ``kinds`` — not inside a nested def or class, whose code is its own."""

    SKIPS_TRIVIA = True  # whitespace, comments and punctuation are not walked into (:mod:`.cstwalk`)

    def __init__(self, kinds: tuple[type[cst.CSTNode], ...], calls: bool = False) -> None:
        super().__init__()
        self.kinds, self.found = kinds, False
        self.calls = calls  # a call whose job is to raise counts too (:func:`_holds_check`)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.kinds) or (self.calls and isinstance(node, cst.Call) and _checking(node)):
            self.found = True
        return not self.found and not isinstance(node, (cst.FunctionDef, cst.ClassDef))


def holds(node: cst.CSTNode, *kinds: type[cst.CSTNode], calls: bool = False) -> bool:
    found = _Holds(kinds, calls)
    walk(node, found)
    return found.found


class _Gather(Dispatch):
    """The nodes of ``kinds`` a node holds, in order — not inside a nested def or class."""

    SKIPS_TRIVIA = True

    def __init__(self, kinds: tuple[type[cst.CSTNode], ...]) -> None:
        super().__init__()
        self.kinds, self.found = kinds, list[cst.CSTNode]()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.kinds):
            self.found.append(node)
        return not isinstance(node, (cst.FunctionDef, cst.ClassDef))


def nodes_of(node: cst.CSTNode, kinds: tuple[type[cst.CSTNode], ...]) -> list[cst.CSTNode]:
    found = _Gather(kinds)
    walk(node, found)
    return found.found


def _checking(call: cst.Call) -> bool:
    func = call.func
    name = (
        func.attr.value
        if isinstance(func, cst.Attribute)
        else func.value
        if isinstance(func, cst.Name)
        else ""
    )
    return _CHECKING.search(name) is not None


def _holds_check(node: cst.CSTNode) -> bool:
    """Whether ``node`` holds a ``raise``, an ``assert`` or a call whose job is to raise (``_check_*(…)``,
    ``validate_*(…)``: :data:`.families.CHECKING_CALL`), not inside a nested def or class."""
    return holds(node, cst.Raise, cst.Assert, calls=True)  # (one walk for the three)


def truth(test: cst.BaseExpression) -> bool | None:
    """The value a condition always has (``True``, ``1``, ``"x"``, ``cond or True``, ``cond and False``,
    ``not True``), or ``None`` when it depends on something."""
    if isinstance(test, cst.Name) and test.value in ("True", "False"):
        return test.value == "True"
    if isinstance(test, cst.Integer):
        return int(test.value.replace("_", ""), 0) != 0
    if isinstance(test, cst.SimpleString):
        return len(test.evaluated_value or "") > 0
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = truth(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = truth(test.left), truth(test.right)
        if isinstance(test.operator, cst.Or):
            return True if True in (left, right) else (False if left is right is False else None)
        return False if False in (left, right) else (True if left is right is True else None)
    return None


# -- the rules --------------------------------------------------------------------------------------------


def _exit_raised(node: cst.Raise, scope: Scope) -> Iterator[Seen]:
    if node.exc is None:
        return
    exc = node.exc.func if isinstance(node.exc, cst.Call) else node.exc
    dotted = get_full_name_for_node(exc)
    qualname = resolve(scope.aliases, dotted) if dotted else ""
    if qualname in ("SystemExit", "builtins.SystemExit"):
        yield Seen(RuleId.PROCESS_EXIT, qualname, node)


def _environ_item(target: cst.BaseExpression, scope: Scope) -> bool:
    """Whether ``target`` is ``os.environ[...]`` (through any alias)."""
    if not isinstance(target, cst.Subscript):
        return False
    dotted = get_full_name_for_node(target.value)
    return dotted is not None and resolve(scope.aliases, dotted) == "os.environ"


def _env_deleted(node: cst.Del, scope: Scope) -> Iterator[Seen]:
    if _environ_item(node.target, scope):
        yield Seen(RuleId.ENV_MUTATION, "os.environ", node, f"del {env_key(node.target)}")


def _assigned_to(
    targets: Sequence[cst.BaseExpression], node: cst.CSTNode, value: cst.BaseExpression | None, scope: Scope
) -> Iterator[Seen]:
    """An ``os.environ`` item set; a module attribute assigned: the breakpoint hook, a process-wide switch,
    else a monkeypatch."""
    for target in targets:
        if _environ_item(target, scope):
            shown = f"{env_key(target)}={literal(value)}" if value is not None else env_key(target)
            yield Seen(RuleId.ENV_MUTATION, "os.environ", node, shown)
            continue
        patched = _class_patched(target, value, scope) if isinstance(target, cst.Attribute) else None
        seen = [Seen(RuleId.MONKEYPATCH, patched[0], node, patched[1])] if patched is not None else []
        seen = seen or list(_module_attribute_set(target, node, scope))
        yield from seen
        forced = any(s.rule == RuleId.MONKEYPATCH for s in seen) and _answers_the_same(value)
        if forced and not any(s.rule == RuleId.REMOVED_CHECK for s in seen):
            # `B12xExperts._supports_current_device = staticmethod(lambda *a: True)`: it answers yes always
            yield Seen(RuleId.REMOVED_CHECK, seen[0].qualname, node, "its answer forced at run time")


def _module_attribute_set(target: cst.BaseExpression, node: cst.CSTNode, scope: Scope) -> Iterator[Seen]:
    """`mod.attr = …`, `mod.ACT2FN["gelu"] = …` (another module's table changed): a module's name, then
    names only — not `cfg().table[k]`, an object a call returned. The breakpoint hook, a process-wide switch,
    else a monkeypatch (and a check of that module replaced: a removed check too)."""
    item = isinstance(target, cst.Subscript)
    held = target.value if isinstance(target, cst.Subscript) else target
    # an imported table by its own name (`ALL_ATTENTION_FUNCTIONS["sdpa"] = …`), unless a local hides it
    table = item and isinstance(held, cst.Name) and not scope.own(held.value)
    pure = (isinstance(held, cst.Attribute) and names_only(held)) or table
    dotted = get_full_name_for_node(held) if pure else None
    if not dotted or dotted.split(".", 1)[0] not in scope.aliases:
        return
    qualname = resolve(scope.aliases, dotted) + ("[…]" if item else "")
    rule = RuleId.DEBUGGER if qualname == "sys.breakpointhook" else RuleId.MONKEYPATCH
    if qualname.startswith(SWITCH_ATTRIBUTES):
        rule = RuleId.GLOBAL_SWITCH
    yield Seen(rule, qualname, node)
    if rule == RuleId.MONKEYPATCH and _CHECKING.match(qualname.rsplit(".", 1)[-1]):
        # `_backend.check_inputs = lambda …: shapes`: it checks nothing now, for every caller
        yield Seen(RuleId.REMOVED_CHECK, qualname, node, "a check replaced at run time")


def _answers_the_same(value: cst.BaseExpression | None) -> bool:
    """Whether a value put in a method's place answers the same whatever it is asked: a ``lambda`` (bare, or
    made a ``staticmethod``/``classmethod``) returning ``True``, a number, or a pair that begins with
    ``True`` (``lambda results: (True, merge(results)[1])``: success, whatever happened)."""
    while isinstance(value, cst.Call) and len(value.args) == 1:
        name = get_full_name_for_node(value.func) or ""
        if name.rsplit(".", 1)[-1] not in ("staticmethod", "classmethod"):
            return False
        value = value.args[0].value
    if not isinstance(value, cst.Lambda):
        return False
    body = value.body
    first = body.elements[0].value if isinstance(body, cst.Tuple) and body.elements else body
    constant = isinstance(first, (cst.Integer, cst.Float))
    return constant or (isinstance(first, cst.Name) and first.value == "True")


def _class_patched(
    target: cst.Attribute, value: cst.BaseExpression | None, scope: Scope
) -> tuple[str, str] | None:
    """(what, a detail) of an attribute set on a class: on an object's (``type(obj).attr = …``), or a method
    of a class the file defines replaced (:func:`_method_replaced`)."""
    if _class_of(target.value):
        return f"{code(target.value)}.{target.attr.value}", ""
    if _method_replaced(target, value, scope):
        return code(target), "a method of its class replaced for every instance"
    if isinstance(target.value, cst.Name) and class_named(target.value.value) and a_function(value, scope):
        return code(target), "a method of a class replaced for every instance"
    kept = _original_wrapped(target, value, scope)
    if kept:
        return code(target), f"a wrapper put in its place, the original kept as `{kept}`"
    if _rebound(target, value, scope):
        return code(target), "its own value put back wrapped, arguments fixed"
    return None


def _rebound(target: cst.Attribute, value: cst.BaseExpression | None, scope: Scope) -> bool:
    """``self.model.generate = functools.partial(self.model.generate, num_beams=4)``: the attribute given a
    partial of its own value — every caller of it now gets other arguments."""
    if not isinstance(value, cst.Call) or not value.args or value.args[0].keyword is not None:
        return False
    dotted = get_full_name_for_node(value.func)
    if not dotted or resolve(scope.aliases, dotted) != "functools.partial":
        return False
    return code(value.args[0].value) == code(target)


def _original_wrapped(target: cst.Attribute, value: cst.BaseExpression | None, scope: Scope) -> str:
    """The name a function put in an attribute's place calls that the code gave the attribute's own value
    (``_orig = dg.get_num_sms``; ``dg.get_num_sms = lambda: min(_orig(), 112)``): a wrapper of the
    original, whatever object holds it — else ""."""
    if not isinstance(value, cst.Lambda):
        return ""
    held = code(target)
    calls = [c.func for c in find_all(value, cst.Call) if isinstance(c, cst.Call)]
    called = sorted({f.value for f in calls if isinstance(f, cst.Name)})
    return next((n for n in called if scope.keeps(n, held)), "")


def a_function(value: cst.BaseExpression | None, scope: Scope) -> bool:
    """A ``lambda``, or the name of a function the file defines: what is put in a method's place."""
    if isinstance(value, cst.Lambda):
        return True
    return isinstance(value, cst.Name) and scope.defines(value.value)


def _method_replaced(target: cst.Attribute, value: cst.BaseExpression | None, scope: Scope) -> bool:
    """``LlamaDecoderLayer.get_quant_config = lambda self, c: None``, ``GPTJMLP.__init__ = _init_tanh``: a
    method of a class the file defines, replaced from outside its body — every instance changes, whoever
    made it. A method the class defines, or any attribute given a function (a ``lambda``)."""
    cls = target.value
    if not isinstance(cls, cst.Name) or scope.own(cls.value):
        return False
    methods = scope.methods_of(cls.value)
    return methods is not None and (target.attr.value in methods or isinstance(value, cst.Lambda))


def _class_of(node: cst.BaseExpression) -> bool:
    """``type(obj)`` or ``obj.__class__``: the class of an object — an attribute set on it is set for every
    instance, the code's and any library's."""
    if isinstance(node, cst.Attribute):
        return node.attr.value == "__class__"
    return isinstance(node, cst.Call) and get_full_name_for_node(node.func) == "type" and len(node.args) == 1


def names_only(node: cst.BaseExpression) -> bool:
    """``a.b.c``: attributes of a name, nothing called or indexed on the way."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def _assigned(node: cst.Assign, scope: Scope) -> Iterator[Seen]:
    return _assigned_to([t.target for t in node.targets], node, node.value, scope)


def _aug_assigned(node: cst.AugAssign, scope: Scope) -> Iterator[Seen]:
    return _assigned_to([node.target], node, None, scope)


def _broad(caught: cst.BaseExpression | None) -> bool:
    """``except:``, ``except Exception``, ``except BaseException`` (alone or in a tuple)."""
    if caught is None:
        return True
    if isinstance(caught, cst.Tuple):
        return any(_broad(e.value) for e in caught.elements)
    return get_full_name_for_node(caught) in ("Exception", "BaseException", "builtins.Exception")


_QUIET_LOGS = {"debug", "info", "trace"}


def _quiet(stmt: cst.BaseStatement) -> bool:
    """A handler statement that lets the error go: ``pass``, ``...``, ``return`` (a default too),
    ``continue``, ``break``, a flag set to a constant (``self._failed = True``), or a log line below warning.
    Anything else (a raise, a warning, a fallback computed) is handling."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if isinstance(small, (cst.Pass, cst.Return, cst.Continue, cst.Break)):
            continue
        if isinstance(small, (cst.Assign, cst.AnnAssign)) and _constant(small.value):
            continue
        value = small.value if isinstance(small, cst.Expr) else None
        if isinstance(value, cst.Ellipsis):
            continue
        func = value.func if isinstance(value, cst.Call) else None
        if isinstance(func, cst.Attribute) and func.attr.value in _QUIET_LOGS:
            receiver = (get_full_name_for_node(func.value) or "").lower()
            if "log" in receiver:
                continue
        return False
    return True


def _constant(value: cst.BaseExpression | None) -> bool:
    """``True``, ``False``, ``None``, a number, a string, an empty container: what a flag is set to."""
    if isinstance(value, cst.Name):
        return value.value in ("True", "False", "None")
    if isinstance(value, (cst.List, cst.Dict, cst.Tuple, cst.Set)):
        return not value.elements
    return isinstance(value, (cst.Integer, cst.Float, cst.SimpleString))


def _swallowed(node: cst.ExceptHandler, scope: Scope) -> Iterator[Seen]:
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
    if _broad(node.type) and all(_quiet(s) for s in body):
        yield Seen(RuleId.SWALLOWED_EXCEPTION, "except", node)


def _exits_before_raising(node: cst.ExceptHandler, scope: Scope) -> Iterator[Seen]:
    """A ``return``/``continue``/``break`` in a handler above its ``raise``: the error stops there now."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
    for i, stmt in enumerate(body):
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        if any(isinstance(s, cst.Raise) for s in stmt.body):
            return
        if any(isinstance(s, TERMINAL) for s in stmt.body):
            if any(find_all(later, cst.Raise) for later in body[i + 1 :]):
                detail = "the handler exits before its raise: the error stops here"
                yield Seen(RuleId.SWALLOWED_EXCEPTION, "except", stmt, detail)
            return


_CHECKING = re.compile(f"^{CHECKING_CALL}$")


def _check_silenced(node: cst.Try, scope: Scope) -> Iterator[Seen]:
    """A check whose error is let go: a handler of a named exception that only lets it pass, over a call
    whose role is to raise (``try: self._check_tokens(…) except ValueError: pass``). A broad handler is
    :func:`_swallowed`'s."""
    checks = [name for name in _called_names(node.body) if _CHECKING.search(name)]
    if not checks:
        return
    for handler in node.handlers:
        body = handler.body.body if isinstance(handler.body, cst.IndentedBlock) else []
        if not _broad(handler.type) and all(_quiet(s) for s in body):
            detail = f"the error of `{checks[0]}` is let go"
            yield Seen(RuleId.SWALLOWED_EXCEPTION, "except", handler, detail)


def _called_names(node: cst.CSTNode) -> list[str]:
    """The last names of the calls ``node`` makes (not inside a nested def or class)."""
    found = _Calls()
    walk(node, found)
    return found.names


class _Calls(Dispatch):
    SKIPS_TRIVIA = True  # whitespace, comments and punctuation are not walked into (:mod:`.cstwalk`)

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute):
            self.names.append(func.attr.value)
        elif isinstance(func, cst.Name):
            self.names.append(func.value)

    def on_visit(self, node: cst.CSTNode) -> bool:
        return super().on_visit(node) and not isinstance(node, (cst.FunctionDef, cst.ClassDef))


def _decided_on_host(test: cst.BaseExpression, scope: Scope) -> Iterator[Seen]:
    """A tensor's value decided on the host (``if x.any():``, ``while n > 0`` with ``n`` a tensor) on the
    device path (the hot path, or a function handed tensors to compute on): the device must finish first."""
    # (whether it could decide a tensor at all is asked first: the names are worked out per function)
    could = scope.touches(test) and decides_tensor(test, ANY_NAME, scope.aliases)
    decided = could and scope.on_device_path() and decides_tensor(test, scope.tensors(), scope.aliases)
    if decided and not _host_arrays_only(test, scope):
        yield Seen(RuleId.DEVICE_SYNC, code(test)[:40], test, "a tensor's value decided on the host")


def _host_arrays_only(test: cst.BaseExpression, scope: Scope) -> bool:
    """Whether the arrays a test reads are all host values by how the function binds them (``(counts <
    0).any()`` of a ``numpy`` array): no device to wait for."""
    names = {n.value for n in find_all(test, cst.Name) if isinstance(n, cst.Name)}
    hosts = names & scope.hosts()
    return bool(hosts) and not (names & scope.tensors())


def _spins(node: cst.While, scope: Scope) -> Iterator[Seen]:
    """``while not stream.query(): pass``: the host polls a stream or event (``query()``, no argument)
    until the device has finished — a synchronisation by busy wait."""
    test = node.test
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    if _polls(test) and scope.touches(node):
        yield Seen(RuleId.DEVICE_SYNC, "query", node.test, "the host spins until the device has finished")


def _polls(test: cst.BaseExpression) -> bool:
    """``stream.query()`` (no argument) — or ``all``/``any`` of it over some (``all(ev.query() for ev in
    pending)``): asking whether the device has finished."""
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value in ("all", "any"):
        made = test.args[0].value if len(test.args) == 1 else None
        return isinstance(made, (cst.GeneratorExp, cst.ListComp)) and _polls(made.elt)
    return (
        isinstance(test, cst.Call)
        and isinstance(test.func, cst.Attribute)
        and test.func.attr.value == "query"
        and not test.args
    )


def _all_nothing(body: Sequence[cst.BaseStatement]) -> bool:
    """Whether a block's statements all do nothing (``pass``, ``...``, a string)."""
    return all(isinstance(s, cst.SimpleStatementLine) and all(_nothing(x) for x in s.body) for s in body)


def _burns_time(node: cst.While, scope: Scope) -> Iterator[Seen]:
    """``while time.perf_counter() - t0 < 2e-4: pass``: a loop that does nothing while it reads a clock —
    a sleep by busy wait, which also holds the core — or while it polls (``while not ev.query(): pass``)."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    idle = _all_nothing(body)
    calls = [c for c in find_all(node.test, cst.Call) if isinstance(c, cst.Call)]
    last = [(get_full_name_for_node(c.func) or "").rsplit(".", 1)[-1] for c in calls]
    clocks = [name for name in last if name in CLOCKS]
    if not (body and idle and last and scope.touches(node)):
        return
    if clocks:
        yield Seen(RuleId.SLEEP, clocks[0], node.test, "the host spins doing nothing until time passes")
    else:  # a poll: ``while not done.query(): pass``, ``while not req.is_completed(): pass``
        detail = f"the host spins doing nothing until `{last[0]}()` changes"
        yield Seen(RuleId.SLEEP, last[0], node.test, detail)


def _nothing(small: cst.BaseSmallStatement) -> bool:
    if isinstance(small, cst.Pass):
        return True
    return isinstance(small, cst.Expr) and isinstance(small.value, cst.Ellipsis)


# What only passes time: the sleep rule's calls (by their last name), a pause, a wait.
_IDLE_CALLS = frozenset(
    {q.rsplit(".", 1)[-1] for q, r in CALLS.items() if r == RuleId.SLEEP} | WAIT_METHODS | {"pause"}
)


def _hangs(node: cst.While, scope: Scope) -> Iterator[Seen]:
    """``while True: time.sleep(30)``: a loop that never leaves and only waits — the thread stops there for
    good, as surely as on an exit (a loop that does work, or can break, return or raise, is not one). One
    that only waits for a file to appear (``while not os.path.exists("/tmp/go"): sleep(1)``) stops it until
    someone outside makes that file: nothing in the process will."""
    forever = truth(node.test) is True
    if not forever and not _awaits_a_file(node.test):
        return
    if holds(node.body, cst.Break, cst.Return, cst.Raise):
        return
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    if body and all(_idle(stmt) for stmt in body):
        why = (
            "the loop only waits, forever: a hang"
            if forever
            else ("the loop only waits for a file someone must make: a hang until then")
        )
        yield Seen(RuleId.PROCESS_EXIT, "while True" if forever else "while", node.test, why)


_EXISTS = frozenset({"exists", "isfile", "is_file", "isdir", "is_dir", "lexists"})


def _awaits_a_file(test: cst.BaseExpression) -> bool:
    """``not os.path.exists(p)`` / ``not Path(p).is_file()``: a test that holds until a file appears."""
    if not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)):
        return False
    call = test.expression
    return (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and call.func.attr.value in _EXISTS
    )


def _idle(stmt: cst.BaseStatement) -> bool:
    """A statement that only passes time: ``pass``, ``...``, a sleep, pause or wait."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        value = small.value if isinstance(small, cst.Expr) else None
        if isinstance(small, cst.Pass) or isinstance(value, cst.Ellipsis):
            continue
        if isinstance(value, cst.Await):
            value = value.expression
        func = value.func if isinstance(value, cst.Call) else None
        name = func.attr.value if isinstance(func, cst.Attribute) else ""
        name = func.value if isinstance(func, cst.Name) else name
        if name not in _IDLE_CALLS:
            return False
    return True


def _tested(node: cst.If | cst.While | cst.IfExp | cst.Assert, scope: Scope) -> Iterator[Seen]:
    return _decided_on_host(node.test, scope)


def _never_fires(node: cst.If, scope: Scope) -> Iterator[Seen]:
    """``if False:`` (or ``cond and False``) put over a raise — or over a bail-out that answers no (``if
    size % 16 != 0 and False: return False``): the check can never fire. A check made to wait for a switch
    (``if bad and os.environ.get("STRICT"):``): it fires only when someone sets it."""
    never = truth(node.test) is False
    switch = None if never else _switched(node.test)
    if (not never and switch is None) or not (_holds_check(node.body) or _bails_out(node)):
        return  # (the body is searched last: most tests are neither)
    if never:
        detail = f"the check under `if {' '.join(code(node.test).split())[:60]}` can never fire"
        yield Seen(RuleId.REMOVED_CHECK, "if", node.test, detail)
        return
    detail = f"the check fires only when `{(switch or '')[:60]}`: off unless someone sets it"
    yield Seen(RuleId.REMOVED_CHECK, "if", node.test, detail)


def _bails_out(node: cst.If) -> bool:
    """An ``if`` without ``else`` whose short body leaves with nothing or a constant answer (``return
    False``, ``return None``, ``continue``): a guard, as a raise is one."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    last = body[-1] if body else None
    if node.orelse is not None or len(body) > 3 or not isinstance(last, cst.SimpleStatementLine):
        return False
    leave = last.body[-1]
    if isinstance(leave, (cst.Continue, cst.Break)):
        return True
    return isinstance(leave, cst.Return) and (leave.value is None or truth(leave.value) is not None)


def _switched(test: cst.BaseExpression) -> str | None:
    """The environment switch ``test`` requires besides its condition (``cond and os.getenv("X")``)."""
    if not isinstance(test, cst.BooleanOperation) or not isinstance(test.operator, cst.And):
        return None
    for side in (test.left, test.right):
        text = code(side)
        if reads_environment(text):
            return text
        found = _switched(side)
        if found is not None:
            return found
    return None


def _decided_flag(node: cst.IndentedBlock, scope: Scope) -> Iterator[Seen]:
    """A name set to a constant just before a check that tests it (``eligible = True`` above
    ``if not eligible: raise``): the check is decided, it can never fire."""
    for i, stmt in enumerate(node.body):
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            continue
        assign = stmt.body[0]
        if not (
            isinstance(assign, cst.Assign)
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
            and truth(assign.value) is not None
        ):
            continue
        name, value = assign.targets[0].target.value, truth(assign.value)
        for later in node.body[i + 1 : i + 3]:
            if not isinstance(later, cst.If):
                continue
            if _holds_check(later.body) and _decides(later.test, name, value):
                detail = f"`{code(stmt).strip()[:40]}` decides `if {code(later.test)[:40]}`: it never fires"
                yield Seen(RuleId.REMOVED_CHECK, name, stmt, detail)
                break


def _decides(test: cst.BaseExpression, name: str, value: bool | None) -> bool:
    """Whether ``test`` is ``name`` or ``not name``, false when ``name`` holds ``value``."""
    if isinstance(test, cst.Name) and test.value == name:
        return value is False
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = test.expression
        return isinstance(inner, cst.Name) and inner.value == name and value is True
    return False


def _always_holds(node: cst.Assert, scope: Scope) -> Iterator[Seen]:
    if truth(node.test) is True:
        yield Seen(RuleId.REMOVED_CHECK, "assert", node, f"`assert {code(node.test)[:60]}` always holds")


def _early_exit(node: cst.IndentedBlock, scope: Scope) -> Iterator[Seen]:
    """A ``return``/``continue``/``break`` typed in before a check of the same block — or under a switch
    (``if os.environ.get("SKIP_CHECKS"): return``, ``if True:``): the check never runs (when it is set)."""
    for i, stmt in enumerate(node.body):
        switch = _switched_exit(stmt)
        if switch is None and not (
            isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, TERMINAL) for s in stmt.body)
        ):
            continue
        exits = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()
        if not any(isinstance(s, cst.Raise) for s in exits) and any(
            _holds_check(s) for s in node.body[i + 1 :]
        ):
            why = "a check below it can no longer run" + (f" when `{switch}`" if switch else "")
            yield Seen(RuleId.REMOVED_CHECK, code(stmt)[:40], stmt, why)
        elif _forced_answer(stmt, node.body[i + 1 :], switched=switch is not None):
            why = (
                f"the answer worked out below is forced when `{switch}`"
                if switch
                else ("the answer worked out below is forced: it can no longer be anything else")
            )
            yield Seen(RuleId.REMOVED_CHECK, code(stmt)[:40], stmt, why)
        if switch is None:
            return


def _forced_answer(stmt: cst.CSTNode, below: Sequence[cst.BaseStatement], *, switched: bool = False) -> bool:
    """Whether an exit — switched, or typed in bare — returns ``True``/``False`` where the code below works
    the answer out (a ``return`` of anything but a constant): a decision forced (``if
    os.environ.get("FORCE"): return True`` above the capability test, ``return True  # HACK`` above it)."""
    block = stmt.body if isinstance(stmt, cst.If) else None
    last = block.body[-1] if isinstance(block, cst.IndentedBlock) else stmt
    ret = last.body[-1] if isinstance(last, cst.SimpleStatementLine) else None
    if not isinstance(ret, cst.Return) or ret.value is None or (_unknown(ret.value) and not switched):
        return False  # (under a switch, any answer it hands back is the operator's, not the code's)
    returns = [r for s in below for r in find_all(s, cst.Return)]
    return any(isinstance(r, cst.Return) and r.value is not None and _unknown(r.value) for r in returns)


def _unknown(value: cst.BaseExpression) -> bool:
    """A value that is not a constant (``True``, ``0``, ``"x"``, ``None``; a tuple of them: an answer and its
    reason, ``True, None``)."""
    if isinstance(value, cst.Tuple):
        return any(_unknown(e.value) for e in value.elements)
    return truth(value) is None and not (isinstance(value, cst.Name) and value.value == "None")


def _sets(stmt: cst.BaseStatement) -> bool:
    """A statement that only binds names (``major, minor = (int(p) for p in fake.split("."))``)."""
    return isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(x, cst.Assign) for x in stmt.body)


def _says(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(x, cst.Expr) for x in stmt.body)


def _switched_exit(stmt: cst.CSTNode) -> str | None:
    """The test of an ``if`` that only leaves (``return``/``continue``/``break``) when a switch says so — the
    environment, or always — else ``None``."""
    if (
        not isinstance(stmt, cst.If)
        or stmt.orelse is not None
        or not isinstance(stmt.body, cst.IndentedBlock)
    ):
        return None
    *said, last = stmt.body.body
    leaves = (
        isinstance(last, cst.SimpleStatementLine)
        and all(isinstance(x, (cst.Return, cst.Continue, cst.Break)) for x in last.body)
        and all(_says(s) or _sets(s) for s in said)  # what it says or works out before it leaves
    )
    test = " ".join(code(stmt.test).split())
    return test[:60] if leaves and (reads_environment(test) or truth(stmt.test) is True) else None


StatementRule = Callable[[Any, Scope], Iterator[Seen]]

STATEMENT_RULES: dict[type[cst.CSTNode], tuple[StatementRule, ...]] = {
    cst.Raise: (_exit_raised,),
    cst.Del: (_env_deleted,),
    cst.Assign: (_assigned,),
    cst.AugAssign: (_aug_assigned,),
    cst.ExceptHandler: (_swallowed, _exits_before_raising),
    cst.Try: (_check_silenced,),
    cst.If: (_tested, _never_fires),
    cst.Assert: (_tested, _always_holds),
    cst.While: (_tested, _spins, _hangs, _burns_time),
    cst.IfExp: (_tested,),
    cst.IndentedBlock: (_early_exit, _decided_flag),
}
"""The statement rules by the node kind they look at, in the order their findings are made."""
