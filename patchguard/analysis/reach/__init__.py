"""Will the changed code run in the server about to be (re)started? Two signals, told apart.

**reach** is static — read from the environment's files, for what is served:

* ``active``: on the live path — a served module, or imported at module level (top-level ``if``/``try``
  included) along a chain of imports from one;
* ``conditional``: live, but behind a gate, or reached only through an import inside a function;
* ``dormant``: a model module of another architecture (from the framework's own registry), or code that
  cannot run;
* ``unknown``: nothing tells (nothing was said to be served: ``--arch``, ``--model-config``, ``--entry``).

What is served comes from ``--entry MODULE`` and from ``--arch NAME``, which every installed framework
profile (:mod:`.vllm`, :mod:`.sglang`, and those of profile files: :func:`known_profiles`) resolves through
its model registry to the module serving it; the modules its server imports whatever the model are served too.
An architecture no installed framework serves is a usage error. Every ``active``/``conditional`` verdict
carries its shortest import chain.

**loaded** is the bytecode evidence (:mod:`.bytecode`): was the file imported since it was edited? It never
makes code dormant: a file not imported since its edit takes effect at the next restart.

Import statements are read without parsing whole files (:mod:`.facts`) and kept between runs
(:mod:`.index`). Nothing is imported or executed.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from ...errors import UsageError
from ...model import Reach
from . import sglang, transformers, vllm
from .bytecode import loaded
from .graph import Closure, Root, walk
from .hot import HotPath
from .index import FactIndex
from .profile import Profile, load_profile

__all__ = [
    "PROFILES",
    "FileReach",
    "Profile",
    "ReachContext",
    "architectures_from_config",
    "known_profiles",
    "loaded",
]


PROFILES: tuple[Profile, ...] = (vllm.PROFILE, sglang.PROFILE, transformers.PROFILE)
"""The frameworks patchguard ships profiles of: their model registry maps ``--arch`` to the module serving
it. Others come from profile files (:func:`known_profiles`)."""


def known_profiles() -> tuple[Profile, ...]:
    """The shipped profiles, then those of the files ``$PATCHGUARD_PROFILES`` (``os.pathsep``-separated)
    and the configuration's ``profiles`` name; a file's profile replaces a shipped one of its name."""
    import os

    from ...config import load_config

    files = [p for p in os.environ.get("PATCHGUARD_PROFILES", "").split(os.pathsep) if p.strip()]
    files += load_config().profiles
    by_name = {p.name: p for p in PROFILES}
    for path in files:
        loaded_profile = load_profile(path)
        by_name[loaded_profile.name] = loaded_profile
    return tuple(by_name.values())


def architectures_from_config(path: str) -> list[str]:
    """``architectures`` of a Hugging Face style ``config.json``."""
    from ..._fs import parse_json, read_input

    try:
        doc = parse_json(read_input(path))
    except OSError as exc:
        raise UsageError(f"cannot read model config ({exc.strerror or exc})", path=path) from None
    except ValueError as exc:
        raise UsageError(f"not a model config ({exc})", path=path, hint="pass a config.json") from None
    archs = doc.get("architectures") if isinstance(doc, dict) else None
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
        raise UsageError("no 'architectures' list in the model config", path=path)
    return list(archs)


@dataclass(frozen=True, slots=True)
class FileReach:
    """The reach of a file's code, with why; ``module_level``: the reach of its module-level code when
    that differs (a model module of another architecture that the server imports all the same)."""

    reach: Reach
    evidence: tuple[str, ...]
    module_level: Reach | None = None


def _chain_text(chain: Sequence[tuple[str, bool]], origin: str) -> str:
    """``via a → b → c, from <origin>`` (shortened in the middle), naming the first import that is taken
    inside a function."""
    names = [m for m, _ in chain]
    shown = names if len(names) <= 5 else [*names[:2], "…", *names[-2:]]
    text = f"via {' → '.join(shown)}, from {origin}"
    for i, (module, deferred) in enumerate(chain):
        if deferred and i:
            return f"{text}; {chain[i - 1][0]} imports {module} inside a function"
    return text


@dataclass
class ReachContext:
    """What is served in one environment, and the reach it gives each file (computed once per scan)."""

    site_dirs: Sequence[str]
    entries: Sequence[str] = ()
    architectures: Sequence[str] = ()
    cache_dir: str | None = None
    use_cache: bool = True
    frameworks: Sequence[str] = ()  # --framework: what serves (default: every installed one)
    _roots: list[Root] | None = None
    _closure: Closure | None = None
    _dormant: dict[str, FileReach] = field(default_factory=dict)
    _selected: dict[str, FileReach] = field(default_factory=dict)
    _index: FactIndex | None = None
    _known: tuple[Profile, ...] | None = None
    _hot: HotPath | None = None

    @property
    def known(self) -> tuple[Profile, ...]:
        """Every framework profile patchguard knows (read once: profile files are inputs)."""
        if self._known is None:
            self._known = known_profiles()
        return self._known

    @property
    def index(self) -> FactIndex:
        if self._index is None:
            self._index = FactIndex(self.site_dirs, self.cache_dir, self.use_cache)
        return self._index

    @property
    def served(self) -> bool:
        return bool(self.entries or self.architectures or self.frameworks)

    def profiles(self) -> tuple[Profile, ...]:
        """The frameworks that may serve: those ``--framework`` names, else every one patchguard knows."""
        if not self.frameworks:
            return self.known
        by_name = {p.name: p for p in self.known}
        unknown = [f for f in self.frameworks if f not in by_name]
        if unknown:
            raise UsageError(
                f"--framework {unknown[0]}: no such framework profile",
                hint=f"known: {', '.join(sorted(by_name))}",
            )
        return tuple(by_name[f] for f in dict.fromkeys(self.frameworks))

    def hot_path(self) -> HotPath:
        """The hot path of the installed frameworks (walked when a file inside one is first asked about)."""
        if self._hot is None:
            from ..rules import on_hot_path

            self._hot = HotPath(self.index, self.known, on_hot_path)
        return self._hot

    def resolve(self) -> list[Root]:
        """The served modules; a usage error for an ``--entry`` that is not there, an architecture no
        installed framework serves, or a ``--framework`` that is not installed."""
        if self._roots is None:
            self._roots = [*self._entry_roots(), *self._arch_roots(), *self._framework_roots()]
        return self._roots

    def _framework_roots(self) -> list[Root]:
        """``--framework``: its server's modules are served whatever the model (once only)."""
        roots: list[Root] = []
        for profile in self.profiles() if self.frameworks else ():
            if self.index.module_file(profile.package) is None:
                raise UsageError(f"--framework {profile.name}: {profile.package} is not installed here")
            if not any(
                a in profile.read_registry(s, self.index) for s in self.site_dirs for a in self.architectures
            ):
                roots += self._server_roots(profile)
        return roots

    def _server_roots(self, profile: Profile) -> list[Root]:
        """The modules the framework's server runs whatever the model: imported, or loaded by name (and
        the ones it loads by name as its configuration selects, conditional)."""
        server = f"the {profile.name} server"
        roots: list[Root] = []
        for module in profile.server_modules:
            path = self.index.module_file(module)
            if path is not None:
                roots.append(Root(module, path, f"{server} imports it whatever the model", server))
        for module in profile.by_name:
            path = self.index.module_file(module)
            if path is not None:
                why = f"{server} loads it by name ({profile.name} profile)"
                roots.append(Root(module, path, why, server))
        for pattern in profile.selected_by_name:
            for _module, path in self.index.modules_matching(pattern):
                why = f"{server} loads it by name when its configuration selects it ({profile.name} profile)"
                self._selected.setdefault(path, FileReach(Reach.CONDITIONAL, (why,)))
        return roots

    def prepare(self, wanted: Collection[str] | None = None) -> None:
        """Resolve what is served and walk its imports (once); with ``wanted``, only as far as it takes to
        place those files (the reach of any other file is then not known)."""
        if self._closure is not None:
            return
        self._closure = walk(self.index, self.resolve(), wanted)
        self.index.save()

    def _entry_roots(self) -> list[Root]:
        roots = []
        for entry in self.entries:
            path = self.index.module_file(entry)
            if path is None:
                raise UsageError(f"--entry {entry}: no such module in the environment")
            roots.append(Root(entry, path, f"--entry {entry}", f"--entry {entry}"))
        return roots

    def _arch_roots(self) -> list[Root]:
        if not self.architectures:
            return []
        roots: list[Root] = []
        known: set[str] = set()
        unserved = set(self.architectures)
        for profile in self.profiles():
            for site in self.site_dirs:
                registry = profile.read_registry(site, self.index)
                if not registry:
                    continue
                known.update(registry)
                served = [a for a in self.architectures if a in registry]
                unserved -= set(served)
                roots += self._profile_roots(profile, registry, served)
        if unserved:
            raise UsageError(_unserved_message(sorted(unserved), known, self.known))
        return roots

    def _profile_roots(
        self, profile: Profile, registry: dict[str, tuple[str, ...]], served: Sequence[str]
    ) -> list[Root]:
        """The served models of one framework (and its server modules), noting the other models dormant."""
        roots: list[Root] = []
        serving: set[str] = set()
        for arch in served:
            for mod in registry[arch]:
                module = f"{profile.models_package}.{mod}"
                path = self.index.module_file(module)
                if path is not None:
                    serving.add(path)
                    why = f"serves {arch} ({profile.name} model registry)"
                    roots.append(Root(module, path, why, f"the {profile.name} model serving {arch}"))
        if not served:
            return roots
        roots += self._server_roots(profile)
        for mods in registry.values():
            for mod in mods:
                path = self.index.module_file(f"{profile.models_package}.{mod}")
                if path is not None and path not in serving:
                    self._dormant[path] = _other_model(profile, served)
        return roots

    def reach(self, path: str) -> FileReach:
        """The reach of the whole ``.py`` file at ``path``."""
        self.prepare()
        assert self._closure is not None
        closure = self._closure
        other = self._dormant.get(path)
        if path in closure.active or path in closure.conditional:
            step = closure.active.get(path) or closure.conditional[path]
            chain = closure.chain(path)
            why = step.root.why if len(chain) == 1 else _chain_text(chain, step.root.origin)
            reach = Reach.ACTIVE if path in closure.active else Reach.CONDITIONAL
            if other is None:
                return FileReach(reach, (why,))
            # Imported, but not the served model: its classes run only if the served model uses them.
            return FileReach(
                Reach.CONDITIONAL, (f"{other.evidence[0]}, imported all the same: {why}",), reach
            )
        if other is not None:
            return other
        if path in self._selected:
            return self._selected[path]
        if not self.served:
            return FileReach(
                Reach.UNKNOWN, ("what is served is not known: pass --arch, --model-config or --entry",)
            )
        return FileReach(
            Reach.UNKNOWN, ("not imported by what is served, as far as its import statements tell",)
        )


