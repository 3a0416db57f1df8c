"""Light, local type facts: which names of a function hold tensors, and which expressions are tensors.

No inference engine — what a reader sees at a glance: parameters annotated ``Tensor``, names bound to what a
``torch`` function returns, to a tensor's method result, slice or arithmetic. Metadata read from a tensor
(``.shape``, ``.dtype``, ``.dim()``, ``.size()``) lives on the host and is no tensor; ``.item()`` and
``.tolist()`` are syncs of their own (:mod:`.rules`). A tensor tested in an ``if``, compared on the host or
turned into a Python number makes the host wait for the device: :func:`decides_tensor` says when.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence

import libcst as cst
from libcst.helpers import get_full_name_for_node

from .aliases import resolve
from .bounds import too_wild
from .cstwalk import Dispatch, find_all, walk
from .families import ARRAY_REDUCTIONS, BROUGHT_BACK, STEP_PARAMETER, STEP_TYPES, TENSOR_ONLY_METHODS

__all__ = [
    "decides_tensor",
    "declares_tensors",
    "handed_a_step",
    "handed_tensors",
    "host_named",
    "host_names",
    "is_tensor",
    "local_names",
    "maybe_tensor_words",
    "metadata_only",
    "narrowed_to_host",
    "of_host_named",
    "params_of",
    "tensor_names",
    "typed_tensors",
]

# Read on the host without waiting for the device: the tensor's metadata.
_METADATA_ATTRS = frozenset(
    {"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "layout", "is_sparse", "names"}
    | {"nbytes", "itemsize"}
)
_METADATA_METHODS = frozenset(
    {"dim", "size", "numel", "element_size", "nelement", "stride", "is_contiguous", "data_ptr", "get_device"}
    | {"item", "tolist", "numpy", "is_floating_point", "is_complex", "storage_offset", "type", "__len__"}
    | {"untyped_storage", "nbytes"}  # (its storage and the storage's size: what it holds, not its values)
)
# Of those, the ones that read no values (``item``, ``tolist``, ``numpy`` read them all).
_SHAPE_METHODS = _METADATA_METHODS - {"item", "tolist", "numpy", "untyped_storage"}


def metadata_only(value: cst.BaseExpression) -> bool:
    """Whether an expression reads only a number of a tensor's metadata — an item of its shape, its size,
    its dtype or device (``x.shape[1]``, ``x.numel()``, ``int(x.size(0))``, ``len(x)``): no kernel, no wait,
    nothing made (``tuple(q.shape)`` makes a tuple each call)."""
    while isinstance(value, cst.Subscript) or (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
        and value.func.value in ("int", "len") and len(value.args) == 1
    ):  # fmt: skip
        if isinstance(value, cst.Call) and value.func.value == "len":  # type: ignore[attr-defined]
            return True
        value = value.value if isinstance(value, cst.Subscript) else value.args[0].value
    if isinstance(value, cst.Attribute):
        return value.attr.value in _METADATA_ATTRS
    return (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _SHAPE_METHODS
    )  # fmt: skip


# torch functions that return no tensor (a bool, a dtype, a context, a number).
_NOT_TENSORS = frozenset(
    # (predicates, ``is_*``/``are_*``/``has_*``, are :func:`_predicate`'s; ``is_nonzero`` reads the value)
    {"equal", "numel", "is_nonzero", "no_grad", "inference_mode", "enable_grad", "get_default_dtype"}
    | {"device", "dtype", "Size", "compile", "jit", "manual_seed", "set_grad_enabled", "finfo", "iinfo"}
)


# torch's dtypes: ``x.to(torch.int64)`` converts a tensor (a module's ``to`` takes a dtype too, but a module
# is never compared nor tested for its value).
_DTYPES = frozenset(
    {"float16", "float32", "float64", "bfloat16", "half", "float", "double", "int8", "int16", "int32"}
    | {"int64", "long", "int", "uint8", "bool", "float8_e4m3fn", "float8_e5m2", "short", "complex64"}
)


def tensor_names(
    fn: cst.FunctionDef,
    aliases: Mapping[str, str],
    fields: Mapping[str, frozenset[str]] | None = None,
    owner: str | None = None,
) -> set[str]:
    """The names ``fn`` binds to tensors: its parameters annotated ``Tensor``, locals assigned a tensor
    expression (two passes: ``a = torch.ones(n)``; ``b = a * 2`` comes after), names it calls a method only
    a tensor has on (``tokens.int()``, ``buf.copy_(x)``) — and, from the
    tensor ``fields`` of the file's classes, the attributes that are tensors: ``batch.seq_lens`` for a
    parameter ``batch: ForwardBatch``, ``self.cache`` in a method of ``owner``."""
    names = typed_tensors(fn, fields, owner) | _module_inputs(fn)
    collect = _Assignments(aliases)
    walk(fn.body, collect)
    names |= collect.used_as_tensor
    for _ in range(2):
        for target, value, annotation in collect.found:
            if (annotation is not None and _names_tensor(annotation)) or (
                value is not None and is_tensor(value, names, aliases)
            ):
                names.add(target)
    return names


def _module_inputs(fn: cst.FunctionDef) -> set[str]:
    """The inputs of a module's ``forward`` (``def forward(self, x, position_ids)``): what a model's layer is
    called with each step are tensors — its parameters after ``self`` with neither a default (a flag, an
    option) nor a declared type (which says what they are)."""
    given = [*fn.params.posonly_params, *fn.params.params]
    if fn.name.value != "forward" or not given or given[0].name.value != "self":
        return set()
    return {p.name.value for p in given[1:] if p.default is None and p.annotation is None}


def typed_tensors(
    fn: cst.FunctionDef, fields: Mapping[str, frozenset[str]] | None = None, owner: str | None = None
) -> set[str]:
    """What ``fn`` holds as tensors by their declared types: its parameters annotated ``Tensor``, and the
    tensor ``fields`` of the file's classes reached through a typed parameter or ``self`` (``batch.seq_lens``,
    ``self.counter``)."""
    params = params_of(fn)
    names = {
        p.name.value for p in params if p.annotation is not None and _names_tensor(p.annotation.annotation)
    }
    names |= documented_tensors(fn, [p.name.value for p in params if p.annotation is None])
    return names | _typed_fields(params, fields or {}, owner)


def _typed_fields(
    params: Sequence[cst.Param], fields: Mapping[str, frozenset[str]], owner: str | None
) -> set[str]:
    """The tensor ``fields`` reached through parameters typed as the file's classes, and through ``self``
    in a method of ``owner``."""
    names: set[str] = set()
    for p in params:
        cls = _class_named(p.annotation.annotation) if p.annotation is not None else None
        names |= {f"{p.name.value}.{f}" for f in fields.get(cls or "", ())}
    if owner is not None and params and params[0].name.value == "self":
        names |= {f"self.{f}" for f in fields.get(owner, ())}
    return names


def host_names(fn: cst.FunctionDef, aliases: Mapping[str, str]) -> set[str]:
    """The names ``fn`` binds only to values on the host — every assignment of it a ``numpy`` call, a value
    brought back (``.tolist()``, ``.numpy()``, ``.item()``), a Python number or text — and its
    parameters annotated as numpy arrays or Python's own types: reading them back waits for no device."""
    params = params_of(fn)
    names = {
        p.name.value for p in params if p.annotation is not None and _names_host(p.annotation.annotation)
    }
    collect = _Assignments()
    walk(fn.body, collect)
    host, cpu = _bound_on_the_host(collect.found, aliases)
    tensors_too = {  # (parameters declared a tensor, or one of several types: ``Tensor | list[int]``)
        p.name.value
        for p in params
        if p.annotation is not None and "Tensor" in _text_of(p.annotation.annotation)
    }
    said = {p.name.value for p in params if _said_on_the_host(p)}  # ``n: torch.Tensor,  # CPU tensor [1]``
    names |= _returned_as_host(fn, collect, {p.name.value for p in params})
    return (names | host | said) - (tensors_too - said) - (collect.used_as_tensor - cpu - said)


