"""The walk without libcst's rebuilding makes the same calls, in the same order, as libcst's own visit; the
positions are libcst's own."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import PositionProvider

from patchguard.analysis import cstwalk

REPO = Path(__file__).resolve().parent.parent
SOURCES = sorted((REPO / "patchguard").rglob("*.py")) + sorted((REPO / "fixtures").rglob("*.py"))
TRICKY = """
x = f"{a!r:>{width}} {b=} {c:{d}.{e}}"
match p:
    case {"k": [1, *rest]} | Point(x=0) if rest: pass
async def g():
    async with a as (b, c), d: await e
    async for i in j: yield i
lambda *a, b=1, **k: (yield)
del a[1:2, ::3], b.c
try: pass
except* ValueError as e: raise
finally: pass
"""


class _Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, ...]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.log.append(("visit", type(node).__name__))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.log.append(("leave", type(original_node).__name__))

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.log.append(("visit", type(node).__name__, attribute))

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        self.log.append(("leave", type(original_node).__name__, attribute))


@pytest.mark.parametrize("text", [TRICKY, *(p.read_text() for p in SOURCES[:: max(1, len(SOURCES) // 60)])])
def test_the_same_calls_in_the_same_order(text: str) -> None:
    module = cst.parse_module(text)
    theirs, mine = _Recorder(), _Recorder()
    module.visit(theirs)
    cstwalk.walk(module, mine)
    assert mine.log == theirs.log


class _Hooks(cst.CSTVisitor):
    SKIPS_TRIVIA = True

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def visit_If_body(self, node: cst.If) -> None:
        self.seen.append("if-body")

    def visit_Call(self, node: cst.Call) -> None:
        self.seen.append("call")

    def visit_Comma(self, node: cst.Comma) -> None:
        self.seen.append("comma")  # trivia: never reached when the visitor skips it


def test_hooks_are_called_and_trivia_skipped_on_request() -> None:
    module = cst.parse_module("if a:\n    f(1, 2)\n")
    hooks = _Hooks()
    cstwalk.walk(module, hooks)
    assert hooks.seen == ["if-body", "call"]
    positions = cstwalk.positions(module)
    calls = [n for n in positions if isinstance(n, cst.Call)]
    assert [positions[c].start.line for c in calls] == [2]


CRLF = "s = '''a\r\nb'''\r\nt = 2\r\n"


@pytest.mark.parametrize(
    "text", ["", "x = 1", "\n\n# only a comment", TRICKY, CRLF, *(p.read_text() for p in SOURCES[::7])]
)
def test_the_same_positions_as_libcst(text: str) -> None:
    module = cst.parse_module(text)
    theirs = PositionProvider()
    theirs._computed = {}
    theirs._gen_impl(module)
    assert dict(cstwalk.positions(module)) == dict(theirs._computed)
    # without trivia: the same ranges, less those of whitespace, comments and punctuation
    lean = dict(cstwalk.positions(module, trivia=False))
    assert all(theirs._computed[n] == r for n, r in lean.items())
    assert all(n in lean for n in theirs._computed if not isinstance(n, cstwalk.TRIVIA))


_KINDS: list[tuple[type[cst.CSTNode], ...]] = [
    (cst.Name,),
    (cst.Call,),
    (cst.Attribute,),
    (cst.Raise,),
    (cst.Return,),
    (cst.Assert, cst.IfExp),
    (cst.SimpleString, cst.FormattedString),
    (cst.BaseExpression,),  # a base class: every node derived from it
]


_CODE = [p.read_text() for p in SOURCES if p.stat().st_size > 2000]  # (not a docstring-only ``__init__``)


@pytest.mark.parametrize("text", [TRICKY, *_CODE[:: max(1, len(_CODE) // 30)]])
def test_find_all_finds_what_libcst_matchers_find(text: str) -> None:
    import libcst.matchers as m

    module = cst.parse_module(text)
    for kinds in _KINDS:

        def of_kind(node: cst.CSTNode, kinds: tuple[type[cst.CSTNode], ...] = kinds) -> bool:
            return isinstance(node, kinds)

        theirs = m.findall(module, m.MatchIfTrue(of_kind))
        mine = cstwalk.find_all(module, *kinds)
        assert [id(n) for n in mine] == [id(n) for n in theirs], kinds
    assert cstwalk.find_all(module, cst.Name)  # (not vacuous: every text names something)
