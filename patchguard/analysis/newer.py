"""The structure of a file the running interpreter's ``ast`` cannot parse.

An environment of a newer Python than the one patchguard runs on holds syntax this ``ast`` rejects (PEP 695
``def first[T](...)``, PEP 701 f-strings, PEP 758 ``except A, B:``): libcst's parser accepts them, so the
file is located with libcst instead (slower — a whole-file parse with positions — but only for such files).

A file that no grammar parses (merge-conflict markers, a truncated edit) still gets what can be read line by
line: its module-level import aliases and where the syntax error is.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

import libcst as cst
from libcst.metadata import PositionProvider

from .aliases import bind_ast_imports, bind_from_import, bind_import
from .bounds import too_wild
from .cstwalk import Dispatch, run
from .structure import IfSpan, Scope, Structure

__all__ = ["CONFLICT_MARKERS", "structure_of_newer"]

_CONSTANTS = (cst.Integer, cst.Float, cst.SimpleString)


def structure_of_newer(source: str) -> Structure:
    """The structure of ``source`` as libcst reads it; an unparsed one (``grammar`` ``None``) otherwise."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        where = _conflict(source) or _ast_error(source) or (exc.raw_line, "a syntax error")
        return Structure([], _textual_aliases(source), set(), grammar=None, syntax_error=where)
    except (RecursionError, MemoryError, ValueError) as exc:
        return Structure([], {}, set(), grammar=None, syntax_error=(1, type(exc).__name__))
    walker = _Locator(module.code_for_node)
    run(module, walker)
    aliases: dict[str, str] = {}
    flags: set[str] = set()
    for stmt in _module_level(module.body):
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            _bind(aliases, small)
            if isinstance(small, cst.Assign) and _constant(small.value):
                flags.update(t.target.value for t in small.targets if isinstance(t.target, cst.Name))
    return Structure(walker.scopes, aliases, flags, walker.top, walker.ifs, grammar="libcst")


CONFLICT_MARKERS = ("<<<<<<< ", "=======", ">>>>>>> ", "||||||| ")


def _conflict(source: str) -> tuple[int, str] | None:
    """(line, what) of the first merge-conflict marker, if the file has one."""
    for n, line in enumerate(source.splitlines(), 1):
        if line.startswith(CONFLICT_MARKERS) and (line[:7] != "=======" or not line[7:].strip()):
            return n, "merge-conflict markers"
    return None


def _constant(node: cst.BaseExpression) -> bool:
    return isinstance(node, _CONSTANTS) or (
        isinstance(node, cst.Name) and node.value in ("True", "False", "None")
    )


class _Locator(Dispatch):
    """Collects scopes and ``if`` spans with their lines."""

    SKIPS_TRIVIA = True  # whitespace, comments and punctuation are not walked into (:mod:`.cstwalk`)

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, code_for_node: Callable[[cst.CSTNode], str]) -> None:
        super().__init__()
        self.code_for = code_for_node
        self.names: list[str] = []
        self.scopes: list[Scope] = []
        self.ifs: list[IfSpan] = []
        self.top: list[tuple[int, int]] = []

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        pos = self.get_metadata(PositionProvider, node)
        start = pos.start.line
        for d in getattr(node, "decorators", ()):
            start = min(start, self.get_metadata(PositionProvider, d).start.line)
        return start, pos.end.line

    def visit_Module(self, node: cst.Module) -> None:
        self.top = [self.span(n) for n in node.body]

    def _scope(self, node: cst.FunctionDef | cst.ClassDef, kind: str) -> None:
        self.names.append(node.name.value)
        self.scopes.append(Scope(".".join(self.names), kind, *self.span(node)))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scope(node, "async def" if node.asynchronous is not None else "def")

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.names.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._scope(node, "class")

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.names.pop()

    def visit_If(self, node: cst.If) -> None:
        start, end = self.span(node)
        orelse = self.span(node.orelse)[0] if node.orelse is not None else None
        self.ifs.append(IfSpan(start, end, self.code_for(node.test).strip(), orelse))


def _module_level(body: Sequence[cst.BaseStatement | cst.BaseSmallStatement]) -> list[cst.CSTNode]:
    """Module-level statements, looking into top-level if/try blocks (conditional imports)."""
    out: list[cst.CSTNode] = []
    for node in body:
        out.append(node)
        blocks: list[cst.BaseSuite] = []
        if isinstance(node, cst.If):
            blocks.append(node.body)
            if isinstance(node.orelse, cst.Else):
                blocks.append(node.orelse.body)
            elif node.orelse is not None:
                out += _module_level([node.orelse])
        elif isinstance(node, cst.Try):
            blocks += [node.body, *(h.body for h in node.handlers)]
        for block in blocks:
            if isinstance(block, cst.IndentedBlock):
                out += _module_level(block.body)
    return out


def _bind(aliases: dict[str, str], small: cst.BaseSmallStatement) -> None:
    from libcst.helpers import get_full_name_for_node

    from .judge import imported_names

    if isinstance(small, cst.Import):
        bind_import(aliases, imported_names(small.names))
    elif isinstance(small, cst.ImportFrom):
        module = get_full_name_for_node(small.module) if small.module is not None else None
        names = [("*", None)] if isinstance(small.names, cst.ImportStar) else imported_names(small.names)
        bind_from_import(aliases, module, len(small.relative), names)


def _ast_error(source: str) -> tuple[int, str] | None:
    """Where and why the running interpreter's parser stops (libcst's native parser says ``1:1`` for an
    indentation error); ``None`` when it parses or cannot say."""
    try:
        ast.parse(source)
    except SyntaxError as exc:
        if exc.lineno:
            return exc.lineno, f"a syntax error: {exc.msg}"
    except (ValueError, RecursionError, MemoryError):
        return None
    return None


def _textual_aliases(source: str) -> dict[str, str]:
    """Import aliases of a file nothing parses: each unindented import statement parsed on its own (joined
    with the lines that follow while its parentheses are open)."""
    aliases: dict[str, str] = {}
    lines = source.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith(("import ", "from ")):
            continue
        for j in range(i + 1, min(i + 40, len(lines)) + 1):
            if too_wild("\n".join(lines[i:j])) is not None:
                break
            try:
                tree = ast.parse("\n".join(lines[i:j]))
            except (SyntaxError, ValueError):
                continue
            bind_ast_imports(aliases, tree.body)
            break
    return aliases