def _returned_as_host(fn: cst.FunctionDef, collect: _Assignments, params: set[str]) -> set[str]:
    """What a function that says it returns a host value (``-> np.ndarray | None``) hands back: the names it
    binds once (one given a tensor, then ``scale = float(scale)``, holds both), none of its parameters."""
    if fn.returns is None or not _names_host(fn.returns.annotation):
        return set()
    once = Counter(target for target, _value, _annotation in collect.found)
    return {n for n in collect.returned if once[n] == 1 and n not in params}


def _said_on_the_host(param: cst.Param) -> bool:
    """Whether the comment on a parameter's line says it lives on the host (``# CPU tensor [1]``, ``# on the
    host``) and names no device beside it."""
    after = param.comma.whitespace_after if isinstance(param.comma, cst.Comma) else None
    line = after.first_line if isinstance(after, cst.ParenthesizedWhitespace) else None
    comment = line.comment.value.lower() if line is not None and line.comment is not None else ""
    return bool(_HOST_SAID.search(comment)) and not _DEVICE_SAID.search(comment)


_HOST_SAID = re.compile(r"\b(?:cpu|host)\b")
_DEVICE_SAID = re.compile(r"\b(?:gpu|cuda|device|xpu|npu)\b")


def _bound_on_the_host(
    found: Sequence[tuple[str, cst.BaseExpression | None, cst.BaseExpression | None]],
    aliases: Mapping[str, str],
) -> tuple[set[str], set[str]]:
    """Of the names bound by ``found`` (name, value, annotation), those every binding gives a host value,
    and of those the ones that hold tensors made on the CPU."""
    bound: dict[str, bool] = {}
    made_here: dict[str, bool] = {}
    for target, value, annotation in found:
        host = (annotation is not None and _names_host(annotation)) or (
            value is not None and _host_value(value, aliases)
        )
        bound[target] = bound.get(target, True) and host
        made = isinstance(value, cst.Call) and _made_on_the_cpu(value, _qualname(value, aliases))
        made_here[target] = made_here.get(target, True) and made
    return {n for n, h in bound.items() if h}, {n for n, made in made_here.items() if made}


