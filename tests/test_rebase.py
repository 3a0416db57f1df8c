"""``patchguard rebase``: a set written for minillm 0.4.0 carried to a real 0.5.0 wheel, by three-way merge.

Every test builds the releases as wheels, installs the new one, and runs the command the way a user does.
What upstream changed in 0.5.0 differs per test: the lines around the set's hunks (carried, where
``git apply`` fails), the set's own line (a conflict), the file's place (moved) or the file itself (lost).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

import patchguard
from patchguard.patchsets.model import load_set

from .helpers import Env, build_wheel, cli, minillm_files, tree
from .test_schemas import _valid

CUDA = "minillm/platforms/cuda.py"
SET = "sm120-support"


def around_the_hunks(text: str) -> str:
    """Upstream edits near both hunks of sm120-support but not on their lines: every hunk's context
    changes (``git apply`` and ``apply --force-version`` fail), no line the set changes does."""
    text = text.replace(
        '"""CUDA platform detection and capability checks."""', '"""CUDA platforms.\n\nDetection."""'
    )
    text = text.replace("import torch\n", "import torch  # the CUDA build\n", 1)
    return text.replace(
        "        if arch in SUPPORTED_ARCHS:\n", "        if arch in SUPPORTED_ARCHS:  # known\n"
    )


def on_the_hunk(text: str) -> str:
    """Upstream changes the very line the set's first hunk changes (a real conflict), nothing else."""
    return text.replace(
        'SUPPORTED_ARCHS = ["sm80", "sm86", "sm89", "sm90"]', 'SUPPORTED_ARCHS = ["sm80", "sm90", "sm100"]'
    )


def release(
    out: Path, version: str, edit: Callable[[str], str] | None = None, move: str | None = None
) -> Path:
    """A minillm wheel: the fixture's files, ``cuda.py`` edited and/or moved (``move``: its new path,
    ``""``: removed)."""
    files = minillm_files(version)
    data = files.pop(CUDA).decode()
    if edit is not None:
        data = edit(data)
    if move != "":
        files[move or CUDA] = data.encode()
    return build_wheel(out, "minillm", version, files)


def installed(tmp_path: Path, wheel: Path, name: str = "venv5") -> Env:
    e = Env(tmp_path / name)
    e.install(wheel)
    return e


def rebase(env: Env, patches: Path, wheelhouse: Path, *more: str) -> tuple[int, str, str]:
    return cli(
        "rebase", "--set", SET, "--patches", str(patches), "--site-packages", str(env.site),
        "--wheelhouse", str(wheelhouse), "--offline", *more,
    )  # fmt: skip


