"""One changed file as every step of the analysis reads it: the change handed in (:class:`CodeChange`), the
structure of a text (:func:`locate`), the maker of a file's findings and the edit they share, and the small
readings of code text the steps all use."""

from __future__ import annotations

import ast
import bisect
import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from ..model import Finding, Gate, Kind, RuleId, Severity
from .aliases import last_name
from .bounds import MAX_LINE, too_wild
from .structure import Structure, structure

__all__ = [
    "QUOTED",
    "STRING_LITERAL",
    "CodeChange",
    "Edit",
    "Maker",
    "code_of",
    "forced_open",
    "innermost_def",
    "last_name",
    "locate",
    "nodes_at",
]


@dataclass(frozen=True, slots=True)
class CodeChange:
    """One changed ``.py`` file to judge; ``before`` is ``None`` when no pristine source was found."""

    path: str  # as shown in findings
    before: bytes | None
    after: bytes
    distribution: str | None = None
    version: str | None = None
    # Functions of the file a framework's entry point elsewhere calls on every step → that entry point.
    hot: tuple[tuple[str, str], ...] = ()


@functools.lru_cache(maxsize=4)  # the pristine text is located for its scopes, then for the cosmetic test
def locate(source: str) -> Structure:
    """The structure of ``source``: read with ``ast``, else with libcst (a newer Python's syntax), else what
    a file no grammar parses still tells."""
    wild = _wild(source)
    if wild is not None:  # no parser sees it: a crash or gigabytes, not a verdict
        return Structure([], {}, set(), grammar=None, syntax_error=wild)
    tree = _tree_of(source)
    st = structure(source, tree) if tree is not None else None
    if st is None:
        from .newer import structure_of_newer

        st = structure_of_newer(source)
    return st


def _wild(source: str) -> tuple[int, str] | None:
    """:func:`.bounds.too_wild` of ``source``, asked only where it can say something: ``ast``, which CPython
    bounds, is tried first on a text too short to hold a line too long — one it parses nests no deeper than
    CPython's 200 brackets, so is not too wild (and its tree is kept for what asks next)."""
    if len(source) <= MAX_LINE and _tree_of(source) is not None:
        return None
    return too_wild(source)


@functools.lru_cache(maxsize=4)  # the pristine text: for the cosmetic test, then for its structure
def _tree_of(source: str) -> ast.Module | None:
    """``source`` parsed with ``ast`` (``None``: not by the running interpreter's grammar)."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


_SOURCE_SHOWN = 500  # characters of a line a finding quotes


@dataclass(frozen=True, slots=True)
class Maker:
    """Builds the findings of one file (its path, distribution, lines and baseline are shared)."""

    change: CodeChange
    lines: Sequence[str]
    baseline: tuple[str, ...]

    def __call__(
        self,
        kind: Kind,
        rule: RuleId,
        severity: Severity,
        line: int,
        end: int,
        function: str | None,
        message: str,
        gate: Gate | None = None,
    ) -> Finding:
        src = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        if len(src) > _SOURCE_SHOWN:  # a finding quotes its line, not a 5 MB data table
            src = src[:_SOURCE_SHOWN] + f"… ({len(src)} characters)"
        c = self.change
        return Finding(
            kind=kind,
            severity=severity,
            rule=rule,
            path=c.path,
            message=message,
            distribution=c.distribution,
            version=c.version,
            line=line,
            end_line=end,
            function=function or None,
            gate=gate,
            reach=None,
            evidence=self.baseline,
            patch_set=None,
            source=src,
        )

    def cosmetic(self, st: Structure, line: int, end: int, message: str) -> Finding:
        return self(
            Kind.COSMETIC_CHANGE,
            RuleId.COSMETIC_CHANGE,
            Severity.MINOR,
            line,
            end,
            st.qualname_at(line),
            message,
        )

    def functional(self, st: Structure, line: int, end: int, message: str) -> Finding:
        return self(
            Kind.FUNCTIONAL_CHANGE,
            RuleId.FUNCTIONAL_CHANGE,
            Severity.MINOR,
            line,
            end,
            st.qualname_at(line),
            message,
        )

    def dead(self, st: Structure, line: int, end: int) -> Finding:
        """Code added where it cannot run: it changes nothing (reported, at the lowest severity)."""
        return self(
            Kind.FUNCTIONAL_CHANGE,
            RuleId.FUNCTIONAL_CHANGE,
            Severity.INFO,
            line,
            end,
            st.qualname_at(line),
            "code added where it cannot run (unreachable)",
        )

    def commented_out(self, st: Structure, n: int) -> Finding:
        return self(
            Kind.INJECTED_CODE,
            RuleId.COMMENTED_OUT_CODE,
            Severity.MINOR,
            n,
            n,
            st.qualname_at(n),
            "code left behind in a comment",
            st.gate_at(n),
        )


@dataclass(frozen=True, slots=True)
class Edit:
    """One changed file as every step of :func:`analyse` reads it: the pristine text (``None`` without one),
    the structure and lines of the installed text, and the maker of its findings."""

    before: str | None
    st: Structure
    lines: Sequence[str]
    finding: Maker

    @property
    def text(self) -> str:
        """The installed text (its lines joined)."""
        return "".join(self.lines)


STRING_LITERAL = re.compile(r"""[rbfuRBFU]{0,2}(?:'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*")""")


def forced_open(st: Structure, changed: set[int]) -> list[tuple[int, int, str]]:
    """The ``if`` statements the edit made always true (``if cond or True:``, ``if 1:``): (first and last
    line of the body that now always runs, the test)."""
    out = []
    for span in st.ifs:
        if span.start in changed and _always_true(span.test):
            last = (span.orelse - 1) if span.orelse is not None else span.end
            out.append((span.start + 1, last, span.test))
    return out


def _always_true(test: str) -> bool:
    """Whether a condition's source is true whatever it reads: a true constant, or ``… or True``."""
    try:
        node = ast.parse(test.strip(), mode="eval").body
    except SyntaxError:
        return False
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return any(isinstance(v, ast.Constant) and bool(v.value) for v in node.values)
    return False


def innermost_def(
    defs: Iterable[ast.FunctionDef | ast.AsyncFunctionDef], line: int
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost of ``defs`` whose span holds ``line``."""
    found: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    for node in defs:
        if node.lineno <= line <= (node.end_lineno or 0) and (found is None or node.lineno > found.lineno):
            found = node
    return found


QUOTED = re.compile(r"""(["'])(?:\\.|(?!\1).)*\1""")


def code_of(line: str) -> str:
    """A line without its comment (``pass  # assert x`` is ``pass``): a check written into a comment is not
    a check that moved — each line of a statement written over several. Quotes are followed so that a ``#``
    inside a string stays."""
    if "#" not in line:
        return line
    if "\n" in line.rstrip("\n"):  # a statement over several lines: each line without its comment
        return "".join(code_of(part) for part in line.splitlines(keepends=True))
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote and line[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return line[:i] + "\n"
    return line


def nodes_at(tree: ast.AST | None, lines: set[int]) -> Iterator[ast.stmt]:
    """The statements whose lines hold one of ``lines``, outermost first (only their branches walked)."""
    todo = list(ast.iter_child_nodes(tree)) if tree is not None else []
    ordered = sorted(lines)
    while todo:
        node = todo.pop()
        if not isinstance(node, ast.stmt):
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        at = bisect.bisect_left(ordered, first)
        if at < len(ordered) and ordered[at] <= (node.end_lineno or node.lineno):
            yield node
            todo += ast.iter_child_nodes(node)
            todo += [s for h in getattr(node, "handlers", []) for s in h.body]
