"""What a framework profile declares, and the registry reader the profiles share today.

A profile says where a framework keeps its model registry and which package its model modules live in,
and brings the function that reads that registry (architecture → model module). Every profile uses
:func:`read_dict_literals` for now; a framework whose registry looks different gets a reader of its own in
its module, without touching the others.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Profile", "RegistryReader", "read_dict_literals"]

RegistryReader = Callable[[str], dict[str, str]]
"""Reads the registry file at a path: architecture → model module name (empty when it cannot tell)."""


@dataclass(frozen=True, slots=True)
class Profile:
    """Where a framework keeps its model registry, the package its model modules live in, and its reader."""

    name: str
    registry: str  # path relative to site-packages
    models_package: str
    read_registry: RegistryReader


def read_dict_literals(path: str) -> dict[str, str]:
    """Architecture → model module name, from dict literals of ``"Arch": ("module", "Class")`` entries."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return {}
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for k, v in zip(node.keys, node.values, strict=True):
            if (
                isinstance(k, ast.Constant)
                and isinstance(k.value, str)
                and isinstance(v, ast.Tuple)
                and v.elts
                and isinstance(v.elts[0], ast.Constant)
                and isinstance(v.elts[0].value, str)
            ):
                out[k.value] = v.elts[0].value
    return out
