"""Two conditions compared by cases: for which values of what they test each one holds.

A condition an edit rewrote is read as a function of what it tests — its *subjects* (``x``, ``self.cap``,
``len(batch)``) and the comparisons it cannot see into (``a == f(b)``: one fact, true or false). Each subject
takes the values the two conditions make interesting: every number either compares it with, one either side,
zero, a very large one, every multiple up to a bound when it is divided, ``None`` when it is tested against
``None``; each fact takes true and false. The two conditions are evaluated for every combination, as Python
would (``and``/``or`` short-circuit, so ``x is not None and x > 3`` never orders ``None``); a combination
either cannot evaluate is left out.

``x not in (256, 448)`` → ``not 0 < x <= 448`` holds for fewer values (384 no longer); ``(a is None) ^ (b
is not None)`` → ``a is None and b is None`` likewise (both given no longer); ``a and b`` → ``a and b and
c`` too. Nothing is imported or run: the conditions are evaluated by a small interpreter of the expressions
this module knows (comparisons, boolean and arithmetic operators on numbers, literal tuples and sets).
"""

from __future__ import annotations

import ast
import copy
import itertools
import math
import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Compared", "compare", "level_asked"]

_MAX_CASES = 4_096  # combinations evaluated at most: more subjects than that, and nothing is said
_MAX_MULTIPLES = (
    2_048  # a divided subject takes every whole number up to twice the largest number, this many at most
)


@dataclass(frozen=True, slots=True)
class Compared:
    """How ``after`` holds against ``before``: ``fewer`` — it holds in no case ``before`` does not, and
    ``before`` holds in some case it does not (``example``: one such case, shown); ``more`` the other way;
    ``same``: in every case both hold or neither does."""

    fewer: bool
    more: bool
    example: str = ""
    same: bool = False  # they hold in exactly the same cases


def compare(before: ast.expr, after: ast.expr) -> Compared | None:
    """The two conditions compared by cases, or ``None`` when they test nothing in common or cannot be read
    (an expression this module does not know, too many combinations). Things compared with each other are
    one fact each, unless the two conditions have nothing else in common: then they are read again, each
    thing compared as a number of its own (``a != b`` → ``abs(a - b) > 1024``)."""
    before, after = _asked_as_compared(before), _asked_as_compared(after)
    before, after = _quantified(before), _quantified(after)
    before, after = _types_apart(before), _types_apart(after)
    before, after = _symbolic(before, after)
    subjects = _Subjects()
    if not subjects.readable(before, after):
        if not subjects.compared:
            return None  # (no two things were compared with each other: reading them as numbers adds nothing)
        return _as_numbers(before, after)
    found = _by_cases(before, after, subjects)
    if subjects.compared and (found is None or not (found.fewer or found.more)):
        # things compared with each other, as facts, each changed in both ways (``a != b`` → ``a > b``):
        # read as numbers, one may hold in every case of the other
        again = _as_numbers(before, after)
        return again if again is not None and (again.fewer or again.more) else found
    return found


def _quantified(condition: ast.expr) -> ast.expr:
    """``condition`` with each ``any(… for x in items)`` read as ``items and any(…)`` (it holds only where
    there are items) and each ``all(… for x in items)`` as ``not items or all(…)`` (it holds where there are
    none): ``if out_of_range:`` → ``if any(i > n for i in out_of_range):`` raises in fewer cases."""
    return _rewritten(condition, lambda n: _quantifier(n) is not None, _Quantified)


def _quantifier(node: ast.AST) -> ast.expr | None:
    """What ``any``/``all`` of one comprehension over a plain name or attribute runs over, else ``None``."""
    called = node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else ""
    if not isinstance(node, ast.Call) or called not in ("any", "all"):
        return None
    made = node.args[0] if len(node.args) == 1 and not node.keywords else None
    if not isinstance(made, (ast.GeneratorExp, ast.ListComp, ast.SetComp)) or len(made.generators) != 1:
        return None
    items = made.generators[0].iter
    return items if isinstance(items, (ast.Name, ast.Attribute)) else None


