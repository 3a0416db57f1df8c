"""Upgrade day: ``plan`` before the upgrade says, file by file, what ``rebase --all`` does after it.

Real wheels built here, installed, a set applied with ``patchguard apply``, a file edited by hand, a startup
hook dropped in; the upgrade done as pip does it (the old release's RECORD files removed, the new wheel
installed); the new release's pristine files taken from a wheelhouse, or an index served on 127.0.0.1.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from patchguard.model import PlanVerdict

from .helpers import Env, build_wheel, cli, minillm_files, tree
from .test_rebase import CUDA, SET, around_the_hunks, on_the_hunk, release, upgrade
from .test_schemas import _valid

WEIGHTS = "minillm/model_loader/weights.py"


def _box(tmp_path: Path, env: Env, minillm_wheel: Path, patches: Path, new: Path) -> tuple[Path, list[str]]:
    """The 0.4.0 box: sm120-support applied, a hand edit in no set, a startup hook; a wheelhouse with both
    releases. Returns the wheelhouse and the options every command takes."""
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(minillm_wheel, house)
    shutil.copy(new, house)
    site = ["--patches", str(patches), "--site-packages", str(env.site)]
    code, out, err = cli("apply", "--set", SET, *site)
    assert code == 0, out + err
    weights = env.site / WEIGHTS
    weights.write_bytes(weights.read_bytes() + b"\nDEBUG_WEIGHTS = True\n")
    (env.site / "zz-nccl.pth").write_text("import os; os.environ.setdefault('NCCL_P2P_DISABLE', '1')\n")
    return house, [*site, "--wheelhouse", str(house), "--offline"]


def _outcomes(doc: dict[str, object]) -> dict[tuple[str, str], str]:
    """(set, file) → verdict, from a plan; the same from rebase --all's documents."""
    out = {}
    for s in doc["sets"]:  # type: ignore[attr-defined]
        for f in s["files"]:
            out[(s["set"], f["path"])] = f.get("verdict") or _VERDICT[f["outcome"]]
    return out


_VERDICT = {
    "carried": "carries",
    "moved": "carries",
    "upstream": "already upstream",
    "conflict": "needs review",
    "lost": "lost",
}


def test_the_plan_says_what_rebase_all_then_does(
    tmp_path: Path, env: Env, minillm_wheel: Path, patches: Path
) -> None:
    new = release(tmp_path / "w5", "0.5.0", around_the_hunks)
    _house, opts = _box(tmp_path, env, minillm_wheel, patches, new)
    before = tree(env.site), tree(patches)
    code, out, err = cli("plan", "minillm==0.5.0", *opts, "--format", "json")
    assert code == 1, out + err  # a hand edit in no set: the upgrade loses it
    assert (tree(env.site), tree(patches)) == before  # a plan changes nothing
    doc = _valid(out, "plan-1")
    assert doc["upgrades"] == [{"distribution": "minillm", "from": "0.4.0", "to": "0.5.0"}]
    planned = _outcomes(doc)
    assert planned[(SET, CUDA)] == "carries"
    sm120 = next(s for s in doc["sets"] if s["set"] == SET)
    assert sm120["verdict"] == "carries" and sm120["files"][0]["carried"] == 2
    assert doc["in_no_set"] == [WEIGHTS]
    fates = {e["path"]: e["fate"] for e in doc["edits"]}
    assert fates == {CUDA: f"carried by {SET}", WEIGHTS: "lost: in no set"}
    assert [(h["path"], h["fate"]) for h in doc["startup_hooks"]] == [
        ("zz-nccl.pth", "kept: no distribution owns it")
    ]
    code, text, _err = cli("plan", "minillm==0.5.0", *opts)
    assert code == 1
    assert f"carries          {SET} (minillm 0.4.0 -> 0.5.0)" in text
    assert f"lost: in no set          {WEIGHTS}" in text and "capture --set NAME" in text

    # The upgrade, as pip does it; then every set carried in one command.
    upgrade(env, minillm_wheel)
    env.install(new)
    code, out, err = cli("rebase", "--all", *opts, "--format", "json")
    done = _valid(out, "rebase-all-1")
    assert code == 0 and done["complete"], out + err
    assert _outcomes(done) == planned  # file by file, what the plan said
    code, out, err = cli("apply", "--set", SET, *opts[:4])
    assert code == 0, out + err
    code, out, _err = cli("rebase", "--all", *opts)  # carried already: nothing left to do
    assert code == 0, out


