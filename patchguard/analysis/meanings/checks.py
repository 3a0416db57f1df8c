"""Checks taken out or neutralised: a ``raise`` or ``assert`` gone, a condition narrowed or forced, a gate
forced open, a check made conditional, a refusal pre-empted by an answer typed above it, a flag that makes
a call check turned off, a lookup that raised made to skip."""

from __future__ import annotations

import ast
import collections
import copy
import functools
import itertools
import re
from collections.abc import Collection, Iterator, Mapping, Sequence

from ...diffs import split_lines
from ...model import Finding, RuleId
from ..cases import compare, level_asked
from ..change import (
    QUOTED,
    Edit,
    _tree_of,
    code_of,
    forced_open,
    innermost_def,
    last_name,
    locate,
    nodes_at,
)
from ..families import (
    CHECKING_CALL,
    CHECKING_FLAG_NAME_WORDS,
    LENIENT_FLAG_NAME_WORDS,
)
from ..reach.calls import statements_in
from ..structure import Region
from .refusals import (
    _ALLOWING,
    _ASKING,
    _DECIDING,
    _EXIT_NODES,
    _FLAG_WORDS,
    _LITERALS,
    _PROCESS_EXIT,
    _REFUSED,
    _REFUSING,
    _TARGETED,
    _answers_admission,
    _answers_no,
    _bails,
    _block_below,
    _block_header,
    _check_finding,
    _condition,
    _decision,
    _docstring,
    _function_at,
    _Gone,
    _guards_raise_node,
    _header_at,
    _Literal,
    _no_else,
    _number,
    _one_line,
    _output_only,
    _own_statements,
    _passes_a_refusal,
    _refusal,
    _short,
    _squeeze,
    _squeezed_source,
    _statement,
    _tests_a_report,
    _turns_off,
    _words,
)

__all__ = [
    "answers_overridden",
    "checks_made_conditional",
    "disqualifiers_gone",
    "flags_turned_off",
    "forced_conditions",
    "gates_forced_open",
    "lookups_softened",
    "narrowed_checks",
    "refusals_preempted",
    "removed_checks",
]


_CODE_START = ("raise ", "raise\n", "assert ", "assert(")


def removed_checks(regions: Sequence[Region], edit: Edit, found: Sequence[Finding] = ()) -> list[Finding]:
    """A ``raise`` or ``assert`` of the pristine code that is gone — not one that moved, was re-wrapped or
    strengthened (``assert a`` → ``assert a and b``), nor one that left with its whole function or class.
    The raise of an ``except`` block whose handler stays: the error is swallowed there (unless ``found``
    says so already, of the handler's own lines)."""
    out: list[Finding] = []
    if not _removes_checks(regions, edit):
        return out  # (most edits remove no raise, assert or bail-out: the whole files are not read for them)
    gone = _Gone.of(edit)
    sources = (_squeezed_source(edit.text), _squeezed_source(edit.before or ""))
    asserts = list(_assert_lines(edit.lines) - _assert_lines(gone.before_lines))  # the new ones
    for r in regions:
        out += _removed_in(r, edit, gone, (sources, asserts), found)
    return out


def _removed_in(
    r: Region, edit: Edit, gone: _Gone, kept: tuple[tuple[str, str], list[str]], found: Sequence[Finding]
) -> list[Finding]:
    """The checks among one region's removed lines that are gone (:func:`removed_checks`); ``kept`` is
    both files squeezed and the asserts the edit added."""
    out: list[Finding] = []
    line = max(r.start, 1)  # where the removed lines were (the first line after them for a deletion)
    added = [edit.lines[n - 1].strip() for n in r.lines]
    for i, old in enumerate(r.removed):
        s = old.strip()
        handler = _swallows_now(gone, r.old_start + i, s, line, found)
        if s.startswith(_EXITS) and not handler and not _CHECK_CALL.match(s):
            checked = any(_CHECK_CALL.match(a) for a in added)  # another check took the guard's place
            out += [] if checked else _bail_gone(edit, gone, r, i, line)
            continue
        if not (handler or _checking(s, edit.before)):
            continue
        if gone.left_with(r, i) or (not handler and _still_asked(r, i, edit, gone, kept, added)):
            continue  # (a handler's raise is counted in its handler: a bare ``raise`` elsewhere is another)
        silenced = gone.silenced(r.old_start + i) if not handler and added else ""
        out += _gone_check(edit, line, s, handler, silenced)
    return out


def _swallows_now(gone: _Gone, old_line: int, text: str, line: int, found: Sequence[Finding]) -> bool:
    """Whether the removed line ``text`` (at ``old_line`` of the pristine file) was the raise of an
    ``except`` block whose handler stays, or one that passed on what it caught — the error is let go there
    now — unless ``found`` says so already of the handler's line."""
    at = gone.handler_raise(old_line, text, line)  # the except line of one that swallows now
    said = any(f.rule == RuleId.SWALLOWED_EXCEPTION and f.line == at for f in found)
    relays = text.startswith(("raise ", "raise(")) and gone.relays_caught(old_line)
    return (bool(at) or relays) and not said


def _removes_checks(regions: Sequence[Region], edit: Edit) -> bool:
    """Whether a removed line may be a check (or a bail-out's exit) at all."""
    removed = [old.strip() for r in regions for old in r.removed]
    checks = any(_checking(t, edit.before) or _a_check(t) or _PROCESS_EXIT.match(t) for t in removed)
    return checks or _guard_exits(regions, edit)


def _bail_gone(edit: Edit, gone: _Gone, r: Region, i: int, line: int) -> list[Finding]:
    """The finding of a bail-out taken out at removed line ``i`` of ``r`` — a targeted edit: a function
    rewritten around it (more than :data:`_TARGETED` lines removed) is another thing."""
    disabled = _commented_out(r, edit)  # the guard is still there, as a comment: switched off, not rewritten
    bail = gone.bail_out(r.old_start + i, disabled) if len(r.removed) <= _TARGETED else ""
    return [_check_finding(edit, RuleId.REMOVED_CHECK, line, f"check neutralised: {bail}")] if bail else []


def _commented_out(r: Region, edit: Edit) -> bool:
    """Whether every line ``r`` removed is among its added lines as a comment (``# elif …``)."""
    commented = {_squeeze(line.strip().lstrip("#")) for n in r.lines if (line := edit.lines[n - 1]).strip()}
    return bool(r.removed) and all(_squeeze(old.strip()) in commented for old in r.removed if old.strip())


def _guard_exits(regions: Sequence[Region], edit: Edit) -> bool:
    """Whether a removed line was, by the pristine text, the ``return``/``continue``/``break`` that ends the
    body of an ``if`` (the line below it is less indented, the header above ends with a colon)."""
    exits = [(r, i) for r in regions for i, old in enumerate(r.removed) if old.strip().startswith(_EXITS)]
    if not exits or edit.before is None:
        return False
    lines = split_lines(edit.before)
    return any(_ends_a_block(lines, r.old_start + i) for r, i in exits)


def _ends_a_block(lines: Sequence[str], line: int) -> bool:
    if not 0 < line <= len(lines):
        return False
    indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
    after = line - 1 + _statement(lines, line - 1).count("\n")  # past the lines the statement goes on over
    below = next((t for t in lines[after:] if t.strip() and not t.lstrip().startswith("#")), "")
    if below and len(below) - len(below.lstrip()) >= indent:
        return False
    header = _block_header(lines, line)
    return header.endswith(":") and not header.startswith(_NOT_IF_HEADERS)


_NOT_IF_HEADERS = ("else", "try", "except", "finally", "def ", "async ", "class ", "for ", "while ", "with ")


def _assert_lines(lines: Sequence[str]) -> collections.Counter[str]:
    return collections.Counter(_squeeze(line) for line in lines if line.lstrip().startswith("assert"))


def _still_asked(
    r: Region, i: int, edit: Edit, gone: _Gone, kept: tuple[tuple[str, str], list[str]], added: list[str]
) -> bool:
    """Whether the check at removed line ``i`` of ``r`` is still asked: moved, replaced, strengthened
    (:func:`_lives_on`), or an assertion with a part taken out into a name (:func:`_assert_inlined`)."""
    s = r.removed[i].strip()
    if s.startswith("assert") and _assert_inlined(gone, r.old_start + i, edit, max(r.start, 1)):
        return True  # (``assert n == sum(…)`` → ``total = sum(…)``; ``assert n == total``: the same test)
    if _collected_at_once(s, edit, max(r.start, 1)):
        return True
    added = [a for a in added if not _makes_it_so(a, edit.text)]  # (no check takes the guard's place)
    return _lives_on(_squeeze(_statement(r.removed, i)), s, kept[0], kept[1], added)


def _makes_it_so(text: str, source: str) -> bool:
    """Whether a stripped line calls a function of the file named for checking that, by what it does, makes
    the thing so rather than refuses (``self._ensure_workspace(n)`` allocates: it sets an attribute or an
    item): called where a ``raise`` stood, the case it refused is now worked around."""
    call = _CHECK_CALL.match(text)
    if call is None:
        return False
    name = call.group().rstrip("(").rsplit(".", 1)[-1]
    return f"def {name}(" in source and _sets_state(source, name)


@functools.lru_cache(maxsize=64)
def _sets_state(source: str, name: str) -> bool:
    """Whether the file's function (or method) ``name`` gives an attribute or an item a value."""
    for node in _defs_named(source, name):
        for stmt in _own_statements(node.body):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
            if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and any(
                isinstance(t, (ast.Attribute, ast.Subscript)) for t in targets
            ):
                return True
    return False


def _collected_at_once(text: str, edit: Edit, line: int) -> bool:
    """Whether a removed ``refused.append(x)`` (a case put among the refused ones) is a loop rewritten as a
    comprehension: the installed function around ``line`` gives ``refused`` a comprehension — the same
    cases collected at once."""
    kept = _KEPT_AMONG.match(text)
    fn = innermost_def(edit.st.defs.values(), line) if kept is not None else None
    if kept is None or fn is None:
        return False
    target = text[: kept.end() - 1].rsplit(".", 1)[0]
    comprehensions = (ast.ListComp, ast.SetComp, ast.GeneratorExp)
    for node in ast.walk(fn):
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) else None
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if isinstance(value, comprehensions) and any(
            t is not None and ast.unparse(t) == target for t in targets
        ):
            return True
    return False


def _assert_inlined(gone: _Gone, old_line: int, edit: Edit, line: int) -> bool:
    """Whether the pristine assertion at ``old_line`` is asked again in the installed function around
    ``line`` once the names that function gives (``total = sum(…)``) are put back in its tests — as many
    times as the pristine function asked it: a part taken out into a name, the same test."""
    tree = gone.before.tree if gone.before is not None else None
    was = next((n for n in nodes_at(tree, {old_line}) if isinstance(n, ast.Assert)), None)
    fn = innermost_def(edit.st.defs.values(), line)
    pristine = innermost_def(gone.before.defs.values() if gone.before is not None else (), old_line)
    if was is None or fn is None or pristine is None:
        return False
    try:
        key = ast.dump(was.test)
        asked = sum(isinstance(s, ast.Assert) and ast.dump(s.test) == key for s in statements_in(pristine))
        return _asserts_put_back(fn, key) >= asked
    except (RecursionError, MemoryError):
        return False  # (a test nested deeper than Python's recursion follows: not read)


def _asserts_put_back(fn: ast.AST, key: str) -> int:
    """How many assertions of ``fn`` ask the test ``key`` (an ``ast.dump``) once the names ``fn`` gives are
    put back in them."""
    nodes = list(ast.walk(fn))
    given = {
        s.targets[0].id: s.value
        for s in nodes
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
    }
    put_back = _PutBack(given)
    asserts = [s for s in nodes if isinstance(s, ast.Assert)]
    return sum(ast.dump(put_back.visit(copy.deepcopy(s.test))) == key for s in asserts)


class _PutBack(ast.NodeTransformer):
    """Names replaced by the expressions they were given (``self.x`` too, where given as ``self.x``)."""

    def __init__(self, given: Mapping[str, ast.expr]) -> None:
        self.given = given

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return self.given.get(node.id, node) if isinstance(node.ctx, ast.Load) else node

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        key = _own_field(node)
        if key is not None and isinstance(node.ctx, ast.Load) and key in self.given:
            return self.given[key]
        visited: ast.expr = self.generic_visit(node)  # type: ignore[assignment]
        return visited


