"""The rules: what injected debug code looks like, how bad it is, and why.

Each rule has an id (what ``--policy`` ignores and SARIF names), a severity, and a one-line rationale.
Calls are matched on their *qualified* name after import aliases are resolved (``th.save`` with
``import torch as th`` is ``torch.save``); a few rules match method names on any object (``x.cpu()``).
"""

from __future__ import annotations

import functools
import re

from ..model import RuleId
from ..rulebook import RULES, Rule
from .bounds import too_wild
from .families import ARGUMENT_CALLS, ARGUMENT_METHODS, BOUND_WRITERS, FAMILIES, IN_MEMORY

__all__ = [
    "CALLS",
    "HOT_PATH",
    "METHODS",
    "REDUCTIONS",
    "RULES",
    "SWITCH_ATTRIBUTES",
    "WRAPPERS",
    "Rule",
    "could_hit",
    "on_hot_path",
    "rule_for_call",
]


# Derived from the families (:mod:`.families`), never written by hand: qualified name → rule, method on any
# receiver → rule, module (or name prefix) → rule, and (module, its methods) → rule.
CALLS: dict[str, RuleId] = {c: f.rule for f in FAMILIES for c in f.calls}
METHODS: dict[str, RuleId] = {m: f.rule for f in FAMILIES for m in f.methods}
_MODULES: dict[str, RuleId] = {m: f.rule for f in FAMILIES for m in f.modules}
_PREFIXES: tuple[tuple[str, RuleId], ...] = tuple((p, f.rule) for f in FAMILIES for p in f.prefixes)
_MODULE_METHODS: tuple[tuple[str, frozenset[str], RuleId], ...] = tuple(
    (m, verbs, f.rule) for f in FAMILIES for m, verbs in f.module_methods
)
# Module attributes whose assignment flips a process-wide switch (``torch.backends.cudnn.benchmark = False``).
SWITCH_ATTRIBUTES: tuple[str, ...] = tuple(
    a for f in FAMILIES if f.rule == RuleId.GLOBAL_SWITCH for a in f.attributes
)

# Where output and host-device syncs cost every request: forwards, and the engine's per-step methods
# (scheduling a step, executing the model, sampling, and the busy loops around them). A function whose
# name, leading underscores aside, starts with one of these is on the hot path; a ``test*`` one never is.
HOT_PATH = (
    "forward",
    "__call__",
    "call__",
    "step",
    "schedule",
    "execute_model",
    "sample",
    "run_busy_loop",
    "busy_loop",
    "process_input",
    "process_output",
    "prepare_inputs",
    "update_states",
    "decode",
    # SGLang's scheduler and model runner: one call per step
    "event_loop",
    "run_batch",
    "get_next_batch_to_run",
    "process_batch_result",
    "forward_batch",
    "init_forward_metadata",
    "forward_decode",
    "forward_extend",
)


def on_hot_path(name: str) -> bool:
    """Whether a function named ``name`` is on the hot path (see :data:`HOT_PATH`), or is a forward by its
    name (``eager_attention_forward``, ``mlp_forward``: transformers' attention functions, reached through a
    table of them); a test never is."""
    bare = name.lstrip("_")
    return not name.startswith("test") and (bare.startswith(HOT_PATH) or bare.endswith("_forward"))


# Calls that run the callable they are given: ``functools.partial(torch.save, x)`` dumps as surely as
# ``torch.save(x)`` — (qualified name, position of the callable among the positional arguments).
WRAPPERS: dict[str, int] = {
    "functools.partial": 0,
    "functools.partialmethod": 0,
    "asyncio.to_thread": 0,
    "run_in_executor": 1,  # a method: loop.run_in_executor(None, f, ...)
    "threading.Thread": -1,  # target=f
    "threading.Timer": 1,
}
# Reductions whose ``int()`` / ``float()`` / ``bool()`` reads a device tensor back to the host.
REDUCTIONS = frozenset(
    {"sum", "max", "min", "mean", "all", "any", "argmax", "argmin", "norm", "std", "var", "prod", "numel"}
    | {"count_nonzero", "amax", "amin", "item", "abs", "isnan", "isinf", "eq", "ne", "gt", "lt", "ge", "le"}
)
_LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}


