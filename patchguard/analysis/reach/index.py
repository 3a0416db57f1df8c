"""The modules of an environment, located and read once, and remembered between runs.

:class:`FactIndex` maps a module name to its file in the environment's site directories and gives the
:class:`~.facts.Facts` of a file (its imports, its ``EntryClass``) and what a framework's registry file
says. Both are kept in a cache file per environment (under patchguard's cache directory, beside the stat
cache), each entry keyed by the file's stat key — (size, mtime_ns, ctime_ns, inode, device): an entry is
used only while all five are unchanged, and a file whose timestamps are too recent to trust (it could
change again within the clock's granularity) is read but not remembered.

Format: a magic line, the sha256 of the payload, the payload in :mod:`marshal` format (plain tuples, dicts,
str and int). A cache that fails the checksum or has the wrong shape is ignored; one that cannot be
written is skipped. The cache lives outside the environment.
"""

from __future__ import annotations

import functools
import hashlib
import marshal
import os
import time
from collections.abc import Callable, Sequence

from ..._fs import StatKey, cache_root, is_racy, read_regular, stat_key, write_atomically
from .calls import NOTHING, CallFacts, absolute, read_calls
from .facts import Facts, read_facts

__all__ = ["FactIndex", "Registry", "Targets", "package_of", "targets_of"]

_FORMAT = b"patchguard-reach/5"


@functools.lru_cache(maxsize=1)
def _magic() -> bytes:
    """The cache file's first line: its format and a digest of the code that reads the facts it keeps —
    facts another version read (``if`` bodies followed or not) are read again, not trusted."""
    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for name in ("calls.py", "facts.py", "index.py", "bytecode.py"):
        try:
            h.update(read_regular(os.path.join(here, name)))
        except OSError:
            h.update(b"?")
    return _FORMAT + b" " + h.hexdigest()[:16].encode() + b"\n"

Registry = dict[str, tuple[str, ...]]
"""Architecture → model module names."""


Targets = tuple[tuple[str, bool], ...]
"""(module name, deferred) of every module an import statement of a module may run: ``from a import b``
gives ``a`` and ``a.b`` (a submodule, if it is one)."""


def package_of(module: str, path: str) -> str:
    """The package relative imports of ``module`` start from."""
    return module if os.path.basename(path) == "__init__.py" else module.rpartition(".")[0]


def targets_of(facts: Facts, package: str) -> Targets:
    """The modules ``facts``' imports name, resolved from ``package``."""
    out: dict[tuple[str, bool], None] = {}
    for stmt in facts.imports:
        if stmt.level == 0 and not stmt.names:
            out[(stmt.module, stmt.deferred)] = None
            continue
        base = absolute(stmt.level, stmt.module, package)
        if base:
            out[(base, stmt.deferred)] = None
            for name in stmt.names:
                if name != "*":
                    out[(f"{base}.{name}", stmt.deferred)] = None
    return tuple(out)