def _own_field(node: ast.expr) -> str | None:
    """``self.x`` as written, else ``None``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


_GIVING = (ast.AugAssign, ast.AnnAssign)


def _put_back_one_sided(
    edit: Edit, r: Region, n: int, after: ast.expr, before: list[ast.expr]
) -> tuple[ast.expr, list[ast.expr]]:
    """The installed condition at line ``n`` and the pristine ones it replaced, each name that one side
    alone reads put back as what its function gives it (:func:`_given_put_back`): the same condition, its
    part taken out into a name, reads the same."""
    assert edit.before is not None
    read = [_read_names(c) for c in before]
    now = _read_names(after)
    both = now.intersection(*read)
    if not now.union(*read) - both:
        return after, before  # (both sides read the same names: nothing to put back)
    after = _given_put_back(after, innermost_def(edit.st.defs.values(), n), n, both)
    fn = innermost_def(locate(edit.before).defs.values(), r.old_start)
    return after, [_given_put_back(c, fn, r.old_start, both) for c in before]


def _read_names(test: ast.expr) -> set[str]:
    """The names and ``self`` fields a condition reads."""
    read = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    return read | {key for n in ast.walk(test) if (key := _own_field(n)) is not None}  # type: ignore[arg-type]


def _given_put_back(test: ast.expr, fn: ast.AST | None, line: int, kept: Collection[str] = ()) -> ast.expr:
    """``test`` (at ``line`` of ``fn``) with each name — or ``self`` field — ``fn`` gives once, above the
    line, put back as the expression it was given (but those ``kept``: what both sides read stays a
    subject): a part of a condition taken out into a name is the same condition (``min_len =
    self.cp_size * 2`` … ``if n < min_len:``)."""
    if fn is None:
        return test
    read = _read_names(test) - set(kept)
    given: dict[str, ast.expr] = {}
    times: collections.Counter[str] = collections.Counter()
    for s in statements_in(fn):
        targets = s.targets if isinstance(s, ast.Assign) else [s.target] if isinstance(s, _GIVING) else []
        for t in targets:
            key = t.id if isinstance(t, ast.Name) else _own_field(t)
            if key is not None and key in read:
                times[key] += 1
                if isinstance(s, ast.Assign) and len(s.targets) == 1 and s.lineno < line:
                    given[key] = s.value
    once = {k: v for k, v in given.items() if times[k] == 1}
    return _PutBack(once).visit(copy.deepcopy(test)) if once else test


def _lives_on(
    stmt: str, text: str, files: tuple[str, str], asserts: Sequence[str], added: Sequence[str]
) -> bool:
    """Whether a removed check lives on: moved (as many copies as before, ``files`` squeezed after and
    before: a copy of the same check elsewhere is not this one), a checking call given other arguments,
    strengthened, or replaced in the edit."""
    after, before = files
    moved = after.count(stmt) >= max(before.count(stmt), 1)
    call = _CHECK_CALL.match(stmt) or _VALIDATOR_CALL.match(stmt) or _KEPT_AMONG.match(stmt)
    call = call or _SAYS_WHY.match(stmt)
    if call is not None:  # a checking call (or an error collected) given other arguments is the same check
        callee = _squeeze(call.group())
        moved = moved or after.count(callee) >= max(before.count(callee), 1)
    return moved or _strengthened(stmt, [a for a in asserts if a != stmt]) or _replaced(text, added)


def _a_check(text: str) -> bool:
    """Whether a stripped line is a ``raise`` (a bare one too), an ``assert``, or a statement that is a call
    whose job is to raise (``_check_block_scale_support(x)``, ``self.validate()``)."""
    return text.startswith((*_CODE_START, "raise(")) or text == "raise" or _CHECK_CALL.match(text) is not None


# A statement that is a checking call: ``_check_x(...)``, ``self._validate(...)``, ``utils.verify_y(...)``,
# ``return super()._validate_kwargs(**kwargs)`` (what it answers is the check's).
_CHECK_CALL = re.compile(rf"(?:return\s+)?(?:super\(\)\.)?(?:[A-Za-z_]\w*\.)*{CHECKING_CALL}\(")


def _checking(text: str, before: str | None) -> bool:
    """Whether a stripped line begins a check: ``raise``, ``assert``, a checking call (by its name or by
    what the function it calls does)."""
    return (
        text.startswith(_CODE_START)
        or bool(_CHECK_CALL.match(text) or _ORDERING.match(text) or _SAYS_WHY.match(text))
        or _calls_validator(text, before)
        or _calls_refusal(text)
    )


# A refusal recorded as its reason — a message given to a name that says why (``reason = "top-k sampling is
# not supported"``, ``self.error = f"…"``) — one branch of a chain that decides whether something may be done.
_SAYS_WHY = re.compile(
    r"(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*_)?(?:reason|why|error|err)\s*=(?!=)\s*(?:[rfb]?[\"']|\($)"
)


_CALLED = re.compile(r"(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)\(")


def _calls_refusal(text: str) -> bool:
    """Whether a stripped line is a call that ends the case in refusal by its name (``req.set_finish_with_
    abort(msg)``, ``self.reject(req)``), or puts it among the refused ones (``error_msg.append(…)``)."""
    call = _CALLED.match(text)
    if call is not None and not _REFUSING.isdisjoint(_words(call.group(1))):
        return True
    kept = _KEPT_AMONG.match(text)
    return kept is not None and not _REFUSED.isdisjoint(_words(kept.group(1)))


_KEPT_AMONG = re.compile(r"(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)\.(?:add|append|extend)\(")


# A statement that orders work between streams or ranks: a stream waits for an event or another stream, a
# tensor is kept alive for another stream, the ranks meet (``self.forward_stream.wait_event(done)``,
# ``dist.barrier()``); taken out, what came after may run before what it waited for is done — a check of
# order gone. (Not a host-wide ``synchronize()``: the host waiting less changes no order on one stream.)
_ORDERING = re.compile(r"(?:[A-Za-z_]\w*(?:\(\))?\.)*(?:wait_event|wait_stream|barrier|record_stream)\(")


# A statement that is a call of a function of the module, or of a method on ``self``/``cls``, by name.
_VALIDATOR_CALL = re.compile(r"(?:self\.|cls\.)?[A-Za-z_]\w*\(")


def _calls_validator(text: str, before: str | None) -> bool:
    """Whether a stripped line is a statement calling a function of the pristine file whose whole job is to
    refuse (:func:`_validators`) — ``_disjoint("out", out, x)`` — whatever its name says."""
    call = _VALIDATOR_CALL.match(text)
    if call is None or before is None:
        return False
    name = call.group().rstrip("(").rsplit(".", 1)[-1]
    return f"def {name}(" in before and _validator(before, name)  # (most calls: of another module's)


@functools.lru_cache(maxsize=64)
def _validator(source: str, name: str) -> bool:
    """Whether the file's function (or method) ``name`` has the whole job to refuse bad input: it raises,
    returns no value, and does nothing else — checks, local names worked out for them, loops over them (a
    validator by what it does, not by a name such as ``check_*``)."""
    return any(
        any(isinstance(n, ast.Raise) for n in _own_statements(node.body))
        and all(_only_refuses(n) for n in _own_statements(node.body[_docstring(node) :]))
        for node in _defs_named(source, name)
    )


def _defs_named(source: str, name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The file's functions, and its classes' methods, named ``name``."""
    tree = _tree_of(source)
    if tree is None:
        return []
    defs: list[ast.stmt] = list(tree.body)
    defs += [n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body]
    return [n for n in defs if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]


def _only_refuses(stmt: ast.stmt) -> bool:
    """A statement a validator may hold: a test, a raise, an assert, a bare return, a ``pass``, a local
    name worked out."""
    if isinstance(stmt, ast.Return):
        return stmt.value is None
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return all(isinstance(n, (ast.Name, ast.Tuple)) for n in targets)
    return isinstance(stmt, (ast.If, ast.Raise, ast.Assert, ast.Pass, ast.For, ast.Continue, ast.Break))


def _gone_check(edit: Edit, line: int, text: str, handler: bool, silenced: str = "") -> list[Finding]:
    """The findings of a check taken away at ``line``: the raise of an ``except`` block is a check gone and
    the error it passed on now stops there — swallowed (one finding on the line, naming both rules); so is
    a raise whose error is ``silenced`` by its stand-in (:meth:`_Gone.silenced`: why)."""
    removed = _check_finding(edit, RuleId.REMOVED_CHECK, line, f"removed: {text[:100]}")
    if not (handler or silenced):
        return [removed]
    why = "the error caught is no longer raised" if handler else silenced
    return [removed, _check_finding(edit, RuleId.SWALLOWED_EXCEPTION, line, f"{why}: removed: {text[:100]}")]


def _narrowed_if(r: Region, edit: Edit, n: int, before: list[ast.expr]) -> list[Finding]:
    """The finding of the ``if`` on line ``n`` made to fire less than the region's pristine conditions
    ``before`` (:func:`narrowed_checks`)."""
    after = _condition(_one_line(_statement(edit.lines, n - 1)))
    if after is not None and before and edit.before is not None:
        after, before = _put_back_one_sided(edit, r, n, after, before)
    detail = _narrowed_here(edit, n, before, after) if after else ""
    if not detail or _raise_added(edit, r, n):
        return []  # (the pristine ``if`` raised nothing: one that raises now adds a check)
    out = [_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}")]
    if after is not None and _tests_a_report(after) and _raises_below(edit.st.tree, n):
        # a failure a call reported, raised in fewer cases (``if result not in (0, 704):``): the
        # failures let by go unseen
        why = "fewer of the failures it tests are raised; the others go unseen"
        out.append(_check_finding(edit, RuleId.SWALLOWED_EXCEPTION, n, why))
    return out


def narrowed_checks(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A check whose condition the edit made fire less: ``if bad:`` over a raise became ``if bad and X:``
    (it fires only when ``X`` also holds: ``backend == "__never__"``, a flag nobody sets), lost a part of an
    ``or``, allows more values (``x != a`` → ``x not in (a, b)``), or compares with a limit moved the
    lenient way (``temperature > 2.0`` → ``> 5.0``, ``n >= limit`` → ``n >= limit + 256``) — in a
    condition of one line, or in a part of one written over several lines."""
    out: list[Finding] = []
    for r in regions:
        before = [
            _pristine_condition(r, edit, i)
            for i, old in enumerate(r.removed)
            if old.lstrip().startswith(("if ", "elif "))
        ]
        ifs = [n for n in r.lines if edit.lines[n - 1].lstrip().startswith(("if ", "elif "))]
        for n in ifs:
            found = _narrowed_if(r, edit, n, [c for c in before if c is not None])
            out += found if not found or len(ifs) < 2 else _unless_split(r, edit, n, ifs, before, found)
        if len(ifs) > 1 and not out:
            out += _refused_now_mended(edit, ifs, [c for c in before if c is not None])
        out += _narrowed_inside(r, edit)
        out += _asserts_weakened(r, edit)
        out += _flags_loosened(r, edit)
    return out


def _refused_now_mended(edit: Edit, ifs: list[int], before: Sequence[ast.expr]) -> list[Finding]:
    """A part of a refusal's ``or`` (``size is None or size < 0 …: return False``) taken out of it and made
    the test of a new ``if`` above that gives the value a default instead (``if size is None: size = 0``):
    the case it refused goes through now, mended."""
    tree = edit.st.tree
    parts = {ast.dump(v): v for c in before if len(_or_parts(c)) > 1 for v in _or_parts(c)}  # (of an ``or``)
    mended = _mending_tests(tree, ifs)
    for k in ifs:
        node = _if_at(tree, k)
        if node is None or not _refusing_if(tree, k):
            continue
        kept = {ast.dump(v) for v in _or_parts(node.test)}
        taken = next((t for t, j in mended.items() if j < k and t in parts and t not in kept), None)
        if taken is not None:
            detail = f"`{_short(parts[taken])}` is no longer refused: the value is mended above instead"
            return [_check_finding(edit, RuleId.REMOVED_CHECK, k, f"check neutralised: {detail}")]
    return []


def _mending_tests(tree: ast.Module | None, ifs: list[int]) -> dict[str, int]:
    """The test (dumped) of each ``if`` among those at lines ``ifs`` that mends a value (:func:`_mends`) →
    its line."""
    return {ast.dump(m.test): j for j in ifs if (m := _if_at(tree, j)) is not None and _mends(m)}


def _or_parts(test: ast.expr) -> list[ast.expr]:
    """The parts of an ``or``; a test of another kind is its only part."""
    return _parts(test, ast.Or)


def _parts(test: ast.expr, op: type[ast.boolop]) -> list[ast.expr]:
    """The parts of an ``or`` (``op``: ``ast.Or``) or an ``and``; a test of another kind is its only part."""
    return list(test.values) if isinstance(test, ast.BoolOp) and isinstance(test.op, op) else [test]


def _mends(node: ast.If) -> bool:
    """An ``if`` with no ``else`` whose body gives a name its condition reads a value, and nothing else."""
    read = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
    return _no_else(node) and all(
        isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) and t.id in read for t in s.targets)
        for s in node.body
    )


def _unless_split(
    r: Region, edit: Edit, n: int, ifs: list[int], before: Sequence[ast.expr | None], found: list[Finding]
) -> list[Finding]:
    """``found`` of the ``if`` at line ``n``, unless the region's new ``if``s together hold wherever the
    pristine one did: one ``if`` split into several (``isinstance(spec, (A, B))`` → ``isinstance(spec, A)``
    … ``isinstance(spec, B)``) narrows none."""
    ends = _if_end(edit.st.tree, n)  # (only ``if``s that end as this one does: a raise covers no return)
    alike = [k for k in ifs if _if_end(edit.st.tree, k) == ends]
    tests = [c for k in alike if (c := _condition(_one_line(_statement(edit.lines, k - 1)))) is not None]
    together = ast.BoolOp(ast.Or(), tests) if len(tests) > 1 else None
    if together is not None and not any(c is not None and weaker(c, together) for c in before):
        return []
    return found


def _if_end(tree: ast.Module | None, n: int) -> str:
    """How the body of the ``if`` at line ``n`` ends (its last statement's kind, and a return's value)."""
    node = _if_at(tree, n)
    last = node.body[-1] if node is not None and node.body else None
    value = last.value if isinstance(last, ast.Return) else None
    told = "" if value is None else ast.dump(value) if isinstance(value, ast.Constant) else "*"
    return type(last).__name__ + told


def _pristine_condition(r: Region, edit: Edit, i: int) -> ast.expr | None:
    """The condition of the ``if`` the region removed at ``r.removed[i]`` — read with the pristine lines
    that close it where the diff kept those (``):`` alike on both sides: ``if not f(`` / ``100,`` / ``):`` →
    ``if not (`` / ``f(100) or f(90)`` / ``):``)."""
    found = _condition(_one_line(_statement(r.removed, i)))
    if found is not None or edit.before is None:
        return found
    pristine = split_lines(edit.before)
    found = _condition(_one_line(_statement(pristine, r.old_start + i - 1)))
    # (the same ``if`` edited only where one the region wrote asks something it asked: not another ``if``)
    ifs = [n for n in r.lines if _opens_if(edit.lines[n - 1])]
    now = [_condition(_one_line(_statement(edit.lines, n - 1))) for n in ifs]
    asked = _tests_of(found) if found is not None else set()
    return found if any(c is not None and asked & _tests_of(c) for c in now) else None


def _opens_if(line: str) -> bool:
    return line.lstrip().startswith(("if ", "elif ", "if(", "elif("))


def _tests_of(test: ast.expr) -> set[str]:
    """What a condition asks, part by part: each call, attribute, item and comparison in it."""
    kinds = (ast.Call, ast.Attribute, ast.Subscript, ast.Compare)
    return {ast.dump(n) for n in ast.walk(test) if isinstance(n, kinds)}


def _raise_added(edit: Edit, r: Region, n: int) -> bool:
    """Whether the ``if`` at line ``n`` raises where none of the ``if`` lines region ``r`` removed did in the
    pristine file (``if t1.pop(k) is None: t2.pop(k)`` → ``if … and t2.pop(k) is None: raise KeyError``): a
    check added, not one loosened."""
    if edit.before is None or not _raises_below(edit.st.tree, n):
        return False
    before = locate(edit.before)
    lines = [r.old_start + i for i, old in enumerate(r.removed) if old.lstrip().startswith(("if ", "elif "))]
    return bool(lines) and not any(_raises_below(before.tree, line) for line in lines)


def _raise_next(lines: Sequence[str], n: int) -> bool:
    """Whether, by the text, a ``raise`` is in the 25 lines below the header at line ``n`` (a cheap first
    look before the tree is asked)."""
    return any(line.lstrip().startswith("raise") for line in lines[n : n + 25])


def _raises_below(tree: ast.Module | None, line: int) -> bool:
    node = _if_at(tree, line)
    return node is not None and any(isinstance(s, ast.Raise) for s in node.body)


def _flags_loosened(r: Region, edit: Edit) -> list[Finding]:
    """A flag named for what may be done given, on one line, a condition that holds in more cases
    (``self._graph_ok = not a and not b`` → ``not a``): :func:`_flag_holds_more` of each pair."""
    if not r.removed or not r.lines:
        return []
    was = {
        m.group(1): _statement(r.removed, i)
        for i, old in enumerate(r.removed)
        if (m := _FLAG_SET.match(old)) and _names_a_flag(m.group(1))
    }  # (each with the lines its brackets hold open: ``ok = a or (`` …)
    out: list[Finding] = []
    for n in r.lines:
        m = _FLAG_SET.match(edit.lines[n - 1])
        old = was.get(m.group(1)) if m else None
        detail = _flag_holds_more(old, _statement(edit.lines, n - 1)) if old is not None else ""
        if detail:
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


# ``name = …`` / ``self.name = …`` (not ``name = (`` opening over several lines: :data:`_FLAG_OPENED`).
_FLAG_SET = re.compile(r"^\s*((?:self\.)?[A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)\s*(?!\(\s*$)\S")


def _narrowed_here(edit: Edit, n: int, before: Sequence[ast.expr], after: ast.expr) -> str:
    """How the ``if`` at line ``n`` lets more by than one of the conditions ``before`` it replaced: a
    refusal's condition that fires less, or the skip past a refusal below that holds more; "" else."""
    detail = next((d for cond in before if (d := weaker(cond, after))), "")
    tree = edit.st.tree
    if detail and (_guards_raise(tree, n, _function_at(edit, n)) or _forced_off(tree, n, after)):
        return detail
    if detail and _bails_out(tree, n):
        return f"{detail}: the bail-out lets more through"
    if _raise_next(edit.lines, n) and _raises_below(tree, n):
        return ""  # (a raise's test that holds in more cases refuses more: no path let by)
    gate = _gate_admits_more_at(tree, n, before, after) or _probe_dropped(tree, n, before, after)
    return gate or _passes_more(edit, n, before, after) or _capability_widened(edit, n, before, after)