class _Quantified(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        items = _quantifier(node)
        if items is None:
            return self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "any":
            return ast.BoolOp(ast.And(), [copy.deepcopy(items), node])
        return ast.BoolOp(ast.Or(), [ast.UnaryOp(ast.Not(), copy.deepcopy(items)), node])


def _asked_as_compared(condition: ast.expr) -> ast.expr:
    """``condition`` with each predicate of a level asked by a number read as the comparison it makes — by
    its name, as the platforms' interfaces define them: ``has_<x>(n)`` (or ``<x>_at_least(n)``) is ``x >=
    n``, ``is_<x>(n)`` is ``x == n``, ``is_<x>_family(n)`` is ``x // 10 == n // 10`` (the same major of a
    capability written ``<major><minor>``; ``(9, 0)`` is 90) — the receiver aside (``p.has_…``,
    ``current_platform.has_…``): one subject for every call of that name."""
    return _rewritten(
        condition, lambda n: isinstance(n, ast.Call) and level_asked(n) is not None, _AskedAsCompared
    )


def _types_apart(condition: ast.expr) -> ast.expr:
    """``condition`` with each ``isinstance(x, (A, B))`` read as ``isinstance(x, A) or isinstance(x, B)``, as
    Python's docs define it: one type more is one more case that holds."""
    return _rewritten(condition, _of_types, _TypesApart)


def _rewritten(
    condition: ast.expr, applies: Callable[[ast.AST], bool], rewriter: type[ast.NodeTransformer]
) -> ast.expr:
    """``condition`` read by ``rewriter`` (on a copy) where a node of it ``applies``; else as it is."""
    if not any(applies(n) for n in ast.walk(condition)):
        return condition
    rewritten: ast.expr = rewriter().visit(copy.deepcopy(condition))
    return rewritten


def _of_types(node: ast.AST) -> bool:
    """``isinstance(x, (A, B, …))``: a tuple of types, written out."""
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
        and len(node.args) == 2 and not node.keywords and isinstance(node.args[1], ast.Tuple)
        and len(node.args[1].elts) > 1
    )  # fmt: skip


