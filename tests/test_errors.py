"""Expected failures end as one line on stderr and exit 2, never as a traceback — whoever runs the command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from .helpers import REPO, Env, build_wheel, minillm_files

NOBODY = 65534


def _interpreter_for_nobody() -> list[str] | None:
    """A command that runs this Python as user ``nobody`` (root only), or ``None`` where that cannot be."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for exe in (sys.executable, shutil.which(f"python{version}") or "", f"/usr/bin/python{version}"):
        if (
            exe
            and subprocess.run([*drop, exe, "-c", "pass"], capture_output=True, check=False).returncode == 0
        ):
            return [*drop, exe]
    return None


def _copy_runtime(into: Path) -> None:
    """Copy patchguard and the distributions it needs into ``into``, so a user who cannot read this venv
    (CI makes it under a private temporary directory) can still import them."""
    shutil.copytree(REPO / "patchguard", into / "patchguard")
    seen: set[str] = set()
    todo = [Requirement(r).name for r in metadata.requires("patchguard") or [] if "extra" not in r]
    while todo:
        dist = metadata.distribution(todo.pop())
        name = dist.metadata["Name"].lower()
        if name in seen:
            continue
        seen.add(name)
        for requirement in map(Requirement, dist.requires or []):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
        for file in dist.files or []:
            source = Path(str(dist.locate_file(file)))
            target = into / file
            if source.is_file() and into in target.resolve().parents:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)


@pytest.fixture
def world_readable() -> Iterator[Path]:
    """A directory everyone may read (pytest's tmp_path is private to root)."""
    top = Path(tempfile.mkdtemp(prefix="pg-nobody-"))
    top.chmod(0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.slow
def test_a_user_who_cannot_read_a_changed_file_gets_one_line(world_readable: Path) -> None:
    run_as_nobody = _interpreter_for_nobody()
    if run_as_nobody is None:
        pytest.skip("needs root, setpriv and a Python that user nobody can run")
    wheel = build_wheel(world_readable / "wheels", "minillm", "0.4.0", minillm_files())
    env = Env(world_readable / "venv")
    env.install(wheel)
    mla = env.site / "minillm" / "models" / "mla.py"
    mla.write_text(mla.read_text() + "\n# an edit by root\n")
    _copy_runtime(world_readable / "lib")
    for path in [world_readable, *world_readable.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    mla.chmod(0o600)  # root's edit, unreadable to the user running patchguard
    before = {p: p.read_bytes() for p in env.site.rglob("*") if p.is_file()}
    child_env = {
        "PATH": os.environ["PATH"],
        "HOME": str(world_readable),
        "PYTHONPATH": str(world_readable / "lib"),
    }
    wheels = ["--wheelhouse", str(world_readable / "wheels"), "--offline"]

    def as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*run_as_nobody, "-m", "patchguard", *args, "--site-packages", str(env.site)],
            capture_output=True,
            text=True,
            env=child_env,
            cwd=world_readable,
            timeout=120,
            check=False,
        )

    for args in (["restore", "minillm", *wheels], ["diff", *wheels]):
        proc = as_nobody(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr, proc.stderr
        (line,) = proc.stderr.splitlines()
        assert line.startswith("patchguard: error: ") and str(mla) in line and "ermission denied" in line
    assert {p: p.read_bytes() for p in env.site.rglob("*") if p.is_file()} == before  # nothing changed
    for args in (["scan", *wheels], ["check"]):  # a scan goes on: the file is still `modified`, not judged
        proc = as_nobody(*args, "--format", "json")
        assert proc.returncode == 0, (args, proc.stderr)
        doc = json.loads(proc.stdout)
        found = doc["findings"] if args[0] == "scan" else doc["report"]["findings"]
        (f,) = found
        assert (f["kind"], f["path"]) == ("modified", "minillm/models/mla.py")
        assert "its code was not judged" in f["message"] and "ermission denied" in f["message"]
    shutil.copytree(REPO / "patches", world_readable / "patches")
    for path in [world_readable / "patches", *(world_readable / "patches").rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    for args, code in (
        (["status"], 1),
        (["sets"], 0),
    ):  # the set that touches it cannot be told; the rest can
        proc = as_nobody(*args, "--patches", "patches")
        assert proc.returncode == code, (args, proc.stdout, proc.stderr)
        assert (
            "unknown" in proc.stdout
            and "minillm/models/mla.py: cannot read (Permission denied)" in proc.stdout
        )
        assert "sm120-support" in proc.stdout or args == ["status"]

    mla.chmod(0o644)  # readable now, but the environment is root's: restoring cannot write
    proc = as_nobody("restore", "minillm", *wheels)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("patchguard: error: ") and "ermission denied" in line, line
    assert {p: p.read_bytes() for p in env.site.rglob("*") if p.is_file()} == before
