"""What a table or an answer lets by, grown: a literal set of allowed values given more items, an entry
taken out of a table of checks, what a "supported" function returns or answers widened."""

from __future__ import annotations

import ast
import bisect
import copy
import keyword
import re
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from ...diffs import split_lines
from ...model import Finding, RuleId
from ..cases import compare
from ..change import Edit, code_of, last_name, locate, nodes_at
from ..reach.calls import statements_in
from ..rules import GIVEN_NAME
from ..structure import Region, Structure
from .checks import only_presence, weaker
from .refusals import (
    _ALLOWING,
    _EXIT_NODES,
    _LITERALS,
    _READY,
    _answers_admission,
    _answers_no,
    _check_finding,
    _decision,
    _function_at,
    _guards_raise_node,
    _Literal,
    _number,
    _own_statements,
    _passes_a_refusal,
    _raises,
    _short,
    _squeeze,
    _squeezed_source,
    _statement,
    _words,
    unwrapped,
)

__all__ = [
    "answer_widened",
    "checks_dropped",
    "flags_widened",
    "supported_grown",
    "table_entries_dropped",
    "widened_sets",
]


def widened_sets(edit: Edit, changed: set[int]) -> list[Finding]:
    """The values a check allows, grown: a literal list, tuple or set given more items (``supported =
    {bf16, f16}`` → ``{bf16, f16, f32}``) where a check tests membership of it (``if x not in supported:
    raise``, or return) — or, the other way, the values it refuses, fewer (``unsupported = [a, b]`` → ``[a]``
    where ``if x in unsupported: return False``); through the names the file gives it (``allowed =
    SUPPORTED_SIZES``): what it refused now passes."""
    inside = _in_literals(edit.lines, changed) if edit.before is not None else []
    if not inside or edit.before is None:
        return []  # (no changed line inside a literal list, tuple or set given a name: no tree walked)
    tree = edit.st.tree
    text = "".join(edit.lines)
    pristine = split_lines(edit.before)
    out: list[Finding] = []
    for target, items in _literal_sets(nodes_at(tree, set(inside))):
        end = items.end_lineno or items.lineno
        lines = inside[bisect.bisect_left(inside, target.lineno) : bisect.bisect_right(inside, end)]
        name = last_name(target)
        names = _names_for(tree, name, text) if lines else set()
        old = _pristine_literal(pristine, name) if names else None
        detail = _set_loosened(tree, text, name, names, old, items) if old is not None else ""
        if detail:
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, lines[0], f"check neutralised: {detail}"))
    return out


def _set_loosened(
    tree: ast.Module | None, text: str, name: str, names: set[str], old: _Literal, items: _Literal
) -> str:
    """How the collection ``name`` (also known as ``names``), ``old`` before and ``items`` now, lets more by:
    more values where a check tests membership of it, fewer where a check refuses its members; or ""."""
    was, now = {ast.dump(e) for e in old.elts}, {ast.dump(e) for e in items.elts}
    by_name = not isinstance(items, _Table)
    if was < now and any(_tested_in(tree, n, text, by_name) for n in names):
        more = [ast.unparse(e) for e in items.elts if ast.dump(e) not in was]
        return f"`{name}`, which a check tests membership of, allows more: {', '.join(more)[:60]}"
    if now < was and any(_refused_in(tree, n, text) for n in names):
        fewer = [ast.unparse(e) for e in old.elts if ast.dump(e) not in now]
        return f"`{name}`, whose members a check refuses, no longer holds {', '.join(fewer)[:60]}"
    return ""


