"""The command line, end to end: click's CliRunner, and the installed console script in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchguard.cli import main

from .helpers import Env, build_wheel, make_venv, run_cli


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        result.exception
    )
    return result.exit_code, result.stdout, result.stderr


def test_clean_environment_table_and_exit_0(env: Env) -> None:
    code, out, err = invoke("scan", "--site-packages", str(env.site))
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{lines[0].split()[0]} files in 1 distribution checked in ")
    assert lines[0].endswith(": no findings")
    assert err == ""


def test_findings_table_grouped_by_distribution(env: Env) -> None:
    (env.site / "minillm/models/mla.py").write_text("print('hi')\n")
    (env.site / "minillm/platforms/cuda.py").unlink()
    (env.site / "dump.pth").write_text("import os\n")
    code, out, _ = invoke("scan", "--site-packages", str(env.site), "--no-analysis")
    assert code == 1  # the .pth is high, the default --fail-on
    lines = out.splitlines()
    assert lines[0] == "minillm 0.4.0"
    assert lines[1].split() == ["MODERATE", "modified-python", "minillm/models/mla.py"]
    assert lines[3].split() == ["MODERATE", "missing-file", "minillm/platforms/cuda.py"]
    assert "not owned by any distribution" in lines
    assert lines[-1].endswith(": 1 modified, 1 missing, 1 startup hook")


@pytest.mark.parametrize(
    ("fail_on", "expected"),
    [("high", 0), ("moderate", 1), ("minor", 1), ("never", 0)],
)
def test_fail_on_threshold(env: Env, fail_on: str, expected: int) -> None:
    (env.site / "minillm/models/mla.py").write_text("x = 1\n")  # moderate
    code, _, _ = invoke("scan", "--site-packages", str(env.site), "--fail-on", fail_on, "--no-analysis")
    assert code == expected


def test_json_output_via_cli(env: Env) -> None:
    (env.site / "minillm/envs.py").write_text("DEBUG = True\n")
    code, out, _ = invoke(
        "scan",
        "minillm",
        "--site-packages",
        str(env.site),
        "--format",
        "json",
        "--fail-on",
        "never",
        "--no-analysis",
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "patchguard.report/1"
    assert [(f["kind"], f["path"]) for f in doc["findings"]] == [("modified", "minillm/envs.py")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--site-packages", "/nonexistent/site-packages"],
            "/nonexistent/site-packages: site-packages directory does not exist",
        ),
        (["--python", "/nonexistent/bin/python"], "/nonexistent/bin/python: no such interpreter"),
        (["--python", "/bin/false"], "/bin/false: interpreter did not report its paths (exit 1"),
        (["--python", sys.executable, "--site-packages", "/tmp"], "give either --python or --site-packages"),
    ],
)
def test_environment_errors_exit_2_with_one_line(args: list[str], message: str) -> None:
    code, out, err = invoke("scan", *args)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("patchguard: error: ") and message in err
    assert "Traceback" not in err


def test_unknown_distribution_exit_2(env: Env) -> None:
    code, _, err = invoke("scan", "vllm", "torch", "--site-packages", str(env.site))
    assert code == 2
    assert "not installed: vllm, torch" in err and str(env.site) in err


def test_site_packages_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("")
    code, _, err = invoke("scan", "--site-packages", str(f))
    assert code == 2 and "is not a directory" in err


@pytest.mark.slow  # scans and analyses the whole test environment: as slow as it is large
def test_default_scans_the_running_interpreter_with_no_configuration() -> None:
    code, out, err = invoke("scan", "--fail-on", "never", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    import sysconfig

    assert sysconfig.get_paths()["purelib"] in doc["environment"]["site_packages"]
    assert doc["summary"]["distributions"] >= 3  # at least patchguard, click, pytest


def test_python_option_scans_another_venv_without_running_its_code(
    tmp_path: Path, minillm_wheel: Path
) -> None:
    venv = make_venv(tmp_path / "other")
    venv.install(minillm_wheel)
    marker = tmp_path / "pth-was-executed"
    (venv.site / "zz_marker.pth").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")
    (venv.site / "minillm/envs.py").write_text("X = 1\n")
    code, out, err = invoke(
        "scan", "--python", str(venv.prefix / "bin" / "python"), "--format", "json", "--no-analysis"
    )
    assert code == 1, err
    doc = json.loads(out)
    assert doc["environment"]["site_packages"] == [str(venv.site)]
    assert doc["environment"]["prefix"] == str(venv.prefix)
    assert {(f["kind"], f["path"]) for f in doc["findings"]} == {
        ("modified", "minillm/envs.py"),
        ("startup-hook", "zz_marker.pth"),
    }
    assert not marker.exists(), "scanning must never execute a .pth of the scanned environment"


@pytest.mark.slow  # the console script, twice, as a subprocess
def test_console_script_end_to_end(env: Env, tmp_path: Path) -> None:
    (env.site / "minillm/models/llama.py").write_text("import pdb\npdb.set_trace()\n")
    proc = run_cli("scan", "--site-packages", str(env.site), "--format", "json", "--fail-on", "moderate")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ""  # not a TTY: no progress bar, nothing extra
    doc = json.loads(proc.stdout)
    # No pristine wheel anywhere: the whole file is judged, and says so.
    assert [(f["rule"], f["line"], f["evidence"][-1]) for f in doc["findings"]] == [
        ("debugger", 2, "baseline: none")
    ]
    bad = run_cli("scan", "--site-packages", str(tmp_path / "missing"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.count("\n") == 1


def test_version_is_fast_and_imports_nothing_heavy() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from patchguard.cli import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "names = ('libcst', 'git', 'importlib_metadata', 'packaging', 'unidiff')\n"
            "heavy = sorted(m for m in names if m in sys.modules)\n"
            "print('heavy:', heavy)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "patchguard " in proc.stdout
    assert "heavy: []" in proc.stdout


def test_other_distributions_in_the_same_site_keep_their_files_owned(env: Env, tmp_path: Path) -> None:
    env.install(
        build_wheel(tmp_path / "w", "sidecar", "1.0", {"sidecar/__init__.py": "", "minillm/plugins/x.py": ""})
    )
    code, out, _ = invoke("scan", "minillm", "--site-packages", str(env.site), "--format", "json")
    assert code == 0
    assert json.loads(out)["findings"] == []  # minillm/plugins/x.py belongs to sidecar


class _FakeTTY:
    def __init__(self) -> None:
        self.text = ""

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_progress_bar_appears_only_after_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    from patchguard.cli import _common

    fake = _FakeTTY()
    monkeypatch.setattr(sys, "stderr", fake)
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])  # the clock Progress reads
    progress = _common.Progress("verifying")
    progress(10, 1000)
    assert fake.text == ""  # fast scans show nothing
    clock[0] += 1.5
    progress(500, 1000)
    progress(1000, 1000)
    progress.close()
    assert "verifying" in fake.text and "100%" in fake.text


def test_a_clean_diff_says_so_and_text_is_the_tables_other_name(env: Env) -> None:
    from .helpers import cli

    code, out, err = cli("diff", "--site-packages", str(env.site))
    assert (code, out) == (0, "") and err.strip() == "no changes: every file is as its wheel installed it"
    table = cli("scan", "--site-packages", str(env.site))
    assert cli("scan", "--site-packages", str(env.site), "--format", "text")[:2] == table[:2]
    _code, help_text, _ = cli("apply", "--help")
    assert "Scan the environment" not in help_text and "Work on the environment" in help_text


def test_running_from_the_environment_it_checks_is_said_once(env: Env) -> None:
    import sysconfig

    from .helpers import cli

    own = sysconfig.get_paths()["purelib"]
    _code, _out, err = cli("scan", "--site-packages", own, "--no-analysis", "--fail-on", "never")
    assert err.count("patchguard runs from the environment it checks") == 1 and "--python" in err
    _code, _out, err = cli("scan", "--site-packages", str(env.site))
    assert "runs from the environment" not in err


def test_every_document_can_go_to_a_file(env: Env, tmp_path: Path, minillm_wheel: Path) -> None:
    from .helpers import cli

    p = env.site / "minillm/envs.py"
    p.write_text(p.read_text() + "\nbreakpoint()\n")
    site = ["--site-packages", str(env.site)]
    wheels = ["--wheelhouse", str(minillm_wheel.parent), "--offline"]
    for args in (["scan", "--format", "json"], ["check", "--format", "json"], ["diff", *wheels], ["lock"]):
        code, out, _ = cli(*args, *site)
        target = tmp_path / f"{args[0]}.out"
        code_to_file, printed, _ = cli(*args, *site, "-o", str(target))
        assert (code_to_file, printed) == (code, ""), args
        text = target.read_text()
        if args[0] in ("scan", "check"):  # the wall time differs from run to run
            text, out = (json.loads(t)["summary" if args[0] == "scan" else "passed"] for t in (text, out))
        if args[0] == "lock":  # the time the lock was taken differs when the second turns between the runs
            text, out = (json.loads(t) | {"time": None} for t in (text, out))
        assert text == out, args
    code, _out, err = cli("scan", *site, "-o", str(tmp_path / "no-such-dir" / "x.json"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot write the report" in err


def test_colour_only_on_a_terminal_and_never_with_no_color(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    from patchguard.cli._common import use_colour
    from patchguard.formats.text import format_table

    p = env.site / "minillm/envs.py"
    p.write_text(p.read_text() + "\nbreakpoint()\n")
    import patchguard

    report = patchguard.scan(["minillm"], site_packages=[str(env.site)], analyse=False)
    coloured, plain = format_table(report, colour=True), format_table(report)
    assert "\x1b[" in coloured and "\x1b[" not in plain
    assert [line.replace("\x1b[33m", "").replace("\x1b[0m", "") for line in coloured.splitlines()] == (
        plain.splitlines()
    )  # the same columns, coloured
    monkeypatch.setattr("sys.stdout.isatty", lambda: True, raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_colour(None, False)
    assert not use_colour("report.txt", False) and not use_colour(None, True)
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_colour(None, False)


def test_every_command_help_ends_with_examples() -> None:
    from patchguard.cli import main as group

    from .helpers import cli

    for name in group.commands:
        code, out, _ = cli(name, "--help")
        assert code == 0 and "Examples:\n    patchguard " in out, name


def test_the_progress_bar_counts_from_the_start_and_clears_itself(capsys: pytest.CaptureFixture[str]) -> None:
    from patchguard.cli._common import Progress

    bar = Progress("verifying")
    bar(10, 100)  # within the first second: no bar
    assert bar.bar is None
    bar.started -= 3.0  # the work began three seconds ago
    bar(50, 100)
    assert bar.bar is not None and 2.5 < time.time() - bar.bar.start < 4.0  # the rate counts from the start
    bar.close()
    assert capsys.readouterr().err.endswith("\r\x1b[2K")


def test_quiet_leaves_notes_out_and_verbose_names_the_pristine_source(env: Env, minillm_wheel: Path) -> None:
    import sysconfig

    from .helpers import cli

    own = sysconfig.get_paths()["purelib"]
    _code, _out, err = cli("-q", "scan", "--site-packages", own, "--no-analysis", "--fail-on", "never")
    assert "runs from the environment" not in err
    _code, _out, err = cli("-q", "diff", "--site-packages", str(env.site))
    assert err == ""  # not even "no changes"
    p = env.site / "minillm/envs.py"
    p.write_text(p.read_text() + "\nx = 1\n")
    code, _out, err = cli(
        "-v", "diff", "--site-packages", str(env.site), "--wheelhouse", str(minillm_wheel.parent)
    )
    assert code == 0 and f"pristine source of minillm 0.4.0: wheelhouse {minillm_wheel}" in err
    _code, _out, err = cli(
        "diff", "--site-packages", str(env.site), "--wheelhouse", str(minillm_wheel.parent)
    )
    assert "pristine source" not in err


def test_many_minor_changes_of_a_file_are_one_line_in_the_table(env: Env) -> None:
    from dataclasses import replace

    import patchguard
    from patchguard.formats.text import format_table

    p = env.site / "minillm/envs.py"
    p.write_text(p.read_text() + "\nbreakpoint()\n")
    report = patchguard.scan(["minillm"], site_packages=[str(env.site)])
    dump = next(f for f in report.findings if f.rule == "debugger")
    changes = [
        replace(
            dump,
            kind=patchguard.Kind.FUNCTIONAL_CHANGE,
            rule=patchguard.RuleId.FUNCTIONAL_CHANGE,
            severity=patchguard.Severity.MINOR,
            line=n,
        )
        for n in (3, 9, 27, 81, 90)
    ]
    table = format_table(replace(report, findings=(dump, *changes)))
    assert "minillm/envs.py  5 functional or cosmetic changes (lines 3, 9, 27, 81, 90)" in table
    assert "functional-change" not in table and "debugger" in table  # the rest is shown as it is
    few = format_table(replace(report, findings=(dump, *changes[:3])))
    assert few.count("functional-change") == 3


@pytest.mark.slow  # two real venvs
def test_two_venvs_of_one_base_interpreter_are_two_environments(tmp_path: Path) -> None:
    """patchguard in its own venv, ``--python`` naming the server's venv: both link the same base binary,
    and no note says patchguard runs from the environment it checks."""
    server = make_venv(tmp_path / "server")
    assert os.path.realpath(server.prefix / "bin/python") == os.path.realpath(sys.executable)
    done = run_cli("scan", "--python", str(server.prefix / "bin/python"), "--no-analysis")
    assert done.returncode == 0, done.stderr
    assert "runs from the environment" not in done.stderr
    done = run_cli("scan", "--python", sys.executable, "--no-analysis", "--fail-on", "never")
    assert "runs from the environment" in done.stderr  # the tests' own interpreter: patchguard's environment