def git_merge_file(ours: bytes, base: bytes, theirs: bytes, tmp: Path) -> bytes:
    """The reference: plain ``git merge-file`` on the same three inputs."""
    tmp.mkdir(exist_ok=True)
    for name, data in (("o", ours), ("b", base), ("t", theirs)):
        (tmp / name).write_bytes(data)
    proc = subprocess.run(
        ["git", "merge-file", "-p", str(tmp / "o"), str(tmp / "b"), str(tmp / "t")],
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_carries_a_set_whose_context_changed_upstream(
    tmp_path: Path, minillm_wheel: Path, patches: Path
) -> None:
    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", around_the_hunks))
    old_set = {p.name: p.read_bytes() for p in (patches / SET).iterdir()}
    site_before = tree(new.site)
    # What exists today fails: every hunk's context changed.
    code, _out, err = cli("apply", "--set", SET, "--patches", str(patches), "--site-packages", str(new.site),
                          "--force-version")  # fmt: skip
    assert code == 2 and "2 hunks do not apply" in err
    code, out, err = rebase(new, patches, minillm_wheel.parent)
    assert code == 0, out + err
    assert "carried   minillm/platforms/cuda.py (2 hunks)" in out
    assert "2 of 2 hunks carried" in out
    assert tree(new.site) == site_before  # rebase never writes into the environment
    ps = load_set(str(patches / SET))
    assert ps.targets[0].version == "==0.5.0"
    assert ps.description.startswith("Run on sm120")
    assert ps.history[-1].release == "0.4.0" and ps.history[-1].version == ">=0.4,<0.5"
    kept = patches / SET / "history" / "0.4.0"
    assert {p.name: p.read_bytes() for p in kept.iterdir()} == old_set
    assert not (patches / f"{SET}.rebase").exists()
    # The carried file is exactly what git merge-file makes of the same three inputs.
    base = minillm_files()[CUDA]
    theirs = base.replace(b'"sm90"]', b'"sm90", "sm100", "sm120"]  # sm120: RTX PRO 6000 Blackwell')
    theirs = theirs.replace(
        b"        arch = capability.to_arch()\n",
        b"        if capability.major == 12:\n"
        b"            # sm120 has no FP8 MLA kernels yet: the fallback path is correct, only slower.\n"
        b'            return os.environ.get("MINILLM_ALLOW_SM120", "1") == "1"\n'
        b"        arch = capability.to_arch()\n",
    )
    ours = (new.site / CUDA).read_bytes()
    expected = git_merge_file(ours, base, theirs, tmp_path / "merge")
    assert expected != ours
    code, out, err = cli("apply", "--set", SET, "--patches", str(patches), "--site-packages", str(new.site))
    assert code == 0, out + err
    assert (new.site / CUDA).read_bytes() == expected
    code, out, _err = cli("sets", "--patches", str(patches), "--site-packages", str(new.site))
    assert code == 0 and "applied" in out


def test_a_conflict_goes_to_the_review_directory_and_is_taken_up_once_resolved(
    tmp_path: Path, minillm_wheel: Path, patches: Path
) -> None:
    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", on_the_hunk))
    set_before, site_before = tree(patches / SET), tree(new.site)
    code, out, err = rebase(new, patches, minillm_wheel.parent, "--format", "json")
    assert code == 1, err
    doc = _valid(out, "rebase-1")
    assert doc["hunks"] == {"total": 2, "carried": 1, "conflicting": 1, "lost": 0}
    assert doc["conflicts"][0]["path"] == CUDA and doc["conflicts"][0]["regions"] == 1
    assert tree(patches / SET) == set_before and tree(new.site) == site_before
    review = patches / f"{SET}.rebase"
    conflicted = (review / "files" / CUDA).read_text()
    assert "<<<<<<< minillm 0.5.0" in conflicted and ">>>>>>> set sm120-support" in conflicted
    assert "||||||| minillm 0.4.0" in conflicted
    assert "MINILLM_ALLOW_SM120" in conflicted  # the clean hunk is merged in the same file
    assert "conflict" in (review / "SUMMARY.txt").read_text()
    # Running it again without resolving changes nothing.
    assert rebase(new, patches, minillm_wheel.parent)[0] == 1
    assert tree(patches / SET) == set_before
    # Resolve: keep upstream's list and add sm120.
    start, end = conflicted.index("<<<<<<<"), conflicted.index(">>>>>>> set sm120-support\n")
    resolved = conflicted[:start] + 'SUPPORTED_ARCHS = ["sm80", "sm90", "sm100", "sm120"]\n'
    resolved += conflicted[end + len(">>>>>>> set sm120-support\n") :]
    (review / "files" / CUDA).write_text(resolved)
    code, out, err = rebase(new, patches, minillm_wheel.parent)
    assert code == 0, out + err
    assert "resolved  minillm/platforms/cuda.py" in out and not review.exists()
    code, out, err = cli("apply", "--set", SET, "--patches", str(patches), "--site-packages", str(new.site))
    assert code == 0, out + err
    assert (new.site / CUDA).read_text() == resolved


def test_a_moved_file_is_followed(tmp_path: Path, minillm_wheel: Path, patches: Path) -> None:
    moved = "minillm/platforms/nvidia.py"
    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", around_the_hunks, move=moved))
    code, out, err = rebase(new, patches, minillm_wheel.parent, "--format", "json")
    assert code == 0, out + err
    doc = _valid(out, "rebase-1")
    assert doc["written"] and doc["history_dir"].endswith("history/0.4.0")
    assert doc["moved"][0]["from"] == CUDA and doc["moved"][0]["to"] == moved
    assert doc["moved"][0]["similarity"] > 0.9
    assert load_set(str(patches / SET)).paths == (moved,)
    code, _out, err = cli("apply", "--set", SET, "--patches", str(patches), "--site-packages", str(new.site))
    assert code == 0, err
    assert "MINILLM_ALLOW_SM120" in (new.site / moved).read_text()


def test_a_lost_file_is_reported_and_can_be_dropped(
    tmp_path: Path, minillm_wheel: Path, patches: Path
) -> None:
    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", move=""))
    set_before = tree(patches / SET)
    code, out, err = rebase(new, patches, minillm_wheel.parent)
    assert code == 1, err
    assert "lost      minillm/platforms/cuda.py" in out and "0 of 2 hunks carried" in out
    doc = _valid(rebase(new, patches, minillm_wheel.parent, "--dry-run", "--format", "json")[1], "rebase-1")
    assert doc["hunks"] == {"total": 2, "carried": 0, "conflicting": 0, "lost": 2} and doc["lost"] == [CUDA]
    lost = patches / f"{SET}.rebase" / "lost" / (CUDA + ".lost.patch")
    assert "MINILLM_ALLOW_SM120" in lost.read_text()
    assert tree(patches / SET) == set_before
    lost.unlink()  # leave the change behind
    code, out, err = rebase(new, patches, minillm_wheel.parent)
    assert code == 0, out + err
    assert "dropped" in out and "nothing to carry" in out
    assert tree(patches / SET) == set_before  # nothing left to carry: the set is not rewritten


def test_a_release_that_already_has_the_change(tmp_path: Path, minillm_wheel: Path, patches: Path) -> None:
    def with_the_set(text: str) -> str:
        from patchguard.patchsets.planner import plan_set

        ps = load_set(str(patches / SET))
        return (plan_set(ps, lambda _p: text.encode())[0].after or b"").decode()

    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", with_the_set))
    before = tree(patches / SET)
    code, out, err = rebase(new, patches, minillm_wheel.parent)
    assert code == 0, err
    assert "upstream  minillm/platforms/cuda.py (0.5.0 already has this change)" in out
    assert tree(patches / SET) == before


def test_dry_run_writes_nothing(tmp_path: Path, minillm_wheel: Path, patches: Path) -> None:
    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", on_the_hunk))
    before = tree(patches), tree(new.site)
    code, out, _err = rebase(new, patches, minillm_wheel.parent, "--dry-run")
    assert code == 1 and "would write" in out
    assert (tree(patches), tree(new.site)) == before


def upgrade(env: Env, wheel: Path) -> None:
    """``pip install -U`` done by hand: the old release's files removed (RECORD), the new one installed."""
    for info in env.site.glob("minillm-*.dist-info"):
        with open(info / "RECORD", newline="") as f:
            for row in csv.reader(f):
                p = env.site / row[0]
                if p.is_file():
                    p.unlink()
        shutil.rmtree(info)


def test_the_base_is_the_build_the_set_was_applied_on(
    tmp_path: Path, env: Env, minillm_wheel: Path, patches: Path
) -> None:
    """Two builds of 0.4.0 in the wheelhouse (a local one with a different cuda.py): state.json's
    pre-images pick the build the set was applied on, whatever order the wheels are found in."""
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(minillm_wheel, house)
    other = minillm_files()
    other[CUDA] = other[CUDA].replace(b"MIN_CAPABILITY = (8, 0)", b"MIN_CAPABILITY = (7, 0)")
    build_wheel(house, "minillm", "0.4.0", other, tag="py2.py3-none-any")
    code, out, err = cli("apply", "--set", SET, "--patches", str(patches), "--site-packages", str(env.site))
    assert code == 0, out + err
    upgrade(env, minillm_wheel)
    env.install(release(tmp_path / "w5", "0.5.0", around_the_hunks))
    site = ("--patches", str(patches), "--site-packages", str(env.site))
    code, out, _err = cli("status", *site)  # the record is about 0.4.0's files, and says so
    assert "not in place now: n/a" in out and f"patchguard rebase --set {SET}" in out
    code, out, err = rebase(env, patches, house)
    assert code == 0, out + err
    assert "0.4.0 -> 0.5.0" in out
    code, out, _err = cli("sets", *site)
    assert f"{SET}  minillm ==0.5.0     not applied" in out, out
    assert "applied on minillm 0.4.0; minillm 0.5.0 replaced its files since" in out
    assert "minillm-0.4.0-py3-none-any.whl" in err  # the build the set was applied on
    code, out, err = cli("apply", "--set", SET, "--patches", str(patches), "--site-packages", str(env.site))
    assert code == 0, out + err


def test_version_mismatch_messages_name_rebase(tmp_path: Path, minillm_wheel: Path, patches: Path) -> None:
    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", around_the_hunks))
    site = ("--patches", str(patches), "--site-packages", str(new.site))
    code, _out, err = cli("apply", "--set", SET, *site)
    assert code == 2 and f"patchguard rebase --set {SET}" in err
    code, out, _err = cli("sets", *site)
    assert f"patchguard rebase --set {SET}" in out
    policy = tmp_path / "policy.toml"
    policy.write_text(f'required_sets = ["{SET}"]\n')
    code, out, err = cli("check", "--policy", str(policy), *site)
    assert code == 1 and f"patchguard rebase --set {SET}" in out + err


def test_what_cannot_be_done_is_one_line_and_changes_nothing(
    tmp_path: Path, minillm_wheel: Path, patches: Path
) -> None:
    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", around_the_hunks))
    empty = tmp_path / "empty"
    empty.mkdir()
    house = tmp_path / "house"
    shutil.copytree(minillm_wheel.parent, house)
    release(house, "0.3.0", on_the_hunk)
    before = tree(patches), tree(new.site)
    for args, where, words in (
        ((), empty, "no wheel of such a release is at hand"),  # offline, nothing local
        (("--from-version", "0.4.0"), empty, "no usable wheel of minillm 0.4.0; looked in: wheelhouse"),
        (("--to-version", "zero"), house, "is not a version"),
        (("--from-version", "0.3.0"), house, "does not apply to its pristine files"),
    ):
        code, out, err = rebase(new, patches, where, *args)
        assert code == 2, (args, out, err)
        assert words in err and "Traceback" not in err
        assert (tree(patches), tree(new.site)) == before


def test_library_api(tmp_path: Path, minillm_wheel: Path, patches: Path) -> None:
    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", on_the_hunk))
    result = patchguard.rebase_set(
        SET, patches=str(patches), site_packages=[str(new.site)], wheelhouse=[str(minillm_wheel.parent)],
        offline=True, dry_run=True,
    )  # fmt: skip
    assert isinstance(result, patchguard.RebaseResult)
    assert not result.complete and result.hunks == (2, 1, 1)
    assert [f.path for f in result.conflicts] == [CUDA]
    assert result.conflicts[0].outcome is patchguard.FileOutcome.CONFLICT
    assert result.review_dir is None and not os.path.exists(patches / f"{SET}.rebase")


def _set_files(patches: Path) -> tuple[dict[str, bytes], str]:
    """A set's diffs and history files, and its target version (the toml's ``rebased`` time aside)."""
    root = patches / SET
    files = {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.name != "patchset.toml"
    }
    return files, load_set(str(root)).targets[0].version


@pytest.mark.slow
def test_killed_at_any_moment_the_set_is_old_or_new(
    tmp_path: Path, minillm_wheel: Path, patches: Path
) -> None:
    import random
    import signal
    import time

    from .helpers import patchguard_exe

    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", around_the_hunks))
    pristine = tmp_path / "pristine-patches"
    shutil.copytree(patches, pristine)
    before = _set_files(patches)
    args = [*patchguard_exe(), "rebase", "--set", SET, "--patches", str(patches), "--site-packages",
            str(new.site), "--wheelhouse", str(minillm_wheel.parent), "--offline"]  # fmt: skip
    slow = {**os.environ, "PATCHGUARD_TEST_WRITE_DELAY": "0.05"}
    t = time.perf_counter()
    assert subprocess.run(args, env=slow, capture_output=True, check=False).returncode == 0
    took = time.perf_counter() - t
    after = _set_files(patches)
    assert after != before
    rng = random.Random(13)
    outcomes: set[bool] = set()
    tries = 0
    while tries < 16 or (len(outcomes) < 2 and tries < 48):  # a loaded machine may need more tries
        tries += 1
        shutil.rmtree(patches)
        shutil.copytree(pristine, patches)
        proc = subprocess.Popen(args, env=slow, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.1) * took)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        now = _set_files(patches)
        assert now in (before, after)
        outcomes.add(now == after)
        code, out, err = cli("sets", "--patches", str(patches), "--site-packages", str(new.site))
        assert code in (0, 1), err  # a staging directory left behind is not a set
        code, out, err = rebase(new, patches, minillm_wheel.parent)
        assert code == 0, out + err
        assert _set_files(patches) == after
        assert not (patches / f"{SET}.rebase").exists()
    assert outcomes == {False, True}  # kills landed before and after the set was replaced