class FactIndex:
    """Module files, their imports and their ``EntryClass`` for one environment (its site directories)."""

    def __init__(
        self, site_dirs: Sequence[str], cache_dir: str | None = None, use_cache: bool = True
    ) -> None:
        self.site_dirs = tuple(site_dirs)
        self._files: dict[str, str | None] = {}
        self._listings: dict[str, frozenset[str] | None] = {}
        # path → (stat key, module, targets, entry classes), as kept in the cache file
        self._known: dict[str, tuple[StatKey, str, Targets, tuple[str, ...]]] = {}
        self._registries: dict[str, tuple[StatKey, Registry]] = {}
        # path → (stat key, module, packed call facts): read only for the modules the hot path walks
        self._known_calls: dict[str, tuple[StatKey, str, object]] = {}
        self._call_memo: dict[str, CallFacts] = {}
        self._memo: dict[str, tuple[Targets, tuple[str, ...]]] = {}  # this run's, by path
        self._dirty = False
        self._now = time.time_ns()
        self.read = 0  # files read this run (the rest came from the cache)
        self._path: str | None = None
        if use_cache:
            name = hashlib.sha256("\0".join(self.site_dirs).encode("utf-8", "surrogateescape")).hexdigest()
            self._path = os.path.join(cache_dir or cache_root(), "reach", name[:24])
            self._load()

    def _load(self) -> None:
        assert self._path is not None
        try:
            with open(self._path, "rb") as f:
                blob = f.read()
        except OSError:
            return
        head, _, rest = blob.partition(b"\n")
        digest, payload = rest[:64], rest[65:]
        if head + b"\n" != _magic() or hashlib.sha256(payload).hexdigest().encode() != digest:
            return
        try:
            known, registries, calls = marshal.loads(payload)
        except (ValueError, TypeError, EOFError):
            return
        if isinstance(known, dict) and isinstance(registries, dict) and isinstance(calls, dict):
            self._known, self._registries, self._known_calls = known, registries, calls

    def save(self) -> None:
        """Write the cache back when something new was read (failures are ignored: it is only a cache)."""
        if self._path is None or not self._dirty:
            return
        payload = marshal.dumps((self._known, self._registries, self._known_calls))
        blob = _magic() + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
        try:
            write_atomically(self._path, blob)
        except OSError:
            pass

    def _listing(self, directory: str) -> frozenset[str] | None:
        if directory not in self._listings:
            try:
                self._listings[directory] = frozenset(os.listdir(directory))
            except OSError:
                self._listings[directory] = None
        return self._listings[directory]

    def modules_matching(self, pattern: str) -> list[tuple[str, str]]:
        """(module, path) of the modules of one package whose last name matches ``pattern``'s
        (``pkg.sub.*_backend``), from the package directory's listing."""
        import fnmatch

        package, _, last = pattern.rpartition(".")
        out: list[tuple[str, str]] = []
        for site in self.site_dirs:
            names = self._listing(os.path.join(site, *package.split(".")))
            for name in sorted(names or ()):
                if name.endswith(".py") and name != "__init__.py" and fnmatch.fnmatchcase(name[:-3], last):
                    module = f"{package}.{name[:-3]}"
                    path = self.module_file(module)
                    if path is not None:
                        out.append((module, path))
        return out

    def module_file(self, module: str) -> str | None:
        """The source file of ``module`` in the environment (``a/b.py`` or ``a/b/__init__.py``), told from
        directory listings (one per directory, not one stat per candidate)."""
        if module in self._files:
            return self._files[module]
        *package, last = module.split(".")
        found = None
        for site in self.site_dirs:
            top = self._listing(site)
            head = package[0] if package else last
            if top is None or (head not in top and head + ".py" not in top):
                continue  # not even the top-level name is here (torch, typing, …): one set lookup
            directory = os.path.join(site, *package)
            names = self._listing(directory)
            if names is None:
                continue
            if last + ".py" in names:
                found = os.path.join(directory, last + ".py")
            elif last in names and "__init__.py" in (self._listing(os.path.join(directory, last)) or ()):
                found = os.path.join(directory, last, "__init__.py")
            if found is not None:
                break
        self._files[module] = found
        return found

    def _key(self, path: str) -> StatKey | None:
        try:
            return stat_key(os.stat(path))
        except OSError:
            return None

    def _remember(self, key: StatKey) -> bool:
        return not is_racy(key[1], key[2], self._now)

    def targets(self, module: str, path: str) -> Targets:
        """What the import statements of ``module`` (at ``path``) may import."""
        return self._read(module, path)[0]

    def entry_classes(self, module: str, path: str) -> tuple[str, ...]:
        """The class names the module's ``EntryClass`` gives."""
        return self._read(module, path)[1]

    def _read(self, module: str, path: str) -> tuple[Targets, tuple[str, ...]]:
        memo = self._memo.get(path)
        if memo is not None:
            return memo
        key = self._key(path)
        known = self._known.get(path)
        if key is not None and known is not None and tuple(known[0]) == key and known[1] == module:
            self._memo[path] = (known[2], known[3])
            return self._memo[path]
        try:
            facts = read_facts(read_regular(path).decode("utf-8", "surrogateescape"))
        except OSError:
            facts = Facts(())
        self.read += 1
        targets = targets_of(facts, package_of(module, path))
        self._memo[path] = (targets, facts.entry_classes)
        if key is not None and self._remember(key):
            self._known[path] = (key, module, targets, facts.entry_classes)
            self._dirty = True
        return self._memo[path]

    def calls(self, module: str, path: str) -> CallFacts:
        """What the functions of ``module`` (at ``path``) call on every run (:mod:`.calls`)."""
        memo = self._call_memo.get(path)
        if memo is not None:
            return memo
        key = self._key(path)
        known = self._known_calls.get(path)
        facts = None
        if key is not None and known is not None and tuple(known[0]) == key and known[1] == module:
            facts = CallFacts.unpack(known[2])
        if facts is None:
            try:
                text = read_regular(path).decode("utf-8", "surrogateescape")
            except OSError:
                text = None
            facts = read_calls(text, module, package_of(module, path)) if text is not None else NOTHING
            self.read += 1
            if key is not None and self._remember(key):
                self._known_calls[path] = (key, module, facts.pack())
                self._dirty = True
        self._call_memo[path] = facts
        return facts

    def registry(self, path: str, reader: Callable[[str], Registry]) -> Registry:
        """What ``reader`` makes of the registry file at ``path``, remembered like the facts."""
        key = self._key(path)
        if key is None:
            return {}
        known = self._registries.get(path)
        if known is not None and tuple(known[0]) == key and isinstance(known[1], dict):
            cached: Registry = known[1]
            return cached
        value = reader(path)
        if self._remember(key):
            self._registries[path] = (key, value)
            self._dirty = True
        return value
