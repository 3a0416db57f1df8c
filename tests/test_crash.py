"""SIGKILL at random moments — of the writing command and of the command recovering after it: the
environment is always byte-for-byte the before-state or the after-state (``__pycache__``, directories,
backups, temp files and ``state.json`` included), and every command then tells the same truth about it."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

import patchguard

from .helpers import REPO, Env, patchguard_exe, tree

RUNS = int(os.environ.get("PATCHGUARD_CRASH_RUNS", "20"))


SLOW = {"PATCHGUARD_TEST_WRITE_DELAY": "0.02"}  # ~20 write points: the transaction is most of the run


def _start(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*patchguard_exe(), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **SLOW},
    )


def _kill_after(proc: subprocess.Popen[bytes], delay: float) -> int:
    time.sleep(delay)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    return proc.returncode


def _timed(args: list[str]) -> float:
    t = time.perf_counter()
    proc = subprocess.run(
        [*patchguard_exe(), *args], capture_output=True, check=False, timeout=120, env={**os.environ, **SLOW}
    )
    assert proc.returncode == 0, proc.stderr
    return time.perf_counter() - t


def _applied(env: Env, patches: Path) -> bool:
    states, _ = patchguard.set_states(patches=str(patches), site_packages=[str(env.site)])
    (glm5,) = [s for s in states if s.name == "glm5-debug"]
    return glm5.state.value == "applied"


@pytest.mark.slow  # about 3 CLI runs per kill
@pytest.mark.parametrize("command", ["apply", "revert"])
def test_random_kills_leave_before_or_after(env: Env, tmp_path: Path, command: str) -> None:
    import compileall

    patches = tmp_path / "patches"
    shutil.copytree(REPO / "patches", patches, ignore=shutil.ignore_patterns("README.md"))
    site = ["--site-packages", str(env.site), "--patches", str(patches)]
    if command == "revert":
        patchguard.apply_set("glm5-debug", patches=str(patches), site_packages=[str(env.site)])
    assert compileall.compile_dir(str(env.site / "minillm"), quiet=1, force=True)
    template = tmp_path / "template"
    shutil.copytree(env.prefix, template, symlinks=True)
    before = tree(env.site)
    args = [command, "--set", "glm5-debug", *site]
    duration = _timed(args)
    after = tree(env.site)
    assert after != before
    rng = random.Random(1234)
    seen = {"before": 0, "after": 0}
    for run in range(RUNS):
        shutil.rmtree(env.prefix)
        shutil.copytree(template, env.prefix, symlinks=True)
        _kill_after(_start(args), rng.uniform(0.0, duration * 1.2))
        if rng.random() < 0.5:  # kill the recovering command too, at a random moment
            _kill_after(_start(["status", *site]), rng.uniform(0.0, duration))
        recovered = subprocess.run(
            [*patchguard_exe(), "status", *site], capture_output=True, text=True, check=False, timeout=120
        )
        assert recovered.returncode == 0, recovered.stderr
        now = tree(env.site)
        assert now in (before, after), f"run {run}: neither before nor after: {_diff(before, after, now)}"
        which = "after" if now == after else "before"
        seen[which] += 1
        assert _applied(env, patches) == ((which == "after") == (command == "apply")), f"run {run}"
    assert seen["before"] and seen["after"], seen  # the kills landed on both sides of the commit


def _diff(before: Mapping[str, object], after: Mapping[str, object], now: Mapping[str, object]) -> str:
    def against(ref: Mapping[str, object]) -> str:
        extra = sorted(set(now) - set(ref))
        gone = sorted(set(ref) - set(now))
        changed = sorted(k for k in now if k in ref and now[k] != ref[k])
        return f"extra {extra[:4]}, gone {gone[:4]}, changed {changed[:4]}"

    return f"against before: {against(before)}; against after: {against(after)}"