def test_a_hostile_review_directory_is_never_followed(
    tmp_path: Path, minillm_wheel: Path, patches: Path
) -> None:
    """A FIFO or a symlink where a resolved file should be is not read as a resolution (nor does it hang),
    and a review directory that is a symlink is replaced, not written through."""
    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", on_the_hunk))
    assert rebase(new, patches, minillm_wheel.parent)[0] == 1
    review = patches / f"{SET}.rebase"
    target = review / "files" / CUDA
    target.unlink()
    os.mkfifo(target)
    code, out, _err = rebase(new, patches, minillm_wheel.parent)
    assert code == 1 and "conflict  minillm/platforms/cuda.py" in out
    target.unlink()
    elsewhere = tmp_path / "resolved.py"
    elsewhere.write_text("print('not a resolution')\n")
    target.symlink_to(elsewhere)
    assert rebase(new, patches, minillm_wheel.parent)[0] == 1
    shutil.rmtree(review)
    outside = tmp_path / "outside"
    outside.mkdir()
    review.symlink_to(outside)
    code, _out, err = rebase(new, patches, minillm_wheel.parent)
    assert code == 2 and "is not a rebase review directory" in err
    assert list(outside.iterdir()) == [] and review.is_symlink()
    review.unlink()
    # Nor is a set named NAME.rebase ever taken for one, removed or replaced.
    shutil.copytree(patches / SET, review)
    (review / "patchset.toml").write_text(
        (review / "patchset.toml").read_text().replace(SET, f"{SET}.rebase")
    )
    before = tree(review)
    assert rebase(new, patches, minillm_wheel.parent)[0] == 2
    assert tree(review) == before


