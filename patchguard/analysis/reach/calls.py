"""What the functions of one module call on every run, named as dotted symbols, read from the file alone.

The hot path (:mod:`.hot`) follows calls from a framework's per-step entry points across its modules. Each
module tells, parsed with ``ast`` (never imported), for every function the calls it makes on every run —
not those under an ``if``, a conditional expression or an ``except`` (loops run every step too) — as the
absolute dotted names the file can tell them by:

* ``f()`` of a function defined or imported in the module: ``pkg.mod.f``, ``other.mod.f``;
* ``mod.f()`` / ``Cls.f()`` through an imported module or class: ``other.mod.f``, ``pkg.mod.Cls.f``;
* ``self.f()`` / ``cls.f()`` in a method of ``C``: ``pkg.mod.C.f`` (inherited methods are the walk's to find);
* ``super().f()``: ``f`` on each base of the class;
* ``self.worker.f()`` where the class binds ``self.worker = Worker(...)`` (or annotates it ``Worker``):
  ``Worker``'s symbol and ``.f``.

What no file tells (a callable kept in a dict, ``self.model(x)``'s ``__call__``) is not followed. Classes
keep their bases' symbols, and the module its import bindings, so the walk can follow inheritance and
re-exports (``from .layer import Linear`` in a package ``__init__``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..bounds import too_wild

__all__ = ["CallFacts", "every_run", "read_calls"]

Def = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True, slots=True)
class CallFacts:
    """``calls``: function qualname → the symbols it calls on every run; ``classes``: class qualname → its
    bases' symbols; ``imports``: a module-level name → the symbol its import binds."""

    calls: dict[str, tuple[str, ...]]
    classes: dict[str, tuple[str, ...]]
    imports: dict[str, str]

    def pack(self) -> tuple[object, ...]:
        """Plain dicts and tuples, for the cache (marshal)."""
        return (self.calls, self.classes, self.imports)

    @classmethod
    def unpack(cls, packed: Any) -> CallFacts | None:
        """The inverse of :meth:`pack`; ``None`` when ``packed`` does not have its shape."""
        try:
            calls, classes, imports = packed
            return cls(
                {str(k): tuple(map(str, v)) for k, v in calls.items()},
                {str(k): tuple(map(str, v)) for k, v in classes.items()},
                {str(k): str(v) for k, v in imports.items()},
            )
        except (TypeError, ValueError, AttributeError):
            return None


NOTHING = CallFacts({}, {}, {})


