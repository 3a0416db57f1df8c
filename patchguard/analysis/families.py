"""The rule families: what each code rule recognises in a call, as the rulebook's entries say
(:class:`patchguard.rulebook.Targets`: one entry per rule holds its id, severity, rationale and targets).
:mod:`.rules` derives its lookup tables and the prefilter (:func:`.rules.could_hit`) from them, so neither can
fall behind.

Matchers that look at arguments or receivers (``open(..., "w")``, ``x.to("cpu")``, a logger at DEBUG, a
native library loaded from a path: :data:`NATIVE_LOADERS`) are in :mod:`.judge`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..model import RuleId
from ..rulebook import RULES

__all__ = [
    "ARGUMENT_CALLS",
    "ARGUMENT_METHODS",
    "ARRAY_REDUCTIONS",
    "BOUND_WRITERS",
    "BROUGHT_BACK",
    "CHECKING_CALL",
    "CHECKING_FLAG_NAME_WORDS",
    "CHECKING_FLAG_WORDS",
    "CLOCKS",
    "FAMILIES",
    "FILE_EXTENSIONS",
    "FILE_PLACES",
    "HOST_LIBRARIES",
    "HOST_STAGES",
    "IMPORTERS",
    "IN_MEMORY",
    "IN_PLACE",
    "IN_PLACE_METHODS",
    "KERNEL_CALL",
    "LAUNCH",
    "LAUNCHING_WORDS",
    "LENIENT_FLAG_NAME_WORDS",
    "LENIENT_FLAG_WORDS",
    "MEMMAPS",
    "NATIVE_LOADERS",
    "NEVER_SET",
    "ONLY_PARSES",
    "ON_DEVICE",
    "OPENERS",
    "OPEN_METHODS",
    "RECEIVER_WORDS",
    "STEP_PARAMETER",
    "STEP_TYPES",
    "SUPPRESSORS",
    "TENSOR_ONLY_METHODS",
    "TO_HOST",
    "WAIT_METHODS",
    "WHEN_TOLD",
    "WRITE_METHODS",
    "WRITING_WORDS",
    "Family",
    "class_named",
]

BOUND_WRITERS: dict[str, tuple[RuleId, frozenset[str]]] = {
    name: (RuleId.TENSOR_DUMP, frozenset({"dump"}))
    for name in ("pickle.Pickler", "_pickle.Pickler", "cloudpickle.Pickler", "dill.Pickler")
}
"""Writer objects whose *use* writes: ``p = pickle.Pickler(fh); p.dump(x)`` dumps at ``p.dump`` — unless the
writer was given an in-memory buffer (:data:`IN_MEMORY`)."""

IN_MEMORY = frozenset({"io.BytesIO", "io.StringIO", "_io.BytesIO", "_io.StringIO"})

HOST_STAGES: dict[str, frozenset[str]] = {
    # transformers' pipelines: ``Pipeline.forward`` moves the model's outputs to the CPU before
    # ``postprocess`` (its docs and its ``_ensure_tensor_on_device(…, device=cpu)``); ``preprocess`` makes
    # the inputs on the host
    "Pipeline": frozenset({"preprocess", "postprocess"}),
    # transformers' processors: ``ProcessorMixin.__call__`` tokenizes the text and runs the image and audio
    # processors on the host, handing back a ``BatchFeature`` the model's inputs are made of (its docs)
    "ProcessorMixin": frozenset({"__call__"}),
}
"""Stages a framework hands host values, by the name its classes' base ends with: a value read back there
waits for no device."""

NATIVE_LOADERS = frozenset(
    {"ctypes.CDLL", "ctypes.PyDLL", "ctypes.WinDLL", "ctypes.cdll.LoadLibrary", "ctypes.pydll.LoadLibrary"}
    # the loaders of compiled kernels a serving box has: torch's custom ops, TVM FFI's modules (flashinfer's)
    | {"torch.ops.load_library", "torch.classes.load_library", "tvm_ffi.load_module"}
)
"""Loaders of native code: ``dynamic-exec`` when given a path (``/tmp/libhook.so``), not a system library by
its name (``libcuda.so.1``, ``None``) — frameworks load those all the time."""

# The calls whose arguments decide their rule (the matchers of :mod:`.judge` test them): files opened for
# writing, memory maps opened for writing, ``select`` on nothing, ``suppress(Exception)``; and the methods.
OPENERS = frozenset(
    {"open", "builtins.open", "io.open", "codecs.open", "os.open", "zipfile.ZipFile", "tarfile.open"}
)
MEMMAPS = frozenset({"numpy.memmap", "numpy.lib.format.open_memmap"})
# The calls that import a module by its name: code chosen at run time when the environment names it.
IMPORTERS = frozenset({"importlib.import_module", "__import__", "builtins.__import__"})
# What lets the errors of a block go by the exceptions it is given (``with contextlib.suppress(KeyError):``).
SUPPRESSORS = frozenset({"contextlib.suppress"})
# The clocks of the standard library's ``time`` module: a loop that only reads one waits (a busy wait).
CLOCKS = frozenset(
    {"time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time"}
)
ARGUMENT_CALLS = OPENERS | MEMMAPS | NATIVE_LOADERS | IMPORTERS | SUPPRESSORS | {"select.select"}
# Calls whose effect a keyword decides (their docs), by the keyword's value as written:
# ``faulthandler.dump_traceback_later``'s ``exit=True`` calls ``_exit(1)`` after dumping the tracebacks;
# ``yaml.load`` with an unsafe loader constructs any Python object a document names (code run);
# ``tempfile.NamedTemporaryFile(delete=False)`` leaves the file it opened for writing (``w+b``) on disk.
# Calls that build nothing to run when a flag says so — the keyword, its place among the arguments and the
# flag: ``compile(src, name, "exec", ast.PyCF_ONLY_AST)`` hands back a syntax tree, as ``ast.parse`` does (its
# docs), not a code object.
ONLY_PARSES: dict[str, tuple[str, int, str]] = {
    "compile": ("flags", 3, "PyCF_ONLY_AST"),
    "builtins.compile": ("flags", 3, "PyCF_ONLY_AST"),
}
WHEN_TOLD: dict[str, tuple[str, frozenset[str], RuleId]] = {
    "tempfile.NamedTemporaryFile": ("delete", frozenset({"False"}), RuleId.FILE_WRITE),
    "faulthandler.dump_traceback_later": ("exit", frozenset({"True"}), RuleId.PROCESS_EXIT),
    "yaml.load": ("Loader", frozenset({"UnsafeLoader", "Loader", "CLoader"}), RuleId.DYNAMIC_EXEC),
    "yaml.load_all": ("Loader", frozenset({"UnsafeLoader", "Loader", "CLoader"}), RuleId.DYNAMIC_EXEC),
}
ARGUMENT_METHODS = frozenset({"setLevel", "start"})  # a logger set to DEBUG, a patcher started
# A call whose job is to raise when something is wrong (``_check_special_mm_tokens(...)``,
# ``self.validate_config()``, ``sanity_check_outputs(...)``, ``_raise_unsupported(...)``): a check as much
# as a ``raise`` or an ``assert`` is — the last name called, one of its snake-case words saying so; and one
# whose job is to enforce a limit (``restrict_zmq_peers(ctx, sock)``: who may connect; ``authorize(…)``).
CHECKING_CALL = (
    r"(?!_*(?:set|get|enable|disable|is|has)_)"  # a setter, a getter or a question is no check
    r"(?:[A-Za-z0-9]\w*?_)?_*(?:check|validate|verify|assert|ensure|require|raise|detect|enforce|restrict|"
    r"authenticate|authorize|sanitize)(?:_\w*)?"
)
# What a keyword flag's name says it does: one that asks the call to check or to keep to what is safe
# (``raise_exception=True``, ``strict=True``, ``weights_only=True``, ``safe_mode=True``: turned off by False),
# one that lets things through (``skip_validation``: on by True).
CHECKING_FLAG_WORDS = ("raise", "strict", "check", "validat", "verif", "assert", "safe", "secure", "_only")
LENIENT_FLAG_WORDS = ("skip", "ignore", "allow", "unsafe", "no_check", "disable_check", "trust")
# The same, as whole snake-case words of a name a line put in gives a constant (``trust_remote_code = True``,
# ``self.strict = False``) — not stems found inside other words (``gradient_checkpointing``, ``verified``).
CHECKING_FLAG_NAME_WORDS = frozenset(
    {"check", "checks", "checking", "validate", "validation", "verify", "verification", "assert", "asserts"}
    | {"strict", "safe", "only"}
)
LENIENT_FLAG_NAME_WORDS = frozenset({"skip", "ignore", "allow", "unsafe", "trust", "disable", "no"})

# Methods that send bytes somewhere (a file, a socket, a pipe): given a tensor's data, a dump — a tensor,
# or a value brought to the host by one of TO_HOST (``f.write(t.cpu().numpy().tobytes())``).
WRITE_METHODS = frozenset({"write", "writelines", "write_bytes", "send", "sendall", "put_object"})
# Methods only a tensor has (numpy's arrays and nn.Module have none of them): whatever the receiver, the
# result is a tensor — ``gumbel_sample(...).masked_fill(...)``.
# Methods an array has (numpy's or torch's) and Python's booleans and numbers do not: ``(ids < 0).any()``
# reads an array, whatever made it.
ARRAY_REDUCTIONS = frozenset(
    {"any", "all", "sum", "max", "min", "mean", "prod", "nonzero", "argmax", "argmin", "count_nonzero"}
)
TENSOR_ONLY_METHODS = frozenset(
    {"contiguous", "masked_fill", "masked_fill_", "index_select", "view_as", "type_as", "new_zeros"}
    | {"new_ones", "new_empty", "new_full", "new_tensor", "unsqueeze", "squeeze_", "long", "bfloat16"}
    # torch.Tensor's conversions and in-place writes (its docs), which numpy's arrays do not have
    | {"int", "half", "float", "double", "cuda", "copy_", "zero_", "fill_", "scatter_", "index_put_"}
    | {"unsqueeze_"}
    | {"masked_scatter_", "pin_memory", "record_stream", "expand_as"}
    # tests of values numpy has as functions only (``np.isnan(a)``), a tensor as methods too
    | {"isnan", "isinf", "isfinite", "isposinf", "isneginf", "nan_to_num"}
)
# The endings of the types serving frameworks hand each step's work in (their own names): a batch, its
# metadata — attention's, sampling's, a prefill's, a pooler's —, the scheduler's output (``ForwardBatch``,
# ``CommonAttentionMetadata``, ``MLACommonPrefillMetadata``).
STEP_TYPES = ("Batch", "Metadata", "SchedulerOutput")
# A parameter named for one, unannotated (``forward_batch``, ``attn_metadata``, ``scheduler_output``) — not a
# bare ``batch``, which any function over a collection may be handed.
STEP_PARAMETER = re.compile(r"^[a-z]\w*_(?:batch|metadata)$|^scheduler_output$")
TO_HOST = frozenset({"cpu", "numpy", "detach", "tobytes"})
# Libraries that compute in host memory only (their docs: NumPy's arrays, SciPy's functions and
# distributions, pandas' frames, Python's math and statistics): what they give is never on a device.
HOST_LIBRARIES = frozenset({"numpy", "scipy", "pandas", "math", "statistics"})
# Methods that hand a tensor's values back as Python or numpy values: what they give lives on the host.
BROUGHT_BACK = frozenset({"tolist", "numpy", "item"})
# A tensor written into in place (torch.Tensor's docs): device work, whatever the function is annotated as.
IN_PLACE_METHODS = ("copy_", "fill_", "zero_", "scatter_", "index_put_", "masked_scatter_")
IN_PLACE = re.compile(rf"\.(?:{'|'.join(IN_PLACE_METHODS)})\(")
# Words of a function named for running device code (``_run_kernel``, ``launch_combine``): device work.
LAUNCHING_WORDS = frozenset({"kernel", "kernels", "launch", "launcher"})
# A call of a name holding one of them (``triton_kernel_fused_experts(``, ``ops.launch_combine(``), its last
# part captured: a superset by the text — a whole snake-case word of that part is what says so.
KERNEL_CALL = re.compile(rf"(?<![\w.])(?:\w+\.)*(\w*(?:{'|'.join(sorted(LAUNCHING_WORDS))})\w*)\s*\(")
# A tensor made on a device where the code runs: ``torch.zeros(n, device=q.device)`` — not on the CPU.
ON_DEVICE = re.compile(r"\bdevice\s*=\s*(?![\"']cpu|torch\.device\([\"']cpu|None\b)[\w.]")
# ``name[grid](`` — a name (not an attribute) subscripted and called: how a kernel is launched on a grid.
LAUNCH = re.compile(r"(?<![.\w])([a-z_]\w*)\s*\[[^\n\]]*\]\s*\(")
# Words of a call named for writing something out (``debug_dump``, ``save_graph``, ``export_trace``), and the
# places and extensions that make a literal a file's name (``"/tmp/g.dot"``, ``f"{d}/x.json"``).
WRITING_WORDS = frozenset({"dump", "save", "write", "export", "store"})
FILE_PLACES = r"(?:/tmp|/var/tmp|/dev/shm|/home|/root|/data|/mnt|~)/"
FILE_EXTENSIONS = (
    r"(?:dot|json|jsonl|csv|tsv|txt|log|npy|npz|pt|pth|bin|pkl|pickle|h5|safetensors|parquet|svg|png)"
)
# A method that writes its receiver out in a file's format when handed the file's name (``df.to_csv(
# "/tmp/t.csv")``, ``arr.tofile(p)``, ``table.to_parquet(p)``): a write, whatever library made the receiver.
FORMAT_WRITER = r"to_?(?:csv|json|jsonl|parquet|pickle|pkl|hdf|h5|excel|feather|file|npy|txt|disk|html|xml)"
# A path object's or a filesystem's ``open`` (``Path(p).open("a")``): a write by its mode, on any receiver.
OPEN_METHODS = frozenset({"open"})
# Waits that hang when nobody else holds what is waited on: a ``wait()`` on one of these made on the spot
# (``threading.Event().wait()``).
WAIT_METHODS = frozenset({"wait"})
NEVER_SET = frozenset({"Event", "Condition", "Barrier", "Semaphore", "BoundedSemaphore", "Future"})
# Methods a matcher judges by their receiver, and a word the receiver's name or qualified name holds when
# they can hit: a logger set to DEBUG, a ``mock.patch`` started and left running, a hang.
RECEIVER_WORDS: dict[str, tuple[str, ...]] = {
    "setLevel": ("log",),
    "start": ("mock",),
    **{m: tuple(sorted(NEVER_SET)) for m in WAIT_METHODS},
}


@dataclass(frozen=True, slots=True)
class Family:
    """What one rule recognises in a call (its :class:`~patchguard.rulebook.Targets`, with the rule's id)."""

    rule: RuleId
    effect: str
    calls: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    module_methods: tuple[tuple[str, frozenset[str]], ...] = ()
    methods: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()


FAMILIES: tuple[Family, ...] = tuple(
    Family(
        RuleId(r.id),
        r.targets.effect,
        r.targets.calls,
        r.targets.modules,
        r.targets.prefixes,
        r.targets.module_methods,
        r.targets.methods,
        r.targets.attributes,
    )
    for r in RULES.values()
    if r.targets is not None
)
"""The families, derived from the rulebook's entries (:data:`patchguard.rulebook.RULES`)."""


def class_named(name: str) -> bool:
    """Whether a name says it holds a class (``parser_cls``, ``model_class``, ``_ip_cls``): its last
    snake-case word — but not ``cls`` alone, a classmethod's own class."""
    if not name.lower().endswith(("cls", "class", "klass")):
        return False  # (most names: not split)
    words = name.lower().strip("_").split("_")
    return len(words) > 1 and words[-1] in ("cls", "class", "klass")