def rule_for_call(qualname: str, method: str | None, receiver: str | None) -> RuleId | None:
    """The rule a call hits, if any. ``method``/``receiver``: for ``x.f()``, ``f`` and the dotted ``x``."""
    rule = CALLS.get(qualname)
    if rule:
        return rule
    module = _module_rule(qualname)
    if module:
        return module
    for prefix, verbs, family in _MODULE_METHODS:
        if (qualname + ".").startswith(prefix + ".") and method in verbs:
            return family
    if method is not None and receiver is not None:
        base = receiver.rsplit(".", 1)[-1].lower()
        if method in _LOG_METHODS and ("log" in base or qualname.startswith("logging.")):
            return RuleId.LOGGING
        if method in METHODS:
            return METHODS[method]
    return None


def _module_rule(qualname: str) -> RuleId | None:
    """The rule of a call to any callable of a family's module (``subprocess.run``) or name prefix."""
    head = qualname
    while "." in head:
        head = head.rsplit(".", 1)[0]
        if head in _MODULES:
            return _MODULES[head]
    return next((rule for prefix, rule in _PREFIXES if qualname.startswith(prefix)), None)


# -- a cheap test before the libcst walk -------------------------------------------------------------------

# Modules whose every callable (or whose listed methods) a family names: an alias of one is a possible hit.
_MODULE_FAMILIES = tuple(f"{m}." for m in (*_MODULES, *(m for m, _v, _r in _MODULE_METHODS)))
_WORDS = frozenset(
    {q.rsplit(".", 1)[-1] for q in CALLS}
    | set(METHODS)
    | {m.rsplit(".", 1)[-1] for m in (*_MODULES, *(m for m, _v, _r in _MODULE_METHODS))}
    | {p.rsplit(".", 1)[-1] for p, _r in _PREFIXES}
    | {n.rsplit(".", 1)[-1] for n in (*ARGUMENT_CALLS, *BOUND_WRITERS, *IN_MEMORY)}
    | ARGUMENT_METHODS
    # what rules on statements look for: handlers, environ items and switches, sys.breakpointhook, setattr,
    # SystemExit
    | {"except", "breakpointhook", "setattr", "environ", "getenv", "SystemExit"}
    | set(WRAPPERS)
    | {w.rsplit(".", 1)[-1] for w in WRAPPERS}
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Forms whose words are too common to prefilter on alone: x.to("cpu"), int(x.max()), getattr(m, "name")(...).
_FORMS = re.compile(
    r"""\.to\(\s*(?:device\s*=\s*)?["']cpu["']"""
    r"|\b(?:int|float|bool)\(.*\.(?:" + "|".join(sorted(REDUCTIONS)) + r")\("
    r"""|\bgetattr\(\s*[\w.]+\s*,\s*["']"""
    r"|\b(?:exec|spawn|posix_spawn)\w*\("
    r"|\.query\(\s*\)"  # a stream or event polled (a spin on the device), not a `query` tensor
    # checks neutralised: made constant (``or True``, ``and False``, ``if 0:``) or cut off by an early exit
    r"|\bor\s+(?:True|1)\b|\band\s+(?:False|0)\b|^\s*(?:if|elif)\s+(?:False|0)\s*:"
    r"""|^\s*assert\s+(?:True|[1-9]|["'])""",
    re.MULTILINE,
)
# A decision or conversion that may read a tensor on the host: a possible hit only on the hot path.
_DECISION = re.compile(
    r"^\s*(?:if|elif|while|assert)\b|\b(?:int|float|bool)\(|\bif\b.+\belse\b", re.MULTILINE
)
_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)", re.MULTILINE)
# An early exit typed in: a possible hit only where the unit holds a check it could cut off.
_EXIT = re.compile(r"^\s*(?:return|continue|break)\b", re.MULTILINE)
_CHECK = re.compile(r"^\s*(?:raise|assert)\b", re.MULTILINE)
# A name set to a constant (``eligible = True``): a check below that tests it is decided.
_CONSTANT_SET = re.compile(r"^\s*[A-Za-z_]\w*\s*=\s*(?:True|False|None|-?\d+)\s*(?:#.*)?$", re.MULTILINE)
# A statement that lets an error go, typed into a unit that has a handler it could be the body of.
_QUIET = re.compile(r"^\s*(?:pass|\.\.\.|continue|break|return(?:\s+None)?)\s*(?:#.*)?$", re.MULTILINE)
_HANDLER = re.compile(r"^\s*except\b", re.MULTILINE)
# `mod.attr = …`, `mod.attr += …`, `mod.TABLE[key] = …` (another module's attribute or table changed),
# `TABLE[key] = …` (an imported table): the head name, which an import must have bound
_ATTR_ASSIGN = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_]*)(?:\.[A-Za-z_][\w.]*(?:\[[^\n=]*\])?|\[[^\n=]*\])\s*(?:[-+*/|&]?=)(?!=)",
    re.MULTILINE,
)


