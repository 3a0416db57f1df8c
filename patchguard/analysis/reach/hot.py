"""The hot path of a framework: what its per-step entry points call on every run, across its modules.

Each framework profile names its per-step entry points (:attr:`.profile.Profile.hot`: vLLM's engine step,
scheduler and model runner; SGLang's scheduler loop, ``run_batch`` and attention metadata; transformers'
decoding loops). From them a breadth-first walk follows the calls each function makes on every run
(:mod:`.calls`) to the functions they name, inside the framework's own package: a method through ``self``
(found on the class or, failing that, on its bases), a module function, an imported one (through
re-exports), a method of a class an attribute is made of. Every module the walk enters adds its functions
hot by their name (a ``forward``, a ``run_batch``), and each function keeps the entry point it was first
reached from: ``called from vllm.v1.worker.gpu_worker:Worker.execute_model``.

Only the modules the walk enters are parsed; their call facts are kept between runs with the import facts
(:class:`~.index.FactIndex`). Nothing is imported.
"""

from __future__ import annotations

import fnmatch
import os
from collections import deque
from collections.abc import Callable, Sequence

from .index import FactIndex
from .profile import Profile

__all__ = ["HotPath"]

_MAX_FUNCTIONS = 20_000  # a walk that goes further has lost its way: what it found so far stands
_MAX_HOPS = 6  # re-exports and bases followed to find one symbol


Node = tuple[str, str, str]  # (module, path, function qualname)


class HotPath:
    """The functions on the hot path of the frameworks installed in an environment, walked on first use."""

    def __init__(self, index: FactIndex, profiles: Sequence[Profile], named: Callable[[str], bool]) -> None:
        self.index = index
        self.named = named  # whether a function is hot by its own name (rules.on_hot_path)
        self.profiles = [p for p in profiles if p.hot and index.module_file(p.package) is not None]
        packages = [os.path.join(*p.package.split(".")) for p in self.profiles]
        self._dirs = tuple(os.path.join(s, p) + os.sep for p in packages for s in index.site_dirs)
        self._hot: dict[str, dict[str, str]] | None = None
        self._resolved: dict[str, list[Node]] = {}

    def of(self, path: str) -> tuple[tuple[str, str], ...]:
        """(function qualname, the entry point it is called from) of every hot function of the file at
        ``path``; the entry point is the function itself for one."""
        if not path.startswith(self._dirs):
            return ()
        if self._hot is None:
            self._hot = self._walk()
            self.index.save()
        return tuple(sorted(self._hot.get(path, {}).items()))

    def _walk(self) -> dict[str, dict[str, str]]:
        hot: dict[str, dict[str, str]] = {}
        roots: dict[Node, Node] = {}  # a hot function → the entry point it was first reached from
        queue: deque[Node] = deque()
        entered: set[str] = set()
        prefixes = tuple(p.package + "." for p in self.profiles)

        def add(node: Node, root: Node) -> None:
            module, path, qualname = node
            known = hot.setdefault(path, {})
            if qualname in known:
                return
            known[qualname] = root[2] if root[0] == module else f"{root[0]}:{root[2]}"
            roots[node] = root
            queue.append(node)
            if path not in entered:  # a module entered: its functions hot by name are entry points too
                entered.add(path)
                for q in self.index.calls(module, path).calls:
                    if self.named(q.rsplit(".", 1)[-1]):
                        add((module, path, q), (module, path, q))

        for profile in self.profiles:
            for entry in profile.hot:
                for node in self._entries(entry):
                    add(node, node)
        count = 0
        while queue and count < _MAX_FUNCTIONS:
            node = queue.popleft()
            count += 1
            module, path, qualname = node
            for symbol in self.index.calls(module, path).calls.get(qualname, ()):
                if symbol.startswith(prefixes):
                    for callee in self._resolve(symbol):
                        add(callee, roots[node])
        return hot

    def _entries(self, entry: str) -> list[Node]:
        """The functions an entry point names (``*`` in the module's last name and in the qualname)."""
        parts = entry.split(".")
        out: list[Node] = []
        for i in range(len(parts) - 1, 0, -1):
            module, qualname = ".".join(parts[:i]), ".".join(parts[i:])
            if "*" in module:
                modules = self.index.modules_matching(module)
            else:
                path = self.index.module_file(module)
                modules = [(module, path)] if path is not None else []
            for mod, path in modules:
                calls = self.index.calls(mod, path).calls
                out += [(mod, path, q) for q in calls if fnmatch.fnmatchcase(q, qualname)]
            if modules:
                return out
        return out

    def _resolve(self, symbol: str, hops: int = 0) -> list[Node]:
        """The functions a dotted symbol names: a function or method, a class's ``__init__``; through the
        module's imports (a re-export) and a class's bases."""
        if symbol in self._resolved:
            return self._resolved[symbol]
        self._resolved[symbol] = []  # a cycle of re-exports or bases ends here
        found = self._find(symbol, hops) if hops <= _MAX_HOPS else []
        self._resolved[symbol] = found
        return found

    def _find(self, symbol: str, hops: int) -> list[Node]:
        parts = symbol.split(".")
        for i in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:i])
            path = self.index.module_file(module)
            if path is not None:
                break
        else:
            return []
        rest = parts[i:]
        facts = self.index.calls(module, path)
        qualname = ".".join(rest)
        if qualname in facts.calls:
            return [(module, path, qualname)]
        if qualname in facts.classes:
            return self._resolve(f"{symbol}.__init__", hops + 1)
        if rest[0] in facts.imports:
            return self._resolve(".".join([facts.imports[rest[0]], *rest[1:]]), hops + 1)
        owner = ".".join(rest[:-1])
        if owner in facts.classes:
            return [n for base in facts.classes[owner] for n in self._resolve(f"{base}.{rest[-1]}", hops + 1)]
        return []