def _names_for(tree: ast.Module | None, name: str, text: str) -> set[str]:
    """``name`` and the names the file gives it (``allowed = SUPPORTED_SIZES``) that some ``in`` tests,
    by the text; empty when none is."""
    names = {name}
    if f"= {name}" in text and re.search(rf"=\s*(?:[\w.]+\.)?{re.escape(name)}\s*$", text, re.M):
        for node in statements_in(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and last_name(node.value) == name:
                names.add(last_name(node.targets[0]))
    return {n for n in names if n and (_asked_what_it_holds(n, text) or _handed_to_a_call(n, text))}


def _handed_to_a_call(name: str, text: str) -> bool:
    """Whether a collection named for what is let by (``ALLOWED_IMAGE_FORMATS``) or refused
    (``UNSUPPORTED_OPS``) is handed whole to a call, which enforces it (``Image.open(fp,
    formats=ALLOWED_IMAGE_FORMATS)``), by the text."""
    words = _words(name)
    if _ALLOWING.isdisjoint(words) and _REFUSED_WORDS.isdisjoint(words):
        return False
    return re.search(rf"[(,]\s*(?:\w+\s*=\s*)?(?:[\w.]+\.)?{re.escape(name)}\s*[,)]", text) is not None


# How a collection is asked what it holds, by the text around each place its name stands: ``x in name`` (or
# ``in mod.name``), ``keys & name``, before it; ``name.intersection(…)``, ``name & keys``, after it.
_ASKED_BEFORE = re.compile(r"(?:\bin\s+(?:[\w.]+\.)?|&\s*)\Z")


_ASKED_AFTER = re.compile(r"\s*(?:&|\.(?:intersection|isdisjoint|issuperset|issubset|get)\()")


_REACH = 200  # how far before a name ``in`` and a dotted prefix may stand


def _asked_what_it_holds(name: str, text: str) -> bool:
    """Whether ``text`` asks the collection ``name`` what it holds: ``x in name``, ``name.intersection(…)``,
    ``name & keys``, ``keys & name``, ``name.isdisjoint(…)`` (looked for where the name stands, not by a
    search of the whole file for each way of asking)."""
    at = text.find(name)
    while at >= 0:
        end = at + len(name)
        if end == len(text) or not _is_word_char(text[end]):  # (the whole name, not a longer one)
            before = text[max(0, at - _REACH) : at]
            if (before[-1:].isspace() or before.endswith((".", "&"))) and _ASKED_BEFORE.search(before):
                return True
            if (at == 0 or not _is_word_char(text[at - 1])) and _ASKED_AFTER.match(text, end):
                return True
        at = text.find(name, at + 1)
    return False


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _refused_in(tree: ast.Module | None, name: str, text: str = "") -> bool:
    """Whether an ``if`` that raises or leaves refuses the members of ``name`` (``if x in name:``, ``if
    any(a in name for a in xs):``), or an ``assert`` its non-members (``assert x not in name``) — or, for a
    collection named for what is refused (``_XGRAMMAR_UNSUPPORTED_KEYWORDS``), any use of it in ``text``."""
    if not _REFUSED_WORDS.isdisjoint(_words(name.lower())) and re.search(rf"\b{re.escape(name)}\b", text):
        return True
    refusing = lambda node: _guards_raise_node(node) or any(map(_answers_no, node.body))  # noqa: E731
    return _membership_refused(tree, name, refusing, ast.In, ast.NotIn)


def _membership_refused(
    tree: ast.Module | None, name: str, refusing: Callable[[ast.If], bool], in_if: type, in_assert: type
) -> bool:
    """Whether an ``if`` that is ``refusing`` tests ``name`` with the operator ``in_if`` (``in`` or ``not
    in``), or an ``assert`` with ``in_assert``."""
    for node in statements_in(tree):
        if isinstance(node, ast.If) and refusing(node):
            wanted = in_if
        elif isinstance(node, ast.Assert):
            wanted = in_assert
        else:
            continue
        for cmp in ast.walk(node.test):
            pairs = zip(cmp.ops, cmp.comparators, strict=True) if isinstance(cmp, ast.Compare) else ()
            if any(isinstance(op, wanted) and last_name(c) == name for op, c in pairs):
                return True
            if wanted is ast.In and _shared_with(cmp, name):
                return True
    return False


def _shared_with(node: ast.AST, name: str) -> bool:
    """Whether ``node`` is what the collection ``name`` shares with another (``name & keys``, ``keys &
    name``, ``name.intersection(keys)``): tested for truth, its members are the ones found."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
        return name in (last_name(node.left), last_name(node.right))
    func = node.func if isinstance(node, ast.Call) else None
    return isinstance(func, ast.Attribute) and func.attr == "intersection" and last_name(func.value) == name


_WRAPPED = r"(?:(?:frozenset|set|tuple|list)\(\s*)?"  # ``frozenset({…})``: a literal set all the same


# (``NAME = BASE | frozenset({…})``, ``NAME = BASE + (…)``: a literal joined to a named collection, too)
_LITERAL_OPENING = re.compile(
    rf"^[ \t]*[\w.]+[ \t]*(?::[^=\n]+)?=[ \t]*(?:[\w.]+[ \t]*[|+][ \t]*)?{_WRAPPED}[\[({{]", re.MULTILINE
)


def _in_literals(lines: Sequence[str], changed: set[int]) -> list[int]:
    """The changed lines that are lines of ``name = [ … ]`` (a list, tuple or set written out), in order, by
    the text: each such opening, to where its brackets close."""
    ordered = sorted(changed)
    text = "".join(lines)
    k, at = 1, 0
    out: list[int] = []
    for m in _LITERAL_OPENING.finditer(text):
        k += text.count("\n", at, m.start())
        at = m.start()
        i = bisect.bisect_left(ordered, k)
        if i == len(ordered) or ordered[i] > k + 200:
            continue  # (no changed line near: the literal's end is not worked out)
        end = k - 1 + _statement(lines, k - 1).count("\n")
        out += ordered[i : bisect.bisect_right(ordered, end)]
    return out


def _literal_sets(nodes: Iterable[ast.AST]) -> Iterator[tuple[ast.expr, ast.List | ast.Tuple | ast.Set]]:
    """Of these statements, every ``name = [literal items]`` (a list, tuple or set; ``name: T = (…)`` too),
    as (the name given it, its items)."""
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], unwrapped(node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, unwrapped(node.value)
        else:
            continue
        if isinstance(value, _LITERALS):
            yield target, value
        elif isinstance(value, ast.Dict) and value.keys and all(k is not None for k in value.keys):
            # a table looked up: its keys are what it lets by
            yield target, ast.copy_location(_Table(elts=_entries(value)), value)
        elif isinstance(value, ast.BinOp) and (parts := _united(value)) is not None:
            yield target, ast.copy_location(ast.Set(elts=parts), value)  # (a union: what each part holds)


class _Table(ast.Set):
    """A dict written out, as the set of its keys: what a lookup lets by. Whether it refuses what it lacks
    is read from the code alone, never from its name (``_PREVIOUSLY_SUPPORTED_MODELS`` is a table of
    refusals whatever it says)."""


def _united(value: ast.expr) -> list[ast.expr] | None:
    """What a union or concatenation of literal and named collections holds (``BASE | frozenset({"a"})``,
    ``SUPPORTED + ("b",)``): the literals' items and each named part as one whole (``*BASE``); ``None`` for
    anything else."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.BitOr)):
        left, right = _united(value.left), _united(value.right)
        return left + right if left is not None and right is not None else None
    value = unwrapped(value)
    if isinstance(value, _LITERALS):
        return list(value.elts)
    if isinstance(value, (ast.Name, ast.Attribute)):
        return [ast.Starred(value=value, ctx=ast.Load())]
    return None


def _pristine_literal(lines: Sequence[str], name: str) -> ast.List | ast.Tuple | ast.Set | None:
    """The items the pristine file gives ``name`` where it writes ``name = [ … ]`` (once), read from the
    text: that statement alone is parsed."""
    opening = re.compile(
        rf"^\s*(?:[\w.]+\.)?{re.escape(name)}\s*(?::[^=]+)?=\s*(?:{_WRAPPED}[\[({{]|\w+\($|[\w.]+\s*[|+])"
    )
    at = [k for k, line in enumerate(lines) if opening.match(line)]
    if len(at) != 1:
        return None
    try:
        tree = ast.parse(textwrap.dedent(_statement(lines, at[0])))
    except (SyntaxError, ValueError, RecursionError):
        return None
    found = list(_literal_sets(tree.body))
    return found[0][1] if found else None


# Words of a collection named for what may go ahead (``_SUPPORTED_ARCHITECTURES``, ``_SAFE_PRE_TOKENIZERS``).
_ALLOW_LIST_WORDS = _ALLOWING | {"safe"}


def _tested_in(tree: ast.Module | None, name: str, text: str = "", by_name: bool = True) -> bool:
    """Whether an ``if`` that raises or leaves (or an ``assert``) tests ``x not in name`` (``x in name``) —
    or, for a collection named for what is supported or allowed (``_SUPPORTED_ARCHITECTURES``), any test of
    its members in ``text`` (a table of refusals tests it as much; ``enabled = x in SUPPORTED`` decides
    by it), or a call it is handed to (those two by its name: not ``by_name``, the code's tests alone) — or a
    lookup of it whose miss is refused (:func:`_lookup_refused`)."""
    named = by_name and not _ALLOW_LIST_WORDS.isdisjoint(_words(name.lower()))
    if named and re.search(rf"\bin\s+(?:[\w.]+\.)?{re.escape(name)}\b", text):
        return True
    if by_name and _handed_to_a_call(name, text):
        return True  # (``Image.open(fp, formats=ALLOWED_IMAGE_FORMATS)``: the call lets by what it lists)
    refusing = lambda node: _guards_raise_node(node) or isinstance(node.body[-1], _EXIT_NODES)  # noqa: E731
    return _membership_refused(tree, name, refusing, ast.NotIn, ast.In) or _lookup_refused(tree, name)


def _lookup_refused(tree: ast.Module | None, name: str) -> bool:
    """Whether a table ``name`` is looked up (``name.get(key)``) in the test of an ``if`` that answers what it
    found and passes a refusal below (``if backend := mapping.get(b): return backend`` … ``raise``), or that
    raises itself (``if mapping.get(b) is None: raise``): a key the table lacks is refused."""
    for node in statements_in(tree):
        if not isinstance(node, ast.If):
            continue
        looked = any(
            isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "get"
            and last_name(c.func.value) == name
            for c in ast.walk(node.test)
        )  # fmt: skip
        if looked and (_guards_raise_node(node) or _passes_a_refusal(tree, node.lineno)):
            return True
    return False


def literal_types_grown(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A ``Literal[…]`` type given more values, edited in place (``MaxLoRARanks = Literal[1, 8, …, 512]`` →
    ``…, 512, 1024]``, ``mode: Literal["a", "b"]``): a declared type is what a validating config (pydantic,
    a dataclass checked against its hints) holds values to — a value it refused passes now."""
    out: list[Finding] = []
    for r in regions:
        if len(r.removed) != 1 or len(r.lines) != 1 or "Literal[" not in r.removed[0]:
            continue  # (one line edited in place that writes a ``Literal`` type)
        was, now = _literal_values(r.removed[0]), _literal_values(edit.lines[r.lines[0] - 1])
        if was is not None and now is not None and was < now:
            more = ", ".join(sorted(now - was))[:60]
            detail = f"check neutralised: the values a `Literal` type allows grew: {more}"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, r.lines[0], detail))
    return out


def _literal_values(line: str) -> set[str] | None:
    """The values of the one ``Literal[…]`` a line writes (their source), or ``None``."""
    try:
        tree = ast.parse(code_of(line).strip())
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Subscript) and last_name(n.value) == "Literal"]
    if len(found) != 1:
        return None
    items = found[0].slice.elts if isinstance(found[0].slice, ast.Tuple) else [found[0].slice]
    return {ast.unparse(i) for i in items}


def checks_dropped(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A check taken out of a list of checks: an item removed from a literal list, tuple or set that holds
    checks by its name or by what it is (``def get_default_validity_checks(): return [single_softmax_rule,
    …]``, ``VALIDATORS = (check_shape, …)``, an item named ``validate_*``) — the check is no longer run."""
    out: list[Finding] = []
    for r in regions:
        gone = [item for old in r.removed if _ITEM.match(old) and not keyword.iskeyword(item := _item(old))]
        added = [edit.lines[n - 1] for n in r.lines if not edit.lines[n - 1].lstrip().startswith("#")]
        if not gone or any(_ITEM.match(line) is None for line in added):
            continue  # (only bare items taken out, or commented out)
        holder = _holder_of(edit, max(r.start - 1, 1))
        named = not _CHECKS_WORDS.isdisjoint(_words(holder.lower()))
        checks = [g for g in gone if named or not _CHECKS_WORDS.isdisjoint(_words(g.rsplit(".", 1)[-1]))]
        if checks and holder:
            detail = f"check neutralised: `{checks[0][:50]}` taken out of `{holder}`: it is no longer run"
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, max(r.start, 1), detail))
    return out


