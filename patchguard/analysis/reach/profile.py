"""What a framework profile declares: where its model registry is, how to read it, what its server runs.

A profile is data plus one reader: the framework's top-level package (its presence says the framework is
installed), the package its model modules live in, a function that reads the installed registry
(architecture → model modules of that package), and the modules its server imports whatever model it
serves (only those that exist are used). A new framework is one module declaring its :class:`Profile`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from ..._fs import read_regular
from ..bounds import too_wild
from .index import FactIndex

__all__ = ["Profile", "RegistryReader", "read_dict_literals"]

RegistryReader = Callable[[str, FactIndex], dict[str, tuple[str, ...]]]
"""Reads the registry of the framework installed in a site directory: architecture → model module names
(relative to the models package); empty when the framework is not there or the registry cannot be read."""


@dataclass(frozen=True, slots=True)
class Profile:
    """A framework whose model registry maps ``--arch`` to the model module that serves it."""

    name: str
    package: str  # the top-level package, e.g. "vllm"
    models_package: str
    read_registry: RegistryReader
    server_modules: tuple[str, ...] = ()
    # Whether the server imports every model module at start-up (SGLang does, to read each EntryClass):
    # then the module-level code of another architecture's module runs, its model does not.
    imports_every_model: bool = False
    # Modules the server loads by name, not through an import statement: always (vLLM's platform module
    # for the device), or one of them as its configuration selects (attention backends; ``*`` patterns).
    by_name: tuple[str, ...] = ()
    selected_by_name: tuple[str, ...] = ()


def read_dict_literals(path: str) -> dict[str, tuple[str, ...]]:
    """Architecture → model module name, from dict literals of ``"Arch": ("module", "Class")`` entries."""
    try:  # a regular file only (a FIFO never blocks), bounded before the parser sees it
        text = read_regular(path, 16 << 20).decode("utf-8")
        tree = ast.parse(text) if too_wild(text) is None else ast.Module(body=[], type_ignores=[])
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    out: dict[str, tuple[str, ...]] = {}
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
                out[k.value] = (v.elts[0].value,)
    return out
