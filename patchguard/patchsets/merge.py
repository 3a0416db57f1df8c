"""Three-way merges and file similarity, for ``rebase``.

The merge is git's own ``git merge-file`` run through gitpython (a chosen dependency, and git's xdiff merge
is the one users know and can reproduce by hand: a carried file is byte for byte what ``git merge-file``
makes of the same three inputs). It runs outside any repository, with no user or system configuration, so
nothing but the three inputs decides the result. Conflicts are written in the ``diff3`` style: the base is
shown between the two sides.
"""

from __future__ import annotations

import collections
import os
import tempfile
from dataclasses import dataclass

from ..errors import PatchguardError

__all__ = ["MergeFailed", "Merged", "has_markers", "merge", "similarity"]

_CLEAN_GIT = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_COUNT": "0",
    "GIT_CEILING_DIRECTORIES": "/",
}
_MARKERS = (b"<<<<<<< ", b"||||||| ", b">>>>>>> ")


class MergeFailed(PatchguardError):
    """git could not run, or failed for a reason other than conflicts."""


@dataclass(frozen=True, slots=True)
class Merged:
    """What a merge made: the bytes (with conflict markers when ``conflicts``), and how many regions."""

    data: bytes
    conflicts: int


def merge(ours: bytes, base: bytes, theirs: bytes, labels: tuple[str, str, str]) -> Merged:
    """``git merge-file -p --diff3``: carry base→theirs onto ours. ``labels``: (ours, base, theirs)."""
    import git

    with tempfile.TemporaryDirectory(prefix="pg-merge-") as tmp:
        names = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(data)
            names.append(path)
        cmd = ["git", "merge-file", "-p", "--diff3"]
        for label in labels:
            cmd += ["-L", label]
        try:
            status, out, err = git.Git(tmp).execute(
                [*cmd, *names],
                with_extended_output=True,
                with_exceptions=False,
                stdout_as_string=False,
                strip_newline_in_stdout=False,
                env=_CLEAN_GIT,
            )
        except git.GitCommandNotFound:
            raise MergeFailed(
                "rebase merges with git, which is not installed", hint="install git (apt install git)"
            ) from None
    if not isinstance(out, bytes) or status < 0 or status > 127:
        raise MergeFailed(f"git merge-file failed (exit {status}): {err!s:.200}")
    return Merged(out, int(status))


def has_markers(data: bytes) -> bool:
    """Whether a file still holds conflict markers (at the start of a line)."""
    return any(line.startswith(_MARKERS) for line in data.splitlines())


def _lines(data: bytes) -> collections.Counter[bytes]:
    return collections.Counter(s for s in (line.strip() for line in data.splitlines()) if s)


def similarity(a: bytes, b: bytes) -> float:
    """How alike two files are, 0..1: shared non-blank lines (as a multiset, whitespace at the ends
    ignored) over the mean of their counts. A moved and lightly edited module scores well above 0.5."""
    ca, cb = _lines(a), _lines(b)
    total = sum(ca.values()) + sum(cb.values())
    return 2 * sum((ca & cb).values()) / total if total else 1.0