def test_changes_that_only_touch_are_merged_line_by_line_and_said(
    tmp_path: Path, minillm_wheel: Path, patches: Path
) -> None:
    """Upstream edits the line just above the set's inserted block: git merge-file calls it a conflict;
    rebase carries it, and says so."""

    def touching(text: str) -> str:
        return text.replace(
            "            return False\n        arch", "            return False  # too old\n        arch"
        )

    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", touching))
    ours = (new.site / CUDA).read_text()
    base = minillm_files()[CUDA]
    theirs = base.replace(b'"sm90"]', b'"sm90", "sm100", "sm120"]  # sm120: RTX PRO 6000 Blackwell')
    block = (
        "        if capability.major == 12:\n"
        "            # sm120 has no FP8 MLA kernels yet: the fallback path is correct, only slower.\n"
        '            return os.environ.get("MINILLM_ALLOW_SM120", "1") == "1"\n'
    )
    theirs = theirs.replace(
        b"        arch = capability.to_arch()\n", block.encode() + b"        arch = capability.to_arch()\n"
    )
    (tmp_path / "m").mkdir()
    for name, data in (("o", ours.encode()), ("b", base), ("t", theirs)):
        (tmp_path / "m" / name).write_bytes(data)
    plain = subprocess.run(
        ["git", "merge-file", "-p", "o", "b", "t"], cwd=tmp_path / "m", capture_output=True
    )
    assert plain.returncode == 1  # git: one conflict
    code, out, err = rebase(new, patches, minillm_wheel.parent, "--format", "json")
    assert code == 0, out + err
    doc = _valid(out, "rebase-1")
    assert doc["files"][0]["adjacent"] == 1 and doc["files"][0]["outcome"] == "carried"
    code, out, err = cli("apply", "--set", SET, "--patches", str(patches), "--site-packages", str(new.site))
    assert code == 0, out + err
    expected = ours.replace('"sm90"]', '"sm90", "sm100", "sm120"]  # sm120: RTX PRO 6000 Blackwell')
    expected = expected.replace("# too old\n", "# too old\n" + block)
    assert (new.site / CUDA).read_text() == expected