@functools.lru_cache(maxsize=64)  # the same unit's imports, asked for each of its statements
def _unit_imports(unit: str) -> dict[str, str]:
    """Names the import statements inside a unit bind (each parsed on its own line)."""
    import ast

    from .aliases import bind_ast_imports

    out: dict[str, str] = {}
    for line in unit.splitlines():
        text = line.strip()
        if not text.startswith(("import ", "from ")) or too_wild(text) is not None:
            continue
        try:
            bind_ast_imports(out, ast.parse(text).body)
        except (SyntaxError, ValueError):
            continue
    return out


@functools.lru_cache(maxsize=64)  # asked for every statement of a unit: the unit's facts are read once
def _unit_facts(unit: str) -> tuple[bool, bool, bool]:
    """Whether a unit checks (a raise, an assert), handles errors, and may be on the device path: a hot
    function's def, or a parameter annotated as a tensor (a function handed tensors to compute on)."""
    hot = any(on_hot_path(name) for name in _DEF.findall(unit)) or "Tensor" in unit
    return _CHECK.search(unit) is not None, _HANDLER.search(unit) is not None, hot


def _in_context(changed: str, unit: str, device: bool = False) -> bool:
    """Whether the changed lines could make a statement rule fire given the unit around them (``device``:
    the unit is known to be on the hot path, called from a per-step function)."""
    checks, handles, hot = _unit_facts(unit)
    if checks and (_EXIT.search(changed) or _CONSTANT_SET.search(changed)):
        return True  # an early exit or a flag set in a unit that checks: the check may not fire
    if _QUIET.search(changed) and handles:
        return True  # a handler's body emptied, its ``except`` line left as it was
    # a decision or a conversion that may read a tensor back (a neutralised condition is a _FORMS one)
    return bool(_DECISION.search(changed)) and (hot or device)


def could_hit(changed: str, unit: str, aliases: dict[str, str], device: bool = False) -> bool:
    """Whether a rule could match on the ``changed`` lines of a unit (whose whole text is ``unit``): a word
    some rule matches (a call's last name, a method, a module family), a logger, an alias of a module or
    function a rule names, or an attribute assigned on an imported module. ``False`` means no hit is
    possible there, so the unit need not be parsed — derived from the tables above, it cannot fall behind
    them. (A hit whose call begins on an unchanged line is the pristine file's own, which is not reported.)"""
    words = set(_IDENT.findall(changed))
    if words & _WORDS or _FORMS.search(changed):
        return True
    if words & _LOG_METHODS and any("log" in w.lower() for w in words):
        return True  # a logger's call: `logger.info(`, `logging.warning(` (not `logits`, `catalog`)
    if _in_context(changed, unit or changed, device):
        return True
    local = {**aliases, **_unit_imports(unit)} if "import" in unit else aliases
    for word in words & set(local):
        qualname = local[word]
        # A function imported under another name (keep → pickle.dump), or a module whose every function is a
        # rule's (r → requests). A module alias (th → torch) needs no check: a call through it ends in a
        # word of its own (th.save), which the first test sees.
        if qualname in CALLS or (qualname + ".").startswith(_MODULE_FAMILIES):
            return True
    return any(head in local for head in _ATTR_ASSIGN.findall(changed))