def _item(line: str) -> str:
    return code_of(line).strip().rstrip(",").strip()


_ITEM = re.compile(r"^\s*[A-Za-z_][\w.]*\s*,?\s*(?:#.*)?$")  # a bare name as an item of a list


# Words of what holds checks, or is one.
_CHECKS_WORDS = frozenset(
    {"check", "checks", "checker", "checkers", "validator", "validators", "validity", "validation"}
    | {"validations", "validate", "verifier", "verifiers", "verify", "guards", "sanity"}
)


def _holder_of(edit: Edit, line: int) -> str:
    """The name a literal list at ``line`` is given to: the assignment's target, the function that returns
    it, or the name a loop walking it gives each item ("" when none)."""
    for node in reversed(list(nodes_at(edit.st.tree, {line}))):
        if isinstance(node, ast.Assign) and isinstance(node.value, (*_LITERALS, ast.Call)):
            return last_name(node.targets[0])
        if isinstance(node, ast.Return) and isinstance(node.value, _LITERALS):
            return _function_at(edit, line)
        if isinstance(node, ast.For) and isinstance(node.iter, _LITERALS) and node.iter.lineno <= line:
            return last_name(node.target)  # ``for validator in (self._a, self._b):``: each item is one
    return ""


def table_entries_dropped(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """An entry taken out of a table the code checks entry by entry — a literal a ``for`` loop walks
    (itself, its ``.items()``, or a name given it) whose body raises: ``for name, expected in {"block_size":
    128, …}.items(): if cfg.get(name) != expected: raise …``. Each entry is a requirement: one commented
    out or deleted is a check gone (one still written in the installed file, moved, is kept)."""
    if edit.before is None or not any(old.rstrip().endswith(",") for r in regions for old in r.removed):
        return []  # (an entry of a table over several lines ends with a comma)
    before, lines = locate(edit.before), split_lines(edit.before)
    out: list[Finding] = []
    for r in regions:
        gone = set(range(r.old_start, r.old_start + len(r.removed)))
        for entries, loop in _tables_at(before, gone, edit.before):
            dropped = [e for e in entries if e.lineno in gone and (e.end_lineno or 0) in gone]
            shown = next((t for e in dropped if not _kept(e, t := _entry_text(lines, e), edit)), "")
            if shown:
                detail = f"check neutralised: `{shown[:60]}` left a table checked entry by entry (`{loop}`)"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, max(r.start, 1), detail))
    return out