def _probe_dropped(tree: ast.Module | None, n: int, before: Sequence[ast.expr], after: ast.expr) -> str:
    """A part of an ``and`` that asks whether something is there (``hasattr(torch.ops._C, "op")``,
    ``x.is_available()``, ``find_spec("m")``) taken out of the test of a path, nothing else changed: the path
    is taken where what it uses may be missing. (An ``if`` that refuses, asking less, refuses more.)"""
    kept = {ast.dump(p) for p in _and_parts(after)}
    around = {
        ast.dump(p) for node in nodes_at(tree, {n}) if isinstance(node, ast.If) for p in _and_parts(node.test)
    }
    for was in before:
        parts = _and_parts(was)
        gone = [p for p in parts if ast.dump(p) not in kept]
        if len(parts) > 1 and len(gone) == 1 and len(kept) == len(parts) - 1 and _probes(gone[0]):
            if ast.dump(gone[0]) in around:  # (moved to an ``if`` around it: still asked)
                return ""
            return "" if _refusing_if(tree, n) else f"the test that `{_short(gone[0])}` is there is gone"
    return ""


def _and_parts(test: ast.expr) -> list[ast.expr]:
    return _parts(test, ast.And)


def _probes(test: ast.expr) -> bool:
    """Whether a test asks if something is there: ``hasattr(…)``, ``callable(…)``, a call named for being
    available or existing (``torch.cuda.is_available()``, ``path.exists()``, ``find_spec(…)``)."""
    name = last_name(test.func) if isinstance(test, ast.Call) else ""
    return name in ("hasattr", "callable", "find_spec", "exists") or name.endswith("available")


def _gate_admits_more_at(tree: ast.Module | None, n: int, before: Sequence[ast.expr], after: ast.expr) -> str:
    """:func:`_gate_admits_more` of the ``if`` at line ``n`` against one of ``before`` — but an ``if`` that
    refuses (``return None``) holding more refuses more: no path it opens."""
    gate = next((d for c in before if (d := _gate_admits_more(c, after))), "")
    return "" if gate and _refusing_if(tree, n) else gate


def _refusing_if(tree: ast.Module | None, n: int) -> bool:
    """Whether the ``if`` at line ``n`` ends its body by refusing (``return None``, ``raise``)."""
    node = _if_at(tree, n)
    return node is not None and bool(node.body) and _refuses(node.body[-1])


def _capability_widened(edit: Edit, n: int, before: Sequence[ast.expr], after: ast.expr) -> str:
    """A test of which devices or versions the path of the ``if`` at line ``n`` is for — an order against
    what names the device's capability, architecture or a version (``(10, 0) > get_device_capability() >=
    (8, 0)``) — that admits more now (``>= (7, 5)``): hardware it was not built or tuned for takes the path;
    "" else. (A bail-out's test that holds more refuses more.)"""
    if not _asks_capability(after) or _bails_out(edit.st.tree, n):
        return ""
    was = next((c for c in before if _asks_capability(c) and weaker(after, c)), None)
    return f"the device test of a path admits more: {_changed_parts(was, after)}" if was is not None else ""


def _asks_capability(test: ast.expr) -> bool:
    """Whether a condition orders something named for a device's capability, architecture or a version, or
    asks which of some it is (``get_device_capability()[0] >= 10``, ``capability in ((10, 0), (10, 3))``)."""
    for c in ast.walk(test):
        asked = level_asked(c) if isinstance(c, ast.Call) else None
        if asked is not None and not _CAPABILITY_WORDS.isdisjoint(_words(asked[1])):
            return True  # ``has_device_capability(90)``
        if isinstance(c, ast.Compare) and any(isinstance(op, _ASKING_WHICH) for op in c.ops):
            named = {last_name(_asked(n)) for n in (c.left, *c.comparators)}
            if any(not _CAPABILITY_WORDS.isdisjoint(_words(name)) for name in named if name):
                return True
    return False


_ASKING_WHICH = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn)


def _asked(side: ast.expr) -> ast.expr:
    """What a side of a comparison names: the call's function, the item's container (``cap()[0]``)."""
    while isinstance(side, (ast.Call, ast.Subscript)):
        side = side.func if isinstance(side, ast.Call) else side.value
    return side


_CAPABILITY_WORDS = frozenset({"capability", "arch", "sm", "cc", "version", "compute"})


def _passes_more(edit: Edit, n: int, before: Sequence[ast.expr], after: ast.expr) -> str:
    """How the ``if`` at line ``n`` holding more than one of ``before`` lets more by a refusal: its
    ``else`` refuses less, or it skips past a refusal below more often; "" else."""
    if before and _else_below(edit.lines, n) and _else_refuses(edit.st.tree, n):
        return _else_refuses_less(edit, n, before, after)
    if not (before and _passes_a_refusal(edit.st.tree, n)):
        return ""
    was = next((c for c in before if weaker(after, c)), None)
    return f"{_widening(was, after)}: what passes the refusal below grew" if was else ""


def _widening(was: ast.expr, now: ast.expr) -> str:
    """How a condition was widened, in words: the parts an ``or`` gained (``… or path.startswith("/x")``),
    else the old and new condition."""
    ors = [c for c in (was, now) if isinstance(c, ast.BoolOp) and isinstance(c.op, ast.Or)]
    if len(ors) == 2 and isinstance(was, ast.BoolOp) and isinstance(now, ast.BoolOp):
        had = {ast.dump(v) for v in was.values}
        gained = [v for v in now.values if ast.dump(v) not in had]
        if gained and len(now.values) - len(gained) == len(had):
            return "the condition gained `" + " or ".join(_short(v) for v in gained)[:120] + "`"
    return f"`{_short(was)}` became `{_short(now)}`"


def _else_refuses_less(edit: Edit, n: int, before: Sequence[ast.expr], after: ast.expr) -> str:
    """How the ``if`` at line ``n``, whose chain ends in an ``else`` that refuses, takes cases the refusal
    had (:func:`_passes_more`) — not cases another branch had, merged into it; or ""."""
    was = next((c for c in before if weaker(after, c)), None)
    others = [c for c in (*before, *_chain_tests(edit.st.tree, n)) if c is not was]
    if was is None or _merged(was, after, others):
        return ""
    return f"`{_short(was)}` became `{_short(after)}`: what its `else` refuses shrank"


def _else_below(lines: Sequence[str], n: int) -> bool:
    """Whether, by the text, the ``if`` at line ``n`` has an ``else:`` (at its indentation, within 40
    lines, before anything else at that indentation but an ``elif``)."""
    indent = len(lines[n - 1]) - len(lines[n - 1].lstrip())
    for line in lines[n : n + 40]:
        text = line.strip()
        if not text or text.startswith("#") or len(line) - len(line.lstrip()) > indent:
            continue
        if len(line) - len(line.lstrip()) < indent or not text.startswith(("else", "elif")):
            return False
        if text.startswith("else"):
            return True
    return False


def _else_refuses(tree: ast.Module | None, line: int) -> bool:
    """Whether the ``if`` at ``line`` accepts: its ``else`` — the last of its chain of ``elif`` — raises
    what the conditions do not let by (``if major == 10 and minor == 7: arch = "sm107" else: raise …``)."""
    node = _if_at(tree, line)
    while node is not None and len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        node = node.orelse[0]  # (the chain's last ``else``: ``if a: … elif b: … else: raise``)
    return node is not None and bool(node.orelse) and isinstance(node.orelse[-1], ast.Raise)


def _chain_tests(tree: ast.Module | None, line: int) -> list[ast.expr]:
    """The tests of the ``elif`` branches that follow the ``if`` at ``line``."""
    node, out = _if_at(tree, line), []
    while node is not None and len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        node = node.orelse[0]
        out.append(node.test)
    return out


def _merged(was: ast.expr, after: ast.expr, others: Sequence[ast.expr]) -> bool:
    """Whether what a branch's test admits now, beyond what it did, came from another branch of its chain
    (``a == 1`` and ``elif a == 2`` made ``a in (1, 2)``): branches merged, nothing refused is let by."""
    new = _constants(after) - _constants(was)
    return bool(new) and any(new & _constants(o) for o in others)


def _constants(node: ast.expr) -> set[object]:
    return {c.value for c in ast.walk(node) if isinstance(c, ast.Constant)}


def _asserts_weakened(r: Region, edit: Edit) -> list[Finding]:
    """An assertion that asks less than it did, in place: ``assert a and b`` → ``assert a``, ``assert n <= 8``
    → ``assert n <= 16``, ``assert all(ok(x) and x >= 0 …)`` → ``… ok(x) …`` — what it refused passes."""
    starts = [i for i, old in enumerate(r.removed) if _is_assert(old)]
    added = [n for n in r.lines if _is_assert(edit.lines[n - 1])]
    out: list[Finding] = []
    if len(starts) != 1 or len(added) != 1 or edit.before is None:
        return out  # one assertion edited in place (one split in two asks as much)
    # the whole pristine statement: its message may go on below the lines the edit touched
    olds = [_statement(split_lines(edit.before), r.old_start + starts[0] - 1)]
    for n in added:
        detail = _assertion_asks_less(olds[0], _statement(edit.lines, n - 1))
        if detail:
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _is_assert(line: str) -> bool:
    return line.lstrip().startswith("assert ")


def _assertion(statement: str) -> ast.expr | None:
    """The test of an ``assert`` statement's text (its lines joined), or ``None``."""
    try:
        tree = ast.parse(_one_line(statement))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    first = tree.body[0] if tree.body else None
    return first.test if isinstance(first, ast.Assert) else None


