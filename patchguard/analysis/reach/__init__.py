"""Reach: is the changed code on the live path? ``active`` / ``dormant`` / ``conditional`` / ``unknown``.

Three kinds of evidence, none of which imports or runs anything:

* **pyc evidence** (:mod:`.bytecode`): a ``__pycache__`` entry whose header matches the current source
  (mtime and size, or the source hash of a hash-based pyc) proves the edited file was compiled, i.e.
  imported, after the edit; a stale or absent pyc while its neighbours have one says it was not imported
  since. Only the 16-byte header is read; the pyc is never loaded.
* **entry reach**: modules statically importable from ``--entry MODULE`` (import statements read with
  ``ast``) are active.
* **framework profiles**: ``--arch NAME`` (or a model ``config.json``'s ``architectures``) maps, through the
  installed framework's own model registry (parsed, not hard-coded), to the model module that serves it:
  that module and what it statically imports are active, the other model modules dormant. Each framework
  is one module declaring its :class:`~.profile.Profile` and registry reader (:mod:`.vllm`, :mod:`.sglang`,
  :mod:`.minillm`), gathered in :data:`PROFILES`, so others can follow.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ...errors import UsageError
from ...model import Reach
from . import minillm, sglang, vllm
from .bytecode import neighbours_compiled, pyc_state
from .profile import Profile

__all__ = ["PROFILES", "Profile", "ReachContext", "architectures_from_config", "pyc_state"]


PROFILES: tuple[Profile, ...] = (vllm.PROFILE, sglang.PROFILE, minillm.PROFILE)
"""The frameworks whose model registry maps ``--arch`` to the module serving it, consulted in this order."""


def architectures_from_config(path: str) -> list[str]:
    """``architectures`` of a Hugging Face style ``config.json``."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read model config ({exc})", path=path, hint="pass a config.json") from None
    archs = doc.get("architectures") if isinstance(doc, dict) else None
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise UsageError("no 'architectures' list in the model config", path=path)
    return list(archs)


@dataclass
class ReachContext:
    """What is known about the live path of one environment (computed once per scan)."""

    site_dirs: Sequence[str]
    entries: Sequence[str] = ()
    architectures: Sequence[str] = ()
    _active: dict[str, str] = field(default_factory=dict)  # module file → why it is active
    _dormant: dict[str, str] = field(default_factory=dict)
    _ready: bool = False

    def _module_file(self, module: str) -> str | None:
        rel = module.replace(".", os.sep)
        for site in self.site_dirs:
            for cand in (os.path.join(site, rel + ".py"), os.path.join(site, rel, "__init__.py")):
                if os.path.isfile(cand):
                    return cand
        return None

    def _imports_of(self, module: str, path: str) -> Iterable[str]:
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError, ValueError):
            return []
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        out: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1] if node.level > 1 else parts
                    base = ".".join([*parts, base] if base else parts)
                out.append(base)
                out += [f"{base}.{a.name}" for a in node.names]
        return out

    def _closure(self, roots: Iterable[str], why: str) -> None:
        todo = list(roots)
        while todo:
            module = todo.pop()
            path = self._module_file(module)
            if path is None or path in self._active:
                continue
            self._active[path] = why
            parts = module.split(".")
            todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # parent packages run too
            todo += self._imports_of(module, path)

    def _prepare(self) -> None:
        if self._ready:
            return
        self._ready = True
        for entry in self.entries:
            if self._module_file(entry) is None:
                raise UsageError(f"--entry {entry}: no such module in the environment")
            self._closure([entry], f"statically imported from --entry {entry}")
        if not self.architectures:
            return
        for profile in PROFILES:
            for site in self.site_dirs:
                registry = profile.read_registry(os.path.join(site, profile.registry))
                if not registry:
                    continue
                chosen = [registry[a] for a in self.architectures if a in registry]
                for arch in self.architectures:
                    if arch in registry:
                        module = f"{profile.models_package}.{registry[arch]}"
                        self._closure([module], f"serves {arch} ({profile.name} model registry)")
                for mod in set(registry.values()) - set(chosen):
                    path = self._module_file(f"{profile.models_package}.{mod}")
                    if path is not None and path not in self._active:
                        self._dormant[path] = (
                            f"a model module of another architecture ({profile.name} registry)"
                        )

    def reach(self, path: str) -> tuple[Reach, list[str]]:
        """(reach, evidence) of a whole ``.py`` file."""
        self._prepare()
        evidence: list[str] = []
        reach = Reach.UNKNOWN
        if path in self._active:
            reach = Reach.ACTIVE
            evidence.append(self._active[path])
        elif path in self._dormant:
            reach = Reach.DORMANT
            evidence.append(self._dormant[path])
        state, why = pyc_state(path)
        if state == "fresh":
            reach = Reach.ACTIVE
            evidence.append(why)
        elif state == "stale":
            evidence.append(why)
            reach = Reach.DORMANT if reach is Reach.UNKNOWN else reach
        elif neighbours_compiled(path):
            evidence.append("never compiled, while modules beside it were: not imported")
            reach = Reach.DORMANT if reach is Reach.UNKNOWN else reach
        else:
            evidence.append("no bytecode beside it to tell (bytecode writing off?)")
        return reach, evidence
