"""Import chains from what is served: which modules run at import time, which only through a function.

From the served modules (the roots), a breadth-first walk over module-level imports finds the *active*
modules — those that run as soon as the server imports its model. A second walk, from every active module
over all imports, finds the *conditional* ones: reached only through at least one import inside a function
(they run when that function is called). Importing ``a.b.c`` runs ``a`` and ``a.b`` too. Each module keeps
the step that reached it first, so its shortest chain from a root can be told.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

from .index import FactIndex

__all__ = ["Closure", "Root", "Step", "walk"]


@dataclass(frozen=True, slots=True)
class Root:
    """A served module: ``why`` it is served, and the ``origin`` a chain from it names."""

    module: str
    path: str
    why: str  # "serves X (vllm model registry)"
    origin: str  # "the vllm model serving X"


@dataclass(frozen=True, slots=True)
class Step:
    """How a module was first reached: from ``parent`` (a path; ``None`` for a root) through an import that
    is ``deferred`` (inside a function) or not."""

    module: str
    parent: str | None
    deferred: bool
    root: Root


@dataclass
class Closure:
    """Active and conditional modules (by path), each with the step that reached it."""

    active: dict[str, Step]
    conditional: dict[str, Step]

    def chain(self, path: str) -> list[tuple[str, bool]]:
        """(module, reached through a deferred import) from the root to ``path``."""
        steps = {**self.conditional, **self.active}
        out: list[tuple[str, bool]] = []
        cur: str | None = path
        while cur is not None and len(out) <= len(steps):
            step = steps[cur]
            out.append((step.module, step.deferred))
            cur = step.parent
        return out[::-1]


def edges(index: FactIndex, module: str, path: str) -> Iterator[tuple[str, str, bool]]:
    """(module, path, deferred) of every module of the environment that importing ``module`` runs."""
    parts = module.split(".")
    for i in range(len(parts) - 1, 0, -1):  # parent packages run first
        parent = ".".join(parts[:i])
        found = index.module_file(parent)
        if found is not None:
            yield parent, found, False
    for target, deferred in index.targets(module, path):
        found = index.module_file(target)
        if found is not None:
            yield target, found, deferred


def walk(index: FactIndex, roots: Iterable[Root], wanted: Collection[str] | None = None) -> Closure:
    """The active and conditional modules reachable from ``roots``; with ``wanted`` (paths), the walks stop
    as soon as every wanted module is placed (the verdict and shortest chain of those are the same)."""
    active: dict[str, Step] = {}
    queue: deque[str] = deque()
    for root in roots:
        if root.path not in active:
            active[root.path] = Step(root.module, None, False, root)
            queue.append(root.path)
    left = set(wanted) - set(active) if wanted is not None else None
    memo: dict[str, list[tuple[str, str, bool]]] = {}  # path → its edges (the second walk re-reads them)
    _bfs(index, queue, (active, {}), left, memo, deferred_too=False)
    conditional: dict[str, Step] = {}
    if left is None or left:
        _bfs(index, deque(active), (active, conditional), left, memo, deferred_too=True)
    return Closure(active, conditional)


def _bfs(
    index: FactIndex,
    queue: deque[str],
    placed: tuple[dict[str, Step], dict[str, Step]],
    left: set[str] | None,
    memo: dict[str, list[tuple[str, str, bool]]],
    deferred_too: bool,
) -> None:
    """Breadth first from ``queue``: new modules go into ``found`` (``active`` itself on the first walk);
    ``left``, the wanted modules not placed yet, ends the walk when it is empty."""
    active, found = placed
    target = active if not deferred_too else found
    while queue and (left is None or left):
        path = queue.popleft()
        here = active.get(path) or found[path]
        out = memo.get(path)
        if out is None:
            out = memo[path] = list(edges(index, here.module, path))
        for module, child, deferred in out:
            if (deferred and not deferred_too) or child in active or child in found:
                continue
            target[child] = Step(module, path, deferred, here.root)
            queue.append(child)
            if left is not None:
                left.discard(child)