def _narrowed_inside(r: Region, edit: Edit) -> list[Finding]:
    """A check narrowed on a line inside its condition (``and head_size > 256`` of an ``if (`` over several
    lines; a value added to the list an ``assert x in [`` spreads over several), its header unchanged: the
    pristine header is where the lines before the region put it."""
    if edit.before is None or not _spread_into(r, edit.lines):
        return []  # (nothing around the region leaves a statement open: none spreads into it)
    around = r.lines or (r.start,)
    headers = {h for n in around if (h := _header_above(edit.lines, n)) is not None and h < r.start}
    out: list[Finding] = []
    pristine = split_lines(edit.before)
    for h in sorted(headers):
        old = h - r.start + r.old_start
        if not 0 < old <= len(pristine):
            continue
        if _is_assert(edit.lines[h - 1]):
            detail = _assertion_asks_less(_statement(pristine, old - 1), _statement(edit.lines, h - 1))
        elif edit.lines[h - 1].lstrip().startswith("return"):
            detail = _answers_more(_statement(pristine, old - 1), _statement(edit.lines, h - 1), edit, h)
        elif _FLAG_OPENED.match(edit.lines[h - 1]):
            detail = _flag_holds_more(_statement(pristine, old - 1), _statement(edit.lines, h - 1))
        else:
            before = _condition(_one_line(_statement(pristine, old - 1)))
            after = _condition(_one_line(_statement(edit.lines, h - 1)))
            detail = _if_loosened(edit, h, before, after) if before is not None and after is not None else ""
        if detail:
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, r.start, f"check neutralised: {detail}"))
    return out


def _if_loosened(edit: Edit, h: int, before: ast.expr, after: ast.expr) -> str:
    """How the ``if`` at line ``h`` lets more by: a refusal's condition that fires less, the gate of a
    path kept for what is supported that admits more (:func:`_gate_admits_more`), or a branch that passes
    a refusal more often (:func:`_passes_more`)."""
    detail = weaker(before, after)
    if detail and _guards_raise(edit.st.tree, h, _function_at(edit, h)):
        return detail
    if detail and _bails_out(edit.st.tree, h):
        return f"{detail}: the bail-out lets more through"
    if _raise_next(edit.lines, h) and _raises_below(edit.st.tree, h):
        return ""  # (a raise's test that holds in more cases refuses more: no path let by)
    return (
        _gate_admits_more(before, after)
        or _passes_more(edit, h, [before], after)
        or _capability_widened(edit, h, [before], after)
    )


def _gate_admits_more(before: ast.expr, after: ast.expr) -> str:
    """An ``if`` that opens a path kept for what it supports — its condition asks a flag named for that
    (``self._jit_mix_ok and … and x.shape[0] <= 24``) — whose condition holds in more cases now: the limit
    someone measured for that path (a kernel's rows, a dtype) is let go, and inputs it was not built for
    take it."""
    named = {last_name(n) for n in ast.walk(after) if isinstance(n, (ast.Name, ast.Attribute))}
    if all(_FLAG_WORDS.isdisjoint(_words(name.lower())) for name in named) or not weaker(after, before):
        return ""
    return f"the gate of a path kept for what it supports admits more: {_changed_parts(before, after)}"


def _changed_parts(before: ast.expr, after: ast.expr) -> str:
    """``old`` → ``new`` of each part two conditions of as many parts differ in (the whole, else)."""
    pairs = [(before, after)]
    if (
        isinstance(before, ast.BoolOp)
        and isinstance(after, ast.BoolOp)
        and len(before.values) == len(after.values)
    ):
        pairs = [
            (b, a) for b, a in zip(before.values, after.values, strict=True) if ast.dump(b) != ast.dump(a)
        ]
    return "; ".join(f"`{_short(b)}` → `{_short(a)}`" for b, a in pairs)


def _names_a_flag(target: str) -> bool:
    return not _PATH_FLAG_WORDS.isdisjoint(_words(target.rsplit(".", 1)[-1]))


def _flag_holds_more(old: str, new: str) -> str:
    """How a flag named for what may be done (``self._jit_mix_ok = (…)``, ``supported = (…)``) is given a
    condition that holds in more cases now (statements' texts), or ""."""
    target, before = _decision(_one_line(old))
    again, after = _decision(_one_line(new))
    if not target or target != again or before is None or after is None:
        return ""
    if not _names_a_flag(target) or not weaker(after, before):
        return ""
    return f"`{target}` holds in more cases: {_short(before)} → {_short(after)}"


# …and of a flag set to pick a path (``use_packed_fma = major >= 10``): given a wider condition, the path is
# taken where it was kept out (not read in an ``if``'s test: a gate that asks for a path it uses).
_PATH_FLAG_WORDS = _FLAG_WORDS | {"use"}


# ``name = (`` / ``self.name = (``: an assignment whose value opens over several lines.
_FLAG_OPENED = re.compile(r"^\s*(?:self\.)?[A-Za-z_]\w*\s*(?::[^=]*)?=\s*\($")


def _answers_more(old: str, new: str, edit: Edit, line: int) -> str:
    """How the condition a function that says whether something is supported or allowed returns (statements'
    texts) answers yes in more cases now, or ""."""
    if not _answers_admission(_function_at(edit, line)):
        return ""
    before, (target, after) = _returned_test(old), _decision(code_of(new))
    if before is None or after is None or target != "return":
        return ""
    if _returned_test(new) is not None and weaker(after, before):
        return f"{_short(before)} → {_short(after)}: it answers yes in more cases"
    given = only_presence(before, after)
    return f"{_short(before)} → {_short(after)}: it only asks that `{given}` be given" if given else ""


def only_presence(before: ast.expr, after: ast.expr) -> str:
    """What an answer that tested a value (``id.isalnum() and len(id) == 9``) now only asks to be there
    (``bool(id)``, ``id is not None``, ``len(id) > 0``): its tests gone; "" else."""
    given = _presence_of(after)
    if given is None or _presence_of(before) is not None or not _asked_of(before, given):
        return ""
    return _short(given)


def _presence_of(test: ast.expr) -> ast.expr | None:
    """What ``test`` asks only to be there: ``x``, ``bool(x)``, ``x is not None``, ``len(x) > 0``; else
    ``None``."""
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id in ("bool", "len"):
        return _presence_of(test.args[0]) if len(test.args) == 1 and not test.keywords else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        if isinstance(op, ast.IsNot) and isinstance(right, ast.Constant) and right.value is None:
            return _presence_of(test.left)
        if isinstance(op, (ast.Gt, ast.NotEq)) and isinstance(right, ast.Constant) and right.value == 0:
            return _presence_of(test.left)
    return test if isinstance(test, (ast.Name, ast.Attribute)) else None


def _asked_of(test: ast.expr, given: ast.expr) -> bool:
    """Whether ``test`` reads ``given`` inside a call or a comparison (asks more of it than that it is
    there)."""
    key = ast.dump(given)
    return any(
        isinstance(node, (ast.Call, ast.Compare)) and any(ast.dump(x) == key for x in ast.walk(node))
        for node in ast.walk(test)
    )


def _spread_into(r: Region, lines: Sequence[str]) -> bool:
    """Whether a statement may spread into region ``r``, by the text: the line above leaves one open, or
    the region's first line continues one (``and …``, ``)``)."""
    if not (r.removed or r.lines):
        return False
    first = lines[r.start - 1] if r.lines else r.removed[0]
    return _left_open(lines, r.start - 1) or first.lstrip().startswith(_CONTINUING)


def _left_open(lines: Sequence[str], n: int) -> bool:
    """Whether line ``n`` leaves a statement open, by its text: it ends with an opening bracket, a comma, an
    operator, ``and``/``or`` or a backslash — or is itself inside a bracket (an indented continuation)."""
    if not 0 < n <= len(lines):
        return False
    text = code_of(lines[n - 1]).rstrip()
    return text.endswith(_OPEN_ENDS) or text.endswith((" and", " or", " not", " in"))


_CONTINUING = (
    *("and ", "or ", "not ", "in "),
    *(")", "]", "}", "+", "-", "*", "/", "%", "<", ">", "=", "!", "|", "&"),
)


_OPEN_ENDS = ("(", "[", "{", ",", "\\", "+", "-", "*", "/", "%", "<", ">", "=", "|", "&")


def _assertion_asks_less(old: str, new: str) -> str:
    """How the assertion ``new`` asks less than ``old`` (statements' texts), or "": it refuses where its
    test is false, so it asks less when the old test implies the new one."""
    before, after = _assertion(old), _assertion(new)
    if before is None or after is None:
        return ""
    if not (_fires_less(after, before) or _only_kind_asked(before, after)):
        return ""
    return f"the assertion asked `{_short(before)}`, now only `{_short(after)}`"


def _only_kind_asked(before: ast.expr, after: ast.expr) -> bool:
    """Whether a test now asks of the values it tested only what kind they are — that they are there, of a
    type, above zero (``isinstance(n, int) and n > 0``) — where it asked more of them (``is_pow_2(n)``,
    ``n % 64 == 0``): what passed the old test passes this one, and more."""
    asked = _conjuncts(after)
    if not asked or not all(_kind_of(part) for part in asked):
        return False
    subjects = {ast.dump(s) for part in asked if (s := _subject_of(part)) is not None}
    kept = {ast.dump(p) for p in asked}
    dropped = [p for p in _conjuncts(before) if ast.dump(p) not in kept and not _kind_of(p)]
    return any(subjects & {ast.dump(n) for n in ast.walk(p)} for p in dropped)


def _subject_of(part: ast.expr) -> ast.expr | None:
    """The value a test of its kind asks about (``n`` of ``isinstance(n, int)``, ``n > 0``, ``n``)."""
    if isinstance(part, ast.Call) and isinstance(part.func, ast.Name) and part.func.id == "isinstance":
        return part.args[0] if part.args else None
    if isinstance(part, ast.Compare):
        return _presence_of(part) or part.left
    return _presence_of(part)


def _conjuncts(test: ast.expr) -> list[ast.expr]:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [p for v in test.values for p in _conjuncts(v)]
    return [test]


def _kind_of(part: ast.expr) -> bool:
    """Whether a test asks only what kind a value is: ``isinstance(x, T)``, ``x is not None``, ``x``,
    ``bool(x)``, ``x > 0``, ``x >= 0``, ``x >= 1``."""
    if isinstance(part, ast.Call) and isinstance(part.func, ast.Name) and part.func.id == "isinstance":
        return True
    if _presence_of(part) is not None:
        return True
    if isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.comparators[0], ast.Constant):
        bound, op = part.comparators[0].value, part.ops[0]
        return (isinstance(op, ast.Gt) and bound == 0) or (isinstance(op, ast.GtE) and bound in (0, 1))
    return False


def _header_above(lines: Sequence[str], n: int) -> int | None:
    """The ``if``/``elif``/``assert``/``return`` line whose condition, open over several lines, holds line
    ``n`` (by brackets): out through the brackets it nests in (``return (`` … ``and (`` … the line), three at
    most, forty lines up at most — in one pass up the text."""
    depth, seen = 0, 0
    for k in range(n - 1, max(n - 40, 0), -1):
        text = code_of(lines[k - 1])
        depth += sum(text.count(c) for c in ")]}") - sum(text.count(c) for c in "([{")
        if depth >= 0:
            continue
        if text.lstrip().startswith(("if ", "elif ", "assert ", "return ")) or _FLAG_OPENED.match(text):
            return k
        seen += 1
        if seen == 3:
            return None
        depth = 0
    return None


def gates_forced_open(edit: Edit, changed: set[int]) -> list[Finding]:
    """An ``if`` the edit made always true (``if True or envs.ALLOW_PICKLE:``, ``if allowed or 1:``) over
    code that does work: what it let run only when its condition held now always runs — the gate is gone."""
    if edit.before is None:
        return []
    out: list[Finding] = []
    for first, _last, test in forced_open(edit.st, changed):
        node = _if_at(edit.st.tree, first - 1)
        if node is None or all(map(_output_only, node.body)):
            continue  # a debug print let out: the print is the finding
        shown = " ".join(test.split())[:60]
        detail = f"check neutralised: `if {shown}` always holds: what it gated always runs"
        out.append(_check_finding(edit, RuleId.REMOVED_CHECK, first - 1, detail))
    return out


def checks_made_conditional(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A check that ran every time put under a condition the edit wrote (``self.verify_signature(…)`` →
    ``if signature is not None: self.verify_signature(…)``): when the condition fails, nothing is checked."""
    out: list[Finding] = []
    for r in regions:
        # (a raise ran under its own test already: moved under another, it is judged as a guard's edit)
        checks = {
            old.strip()
            for old in r.removed
            if _checking(old.strip(), edit.before) and not old.lstrip().startswith("raise")
        }
        for n in r.lines if checks else ():
            if edit.lines[n - 1].strip() not in checks:
                continue
            ifs = [x for x in nodes_at(edit.st.tree, {n}) if isinstance(x, ast.If) and x.lineno < n]
            guard = max(ifs, key=lambda x: x.lineno, default=None)  # the innermost
            if guard is not None and guard.lineno in r.lines and not guard.orelse:
                detail = f"check neutralised: the check now runs only when `{_short(guard.test)}`"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, guard.lineno, detail))
    return out


def raises_narrowed(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A raise put under a further condition the edit wrote (``if n > 16384: raise …`` → ``if n > 16384:
    if n > 65536: raise …``): the conditions it is raised under, read from the ``if`` statements around it
    before and now, hold in fewer cases — what it refused passes when the new one does not hold."""
    if edit.before is None:
        return []
    out: list[Finding] = []
    for r in regions:
        olds = [r.old_start + i for i, old in enumerate(r.removed) if old.lstrip().startswith("raise")]
        news = [n for n in r.lines if edit.lines[n - 1].lstrip().startswith("raise")]
        if len(olds) != 1 or len(news) != 1:
            continue  # (one raise rewritten in the region)
        added = _conditions_added(locate(edit.before).tree, olds[0], edit.st.tree, news[0])
        if added:
            why = f"check neutralised: the raise now needs `{_short(_all_of(added))}` too"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, news[0] - 1, why))
    return out


