"""A three-way merge that sees Python statements, for ``rebase``: carry a set's edits of a ``.py`` file to
where upstream moved, re-indented or surrounded the statements they belong to — never a silent wrong merge.

The three versions are read with :mod:`ast` (the standard library's parser: positions of every statement
are all this needs). Every body (the module's, a class's, a function's, an ``if``/``for``/``with``/``try``
branch's) is a *container*, named by its path of headers (``def forward``, then ``if x:``); its statements are
named by their header (``def f``, ``class A``, an import's or an assignment's first line) and how many
siblings before them share it. A leading docstring belongs to the header, not the body.

The set's edits (base → theirs, line by line) are carried one by one:

* an **insertion** between two statements goes between their matches in the target (``ours``), wherever
  upstream moved the container, with the target's indentation; the two must still be neighbours there —
  except in an order-free body (the module's, a class's, where imports and definitions may be reordered),
  where the statement before is enough;
* a **change inside one statement**, or a change of whole statements, is made only when the target's
  statements are the same text as the base's (indentation aside).

Anything else — a container or anchor upstream renamed or rewrote, an edit across statement boundaries — and
the carry gives up (``None``): ``rebase`` falls back to the line merge. Whatever made the merged text, it is
accepted only when it is certain (:func:`doubt`): it parses, its lines are the target's plus the set's added
minus the set's removed (each added line present exactly once more, each removed one gone), and every
statement the set added sits in the same container after the same statement as in the set.
"""

from __future__ import annotations

import ast
import collections
import difflib
import itertools
import re
from dataclasses import dataclass

__all__ = ["carry", "doubt", "parses"]

Key = tuple[str, ...]
# Containers whose statements may be reordered by upstream without changing the program's meaning much:
# a module's (imports, definitions) and a class's (its members).
_ORDER_FREE = ("module", "class")
_COMMENT = re.compile(r"\s+#[^'\"]*$")  # a trailing comment (not inside a string)


@dataclass(frozen=True, slots=True)
class _Stmt:
    head: str  # what names it: "def f", "class A", or its first line, stripped
    nth: int  # siblings before it with the same head
    start: int  # first line (its first decorator), 0-based
    end: int  # one past its last line


@dataclass
class _Body:
    kind: str  # "module", "class", "def", "block"
    start: int  # where its first statement may go: after the header (and the docstring)
    indent: str
    stmts: list[_Stmt]


class _Shape:
    """The containers of one version of a file, by key, and its lines."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)
        self.bodies: dict[Key, _Body] = {}
        tree = ast.parse(text)
        self._body((), "module", tree.body, 0)

    def _head(self, node: ast.stmt) -> str:
        """What names a statement whatever upstream did to its value or comments: a definition's name, an
        assignment's targets, an import's names, else its first line without a trailing comment."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return f"def {node.name}"
        if isinstance(node, ast.ClassDef):
            return f"class {node.name}"
        if isinstance(node, ast.Assign):
            return "= " + ", ".join(ast.unparse(t) for t in node.targets)
        if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            return "= " + ast.unparse(node.target)
        if isinstance(node, ast.Import):
            return "import " + ", ".join(a.name for a in node.names)
        if isinstance(node, ast.ImportFrom):
            return f"from {'.' * node.level}{node.module or ''} import " + ", ".join(
                a.name for a in node.names
            )
        first = _COMMENT.sub("", self.lines[node.lineno - 1])
        return f"{type(node).__name__} " + " ".join(first.split())

    def _body(self, key: Key, kind: str, nodes: list[ast.stmt], header_end: int) -> None:
        stmts: list[_Stmt] = []
        seen: collections.Counter[str] = collections.Counter()
        start = header_end
        body = list(nodes)
        if body and kind in ("module", "class", "def") and _is_docstring(body[0]):
            start = body[0].end_lineno or body[0].lineno
            body = body[1:]
        for node in body:
            head = self._head(node)
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
            stmts.append(_Stmt(head, seen[head], first, node.end_lineno or node.lineno))
            seen[head] += 1
            self._children((*key, f"{head}#{seen[head] - 1}"), node)
        indent = _indent(self.lines[stmts[0].start]) if stmts else ""
        self.bodies[key] = _Body(kind, start, indent, stmts)

    def _children(self, key: Key, node: ast.stmt) -> None:
        kind = "def" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else "block"
        kind = "class" if isinstance(node, ast.ClassDef) else kind
        for field in ("body", "orelse", "finalbody"):
            nodes = getattr(node, field, None)
            if isinstance(nodes, list) and nodes and isinstance(nodes[0], ast.stmt):
                self._body((*key, field), kind, nodes, _header_end(node, nodes))
        for n, handler in enumerate(getattr(node, "handlers", []) or []):
            self._body((*key, f"except#{n}"), "block", handler.body, _header_end(handler, handler.body))
        for n, case in enumerate(getattr(node, "cases", []) or []):
            self._body((*key, f"case#{n}"), "block", case.body, _header_end(case, case.body))

    def find(self, key: Key, head: str, nth: int) -> int | None:
        body = self.bodies.get(key)
        if body is None:
            return None
        return next((i for i, s in enumerate(body.stmts) if s.head == head and s.nth == nth), None)


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _header_end(node: ast.AST, body: list[ast.stmt]) -> int:
    """Where a compound statement's body begins: its first statement's line (0-based), decorators of it
    included."""
    first = body[0]
    decorators: list[ast.expr] = getattr(first, "decorator_list", [])
    return min([first.lineno, *(d.lineno for d in decorators)]) - 1


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def parses(text: bytes) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


