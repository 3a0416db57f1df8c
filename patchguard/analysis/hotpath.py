"""The hot path inside one file: what a per-step function calls, statically, is hot too.

A forward, or an engine's per-step method (:func:`.rules.on_hot_path`), runs for every request; so does what
it calls on every step: ``self._compute_attention(...)`` from ``forward``, a module function ``_gather(...)``
from ``run_batch``. Calls are resolved by name within the file only — methods of the same class through
``self``/``cls``, the module's own functions by their name — and followed transitively. A call made under a
condition (``if batch is None: self.check_memory()``, ``if step % 40 == 0: self.log_stats()``) is not taken
as every step's. Nothing is imported. Across files, the framework's own entry points say more
(:mod:`.reach.hot`); what they make hot here is given as seeds.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Mapping

from .reach.calls import every_run, statements
from .rules import on_hot_path

__all__ = ["hot_functions"]


def hot_functions(tree: ast.Module, seeds: Mapping[str, str] | None = None) -> dict[str, str]:
    """Qualified name → the hot function that calls it (itself for a per-step function), for every function
    of the file on the hot path. ``seeds``: functions of the file known hot from elsewhere (a framework's
    entry point in another module calls them: :mod:`.reach.hot`) → the entry point they are called from."""
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    owner: dict[str, str] = {}  # function qualname -> its class qualname ("" at module level)
    _collect(tree.body, "", "", functions, owner)
    bound = _bound_methods(functions, owner)
    hot = {q: q for q in functions if on_hot_path(q.rsplit(".", 1)[-1])}
    for q, caller in (seeds or {}).items():
        if q in functions:
            hot.setdefault(q, caller)
    queue = deque(hot)
    while queue:
        caller = queue.popleft()
        for callee in _callees(functions[caller], owner[caller], functions, bound):
            if callee not in hot:
                hot[callee] = caller
                queue.append(callee)
    return hot


def _collect(
    body: list[ast.stmt],
    prefix: str,
    cls: str,
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    owner: dict[str, str],
) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}.{node.name}" if prefix else node.name
            functions[name], owner[name] = node, cls
            _collect(node.body, name, "", functions, owner)
        elif isinstance(node, ast.ClassDef):
            name = f"{prefix}.{node.name}" if prefix else node.name
            _collect(node.body, name, name, functions, owner)


def _callees(
    fn: ast.FunctionDef | ast.AsyncFunctionDef,
    cls: str,
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    bound: Mapping[str, set[str]],
) -> list[str]:
    out = []
    for node in every_run(fn.body):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and cls:
            if func.value.id in ("self", "cls") and f"{cls}.{func.attr}" in functions:
                out.append(f"{cls}.{func.attr}")
            elif func.value.id == "self":  # ``self.ffn(x)``, where ``self.ffn = self.moe_with_rmoe``
                out += sorted(bound.get(f"{cls}.{func.attr}", ()))
        elif isinstance(func, ast.Name) and func.id in functions:
            out.append(func.id)
    return out


def _bound_methods(
    functions: Mapping[str, ast.FunctionDef | ast.AsyncFunctionDef], owner: Mapping[str, str]
) -> dict[str, set[str]]:
    """``Class.attribute`` → the methods of the class an instance attribute is bound to anywhere in the
    class (``self.ffn = self.moe_with_rmoe``; a ``lambda`` or ``functools.partial`` of one): calling the
    attribute calls them."""
    out: dict[str, set[str]] = {}
    for q, fn in functions.items():
        cls = owner[q]
        if not cls:
            continue
        for node in statements(fn.body, into_defs=True):  # an assignment is a statement
            if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                continue
            target = node.targets[0]
            if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)):
                continue
            if target.value.id != "self" or f"{cls}.{target.attr}" in functions:
                continue
            methods = {f"{cls}.{m}" for m in _methods_in(node.value)} & functions.keys()
            if methods:
                out.setdefault(f"{cls}.{target.attr}", set()).update(methods)
    return out


def _methods_in(value: ast.expr) -> set[str]:
    """The ``self`` methods a bound value stands for: ``self.m``, a ``lambda`` calling ``self.m(…)``,
    ``functools.partial(self.m, …)``."""
    if isinstance(value, ast.Lambda):
        calls = [n.func for n in ast.walk(value.body) if isinstance(n, ast.Call)]
        return {m for c in calls for m in _methods_in(c)}
    if (
        isinstance(value, ast.Call)
        and value.args
        and (
            getattr(value.func, "attr", None) == "partial"
            or (isinstance(value.func, ast.Name) and value.func.id == "partial")
        )
    ):
        return _methods_in(value.args[0])
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "self":
        return {value.attr}
    return set()
