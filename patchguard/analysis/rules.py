"""The rules: what injected debug code looks like, how bad it is, and why.

Each rule has an id (what ``--policy`` ignores and SARIF names), a severity, and a one-line rationale.
Calls are matched on their *qualified* name after import aliases are resolved (``th.save`` with
``import torch as th`` is ``torch.save``); a few rules match method names on any object (``x.cpu()``).
"""

from __future__ import annotations

import ast
import bisect
import functools
import re
import textwrap
from collections.abc import Callable, Collection, Sequence

from ..model import RuleId
from ..rulebook import RULES, Rule
from .aliases import reads_environment, resolve
from .bounds import too_wild
from .families import (
    ARGUMENT_CALLS,
    BOUND_WRITERS,
    CHECKING_CALL,
    CLOCKS,
    FAMILIES,
    FILE_EXTENSIONS,
    FILE_PLACES,
    FORMAT_WRITER,
    IN_MEMORY,
    IN_PLACE,
    KERNEL_CALL,
    LAUNCH,
    LAUNCHING_WORDS,
    ON_DEVICE,
    OPEN_METHODS,
    RECEIVER_WORDS,
    STEP_TYPES,
    TENSOR_ONLY_METHODS,
    TO_HOST,
    WHEN_TOLD,
    WRITE_METHODS,
    WRITING_WORDS,
    class_named,
)