B = b"alpha = 1\nbeta = 2\ngamma = 3\ndelta = 4\n"


@pytest.mark.parametrize(
    ("ours", "theirs", "merged"),
    [
        # upstream edits beta, the set inserts a statement after it (it belongs to beta: still there)
        (
            B.replace(b"2", b"20"),
            B.replace(b"2\n", b"2\nx = 0\n"),
            b"alpha = 1\nbeta = 20\nx = 0\ngamma = 3\ndelta = 4\n",
        ),
        # upstream edits gamma, the set inserts a statement before it (it belongs to beta, unchanged)
        (
            B.replace(b"3", b"30"),
            B.replace(b"2\n", b"2\nx = 0\n"),
            b"alpha = 1\nbeta = 2\nx = 0\ngamma = 30\ndelta = 4\n",
        ),
        # a decorator before gamma, which upstream edited: it goes with gamma's new version
        (
            B.replace(b"3", b"30"),
            B.replace(b"gamma", b"@cache\ngamma"),
            b"alpha = 1\nbeta = 2\n@cache\ngamma = 30\ndelta = 4\n",
        ),
        (
            B.replace(b"2", b"20"),
            B.replace(b"4", b"40"),
            b"alpha = 1\nbeta = 20\ngamma = 3\ndelta = 40\n",
        ),  # apart
        (
            B.replace(b"2\n", b"2\ny = 1\n"),
            B.replace(b"2\n", b"2\nx = 0\n"),
            None,
        ),  # both insert at one place
        (B.replace(b"2", b"20"), B.replace(b"2", b"22"), None),  # both edit beta
        (B.replace(b"beta = 2\ngamma = 3\n", b"bc = 5\n"), B.replace(b"2\n", b"2\nx = 0\n"), None),  # inside
        (
            B.replace(b"gamma = 3\n", b""),
            B.replace(b"gamma", b"@cache\ngamma"),
            None,
        ),  # decorating deleted code
        (B.replace(b"beta = 2\n", b""), B.replace(b"2\n", b"2\nx = 0\n"), None),  # after deleted code
        # a header reformatted over several lines: the set's first statement still follows it
        (
            b"def f(\n    a,\n    b,\n):\n    return a\n",
            b"def f(a, b):\n    check(a)\n    return a\n",
            b"def f(\n    a,\n    b,\n):\n    check(a)\n    return a\n",
        ),
        # upstream puts another statement in beta's place: what follows beta no longer follows it
        (B.replace(b"beta = 2", b"omega = 9"), B.replace(b"2\n", b"2\nx = 0\n"), None),
        # upstream inserts next to the set's insertion point's neighbour
        (
            B.replace(b"2\n", b"2\nsys = 1\n").replace(b"3", b"30"),
            B.replace(b"gamma", b"@cache\ngamma"),
            None,
        ),
    ],
)
def test_touching_versus_overlapping(
    ours: bytes, theirs: bytes, merged: bytes | None, tmp_path: Path
) -> None:
    from patchguard.patchsets.rebase.merge import merge

    base = B if ours.startswith(b"alpha") else b"def f(a, b):\n    return a\n"
    got = merge(ours, base, theirs, ("new", "old", "set"))
    if merged is None:
        assert got.conflicts == 1 and got.adjacent == 0 and b"<<<<<<< new" in got.data
        return
    assert got.conflicts == 0 and got.data == merged
    (tmp_path / "m").mkdir()
    for name, data in (("o", ours), ("b", base), ("t", theirs)):
        (tmp_path / "m" / name).write_bytes(data)
    git = subprocess.run(["git", "merge-file", "-p", "o", "b", "t"], cwd=tmp_path / "m", capture_output=True)
    # Where git merges cleanly the result is git's; where it only saw touching changes, it is said.
    assert (got.adjacent, git.returncode == 0) in ((0, True), (1, False))
    if git.returncode == 0:
        assert git.stdout == got.data


def test_second_rebase_keeps_the_first_history_and_other_files(
    tmp_path: Path, env: Env, minillm_wheel: Path, patches: Path
) -> None:
    """0.4.0 (applied here) -> 0.5.0 -> 0.6.0: the state record of the 0.4.0 form is not this set any more;
    each history directory keeps its own release; a README in the set directory survives."""
    (patches / SET / "README.md").write_text("why we carry sm120\n")
    site = ("--patches", str(patches), "--site-packages", str(env.site))
    assert cli("apply", "--set", SET, *site)[0] == 0
    upgrade(env, minillm_wheel)
    house = tmp_path / "house"
    shutil.copytree(minillm_wheel.parent, house)
    w5 = release(house, "0.5.0", around_the_hunks)
    env.install(w5)
    assert rebase(env, patches, house)[0] == 0
    first = (patches / SET / "history" / "0.4.0" / "patchset.toml").read_text()
    upgrade(env, w5)
    env.install(release(house, "0.6.0", lambda t: around_the_hunks(t).replace("(8, 0)", "(8, 0)  # Ampere")))
    code, out, err = rebase(env, patches, house)
    assert code == 0, out + err
    assert "0.5.0 -> 0.6.0" in out
    ps = load_set(str(patches / SET))
    assert [h.release for h in ps.history] == ["0.4.0", "0.5.0"]
    assert [h.kept for h in ps.history] == ["history/0.4.0", "history/0.5.0"]
    assert (patches / SET / "history" / "0.4.0" / "patchset.toml").read_text() == first
    assert 'version = "==0.5.0"' in (patches / SET / "history" / "0.5.0" / "patchset.toml").read_text()
    assert (patches / SET / "README.md").read_text() == "why we carry sm120\n"
    assert cli("apply", "--set", SET, *site)[0] == 0


