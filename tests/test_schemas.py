"""Every JSON document patchguard writes validates against the schema shipped inside the package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
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


# --- Every kind of JSON document the registry writes, validated (issue 25) ----------------------------------

# Documents of one kind: (the environment to break, a temporary directory, the minillm wheel) -> JSON texts.
Builder = Callable[[Env, Path, Path], list[str]]
# A name that must survive every JSON document: a newline, an escape, a byte that is not UTF-8, a backslash.
HOSTILE = "evil\n  HIGH x\x1b[31m\udcff\\xff é"


def _json_kinds() -> list[str]:
    from patchguard.formats import REGISTRY

    return sorted(kind for kind, formats in REGISTRY.items() if "json" in formats.names)


def _running_documents(env: Env, _tmp: Path, _wheel: Path) -> list[str]:
    from patchguard.deploy.processes.running import Process, Running, Verdict
    from patchguard.env import Target
    from patchguard.formats import RUNNING

    process = Process(
        pid=7,
        command=f"python -m serve {HOSTILE}",
        started=1.5,
        verdict=Verdict.STALE,
        replaced_extensions=(f"/site/{HOSTILE}.so",),
        imported_changed=(f"/site/{HOSTILE}.py",),
        maybe_changed=("/site/b.py",),
        transactions=("20240101T000000Z-1",),
        reason=HOSTILE,
    )
    found = Running(Target("/v/bin/python", f"/v{HOSTILE}", (f"/v/{HOSTILE}",), None), (process,))
    return [
        RUNNING.get("json").render(found),
        cli("running", "--site-packages", str(env.site), "--format", "json")[1],
    ]


def _rebase_documents(_env: Env, _tmp: Path, _wheel: Path) -> list[str]:
    from patchguard.formats import REBASE
    from patchguard.patchsets.rebase import FileOutcome, RebasedFile, RebaseResult

    files = tuple(
        RebasedFile(
            f"m/{outcome.value}{HOSTILE}.py", outcome, None if outcome.open else "m/x.py", 2, 1, 1, 0.5
        )
        for outcome in FileOutcome
    )
    results = [
        RebaseResult(
            HOSTILE, "minillm", "0.4.0", "0.5.0", files, HOSTILE, "t", review_dir=HOSTILE, notes=("n",)
        ),
        RebaseResult("s", "minillm", "0.4.0", "0.5.0", files[:1], written=True, history_dir="/h"),
        RebaseResult("s", "", "", "", ()),
    ]
    return [REBASE.get("json").render(r) for r in results]


def _rebase_all_documents(env: Env, tmp: Path, wheel: Path) -> list[str]:
    from patchguard.formats import REBASE_ALL
    from patchguard.patchsets.rebase import RebaseResult

    one = RebaseResult(HOSTILE, "minillm", "0.4.0", "0.5.0", ())
    return [REBASE_ALL.get("json").render(r) for r in ([], [one, one])]


def _plan_documents(env: Env, tmp: Path, wheel: Path) -> list[str]:
    """A real plan of the broken environment (its edits in no set), and one with hostile names everywhere."""
    from patchguard.formats import PLAN
    from patchguard.model import PlannedEdit, PlannedFile, PlannedSet, PlanVerdict, Upgrade, UpgradePlan

    _break(env)
    site = ["--site-packages", str(env.site), "--wheelhouse", str(wheel.parent), "--offline"]
    _code, out, err = cli("plan", "minillm==0.4.1", *site, "--format", "json")
    assert out, err
    files = tuple(PlannedFile(f"m/{v.value}{HOSTILE}", v, 2, 1, HOSTILE, HOSTILE, None) for v in PlanVerdict)
    edit = PlannedEdit(HOSTILE, None, f"kept {HOSTILE}", "startup-hook", "high", "unowned-pth")
    plan = UpgradePlan(
        (Upgrade(HOSTILE, None, "1"), Upgrade("minillm", "0.4.0", "0.5.0")),
        (PlannedSet(HOSTILE, HOSTILE, "0.4.0", "0.5.0", PlanVerdict.REVIEW, files, (HOSTILE,)),),
        (edit,),
        (edit,),
        (HOSTILE,),
    )
    return [out, PLAN.get("json").render(plan)]


def _rollback_documents(env: Env, tmp: Path, wheel: Path) -> list[str]:
    """A real rollback with nothing to do, and a result with hostile names everywhere."""
    from patchguard.formats import ROLLBACK
    from patchguard.model import Reinstall, RollbackResult

    site = ["--site-packages", str(env.site), "--offline"]
    assert cli("lock", *site[:2], "-o", str(tmp / "env.lock"))[0] == 0
    _code, out, err = cli("rollback", "--lock", str(tmp / "env.lock"), *site, "--format", "json")
    assert out, err
    moved = Reinstall(HOSTILE, HOSTILE, None, HOSTILE, 3)
    added = Reinstall("m", None, "1", "/w.whl")
    result = RollbackResult(HOSTILE, (moved, added), (HOSTILE,), False, "t", "/b", 4)
    return [out, ROLLBACK.get("json").render(result)]


def _set_change_documents(env: Env, tmp: Path, _wheel: Path) -> list[str]:
    """A real apply (a dry run first), the revert after it, a no-op, and a change with hostile names."""
    from patchguard.formats import SET_CHANGE
    from patchguard.model import SetChange, SetFileChange

    shutil.copytree(REPO / "patches", tmp / "patches")
    site = ["--site-packages", str(env.site), "--patches", str(tmp / "patches"), "--format", "json"]
    texts: list[str] = []
    for command in ("apply", "apply", "revert", "revert"):
        dry = ["--dry-run"] if not texts else []
        code, out, err = cli(command, "--set", "sm120-support", *site, *dry)
        assert code == 0, err
        texts.append(out)
    hostile = SetFileChange(HOSTILE, "revert", (3, -1), f"still differs: {HOSTILE}", False)
    change = SetChange("revert", HOSTILE, "reverted", (hostile,), txid="t")
    texts.append(SET_CHANGE.get("json").render(change))
    return texts


def _restore_documents(env: Env, _tmp: Path, wheel: Path) -> list[str]:
    """A real restore of the broken environment (a dry run first, then done), and one with hostile names."""
    from patchguard.formats import RESTORE
    from patchguard.model import RestoreDocument

    _break(env)
    site = ["--site-packages", str(env.site), "--wheelhouse", str(wheel.parent), "--offline"]
    site += ["--format", "json"]
    texts = [cli("restore", "minillm", *site, "--dry-run")[1], cli("restore", "minillm", *site)[1]]
    hostile = RestoreDocument((("restore", HOSTILE),), False, (HOSTILE,), ("RECORD",), "t", f"/b/{HOSTILE}")
    return [*texts, RESTORE.get("json").render(hostile)]


def _capture_documents(env: Env, tmp: Path, wheel: Path) -> list[str]:
    """A real capture of the broken environment's edit, and a set written with hostile names."""
    from patchguard.formats import CAPTURE
    from patchguard.model import CaptureDocument

    dump_in_mla(env)
    site = ["--site-packages", str(env.site), "--wheelhouse", str(wheel.parent), "--offline"]
    args = ["capture", "minillm", "--set", "mine", "--patches", str(tmp / "sets"), "--format", "json"]
    code, out, err = cli(*args, *site)
    assert code == 0, err
    hostile = CaptureDocument(HOSTILE, f"/p/{HOSTILE}", ((HOSTILE, ">=1"), ("", "")), (HOSTILE,), "d")
    return [out, CAPTURE.get("json").render(hostile)]