def test_a_set_upstream_adopted_is_said_and_a_conflict_needs_review(
    tmp_path: Path, env: Env, minillm_wheel: Path, patches: Path
) -> None:
    """0.5.0 has the set's change already: retire it. 0.6.0 changed the set's line: review."""
    files = minillm_files("0.5.0")
    line = b'"sm90", "sm100", "sm120"]  # sm120: RTX PRO 6000 Blackwell'
    files[CUDA] = files[CUDA].replace(b'"sm90"]', line)
    files[CUDA] = files[CUDA].replace(
        b"        arch = capability.to_arch()\n",
        b"        if capability.major == 12:\n"
        b"            # sm120 has no FP8 MLA kernels yet: the fallback path is correct, only slower.\n"
        b'            return os.environ.get("MINILLM_ALLOW_SM120", "1") == "1"\n'
        b"        arch = capability.to_arch()\n",
    )
    adopted = build_wheel(tmp_path / "w5", "minillm", "0.5.0", files)
    conflicting = release(tmp_path / "w6", "0.6.0", on_the_hunk)
    house, opts = _box(tmp_path, env, minillm_wheel, patches, adopted)
    shutil.copy(conflicting, house)
    (env.site / WEIGHTS).write_bytes(minillm_files()[WEIGHTS])  # no edit in no set this time
    code, out, err = cli("plan", "minillm==0.5.0", *opts, "--format", "json")
    doc = json.loads(out)
    sm120 = next(s for s in doc["sets"] if s["set"] == SET)
    assert sm120["verdict"] == "already upstream", out + err
    code, text, _err = cli("plan", "minillm==0.5.0", *opts)
    assert "already upstream" in text and f"retire {SET}" in text
    code, out, err = cli("plan", "minillm==0.6.0", *opts, "--format", "json")
    assert code == 1
    sm120 = next(s for s in json.loads(out)["sets"] if s["set"] == SET)
    assert sm120["verdict"] == PlanVerdict.REVIEW.value
    assert "conflict" in sm120["files"][0]["why"]
    # the set's edit on the box is not said to be carried: its set needs review
    assert {e["path"]: e["fate"] for e in json.loads(out)["edits"]}[CUDA] == f"in set {SET}: needs review"
    # a version written another way is the same release: nothing to upgrade
    code, out, err = cli("plan", "minillm==0.4", *opts, "--format", "json")
    assert json.loads(out)["upgrades"] == [], out + err


def test_requirements_files_and_pips_own_report(
    tmp_path: Path, env: Env, minillm_wheel: Path, patches: Path
) -> None:
    new = release(tmp_path / "w5", "0.5.0", around_the_hunks)
    house, opts = _box(tmp_path, env, minillm_wheel, patches, new)
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("# the upgrade\n--index-url https://example.invalid/simple\nminillm==0.5.0  # pinned\n")
    code, out, err = cli("plan", "-r", str(reqs), *opts, "--format", "json")
    assert json.loads(out)["upgrades"][0]["to"] == "0.5.0", out + err
    # pip's own choice, from its dry run against the wheelhouse: real pip, real report
    report = tmp_path / "up.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-index", "--find-links",
         str(house), "--ignore-installed", "--no-deps", "--report", str(report), "minillm>0.4"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    code, out, err = cli("plan", "--report", str(report), *opts, "--format", "json")
    assert code == 1, out + err  # (the hand edit)
    assert json.loads(out)["upgrades"] == [{"distribution": "minillm", "from": "0.4.0", "to": "0.5.0"}]


def test_what_a_plan_cannot_read_is_one_line(tmp_path: Path, env: Env, patches: Path) -> None:
    site = ["--patches", str(patches), "--site-packages", str(env.site), "--offline"]
    code, _out, err = cli("plan", "minillm>=0.5", *site)
    assert code == 2 and "does not pin one release" in err and "--dry-run --report" in err
    bad = tmp_path / "report.json"
    bad.write_text('{"install": [{"metadata": {}}]}')
    code, _out, err = cli("plan", "--report", str(bad), *site)
    assert code == 2 and "not pip's installation report" in err and str(bad) in err
    code, _out, err = cli("plan", "-r", str(tmp_path / "missing.txt"), *site)
    assert code == 2 and "cannot read" in err
    code, _out, err = cli("plan", "not a requirement!!", *site)
    assert code == 2 and "not a requirement" in err
    code, _out, err = cli("plan", *site)
    assert code == 2 and "plan needs what the upgrade installs" in err
    code, _out, err = cli("rebase", "--all", "--set", SET, *site)
    assert code == 2 and "--set NAME (with its options) or --all" in err
