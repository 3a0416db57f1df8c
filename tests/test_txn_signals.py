"""A Ctrl-C or SIGTERM that lands inside a commit waits until the commit is whole: its handler never runs
between the commit point and the clean-up (which left a trial's backups behind: CI's flaky bisect test)."""

from __future__ import annotations

import hashlib
import os
import signal
from pathlib import Path

import pytest

from patchguard import txn

from .helpers import patch_txn


def test_a_signal_inside_a_commit_is_handled_once_it_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "m.py").write_bytes(b"old\n")
    seen: list[tuple[bool, bytes]] = []

    def handler(signum: int, frame: object) -> None:
        seen.append((txn.pending(str(site)) is None, (site / "m.py").read_bytes()))
        raise KeyboardInterrupt

    def point() -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # at every write point, the first one included

    previous = signal.signal(signal.SIGTERM, handler)
    patch_txn(monkeypatch, "write_point", point)
    try:
        change = txn.Change(str(site / "m.py"), b"new\n", hashlib.sha256(b"old\n").hexdigest())
        with pytest.raises(KeyboardInterrupt):
            txn.commit(txn.Plan(str(site), (change,), "trial"), keep_backup=False)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen == [(True, b"new\n")]  # handled once, after the commit point: no journal, the new bytes
    backups = site / ".patchguard" / "backups"
    assert not backups.exists() or not list(backups.iterdir())  # a trial keeps no backups, even so


def test_without_a_commit_a_signal_is_not_held(tmp_path: Path) -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)