class _TypesApart(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        if not _of_types(node):
            return self.generic_visit(node)
        kinds = node.args[1].elts  # type: ignore[attr-defined]
        one: list[ast.expr] = [ast.Call(node.func, [node.args[0], kind], []) for kind in kinds]
        return ast.BoolOp(ast.Or(), one)


def level_asked(call: ast.Call) -> tuple[str, str, int] | None:
    """(how it compares — ``>=``, ``==`` or ``family`` —, what it asks of, the number) of a predicate of a
    level called with one number (``has_device_capability(90)``, ``is_device_capability_family(100)``)."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if len(call.args) != 1 or call.keywords or not isinstance(name, str):
        return None
    number = _level(call.args[0])
    if number is None:
        return None
    for prefix, suffix, how in (("has_", "", ">="), ("", "_at_least", ">="), ("is_", "_family", "family")):
        if name.startswith(prefix) and name.endswith(suffix) and len(name) > len(prefix) + len(suffix):
            return how, name[len(prefix) : len(name) - len(suffix)], number
    return ("==", name[3:], number) if name.startswith("is_") and len(name) > 3 else None


def _level(arg: ast.expr) -> int | None:
    """A level as a number: ``90``, or ``(9, 0)`` read as 90."""
    if isinstance(arg, ast.Tuple) and len(arg.elts) == 2:
        major, minor = (_whole(e) for e in arg.elts)
        return major * 10 + minor if major is not None and minor is not None else None
    return _whole(arg)


def _whole(node: ast.expr) -> int | None:
    """The whole number a literal is, else ``None``."""
    value = node.value if isinstance(node, ast.Constant) else None
    return value if type(value) is int else None


class _AskedAsCompared(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        asked = level_asked(node)
        if asked is None:
            return self.generic_visit(node)
        how, what, number = asked
        subject: ast.expr = ast.Name(f"_{what}_", ast.Load())
        if how == "family":
            subject = ast.BinOp(subject, ast.FloorDiv(), ast.Constant(10))
            return ast.Compare(subject, [ast.Eq()], [ast.Constant(number // 10)])
        op = ast.GtE() if how == ">=" else ast.Eq()
        return ast.Compare(subject, [op], [ast.Constant(number)])


def _symbolic(before: ast.expr, after: ast.expr) -> tuple[ast.expr, ast.expr]:
    """The two conditions with each named constant — a dotted name that is only ever what a subject is
    equated with or looked up among (``out_dtype is torch.bfloat16``, ``x in (torch.float16, …)``), never
    itself a subject nor ordered — made a value of its own, and ``is`` of one read as ``==``: ``x is A or x
    is B`` and ``x in (A, B)`` then read as the same condition, and one more member as more."""
    compares = [n for t in (before, after) for n in ast.walk(t) if isinstance(n, ast.Compare)]
    equated = [c for c in compares if all(isinstance(op, _IDENTITY) for op in c.ops)]
    subjects = {ast.dump(c.left) for c in compares}  # (and what is ordered: a number, not a constant)
    subjects |= {ast.dump(side) for c in compares if c not in equated for side in c.comparators}
    named = {ast.dump(m) for c in equated for m in _members(c)} - subjects
    if not named:
        return before, after
    rewrite = _Symbols(named)
    return rewrite.visit(copy.deepcopy(before)), rewrite.visit(copy.deepcopy(after))


def _members(compare: ast.Compare) -> Iterator[ast.expr]:
    """The named constants a comparison equates its subject with, or looks it up among."""
    for side in compare.comparators:
        members = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
        yield from (m for m in members if _named_constant(m))


def _named_constant(node: ast.expr) -> bool:
    """A dotted name of a module's member (``torch.bfloat16``, ``Backend.TRITON``): not ``self.x``."""
    if not isinstance(node, ast.Attribute):
        return False
    root = node.value
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id not in ("self", "cls")


class _Symbols(ast.NodeTransformer):
    """Named constants made values (:func:`_symbolic`); ``is``/``is not`` of one, ``==``/``!=``."""

    def __init__(self, named: set[str]) -> None:
        self.named = named

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        if ast.dump(node) in self.named:
            return ast.copy_location(ast.Constant(value="\x00" + ast.unparse(node)), node)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        named = [ast.dump(c) in self.named for c in node.comparators]
        self.generic_visit(node)
        node.ops = [
            ast.Eq()
            if isinstance(op, ast.Is) and hit
            else ast.NotEq()
            if isinstance(op, ast.IsNot) and hit
            else op
            for op, hit in zip(node.ops, named, strict=True)
        ]
        return node


def _as_numbers(before: ast.expr, after: ast.expr) -> Compared | None:
    """The two conditions read with things compared with each other as numbers — and, when that says they
    differ both ways, as quantities (no number below zero: sizes, lengths, memory, counts) when neither
    condition writes a negative number itself."""
    subjects = _Subjects(numbers=True)
    found = _by_cases(before, after, subjects) if subjects.readable(before, after) else None
    if found is None or found.fewer or found.more or _negative(before) or _negative(after):
        return found
    quantities = _Subjects(numbers=True, quantities=True)
    again = _by_cases(before, after, quantities) if quantities.readable(before, after) else None
    return again if again is not None and (again.fewer or again.more) else found


def _below_zero(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0


def _negative(test: ast.expr) -> bool:
    return any(
        (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub))
        or (isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and n.value < 0)
        for n in ast.walk(test)
    )


def _by_cases(before: ast.expr, after: ast.expr, subjects: _Subjects) -> Compared | None:
    """The two conditions evaluated for every combination of what ``subjects`` read in them."""
    names = sorted(subjects.values)
    domains = [subjects.domain(n) for n in names]
    if math.prod(map(len, domains)) > _MAX_CASES:
        return None
    cases = (dict(zip(names, c, strict=True)) for c in itertools.product(*domains))
    differ = [(old, case) for case in cases if (old := _differs(before, after, case, subjects)) is not None]
    only_before = [case for old, case in differ if old]
    only_after = len(differ) - len(only_before)
    example = _shown(only_before[0], subjects) if only_before else ""
    return Compared(
        fewer=bool(only_before) and not only_after,
        more=only_after > 0 and not only_before,
        example=example,
        same=not differ,
    )


def _differs(before: ast.expr, after: ast.expr, case: Mapping[str, Any], subjects: _Subjects) -> bool | None:
    """In one case: ``True`` when only ``before`` holds, ``False`` when only ``after`` does, else ``None``."""
    old, new = _holds(before, case, subjects), _holds(after, case, subjects)
    return None if old is None or new is None or old == new else old


class _Other:
    """A value of a subject that equals nothing the conditions name (a string they do not list)."""

    def __repr__(self) -> str:
        return "<some other value>"


_OTHER = _Other()


class _Subjects:
    """What two conditions test: each subject by its text, with the constants it meets."""

    def __init__(self, numbers: bool = False, quantities: bool = False) -> None:
        self.numbers = numbers  # things compared with each other read as numbers, not as one fact
        self.quantities = quantities  # numbers below zero left out
        self.compared = False  # some were, and were read as one fact
        self.values: dict[str, set[Any]] = {}  # subject -> the interesting values
        self.facts: set[str] = set()  # subjects that are only true or false
        self.divided: set[str] = set()
        self.keys: dict[str, set[str]] = {}  # condition (its dump) -> the subjects it tests
        self._texts: dict[int, str] = {}  # node (its id: the two conditions live while compared) -> its text
        self.sized: dict[str, str] = {}  # a container's text -> ``len(…)`` of it, when the conditions ask
        self.affixes: dict[int, _Affix] = {}  # a prefix test's call (its id) -> its parts, read once

    def key(self, node: ast.expr) -> str:
        """A subject's or a fact's text (``self.cap``), worked out once per node."""
        text = self._texts.get(id(node))
        if text is None:
            text = self._texts[id(node)] = " ".join(ast.unparse(node).split())
        return text

    def read(self, test: ast.expr) -> bool:
        found: set[str] = set()
        ok = self._read(test, found)
        self.keys[ast.dump(test)] = found
        return ok

    def readable(self, before: ast.expr, after: ast.expr) -> bool:
        """Whether both conditions are read, and test something in common. A container whose length
        either asks (``len(x) == 0``) is, as a truth value (``not x``), that length not zero."""
        for test in (before, after):
            for n in ast.walk(test):
                if (sized := _length_of(n)) is not None:
                    self.sized[self.key(sized)] = self.key(n)  # type: ignore[arg-type]
        if not (self.read(before) and self.read(after)) or not self.values:
            return False
        return bool(self.keys[ast.dump(before)] & self.keys[ast.dump(after)])

    def _read(self, node: ast.expr, found: set[str]) -> bool:
        if isinstance(node, ast.BoolOp):
            return all(self._boolean(v, found) for v in node.values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self._boolean(node.operand, found)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitXor, ast.BitAnd, ast.BitOr)):
            if _bitwise(node):  # ``n & (n - 1)``: a number as a truth value, not two facts
                return self._compare(_nonzero(node), found)
            return self._boolean(node.left, found) and self._boolean(node.right, found)
        if isinstance(node, ast.Compare):
            return self._compare(node, found)
        return self._boolean(node, found)

    def _boolean(self, node: ast.expr, found: set[str]) -> bool:
        if isinstance(node, (ast.BoolOp, ast.Compare)) or _logical(node):
            return self._read(node, found)
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            # a number as a truth value (``hidden % 256``: not a multiple): read as ``hidden % 256 != 0``
            return self._compare(_nonzero(node), found)
        if _subject(node) and self.key(node) in self.sized:  # ``not x`` where ``len(x)`` is asked too
            return self._compare(_nonzero(ast.Call(func=ast.Name("len"), args=[node], keywords=[])), found)
        affix = _affix_test(node)
        if affix is not None:  # ``name.startswith(("a", "b"))``: the name a string, each prefix tried
            self.affixes[id(node)] = affix  # (not read again in every case evaluated)
            method, subject, literals = affix
            key = self.key(subject)
            values = self.values.setdefault(key, set())
            values.add(_NO_AFFIX)
            values.update(p + _MORE if method == "startswith" else _MORE + p for p in literals)
            found.add(key)
            return True
        if _subject(node):
            key = self.key(node)
            self.values.setdefault(key, set()).update((True, False))
            self.facts.add(key)
            found.add(key)
            return True
        return False

    def _compare(self, node: ast.Compare, found: set[str]) -> bool:
        sides = [node.left, *node.comparators]
        subjects: set[str] = set()
        for side in sides:
            if not _arithmetic(side, subjects, self.key):
                return self._fact(node, found)
        if len(subjects) != 1 and not (self.numbers and self._numbers_compared(node, subjects)):
            self.compared = self.compared or len(subjects) > 1
            return self._fact(node, found)  # two things compared with each other: one fact
        for key in subjects:
            self._note_sides(node, sides, key)
            found.add(key)
        return True

    def _note_sides(self, node: ast.Compare, sides: list[ast.expr], key: str) -> None:
        """The values a comparison of ``key`` names, and those an identity test adds."""
        values = self.values.setdefault(key, set())
        for side in sides:
            for c in ast.walk(side):
                self._note(c, key, values)
        values.update(_scaled(sides, values, lambda n: self._holds_key(n, key)))
        if any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            values.update((None, _OTHER))  # (and ``is False``'s own value, and the other truth value)
            flags = [s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, bool)]
            values.update((True, False) if flags else ())

    def _numbers_compared(self, node: ast.Compare, subjects: set[str]) -> bool:
        """Whether several subjects are compared as numbers — names, attributes and what is asked of them
        combined by arithmetic and ordered or equated (``a != b``, ``abs(a - b) > 1024``, ``d <= 65536 //
        q.element_size()``): each is then a number of its own, taking the values the conditions name, and
        zero and one."""
        if not all(isinstance(op, _ORDERS) for op in node.ops):
            return False
        named = {
            self.key(n)
            for side in (node.left, *node.comparators)
            for n in ast.walk(side)
            if isinstance(n, ast.expr) and (_plain(n) or _asked(n))
        }
        if not subjects <= named:
            return False  # a call of something else among them: what it reads is not known
        for key in subjects:
            self.values.setdefault(key, set()).update((0, 1))
        return True

    def _note(self, c: ast.AST, key: str, values: set[Any]) -> None:
        divides = isinstance(c, ast.BinOp) and isinstance(c.op, (ast.Mod, ast.FloorDiv))
        if divides and self._holds_key(c.left, key):  # type: ignore[attr-defined]
            self.divided.add(key)  # (what is divided, not what divides it: ``65536 // x.element_size()``)
        if isinstance(c, ast.Constant) and not isinstance(c.value, bool):
            if isinstance(c.value, (int, float)):
                values.update((c.value - 1, c.value, c.value + 1, -c.value))
                if isinstance(c.value, float):
                    values.update((c.value - 0.5, c.value + 0.5))
            elif isinstance(c.value, str):
                values.update((c.value, _OTHER))
            elif c.value is None:
                values.update((None, _OTHER))
        if isinstance(c, ast.Tuple) and (t := _literal(c)) is not None and t and isinstance(t, tuple):
            values.update(_around(t))

    def _holds_key(self, node: ast.expr, key: str) -> bool:
        return any(isinstance(n, ast.expr) and self.key(n) == key for n in ast.walk(node))

    def _fact(self, node: ast.expr, found: set[str]) -> bool:
        key = self.key(node)
        self.values.setdefault(key, set()).update((True, False))
        self.facts.add(key)
        found.add(key)
        return True

    def domain(self, key: str) -> list[Any]:
        values = self.values[key]
        if key in self.facts:
            return [False, True]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if numbers:
            values = values | {0, 1, -1, 10**9}
        if key in self.divided and numbers:
            top = min(int(max(abs(v) for v in numbers)) * 2 + 2, _MAX_MULTIPLES)
            values = values | set(range(top))
        if self.quantities or key in self.sized.values():  # (a length is never below zero)
            values = {v for v in values if not _below_zero(v)}
        return sorted(values, key=repr)


