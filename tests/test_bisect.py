"""``patchguard bisect`` on real environments: a wheel built here, installed, hand-edited the way a person
does, and a real shell test run for every trial. After every bisect — a culprit found, an error, Ctrl-C,
SIGTERM, kill -9 followed by the next command — the environment is byte for byte its start state."""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import patchguard
from patchguard._fs import sha256_file
from patchguard.patchsets.bisect.search import Outcome, search

from .helpers import Env, build_wheel, cli, patch_txn, patchguard_exe, tree

N = 16


def _module(n: int, value: int, extra: str = "") -> str:
    body = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(12))
    return f'"""Module {n}."""\n\n{body}VALUE = {value}\n{extra}'


@pytest.fixture
def calc(tmp_path: Path) -> tuple[Env, Path]:
    """``calc`` 1.0 installed from its wheel: 16 modules whose values sum to 136."""
    files = {f"calc/m{n:02d}.py": _module(n, n) for n in range(1, N + 1)}
    files["calc/__init__.py"] = '"""calc."""\n'
    wheel = build_wheel(tmp_path / "wheels", "calc", "1.0", files)
    env = Env(tmp_path / "venv")
    env.install(wheel)
    return env, wheel.parent


def _edit(env: Env, n: int, old: str, new: str) -> None:
    path = env.site / "calc" / f"m{n:02d}.py"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def _touch_all(env: Env) -> None:
    """A harmless hand edit in every module (a debug comment near the top): 16 changed files."""
    for n in range(1, N + 1):
        _edit(env, n, f'"""Module {n}."""\n', f'"""Module {n}."""\n# checked by hand on the box ({n})\n')


def _check(env: Env, script: str, tmp_path: Path) -> str:
    """A shell test command running ``script`` with the environment's site dir on the path."""
    test = tmp_path / "test_calc.py"
    test.write_text(f"import sys\nsys.path.insert(0, {str(env.site)!r})\n{script}")
    return f"{sys.executable} {test}"


SUM = "import importlib\ntotal = sum(importlib.import_module(f'calc.m{n:02d}').VALUE for n in range(1, 17))\n"