def _other_model(profile: Profile, served: Sequence[str]) -> FileReach:
    what = (
        f"a model module of another architecture ({profile.name} model registry; served: {', '.join(served)})"
    )
    if not profile.imports_every_model:
        return FileReach(Reach.DORMANT, (what,))
    what += f"; {profile.name} imports it at start-up, so only its module-level code runs"
    return FileReach(Reach.DORMANT, (what,), Reach.ACTIVE)


def _unserved_message(archs: Sequence[str], known: set[str], profiles: Sequence[Profile]) -> str:
    names = ", ".join(archs)
    if not known:
        frameworks = ", ".join(p.name for p in profiles)
        return f"no installed framework serves {names} (no model registry found: {frameworks})"
    hints: list[str] = []
    for a in archs:
        hints += [h for h in _closest(a, known) if h not in hints]
    return f"no installed framework serves {names}" + (
        f" (did you mean {', '.join(hints)}?)" if hints else ""
    )


def _closest(name: str, known: Collection[str]) -> list[str]:
    """The architectures most like ``name``, best first, compared whole and without case: one it begins
    (``DeepSeekV3`` → ``DeepseekV3ForCausalLM``) before one it merely resembles (an MTP variant)."""
    want = name.lower()
    exact = [k for k in known if k.lower() == want]
    if exact:
        return exact

    def score(k: str) -> tuple[int, float, int]:
        low = k.lower()
        starts = low.startswith(want) or want.startswith(low)
        return (0 if starts else 1, -difflib.SequenceMatcher(None, want, low).ratio(), len(k))

    ranked = sorted(known, key=score)
    return [k for k in ranked[:3] if score(k)[0] == 0 or -score(k)[1] >= 0.6]