# Python's own numbers: what these make lives on the host (not its containers: those may hold tensors).
_HOST_MAKERS = frozenset(
    {"int", "float", "bool", "len", "list", "dict", "tuple", "set", "sum", "sorted", "range"}
)
# Brought back from the device (``.tolist()``), or made by a method only numpy's arrays have (``.astype()``).
_BROUGHT_BACK = BROUGHT_BACK | {"astype"}


def _host_value(value: cst.BaseExpression, aliases: Mapping[str, str]) -> bool:
    """Whether an expression's value is on the host: a literal, a numpy call, a Python maker, a value
    brought back from the device."""
    if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString)):
        return True  # (not a list or a dict: those may hold tensors)
    if isinstance(value, (cst.Comparison, cst.BinaryOperation, cst.Subscript, cst.UnaryOperation)):
        return of_host_named(value)  # ``counts_cpu[:n] >= 0``: worked out of what is named for the host
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value in _BROUGHT_BACK:
        return True
    qualname = _qualname(value, aliases)
    return qualname.startswith("numpy.") or qualname in _HOST_MAKERS or _made_on_the_cpu(value, qualname)


def _qualname(call: cst.Call, aliases: Mapping[str, str]) -> str:
    dotted = get_full_name_for_node(call.func)
    return resolve(dict(aliases), dotted) if dotted else ""


def _made_on_the_cpu(call: cst.Call, qualname: str) -> bool:
    """Whether a call makes a tensor on the CPU: a factory of torch told no device — torch's default is the
    CPU — or told the CPU (``torch.zeros(n, dtype=torch.int32)``, ``torch.arange(n, device="cpu")``), or
    ``torch.from_numpy``, which shares a numpy array's memory."""
    if qualname == "torch.from_numpy":
        return True
    if qualname.rpartition(".")[0] != "torch" or qualname.rpartition(".")[2] not in _FACTORIES:
        return False
    device = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
    return device is None or _names_the_cpu(device)


def _names_the_cpu(device: cst.BaseExpression) -> bool:
    """``"cpu"``, ``torch.device("cpu")``."""
    if isinstance(device, cst.Call) and device.args:
        device = device.args[0].value
    return isinstance(device, cst.SimpleString) and device.evaluated_value == "cpu"


# torch's factories that make a tensor from sizes or Python values (not ``*_like``: those take another's
# device, nor ``as_tensor``: it keeps a tensor's)
_FACTORIES = frozenset(
    {"zeros", "ones", "empty", "full", "arange", "tensor", "randn", "rand", "randint", "linspace", "eye"}
)


def of_host_named(value: cst.BaseExpression) -> bool:
    """Whether every name an expression reads is named for the host (``seq_lens_cpu``, ``positions_np``),
    its numbers and the names it indexes with aside."""
    roots = [n for n in _roots(value) if n]
    return bool(roots) and all(map(host_named, roots))


def _roots(value: cst.BaseExpression) -> Iterator[str]:
    """The names at the root of what an expression reads (``a`` of ``a.b[c:d] >= 0``; not what indexes)."""
    if isinstance(value, cst.Name):
        yield value.value
    elif isinstance(value, cst.Attribute):
        yield value.attr.value  # (the field's own name: ``meta.seq_lens_cpu``)
    elif isinstance(value, cst.Subscript):
        yield from _roots(value.value)
    elif isinstance(value, cst.Comparison):
        yield from _roots(value.left)
        for c in value.comparisons:
            if not isinstance(c.comparator, (cst.Integer, cst.Float)):
                yield from _roots(c.comparator)
    elif isinstance(value, cst.BinaryOperation):
        for side in (value.left, value.right):
            if not isinstance(side, (cst.Integer, cst.Float)):
                yield from _roots(side)
    elif isinstance(value, cst.UnaryOperation):
        yield from _roots(value.expression)
    else:
        yield ""  # (a call, a literal of another kind: not told)


# Words of a name that says it holds host values (serving frameworks' names for their host copies).
HOST_WORDS = frozenset({"cpu", "host", "np", "numpy"})


def host_named(name: str) -> bool:
    """Whether a name says it holds host values (``seq_lens_cpu``, ``positions_np``): one of its snake-case
    words is one of :data:`HOST_WORDS`."""
    return not HOST_WORDS.isdisjoint(name.lower().split("_"))


def _names_host(annotation: cst.BaseExpression) -> bool:
    """An annotation naming a numpy array or Python's own numbers and containers (not a tensor)."""
    text = _text_of(annotation)
    if "Tensor" in text:
        return False
    return "ndarray" in text or text.split("[", 1)[0].strip() in {"int", "float", "list", "List", "Sequence"}


