"""Where things are in a Python file, cheaply: changed regions, scopes, imports, module-level flags.

Locating is done with the standard library (``difflib`` for regions, ``ast`` for the scope tree: 20 ms for
a 2,000-line file, where a full libcst parse with positions costs over half a second). The changed code
itself is then judged with libcst, one enclosing scope at a time (:mod:`patchguard.analysis.judge`).
Nothing is imported or executed: files are parsed.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..diffs import split_lines
from ..model import Gate, GateKind
from .aliases import bind_ast_imports, reads_environment

__all__ = ["IfSpan", "Region", "Scope", "Structure", "changed_regions", "structure"]


@dataclass(frozen=True, slots=True)
class Region:
    """A changed region: lines ``start..end`` (1-based, inclusive) of the installed file.

    ``removed`` holds the pristine lines this region replaced (empty for a pure insertion); a pure
    deletion has ``start > end`` (nothing added) and sits before line ``start``.
    """

    start: int
    end: int
    removed: tuple[str, ...] = ()
    old_start: int = 0  # the pristine line the removed lines began at

    @property
    def lines(self) -> range:
        return range(self.start, self.end + 1)


def changed_regions(before: str | None, after: str) -> list[Region]:
    """The regions of ``after`` that differ from ``before`` (everything, when there is no baseline)."""
    new = split_lines(after)
    if before is None:
        return [Region(1, len(new))] if new else []
    old = split_lines(before)
    out: list[Region] = []
    # A last line that only gained its newline (a line added after it) is the same line.
    old_keys, new_keys = ([ln[:-1] if ln.endswith("\n") else ln for ln in side] for side in (old, new))
    opcodes = difflib.SequenceMatcher(None, old_keys, new_keys, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            continue
        out.append(Region(j1 + 1, j2, tuple(old[i1:i2]), i1 + 1))
    return out


@dataclass(frozen=True, slots=True)
class Scope:
    """A def or class: its qualified name and the lines it spans (decorators included)."""

    qualname: str
    kind: str  # "def", "async def", "class"
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class IfSpan:
    """An ``if`` statement: the lines it spans, its test's source, and where its ``else``/``elif`` starts."""

    start: int
    end: int
    test: str
    orelse: int | None  # first line of the else branch (None: no else)


