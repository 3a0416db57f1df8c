"""Trust under attack, round two (issue 24): the surfaces added since the transaction — its lock file, rebase,
environment settings, state — held to the same bar. Each case ends in the safe outcome with one clear line."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from .helpers import Env, build_wheel, cli, minillm_files, tree


def _apply(env: Env, patches: Path) -> tuple[int, str, str]:
    return cli("apply", "--set", "sm120-support", "--site-packages", str(env.site), "--patches", str(patches))


def test_a_dangling_lock_symlink_creates_nothing_anywhere(env: Env, tmp_path: Path, patches: Path) -> None:
    """``.patchguard/lock`` pointing at a file that does not exist: root must not create that file."""
    state = env.site / ".patchguard"
    state.mkdir()
    victim = tmp_path / "etc-nologin"
    (state / "lock").symlink_to(victim)
    before = tree(env.site)
    code, _out, err = _apply(env, patches)
    assert code == 2 and "lock" in err and "symlink" in err
    assert len(err.strip().splitlines()) == 1
    assert not victim.exists() and not os.path.lexists(victim)
    assert tree(env.site) == before


def test_a_lock_file_that_is_a_fifo_is_refused(env: Env, patches: Path) -> None:
    state = env.site / ".patchguard"
    state.mkdir()
    os.mkfifo(state / "lock")
    code, _out, err = _apply(env, patches)
    assert code == 2 and "not a regular file" in err


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("PATCHGUARD_LOCK_TIMEOUT", "abc"),
        ("PATCHGUARD_LOCK_TIMEOUT", "-1"),
        ("PATCHGUARD_LOCK_TIMEOUT", "nan"),
        ("PATCHGUARD_KEEP_BACKUPS", "²"),
        ("PATCHGUARD_KEEP_BACKUPS", "1.5"),
    ],
)
def test_numeric_settings_are_parsed_strictly(
    env: Env, patches: Path, monkeypatch: pytest.MonkeyPatch, var: str, value: str
) -> None:
    monkeypatch.setenv(var, value)
    before = tree(env.site)
    code, _out, err = _apply(env, patches)
    assert code == 2 and f"${var}=" in err, err
    assert len(err.strip().splitlines()) == 1
    assert tree(env.site) == before


CUDA = "minillm/platforms/cuda.py"


@pytest.mark.parametrize(
    "member", ["minillm/../../escaped/cuda.py", "minillm-0.5.0.data/purelib/../../escaped/cuda.py"]
)
def test_rebase_never_follows_a_wheel_member_out_of_its_root(
    env: Env, tmp_path: Path, minillm_wheel: Path, patches: Path, member: str
) -> None:
    """The target release's wheel moved cuda.py to a member that climbs out of the wheel: that wheel is
    not used at all, nothing is written outside the patches directory, and the error names the wheel."""
    files = minillm_files("0.5.0")
    files[member] = files.pop(CUDA)
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(minillm_wheel, house)
    build_wheel(house, "minillm", "0.5.0", files)
    sets_before = tree(patches)
    code, out, err = cli(
        "rebase", "--set", "sm120-support", "--to-version", "0.5.0", "--patches", str(patches),
        "--site-packages", str(env.site), "--wheelhouse", str(house), "--offline",
    )  # fmt: skip
    assert code == 2, out + err
    assert "outside the wheel's root" in err and "minillm-0.5.0" in err
    assert not (tmp_path / "escaped").exists() and not any(tmp_path.rglob("escaped"))
    assert tree(patches) == sets_before


@pytest.mark.parametrize(
    "option", [("--from-version", "0.4.0\n"), ("--to-version", "v0.5.0\t"), ("--to-version", "0.5.0\x1b[2J")]
)
def test_versions_with_control_characters_are_refused(
    env: Env, tmp_path: Path, minillm_wheel: Path, patches: Path, option: tuple[str, str]
) -> None:
    sets_before = tree(patches)
    code, _out, err = cli(
        "rebase", "--set", "sm120-support", *option, "--patches", str(patches),
        "--site-packages", str(env.site), "--wheelhouse", str(minillm_wheel.parent), "--offline",
    )  # fmt: skip
    assert code == 2 and "is not a version" in err and "\x1b" not in err
    assert len(err.strip().splitlines()) == 1
    assert tree(patches) == sets_before
    code, _out, err = cli(
        "capture", "minillm", "--set", "x", "--version", ">=0.4\n", "--patches", str(tmp_path / "sets"),
        "--site-packages", str(env.site),
    )  # fmt: skip
    assert code == 2 and "not a version specifier" in err and not (tmp_path / "sets").exists()


def _resolved_review(tmp_path: Path, minillm_wheel: Path, patches: Path) -> tuple[Env, list[str]]:
    """A rebase of sm120-support to a 0.5.0 that changed the set's own line, with the conflict resolved in
    the review directory: the next rebase rewrites the set and removes the review directory."""
    from .test_rebase import installed, on_the_hunk, release

    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", on_the_hunk))
    args = ["rebase", "--set", "sm120-support", "--patches", str(patches), "--site-packages", str(new.site),
            "--wheelhouse", str(minillm_wheel.parent), "--offline"]  # fmt: skip
    assert cli(*args)[0] == 1
    review = patches / "sm120-support.rebase/files" / CUDA
    text = review.read_text()
    start, end = text.index("<<<<<<<"), text.index(">>>>>>> set sm120-support\n")
    review.write_text(
        text[:start] + 'SUPPORTED_ARCHS = ["sm80", "sm90", "sm100", "sm120"]\n' + text[end + 26 :]
    )
    return new, args


@pytest.mark.slow  # one CLI process per write point
def test_killed_at_every_write_point_rebase_leaves_whole_directories(
    tmp_path: Path, minillm_wheel: Path, patches: Path
) -> None:
    """kill -9 at each write point of the rebase that takes up a resolution: the set is old or new, the
    review directory whole or gone (never half-deleted), and the next rebase finishes and sweeps."""
    from .helpers import run_cli

    _env, args = _resolved_review(tmp_path, minillm_wheel, patches)
    start = tmp_path / "start"
    shutil.copytree(patches, start)
    point, ends = 0, set()
    while True:
        point += 1
        shutil.rmtree(patches)
        shutil.copytree(start, patches)
        proc = run_cli(*args, env={"PATCHGUARD_TEST_CRASH_AT": str(point)})
        if proc.returncode == 0:
            break  # past the last write point
        assert proc.returncode == 137, proc.stderr
        review = patches / "sm120-support.rebase"
        assert not review.exists() or (review / "rebase.json").is_file()  # whole or gone
        toml = (patches / "sm120-support/patchset.toml").read_text()
        ends.add("==0.5.0" in toml)
        code, out, err = cli(*args)
        assert code == 0, out + err
        assert "==0.5.0" in (patches / "sm120-support/patchset.toml").read_text()
        assert not review.exists()
        assert sorted(p.name for p in patches.iterdir()) == ["glm5-debug", "sm120-support"]  # swept
    assert point > 3 and ends == {False, True}


@pytest.mark.slow  # two CLI subprocesses, slowed at every write point
def test_two_rebases_of_one_set_at_once_write_one_outcome(
    tmp_path: Path, minillm_wheel: Path, patches: Path
) -> None:
    """With a resolution in place, two rebases start together: one rewrites the set, the other waits for
    it and then finds nothing left to carry — never a fresh review directory for the set's old form."""
    import subprocess

    from .helpers import patchguard_exe

    _env, args = _resolved_review(tmp_path, minillm_wheel, patches)
    env = {**os.environ, "PATCHGUARD_TEST_WRITE_DELAY": "0.05"}
    procs = [
        subprocess.Popen([*patchguard_exe(), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert any("nothing to rebase" in out for out in outs), outs
    assert "==0.5.0" in (patches / "sm120-support/patchset.toml").read_text()
    assert sorted(p.name for p in patches.iterdir()) == ["glm5-debug", "sm120-support"]


def test_the_state_of_another_environment_is_refused(env: Env, tmp_path: Path, patches: Path) -> None:
    """``.patchguard`` symlinked to environment A's: B's status must not report A's applied set."""
    elsewhere = tmp_path / "a-state"
    elsewhere.mkdir()
    (elsewhere / "state.json").write_text(
        '{"schema": "patchguard.state/1", "applied": {"sm120-support": {"digest": "x", "files": {}}}}'
    )
    (env.site / ".patchguard").symlink_to(elsewhere)
    for cmd in (["status"], ["sets", "--patches", str(patches)]):
        code, out, err = cli(*cmd, "--site-packages", str(env.site))
        assert code == 2 and "is a symlink" in err and "sm120-support" not in out, (cmd, out, err)
        assert len(err.strip().splitlines()) == 1


def test_state_and_journals_of_another_format_are_refused(env: Env, patches: Path) -> None:
    state = env.site / ".patchguard"
    state.mkdir()
    newer = '{"schema": "patchguard.state/2", "applied": {}, "sets": ["kept by a newer patchguard"]}\n'
    (state / "state.json").write_text(newer)
    before = tree(env.site)
    code, _out, err = _apply(env, patches)
    assert code == 2 and "state file of another format" in err
    assert tree(env.site) == before  # not rewritten
    (state / "state.json").unlink()
    journal = {"schema": "patchguard.journal/2", "txid": "t1", "entries": [{"path": str(env.site / CUDA)}]}
    (state / "journal.json").write_text(json.dumps(journal))
    before = tree(env.site)
    code, _out, err = cli("scan", "--site-packages", str(env.site))
    assert code == 2 and "journal of another format" in err
    assert tree(env.site) == before  # not rolled back by rules that may not be its own


def test_configuration_is_never_read_from_inside_an_environment(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``patchguard.toml`` planted in site-packages says ``fail_on = "never"``: with the current
    directory there, ``check`` still fails on the dump; ``$PATCHGUARD_CONFIG`` is read wherever it is."""
    from .test_deploy import dump_in_mla

    dump_in_mla(env)
    (env.site / "patchguard.toml").write_text('fail_on = "never"\n')
    monkeypatch.chdir(env.site / "minillm")
    code, out, err = cli("check", "--site-packages", str(env.site))
    assert code == 1, out + err
    operator = tmp_path / "ops.toml"
    operator.write_text('fail_on = "never"\n')
    monkeypatch.setenv("PATCHGUARD_CONFIG", str(operator))
    code, out, err = cli("check", "--site-packages", str(env.site))
    assert code == 0, out + err
    monkeypatch.setenv("PATCHGUARD_CONFIG", str(tmp_path / "missing.toml"))
    code, _out, err = cli("check", "--site-packages", str(env.site))
    assert code == 2 and "PATCHGUARD_CONFIG" in err


def test_a_member_larger_than_the_cap_is_never_read_whole(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A huge member with an honest RECORD (here 3 MiB against a cap lowered to 1 MiB, as 2 GiB against
    256 MiB on a real box): restore refuses it in one line instead of reading it into memory."""
    from patchguard.pristine import wheels

    big = b"# weights\n" + b"0" * (3 << 20)
    files = {**minillm_files(), "minillm/big_table.py": big}
    wheel = build_wheel(tmp_path / "house", "minillm", "0.4.0", files)
    fresh = Env(tmp_path / "venv-big")
    fresh.install(wheel)
    (fresh.site / "minillm/big_table.py").write_bytes(b"# edited\n")
    monkeypatch.setattr(wheels, "INSTALLED_LIMIT", 1 << 20)
    before = tree(fresh.site)
    code, _out, err = cli(
        "restore", "minillm", "--site-packages", str(fresh.site), "--wheelhouse", str(tmp_path / "house"),
        "--offline",
    )  # fmt: skip
    assert code == 2 and "MiB patchguard reads of one file" in err, err
    assert tree(fresh.site) == before


MLA = "minillm/models/mla.py"


@pytest.mark.slow  # a CLI subprocess each: a crash must not take the test process with it
@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ("x = " + "(" * 100_000 + "1" + ")" * 100_000 + "\n", "nested brackets"),
        ("x = (" + '")", (' * 20_000 + "1" + ")" * 20_001 + "\n", "nested brackets"),
        ("table = '" + "a" * (5 << 20) + "'\n", "a line of"),
    ],
    ids=["parentheses", "parentheses-behind-strings", "5-MB-line"],
)
def test_wild_code_is_a_finding_never_a_crash(env: Env, minillm_wheel: Path, payload: str, why: str) -> None:
    from .helpers import run_cli

    with open(env.site / MLA, "a") as f:
        f.write(payload)
    proc = run_cli(
        "scan", "--site-packages", str(env.site), "--wheelhouse", str(minillm_wheel.parent), "--offline",
        "--format", "json",
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    found = json.loads(proc.stdout)["findings"]
    wild = [f for f in found if f["path"] == MLA and f["rule"] == "unparseable"]
    assert wild and why in wild[0]["message"], found
    assert len(proc.stdout) < 100_000  # findings quote lines, not megabytes


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_bytecode_that_is_not_a_file_never_hangs_a_scan(env: Env, minillm_wheel: Path, kind: str) -> None:
    with open(env.site / MLA, "a") as f:
        f.write("\nimport os\n")
    cache = env.site / "minillm/models/__pycache__"
    cache.mkdir(exist_ok=True)
    tag = sys.implementation.cache_tag
    for pyc in (cache / f"mla.{tag}.pyc", cache / f"attention.{tag}.pyc"):
        pyc.unlink(missing_ok=True)
        if kind == "fifo":
            os.mkfifo(pyc)
        else:
            pyc.symlink_to("/dev/zero")
    from .helpers import run_cli

    proc = run_cli(
        "scan", "--site-packages", str(env.site), "--wheelhouse", str(minillm_wheel.parent), "--offline",
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr


def test_rebase_json_carries_names_in_the_json_name_encoding() -> None:
    """A file name that is not UTF-8 (or holds a backslash) reaches rebase's JSON exact and unambiguous,
    as in every other document — never as a lone surrogate."""
    from patchguard.model import from_json_name
    from patchguard.patchsets.rebase import FileOutcome, RebasedFile, RebaseResult

    odd = "pkg/raw\udcff.py"
    twin = "pkg/raw\\xff.py"
    files = (
        RebasedFile(odd, FileOutcome.CONFLICT, odd, 2, conflicting=1, regions=1, review="/p/x.rebase/" + odd),
        RebasedFile(twin, FileOutcome.CARRIED, twin, 1),
    )
    doc: Any = json.loads(json.dumps(RebaseResult("s", "pkg", "1.0", "2.0", files).to_json()))
    json.dumps(doc, ensure_ascii=False).encode("utf-8")  # no lone surrogate anywhere
    paths = [f["path"] for f in doc["files"]]
    assert len(set(paths)) == 2 and [from_json_name(p) for p in paths] == [odd, twin]
    assert doc["conflicts"][0]["path"] == paths[0]


def test_a_file_no_grammar_parses_says_where() -> None:
    """libcst's own parser puts an indentation error at 1:1; the finding names the line Python stops at."""
    from patchguard.analysis import CodeChange, analyse

    before = "x = 1\n\n\ndef f(a):\n    return a\n\n\ny = 2\n"
    after = before.replace("    return a\n", "    return a\n  torch.save(a, '/tmp/a')\n")
    found = analyse(CodeChange("m.py", before.encode(), after.encode()))
    (bad,) = [f for f in found if f.rule == "unparseable"]
    assert bad.line == 6 and "indentation" in bad.message, bad.message
