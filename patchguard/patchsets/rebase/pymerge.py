"""A three-way merge that sees Python statements, for ``rebase``: carry a set's edits of a ``.py`` file to
where upstream moved, re-indented or surrounded the statements they belong to — never a silent wrong merge.

The three versions are read with :mod:`ast` (the standard library's parser: positions of every statement
are all this needs). Every body (the module's, a class's, a function's, an ``if``/``for``/``with``/``try``
branch's) is a *container*, named by its path of headers (``def forward``, then ``if x:``); its statements are
named by their header (``def f``, ``class A``, an import's or an assignment's first line) and how many
siblings before them share it. A leading docstring belongs to the header, not the body.

The set's edits (base → theirs, line by line) are carried one by one:

* an **insertion** keeps its anchors — its container and the statement before it (or the start of the
  body): it goes right after that statement's match in the target (``ours``), wherever upstream moved the
  container or reordered its statements, with the target's indentation;
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
import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Split", "by_context", "carry", "doubt", "doubt_outside", "parses", "split"]

Key = tuple[str, ...]
_STRING = "<string>"  # the header of a statement that is a string alone (a docstring, or one demoted)
_COMMENT = re.compile(r"\s+#[^'\"]*$")  # a trailing comment (not inside a string)


@dataclass(frozen=True, slots=True)
class _Stmt:
    head: str  # what names it: "def f", "class A", or its first line, stripped
    nth: int  # siblings before it with the same head
    start: int  # first line (its first decorator), 0-based
    end: int  # one past its last line


@dataclass
class _Body:
    start: int  # where its first statement may go: after the header (and the docstring)
    indent: str
    stmts: list[_Stmt]
    doc: tuple[int, int] | None = None  # its docstring's lines [start, end)


class _Shape:
    """The containers of one version of a file, by key, and its lines."""

    def __init__(self, text: str, tree: ast.Module) -> None:
        self.lines = text.splitlines(keepends=True)
        self.bodies: dict[Key, _Body] = {}
        self._body((), "module", tree.body, 0)

    def _head(self, node: ast.stmt) -> str:
        """What names a statement whatever upstream did to its value or comments: a definition's name, an
        assignment's targets, an import's names, else its first line without a trailing comment."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return f"def {node.name}"
        if isinstance(node, ast.ClassDef):
            return f"class {node.name}"
        if isinstance(node, ast.Assign):
            return "= " + ", ".join(_target(t, self.lines) for t in node.targets)
        if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            return "= " + _target(node.target, self.lines)
        if isinstance(node, ast.Import):
            return "import " + ", ".join(a.name for a in node.names)
        if isinstance(node, ast.ImportFrom):
            return f"from {'.' * node.level}{node.module or ''} import " + ", ".join(
                a.name for a in node.names
            )
        if _is_docstring(node):
            return _STRING  # a string statement, whatever its words (a docstring demoted is one too)
        first = _COMMENT.sub("", self.lines[node.lineno - 1])
        return f"{type(node).__name__} " + " ".join(first.split())

    def _body(self, key: Key, kind: str, nodes: list[ast.stmt], header_end: int) -> None:
        stmts: list[_Stmt] = []
        seen: collections.Counter[str] = collections.Counter()
        start = header_end
        body = list(nodes)
        doc = None
        if body and kind in ("module", "class", "def") and _is_docstring(body[0]):
            start = body[0].end_lineno or body[0].lineno
            doc = (body[0].lineno - 1, start)
            body = body[1:]
        for node in body:
            head = self._head(node)
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
            stmts.append(_Stmt(head, seen[head], first, node.end_lineno or node.lineno))
            seen[head] += 1
            self._children((*key, f"{head}#{seen[head] - 1}"), node)
        indent = _indent(self.lines[stmts[0].start]) if stmts else ""
        self.bodies[key] = _Body(start, indent, stmts, doc)

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


def _target(node: ast.expr, lines: list[str]) -> str:
    """An assignment target as written (a name, ``a.b``, ``a[i]``; a tuple of them), from the source."""
    if isinstance(node, ast.Name):
        return node.id
    if node.lineno == node.end_lineno and node.end_col_offset is not None:
        return lines[node.lineno - 1].encode()[node.col_offset : node.end_col_offset].decode(errors="replace")
    return ast.dump(node)[:200]


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
    return _tree(text) is not None


