"""The shape of the house: imports point only downward, and functions stay small.

Every module of ``patchguard`` is read with ``ast`` (never imported); every import counts, at module level
or inside a function. ARCHITECTURE.md's rooms (and the shared design notes' module map) are the reference: a
package may import only what lies below it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import REPO

PACKAGE = REPO / "patchguard"

# The bottom of the house, lowest first: each may import only modules earlier in this list.
BOTTOM = [
    "_version",
    "errors",
    "model",
    "_fs",
    "config",
    "diffs",
    "env",
    "rulebook",
    "results",
    "txn",
    "state",
]

# A bottom package's modules, lowest first: each may import only those before it (``__init__``: all).
LAYERS = {
    # Every command's result, one module by kind: none needs another.
    "results": ["check", "running", "rebase", "bisect", "fleet"],
    "txn": [
        "values",
        "durable",
        "locking",
        "paths",
        "journal",
        "rollback",
        "backups",
        "staging",
        "sessions",
        "transaction",
    ],
}

# What each package (or top module) may import besides the bottom modules and its own package.
ALLOWED: dict[str, set[str]] = {
    "integrity": set(),
    "analysis": set(),
    "formats": set(),
    "pristine": {"integrity"},
    "patchsets": {"pristine", "integrity"},
    "deploy": {"patchsets", "pristine", "integrity"},
    "audit": {"deploy", "patchsets", "analysis", "pristine", "integrity"},
    "api": {"audit", "deploy", "patchsets", "pristine", "integrity"},  # the public functions: the edge
    "cli": {"audit", "deploy", "patchsets", "analysis", "pristine", "integrity", "formats"},
    "__main__": {"cli"},
    "": {"api", "audit", "deploy", "patchsets", "analysis", "pristine", "integrity", "formats"},  # the API
}

_DECISIONS = (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.Assert)
MAX_LINES = 60
MAX_COMPLEXITY = 15


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _base(name: str, is_package: bool, node: ast.ImportFrom) -> str | None:
    """The patchguard module a ``from … import`` in module ``name`` imports from (None: not patchguard)."""
    if node.level:
        parts = name.split(".") if name else []
        if not is_package:
            parts = parts[:-1]
        parts = parts[: len(parts) - node.level + 1]
        return ".".join([*parts, node.module] if node.module else parts)
    if node.module and (node.module == "patchguard" or node.module.startswith("patchguard.")):
        return node.module[len("patchguard") :].lstrip(".")
    return None


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
            base = _base(name, is_package, node)
            if base is None:
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


def _layered(package: str, module: str, target: str) -> bool:
    """Whether ``module`` of a bottom package may import ``target`` of the same package: its ``__init__``
    any of them, every other only those below it in the package's layers."""
    layers = LAYERS.get(package, [])
    inner, _, rest = target.partition(".")[2].partition(".")
    if module == package:
        return inner in layers
    mine = module.partition(".")[2].partition(".")[0]
    return mine in layers and inner in layers and layers.index(inner) < layers.index(mine) and not rest


def test_every_module_of_a_layered_package_has_its_layer() -> None:
    for package, layers in LAYERS.items():
        found = {m.split(".")[1] for m in MODULES if m.startswith(package + ".")}
        assert found == set(layers), (package, found ^ set(layers))


# Where an environment named as the command line names it (``site_packages``/``python``) becomes a Target:
# the public functions, the CLI's option, and the resolver itself. Every stage below takes the Target.
EDGES = {"api": None, "cli._common": {"resolved"}, "env": {"resolve_target"}}


def _takes_the_pair(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    names = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    return {"site_packages", "python"} <= names


def _resolves(tree: ast.AST) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) == "resolve_target"
    ]


def test_the_environment_is_resolved_at_the_edge_only() -> None:
    """No stage takes the ``(site_packages, python)`` pair or resolves a Target itself: the API and the
    CLI make it once and hand it down."""
    wrong = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        allowed = EDGES.get(name, set())
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or allowed is None:
                continue
            if _takes_the_pair(node) and node.name not in allowed:
                wrong.append(f"{name}.{node.name} takes site_packages and python")
        if name not in EDGES:
            wrong += [f"{name} line {line} resolves the environment" for line in _resolves(tree)]
    assert not wrong, "below the edge:\n" + "\n".join(wrong)


def test_the_edge_finder_finds_pairs() -> None:
    tree = ast.parse("def f(x, *, site_packages=None, python=None): resolve_target(python, site_packages)")
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef) and _takes_the_pair(fn) and _resolves(tree) == [1]
    assert not _takes_the_pair(ast.parse("def g(target): pass").body[0])  # type: ignore[arg-type]


