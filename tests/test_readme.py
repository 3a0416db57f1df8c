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
