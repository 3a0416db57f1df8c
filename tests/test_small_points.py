"""The small points a new user meets first (issues 32 and 33): each one line, each run as a user runs it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from patchguard.diffs import FileDiff, git_quote, git_unquote, unified_diff

from .helpers import Env, build_wheel, cli, make_venv, tree


@pytest.mark.parametrize("value", ["²", "99999999999999999999", "253402300800", "-1", " 12", "1e9"])
def test_a_source_date_epoch_that_is_no_time_is_one_warning(
    env: Env, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
    code, out, err = cli("lock", "--site-packages", str(env.site))
    assert code == 0, err
    assert "SOURCE_DATE_EPOCH" in err and "current time" in err
    assert json.loads(out)["time"] < "9999"
    code, out, err = cli("scan", "--site-packages", str(env.site), "--format", "json")
    assert code in (0, 1) and json.loads(out)["time"].startswith("20"), err


def test_a_source_date_epoch_of_digits_is_the_time(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "253402300799")
    code, out, err = cli("lock", "--site-packages", str(env.site))
    assert code == 0 and json.loads(out)["time"] == "9999-12-31T23:59:59Z" and "warning" not in err


def test_a_regular_file_named_patchguard_stops_writers_only(
    env: Env, tmp_path: Path, minillm_wheel: Path
) -> None:
    (env.site / ".patchguard").write_text("not a directory\n")
    (env.site / "minillm" / "platforms" / "cuda.py").unlink()
    for args in (["scan"], ["status"], ["sets"], ["lock"], ["check"]):
        code, _out, err = cli(*args, "--site-packages", str(env.site))
        assert code in (0, 1), (args, err)
    before = tree(env.prefix)
    house = ["--wheelhouse", str(minillm_wheel.parent), "--offline"]
    code, _out, err = cli("restore", "minillm", "--site-packages", str(env.site), *house)
    assert code == 2 and err.count("\n") == 1 and ".patchguard: is not a directory" in err
    assert tree(env.prefix) == before


def test_a_venv_directory_given_as_python_names_its_interpreter(tmp_path: Path) -> None:
    venv = make_venv(tmp_path / "venv")
    code, _out, err = cli("scan", "--python", str(venv.prefix))
    assert code == 2 and f"did you mean --python {venv.prefix}/bin/python" in err and err.count("\n") == 1


def test_bisect_names_a_test_program_that_is_not_there(env: Env, tmp_path: Path) -> None:
    (env.site / "minillm" / "platforms" / "cuda.py").unlink()
    before = tree(env.prefix)
    for test, said in (("./smoke.sh", "does not exist"), ("no-such-program-x --fast", "is not on PATH")):
        code, _out, err = cli("bisect", "--site-packages", str(env.site), "--test", test)
        assert code == 2 and said in err and err.count("\n") == 1, err
    script = tmp_path / "smoke.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    code, _out, err = cli("bisect", "--site-packages", str(env.site), "--test", str(script))
    assert code == 2 and "is not executable" in err and "chmod +x" in err
    assert tree(env.prefix) == before


@pytest.mark.parametrize(
    "name", ['we"ird.py', "back\\slash.py", "tab\there.py", "new\nline.py", "bad\udcff.py"]
)
def test_diff_names_are_quoted_as_git_quotes_them_and_read_back(name: str) -> None:
    text = unified_diff([FileDiff(f"pkg/{name}", b"a = 1\n", b"a = 2\n")])
    head = text.splitlines()[0]
    assert head.startswith('diff --git "a/pkg/') and "\n" not in head and "\t" not in head
    assert all(ord(c) >= 0x20 and not 0xD800 <= ord(c) <= 0xDFFF for c in text.replace("\n", ""))
    assert git_unquote(git_quote(f"a/pkg/{name}")) == f"a/pkg/{name}"


def test_a_captured_set_of_a_quoted_name_applies_back(tmp_path: Path) -> None:
    files = {"odd/__init__.py": "", 'odd/we"ird.py': "A = 1\n"}
    env = Env(tmp_path / "venv")
    env.install(build_wheel(tmp_path / "w", "odd", "1.0", files))
    odd = env.site / "odd" / 'we"ird.py'
    odd.write_text("A = 2\n")
    where = ["--site-packages", str(env.site), "--patches", str(tmp_path / "sets")]
    house = ["--wheelhouse", str(tmp_path / "w"), "--offline"]
    code, _, err = cli("capture", "odd", "--set", "q", *where, *house)
    assert code == 0, err
    assert (
        '"a/odd/we\\"ird.py"'
        in (tmp_path / "sets" / "q")
        .joinpath(*[p for p in os.listdir(tmp_path / "sets" / "q") if p.endswith(".patch")])
        .read_text()
    )
    code, _, err = cli("revert", "--set", "q", *where)
    assert code == 0 and odd.read_text() == "A = 1\n", err
    code, _, err = cli("apply", "--set", "q", *where)
    assert code == 0 and odd.read_text() == "A = 2\n", err


def test_an_empty_directory_an_uninstall_left_is_info(env: Env) -> None:
    (env.site / "leftover.libs").mkdir()
    code, out, _ = cli("scan", "--site-packages", str(env.site), "--format", "json", "--fail-on", "minor")
    found = [f for f in json.loads(out)["findings"] if f["path"] == "leftover.libs/"]
    assert code == 0 and [(f["severity"], f["rule"]) for f in found] == [("info", "unexpected-directory")]


def test_scan_takes_fail_on_and_arch_from_the_configuration(env: Env, tmp_path: Path) -> None:
    (env.site / "minillm" / "platforms" / "cuda.py").unlink()  # a missing file: moderate
    code, _, _ = cli("scan", "--site-packages", str(env.site))
    assert code == 0  # high by default
    (tmp_path / "patchguard.toml").write_text('fail_on = "moderate"\n')
    code, _, err = cli("scan", "--site-packages", str(env.site))
    assert code == 1, err
    code, _, err = cli("scan", "--site-packages", str(env.site), "--fail-on", "high")
    assert code == 0, err  # the command line says it


def test_a_refused_diff_is_one_line_that_says_why(env: Env, tmp_path: Path) -> None:
    sets = tmp_path / "sets" / "bad"
    sets.mkdir(parents=True)
    (sets / "patchset.toml").write_text(
        'name = "bad"\ntargets = [{distribution = "minillm", version = "==0.4.0"}]\nfiles = ["0001.patch"]\n'
    )
    where = ["--site-packages", str(env.site), "--patches", str(tmp_path / "sets")]
    for diff, said in (
        ("--- a/../escape.py\n+++ b/../escape.py\n@@ -1 +1 @@\n-a\n+b\n", "paths with '..' are refused"),
        (
            "--- a/x.bin\n+++ b/x.bin\nBinary files a/x.bin and b/x.bin differ\n",
            "binary diffs are not supported",
        ),
    ):
        (sets / "0001.patch").write_text(diff)
        code, _out, err = cli("apply", "--set", "bad", *where)
        assert code == 2 and err.count("\n") == 1 and said in err, err


@pytest.mark.parametrize("name", ['a"b', "a\\b", "a\nb", "a\\nb", "x\udcffy"])
def test_prometheus_label_values_read_back(name: str) -> None:
    """What a Prometheus parser unescapes (backslash, quote, line feed) and then the JSON name encoding
    decodes gives the name back: distinct names stay distinct."""
    import re

    from patchguard.formats.prometheus import _escape

    text = _escape(name)
    assert "\n" not in text and re.fullmatch(r'(?:[^"\\]|\\[\\"n])*', text)
    unescaped = re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), text)
    decoded = re.sub(
        r"\\(\\|x([0-9a-f]{2}))",
        lambda m: "\\" if m.group(2) is None else chr(0xDC00 + int(m.group(2), 16)),
        unescaped,
    )
    assert decoded == name


def test_quiet_and_verbose_after_the_command_and_forced_colour(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    (env.site / "minillm" / "platforms" / "cuda.py").write_text("import pdb; pdb.set_trace()\n")
    code, _out, err = cli("scan", "-q", "--site-packages", str(env.site))
    assert code in (0, 1) and "Usage" not in err
    code, _out, err = cli("scan", "--site-packages", str(env.site), "--verbose")
    assert code in (0, 1) and "Usage" not in err
    monkeypatch.setenv("FORCE_COLOR", "1")
    _code, out, _ = cli("scan", "--site-packages", str(env.site))
    assert "\x1b[1;31mHIGH" in out
    monkeypatch.setenv("NO_COLOR", "1")
    _code, out, _ = cli("scan", "--site-packages", str(env.site))
    assert "\x1b[" not in out


def test_check_speaks_nagios(env: Env, minillm_wheel: Path) -> None:
    """``check --format nagios``: one line, ``|`` performance data, exit 0 OK / 2 CRITICAL / 3 UNKNOWN."""
    site = ["--site-packages", str(env.site), "--wheelhouse", str(minillm_wheel.parent), "--offline"]
    code, out, _ = cli("check", *site, "--format", "nagios")
    assert (
        code == 0 and out.startswith("PATCHGUARD OK - ") and out.count("\n") == 1 and " | high=0;;;0" in out
    )
    (env.site / "minillm" / "platforms" / "cuda.py").write_text("import pdb; pdb.set_trace()\n")
    code, out, _ = cli("check", *site, "--format", "nagios")
    assert code == 2 and out.startswith("PATCHGUARD CRITICAL - 1 violation") and "high=1;;;0" in out
    code, out, err = cli("check", "--site-packages", "/nonexistent/dir", "--format", "nagios")
    assert code == 3 and out.startswith("PATCHGUARD UNKNOWN - could not check") and err.count("\n") == 1


def test_scan_writes_github_workflow_annotations(env: Env) -> None:
    (env.site / "minillm" / "platforms" / "cuda.py").write_text("import pdb; pdb.set_trace()\n")
    (env.site / "odd,na:me%.py").write_text("x = 1\n")
    code, out, _ = cli("scan", "--site-packages", str(env.site), "--format", "github")
    lines = out.splitlines()
    assert (
        code == 1
        and lines
        and all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)
    )
    assert any(line.startswith("::error file=minillm/platforms/cuda.py,line=1,") for line in lines), out
    (odd,) = [line for line in lines if "odd" in line]
    assert "file=odd%2Cna%3Ame%25.py," in odd


def test_sarif_runs_are_categorised_by_host(env: Env) -> None:
    _code, out, _ = cli("scan", "--site-packages", str(env.site), "--format", "sarif")
    (run,) = json.loads(out)["runs"]
    assert run["automationDetails"]["id"].startswith("patchguard/") and run["automationDetails"][
        "id"
    ].endswith("/")