# A package's families (sub-packages): its other modules are the core, which imports no family; a family
# imports the core and itself, never another family.
FAMILIES = {"patchsets": {"rebase", "bisect"}}


def _family(package: str, module: str) -> str:
    part = module.split(".")[1] if module.count(".") else ""
    return part if part in FAMILIES[package] else ""


@pytest.mark.parametrize("package", sorted(FAMILIES))
def test_families_import_the_core_and_themselves_only(package: str) -> None:
    assert {f"{package}.{family}" for family in FAMILIES[package]} <= set(MODULES)
    wrong = []
    for module, path in MODULES.items():
        if not module.startswith(package + ".") or module == package:
            continue
        mine = _family(package, module)
        for target, line in _imports(module, path):
            if not target.startswith(package + "."):
                continue
            theirs = _family(package, target)
            if theirs and theirs != mine:
                wrong.append(f"line {line}: {module} -> {target}")
    assert not wrong, "a family reached sideways or the core reached up:\n" + "\n".join(wrong)


# deploy's rooms (sub-packages), one by job, and the rooms each may import besides itself (and the house below
# deploy, as ALLOWED says). deploy's own modules (its face, ``bisecting``, the former paths) sit above the
# rooms and may import any of them; a room imports none of deploy's own modules.
DEPLOY_ROOMS: dict[str, set[str]] = {
    "identity": set(),  # locks, other hosts' documents, the fleet's comparison
    "processes": set(),  # what runs
    "check": {"identity", "processes"},  # the gate: against a lock, and which processes are stale
    "upgrades": {"identity"},  # the plan, and the rollback to a lock
}
# The modules deploy had before it had rooms: each hands on the names of its room's module, nothing more.
DEPLOY_FORMER = {
    "policy": "check.policy",
    "gate": "check.gate",
    "lockfile": "identity.lockfile",
    "hostdocs": "identity.hostdocs",
    "fleet": "identity.fleet",
    "running": "processes.running",
    "upgrade": "upgrades.upgrade",
    "rollback": "upgrades.rollback",
}