__all__ = [
    "AFTER_LOADING",
    "CALLS",
    "GIVEN_NAME",
    "HOT_PATH",
    "LOG_METHODS",
    "LOG_ONCE",
    "METHODS",
    "REDUCTIONS",
    "RULES",
    "SWITCH_ATTRIBUTES",
    "WRAPPERS",
    "Rule",
    "could_hit",
    "is_forward",
    "on_hot_path",
    "role_verb",
    "rule_for_call",
    "runs_once",
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
    name (:func:`is_forward`); a test never is."""
    return not name.startswith("test") and (name.lstrip("_").startswith(HOT_PATH) or is_forward(name))


def is_forward(name: str) -> bool:
    """Whether a function named ``name`` is a forward: ``forward``, ``forward_decode``, ``_forward_impl``, or
    one that says so at its end (``eager_attention_forward``, ``mlp_forward``: transformers' attention
    functions, reached through a table of them)."""
    bare = name.lstrip("_")
    return bare.startswith("forward") or bare.endswith("_forward")


# The lifecycle of a library's objects: what a function named for one of these stages does runs once per
# process (or per model, per graph), not per request — constructing, loading, registering, compiling,
# capturing and warming up, saving, shutting down. A whole snake-case word of the name, or a constructor.
_ONCE_WORDS = frozenset(
    {"init", "initialize", "setup", "load", "register", "configure", "compile", "capture", "warmup"}
    | {"profile", "save", "export", "shutdown", "cleanup", "destroy", "teardown"}
    | {"suspend", "resume", "wake"}  # (a server put to sleep and woken: when an operator asks, not per step)
)
_CONSTRUCTORS = frozenset({"__init__", "__post_init__", "__new__", "__init_subclass__", "__set_name__"})


def runs_once(name: str) -> bool:
    """Whether a function named ``name`` runs once in a process's life by its role, not per request: a
    constructor, a ``from_*`` one, or one named for a stage of the lifecycle (``load_weights``, ``_warmup``,
    ``init_feature_buffer``, ``capture``) — unless its name also puts it on the hot path
    (``init_forward_metadata``)."""
    if name in _CONSTRUCTORS:
        return True
    bare = name.strip("_").lower()
    staged = role_verb(name) in _ONCE_WORDS or AFTER_LOADING.search(bare) is not None
    return not on_hot_path(name) and (bare.startswith("from_") or staged or loads_weights(name))


def loads_weights(name: str) -> bool:
    """Whether a function is named for loading a model's weights, whatever the order of its words
    (``weight_loader``, ``load_weights``, ``_load_w13_weight``, ``checkpoint_loading``): done when the
    model is made, once — unlike a cache's ``start_load_kv``, which loads every step."""
    words = set(name.strip("_").lower().split("_"))
    return not words.isdisjoint(_LOADING) and not words.isdisjoint(_WEIGHTS)


_LOADING = frozenset({"load", "loader", "loading", "loaded"})
_WEIGHTS = frozenset({"weight", "weights", "checkpoint", "ckpt", "shard", "shards", "safetensors"})


# A function named for what follows the load (``process_weights_after_loading``): part of loading, once
# (not ``start_loading``: a cache starts loading every step).
AFTER_LOADING = re.compile(r"(?:^|_)(?:after|post)_load(?:ing)?(?:_|$)")


# Names whose first two words are one noun of the trade, not a verb and its object: ``load_balancing_loss``
# computes a loss (spreading work over experts), it loads nothing.
_NOUN_PHRASES = frozenset({("load", "balancing"), ("load", "balance"), ("load", "balancer")})


def role_verb(name: str) -> str:
    """A function's role as its name's verb, the first snake-case word (``load_weights``, ``init_cache``;
    ``_wait_for_…_load`` waits), or ``""`` where the name opens with a noun phrase of the trade."""
    words = name.strip("_").lower().split("_")
    return "" if tuple(words[:2]) in _NOUN_PHRASES else words[0]


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
# The methods of a logger that write a record (``logger.info(…)``, ``logging.warning(…)``).
_LEVELS = ("debug", "info", "warning", "warn", "error", "exception", "critical", "log")
# A logger's methods, with the ones that log a message once in a process's life (transformers' and vLLM's
# ``logger.warning_once``, ``info_once``: the first call logs, the others are dropped).
LOG_ONCE = "_once"
LOG_METHODS = frozenset(_LEVELS + tuple(level + LOG_ONCE for level in _LEVELS))
# Logging libraries whose loggers a module may bind to any name (``from loguru import logger as _lg``).
_LOGGING_MODULES = ("logging.", "loguru.", "structlog.")


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
    if method is not None:  # the receiver may be an expression (``(root / name).write_text(x)``): no name
        base = (receiver or "").rsplit(".", 1)[-1].lower()
        maker = qualname.rsplit(".", 1)[0].rsplit(".", 1)[-1]  # what made the receiver: init_logger(…).info
        if method in LOG_METHODS and (
            "log" in base or qualname.startswith(_LOGGING_MODULES) or _LOGGER_WORDS & _words_of(maker)
        ):
            return RuleId.LOGGING
        if method in METHODS:
            return METHODS[method]
    return None


_LOGGER_WORDS = frozenset({"logger", "log"})


def _words_of(name: str) -> set[str]:
    """The words of a name, snake or camel case (``init_logger``, ``getLogger``), lower case."""
    return {w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)}


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
# The qualified names the matchers of :mod:`.judge` look at (files opened, writers made, buffers in memory).
_MATCHED = frozenset(ARGUMENT_CALLS | set(BOUND_WRITERS) | IN_MEMORY | set(WHEN_TOLD))
# Words a rule knows only as a part of a qualified name (``shutil.copy``, ``requests``, ``os.environ.pop``):
# they count where a dotted name of the changed lines resolves to a rule's call or a matched name
# (:func:`_names_a_call`), not where they name a variable or another object's method (``requests``,
# ``self.cache.copy()``).
_QUALIFIED_WORDS = frozenset(
    {q.rsplit(".", 1)[-1] for q in (*CALLS, *_MATCHED)}
    | {m.rsplit(".", 1)[-1] for m in (*_MODULES, *(m for m, _v, _r in _MODULE_METHODS))}
)
# Words that count wherever they stand: methods matched on any receiver (a rule's, a matcher's, a writer
# object's, ``run_in_executor``), name prefixes, and what the rules on statements look at
# (handlers, environ items and switches, sys.breakpointhook, setattr, SystemExit). The callables that run
# the callable they are given (``functools.partial``) need none: what they run is judged by its own name.
_WORDS = frozenset(
    set(METHODS)
    | {p.rsplit(".", 1)[-1] for p, _r in _PREFIXES}
    | {m for _rule, methods in BOUND_WRITERS.values() for m in methods}
    | OPEN_METHODS
    | {w for w in WRAPPERS if "." not in w}
    | {"except", "breakpointhook", "setattr", "environ", "getenv", "SystemExit"}
)
# ``getattr(mod, "name")``: read as ``mod.name``, as the judge reads it.
_GETATTR = re.compile(r"""\bgetattr\(\s*([\w.]+)\s*,\s*["'](\w+)["']""")
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:[ \t]*\.[ \t]*[A-Za-z_]\w*)*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Forms whose words are too common to prefilter on alone: x.to("cpu"), int(x.max()).
_FORMS = re.compile(
    r"""\.to\(\s*(?:device\s*=\s*)?["']cpu["']"""
    r"|\b(?:int|float|bool)\(.*\.(?:" + "|".join(sorted(REDUCTIONS)) + r")\("
    r"|\b(?:exec|spawn|posix_spawn)\w*\("
    r"|\.query\(\s*\)"  # a stream or event polled (a spin on the device), not a `query` tensor
    r"|^\s*while\s+(?:True|1)\s*:"  # a loop that may never leave (a hang)
    r"|^\s*while\b.*\b(?:" + "|".join(sorted(CLOCKS)) + r")\("  # a busy wait on a clock
    r"|^\s*while\b.*\)\s*:\s*(?:#.*)?\n\s*(?:pass|\.\.\.)\s*(?:#.*)?$"  # a spin on a poll, doing nothing
    r"|^\s*while\s+not\b.*\.(?:exists|isfile|is_file|isdir|is_dir|lexists)\("  # until a file appears
    r"|\bnon_blocking\s*=\s*False\b"
    # checks neutralised: made constant (``or True``, ``and False``, ``if 0:``) or cut off by an early exit
    # (a constant, not the first number of a comparison on its line: ``and 0 <= x`` is none)
    r"|\bor\s+(?:True|1)\b(?![ \t]*[<>=!.+\-*/%&|^\[(])|\band\s+(?:False|0)\b(?![ \t]*[<>=!.+\-*/%&|^\[(])"
    r"|^\s*(?:if|elif)\s+(?:False|0)\s*:"
    r"|\b(?:if|elif|while|assert)\s+\(?\s*(?:(?:False|0)\s+and|(?:True|1)\s+or)\b"
    r"""|^\s*assert\s+(?:True\b|[1-9][\d_]*(?![\d_]*[ \t]*[<>=!.+\-*/%&|^\[(])|[rRbBuUfF]*["'])""",
    re.MULTILINE,
)
# A decision or conversion that may read a tensor on the host: a possible hit only on the hot path.
_DECISION = re.compile(
    r"^\s*(?:if|elif|while|assert)\b|\b(?:int|float|bool)\(|\bif\b.+\belse\b", re.MULTILINE
)
_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)", re.MULTILINE)
# An early exit typed in: a possible hit only where the unit holds a check it could cut off.
_EXIT = re.compile(r"^\s*(?:return|continue|break)\b", re.MULTILINE)
_CHECK = re.compile(rf"^\s*(?:raise|assert)\b|\b{CHECKING_CALL}\(", re.MULTILINE)
# A name set to a constant (``eligible = True``): a check below that tests it is decided.
_CONSTANT_SET = re.compile(r"^\s*[A-Za-z_]\w*\s*=\s*(?:True|False|None|-?\d+)\s*(?:#.*)?$", re.MULTILINE)
# A statement that lets an error go, typed into a unit that has a handler it could be the body of.
_QUIET = re.compile(r"^\s*(?:pass|\.\.\.|continue|break|return(?:\s+None)?)\s*(?:#.*)?$", re.MULTILINE)
_HANDLER = re.compile(r"^\s*except\b", re.MULTILINE)
# `mod.attr = …`, `mod.attr += …`, `mod.TABLE[key] = …` (another module's attribute or table changed),
# `TABLE[key] = …` (an imported table): the head name, which an import must have bound
# A call named for writing something out, and a literal that names a file (see judge._file_literal).
_NAMED_WRITE = re.compile(rf"(?:\b|_)(?:{'|'.join(sorted(WRITING_WORDS))})(?:_\w*)?\(", re.IGNORECASE)
_FORMAT_WRITTEN = re.compile(rf"\.{FORMAT_WRITER}\(")
_FILE_NAMED = re.compile(rf"""["']{FILE_PLACES}|\.{FILE_EXTENSIONS}["']""")


