"""Reach: is the changed code on the live path? ``active`` / ``dormant`` / ``conditional`` / ``unknown``.

Three kinds of evidence, none of which imports or runs anything:

* **pyc evidence**: a ``__pycache__`` entry whose header matches the current source (mtime and size, or the
  source hash of a hash-based pyc) proves the edited file was compiled, i.e. imported, after the edit; a
  stale or absent pyc while its neighbours have one says it was not imported since. Only the 16-byte header
  is read; the pyc is never loaded.
* **entry reach**: modules statically importable from ``--entry MODULE`` (import statements read with
  ``ast``) are active.
* **framework profiles**: ``--arch NAME`` (or a model ``config.json``'s ``architectures``) maps, through the
  installed framework's own model registry (parsed, not hard-coded), to the model module that serves it:
  that module and what it statically imports are active, the other model modules dormant. Profiles are data
  (:data:`PROFILES`), so SGLang and others can follow.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .._fs import PYCACHE, bytecode_of
from ..errors import UsageError
from ..model import Reach

__all__ = ["PROFILES", "Profile", "ReachContext", "architectures_from_config", "pyc_state"]


@dataclass(frozen=True, slots=True)
class Profile:
    """Where a framework keeps its model registry, and the package its model modules live in."""

    name: str
    registry: str  # path relative to site-packages
    models_package: str


PROFILES: tuple[Profile, ...] = (
    Profile("vllm", "vllm/model_executor/models/registry.py", "vllm.model_executor.models"),
    Profile("sglang", "sglang/srt/models/registry.py", "sglang.srt.models"),
    Profile("minillm", "minillm/models/registry.py", "minillm.models"),
)


def pyc_state(py_path: str) -> tuple[str, str]:
    """("fresh" | "stale" | "absent", evidence) for the bytecode cache of ``py_path``."""
    try:
        pycs = bytecode_of(py_path)
        st = os.stat(py_path)
    except OSError:
        return "absent", "no compiled bytecode"
    if not pycs:
        return "absent", "no compiled bytecode"
    source: bytes | None = None
    for pyc in pycs:
        try:
            with open(pyc, "rb") as f:
                head = f.read(16)
        except OSError:
            continue
        if len(head) < 16:
            continue
        magic, flags = head[:4], struct.unpack("<I", head[4:8])[0]
        if flags & 1:  # hash-based pyc (PEP 552)
            if magic != importlib.util.MAGIC_NUMBER:
                continue  # another Python version's hash function: cannot tell
            if source is None:
                with open(py_path, "rb") as f:
                    source = f.read()
            if head[8:16] == importlib.util.source_hash(source):
                return "fresh", "hash-based pyc matches the edited source: imported since the edit"
            continue
        mtime, size = struct.unpack("<II", head[8:16])
        if mtime == int(st.st_mtime) & 0xFFFFFFFF and size == st.st_size & 0xFFFFFFFF:
            return "fresh", "pyc compiled after the edit: imported since it was changed"
    return "stale", "pyc older than the edit: not imported since it was changed"


def _neighbours_compiled(py_path: str) -> bool:
    cache = os.path.join(os.path.dirname(py_path), PYCACHE)
    try:
        return any(n.endswith(".pyc") for n in os.listdir(cache))
    except OSError:
        return False


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


def _registry(path: str) -> dict[str, str]:
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
                registry = _registry(os.path.join(site, profile.registry))
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
        elif _neighbours_compiled(path):
            evidence.append("never compiled, while modules beside it were: not imported")
            reach = Reach.DORMANT if reach is Reach.UNKNOWN else reach
        else:
            evidence.append("no bytecode beside it to tell (bytecode writing off?)")
        return reach, evidence