def _kept(entry: ast.expr, text: str, edit: Edit) -> bool:
    """Whether a table's entry is still in the installed file: as written, or — a condition and the words
    that say why — its condition, the words reworded."""
    if _written(text, edit):
        return True
    said = isinstance(entry, ast.Tuple) and len(entry.elts) == 2 and isinstance(entry.elts[1], ast.Constant)
    if not said:
        return False
    condition = re.escape(f"({_squeeze(ast.unparse(entry.elts[0]))},")  # type: ignore[attr-defined]
    return re.search(condition + r"[rRbBuUfF]*[\"']", _squeezed_source(edit.text)) is not None  # (an entry)


def _tables_at(before: Structure, lines: set[int], text: str) -> list[tuple[list[ast.expr], str]]:
    """The literal tables holding pristine ``lines`` that a loop whose body raises walks: each one's
    entries and the loop — the loop's own literal, or one a name is given that a loop walks (found by the
    text first: the whole file is walked only then)."""
    out: list[tuple[list[ast.expr], str]] = []
    for node in nodes_at(before.tree, lines):
        if isinstance(node, ast.For):
            out += _checked(node, _table_walked(node, {}))
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.value, _TABLES):
            continue
        named = node.targets[0]
        if (
            isinstance(named, ast.Name)
            and before.tree is not None
            and re.search(rf"\bin\s+{named.id}\b", text)
        ):
            given = {named.id: node.value}
            loops = [n for n in statements_in(before.tree) if isinstance(n, ast.For)]
            out += [t for loop in loops for t in _checked(loop, _table_walked(loop, given))]
            out += _reasons_kept(before.tree, named.id, node.value)
    return out