def _deploy_room(module: str) -> str:
    """The room of a ``deploy`` module ("": deploy's own modules)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else ""


def test_deploy_rooms_import_themselves_and_the_rooms_they_need_only() -> None:
    packages = {m.split(".")[1] for m in MODULES if m.count(".") >= 2 and m.startswith("deploy.")}
    assert packages == set(DEPLOY_ROOMS), packages ^ set(DEPLOY_ROOMS)
    own = {m.split(".")[1] for m in MODULES if m.count(".") == 1 and m.startswith("deploy.")}
    assert own - set(DEPLOY_ROOMS) == set(DEPLOY_FORMER) | {"bisecting"}, own
    wrong = []
    for module, path in MODULES.items():
        mine = _deploy_room(module)
        if not module.startswith("deploy.") or not mine:
            continue
        for target, line in _imports(module, path):
            theirs = _deploy_room(target) if target.startswith("deploy.") else None
            if target == "deploy" or theirs == "" or (theirs and theirs not in DEPLOY_ROOMS[mine] | {mine}):
                wrong.append(f"line {line}: {module} -> {target}")
    assert not wrong, "a deploy room reached a room it may not, or up to deploy:\n" + "\n".join(
        dict.fromkeys(wrong)
    )


@pytest.mark.parametrize("former", sorted(DEPLOY_FORMER))
def test_deploy_former_paths_hand_on_their_rooms_names(former: str) -> None:
    """``patchguard.deploy.<former>`` imports its room's module and defines nothing: every public name it had
    is that module's own object (monkeypatch the room's module, where the code reads it)."""
    import importlib

    old = importlib.import_module(f"patchguard.deploy.{former}")
    new = importlib.import_module(f"patchguard.deploy.{DEPLOY_FORMER[former]}")
    assert old.__all__ == new.__all__
    public = {n for n in vars(old) if not n.startswith("_")}
    assert public >= set(new.__all__)
    assert all(getattr(old, n) is getattr(new, n) for n in public)
    tree = ast.parse(MODULES[f"deploy.{former}"].read_text(encoding="utf-8"))
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    kinds = {type(n) for n in body}
    assert kinds <= {ast.ImportFrom, ast.Assign}, kinds


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
        if target_owner == owner:
            ok = _layered(owner, module, target)
        elif owner in BOTTOM:
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
    """None over 60 lines or complexity 15, except a hot loop whose comment says why (a comment naming
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


def _union_members(node: ast.expr) -> list[ast.expr]:
    """The members of a union annotation (``A | B``, ``Union[A, B]``, ``Optional[A]``, quoted or not);
    any other annotation is a union of one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
        return _union_members(ast.parse(node.value, mode="eval").body)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union_members(node.left) + _union_members(node.right)
    if isinstance(node, ast.Subscript):
        kind = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if kind == "Union":
            return [m for a in args for m in _union_members(a)]
        if kind == "Optional":
            return [*_union_members(args[0]), ast.Constant(None)]
    return [node]


def _string_as_failure(returns: ast.expr) -> bool:
    """A return annotation ``X | str`` with X not ``None``: the string is why it failed."""
    members = _union_members(returns)
    strings = [m for m in members if isinstance(m, ast.Name) and m.id == "str"]
    others = [
        m for m in members if m not in strings and not (isinstance(m, ast.Constant) and m.value is None)
    ]
    return bool(strings) and bool(others)


@pytest.mark.parametrize(
    ("annotation", "flagged"),
    [
        ("FilePatch | str", True),
        ("tuple[str, str] | str", True),
        ("str | list[RecordEntry]", True),
        ("Union[bytes, str]", True),
        ("typing.Union[int, str, None]", True),
        ("'ReleaseFiles | str'", True),
        ("str | None", False),
        ("Optional[str]", False),
        ("str", False),
        ("dict[str, int] | None", False),
        ("EditableSource | NoCheckout", False),
    ],
)
def test_the_failure_string_finder(annotation: str, flagged: bool) -> None:
    assert _string_as_failure(ast.parse(annotation, mode="eval").body) is flagged


def test_no_string_as_a_failure() -> None:
    """A function returns its value, or raises a :class:`PatchguardError` subclass (or returns a small
    result type) when it cannot: never ``T | str`` with the string as the reason, which every caller must
    remember to test with ``isinstance(got, str)``. ``str | None`` (a text, or nothing) stays."""
    found = [
        f"{module}.{fn.name} (line {fn.lineno}): -> {ast.unparse(fn.returns)}"
        for module, fn, _lines in _functions()
        if fn.returns is not None and _string_as_failure(fn.returns)
    ]
    assert not found, (
        "functions returning a failure as a string (raise or return a result type):\n" + "\n".join(found)
    )


def test_rule_ids_are_named_by_the_enum_outside_the_rulebook() -> None:
    """A rule id in code is a ``RuleId`` member, never a string literal (a typo there is a rule that never
    fires, which no type checker sees); only the rulebook, which the enum is generated from, spells them.
    Docstrings and comments may quote them, and another enum may have a member of the same word
    (``verifier.Status.UNREADABLE``)."""
    from patchguard.model import RuleId

    ids = {r.value for r in RuleId}
    found = []
    for module, path in MODULES.items():
        if module in ("rulebook", "model"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        } | {
            id(stmt.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
            for stmt in node.body
            if isinstance(stmt, ast.Assign)
        }
        found += [
            f"{module} line {node.lineno}: {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in ids and id(node) not in docstrings
        ]
    assert not found, "rule ids spelled as strings (use model.RuleId):\n" + "\n".join(found)


# --- The seam between results and text (issue 25): formats are objects behind one interface ---------------

# What the CLI may import of patchguard.formats: the registry (the package face) and the interface.
FORMATS_FACE = {"formats", "formats.interface"}
# Modules and calls that would make a format do IO or speak to the terminal itself.
_IMPURE_MODULES = {"click", "subprocess", "shutil", "pathlib", "socket", "logging", "sys"}
_IMPURE_CALLS = {"open", "print", "input"}


def _from_imports(name: str, path: Path) -> Iterator[tuple[str, list[str], int]]:
    """(patchguard module imported from, the names imported, line) of every ``from … import``."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = _base(name, is_package, node)
            if base is not None:
                yield base, [a.name for a in node.names], node.lineno


def _cli_modules() -> list[str]:
    return sorted(m for m in MODULES if _owner(m) == "cli")


@pytest.mark.parametrize("module", _cli_modules())
def test_the_cli_takes_formats_from_the_registry_only(module: str) -> None:
    wrong = []
    for target, line in _imports(module, MODULES[module]):
        if _owner(target) == "formats" and target not in FORMATS_FACE:
            wrong.append(f"line {line}: imports {target} (a formatter's module)")
    for base, names, line in _from_imports(module, MODULES[module]):
        if _owner(base) != "formats":
            continue
        wrong += [f"line {line}: imports {n} from {base}" for n in names if n.startswith("format_")]
        wrong += [f"line {line}: imports the module {base}.{n}" for n in names if f"{base}.{n}" in MODULES]
    assert not wrong, "the CLI reaches past the registry into formats/:\n" + "\n".join(dict.fromkeys(wrong))


@pytest.mark.parametrize("module", _cli_modules())
def test_the_cli_reads_no_transaction_nor_state(module: str) -> None:
    """The CLI calls the library and prints its documents: what a transaction left (the journal, backups)
    and what ``state.json`` records reach it as values (``status``'s document), never by reading them."""
    wrong = [
        f"line {line}: imports {target}"
        for target, line in _imports(module, MODULES[module])
        if target in ("txn", "state") or target.startswith(("txn.", "state."))
    ]
    assert not wrong, "the CLI reads the transaction's or the state's files itself:\n" + "\n".join(wrong)


def _format_names() -> set[str]:
    from patchguard.formats import REGISTRY

    return {name for formats in REGISTRY.values() for name in formats.names}


def _branches_on_a_format(node: ast.AST, names: set[str]) -> bool:
    """A comparison (or ``match`` case) with a format's name, or with the ``fmt`` option's value."""

    def named(n: ast.AST) -> bool:
        if isinstance(n, ast.Constant):
            return n.value in names
        if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
            return any(named(e) for e in n.elts)
        return isinstance(n, ast.Name) and n.id in ("fmt", "format_name")

    if isinstance(node, ast.Compare):
        return any(named(n) for n in (node.left, *node.comparators))
    if isinstance(node, ast.MatchValue):
        return named(node.value)
    return False


@pytest.mark.parametrize("module", _cli_modules())
def test_the_cli_never_branches_on_a_format_name(module: str) -> None:
    names = _format_names()
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    wrong = [f"line {getattr(n, 'lineno', '?')}" for n in ast.walk(tree) if _branches_on_a_format(n, names)]
    assert not wrong, f"{module} decides by a format's name (ask the format instead): " + ", ".join(wrong)


def test_the_branch_finder_finds_branches() -> None:
    names = {"json", "text"}
    for code in ('fmt == "json"', 'fmt in ("table", "text")', 'x if "json" != kind else y', "fmt is None"):
        assert any(_branches_on_a_format(n, names) for n in ast.walk(ast.parse(code))), code
    found = ast.walk(ast.parse('match kind:\n    case "json":\n        pass\n'))
    assert any(_branches_on_a_format(n, names) for n in found)
    assert not any(_branches_on_a_format(n, names) for n in ast.walk(ast.parse('kind == "lock"')))


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _owner(m) == "formats"))
def test_formats_are_pure(module: str) -> None:
    """Nothing in formats/ does IO or prints: no click, no files, no processes (``os.path`` only)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    wrong = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            wrong += [a.name for a in node.names if a.name.split(".")[0] in _IMPURE_MODULES]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            wrong += [node.module] if node.module.split(".")[0] in _IMPURE_MODULES else []
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _IMPURE_CALLS:
            wrong.append(f"{node.func.id}() at line {node.lineno}")
    assert not wrong, wrong


def test_every_registry_holds_the_formats_it_names() -> None:
    from patchguard.formats import REGISTRY, Format

    for kind, formats in REGISTRY.items():
        assert formats.kind == kind and formats.names, kind
        loaded = formats.formats()  # raises when the names registered are not the formats' own
        assert all(isinstance(f, Format) for f in loaded), kind
        assert [formats.get(name).name for name in formats.names] == list(formats.names)
    with pytest.raises(LookupError):
        REGISTRY["report"].get("yaml")


def test_every_format_option_offers_its_registry() -> None:
    """``--format`` of each command is its document kind's registry: the same names, the same default."""
    import click

    from patchguard.cli import main
    from patchguard.formats import REGISTRY

    offered = {}
    for name, command in main.commands.items():
        for param in command.params:
            if isinstance(param, click.Option) and "--format" in param.opts:
                assert isinstance(param.type, click.Choice)
                offered[name] = (tuple(param.type.choices), param.default)
    kinds = {
        "scan": "report",
        "check": "check",
        "diff": "diff",
        "running": "running",
        "rebase": "rebase",
        "plan": "plan",
        "rollback": "rollback",
        "bisect": "bisect",
        "fleet": "fleet",
        "apply": "set-change",
        "revert": "set-change",
        "restore": "restore",
        "capture": "capture",
        "status": "status",
        "lock": "lock",
    }
    assert REGISTRY["rebase-all"].names == REGISTRY["rebase"].names  # rebase --all: the same --format
    assert offered == {cmd: (REGISTRY[k].names, REGISTRY[k].default) for cmd, k in kinds.items()}