def _class_assigned(changed: str) -> bool:
    return ("type(" in changed or "__class__" in changed) and _CLASS_ASSIGN.search(changed) is not None


def _writes_a_named_file(changed: str) -> bool:
    """A call named for writing handed a literal that names a file, by the text (substrings first)."""
    if not ("'" in changed or '"' in changed):
        return False
    if not any(w in changed for w in _WRITE_WORDS) and _FORMAT_WRITTEN.search(changed) is None:
        return False
    named = _NAMED_WRITE.search(changed) or _FORMAT_WRITTEN.search(changed)
    return named is not None and _FILE_NAMED.search(changed) is not None


_WRITE_WORDS = (*WRITING_WORDS, *(w.capitalize() for w in WRITING_WORDS))
# An attribute set on an object's class (``type(b).flag = …``, ``b.__class__.flag = …``): a monkeypatch.
_CLASS_ASSIGN = re.compile(r"^\s*(?:type\([^()\n]*\)|[\w.]+\.__class__)\.\w+\s*=(?!=)", re.MULTILINE)
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
    lines = unit.splitlines()
    for n, line in enumerate(lines):
        text = line.strip()
        if not text.startswith(("import ", "from ")):
            continue
        if text.endswith("(") or text.endswith("\\"):  # ``from m import (`` … ``)`` over several lines
            text = " ".join([text.rstrip("\\"), *_continued(lines, n + 1, text.endswith("("))])
        if too_wild(text) is not None:
            continue
        try:
            bind_ast_imports(out, ast.parse(text).body)
        except (SyntaxError, ValueError):
            continue
    return out