def _reasons_kept(
    tree: ast.Module, name: str, table: ast.Dict | ast.List | ast.Tuple | ast.Set
) -> list[tuple[list[ast.expr], str]]:
    """(the entries, the comprehension) of a table of reasons to refuse — each entry a condition and the
    words that say why (``(hicache, "a HiCache backend moves KV between steps")``) — that a comprehension
    walks keeping the reasons whose condition holds (``why for refused, why in reasons if refused``)."""
    entries = _entries(table)
    paired = bool(entries) and all(
        isinstance(e, ast.Tuple) and len(e.elts) == 2 and isinstance(e.elts[1], (ast.Constant, ast.JoinedStr))
        for e in entries
    )
    for node in ast.walk(tree) if paired else ():
        made = node if isinstance(node, (ast.GeneratorExp, ast.ListComp)) else None
        walks = made is not None and len(made.generators) == 1 and made.generators[0].ifs
        if made is not None and walks and last_name(made.generators[0].iter) == name:
            return [(entries, f"{ast.unparse(made)[:40]}")]
    return []


def _checked(
    loop: ast.For, table: ast.Dict | ast.List | ast.Tuple | ast.Set | None
) -> list[tuple[list[ast.expr], str]]:
    """(the entries, the loop) of a table a loop whose body raises walks; none else."""
    if table is None or not any(isinstance(s, ast.Raise) for s in _own_statements(loop.body)):
        return []
    return [(_entries(table), f"for {ast.unparse(loop.target).strip('()')} in …")]


def _entries(table: ast.Dict | ast.List | ast.Tuple | ast.Set) -> list[ast.expr]:
    """A literal table's entries: a dict's keys, a list's, tuple's or set's items."""
    return [k for k in table.keys if k is not None] if isinstance(table, ast.Dict) else list(table.elts)


def _entry_text(lines: Sequence[str], entry: ast.expr) -> str:
    """An entry of a table as written on the pristine ``lines`` (a dict's key with its value: ``"block_size":
    128``)."""
    line = lines[entry.lineno - 1] if entry.lineno else ""
    return code_of(line).strip().rstrip(",") if entry.lineno == entry.end_lineno else ast.unparse(entry)


def _written(text: str, edit: Edit) -> bool:
    """Whether the installed file still holds an entry's text as code (not commented out)."""
    return _squeeze(text) in _squeezed_source(edit.text)


def _table_walked(
    loop: ast.For, given: Mapping[str, ast.expr]
) -> ast.Dict | ast.List | ast.Tuple | ast.Set | None:
    """The literal table a ``for`` loop walks: itself, its ``.items()``/``.keys()``/``.values()``, or the
    literal a name was ``given``."""
    walked = loop.iter
    if isinstance(walked, ast.Call) and isinstance(walked.func, ast.Attribute) and not walked.args:
        walked = walked.func.value if walked.func.attr in ("items", "keys", "values") else walked
    table = given.get(walked.id) if isinstance(walked, ast.Name) else walked
    return table if isinstance(table, _TABLES) else None


