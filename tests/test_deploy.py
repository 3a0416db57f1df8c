"""Deploy integration: the library API, policies, `check`, SARIF, and environment locks."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import patchguard
from patchguard import Severity
from patchguard.config import config_of
from patchguard.deploy.check.policy import Policy, load_policy

from .helpers import REPO, Env, build_wheel, cli, patchguard_exe

MLA = "minillm/models/mla.py"
CUDA = "minillm/platforms/cuda.py"


def dump_in_mla(env: Env) -> None:
    p = env.site / MLA
    p.write_text(
        p.read_text().replace(
            "        num_tokens, _ = hidden.shape\n",
            "        num_tokens, _ = hidden.shape\n        torch.save(hidden, '/tmp/mla_in.pt')\n",
            1,
        )
    )


def policy_file(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "patchguard.toml"
    p.write_text(text)
    return p


# --- the API as the README shows it --------------------------------------------------------------------


def test_api_as_in_the_readme(env: Env, tmp_path: Path, minillm_wheel: Path) -> None:
    shutil.copytree(REPO / "patches", tmp_path / "patches")
    patchguard.apply_set("glm5-debug", site_packages=[str(env.site)])
    report = patchguard.scan(site_packages=[str(env.site)], distributions=["minillm"])
    assert report.worst >= patchguard.Severity.HIGH
    patchguard.revert_set("glm5-debug", site_packages=[str(env.site)])
    assert patchguard.scan(site_packages=[str(env.site)], distributions=["minillm"]).worst is Severity.NONE
    assert patchguard.check(site_packages=[str(env.site)]).passed
    assert {s.name for s in patchguard.load_sets()} == {"glm5-debug", "sm120-support"}
    for name in patchguard.__all__:
        assert getattr(patchguard, name) is not None
    for err in (
        "EnvironmentNotFound",
        "UsageError",
        "TransactionError",
        "LockTimeout",
        "NoPristineSource",
        "PatchSetError",
        "PlanFailed",
        "ConfigError",
    ):
        assert issubclass(getattr(patchguard, err), patchguard.PatchguardError)


# --- policy ---------------------------------------------------------------------------------------------


def test_policy_every_key(tmp_path: Path) -> None:
    (tmp_path / "sets").mkdir()
    p = policy_file(
        tmp_path,
        'fail_on = "minor"\nallowed_sets = ["a"]\nrequired_sets = ["b"]\n'
        'expected_files = ["x/*.json"]\nignore = [{rule = "print", distribution = "d"},'
        ' {path = "y/*"}]\npatches = "sets"\nwheelhouse = ["w"]\nframework = "vllm"\n'
        'arch = ["DeepseekV3ForCausalLM"]\nmodel_config = "model/config.json"\noffline = true\n',
    )
    pol = load_policy(str(p))
    assert pol == Policy(
        Severity.MINOR,
        ("a",),
        ("b",),
        ("x/*.json",),
        ({"rule": "print", "distribution": "d"}, {"path": "y/*"}),
        str(p),
        str(tmp_path / "sets"),
        frameworks=("vllm",),
        architectures=("DeepseekV3ForCausalLM",),
        model_config=str(tmp_path / "model/config.json"),
        settings=config_of(str(p), {"wheelhouse": ["w"], "patches": "sets", "offline": True}),
    )
    assert pol.settings.wheelhouse == [str(tmp_path / "w")] and pol.settings.offline
    never = load_policy(str(policy_file(tmp_path, 'fail_on = "never"\n')))
    assert never.fail_on is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('colour = "red"\n', "unknown policy key 'colour'"),
        ('ignore = [{rule = "prnt"}]\n', "ignore[0]: unknown rule 'prnt' (did you mean 'print'?"),
        ('patches = "nowhere"\n', "patches: no such directory"),
        ('fail_on = "severe"\n', "fail_on = 'severe': expected high, moderate, minor, info or never"),
        ("fail_on = 3\n", "fail_on = 3"),
        ('allowed_sets = "glm5"\n', "allowed_sets must be a list of strings"),
        ("required_sets = [1]\n", "required_sets must be a list of strings"),
        ("expected_files = {a = 1}\n", "expected_files must be a list of strings"),
        ('ignore = "print"\n', "ignore must be a list of tables"),
        ('ignore = [{rules = "print"}]\n', "ignore[0]: unknown key 'rules'"),
        ("ignore = [{}]\n", "ignore[0] must be a table"),
        ("ignore = [{rule = 1}]\n", "ignore[0]: values must be strings"),
        ("patches = 1\n", "patches must be a path"),
        ("fail_on = [\n", "invalid TOML"),
    ],
)
def test_bad_policies_name_the_key(env: Env, tmp_path: Path, text: str, message: str) -> None:
    p = policy_file(tmp_path, text)
    code, out, err = cli("check", "--policy", str(p), "--site-packages", str(env.site))
    assert code == 2 and out == ""
    assert message in err and str(p) in err


def test_policy_from_pyproject(env: Env, tmp_path: Path) -> None:
    dump_in_mla(env)
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "ops"\n\n[tool.patchguard]\nignore = [{rule = "tensor-dump"}]\n'
    )
    code, out, _ = cli("check", "--site-packages", str(env.site))
    assert code == 0, out
    assert f"(policy: {tmp_path / 'pyproject.toml'})" in out


# --- check ----------------------------------------------------------------------------------------------


def test_check_exit_codes(env: Env, tmp_path: Path) -> None:
    code, out, _ = cli("check", "--site-packages", str(env.site))
    assert code == 0 and out.startswith("check passed: ")
    dump_in_mla(env)
    code, out, _ = cli("check", "--site-packages", str(env.site))
    lines = out.splitlines()
    assert code == 1
    assert lines[0].startswith(f"HIGH {MLA}:") and "tensor-dump" in lines[0]
    assert lines[-1].startswith("check failed: 1 violation in ")
    code, _, err = cli("check", "--site-packages", str(tmp_path / "nowhere"))
    assert code == 2 and "does not exist" in err


def test_check_policy_allowed_required_ignored_expected(env: Env, tmp_path: Path) -> None:
    shutil.copytree(REPO / "patches", tmp_path / "patches")
    site = ["--site-packages", str(env.site)]
    p = policy_file(tmp_path, 'fail_on = "minor"\nrequired_sets = ["sm120-support"]\n')
    code, out, _ = cli("check", "--policy", str(p), *site)
    assert code == 1 and "required patch set sm120-support is not applied" in out
    assert cli("apply", "--set", "sm120-support", *site)[0] == 0
    code, out, _ = cli("check", "--policy", str(p), *site)
    assert code == 1 and "functional-change" in out  # the set's own edits, not allowed yet
    p = policy_file(
        tmp_path, 'fail_on = "minor"\nrequired_sets = ["sm120-support"]\nallowed_sets = ["sm120-support"]\n'
    )
    code, out, _ = cli("check", "--policy", str(p), *site)
    assert code == 0, out
    (env.site / "minillm/kernels/configs/E=16,N=64,device_name=H200.json").write_text("{}")
    code, out, _ = cli("check", "--policy", str(p), *site)
    assert code == 1 and "unexpected-file" in out
    p.write_text(p.read_text() + 'expected_files = ["minillm/kernels/configs/*.json"]\n')
    assert cli("check", "--policy", str(p), *site)[0] == 0
    dump_in_mla(env)
    p.write_text(p.read_text() + f'ignore = [{{path = "{MLA}", rule = "tensor-dump"}}]\n')
    code, out, _ = cli("check", "--policy", str(p), *site)
    assert code == 0, out


def test_wanted_sets_stay_wanted(env: Env, tmp_path: Path) -> None:
    """A set the policy allows or requires is never offered for reverting; a typo in allowed_sets is an
    error naming the set it probably meant."""
    shutil.copytree(REPO / "patches", tmp_path / "patches")
    site = ["--site-packages", str(env.site)]
    assert cli("apply", "--set", "sm120-support", *site)[0] == 0
    _code, out, _ = cli("scan", "minillm", *site)
    assert "→ patchguard revert --set sm120-support" in out  # no policy yet: the hint is given
    p = policy_file(tmp_path, 'allowed_sets = ["sm120-support"]\n')
    _code, out, _ = cli("scan", "minillm", *site)
    assert "revert --set sm120-support" not in out
    p.write_text('allowed_sets = ["sm120-suport"]\n')
    code, out, err = cli("check", "--policy", str(p), *site)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "allowed_sets names 'sm120-suport', which is no patch set" in line and "'sm120-support'" in line


def test_check_json(env: Env) -> None:
    dump_in_mla(env)
    code, out, _ = cli("check", "--site-packages", str(env.site), "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["schema"] == "patchguard.check/1" and doc["passed"] is False
    assert len(doc["violations"]) == 1 and doc["report"]["schema"] == "patchguard.report/1"


# --- SARIF ----------------------------------------------------------------------------------------------


def _validate_sarif(text: str) -> dict[str, Any]:  # a JSON document: any shape below the top
    import jsonschema

    schema = json.loads((Path(__file__).parent / "data/sarif-schema-2.1.0.json").read_text())
    doc: dict[str, Any] = json.loads(text)
    jsonschema.validate(doc, schema, cls=jsonschema.Draft4Validator)
    return doc


def test_sarif_validates_against_the_schema(env: Env) -> None:
    dump_in_mla(env)
    (env.site / "minillm/platforms/cuda.py").unlink()
    (env.site / "evil.pth").write_text("import os\n")
    code, out, _ = cli("scan", "--site-packages", str(env.site), "--format", "sarif")
    assert code == 1
    doc = _validate_sarif(out)
    run = doc["runs"][0]
    results = {r["ruleId"]: r for r in run["results"]}
    assert {"tensor-dump", "missing-file", "pth-import"} <= set(results)
    dump = results["tensor-dump"]
    assert dump["level"] == "error"
    region = dump["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] > 1 and "torch.save" in region["snippet"]["text"]
    assert dump["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": MLA,
        "uriBaseId": "SITE_PACKAGES",
    }
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert all(rules[r["ruleIndex"]] == r["ruleId"] for r in run["results"])
    code, out, _ = cli("check", "--site-packages", str(env.site), "--format", "sarif")
    assert {r["ruleId"] for r in _validate_sarif(out)["runs"][0]["results"]} == {"tensor-dump", "pth-import"}


def test_sarif_carries_what_github_code_scanning_asks_for(
    env: Env, tmp_path: Path, minillm_wheel: Path
) -> None:
    """Every rule: short and full descriptions, help (what it means, what to do), security-severity and tags.
    Every result: a region and a fingerprint that stays the same across runs and hosts. Findings a policy
    expects: results marked suppressed, not dropped."""
    dump_in_mla(env)
    (env.site / "minillm/platforms/cuda.py").unlink()
    (env.site / "evil.pth").write_text("import os\n")
    other = Env(tmp_path / "elsewhere" / "venv")  # another host: another path, the same edits
    other.install(minillm_wheel)
    dump_in_mla(other)
    (other.site / "minillm/platforms/cuda.py").unlink()
    (other.site / "evil.pth").write_text("import os\n")

    def sarif(site: Path, *extra: str) -> dict[str, Any]:
        _code, out, _ = cli("scan", "--site-packages", str(site), "--format", "sarif", *extra)
        return _validate_sarif(out)

    run = sarif(env.site)["runs"][0]
    for rule in run["tool"]["driver"]["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"], rule
        assert rule["help"]["text"] and rule["help"]["markdown"], rule
        assert float(rule["properties"]["security-severity"]) > 0 and "security" in rule["properties"]["tags"]
    prints = {}
    for result in run["results"]:
        assert result["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1, result
        prints[result["ruleId"]] = result["partialFingerprints"]["patchguardFinding/v1"]
    again = {
        r["ruleId"]: r["partialFingerprints"]["patchguardFinding/v1"]
        for r in sarif(env.site)["runs"][0]["results"]
    }
    there = {
        r["ruleId"]: r["partialFingerprints"]["patchguardFinding/v1"]
        for r in sarif(other.site)["runs"][0]["results"]
    }
    assert prints == again == there and len(set(prints.values())) == len(prints)

    policy = policy_file(tmp_path, 'fail_on = "moderate"\nignore = [{rule = "pth-import"}]\n')
    _code, out, _ = cli(
        "check", "--site-packages", str(env.site), "--policy", str(policy), "--format", "sarif"
    )
    results = _validate_sarif(out)["runs"][0]["results"]
    suppressed = [r for r in results if r.get("suppressions")]
    assert [r["ruleId"] for r in suppressed] == ["pth-import"]
    assert "expected by the policy" in suppressed[0]["suppressions"][0]["justification"]
    assert {r["ruleId"] for r in results if not r.get("suppressions")} >= {"tensor-dump", "missing-file"}


# --- locks ----------------------------------------------------------------------------------------------


def two_hosts(tmp_path: Path, minillm_wheel: Path) -> tuple[Env, Env, Path]:
    extra = build_wheel(
        tmp_path / "w",
        "helper-lib",
        "2.0",
        {"helper_lib/__init__.py": "X = 1\n"},
        console_scripts={"helper": "helper_lib:main"},
    )
    hosts = []
    for name in ("host-a", "host-b"):
        e = Env(tmp_path / name / "venv")
        e.install(minillm_wheel)
        e.install(extra)
        hosts.append(e)
    return hosts[0], hosts[1], extra


def lock_of(env: Env) -> str:
    code, out, err = cli("lock", "--site-packages", str(env.site))
    assert code == 0, err
    return out


def test_same_wheels_give_identical_locks(
    tmp_path: Path, minillm_wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, _ = two_hosts(tmp_path, minillm_wheel)
    # Where and when a lock was written is all that differs (never compared)...
    where = ("host", "time", "tool")
    doc_a, doc_b = json.loads(lock_of(a)), json.loads(lock_of(b))
    assert {k: v for k, v in doc_a.items() if k not in where} == {
        k: v for k, v in doc_b.items() if k not in where
    }
    assert doc_a["host"] == os.uname().nodename and doc_a["tool"]["version"] == patchguard.__version__
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc_a["time"])
    # ... and with $SOURCE_DATE_EPOCH (reproducible builds' convention), not even that: the same bytes.
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert lock_of(a) == lock_of(b)
    doc = json.loads(lock_of(a))
    assert doc["time"] == "2023-11-14T22:13:20Z"
    assert doc["schema"] == "patchguard.lock/1"
    assert set(doc["distributions"]) == {"minillm", "helper-lib"}
    assert doc["distributions"]["minillm"]["digest"].startswith("sha256:")


def test_every_kind_of_lock_difference(tmp_path: Path, minillm_wheel: Path) -> None:
    a, b, _ = two_hosts(tmp_path, minillm_wheel)
    lock = tmp_path / "env.lock"
    assert cli("lock", "--site-packages", str(a.site), "--output", str(lock))[0] == 0
    code, out, _ = cli("check", "--lock", str(lock), "--site-packages", str(b.site))
    assert code == 0, out
    dump_in_mla(b)
    (b.site / "minillm/notes.txt").write_text("x")
    shutil.copytree(REPO / "patches", tmp_path / "patches")
    assert cli("apply", "--set", "sm120-support", "--site-packages", str(b.site))[0] == 0
    (b.site / "fast_nccl.pth").write_text("/opt/nccl\n")
    shutil.rmtree(b.site / "helper_lib")
    shutil.rmtree(b.dist_info("helper-lib", "2.0"))
    b.install(build_wheel(tmp_path / "w2", "newcomer", "1.0", {"newcomer/__init__.py": ""}))
    code, out, _ = cli(
        "check",
        "--lock",
        str(lock),
        "--site-packages",
        str(b.site),
        "--policy",
        str(policy_file(tmp_path, 'fail_on = "never"\n')),
    )
    lines = [line for line in out.splitlines() if line.startswith("LOCK ")]
    assert code == 1
    assert "LOCK distribution helper-lib 2.0 is in the lock but not installed here" in lines
    assert "LOCK distribution newcomer 1.0 is installed here but not in the lock" in lines
    # File by file, what differs from the lock — and only that (no list of every current change).
    assert any(line.startswith(f"LOCK distribution minillm: {MLA} is modified ") for line in lines), lines
    assert any(
        line.startswith("LOCK distribution minillm: minillm/notes.txt is unexpected ") for line in lines
    )
    assert any("minillm/platforms/cuda.py is modified" in line for line in lines)  # sm120-support's file
    assert not any("(here: " in line or "as RECORD says here, as RECORD says" in line for line in lines)
    assert "LOCK patch set sm120-support is applied here but not in the lock" in lines
    assert "LOCK unowned file here, not in the lock: fast_nccl.pth" in lines


def test_broken_lock_file_is_a_clear_error(env: Env, tmp_path: Path) -> None:
    bad = tmp_path / "env.lock"
    bad.write_text('{"schema": "something/else"}')
    code, _, err = cli("check", "--lock", str(bad), "--site-packages", str(env.site))
    assert code == 2 and "not a patchguard.lock/1 file" in err and str(bad) in err


# --- the README's deploy snippets -------------------------------------------------------------------------


def _readme_block(after: str, lang: str) -> str:
    text = (REPO / "README.md").read_text().split("## Deploying", 1)[1]
    return text.split(after, 1)[1].split(f"```{lang}\n", 1)[1].split("```", 1)[0]


@pytest.mark.slow  # the README's deploy snippets, each run as a CLI subprocess
def test_readme_deploy_snippets(env: Env, tmp_path: Path, minillm_wheel: Path) -> None:
    policy = _readme_block("policies and fleet locks", "toml")
    (tmp_path / "srv/wheels").mkdir(parents=True)
    shutil.copy(minillm_wheel, tmp_path / "srv/wheels")  # the policy's wheelhouse holds the pristine wheel
    (tmp_path / "srv/patchguard.toml").write_text(policy)
    # The policy names a set the fixture environment does not have: make it exist and be applied.
    shutil.copytree(REPO / "patches", tmp_path / "srv/patches")
    (tmp_path / "srv/patchguard.toml").write_text(
        policy.replace('"/srv/patches"', f'"{tmp_path / "srv/patches"}"')
        # The README's box serves DeepSeek with vLLM; the fixture environment serves minillm.
        .replace('framework = "vllm"', 'framework = "minillm"')
        .replace('"DeepseekV3ForCausalLM"', '"MiniDeepseekV2ForCausalLM"')
        .replace('"/srv/wheels"', f'"{tmp_path / "srv/wheels"}"')
    )
    assert (
        cli(
            "apply",
            "--set",
            "sm120-support",
            "--site-packages",
            str(env.site),
            "--patches",
            str(tmp_path / "srv/patches"),
        )[0]
        == 0
    )

    def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
        cmd = [c.replace("/srv/", f"{tmp_path}/srv/") for c in cmd]
        assert cmd[0].endswith("patchguard")
        if "--python" in cmd:  # the server's environment: the fixture environment stands in for it
            at = cmd.index("--python")
            cmd = cmd[:at] + cmd[at + 2 :]
        return subprocess.run(
            [*patchguard_exe(), *cmd[1:], "--site-packages", str(env.site)],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ},
        )

    systemd = _readme_block("systemd, before every restart", "ini")
    (line,) = [ln for ln in systemd.splitlines() if ln.startswith("ExecStartPre=")]
    assert run(shlex.split(line.split("=", 1)[1])).returncode == 0
    entry = _readme_block("A container entrypoint", "sh")
    (check_line,) = [ln for ln in entry.splitlines() if ln.startswith("patchguard ")]
    assert run(shlex.split(check_line)).returncode == 0
    k8s = _readme_block("A Kubernetes init container", "yaml")
    command = json.loads(k8s.split("command: ", 1)[1].splitlines()[0])
    lock = tmp_path / "srv/env.lock"
    lock.write_text(lock_of(env))
    assert run(command).returncode == 0
    dump_in_mla(env)
    assert run(command).returncode == 1  # the tampered host is stopped before it serves


def test_locks_and_metrics_list_sets_applied_by_hand(env: Env, tmp_path: Path) -> None:
    """A set whose every edit is in the files counts as applied, however it got there."""
    shutil.copytree(REPO / "patches", tmp_path / "patches")
    site = ("--site-packages", str(env.site))
    before = json.loads(cli("lock", *site)[1])
    assert before["applied_sets"] == {}
    # Applied by hand: the files patched as the set patches them, patchguard's state knowing nothing of it.
    import patchguard
    from patchguard.patchsets.model import load_set

    ps = load_set(str(tmp_path / "patches/sm120-support"))
    patchguard.apply_set("sm120-support", patches=str(tmp_path / "patches"), site_packages=[str(env.site)])
    shutil.rmtree(env.site / ".patchguard")
    lock = json.loads(cli("lock", *site)[1])
    assert lock["applied_sets"] == {"sm120-support": ps.digest}
    _code, metrics, _ = cli("scan", *site, "--format", "prometheus")
    assert 'patchguard_set_applied{set="sm120-support"} 1' in metrics
