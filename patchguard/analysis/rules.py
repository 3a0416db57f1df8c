"""The rules: what injected debug code looks like, how bad it is, and why.

Each rule has an id (what ``--policy`` ignores and SARIF names), a severity, and a one-line rationale.
Calls are matched on their *qualified* name after import aliases are resolved (``th.save`` with
``import torch as th`` is ``torch.save``); a few rules match method names on any object (``x.cpu()``).
"""

from __future__ import annotations

import re

from ..rulebook import RULES, Rule
from .bounds import too_wild

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


_DUMPS = (
    "torch.save",
    "numpy.save",
    "numpy.savez",
    "numpy.savez_compressed",
    "numpy.savetxt",
    "pickle.dump",
    "cloudpickle.dump",
    "dill.dump",
    "joblib.dump",
    "safetensors.torch.save_file",
    "safetensors.numpy.save_file",
    "torch.distributed.checkpoint.save",
    "torch.jit.save",
    "marshal.dump",
    "json.dump",
    "yaml.dump",
    "yaml.safe_dump",
    "h5py.File",
)
_WRITES = ("os.write", "os.writev", "os.pwrite", "os.pwritev", "shutil.copyfileobj")
_DEBUGGERS = (
    "breakpoint",
    "builtins.breakpoint",
    "pdb.set_trace",
    "pdb.post_mortem",
    "pdb.pm",
    "pdb.run",
    "pdb.runcall",
    "pdb.Pdb",
    "ipdb.set_trace",
    "ipdb.sset_trace",
    "ipdb.post_mortem",
    "pudb.set_trace",
    "pudb.start",
    "debugpy.listen",
    "debugpy.wait_for_client",
    "debugpy.breakpoint",
    "ptvsd.enable_attach",
    "ptvsd.wait_for_attach",
    "ptvsd.break_into_debugger",
    "code.interact",
    "IPython.embed",
    "IPython.terminal.embed.embed",
    "IPython.terminal.embed.InteractiveShellEmbed",
    "celery.contrib.rdb.set_trace",
    "remote_pdb.set_trace",
    "rpdb.set_trace",
    "web_pdb.set_trace",
    "torch.distributed.breakpoint",
    "pydevd.settrace",
    "pydevd_pycharm.settrace",
    "madbg.set_trace",
    "wdb.set_trace",
    "pdbr.set_trace",
    "ipdb.launch_ipdb_on_exception",
    "faulthandler.dump_traceback_later",
)
_EXITS = (
    "sys.exit",
    "os._exit",
    "exit",
    "quit",
    "builtins.exit",
    "os.kill",
    "os.killpg",
    "os.abort",
    "signal.raise_signal",
    "signal.pthread_kill",
    "SystemExit",
    "builtins.SystemExit",
)
_LOADERS = (
    "exec",
    "eval",
    "compile",
    "builtins.exec",
    "builtins.eval",
    "runpy.run_path",
    "runpy.run_module",
    "importlib.util.spec_from_file_location",
    "importlib.machinery.SourceFileLoader",
    "imp.load_source",
    "zipimport.zipimporter",
)
_SUBPROCESSES = (
    "os.system",
    "os.popen",
    "pty.spawn",
    "os.forkpty",
    "asyncio.create_subprocess_exec",
    "asyncio.create_subprocess_shell",
    "commands.getoutput",
)
_ENVIRON = (
    "os.putenv",
    "os.unsetenv",
    "os.environ.update",
    "os.environ.setdefault",
    "os.environ.pop",
    "os.environ.clear",
    "os.environ.popitem",
)
# Calls that flip a switch for the whole process: every request pays (anomaly mode, tracing) or behaves
# otherwise (deterministic kernels, another dtype, errors silenced) until the server restarts.
_SWITCHES = (
    "torch.autograd.set_detect_anomaly",
    "torch.autograd.detect_anomaly",
    "torch.autograd.set_grad_enabled",
    "torch.set_grad_enabled",
    "torch.use_deterministic_algorithms",
    "torch.set_deterministic_debug_mode",
    "torch.set_default_dtype",
    "torch.set_default_device",
    "torch.set_default_tensor_type",
    "torch.set_float32_matmul_precision",
    "torch.set_num_threads",
    "torch.set_flush_denormal",
    "torch.cuda.set_sync_debug_mode",
    "torch.autograd.profiler.profile",
    "torch.autograd.set_multithreading_enabled",
    "sys.settrace",
    "sys.setprofile",
    "sys.setrecursionlimit",
    "sys.setswitchinterval",
    "threading.settrace",
    "threading.setprofile",
    "threading.settrace_all_threads",
    "threading.setprofile_all_threads",
    "gc.disable",
    "gc.set_debug",
    "faulthandler.enable",
    "tracemalloc.start",
    "warnings.simplefilter",
    "warnings.filterwarnings",
    "numpy.seterr",
    "numpy.set_printoptions",
    "logging.basicConfig",
    "logging.disable",
)
# Module attributes whose assignment is such a switch (``torch.backends.cudnn.benchmark = False``).
SWITCH_ATTRIBUTES = (
    "torch.backends.",
    "torch._dynamo.config.",
    "torch._inductor.config.",
    "torch._functorch.config.",
    "torch.autograd.grad_mode.",
    "logging.root.",
    "sys.flags.",
)
_NETWORK_PREFIXES = ("requests.", "httpx.", "aiohttp.", "urllib3.")
_NETWORK = (
    "socket.socket",
    "socket.create_connection",
    "urllib.request.urlopen",
    "http.client.HTTPConnection",
    "http.client.HTTPSConnection",
    "smtplib.SMTP",
)