def test_a_range_that_admits_the_release_needs_no_rebase(
    tmp_path: Path, minillm_wheel: Path, patches: Path
) -> None:
    toml = patches / SET / "patchset.toml"
    toml.write_text(toml.read_text().replace(">=0.4,<0.5", ">=0.4"))
    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", around_the_hunks))
    before = tree(patches)
    code, out, _err = rebase(new, patches, minillm_wheel.parent)
    assert code == 0 and "nothing to rebase" in out
    assert tree(patches) == before


def _two_releases(
    tmp_path: Path, old: Mapping[str, bytes | str], new: Mapping[str, bytes | str]
) -> tuple[Env, Path]:
    house = tmp_path / "house"
    build_wheel(house, "pkg", "1.0", old)
    env = installed(tmp_path, build_wheel(tmp_path / "w11", "pkg", "1.1", new), "venv11")
    return env, house


def _set(patches: Path, name: str, diff: str) -> None:
    d = patches / name
    d.mkdir(parents=True)
    (d / "patchset.toml").write_text(
        f'name = "{name}"\ntargets = [{{distribution = "pkg", version = "==1.0"}}]\nfiles = ["0001.patch"]\n'
    )
    (d / "0001.patch").write_text(diff)


def _rebase_pkg(env: Env, patches: Path, house: Path, name: str, *more: str) -> tuple[int, str, str]:
    return cli("rebase", "--set", name, "--patches", str(patches), "--site-packages", str(env.site),
               "--wheelhouse", str(house), "--offline", *more)  # fmt: skip


def test_a_deletion_follows_a_move_and_keeps_its_mode(tmp_path: Path) -> None:
    body = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(12))
    env, house = _two_releases(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/telemetry.py": body},
        {"pkg/__init__.py": "", "pkg/plugins/telemetry.py": body},
    )
    lines = body.splitlines(keepends=True)
    diff = (
        "diff --git a/pkg/telemetry.py b/pkg/telemetry.py\ndeleted file mode 100755\n"
        "--- a/pkg/telemetry.py\n+++ /dev/null\n"
        f"@@ -1,{len(lines)} +0,0 @@\n" + "".join("-" + line for line in lines)
    )
    patches = tmp_path / "patches"
    _set(patches, "notel", diff)
    code, out, err = _rebase_pkg(env, patches, house, "notel")
    assert code == 0, out + err
    assert "moved     pkg/telemetry.py -> pkg/plugins/telemetry.py" in out
    text = "".join(p.read_text() for p in (patches / "notel").glob("0*.patch"))
    assert "deleted file mode 100755" in text and "a/pkg/plugins/telemetry.py" in text


def test_an_insertion_next_to_code_upstream_deleted_stays_a_conflict(tmp_path: Path) -> None:
    """The set decorates old_path; upstream deletes old_path: the decorator must not land on the next
    function (git's conflict stands, the line-by-line merge declines)."""
    base = "import functools\n\n\ndef old_path():\n    return 1\n\n\ndef admin_only():\n    return 2\n"
    new = "import functools\n\n\ndef admin_only():\n    return 2\n"
    env, house = _two_releases(
        tmp_path, {"pkg/__init__.py": "", "pkg/m.py": base}, {"pkg/__init__.py": "", "pkg/m.py": new}
    )
    diff = "--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -2,3 +2,4 @@\n \n \n+@functools.cache\n def old_path():\n"
    patches = tmp_path / "patches"
    _set(patches, "cache", diff)
    code, out, err = _rebase_pkg(env, patches, house, "cache")
    assert code == 1, out + err
    review = (patches / "cache.rebase" / "files" / "pkg" / "m.py").read_text()
    assert "<<<<<<< pkg 1.1" in review


def test_markers_in_content_and_empty_resolutions(tmp_path: Path) -> None:
    """A file whose own lines look like markers (rst underlines, a doctest of a merge) is merged with longer
    markers; resolving to an empty file is a resolution."""
    doc = '"""Title\n=======\n\n<<<<<<< not a marker\n"""\nX = 1\nY = 2\n'
    env, house = _two_releases(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/d.py": doc},
        {"pkg/__init__.py": "", "pkg/d.py": doc.replace("X = 1", "X = 10")},
    )
    patches = tmp_path / "patches"
    _set(patches, "x", "--- a/pkg/d.py\n+++ b/pkg/d.py\n@@ -6,2 +6,2 @@\n-X = 1\n+X = 3\n Y = 2\n")
    code, out, err = _rebase_pkg(env, patches, house, "x")
    assert code == 1, out + err
    review = patches / "x.rebase" / "files" / "pkg" / "d.py"
    text = review.read_text()
    assert "<<<<<<<< pkg 1.1\n" in text and "=======\n\n<<<<<<< not a marker" in text  # 8-long markers
    review.write_text(text.split("<<<<<<<<")[0] + "X = 13\nY = 2\n")
    code, out, err = _rebase_pkg(env, patches, house, "x")
    assert code == 0 and "resolved" in out, out + err
    assert "+X = 13" in "".join(p.read_text() for p in (patches / "x").glob("0*.patch"))