def maybe_tensor_words(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, torch: Collection[str], fields: Collection[str]
) -> frozenset[str]:
    """Every word through which an expression of ``fn`` may be a tensor as :func:`tensor_names` and
    :func:`is_tensor` see it, read from the ``ast`` (no libcst parse): more than they find, never less —
    the names bound to ``torch`` (``torch``), the tensor ``fields`` of the file's classes, the methods only a
    tensor has, and the parameters and locals (nested functions' too) whose annotation says ``Tensor`` or
    whose value mentions any of these, to a fixed point. A test whose words miss them all decides nothing a
    tensor holds."""
    known = set(torch) | set(fields) | TENSOR_ONLY_METHODS
    args = fn.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if arg.annotation is not None and _says_tensor(arg.annotation):
            known.add(arg.arg)
    known |= _ast_module_inputs(fn)
    bound = _bindings_and_arrays(fn, known)
    grew = True
    while grew:
        grew = False
        for name, value, annotation in bound:
            if name not in known and (
                (annotation is not None and _says_tensor(annotation))
                or (value is not None and _mentions(value, known))
            ):
                known.add(name)
                grew = True
    return frozenset(known)


def _ast_module_inputs(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """:func:`_module_inputs` of the ``ast`` (a method's ``forward``: its first parameter ``self``)."""
    given = [*fn.args.posonlyargs, *fn.args.args]
    if fn.name != "forward" or not given or given[0].arg != "self":
        return set()
    plain = given[1 : len(given) - len(fn.args.defaults)]
    return {a.arg for a in plain if a.annotation is None}


def _bindings_and_arrays(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, known: set[str]
) -> list[tuple[str, ast.expr | None, ast.expr | None]]:
    """The ``name = value`` (and annotated) bindings of ``fn``; on the way, the names a tensor-only method
    is called on and the array methods called on a comparison or arithmetic are added to ``known``."""
    bound: list[tuple[str, ast.expr | None, ast.expr | None]] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and node.attr in (*TENSOR_ONLY_METHODS, "to"):
            root = _root_of_reshaping(node.value)
            if root is not None:
                known.add(root)  # ``tokens.int()``, ``x.reshape(-1).contiguous()``: a tensor, made anyhow
        elif isinstance(node, (ast.If, ast.Assert)) and (declared := _ast_declared(node)):
            known.add(declared)  # ``if not isinstance(x, torch.Tensor): raise``, ``assert isinstance(…)``
        elif isinstance(node, ast.Attribute) and node.attr in ARRAY_REDUCTIONS:
            if isinstance(node.value, (ast.Compare, ast.BinOp)):
                known.add(node.attr)  # ``(ids < 0).any()``: an array's, whatever made it
        else:
            bound += _ast_bindings(node)
    return bound


def _ast_bindings(node: ast.AST) -> list[tuple[str, ast.expr | None, ast.expr | None]]:
    """(name, value, annotation) of what one statement binds: ``name = value``, ``name: T = value``, and
    ``for row in t`` (each name the loop binds, what it walks)."""
    if isinstance(node, ast.Assign):
        return [(t.id, node.value, None) for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [(node.target.id, node.value, node.annotation)]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [(t.id, node.iter, None) for t in ast.walk(node.target) if isinstance(t, ast.Name)]
    return []


def _root_of_reshaping(value: ast.expr) -> str | None:
    """:func:`_reshaped_from` of the ``ast``."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        if value.func.attr not in _RESHAPING_TOO:
            return None
        value = value.func.value
    return value.id if isinstance(value, ast.Name) else None


def _ast_declared(node: ast.If | ast.Assert) -> str:
    """The name a guard declares a tensor — ``if not isinstance(x, torch.Tensor): raise …``, ``assert
    isinstance(x, torch.Tensor)`` — as the walk of :class:`_Assignments` reads it; "" else."""
    test = node.test
    if isinstance(node, ast.If):
        if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)):
            return ""
        if not any(isinstance(s, ast.Raise) for s in node.body):
            return ""
        test = test.operand
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"):
        return ""
    args = test.args
    kind = args[1] if len(args) == 2 else None
    last = kind.attr if isinstance(kind, ast.Attribute) else kind.id if isinstance(kind, ast.Name) else ""
    return args[0].id if last == "Tensor" and isinstance(args[0], ast.Name) else ""


def _says_tensor(annotation: ast.expr) -> bool:
    """An annotation with ``Tensor`` anywhere in it (a list of them too: more is no harm here)."""
    return any(
        "Tensor" in (getattr(n, "id", None) or getattr(n, "attr", None) or "")
        or (isinstance(n, ast.Constant) and isinstance(n.value, str) and "Tensor" in n.value)
        for n in ast.walk(annotation)
    )


def _mentions(value: ast.expr, words: set[str]) -> bool:
    """Whether ``value`` reads one of ``words``: a name (not a builtin's: ``int(n)`` is no ``x.int()``), or an
    attribute."""
    return any(
        (isinstance(n, ast.Name) and n.id in words and n.id not in _BUILTINS)
        or (isinstance(n, ast.Attribute) and n.attr in words)
        for n in ast.walk(value)
    )


_BUILTINS = frozenset(dir(builtins))


def local_names(fn: cst.FunctionDef) -> set[str]:
    """The names ``fn`` binds itself — its parameters and the names it assigns — which hide a module's."""
    star = [p for p in (fn.params.star_arg, fn.params.star_kwarg) if isinstance(p, cst.Param)]
    collect = _Assignments()
    walk(fn.body, collect)
    return {p.name.value for p in (*params_of(fn), *star)} | {target for target, _, _ in collect.found}


def documented_tensors(fn: cst.FunctionDef, names: Sequence[str]) -> set[str]:
    """Which of ``names`` (parameters without annotations) the function's docstring declares tensors, as
    the libraries document their kernels' wrappers: ``q : torch.Tensor`` (numpy style),
    ``q (`torch.Tensor`):`` (Google style), or the name quoted and given a dtype (flashinfer's "context_lens
    int32 [B, next_n]")."""
    doc = fn.get_docstring(clean=False) if names else None
    if not doc:
        return set()
    return {name for name in names if re.search(_DECLARED.format(name=re.escape(name)), doc, re.MULTILINE)}


_TENSOR_TYPE = r"`?(?:torch\.)?(?:Float|Long|Int|Bool|Half|BFloat16)?Tensor\b"
_DECLARED = (
    r"^\s*{name}\s*(?::\s*(?:Optional\[)?" + _TENSOR_TYPE + r"|\(\s*(?:Optional\[)?" + _TENSOR_TYPE + ")"
    r"|``{name}``\s*[:(]?\s*(?:torch\.)?(?:u?int|float|bfloat|fp)\d+\b"
)


def params_of(fn: cst.FunctionDef) -> tuple[cst.Param, ...]:
    """A function's named parameters: positional-only, ordinary and keyword-only (not ``*a``/``**k``)."""
    return (*fn.params.params, *fn.params.kwonly_params, *fn.params.posonly_params)


class _Assignments(Dispatch):
    """``name = value`` and ``name: T = value`` of a function body (not of nested functions)."""

    SKIPS_TRIVIA = True  # whitespace, comments and punctuation are not walked into (:mod:`.cstwalk`)

    def __init__(self, aliases: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.found: list[tuple[str, cst.BaseExpression | None, cst.BaseExpression | None]] = []
        self.used_as_tensor: set[str] = set()  # names a tensor-only method is called on
        self.returned: set[str] = set()  # names it hands back (``return mask if mask.any() else None``)
        self.aliases = dict(aliases or {})

    def visit_Return(self, node: cst.Return) -> None:
        value = node.value
        sides = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
        self.returned.update(v.value for v in sides if isinstance(v, cst.Name))

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.found.append((t.target.value, node.value, None))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name):
            self.found.append((node.target.value, node.value, node.annotation.annotation))

    def visit_For(self, node: cst.For) -> None:
        """``for row in t``, ``for i, row in enumerate(t)``, ``for a, b in zip(t, u)``: iterating a tensor
        gives tensors (its rows), so each name is bound to what it walks — one when that is."""
        for target, walked in _walked(node.target, node.iter):
            self.found.append((target, walked, None))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func  # ``tokens.int()``: only a tensor has that method — ``tokens`` holds one
        if not isinstance(func, cst.Attribute):
            return
        if self.aliases and node.args and node.args[0].keyword is None and self._reduces(func):
            root = _reshaped_from(_unsliced(node.args[0].value))  # ``torch.any(mask[:n])``: ``mask`` is one
            if root is not None:
                self.used_as_tensor.add(root)
        if func.attr.value in TENSOR_ONLY_METHODS or (func.attr.value == "to" and _to_a_tensors_place(node)):
            root = _reshaped_from(func.value)  # ``x.reshape(-1, d).contiguous()``: ``x`` holds one
            if root is not None:
                self.used_as_tensor.add(root)

    def _reduces(self, func: cst.Attribute) -> bool:
        """Whether a call is one of torch's reductions (``torch.any(t)``: its input is a tensor, its docs)."""
        if func.attr.value not in ARRAY_REDUCTIONS:
            return False
        dotted = get_full_name_for_node(func)
        return bool(dotted) and resolve(self.aliases, dotted or "") == f"torch.{func.attr.value}"

    def visit_If(self, node: cst.If) -> None:
        """``if not isinstance(x, torch.Tensor): raise TypeError(…)``: below it, ``x`` is one."""
        test = node.test
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            named = _type_test(test.expression) if isinstance(test.expression, cst.Call) else None
            body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
            raises = any(
                isinstance(s, cst.SimpleStatementLine) and any(isinstance(b, cst.Raise) for b in s.body)
                for s in body
            )
            if named and raises:
                self.used_as_tensor.add(named)

    def visit_Assert(self, node: cst.Assert) -> None:
        named = _type_test(node.test) if isinstance(node.test, cst.Call) else None
        if named:
            self.used_as_tensor.add(named)  # ``assert isinstance(x, torch.Tensor)``

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


def _walked(
    target: cst.BaseAssignTargetExpression, walked: cst.BaseExpression
) -> list[tuple[str, cst.BaseExpression]]:
    """(a loop's name, what it walks) for each name a ``for`` binds to an item of what it walks: ``for row in
    t``, ``for i, row in enumerate(t)``, ``for a, b in zip(t, u)``."""
    if isinstance(target, cst.Name):
        return [(target.value, walked)]
    if not isinstance(target, cst.Tuple) or not isinstance(walked, cst.Call):
        return []
    func = walked.func.value if isinstance(walked.func, cst.Name) else ""
    names = [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]
    args = [a.value for a in walked.args if not a.star and a.keyword is None]
    if len(args) != len(walked.args):
        return []
    pairs = _paired(func, names, args)
    return [(name, value) for name, value in pairs if name is not None]


def _paired(
    func: str, names: list[str | None], args: list[cst.BaseExpression]
) -> list[tuple[str | None, cst.BaseExpression]]:
    if func == "enumerate" and len(names) == 2 and args:
        return [(names[1], args[0])]
    if func == "zip" and len(names) == len(args):
        return list(zip(names, args, strict=True))
    return []


def _type_test(call: cst.Call) -> str | None:
    """The name ``isinstance(name, torch.Tensor)`` asks of (a tensor wherever the code goes on with it as
    one; ``torch.is_tensor(name)`` too), else ``None``."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "is_tensor" and len(call.args) == 1:
        subject = call.args[0].value
        return subject.value if isinstance(subject, cst.Name) else None
    if not (isinstance(func, cst.Name) and func.value == "isinstance" and len(call.args) == 2):
        return None
    subject, kind = call.args[0].value, call.args[1].value
    named = get_full_name_for_node(kind) or ""
    return subject.value if isinstance(subject, cst.Name) and named.rsplit(".", 1)[-1] == "Tensor" else None


# A tensor's methods that give a tensor of its values laid out, cast or copied (torch.Tensor's docs).
_RESHAPING = frozenset({"view", "reshape", "transpose", "permute", "flatten", "squeeze", "unsqueeze", "t"})
_RESHAPING_TOO = _RESHAPING | {"contiguous", "float", "half", "bfloat16", "clone", "detach", "to"}


def _unsliced(value: cst.BaseExpression) -> cst.BaseExpression:
    """What a chain of subscripts reads from (``mask`` of ``mask[:n][0]``)."""
    while isinstance(value, cst.Subscript):
        value = value.value
    return value


def _reshaped_from(value: cst.BaseExpression) -> str | None:
    """The name at the root of a chain of a tensor's reshaping methods (``x`` of ``x.reshape(-1, d)``), or of
    the value itself when it is a name."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        if value.func.attr.value not in _RESHAPING_TOO:
            return None
        value = value.func.value
    return value.value if isinstance(value, cst.Name) else None


def _to_a_tensors_place(call: cst.Call) -> bool:
    """``x.to(loss.device)``, ``x.to(dtype=h.dtype)``: moved to where, or cast to what, another value is —
    a tensor's move (a module is moved to a device, not to another value's ``dtype``, and is not read as
    a number: the name is asked of as a tensor)."""
    return any(
        (a.keyword is not None and a.keyword.value in ("device", "dtype"))
        or (isinstance(a.value, cst.Attribute) and a.value.attr.value in ("device", "dtype"))
        for a in call.args
    )


def handed_tensors(fn: cst.FunctionDef) -> bool:
    """Whether a parameter of ``fn`` is declared to hold tensors, alone or among others
    (``x_fp8: Tuple[torch.Tensor, torch.Tensor]``, ``xs: list[Tensor]``)."""
    declared = [_text_of(p.annotation.annotation) for p in params_of(fn) if p.annotation is not None]
    return any(map(_holds_tensors, declared))


def declares_tensors(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """:func:`handed_tensors`, read from the ``ast`` of a def."""
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    return any(_holds_tensors(ast.unparse(a.annotation)) for a in args if a.annotation is not None)


def _holds_tensors(declared: str) -> bool:
    """Whether a declared type's text holds tensors — not a callable's signature (``Callable[[torch.Tensor],
    None]`` is a function handed over)."""
    return "Tensor" in declared and "Callable" not in declared


def handed_a_step(fn: cst.FunctionDef, owner: str | None = None) -> bool:
    """Whether a function is handed the step's batch by its declared type: a parameter annotated with a
    class named for one (``forward_batch: ForwardBatch``, ``meta: CommonAttentionMetadata``,
    ``scheduler_output: SchedulerOutput``), or one so named and not annotated (``forward_batch``), or — a
    method of such a class (``owner``) — itself: it works on what each step runs, and the tensors in it."""
    if owner is not None and _STEP_TYPE.search(owner) is not None:
        return True
    named = (_class_named(p.annotation.annotation) for p in params_of(fn) if p.annotation is not None)
    if any(_STEP_TYPE.search(name or "") is not None for name in named):
        return True
    return any(p.annotation is None and STEP_PARAMETER.search(p.name.value) for p in params_of(fn))


_STEP_TYPE = re.compile(rf"(?:{'|'.join(STEP_TYPES)})$")  # (a class named for one of the step's types)


def _class_named(annotation: cst.BaseExpression) -> str | None:
    """The class an annotation names (``ForwardBatch``, ``"ForwardBatch"``, ``mod.ForwardBatch``)."""
    if isinstance(annotation, cst.SimpleString):
        value = annotation.evaluated_value
        return (
            value.rsplit(".", 1)[-1]
            if isinstance(value, str) and value.replace(".", "").isidentifier()
            else None
        )
    dotted = get_full_name_for_node(annotation)
    return dotted.rsplit(".", 1)[-1] if dotted else None


def _text_of(annotation: cst.BaseExpression) -> str:
    return cst.Module(body=[]).code_for_node(annotation)


def _names_tensor(annotation: cst.BaseExpression) -> bool:
    """An annotation naming a tensor: ``Tensor``, ``torch.Tensor``, ``Optional[torch.Tensor]``… — not a
    list or tuple of them, nor a function that takes or gives one (``Callable[[torch.Tensor], None]``)."""
    text = _text_of(annotation)
    return "Tensor" in text and not any(f"{kind}[" in text.lower() for kind in ("list", "tuple", "callable"))


# What a tensor's attribute is a tensor of itself: its views and parts, and the fields of what torch's
# reductions with an index hand back (``x.max(dim=1).values``, ``torch.topk(x, 5).indices``, ``torch.mode``).
_TENSOR_ATTRS = frozenset({"T", "mT", "H", "real", "imag", "data", "grad", "values", "indices"})


def is_tensor(expr: cst.BaseExpression, tensors: set[str], aliases: Mapping[str, str]) -> bool:
    """Whether ``expr`` evaluates to a tensor, as far as a glance tells."""
    if isinstance(expr, cst.Name):
        return expr.value in tensors
    if isinstance(expr, cst.Attribute):
        return _tensor_attribute(expr, tensors, aliases)
    if isinstance(expr, cst.Subscript):  # a tensor's item or slice; what a tensor indexes (``rows[idx]``)
        return is_tensor(expr.value, tensors, aliases) or any(
            isinstance(e.slice, cst.Index) and is_tensor(e.slice.value, tensors, aliases) for e in expr.slice
        )
    if isinstance(expr, cst.BinaryOperation):
        return is_tensor(expr.left, tensors, aliases) or is_tensor(expr.right, tensors, aliases)
    if isinstance(expr, cst.UnaryOperation) and not isinstance(expr.operator, cst.Not):
        return is_tensor(expr.expression, tensors, aliases)
    if isinstance(expr, cst.Comparison):
        return _tensor_comparison(expr, tensors, aliases)
    if isinstance(expr, cst.Call):
        return _tensor_call(expr, tensors, aliases)
    return False


def _tensor_attribute(expr: cst.Attribute, tensors: set[str], aliases: Mapping[str, str]) -> bool:
    """A field typed as a tensor (``batch.seq_lens``), or a tensor's view or part (``x.T``, ``out.values``)
    — not its metadata (``x.shape``)."""
    if get_full_name_for_node(expr) in tensors:
        return True
    attr = expr.attr.value
    return attr not in _METADATA_ATTRS and attr in _TENSOR_ATTRS and is_tensor(expr.value, tensors, aliases)


def _tensor_comparison(expr: cst.Comparison, tensors: set[str], aliases: Mapping[str, str]) -> bool:
    """``sampled < 0``: a tensor of booleans (not an identity or membership test)."""
    if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
        return False
    return any(is_tensor(s, tensors, aliases) for s in (expr.left, *(c.comparator for c in expr.comparisons)))


def _tensor_call(call: cst.Call, tensors: set[str], aliases: Mapping[str, str]) -> bool:
    func = call.func
    if isinstance(func, cst.Attribute) and is_tensor(func.value, tensors, aliases):
        # x.sum(), x.view(...), (x > 0).any() — not its metadata, nor a predicate (`x.is_pinned()`,
        # `x.is_contiguous()`: a Python bool)
        return func.attr.value not in _METADATA_METHODS and not _predicate(func.attr.value)
    if isinstance(func, cst.Attribute) and (
        func.attr.value in TENSOR_ONLY_METHODS or (func.attr.value == "to" and _to_dtype(call, aliases))
    ):
        return True  # sample(...).to(torch.int64): whatever sample returns, this is a tensor
    reduced = func.value if isinstance(func, cst.Attribute) and func.attr.value in ARRAY_REDUCTIONS else None
    if _an_array(reduced, tensors, aliases):
        return True
    dotted = get_full_name_for_node(func)
    qualname = resolve(dict(aliases), dotted) if dotted else ""
    if qualname.startswith("torch.") and not qualname.startswith(("torch.cuda.", "torch.distributed.")):
        last = qualname.rsplit(".", 1)[-1]
        return last not in _NOT_TENSORS and not _predicate(last)
    return False


def _an_array(reduced: cst.BaseExpression | None, tensors: set[str], aliases: Mapping[str, str]) -> bool:
    """Whether what an array's reduction is called on is an array: a comparison's or arithmetic's result
    (``(ids < 0).any()``: a host array is told apart by the names it reads, :func:`host_names`), or what a
    call made of a tensor (``prop.ok(value).all()``)."""
    if isinstance(reduced, (cst.Comparison, cst.BinaryOperation)):
        return True
    return isinstance(reduced, cst.Call) and any(is_tensor(a.value, tensors, aliases) for a in reduced.args)


def _predicate(name: str) -> bool:
    """A predicate (`torch.compiler.is_compiling()`, `x.is_pinned()`, `torch.are_deterministic_…()`)
    answers with a Python bool; ``is_nonzero`` reads the tensor back, as ``bool(t)`` does."""
    return name.startswith(("is_", "are_", "has_")) and name != "is_nonzero"


def _to_dtype(call: cst.Call, aliases: Mapping[str, str]) -> bool:
    """``.to(torch.int64)``, ``.to(dtype=torch.float16)``, ``.to(device, torch.bfloat16)``."""
    for arg in call.args:
        dotted = get_full_name_for_node(arg.value)
        qualname = resolve(dict(aliases), dotted) if dotted else ""
        if qualname.startswith("torch.") and qualname.rsplit(".", 1)[-1] in _DTYPES:
            return True
    return False


class _AnyName(set[str]):
    """Every name a tensor: what a test could decide at most, before the names are worked out."""

    def __contains__(self, item: object) -> bool:
        return True


ANY_NAME: set[str] = _AnyName()


def decision_tests(text: str) -> list[cst.BaseExpression] | None:
    """The tests the statement ``text`` decides on — its own as an ``if``/``elif``/``while``/``assert``
    (its header's lines, a body on the same line too), and its conditional expressions' — parsed alone
    (``None``: it does not parse alone)."""
    stripped = text.strip()
    if too_wild(stripped) is not None:
        return None  # (no parser is handed what bounds.too_wild refuses)
    if stripped.startswith("elif"):
        stripped = stripped[2:]
    if stripped.endswith(":"):
        stripped += " pass"
    try:
        stmt = cst.parse_statement(stripped + "\n")
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None
    tests = [stmt.test] if isinstance(stmt, (cst.If, cst.While)) else []
    for found in find_all(stmt, cst.Assert, cst.IfExp):
        if isinstance(found, (cst.Assert, cst.IfExp)):
            tests.append(found.test)
    return tests


def decides_tensor(test: cst.BaseExpression, tensors: set[str], aliases: Mapping[str, str]) -> bool:
    """Whether a condition needs a tensor's value on the host: ``if mask:``, ``if (x > 0).any():``,
    ``if x.sum() > 0:`` — not ``if x is None:`` nor ``if x.shape[0] == 5:``."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return decides_tensor(test.expression, tensors, aliases)
    if isinstance(test, cst.BooleanOperation):
        host = _host_typed(test.left) if isinstance(test.operator, cst.And) else set()
        if host:  # ``isinstance(n, int) and n < 0``: then ``n`` is no tensor
            tensors = {t for t in tensors if t not in host}
        return decides_tensor(test.left, tensors, aliases) or decides_tensor(test.right, tensors, aliases)
    if isinstance(test, cst.Comparison):
        if any(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in test.comparisons):
            return False
        sides = [test.left, *(c.comparator for c in test.comparisons)]
        return any(is_tensor(s, tensors, aliases) for s in sides)
    return is_tensor(test, tensors, aliases)


def narrowed_to_host(ifs: Sequence[tuple[cst.BaseExpression, bool]]) -> set[str]:
    """The names the ``if`` tests around the code prove to be no tensor there (``ifs``: each test, and
    whether the code is in its ``else`` branch): the ``else`` of ``isinstance(n, torch.Tensor)``, the body
    of ``not isinstance(n, torch.Tensor)`` or of ``isinstance(n, int)``."""
    out: set[str] = set()
    for test, orelse in ifs:
        negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
        asked = test.expression if isinstance(test, cst.UnaryOperation) and negated else test
        named = _type_test(asked) if isinstance(asked, cst.Call) else None
        if named is not None and orelse != negated:
            out.add(named)
        elif not orelse and not negated:
            out |= _host_typed(test)
    return out


# Python's own types: a value ``isinstance`` proves one of them is on the host.
_HOST_TYPES = frozenset(t.__name__ for t in (int, float, bool, str, list, tuple, dict))


def _host_typed(test: cst.BaseExpression) -> set[str]:
    """The names a condition proves to be host values when it holds: ``isinstance(n, int)`` (or a tuple of
    Python's own types), through ``and``."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _host_typed(test.left) | _host_typed(test.right)
    if not (isinstance(test, cst.Call) and get_full_name_for_node(test.func) == "isinstance"):
        return set()
    if len(test.args) != 2 or not isinstance(test.args[0].value, cst.Name):
        return set()
    kind = test.args[1].value
    kinds = [e.value for e in kind.elements] if isinstance(kind, cst.Tuple) else [kind]
    named = [get_full_name_for_node(k) for k in kinds]
    return {test.args[0].value.value} if named and all(n in _HOST_TYPES for n in named) else set()
