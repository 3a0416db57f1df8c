"""Judge every change: injected debug code, its severity, its gate, and whether it is on the live path.

The package's face; the rooms behind it: :mod:`.engine` judges one changed file (changed lines → statements
→ rules), :mod:`.judge` walks statements with libcst, :mod:`.rules` and :mod:`patchguard.rulebook` say what
each rule matches, :mod:`.structure` and :mod:`.newer` read a file's shape, :mod:`.bounds` keeps parsers
safe, :mod:`.kept` remembers verdicts, :mod:`.reach` says what is served.
"""

from __future__ import annotations

from .engine import CodeChange, analyse

__all__ = ["CodeChange", "analyse"]
