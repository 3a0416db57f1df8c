"""The way back: ``rollback --lock`` after an upgrade gives back the locked release's files byte for byte,
with the sets the lock had in place applied again, in one transaction — or changes nothing.

Real wheels built here and installed with pypa's installer; the upgrade done as pip does it; the set carried
by ``rebase --all`` and applied again on the new release before rolling back; the rollback killed at every
write point in a real subprocess.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .helpers import Env, build_wheel, cli, minillm_files, run_cli, tree
from .test_rebase import CUDA, SET, around_the_hunks, release, upgrade
from .test_schemas import _valid

SCRIPT = "minillm-serve"


def _wheel(out: Path, files: dict[str, bytes] | None = None) -> Path:
    return build_wheel(
        out,
        "minillm",
        "0.4.0",
        files or minillm_files(),
        console_scripts={SCRIPT: "minillm.entrypoints.serve:main"},
    )


def _upgraded(tmp_path: Path, patches: Path) -> tuple[Env, Path, list[str], dict[str, object], Path]:
    """A 0.4.0 box with sm120-support applied and locked, then upgraded to 0.5.0 with the set carried and
    applied again. Returns the env, the lock, the options, the locked files, the wheelhouse."""
    house = tmp_path / "house"
    old = _wheel(house)
    env = Env(tmp_path / "venv")
    env.install(old)
    site = ["--patches", str(patches), "--site-packages", str(env.site)]
    assert cli("apply", "--set", SET, *site)[0] == 0
    lock = tmp_path / "before-upgrade.lock"
    assert cli("lock", *site, "-o", str(lock))[0] == 0
    locked = _files(env)
    upgrade(env, old)
    env.install(Path(shutil.copy(release(tmp_path / "w5", "0.5.0", around_the_hunks), house)))
    opts = [*site, "--wheelhouse", str(house), "--offline"]
    code, out, err = cli("rebase", "--all", *opts)
    assert code == 0, out + err
    assert cli("apply", "--set", SET, *site)[0] == 0
    return env, lock, opts, locked, house


def _files(env: Env) -> dict[str, object]:
    """The environment's files (site-packages and scripts), patchguard's state directory aside, and the
    two files only an installer writes its own way (its name; RECORD's rows for it)."""
    out = {f"site/{k}": v for k, v in tree(env.site).items() if not k.startswith(".patchguard")}
    out.update({f"bin/{k}": v for k, v in tree(env.bin).items() if k == SCRIPT})
    return {k: v for k, v in out.items() if not k.endswith(("/INSTALLER", "/RECORD"))}


def test_rollback_gives_back_the_locked_release_with_its_sets(tmp_path: Path, patches: Path) -> None:
    env, lock, opts, locked, _house = _upgraded(tmp_path, patches)
    env.install(build_wheel(tmp_path / "extra", "newdep", "1.0", {"newdep/__init__.py": b"X = 1\n"}))
    upgraded = _files(env)
    code, out, err = cli("rollback", "--lock", str(lock), *opts, "--dry-run", "--format", "json")
    assert code == 0, out + err
    doc = _valid(out, "rollback-1")
    moves = [(d["name"], d["from"], d["to"]) for d in doc["distributions"]]
    assert moves == [("minillm", "0.5.0", "0.4.0"), ("newdep", "1.0", None)]  # the upgrade's new one goes
    assert doc["sets"] == [SET] and doc["dry_run"] and _files(env) == upgraded  # a dry run writes nothing
    code, out, err = cli("rollback", "--lock", str(lock), *opts)
    assert code == 0, out + err
    assert "reinstall  minillm 0.5.0 -> 0.4.0" in out and f"apply      {SET}" in out
    assert _files(env) == locked  # the 0.4.0 files byte for byte, the set applied, the console script
    assert not (env.site / "minillm-0.5.0.dist-info").exists()
    code, out, err = cli("check", *opts[:4], "--lock", str(lock))
    assert code == 0, out + err
    code, out, _err = cli("sets", *opts[:4])
    assert f"{SET}  minillm >=0.4,<0.5  applied" in out, out  # the form the lock had, from the set's history
    code, out, _err = cli("rollback", "--lock", str(lock), *opts)
    assert code == 0 and "nothing to roll back" in out


def test_a_wheel_that_is_not_the_locked_build_is_never_installed(tmp_path: Path, patches: Path) -> None:
    """Another build of 0.4.0 (a local rebuild with another cuda.py), and a wheel whose member lies about
    its RECORD hash: both refused, nothing changed, the place each was found said."""
    env, lock, opts, _locked, house = _upgraded(tmp_path, patches)
    other = minillm_files()
    other[CUDA] = other[CUDA].replace(b"MIN_CAPABILITY = (8, 0)", b"MIN_CAPABILITY = (7, 0)")
    for wheel in house.glob("minillm-0.4.0-*.whl"):
        wheel.unlink()
    _wheel(house, other)
    before = _files(env), tree(env.site / ".patchguard") if (env.site / ".patchguard").exists() else {}
    code, _out, err = cli("rollback", "--lock", str(lock), *opts)
    assert code == 2 and "not the build the lock names" in err, err
    lying = _wheel(tmp_path / "lying")
    import zipfile

    with zipfile.ZipFile(lying) as src, zipfile.ZipFile(house / lying.name, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            dst.writestr(item, data + b"\n# edited\n" if item.filename == CUDA else data)
    for wheel in house.glob("minillm-0.4.0-*.whl"):
        if wheel.name != lying.name:
            wheel.unlink()
    code, _out, err = cli("rollback", "--lock", str(lock), *opts)
    assert code == 2 and "does not match its own RECORD" in err, err
    assert (_files(env), before[1]) == before


@pytest.mark.slow  # the rollback killed at each of its write points, a recovering command after each
def test_rollback_killed_at_every_write_point_leaves_before_or_after(tmp_path: Path, patches: Path) -> None:
    env, lock, opts, locked, _house = _upgraded(tmp_path, patches)
    template = tmp_path / "template"
    shutil.copytree(env.prefix, template, symlinks=True)
    upgraded = _files(env)
    seen = []
    for n in range(1, 400):
        shutil.rmtree(env.prefix)
        shutil.copytree(template, env.prefix, symlinks=True)
        proc = run_cli("rollback", "--lock", str(lock), *opts, env={"PATCHGUARD_TEST_CRASH_AT": str(n)})
        if proc.returncode == 0:
            break
        assert proc.returncode == 137, proc.stderr
        status = run_cli("status", *opts[:4])  # the next command recovers first
        assert status.returncode in (0, 1), status.stderr
        now = _files(env)
        assert now in (upgraded, locked), f"killed at write point {n}: neither before nor after"
        seen.append(now == locked)
    assert len(seen) > 30 and not seen[0] and _files(env) == locked
    doc = json.loads(run_cli("rollback", "--lock", str(lock), *opts, "--format", "json").stdout)
    assert doc["distributions"] == []  # done: the environment is as the lock says


def test_a_lock_that_cannot_be_read_changes_nothing(tmp_path: Path, patches: Path) -> None:
    env, lock, opts, _locked, _house = _upgraded(tmp_path, patches)
    before = _files(env)
    bad = tmp_path / "bad.lock"
    for text in ("{", '{"schema": "patchguard.lock/1", "distributions": []}', ""):
        bad.write_text(text)
        code, _out, err = cli("rollback", "--lock", str(bad), *opts)
        assert code == 2 and str(bad) in err and "Traceback" not in err, err
    code, _out, err = cli("rollback", "--lock", str(tmp_path / "absent.lock"), *opts)
    assert code == 2 and "cannot read lock" in err
    doc = json.loads(lock.read_text())
    del doc["distributions"]["minillm"]["build"]  # a lock written before build digests
    bad.write_text(json.dumps(doc))
    code, _out, err = cli("rollback", "--lock", str(bad), *opts)
    assert code == 2 and "names no build" in err, err
    assert _files(env) == before
