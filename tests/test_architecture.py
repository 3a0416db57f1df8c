"""The shape of the house: imports point only downward, and functions stay small.

Every module of ``patchguard`` is read with ``ast`` (never imported); every import counts, at module level
or inside a function. DESIGN.md's module map is the reference: a package may import only what lies below it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import REPO

PACKAGE = REPO / "patchguard"

# The bottom of the house, lowest first: each may import only modules earlier in this list.
BOTTOM = ["_version", "errors", "model", "_fs", "config", "diffs", "env", "rulebook", "txn", "state"]

# What each package (or top module) may import besides the bottom modules and its own package.
ALLOWED: dict[str, set[str]] = {
    "integrity": set(),
    "analysis": set(),
    "formats": set(),
    "pristine": {"integrity"},
    "patchsets": {"pristine", "integrity"},
    "deploy": {"patchsets", "integrity"},
    "audit": {"deploy", "patchsets", "analysis", "pristine", "integrity"},
    "cli": {"audit", "deploy", "patchsets", "analysis", "pristine", "integrity", "formats"},
    "__main__": {"cli"},
    "": {"audit", "deploy", "patchsets", "analysis", "pristine", "integrity", "formats"},  # the public API
}

_DECISIONS = (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.Assert)
MAX_LINES = 60
MAX_COMPLEXITY = 20


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """(imported patchguard module, line) for every import of a module, top-level or in a function."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name[len("patchguard.") :] for a in node.names if a.name.startswith("patchguard.")]
        else:
            if node.level:
                parts = name.split(".") if name else []
                if not is_package:
                    parts = parts[:-1]
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, node.module] if node.module else parts)
            elif node.module and (node.module == "patchguard" or node.module.startswith("patchguard.")):
                base = node.module[len("patchguard") :].lstrip(".")
            else:
                continue
            targets = [base] + [f"{base}.{a.name}".strip(".") for a in node.names]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target != name and (target or name):
                yield target, node.lineno


GRAPH = {name: sorted({t for t, _ in _imports(name, path)}) for name, path in MODULES.items()}


def _owner(module: str) -> str:
    """The room a module belongs to: its top package, or the module itself at the top level."""
    return module.split(".", 1)[0]


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    # The package face ("") only hands names on: it is left out, as every submodule may import __version__
    # from _version instead.
    graph = {k: [t for t in v if t] for k, v in GRAPH.items() if k}
    assert _cycles(graph) == [], "import cycles (module -> module): " + "; ".join(
        " <-> ".join(c) for c in _cycles(graph)
    )


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert _cycles({"a": ["b"], "b": []}) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module: str) -> None:
    owner = _owner(module)
    wrong = []
    for target, line in _imports(module, MODULES[module]):
        target_owner = _owner(target)
        if target_owner == owner and owner not in BOTTOM:
            continue  # within its own package
        if owner in BOTTOM:
            ok = target_owner in BOTTOM and BOTTOM.index(target_owner) < BOTTOM.index(owner)
        else:
            ok = target_owner in BOTTOM or target_owner in ALLOWED[owner]
        if not ok:
            wrong.append(f"line {line}: {module or 'patchguard'} -> {target or 'patchguard'}")
    assert not wrong, "imports that point up or sideways:\n" + "\n".join(wrong)


def test_every_room_is_on_the_map() -> None:
    rooms = {_owner(m) for m in MODULES}
    assert rooms <= set(BOTTOM) | set(ALLOWED), rooms - set(BOTTOM) - set(ALLOWED)


def _complexity(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """McCabe's number as radon counts it: 1 + decisions (branches, loops, handlers, asserts,
    comprehensions and their filters, boolean operands beyond the first, match cases)."""
    n = 1
    for node in ast.walk(fn):
        if isinstance(
            node, (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.Assert)
        ):
            n += 1
        elif isinstance(node, ast.comprehension):
            n += 1 + len(node.ifs)
        elif isinstance(node, ast.BoolOp):
            n += len(node.values) - 1
        elif isinstance(node, ast.match_case):
            n += 1
    return n


def _functions() -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef, list[str]]]:
    for name, path in MODULES.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield name, node, lines


def test_functions_are_small() -> None:
    """None over 60 lines or complexity 20, except a hot loop whose comment says why (a comment naming
    "hot loop" on the lines just above its ``def``)."""
    big = []
    for module, fn, lines in _functions():
        assert fn.end_lineno is not None
        length = fn.end_lineno - fn.lineno + 1
        cc = _complexity(fn)
        if length <= MAX_LINES and cc <= MAX_COMPLEXITY:
            continue
        first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
        above = "\n".join(lines[max(0, first - 4) : first]).lower()
        if "hot loop" in above:
            continue
        big.append(f"{module}.{fn.name}: {length} lines, complexity {cc}")
    assert not big, "functions to split (or to justify as a hot loop):\n" + "\n".join(big)