def test_revert_after_a_rebase_reverts_the_form_that_is_applied(
    tmp_path: Path, env: Env, minillm_wheel: Path, patches: Path
) -> None:
    """Rebased ahead of the upgrade (--to-version) while applied on 0.4.0: `revert` still takes the applied
    form back out, from the set's history, and the file is verified pristine."""
    site = ("--patches", str(patches), "--site-packages", str(env.site))
    assert cli("apply", "--set", SET, *site)[0] == 0
    house = tmp_path / "house"
    shutil.copytree(minillm_wheel.parent, house)
    release(house, "0.5.0", around_the_hunks)
    code, out, err = rebase(env, patches, house, "--to-version", "0.5.0")
    assert code == 0, out + err
    assert load_set(str(patches / SET)).targets[0].version == "==0.5.0"
    code, out, err = cli("revert", "--set", SET, *site)
    assert code == 0, out + err
    assert "verified pristine" in out
    assert (env.site / CUDA).read_bytes() == minillm_files()[CUDA]


def test_repeated_lines_are_never_merged_line_by_line() -> None:
    """Two identical lines: which one an edit is about cannot be told; git's conflict stands."""
    from patchguard.patchsets.rebase.merge import merge

    base = b"x = 1\nx = 1\ny = 2\n"
    got = merge(b"x = 1\nx = 10\ny = 2\n", base, b"x = 1\ny = 2\n", ("new", "old", "set"))
    assert got.adjacent == 0 and (
        got.conflicts == 1 or got.data.count(b"x = 1") + got.data.count(b"x = 10") == 1
    )


def test_what_the_set_directory_holds_is_kept_or_refused(
    tmp_path: Path, minillm_wheel: Path, patches: Path
) -> None:
    """A README and an executable script are kept (with their mode); a symlink cannot be carried
    faithfully: refused before anything is written."""
    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", around_the_hunks))
    (patches / SET / "regen.sh").write_text("#!/bin/sh\n")
    (patches / SET / "regen.sh").chmod(0o755)
    (patches / SET / "link").symlink_to("/etc/hostname")
    before = tree(patches)
    code, _out, err = rebase(new, patches, minillm_wheel.parent)
    assert code == 2 and "link: not a regular file" in err
    assert tree(patches) == before
    (patches / SET / "link").unlink()
    assert rebase(new, patches, minillm_wheel.parent)[0] == 0
    assert (patches / SET / "regen.sh").stat().st_mode & 0o777 == 0o755


def test_resolving_under_way_survives_a_rerun(tmp_path: Path, minillm_wheel: Path, patches: Path) -> None:
    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", on_the_hunk))
    assert rebase(new, patches, minillm_wheel.parent)[0] == 1
    review = patches / f"{SET}.rebase" / "files" / CUDA
    review.write_text(review.read_text() + "# half done\n")
    assert rebase(new, patches, minillm_wheel.parent)[0] == 1
    assert review.read_text().endswith("# half done\n")


SIDE = "--- a/sidecar/__init__.py\n+++ b/sidecar/__init__.py\n@@ -1 +1 @@\n-LIMIT = 1\n+LIMIT = 8\n"
HOOK = "--- /dev/null\n+++ b/sitecustomize.py\n@@ -0,0 +1 @@\n+import os\n"


def three_targets(tmp_path: Path, patches: Path, edit: Callable[[str], str]) -> Env:
    """sm120-support made a set of minillm, sidecar 1.0 and the environment (a sitecustomize.py), and an
    environment with minillm 0.5.0 (``edit`` applied upstream) and sidecar 1.0."""
    sidecar = build_wheel(tmp_path / "ws", "sidecar", "1.0", {"sidecar/__init__.py": b"LIMIT = 1\n"})
    new = installed(tmp_path, release(tmp_path / "w5", "0.5.0", edit))
    new.install(sidecar)
    ps_dir = patches / SET
    toml = (ps_dir / "patchset.toml").read_text()
    toml = toml.replace(
        'targets = [{distribution = "minillm", version = ">=0.4,<0.5"}]',
        'targets = [{distribution = "minillm", version = ">=0.4,<0.5"}, '
        '{distribution = "sidecar", version = "==1.0"}, {environment = true}]',
    )
    assert "sidecar" in toml
    files_line = next(ln for ln in toml.splitlines() if ln.startswith("files = "))
    toml = toml.replace(files_line, files_line[:-1] + ', "0009-sidecar.patch", "0010-hook.patch"]')
    (ps_dir / "patchset.toml").write_text(toml)
    (ps_dir / "0009-sidecar.patch").write_text(SIDE)
    (ps_dir / "0010-hook.patch").write_text(HOOK)
    return new