def _status_documents(env: Env, tmp: Path, _wheel: Path) -> list[str]:
    """A real status (a set applied, then drifted: exit 1), and one with hostile names everywhere."""
    from patchguard.formats import STATUS
    from patchguard.model import AppliedSet, EnvironmentStatus, SetState, SetStatus

    shutil.copytree(REPO / "patches", tmp / "patches")
    site = ["--site-packages", str(env.site), "--patches", str(tmp / "patches")]
    assert cli("apply", "--set", "sm120-support", *site)[0] == 0
    cuda = env.site / "minillm/platforms/cuda.py"
    cuda.write_text(cuda.read_text() + "\n# drift\n")
    code, out, err = cli("status", *site, "--format", "json")
    assert code == 1 and json.loads(out)["troubled"], err
    state = SetState(HOSTILE, HOSTILE, SetStatus.DRIFTED, 1, (HOSTILE,))
    hostile = EnvironmentStatus(
        ((HOSTILE, HOSTILE, HOSTILE),), (HOSTILE,), (AppliedSet(HOSTILE, HOSTILE, HOSTILE, HOSTILE, 1),),
        (state,), ((HOSTILE, (("t", 5),), 3),),
    )  # fmt: skip
    return [out, STATUS.get("json").render(hostile)]


def _check_documents(env: Env, tmp_path: Path, wheel: Path) -> list[str]:
    from patchguard.deploy.check.gate import CheckResult
    from patchguard.deploy.check.policy import Policy
    from patchguard.formats import CHECK, CheckDocument
    from patchguard.model import Environment, Report, Violation

    _break(env)
    shutil.copytree(REPO / "patches", tmp_path / "patches")
    policy = tmp_path / "patchguard.toml"
    policy.write_text('fail_on = "moderate"\nrequired_sets = ["sm120-support"]\n')
    site = ["--site-packages", str(env.site), "--wheelhouse", str(wheel.parent), "--offline"]
    out = cli("check", *site, "--policy", str(policy), "--format", "json")[1]
    report = json.loads(out)["report"]
    assert report["findings"]
    # A verdict with hostile names where the check adds its own: the policy's path, a set's name.
    bare = Report(Environment("3.11", "/v", ("/v/s",)), (), 0, ())
    details = (Violation("required-set", f"required patch set {HOSTILE} does not exist", set_name=HOSTILE),)
    result = CheckResult(False, (details[0].text,), bare, Policy(path=f"/p/{HOSTILE}.toml"), details)
    return [out, CHECK.get("json").render(CheckDocument(result))]