def _continued(lines: Sequence[str], start: int, bracket: bool) -> list[str]:
    """The lines of a statement continued from line ``start`` on: to the one closing its ``bracket``, else
    to the first that ends no backslash (a dozen at most)."""
    out: list[str] = []
    for line in lines[start : start + 12]:
        text = line.strip()
        out.append(text.rstrip("\\"))
        if (bracket and ")" in text) or (not bracket and not text.endswith("\\")):
            break
    return out


# A local name bound to a dotted name, or to ``getattr(name, "literal")``: a module or function under
# another name, when the dotted name's head is imported.
_BINDING = re.compile(
    r"^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*"
    r"""(?:([A-Za-z_][\w.]*)|getattr\([ \t]*([\w.]+)[ \t]*,[ \t]*["'](\w+)["'][ \t]*\))[ \t]*(?:#.*)?$""",
    re.MULTILINE,
)


@functools.lru_cache(maxsize=64)  # the same unit's bindings, asked for each of its statements
def _unit_bindings(unit: str) -> tuple[tuple[str, str], ...]:
    """(name, dotted name) of the unit's assignments of a plain dotted name or a ``getattr`` of one."""
    return tuple((n, d or f"{o}.{a}") for n, d, o, a in _BINDING.findall(unit))


# Device work by what the code does (see the judge's on_device_path): a tensor written in place, a launch.
_DEVICE_WORK = re.compile(f"{IN_PLACE.pattern}|{LAUNCH.pattern}")


# A method only a tensor has, called (the judge's :func:`.tensors.tensor_names` reads its receiver as one).
_TENSOR_METHOD_CALLED = re.compile(rf"\.(?:{'|'.join(sorted(TENSOR_ONLY_METHODS))})\(")
# A parameter annotated with a type a step's work is handed in (the judge's :func:`.tensors.handed_a_step`).
_STEP_ANNOTATED = re.compile(
    rf":\s*[\"']?[\w.]*(?:{'|'.join(STEP_TYPES)})\b|[(,]\s*[a-z]\w*_(?:batch|metadata|output)\s*[,)]"
    rf"|class\s+\w*(?:{'|'.join(STEP_TYPES)})\b"
)


@functools.lru_cache(maxsize=64)  # asked for every statement of a unit: the unit's facts are read once
def _unit_facts(unit: str) -> tuple[bool, bool, bool]:
    """Whether a unit checks (a raise, an assert), handles errors, and may be on the device path: a hot
    function's def, or a parameter annotated as a tensor (a function handed tensors to compute on)."""
    names = _DEF.findall(unit)
    hot = (
        any(on_hot_path(name) for name in names)
        or "Tensor" in unit
        or _STEP_ANNOTATED.search(unit) is not None
        or _TENSOR_METHOD_CALLED.search(unit) is not None  # (a name a tensor-only method is called on)
    )
    work = ("_(" in unit or "](" in unit) and _DEVICE_WORK.search(unit) is not None
    made = "device" in unit and ON_DEVICE.search(unit) is not None
    named = any(not LAUNCHING_WORDS.isdisjoint(name.lower().split("_")) for name in names)
    named = named or KERNEL_CALL.search(unit) is not None  # (it calls what runs device code)
    hot = hot or work or made or named  # it writes tensors in place, launches a kernel, makes tensors there
    return _CHECK.search(unit) is not None, _HANDLER.search(unit) is not None, hot


def _in_context(
    changed: str,
    unit: str,
    local: dict[str, str],
    device: bool = False,
    tensors: Callable[[], frozenset[str] | None] | None = None,
) -> bool:
    """Whether the changed lines could make a statement rule fire given the unit around them (``device``:
    the unit is known to be on the hot path, called from a per-step function; ``tensors``: the words that
    may name a tensor in it, when they can be told — see :func:`.tensors.maybe_tensor_words`)."""
    exits = [m for r in (_EXIT, _CONSTANT_SET) for m in r.finditer(changed)]
    quiet = list(_QUIET.finditer(changed))
    decides = _DECISION.search(changed) is not None
    if not (exits or quiet or decides):
        return False  # (most changed lines: the unit's facts are not worked out)
    if _cut_off_or_emptied(unit, exits, quiet):
        return True
    # a decision or a conversion that may read a tensor back (a neutralised condition is a _FORMS one)
    if not (decides and (device or _unit_facts(unit)[2])):
        return False
    words = tensors() if tensors is not None else None
    return words is None or any(_may_decide(unit, m, words, local) for m in _DECISION.finditer(changed))