def every_run(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of ``body`` that run every time it does: not under an ``if`` (its test runs), nor in an
    ``except``, a nested function or class. Loops count. The ``else`` of an ``if`` is the way taken when
    nothing special holds — a scheduler's ``if …: … else: plan = self.get_new_batch_prefill(…)`` — so it
    counts, where a branch taken on a condition (``if step % 40 == 0: self.log_stats()``, ``helper() if
    verbose else 0``) is an occasional extra."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.IfExp):
            stack.extend((node.test, node.orelse))
            continue
        if isinstance(node, ast.If):
            stack.append(node.test)  # the test runs every time; the way taken when it fails, too
            stack.extend(node.orelse)
            if configured(node.test):  # on every run where the object is so configured
                stack.extend(node.body)
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Try):
            stack.extend([*node.body, *node.orelse, *node.finalbody])
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def configured(test: ast.expr) -> bool:
    """Whether an ``if``'s test asks only how the object is configured — its attributes, compared with
    constants or with each other (``self.use_async_scheduling``, ``self.parallel_config.pipeline_parallel_size
    > 1``), or whether an optional part is there (``self.pp_handler is not None``, ``shard is not None``):
    what it guards runs on every run where it is so, where a test of the run's own values (``step % 40 ==
    0``, ``if error:``, a call) is an occasional extra, and ``x is None`` makes a thing on first use."""
    if isinstance(test, ast.BoolOp):
        return all(configured(v) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return configured(test.operand)
    if isinstance(test, ast.Compare):
        sides = [test.left, *test.comparators]
        if len(sides) == 2 and isinstance(test.ops[0], ast.IsNot) and _none(sides[1]):
            return _named(sides[0])  # an optional part present: `if shard_metadata is not None:`
        return (
            not any(isinstance(op, (ast.Is, ast.IsNot)) for op in test.ops)  # `is None`: made on first use
            and any(_self_attribute(s) for s in sides)
            and all(_self_attribute(s) or isinstance(s, ast.Constant) for s in sides)
        )
    return _self_attribute(test)


def _none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _root(node: ast.expr) -> str | None:
    """The name an attribute chain hangs on (``self`` of ``self.a.b``, ``x`` of ``x``), else ``None``."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _named(node: ast.expr) -> bool:
    """A name or an attribute chain on one (``x``, ``self.a.b``)."""
    return _root(node) is not None


def _self_attribute(node: ast.expr) -> bool:
    """``self.a`` or ``self.a.b…``."""
    return isinstance(node, ast.Attribute) and _root(node) == "self"


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def statements(body: list[ast.stmt], *, into_defs: bool) -> Iterator[ast.AST]:
    """Every statement of ``body`` and of the blocks inside it (``into_defs``: of nested functions and
    classes too) — statements only, not the expressions in them: a fraction of :func:`ast.walk`."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if not into_defs and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name in _BLOCKS:
            inner = getattr(node, name, None)
            if inner:
                stack.extend(reversed(inner))


def statements_in(node: ast.AST | None) -> Iterator[ast.AST]:
    """Every statement inside ``node`` (a module, def or class), nested defs' too, handlers included: what
    :func:`ast.walk` yields of them, in the order they are written, without visiting an expression."""
    return statements(getattr(node, "body", []), into_defs=True)


def absolute(level: int, module: str, package: str) -> str:
    """The absolute name of ``from <level dots><module> import …`` written in ``package``."""
    if not level:
        return module
    parts = package.split(".") if package else []
    parts = parts[: len(parts) - level + 1] if level > 1 else parts
    return ".".join([*parts, module] if module else parts)


def read_calls(text: str, module: str, package: str) -> CallFacts:
    """The :class:`CallFacts` of ``module`` (whose relative imports start from ``package``)."""
    if too_wild(text) is not None:
        return NOTHING
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return NOTHING
    return _Reader(tree, module, package).facts()


class _Reader:
    def __init__(self, tree: ast.Module, module: str, package: str) -> None:
        self.tree, self.module, self.package = tree, module, package
        self.imports: dict[str, str] = {}
        self.names: dict[str, str] = {}  # what a bare name means anywhere in the module
        self.calls: dict[str, tuple[str, ...]] = {}
        self.classes: dict[str, tuple[str, ...]] = {}
        self.fields: dict[str, dict[str, list[str]]] = {}  # class qualname → attribute → its classes' symbols

    def facts(self) -> CallFacts:
        self._bind()
        self._collect(self.tree.body, "", "")
        for qualname, fn, cls in self._functions(self.tree.body, "", ""):
            calls = [node for node in every_run(fn.body) if isinstance(node, ast.Call)]
            found = [s for node in calls for s in self._called(node, cls)]
            self.calls[qualname] = tuple(dict.fromkeys(found))
        return CallFacts(self.calls, self.classes, self.imports)

    def _bind(self) -> None:
        """Import bindings (those at module level first) and the module's own definitions."""
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.names[node.name] = f"{self.module}.{node.name}"
                self.imports.pop(node.name, None)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self._import(node, self.imports)
        late: dict[str, str] = {}  # deferred imports (inside a function) bind names there: the first wins
        for each in reversed(list(statements(self.tree.body, into_defs=True))):
            if isinstance(each, (ast.Import, ast.ImportFrom)) and each.col_offset:
                self._import(each, late)
        for k, v in late.items():  # fills gaps only
            self.names.setdefault(k, v)
        for k, v in self.imports.items():
            self.names.setdefault(k, v)

    def _import(self, node: ast.Import | ast.ImportFrom, into: dict[str, str]) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    into[a.asname] = a.name
                else:
                    head = a.name.split(".")[0]
                    into[head] = head
            return
        base = absolute(node.level, node.module or "", self.package)
        for a in node.names:
            if a.name != "*" and base:
                into[a.asname or a.name] = f"{base}.{a.name}"

    def _collect(self, body: list[ast.stmt], prefix: str, cls: str) -> None:
        """Every class: its bases and what its attributes are made of."""
        for node in body:
            if isinstance(node, ast.ClassDef):
                name = f"{prefix}.{node.name}" if prefix else node.name
                self.classes[name] = tuple(s for b in node.bases for s in self._symbols(b, ""))
                self.fields[name] = {}
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        self._field(name, item.target.id, item.annotation, annotated=True)
                self._collect(node.body, name, name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}.{node.name}" if prefix else node.name
                if cls:
                    self._fields_of(node, cls)
                self._collect(node.body, name, "")

    def _fields_of(self, fn: Def, cls: str) -> None:
        for node in statements(fn.body, into_defs=False):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                for t in node.targets:
                    if _self_attr(t):
                        assert isinstance(t, ast.Attribute)
                        self._field(cls, t.attr, node.value.func, annotated=False)
            elif isinstance(node, ast.AnnAssign) and _self_attr(node.target):
                assert isinstance(node.target, ast.Attribute)
                self._field(cls, node.target.attr, node.annotation, annotated=True)

    def _field(self, cls: str, attr: str, expr: ast.expr, *, annotated: bool) -> None:
        if annotated:
            expr = _unoptional(expr)
        found = self.fields[cls].setdefault(attr, [])
        found += [s for s in self._symbols(expr, "") if s not in found]

    def _functions(self, body: list[ast.stmt], prefix: str, cls: str) -> Iterator[tuple[str, Def, str]]:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}.{node.name}" if prefix else node.name
                yield name, node, cls
                yield from self._functions(node.body, name, "")
            elif isinstance(node, ast.ClassDef):
                name = f"{prefix}.{node.name}" if prefix else node.name
                yield from self._functions(node.body, name, name)

    def _called(self, call: ast.Call, cls: str) -> list[str]:
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super"
            and cls
        ):
            return [f"{b}.{func.attr}" for b in self.classes.get(cls, ())]
        return self._symbols(func, cls)

    def _symbols(self, expr: ast.expr, cls: str) -> list[str]:
        """The dotted symbols ``expr`` may name (none when the file does not tell)."""
        if isinstance(expr, ast.Name):
            if expr.id in ("self", "cls") and cls:
                return [f"{self.module}.{cls}"]
            bound = self.names.get(expr.id)
            return [bound] if bound else []
        if isinstance(expr, ast.Attribute):
            if _self_attr(expr) and cls:
                typed = self.fields.get(cls, {}).get(expr.attr)
                if typed:
                    return list(typed)
            return [f"{s}.{expr.attr}" for s in self._symbols(expr.value, cls)]
        return []


def _self_attr(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _unoptional(expr: ast.expr) -> ast.expr:
    """``Optional[T]`` and ``T | None`` as ``T``; a string annotation parsed."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        try:
            expr = ast.parse(expr.value, mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            return expr
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, (ast.Name, ast.Attribute)):
        name = expr.value.id if isinstance(expr.value, ast.Name) else expr.value.attr
        if name == "Optional":
            return _unoptional(expr.slice)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
        sides = [s for s in (expr.left, expr.right) if not (isinstance(s, ast.Constant) and s.value is None)]
        if len(sides) == 1:
            return _unoptional(sides[0])
    return expr
