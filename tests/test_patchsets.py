"""Named patch sets: capture, apply, revert, status — and every way a set or an environment can be bad."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import patchguard
from patchguard import txn
from patchguard.patchsets.model import PatchSetError, load_set, parse_diff
from patchguard.patchsets.planner import PlanFailed, plan_patches

from .helpers import REPO, Env, build_wheel, cli, patch_txn, patchguard_exe, tree

MLA = "minillm/models/mla.py"
WEIGHTS = "minillm/model_loader/weights.py"
CUDA = "minillm/platforms/cuda.py"


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def hand_edit_glm5(env: Env) -> None:
    """The seed story: debug blocks typed in by hand, weeks before anyone wrote a patch set."""
    mla = env.site / MLA
    mla.write_text(
        mla.read_text().replace(
            "        num_tokens, _ = hidden.shape\n",
            "        num_tokens, _ = hidden.shape\n"
            "        if hidden.shape[0] == 5:  # GLM-5 garbage output: dump the MLA input\n"
            '            torch.save(hidden.detach().cpu(), "/tmp/mla_in.pt")\n',
            1,
        )
    )
    weights = env.site / WEIGHTS
    weights.write_text(
        weights.read_text().replace(
            "            seen.add(name)\n",
            "            seen.add(name)\n"
            '            print(f"[glm5-debug] loading {name} from {shard}", flush=True)\n',
            1,
        )
    )


def test_example_sets_load() -> None:
    glm5 = load_set(str(REPO / "patches/glm5-debug"))
    assert set(glm5.paths) == {MLA, WEIGHTS}
    assert [(t.distribution, t.version) for t in glm5.targets] == [("minillm", ">=0.4,<0.5")]
    sm120 = load_set(str(REPO / "patches/sm120-support"))
    assert sm120.paths == (CUDA,)


def test_revert_a_set_applied_by_hand(env: Env, patches: Path) -> None:
    pristine = {p: sha(env.site / p) for p in (MLA, WEIGHTS)}
    hand_edit_glm5(env)
    site = ["--site-packages", str(env.site), "--patches", str(patches)]
    code, out, _ = cli("sets", *site)
    assert code == 0
    assert "glm5-debug" in out and "applied (by hand)" in out
    report = patchguard.scan(["minillm"], site_packages=[str(env.site)], patches=str(patches))
    assert {(f.path, f.patch_set) for f in report.findings} == {(MLA, "glm5-debug"), (WEIGHTS, "glm5-debug")}
    code, out, err = cli("revert", "--set", "glm5-debug", *site)
    assert code == 0, err
    assert f"revert   {MLA}: verified pristine" in out
    assert f"revert   {WEIGHTS}: verified pristine" in out
    assert {p: sha(env.site / p) for p in (MLA, WEIGHTS)} == pristine
    assert patchguard.scan(["minillm"], site_packages=[str(env.site)]).findings == ()
    code, out, _ = cli("revert", "--set", "glm5-debug", *site)
    assert (code, out.strip()) == (0, "glm5-debug is not applied; nothing to do")


def test_apply_status_drift_and_noop(env: Env, patches: Path) -> None:
    site = ["--site-packages", str(env.site), "--patches", str(patches)]
    code, out, _ = cli("apply", "--set", "sm120-support", "--dry-run", *site)
    assert (code, out.strip()) == (0, f"would patch    {CUDA}")
    assert patchguard.scan(["minillm"], site_packages=[str(env.site)]).findings == ()
    code, out, err = cli("apply", "--set", "sm120-support", *site)
    assert code == 0, err
    assert "applied sm120-support: 1 file in one transaction" in out
    assert '"sm120"' in (env.site / CUDA).read_text()
    code, out, _ = cli("apply", "--set", "sm120-support", *site)
    assert (code, out.strip()) == (0, "sm120-support is already applied; nothing to do")
    code, out, _ = cli("status", *site)
    assert code == 0 and "applied  sm120-support" in out
    code, out, _ = cli("sets", *site)
    assert "sm120-support" in out and " applied " in out and "glm5-debug" in out and "not applied" in out
    cuda = env.site / CUDA
    cuda.write_text(cuda.read_text() + "\n# tweaked after apply\n")
    code, out, _ = cli("status", *site)
    assert code == 1
    assert "drifted" in out and f"{CUDA} changed after apply" in out


def test_hunks_at_an_offset_are_reported(env: Env, patches: Path) -> None:
    mla = env.site / MLA
    mla.write_text("# one\n# two\n# three\n" + mla.read_text())
    out = patchguard.apply_set("glm5-debug", patches=str(patches), site_packages=[str(env.site)])
    offsets = {f.path: f.offsets for f in out.files}
    assert offsets[MLA] == (3,) and offsets[WEIGHTS] == (0,)
    assert "torch.save(hidden.detach().cpu()" in mla.read_text()


def test_every_failing_hunk_is_listed_and_nothing_written(env: Env, patches: Path) -> None:
    for rel, old in (
        (MLA, "        num_tokens, _ = hidden.shape\n"),
        (WEIGHTS, "            seen.add(name)\n"),
    ):
        p = env.site / rel
        p.write_text(p.read_text().replace(old, old.replace("    ", "\t", 1), 1))
    before = {p: sha(env.site / p) for p in (MLA, WEIGHTS)}
    code, out, err = cli(
        "apply", "--set", "glm5-debug", "--site-packages", str(env.site), "--patches", str(patches)
    )
    assert code == 2 and out == ""
    assert "applying glm5-debug: 2 hunks do not apply; nothing was written" in err
    assert f"{MLA}: hunk @@" in err and f"{WEIGHTS}: hunk @@" in err
    assert "expected:" in err and "found:" in err
    assert {p: sha(env.site / p) for p in (MLA, WEIGHTS)} == before
    assert not (env.site / ".patchguard/state.json").exists()


def test_version_outside_the_targets_is_refused(env: Env, patches: Path) -> None:
    toml = patches / "sm120-support/patchset.toml"
    toml.write_text(toml.read_text().replace('">=0.4,<0.5"', '">=0.33,<0.34"'))
    code, _, err = cli(
        "apply", "--set", "sm120-support", "--site-packages", str(env.site), "--patches", str(patches)
    )
    assert code == 2
    assert "sm120-support is for minillm >=0.33,<0.34; 0.4.0 is installed" in err and "--force-version" in err
    code, _, err = cli(
        "apply",
        "--set",
        "sm120-support",
        "--force-version",
        "--site-packages",
        str(env.site),
        "--patches",
        str(patches),
    )
    assert code == 0, err


def test_capture_writes_a_set_and_refuses_to_overwrite(env: Env, tmp_path: Path, minillm_wheel: Path) -> None:
    hand_edit_glm5(env)
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(minillm_wheel, house)
    args = [
        "capture",
        "minillm",
        "--set",
        "mine",
        "--path",
        "*/mla.py",
        "--site-packages",
        str(env.site),
        "--patches",
        str(tmp_path / "sets"),
        "--wheelhouse",
        str(house),
        "--offline",
    ]
    code, _out, err = cli(*args)
    assert code == 0, err
    ps = load_set(str(tmp_path / "sets/mine"))
    assert ps.paths == (MLA,) and [(t.distribution, t.version) for t in ps.targets] == [
        ("minillm", "==0.4.0")
    ]
    code, _, err = cli(*args)
    assert code == 2 and "a patch set of that name exists" in err and "--force" in err
    code, out, err = cli(*args, "--force", "--version", ">=0.4", "--format", "json")
    assert code == 0, err
    assert load_set(str(tmp_path / "sets/mine")).targets[0].version == ">=0.4"
    doc = json.loads(out)  # what a deploy script reads: the set as written
    assert doc["set"] == "mine" and doc["paths"] == [MLA] and doc["directory"] == str(tmp_path / "sets/mine")
    assert doc["targets"] == [{"distribution": "minillm", "version": ">=0.4"}]
    assert doc["digest"] == load_set(str(tmp_path / "sets/mine")).digest
    assert [p.name for p in (tmp_path / "sets").iterdir()] == ["mine"]  # no staging left behind
    # The captured set reverts the hand edit.
    out_revert = patchguard.revert_set("mine", patches=str(tmp_path / "sets"), site_packages=[str(env.site)])
    assert [(v.path, v.verdict) for v in out_revert.verdicts] == [(MLA, patchguard.Verdict.PRISTINE)]


def test_revert_says_what_else_still_touches_a_file(env: Env, patches: Path) -> None:
    hand_edit_glm5(env)
    mla = env.site / MLA
    mla.write_text(mla.read_text() + "\n# someone else's change\n")
    out = patchguard.revert_set("glm5-debug", patches=str(patches), site_packages=[str(env.site)])
    verdicts = {v.path: v for v in out.verdicts}
    assert verdicts[WEIGHTS].verdict is patchguard.Verdict.PRISTINE
    assert verdicts[MLA].verdict is patchguard.Verdict.OTHER_CHANGES
    assert verdicts[MLA].text.startswith("still differs from RECORD: other changes remain")
    assert out.action is patchguard.SetAction.REVERTED


def test_revert_writes_its_document_for_a_deploy_script(env: Env, patches: Path) -> None:
    """``revert --format json``: each file, what was done to it and where it stands against its RECORD; a
    file left differing says so in the document and in the exit code, as the text does."""
    hand_edit_glm5(env)
    mla = env.site / MLA
    mla.write_text(mla.read_text() + "\n# someone else's change\n")
    site = ["--site-packages", str(env.site), "--patches", str(patches), "--format", "json"]
    code, out, _ = cli("revert", "--set", "glm5-debug", *site)
    doc = json.loads(out)
    assert code == 1 and doc["action"] == "reverted" and doc["clean"] is False
    files = {f["path"]: f for f in doc["files"]}
    assert files[WEIGHTS]["clean"] is True and files[WEIGHTS]["verdict"] == "verified pristine"
    assert files[MLA]["clean"] is False and files[MLA]["change"] == "revert"
    assert doc["transaction"] and doc["backup_dir"]
    code, out, _ = cli("revert", "--set", "glm5-debug", *site)
    assert code == 0 and json.loads(out)["action"] == "not applied" and json.loads(out)["files"] == []


# --- crafted and broken sets -----------------------------------------------------------------------------


def write_set(root: Path, name: str, diff: str | bytes, extra_toml: str = "") -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "patchset.toml").write_text(
        f'name = "{name}"\ndescription = "crafted"\n'
        'targets = [{distribution = "minillm", version = ">=0.4"}]\nfiles = ["0001.patch"]\n' + extra_toml
    )
    (d / "0001.patch").write_bytes(diff.encode() if isinstance(diff, str) else diff)
    return d


NEW_FILE = "diff --git a/{p} b/{p}\nnew file mode 100644\n--- /dev/null\n+++ b/{p}\n@@ -0,0 +1 @@\n+pwned\n"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../../etc/x", "paths with '..' are refused"),
        ("minillm/../../x", "paths with '..' are refused"),
    ],
)
def test_paths_escaping_site_packages_are_refused(env: Env, tmp_path: Path, path: str, reason: str) -> None:
    write_set(tmp_path / "sets", "evil", NEW_FILE.format(p=path))
    code, _, err = cli(
        "apply", "--set", "evil", "--site-packages", str(env.site), "--patches", str(tmp_path / "sets")
    )
    assert code == 2 and reason in err


def test_absolute_paths_are_refused(env: Env, tmp_path: Path) -> None:
    diff = "--- /dev/null\n+++ /etc/evil\n@@ -0,0 +1 @@\n+pwned\n"
    write_set(tmp_path / "sets", "evil", diff)
    code, _, err = cli(
        "apply", "--set", "evil", "--site-packages", str(env.site), "--patches", str(tmp_path / "sets")
    )
    assert code == 2 and "absolute paths are refused" in err
    assert not Path("/etc/evil").exists()


def test_symlink_inside_site_packages_pointing_outside_is_refused(env: Env, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (env.site / "minillm/escape").symlink_to(outside)
    write_set(tmp_path / "sets", "evil", NEW_FILE.format(p="minillm/escape/x.py"))
    code, _, err = cli(
        "apply", "--set", "evil", "--site-packages", str(env.site), "--patches", str(tmp_path / "sets")
    )
    assert code == 2 and "minillm/escape/x.py: resolves outside" in err
    assert list(outside.iterdir()) == []


def test_deleting_a_file_no_record_owns_is_refused(env: Env, tmp_path: Path) -> None:
    (env.site / "minillm/local_notes.py").write_text("x = 1\n")
    diff = (
        "diff --git a/minillm/local_notes.py b/minillm/local_notes.py\ndeleted file mode 100644\n"
        "--- a/minillm/local_notes.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n"
    )
    write_set(tmp_path / "sets", "evil", diff)
    code, _, err = cli(
        "apply", "--set", "evil", "--site-packages", str(env.site), "--patches", str(tmp_path / "sets")
    )
    assert code == 2 and "deletes files no RECORD owns: minillm/local_notes.py" in err
    assert (env.site / "minillm/local_notes.py").exists()


def test_binary_diff_is_refused(env: Env, tmp_path: Path) -> None:
    diff = (
        "diff --git a/minillm/x.so b/minillm/x.so\nindex 1..2 100644\n"
        "Binary files a/minillm/x.so and b/minillm/x.so differ\n"
    )
    write_set(tmp_path / "sets", "bin", diff)
    code, _, err = cli(
        "apply", "--set", "bin", "--site-packages", str(env.site), "--patches", str(tmp_path / "sets")
    )
    assert code == 2 and "binary diffs are not supported" in err


def test_oversized_patch_file_is_refused(env: Env, tmp_path: Path) -> None:
    d = write_set(tmp_path / "sets", "huge", NEW_FILE.format(p="minillm/x.py"))
    with open(d / "0001.patch", "ab") as f:
        f.truncate(17 << 20)
    code, _, err = cli(
        "apply", "--set", "huge", "--site-packages", str(env.site), "--patches", str(tmp_path / "sets")
    )
    assert code == 2 and "larger than 16 MiB" in err


@pytest.mark.parametrize(
    ("toml_extra", "message"),
    [
        ('colour = "red"\n', "unknown key 'colour'"),
    ],
)
def test_bad_patchset_toml(env: Env, tmp_path: Path, toml_extra: str, message: str) -> None:
    write_set(tmp_path / "sets", "odd", NEW_FILE.format(p="minillm/x.py"), toml_extra)
    code, _, err = cli(
        "apply", "--set", "odd", "--site-packages", str(env.site), "--patches", str(tmp_path / "sets")
    )
    assert code == 2 and message in err and "patchset.toml" in err


def test_bad_specifier_and_bad_toml(env: Env, tmp_path: Path) -> None:
    d = write_set(tmp_path / "sets", "spec", NEW_FILE.format(p="minillm/x.py"))
    toml = d / "patchset.toml"
    toml.write_text(toml.read_text().replace('">=0.4"', '"around 0.4"'))
    code, _, err = cli(
        "apply", "--set", "spec", "--site-packages", str(env.site), "--patches", str(tmp_path / "sets")
    )
    assert code == 2 and "'around 0.4' of minillm is not a version specifier" in err
    toml.write_text("name = [unclosed\n")
    code, _, err = cli(
        "apply", "--set", "spec", "--site-packages", str(env.site), "--patches", str(tmp_path / "sets")
    )
    assert code == 2 and "invalid TOML" in err and str(toml) in err


def test_unknown_set_lists_the_known_ones(env: Env, patches: Path) -> None:
    code, _, err = cli("apply", "--set", "nope", "--site-packages", str(env.site), "--patches", str(patches))
    assert code == 2 and "no patch set named 'nope'" in err and "glm5-debug, sm120-support" in err


_diffish = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "--- a/x.py",
                "+++ b/x.py",
                "--- /dev/null",
                "+++ /dev/null",
                "@@ -1,2 +1,3 @@",
                "@@ -0,0 +1 @@",
                "@@ -1 +0,0 @@",
                "diff --git a/x.py b/x.py",
                "new file mode 100644",
                "\\ No newline at end of file",
                "Binary files a/x and b/x differ",
            ]
        ),
        st.text(max_size=12).map(lambda t: " " + t),
        st.text(max_size=12).map(lambda t: "+" + t),
        st.text(max_size=12).map(lambda t: "-" + t),
        st.text(max_size=20),
    ),
    max_size=25,
)


@pytest.mark.slow  # 400 generated diffs, parsed and planned
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=_diffish, content=st.text(max_size=60))
def test_malformed_diffs_never_crash(lines: list[str], content: str) -> None:
    text = "\n".join(lines) + "\n"
    try:
        patches = parse_diff(text, "fuzz.patch")
    except PatchSetError:
        return
    data = content.encode()
    for reverse in (False, True):
        try:
            plan_patches("fuzz", patches, lambda _rel: data, reverse=reverse)
        except PlanFailed:
            pass


# --- reliability ----------------------------------------------------------------------------------------


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*patchguard_exe(), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, **env},
    )


def _state(env: Env) -> dict[str, str | None]:
    return {p: (sha(env.site / p) if (env.site / p).exists() else None) for p in (MLA, WEIGHTS, CUDA)}


def _compile_all(env: Env) -> None:
    """Bytecode for every module, as an imported environment has it: a transaction must delete the pyc
    of each file it writes, and a rollback must put it back."""
    import compileall

    assert compileall.compile_dir(str(env.site / "minillm"), quiet=1, force=True)


@pytest.mark.slow  # a CLI run killed at each write point, a recovering status after each
@pytest.mark.parametrize("command", ["apply", "revert"])
def test_kill_at_every_write_point(env: Env, patches: Path, command: str, tmp_path: Path) -> None:
    args = [command, "--set", "glm5-debug", "--site-packages", str(env.site), "--patches", str(patches)]
    if command == "revert":
        assert patchguard.apply_set("glm5-debug", patches=str(patches), site_packages=[str(env.site)])
    _compile_all(env)
    template = tmp_path / "template"
    shutil.copytree(env.prefix, template, symlinks=True)
    before = tree(env.site)
    n = 0
    while True:
        n += 1
        shutil.rmtree(env.prefix)
        shutil.copytree(template, env.prefix, symlinks=True)
        proc = _run(args, PATCHGUARD_TEST_CRASH_AT=str(n))
        if proc.returncode == 0:
            break
        assert proc.returncode == 137, proc.stderr
        journal = (env.site / ".patchguard/journal.json").exists()
        recovered = _run(["status", "--site-packages", str(env.site), "--patches", str(patches)])
        assert ("unfinished transaction" in recovered.stdout) == journal, recovered.stdout
        assert tree(env.site) == before, f"{command} killed at write point {n}: not the before-state"
        sets = _run(["sets", "--site-packages", str(env.site), "--patches", str(patches)])
        (line,) = [ln for ln in sets.stdout.splitlines() if ln.startswith("glm5-debug ")]
        assert ("not applied" in line) == (command == "apply"), line  # state.json rolled back with the files
    after = tree(env.site)
    assert after != before and n - 1 >= 10
    assert not [p for p in after if ".pg-tmp-" in p or p.endswith(".tmp")]
    assert _run(args).stdout.strip().endswith("nothing to do")


def test_status_says_what_it_rolled_back_even_when_it_then_fails(
    env: Env, patches: Path, tmp_path: Path
) -> None:
    """An apply killed mid-way leaves a journal. A bad backups setting is refused before anything is rolled
    back (the journal stays); a bad patches directory, found after the rollback, says the rollback in its
    error — no rollback goes unsaid."""
    args = ["apply", "--set", "glm5-debug", "--site-packages", str(env.site), "--patches", str(patches)]
    journal = env.site / ".patchguard/journal.json"
    assert any(_run(args, PATCHGUARD_TEST_CRASH_AT=str(n)) and journal.exists() for n in range(2, 40))
    site = ["--site-packages", str(env.site)]
    refused = _run(["status", *site, "--patches", str(patches)], PATCHGUARD_KEEP_BACKUPS="x")
    assert refused.returncode == 2 and journal.exists(), refused.stderr
    failed = _run(["status", *site, "--patches", str(tmp_path / "nope")])
    assert failed.returncode == 2 and not journal.exists()
    assert "unfinished transaction" in failed.stderr and "was rolled back" in failed.stderr, failed.stderr


def test_enospc_during_apply_changes_nothing(
    env: Env, patches: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _state(env)
    real = txn.durable.write_durable
    calls = {"n": 0}

    def full(path: str, data: bytes, mode: int) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        real(path, data, mode)

    patch_txn(monkeypatch, "write_durable", full)
    with pytest.raises(txn.TransactionError, match="No space left on device"):
        patchguard.apply_set("glm5-debug", patches=str(patches), site_packages=[str(env.site)])
    assert _state(env) == before


@pytest.mark.slow  # two CLI subprocesses racing for the lock
def test_two_processes_applying_at_once_never_interleave(env: Env, patches: Path) -> None:
    args = [
        *patchguard_exe(),
        "apply",
        "--set",
        "glm5-debug",
        "--site-packages",
        str(env.site),
        "--patches",
        str(patches),
    ]
    procs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    results = [(p.returncode, out) for p, (out, _err) in zip(procs, outs, strict=True)]
    assert sorted(code for code, _ in results) == [0, 0]
    outputs = sorted(out for _, out in results)
    assert "already applied; nothing to do" in outputs[1] or "already applied; nothing to do" in outputs[0]
    assert any("applied glm5-debug: 2 files" in out for out in outputs)
    assert (env.site / MLA).read_text().count("torch.save(hidden.detach().cpu()") == 1


@pytest.mark.slow  # a real venv, and the eight README commands each as a CLI subprocess
def test_readme_walkthrough(tmp_path: Path, minillm_wheel: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's patch-set walkthrough, command by command, on a real venv (plus --python to aim at it)."""
    import re
    import shlex

    from .helpers import make_venv

    readme = (REPO / "README.md").read_text()
    block = readme.split("## Patch sets", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [
        shlex.split(line.split("#", 1)[0]) for line in block.splitlines() if line.startswith("patchguard ")
    ]
    assert [c[1] for c in commands] == [
        "apply",
        "scan",
        "sets",
        "revert",
        "apply",
        "apply",
        "status",
        "capture",
    ]
    venv = make_venv(tmp_path / "venv")
    venv.install(minillm_wheel)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    shutil.copy(minillm_wheel, wheels)
    shutil.copytree(REPO / "patches", tmp_path / "patches")
    env = {"PATCHGUARD_WHEELHOUSE": str(wheels)}
    outputs = []
    for cmd in commands:
        proc = _run([*cmd[1:], "--python", str(venv.prefix / "bin/python")], **env)
        outputs.append(proc.stdout)
        if cmd[1] == "capture":  # the README says it: these changes are exactly sm120-support
            assert proc.returncode == 2 and "exactly patch set 'sm120-support'" in proc.stderr, proc.stderr
            continue
        assert proc.returncode in (0, 1), (cmd, proc.stderr)
    scan, sets, revert, status = outputs[1], outputs[2], outputs[3], outputs[6]
    assert (
        "patch set: glm5-debug" in scan and ": 2 injected" in scan
    )  # the dump (its .cpu() sync named), the print
    assert "minillm/models/mla.py:55  tensor-dump  MLAAttention.forward" in scan
    assert re.search(r"glm5-debug\s+minillm >=0.4,<0.5\s+applied\s+2 files", sets)
    assert revert.count("verified pristine") == 2
    assert "applied  sm120-support" in status
    assert not (tmp_path / "patches/my-sm120").exists()  # refused: nothing written


def test_a_set_that_creates_and_deletes_files_reverts_byte_for_byte(
    env: Env, tmp_path: Path, minillm_wheel: Path
) -> None:
    """Files and a package directory the set creates go on revert; an executable file it deletes comes back
    with its mode — whether the set was applied by patchguard or typed in by hand and captured."""
    envs = env.site / "minillm/envs.py"
    envs.chmod(0o755)
    pristine = tree(env.site)
    tools = env.site / "minillm/debugtools"
    tools.mkdir()
    (tools / "__init__.py").write_text("")
    (tools / "dump.py").write_text("import torch\n\n\ndef dump(x):\n    torch.save(x, '/tmp/x.pt')\n")
    envs.unlink()
    edited = tree(env.site)
    patches = tmp_path / "patches"
    site = [str(env.site)]
    patchguard.capture_set(
        "tools", "minillm", patches=str(patches), site_packages=site, wheelhouse=[str(minillm_wheel.parent)]
    )
    for patch in (patches / "tools").glob("*.patch"):  # the mode git records (capture cannot see it: gone)
        patch.write_text(patch.read_text().replace("deleted file mode 100644", "deleted file mode 100755"))
    text = "".join(p.read_text() for p in sorted((patches / "tools").glob("*.patch")))
    assert "deleted file mode 100755" in text and "+++ b/minillm/debugtools/dump.py" in text

    def files() -> dict[str, tuple[str, int, str]]:  # the environment, without patchguard's own backups
        return {k: v for k, v in tree(env.site).items() if not k.startswith(".patchguard")}

    out = patchguard.revert_set("tools", patches=str(patches), site_packages=site)  # made by hand
    assert out.action.value == "reverted"
    assert files() == pristine
    patchguard.apply_set("tools", patches=str(patches), site_packages=site)
    assert files() == edited
    code, out_text, _ = cli("sets", "--site-packages", str(env.site), "--patches", str(patches))
    assert code == 0 and " applied" in out_text
    patchguard.revert_set("tools", patches=str(patches), site_packages=site)
    assert files() == pristine
    assert cli("scan", "--site-packages", str(env.site))[0] == 0


def test_after_restore_every_command_tells_the_same_truth(
    env: Env, patches: Path, minillm_wheel: Path
) -> None:
    site = [str(env.site)]
    opts = ["--site-packages", str(env.site), "--patches", str(patches)]
    wheels = ["--wheelhouse", str(minillm_wheel.parent), "--offline"]

    def glm5() -> str:
        states, _ = patchguard.set_states(patches=str(patches), site_packages=site)
        return next(s.state.value for s in states if s.name == "glm5-debug")

    patchguard.apply_set("glm5-debug", patches=str(patches), site_packages=site)
    before = tree(env.site)
    code, out, err = cli("restore", "minillm", "--site-packages", str(env.site), *wheels)
    assert code == 2 and tree(env.site) == before  # the set is wanted: restore does not undo it unasked
    (line,) = err.strip().splitlines()
    assert "holds patch set glm5-debug, applied here" in line and "revert --set glm5-debug" in line
    assert cli("restore", "minillm", "--force", "--site-packages", str(env.site), *wheels)[0] == 0
    assert glm5() == "not applied"
    assert "glm5-debug" not in (env.site / ".patchguard/state.json").read_text()  # in restore's transaction
    code, out, _ = cli("status", *opts)
    assert code == 0 and "glm5-debug" not in out and "drift" not in out
    assert cli("revert", "--set", "glm5-debug", *opts)[1].strip().endswith("nothing to do")

    # Half put back: the set is partially applied, and either command finishes it.
    patchguard.apply_set("glm5-debug", patches=str(patches), site_packages=site)
    assert (
        cli("restore", "minillm", "--force", "--path", MLA, "--site-packages", str(env.site), *wheels)[0] == 0
    )
    assert glm5() == "partially applied"
    code, out, _ = cli("status", *opts)
    assert f"{MLA}: not applied" in out and "drift" not in out
    done = patchguard.apply_set("glm5-debug", patches=str(patches), site_packages=site)
    assert [f.path for f in done.files] == [MLA] and glm5() == "applied"
    assert (
        cli("restore", "minillm", "--force", "--path", MLA, "--site-packages", str(env.site), *wheels)[0] == 0
    )
    undone = patchguard.revert_set("glm5-debug", patches=str(patches), site_packages=site)
    assert [f.path for f in undone.files] == [WEIGHTS] and glm5() == "not applied"
    assert [v.text for v in undone.verdicts] == ["verified pristine"]
    assert cli("scan", "minillm", "--site-packages", str(env.site))[0] == 0


def test_backups_are_kept_for_the_last_transactions_only(
    env: Env, patches: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = [str(env.site)]
    backups = env.site / ".patchguard/backups"
    made: list[str] = []
    for _ in range(4):
        for move in (patchguard.apply_set, patchguard.revert_set):
            out = move("glm5-debug", patches=str(patches), site_packages=site)
            assert out.committed is not None
            made.append(os.path.basename(out.committed.backup_dir))
    assert sorted(p.name for p in backups.iterdir()) == sorted(made[-5:])  # the default: 5
    code, out_text, _ = cli("status", "--site-packages", str(env.site), "--patches", str(patches))
    assert "backups  5 transactions" in out_text and "the last 5 are kept" in out_text

    (tmp_path / "pyproject.toml").write_text("[tool.patchguard]\nkeep_backups = 2\n")  # tests run in tmp_path
    out = patchguard.apply_set("glm5-debug", patches=str(patches), site_packages=site)
    assert out.committed is not None
    assert sorted(p.name for p in backups.iterdir()) == [made[-1], os.path.basename(out.committed.backup_dir)]
    monkeypatch.setenv("PATCHGUARD_KEEP_BACKUPS", "0")
    patchguard.revert_set("glm5-debug", patches=str(patches), site_packages=site)
    assert list(backups.iterdir()) == []
    monkeypatch.setenv("PATCHGUARD_KEEP_BACKUPS", "lots")
    code, _, err = cli(
        "apply", "--set", "glm5-debug", "--site-packages", str(env.site), "--patches", str(patches)
    )
    assert code == 2 and "PATCHGUARD_KEEP_BACKUPS" in err
    assert (
        cli("sets", "--site-packages", str(env.site), "--patches", str(patches))[1].count("not applied") == 2
    )


def test_capture_refuses_a_copy_of_an_existing_set(env: Env, patches: Path, minillm_wheel: Path) -> None:
    hand_edit_glm5(env)  # the very edits glm5-debug makes, typed in by hand
    site, house = [str(env.site)], [str(minillm_wheel.parent)]
    with pytest.raises(patchguard.UsageError, match="exactly patch set 'glm5-debug'"):
        patchguard.capture_set(
            "glm5-again", "minillm", patches=str(patches), site_packages=site, wheelhouse=house
        )
    assert not (patches / "glm5-again").exists()
    code, _out, err = cli(
        "capture",
        "minillm",
        "--set",
        "glm5-again",
        "--patches",
        str(patches),
        "--site-packages",
        str(env.site),
        "--wheelhouse",
        str(minillm_wheel.parent),
    )
    assert code == 2 and "exactly patch set 'glm5-debug'" in err and "--force" in err
    copy = patchguard.capture_set(
        "glm5-again", "minillm", patches=str(patches), site_packages=site, wheelhouse=house, force=True
    )
    assert set(copy.paths) == {MLA, WEIGHTS}


def test_one_set_across_two_distributions(env: Env, tmp_path: Path, minillm_wheel: Path) -> None:
    """The GLM-5 debug code spans two distributions: ``capture --set NAME DIST DIST`` writes one set with a
    target each, and revert, status and apply treat it as one set."""
    toolkit = {"toolkit/comm.py": "def all_reduce(x):\n    return x\n"}
    env.install(build_wheel(tmp_path / "tk", "toolkit", "1.0", toolkit))
    hand_edit_glm5(env)
    comm = env.site / "toolkit/comm.py"
    comm.write_text("def all_reduce(x):\n    print('all_reduce', x)\n    return x\n")
    wanted = {MLA: sha(env.site / MLA), "toolkit/comm.py": sha(comm)}
    site = ("--site-packages", str(env.site), "--patches", str(tmp_path / "sets"))
    wheels = ("--wheelhouse", str(minillm_wheel.parent), "--wheelhouse", str(tmp_path / "tk"), "--offline")
    code, out, err = cli("capture", "--set", "glm5-both", "minillm", "toolkit", *site, *wheels)
    assert code == 0, err
    assert "minillm ==0.4.0" in out and "toolkit ==1.0" in out
    from patchguard.patchsets.model import load_set

    ps = load_set(str(tmp_path / "sets/glm5-both"))
    assert [t.distribution for t in ps.targets] == ["minillm", "toolkit"]
    assert set(ps.paths) >= {MLA, "toolkit/comm.py"}
    code, out, err = cli("revert", "--set", "glm5-both", *site)
    assert code == 0, err
    assert "print" not in comm.read_text() and "torch.save" not in (env.site / MLA).read_text()
    assert cli("apply", "--set", "glm5-both", *site)[0] == 0
    assert {MLA: sha(env.site / MLA), "toolkit/comm.py": sha(comm)} == wanted
    code, out, _ = cli("sets", *site)
    assert "glm5-both" in out and "applied" in out
    code, _out, err = cli("capture", "--set", "x", "minillm", "toolkit", "--version", ">=0.4", *site, *wheels)
    assert code == 2 and "--version pins one distribution" in err


NCCL_HOOK = (
    "import os\nos.environ['NCCL_P2P_DISABLE'] = '1'\nos.environ.setdefault('NCCL_IB_TIMEOUT', '22')\n"
)


def test_a_startup_hook_the_team_wants_lives_in_a_set(env: Env, tmp_path: Path, minillm_wheel: Path) -> None:
    """NCCL tuning in sitecustomize.py, captured as a set of the environment itself: scan names the set and
    its settings, a policy allows it, revert deletes it, apply puts it back, rebase has nothing to carry."""
    hook = env.site / "sitecustomize.py"
    hook.write_text(NCCL_HOOK)
    (env.site / "nccl_tuning.pth").write_text("import os; os.environ.setdefault('NCCL_ALGO', 'Ring')\n")
    site = ("--site-packages", str(env.site))
    sets = ("--patches", str(tmp_path / "sets"))
    code, _, err = cli("capture", "--set", "nccl", *site, *sets)
    assert code == 2 and "--unowned" in err  # nothing named: say how to capture unowned files
    code, _, err = cli("capture", "--set", "nccl", "--unowned", "--version", "==1", *site, *sets)
    assert code == 2 and "no version" in err and not (tmp_path / "sets").exists()
    code, out, err = cli("capture", "--set", "nccl", "--unowned", "--path", "sitecustomize.py", *site, *sets)
    assert code == 0, err
    assert "(environment)" in out
    ps = load_set(str(tmp_path / "sets/nccl"))
    assert [str(t) for t in ps.targets] == ["environment"] and ps.paths == ("sitecustomize.py",)
    assert "targets = [{environment = true}]" in (tmp_path / "sets/nccl/patchset.toml").read_text()
    # Scan: the hook is the set's; its settings are shown, and the hint is to revert the set, not to delete.
    report = patchguard.scan(site_packages=[str(env.site)], patches=str(tmp_path / "sets"))
    by_path = {(f.path, f.kind): f for f in report.findings}
    assert by_path["sitecustomize.py", patchguard.Kind.STARTUP_HOOK].patch_set == "nccl"
    assert by_path["nccl_tuning.pth", patchguard.Kind.STARTUP_HOOK].patch_set is None
    settings_shown = [
        f.message for f in report.findings if f.path == "sitecustomize.py" and f.rule == "env-mutation"
    ]
    assert any("NCCL_P2P_DISABLE=1" in m for m in settings_shown)
    assert any("NCCL_IB_TIMEOUT=22" in m for m in settings_shown)
    _, table, _ = cli("scan", *site, *sets)
    assert "patchguard revert --set nccl" in table and "delete sitecustomize.py" not in table
    assert "delete nccl_tuning.pth" in table
    # A policy that wants the set: no revert hint, and check passes on the hook (the .pth stays a finding).
    policy = tmp_path / "policy.toml"
    policy.write_text(f'allowed_sets = ["nccl"]\npatches = "{tmp_path / "sets"}"\nfail_on = "high"\n')
    (env.site / "nccl_tuning.pth").unlink()
    code, out, err = cli("check", "--policy", str(policy), *site)
    assert code == 0, out + err
    # status, revert (verified: the file is gone), apply again.
    code, out, _ = cli("sets", *site, *sets)
    assert "nccl" in out and "environment" in out
    reverted = patchguard.revert_set("nccl", patches=str(tmp_path / "sets"), site_packages=[str(env.site)])
    assert [(v.path, v.verdict) for v in reverted.verdicts] == [
        ("sitecustomize.py", patchguard.Verdict.REMOVED)
    ]
    assert not hook.exists()
    assert patchguard.scan(site_packages=[str(env.site)]).findings == ()
    applied = patchguard.apply_set("nccl", patches=str(tmp_path / "sets"), site_packages=[str(env.site)])
    assert applied.action is patchguard.SetAction.APPLIED and hook.read_text() == NCCL_HOOK
    states = {
        s.name: s
        for s in patchguard.set_states(patches=str(tmp_path / "sets"), site_packages=[str(env.site)])[0]
    }
    assert states["nccl"].state is patchguard.SetStatus.APPLIED
    code, out, err = cli("rebase", "--set", "nccl", *site, *sets, "--offline")
    assert code == 0 and "nothing to rebase" in out, out + err


def test_a_set_of_the_environment_never_touches_a_distributions_file(env: Env, tmp_path: Path) -> None:
    """The environment target has no version check: it may not be used to patch an installed package."""
    ps_dir = tmp_path / "sets/sneaky"
    ps_dir.mkdir(parents=True)
    (ps_dir / "patchset.toml").write_text(
        'name = "sneaky"\ntargets = [{environment = true}]\nfiles = ["0001.patch"]\n'
    )
    text = (env.site / CUDA).read_text()
    first = text.splitlines()[0]
    (ps_dir / "0001.patch").write_text(
        f"--- a/{CUDA}\n+++ b/{CUDA}\n@@ -1,1 +1,2 @@\n {first}\n+import os; os.system('id')\n"
    )
    before = tree(env.site)
    code, _, err = cli(
        "apply", "--set", "sneaky", "--site-packages", str(env.site), "--patches", str(tmp_path / "sets")
    )
    assert code == 2 and "installed by minillm" in err and "add that distribution" in err
    assert tree(env.site) == before
    for bad in (
        "{environment = 1}",
        "{environment = true, version = '1'}",
        '{distribution = "", version = ""}',
    ):
        (ps_dir / "patchset.toml").write_text(f'name = "sneaky"\ntargets = [{bad}]\nfiles = ["0001.patch"]\n')
        with pytest.raises(PatchSetError, match="bad target"):
            load_set(str(ps_dir))


def test_one_set_for_a_distribution_and_the_environment(
    env: Env, tmp_path: Path, minillm_wheel: Path
) -> None:
    """The GLM-5 debug session: dumps in minillm and a sitecustomize, one set, all or nothing."""
    hand_edit_glm5(env)
    (env.site / "sitecustomize.py").write_text(NCCL_HOOK)
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(minillm_wheel, house)
    sets = str(tmp_path / "sets")
    site = ("--site-packages", str(env.site))
    code, _, err = cli(
        "capture",
        "minillm",
        "--unowned",
        "--set",
        "glm5",
        *site,
        "--patches",
        sets,
        "--wheelhouse",
        str(house),
    )
    assert code == 0, err
    ps = load_set(str(tmp_path / "sets/glm5"))
    assert [str(t) for t in ps.targets] == ["minillm ==0.4.0", "environment"]
    assert set(ps.paths) == {MLA, WEIGHTS, "sitecustomize.py"}
    out = patchguard.revert_set("glm5", patches=sets, site_packages=[str(env.site)])
    assert {v.path: v.verdict for v in out.verdicts} == {
        MLA: patchguard.Verdict.PRISTINE,
        WEIGHTS: patchguard.Verdict.PRISTINE,
        "sitecustomize.py": patchguard.Verdict.REMOVED,
    }
    assert patchguard.scan(site_packages=[str(env.site)]).findings == ()
    patchguard.apply_set("glm5", patches=sets, site_packages=[str(env.site)])
    report = patchguard.scan(site_packages=[str(env.site)], patches=sets)
    assert {f.patch_set for f in report.findings} == {"glm5"}


def test_a_set_in_place_is_protected_by_what_is_on_disk(
    env: Env, tmp_path: Path, minillm_wheel: Path
) -> None:
    """Right after capture the set is in place, applied by no patchguard command: restore and its dry run
    both refuse to undo it (the same words), and --force is the one way through."""
    hand_edit_glm5(env)
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(minillm_wheel, house)
    where = ["--site-packages", str(env.site), "--patches", str(tmp_path / "sets")]
    source = ["--wheelhouse", str(house), "--offline"]
    code, _, err = cli("capture", "minillm", "--set", "mine", "--path", "*/mla.py", *where, *source)
    assert code == 0, err
    code, out, _ = cli("sets", *where)
    assert "applied (by hand)" in out
    edited = (env.site / MLA).read_bytes()
    answers = []
    for extra in (["--dry-run"], []):
        code, out, err = cli("restore", "minillm", "--path", "*/mla.py", *where, *source, *extra)
        answers.append((code, err))
        assert (env.site / MLA).read_bytes() == edited
    assert answers[0] == answers[1] and answers[0][0] == 2, answers
    assert "holds patch set mine, in place (applied by hand)" in answers[0][1] and "--force" in answers[0][1]
    assert f"patchguard revert --set mine --site-packages {env.site}" in answers[0][1]
    code, out, err = cli("restore", "minillm", "--path", "*/mla.py", *where, *source, "--force")
    assert code == 0 and (env.site / MLA).read_bytes() != edited, err


def test_state_is_read_into_records_and_a_newer_patchguards_keys_kept(env: Env, patches: Path) -> None:
    """state.json is parsed once into records; a record another (newer) patchguard wrote, with keys this one
    does not know, is written back as it was when another set is applied beside it — and one whose files
    are not hashes reads as unknown images, never a crash."""
    import json

    from patchguard.state import Images, read_state

    site = [str(env.site)]
    patchguard.apply_set("sm120-support", patches=str(patches), site_packages=site)
    (record,) = read_state(str(env.site)).values()
    assert record.digest and record.distributions == {"minillm": "0.4.0"}
    assert all(isinstance(i, Images) and i.pre and i.post for i in record.files.values())
    path = env.site / ".patchguard/state.json"
    doc = json.loads(path.read_text())
    foreign = {"digest": "sha256:x", "files": {"a.py": "not a hash object"}, "signed_by": {"k": [1, 2]}}
    doc["applied"]["from-the-future"] = foreign
    path.write_text(json.dumps(doc))
    assert read_state(str(env.site))["from-the-future"].files == {"a.py": Images(None, None)}
    patchguard.apply_set("glm5-debug", patches=str(patches), site_packages=site)
    after = json.loads(path.read_text())["applied"]
    assert after["from-the-future"] == foreign
    assert set(after) == {"sm120-support", "glm5-debug", "from-the-future"}