@dataclass
class Structure:
    """The scope tree, top-level statements, ``if`` gates and import aliases of one file.

    ``grammar`` says what parsed it: ``"ast"`` (the running interpreter), ``"libcst"`` (a file of a newer
    Python than the one running: PEP 695 type parameters, PEP 701 f-strings, PEP 758 excepts), or ``None``
    when nothing does (conflict markers, a truncated edit): then there are no scopes and
    ``syntax_error`` says where.
    """

    scopes: list[Scope]
    aliases: dict[str, str]  # local name -> qualified name, from module-level imports
    flags: set[str]  # module-level names bound to a constant (DEBUG = True)
    top: list[tuple[int, int]] = field(default_factory=list)  # spans of the top-level statements
    ifs: list[IfSpan] = field(default_factory=list)
    grammar: str | None = "ast"
    syntax_error: tuple[int, str] | None = None  # (line, message) when no grammar parses the file
    tree: ast.Module | None = field(default=None, repr=False, compare=False)  # the ast, when ast parsed it
    # Statements directly in a class body other than defs and classes: (start, end, the class's qualname).
    class_body: list[tuple[int, int, str]] = field(default_factory=list)
    # Simple statements (start, end) and the context a statement judged alone would not see: the spans of
    # loops, of code after a return/raise/continue/break in its block, and imports made inside functions.
    simple: list[tuple[int, int]] = field(default_factory=list)
    loops: list[tuple[int, int]] = field(default_factory=list)
    dead: list[tuple[int, int]] = field(default_factory=list)
    local_aliases: dict[str, dict[str, str]] = field(default_factory=dict)
    _hot: dict[str, str] | None = field(default=None, repr=False, compare=False)
    _fields: dict[str, frozenset[str]] | None = field(default=None, repr=False, compare=False)
    _class_names: frozenset[str] | None = field(default=None, repr=False, compare=False)
    # The ast nodes of the file's defs (by the first line of their span), classes and ``except`` handlers.
    defs: dict[int, ast.FunctionDef | ast.AsyncFunctionDef] = field(
        default_factory=dict, repr=False, compare=False
    )
    classes: list[ast.ClassDef] = field(default_factory=list, repr=False, compare=False)
    handlers: list[ast.ExceptHandler] = field(default_factory=list, repr=False, compare=False)
    made_fields: list[tuple[str, str]] = field(default_factory=list, repr=False, compare=False)

    @property
    def tensor_fields(self) -> dict[str, frozenset[str]]:
        """Class name → its fields annotated as tensors (``seq_lens: torch.Tensor`` in a dataclass), for
        every class of the file; worked out on first use."""
        if self._fields is None:
            self._fields = _tensor_fields(self.classes, self.made_fields)
        return self._fields

    @property
    def class_names(self) -> frozenset[str]:
        """The names of the file's classes (worked out once)."""
        if self._class_names is None:
            self._class_names = frozenset(c.name for c in self.classes)
        return self._class_names

    def methods_of(self, name: str) -> frozenset[str] | None:
        """The methods a class of the file named ``name`` defines, or ``None`` when the file defines no
        such class."""
        found = [c for c in self.classes if c.name == name]
        if not found:
            return None
        return frozenset(
            n.name for c in found for n in c.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        )

    def def_at(self, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The def whose span (decorators included) starts at ``line``, from the file's ast."""
        return self.defs.get(line)

    def bound_to(self, prefix: str) -> set[str]:
        """The names any import of the file (at module level or in a function) binds to ``prefix`` or
        something in it: ``th`` for ``import torch as th``, ``zeros`` for ``from torch import zeros``."""
        every = [self.aliases, *self.local_aliases.values()]
        return {n for a in every for n, q in a.items() if q == prefix or q.startswith(prefix + ".")}

    @property
    def hot(self) -> dict[str, str]:
        """Functions on the hot path (a per-step function, or one it calls in this file) → the hot caller;
        worked out on first use (only a file with a rule hit needs it)."""
        if self._hot is None:
            from .hotpath import hot_functions

            self._hot = hot_functions(self.tree) if self.tree is not None else {}
        return self._hot

    def with_hot(self, seeds: Mapping[str, str]) -> Structure:
        """This structure with functions hot from elsewhere (see :func:`.hotpath.hot_functions`)."""
        from .hotpath import hot_functions

        return replace(self, _hot=hot_functions(self.tree, seeds) if self.tree is not None else {})

    def innermost(self, line: int) -> Scope | None:
        """The innermost def/class containing ``line``."""
        best: Scope | None = None
        for s in self.scopes:
            if s.start <= line <= s.end and (best is None or s.start >= best.start):
                best = s
        return best

    def qualname_at(self, line: int) -> str | None:
        """``Class.method`` around ``line`` (``None`` at module level)."""
        scope = self.innermost(line)
        return scope.qualname if scope else None

    def gate_at(self, line: int) -> Gate | None:
        """The innermost ``if`` around ``line`` as a gate (for findings that have no node of their own)."""
        best: IfSpan | None = None
        for node in self.ifs:
            if node.start <= line <= node.end and (best is None or node.start >= best.start):
                best = node
        if best is None:
            return None
        try:
            test: ast.expr = ast.parse(best.test.strip(), mode="eval").body
        except (SyntaxError, ValueError):
            test = ast.Name("?")
        orelse = best.orelse is not None and line >= best.orelse
        return Gate(gate_kind_of(best.test, test, self.flags), f"not ({best.test})" if orelse else best.test)

    def outermost_def(self, line: int) -> Scope | None:
        """The outermost *function* containing ``line`` (what is judged as one slice)."""
        best: Scope | None = None
        for s in self.scopes:
            if s.kind != "class" and s.start <= line <= s.end and (best is None or s.start < best.start):
                best = s
        return best

    def simple_statement_at(self, line: int) -> tuple[int, int] | None:
        """The innermost simple (non-compound) statement holding ``line``."""
        best: tuple[int, int] | None = None
        for span in self.simple:
            if span[0] <= line <= span[1] and (best is None or span[0] >= best[0]):
                best = span
        return best

    def in_loop(self, line: int) -> bool:
        return any(a <= line <= b for a, b in self.loops)

    def is_dead(self, line: int) -> bool:
        return any(a <= line <= b for a, b in self.dead)

    def aliases_at(self, qualname: str) -> dict[str, str]:
        """Module-level aliases plus those bound by imports inside the functions around ``qualname``."""
        out = dict(self.aliases)
        parts = qualname.split(".") if qualname else []
        for i in range(1, len(parts) + 1):
            out.update(self.local_aliases.get(".".join(parts[:i]), {}))
        return out

    def class_statement_at(self, line: int) -> tuple[int, int, str] | None:
        """The class-body statement (not a def or a class) holding ``line``: judged alone, not with the
        whole class around it (whose methods are judged on their own)."""
        return next((s for s in self.class_body if s[0] <= line <= s[1]), None)

    def statement_at(self, line: int) -> tuple[int, int] | None:
        """The span of the top-level statement holding ``line``."""
        return next((span for span in self.top if span[0] <= line <= span[1]), None)


def _imports(nodes: Iterable[ast.stmt]) -> dict[str, str]:
    aliases: dict[str, str] = {}
    bind_ast_imports(aliases, nodes)
    return aliases


def _module_level(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, looking into top-level if/try blocks (conditional imports)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _module_level(node.body)
            yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _module_level(node.body)
            for h in node.handlers:
                yield from _module_level(h.body)
            yield from _module_level(node.orelse)


class _Segments:
    """The source text of a node (``ast.get_source_segment`` splits the whole source on every call)."""

    def __init__(self, source: str) -> None:
        self.lines = split_lines(source)

    def __call__(self, node: ast.expr) -> str:
        end_line, end_col = node.end_lineno, node.end_col_offset
        if end_line is None or end_col is None or end_line > len(self.lines):
            return ""
        chunk = [line.encode("utf-8", "surrogateescape") for line in self.lines[node.lineno - 1 : end_line]]
        if len(chunk) == 1:
            text = chunk[0][node.col_offset : end_col]
        else:
            text = chunk[0][node.col_offset :] + b"".join(chunk[1:-1]) + chunk[-1][:end_col]
        return text.decode("utf-8", "surrogateescape")


_BLOCKS = ("body", "orelse", "finalbody")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _statements(node: ast.AST) -> Iterator[tuple[int, ast.stmt]]:
    """The statements directly inside ``node``'s blocks (try handlers and match cases included), each
    with the number of the block it sits in."""
    blocks = [getattr(node, name, None) for name in _BLOCKS]
    blocks += [h.body for h in getattr(node, "handlers", ())] + [c.body for c in getattr(node, "cases", ())]
    for i, block in enumerate(blocks):
        if isinstance(block, list):
            yield from ((i, s) for s in block if isinstance(s, ast.stmt))


def _start(node: ast.stmt) -> int:
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


class _Walk:
    """Scopes, ``if`` gates and class-body statements, from one walk over the statements of a tree."""

    def __init__(self, segment: _Segments) -> None:
        self.segment = segment
        self.scopes: list[Scope] = []
        self.ifs: list[IfSpan] = []
        self.class_body: list[tuple[int, int, str]] = []
        self.simple: list[tuple[int, int]] = []
        self.loops: list[tuple[int, int]] = []
        self.dead: list[tuple[int, int]] = []
        self.local_aliases: dict[str, dict[str, str]] = {}
        self.defs: dict[int, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: list[ast.ClassDef] = []
        self.handlers: list[ast.ExceptHandler] = []
        self.made_fields: list[tuple[str, str]] = []  # (class name, field) a method gives a torch-made tensor

    def visit(self, node: ast.AST, prefix: str) -> None:
        after_terminal: set[int] = set()  # the blocks in which a terminal statement was seen
        for block, child in _statements(node):  # defs and ifs are statements: expressions are not entered
            self._note(child, prefix, block in after_terminal)
            if isinstance(child, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
                after_terminal.add(block)
            if isinstance(node, ast.ClassDef) and not isinstance(child, _SCOPES):
                self.class_body.append((_start(child), child.end_lineno or child.lineno, prefix))
            self._keep(child, prefix)
            if isinstance(child, _SCOPES):
                name = f"{prefix}.{child.name}" if prefix else child.name
                kind = (
                    "class"
                    if isinstance(child, ast.ClassDef)
                    else ("async def" if isinstance(child, ast.AsyncFunctionDef) else "def")
                )
                self.scopes.append(Scope(name, kind, _start(child), child.end_lineno or child.lineno))
                self.visit(child, name)
                continue
            if isinstance(child, ast.If):
                test = self.segment(child.test)
                orelse = min((n.lineno for n in child.orelse), default=None)
                self.ifs.append(IfSpan(child.lineno, child.end_lineno or child.lineno, test, orelse))
            self.visit(child, prefix)

    def _keep(self, child: ast.stmt, prefix: str) -> None:
        """Keep the nodes later questions need (a def by its first line, a class, a try's handlers, a field
        a method makes with torch), so that none of them walks the whole tree again."""
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.defs[_start(child)] = child
        elif isinstance(child, ast.ClassDef):
            self.classes.append(child)
        elif isinstance(child, ast.Assign) and "." in prefix:
            made = _made_tensor(child)
            if made:  # in a method: the class is the scope around it
                self.made_fields.append((prefix.rsplit(".", 1)[0].rsplit(".", 1)[-1], made))
        self.handlers += getattr(child, "handlers", ())

    def _note(self, child: ast.stmt, prefix: str, dead: bool) -> None:
        """Record a statement's span as simple, loop or dead, and a function-level import's aliases."""
        span = (_start(child), child.end_lineno or child.lineno)
        if dead:
            self.dead.append(span)
        if not hasattr(child, "body"):
            self.simple.append(span)
        if isinstance(child, (ast.For, ast.AsyncFor, ast.While)):
            self.loops.append(span)
        if prefix and isinstance(child, (ast.Import, ast.ImportFrom)):
            self.local_aliases.setdefault(prefix, {}).update(_imports([child]))


def structure(source: str, tree: ast.Module | None = None) -> Structure | None:
    """Parse ``source`` with ``ast`` (``None`` when the running interpreter's grammar cannot: see
    :mod:`.newer`); ``tree``: its ``ast`` tree, parsed already."""
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    walk = _Walk(_Segments(source))
    walk.visit(tree, "")
    top = list(_module_level(tree.body))
    flags = {
        t.id
        for node in top
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    spans = [(_start(n), n.end_lineno or n.lineno) for n in tree.body]
    return Structure(
        walk.scopes,
        _imports(top),
        flags,
        spans,
        walk.ifs,
        tree=tree,
        class_body=walk.class_body,
        simple=walk.simple,
        loops=walk.loops,
        dead=walk.dead,
        local_aliases=walk.local_aliases,
        defs=walk.defs,
        classes=walk.classes,
        handlers=walk.handlers,
        made_fields=walk.made_fields,
    )


def gate_kind_of(text: str, test: ast.expr, flags: set[str]) -> GateKind:
    """Gate kind of an ``if`` test: env, shape, flag, dead or (any other) condition."""
    if reads_environment(text):
        return GateKind.ENV
    if any(k in text for k in (".shape", ".size(", ".numel(", "len(")) and _compares_a_number(test):
        return GateKind.SHAPE
    inner = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else test
    if isinstance(inner, ast.Name) and (inner.id in flags or inner.id.isupper()):
        return GateKind.FLAG
    if (isinstance(test, ast.Constant) and not test.value) or (
        isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
    ):
        return GateKind.DEAD
    return GateKind.CONDITION


def _compares_a_number(test: ast.expr) -> bool:
    """Whether a test compares something with a number written out (``x.shape[0] == 5``)."""
    return any(
        isinstance(n, ast.Compare)
        and any(
            isinstance(c, ast.Constant) and isinstance(c.value, (int, float))
            for c in [n.left, *n.comparators]
        )
        for n in ast.walk(test)
    )


def same_code(a: ast.AST, b: ast.AST) -> bool:
    """Whether two trees are the same code: equal node for node, docstrings left out, positions ignored
    (comments and layout never reach the tree). Stops at the first difference."""
    stack: list[tuple[object, object]] = [(a, b)]
    while stack:
        x, y = stack.pop()
        if isinstance(x, ast.AST):
            if type(x) is not type(y):
                return False
            for name in x._fields:
                vx, vy = getattr(x, name, None), getattr(y, name, None)
                if name == "body" and isinstance(x, _DOCUMENTED):
                    vx, vy = _without_docstring(vx), _without_docstring(vy)
                stack.append((vx, vy))
        elif isinstance(x, list):
            if not isinstance(y, list) or len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif x != y or type(x) is not type(y):
            return False
    return True


_DOCUMENTED = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _without_docstring(body: object) -> object:
    if (
        isinstance(body, list)
        and body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return body[1:]
    return body


def _tensor_fields(
    classes: Iterable[ast.ClassDef], made: Iterable[tuple[str, str]] = ()
) -> dict[str, frozenset[str]]:
    """A class's fields that hold tensors: annotated so in its body, or given one a torch creation op made
    in any of its methods (``self.len_output_tokens = torch.zeros(…)``: ``made``, as the walk found them)."""
    found: dict[str, set[str]] = {}
    for node in classes:
        found.setdefault(node.name, set()).update(
            s.target.id
            for s in node.body
            if isinstance(s, ast.AnnAssign)
            and isinstance(s.target, ast.Name)
            and _tensor_annotation(s.annotation)
        )
    for cls, name in made:
        found.setdefault(cls, set()).add(name)
    return {cls: frozenset(names) for cls, names in found.items() if names}


# torch's creation ops (the "Creation Ops" of its documentation), and the joins that make a new tensor.
_CREATION_OPS = frozenset(
    {"tensor", "as_tensor", "from_numpy", "zeros", "zeros_like", "ones", "ones_like", "arange", "linspace"}
    | {"logspace", "eye", "empty", "empty_like", "empty_strided", "full", "full_like", "rand", "randn"}
    | {"randint", "randperm", "cat", "stack", "where"}
)


def _made_tensor(node: ast.Assign) -> str:
    """``X`` of ``self.X = torch.<creation op>(…)``, else ""."""
    value = node.value
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return ""
    owner = value.func.value
    if not (isinstance(owner, ast.Name) and owner.id == "torch" and value.func.attr in _CREATION_OPS):
        return ""
    target = node.targets[0] if len(node.targets) == 1 else None
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return target.attr
    return ""


def _tensor_annotation(annotation: ast.expr) -> bool:
    """``Tensor``, ``torch.Tensor``, ``Optional[torch.Tensor]``, ``Tensor | None`` — not a list of them."""
    text = ast.unparse(annotation)
    return "Tensor" in text and "list[" not in text.lower() and "tuple[" not in text.lower()