def _fleet_documents(env: Env, tmp_path: Path, _wheel: Path) -> list[str]:
    """A fleet of two hosts — one named with the hostile name, its document naming a hostile host — the
    second drifting (the broken environment), compared three ways."""
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    site = ["--site-packages", str(env.site)]
    assert cli("lock", *site, "--output", str(tmp_path / "clean.lock"))[0] == 0
    doc = json.loads((tmp_path / "clean.lock").read_text())
    doc["host"] = HOSTILE
    with open(os.fsencode(fleet / HOSTILE) + b".json", "w", encoding="utf-8") as out:
        json.dump(doc, out)
    _break(env)
    assert cli("lock", *site, "--output", str(fleet / "drifting.json"))[0] == 0
    texts = [cli("fleet", str(fleet), "--format", "json")[1]]
    texts.append(cli("fleet", str(fleet), "--format", "json", "--baseline", str(tmp_path / "clean.lock"))[1])
    texts.append(cli("fleet", str(fleet / "drifting.json"), "--format", "json")[1])
    assert json.loads(texts[0])["differing"]
    return texts


def _cli_document(*args: str, wheels: bool = True) -> Builder:
    """Documents of a command run on the broken environment (with the pristine wheel, when it takes one)."""

    def build(env: Env, _tmp: Path, wheel: Path) -> list[str]:
        _break(env)
        source = ["--wheelhouse", str(wheel.parent), "--offline"] if wheels else []
        _code, out, err = cli(*args, "--site-packages", str(env.site), *source)
        assert out, err
        return [out]

    return build


