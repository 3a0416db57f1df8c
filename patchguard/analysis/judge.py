"""Judge changed code with libcst: which rule it hits, under which gate, in which function.

The file is cut into *units* (the outermost function around a change, else the outermost class, else the
top-level statements it touches); each unit is parsed with libcst on its own (a slice costs milliseconds
where the whole 2,000-line file costs half a second) and walked once. Only calls and statements on changed
lines are judged, and a hit that the same unit of the pristine file already has (a legitimate
``torch.save`` whose line was merely re-indented or whose argument was renamed) is not reported again.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import PositionProvider

from ..model import GateKind, RuleId
from ..rulebook import RULES
from .aliases import bind_from_import, bind_import, last_name, reads_environment, resolve
from .bounds import too_wild
from .cstwalk import Dispatch, find_all, positions, run, types_of, walk
from .families import (
    ARGUMENT_METHODS,
    BOUND_WRITERS,
    BROUGHT_BACK,
    FILE_EXTENSIONS,
    FILE_PLACES,
    FORMAT_WRITER,
    HOST_LIBRARIES,
    HOST_STAGES,
    IMPORTERS,
    IN_MEMORY,
    IN_PLACE,
    KERNEL_CALL,
    LAUNCH,
    LAUNCHING_WORDS,
    MEMMAPS,
    NATIVE_LOADERS,
    NEVER_SET,
    ON_DEVICE,
    ONLY_PARSES,
    OPEN_METHODS,
    OPENERS,
    SUPPRESSORS,
    TO_HOST,
    WAIT_METHODS,
    WHEN_TOLD,
    WRITE_METHODS,
    WRITING_WORDS,
    class_named,
)
from .rules import (
    AFTER_LOADING,
    REDUCTIONS,
    WRAPPERS,
    could_hit,
    on_hot_path,
    role_verb,
    rule_for_call,
    runs_once,
)
from .statements import (
    STATEMENT_RULES,
    TERMINAL,
    a_function,
    code,
    holds,
    literal,
    names_only,
    nodes_of,
    truth,
)
from .structure import Structure, gate_kind_of
from .tensors import (
    handed_a_step,
    handed_tensors,
    host_named,
    host_names,
    is_tensor,
    local_names,
    metadata_only,
    narrowed_to_host,
    of_host_named,
    params_of,
    tensor_names,
    typed_tensors,
)

__all__ = ["Hit", "Unit", "imported_names", "judge_statements", "judge_unit", "units_for"]

_MARKERS = ("<<<<<<<", "=======", ">>>>>>>", "|||||||", "#")  # not code: never a header


@dataclass(frozen=True, slots=True)
class Unit:
    """A slice of the file judged as one libcst module: lines ``start..end``, and its enclosing prefix."""

    start: int
    end: int
    indent: int
    prefix: str  # qualified name of what encloses the slice ("" at module level)


@dataclass
class Hit:
    """A rule hit on a changed line (``line``/``end_line`` in the installed file)."""

    rule: RuleId
    qualname: str
    line: int
    end_line: int
    function: str
    gate_kind: GateKind | None  # None: not under any gate
    gate: str
    dead: bool
    detail: str = ""
    loop: bool = False
    retry: bool = False  # in a loop that catches errors: waiting between attempts (a backoff)
    hot_caller: str = ""  # on the hot path: the per-step function that calls it (itself, for one)
    # by role, whatever its name: in a function handed tensors to compute on (:meth:`_Walker.on_device_path`)
    device: bool = False
    familiar: bool = False  # the pristine scope does the same already (its role: one more is its job)


def called_every_step(st: Structure, unit: Unit) -> bool:
    """Whether a function of the unit is on the hot path (a per-step function calls it, here or elsewhere)."""
    scope = st.innermost(unit.start)
    name = scope.qualname if scope is not None else unit.prefix
    return bool(name) and any(q == name or q.startswith(name + ".") for q in st.hot)


def units_for(lines: Sequence[int], st: Structure, source_lines: Sequence[str]) -> dict[Unit, list[int]]:
    """Group changed lines by the unit that contains them."""
    out: dict[Unit, list[int]] = {}
    for line in lines:
        scope = st.outermost_def(line)
        in_class = st.class_statement_at(line) if scope is None else None
        if in_class is not None:
            start, end, owner = in_class
            out.setdefault(Unit(start, end, _indent(source_lines, start), owner), []).append(line)
            continue
        if scope is None:
            classes = [s for s in st.scopes if s.kind == "class" and s.start <= line <= s.end]
            scope = min(classes, key=lambda s: s.start) if classes else None
        if scope is not None:
            prefix = scope.qualname.rsplit(".", 1)[0] if "." in scope.qualname else ""
            unit = Unit(scope.start, scope.end, _indent(source_lines, scope.start), prefix)
        elif st.grammar is None:
            unit = _statement_unit(line, source_lines)
        else:
            span = st.statement_at(line) or (line, line)
            unit = Unit(span[0], span[1], 0, "")
        out.setdefault(unit, []).append(line)
    return out


def _indent(source_lines: Sequence[str], line: int) -> int:
    text = source_lines[line - 1] if 0 < line <= len(source_lines) else ""
    return len(text) - len(text.lstrip())


def _statement_unit(line: int, source_lines: Sequence[str]) -> Unit:
    """In a file no grammar parses: the statement starting at ``line`` (it and up to 7 lines after, the
    fewest that parse on their own), named after the defs its indentation sits in."""
    indent = _indent(source_lines, line)
    end = line
    for end in range(line, min(line + 8, len(source_lines) + 1)):
        text = textwrap.dedent("".join(source_lines[line - 1 : end]))
        if too_wild(text) is not None:
            break  # never handed to libcst: judged by its text alone
        try:
            cst.parse_module(text)
            break
        except (cst.ParserSyntaxError, RecursionError):
            continue
    return Unit(line, end, indent, _textual_prefix(line, indent, source_lines))


def _textual_prefix(line: int, indent: int, source_lines: Sequence[str]) -> str:
    """``Class.method`` from the ``def``/``class`` headers that enclose ``line`` by indentation."""
    names: list[str] = []
    for n in range(line - 2, -1, -1):
        text = source_lines[n]
        stripped = text.lstrip()
        width = len(text) - len(stripped)
        if not stripped.strip() or width >= indent or text.startswith(_MARKERS):
            continue
        indent = width
        for head in ("def ", "async def ", "class "):
            if stripped.startswith(head):
                names.append(stripped[len(head) :].split("(", 1)[0].split("[", 1)[0].split(":", 1)[0].strip())
        if width == 0:
            break
    return ".".join(reversed(names))


def _parse(unit: Unit, source_lines: Sequence[str]) -> cst.Module | None:
    text = "".join(source_lines[unit.start - 1 : unit.end])
    if unit.indent:
        text = textwrap.dedent(text)
    if too_wild(text) is not None:
        return None
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None


_LOADERS = IMPORTERS | NATIVE_LOADERS  # what loads code by a name or a path it is given

# The node kinds the walk asks about for every node, as sets of types (see :func:`.cstwalk.types_of`).
_STATEMENTS = types_of(cst.SimpleStatementLine, cst.BaseCompoundStatement)
_STATEMENTS_AND_SUITES = _STATEMENTS | types_of(cst.SimpleStatementSuite)
_LOOPS = types_of(cst.For, cst.While)
_BLOCKS = types_of(cst.Module, cst.IndentedBlock)


class _Walker(Dispatch):
    SKIPS_TRIVIA = True  # whitespace, comments and punctuation are not walked into (:mod:`.cstwalk`)
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(
        self,
        unit: Unit,
        changed: set[int] | None,
        st: Structure,
        aliases: dict[str, str] | None = None,
        source_lines: Sequence[str] = (),
        horizon: int | None = None,
        edited: Collection[int] = (),
    ) -> None:
        super().__init__()
        self.unit, self.changed, self.st = unit, changed, st
        self.edited = frozenset(edited if changed is None else changed)  # the lines the edit wrote
        # Only the hits on ``changed`` are wanted, the last of which is ``horizon``: code that touches none
        # of them is walked only as far as it binds names, and nothing past the horizon is walked into.
        self.horizon = horizon
        self.every_step = called_every_step(st, unit)
        self.source_lines = source_lines
        self.unit_text = "".join(source_lines[unit.start - 1 : unit.end]) if source_lines else ""
        self.aliases: dict[str, str] = dict(st.aliases if aliases is None else aliases)
        self.names: list[str] = unit.prefix.split(".") if unit.prefix else []
        self.ifs: list[tuple[cst.BaseExpression, bool]] = []
        self.dead_blocks: set[int] = set()
        self.dead = 0
        self.loops = 0
        self.loop_nodes: list[cst.CSTNode] = []
        # per function entered: the def, and the names known to hold tensors once asked (lazily)
        self.functions: list[tuple[cst.FunctionDef | None, set[str] | None]] = [(None, set())]
        self._owners: list[str | None] = [None]  # what each function of ``functions`` stands in, by name
        self._kernel_callers: dict[int, bool] = {}  # a function (its id) -> whether it calls a kernel
        self._captures: dict[int, bool] = {}  # a closure (its id) -> whether it reads its outer's tensors
        self._hosts: dict[int, set[str]] = {}  # a function (its id) -> the names it binds to host values only
        self._typed: dict[int, set[str]] = {}  # a function (its id) -> what its declared types make tensors
        self.bound: dict[str, str] = {}  # local name -> the qualified name of the call that made its value
        self.scoped: set[int] = set()  # calls made as a ``with`` item: undone when the block ends
        self.shown: set[int] = set()  # calls in the arguments of a print or log call: their values go out
        self.unlogged: set[int] = set()  # calls in the arguments of a debug log call that costs nothing
        self.paths: dict[str, str] = {}  # a file a ``with`` opened at a literal path: its name -> the path
        self.files: set[str] = set()  # the names of files a ``with`` opened for writing (``as f``)
        self.clients: set[str] = set()  # the names of network clients made in the scope (``as client``)
        self.settings: set[str] = set()  # local names holding a value read from the environment
        self.on_device: set[str] = set()  # local names holding a tensor a call made on the device
        self.hits: list[Hit] = []
        self._own: dict[int, set[str]] = {}  # per function met: the names it binds itself
        self._launching: frozenset[str] | None = None  # what launches a kernel, or calls what does
        self._kernels: frozenset[str] | None = None  # the file's kernel defs (``@triton.jit``), on first need

    # -- where we are ---------------------------------------------------------------------------------
    def _lines(self, node: cst.CSTNode) -> tuple[int, int]:
        pos = self.get_metadata(PositionProvider, node)
        return pos.start.line + self.unit.start - 1, pos.end.line + self.unit.start - 1

    def _touched(self, node: cst.CSTNode) -> tuple[int, int] | None:
        start, end = self._lines(node)
        if self.changed is None or any(line in self.changed for line in range(start, end + 1)):
            return start, end
        return None

    def _written_here(self, node: cst.CSTNode) -> bool:
        """Whether the edit wrote ``node``'s first line: a loop the edit made waits where the code did not
        (waiting is not its job, as it is a pristine retry's or poll's)."""
        return self._lines(node)[0] in self.edited

    def _function(self) -> str:
        return ".".join(n for n in self.names if n)

    def touches(self, node: cst.CSTNode) -> bool:
        return self._touched(node) is not None

    def in_hot_path(self) -> bool:
        """A forward, a per-step method of the engine (see :data:`.rules.HOT_PATH`), or a function one of them
        calls in this file (:mod:`.hotpath`); never a test."""
        name = self.names[-1] if self.names else ""
        return on_hot_path(name) or (not name.startswith("test") and self._function() in self.st.hot)

    def on_device_path(self) -> bool:
        """Where reading a tensor back to the host stalls the device: the hot path, or — by role, whatever
        its name — a function that is handed tensors to compute on (a parameter annotated ``Tensor``: a
        kernel's wrapper, a sampler's helper, a communicator's ``all_reduce``), unless its role is to set
        things up, show them or move them to storage (``__init__``, ``__repr__``, ``save_*``, ``load_*``,
        ``*checkpoint*``, ``to_dict``...), or it is a test."""
        fn = self.functions[-1][0] if self.functions else None
        if fn is not None and _compiled(fn):
            return False  # a kernel's body (`@triton.jit`, `@cute.kernel`) runs on the device: no host read
        if self.in_hot_path():
            return True
        name = self.names[-1] if self.names else ""
        if fn is None or self._host_stage(name):
            return False
        if _off_device_role(name) and not self._sets_up_a_step(fn, name):
            return False
        handed = self._handed(fn)
        if _MAKING.match(name):  # ``build``/``create``: per step when handed the step's tensors, else setup
            return handed
        named = not LAUNCHING_WORDS.isdisjoint(name.lower().split("_"))  # ``_run_kernel``, ``launch_gemm``
        if handed or named or self._launches(fn) or self._writes_tensors(fn, once=runs_once(name)):
            return True
        return self._computes(fn)

    def _sets_up_a_step(self, fn: cst.FunctionDef, name: str) -> bool:
        """Whether a function named for setting up (``_init_kpool_metadata``, ``prepare_inputs``) is handed
        the step itself (``forward_batch: ForwardBatch``): it sets up each step, on the device path."""
        return role_verb(name) in _STEP_SETUP_VERBS and handed_a_step(fn, self._owner())

    def _computes(self, fn: cst.FunctionDef) -> bool:
        """Whether a function's job is device work by what it calls: a function named for running device
        code (``output = triton_kernel_fused_experts(…)``), or a torch function handed what it is handed
        (asked for each hit of a function: worked out once)."""
        known = self._kernel_callers.get(id(fn))
        if known is None:
            lines, source = self._lines(fn), self.source_lines
            known = _calls_kernels(lines, source) or _computes_on_handed(fn, lines, source)
            self._kernel_callers[id(fn)] = known
        return known

    def _writes_tensors(self, fn: cst.FunctionDef, once: bool = False) -> bool:
        """Whether a function writes into tensors in place (``out.copy_(x)``, ``buf.fill_(0)``) or — unless
        its role is to run ``once`` (a profile run, a warm-up) — makes them on a device (``torch.zeros(n,
        device=q.device)``): device work, whatever its parameters are annotated as."""
        start, end = self._lines(fn)
        text = "".join(self.source_lines[start - 1 : end])
        return IN_PLACE.search(text) is not None or (not once and ON_DEVICE.search(text) is not None)

    def _launches(self, fn: cst.FunctionDef) -> bool:
        """Whether a function launches a kernel on a grid (``kernel[grid](…)``, ``kernel`` a ``@triton.jit``
        def of the file, or a name it imports — its kernels module's, a ``numba.cuda`` one), or calls a
        function of the file that does (``decode_attention_fwd`` → ``_decode_att_m_fwd`` → the kernel): its
        job is the device's work, whatever its parameters say."""
        if self._kernels is None:
            self._kernels = _kernels(self.st, self.source_lines)
            self._launching = _launchers(self.st, self.source_lines, self._kernels) if self._kernels else None
        return self._launching is not None and fn.name.value in self._launching

    def methods_of(self, name: str) -> frozenset[str] | None:
        return self.st.methods_of(name)

    def defines(self, name: str) -> bool:
        return any(s.qualname.rsplit(".", 1)[-1] == name for s in self.st.scopes)

    def _host_stage(self, name: str) -> bool:
        """Whether a method is a stage its framework hands host values (:data:`HOST_STAGES`): the class
        around it derives from the framework's base (by the base's name, as written) and the method is one
        of the base's host stages."""
        owner = self.names[-2] if len(self.names) >= 2 else None
        bases = [last_name(b) for c in self.st.classes if c.name == owner for b in c.bases]
        return any(b.endswith(base) and name in stages for b in bases for base, stages in HOST_STAGES.items())

    def keeps(self, name: str, value: str) -> bool:
        """Whether the unit gives ``name`` the value ``value`` as written (``_orig = dg.get_num_sms``)."""
        return (
            re.search(rf"(?m)^\s*{re.escape(name)}\s*=\s*{re.escape(value)}\s*$", self.unit_text) is not None
        )

    def own(self, name: str) -> bool:
        """Whether the current function binds ``name`` itself (a parameter, an assignment)."""
        fn = self.functions[-1][0] if self.functions else None
        if fn is None:
            return False
        if id(fn) not in self._own:
            self._own[id(fn)] = local_names(fn)
        return name in self._own[id(fn)]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._owners.append(self.names[-1] if self.names else None)
        self.names.append(node.name.value)
        self.functions.append((node, None))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.names.pop()
        self.functions.pop()
        self._owners.pop()

    def hosts(self) -> set[str]:
        """The names of the current function bound only to host values (worked out on first use)."""
        fn = self.functions[-1][0]
        if fn is None:
            return set()
        known = self._hosts.get(id(fn))
        if known is None:
            known = self._hosts[id(fn)] = host_names(fn, self.aliases)
        return known

    def tensors(self) -> set[str]:
        """The names of the current function that hold tensors (worked out on first use) — a closure's
        too: the tensors of the function around it that it does not bind itself."""
        known = self._tensors_at(len(self.functions) - 1)
        narrowed = narrowed_to_host(self.ifs) if self.ifs else None
        return known - narrowed if narrowed else known

    def _tensors_at(self, i: int) -> set[str]:
        fn, known = self.functions[i]
        if known is None:
            owner = self._owners[i]  # (the class of a method; the function around a closure)
            known = tensor_names(fn, self.aliases, self.st.tensor_fields, owner) if fn is not None else set()
            outer = self.functions[i - 1][0]
            if fn is not None and outer is not None and owner == outer.name.value:
                inherited = self._tensors_at(i - 1) - local_names(fn)
                self._captures[id(fn)] = any(n.value in inherited for n in _names_in(fn.body))  # type: ignore[arg-type]
                known |= inherited
            self.functions[i] = (fn, known)
        return known

    def _handed(self, fn: cst.FunctionDef) -> bool:
        """Whether ``fn`` is handed tensors: a parameter that holds one (whatever an ``if`` around the call
        narrows it to), one declared among others (``Tuple[Tensor, Tensor]``), or the step itself."""
        held = {p.name.value for p in params_of(fn)} & self._function_tensors()
        captured = self._captures.get(id(fn), False)  # (a closure reading the tensors around it)
        return bool(held) or captured or handed_a_step(fn, self._owner()) or handed_tensors(fn)

    def _owner(self) -> str | None:
        """The class of the current method (the function around a closure); ``None`` at the top."""
        return self._owners[-1] if self._owners else None

    def _function_tensors(self) -> set[str]:
        """The tensors of the current function wherever it stands (no ``if`` narrowing them)."""
        self.tensors()
        return self.functions[-1][1] or set()

    # -- statement rules: each node to the rules registered for its kind (:mod:`.statements`) ----------
    def _statements(self, node: cst.CSTNode) -> None:
        if self._touched(node) is None:
            return  # every node a rule reports is inside the one it looks at
        for rule in STATEMENT_RULES.get(type(node), ()):
            for seen in rule(node, self):
                lines = self._touched(seen.node)
                if lines is not None:
                    self._hit(seen.rule, seen.qualname, lines, seen.detail)

    def visit_With(self, node: cst.With) -> None:
        self.scoped.update(id(item.item) for item in node.items)
        for item in node.items:  # ``with open("/tmp/x.pkl", "wb") as fh``: what is written to fh goes there
            name = item.asname.name if item.asname is not None else None
            made = item.item if isinstance(item.item, cst.Call) else None
            if not isinstance(name, cst.Name) or made is None:
                continue
            path = _literal_paths(made)
            if path:
                self.paths[name.value] = path
            if _opens_a_file(made):
                self.files.add(name.value)
            if self._makes_client(made):
                self.clients.add(name.value)

    def _makes_client(self, call: cst.Call) -> bool:
        """Whether a call makes a network client (``requests.Session()``, ``socket.socket()``): what the
        network rule names."""
        qualname, method, receiver = self._callee(call.func)
        return _call_rule(call, qualname, method, receiver) == RuleId.NETWORK

    def _sends(self, func: cst.BaseExpression, method: str | None) -> bool:
        """Whether ``client.post(…)`` uses a network client made in the scope to talk (any of its methods
        but those that only set it up or close it)."""
        owner = func.value if isinstance(func, cst.Attribute) else None
        return isinstance(owner, cst.Name) and owner.value in self.clients and method not in _CLIENT_SETUP

    def visit_While(self, node: cst.While) -> None:
        if _always_false(node.test):  # `while False:` runs its body as often as `if False:`: never
            self.dead_blocks.add(id(node.body))
        self._statements(node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._statements(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.names.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.names.pop()

    # -- imports met on the walk (in functions too) add to the module-level aliases of the structure ----
    def visit_Import(self, node: cst.Import) -> None:
        bind_import(self.aliases, imported_names(node.names))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = get_full_name_for_node(node.module) if node.module is not None else None
        names: list[tuple[str, str | None]] = (
            [("*", None)] if isinstance(node.names, cst.ImportStar) else imported_names(node.names)
        )
        bind_from_import(self.aliases, module, len(node.relative), names)

    # -- gates and dead code ----------------------------------------------------------------------------
    def visit_If(self, node: cst.If) -> None:
        if _always_false(node.test):
            self.dead_blocks.add(id(node.body))
        self._statements(node)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._statements(node)

    # The gate holds over the body and the else branch, not over the test itself.
    def visit_If_body(self, node: cst.If) -> None:
        self.ifs.append((node.test, False))

    def leave_If_body(self, node: cst.If) -> None:
        self.ifs.pop()

    def visit_If_orelse(self, node: cst.If) -> None:
        self.ifs.append((node.test, True))

    def leave_If_orelse(self, node: cst.If) -> None:
        self.ifs.pop()

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        seen_terminal = False
        for stmt in node.body:
            if seen_terminal:
                self.dead_blocks.add(id(stmt))
            if isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, TERMINAL) for s in stmt.body):
                seen_terminal = True
        self._statements(node)
        if id(node) in self.dead_blocks:
            self.dead += 1

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        if id(original_node) in self.dead_blocks:
            self.dead -= 1

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self.dead_blocks and type(node) in _STATEMENTS:
            self.dead += 1
        if type(node) in _LOOPS:
            self.loops += 1
            self.loop_nodes.append(node)
        if not super().on_visit(node):
            return False
        if self.horizon is not None and self._beside(node):
            return False
        # A simple statement no rule could match (the prefilter on its own text) is not walked into: the
        # bulk of a changed function, whose every node would be visited for nothing.
        return not (type(node) is cst.SimpleStatementLine and self.source_lines and self._inert(node))

    def _beside(self, node: cst.CSTNode) -> bool:
        """With a horizon: whether ``node``'s inside can give no hit on the changed lines — it begins after
        the last of them, or touches none and holds no statement (whose names the walk must still bind: a
        node's own ``visit_`` hook has run)."""
        pos = self.get_metadata(PositionProvider, node, None)
        if pos is None or type(node) in _BLOCKS:
            return False
        start = pos.start.line + self.unit.start - 1
        if start > (self.horizon or 0):
            return True
        if type(node) in _STATEMENTS_AND_SUITES:
            return False
        return self._touched(node) is None

    def _inert(self, node: cst.SimpleStatementLine) -> bool:
        """No rule can match in ``node`` (:func:`.rules.could_hit` of its lines), and it imports nothing (an
        import binds names the rest of the walk resolves)."""
        for small in node.body:
            if isinstance(small, (cst.Import, cst.ImportFrom)):
                return False
            if isinstance(small, cst.Assign) and (
                self._binds(small) or self._from_settings(small.value) or _made_on_device(small.value)
            ):
                return False
            if isinstance(small, cst.Assign) and self._carries_a_path(small):
                return False  # (a name given a literal path, or one that was: what is handed it goes there)
        start, end = self._lines(node)
        text = "".join(self.source_lines[start - 1 : end])
        return not could_hit(text, self.unit_text, self.aliases, self.every_step, classes=self.st.class_names)

    def _carries_a_path(self, node: cst.Assign) -> bool:
        """Whether an assignment gives a name a literal path, or a value made of a name that holds one (the
        text first: most assignments hold no quoted ``/``)."""
        start, end = self._lines(node)
        text = "".join(self.source_lines[start - 1 : end])
        if "'/" in text or '"/' in text or "'~/" in text or '"~/' in text:
            return True
        return bool(self.paths) and any(n.value in self.paths for n in _names_in(node.value))

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if id(original_node) in self.dead_blocks and type(original_node) in _STATEMENTS:
            self.dead -= 1
        if type(original_node) in _LOOPS:
            self.loops -= 1
            self.loop_nodes.pop()
        super().on_leave(original_node)

    def _gate(self) -> tuple[GateKind | None, str]:
        if self.dead:
            return GateKind.DEAD, "unreachable"
        if not self.ifs:
            return None, ""
        test, orelse = self.ifs[-1]
        text = code(test)
        kind = _gate_kind(text, self.st.flags)
        return kind, (f"not ({text})" if orelse else text)

    def _hit(self, rule: RuleId, qualname: str, lines: tuple[int, int], detail: str = "") -> None:
        kind, cond = self._gate()
        self.hits.append(
            Hit(
                rule,
                qualname,
                lines[0],
                lines[1],
                self._function(),
                kind,
                cond,
                self.dead > 0,
                detail,
                self.loops > 0,
                rule in (RuleId.SLEEP, RuleId.LOGGING)
                and bool(self.loop_nodes)
                and _waits(self.loop_nodes[-1])
                and not (rule == RuleId.SLEEP and self._written_here(self.loop_nodes[-1])),
                self.st.hot.get(self._function(), "") if self.names else "",
                rule in (RuleId.LOGGING, RuleId.SLEEP, RuleId.DEVICE_SYNC) and self.on_device_path(),
            )
        )

    # -- rules ------------------------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        lines = self._touched(node)
        if lines is None:
            return
        qualname, method, receiver = self._callee(node.func)
        wrapped = _wrapped(node, qualname, method)
        if wrapped is not None:  # functools.partial(torch.save, x), asyncio.to_thread(pickle.dump, ...)
            qualname, method, receiver = self._callee(wrapped)
        rule = self._rule_here(node, qualname, method, receiver)
        if rule is None or (rule == RuleId.PRINT and _printed_into(node, self.files)):
            return  # (a print into a file the code opened writes that file: the open is what is judged)
        env = rule == RuleId.ENV_MUTATION
        detail = _env_call(node) if env else _literal_paths(node) or self._to_path(node)
        if rule == RuleId.NETWORK:
            detail = _destination(node)
        self._hit(rule, qualname, lines, detail)
        if rule in (RuleId.PRINT, RuleId.LOGGING):
            self.shown.update(id(c) for a in node.args for c in _calls_in(a.value))
        if rule in (RuleId.PRINT, RuleId.LOGGING) and self._shows_tensor(node):
            self._hit(RuleId.DEVICE_SYNC, qualname, lines, "a tensor formatted for output is read back")

    def _to_path(self, node: cst.Call) -> str:
        """The literal path of a file a ``with`` opened that the call is handed (``pickle.dump(x, fh)``)."""
        names = [a.value.value for a in node.args if isinstance(a.value, cst.Name)]
        return next((self.paths[n] for n in names if n in self.paths), "")

    def _shows_tensor(self, node: cst.Call) -> bool:
        """Whether a print or log call formats a tensor's values (not its shape) on the device path: the
        values are copied to the host to be written out."""
        shown = _shown(node)
        if not shown or not self.on_device_path():
            return False
        tensors = self.tensors()
        read = [v for v in shown if is_tensor(v, tensors, self.aliases)]
        names = {n.value for v in read for n in _names_in(v)}
        return bool(read) and not self._host_now(names, node)

    def _rule_here(
        self, node: cst.Call, qualname: str, method: str | None, receiver: str | None
    ) -> RuleId | None:
        """The rule a call hits where it stands: its own, then what the scope says of it (a switch undone by
        its ``with``, a read-back off the device path, a setattr on a local object, a tensor's bytes out)."""
        rule = _call_rule(node, qualname, method, receiver) or self._bound_writer(node.func, method)
        if rule is None and self.clients and self._sends(node.func, method):
            rule = RuleId.NETWORK
        rule = self._unless_free_debug(node, rule, method)
        if rule == RuleId.GLOBAL_SWITCH and id(node) in self.scoped:
            rule = None  # `with torch.set_grad_enabled(False):` restores the switch when the block ends
        if rule is None and self._read_as_number(node, qualname):
            rule = RuleId.DEVICE_SYNC  # a tensor read back as a Python number
        if rule == RuleId.DEVICE_SYNC:
            rule = self._device_sync_here(node)
        if rule == RuleId.MONKEYPATCH and not self._sets_on_a_module(node):
            rule = None  # setattr on a local object is ordinary code
        if rule is None:
            rule = self._by_what_it_is_handed(node, qualname, method)
        rule = _hang(node, method, self._made_here(node.func)) or _as_told(node, qualname) or rule
        return self._dumped(node, method, _unless_only_parsed(node, qualname, rule))

    def _unless_free_debug(self, node: cst.Call, rule: RuleId | None, method: str | None) -> RuleId | None:
        """No rule for a debug log call of values at hand (or under a level test): nothing is worked out for
        it — and, under a level test, its arguments are read only when someone turns it on."""
        if rule != RuleId.LOGGING or method != "debug" or self._costs_anyway(node):
            return rule
        if self._level_tested():
            self.unlogged.update(id(c) for a in node.args for c in _calls_in(a.value))
        return None

    def _sets_on_a_module(self, node: cst.Call) -> bool:
        """Whether ``setattr(target, …)`` sets an attribute of something imported (a module, its class) — or
        puts a function in a method's place on a name that holds a class (``setattr(parser_cls, "end",
        lambda self, ids: True)``)."""
        target = get_full_name_for_node(node.args[0].value) if node.args else None
        if target is not None and target.split(".", 1)[0] in self.aliases:
            return True
        value = node.args[2].value if len(node.args) > 2 else None
        return target is not None and class_named(target) and a_function(value, self)

    def _by_what_it_is_handed(self, node: cst.Call, qualname: str, method: str | None) -> RuleId | None:
        """The rule of a call no table names, by what it is handed: a call named for writing given a file's
        name (``graph.debug_dump("/tmp/g.dot")``), a loader given what the environment names (code chosen
        at run time)."""
        named = WRITING_WORDS & _words_of_name(method or qualname) or _FORMAT_WRITER.fullmatch(method or "")
        if named and _file_literal(node):
            return RuleId.FILE_WRITE
        if qualname in _LOADERS and node.args and self._from_settings(node.args[0].value):
            return RuleId.DYNAMIC_EXEC
        return None

    def _read_as_number(self, node: cst.Call, qualname: str) -> bool:
        """``int(x)``, ``float(x)``, ``bool(x)`` of a tensor."""
        numbers = ("int", "float", "bool", "builtins.int", "builtins.float", "builtins.bool")
        if qualname not in numbers or not node.args:
            return False
        value = node.args[0].value
        brought = isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
        if brought and value.func.attr.value in BROUGHT_BACK:  # type: ignore[attr-defined]
            return False  # ``float(x.item())``: a Python number made a Python number
        return is_tensor(value, self.tensors(), self.aliases)

    def _costs_anyway(self, node: cst.Call) -> bool:
        """Whether a log call's arguments do work on every call, the record written or not: an f-string
        formatted, or tensors read (``tuple(q.shape)``, ``x.max()``) — unless a level test gates it
        (``if logger.isEnabledFor(logging.DEBUG):``)."""
        if self._level_tested():
            return False
        tensors = self.tensors()
        for arg in node.args:
            value = arg.value
            if metadata_only(value):
                continue  # (``x.shape[1]``, ``x.numel()``: read on the host, nothing worked out)
            if isinstance(value, cst.FormattedString):
                if any(isinstance(p, cst.FormattedStringExpression) for p in value.parts):
                    return True
                continue
            # the names it reads (not the methods and fields named on the way: ``x.nonzero().tolist()``)
            fields = {id(a.attr) for a in find_all(value, cst.Attribute) if isinstance(a, cst.Attribute)}
            found = find_all(value, cst.Name)
            names = {n.value for n in found if isinstance(n, cst.Name) and id(n) not in fields}
            read = names & tensors or is_tensor(value, tensors, self.aliases)
            if read and not self._host_now(names, node):
                return True
        return False

    def _level_tested(self) -> bool:
        """Whether the code stands under a test of the logger's level (``if logger.isEnabledFor(DEBUG):``)."""
        return any("isEnabledFor" in code(test) for test, _orelse in self.ifs)

    def _host_now(self, names: set[str], node: cst.CSTNode) -> bool:
        """Whether every one of ``names`` was last given, above ``node`` in its function, a value brought
        back to the host (``expert_size = expert_size.tolist()``): a tensor's name that holds a list now."""
        lines = self._touched(node)
        fn = self.functions[-1][0] if self.functions else None
        if not names or lines is None or fn is None:
            return False
        top = self._lines(fn)[0]
        hosts = self.hosts()  # (names bound only to host values: ``mask = counts_cpu[:n] >= 0``)
        given = self.source_lines
        return all(name in hosts or _last_given_host(given, name, lines[0], top) for name in names)

    def _device_sync_here(self, node: cst.Call) -> RuleId | None:
        """A device sync where it stands: on the device path or in a loop, and not of a value named for the
        host (``seq_lens_cpu.max().item()``); off it, reading a value back is ordinary host code. A call
        whose only job is to make the host wait for the device (``synchronize()``, a copy told
        ``non_blocking=False``) is one in any function but a test (nobody adds a wait for nothing: a batch's
        ``_init_*`` runs per step); a value read of a tensor the function made on the device (``lens =
        make_lens(batch, device=self.device)`` … ``lens.max().item()``) is one wherever the code runs at work
        — not where it sets up, shows or stores, nor at import."""
        waits = _only_waits(node)
        name = self.names[-1] if self.names else ""
        if id(node) in self.unlogged:
            return None  # (handed to a debug log call under a level test: read when someone turns it on)
        if not waits and self._read_on_the_host(node, name):
            return None  # (a copy told to block waits for the device, whatever it copies into)
        if self.on_device_path() or self.loops:
            return RuleId.DEVICE_SYNC
        in_function = self.functions[-1][0] is not None and not name.lstrip("_").startswith("test")
        if in_function and waits:
            return RuleId.DEVICE_SYNC
        known = in_function and not _off_device_role(name) and self._read_at_work(node)
        return RuleId.DEVICE_SYNC if known else None

    def _read_on_the_host(self, node: cst.Call, name: str) -> bool:
        """Whether a read-back reads a value the code shows to be on the host: named for it
        (``seq_lens_cpu.max().item()``), bound to one, in a function named for the host
        (``validate_indices_cpu`` is handed host values), or in a stage its framework hands host values (a
        pipeline's ``postprocess``)."""
        hosted = _host_named(node) or _read_from(node) in self.hosts() or host_named(name)
        return hosted or self._host_stage(name) or self._from_host_library(node)

    def _from_host_library(self, node: cst.Call) -> bool:
        """Whether a read-back reads what a host library gave (``truncnorm.std(…).item()``, ``truncnorm``
        imported from ``scipy.stats``): no device there."""
        root, _fields = _receiver_chain(node)
        qualname = resolve(self.aliases, root) if root and not self.own(root) else ""
        return qualname.split(".", 1)[0] in HOST_LIBRARIES

    def _read_at_work(self, node: cst.Call) -> bool:
        """Whether a read-back reads a tensor this function made on the device, or one its declared type
        says is a tensor — or a value read back to be printed or logged (``print(ids.tolist())``)."""
        return _read_from(node) in self.on_device or self._typed_tensor(node) or id(node) in self.shown

    def _typed_tensor(self, node: cst.Call) -> bool:
        """Whether a read-back reads a tensor by its declared type (``self.counter.item()`` of a field
        annotated ``torch.Tensor``, ``int(seq_lens.max())`` of such a parameter)."""
        fn = self.functions[-1][0]
        if fn is None:
            return False
        func = node.func
        read = func.value if isinstance(func, cst.Attribute) else node.args[0].value if node.args else None
        while isinstance(read, cst.Call) and isinstance(read.func, cst.Attribute):
            read = read.func.value  # ``x.max().item()``: what is read is ``x``'s
        dotted = get_full_name_for_node(read) if read is not None else None
        if dotted is None:
            return False
        typed = self._typed.get(id(fn))
        if typed is None:
            owner = self.names[-2] if len(self.names) >= 2 else None
            typed = self._typed[id(fn)] = typed_tensors(fn, self.st.tensor_fields, owner)
        return dotted in typed

    def _made_here(self, func: cst.BaseExpression) -> str:
        """The last name of the class a method's receiver is made of on the spot (``threading.Event()``)."""
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
            return self._callee(func.value.func)[0].rsplit(".", 1)[-1]
        return ""

    def _dumped(self, node: cst.Call, method: str | None, rule: RuleId | None) -> RuleId | None:
        """A write whose bytes are a tensor's is a dump, by whatever writer (``f.write(t.numpy().tobytes())``,
        ``Path(p).write_bytes(...)``, ``os.write(fd, ...)``) — not into an in-memory buffer, nor by a module's
        own function (``torch.distributed.send(t, dst)``: a tensor handed to another rank, judged by its
        name like every module function)."""
        if rule == RuleId.FILE_WRITE and self._tensor_payload(node):
            return RuleId.TENSOR_DUMP
        if rule is None and method in WRITE_METHODS and self._tensor_payload(node):
            owner = node.func.value if isinstance(node.func, cst.Attribute) else None
            head = (get_full_name_for_node(owner) or "").split(".", 1)[0] if owner is not None else ""
            if head in self.aliases:
                return rule
            if owner is None or self.bound.get(code(owner), "") not in IN_MEMORY:
                return RuleId.TENSOR_DUMP
        return rule

    def _tensor_payload(self, node: cst.Call) -> bool:
        """Whether a call is given a tensor's data: an argument that is a tensor, or a chain of calls and
        attributes on one (``q.float().cpu().numpy().tobytes()``)."""
        for arg in node.args:
            value = arg.value
            while isinstance(value, (cst.Call, cst.Attribute, cst.Subscript)):
                if is_tensor(value, self.tensors(), self.aliases):
                    return True
                if isinstance(value, cst.Attribute) and value.attr.value in TO_HOST:
                    return True  # x.cpu().numpy(): a device array's data, brought to the host to go out
                value = value.func if isinstance(value, cst.Call) else value.value
            if is_tensor(value, self.tensors(), self.aliases):
                return True
        return any(_reads_array(arg.value) for arg in node.args)

    def _made_by(self, call: cst.Call) -> str:
        """What made a value: the qualified name of the call, ``+memory`` when a writer was given an in-memory
        buffer (``pickle.Pickler(io.BytesIO())``, or a name bound to one)."""
        qualname = self._callee(call.func)[0]
        if qualname in BOUND_WRITERS and call.args:
            first = call.args[0].value
            made = self._made_by(first) if isinstance(first, cst.Call) else self.bound.get(code(first), "")
            if made in IN_MEMORY:
                return qualname + "+memory"
        return qualname

    def _bound_writer(self, func: cst.BaseExpression, method: str | None) -> RuleId | None:
        """The rule of ``p.dump(...)`` when ``p`` is a writer object made in the scope (or right there)."""
        if not isinstance(func, cst.Attribute):
            return None
        owner = func.value
        made = self._made_by(owner) if isinstance(owner, cst.Call) else self.bound.get(code(owner), "")
        writer = BOUND_WRITERS.get(made)
        return writer[0] if writer is not None and method in writer[1] else None

    def _callee(self, func: cst.BaseExpression) -> tuple[str, str | None, str | None]:
        """(qualified name, method, receiver) of what is called; ``getattr(mod, "name")`` reads as
        ``mod.name``."""
        if (
            isinstance(func, cst.Call)
            and get_full_name_for_node(func.func) == "getattr"
            and len(func.args) >= 2
            and isinstance(func.args[1].value, cst.SimpleString)
        ):
            owner = get_full_name_for_node(func.args[0].value)
            name = func.args[1].value.evaluated_value
            if owner and isinstance(name, str) and name.isidentifier():
                return resolve(self.aliases, f"{owner}.{name}"), name, owner
        if isinstance(func, cst.Attribute):
            owner = _imported_chain(func.value)
            if owner is not None:  # __import__("pickle").dump, __import__("os").environ.update
                return f"{owner}.{func.attr.value}", func.attr.value, owner
        dotted = get_full_name_for_node(func)
        if dotted is not None and dotted.startswith("None."):  # libcst's name for an expression's attribute
            dotted = None
        method = receiver = None
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = get_full_name_for_node(func.value)
        qualname = resolve(self.aliases, dotted) if dotted else (f"<expr>.{method}" if method else "<call>")
        return qualname, method, receiver

    def visit_Raise(self, node: cst.Raise) -> None:
        self._statements(node)

    def visit_Del(self, node: cst.Del) -> None:
        self._statements(node)

    def visit_For(self, node: cst.For) -> None:
        if self._from_settings(node.iter):  # ``for lib in os.environ["PRELOAD"].split(":")``: each one is
            self.settings.update(_bound_names(node.target))

    def visit_Assign(self, node: cst.Assign) -> None:
        self._statements(node)
        self._bind_local_alias(node)
        named = node.targets[0].target if len(node.targets) == 1 else None
        made = node.value if isinstance(node.value, cst.Call) else None
        if isinstance(named, cst.Name) and made is not None and self._makes_client(made):
            self.clients.add(named.value)
        if isinstance(named, cst.Name):
            self._bind_path(named.value, node.value)
        if self._from_settings(node.value):
            for target in node.targets:
                self.settings.update(_bound_names(target.target))
        if _made_on_device(node.value):
            for target in node.targets:
                self.on_device.update(_bound_names(target.target))

    def _bind_path(self, name: str, value: cst.BaseExpression) -> None:
        """``so = Path("/opt/prebuilt") / f"{n}.so"``, then ``spec = spec_from_file_location(n, so)``: what is
        handed ``so`` or ``spec`` goes to the literal path."""
        held = (self.paths[n.value] for n in _names_in(value) if n.value in self.paths)
        path = _path_in(value) or next(held, "")
        if path:
            self.paths[name] = path

    def _from_settings(self, value: cst.BaseExpression) -> bool:
        """Whether ``value`` is read from the environment, or made of a name that was."""
        pos = self.get_metadata(PositionProvider, value, None) if self.source_lines else None
        if pos is not None:  # the lines it stands on first: most values are plainly not
            start = pos.start.line + self.unit.start - 1
            around = "".join(self.source_lines[start - 1 : pos.end.line + self.unit.start - 1])
            if not self._names_settings(around):
                return False
        return self._names_settings(code(value))

    def _names_settings(self, text: str) -> bool:
        """Whether ``text`` reads the environment, or names a local that holds what was read from it."""
        return reads_environment(text) or bool(self.settings & set(_IDENTIFIER.findall(text)))

    def _binds(self, node: cst.Assign) -> str:
        """What ``node`` binds a local name to that the walk follows: ``"made"`` — ``p = pickle.Pickler(fh)``,
        ``buf = io.BytesIO()`` (a writer or an in-memory buffer a call made) —, ``"alias"`` — ``th = torch``,
        ``dump = np.save`` (an imported module or function) —, else ``""``."""
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return ""
        if isinstance(node.value, cst.Call) and self._getattr_of_alias(node.value):
            return "alias"  # _save = getattr(torch, "save")
        if isinstance(node.value, cst.Call):
            func = node.value.func
            last = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
            if isinstance(func, cst.Name) and func.value in self.aliases:  # from pickle import Pickler as P
                last = self.aliases[func.value].rsplit(".", 1)[-1]
            return "made" if last in _MADE_NAMES else ""  # only what a rule follows
        if not isinstance(node.value, (cst.Name, cst.Attribute)) or not names_only(node.value):
            return ""  # (`cfg = get_config().compilation`: an object a call returned, no module's name)
        dotted = get_full_name_for_node(node.value)
        return "alias" if dotted and dotted.split(".", 1)[0] in self.aliases else ""

    def _getattr_of_alias(self, call: cst.Call) -> str | None:
        """``getattr(mod, "name")`` of an imported ``mod``, as ``mod.name``; else ``None``."""
        if get_full_name_for_node(call.func) != "getattr" or len(call.args) < 2:
            return None
        owner = get_full_name_for_node(call.args[0].value)
        name = call.args[1].value
        if not owner or owner.split(".", 1)[0] not in self.aliases or not isinstance(name, cst.SimpleString):
            return None
        value = name.evaluated_value
        return f"{owner}.{value}" if isinstance(value, str) and value.isidentifier() else None

    def _bind_local_alias(self, node: cst.Assign) -> None:
        """Remember the local names :meth:`_binds` says the walk follows."""
        how = self._binds(node)
        name = node.targets[0].target
        if not how or not isinstance(name, cst.Name):
            return
        if how == "made":
            assert isinstance(node.value, cst.Call)
            self.bound[name.value] = self._made_by(node.value)
        elif isinstance(node.value, cst.Call):  # getattr(module, "literal")
            dotted = self._getattr_of_alias(node.value)
            assert dotted is not None
            self.aliases[name.value] = resolve(self.aliases, dotted)
        else:
            dotted = get_full_name_for_node(node.value)
            assert dotted is not None
            self.aliases[name.value] = resolve(self.aliases, dotted)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._statements(node)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._statements(node)

    def visit_Try(self, node: cst.Try) -> None:
        self._statements(node)


def _bound_names(target: cst.BaseExpression) -> list[str]:
    """The plain names an assignment target binds (``a``, ``a, b``, ``(a, [b, c])``)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _bound_names(e.value)]
    return []


def _imported_chain(node: cst.BaseExpression) -> str | None:
    """``m.a.b`` of ``__import__("m").a.b`` (or ``importlib.import_module("m")…``): the attributes read off a
    module imported by a literal name; ``None`` for anything else."""
    attrs: list[str] = []
    while isinstance(node, cst.Attribute):
        attrs.append(node.attr.value)
        node = node.value
    module = _imported_by_name(node)
    return ".".join([module, *reversed(attrs)]) if module is not None else None


def _imported_by_name(node: cst.BaseExpression) -> str | None:
    """The module ``__import__("m")`` or ``importlib.import_module("m")`` imports, when named by a literal."""
    if not isinstance(node, cst.Call) or not node.args:
        return None
    called = get_full_name_for_node(node.func)
    first = node.args[0].value
    if called in ("__import__", "builtins.__import__", "importlib.import_module") and isinstance(
        first, cst.SimpleString
    ):
        name = first.evaluated_value
        return name if isinstance(name, str) and all(p.isidentifier() for p in name.split(".")) else None
    return None


def imported_names(names: Sequence[cst.ImportAlias]) -> list[tuple[str, str | None]]:
    """(dotted name, ``as`` name) of each name of an import statement."""
    return [
        (
            get_full_name_for_node(a.name) or "",
            a.asname.name.value if a.asname is not None and isinstance(a.asname.name, cst.Name) else None,
        )
        for a in names
    ]


# Methods that bring an array's data to the host as such: what they give is tensor data.
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")

# A network client's methods that set it up or let it go rather than talk (requests' ``Session.mount``,
# ``close``; a socket's options).
_CLIENT_SETUP = frozenset(
    {"close", "mount", "settimeout", "setsockopt", "setblocking", "fileno", "getsockname", "__enter__"}
    | {"__exit__", "set_debuglevel"}
)

# The last names of the calls whose results are followed to their use (writers, in-memory buffers).
_MADE_NAMES = frozenset(n.rsplit(".", 1)[-1] for n in (*BOUND_WRITERS, *IN_MEMORY))

CallTest = Callable[[cst.Call, str, str | None, str | None], bool]


@dataclass(frozen=True, slots=True)
class _Matcher:
    """A rule a call hits by what it is given (its arguments, its receiver), not by its name alone: the
    calls it looks at (qualified names or methods) and the test. The families (:mod:`.families`) say which
    names a rule knows; a matcher is the part of a family that needs the call itself."""

    rule: RuleId
    test: CallTest
    qualnames: frozenset[str] = frozenset()
    methods: frozenset[str] = frozenset()


def _first(node: cst.Call) -> cst.BaseExpression | None:
    return node.args[0].value if node.args else None


_MATCHERS: tuple[_Matcher, ...] = (
    _Matcher(RuleId.FILE_WRITE, lambda n, q, m, r: _writes(n), qualnames=OPENERS),
    # a path object's or a filesystem's open for writing: Path(p).open("a"), fs.open(p, "wb")
    _Matcher(RuleId.FILE_WRITE, lambda n, q, m, r: _opens_to_write(n), methods=OPEN_METHODS),
    _Matcher(RuleId.DEVICE_SYNC, lambda n, q, m, r: _to_cpu(n), methods=frozenset({"to"})),
    # a copy asked to block (``x.to(dev, non_blocking=False)``, ``buf.copy_(x, non_blocking=False)``)
    _Matcher(RuleId.DEVICE_SYNC, lambda n, q, m, r: _blocking(n), methods=frozenset({"to", "copy_", "cuda"})),
    _Matcher(
        RuleId.DEVICE_SYNC,
        lambda n, q, m, r: bool(n.args) and _reduction(n.args[0].value),
        qualnames=frozenset({"int", "float", "bool"}),
    ),
    _Matcher(
        RuleId.SWALLOWED_EXCEPTION,
        lambda n, q, m, r: any(
            get_full_name_for_node(a.value) in ("Exception", "BaseException") for a in n.args
        ),
        qualnames=SUPPRESSORS,
    ),
    _Matcher(RuleId.GLOBAL_SWITCH, lambda n, q, m, r: _switches(n, q, m, r), methods=ARGUMENT_METHODS),
    _Matcher(
        RuleId.DYNAMIC_EXEC,
        lambda n, q, m, r: (first := _first(n)) is not None and (_a_path(first) or _from_settings(first)),
        qualnames=NATIVE_LOADERS,
    ),
    _Matcher(
        RuleId.TENSOR_DUMP,
        lambda n, q, m, r: _writes_memmap(n),
        qualnames=MEMMAPS,
    ),
    _Matcher(
        RuleId.SLEEP,
        lambda n, q, m, r: all(isinstance(a.value, cst.List) and not a.value.elements for a in n.args[:3]),
        qualnames=frozenset({"select.select"}),
    ),
)


def _call_rule(node: cst.Call, qualname: str, method: str | None, receiver: str | None) -> RuleId | None:
    """The rule a call hits: by what it is given where a matcher looks at it, else by its name."""
    rule = rule_for_call(qualname, method, receiver)
    for matcher in _MATCHERS:
        if qualname in matcher.qualnames or method in matcher.methods:
            if matcher.test(node, qualname, method, receiver):
                return matcher.rule
            if qualname in OPENERS:
                return rule  # an open() that does not write is no write, whatever else matches
    return rule


def _from_settings(arg: cst.BaseExpression) -> bool:
    """A value read from the environment (``os.environ[...]``, ``os.getenv(...)``)."""
    return reads_environment(code(arg))


def _writes_memmap(node: cst.Call) -> bool:
    """``numpy.memmap(path, dtype, "w+")`` / ``mode="r+"``: a file written through memory."""
    modes = [a.value for a in node.args if a.keyword is not None and a.keyword.value == "mode"]
    positional = [a.value for a in node.args if a.keyword is None]
    modes += positional[2:3]
    return any(isinstance(m, cst.SimpleString) and str(m.evaluated_value) in ("w+", "r+") for m in modes)


def _a_path(arg: cst.BaseExpression) -> bool:
    """A literal naming a file by its path (a ``/`` in it), not a library the loader looks up by name."""
    return isinstance(arg, cst.SimpleString) and "/" in str(arg.evaluated_value or "")


_PATCHERS = ("patch", "patch.object", "patch.dict", "patch.multiple")


def _switches(node: cst.Call, qualname: str, method: str | None, receiver: str | None) -> bool:
    """A call that flips a process-wide switch by what it is given: a logger set to DEBUG (or NOTSET: every
    record), a ``mock.patch(...)`` started and left running."""
    if method == "setLevel" and ("log" in (receiver or "").lower() or qualname.startswith("logging.")):
        level = code(node.args[0].value) if node.args else ""
        return any(w in level for w in ("DEBUG", "NOTSET")) or level.strip() in ("10", "0", "'DEBUG'")
    if method == "start" and "mock" in qualname:
        return qualname.rsplit(".", 1)[0].endswith(_PATCHERS)
    return False


def _wrapped(node: cst.Call, qualname: str, method: str | None) -> cst.BaseExpression | None:
    """The callable a wrapper call runs (``functools.partial(f, ...)`` → ``f``), if it is one."""
    # by qualified name; ``run_in_executor``, a method of any event loop, by its method name alone
    at = WRAPPERS.get("run_in_executor" if method == "run_in_executor" else qualname)
    if at is None:
        return None
    if at < 0:
        return next(
            (a.value for a in node.args if a.keyword is not None and a.keyword.value == "target"), None
        )
    positional = [a.value for a in node.args if a.keyword is None and a.star == ""]
    return positional[at] if len(positional) > at else None


_PRINT_OPTIONS = ("file", "sep", "end", "flush", "exc_info", "stacklevel")


def _calls_kernels(lines: tuple[int, int], source_lines: Sequence[str]) -> bool:
    """Whether a function (its ``lines``) calls one named for running device code
    (``triton_kernel_fused_experts(…)``, ``ops.launch_combine(…)``), whatever module it comes from: a
    whole snake-case word of the called name's last part, by the text."""
    text = "".join(line.split("#", 1)[0] for line in source_lines[lines[0] - 1 : lines[1]])
    called = (m.group(1).lower().split("_") for m in KERNEL_CALL.finditer(text))
    return any(not LAUNCHING_WORDS.isdisjoint(words) for words in called)


def _computes_on_handed(fn: cst.FunctionDef, lines: tuple[int, int], source_lines: Sequence[str]) -> bool:
    """Whether a function hands what it is handed to a torch function (``torch.where(valid, rows, …)``,
    ``torch.cat([a, b])``): it computes on tensors it is given, each call — by the text."""
    names = [p.name.value for p in params_of(fn) if p.name.value not in ("self", "cls")]
    if not names:
        return False
    text = "".join(line.split("#", 1)[0] for line in source_lines[lines[0] - 1 : lines[1]])
    handed = "|".join(map(re.escape, names))
    return re.search(rf"\btorch\.(?:\w+\.)*\w+\(\s*\[?\s*(?:{handed})\b(?!\s*[.(\[])", text) is not None


def _names_in(value: cst.BaseExpression) -> list[cst.Name]:
    return [n for n in find_all(value, cst.Name) if isinstance(n, cst.Name)]


_BACK_ON_HOST = tuple(f".{method}()" for method in sorted(BROUGHT_BACK))


def _reads_array(value: cst.BaseExpression) -> bool:
    """Whether an expression reads a whole array's contents to the host on its way somewhere
    (``json.dumps(ids.tolist()) + "\\n"``, ``",".join(map(str, x.cpu().numpy()))``) — not a scalar
    (``.item()``)."""
    return any(
        isinstance(call.func, cst.Attribute) and call.func.attr.value in _CONTENTS
        for call in nodes_of(value, (cst.Call,))
        if isinstance(call, cst.Call)
    )


_CONTENTS = (TO_HOST - {"detach"}) | {"tolist"}


def _last_given_host(lines: Sequence[str], name: str, line: int, top: int) -> bool:
    """Whether the last assignment of ``name`` above ``line`` (down to ``top``, the def's first line)
    gives it a value brought back to the host: ``.tolist()``, ``.item()``, ``.numpy()``, ``int(…)`` — or an
    empty list or dict to fill (``feature_lens = []``): a tensor only where it is given one below."""
    given = re.compile(rf"^\s*{re.escape(name)}\s*(?::[^=]+)?=(?!=)\s*(.+?)\s*(?:#.*)?$")
    for k in range(line - 1, max(top, 1) - 1, -1):
        found = given.match(lines[k - 1]) if 0 < k <= len(lines) else None
        if found:
            value = found.group(1)
            return value.endswith(_BACK_ON_HOST) or value.startswith(("int(", "float(")) or value in _EMPTY
    return False


_EMPTY = frozenset({"[]", "{}", "list()", "dict()"})


def _made_on_device(value: cst.BaseExpression) -> bool:
    """A call that makes its result on a device: given ``device=`` (not the CPU), or a device as a plain
    argument (``convert_mapping(mapping, …, self.device)``), or ``.cuda()``."""
    if not isinstance(value, cst.Call):
        return False
    if isinstance(value.func, cst.Attribute) and value.func.attr.value == "cuda":
        return True
    for arg in value.args:
        if arg.keyword is not None and arg.keyword.value == "device":
            return "cpu" not in code(arg.value).lower()
    return any(arg.keyword is None and _a_device(arg.value) for arg in value.args)


def _a_device(value: cst.BaseExpression) -> bool:
    """An argument that names a device by its role: ``device``, ``self.device``, ``x.device`` (not a CPU
    one: ``cpu_device``)."""
    if isinstance(value, cst.Attribute):
        return value.attr.value in ("device", "_device")
    return isinstance(value, cst.Name) and value.value in ("device", "_device")


def _read_from(call: cst.Call) -> str:
    """The local name whose value a read-back call reads: the root of a method's receiver (``lens`` of
    ``lens.max().item()``), else of a function's first argument (``int(lens.max())``)."""
    return _receiver_chain(call)[0]


def _receiver_chain(call: cst.Call) -> tuple[str, list[str]]:
    """(the root name of what a read-back call reads, the fields read on the way to it — not the methods
    called: ``meta.seq_lens_cpu[n:].max()`` reads ``meta`` through ``seq_lens_cpu``)."""
    func = call.func
    node: cst.BaseExpression | None = func.value if isinstance(func, cst.Attribute) else None
    if isinstance(func, cst.Name) and call.args:
        node = call.args[0].value
    fields: list[str] = []
    method, collecting = False, True
    while isinstance(node, (cst.Attribute, cst.Call, cst.Subscript)):
        if isinstance(node, cst.Call) and _array_function(node):
            node = node.args[0].value  # ``torch.min(lens_cpu)``: what it reads is where its input is
            continue
        if isinstance(node, cst.Call):
            method = isinstance(node.func, cst.Attribute)
            collecting = collecting and method  # (past a call of no method, the fields are no longer told)
            node = node.func
            continue
        if isinstance(node, cst.Attribute) and collecting and not method:
            fields.append(node.attr.value)
        method = False
        node = node.value
    return (node.value if isinstance(node, cst.Name) else ""), fields


def _array_function(call: cst.Call) -> bool:
    """A function of torch called on a tensor (``torch.min(x)``): its value lives where its first argument
    does (torch's docs: an op runs on its input's device). (numpy's give host values whatever they read.)"""
    func = call.func
    return (
        bool(call.args)
        and call.args[0].keyword is None
        and isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value in _ARRAY_MODULES
    )


_ARRAY_MODULES = frozenset({"torch"})


def _only_waits(node: cst.Call) -> bool:
    """``….synchronize()`` (of the device, a stream, an event) or a copy told to block: a wait, no value."""
    func = node.func
    return (isinstance(func, cst.Attribute) and func.attr.value == "synchronize") or _blocking(node)


def _blocking(node: cst.Call) -> bool:
    """A torch copy told ``non_blocking=False``: the host waits until the copy is done."""
    told = [a.value for a in node.args if a.keyword is not None and a.keyword.value == "non_blocking"]
    return any(truth(value) is False for value in told)


def _to_cpu(node: cst.Call) -> bool:
    """``x.to("cpu")`` / ``x.to(device="cpu")`` / ``x.to(torch.device("cpu"))``."""
    for a in node.args:
        if a.keyword is not None and a.keyword.value != "device":
            continue
        value = a.value
        if isinstance(value, cst.Call) and (get_full_name_for_node(value.func) or "").endswith("device"):
            value = value.args[0].value if value.args else value
        if isinstance(value, cst.SimpleString) and str(value.evaluated_value or "").startswith("cpu"):
            return True
    return False


def _reduction(arg: cst.BaseExpression) -> bool:
    """Whether ``arg`` is a tensor reduction (``x.max()``, ``(a == b).all()``): its int() syncs (not
    ``float(x.item())``: the read is the ``.item()``'s, the float of a Python number is none)."""
    return (
        isinstance(arg, cst.Call)
        and isinstance(arg.func, cst.Attribute)
        and arg.func.attr.value in REDUCTIONS
        and arg.func.attr.value not in BROUGHT_BACK
    )


def _host_named(call: cst.Call) -> bool:
    """A read-back (``x.item()``, ``int(x)``…) of a value whose name says it is on the host, as serving
    frameworks name their host copies (``seq_lens_cpu``, ``kv_lens_arr_host``, ``positions_np``) — the
    root's name, or a field read on the way (``int(meta.seq_lens_cpu[n:].max())``), or what a comparison
    reduced reads (``bool((counts_cpu > 0).any())``)."""
    if any(map(host_named, _names_read(call))):
        return True
    compared = nodes_of(call, (cst.Comparison,))
    return bool(compared) and all(of_host_named(c) for c in compared if isinstance(c, cst.Comparison))


def _names_read(call: cst.Call) -> Iterator[str]:
    """The root of what a read-back call reads and the fields read on the way to the call."""
    root, fields = _receiver_chain(call)
    yield root
    yield from fields


def _unless_only_parsed(node: cst.Call, qualname: str, rule: RuleId | None) -> RuleId | None:
    """``rule``, but none for a call told by a flag to build nothing to run (``compile(src, name, "exec",
    ast.PyCF_ONLY_AST)``: a syntax tree, as ``ast.parse`` makes)."""
    return None if rule == RuleId.DYNAMIC_EXEC and _only_parses(node, qualname) else rule


def _only_parses(node: cst.Call, qualname: str) -> bool:
    """Whether a call is told by a flag to build nothing to run (:data:`.families.ONLY_PARSES`)."""
    told = ONLY_PARSES.get(qualname)
    if told is None:
        return False
    keyword, place, flag = told
    positional = [a for a in node.args if a.keyword is None and not a.star]
    given = [a.value for a in node.args if a.keyword is not None and a.keyword.value == keyword]
    given += [positional[place].value] if len(positional) > place else []
    return any(flag in code(value) for value in given)


def _as_told(node: cst.Call, qualname: str) -> RuleId | None:
    """The rule of a call a keyword told what to do (:data:`.families.WHEN_TOLD`:
    ``faulthandler.dump_traceback_later(1800, exit=True)`` kills the process after the dump,
    ``yaml.load(text, Loader=yaml.UnsafeLoader)`` runs what the document names)."""
    told = WHEN_TOLD.get(qualname)
    if told is None:
        return None
    keyword, values, rule = told
    given = [code(a.value).rsplit(".", 1)[-1] for a in node.args if a.keyword and a.keyword.value == keyword]
    return rule if not values.isdisjoint(given) else None


# What a waiter waits on until another holder sets it: made on the spot, nobody else holds one.
def _hang(node: cst.Call, method: str | None, made: str) -> RuleId | None:
    """``threading.Event().wait()``: a wait, without a timeout, on something made on the spot — nobody else
    holds it to set it, so the process hangs there as surely as on ``signal.pause()``."""
    return RuleId.PROCESS_EXIT if method in WAIT_METHODS and not node.args and made in NEVER_SET else None


def _waits(loop: cst.CSTNode) -> bool:
    """Whether a loop's job is waiting: it catches errors in its body (a retry, whose sleep is a backoff) or
    it is a ``while`` polling for a condition — not one that already waits for its work each time round
    (``outputs = await queue.get()``), where a sleep only holds the work up."""
    body: cst.CSTNode = getattr(loop, "body", loop)
    if holds(body, cst.Yield):
        return False  # (it hands on an item each time round — a stream —: a sleep holds each one up)
    if any(not _leaves(h) for h in nodes_of(body, (cst.ExceptHandler,))):
        return True  # (a handler that only leaves the loop — the iterator's end — is no retry)
    return isinstance(loop, cst.While) and not _awaits_work(loop) and not _counted(loop)


def _leaves(handler: cst.CSTNode) -> bool:
    """Whether an ``except`` block ends by leaving its loop (``return``, ``break``, ``raise``)."""
    body = handler.body.body if isinstance(handler, cst.ExceptHandler) else ()
    last = body[-1] if body else None
    small = last.body[-1] if isinstance(last, cst.SimpleStatementLine) and last.body else None
    return isinstance(small, (cst.Return, cst.Break, cst.Raise))


def _counted(loop: cst.While) -> bool:
    """Whether a ``while`` counts its way through work: its body steps a name its condition compares
    (``while layer_idx < num_layers: … layer_idx += 1``) — a ``for`` in other words, not a poll."""
    tested = {code(n) for n in nodes_of(loop.test, (cst.Name, cst.Attribute))}
    return any(
        isinstance(n, cst.AugAssign) and code(n.target) in tested
        for n in nodes_of(loop.body, (cst.AugAssign,))
    )


def _awaits_work(loop: cst.While) -> bool:
    """Whether a loop's body awaits something other than a sleep, or blocks until work comes
    (``item = self._load_queue.get()``, ``conn.recv()``): a worker's loop, not a poll."""
    found = _Awaits()
    walk(loop.body, found)
    return found.work


# The waits that only pass time (``asyncio.sleep``), from the rule table: awaiting one is no work arriving.
_SLEEPS = RULES[RuleId.SLEEP].targets
_NAPS = frozenset(
    q.rsplit(".", 1)[-1]
    for q in (_SLEEPS.calls if _SLEEPS is not None else ())
    if q.rsplit(".", 2)[-2] in ("time", "asyncio", "trio", "gevent")
)


# Methods that block until work comes (a socket's, a pipe's, a ZeroMQ socket's — their docs): a loop
# built on one waits for its work each time round. A queue's ``get()`` too (by the receiver's name).
_TAKES = frozenset({"recv", "recv_pyobj", "recv_multipart", "recv_json", "recv_bytes", "accept"})


class _Awaits(Dispatch):
    SKIPS_TRIVIA = True  # whitespace, comments and punctuation are not walked into (:mod:`.cstwalk`)

    def __init__(self) -> None:
        super().__init__()
        self.work = False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func  # a blocking take: ``queue.get()`` (no ``block=False``), ``sock.recv(n)``
        if not isinstance(func, cst.Attribute) or any(a.keyword is not None for a in node.args):
            return
        receiver = (get_full_name_for_node(func.value) or "").rsplit(".", 1)[-1].lower()
        method = func.attr.value
        takes = method in _TAKES or (method == "get" and not node.args and "queue" in receiver)
        self.work = self.work or takes

    def visit_Await(self, node: cst.Await) -> bool:
        call = node.expression
        func = call.func if isinstance(call, cst.Call) else None
        name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
        self.work = self.work or str(name) not in _NAPS
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


def _shown(node: cst.Call) -> list[cst.BaseExpression]:
    """What a print or log call formats: its arguments (not its options), and what their f-strings hold."""
    shown = [a.value for a in node.args if a.keyword is None or a.keyword.value not in _PRINT_OPTIONS]
    return shown + [
        part.expression
        for value in shown for piece in _pieces(value) if isinstance(piece, cst.FormattedString)
        for part in piece.parts if isinstance(part, cst.FormattedStringExpression)
    ]  # fmt: skip


def _pieces(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The strings of a string written in pieces (``f"a={a} " f"b={b}"``), else the value itself."""
    if isinstance(value, cst.ConcatenatedString):
        return [*_pieces(value.left), *_pieces(value.right)]
    return [value]


def _always_false(test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.Name) and test.value in ("False", "TYPE_CHECKING"):
        return True
    if isinstance(test, cst.Attribute) and test.attr.value == "TYPE_CHECKING":
        return True
    return isinstance(test, cst.Integer) and test.value == "0"


def _gate_kind(text: str, flags: set[str]) -> GateKind:
    """A test's gate kind, classified like every other gate (:func:`structure.gate_kind_of`)."""
    try:
        test = ast.parse(text, mode="eval").body
    except SyntaxError:
        return GateKind.CONDITION
    kind = gate_kind_of(text, test, flags)
    # A dead body never reaches here; its else is live.
    return GateKind.CONDITION if kind is GateKind.DEAD else kind


_MODE = re.compile(r"[rwxabt+]{1,3}")


def _opens_to_write(call: cst.Call) -> bool:
    """``x.open(mode)`` (a ``pathlib.Path``) or ``x.open(path, mode)`` (a filesystem, an archive) with a mode
    that writes."""
    modes = [a.value for a in call.args if a.keyword is not None and a.keyword.value == "mode"]
    modes += [a.value for a in call.args if a.keyword is None][:2]
    for mode in modes:
        text = _mode_text(mode)
        if text is not None and _MODE.fullmatch(text):
            return any(c in text for c in "wax+")
    return False


def _mode_text(mode: cst.BaseExpression) -> str | None:
    """A literal file mode's text (``"wb"``, ``b"a"``); ``None`` for anything else."""
    if not isinstance(mode, cst.SimpleString):
        return None
    value = mode.evaluated_value
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _opens_a_file(call: cst.Call) -> bool:
    """``open(path, "w")`` (by the builtin's name or a path's ``.open("w")``): a file opened for writing."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value == "open" and _writes(call)
    return isinstance(func, cst.Attribute) and func.attr.value == "open" and _opens_to_write(call)


def _printed_into(call: cst.Call, files: Collection[str]) -> bool:
    """A ``print(…, file=f)`` into one of ``files``."""
    return any(
        a.keyword is not None
        and a.keyword.value == "file"
        and isinstance(a.value, cst.Name)
        and a.value.value in files
        for a in call.args
    )


def _writes(call: cst.Call) -> bool:
    mode: cst.BaseExpression | None = None
    positional = [a for a in call.args if a.keyword is None]
    if len(positional) > 1:
        mode = positional[1].value
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "mode":
            mode = a.value
    text = _mode_text(mode) if mode is not None else None
    if text is not None:
        return any(c in text for c in "wax+")
    flags = code(mode) if mode is not None else ""  # os.open(path, os.O_WRONLY | os.O_CREAT)
    return any(f in flags for f in ("O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND"))


def _env_call(call: cst.Call) -> str:
    """What a call that changes the environment sets: ``KEY=VALUE`` (``putenv``, ``setdefault``), the
    keywords of ``update(KEY=...)``, the keys of a literal dict, or the variable it removes."""
    args = [a for a in call.args if a.keyword is None]
    if len(args) >= 2:
        return f"{literal(args[0].value)}={literal(args[1].value)}"
    keywords = [f"{a.keyword.value}={literal(a.value)}" for a in call.args if a.keyword is not None]
    if args and isinstance(args[0].value, cst.Dict):
        keywords += [
            f"{literal(e.key)}={literal(e.value)}"
            for e in args[0].value.elements
            if isinstance(e, cst.DictElement)
        ]
    elif args:
        keywords.append(literal(args[0].value))
    return ", ".join(keywords)[:200]


# A string literal that names a file: an absolute path in a place files are written to, a home directory,
# or a name with a data file's extension.
_FILE_LITERAL = re.compile(rf"""^(?:[rfbRFB]{{0,2}})["'](?:{FILE_PLACES}|[^"'\n]*\.{FILE_EXTENSIONS}["'])""")


def _words_of_name(name: str) -> set[str]:
    return set(name.rsplit(".", 1)[-1].lower().strip("_").split("_"))


_FORMAT_WRITER = re.compile(FORMAT_WRITER)


def _file_literal(call: cst.Call) -> bool:
    """Whether a call is handed a literal (or f-string) naming a file: ``"/tmp/g.dot"``, ``f"{d}/x.json"``."""
    return any(
        isinstance(a.value, (cst.SimpleString, cst.FormattedString)) and _FILE_LITERAL.match(code(a.value))
        for a in call.args
    )


def _literal_paths(call: cst.Call) -> str:
    for a in call.args:
        if isinstance(a.value, cst.SimpleString):
            value = a.value.evaluated_value
            if isinstance(value, str) and value.startswith(("/", "./", "~")):
                return value
        if isinstance(a.value, cst.FormattedString):
            text = code(a.value)
            if "/tmp" in text or "/dev/shm" in text:
                return text
    return ""


def _path_in(value: cst.BaseExpression) -> str:
    """An absolute or home path written as a literal in ``value`` (``Path("/opt/prebuilt") / name``), else
    ""."""
    for found in find_all(value, cst.SimpleString):
        text = found.evaluated_value if isinstance(found, cst.SimpleString) else None
        if isinstance(text, str) and text.startswith(("/", "~/")) and len(text) > 1 and "\n" not in text:
            return text
    return ""


def _destination(call: cst.Call) -> str:
    """Where a network call sends, when its arguments name it: a literal address (``"http://10.0.0.12:8099/
    usage"``, a default an environment variable may override) — a destination of its own, not the one a
    client's code posts to by its job; "" else."""
    for a in call.args:
        for found in find_all(a.value, cst.SimpleString, cst.FormattedString):
            text = found.evaluated_value if isinstance(found, cst.SimpleString) else code(found)
            if isinstance(text, str) and _ADDRESS.match(text):
                return text[:80]
    return ""


# A literal address: a URL of any scheme (``http://``, ``tcp://``, ``grpc://``), or a host and port.
_ADDRESS = re.compile(r"^(?:f?[\"']?)(?:[a-z][a-z0-9+.-]*://|\d{1,3}(?:\.\d{1,3}){3}:\d+)")


def judge_unit(
    unit: Unit,
    changed: set[int] | None,
    st: Structure,
    source_lines: Sequence[str],
    aliases: dict[str, str] | None = None,
) -> list[Hit]:
    """Rule hits on the changed lines of one unit (all lines when ``changed`` is ``None``).

    A unit that does not parse on its own (rare: a multi-line string dedented below the def) has no hits.
    """
    module = _parse(unit, source_lines)
    if module is None:
        return []
    walker = _Walker(unit, changed, st, aliases, source_lines)
    run(module, walker)
    return walker.hits


def judge_changed(
    unit: Unit, mine: Sequence[int], st: Structure, source_lines: Sequence[str], whole: bool = False
) -> tuple[list[Hit], list[Hit]]:
    """(every hit of the unit, those on the lines ``mine``): what :func:`judge_unit` of all its lines and
    its hits there would say. A first walk looks at ``mine`` only, which is how most changed units end (no
    hit there); the whole unit is walked, for the counts, only after it found one — or when ``whole``."""
    module = _parse(unit, source_lines)
    if module is None:
        return [], []
    places = positions(module, trivia=not _Walker.SKIPS_TRIVIA)
    wanted = set(mine)
    if not whole and mine and not wanted.issuperset(range(unit.start, unit.end + 1)):
        # (a unit written whole — a new file's, a function rewritten — is walked once: the first walk
        # would be the whole one)
        first = _Walker(unit, wanted, st, None, source_lines, horizon=max(mine))
        run(module, first, places)
        if not first.hits:
            return [], []
    walker = _Walker(unit, None, st, None, source_lines, edited=mine)
    run(module, walker, places)
    return walker.hits, [h for h in walker.hits if any(n in wanted for n in range(h.line, h.end_line + 1))]


def judge_statements(st: Structure, source_lines: Sequence[str]) -> list[Hit]:
    """Every rule hit of a whole file, for a file without a baseline: each simple statement a rule could
    match is judged on its own (a few lines, where the def around it is hundreds), with the context the
    statement cannot see taken from the file's structure — its gate, its loop, whether it is dead code,
    and the imports of the functions around it. A line no simple statement holds (a compound statement's
    header: ``with open(...)``, ``except Exception:``) is judged with its whole unit."""
    from .rules import could_hit

    every_alias = dict(st.aliases)
    for local in st.local_aliases.values():
        every_alias.update(local)
    hits: list[Hit] = []
    seen: set[tuple[int, int]] = set()
    headers: list[int] = []
    classes = st.class_names
    for n, text in enumerate(source_lines, 1):
        stripped = text.lstrip()
        if not stripped or stripped.startswith("#") or not could_hit(text, "", every_alias, classes=classes):
            continue
        span = st.simple_statement_at(n)
        if span is None:
            headers.append(n)
            continue
        if span in seen:
            continue
        seen.add(span)
        owner = st.qualname_at(span[0]) or ""
        unit = Unit(span[0], span[1], _indent(source_lines, span[0]), owner)
        hits += [_in_context(h, st) for h in judge_unit(unit, None, st, source_lines, st.aliases_at(owner))]
    for unit, lines in units_for(headers, st, source_lines).items():
        hits += judge_unit(unit, set(lines), st, source_lines)
    return hits


def _in_context(hit: Hit, st: Structure) -> Hit:
    """A hit of a statement judged alone, given the gate, loop and deadness of where it stands."""
    from dataclasses import replace

    dead = st.is_dead(hit.line)
    kind, cond = hit.gate_kind, hit.gate
    if kind is None:
        gate = st.gate_at(hit.line)
        if gate is not None:
            kind, cond = gate.kind, gate.condition
    if dead or kind is GateKind.DEAD:
        return replace(hit, gate_kind=GateKind.DEAD, gate="unreachable", dead=True, loop=st.in_loop(hit.line))
    return replace(hit, gate_kind=kind, gate=cond, loop=hit.loop or st.in_loop(hit.line))


Site = tuple[str, str, str]  # what a hit is counted by: rule, qualified name, where it writes (a write's)
# (where a write goes, where a load reads from)
_WHERE = frozenset({RuleId.FILE_WRITE, RuleId.TENSOR_DUMP, RuleId.NETWORK, RuleId.DYNAMIC_EXEC})


def site(h: Hit) -> Site:
    """What a hit is counted by against the pristine unit: its rule and callee — and, for a write, where
    it writes (``open(os.devnull, "w")`` turned into ``open("/tmp/rank3.log", "a")`` is a new write); a log
    line by its level, whichever logger writes it (``logger.warning`` made ``logging.getLogger(…).warning``
    is the same line)."""
    callee = h.qualname.rsplit(".", 1)[-1] if h.rule == RuleId.LOGGING else h.qualname
    if h.rule == RuleId.DEVICE_SYNC and not _DOTTED.fullmatch(callee):
        # a decision by its shape, whatever its names (``computed != limit`` renamed ``batch_max != limit``)
        callee = _LOCAL_NAME.sub("_", callee)
    return (h.rule, callee, h.detail if h.rule in _WHERE else "")


_DOTTED = re.compile(r"[\w.]+")
# A name that is no attribute (``x`` of ``x.shape != y``, not ``shape``).
_LOCAL_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


# Making something: setup when nothing of the step is handed over, per step when tensors are (an attention
# backend's metadata ``build(…)``, ``_build_dispatch_plan(counts: Tensor)``).
_MAKING = re.compile(r"^_*(?:build|create)")
# Verbs of setting up that, handed the step itself, set up each step (``init_forward_metadata(batch)``).
_STEP_SETUP_VERBS = frozenset({"init", "initialize", "setup", "prepare"})
# Roles by the name's verb (:func:`.rules.role_verb`: ``log_stats``, not ``logits_…``), or by what it names.
_SETUP_AND_STORAGE_VERBS = frozenset(
    {"test", "init", "initialize", "setup", "save", "load", "dump", "export", "import", "convert"}
    | {"serialize", "deserialize", "repr", "str", "format", print.__name__, "show", "debug", "log", "plot"}
    | {"summary", "describe"}
)
# (``*_weights``: loading, making, tying them — not a quantization method's ``apply_weights``, which runs in
# every forward of the layer it serves, by the frameworks' linear-method interface)
_SETUP_AND_STORAGE = re.compile(
    r"^_*(?:from_|to_dict|to_json|check_weights)|checkpoint|state_dict|pretrained|(?<!apply)_weights$"
)


def _launchers(st: Structure, lines: Sequence[str], kernels: frozenset[str]) -> frozenset[str]:
    """The names of the file's functions that launch one of ``kernels`` on a grid, and of those that call
    such a function (two calls deep)."""
    texts = {fn.name: "".join(lines[fn.lineno - 1 : fn.end_lineno or fn.lineno]) for fn in st.defs.values()}
    found = {n for n, t in texts.items() if any(m.group(1) in kernels for m in LAUNCH.finditer(t))}
    for _ in range(2):
        called = re.compile(rf"(?<![.\w])(?:{'|'.join(map(re.escape, sorted(found)))})\(") if found else None
        found |= {n for n, t in texts.items() if called is not None and called.search(t)}
    return frozenset(found)


def _kernels(st: Structure, lines: Sequence[str]) -> frozenset[str]:
    """The names of the file's kernels: its defs a kernel compiler takes (``@triton.jit``), read from its
    ast, and the names it imports that it launches as one (``kernel[grid](…)``: a name of another module
    called on a grid is a kernel launched — lowercase, as kernels are named, not a generic class given its
    parameters)."""
    out = set()
    for fn in st.defs.values():
        for d in fn.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            if ast.unparse(target).rsplit(".", 1)[-1] in _KERNEL_DECORATORS:
                out.add(fn.name)
    launched = {m.group(1) for line in lines if "](" in line for m in LAUNCH.finditer(line)}
    return frozenset(out | {name for name in launched if name in st.aliases})


_KERNEL_DECORATORS = ("jit", "kernel")


def _compiled(fn: cst.FunctionDef) -> bool:
    """A function a kernel compiler takes (``@triton.jit``, ``@cute.jit``, ``@cute.kernel``,
    ``@numba.cuda.jit``): its code is traced into device code, where a value decided is no host read."""
    for d in fn.decorators:
        target = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        name = get_full_name_for_node(target) or ""
        if name.rsplit(".", 1)[-1] in _KERNEL_DECORATORS:
            return True
    return False


def _calls_in(node: cst.CSTNode) -> Iterator[cst.Call]:
    """The calls in an expression (``x.tolist()`` of ``f"{x.tolist()}"``), itself included."""
    yield from (c for c in find_all(node, cst.Call) if isinstance(c, cst.Call))


def _off_device_role(name: str) -> bool:
    """A function whose role is not to compute on the device each step: setting up, showing, or storing."""
    if name in ("__init__", "__repr__", "__str__") or AFTER_LOADING.search(name.lower()) is not None:
        return True  # (``process_weights_after_loading``: part of loading)
    return role_verb(name) in _SETUP_AND_STORAGE_VERBS or bool(_SETUP_AND_STORAGE.search(name.lower()))
