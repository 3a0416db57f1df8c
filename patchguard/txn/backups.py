"""The backups committed transactions keep (``.patchguard/backups/<txid>``), and their pruning."""

from __future__ import annotations

import contextlib
import os
import re

from .._fs import (
    STATE_DIR,
)
from .journal import pending
from .values import _BACKUPS, TransactionError


def _after_commit(root: str, backup_dir: str, keep: int | None) -> None:
    """Prune the oldest backups beyond ``keep``; ``None``: drop this transaction's own instead."""
    if keep is not None:
        prune_backups(root, keep)
        return
    import shutil

    shutil.rmtree(backup_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(backup_dir))  # only if no other transaction keeps backups


DEFAULT_KEEP_BACKUPS = 5


def keep_backups() -> int:
    """How many committed transactions keep their backups: ``$PATCHGUARD_KEEP_BACKUPS``, else
    ``keep_backups`` in ``[tool.patchguard]``, else :data:`DEFAULT_KEEP_BACKUPS`."""
    raw = os.environ.get("PATCHGUARD_KEEP_BACKUPS")
    if raw is not None and raw.strip():
        if re.fullmatch(r"[0-9]+", raw.strip()) is None:
            raise TransactionError(
                f"$PATCHGUARD_KEEP_BACKUPS={raw!r}: expected a whole number, 0 or more",
                hint="fix or unset it",
            )
        return int(raw.strip())
    from ..config import load_config

    configured = load_config().keep_backups
    return DEFAULT_KEEP_BACKUPS if configured is None else configured


def _backup_names(top: str) -> list[str]:
    """Transaction ids with backups kept in the backups directory ``top``, oldest first."""
    try:
        return sorted(n for n in os.listdir(top) if not n.startswith("."))
    except OSError:
        return []


def backups(root: str) -> list[tuple[str, int]]:
    """(transaction id, bytes) of every transaction's backups kept in ``root``, oldest first."""
    top = os.path.join(root, STATE_DIR, _BACKUPS)
    out: list[tuple[str, int]] = []
    for name in _backup_names(top):
        size = 0
        for dirpath, _dirs, files in os.walk(os.path.join(top, name)):
            for f in files:
                with contextlib.suppress(OSError):
                    size += os.lstat(os.path.join(dirpath, f)).st_size
        out.append((name, size))
    return out


def prune_backups(root: str, keep: int) -> list[str]:
    """Delete the backups of all but the newest ``keep`` committed transactions (and of prunes a crash
    cut short); returns the transaction ids pruned. Only ever after a commit, under the lock."""
    import shutil

    top = os.path.join(root, STATE_DIR, _BACKUPS)
    if pending(root) is not None:
        return []  # an unfinished transaction's backups are not ours to judge
    kept = _backup_names(top)
    old = kept[: max(len(kept) - keep, 0)]
    with contextlib.suppress(OSError):
        old += [n for n in os.listdir(top) if n.startswith(".pruning-")]
    for name in old:
        path = os.path.join(top, name)
        doomed = path if name.startswith(".pruning-") else os.path.join(top, ".pruning-" + name)
        with contextlib.suppress(OSError):
            if doomed != path:
                os.rename(path, doomed)  # a prune cut short is recognisable, and finished next time
            shutil.rmtree(doomed)
    return [n for n in old if not n.startswith(".pruning-")]
