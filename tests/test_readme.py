"""The README's commands and snippets, run as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .helpers import REPO


def _block(after: str, lang: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8").split(after, 1)[1]
    return text.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def test_from_python_snippet_runs_as_written_from_any_directory(tmp_path: Path) -> None:
    """From a directory with no patches/ and no configuration: every expected error is caught by the
    snippet itself (``PatchguardError``), nothing escapes as a traceback."""
    code = _block("## From Python", "python")
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "patchguard: " in proc.stdout and "the patch set directory does not exist" in proc.stdout
    last = proc.stdout.rstrip().splitlines()[-1]
    assert last == "pass" or last.split()[0] in ("HIGH", "MODERATE", "MINOR", "INFO"), last


def test_the_api_exports_what_it_returns() -> None:
    import patchguard

    for name in patchguard.__all__:
        assert getattr(patchguard, name) is not None, name
    for name in ("FileDiff", "RestoreResult", "SetOutcome", "PatchSet", "CheckResult", "Policy", "SetStatus"):
        assert name in patchguard.__all__, name
    for name in ("PatchSetError", "PlanFailed", "NoPristineSource", "TransactionError", "LockTimeout"):
        assert issubclass(getattr(patchguard, name), patchguard.PatchguardError), name


def test_every_rule_id_is_documented() -> None:
    from patchguard.rulebook import FILE_RULES, RULES

    text = (REPO / "README.md").read_text(encoding="utf-8")
    missing = [rule for rule in [*RULES, *FILE_RULES] if f"| `{rule}` |" not in text]
    assert not missing, missing


def _deploy_script() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8").split("## From Python", 1)[1]
    return text.split("A deploy script", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


def test_the_deploy_script_passes_mypy_strict(tmp_path: Path) -> None:
    script = tmp_path / "deploy.py"
    script.write_text(_deploy_script())
    import os

    proc = subprocess.run(  # MYPYPATH: the package's own (typed) source, which an editable install hides
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "mc"),
         str(script)],
        capture_output=True, text=True, timeout=600, check=False, env={**os.environ, "MYPYPATH": str(REPO)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_deploy_script_takes_out_a_forgotten_debug_set_and_gates(
    tmp_path: Path, minillm_wheel: Path
) -> None:
    """A real venv with minillm, the repository's glm5-debug set applied by hand and forgotten: the script
    locks, fails the gate, reverts the set, passes the gate."""
    import shutil

    from .helpers import make_venv

    venv = make_venv(tmp_path / "venv")
    venv.install(minillm_wheel)
    patches = tmp_path / "patches"
    shutil.copytree(REPO / "patches", patches, ignore=shutil.ignore_patterns("README.md"))
    python = str(venv.bin / "python")
    applied = subprocess.run(
        [sys.executable, "-m", "patchguard", "apply", "--set", "glm5-debug", "--python", python,
         "--patches", str(patches)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    script = tmp_path / "deploy.py"
    script.write_text(_deploy_script())
    lock = tmp_path / "env.lock"
    proc = subprocess.run(
        [sys.executable, str(script), python, str(patches), str(lock)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reverted glm5-debug" in proc.stdout and proc.stdout.rstrip().endswith("pass")
    assert lock.exists() and "glm5-debug" in lock.read_text()