def _cut_off_or_emptied(unit: str, exits: list[re.Match[str]], quiet: list[re.Match[str]]) -> bool:
    """An early exit or a flag set (``exits``) above a check, or an answer, of the unit: it may not fire; a
    statement that lets an error go (``quiet``) below an ``except`` of the unit: a handler's body emptied,
    its ``except`` line left as it was."""
    checks, handles, _ = _unit_facts(unit)
    if (checks or _RETURN.search(unit)) and any(_check_below(unit, m) for m in exits):
        return True
    return handles and any(_handler_above(unit, m) for m in quiet)


def _may_decide(unit: str, match: re.Match[str], words: frozenset[str], local: dict[str, str]) -> bool:
    """Whether the statement of a changed decision may decide a tensor on the host: it names one of
    ``words``, and — its tests (an ``if``/``elif``/``while``/``assert``'s, a conditional expression's) parsed
    alone — the judge's own :func:`.tensors.decides_tensor` says so of one, with every name whose last part
    is one of ``words`` a tensor (more names than the judge's, never fewer: its answer can only grow). A
    line that stands more than once in the unit is asked of each statement it may begin."""
    line = _line_of(match)
    if _depth(line) == 0:
        texts: list[str | None] = [line]
    else:
        texts = [_statement_from(unit, line, at) for at in _occurrences(unit, line)] or [None]
    return any(_text_may_decide(text, words, local) for text in texts)


def _text_may_decide(text: str | None, words: frozenset[str], local: dict[str, str]) -> bool:
    if text is None:
        return True
    if words.isdisjoint(_IDENT.findall(text)):
        return False
    if _CONVERSION.search(text):
        return True  # int(x), bool(x): the call rules decide
    from .tensors import decides_tensor, decision_tests

    tests = decision_tests(text)
    return tests is None or any(decides_tensor(test, _Named(words), local) for test in tests)


def _occurrences(text: str, part: str) -> list[int]:
    found, at = [], text.find(part)
    while at >= 0:
        found.append(at)
        at = text.find(part, at + 1)
    return found


# A conversion (``int(x)``), or a lambda (its body is no statement of its own): a decision the statement's
# tests, parsed alone, do not show.
_CONVERSION = re.compile(r"\b(?:int|float|bool)\(|\blambda\b")


class _Named(set[str]):
    """A name holds a tensor when its last dotted part is among the words (a local ``x``, a field
    ``batch.seq_lens`` for a word ``seq_lens``, not ``torch.bfloat16`` for the method ``bfloat16``): what
    :func:`.tensors.maybe_tensor_words` tells, as a set of the names :func:`.tensors.tensor_names` finds."""

    def __init__(self, words: frozenset[str]) -> None:
        super().__init__()
        self.words = words

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, str):
            return False
        last = item.rsplit(".", 1)[-1]
        return last in self.words and (last == item or last not in TENSOR_ONLY_METHODS)


def _statement_names(unit: str, match: re.Match[str], words: frozenset[str]) -> bool:
    """Whether the statement of a changed line (where ``match`` is) names one of ``words``: the line alone
    when its brackets close, else the whole statement from the unit (a line that stands twice there, or
    whose brackets never close, may: it cannot be told)."""
    line = _line_of(match)
    text = line if _depth(line) == 0 else _statement_from(unit, line)
    return text is None or not words.isdisjoint(_IDENT.findall(text))


def _writes_tensor(changed: str, unit: str, tensors: Callable[[], frozenset[str] | None] | None) -> bool:
    """Whether a write method of the changed lines (``f.write(...)``, ``sock.sendall(...)``) may be given a
    tensor's data: its statement names a word that may hold a tensor, or brings a value to the host."""
    words = tensors() if tensors is not None else None
    if words is None:
        return True
    data = words | TO_HOST
    return any(
        _statement_names(unit, m, data) for m in _IDENT.finditer(changed) if m.group() in WRITE_METHODS
    )


def _depth(text: str) -> int:
    return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")


def _statement_from(unit: str, line: str, at: int | None = None) -> str | None:
    """The lines of ``unit`` from ``line`` (where it stands at ``at``; else where it alone stands) to where
    its brackets close (``None``: not to be told)."""
    if at is None and unit.count(line) != 1:
        return None
    rest = unit[unit.find(line) if at is None else at :].splitlines()
    depth = 0
    for n, text in enumerate(rest, 1):
        depth += _depth(text)
        if depth <= 0:
            return "\n".join(rest[:n])
    return None


def _check_below(unit: str, match: re.Match[str]) -> bool:
    """Whether a ``raise``/``assert`` of the unit may be cut off by the changed line of ``match`` (an exit,
    a flag set): one in a statement after it in its own block — or, the line last in an ``if``'s body, in a
    statement after that ``if`` (a switched exit). Read from the unit's ``ast``, at every line the changed
    text stands on; without one, anywhere below it (more is possible, never less)."""
    line = _line_of(match)
    cut = _lines_above_a_check(unit)
    if cut is None:
        at = unit.find(line)
        return at < 0 or _CHECK.search(unit, at + len(line)) is not None
    return any(unit.count("\n", 0, at) + 1 in cut for at in _occurrences(unit, line))