def _logical(node: ast.expr) -> bool:
    return (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)) or (
        isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitXor, ast.BitAnd, ast.BitOr))
    )


def _subject(node: ast.expr) -> bool:
    """Whether ``node`` is something tested whose value is not written here: a name, an attribute, an item,
    a call."""
    return isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call))


def _asked(node: ast.AST) -> bool:
    """A value asked of plain things (``q.element_size()``, ``len(batch)``, ``x.size(0)``): a number."""
    return (
        isinstance(node, ast.Call)
        and _plain(node.func)
        and not node.keywords
        and all(_plain(a) or isinstance(a, ast.Constant) for a in node.args)
    )


def _plain(node: ast.AST) -> bool:
    """A name or a chain of attributes and fixed items (``self.cap``, ``x.shape[1]``), not a call's."""
    while isinstance(node, ast.Attribute) or (
        isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
    ):
        node = node.value
    return isinstance(node, ast.Name)


_ORDERS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
# Python's own functions of numbers, read as arithmetic: ``abs(a - b) > 1024``.
_NUMERIC: Mapping[str, Callable[..., Any]] = {"abs": abs, "min": min, "max": max}


def _numeric_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _NUMERIC
        and bool(node.args)
        and not node.keywords
        and not any(isinstance(a, ast.Starred) for a in node.args)
    )


