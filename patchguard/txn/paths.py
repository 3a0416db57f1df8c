"""Path safety: what a transaction may write (inside its roots, never through a symlink, regular files)."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from .._fs import (
    STATE_DIR,
    STATE_FILE,
)
from .values import TransactionError


def check_path(root: str, path: str, also: Sequence[str] = ()) -> str | None:
    """Why ``path`` may not be written through a transaction rooted at ``root``, or ``None`` if it may.

    Refused: paths outside ``root`` and ``also`` (after resolving symlinks of every parent directory),
    and targets that are symlinks or not regular files.
    """
    if not os.path.isabs(path):
        return "not an absolute path"
    norm = os.path.normpath(path)
    if norm != path.rstrip(os.sep):
        return "not a normalised path"
    if not _inside((root, *also), norm):
        return f"resolves outside {root} (through a symlink?)"
    # patchguard's own state: only its state file, named as such (never through an alias)
    if _inside((os.path.join(root, STATE_DIR),), norm) and norm != os.path.join(
        os.path.abspath(root), STATE_DIR, STATE_FILE
    ):
        return f"is inside patchguard's own state ({STATE_DIR}/), through a symlink or by name"
    try:
        st = os.lstat(norm)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot stat ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    return None


def _check_paths(root: str, paths: Sequence[str], also: Sequence[str]) -> None:
    """Raises :class:`TransactionError` listing every path that :func:`check_path` refuses."""
    problems = [f"{p}: {why}" for p in paths if (why := check_path(root, p, also))]
    if problems:
        raise TransactionError(
            f"refused, nothing written: {len(problems)} path{'s' if len(problems) != 1 else ''} may not be "
            "written\n  " + "\n  ".join(problems),
            path=root,
            hint="every write stays inside the environment, on regular files, never through a symlink",
        )


def _missing_dirs(directory: str) -> list[str]:
    """The ancestors of ``directory`` (itself included) that do not exist yet, outermost first."""
    missing: list[str] = []
    while directory and not os.path.isdir(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return missing[::-1]


def _inside(roots: Sequence[str], path: str) -> bool:
    """Whether ``path`` (normalised) has its parent directory, symlinks resolved, inside one of ``roots``."""
    if os.path.normpath(path) != path:
        return False
    real = os.path.realpath(os.path.dirname(path))
    return any(real == r or real.startswith(r + os.sep) for r in map(os.path.realpath, roots))