CALLS: dict[str, str] = {
    **{n: "tensor-dump" for n in _DUMPS},
    **{n: "debugger" for n in _DEBUGGERS},
    **{n: "process-exit" for n in _EXITS},
    **{n: "network" for n in _NETWORK},
    **{n: "subprocess" for n in _SUBPROCESSES},
    **{n: "dynamic-exec" for n in _LOADERS},
    **{n: "file-write" for n in _WRITES},
    **{n: "env-mutation" for n in _ENVIRON},
    **{n: "global-switch" for n in _SWITCHES},
    "print": "print",
    "builtins.print": "print",
    "sys.stdout.write": "print",
    "sys.stderr.write": "print",
    "sys.stdout.writelines": "print",
    "sys.stderr.writelines": "print",
    "pprint.pprint": "print",
    "pprint.pp": "print",
    "time.sleep": "sleep",
    "asyncio.sleep": "sleep",
    "torch.cuda.synchronize": "device-sync",
    "torch.cuda.current_stream.synchronize": "device-sync",
    "setattr": "monkeypatch",
}

# Method names matched on any receiver (the receiver's type is unknown without running the code).
METHODS: dict[str, str] = {
    "tofile": "tensor-dump",
    "write_text": "file-write",
    "write_bytes": "file-write",
    "cpu": "device-sync",
    "item": "device-sync",
    "tolist": "device-sync",
    "numpy": "device-sync",
    "synchronize": "device-sync",
    "set_trace": "debugger",
}

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
)


def on_hot_path(name: str) -> bool:
    """Whether a function named ``name`` is on the hot path (see :data:`HOT_PATH`); a test never is."""
    return not name.startswith("test") and name.lstrip("_").startswith(HOT_PATH)


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


def rule_for_call(qualname: str, method: str | None, receiver: str | None) -> str | None:
    """The rule a call hits, if any. ``method``/``receiver``: for ``x.f()``, ``f`` and the dotted ``x``."""
    rule = CALLS.get(qualname)
    if rule:
        return rule
    if qualname.startswith(("subprocess.", "os.exec", "os.spawn", "os.posix_spawn")):
        return "subprocess"
    if qualname.startswith(("pdb.", "ipdb.", "pudb.")) and method in {"set_trace", "post_mortem", "Pdb"}:
        return "debugger"
    if qualname.startswith(_NETWORK_PREFIXES) and method in {
        "get",
        "post",
        "put",
        "delete",
        "patch",
        "request",
        "head",
        "Client",
        "Session",
        "AsyncClient",
        "ClientSession",
        "urlopen",
    }:
        return "network"
    if method is not None and receiver is not None:
        base = receiver.rsplit(".", 1)[-1].lower()
        if method in _LOG_METHODS and ("log" in base or qualname.startswith("logging.")):
            return "logging"
        if method in METHODS:
            return METHODS[method]
    return None


# -- a cheap test before the libcst walk -------------------------------------------------------------------

_FAMILY_PREFIXES = ("subprocess.", "os.exec", "os.spawn", "os.posix_spawn", *_NETWORK_PREFIXES)
_MODULE_FAMILIES = ("subprocess.", *_NETWORK_PREFIXES)  # any function of these modules
_WORDS = frozenset(
    {q.rsplit(".", 1)[-1] for q in CALLS}
    | set(METHODS)
    | {p.rstrip(".").rsplit(".", 1)[-1] for p in _FAMILY_PREFIXES}
    | {"open", "except", "breakpointhook", "setattr", "environ", "suppress", "SystemExit"}
    | {"setLevel", "start"}
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
    # checks neutralised: made constant (``or True``, ``and False``, ``if 0:``) or cut off by an early exit
    r"|\bor\s+(?:True|1)\b|\band\s+(?:False|0)\b|^\s*(?:if|elif)\s+(?:False|0)\s*:"
    r"|^\s*(?:return|continue|break)\b|^\s*assert\b",
    re.MULTILINE,
)
_ATTR_ASSIGN = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_]*)\.[A-Za-z_][\w.]*\s*(?:[-+*/|&]?=)(?!=)", re.MULTILINE
)


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


def could_hit(changed: str, unit: str, aliases: dict[str, str]) -> bool:
    """Whether a rule could match on the ``changed`` lines of a unit (whose whole text is ``unit``): a word
    some rule matches (a call's last name, a method, a module family), a logger, an alias of a module or
    function a rule names, or an attribute assigned on an imported module. ``False`` means no hit is
    possible there, so the unit need not be parsed — derived from the tables above, it cannot fall behind
    them. (A hit whose call begins on an unchanged line is the pristine file's own, which is not reported.)"""
    words = set(_IDENT.findall(changed))
    if words & _WORDS or any("log" in w.lower() for w in words) or _FORMS.search(changed):
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
