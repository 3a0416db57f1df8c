"""What reach needs to know of one module, read without parsing the whole file.

Parsing every module of a vLLM environment with ``ast`` takes seconds; reach only needs the import
statements and (for SGLang) the ``EntryClass`` assignment. So one regular expression finds the lines that
*start* a statement of interest — imports, and the block headers (``def``, ``class``, ``if``, ``try``, …)
that say whether an import runs when the module is imported or only when a function is called — and only
those statements are parsed, each on its own.

* An import under a ``def`` (at any depth) is *deferred*: it runs when the function is called.
* An import under ``if TYPE_CHECKING:`` never runs and is left out (its ``else:`` branch runs).
* Imports under other blocks (top-level ``if``/``try``, a class body) run at import time.

A line inside a triple-quoted string that happens to look like an import is parsed like one; a statement
that does not parse on its own is ignored. Nothing is imported or executed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from ..bounds import too_wild

__all__ = ["Facts", "ImportStmt", "read_facts"]


@dataclass(frozen=True, slots=True)
class ImportStmt:
    """One imported module: ``import a.b`` is ``(0, "a.b", ())``; ``from ..x import y, z`` is
    ``(2, "x", ("y", "z"))``; ``deferred`` when the statement sits inside a function."""

    line: int
    level: int
    module: str
    names: tuple[str, ...]
    deferred: bool


@dataclass(frozen=True, slots=True)
class Facts:
    """The imports of a module and the classes its ``EntryClass`` names (SGLang's model registry)."""

    imports: tuple[ImportStmt, ...]
    entry_classes: tuple[str, ...] = ()

    def pack(self) -> tuple[object, ...]:
        """Plain tuples, for the cache (marshal)."""
        rows = tuple((i.line, i.level, i.module, i.names, i.deferred) for i in self.imports)
        return (rows, self.entry_classes)

    @classmethod
    def unpack(cls, packed: Any) -> Facts | None:
        """The inverse of :meth:`pack`; ``None`` when ``packed`` does not have its shape."""
        try:
            rows, entries = packed
            imports = tuple(
                ImportStmt(int(a), int(b), str(c), tuple(map(str, d)), bool(e)) for a, b, c, d, e in rows
            )
            return cls(imports, tuple(map(str, entries)))
        except (TypeError, ValueError):
            return None


# A block header: what a line that opens a block starts with.
_HEADER = re.compile(
    r"(?:async[ \t]+)?(def|class|if|elif|else|try|except|finally|with|for|while|match|case)\b"
)
# Where imports start, and whether one is indented (then the blocks around it matter).
_IMPORT_START = re.compile(r"\n([ \t]*)(?:import|from)[ \t]")
_ENTRY_START = re.compile(r"\nEntryClass\b")
_TYPE_CHECKING = re.compile(r"if[ \t(]+(?:typing\.|t\.)?TYPE_CHECKING[ \t)]*:")
_FROM = re.compile(r"from\s+(\.*)\s*([\w.]*)\s+import\s+(.*)", re.S)
_IMPORT = re.compile(r"import\s+(.*)", re.S)
_COMMENT = re.compile(r"#[^\n]*")
_DOTTED = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*|\*")


def _statement(text: str, start: int) -> str:
    """The logical line that starts at ``start``: continued by an open bracket or a trailing backslash."""
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    while True:
        chunk = text[start:end]
        depth = chunk.count("(") + chunk.count("[") - chunk.count(")") - chunk.count("]")
        if (depth <= 0 and not chunk.rstrip().endswith("\\")) or end >= len(text):
            return chunk
        nxt = text.find("\n", end + 1)
        end = len(text) if nxt < 0 else nxt


def _names(body: str) -> list[str] | None:
    """The imported names of ``a.b as c, d`` (``None`` when it is not that simple)."""
    out = []
    for part in body.replace("(", " ").replace(")", " ").replace("\\", " ").split(","):
        words = part.split()
        if not words:
            continue
        if not _DOTTED.fullmatch(words[0]) or not (len(words) == 1 or (len(words) == 3 and words[1] == "as")):
            return None
        out.append(words[0])
    return out


def _quick(stmt: str, line: int, deferred: bool) -> list[ImportStmt] | None:
    """The common import statements, read without a parser (``None``: parse it)."""
    stmt = _COMMENT.sub("", stmt) if "#" in stmt else stmt
    if ";" in stmt:
        return None
    m = _FROM.fullmatch(stmt.strip())
    if m is not None:
        names = _names(m.group(3))
        if names is None or (not m.group(1) and not m.group(2)):
            return None
        return [ImportStmt(line, len(m.group(1)), m.group(2), tuple(names), deferred)]
    m = _IMPORT.fullmatch(stmt.strip())
    names = _names(m.group(1)) if m is not None else None
    return None if names is None else [ImportStmt(line, 0, n, (), deferred) for n in names]


def _imports_of(stmt: str, line: int, deferred: bool) -> list[ImportStmt]:
    quick = _quick(stmt, line, deferred)
    if quick is not None:
        return quick
    if too_wild(stmt) is not None:
        return []
    try:
        tree = ast.parse(stmt.strip())
    except (SyntaxError, ValueError):
        return []
    out: list[ImportStmt] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            out += [ImportStmt(line, 0, a.name, (), deferred) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = tuple(a.name for a in node.names)
            out.append(ImportStmt(line, node.level, node.module or "", names, deferred))
    return out


def _entry_classes(stmt: str) -> tuple[str, ...]:
    if too_wild(stmt) is not None:
        return ()
    try:
        tree = ast.parse(stmt.strip())
    except (SyntaxError, ValueError):
        return ()
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
        return ()
    value = node.value
    items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
    return tuple(
        n.id if isinstance(n, ast.Name) else n.attr for n in items if isinstance(n, (ast.Name, ast.Attribute))
    )


def read_facts(text: str) -> Facts:
    """The :class:`Facts` of a module's source text."""
    text = "\n" + text
    entry = _ENTRY_START.search(text)
    entries = _entry_classes(_statement(text, entry.start() + 1)) if entry is not None else ()
    imports: list[ImportStmt] = []
    line, counted = 1, 1  # the line number of text[counted]
    for m in _IMPORT_START.finditer(text):
        block = _enclosing(text, m.start(), len(m.group(1).expandtabs())) if m.group(1) else ""
        if block == "type-checking":
            continue
        line += text.count("\n", counted, m.start() + 1)
        counted = m.start() + 1
        imports += _imports_of(_statement(text, m.start() + 1), line, block == "def")
    return Facts(tuple(imports), entries)


def _enclosing(text: str, end: int, indent: int) -> str:
    """``"def"`` when the line after ``text[end]`` (a newline), indented by ``indent``, lies in a function,
    ``"type-checking"`` when under ``if TYPE_CHECKING:``, else ``""``: the block headers around it are found
    walking back, each less indented than the last, to the top level."""
    # hot loop: once per line between an indented import and its enclosing headers (most are a few lines
    # below their def or their `if TYPE_CHECKING:`).
    while indent > 0 and end > 0:
        start = text.rfind("\n", 0, end)
        line = text[start + 1 : end]
        end = start
        stripped = line.lstrip()
        if not stripped or stripped[0] == "#":
            continue
        k = len(line[: len(line) - len(stripped)].expandtabs())
        if k >= indent:
            continue
        header = _HEADER.match(stripped)
        if header is None:
            continue  # a continuation line, or text of a string: not a block
        if header.group(1) == "def":
            return "def"
        if header.group(1) == "if" and _TYPE_CHECKING.match(stripped):
            return "type-checking"
        indent = k
    return ""