# -- carrying the set's edits ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Placed:
    """One edit placed in the target: replace target lines [at, until) with these lines."""

    at: int
    until: int
    lines: tuple[str, ...]
    order: int


def carry(base: bytes, theirs: bytes, ours: bytes) -> bytes | None:
    """The target with the set's edits carried by statement, or ``None`` when one cannot be placed for
    certain (any version that does not parse, as UTF-8 Python, included)."""
    try:
        b, t, o = (_Shape(x.decode("utf-8")) for x in (base, theirs, ours))
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    placed: list[_Placed] = []
    matcher = difflib.SequenceMatcher(None, b.lines, t.lines, autojunk=False)
    for n, (tag, i1, i2, j1, j2) in enumerate(matcher.get_opcodes()):
        if tag == "equal":
            continue
        got = _insert(b, o, i1, t.lines[j1:j2], n) if i1 == i2 else _replace(b, o, i1, i2, t.lines[j1:j2], n)
        if got is None:
            return None
        placed.append(got)
    return _apply(o.lines, placed)


def _apply(lines: list[str], placed: list[_Placed]) -> bytes | None:
    out = list(lines)
    spans = sorted(placed, key=lambda p: (p.at, p.until, p.order))
    for a, b in itertools.pairwise(spans):
        if b.at < a.until or (b.at == a.at and (a.until > a.at or b.until > b.at)):
            return None  # two edits over the same lines of the target
    for p in sorted(placed, key=lambda p: (p.at, p.order), reverse=True):
        out[p.at : p.until] = p.lines
    return "".join(out).encode("utf-8")


def _container_at(shape: _Shape, line: int, indent: str) -> tuple[Key, int] | None:
    """The container an insertion at ``line`` with this indentation goes in, and the index of the
    statement it goes before (``len(stmts)``: at the end)."""
    for key, body in sorted(shape.bodies.items(), key=lambda kv: -len(kv[0])):
        if body.indent != indent or not body.stmts:
            continue
        if not body.start <= line <= body.stmts[-1].end:
            continue
        for i, s in enumerate(body.stmts):
            previous_end = body.stmts[i - 1].end if i else body.start
            if previous_end <= line <= s.start:
                return key, i
        if line == body.stmts[-1].end:
            return key, len(body.stmts)
    return None


def _insert(b: _Shape, o: _Shape, at: int, new: list[str], order: int) -> _Placed | None:
    text = [line for line in new if line.strip()]
    if not text:
        return None  # blank lines only: nothing to anchor them by
    where = _container_at(b, at, _indent(text[0]))
    if where is None:
        return None
    key, i = where
    body, target = b.bodies[key], o.bodies.get(key)
    if target is None or not target.stmts:
        return None
    prev = body.stmts[i - 1] if i else None
    nxt = body.stmts[i] if i < len(body.stmts) else None
    p = o.find(key, prev.head, prev.nth) if prev else None
    q = o.find(key, nxt.head, nxt.nth) if nxt else None
    spot = _spot(body, target, prev, nxt, p, q, at)
    lines = _reindent(new, body.indent, target.indent)
    if spot is None or lines is None:
        return None
    return _Placed(spot, spot, tuple(lines), order)


def _spot(
    body: _Body, target: _Body, prev: _Stmt | None, nxt: _Stmt | None, p: int | None, q: int | None, at: int
) -> int | None:
    """Where in the target an insertion between ``prev`` and ``nxt`` goes: right after ``prev``'s match
    (when it was right after ``prev``), else right before ``nxt``'s; the two must be neighbours, unless the
    body is order-free."""
    if (prev is not None and p is None) or (nxt is not None and q is None):
        return None
    neighbours = (
        (p is None and q == 0)
        or (q is None and p == len(target.stmts) - 1)
        or (p is not None and q is not None and q == p + 1)
    )
    if prev is None and nxt is None:
        return None
    if not neighbours and not (body.kind in _ORDER_FREE and p is not None):
        return None
    if p is not None and ((prev is not None and at == prev.end) or q is None or not neighbours):
        return target.stmts[p].end
    if q is not None:
        return target.stmts[q].start
    return target.start