def _bisect_documents(env: Env, tmp_path: Path, wheel: Path) -> list[str]:
    """A real bisect of the broken environment (the dump in mla.py breaks the test), and a result whose
    file and diff carry hostile names."""
    from patchguard.env import Target
    from patchguard.formats import BISECT
    from patchguard.patchsets.bisect import BisectResult, By, Trial
    from patchguard.patchsets.bisect.search import Outcome
    from patchguard.patchsets.bisect.units import Unit, UnitKind

    _break(env)
    test = f"! grep -q torch.save {env.site / MLA}"
    site = ["--site-packages", str(env.site), "--wheelhouse", str(wheel.parent), "--offline"]
    code, out, err = cli("bisect", *site, "--test", test, "--format", "json")
    assert code == 0 and out, err
    unit = Unit(1, UnitKind.HUNK, f"pkg/{HOSTILE}.py", 2, (10, 12), f"+{HOSTILE}\n")
    trial = Trial(1, "hunks", (1,), Outcome.BAD, 2, 1, (0, 1), 0.5, 0.01, HOSTILE)
    target = Target("/v/bin/python", f"/v{HOSTILE}", (f"/v/{HOSTILE}",), None)
    result = BisectResult(target, By.HUNK, (unit,), (unit,), (trial,), 3, ((1, 2),), 1, running=(42,))
    return [out, BISECT.get("json").render(result)]


# How this module gets documents of each kind the registry writes as JSON (a new kind needs one here).
JSON_DOCUMENTS: dict[str, Builder] = {
    "report": _cli_document("scan", "--format", "json"),
    "check": _check_documents,
    "diff": _cli_document("diff", "--format", "json"),
    "lock": _cli_document("lock", wheels=False),
    "running": _running_documents,
    "rebase": _rebase_documents,
    "rebase-all": _rebase_all_documents,
    "plan": _plan_documents,
    "rollback": _rollback_documents,
    "set-change": _set_change_documents,
    "restore": _restore_documents,
    "capture": _capture_documents,
    "status": _status_documents,
    "bisect": _bisect_documents,
    "fleet": _fleet_documents,
}


def test_every_json_document_kind_has_its_schema() -> None:
    assert _json_kinds() == sorted(JSON_DOCUMENTS), "a JSON document kind without a schema test"
    for kind in _json_kinds():
        schema = _schema(f"{kind}-1")
        assert schema["properties"]["schema"]["const"] == f"patchguard.{kind}/1"


@pytest.mark.parametrize("kind", _json_kinds())
def test_every_json_document_kind_validates(kind: str, env: Env, tmp_path: Path, minillm_wheel: Path) -> None:
    texts = JSON_DOCUMENTS[kind](env, tmp_path, minillm_wheel)
    for text in texts:
        text.encode("utf-8")  # no lone surrogate anywhere
        assert _valid(text, f"{kind}-1")["schema"] == f"patchguard.{kind}/1"


def test_the_reference_documents_every_field() -> None:
    text = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    for name in ("report-1", "check-1", "diff-1", "lock-1", "running-1", "rebase-1", "bisect-1", "fleet-1"):
        assert f"patchguard.{name.replace('-', '/')}" in text, name
    finding = _schema("report-1")["$defs"]["finding"]["properties"]
    missing = [key for key in finding if f"`{key}`" not in text]
    assert not missing, missing
    # Every field of the documents fleet reads and writes (issue 27), each in its own section.
    sections = {
        name: text.split(f"## `patchguard.{name.replace('-', '/')}`", 1)[1].split("\n## ")[0]
        for name in ("report-1", "lock-1", "fleet-1")
    }
    fleet = _schema("fleet-1")
    wanted = {
        "report-1": list(_schema("report-1")["properties"]),
        "lock-1": list(_schema("lock-1")["properties"]),
        "fleet-1": [
            *fleet["properties"],
            *fleet["$defs"]["difference"]["properties"],
            *fleet["$defs"]["document"]["properties"],
        ],
    }
    missing = [
        f"{name}: {key}" for name, keys in wanted.items() for key in keys if f"`{key}`" not in sections[name]
    ]
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
    for name in ("report-1", "check-1", "diff-1", "lock-1", "running-1", "rebase-1", "fleet-1"):
        assert f"patchguard/schemas/{name}.schema.json" in names
