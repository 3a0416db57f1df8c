"""What a framework profile declares: where its model registry is, how to read it, what its server runs.

A profile is data plus one reader: the framework's top-level package (its presence says the framework is
installed), the package its model modules live in, a function that reads the installed registry
(architecture → model modules of that package), and the modules its server imports whatever model it
serves (only those that exist are used). The frameworks patchguard ships are modules declaring their
:class:`Profile`; any other (an in-house server, a test fixture) is a TOML file of the same data
(:func:`load_profile`), named by ``$PATCHGUARD_PROFILES`` or ``profiles = [...]`` in the configuration::

    name = "minillm"
    package = "minillm"
    models_package = "minillm.models"
    registry = {dict_literals = "minillm/models/registry.py"}   # or {entry_class = "pkg/models"}
    server_modules = ["minillm.entrypoints.serve"]
    by_name = ["minillm.platforms.cuda"]
    hot = ["minillm.engine.Engine.step"]                          # per-step entry points
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..._fs import parse_toml, read_input, read_regular
from ...config import ConfigError
from ..bounds import too_wild
from .index import FactIndex

__all__ = [
    "Profile",
    "RegistryReader",
    "dict_literal_registry",
    "entry_class_registry",
    "load_profile",
    "no_registry",
    "read_dict_literals",
]

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
    # Its per-step entry points, as ``module.Class.method`` symbols (``*`` patterns in the module's last
    # name and in the function's qualified name): what they call on every run is the hot path (:mod:`.hot`).
    hot: tuple[str, ...] = ()


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


def no_registry(site_dir: str, index: FactIndex) -> dict[str, tuple[str, ...]]:
    """The reader of a framework whose registry is not read: it serves no ``--arch``."""
    return {}


def dict_literal_registry(path: str) -> RegistryReader:
    """A reader of the registry file at ``path`` (relative to site-packages, ``/``-separated) whose dict
    literals map each architecture to its model module (vLLM's shape)."""

    def read(site_dir: str, index: FactIndex) -> dict[str, tuple[str, ...]]:
        return index.registry(os.path.join(site_dir, *path.split("/")), read_dict_literals)

    return read


def entry_class_registry(models_dir: str, models_package: str) -> RegistryReader:
    """A reader of every model module in ``models_dir`` (relative to site-packages): the classes its
    ``EntryClass`` names are the architectures it serves (SGLang's shape)."""

    def read(site_dir: str, index: FactIndex) -> dict[str, tuple[str, ...]]:
        folder = os.path.join(site_dir, *models_dir.split("/"))
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return {}
        out: dict[str, tuple[str, ...]] = {}
        for name in names:
            if not name.endswith(".py") or name == "__init__.py":
                continue
            module = f"{models_package}.{name[:-3]}"
            for arch in index.entry_classes(module, os.path.join(folder, name)):
                out[arch] = (*out.get(arch, ()), name[:-3])
        return out

    return read


_STRING_LISTS = ("server_modules", "by_name", "selected_by_name", "hot")


def _profile_document(path: str) -> dict[str, Any]:
    """The TOML document of a framework profile, or a :class:`~patchguard.config.ConfigError` naming it."""
    try:
        return parse_toml(read_input(path, limit=1 << 20))
    except OSError as exc:
        raise ConfigError(f"cannot read the framework profile ({exc.strerror or exc})", path=path) from None
    except ValueError as exc:
        raise ConfigError(f"invalid TOML ({exc})", path=path, hint="fix the syntax") from None


def load_profile(path: str) -> Profile:
    """A framework profile from a TOML file (see the module docstring); every problem is a
    :class:`~patchguard.config.ConfigError` naming the file."""
    doc = _profile_document(path)
    known = {"name", "package", "models_package", "registry", "imports_every_model", *_STRING_LISTS}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r}", path=path, hint=f"known: {', '.join(sorted(known))}")
    names = [doc.get(k) for k in ("name", "package", "models_package")]
    if not all(isinstance(v, str) and v for v in names):
        raise ConfigError("name, package and models_package must be strings", path=path)
    lists = {k: doc.get(k, []) for k in _STRING_LISTS}
    if not all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in lists.values()):
        raise ConfigError(f"{', '.join(_STRING_LISTS)} must be lists of dotted names", path=path)
    every = doc.get("imports_every_model", False)
    if not isinstance(every, bool):
        raise ConfigError("imports_every_model must be true or false", path=path)
    name, package, models = (str(v) for v in names)
    return Profile(
        name,
        package,
        models,
        _registry(doc.get("registry"), models, path),
        server_modules=tuple(lists["server_modules"]),
        imports_every_model=every,
        by_name=tuple(lists["by_name"]),
        selected_by_name=tuple(lists["selected_by_name"]),
        hot=tuple(lists["hot"]),
    )


def _registry(raw: object, models_package: str, path: str) -> RegistryReader:
    if isinstance(raw, dict) and len(raw) == 1:
        ((kind, where),) = raw.items()
        if kind == "dict_literals" and isinstance(where, str) and where:
            return dict_literal_registry(where)
        if kind == "entry_class" and isinstance(where, str) and where:
            return entry_class_registry(where, models_package)
    raise ConfigError(
        'registry must be {dict_literals = "path/to/registry.py"} or {entry_class = "path/to/models"}',
        path=path,
    )