def _arithmetic(node: ast.expr, subjects: set[str], key: Callable[[ast.expr], str]) -> bool:
    """Whether ``node`` is numbers, literal tuples or sets, and subjects combined by arithmetic (the subjects
    it holds added to ``subjects``)."""
    if isinstance(node, ast.Constant):
        return True
    if _numeric_call(node):
        assert isinstance(node, ast.Call)
        return all(_arithmetic(a, subjects, key) for a in node.args)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_arithmetic(e, subjects, key) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _arithmetic(node.operand, subjects, key)
    bits = isinstance(node, ast.BinOp) and _bitwise(node)
    if isinstance(node, ast.BinOp) and (type(node.op) in _ARITHMETIC or bits):
        return _arithmetic(node.left, subjects, key) and _arithmetic(node.right, subjects, key)
    if _subject(node):
        subjects.add(key(node))
        return True
    return False


def _scaled(sides: list[ast.expr], values: set[Any], holds: Callable[[ast.expr], bool]) -> set[Any]:
    """The subject's values at which a side that scales it down by a number (``sm // 10``, ``x % 64``) takes
    the values compared: ``sm // 10 == 10`` differs from ``sm // 10 in (10, 11)`` only at
    ``sm`` from 110 — each compared number times the scale, and one short of the next multiple."""
    scales = {
        int(n.right.value)
        for side in sides
        for n in ast.walk(side)
        if isinstance(n, ast.BinOp) and isinstance(n.op, _SCALING) and holds(n.left)
        and isinstance(n.right, ast.Constant) and type(n.right.value) is int and 1 < n.right.value <= 1 << 16
    }  # fmt: skip
    numbers = [v for v in values if type(v) is int and v >= 0]
    out: set[Any] = set()
    for k in scales:
        out.update(v for c in numbers for v in (c * k, c * k + k - 1, c * k - 1))
    return out


