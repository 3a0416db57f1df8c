"""A libcst visitor's walk without libcst's rebuilding, and positions without its empty metadata pass.

``node.visit(visitor)`` in libcst builds a new copy of every node it passes, even for a
:class:`libcst.CSTVisitor` that cannot change anything, and ``MetadataWrapper.visit`` walks the whole tree
once more for the batchable providers even when there are none. On a large upgrade those two are most of
the analysis time. :func:`walk` makes the same calls on the visitor in the same order (``on_visit``, each
child attribute's ``on_visit_attribute`` … ``on_leave_attribute``, ``on_leave``), reading each node's
children in the order libcst's own ``_visit_and_replace_children`` visits them; a ``visit_<Node>_<attr>``
hook the visitor does not define is not looked up for every node. :func:`run` gives the visitor
``PositionProvider`` metadata and walks.

The child order of a node type is read once from libcst's own ``_visit_and_replace_children`` (the field
names it passes to its ``visit_*`` helpers, in order); a node type whose order cannot be read is walked by
libcst itself, as before.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import cast

import libcst as cst
from libcst.metadata import CodeRange, PositionProvider

__all__ = ["positions", "run", "walk"]

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


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a read-only visitor, without rebuilding the tree."""
    skip = TRIVIA if getattr(visitor, "SKIPS_TRIVIA", False) else ()
    _walk(node, visitor, _hooks(type(visitor)), skip)


def _walk(
    node: cst.CSTNode,
    visitor: cst.CSTVisitor,
    hooks: frozenset[str] | None,
    skip: tuple[type[cst.CSTNode], ...],
) -> None:
    order = _order(type(node))
    if order is None:
        node.visit(visitor)
        return
    if skip and isinstance(node, skip):
        return
    if visitor.on_visit(node):
        kind = type(node).__name__
        for attr, many in order:
            value = getattr(node, attr)
            if many and value is None:
                continue
            named = hooks is None or f"visit_{kind}_{attr}" in hooks or f"leave_{kind}_{attr}" in hooks
            if named:
                visitor.on_visit_attribute(node, attr)
            if isinstance(value, cst.CSTNode):
                _walk(value, visitor, hooks, skip)
            elif isinstance(value, (tuple, list)):
                for child in value:
                    if isinstance(child, cst.CSTNode):
                        _walk(child, visitor, hooks, skip)
            if named:
                visitor.on_leave_attribute(node, attr)
    visitor.on_leave(node)


def positions(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    """``PositionProvider``'s metadata of ``module`` (computed alone: no second pass for batchable providers
    that nobody asked for)."""
    provider = PositionProvider()
    provider._computed = {}
    provider._gen_impl(module)
    return cast("dict[cst.CSTNode, CodeRange]", provider._computed)


def run(
    module: cst.Module, visitor: cst.CSTVisitor, places: Mapping[cst.CSTNode, CodeRange] | None = None
) -> None:
    """Walk ``module`` with a visitor whose only metadata is ``PositionProvider`` (``places``, when they are
    known already)."""
    visitor.metadata = {PositionProvider: positions(module) if places is None else places}
    walk(module, visitor)