def test_building_the_command_line_imports_no_formatter() -> None:
    """The registry names its formats without importing them: ``patchguard --version`` stays fast."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom patchguard.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('patchguard.formats.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(ast.literal_eval(out.splitlines()[-1]))
    assert loaded <= {f"patchguard.{m}" for m in FORMATS_FACE | {"formats.documents"}}, loaded


def _protocols(tree: ast.AST) -> list[str]:
    """The classes of a module that are a ``typing.Protocol`` (``Protocol``, ``typing.Protocol``,
    ``Protocol[T]``, from ``typing`` or ``typing_extensions``)."""

    def is_protocol(base: ast.expr) -> bool:
        base = base.value if isinstance(base, ast.Subscript) else base
        return (isinstance(base, ast.Name) and base.id == "Protocol") or (
            isinstance(base, ast.Attribute) and base.attr == "Protocol"
        )

    return [
        f"{node.name} (line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and any(is_protocol(b) for b in node.bases)
    ]


def test_the_protocol_finder_finds_protocols() -> None:
    code = (
        "class A(Protocol): ...\nclass B(typing.Protocol): ...\nclass C(Protocol[T]): ...\n"
        "class D(typing_extensions.Protocol, Generic[T]): ...\nclass E(ABC): ...\nclass F: ...\n"
    )
    assert [found.split()[0] for found in _protocols(ast.parse(code))] == ["A", "B", "C", "D"]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _owner(m) == "formats"))
def test_formats_read_the_results_themselves(module: str) -> None:
    """No protocol in formats/: a formatter reads the result's own type (the model's, or a command's result
    in :mod:`patchguard.results`), never a mirror of it that must be kept in step by hand (issue 37)."""
    found = _protocols(ast.parse(MODULES[module].read_text(encoding="utf-8")))
    assert not found, f"{module} defines protocols (import the result's type instead): {', '.join(found)}"


def test_hot_is_defined_once() -> None:
    """What is hot by name is :data:`patchguard.analysis.rules.HOT_PATH` and ``is_forward``; the corpus
    checker (stdlib only, so it holds a copy) names no other."""
    import importlib.util

    from patchguard.analysis.rules import HOT_PATH

    path = PACKAGE.parent / "fixtures" / "analysis" / "check_corpus.py"
    spec = importlib.util.spec_from_file_location("check_corpus", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert set(module.HOT_NAMES) <= set(HOT_PATH)


# Where a JSON document enters, and what it becomes there. Own documents (state, journal, session, lock file,
# caches, a rebase's review key) are parsed into frozen values in their module and nowhere else; the others
# are other programs' documents (pip's report, conda's records, an index's PEP 691 pages, the interpreter
# probe), parsed where they are read.
DOCUMENT_PARSERS = {
    "state": "patchguard.state/1 → AppliedRecord",
    "txn.journal": "patchguard.journal/1 → Journal",
    "txn.sessions": "patchguard.session/1 → _Held",
    "deploy.identity.lockfile": "patchguard.lock/1",
    "deploy.identity.hostdocs": "other hosts' documents → frozen values",
    "deploy.upgrades.upgrade": "pip's installation report",
    "patchsets.rebase.review": "rebase.json, a review directory's key",
    "analysis.reach": "the reach cache",
    "analysis.kept": "the analysis cache",
    "integrity.condarecord": "conda-meta records",
    "pristine.conda": "a conda package's info/",
    "pristine.index": "PEP 691 pages",
    "pristine.vcs": "direct_url.json",
    "env": "the interpreter probe's answer",
}


def _json_parses(path: Path) -> list[int]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
            if name == "parse_json" or (owner == "json" and name in ("loads", "load")):
                out.append(node.lineno)
    return out


def test_documents_are_parsed_where_they_enter() -> None:
    """A JSON document is parsed in the one module that turns it into values; every other module reads the
    values (a field read off a dict elsewhere is a typo mypy cannot see)."""
    wrong = [
        f"{name} line {line}"
        for name, path in MODULES.items()
        if name not in DOCUMENT_PARSERS and name != "_fs"
        for line in _json_parses(path)
    ]
    assert not wrong, "JSON parsed outside the document parsers:\n" + "\n".join(wrong)
    stale = [name for name in DOCUMENT_PARSERS if not _json_parses(MODULES[name])]
    assert not stale, f"listed as parsers but parse nothing: {stale}"