def _replace(b: _Shape, o: _Shape, i1: int, i2: int, new: list[str], order: int) -> _Placed | None:
    """A change of base lines [i1, i2): inside one statement, or of whole statements, of one container;
    made only where the target has the same statements, the same text."""
    for key, body in sorted(b.bodies.items(), key=lambda kv: -len(kv[0])):
        inside = [k for k, s in enumerate(body.stmts) if s.start < i2 and i1 < s.end]
        if not inside:
            continue
        first, last = body.stmts[inside[0]], body.stmts[inside[-1]]
        if i1 < first.start or i2 > last.end:
            return None  # reaches past the statements it touches: blank lines, comments, a header
        target = o.bodies.get(key)
        if target is None:
            return None
        matched = [o.find(key, body.stmts[k].head, body.stmts[k].nth) for k in inside]
        if None in matched or matched != list(range(matched[0] or 0, (matched[0] or 0) + len(matched))):
            return None
        m0, m1 = target.stmts[matched[0] or 0], target.stmts[matched[-1] or 0]
        old = _reindent(b.lines[first.start : last.end], body.indent, target.indent)
        if old is None or old != o.lines[m0.start : m1.end]:
            return None  # upstream changed these statements: the line merge decides
        lines = _reindent(new, body.indent, target.indent)
        if lines is None:
            return None
        offset = m0.start - first.start
        return _Placed(i1 + offset, i2 + offset, tuple(lines), order)
    return None


def _reindent(lines: list[str], old: str, new: str) -> list[str] | None:
    if old == new:
        return list(lines)
    out = []
    for line in lines:
        if not line.strip():
            out.append(line)
        elif line.startswith(old):
            out.append(new + line[len(old) :])
        else:
            return None
    return out


# -- is a merge certain? -----------------------------------------------------------------------------------


def doubt(base: bytes, theirs: bytes, ours: bytes, merged: bytes) -> str | None:
    """Why a merge of the set's edits (base → theirs) onto ``ours`` is not certain, or ``None`` when it is:
    the merged file parses, holds exactly the target's lines plus the set's added minus its removed, and
    every statement the set added sits in the same container after the same statement as in the set."""
    try:
        texts = [x.decode("utf-8") for x in (base, theirs, ours, merged)]
    except UnicodeDecodeError:
        return "not UTF-8"
    if not parses(merged):
        return "the merged file does not parse"
    count = [collections.Counter(line.strip() for line in t.splitlines() if line.strip()) for t in texts]
    expected = count[2].copy()
    expected.update(count[1])
    expected.subtract(count[0])
    if any(v < 0 for v in expected.values()) or +expected != count[3]:
        return "a line the set adds or removes is not there exactly once more or less"
    try:
        shapes = [_Shape(t) for t in texts]
    except (SyntaxError, ValueError, RecursionError):
        return None  # a version that does not parse: the line checks above are all there is
    heads = [collections.Counter(h for _k, h, _p in _anchors(s).elements()) for s in shapes]
    new = set(heads[1] - heads[0])  # the statements the set adds (by header)
    added = +collections.Counter(
        {k: v for k, v in (_anchors(shapes[1]) - _anchors(shapes[0])).items() if k[1] in new}
    )
    placed = +collections.Counter(
        {k: v for k, v in (_anchors(shapes[3]) - _anchors(shapes[2])).items() if k[1] in new}
    )
    if added != placed:
        return "a statement the set adds is not in the same place (its definition, the statement before it)"
    return None


def _added(before: _Shape, after: _Shape, heads: set[str]) -> collections.Counter[tuple[Key, str, str]]:
    """The anchors of the statements with these headers that ``after`` has more of than ``before``."""
    more = _anchors(after) - _anchors(before)
    return collections.Counter({k: v for k, v in more.items() if k[1] in heads})


def _anchors(shape: _Shape) -> collections.Counter[tuple[Key, str, str]]:
    """Every statement as (its container's definitions, its header, the header of the statement before
    it or ``<start>``)."""
    out: collections.Counter[tuple[Key, str, str]] = collections.Counter()
    for key, body in shape.bodies.items():
        defs = tuple(k for k in key if k.startswith(("def ", "class ")))
        for i, s in enumerate(body.stmts):
            out[(defs, s.head, body.stmts[i - 1].head if i else "<start>")] += 1
    return out