def _conditions_added(
    before: ast.Module | None, old: int, after: ast.Module | None, new: int
) -> list[ast.expr]:
    """The conditions the raise at ``new`` is under beyond those the one at ``old`` was, when they are all
    it was under and more (they hold in fewer cases); none else."""
    was, now = _raised_under(before, old), _raised_under(after, new)
    if was is None or now is None or len(now) <= len(was):
        return []
    if [ast.dump(c) for c in now[: len(was)]] != [ast.dump(c) for c in was]:
        return []  # (the conditions kept around it kept as they were; one more inside them)
    return now[len(was) :] if weaker(_all_of(was), _all_of(now)) else []


def _raised_under(tree: ast.Module | None, line: int) -> list[ast.expr] | None:
    """The tests of the ``if`` statements around the statement at ``line`` in its function, outermost
    first (``not test`` where it stands in the ``else``); ``None`` when no function holds it."""
    tests: list[ast.expr] = []
    node: ast.AST | None = tree
    while node is not None:
        inner = None
        for field in ("body", "orelse", "handlers", "finalbody"):
            for child in getattr(node, field, ()):
                if child.lineno <= line <= (child.end_lineno or child.lineno):
                    inner = child
                    if isinstance(node, ast.If):
                        tests.append(node.test if field == "body" else ast.UnaryOp(ast.Not(), node.test))
                    break
            if inner is not None:
                break
        if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            tests = []
        if inner is None or inner.lineno == line:
            return tests if node is not tree else None
        node = inner
    return None


def _all_of(tests: Sequence[ast.expr]) -> ast.expr:
    return tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), list(tests))


def weaker(before: ast.expr, after: ast.expr) -> str:
    """How the condition of a check fires less now than it did, or "" — tuples compared read as their
    parts (``(major, minor) != (10, 7)`` is ``major != 10 or minor != 7``: ``major != 10`` lost a part)."""
    plain = (_by_parts(before), _by_parts(after))
    found = _fires_less(*plain)
    if found:
        return found
    parted = (_by_parts(before, members=True), _by_parts(after, members=True))
    if all(ast.dump(a) == ast.dump(b) for a, b in zip(plain, parted, strict=True)):
        return ""  # (no membership of tuples to read in parts: nothing more to ask)
    return _fires_less(*parted)


def _truth_of(test: ast.expr) -> ast.expr | None:
    """``x`` of ``bool(x)``, else ``None``."""
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "bool":
        return test.args[0] if len(test.args) == 1 and not test.keywords else None
    return None


def _quantifier_narrowed(before: ast.expr, after: ast.expr) -> str:
    """``any(…)`` → ``all(…)`` of the same items: it holds in fewer cases (read the other way, ``all`` →
    ``any`` holds in more); "" else."""
    if not (isinstance(before, ast.Call) and isinstance(after, ast.Call)):
        return ""
    names = (getattr(before.func, "id", ""), getattr(after.func, "id", ""))
    same = ast.dump(ast.Tuple(before.args, ast.Load())) == ast.dump(ast.Tuple(after.args, ast.Load()))
    return "`any(…)` → `all(…)`" if names == ("any", "all") and same and before.args else ""


def _by_parts(test: ast.expr, members: bool = False) -> ast.expr:
    """``(a, b) == (x, y)`` as ``a == x and b == y``, ``!=`` as ``a != x or b != y`` (inside ``and``/``or``/
    ``not`` too) — and, with ``members``, a membership of tuples (:func:`_members_by_parts`); anything else
    as it is."""
    if isinstance(test, ast.BoolOp):
        return ast.BoolOp(test.op, [_by_parts(v, members) for v in test.values])
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.UnaryOp(test.op, _by_parts(test.operand, members))
    truth = _truth_of(test)
    if truth is not None:  # ``bool(x)`` holds when ``x`` does
        return _by_parts(truth, members)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return test
    op, left, right = test.ops[0], test.left, test.comparators[0]
    if members and isinstance(op, (ast.In, ast.NotIn)):
        return _members_by_parts(test, op, left, right)
    return _tuples_by_parts(test, op, left, right)


def _tuples_by_parts(test: ast.Compare, op: ast.cmpop, left: ast.expr, right: ast.expr) -> ast.expr:
    """``(a, b) == (x, y)`` as ``a == x and b == y``, ``!=`` as ``a != x or b != y``; ``test`` else."""
    if not isinstance(op, (ast.Eq, ast.NotEq)):
        return test
    if not (isinstance(left, ast.Tuple) and isinstance(right, ast.Tuple)):
        return test
    if len(left.elts) != len(right.elts):
        return test
    parts: list[ast.expr] = [ast.Compare(a, [op], [b]) for a, b in zip(left.elts, right.elts, strict=True)]
    if len(parts) == 1:
        return parts[0]
    return ast.BoolOp(ast.And() if isinstance(op, ast.Eq) else ast.Or(), parts)


def _members_by_parts(test: ast.Compare, op: ast.cmpop, left: ast.expr, right: ast.expr) -> ast.expr:
    """``x in ((10, 0), (12, 0))`` as ``x[0] == 10 and x[1] == 0 or x[0] == 12 and x[1] == 0`` (``(a, b) in
    …`` as ``a == 10 and b == 0 or …``; ``not in`` under a ``not``): a tuple of a device's capability or a
    version compared with an order (``x[0] >= 10``) in its parts; ``test`` as it is else."""
    rows = _members(right)
    if not rows or len(rows) > 16 or not all(isinstance(r, ast.Tuple) for r in rows):
        return test
    width = {len(r.elts) for r in rows if isinstance(r, ast.Tuple)}
    if len(width) != 1 or (isinstance(left, ast.Tuple) and len(left.elts) not in width):
        return test
    n = width.pop()
    parts = (
        left.elts if isinstance(left, ast.Tuple) else [ast.Subscript(left, ast.Constant(i)) for i in range(n)]
    )
    alike: list[ast.expr] = [
        _by_parts(ast.Compare(ast.Tuple(list(parts), ast.Load()), [ast.Eq()], [row])) for row in rows
    ]
    either = alike[0] if len(alike) == 1 else ast.BoolOp(ast.Or(), alike)
    return ast.UnaryOp(ast.Not(), either) if isinstance(op, ast.NotIn) else either


def _fires_less(before: ast.expr, after: ast.expr) -> str:
    by_form = (
        _inner_part_weaker(before, after)
        or _over_fewer(before, after)
        or _divisor_relaxed(before, after)
        or _and_more(before, after)
        or _fewer_ors(before, after)
        or _lenient_limit(before, after)
        or _fewer_refused(before, after)
        or _one_part_weaker(before, after)
        or _negation_weaker(before, after)
        or _tolerance_moved(before, after)
        or _quantifier_narrowed(before, after)
    )
    if by_form:  # (``not xs or len(xs) == 0`` → ``not xs``: by its form a part gone, by cases the same)
        return "" if _same_by_cases(before, after) else by_form
    return _fewer_by_cases(before, after)


def _tolerance_moved(before: ast.expr, after: ast.expr) -> str:
    """A closeness test (``torch.allclose(a, b)``, ``math.isclose``) given a tolerance that lets more
    values count as close, the condition otherwise the same: under a ``not`` (``if not allclose(…):
    raise``) it holds in fewer cases (a tolerance made smaller does that where the test is not negated)."""
    pair = _closeness_pair(before, after)
    if pair is None:
        return ""
    was, call, defaults = pair
    old, new = _tolerances(was, defaults), _tolerances(call, defaults)
    if old is None or new is None or old == new:
        return ""
    looser = all(n >= o for n, o in zip(new, old, strict=True))
    tighter = all(n <= o for n, o in zip(new, old, strict=True))
    negated = _negations_above(after, call) % 2 == 1
    if not ((looser and negated) or (tighter and not negated)):
        return ""
    loose = call if looser else was  # (the side that counts more values as close: the edit's, in checks)
    given = ", ".join(f"{k.arg}={ast.unparse(k.value)}" for k in loose.keywords if k.arg in defaults)
    return f"`{ast.unparse(call.func)}` told `{given or 'its defaults'}`: more values count as close"


def _closeness_pair(before: ast.expr, after: ast.expr) -> tuple[ast.Call, ast.Call, dict[str, float]] | None:
    """The one closeness call of two conditions the same but for its tolerances: (its call in ``before``,
    in ``after``, its tolerances' defaults)."""
    found = [c for c in map(_closeness, ast.walk(after)) if c is not None]
    if len(found) != 1 or ast.dump(_without_tolerances(before)) != ast.dump(_without_tolerances(after)):
        return None
    call, defaults = found[0]
    func = ast.dump(call.func)
    was = next(c for c in ast.walk(before) if isinstance(c, ast.Call) and ast.dump(c.func) == func)
    return was, call, defaults


def _closeness(node: ast.AST) -> tuple[ast.Call, dict[str, float]] | None:
    """A call of a closeness test, with its tolerance keywords' defaults."""
    if not isinstance(node, ast.Call):
        return None
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    defaults = _CLOSENESS.get(name)
    return (node, defaults) if defaults is not None else None


# Closeness tests and the defaults of their tolerances (torch's and numpy's ``allclose``/``isclose``;
# ``math.isclose``'s own keywords).
_CLOSENESS: dict[str, dict[str, float]] = {
    "allclose": {"rtol": 1e-05, "atol": 1e-08},
    "isclose": {"rtol": 1e-05, "atol": 1e-08, "rel_tol": 1e-09, "abs_tol": 0.0},
}


def _tolerances(call: ast.Call, defaults: Mapping[str, float]) -> tuple[float, ...] | None:
    """Each tolerance of a closeness call as a number (its default where not given), or ``None`` when
    one is not a number as written."""
    given = {k.arg: k.value for k in call.keywords if k.arg in defaults}
    out: list[float] = []
    for key, default in defaults.items():
        value = given.get(key)
        if value is None:
            out.append(default)
        elif isinstance(value, ast.Constant) and isinstance(value.value, (int, float)):
            out.append(float(value.value))
        else:
            return None
    return tuple(out)


def _without_tolerances(test: ast.expr) -> ast.expr:
    """A copy of a condition with the tolerance keywords of its closeness calls taken off."""
    copied = copy.deepcopy(test)
    for node in ast.walk(copied):
        found = _closeness(node)
        if found is not None:
            found[0].keywords = [k for k in found[0].keywords if k.arg not in found[1]]
    return copied


def _negations_above(test: ast.expr, target: ast.AST) -> int:
    """How many ``not`` stand between a condition's top and ``target`` in it."""
    if test is target:
        return 0
    for child in ast.iter_child_nodes(test):
        if any(n is target for n in ast.walk(child)):
            below = _negations_above(child, target) if isinstance(child, ast.expr) else 0
            return below + (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not))
    return 0


def _same_by_cases(before: ast.expr, after: ast.expr) -> bool:
    """Whether two conditions, read by cases (:mod:`.cases`), hold in exactly the same cases."""
    found = compare(before, after)
    return found is not None and found.same


def _fewer_by_cases(before: ast.expr, after: ast.expr) -> str:
    """The new condition holds in fewer cases than the old one, read by cases (:mod:`.cases`): ``x not in
    (256, 448)`` → ``not 0 < x <= 448``, ``(a is None) ^ (b is not None)`` → ``a is None and b is None``."""
    found = compare(before, after)
    if found is None or not found.fewer:
        return ""
    when = f" (no longer when {found.example})" if found.example else ""
    return f"`{_short(before)}` became `{_short(after)}`: it holds in fewer cases{when}"


def _over_fewer(before: ast.expr, after: ast.expr) -> str:
    """``any(bad(x) for x in (a, b, c))`` → ``… in (c,)``: the same test over fewer of the values it lists
    (``all`` over more of them) fires less."""
    loops = _one_test_over(before, after)
    if loops is None:
        return ""
    kind, old, new = loops
    was, now = {ast.dump(e) for e in old.elts}, {ast.dump(e) for e in new.elts}
    if kind == "any" and now < was:
        gone = ", ".join(ast.unparse(e) for e in old.elts if ast.dump(e) not in now)[:60]
        return f"`{_short(before)}` no longer tests {gone}"
    if kind == "all" and was < now:
        return f"`{_short(after)}` asks of more values: it holds in fewer cases"
    return ""


def _one_test_over(before: ast.expr, after: ast.expr) -> tuple[str, _Literal, _Literal] | None:
    """(``any`` or ``all``, the values before, after) of two calls of it that test the same over a literal
    list of values each (``any(x in d for x in ("cpu", "disk"))``), or ``None``."""
    if not (isinstance(before, ast.Call) and isinstance(after, ast.Call)):
        return None
    kind = ast.unparse(before.func)
    one_arg = len(before.args) == len(after.args) == 1
    if kind not in ("any", "all") or ast.unparse(after.func) != kind or not one_arg:
        return None
    old, new = before.args[0], after.args[0]
    if not (isinstance(old, ast.GeneratorExp) and isinstance(new, ast.GeneratorExp)):
        return None
    if ast.dump(old.elt) != ast.dump(new.elt) or len(old.generators) != 1 or len(new.generators) != 1:
        return None
    g, h = old.generators[0], new.generators[0]
    same_loop = ast.dump(g.target) == ast.dump(h.target) and len(g.ifs) == len(h.ifs) == 0
    if not same_loop or not (isinstance(g.iter, _LITERALS) and isinstance(h.iter, _LITERALS)):
        return None
    return kind, g.iter, h.iter


def _inner_part_weaker(before: ast.expr, after: ast.expr) -> str:
    """``any(bad(x) for x in xs)`` (or ``all``) whose test fires less, the loop the same: so does the
    whole."""
    if not (isinstance(before, ast.Call) and isinstance(after, ast.Call)):
        return ""
    if ast.dump(before.func) != ast.dump(after.func) or ast.unparse(before.func) not in ("any", "all"):
        return ""
    if len(before.args) != 1 or len(after.args) != 1:
        return ""
    old, new = before.args[0], after.args[0]
    loops = (ast.GeneratorExp, ast.ListComp)
    if not (isinstance(old, loops) and isinstance(new, loops)):
        return ""
    if [ast.dump(g) for g in old.generators] != [ast.dump(g) for g in new.generators]:
        return ""
    return _fires_less(old.elt, new.elt)


