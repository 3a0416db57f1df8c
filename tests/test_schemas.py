"""Every JSON document patchguard writes validates against the schema shipped inside the package."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from .helpers import OUTER_ENV, REPO, Env, cli
from .test_deploy import dump_in_mla

MLA = "minillm/models/mla.py"


def _schema(name: str) -> dict[str, Any]:
    text = (resources.files("patchguard") / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def _valid(text: str, name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(text)
    jsonschema.validate(doc, _schema(name), cls=jsonschema.Draft202012Validator)
    return doc


def _break(env: Env) -> None:
    dump_in_mla(env)
    (env.site / "minillm/platforms/cuda.py").unlink()
    (env.site / "evil.pth").write_text("import os\n")


def test_every_document_validates(env: Env, tmp_path: Path, minillm_wheel: Path) -> None:
    site = ["--site-packages", str(env.site)]
    lock = tmp_path / "env.lock"
    assert cli("lock", *site, "--output", str(lock))[0] == 0
    _valid(lock.read_text(), "lock-1")
    _break(env)
    wheels = ["--wheelhouse", str(minillm_wheel.parent), "--offline"]
    report = _valid(cli("scan", *site, *wheels, "--format", "json")[1], "report-1")
    assert {f["rule"] for f in report["findings"]} >= {"tensor-dump", "missing-file", "pth-import"}
    assert {f["loaded"] for f in report["findings"]} >= {None}
    diff = _valid(cli("diff", *site, *wheels, "--format", "json")[1], "diff-1")
    assert MLA in {f["path"] for f in diff["files"]}
    shutil.copytree(REPO / "patches", tmp_path / "patches")
    policy = tmp_path / "patchguard.toml"
    policy.write_text('fail_on = "moderate"\nrequired_sets = ["sm120-support"]\n')
    code, out, _ = cli("check", *site, "--policy", str(policy), "--lock", str(lock), "--format", "json")
    check = _valid(out, "check-1")
    _valid(json.dumps(check["report"]), "report-1")
    assert code == 1 and not check["passed"]
    kinds = [d["type"] for d in check["details"]]
    assert set(kinds) == {"finding", "required-set", "lock"}
    assert [d["text"] for d in check["details"]] == check["violations"]
    dump = next(
        d for d in check["details"] if d["type"] == "finding" and d["finding"]["rule"] == "tensor-dump"
    )
    assert dump["finding"]["path"] == MLA


def test_the_reference_documents_every_field() -> None:
    text = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    for name in ("report-1", "check-1", "diff-1", "lock-1", "running-1", "rebase-1"):
        assert f"patchguard.{name.replace('-', '/')}" in text, name
    finding = _schema("report-1")["$defs"]["finding"]["properties"]
    missing = [key for key in finding if f"`{key}`" not in text]
    assert not missing, missing


@pytest.mark.slow  # builds the wheel
def test_the_wheel_ships_the_schemas(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        env=OUTER_ENV,
    )
    (wheel,) = tmp_path.glob("patchguard-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("report-1", "check-1", "diff-1", "lock-1", "running-1", "rebase-1"):
        assert f"patchguard/schemas/{name}.schema.json" in names
