"""Unified diffs: produced with difflib, parsed with unidiff.

Paths are written ``a/<path>`` / ``b/<path>`` relative to site-packages, with git's extended headers, so
``git apply`` (``-R`` to undo) and patchguard's own patch sets accept the output. A missing file is a
deletion, an unexpected text file an addition, a binary file one ``Binary files ... differ`` line. A last
line without a newline gets git's ``\\ No newline at end of file`` marker, so applying is exact.
"""

from __future__ import annotations

import difflib
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .model import json_name, printable

if TYPE_CHECKING:
    from unidiff.patch import PatchSet as UnidiffPatchSet

__all__ = ["FileDiff", "is_binary", "parse_patch", "split_lines", "unified_diff"]


def is_binary(data: bytes) -> bool:
    """git's rule: a NUL byte in the first 8000 bytes makes a file binary; so does invalid UTF-8."""
    if b"\0" in data[:8000]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def split_lines(text: str) -> list[str]:
    """Lines as Python, libcst, git and patch count them: ``\n``, ``\r\n`` and ``\r`` only.

    Not ``str.splitlines()``: it also breaks at ``\x0c``, ``\x1c``-``\x1e``, ``\x85`` and ``\u2028``, so one
    such character in a comment would shift every line number after it.
    """
    return io.StringIO(text, newline="").readlines()


def _lines(data: bytes) -> list[str]:
    return split_lines(data.decode("utf-8"))


def _body(old: Sequence[str], new: Sequence[str], context: int) -> Iterator[str]:
    """Hunks of difflib's unified diff, with the no-newline marker git expects.

    Only difflib's own two header lines are left out (the caller writes git's): a removed line ``-- x`` is
    ``--- x`` in the body and an added ``++ y`` is ``+++ y``, and both are kept.
    """
    for n, line in enumerate(difflib.unified_diff(old, new, lineterm="", n=context)):
        if n < 2:
            continue
        if line.startswith("@@"):
            yield line + "\n"
            continue
        if line.endswith("\n"):
            yield line
        else:
            yield line + "\n\\ No newline at end of file\n"


@dataclass(frozen=True, slots=True)
class FileDiff:
    """The diff of one file: ``old``/``new`` are ``None`` for an added/deleted file."""

    path: str
    old: bytes | None
    new: bytes | None
    mode: str = "100644"
    problem: str | None = None  # why the installed file could not be read, naming it (then no text)

    @property
    def status(self) -> str:
        if self.old is None:
            return "added"
        if self.new is None:
            return "deleted"
        return "modified"

    @property
    def binary(self) -> bool:
        return any(is_binary(d) for d in (self.old, self.new) if d is not None)

    def text(self, context: int = 3) -> str:
        """The git-style unified diff of this file ("" when old and new are equal, or unreadable)."""
        if self.old == self.new or self.problem is not None:
            return ""
        a, b = git_quote(f"a/{self.path}"), git_quote(f"b/{self.path}")
        head = [f"diff --git {a} {b}\n"]
        if self.old is None:
            head.append(f"new file mode {self.mode}\n")
        elif self.new is None:
            head.append(f"deleted file mode {self.mode}\n")
        if self.binary:
            return (
                "".join(head)
                + f"Binary files {a if self.old is not None else '/dev/null'} and "
                + (f"{b if self.new is not None else '/dev/null'} differ\n")
            )
        head.append(f"--- {a if self.old is not None else '/dev/null'}\n")
        head.append(f"+++ {b if self.new is not None else '/dev/null'}\n")
        old = _lines(self.old) if self.old is not None else []
        new = _lines(self.new) if self.new is not None else []
        return "".join(head) + "".join(_body(old, new, context))


_C_ESCAPES = {7: "a", 8: "b", 9: "t", 10: "n", 11: "v", 12: "f", 13: "r", 34: '"', 92: "\\"}
_C_UNESCAPES = {v: k for k, v in _C_ESCAPES.items()}