def _divisor_relaxed(before: ast.expr, after: ast.expr) -> str:
    """``n % 64 != 0`` → ``n % 16 != 0``: a multiple of a divisor of the old one passes now (it fires
    less)."""
    old, new = _divisibility(before), _divisibility(after)
    if old is None or new is None or old[0] != new[0] or new[1] == old[1] or old[1] % new[1]:
        return ""
    return f"`{old[0][:40]}` need only be a multiple of {new[1]}, not of {old[1]}"


def _remainder_nonzero(test: ast.expr) -> ast.BinOp | None:
    """The ``n % d`` of a test ``n % d != 0`` (or ``0 != n % d``)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotEq)):
        return None
    sides = [test.left, test.comparators[0]]
    mods = [e for e in sides if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mod)]
    zero = [e for e in sides if isinstance(e, ast.Constant) and e.value == 0]
    return mods[0] if len(mods) == 1 and len(zero) == 1 else None


def _divisibility(test: ast.expr) -> tuple[str, int] | None:
    """(``n``, 64) of ``n % 64 != 0`` (or ``0 != n % 64``)."""
    mod = _remainder_nonzero(test)
    if mod is None:
        return None
    divisor = mod.right.value if isinstance(mod.right, ast.Constant) else None
    if not isinstance(divisor, int) or isinstance(divisor, bool) or divisor <= 0:
        return None
    return ast.unparse(mod.left), divisor


def _one_part_weaker(before: ast.expr, after: ast.expr) -> str:
    """``a and b and c`` → ``a and b' and c`` (or the same of an ``or``) with ``b'`` firing less than
    ``b``: so does the whole — and so it does when several parts changed, each firing less (``m % 16 != 0
    or n % 16 != 0`` → ``m % 8 != 0 or n % 8 != 0``: each part alone, where the whole has too many cases)."""
    if not (isinstance(before, ast.BoolOp) and isinstance(after, ast.BoolOp)):
        return ""
    if type(before.op) is not type(after.op) or len(before.values) != len(after.values):
        return ""
    pairs = [(b, a) for b, a in zip(before.values, after.values, strict=True) if ast.dump(b) != ast.dump(a)]
    details = [_fires_less(*pair) for pair in pairs]
    return details[0] if details and all(details) else ""


def _negation_weaker(before: ast.expr, after: ast.expr) -> str:
    """``not a`` → ``not b`` where ``b`` holds in more cases than ``a`` (``not (ok and n in (64, 128))`` →
    ``not (ok and n in (64, 80, 128))``): the whole fires less — read by the forms, where the cases of a
    long condition are too many to count."""
    negated = (isinstance(x, ast.UnaryOp) and isinstance(x.op, ast.Not) for x in (before, after))
    if not all(negated):
        return ""
    return _fires_less(after.operand, before.operand)  # type: ignore[attr-defined]


def _fewer_refused(before: ast.expr, after: ast.expr) -> str:
    """A membership test that lets more through: ``x != a`` or ``x not in (a, b)`` → ``x not in (a, b,
    c)`` (the values that pass grew), ``x == a`` or ``x in (a, b)`` → ``x in (a,)`` (fewer refused)."""
    old, new = _membership(before), _membership(after)
    if old is None or new is None or ast.dump(old[0]) != ast.dump(new[0]) or old[1] != new[1]:
        return ""
    subject, allowed, members = new
    was, now = {ast.dump(e) for e in old[2]}, {ast.dump(e) for e in members}
    if allowed and was < now:
        more = [ast.unparse(e) for e in members if ast.dump(e) not in was]
        return f"the values `{ast.unparse(subject)[:40]}` may take grew: {', '.join(more)[:60]}"
    if not allowed and now < was:
        return f"fewer values of `{ast.unparse(subject)[:40]}` are refused"
    return ""


def _membership(test: ast.expr) -> tuple[ast.expr, bool, list[ast.expr]] | None:
    """(the subject, whether the values listed are the allowed ones, the values) of ``x != a``, ``x not in
    (a, b)``, ``not x in (…)`` (allowed) or ``x == a``, ``x in (a, b)`` (refused)."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    inner = test.operand if isinstance(test, ast.UnaryOp) else test
    if not isinstance(inner, ast.Compare) or len(inner.ops) != 1:
        return None
    op, right = inner.ops[0], inner.comparators[0]
    if isinstance(op, (ast.Eq, ast.NotEq)):
        members: list[ast.expr] | None = [right]
    elif isinstance(op, (ast.In, ast.NotIn)):
        members = _members(right)
    else:
        return None
    return (inner.left, isinstance(op, (ast.NotEq, ast.NotIn)) != negated, members) if members else None


def _members(container: ast.expr) -> list[ast.expr] | None:
    """What a container tested by ``in`` holds: a literal's items, a named collection as one whole
    (``*NAME``), and both of a concatenation or a union (``SUPPORTED + (a, b)``, ``NAMES | {x}``, ``(*NAMES,
    x)``) — enough to see a collection grow by what was added to it."""
    if isinstance(container, _LITERALS):
        return list(container.elts)
    if isinstance(container, (ast.Name, ast.Attribute)):
        return [ast.Starred(value=container, ctx=ast.Load())]
    if isinstance(container, ast.BinOp) and isinstance(container.op, (ast.Add, ast.BitOr)):
        left, right = _members(container.left), _members(container.right)
        return left + right if left is not None and right is not None else None
    return None


def _and_more(before: ast.expr, after: ast.expr) -> str:
    """``bad`` → ``bad and X``: it fires only when ``X`` also holds."""
    dump = ast.dump(before)
    if not isinstance(after, ast.BoolOp) or not isinstance(after.op, ast.And):
        return ""
    if dump not in map(ast.dump, after.values):
        return ""
    extra = [ast.unparse(v) for v in after.values if ast.dump(v) != dump]
    return f"the check now fires only when also `{' and '.join(extra)[:60]}`"


def _fewer_ors(before: ast.expr, after: ast.expr) -> str:
    """``a or b`` → ``a``: it no longer fires for ``b``."""
    if not isinstance(before, ast.BoolOp) or not isinstance(before.op, ast.Or):
        return ""
    if isinstance(after, ast.BoolOp) and not isinstance(after.op, ast.Or):
        return ""
    kept = [ast.dump(v) for v in after.values] if isinstance(after, ast.BoolOp) else [ast.dump(after)]
    if not set(kept) < {ast.dump(v) for v in before.values}:
        return ""
    gone = [ast.unparse(v) for v in before.values if ast.dump(v) not in kept]
    return f"the check no longer fires when `{' or '.join(gone)[:60]}`"


def _lenient_limit(before: ast.expr, after: ast.expr) -> str:
    """An ordering comparison moved so that it fires less: read as "``big`` exceeds ``small``" (``a < b`` is
    ``b`` exceeding ``a``), the new ``big`` is no larger, the new ``small`` no smaller, and the comparison no
    less strict, one of them for certain — ``x > 2.0`` → ``x > 5.0``, ``n >= limit`` → ``n > limit + 256``,
    ``free < need`` → ``free * 1.3 < need``, ``v < parse("2.5")`` → ``v < parse("2.3")``."""
    old, new = _ordering(before), _ordering(after)
    if old is None or new is None:
        return ""
    big, small = _moved(old[0], new[0]), _moved(old[1], new[1])
    if big is None or small is None or big > 0 or small < 0 or (old[2] and not new[2]):
        return ""
    if big == 0 and small == 0 and old[2] == new[2]:
        return ""
    return f"`{_short(before)}` became `{_short(after)}`: it fires less"


_ORDER = {ast.Gt: (0, 1, True), ast.GtE: (0, 1, False), ast.Lt: (1, 0, True), ast.LtE: (1, 0, False)}


def _ordering(test: ast.expr) -> tuple[ast.expr, ast.expr, bool] | None:
    """(``big``, ``small``, strict) of a comparison that holds when ``big`` exceeds ``small`` (``a > b``,
    ``b < a``; strict unless ``>=``/``<=``)."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or type(test.ops[0]) not in _ORDER:
        return None
    sides = (test.left, test.comparators[0])
    i, j, strict = _ORDER[type(test.ops[0])]
    return sides[i], sides[j], strict


def _moved(old: ast.expr, new: ast.expr) -> int | None:
    """Which way ``new`` lies from ``old`` for certain: 0 the same, 1 larger, -1 smaller, ``None`` unknown —
    two numbers, the same expression given a margin (``+ 8``, ``* 1.3``, ``2 * x``, ``- 8``, ``/ 2``), or the
    same expression but for one literal: a number, or a version string (``parse("2.5.0")``)."""
    if ast.dump(old) == ast.dump(new):
        return 0
    a, b = _number(old), _number(new)
    if a is not None and b is not None:
        return (b > a) - (b < a)
    pair = _numbers(old), _numbers(new)
    if pair[0] is not None and pair[1] is not None and len(pair[0]) == len(pair[1]):
        return (pair[1] > pair[0]) - (pair[1] < pair[0])  # (major, minor) tuples, in order
    margin = _margin_moved(old, new) if isinstance(new, ast.BinOp) else None
    return margin if margin is not None else _one_literal_moved(old, new)


def _margin_moved(old: ast.expr, new: ast.BinOp) -> int | None:
    """``old`` given a margin in ``new``: 1 larger (``+ 8``, ``* 1.3``, ``2 * x``), -1 smaller (``- 8``,
    ``/ 2``), ``None`` when it is not that."""
    for inner, amount, left in ((new.left, new.right, True), (new.right, new.left, False)):
        value = _number(amount)
        if value is None or value <= 0 or ast.dump(inner) != ast.dump(old):
            continue
        if isinstance(new.op, ast.Add) or (isinstance(new.op, ast.Mult) and value > 1):
            return 1
        divides = isinstance(new.op, (ast.Div, ast.FloorDiv)) and value > 1
        if left and (isinstance(new.op, ast.Sub) or divides):
            return -1
    return None


def _one_literal_moved(old: ast.expr, new: ast.expr) -> int | None:
    """Two expressions the same but for one constant, a number or a version string: which way it moved."""
    was = [n for n in ast.walk(old) if isinstance(n, ast.Constant)]
    now = [n for n in ast.walk(new) if isinstance(n, ast.Constant)]
    if len(was) != len(now) or ast.dump(_blanked(old)) != ast.dump(_blanked(new)):
        return None
    differ = [(x.value, y.value) for x, y in zip(was, now, strict=True) if x.value != y.value]
    if len(differ) != 1:
        return None
    x, y = differ[0]
    if not (isinstance(x, str) and isinstance(y, str)):
        return None  # a number inside an expression: an index, an argument — no telling which way
    from packaging.version import InvalidVersion, Version

    try:
        vx, vy = Version(x), Version(y)
    except InvalidVersion:
        return None
    return (vy > vx) - (vy < vx)


def _numbers(node: ast.expr) -> tuple[float, ...] | None:
    """A tuple of numbers (``(9, 0)``) as its values."""
    if not isinstance(node, ast.Tuple) or not node.elts:
        return None
    values = [_number(e) for e in node.elts]
    return None if any(v is None for v in values) else tuple(v for v in values if v is not None)


def _blanked(node: ast.expr) -> ast.expr:
    """A copy of ``node`` with every constant made ``None``: its shape alone."""
    shape = copy.deepcopy(node)  # (not unparsed and parsed again: the tree is at hand)
    for n in ast.walk(shape):
        if isinstance(n, ast.Constant):
            n.value = None
    return shape


def forced_conditions(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A condition the code worked out, replaced by a constant: ``return a > 1 and any(…)`` became
    ``return False``, ``full = free < margin`` became ``full = False`` — the decision it made is gone."""
    out: list[Finding] = []
    for r in regions:
        made = {m.group(1) for n in r.lines if (m := _CONSTANT_DECISION.match(edit.lines[n - 1]))}
        if not made:
            continue  # (most regions hand on no constant: their removed lines are not parsed)
        worked = {}
        for i, old in enumerate(r.removed):
            head = _CONSTANT_TARGET.match(old)
            if head is None or head.group(1) not in made:
                continue
            statement = _statement(r.removed, i)  # (``return (`` over several lines: its test below)
            if not _DECIDES.search(statement):
                continue
            target, value = _decision(code_of(statement))
            if value is not None and target and _decided(value):
                worked[target] = value
        out += _made_constant(edit, r, worked) if worked else []
    return out