_SCALING = (ast.FloorDiv, ast.Div, ast.Mod)


def _nonzero(node: ast.expr) -> ast.Compare:
    return ast.Compare(left=node, ops=[ast.NotEq()], comparators=[ast.Constant(0)])


def _bitwise(node: ast.BinOp) -> bool:
    """Whether ``&``, ``|`` or ``^`` works on numbers: a side is arithmetic or a whole number."""
    return isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)) and any(
        (isinstance(side, ast.BinOp) and type(side.op) in _ARITHMETIC)
        or (isinstance(side, ast.Constant) and type(side.value) is int)
        for side in (node.left, node.right)
    )


def _length_of(node: ast.AST) -> ast.expr | None:
    """``x`` of ``len(x)`` (``x`` a name, an attribute or a fixed item); else ``None``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and len(node.args) == 1
        and not node.keywords
        and _plain(node.args[0])
    ):
        return node.args[0]
    return None


_Affix = tuple[str, ast.expr, tuple[str, ...]]  # (``startswith``/``endswith``, what is tested, the strings)
# The strings a subject tested by its prefixes or suffixes takes: each one, given more text, and one that
# has none of them.
_MORE, _NO_AFFIX = "…", ""


def _affix_test(node: ast.expr) -> _Affix | None:
    """(``startswith``/``endswith``, what is tested, the literal strings) of ``x.startswith("a")`` or
    ``x.endswith(("a", "b"))`` where ``x`` is a name or an attribute; else ``None``."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("startswith", "endswith")
        and len(node.args) == 1
        and not node.keywords
        and _plain(node.func.value)
    ):
        return None
    value = _literal(node.args[0])
    literals = value if isinstance(value, tuple) else (value,)
    if not literals or not all(isinstance(v, str) for v in literals):
        return None
    return node.func.attr, node.func.value, literals


