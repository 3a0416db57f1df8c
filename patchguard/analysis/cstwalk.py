"""A libcst visitor's walk without libcst's rebuilding, and positions without its empty metadata pass.

``node.visit(visitor)`` in libcst builds a new copy of every node it passes, even for a
:class:`libcst.CSTVisitor` that cannot change anything, and ``MetadataWrapper.visit`` walks the whole tree
once more for the batchable providers even when there are none. On a large upgrade those two are most of
the analysis time. :func:`walk` makes the same calls on the visitor in the same order (``on_visit``, each
child attribute's ``on_visit_attribute`` … ``on_leave_attribute``, ``on_leave``), reading each node's
children in the order libcst's own ``_visit_and_replace_children`` visits them; what a visitor class is
told of a node type is worked out once (:func:`_plan`), and :class:`Dispatch` finds its ``visit_<Node>``
hooks once per type. :func:`positions` computes libcst's ``PositionProvider`` ranges by a cheaper code
generation; :func:`run` gives them to the visitor and walks.

The child order of a node type is read once from libcst's own ``_visit_and_replace_children`` (the field
names it passes to its ``visit_*`` helpers, in order); a node type whose order cannot be read is walked by
libcst itself, as before.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

import libcst as cst
from libcst._position import CodePosition
from libcst.metadata import CodeRange, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

__all__ = ["Dispatch", "positions", "run", "walk"]

_FIELD = re.compile(
    r"visit_(required|optional|sentinel|sequence|iterable|body_sequence|body_iterable)\(\s*"
    r"self,\s*\"(\w+)\""
)
# (attribute, visited as a sequence): libcst guards a sequence that may be absent (a format spec) and
# then makes no attribute calls for it, where an absent optional node gets them.
_ORDER: dict[type[cst.CSTNode], tuple[tuple[str, bool], ...] | None] = {}
_HOOKS: dict[type[cst.CSTVisitor], frozenset[str] | None] = {}


def _order(cls: type[cst.CSTNode]) -> tuple[tuple[str, bool], ...] | None:
    """The child attributes of a node type, in the order libcst visits them (``None``: not known)."""
    try:
        return _ORDER[cls]
    except KeyError:
        pass
    try:
        source = inspect.getsource(cls._visit_and_replace_children)
    except (OSError, TypeError):
        source = ""
    found = _FIELD.findall(source)
    names = tuple(dict.fromkeys(name for _, name in found))
    many = {name for how, name in found if how not in ("required", "optional", "sentinel")}
    fields = set(getattr(cls, "__dataclass_fields__", {}))
    order = tuple((n, n in many) for n in names) if names and set(names) <= fields else None
    _ORDER[cls] = order
    return order


def _hooks(cls: type[cst.CSTVisitor]) -> frozenset[str] | None:
    """The ``visit_<Node>_<attr>``/``leave_<Node>_<attr>`` hooks a visitor class defines (``None``: it
    overrides ``on_visit_attribute``/``on_leave_attribute`` itself, so every attribute is its business)."""
    try:
        return _HOOKS[cls]
    except KeyError:
        pass
    base = cst.CSTVisitor
    if cls.on_visit_attribute is not base.on_visit_attribute or (
        cls.on_leave_attribute is not base.on_leave_attribute
    ):
        hooks = None
    else:
        hooks = frozenset(  # libcst's own are do-nothing stubs
            name
            for name in dir(cls)
            if name.startswith(("visit_", "leave_")) and getattr(cls, name) is not getattr(base, name, None)
        )
    _HOOKS[cls] = hooks
    return hooks


# What a reader of code never looks at: whitespace, comments, brackets and punctuation (operators hold
# only their whitespace). A visitor that says so (``SKIPS_TRIVIA = True``) is not walked into them.
TRIVIA: tuple[type[cst.CSTNode], ...] = (
    cst.BaseParenthesizableWhitespace,
    cst.TrailingWhitespace,
    cst.EmptyLine,
    cst.Newline,
    cst.Comment,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.Comma,
    cst.Dot,
    cst.Colon,
    cst.Semicolon,
    cst.AssignEqual,
    cst.BaseBinaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.BaseUnaryOp,
    cst.BaseAugOp,
)


class Dispatch(cst.CSTVisitor):
    """``on_visit``/``on_leave`` as libcst's, with each node type's ``visit_<Node>``/``leave_<Node>``
    looked up once per visitor class instead of by a formatted name for every node."""

    def on_visit(self, node: cst.CSTNode) -> bool:
        key = (type(self), type(node))
        hook = _VISITS.get(key, _UNSET)
        if hook is _UNSET:
            hook = _VISITS[key] = _own(type(self), f"visit_{type(node).__name__}")
        return hook is None or hook(self, node) is not False  # type: ignore[operator]

    def on_leave(self, original_node: cst.CSTNode) -> None:
        key = (type(self), type(original_node))
        hook = _LEAVES.get(key, _UNSET)
        if hook is _UNSET:
            hook = _LEAVES[key] = _own(type(self), f"leave_{type(original_node).__name__}")
        if hook is not None:
            hook(self, original_node)  # type: ignore[operator]


_UNSET = object()
_VISITS: dict[tuple[type, type], object] = {}  # (visitor class, node type) → its hook, None for none
_LEAVES: dict[tuple[type, type], object] = {}


def _own(cls: type, name: str) -> object:
    """The visitor class's own hook of that name (``None`` for libcst's do-nothing stub)."""
    hook = getattr(cls, name, None)
    return None if hook is getattr(cst.CSTVisitor, name, None) else hook


Plan = tuple[tuple[str, bool, bool], ...]
_PLANS: dict[tuple[type, type], Plan | None] = {}


def _plan(visitor: type[cst.CSTVisitor], node: type[cst.CSTNode]) -> Plan | None:
    """How a visitor class walks a node type: (attribute, visited as a sequence, whether the visitor is
    told of it — it has a ``visit_<Node>_<attr>``/``leave_…`` hook, or takes every attribute), in libcst's
    order; ``None`` when the order is not known."""
    key = (visitor, node)
    if key not in _PLANS:
        order, hooks = _order(node), _hooks(visitor)
        kind = node.__name__
        _PLANS[key] = None if order is None else tuple(
            (attr, many, hooks is None or f"visit_{kind}_{attr}" in hooks or f"leave_{kind}_{attr}" in hooks)
            for attr, many in order
        )
    return _PLANS[key]


@functools.cache  # (the classes libcst defines do not change)
def types_of(*bases: type) -> frozenset[type]:
    """``bases`` and every class derived from them: ``type(node) in types_of(...)`` asks what
    ``isinstance(node, bases)`` does, without ``ABCMeta.__instancecheck__`` (libcst's classes are abstract
    base classes' children: every ``isinstance`` that fails goes through it)."""
    found: set[type] = set()
    todo: list[type] = list(bases)
    while todo:
        t = todo.pop()
        if t not in found:
            found.add(t)
            todo.extend(t.__subclasses__())
    return frozenset(found)


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a read-only visitor, without rebuilding the tree."""
    _walk(node, visitor, _KINDS_SKIPPING if getattr(visitor, "SKIPS_TRIVIA", False) else _KINDS)


class _Found(Dispatch):
    """The nodes of some kinds a node holds, itself included, in the order of a walk."""

    SKIPS_TRIVIA = True  # (no node of a kind looked for is trivia)

    def __init__(self, kinds: frozenset[type]) -> None:
        super().__init__()
        self.kinds, self.found = kinds, list[cst.CSTNode]()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) in self.kinds:
            self.found.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        return None


def find_all(node: cst.CSTNode, *bases: type[cst.CSTNode]) -> list[cst.CSTNode]:
    """The nodes of ``bases`` (or derived from them) in ``node``, itself included, nested defs and classes
    too, in walking order: what ``libcst.matchers.findall(node, m.Kind())`` finds, at a fraction of its cost
    (it rebuilds the tree as it visits; :func:`walk` does not, and skips the trivia)."""
    found = _Found(types_of(*bases))
    walk(node, found)
    return found.found


# What a value met on the walk is, by its type (``isinstance`` of libcst's abstract classes goes through
# ``ABCMeta.__instancecheck__``: millions of times a scan): a node to walk, a node to skip, or neither.
_NODE, _SKIPPED, _OTHER = 1, 2, 0


class _Kinds(dict[type, int]):
    """Type → its kind, worked out on first sight (``__missing__``) and looked up after."""

    def __init__(self, skipping: bool) -> None:
        super().__init__()
        self.skipping = skipping

    def __missing__(self, t: type) -> int:
        if not issubclass(t, cst.CSTNode):
            kind = _OTHER
        elif self.skipping and issubclass(t, TRIVIA):
            kind = _SKIPPED
        else:
            kind = _NODE
        self[t] = kind
        return kind


_KINDS, _KINDS_SKIPPING = _Kinds(skipping=False), _Kinds(skipping=True)


def _walk(node: cst.CSTNode, visitor: cst.CSTVisitor, kinds: _Kinds) -> None:
    plan = _plan(type(visitor), type(node))
    if plan is None:
        node.visit(visitor)
        return
    if kinds[type(node)] == _SKIPPED:
        return
    if visitor.on_visit(node):
        for attr, many, told in plan:
            value = getattr(node, attr)
            if many and value is None:
                continue
            if told:
                visitor.on_visit_attribute(node, attr)
            if type(value) is tuple or type(value) is list:
                for child in value:
                    if kinds[type(child)] != _OTHER:
                        _walk(child, visitor, kinds)
            elif kinds[type(value)] != _OTHER:
                _walk(value, visitor, kinds)
            if told:
                visitor.on_leave_attribute(node, attr)
    visitor.on_leave(node)


def positions(module: cst.Module, trivia: bool = True) -> Mapping[cst.CSTNode, CodeRange]:
    """``PositionProvider``'s metadata of ``module``, the same ranges: computed alone (no second pass for
    batchable providers that nobody asked for), by a cheaper code generation (:class:`_Positions`) — without
    ``trivia``, none of the whitespace, comments and punctuation (:data:`TRIVIA`) a walk that skips them
    never asks about."""
    provider = PositionProvider()
    provider._computed = {}
    state = _Positions(
        default_indent=module.default_indent, default_newline=module.default_newline, provider=provider
    )
    if not trivia:
        state.unkept = _TRIVIA_TYPES
    module._codegen(state)
    return cast("dict[cst.CSTNode, CodeRange]", provider._computed)


class _Span:
    """``record_syntactic_position`` as a plain context manager (libcst's is a generator, made per node)."""

    __slots__ = ("end_node", "node", "start", "start_node", "state")
    start: tuple[int, int]

    def __init__(
        self,
        state: _Positions,
        node: cst.CSTNode,
        start_node: cst.CSTNode | None,
        end_node: cst.CSTNode | None,
    ) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node
        self.start = (state.line, state.column)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        state = self.state
        computed = cast("dict[cst.CSTNode, CodeRange]", state.provider._computed)
        start = computed[self.start_node].start if self.start_node is not None else CodePosition(*self.start)
        if self.end_node is not None:
            end = computed[self.end_node].end
        else:
            end = CodePosition(state.line, state.column)
        computed[self.node] = CodeRange(start, end)


@dataclass
class _Positions(PositionProvidingCodegenState):
    """libcst's position-keeping code generation, less two of its costs: a token without a line break moves
    the column without a regular expression, and a syntactic span is recorded by :class:`_Span` rather than a
    generator-based context manager."""

    _where: list[tuple[int, int]] = field(default_factory=list)
    unkept: frozenset[type] = frozenset()  # the node types whose ranges are not kept…
    anchors: set[int] = field(default_factory=set)  # …unless a span ends on one (``from x import (a)``)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)  # (the module looks at them at its end: an empty file, a last newline)
        if "\n" in value or "\r" in value:
            self._update_position(value)
        else:
            self.column += len(value)

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.add_token(token)

    def before_codegen(self, node: cst.CSTNode) -> None:
        if type(node) not in self.unkept or id(node) in self.anchors:
            self._where.append((self.line, self.column))  # (a position object only where one is kept)

    def after_codegen(self, node: cst.CSTNode) -> None:
        if type(node) in self.unkept and id(node) not in self.anchors:
            return
        line, column = self._where.pop()
        computed = self.provider._computed
        if node not in computed:
            computed[node] = CodeRange(CodePosition(line, column), CodePosition(self.line, self.column))

    def record_syntactic_position(  # type: ignore[override]
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> _Span:
        if self.unkept:  # (its children are generated after this: a trivia anchor among them is kept)
            self.anchors.update(id(n) for n in (start_node, end_node) if n is not None)
        return _Span(self, node, start_node, end_node)


def run(
    module: cst.Module, visitor: cst.CSTVisitor, places: Mapping[cst.CSTNode, CodeRange] | None = None
) -> None:
    """Walk ``module`` with a visitor whose only metadata is ``PositionProvider`` (``places``, when they are
    known already)."""
    if places is None:
        places = positions(module, trivia=not getattr(visitor, "SKIPS_TRIVIA", False))
    visitor.metadata = {PositionProvider: places}
    walk(module, visitor)


_TRIVIA_TYPES = types_of(*TRIVIA)