@functools.lru_cache(maxsize=16)
def _tree(data: bytes) -> tuple[str, ast.Module] | None:
    """One version of a file parsed (each version once however often it is asked for); ``None`` when it is
    not UTF-8 Python that parses."""
    try:
        text = data.decode("utf-8")
        return text, ast.parse(text)
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return None


@functools.lru_cache(maxsize=16)
def shape_of(data: bytes) -> _Shape | None:
    """The shape of one version of a file; ``None`` when it does not parse."""
    parsed = _tree(data)
    return _Shape(*parsed) if parsed is not None else None


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
    got = split(base, theirs, ours)
    return got.ours if got is not None and got.rest == base else None


@dataclass(frozen=True, slots=True)
class Split:
    """The set's edits parted: ``ours`` is the target with those carried by statement, ``placed`` the base
    with only those, ``rest`` the base with only the others (for the line merge to try, or to conflict)."""

    ours: bytes
    placed: bytes
    rest: bytes


def split(base: bytes, theirs: bytes, ours: bytes) -> Split | None:
    """Carry every edit of the set (base → theirs) that can be placed by statement; ``None`` when a version
    does not parse (as UTF-8 Python)."""
    b, t, o = shape_of(base), shape_of(theirs), shape_of(ours)
    if b is None or t is None or o is None:
        return None
    placed: list[_Placed] = []
    edits = [op for op in difflib.SequenceMatcher(None, b.lines, t.lines, autojunk=False).get_opcodes()]
    carried: set[int] = set()
    for n, (tag, i1, i2, j1, j2) in enumerate(edits):
        if tag == "equal":
            continue
        if i1 == i2 and not _whole(t, j1, j2):
            continue  # lines of the next statement (a decorator, say): a change of it, left to the line merge
        got = _insert(b, o, i1, t.lines[j1:j2], n) if i1 == i2 else _replace(b, o, i1, i2, t.lines[j1:j2], n)
        if got is not None:
            placed.append(got)
            carried.add(n)
    merged = _apply(o.lines, placed)
    if merged is None:
        return Split(ours, base, theirs)
    return Split(
        merged, _some(b.lines, t.lines, edits, carried), _some(b.lines, t.lines, edits, None, carried)
    )


def _whole(shape: _Shape, start: int, end: int) -> bool:
    """Whether lines [start, end) hold whole statements only (and blank lines or comments): no part of a
    statement that reaches out of them."""
    return all(
        s.end <= start
        or s.start >= end
        or (start <= s.start and s.end <= end)
        or (s.start < start and end <= s.end)
        for body in shape.bodies.values()
        for s in body.stmts
    )