def _bisect(env: Env, wheels: Path, test: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = cli(
        "bisect", "--site-packages", str(env.site), "--wheelhouse", str(wheels), "--offline",
        "--test", test, "--format", "json", *extra,
    )  # fmt: skip
    doc = json.loads(out) if out.strip() else {}
    if doc:
        schema = json.loads((resources.files("patchguard") / "schemas" / "bisect-1.schema.json").read_text())
        jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
    return code, doc, err


def test_the_culprit_among_16_changed_files_and_its_hunk(calc: tuple[Env, Path], tmp_path: Path) -> None:
    env, wheels = calc
    _touch_all(env)
    _edit(env, 7, "VALUE = 7\n", "VALUE = 7 * 2  # tried a bigger block size\n")
    before = tree(env.site)
    test = _check(env, SUM + "sys.exit(0 if total == 136 else 1)\n", tmp_path)
    code, doc, err = _bisect(env, wheels, test)
    assert code == 0, err
    (culprit,) = doc["culprits"]
    assert culprit["path"] == "calc/m07.py" and culprit["kind"] == "hunk"
    assert culprit["lines"] == [52, 52] and "+VALUE = 7 * 2" in culprit["diff"]
    assert "checked by hand" not in culprit["diff"]  # the other hunk of the file is innocent
    # 2 checks, about log2(16) to find the file, 1 to confirm, then the file's 2 hunks
    assert doc["runs"] <= 2 + 4 + 1 + 2, doc["trials"]
    assert tree(env.site) == before
    assert not (env.site / ".patchguard" / "session.json").exists()


@pytest.mark.slow  # a bisect: a test process per trial
def test_two_changes_that_break_only_together(calc: tuple[Env, Path], tmp_path: Path) -> None:
    env, wheels = calc
    _touch_all(env)
    _edit(env, 3, "VALUE = 3\n", "VALUE = 3\nFAST_PATH = True\n")
    _edit(env, 12, "VALUE = 12\n", "VALUE = 12\nFUSED = True\n")
    before = tree(env.site)
    script = (
        "import calc.m03 as a, calc.m12 as b\n"
        "sys.exit(1 if getattr(a, 'FAST_PATH', False) and getattr(b, 'FUSED', False) else 0)\n"
    )
    code, doc, err = _bisect(env, wheels, _check(env, script, tmp_path), "--by", "file")
    assert code == 0, err
    assert {c["path"] for c in doc["culprits"]} == {"calc/m03.py", "calc/m12.py"}
    assert all("+FAST_PATH" in c["diff"] or "+FUSED" in c["diff"] for c in doc["culprits"])
    assert tree(env.site) == before


@pytest.mark.slow  # a bisect: a test process per trial
def test_a_flaky_test_is_run_again_and_the_confidence_said(calc: tuple[Env, Path], tmp_path: Path) -> None:
    """The failure shows 3 runs in 10 (a counter kept outside the environment): with 4 runs per trial
    every failing state fails once at least, and the result says how flaky the test looked."""
    env, wheels = calc
    _touch_all(env)
    _edit(env, 9, "VALUE = 9\n", "VALUE = 9\nRACE = True\n")
    before = tree(env.site)
    counter = tmp_path / "count"
    counter.write_text("0")
    script = (
        f"import pathlib\nc = pathlib.Path({str(counter)!r})\n"
        "n = int(c.read_text()) + 1\nc.write_text(str(n))\n"
        "import calc.m09 as m\nsys.exit(1 if getattr(m, 'RACE', False) and n % 10 in (2, 5, 8) else 0)\n"
    )
    code, doc, err = _bisect(env, wheels, _check(env, script, tmp_path), "--repeat", "4")
    assert code == 0, err
    assert [c["path"] for c in doc["culprits"]] == ["calc/m09.py"]
    assert doc["flakiness"] is not None and 0 < doc["flakiness"] < 1
    assert 0 < doc["confidence"] < 1
    assert any(t["runs"] > 1 and t["outcome"] == "bad" for t in doc["trials"])  # passed before it failed
    assert tree(env.site) == before


@pytest.mark.slow  # a bisect: a test process per trial
def test_a_hanging_test_is_bad_after_the_timeout(calc: tuple[Env, Path], tmp_path: Path) -> None:
    env, wheels = calc
    _touch_all(env)
    _edit(env, 4, "VALUE = 4\n", "VALUE = 4\nWAIT_FOR_PEER = True\n")
    before = tree(env.site)
    script = "import time, calc.m04 as m\nif getattr(m, 'WAIT_FOR_PEER', False):\n    time.sleep(600)\n"
    started = time.monotonic()
    code, doc, err = _bisect(env, wheels, _check(env, script, tmp_path), "--timeout", "1")
    assert code == 0, err
    assert [c["path"] for c in doc["culprits"]] == ["calc/m04.py"]
    assert any("timed out" in t["note"] for t in doc["trials"])
    assert time.monotonic() - started < 60
    assert tree(env.site) == before


@pytest.mark.slow  # a bisect: a test process per trial
def test_a_test_that_cannot_tell_some_states_is_skipped_there(calc: tuple[Env, Path], tmp_path: Path) -> None:
    env, wheels = calc
    _touch_all(env)
    _edit(env, 10, "VALUE = 10\n", "VALUE = 100\n")
    before = tree(env.site)
    # The harness itself breaks when module 5 is edited but module 6 is not: it cannot tell then.
    script = (
        "import calc.m05 as a, calc.m06 as b, inspect\n"
        "edited = lambda m: 'checked by hand' in open(m.__file__).read()\n"
        "if edited(a) and not edited(b):\n    sys.exit(125)\n" + SUM + "sys.exit(0 if total == 136 else 1)\n"
    )
    code, doc, err = _bisect(env, wheels, _check(env, script, tmp_path))
    assert code == 0, err
    assert [(c["path"], c.get("lines")) for c in doc["culprits"]] == [("calc/m10.py", [52, 52])]
    assert tree(env.site) == before


def test_a_test_that_passes_with_every_change_says_so(calc: tuple[Env, Path], tmp_path: Path) -> None:
    env, wheels = calc
    _touch_all(env)
    before = tree(env.site)
    code, doc, err = _bisect(env, wheels, _check(env, "sys.exit(0)\n", tmp_path))
    assert code == 1 and doc["culprits"] == [] and doc["runs"] == 1, err
    assert tree(env.site) == before


def test_a_test_failing_without_any_change_is_one_line_exit_2(calc: tuple[Env, Path]) -> None:
    env, wheels = calc
    _touch_all(env)
    before = tree(env.site)
    code, out, err = cli(
        "bisect", "--site-packages", str(env.site), "--wheelhouse", str(wheels), "--offline",
        "--test", "exit 3",
    )  # fmt: skip
    assert code == 2 and out == "", err
    (line,) = [x for x in err.splitlines() if x.startswith("patchguard: error")]
    assert "fails without any of the changes" in line
    assert tree(env.site) == before


def test_no_changes_is_one_line_exit_2(calc: tuple[Env, Path]) -> None:
    env, wheels = calc
    site = ["--site-packages", str(env.site), "--wheelhouse", str(wheels)]
    code, _out, err = cli("bisect", *site, "--test", "true")
    assert code == 2 and "no changes to bisect" in err


@pytest.mark.slow  # a bisect: a test process per trial
def test_by_hunk_with_a_deleted_and_a_created_file(calc: tuple[Env, Path], tmp_path: Path) -> None:
    env, wheels = calc
    _touch_all(env)
    (env.site / "calc" / "m16.py").unlink()
    (env.site / "calc" / "extra.py").write_text("TUNED = True\n")
    _edit(env, 2, "VALUE = 2\n", "VALUE = -2\n")
    before = tree(env.site)
    script = "import importlib\nv = importlib.import_module('calc.m02').VALUE\nsys.exit(0 if v == 2 else 1)\n"
    code, doc, err = cli(
        "bisect", "--site-packages", str(env.site), "--wheelhouse", str(wheels), "--offline",
        "--by", "hunk", "--test", _check(env, script, tmp_path),
    )  # fmt: skip
    assert code == 0, err
    # 14 files of one hunk, m02's two, the deleted m16 and the created extra.py whole
    assert "1 culprit among 18 changes" in doc
    assert "calc/m02.py hunk 2" in doc and "-VALUE = 2" in doc and "+VALUE = -2" in doc
    assert tree(env.site) == before


@pytest.mark.slow  # a bisect: a test process per trial
def test_applied_sets_are_bisected_by_set(env: Env, patches: Path, tmp_path: Path) -> None:
    site = ["--site-packages", str(env.site), "--patches", str(patches)]
    for name in ("sm120-support", "glm5-debug"):
        assert cli("apply", "--set", name, *site)[0] == 0
    before = tree(env.site)
    mla = env.site / "minillm" / "models" / "mla.py"
    code, doc, err = _bisect_sets(site, f"! grep -q 'torch.save' {mla}")
    assert code == 0, err
    assert [(c["kind"], c["path"]) for c in doc["culprits"]] == [("set", "glm5-debug")]
    assert tree(env.site) == before


def _bisect_sets(site: list[str], test: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = cli(
        "bisect", *site, "--sets", "sm120-support,glm5-debug", "--test", test, "--format", "json"
    )
    return code, json.loads(out) if out.strip() else {}, err


# -- the environment back, whatever happens ----------------------------------------------------------------


def _slow_bisect(env: Env, wheels: Path, tmp_path: Path, delay: str = "0.01") -> subprocess.Popen[bytes]:
    script = "import time\ntime.sleep(0.2)\n" + SUM + "sys.exit(0 if total == 136 else 1)\n"
    return subprocess.Popen(
        [
            *patchguard_exe(), "bisect", "--site-packages", str(env.site), "--wheelhouse", str(wheels),
            "--offline", "--test", _check(env, script, tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PATCHGUARD_TEST_WRITE_DELAY": delay},
    )  # fmt: skip


def _wait_for_session(env: Env) -> None:
    """Until the bisect started in another process holds the environment (its session file is there)."""
    deadline = time.monotonic() + 20
    while not (env.site / ".patchguard" / "session.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _findings(report: str) -> list[tuple[str, str, int | None]]:
    return [(f["path"], f["rule"], f.get("line")) for f in json.loads(report)["findings"]]


def _broken_calc(env: Env) -> None:
    _touch_all(env)
    _edit(env, 13, "VALUE = 13\n", "VALUE = 31\n")


@pytest.mark.slow
def test_kill_9_at_random_moments_and_the_next_command_puts_the_start_back(
    calc: tuple[Env, Path], tmp_path: Path
) -> None:
    env, wheels = calc
    _broken_calc(env)
    before = tree(env.site)
    scan = ["scan", "--site-packages", str(env.site), "--wheelhouse", str(wheels), "--format", "json"]
    scan_before = _findings(cli(*scan)[1])
    rng = random.Random(28)
    killed_inside = 0
    for _ in range(6):
        proc = _slow_bisect(env, wheels, tmp_path)
        time.sleep(rng.uniform(0.3, 2.5))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        killed_inside += (env.site / ".patchguard" / "session.json").exists()
        code, _out, err = cli("status", "--site-packages", str(env.site), "--patches", str(tmp_path))
        assert code in (0, 1), err
        assert tree(env.site) == before
        assert _findings(cli(*scan)[1]) == scan_before
    assert killed_inside >= 3  # most kills landed inside the session


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_it_puts_every_file_back_first(calc: tuple[Env, Path], tmp_path: Path, sig: int) -> None:
    env, wheels = calc
    _broken_calc(env)
    before = tree(env.site)
    proc = _slow_bisect(env, wheels, tmp_path, delay="0")
    time.sleep(1.5)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert tree(env.site) == before


class _Interrupted(BaseException):
    pass


@pytest.mark.parametrize("at", range(1, 9))
def test_a_trial_cut_short_inside_its_commit_still_ends_at_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: int
) -> None:
    """Ctrl-C (or SIGTERM, which a bisect turns into one) at any write point of a trial's commit: the session
    rolls the half-made trial back and then puts the start bytes back — it does not plan against files the
    roll-back is about to change (what CI once caught: "differs from what was planned against")."""
    from patchguard import txn

    root = tmp_path / "site"
    (root / "pkg").mkdir(parents=True)
    paths = [str(root / "pkg" / f"m{i}.py") for i in range(3)]
    for i, p in enumerate(paths):
        Path(p).write_text(f"VALUE = {i}\n")
    before = tree(root)
    points = {"n": 0}

    def cut() -> None:
        points["n"] += 1
        if points["n"] == at:
            raise _Interrupted

    with pytest.raises(_Interrupted), txn.session(str(root), paths, label="bisect"):
        changes = [txn.Change(p, b"VALUE = 99\n", sha256_file(p)) for p in paths]
        patch_txn(monkeypatch, "write_point", cut)
        try:
            txn.commit(txn.Plan(str(root), tuple(changes), "bisect trial"), keep_backup=False)
        finally:
            patch_txn(monkeypatch, "write_point", lambda: None)
        raise _Interrupted  # the commit got through: the interrupt comes after it
    assert tree(root) == before
    assert not (root / ".patchguard" / "session.json").exists()
    assert txn.pending(str(root)) is None


@pytest.mark.slow
def test_a_second_writer_is_refused_while_a_bisect_holds_the_environment(
    calc: tuple[Env, Path], tmp_path: Path
) -> None:
    env, wheels = calc
    _broken_calc(env)
    before = tree(env.site)
    proc = _slow_bisect(env, wheels, tmp_path, delay="0")
    try:
        _wait_for_session(env)
        site = ["--site-packages", str(env.site), "--wheelhouse", str(wheels)]
        code, _out, err = cli("restore", "calc", *site)
        assert code == 2 and "holds this environment in trial states" in err, err
        code, _out, err = cli("bisect", "--site-packages", str(env.site), "--test", "true")
        assert code == 2 and "holds this environment in trial states" in err, err
    finally:
        proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert tree(env.site) == before


# -- the search on its own ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [8, 32, 128])
@pytest.mark.parametrize("culprits", [(5,), (3, 7), (2, 6, 7)])
def test_the_search_finds_interactions_in_about_k_log2_n_trials(n: int, culprits: tuple[int, ...]) -> None:
    rng = random.Random(n * 100 + len(culprits))
    bad = frozenset(rng.sample(range(1, n + 1), len(culprits)))
    seen: dict[frozenset[int], Outcome] = {frozenset(range(1, n + 1)): Outcome.BAD, frozenset(): Outcome.GOOD}
    calls = 0

    def test(state: frozenset[int]) -> Outcome:
        nonlocal calls
        calls += 1
        seen[state] = Outcome.BAD if bad <= state else Outcome.GOOD
        return seen[state]

    found = search(list(range(1, n + 1)), test, seen.get)
    assert set(found.culprits) == bad
    k = len(bad)
    assert calls <= k * (math.ceil(math.log2(n)) + 1)


def test_a_skipped_interval_is_kept_whole() -> None:
    seen = {frozenset(range(1, 9)): Outcome.BAD, frozenset(): Outcome.GOOD}

    def test(state: frozenset[int]) -> Outcome:
        return Outcome.SKIP if 3 <= len(state) <= 6 else (Outcome.BAD if 5 in state else Outcome.GOOD)

    found = search(list(range(1, 9)), test, seen.get)
    assert 5 in found.culprits and found.unsplit


@pytest.mark.slow  # a bisect: a test process per trial
def test_the_library_returns_a_typed_result(calc: tuple[Env, Path], tmp_path: Path) -> None:
    env, wheels = calc
    _touch_all(env)
    _edit(env, 1, "VALUE = 1\n", "VALUE = 0\n")
    result = patchguard.bisect(
        test=_check(env, SUM + "sys.exit(0 if total == 136 else 1)\n", tmp_path),
        site_packages=[str(env.site)],
        wheelhouse=[str(wheels)],
        offline=True,
    )
    assert isinstance(result, patchguard.BisectResult) and result.found and result.exit_code == 0
    assert [u.label for u in result.culprits] == ["calc/m01.py hunk 2 (line 52)"]
    assert result.runs == sum(t.runs for t in result.trials)


# -- a session file nobody should trust ----------------------------------------------------------------------


def _dead_session(env: Env, files: list[dict[str, object]]) -> Path:
    state = env.site / ".patchguard"
    (state / "session").mkdir(parents=True)
    doc = {"schema": "patchguard.session/1", "label": "bisect", "pid": 1, "also": [], "files": files}
    (state / "session.json").write_text(json.dumps(doc))
    return state


def test_a_killed_sessions_start_state_is_put_back_by_the_next_command(calc: tuple[Env, Path]) -> None:
    env, _wheels = calc
    target = env.site / "calc" / "m01.py"
    start = target.read_bytes()
    state = _dead_session(
        env,
        [
            {"path": str(target), "start": hashlib.sha256(start).hexdigest(), "saved": "00000", "mode": 420},
            {"path": str(env.site / "calc" / "made.py"), "start": None, "saved": None, "mode": 0o644},
        ],
    )
    (state / "session" / "00000").write_bytes(start)
    target.write_text("VALUE = 'a trial state'\n")
    (env.site / "calc" / "made.py").write_text("X = 1\n")
    code, out, err = cli("scan", "--site-packages", str(env.site))
    assert target.read_bytes() == start and not (env.site / "calc" / "made.py").exists(), err
    assert not (state / "session.json").exists() and not (state / "session").exists()
    assert code == 0, out


@pytest.mark.parametrize(
    "hostile",
    ["outside", "kept-bytes-changed", "saved-name-escapes", "another-format"],
)
def test_a_session_file_that_cannot_be_trusted_changes_nothing(
    calc: tuple[Env, Path], tmp_path: Path, hostile: str
) -> None:
    env, _wheels = calc
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    target = env.site / "calc" / "m02.py"
    entry: dict[str, object] = {"path": str(target), "start": "0" * 64, "saved": "00000", "mode": 0o644}
    if hostile == "outside":
        entry = {"path": str(victim), "start": None, "saved": None, "mode": 0o644}
    elif hostile == "saved-name-escapes":
        entry["saved"] = "../../../../victim.txt"
    state = _dead_session(env, [entry])
    (state / "session" / "00000").write_text("something else\n")
    if hostile == "another-format":
        (state / "session.json").write_text(json.dumps({"schema": "patchguard.session/99"}))
    before = tree(env.site)
    code, _out, err = cli("status", "--site-packages", str(env.site), "--patches", str(tmp_path))
    assert code == 2, err
    (line,) = [x for x in err.splitlines() if x.startswith("patchguard: error")]
    assert "session" in line and "not put back" in line
    assert tree(env.site) == before and victim.read_text() == "keep me\n"


@pytest.mark.slow  # a bisect: a test process per trial
def test_keep_going_finds_every_independent_culprit(calc: tuple[Env, Path], tmp_path: Path) -> None:
    env, wheels = calc
    _touch_all(env)
    _edit(env, 6, "VALUE = 6\n", "VALUE = 60\n")
    _edit(env, 14, "VALUE = 14\n", "VALUE = 140\n")
    before = tree(env.site)
    test = _check(env, SUM + "sys.exit(0 if total == 136 else 1)\n", tmp_path)
    code, doc, err = _bisect(env, wheels, test, "--by", "file")
    assert code == 0, err
    assert len(doc["culprits"]) == 1  # each breaks it alone: the first found is the answer
    code, doc, err = _bisect(env, wheels, test, "--by", "file", "--keep-going")
    assert code == 0, err
    assert {c["path"] for c in doc["culprits"]} == {"calc/m06.py", "calc/m14.py"}
    assert tree(env.site) == before


# -- trust round three: nothing of the operator's lost, nothing judged on a trial -----------------------


def test_a_test_that_appends_in_place_does_not_change_the_start(
    calc: tuple[Env, Path], tmp_path: Path
) -> None:
    """The start is kept as copies: a test appending to a changed file in place (same inode) changes the
    trial, not what the way back restores."""
    env, wheels = calc
    _broken_calc(env)
    before = tree(env.site)
    m13 = env.site / "calc" / "m13.py"
    script = (
        f"with open({str(m13)!r}, 'a') as f:\n    f.write('# the test was here\\n')\n"
        + SUM
        + "sys.exit(0 if total == 136 else 1)\n"
    )
    code, doc, err = _bisect(env, wheels, _check(env, "import sys\n" + script, tmp_path))
    assert code in (0, 1), err
    assert doc["changed_by_test"]["held"] == [str(m13)]
    assert tree(env.site) == before


def test_during_a_bisect_writers_refuse_and_readers_say_it_is_a_trial(
    calc: tuple[Env, Path], tmp_path: Path
) -> None:
    env, wheels = calc
    _broken_calc(env)
    before = tree(env.site)
    proc = _slow_bisect(env, wheels, tmp_path, delay="0")
    try:
        _wait_for_session(env)
        site = ["--site-packages", str(env.site)]
        for args in (
            ["restore", "calc", "--path", "calc/m13.py", "--wheelhouse", str(wheels), "--offline"],
            ["revert", "--set", "x", "--patches", str(tmp_path)],
            [
                "capture",
                "calc",
                "--set",
                "x",
                "--patches",
                str(tmp_path / "sets"),
                "--wheelhouse",
                str(wheels),
            ],
        ):
            code, _out, err = cli(*args, *site)
            assert code == 2 and "holds this environment in trial states" in err, (args, err)
        code, out, err = cli("check", *site, "--format", "status", "--wheelhouse", str(wheels), "--offline")
        assert code == 2 and out.startswith("UNKNOWN") and "trial states" in out, (out, err)
        code, _out, err = cli("scan", *site, "--wheelhouse", str(wheels), "--offline")
        assert "trial states" in err, err
    finally:
        proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert tree(env.site) == before


def test_a_hot_fix_after_a_kill_is_kept_aside_and_modes_are_never_granted(calc: tuple[Env, Path]) -> None:
    """A killed session put back by the next command keeps what it replaces (an operator's hot-fix made
    since) in the backups; and a mode the session file gives back never adds setuid, setgid or world-write."""
    env, _wheels = calc
    target = env.site / "calc" / "m01.py"
    start = target.read_bytes()
    state = _dead_session(
        env,
        [{"path": str(target), "start": hashlib.sha256(start).hexdigest(), "saved": "00000", "mode": 0o6777}],
    )
    (state / "session" / "00000").write_bytes(start)
    target.write_text("VALUE = 'the operator fixed it by hand'\n")
    _code, _out, err = cli("status", "--site-packages", str(env.site), "--patches", str(env.prefix))
    assert target.read_bytes() == start, err
    mode = target.stat().st_mode & 0o7777
    assert mode & 0o6002 == 0, oct(mode)
    kept = [p for p in (state / "backups").rglob("*") if p.is_file()]
    assert any(p.read_text() == "VALUE = 'the operator fixed it by hand'\n" for p in kept), kept


def test_a_file_the_test_changed_outside_the_changes_is_named(calc: tuple[Env, Path], tmp_path: Path) -> None:
    env, wheels = calc
    _broken_calc(env)
    init = env.site / "calc" / "__init__.py"
    script = f"import sys\nopen({str(init)!r}, 'a').write('# touched by the test\\n')\n" + SUM
    script += "sys.exit(0 if total == 136 else 1)\n"
    code, doc, err = _bisect(env, wheels, _check(env, script, tmp_path))
    assert code in (0, 1), err
    assert doc["changed_by_test"]["outside"] == [str(init)]
    code, out, err = cli(
        "bisect", "--site-packages", str(env.site), "--wheelhouse", str(wheels), "--offline",
        "--test", _check(env, script, tmp_path),
    )  # fmt: skip
    assert "the test changed 1 of the files bisected" in out, out + err  # now a change of its own


def test_a_test_that_rewrites_a_file_with_sed_keeps_its_start_bytecode(
    calc: tuple[Env, Path], tmp_path: Path
) -> None:
    """``sed -i`` replaces a changed file under the trial: the way back restores it — and the bytecode
    compiled from its start, which writing the .py would otherwise drop."""
    import py_compile

    env, wheels = calc
    _broken_calc(env)
    for n in range(1, N + 1):
        py_compile.compile(str(env.site / "calc" / f"m{n:02d}.py"), doraise=True)
    before = tree(env.site)
    assert any("__pycache__" in k for k in before)
    m05 = env.site / "calc" / "m05.py"
    script = (
        f"import subprocess, sys\nsubprocess.run(['sed', '-i', 's/helper_0/helper_zero/', {str(m05)!r}])\n"
    )
    script += SUM + "sys.exit(0 if total == 136 else 1)\n"
    code, _doc, err = _bisect(env, wheels, _check(env, script, tmp_path))
    assert code in (0, 1), err
    assert tree(env.site) == before
