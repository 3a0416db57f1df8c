"""Golden outputs of the fixture environment: what every command prints, pinned byte for byte.

The environment is the README's story: minillm installed from its wheel, the glm5-debug set applied, a
hand-made ``.pth`` startup hook and ``sitecustomize.py``, one owned file deleted, one stray module. The
outputs are the stable contracts (report JSON, SARIF, diff, lock, check) and the human ones (tables, set
states), with only what differs between machines replaced: the temporary directory, the Python version, the
seconds a scan took, the host name and the time a document was written. A change of structure must leave
every one of them as it was.

To accept a deliberate change of output: ``PATCHGUARD_REGEN_GOLDEN=1 python -m pytest tests/test_golden.py``,
then read the diff of ``tests/data/golden/`` before committing it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from patchguard.env import host_name

from .helpers import REPO, Env, cli

GOLDEN = REPO / "tests" / "data" / "golden"


@pytest.fixture
def story(env: Env, tmp_path: Path, minillm_wheel: Path) -> dict[str, str]:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    shutil.copy(minillm_wheel, wheels)
    shutil.copytree(REPO / "patches", tmp_path / "patches")
    site = str(env.site)
    code, _out, err = cli("apply", "--set", "glm5-debug", "--site-packages", site)
    assert code == 0, err
    (env.site / "nccl_env.pth").write_text("import os; os.environ['NCCL_P2P_DISABLE'] = '1'\n")
    (env.site / "sitecustomize.py").write_text("import os\nos.environ.setdefault('VLLM_TRACE', '1')\n")
    (env.site / "minillm" / "platforms" / "cuda.py").unlink()
    (env.site / "minillm" / "layers" / "debug_hooks.py").write_text(
        "import pdb\n\n\ndef hook(x):\n    pdb.set_trace()\n    return x\n"
    )
    return {"site": site, "wheels": str(wheels), "tmp": str(tmp_path)}


def _normal(text: str, tmp: str) -> str:
    text = text.replace(tmp, "<TMP>")
    text = text.replace(f"python{sys.version_info[0]}.{sys.version_info[1]}", "python3.X")
    text = re.sub(r'"python": "3\.\d+(\.\d+)?"', '"python": "3.X"', text)
    text = re.sub(r"checked in \d+\.\d s", "checked in N s", text)
    text = re.sub(r"/\.patchguard/backups/[^) \n\"]+", "/.patchguard/backups/<TXID>", text)
    text = re.sub(r"at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "at <TIME>", text)
    # Where and when a document was written (report, check, lock): the machine's name, the second it ran.
    text = re.sub(r'"time": "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"', '"time": "<TIME>"', text)
    text = text.replace(f'"id": "patchguard/{host_name()}/"', '"id": "patchguard/<HOST>/"')
    return text.replace(f'"host": {json.dumps(host_name())}', '"host": "<HOST>"')


def _compare(name: str, code: int, out: str, tmp: str) -> None:
    got = f"exit {code}\n{_normal(out, tmp)}"
    path = GOLDEN / name
    if os.environ.get("PATCHGUARD_REGEN_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got, encoding="utf-8")
    assert got == path.read_text(encoding="utf-8"), f"output of {name} changed"


COMMANDS: dict[str, list[str]] = {
    "scan.json": ["scan", "--format", "json", "--patches", "{tmp}/patches", "--wheelhouse", "{wheels}"],
    "scan.txt": ["scan", "--patches", "{tmp}/patches", "--wheelhouse", "{wheels}"],
    "scan-minillm.sarif": ["scan", "minillm", "--format", "sarif", "--wheelhouse", "{wheels}"],
    "scan-no-analysis.txt": ["scan", "--no-analysis", "--fail-on", "never"],
    "diff.txt": ["diff", "--wheelhouse", "{wheels}", "--offline"],
    "diff.json": ["diff", "minillm", "--format", "json", "--wheelhouse", "{wheels}", "--offline"],
    "sets.txt": ["sets", "--patches", "{tmp}/patches"],
    "status.txt": ["status", "--patches", "{tmp}/patches"],
    "check.json": ["check", "--format", "json", "--patches", "{tmp}/patches"],
    "check.txt": ["check", "--patches", "{tmp}/patches"],
    "lock.json": ["lock"],
    "revert-dry-run.txt": ["revert", "--set", "glm5-debug", "--dry-run", "--patches", "{tmp}/patches"],
    # The set in place is protected (the dry run refuses as the real run does): --force shows the whole plan.
    "restore-dry-run.txt": ["restore", "minillm", "--dry-run", "--force", "--wheelhouse", "{wheels}",
                            "--offline"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_outputs_are_unchanged(story: dict[str, str], name: str) -> None:
    args = [a.format(**story) for a in COMMANDS[name]]
    code, out, _err = cli(*args, "--site-packages", story["site"])
    _compare(name, code, out, story["tmp"])


def test_revert_then_restore_outputs(story: dict[str, str]) -> None:
    site, tmp = story["site"], story["tmp"]
    code, out, _ = cli(
        "revert", "--set", "glm5-debug", "--patches", f"{tmp}/patches", "--site-packages", site
    )
    _compare("revert.txt", code, out, tmp)
    code, out, _ = cli("restore", "minillm", "--wheelhouse", story["wheels"], "--site-packages", site)
    _compare("restore.txt", code, out, tmp)
    code, out, _ = cli("scan", "--format", "json", "--site-packages", site)
    _compare("scan-after.json", code, out, tmp)