def _some(
    a: list[str],
    b: list[str],
    edits: Sequence[tuple[str, int, int, int, int]],
    only: set[int] | None,
    but: set[int] | None = None,
) -> bytes:
    """``a`` with the edits numbered in ``only`` (or all but those in ``but``) made."""
    out: list[str] = []
    for n, (tag, i1, i2, j1, j2) in enumerate(edits):
        take = tag != "equal" and (n in only if only is not None else n not in (but or set()))
        out += b[j1:j2] if take else a[i1:i2]
    return "".join(out).encode("utf-8")


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
    statement it goes before (``len(stmts)``: at the end; ``-1``: before the body's docstring)."""
    for key, body in sorted(shape.bodies.items(), key=lambda kv: -len(kv[0])):
        if body.indent != indent or not body.stmts:
            continue
        if body.doc is not None and line == body.doc[0]:
            return key, -1
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
    target = o.bodies.get(key)
    if target is None or not target.stmts or _renamed_above(b, o, key):
        return None
    if i < 0:
        return _above_docstring(b, o, key, new, order)
    return _insert_among(b, o, key, i, at, new, order)


def _insert_among(
    b: _Shape, o: _Shape, key: Key, i: int, at: int, new: list[str], order: int
) -> _Placed | None:
    """An insertion before the ``i``-th statement of the body ``key`` (at base line ``at``), placed by the
    target's matches of its neighbours."""
    body, target = b.bodies[key], o.bodies[key]
    prev = body.stmts[i - 1] if i else None
    nxt = body.stmts[i] if i < len(body.stmts) else None
    p = _match(b, o, key, prev) if prev else None
    q = _match(b, o, key, nxt) if nxt else None
    if prev is None and nxt is not None and q != 0 and not _alike(b, o, key) and _moved_away(b, o, key):
        return None  # the body it was written for is elsewhere now; a new function took the old name
    spot = _spot(target, prev, p, q, at)
    lines = _reindent(new, body.indent, target.indent)
    if spot is None or lines is None:
        return None
    return _Placed(spot, spot, tuple(lines), order)


def _above_docstring(b: _Shape, o: _Shape, key: Key, new: list[str], order: int) -> _Placed | None:
    """An insertion above a body's docstring: above the target's (upstream may have reworded it), or at the
    start of the body — unless the body it was written for is elsewhere now under another name."""
    body, target = b.bodies[key], o.bodies[key]
    if not _alike(b, o, key) and _moved_away(b, o, key):
        return None
    lines = _reindent(new, body.indent, target.indent)
    top = target.doc[0] if target.doc is not None else target.start
    return _Placed(top, top, tuple(lines), order) if lines is not None else None


def _spot(target: _Body, prev: _Stmt | None, p: int | None, q: int | None, at: int) -> int | None:
    """Where in the target an insertion goes: its anchors are its container and the statement before it
    (or the start of the body). Right after that statement's match — or right before the next statement's
    match, when the insertion was there (after blank lines or comments) and the two are still neighbours."""
    if prev is None:
        return target.start
    if p is None:
        return None
    neighbours = q is not None and q == p + 1
    if at != prev.end and neighbours and q is not None:
        return target.stmts[q].start
    return target.stmts[p].end


def _replace(b: _Shape, o: _Shape, i1: int, i2: int, new: list[str], order: int) -> _Placed | None:
    """A change of base lines [i1, i2): inside one statement, or of whole statements, of one container;
    made only where the target has the same statements, the same text."""
    for key, body in sorted(b.bodies.items(), key=lambda kv: -len(kv[0])):
        inside = [k for k, s in enumerate(body.stmts) if s.start < i2 and i1 < s.end]
        if inside:
            return _replace_in(b, o, key, inside, (i1, i2), new, order)
    return None


def _replace_in(
    b: _Shape, o: _Shape, key: Key, inside: list[int], span: tuple[int, int], new: list[str], order: int
) -> _Placed | None:
    """The change of base lines ``span`` to the statements ``inside`` of the body ``key``, placed where the
    target has the same statements, the same text (``None``: not certain where)."""
    i1, i2 = span
    body = b.bodies[key]
    first, last = body.stmts[inside[0]], body.stmts[inside[-1]]
    if i1 < first.start or i2 > last.end:
        return None  # reaches past the statements it touches: blank lines, comments, a header
    target = o.bodies.get(key)
    if target is None or _renamed_above(b, o, key):
        return None
    matched = [_match(b, o, key, body.stmts[k]) for k in inside]
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


def _text(shape: _Shape, s: _Stmt) -> tuple[str, ...]:
    """A statement's code, each line stripped (indentation and blank lines aside)."""
    return tuple(line.strip() for line in shape.lines[s.start : s.end] if line.strip())


def _same_header(body: _Body, target: _Body, s: _Stmt) -> tuple[list[_Stmt], list[int]]:
    """The base body's statements with ``s``'s header, and the places of those in the target's body."""
    mine = [x for x in body.stmts if x.head == s.head]
    return mine, [k for k, x in enumerate(target.stmts) if x.head == s.head]


def _match(b: _Shape, o: _Shape, key: Key, s: _Stmt) -> int | None:
    """The target's statement that is the base's ``s`` — by content and by position, never by its first
    line alone: among the target's siblings of the same header, the one of the same text at the same rank
    among those (``y = compute(x, 0)`` after upstream added another ``y = compute(...)`` earlier is still
    the second one); when the text changed, only a statement whose header is unique in both versions, in a
    body that is mostly the same statements (not a new function that took the old one's name). ``None`` when
    it is not certain which: an anchor upstream duplicated, rewrote, or removed."""
    body, target = b.bodies[key], o.bodies.get(key)
    if target is None:
        return None
    text = _text(b, s)
    mine, theirs = _same_header(body, target, s)
    same_b = [x for x in mine if _text(b, x) == text]
    same_o = [k for k in theirs if _text(o, target.stmts[k]) == text]
    if same_o and len(same_o) == len(same_b):
        return same_o[same_b.index(s)]
    if not same_o and len(mine) == 1 and len(theirs) == 1 and _alike(b, o, key):
        return theirs[0]
    return None


def _alike(b: _Shape, o: _Shape, key: Key, other: Key | None = None) -> bool:
    """Whether a body is mostly the same statements in both versions (at least half of the base's are in
    the target's body ``other``, by default the same one, word for word): the same function, edited
    upstream — not another under the old name."""
    mine = [_text(b, s) for s in b.bodies[key].stmts]
    theirs = collections.Counter(_text(o, s) for s in o.bodies[other or key].stmts)
    kept = sum(1 for t in mine if theirs[t] > 0)
    return bool(mine) and 2 * kept >= len(mine)


def _renamed_above(b: _Shape, o: _Shape, key: Key) -> bool:
    """Whether a class or function around the body ``key`` (not the body itself) was renamed upstream and
    another given its name: which of the two an edit belongs to is for a person to say."""
    for n in range(1, len(key) - 2, 2):
        outer = key[: n + 1]
        named = key[n - 1].startswith(("def ", "class ")) and outer in b.bodies and outer in o.bodies
        if named and not _alike(b, o, outer) and _moved_away(b, o, outer):
            return True
    return False


def _moved_away(b: _Shape, o: _Shape, key: Key) -> bool:
    """Whether the base's body ``key`` lives on under another name in the target (another body there is
    mostly its statements): a function renamed, and a new one given its old name."""
    return any(k != key and len(k) == len(key) and _alike(b, o, key, k) for k in o.bodies)


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


def by_context(base: bytes, theirs: bytes, ours: bytes) -> bytes | None:
    """The set's hunks (3 lines of context) applied to ``ours`` where each one's old lines, context
    included, occur exactly once — what a patch applies with no offset doubt; ``None`` when one does not.
    A line merge that gives the same bytes placed every edit where its context says, for certain."""
    a, b = base.splitlines(keepends=True), theirs.splitlines(keepends=True)
    text = ours.decode("utf-8", errors="surrogateescape")
    base_lines = base.decode("utf-8", errors="surrogateescape").splitlines(keepends=True)
    ours_lines = text.splitlines(keepends=True)
    out = ours
    edits: list[tuple[int, int, bytes]] = []
    in_base, in_ours = collections.Counter(a), collections.Counter(ours.splitlines(keepends=True))
    for group in difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(3):
        context = a[group[0][1] : group[-1][2]]
        if any(in_base[line] != in_ours[line] for line in context if _telling(line)):
            return None  # upstream added or removed copies of a line of this context: which one is it?
        old = b"".join(a[group[0][1] : group[-1][2]])
        new = b"".join(b[group[0][3] : group[-1][4]])
        needle = old.decode("utf-8", errors="surrogateescape")
        at = text.find(needle)
        if not needle or at < 0 or text.find(needle, at + 1) >= 0:
            return None
        if at and text[at - 1] != "\n":
            return None  # not at a line start
        start = len(text[:at].encode("utf-8", errors="surrogateescape"))
        edits.append((start, start + len(old), new))
        offset = next(op[1] for op in group if op[0] != "equal") - group[0][1]
        where = _enclosing(base_lines, group[0][1] + offset)
        if where != _enclosing(ours_lines, text.count("\n", 0, at) + offset):
            return None  # the same lines under another definition (renamed, moved): the statements decide
    for start, end, new in sorted(edits, reverse=True):
        out = out[:start] + new + out[end:]
    return out


def _telling(line: bytes) -> bool:
    """A line whose copies tell places apart: code, not a blank line, a comment or a lone bracket."""
    text = line.strip()
    return bool(text) and not text.startswith(b"#") and text.strip(b"()[]{},:") != b""


_HEADER = re.compile(r"[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)")


def _enclosing(lines: Sequence[str], at: int) -> tuple[str, ...]:
    """The names of the ``def``/``class`` headers above line ``at``, each less indented than the last —
    read from the text, as a quick look (the statements decide where it matters)."""
    names: list[str] = []
    limit: int | None = None
    for line in reversed(lines[: max(at, 0)]):
        stripped = line.lstrip(" \t")
        if not stripped.strip() or stripped.startswith("#"):
            continue
        indent = len(line) - len(stripped)
        if limit is not None and indent >= limit:
            continue
        found = _HEADER.match(line)
        if found:
            names.append(found.group(1))
            limit = indent
            if indent == 0:
                break
    return tuple(reversed(names))


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
    found = [shape_of(x) for x in (base, theirs, ours, merged)]
    shapes = [x for x in found if x is not None]
    if len(shapes) != 4:
        return None  # a version that does not parse: the line checks above are all there is
    return _misplaced(shapes, set(count[1] - count[0]))


def _misplaced(shapes: Sequence[_Shape], lines: set[str]) -> str | None:
    """Why the statements the set adds (or the statements holding the lines it adds) are not where they
    were: ``shapes`` are the base, the set, the target and the merge."""
    heads = [collections.Counter(h for _k, h, _p in _anchors(s).elements()) for s in shapes]
    new = set(heads[1] - heads[0])  # the statements the set adds (by header)
    if _added(shapes[0], shapes[1], new) != _added(shapes[2], shapes[3], new):
        return "a statement the set adds is not in the same place (its definition, the statement before it)"
    if _owned(shapes[0], shapes[1], lines) != _owned(shapes[2], shapes[3], lines):
        return "a line the set adds is not in the same statement"
    return None


def doubt_outside(base: bytes, theirs: bytes, ours: bytes, view: bytes) -> str | None:
    """For a merge left with conflicts, taken as the target has each (``view``): why a line of the set it
    carried outside them is not certain — held by another statement than in the set — or ``None``."""
    shapes = [shape_of(x) for x in (base, theirs, ours, view)]
    if any(s is None for s in shapes):
        return None  # nothing to read statements from: the conflicts are for a person anyway
    b, t, o, v = (s for s in shapes if s is not None)
    count = [collections.Counter(line.strip() for line in s.lines if line.strip()) for s in (b, t)]
    lines = set(count[1] - count[0])
    if _owned(o, v, lines) - _owned(b, t, lines):
        return "a line the set adds, carried outside the conflicts, is not in the same statement"
    return None


def _owned(before: _Shape, after: _Shape, lines: set[str]) -> collections.Counter[tuple[Key, str, str]]:
    """Of these lines, the ones ``after`` holds more of than ``before``, by the statement holding them."""
    more = _owners(after) - _owners(before)
    return collections.Counter({k: v for k, v in more.items() if k[2] in lines})


def _added(before: _Shape, after: _Shape, heads: set[str]) -> collections.Counter[tuple[Key, str, str]]:
    """The anchors of the statements with these headers that ``after`` has more of than ``before``."""
    more = _anchors(after) - _anchors(before)
    return collections.Counter({k: v for k, v in more.items() if k[1] in heads})


def _owners(shape: _Shape) -> collections.Counter[tuple[Key, str, str]]:
    """Every line of code as (the definitions around it, the header of the innermost statement holding it
    — a decorator belongs to its definition —, the line stripped)."""
    owner: dict[int, tuple[int, Key, str]] = {}
    for key, body in shape.bodies.items():
        defs = tuple(k for k in key if k.startswith(("def ", "class ")))
        spans = [(s.start, s.end, s.head) for s in body.stmts]
        if body.doc is not None:
            spans.append((*body.doc, _STRING))
        for start, end, head in spans:
            for line in range(start, end):
                if line not in owner or owner[line][0] <= len(key):
                    owner[line] = (len(key), defs, head)
    out: collections.Counter[tuple[Key, str, str]] = collections.Counter()
    for line, (_depth, defs, head) in owner.items():
        text = shape.lines[line].strip() if line < len(shape.lines) else ""
        if text:
            out[(defs, head, text)] += 1
    return out


def _anchors(shape: _Shape) -> collections.Counter[tuple[Key, str, str]]:
    """Every statement as (its container's definitions, its header, the header of the statement before
    it or ``<start>``)."""
    out: collections.Counter[tuple[Key, str, str]] = collections.Counter()
    for key, body in shape.bodies.items():
        defs = tuple(k for k in key if k.startswith(("def ", "class ")))
        if body.doc is not None:  # part of the header: the first statement still comes at the start
            out[(defs, _STRING, "<docstring>")] += 1
        heads = collections.Counter(s.head for s in body.stmts)
        texts = [_text(shape, s) for s in body.stmts]
        for i, s in enumerate(body.stmts):
            out[(defs, s.head, _label(body.stmts, texts, i - 1, heads) if i else "<start>")] += 1
    return out


def _label(
    stmts: Sequence[_Stmt], texts: Sequence[tuple[str, ...]], i: int, heads: collections.Counter[str]
) -> str:
    """How the statement before another is named in the certainty check: its header when no sibling shares
    it, else its header, its whole text, and which of the siblings of that very text it is, of how many —
    an insertion after ``y = compute(x, 0)`` is not "after ``y = ...``" when upstream added another
    ``y = compute(...)`` before it, nor after "a copy" when upstream added a copy of it."""
    s = stmts[i]
    if heads[s.head] == 1:
        return s.head
    rank, total = texts[:i].count(texts[i]), texts.count(texts[i])
    return f"{s.head}|{chr(10).join(texts[i])}|{rank}/{total}"