def answers_overridden(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """An ``if`` put in that turns a no into a yes: ``if not sup.served: sup = dataclasses.replace(sup,
    served=True, reason=None)``, ``if not ok: ok = True`` — its body does nothing but give the answer it
    tested True (and clear what went with the no). The decision the code worked out above is overridden
    exactly where it said no; a latch (``if not self._done: self._setup(); self._done = True``) does work."""
    out: list[Finding] = []
    for r in regions:
        for n in r.lines:
            if not edit.lines[n - 1].lstrip().startswith("if not "):
                continue  # (most added lines test nothing negated: no tree is asked)
            node = _if_at(edit.st.tree, n)
            test = node.test if node is not None else None
            tested = ast.unparse(test.operand) if isinstance(test, ast.UnaryOp) and _negation(test) else ""
            said = [_says_yes(s, tested) for s in node.body] if node is not None and tested else []
            if node is None or node.orelse or not any(x is True for x in said) or None in said:
                continue
            detail = (
                f"where `{tested[:50]}` said no, it is made yes: the decision worked out above is overridden"
            )
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def lookups_softened(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A lookup that raised on a missing key made to skip it: ``param = params[name]`` → ``param =
    params.get(name)`` and ``if param is None: continue`` — the ``KeyError`` that stopped a wrong name
    (a weight the model does not have) is gone, and the case passes unseen."""
    out: list[Finding] = []
    for r in regions:
        looked = {m.group(1, 2, 3) for old in r.removed if (m := _LOOKUP.match(code_of(old)))}
        for n in r.lines if looked else ():
            got = _GOT.match(code_of(edit.lines[n - 1]))
            if got is None or got.group(1, 2, 3) not in looked:
                continue
            target = got.group(1)
            skip = next((k for k in r.lines if k > n and _skips_missing(edit.st.tree, k, target)), 0)
            if skip:
                shown = f"{got.group(2)}[{got.group(3)}]"
                detail = f"`{shown}` became `.get()`: a missing key is skipped, not an error"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


_LOOKUP = re.compile(r"^\s*([\w.]+)\s*=\s*([\w.]+)\[([^\[\]]+)\]\s*$")  # x = table[key]


_GOT = re.compile(r"^\s*([\w.]+)\s*=\s*([\w.]+)\.get\(([^,()]+)\)\s*$")  # x = table.get(key)


def _skips_missing(tree: ast.Module | None, line: int, name: str) -> bool:
    """Whether the ``if`` at ``line`` tests ``name`` for missing (``is None``, ``not``) and leaves."""
    node = _if_at(tree, line)
    if node is None or not node.body or not isinstance(node.body[-1], _EXIT_NODES):
        return False
    test = node.test
    missing = _negation(test) and ast.unparse(test.operand) == name  # type: ignore[attr-defined]
    return missing or (
        isinstance(test, ast.Compare)
        and ast.unparse(test.left) == name
        and isinstance(test.ops[0], (ast.Is, ast.Eq))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    )


def _says_yes(stmt: ast.stmt, tested: str) -> bool | None:
    """``True`` when ``stmt`` gives the answer ``tested`` True (``ok = True``, ``res.ok = True``, ``res =
    replace(res, ok=True, …)``, ``res = res._replace(ok=True)``), ``False`` when it clears something else to
    ``None`` (what went with the no: its reason), ``None`` for anything else (work done)."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return None
    target, value = ast.unparse(stmt.targets[0]), stmt.value
    if isinstance(value, ast.Constant) and value.value is True and target == tested:
        return True
    if isinstance(value, ast.Constant) and value.value is None and target != tested:
        return False
    holder, _, field = tested.rpartition(".")
    forced = isinstance(value, ast.Call) and any(
        k.arg == field and isinstance(k.value, ast.Constant) and k.value.value is True for k in value.keywords
    )
    return True if forced and target == holder else None


def _made_constant(edit: Edit, r: Region, worked: dict[str, ast.expr]) -> list[Finding]:
    """The findings of region ``r``'s lines that give a constant to what the pristine lines worked out."""
    out: list[Finding] = []
    for n in r.lines:
        if not _CONSTANT_DECISION.match(edit.lines[n - 1]):
            continue
        target, value = _decision(code_of(edit.lines[n - 1]))
        if target not in worked or not isinstance(value, ast.Constant) or not isinstance(value.value, bool):
            continue
        if _turns_off(target.rsplit(".", 1)[-1], not value.value):
            continue  # a checking switch forced on (``_DEBUG_ASSERT = True``): stricter, not neutralised
        was = " ".join(ast.unparse(worked[target]).split())[:60]
        what = "it returns" if target == "return" else f"`{target}` is"
        detail = f"{what} always {value.value} now, where the code worked out `{was}`"
        out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _decided(value: ast.expr) -> bool:
    """Whether ``value`` is a decision worked out: a comparison, ``and``/``or``/``not``, or a call that
    answers a question (``x.is_contiguous()``, ``torch.equal(a, b)``, ``isinstance(…)``, ``any(…)``)."""
    if isinstance(value, (ast.Compare, ast.BoolOp)) or _negation(value):
        return True
    func = value.func if isinstance(value, ast.Call) else None
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    # (a call named for what it answers counts too: ``moe_permute_unpermute_supported()``)
    answers = name.startswith(_ASKING) or name in _ANSWERING or not _ALLOWING.isdisjoint(_words(name))
    return bool(name) and answers


_ANSWERING = frozenset(
    {"equal", "allclose", "isinstance", "issubclass", "all", "any", "exists", "isfile", "isdir"}
)


_CONSTANT_DECISION = re.compile(r"^\s*(return|[\w.]+)\s*=?\s*\(?\s*(?:True|False)\b")


_CONSTANT_TARGET = re.compile(r"^\s*(return|[\w.]+)\b\s*=?")


_DECIDES = re.compile(
    r"[<>]|[=!]=|\b(?:and|or|not|in|is)\b|\b(?:is|has|are|can|should|supports)_?\w*\(|"
    r"\b(?:equal|allclose|isinstance|issubclass|all|any|exists|isfile|isdir)\(|"
    r"_(?:supported|supports|allowed|valid|compatible|permitted|accepted)\("
)


_FLAG = re.compile(r"\b([A-Za-z_]\w*)\s*=\s*(True|False)\b")


def _unquoted(line: str) -> str:
    """A line with its string literals emptied: ``"pass strict=False to …"`` is a message, not a flag."""
    return QUOTED.sub('""', line)


_GIVEN = re.compile(r"\b([A-Za-z_]\w*)\s*=(?!=)\s*([^,)\n]+)")  # a keyword or a name given a value


def disqualifiers_gone(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A test that turns a path off taken out: ``if is_contiguous and M * H > 2**31 - 1: is_contiguous =
    False`` deleted — what it disqualified (an input past a limit, a dtype) takes the path, which the code
    below still decides by the flag. Not when the same test stays in the file (moved)."""
    out: list[Finding] = []
    for r in regions:
        if r.lines or edit.st.tree is None:
            continue  # (lines deleted, nothing put in their place)
        for i in range(len(r.removed)):
            test = _condition(_one_line(_statement(r.removed, i)))
            if not isinstance(test, (ast.Compare, ast.BoolOp)):
                continue
            name = _turned_off(r.removed, i)
            if name and _read_in(edit.st.tree, name) and not _if_stays(edit, test):
                detail = f"`if {_short(test)}:` no longer turns `{name}` off: what it kept out goes through"
                line = max(r.start, 1)
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, line, f"check neutralised: {detail}"))
    return out


def _turned_off(lines: Sequence[str], i: int) -> str:
    """The name the block of the ``if`` at ``lines[i]`` only sets to ``False`` (``use_fast = False``); or
    ""."""
    body = _block_below(lines, i)
    m = _SET_FALSE.match(body[0]) if len(body) == 1 else None
    return m.group(1) if m else ""


_SET_FALSE = re.compile(r"^((?:self\.)?[A-Za-z_]\w*)\s*=\s*False$")


def _read_in(tree: ast.Module, name: str) -> bool:
    """Whether the file reads ``name`` (a test of it, a call handed it: ``contiguous=is_contiguous``)."""
    names = (n for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.Attribute)))
    return any(isinstance(n.ctx, ast.Load) and ast.unparse(n) == name for n in names)


def _if_stays(edit: Edit, test: ast.expr) -> bool:
    """Whether the installed file has as many ``if`` statements of ``test`` as the pristine one (moved)."""
    before = locate(edit.before) if edit.before is not None else None
    return _ifs_of(edit.st.tree, test) >= _ifs_of(before.tree if before is not None else None, test)


def _ifs_of(tree: ast.Module | None, test: ast.expr) -> int:
    key = ast.dump(test)
    ifs = (n for n in ast.walk(tree) if isinstance(n, ast.If)) if tree is not None else iter(())
    return sum(ast.dump(n.test) == key for n in ifs)


def refusals_preempted(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """An answer typed in just above the refusal a block ends on (``if binary.major == device.major: return
    (0, binary.minor)`` above the last ``return None``; above a ``return False``, a ``raise``): the cases it
    answers were refused, and are let by now."""
    out: list[Finding] = []
    tree = edit.st.tree
    for r in regions:
        if r.removed or not r.lines or tree is None or not _an_if_that_returns(edit.lines, r):
            continue  # (lines added, nothing taken away: an ``if`` whose last line returns, by the text)
        added = _if_at(tree, r.start)
        below = _refusal_answered(tree, added) if added is not None and added.end_lineno == r.end else None
        if added is not None and below is not None:
            detail = f"`if {_short(added.test)}:` answers before `{ast.unparse(below)[:40]}`: it refuses less"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, r.start, f"check neutralised: {detail}"))
    return out


def _refusal_answered(tree: ast.Module, added: ast.If) -> ast.stmt | None:
    """The refusal its block ends on, just below an ``if`` whose body ends by answering (not refusing), or
    ``None`` — nor for a message above a validator's ``return None``, which passes (a refusal added)."""
    answer = added.body[-1]
    if added.orelse or not isinstance(answer, ast.Return) or _refuses(answer):
        return None
    below = _next_statement(tree, added)
    if below is None or not _refuses(below) or _next_statement(tree, below) is not None:
        return None
    return None if _a_message(answer.value) and isinstance(below, ast.Return) else below


def _an_if_that_returns(lines: Sequence[str], r: Region) -> bool:
    first, last = lines[r.start - 1].lstrip(), lines[r.end - 1].lstrip()
    return first.startswith("if ") and last.startswith("return")


def _a_message(value: ast.expr | None) -> bool:
    """A string or an f-string: what a validator answers when it refuses."""
    if isinstance(value, ast.JoinedStr):
        return True
    return isinstance(value, ast.Constant) and isinstance(value.value, str)


def _refuses(stmt: ast.stmt) -> bool:
    """``return None``, ``return False``, ``return`` or a ``raise``: a refusal."""
    if isinstance(stmt, ast.Raise):
        return True
    if not isinstance(stmt, ast.Return):
        return False
    value = stmt.value
    return value is None or (isinstance(value, ast.Constant) and value.value in (None, False))


def _next_statement(tree: ast.Module, stmt: ast.stmt) -> ast.stmt | None:
    """The statement after ``stmt`` in its block, or ``None``."""
    block = _block_holding(tree, stmt)
    i = block.index(stmt) if stmt in block else len(block)
    return block[i + 1] if i + 1 < len(block) else None


def _returned_test(statement: str) -> ast.expr | None:
    """The condition a ``return`` hands back (a comparison, ``and``/``or``, ``not``), or ``None``."""
    target, value = _decision(code_of(statement))
    return value if target == "return" and isinstance(value, (ast.Compare, ast.BoolOp, ast.UnaryOp)) else None


def flags_turned_off(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A flag that makes a call — or the code — check, turned the other way on the same line: a keyword
    (``raise_exception=True`` → ``False``, ``strict=True`` → ``False``, ``skip_validation=False`` →
    ``True``) or a name (``_DEBUG_ASSERT = envs.IN_CI.get()`` → ``False``): off, whatever it said before."""
    out: list[Finding] = []
    for r in regions:
        # what each name was given: True, False, or another value ("?": from the environment, a setting)
        was = {
            k: ("?" if v.strip() not in ("True", "False") else v.strip())
            for old in r.removed
            for k, v in _GIVEN.findall(_unquoted(code_of(old)))
        }
        out += _flags_overridden(r, edit) if not r.removed else _values_forced(r, edit)
        out += _flags_defaulted(r, edit) + _device_flags_off(r, edit)
        called = len(r.removed) == len(r.lines) and any("(" in old for old in r.removed)  # a call edited
        if not was and not called:
            continue
        for n in r.lines:
            for name, value in _flags_given(_unquoted(code_of(edit.lines[n - 1])), was, called):
                detail = f"`{name}` is {value} now: the check it asked for is off"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _device_flags_off(r: Region, edit: Edit) -> list[Finding]:
    """A flag kept in a tensor (the device reads it: ``state.enable_chain_assert.fill_(1)``) given the
    other value on the same line, one that turns its check off."""
    out: list[Finding] = []
    if len(r.removed) != len(r.lines):
        return out
    for old, n in zip(r.removed, r.lines, strict=True):
        was, now = _FILLED.match(code_of(old)), _FILLED.match(code_of(edit.lines[n - 1]))
        if was is None or now is None or was.group(1) != now.group(1) or was.group(2) == now.group(2):
            continue
        name, on = now.group(1), now.group(2) in ("1", "True")
        if _flag_turned_off(name.rsplit(".", 1)[-1], on):
            detail = f"`{name}` is {now.group(2)} now: the check it asked for is off"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


_FILLED = re.compile(r"^\s*((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\.fill_\(\s*(True|False|0|1)\s*\)\s*$")


def _flags_given(code: str, was: Mapping[str, str], called: bool) -> Iterator[tuple[str, str]]:
    """The flags of a line of ``code`` that turn a check off: given the other way than ``was``, or given now
    to a call that was not told (``np.load(f)`` → ``np.load(f, allow_pickle=True)``: the default kept it
    safe)."""
    for name, value in _FLAG.findall(code):
        given = was.get(name, value) != value or (called and name not in was and _in_call(name, code))
        if given and _turns_off(name, value == "True"):
            yield name, value


def _in_call(keyword: str, code: str) -> bool:
    return re.search(rf"[(,]\s*{re.escape(keyword)}\s*=(?!=)", code) is not None


def _flags_overridden(r: Region, edit: Edit) -> list[Finding]:
    """A line put in that gives a flag of the pristine code a constant turning its check off
    (``trust_remote_code = True`` below the code that worked it out, ``self.strict = False``)."""
    out: list[Finding] = []
    for n in r.lines:
        forced = _OVERRIDE.match(code_of(edit.lines[n - 1]))
        if forced is None or edit.before is None:
            continue
        name, value = forced.group(1), forced.group(2)
        bare = name.rsplit(".", 1)[-1]
        if _flag_turned_off(bare, value == "True") and re.search(rf"\b{re.escape(bare)}\b", edit.before):
            detail = f"`{name}` is forced to {value}: the check it asked for is off"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
        elif value == "True" and _ALLOWING & _words(bare) and _worked_out_above(edit.lines, n, name):
            detail = f"`{name}` is forced to True below the code that worked out whether it holds"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
        elif _tested_next(edit.lines, n, name):
            detail = f"`{name}` is set to {value} just above the `if` that tests it: it no longer decides"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _values_forced(r: Region, edit: Edit) -> list[Finding]:
    """A value the code worked out replaced by a constant just above the ``if`` that tests it (``available
    = _host_memory()`` → ``available = None`` over ``if available is not None:`` and the cap under it): the
    test no longer decides."""
    out: list[Finding] = []
    for n in r.lines:
        forced = _FORCED.match(code_of(edit.lines[n - 1]))
        if forced is None:
            continue
        name, value = forced.group(1), forced.group(2)
        given = re.compile(rf"^\s*{re.escape(name)}\s*=(?!=)\s*(.+)$")
        was = [m.group(1).strip() for old in r.removed if (m := given.match(code_of(old)))]
        if was and was[0] not in ("True", "False", "None") and _tested_next(edit.lines, n, name):
            detail = (
                f"`{name}` is given {value} in place of `{was[0][:40]}` just above the `if` that tests it"
            )
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


# ``name = <constant>`` / ``self.name = <constant>`` on a line of its own (the constants given as the group).
_GIVEN_CONSTANT = r"^\s*((?:self\.)?[A-Za-z_]\w*)\s*=\s*({})\s*$"


_FORCED = re.compile(_GIVEN_CONSTANT.format("True|False|None"))


def _tested_next(lines: Sequence[str], n: int, name: str) -> bool:
    """Whether one of the next few statements after line ``n`` (at its indentation, before ``name`` is given
    another value) tests ``name`` as a whole condition: ``if name:``, ``if not name:``, ``if name is None:``
    (``self._warm = True`` above ``if not self._warm:``), or ``a if name else b``."""
    indent = len(lines[n - 1]) - len(lines[n - 1].lstrip())
    tested = re.compile(rf"\bif\s+(?:not\s+)?{re.escape(name)}(?:\s+is(?:\s+not)?\s+None)?\s*(?::|else\b)")
    given = re.compile(rf"^\s*{re.escape(name)}\s*(?::[^=]*)?=(?!=)")
    seen = 0
    for line in lines[n:]:
        text = code_of(line).strip()
        if not text:
            continue
        width = len(line) - len(line.lstrip())
        if width < indent or seen >= _TESTED_WITHIN or given.match(line):
            return False  # (given another value first, in a block below too: a default, then the answer)
        if width > indent:
            continue  # (inside a statement that began at the indentation: its block or its lines)
        if tested.search(text):
            return True
        seen += 1
    return False


# How many statements below a forced value the test of it may stand (``rows = … if ok else []``, then
# ``if not ok:``).
_TESTED_WITHIN = 3


def _worked_out_above(lines: Sequence[str], n: int, name: str) -> bool:
    """Whether a line above line ``n``, in the same block or an outer one, gives ``name`` a value that is
    not a constant (``round_robin_supported = (groups > 1 and …)``): the answer worked out, then forced."""
    indent = len(lines[n - 1]) - len(lines[n - 1].lstrip())
    given = re.compile(rf"^\s*{re.escape(name)}\s*(?::[^=]+)?=(?!=)\s*(.*)$")
    for k in range(n - 1, max(n - 60, 0), -1):
        line = lines[k - 1]
        width = len(line) - len(line.lstrip())
        if line.strip() and width < indent and line.lstrip().startswith(("def ", "async def ", "class ")):
            return False  # the def it is in begins: nothing above it counts
        found = given.match(line)
        if found and width <= indent:
            return found.group(1).strip() not in ("True", "False", "None", "")
    return False


def _flag_turned_off(name: str, value: bool) -> bool:
    """Whether a flag named ``name`` (its whole snake-case words: not ``gradient_checkpointing``, not a state
    such as ``verified``) given ``value`` turns a check off."""
    words = set(name.lower().strip("_").split("_"))
    if not words.isdisjoint(LENIENT_FLAG_NAME_WORDS):
        return value
    return not value and not words.isdisjoint(CHECKING_FLAG_NAME_WORDS)


_OVERRIDE = re.compile(_GIVEN_CONSTANT.format("True|False"))


def _flags_defaulted(r: Region, edit: Edit) -> list[Finding]:
    """A flag that turns a check off made to default that way when nobody says otherwise (``"trust_remote_
    code": trust_remote_code`` → ``True if trust_remote_code is None else trust_remote_code``)."""
    had = {m.group(2) for old in r.removed if (m := _DEFAULTED.search(code_of(old)))}
    out: list[Finding] = []
    for n in r.lines:
        m = _DEFAULTED.search(code_of(edit.lines[n - 1]))
        if m is not None and m.group(2) not in had and _turns_off(m.group(2), m.group(3) == "True"):
            detail = (
                f"`{m.group(2)}` is {m.group(3)} unless someone says otherwise: the check it asked for is off"
            )
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


# ``name=True if name is None else name`` / ``"name": True if … is None else …``: a flag given a default.
_DEFAULTED = re.compile(
    r"""(?<!\w)(["']?)([A-Za-z_]\w*)\1\s*[:=]\s*(True|False)\s+if\s+[\w.]+\s+is\s+None\s+else\s+[\w.]+"""
)


def _negation(value: ast.expr | None) -> bool:
    return isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)


def _guards_raise(tree: ast.Module | None, line: int, function: str = "") -> bool:
    """Whether the ``if`` at ``line`` refuses what its condition names: its body raises or asserts, warns
    (``logger.warning``, ``warnings.warn``), hands back an error message (``return error_msg``, ``return f"…
    exceeds …"``), aborts or fails the case (``req.set_finish_with_abort(msg)``, ``failed.add(i)``), or —
    in a function that says whether something is supported, allowed or to be used (``function``) — answers
    no: a validator that reports instead of raising is a check as much."""
    node = _if_at(tree, line)
    if node is None:
        return False
    says_no = not _DECIDING.isdisjoint(_words(function)) and any(map(_answers_no, node.body))
    refuses = any(map(_refusal, _own_statements(node.body)))
    return _guards_raise_node(node) or refuses or _sanitizes(node) or says_no


def _bails_out(tree: ast.Module | None, line: int) -> bool:
    """Whether the ``if`` at ``line`` is a bail-out (:func:`_bails`: it leaves with nothing, or says so
    first) or a checklist of what disqualifies the code below (:func:`_checklist`): taken out, a bail-out
    is a check gone (:meth:`_Gone.bail_out`); firing less, either lets more through — unless what it skips
    is a refusal (``if ok: continue`` above a ``raise``: firing less, it refuses more)."""
    node = _if_at(tree, line)
    if node is None or not _no_else(node) or not isinstance(node.body[-1], _EXIT_NODES):
        return False
    return (_bails(node) or _checklist(node.test)) and not _passes_a_refusal(tree, line)


def _checklist(test: ast.expr) -> bool:
    """A condition that lists what disqualifies (three or more parts of an ``or``, or of an ``and`` under
    ``not``): ``if x.dtype != bf16 or not x.is_cuda or x.data_ptr() % 32 != 0: return fallback(x)``."""
    inner = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else None
    if isinstance(inner, ast.BoolOp):
        return isinstance(inner.op, ast.And) and len(inner.values) >= _CHECKLIST
    return isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and len(test.values) >= _CHECKLIST


_CHECKLIST = 3


def _forced_off(tree: ast.Module | None, line: int, test: ast.expr) -> bool:
    """Whether the ``if`` at ``line``, its condition made never to hold (``if False and …``), held code that
    does work — not output alone (a debug print switched off is no check taken out)."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else []
    never = _falsy(test) or any(map(_falsy, parts))
    node = _if_at(tree, line)
    return never and node is not None and not all(map(_output_only, node.body))


def bypasses_added(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """An ``if`` put in above a check that hands back, early, the very answer the function gives once the
    check has passed (``if client[0] in ("127.0.0.1", "::1"): return self.app(scope, receive, send)`` above
    ``if … not self.verify_token(headers): return response(…)`` … ``return self.app(scope, receive,
    send)``): when its condition holds, the check is skipped and the caller is let through."""
    out: list[Finding] = []
    for r in regions:
        if r.removed or edit.st.tree is None:
            continue  # (lines added, nothing taken away)
        for n in r.lines:
            if not edit.lines[n - 1].lstrip().startswith("if "):
                continue  # (most added lines open no ``if``: no tree is asked)
            check = _check_bypassed(edit.st.tree, n, r.end)
            if check is not None:
                node = _if_at(edit.st.tree, n)
                test = _short(node.test) if node is not None else ""
                detail = f"`if {test}:` lets the caller through before the check `{_short(check.test)}` below"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _check_bypassed(tree: ast.Module, n: int, last: int) -> ast.If | None:
    """The check (an ``if`` asking a checking call, that leaves otherwise) the ``if`` at line ``n`` — added,
    ending by ``last`` — skips by returning what its block returns at its end, the answer once it passed."""
    node = _if_at(tree, n)
    if node is None or node.orelse or (node.end_lineno or 0) > last:
        return None
    answer = node.body[-1].value if isinstance(node.body[-1], ast.Return) else None
    if answer is None:
        return None
    block = _block_holding(tree, node)
    later = block[block.index(node) + 1 :]
    end = later[-1] if later else None
    key = ast.dump(answer)
    if not (isinstance(end, ast.Return) and end.value is not None and ast.dump(end.value) == key):
        return None
    return next((s for s in later[:-1] if isinstance(s, ast.If) and _refuses_unless_checked(s, key)), None)


def _refuses_unless_checked(node: ast.If, answer: str) -> bool:
    """Whether an ``if`` asks a checking call (``verify_token(…)``, ``self._validate(…)``) and leaves
    otherwise than with ``answer``: a raise, or another answer."""
    asks = any(
        isinstance(c, ast.Call) and _CHECKING_NAME.fullmatch(last_name(c.func) or "") is not None
        for c in ast.walk(node.test)
    )
    leave = node.body[-1]
    other = isinstance(leave, ast.Raise) or (
        isinstance(leave, ast.Return) and leave.value is not None and ast.dump(leave.value) != answer
    )
    return asks and other


_CHECKING_NAME = re.compile(CHECKING_CALL)


def _block_holding(tree: ast.Module, node: ast.stmt) -> list[ast.stmt]:
    """The list of statements ``node`` stands in (a body, an ``else``, a handler's, a ``case``'s): looked for
    in the statements over its line first, then — a ``match`` hides its cases from those — everywhere."""
    over = [tree, *nodes_at(tree, {node.lineno})]
    over += [h for o in over for h in getattr(o, "handlers", ())]
    for outer in itertools.chain(over, ast.walk(tree)):
        for block in (getattr(outer, field, None) for field in ("body", "orelse", "finalbody")):
            if isinstance(block, list) and node in block:
                return block
    return [node]


def _if_at(tree: ast.Module | None, line: int) -> ast.If | None:
    """The ``if`` whose header is at ``line``."""
    found = _header_at(tree, line, ast.If)
    return found if isinstance(found, ast.If) else None


def _falsy(test: ast.expr) -> bool:
    return isinstance(test, ast.Constant) and not test.value


def _sanitizes(node: ast.If) -> bool:
    """An ``if`` whose body puts right the value its condition found wrong (``if top_k <= 0 or top_k > V:
    top_k = V``): a check that mends instead of refusing."""
    tested = {ast.unparse(n) for n in ast.walk(node.test) if isinstance(n, (ast.Name, ast.Attribute))}
    tested -= _made_when_missing(node.test)
    return any(
        isinstance(stmt, ast.Assign) and any(ast.unparse(t) in tested for t in stmt.targets)
        for stmt in node.body
    )


def _made_when_missing(test: ast.expr) -> set[str]:
    """What a condition asks is missing (``self._scores is None or …``): an ``if`` that makes it then builds
    what is not there yet (a buffer, a cache) — no value put right."""
    return {
        ast.unparse(c.left)
        for c in ast.walk(test)
        if isinstance(c, ast.Compare)
        and len(c.ops) == 1
        and isinstance(c.ops[0], ast.Is)
        and isinstance(c.comparators[0], ast.Constant)
        and c.comparators[0].value is None
    }


_VOID_ASSERTS = ("assert True", "assert 1", "assert(True)")


def _replaced(old: str, added: Sequence[str]) -> bool:
    """The same edit puts another check in its place: a raise rewritten (a new message, an f-string), an
    assert changed, an assert turned into ``if not …: raise ValueError(…)`` (which ``python -O`` keeps) or
    back — not one made void (``assert True``), nor a bare ``raise`` for a ``raise`` that said what."""
    word = old.split(None, 1)[0].split("(", 1)[0]  # "raise" or "assert"
    return any(
        (
            a.split(None, 1)[0].split("(", 1)[0] in ("raise", "assert")
            and not a.startswith(_VOID_ASSERTS)
            and a != "raise"
            and a != word
        )
        or _CHECK_CALL.match(a) is not None  # a call whose name says it checks: ``pool.verify_all_free()``
        for a in added
        if a
    )


def _strengthened(stmt: str, asserts: Sequence[str]) -> bool:
    """``assert cond`` whose condition lives on inside a new assert (``assert cond and more``)."""
    if not stmt.startswith("assert"):
        return False
    cond = stmt[len("assert") :].split(",", 1)[0]
    return bool(cond) and any(cond in a for a in asserts)


_EXITS = ("return", "continue", "break")