@functools.lru_cache(maxsize=8)
def _lines_above_a_check(unit: str) -> frozenset[int] | None:
    """The lines of the unit where a statement begins that a check follows in its block (or, a ``return``
    of a constant, a ``return`` that works an answer out) — and the last line of the body of an ``if`` that
    may be a switch and that one follows (``None``: no ``ast``)."""
    try:
        tree = ast.parse(textwrap.dedent(unit))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    checks, returns = _lines_matching(unit, _CHECK), _lines_matching(unit, _RETURN)
    found: set[int] = set()
    blocks: list[list[ast.stmt]] = [tree.body]
    while blocks:
        block = blocks.pop()
        checked = answered = False  # whether a statement after the one at hand holds a check, a return
        for stmt in reversed(block):
            last = stmt.body[-1] if isinstance(stmt, ast.If) else stmt
            forced = answered and isinstance(last, ast.Return) and _constant_answer(last.value)
            if checked or forced:
                found.add(stmt.lineno)
                if isinstance(stmt, ast.If) and _may_switch(stmt.test):
                    found.add(last.lineno)
            span = (stmt.lineno, stmt.end_lineno or stmt.lineno)
            checked = checked or _within(checks, span)
            answered = answered or _within(returns, span)
            blocks += _blocks_of(stmt)
    return frozenset(found)


def _constant_answer(value: ast.expr | None) -> bool:
    """A constant, or a tuple of them (an answer and its reason: ``True, None``)."""
    if isinstance(value, ast.Tuple):
        return bool(value.elts) and all(isinstance(e, ast.Constant) for e in value.elts)
    return isinstance(value, ast.Constant)