_TABLES = (*_LITERALS, ast.Dict)


def supported_grown(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """What a function that says what is supported or allowed returns, grown (``get_supported_head_sizes``:
    ``return [32, 64, …]`` given 48 and 576): the function is the check, what it left out passes now."""
    out: list[Finding] = []
    for r in regions:
        if _ALLOWING.isdisjoint(_words((edit.st.qualname_at(r.start) or "").rsplit(".", 1)[-1])):
            continue  # (most functions do not say what is allowed: nothing parsed)
        if not r.removed or not any(old.lstrip().startswith("return") for old in r.removed):
            found = [(r.start, _answer_grown_inside(edit, r))]  # an entry added to or taken from its middle
        else:
            was = [v for i in range(len(r.removed)) if (v := _returned_literal(_statement(r.removed, i)))]
            found = [(n, _returns_more(edit, n, was[0])) for n in (r.lines if was else ())]
        for n, detail in (f for f in found if f[1]):
            out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def _answer_grown_inside(edit: Edit, r: Region) -> str:
    """How the literal a function that says what is allowed returns holds more, the region inside it."""
    around = _return_around(edit, r)
    if around is None:
        return ""
    was = _returned_literal(_statement(split_lines(edit.before or ""), around[0] - 1))
    return _returns_more(edit, around[1], was) if was is not None else ""


def _return_around(edit: Edit, r: Region) -> tuple[int, int] | None:
    """(its pristine line, its installed line) of the one ``return`` over several lines that holds a region
    on both sides, in the same function — an item added to or taken from the middle of what it answers."""
    if edit.before is None:
        return None
    now = [n for n in nodes_at(edit.st.tree, {r.start}) if isinstance(n, ast.Return) and n.lineno < r.start]
    old_line = r.old_start if r.removed else r.old_start - 1
    before = locate(edit.before)
    was = [n for n in nodes_at(before.tree, {old_line}) if isinstance(n, ast.Return) and n.lineno < old_line]
    if len(now) != 1 or len(was) != 1 or (now[0].end_lineno or 0) < r.end:
        return None
    if before.qualname_at(was[0].lineno) != edit.st.qualname_at(now[0].lineno):
        return None
    return was[0].lineno, now[0].lineno


def _returns_more(edit: Edit, n: int, was: _Literal | ast.Dict) -> str:
    """How the literal list returned at line ``n`` by a function that says what is allowed holds more than
    ``was``, or ""."""
    now = _returned_literal(_statement(edit.lines, n - 1))
    function = (edit.st.qualname_at(n) or "").rsplit(".", 1)[-1]
    if now is None or _ALLOWING.isdisjoint(_words(function)):
        return ""
    if isinstance(was, ast.Dict) or isinstance(now, ast.Dict):
        more = _limits_grown(was, now) if isinstance(was, ast.Dict) and isinstance(now, ast.Dict) else ""
        return f"{function} allows more: {more}" if more else ""
    old = {ast.dump(e) for e in was.elts}
    if not old < {ast.dump(e) for e in now.elts}:
        return ""
    more = ", ".join(ast.unparse(e) for e in now.elts if ast.dump(e) not in old)[:60]
    return f"{function} allows more: {more}"


def _limits_grown(was: ast.Dict, now: ast.Dict) -> str:
    """How a table of what is allowed, each key to its limit (``{"image": 1}``), allows more now: a key
    added, a number raised, a number made ``None`` (no limit) — none lowered; or ""."""
    before = {ast.dump(k): v for k, v in zip(was.keys, was.values, strict=True) if k is not None}
    grown: list[str] = []
    for k, v in zip(now.keys, now.values, strict=True):
        old = before.pop(ast.dump(k), None) if k is not None else None
        if k is None or old is None:
            grown.append(ast.unparse(k) if k is not None else "**")
        elif _limit_raised(old, v):
            grown.append(f"{ast.unparse(k)}: {ast.unparse(old)} → {ast.unparse(v)}")
        elif ast.dump(old) != ast.dump(v):
            return ""  # a limit lowered or changed otherwise: not only more
    return ", ".join(grown)[:80] if grown and not before else ""


def _limit_raised(old: ast.expr, new: ast.expr) -> bool:
    """Whether a number was raised, or made ``None`` (no limit)."""
    a, b = _number(old), _number(new)
    unlimited = isinstance(new, ast.Constant) and new.value is None and a is not None
    return (a is not None and b is not None and b > a) or unlimited


def answer_widened(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """What a function that says whether something is supported or allowed answers, true in more cases
    (read by cases, :mod:`.cases`): ``return capability.major in [9, 10]`` → ``return capability.major >=
    9``, ``return n % 8 == 0`` → ``return n % 8 == 0 or n % 2 == 0`` — the function is the check."""
    out: list[Finding] = []
    for r in regions:
        function = (edit.st.qualname_at(r.start) or "").rsplit(".", 1)[-1]
        if not _answers_admission(function):
            continue  # (most functions do not say what is allowed: nothing parsed)
        was, lines = _answers_of(edit, r)
        for n in lines if len(was) == 1 else ():
            now = _returned_value(_statement(edit.lines, n - 1))
            if now is not None and _yes_more_often(was[0], now) and not _refuses_more_now(edit, n):
                detail = f"{_short(was[0])} → {_short(now)}: it answers yes in more cases"
                out.append(_check_finding(edit, RuleId.REMOVED_CHECK, n, f"check neutralised: {detail}"))
    return out


def flags_widened(regions: Sequence[Region], edit: Edit) -> list[Finding]:
    """A flag named for whether something may go ahead (``_kda_available = … >= 10`` → ``>= 9``,
    ``self.fp8_supported = …``) given a value that holds in more cases (read by cases, :mod:`.cases`): what
    :func:`answer_widened` reads of a function's answer, of the name that keeps it."""
    out: list[Finding] = []
    before = locate(edit.before).tree if edit.before is not None else None
    for r in regions if before is not None else ():
        if not r.removed or not r.lines or not _flag_named_near(edit.lines, r.start, r.end):
            continue  # (a value rewritten in place, of a flag so named: most regions are not read further)
        now = _flag_set(edit.st.tree, r.start, r.end)
        was = _flag_set(before, r.old_start, r.old_start + len(r.removed) - 1)
        if now is None or was is None or now[0] != was[0] or not _yes_more_often(was[1], now[1]):
            continue
        detail = f"`{now[0]}` {_short(was[1])} → {_short(now[1])}: it says yes in more cases"
        out.append(_check_finding(edit, RuleId.REMOVED_CHECK, r.start, f"check neutralised: {detail}"))
    return out


def _flag_named_near(lines: Sequence[str], first: int, last: int) -> bool:
    """Whether a line of ``first..last``, or one of the few above (where an assignment over several lines
    begins), gives a flag named for whether something may go ahead a value — by the text."""
    near = lines[max(first - 1 - _ABOVE, 0) : last]
    named = (m.group(1).rsplit(".", 1)[-1] for line in near if (m := GIVEN_NAME.match(line)))
    return any(_admission_flag(name) for name in named)


_ABOVE = 8  # lines above a region where the assignment holding it may begin


def _flag_set(tree: ast.Module | None, first: int, last: int) -> tuple[str, ast.expr] | None:
    """(its name, its value) of the one assignment over lines ``first..last`` that gives a flag named for
    whether something may go ahead its value."""
    for node in nodes_at(tree, {first}) if tree is not None else ():
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        target = node.target if isinstance(node, ast.AnnAssign) else target
        value = getattr(node, "value", None)
        if target is None or value is None or (node.end_lineno or 0) < last:
            continue
        name = ast.unparse(target)
        if isinstance(target, (ast.Name, ast.Attribute)) and _admission_flag(name.rsplit(".", 1)[-1]):
            return name, value
    return None


def _admission_flag(name: str) -> bool:
    """A name that keeps whether something may go ahead: as a function that says so is named
    (:func:`.refusals._answers_admission`), or ending in what is ready (``_kda_available``)."""
    return _answers_admission(name) or name.lower().strip("_").rsplit("_", 1)[-1] in _READY


def _answers_of(edit: Edit, r: Region) -> tuple[list[ast.expr], Sequence[int]]:
    """(the pristine answers the region rewrote, the installed lines to read them against): each removed line
    read with the pristine lines after it (a ``return all(`` whose items are kept) — or, a part inside one
    ``return`` added or taken, that ``return`` on both sides."""
    pristine = split_lines(edit.before) if edit.before is not None else list(r.removed)
    first = r.old_start - 1 if edit.before is not None else 0
    was = [v for i in range(len(r.removed)) if (v := _returned_value(_statement(pristine, first + i)))]
    around = _return_around(edit, r) if not was else None
    if around is None:
        return was, r.lines
    v = _returned_value(_statement(pristine, around[0] - 1))
    return ([v] if v is not None else []), [around[1]]


def _refuses_more_now(edit: Edit, line: int) -> bool:
    """Whether the installed function around ``line`` raises in more places than the pristine one: it
    answers yes where it checked first (``validate(); return True`` for ``return False``)."""
    scope = edit.st.innermost(line)
    fn = edit.st.def_at(scope.start) if scope is not None else None
    before = locate(edit.before) if edit.before is not None else None
    if fn is None or scope is None or before is None:
        return False
    had = next((s for s in before.scopes if s.qualname == scope.qualname), None)
    was = before.def_at(had.start) if had is not None else None
    return _raises(fn) > (_raises(was) if was is not None else 0)


def _returned_value(statement: str) -> ast.expr | None:
    target, value = _decision(code_of(statement))
    return value if target == "return" else None


def _holds_at_least(before: ast.expr, after: ast.expr) -> bool:
    """Whether ``after`` is ``before``, or holds in more cases by :func:`.cases.compare`."""
    if ast.dump(before) == ast.dump(after):
        return True
    found = compare(before, after)
    return found is not None and found.more


def _all_read_as_any(before: ast.expr, after: ast.expr) -> ast.expr | None:
    """``before`` with each ``all(…)`` of items that ``after`` asks ``any(…)`` of read as that ``any`` (which
    holds wherever it holds), when one is and none stands under a ``not``; else ``None``."""
    asked = {
        ast.dump(ast.Tuple(c.args, ast.Load()))
        for c in ast.walk(after)
        if isinstance(c, ast.Call) and _called(c, "any")
    }
    if not asked or any(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not) for n in ast.walk(before)):
        return None
    found = False

    class _Any(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            nonlocal found
            if _called(node, "all") and ast.dump(ast.Tuple(node.args, ast.Load())) in asked:
                found = True
                return ast.Call(ast.Name("any", ast.Load()), node.args, node.keywords)
            return self.generic_visit(node)

    out = _Any().visit(copy.deepcopy(before))
    return out if found else None


def _called(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _yes_more_often(before: ast.expr, after: ast.expr) -> bool:
    """Whether an answer holds in more cases: a constant answer made another (:func:`_constant_widened`),
    read by cases, or the same answer given an ``or`` part (``return is_supported(…)`` → ``return
    is_supported(…) or hidden in (4096, 7168)``)."""
    widened = isinstance(after, ast.BoolOp) and isinstance(after.op, ast.Or)
    if widened and any(ast.dump(v) == ast.dump(before) for v in after.values):  # type: ignore[attr-defined]
        return True
    constant = _constant_widened(before, after)
    if constant is not None:
        return constant
    weakened = _all_read_as_any(before, after)
    if weakened is not None:  # (``x and all(ok(b) for b in bs)`` → ``any(ok(b) for b in bs)``)
        return _holds_at_least(weakened, after)
    if only_presence(before, after):  # (``id.isalnum() and len(id) == 9`` → ``bool(id)``)
        return True
    if not isinstance(before, _TESTS) or not isinstance(after, _TESTS):
        return False
    found = compare(before, after)
    return (found is not None and found.more) or bool(weaker(after, before))


def _constant_widened(before: ast.expr, after: ast.expr) -> bool | None:
    """Whether a constant answer, or one made constant, says yes in more cases — ``return False`` →
    ``return True`` or ``return x == y``; ``return Support.NEVER`` → ``return Support.UNIFORM_BATCH`` (a
    level of support where there was none) — ``None`` when neither answer is such a constant."""
    if isinstance(after, ast.Constant) and after.value is True:
        return not (isinstance(before, ast.Constant) and before.value is True)
    if isinstance(before, ast.Constant) and before.value is False:
        return not isinstance(after, ast.Constant) and isinstance(after, _TESTS)
    if isinstance(before, ast.Attribute) and before.attr in _NO_MEMBERS and isinstance(after, ast.Attribute):
        return after.attr not in _NO_MEMBERS and ast.dump(after.value) == ast.dump(before.value)
    return None


_TESTS = (ast.Compare, ast.BoolOp, ast.UnaryOp)


# An enum's members named for no support at all (``AttentionCGSupport.NEVER``, ``Mode.DISABLED``).
_NO_MEMBERS = frozenset({"NEVER", "NONE", "NO", "DISABLED", "UNSUPPORTED", "OFF", "FORBIDDEN", "DENIED"})


# Words of a collection named for what is refused: ``_UNSUPPORTED_KEYWORDS``, ``DENYLIST``, ``BLOCKED_OPS``.
_REFUSED_WORDS = frozenset(
    {"unsupported", "disallowed", "forbidden", "banned", "blocked", "blocklist", "denied", "deny", "denylist"}
    | {"blacklist", "rejected", "refused", "incompatible", "unallowed", "prohibited"}
)


def _returned_literal(statement: str) -> ast.List | ast.Tuple | ast.Set | ast.Dict | None:
    target, value = _decision(code_of(statement))
    return value if target == "return" and isinstance(value, _TABLES) else None
