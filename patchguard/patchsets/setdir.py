"""A set's place in the patches directory: the lock that serialises its writers (``capture``, ``rebase``:
an ``flock`` on the patches directory itself, so nothing is left in a directory teams keep in git), and what
a writer killed mid-way leaves behind.

Writers build a set or a review directory in a hidden staging directory beside it and swap it into place
(:func:`patchguard._fs.staged_dir`), and remove an old one by renaming it aside first (:func:`discard`): the
visible names are always whole. A kill leaves at most hidden ``.NAME[.rebase[.previous]].tmp-XXXXXXXX``
directories; the next writer of that set, holding its lock, sweeps them (no other process can be using
them: every writer of the set holds the lock while its staging directories exist).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterator

from ..txn import directory_lock, write_point

__all__ = ["discard", "set_lock", "sweep"]


def _leftover(name: str) -> re.Pattern[str]:
    """Hidden staging names of set ``name`` (as ``tempfile.mkdtemp`` and :func:`discard` make them)."""
    return re.compile(rf"\.{re.escape(name)}(\.rebase(\.previous)?)?\.tmp-[a-z0-9_]{{8}}(-replaced)?")


@contextlib.contextmanager
def set_lock(root: str, name: str) -> Iterator[None]:
    """Hold the lock of the sets in ``root`` (made if need be), then sweep set ``name``'s leftovers."""
    try:
        os.makedirs(root, exist_ok=True)
    except OSError:
        pass  # said by the lock, in one line
    with directory_lock(root, "the patch set directory"):
        sweep(root, name)
        yield


def sweep(root: str, name: str) -> list[str]:
    """Remove the staging directories of set ``name`` a killed writer left in ``root``; the removed."""
    pattern = _leftover(name)
    try:
        names = os.listdir(root)
    except OSError:
        return []
    gone = []
    for n in names:
        full = os.path.join(root, n)
        if pattern.fullmatch(n) and os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
            gone.append(full)
    return gone


def discard(path: str) -> None:
    """Remove directory ``path`` so that no kill leaves it half-deleted under its own name: it is renamed
    to a hidden staging name first (swept by the next writer if the removal is cut short)."""
    if not os.path.lexists(path):
        return
    parent, base = os.path.split(path)
    aside = os.path.join(parent, f".{base}.tmp-{os.urandom(4).hex()}")
    os.rename(path, aside)
    write_point()
    shutil.rmtree(aside, ignore_errors=True)