def test_a_set_of_several_targets_is_carried_one_target_at_a_time(
    tmp_path: Path, minillm_wheel: Path, patches: Path
) -> None:
    """minillm moved to 0.5.0; the set also patches sidecar 1.0 and adds a sitecustomize.py: only
    minillm's part is merged and re-pinned (with its history entry), the rest is kept as written."""
    new = three_targets(tmp_path, patches, around_the_hunks)
    ps_dir = patches / SET
    code, out, err = rebase(new, patches, minillm_wheel.parent, "--to-version", "0.5.0")
    assert code == 2 and "--target" in err and "minillm, sidecar" in err  # versions named: which target?
    code, out, err = rebase(new, patches, minillm_wheel.parent)
    assert code == 0, out + err
    assert "rebase sm120-support: minillm 0.4.0 -> 0.5.0" in out and "sidecar" not in out
    ps = load_set(str(ps_dir))
    assert [str(t) for t in ps.targets] == ["minillm ==0.5.0", "sidecar ==1.0", "environment"]
    assert ps.history[-1].distribution == "minillm" and ps.history[-1].release == "0.4.0"
    by_path = {fp.path: Path(fp.origin).read_text() for fp in ps.patches}  # the diff files, as written
    assert by_path["sidecar/__init__.py"] == SIDE and by_path["sitecustomize.py"] == HOOK
    kept = ps_dir / "history" / "0.4.0"
    assert (kept / "0009-sidecar.patch").read_text() == SIDE  # the old form whole, every target's diffs
    code, out, err = cli("apply", "--set", SET, "--patches", str(patches), "--site-packages", str(new.site))
    assert code == 0, out + err
    assert (new.site / "sidecar/__init__.py").read_text() == "LIMIT = 8\n"
    assert (new.site / "sitecustomize.py").read_text() == "import os\n"
    code, out, err = rebase(new, patches, minillm_wheel.parent)
    assert code == 0 and "every target admits its installed release" in out, out + err
    code, out, err = rebase(new, patches, minillm_wheel.parent, "--target", "nope")
    assert code == 2 and "no target nope" in err


def test_one_target_of_several_in_conflict_is_resolved_in_review(
    tmp_path: Path, minillm_wheel: Path, patches: Path
) -> None:
    new = three_targets(tmp_path, patches, on_the_hunk)
    set_before = tree(patches / SET)
    code, out, err = rebase(new, patches, minillm_wheel.parent, "--target", "minillm")
    assert code == 1, out + err
    assert tree(patches / SET) == set_before
    review = patches / f"{SET}.rebase"
    assert [p.relative_to(review / "files").as_posix() for p in (review / "files").rglob("*.py")] == [CUDA]
    conflicted = (review / "files" / CUDA).read_text()
    start, end = conflicted.index("<<<<<<<"), conflicted.index(">>>>>>> set sm120-support\n")
    resolved = conflicted[:start] + 'SUPPORTED_ARCHS = ["sm80", "sm90", "sm100", "sm120"]\n'
    (review / "files" / CUDA).write_text(resolved + conflicted[end + len(">>>>>>> set sm120-support\n") :])
    code, out, err = rebase(new, patches, minillm_wheel.parent)
    assert code == 0 and "resolved  minillm/platforms/cuda.py" in out, out + err
    ps = load_set(str(patches / SET))
    assert [str(t) for t in ps.targets] == ["minillm ==0.5.0", "sidecar ==1.0", "environment"]
    assert {fp.path for fp in ps.patches} == {CUDA, "sidecar/__init__.py", "sitecustomize.py"}


def test_rebased_ahead_of_the_upgrade_today_s_box_stays_green(
    tmp_path: Path, env: Env, minillm_wheel: Path, patches: Path
) -> None:
    """Carried to 0.5.0 on the 0.4.0 box that has not upgraded yet: sets, status and check still judge the
    0.4.0 form (from the set's history), no hint carries it back, and the 0.5.0 box gets the new form."""
    site = ("--patches", str(patches), "--site-packages", str(env.site))
    assert cli("apply", "--set", SET, *site)[0] == 0
    house = tmp_path / "house"
    shutil.copytree(minillm_wheel.parent, house)
    release(house, "0.5.0", around_the_hunks)
    code, out, err = rebase(env, patches, house, "--to-version", "0.5.0")
    assert code == 0, out + err
    assert load_set(str(patches / SET)).targets[0].version == "==0.5.0"
    code, out, _ = cli("sets", *site)
    assert code == 0 and "n/a" not in out and "applied" in out and "rebase" not in out, out
    code, out, err = cli("status", *site)
    assert code == 0 and "n/a" not in out, out + err
    policy = tmp_path / "policy.toml"
    policy.write_text(f'required_sets = ["{SET}"]\n')
    code, out, err = cli("check", "--policy", str(policy), *site)
    assert code == 0, out + err
    code, out, err = cli("scan", *site, "--format", "json", "--offline", "--wheelhouse", str(house))
    assert {f["patch_set"] for f in json.loads(out)["findings"]} == {SET}, out
    # Reverting and applying again on 0.4.0 uses the 0.4.0 form; the upgraded box takes the 0.5.0 one.
    assert cli("revert", "--set", SET, *site)[0] == 0
    code, out, err = cli("apply", "--set", SET, *site)
    assert code == 0 and "rebase" not in out + err, out + err
    new = installed(tmp_path, house / "minillm-0.5.0-py3-none-any.whl")
    code, out, err = cli("apply", "--set", SET, "--patches", str(patches), "--site-packages", str(new.site))
    assert code == 0, out + err