def git_quote(name: str) -> str:
    """A path as git writes it in a diff header: as it is, unless it holds a control character, ``"``, ``\\``
    or a byte that is not UTF-8 (a ``surrogateescape`` character) — then in double quotes, with C escapes
    and octal for every byte outside printable ASCII (git's ``core.quotePath``), so no name can break a
    line of the diff or speak to a terminal, and ``git apply`` reads it back.

    >>> print(git_quote("a/x.py"), git_quote('a/"q".py'))
    a/x.py "a/\\"q\\".py"
    """
    if not any(ord(c) < 0x20 or c in '"\\\x7f' or 0xD800 <= ord(c) <= 0xDFFF for c in name):
        return name
    out = []
    for byte in name.encode("utf-8", "surrogateescape"):
        if byte in _C_ESCAPES:
            out.append("\\" + _C_ESCAPES[byte])
        elif 0x20 <= byte < 0x7F:
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def git_unquote(name: str) -> str:
    """A path of a diff header as :func:`git_quote` (and git) writes it, back to the name (undecodable bytes
    as ``surrogateescape``); a name not in double quotes is returned as it is. ``ValueError`` for a quoted
    name that is not C-quoted text."""
    if len(name) < 2 or not (name.startswith('"') and name.endswith('"')):
        return name
    body, out, i = name[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in _C_UNESCAPES:
            out.append(_C_UNESCAPES[nxt])
            i += 2
        elif len(body[i + 1 : i + 4]) == 3 and all(d in "01234567" for d in body[i + 1 : i + 4]):
            out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            raise ValueError(f"bad escape in quoted path {name!r}")
    return out.decode("utf-8", "surrogateescape")


def unified_diff(diffs: Sequence[FileDiff], context: int = 3) -> str:
    """All files' diffs, one after the other, in the order given."""
    return "".join(d.text(context) for d in diffs)


def parse_patch(text: str) -> UnidiffPatchSet:
    """Parse unified-diff text with unidiff (``PatchSet``); raises ``unidiff.UnidiffParseError``."""
    from unidiff.patch import PatchSet

    return PatchSet(text)


def hunks_json(d: FileDiff, context: int = 3) -> dict[str, Any]:
    """One file's diff as JSON: path, status, and hunks (header and lines).

    Built from the line comparison itself, never by parsing the diff text back: a file name can break a
    diff header (a newline in it), the lines and ranges cannot. ``path`` is the file name in the JSON name
    encoding (:func:`patchguard.model.json_name`).
    """
    out: dict[str, Any] = {"path": json_name(d.path), "status": d.status, "binary": d.binary, "hunks": []}
    if d.problem is not None:
        out["error"] = printable(d.problem)
    if d.old == d.new or d.problem is not None or d.binary:
        return out
    old = _lines(d.old) if d.old is not None else []
    new = _lines(d.new) if d.new is not None else []
    for group in difflib.SequenceMatcher(None, old, new).get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        source = (i1 + 1 if i2 > i1 else i1, i2 - i1)
        target = (j1 + 1 if j2 > j1 else j1, j2 - j1)
        out["hunks"].append(
            {
                "header": f"@@ -{source[0]},{source[1]} +{target[0]},{target[1]} @@",
                "source_start": source[0],
                "source_length": source[1],
                "target_start": target[0],
                "target_length": target[1],
                "lines": list(_hunk_lines(group, old, new)),
            }
        )
    return out


def _hunk_lines(
    group: Sequence[tuple[str, int, int, int, int]], old: Sequence[str], new: Sequence[str]
) -> Iterator[str]:
    """The lines of one hunk as ``difflib.unified_diff`` orders them, each without its line end's ``\\n``,
    git's ``\\ No newline at end of file`` after a last line without one."""
    for tag, i1, i2, j1, j2 in group:
        marked: list[tuple[str, str]] = []
        if tag == "equal":
            marked += [(" ", line) for line in old[i1:i2]]
        if tag in ("replace", "delete"):
            marked += [("-", line) for line in old[i1:i2]]
        if tag in ("replace", "insert"):
            marked += [("+", line) for line in new[j1:j2]]
        for mark, line in marked:
            yield mark + line.rstrip("\n")
            if not line.endswith("\n"):
                yield "\\ No newline at end of file"
