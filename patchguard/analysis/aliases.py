"""Import aliases: the qualified name a local name stands for (``th``, after ``import torch as th``).

The one implementation for both readers of a file: :mod:`.structure` hands it the module-level imports it
reads with ``ast``, :mod:`.judge` the imports it meets while walking a unit with libcst (those inside
functions too). Each reader only turns its own import node into names; what an import binds, and how a
dotted name resolves through the bindings, is decided here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, MutableMapping

__all__ = [
    "Imported",
    "bind_ast_imports",
    "bind_from_import",
    "bind_import",
    "last_name",
    "reads_environment",
    "resolve",
]

Imported = Iterable[tuple[str, str | None]]
"""The names of one import statement: (dotted name, ``as`` name or ``None``)."""


def bind_import(aliases: MutableMapping[str, str], names: Imported) -> None:
    """``import a.b as c`` binds ``c`` to ``a.b``; ``import a.b`` binds ``a`` (to itself)."""
    for name, asname in names:
        if asname:
            aliases[asname] = name
        else:
            top = name.split(".", 1)[0]
            aliases[top] = top


def bind_from_import(
    aliases: MutableMapping[str, str], module: str | None, level: int, names: Imported
) -> None:
    """``from m import x as y`` binds ``y`` (``x`` without ``as``) to ``m.x``.

    A relative import (``level`` > 0) binds ``.m.x`` (one dot per level): a name of a sibling module, which
    no rule's table names, but whose attributes are another module's (assigning one is a monkeypatch). A
    ``*`` binds nothing that can be known without importing.
    """
    base = "." * level + (module or "") if level else module
    if not base:
        return
    for name, asname in names:
        if name != "*":
            aliases[asname or name] = f"{base}.{name}" if not base.endswith(".") else f"{base}{name}"


def bind_ast_imports(aliases: MutableMapping[str, str], nodes: Iterable[ast.stmt]) -> None:
    """What the ``import`` and ``from … import`` statements among ``nodes`` bind (other statements are
    skipped; nested blocks are not looked into)."""
    for node in nodes:
        if isinstance(node, ast.Import):
            bind_import(aliases, ((a.name, a.asname) for a in node.names))
        elif isinstance(node, ast.ImportFrom):
            bind_from_import(aliases, node.module, node.level, ((a.name, a.asname) for a in node.names))


def resolve(aliases: Mapping[str, str], dotted: str) -> str:
    """``dotted`` with its first part replaced by what it is bound to (``th.save`` → ``torch.save``)."""
    head, dot, rest = dotted.partition(".")
    base = aliases.get(head)
    if base is None:
        return dotted
    return f"{base}.{rest}" if dot else base


def reads_environment(text: str) -> bool:
    """Whether code's text names the process environment (``os.environ``, ``os.getenv``, by any alias of
    ``os``): a gate, a switch or a value read from it."""
    return "environ" in text or "getenv" in text


def last_name(node: ast.expr) -> str:
    """The last name an expression is written with: ``x`` of ``x``, ``attr`` of ``a.b.attr``; "" else."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