def _affixed(node: Any, case: Mapping[str, Any], subjects: _Subjects) -> Any:
    affix = subjects.affixes.get(id(node)) or _affix_test(node)
    if affix is None:
        raise _Unknown
    method, subject, literals = affix
    value = _value(subject, case, subjects)
    if not isinstance(value, str):
        raise _Unknown
    return value.startswith(literals) if method == "startswith" else value.endswith(literals)


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _around(t: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """A tuple of numbers and the tuples next to it: each part one less and one more."""
    yield t
    for i, part in enumerate(t):
        if isinstance(part, (int, float)) and not isinstance(part, bool):
            for step in (-1, 1):
                yield (*t[:i], part + step, *t[i + 1 :])


_ARITHMETIC: Mapping[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE: Mapping[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


class _Unknown(Exception):
    """A case the conditions cannot be evaluated in (``None > 3``, a division by zero)."""


def _holds(test: ast.expr, case: Mapping[str, Any], subjects: _Subjects) -> bool | None:
    try:
        return bool(_value(test, case, subjects))
    except (_Unknown, TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None


def _value(node: ast.expr, case: Mapping[str, Any], subjects: _Subjects) -> Any:
    if _numeric_call(node):
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        return _NUMERIC[node.func.id](*(_value(a, case, subjects) for a in node.args))
    key = subjects.key(node) if isinstance(node, _KEYED) else ""
    if key in case and (key in subjects.facts or not isinstance(node, ast.Compare)):
        return case[key]
    if key in subjects.sized and subjects.sized[key] in case:
        return case[subjects.sized[key]] != 0  # a container as a truth value: its length not zero
    evaluate = _EVALUATE.get(type(node))
    if evaluate is None:
        raise _Unknown
    return evaluate(node, case, subjects)


def _unary(node: Any, case: Mapping[str, Any], subjects: _Subjects) -> Any:
    operand = _value(node.operand, case, subjects)
    if isinstance(node.op, ast.Not):
        return not operand
    return -operand if isinstance(node.op, ast.USub) else +operand


def _binary(node: Any, case: Mapping[str, Any], subjects: _Subjects) -> Any:
    left, right = _value(node.left, case, subjects), _value(node.right, case, subjects)
    logical = _LOGICAL.get(type(node.op))
    if logical is None:
        arithmetic = _ARITHMETIC.get(type(node.op))
        if arithmetic is None:
            raise _Unknown  # (an operator this reading does not know: no case, never a crash)
        return arithmetic(left, right)
    if isinstance(left, int) and isinstance(right, int):
        return logical(left, right)  # (numbers: bit by bit, ``n & (n - 1)``; truth values: as Python does)
    return logical(bool(left), bool(right))


def _items(node: Any, case: Mapping[str, Any], subjects: _Subjects) -> Any:
    items = [_value(e, case, subjects) for e in node.elts]
    return set(items) if isinstance(node, ast.Set) else tuple(items)


_LOGICAL: Mapping[type, Callable[[Any, Any], Any]] = {
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
}
_EVALUATE: Mapping[type, Callable[[Any, Mapping[str, Any], _Subjects], Any]] = {
    ast.Constant: lambda node, _case, _subjects: node.value,
    ast.BoolOp: lambda node, case, subjects: _bool_op(node, case, subjects),
    ast.UnaryOp: _unary,
    ast.BinOp: _binary,
    ast.Compare: lambda node, case, subjects: _compared(node, case, subjects),
    ast.Tuple: _items,
    ast.List: _items,
    ast.Set: _items,
    ast.Call: _affixed,
}


_SUBJECTS = (ast.Name, ast.Attribute, ast.Subscript, ast.Call)
_KEYED = (ast.Compare, *_SUBJECTS)
_IDENTITY = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot, ast.In, ast.NotIn)


def _bool_op(node: ast.BoolOp, case: Mapping[str, Any], subjects: _Subjects) -> Any:
    result: Any = None
    for v in node.values:
        result = _value(v, case, subjects)
        if isinstance(node.op, ast.And) and not result:
            return result
        if isinstance(node.op, ast.Or) and result:
            return result
    return result


def _compared(node: ast.Compare, case: Mapping[str, Any], subjects: _Subjects) -> bool:
    left = _value(node.left, case, subjects)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        right = _value(right_node, case, subjects)
        if (left is _OTHER or right is _OTHER) and not isinstance(op, _IDENTITY):
            raise _Unknown  # another value has no order
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def _shown(case: Mapping[str, Any], subjects: _Subjects) -> str:
    """One case, its subjects that are values (not facts) shown: ``x = 384``."""
    parts = [f"{k[:30]} = {v!r}" for k, v in case.items() if k not in subjects.facts]
    return ", ".join(parts)[:80]