def _blocks_of(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists a compound statement holds (its handlers' and its cases' too)."""
    inner = [getattr(stmt, f, None) for f in ("body", "orelse", "finalbody")]
    inner += [h.body for h in getattr(stmt, "handlers", ())] + [c.body for c in getattr(stmt, "cases", ())]
    return [b for b in inner if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]


def _lines_matching(text: str, pattern: re.Pattern[str]) -> list[int]:
    """The (1-based, sorted) lines of ``text`` where ``pattern`` matches."""
    found, line, at = [], 1, 0
    for m in pattern.finditer(text):
        line += text.count("\n", at, m.start())
        at = m.start()
        found.append(line)
    return found


def _within(lines: list[int], span: tuple[int, int]) -> bool:
    at = bisect.bisect_left(lines, span[0])
    return at < len(lines) and lines[at] <= span[1]


_RETURN = re.compile(r"^\s*return\b", re.MULTILINE)


def _may_switch(test: ast.expr) -> bool:
    """Whether an ``if``'s test may be a switch (:func:`.statements._switched_exit`): it reads the
    environment, or it is always true (:func:`.statements.truth`, read from the ``ast``)."""
    return _always_true(test) is True or reads_environment(ast.unparse(test))


def _always_true(test: ast.expr) -> bool | None:
    """:func:`.statements.truth` of an ``ast`` test: the value it always has (a ``True``, a non-zero integer,
    a non-empty string, ``not``, ``and``/``or`` of those), or ``None`` when it depends on something."""
    if isinstance(test, ast.Constant):
        value = test.value
        return bool(value) if isinstance(value, (bool, int, str, bytes)) else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _always_true(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [_always_true(v) for v in test.values]
        if isinstance(test.op, ast.Or):
            return True if True in values else (False if all(v is False for v in values) else None)
        return False if False in values else (True if all(v is True for v in values) else None)
    return None


def _handler_above(unit: str, match: re.Match[str]) -> bool:
    """Whether an ``except`` of the unit comes before the changed line of ``match`` (where it last stands)."""
    line = _line_of(match)
    at = unit.rfind(line)
    return at < 0 or _HANDLER.search(unit, 0, at) is not None


def _line_of(match: re.Match[str]) -> str:
    """The whole line of the text a match is in."""
    text = match.string
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : end if end >= 0 else len(text)]


def _names_a_call(changed: str, local: dict[str, str]) -> bool:
    """Whether a dotted name of the changed lines that holds one of :data:`_QUALIFIED_WORDS`, or begins with
    an imported name, resolves to a rule's call or a matched name: ``sh.copy`` after ``import shutil as
    sh``, ``keep(x)`` after ``from pickle import dump as keep``, ``r.get(url)`` after ``import requests as
    r`` — not ``self.requests.pop`` nor a loop over ``requests``."""
    dotted = [m.group() for m in _DOTTED.finditer(changed)]
    dotted += [f"{owner}.{name}" for owner, name in _GETATTR.findall(changed)]
    for name in dotted:
        parts = [p.strip() for p in name.split(".")]
        if parts[0] not in local and _QUALIFIED_WORDS.isdisjoint(parts):
            continue
        for k in range(len(parts)):
            receiver = ".".join(parts[:k]) or None
            qualname = resolve(local, ".".join(parts[: k + 1]))
            if qualname in _MATCHED or rule_for_call(qualname, parts[k] if k else None, receiver):
                return True
            if _object_verb(qualname, changed):
                return True
    return False


def _object_verb(qualname: str, changed: str) -> bool:
    """Whether ``qualname`` is of a module whose objects' methods a rule names, and the changed lines call
    one of those methods (``psutil.Process().terminate()``: the object made on the spot)."""
    if qualname.split(".", 1)[0] not in _OBJECT_MODULES:
        return False
    return any(
        (qualname + ".").startswith(module + ".") and any(f".{verb}(" in changed for verb in verbs)
        for module, verbs, _rule in _MODULE_METHODS
    )


_OBJECT_MODULES = frozenset(m.split(".", 1)[0] for m, _v, _r in _MODULE_METHODS)


def _receiver_named(words: set[str], local: dict[str, str]) -> bool:
    """Whether a method judged by its receiver (:data:`.families.RECEIVER_WORDS`) has, among the words of the
    changed lines resolved, one holding what its receiver must (``log`` for ``setLevel``, the class of a
    ``wait`` on the spot)."""
    named = [resolve(local, w).lower() for w in words]
    return any(
        needle.lower() in name
        for method in words.intersection(RECEIVER_WORDS)
        for needle in RECEIVER_WORDS[method]
        for name in named
    )


def _local_names(unit: str, aliases: dict[str, str]) -> dict[str, str]:
    """The names bound to modules and functions where the unit stands: the file's imports, the unit's own,
    and what it binds to them (``th = torch``, ``_save = getattr(torch, "save")``: as the judge does)."""
    local = {**aliases, **_unit_imports(unit)} if "import" in unit else aliases
    bindings = _unit_bindings(unit)
    if bindings:
        local = dict(local)
        for name, dotted in bindings:
            if dotted.split(".", 1)[0] in local:
                local[name] = resolve(local, dotted)
    return local


def _named_hit(words: set[str], changed: str) -> bool:
    """A word some rule matches wherever it stands, a form a rule reads, or a logger's call (``logger.info(``,
    ``logging.warning(``; not ``logits``, ``catalog``). The environment read (``os.environ.get``) is a
    possible hit only where it is set or read in a test (a switch)."""
    named = words & _WORDS
    if named & _ENVIRONMENT and not _sets_or_switches_environment(changed):
        named -= _ENVIRONMENT  # (the environment read, not in a test that switches: no rule's)
    if named or _FORMS.search(changed):
        return True
    return bool(words & LOG_METHODS) and any("log" in w.lower() for w in words)


_ENVIRONMENT = frozenset({"environ", "getenv"})


def _sets_or_switches_environment(changed: str) -> bool:
    """Whether the changed lines set the environment (``os.environ[k] = v``, ``.update(``, ``.pop(``,
    ``del``), or read it anywhere but in a name's plain value on a line of its own (``n =
    int(os.getenv("N", "4"))``): in a test, a part of a statement over several lines, a call's argument."""
    if _ENVIRONMENT_SET.search(changed) is not None:
        return True
    read = (line for line in changed.splitlines() if _ENVIRONMENT_READ.search(line))
    return any(not _plain_value(line) for line in read)


def _plain_value(line: str) -> bool:
    """A line that gives a name a value and is a whole statement: no test, no open bracket."""
    code = line.split("#", 1)[0]
    tested = any(f" {word} " in f" {code} " for word in ("if", "and", "or", "not", "else"))
    return GIVEN_NAME.match(code) is not None and _depth(code) == 0 and not tested


_ENVIRONMENT_SET = re.compile(
    r"environ\s*\[[^\]\n]*\]\s*(?:=(?!=)|[|&+]=)|environ\s*(?:=(?!=)|\|=)"
    r"|environ\s*\.\s*(?:update|setdefault|pop|popitem|clear|__setitem__|__delitem__)\b"
    r"|\bdel\b[^\n]*environ|putenv|unsetenv"
    r"|=\s*(?:[\w.]+\.)?environ\s*(?:#.*)?$",  # (the environment itself given a name: set through it)
    re.MULTILINE,
)
_ENVIRONMENT_READ = re.compile(r"\b(?:environ|getenv)\b")
# A line that gives a (dotted) name a value: ``name = …``, ``self.x: int = …`` (the name, group 1).
GIVEN_NAME = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(?::[^=\n]*)?=(?!=)")


def could_hit(
    changed: str,
    unit: str,
    aliases: dict[str, str],
    device: bool = False,
    tensors: Callable[[], frozenset[str] | None] | None = None,
    classes: Collection[str] = (),
) -> bool:
    """Whether a rule could match on the ``changed`` lines of a unit (whose whole text is ``unit``): a word
    some rule matches wherever it stands (a method, what a matcher looks at), a dotted name that resolves to
    a rule's call, a logger, an alias of a module or function a rule names, an attribute assigned on an
    imported module or on one of the file's ``classes``, or a statement the unit around it makes a possible
    hit (an exit in a unit that checks, a decision on the words that may hold a tensor). ``False`` means no
    hit is possible there, so the unit need not be parsed — derived from the tables above, it cannot fall
    behind them. (A hit whose call begins on an unchanged line is the pristine file's own, which is not
    reported.)"""
    words = set(_IDENT.findall(changed))
    if _named_hit(words, changed):
        return True
    local = _local_names(unit, aliases)
    named = not (words.isdisjoint(_QUALIFIED_WORDS) and words.isdisjoint(local)) or "getattr" in words
    if named and _names_a_call(changed, local):
        return True
    if not words.isdisjoint(RECEIVER_WORDS) and _receiver_named(words, local):
        return True
    if _in_context(changed, unit or changed, local, device, tensors):
        return True
    if not words.isdisjoint(WRITE_METHODS) and _writes_tensor(changed, unit, tensors):
        return True
    if _writes_a_named_file(changed):
        return True  # a call named for writing handed a file's name (the judge decides)
    return _patched_here(changed, local, classes, unit) or _client_used(changed, unit, local)


# ``obj.attr = lambda …``: an attribute given a function made on the spot.
_LAMBDA_SET = re.compile(r"^[ \t]*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)[ \t]*=[ \t]*lambda\b", re.M)


# ``obj.attr = …partial(``: an attribute given a partial.
_PARTIAL_SET = re.compile(r"^[ \t]*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)[ \t]*=[ \t]*[\w.]*partial\(", re.M)


def _client_used(changed: str, unit: str, local: dict[str, str]) -> bool:
    """A method called on a name the unit gives a network client (``with requests.Session() as client``,
    ``sock = socket.socket()``): the judge reads it as talking."""
    receivers = set(_METHOD_CALLED.findall(changed))
    made = _made_in(unit) if receivers else {}
    for name in receivers & made.keys():
        maker = resolve(local, made[name])
        owner, _, method = maker.rpartition(".")
        if rule_for_call(maker, method, owner or None) == RuleId.NETWORK:
            return True
    return False


@functools.lru_cache(maxsize=64)  # asked for every statement of a unit: its bindings are read once
def _made_in(unit: str) -> dict[str, str]:
    """The names a unit gives what a call made (``with requests.Session() as client``, ``sock =
    socket.socket()``): each name to the dotted name called."""
    made = {name: maker for maker, name in _MADE_AS.findall(unit)}
    return made | {name: maker for name, maker in _MADE_BY.findall(unit)}


_METHOD_CALLED = re.compile(r"\b([A-Za-z_]\w*)\.[A-Za-z_]\w*\(")
# (each begins where a name does: a run of letters, a 5 MB string's, is tried once, not from each letter)
_MADE_AS = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*)\s*\([^()\n]*\)\s+as\s+([A-Za-z_]\w*)")
_MADE_BY = re.compile(r"^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*([A-Za-z_][\w.]*)[ \t]*\(", re.MULTILINE)


def _patched_here(changed: str, local: Collection[str], classes: Collection[str], unit: str = "") -> bool:
    """An object's class patched (``type(b).flag = …``), or an attribute assigned on an imported name, on
    a class the file defines (a method replaced) or on a name that holds a class (``parser_cls.end = f``)."""
    if _class_assigned(changed):
        return True
    if any(
        re.search(rf"=\s*{re.escape(t)}\s*$", changed + "\n" + unit, re.M)
        for t in _LAMBDA_SET.findall(changed)
    ):
        return True  # ``_orig = dg.f`` … ``dg.f = lambda: _orig()``: the judge looks for the original kept
    if any(re.search(rf"partial\(\s*{re.escape(t)}\s*[,)]", changed) for t in _PARTIAL_SET.findall(changed)):
        return True  # ``obj.f = functools.partial(obj.f, …)``: its own value put back wrapped
    return any(
        head in local or head in classes or class_named(head) for head in _ATTR_ASSIGN.findall(changed)
    )
