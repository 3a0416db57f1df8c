"""How wild a text may be before a parser sees it.

libcst's native parser recurses once per nesting level and tokenises a line into memory many times its
size: 100,000 nested parentheses crash the process (a segfault, not an exception), and one 50 MB line asks
for gigabytes. ``ast`` is bounded by CPython (200 nested brackets, 100 indentation levels), libcst is not.
Every text of the scanned environment passes :func:`too_wild` before any parser sees it; what does not is
judged as a file no grammar parses (an ``unparseable`` finding saying why), never a crash.
"""

from __future__ import annotations

import functools
import re

__all__ = ["MAX_DEPTH", "MAX_LINE", "too_wild"]

MAX_DEPTH = 200
"""The most nested brackets a text may hold: CPython's own parser stops there ("too many nested
parentheses"), so no valid Python file is refused."""

MAX_LINE = 256 * 1024
"""The longest line, in characters, handed to a parser (source lines are short; data tables that are not,
such a file is reported instead of judged)."""

# Brackets, and what to step over: comments and string literals (a ")" in a string must not hide nesting).
_TOKENS = re.compile(
    r"""#[^\n]*|'{3}(?:\\.|[^\\])*?'{3}|"{3}(?:\\.|[^\\])*?"{3}|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|[()\[\]{}]"""
)


@functools.lru_cache(maxsize=16)  # a file's text is asked of by its structure, the cosmetic test, the reach
def too_wild(text: str) -> tuple[int, str] | None:
    """``(line, why)`` when ``text`` is too deeply nested or has too long a line for a parser; else ``None``.

    >>> too_wild("f(x)\\n"), too_wild("(" * 300)
    (None, (1, 'more than 200 nested brackets'))
    """
    if len(text) > MAX_LINE:
        for number, line in enumerate(text.split("\n"), start=1):
            if len(line) > MAX_LINE:
                return number, f"a line of {len(line)} characters, over the {MAX_LINE} patchguard parses"
    opening = text.count("(") + text.count("[") + text.count("{")
    if opening <= MAX_DEPTH:
        return None
    depth = 0
    for m in _TOKENS.finditer(text):
        token = m.group()
        if token in ("(", "[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                return text.count("\n", 0, m.start()) + 1, f"more than {MAX_DEPTH} nested brackets"
        elif token in (")", "]", "}") and depth:
            depth -= 1
    return None
