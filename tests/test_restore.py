"""restore, and the transaction underneath: all files or none, whatever happens."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import patchguard
from patchguard import Kind, txn

from .helpers import REPO, Env, patch_txn, run_cli, tree

MLA = "minillm/models/mla.py"
CUDA = "minillm/platforms/cuda.py"
WEIGHTS = "minillm/model_loader/weights.py"


@pytest.fixture
def house(tmp_path: Path, minillm_wheel: Path) -> Path:
    h = tmp_path / "wheelhouse"
    h.mkdir()
    shutil.copy(minillm_wheel, h)
    return h


def snapshot(env: Env) -> dict[str, str | None]:
    """sha256 of every file below minillm/ (and the names): the state the tests compare."""
    out: dict[str, str | None] = {}
    for p in sorted((env.site / "minillm").rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            out[p.relative_to(env.site).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def break_it(env: Env) -> None:
    for rel in (MLA, WEIGHTS):
        p = env.site / rel
        p.write_text(p.read_text() + "\nimport pdb; pdb.set_trace()\n")
    (env.site / CUDA).unlink()
    (env.site / "minillm/models/scratch.py").write_text("x = 1\n")


def test_restore_makes_the_scan_clean(env: Env, house: Path) -> None:
    pristine = snapshot(env)
    break_it(env)
    result = patchguard.restore(
        ["minillm"], site_packages=[str(env.site)], wheelhouse=[str(house)], offline=True
    )
    assert {(a.action, a.shown) for a in result.actions} == {
        ("recreate", CUDA),
        ("restore", WEIGHTS),
        ("restore", MLA),
    }
    after = result.after
    assert after is not None
    assert [f.path for f in after.findings] == ["minillm/models/scratch.py"]  # unexpected stays by default
    now = snapshot(env)
    now.pop("minillm/models/scratch.py")
    assert now == pristine


def test_path_subset_and_dry_run(env: Env, house: Path) -> None:
    break_it(env)
    before = snapshot(env)
    dry = patchguard.restore(
        ["minillm"],
        site_packages=[str(env.site)],
        paths=["*/mla.py"],
        dry_run=True,
        wheelhouse=[str(house)],
        offline=True,
    )
    assert [(a.action, a.shown) for a in dry.actions] == [("restore", MLA)]
    assert snapshot(env) == before and not (env.site / ".patchguard").exists()
    patchguard.restore(
        ["minillm"], site_packages=[str(env.site)], paths=["*/mla.py"], wheelhouse=[str(house)], offline=True
    )
    report = patchguard.scan(["minillm"], site_packages=[str(env.site)], analyse=False)
    left = sorted(f.path for f in report.findings if f.kind in (Kind.MODIFIED, Kind.MISSING))
    assert left == sorted([WEIGHTS, CUDA])


def test_remove_unexpected_moves_files_into_the_backup(env: Env, house: Path) -> None:
    break_it(env)
    result = patchguard.restore(
        ["minillm"],
        site_packages=[str(env.site)],
        remove_unexpected=True,
        wheelhouse=[str(house)],
        offline=True,
    )
    assert not (env.site / "minillm/models/scratch.py").exists()
    assert result.committed is not None
    kept = list(Path(result.committed.backup_dir).glob("*scratch.py"))
    assert len(kept) == 1 and kept[0].read_text() == "x = 1\n"
    assert result.after is not None and result.after.findings == ()


def test_stale_bytecode_of_restored_files_is_removed(env: Env, house: Path) -> None:
    break_it(env)
    cache = env.site / "minillm/models/__pycache__"
    cache.mkdir()
    (cache / "mla.cpython-311.pyc").write_bytes(b"stale")
    (cache / "mla.cpython-311.opt-1.pyc").write_bytes(b"stale")
    (cache / "llama.cpython-311.pyc").write_bytes(b"fresh")
    patchguard.restore(["minillm"], site_packages=[str(env.site)], wheelhouse=[str(house)], offline=True)
    assert sorted(p.name for p in cache.iterdir()) == ["llama.cpython-311.pyc"]


def test_restore_replaces_the_directory_entry_never_the_inode(tmp_path: Path, env: Env, house: Path) -> None:
    # uv hard-links installed files to its cache; an in-place write would change every environment.
    mla = env.site / MLA
    cache_copy = tmp_path / "uv-archive-mla.py"
    os.link(mla, cache_copy)
    with open(mla, "a") as f:  # a person's in-place edit reaches the cache too: nothing can help that
        f.write("print('debug')\n")
    edited = cache_copy.read_bytes()
    inode = cache_copy.stat().st_ino
    patchguard.restore(["minillm"], site_packages=[str(env.site)], wheelhouse=[str(house)], offline=True)
    assert mla.stat().st_ino != inode
    assert cache_copy.read_bytes() == edited and cache_copy.stat().st_ino == inode
    assert patchguard.scan(["minillm"], site_packages=[str(env.site)]).findings == ()


def test_restore_cli_says_verified_pristine(env: Env, house: Path) -> None:
    break_it(env)
    proc = run_cli(
        "restore", "minillm", "--site-packages", str(env.site), "--wheelhouse", str(house), "--offline"
    )
    assert proc.returncode == 0, proc.stderr
    assert "restore  minillm/models/mla.py" in proc.stdout
    assert "recreate minillm/platforms/cuda.py" in proc.stdout
    assert "verified pristine against RECORD" in proc.stdout


def test_restore_writes_its_document_for_a_deploy_script(env: Env, house: Path) -> None:
    """``restore --format json``: what it would do (a dry run writes nothing), then each file put back, the
    records it was verified against and the transaction; the scan after it is clean."""
    import json

    break_it(env)
    before = snapshot(env)
    args = ["restore", "minillm", "--site-packages", str(env.site), "--wheelhouse", str(house), "--offline"]
    dry = run_cli(*args, "--dry-run", "--format", "json")
    doc = json.loads(dry.stdout)
    assert dry.returncode == 0 and doc["dry_run"] and doc["transaction"] is None
    assert {(f["action"], f["path"]) for f in doc["files"]} == {("restore", MLA), ("restore", WEIGHTS),
                                                              ("recreate", CUDA)}  # fmt: skip
    assert snapshot(env) == before
    done = run_cli(*args, "--format", "json")
    doc = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr
    assert doc["clean"] and doc["still_modified"] == [] and doc["verified_against"] == ["RECORD"]
    assert doc["transaction"] and Path(doc["backup_dir"]).is_dir()
    after = patchguard.scan(["minillm"], site_packages=[str(env.site)]).findings
    assert not [f for f in after if f.kind in (Kind.MODIFIED, Kind.MISSING)]
    again = json.loads(run_cli(*args, "--format", "json").stdout)
    assert again["files"] == [] and again["transaction"] is None


def test_restore_without_a_wheel_changes_nothing(env: Env) -> None:
    break_it(env)
    before = snapshot(env)
    proc = run_cli("restore", "minillm", "--site-packages", str(env.site), "--offline")
    assert proc.returncode == 2
    assert "no wheel of minillm 0.4.0" in proc.stderr and proc.stderr.count("\n") == 1
    assert snapshot(env) == before


# --- crash safety ----------------------------------------------------------------------------------------


def _restore_cmd(env: Env, house: Path) -> list[str]:
    return [
        "restore",
        "minillm",
        "--site-packages",
        str(env.site),
        "--wheelhouse",
        str(house),
        "--offline",
        "--remove-unexpected",
    ]


@pytest.mark.slow  # a CLI run killed at each of ~15 write points, a recovering scan after each
def test_kill_at_every_write_point_leaves_before_or_after(env: Env, house: Path, tmp_path: Path) -> None:
    import compileall

    break_it(env)
    assert compileall.compile_dir(str(env.site / "minillm"), quiet=1, force=True)
    template = tmp_path / "template"
    shutil.copytree(env.prefix, template, symlinks=True)
    before = tree(env.site)
    points = 0
    for n in range(1, 80):
        shutil.rmtree(env.prefix)  # a fresh broken environment for every kill point
        shutil.copytree(template, env.prefix, symlinks=True)
        proc = run_cli(*_restore_cmd(env, house), env={"PATCHGUARD_TEST_CRASH_AT": str(n)})
        if proc.returncode == 0:
            points = n - 1
            after = tree(env.site)
            break
        assert proc.returncode == 137, proc.stderr
        # The next command, whatever it is, recovers first.
        scan = run_cli(
            "scan", "minillm", "--site-packages", str(env.site), "--format", "json", "--fail-on", "never"
        )
        assert scan.returncode == 0, scan.stderr
        assert tree(env.site) == before, f"kill at write point {n}: neither before nor after"
    assert points >= 12  # journal 2, temp files 3, backups 3 (+ bytecode), replaces 4 (+ bytecode), commit 1
    assert "minillm/models/scratch.py" not in after and after[MLA] != before[MLA]
    assert not [p for p in after if "__pycache__/mla." in p or ".pg-tmp-" in p]  # stale bytecode went


def env_copy_restore(env: Env) -> None:
    """Reinstall minillm's files from the session wheel (the pristine state)."""
    import zipfile

    wheel = next((env.prefix.parent / "wheelhouse").glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.startswith("minillm/"):
                zf.extract(name, env.site)


def test_crash_after_the_commit_point_keeps_the_after_state(env: Env, house: Path) -> None:
    """Killed after the journal is gone: the transaction happened; nothing is rolled back."""
    break_it(env)
    proc = run_cli(*_restore_cmd(env, house))
    assert proc.returncode == 0
    after = snapshot(env)
    assert run_cli("scan", "minillm", "--site-packages", str(env.site)).returncode == 0
    assert snapshot(env) == after


def test_enospc_while_staging_changes_nothing(env: Env, house: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    break_it(env)
    before = snapshot(env)
    real = txn.durable.write_durable
    calls = {"n": 0}

    def full_disk(path: str, data: bytes, mode: int) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # the journal and one temp file made it; the next one does not fit
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        real(path, data, mode)

    patch_txn(monkeypatch, "write_durable", full_disk)
    with pytest.raises(txn.TransactionError, match=r"No space left on device.*nothing was changed"):
        patchguard.restore(["minillm"], site_packages=[str(env.site)], wheelhouse=[str(house)], offline=True)
    assert snapshot(env) == before
    assert not (env.site / ".patchguard/journal.json").exists()
    leftovers = [p for p in (env.site / "minillm").rglob("*") if ".pg-tmp-" in p.name]
    assert leftovers == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_read_only_site_packages_is_a_clean_error(minillm_wheel: Path) -> None:
    top = Path(tempfile.mkdtemp(prefix="pg-ro-"))
    try:
        top.chmod(0o755)
        env = Env(top / "venv")
        env.install(minillm_wheel)
        shutil.copy(minillm_wheel, top)
        break_it(env)
        kwargs = {"site_packages": [str(env.site)], "wheelhouse": [str(top)], "offline": True}
        # Everything it needs imported while still root (the test venv may be unreadable to others).
        assert patchguard.restore(["minillm"], dry_run=True, **kwargs).actions  # type: ignore[arg-type]
        for p in [top, *top.rglob("*")]:
            p.chmod(0o555 if p.is_dir() else 0o444)
        before = snapshot(env)
        os.seteuid(65534)  # nobody: root writes anywhere, a user does not
        try:
            with pytest.raises(txn.TransactionError, match="cannot write into the environment"):
                patchguard.restore(["minillm"], **kwargs)  # type: ignore[arg-type]
        finally:
            os.seteuid(0)
        assert snapshot(env) == before
    finally:
        for p in [top, *top.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        shutil.rmtree(top)


@pytest.mark.slow  # two CLI runs, waiting out a lock timeout and then a holder
def test_a_second_writer_waits_for_the_lock_or_fails_clearly(env: Env, house: Path) -> None:
    break_it(env)
    before = snapshot(env)
    state = env.site / ".patchguard"
    state.mkdir()
    fd = os.open(state / "lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        proc = run_cli(*_restore_cmd(env, house), env={"PATCHGUARD_LOCK_TIMEOUT": "0.3"})
        assert proc.returncode == 2
        assert "another patchguard process has held the environment lock" in proc.stderr
        assert snapshot(env) == before
        threading.Timer(0.5, lambda: os.close(fd)).start()
        started = time.monotonic()
        proc = run_cli(*_restore_cmd(env, house), env={"PATCHGUARD_LOCK_TIMEOUT": "20"})
        assert proc.returncode == 0, proc.stderr
        assert time.monotonic() - started >= 0.4  # it waited for the holder
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    assert patchguard.scan(["minillm"], site_packages=[str(env.site)]).findings == ()


def test_transactions_refuse_paths_that_escape(tmp_path: Path) -> None:
    root = tmp_path / "site"
    (root / "pkg").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "pkg/link").symlink_to(outside)
    (root / "pkg/file.py").symlink_to(outside / "f.py")
    plan = txn.Plan(
        str(root),
        (
            txn.Change(str(root / "pkg/link/x.py"), b"x", None),
            txn.Change(str(root / "../outside/y.py"), b"y", None),
            txn.Change(str(tmp_path / "elsewhere.py"), b"z", None),
            txn.Change(str(root / "pkg/file.py"), b"w", None),
        ),
    )
    with pytest.raises(txn.TransactionError) as err:
        txn.commit(plan)
    msg = str(err.value)
    assert msg.count("\n") == 4
    assert "through a symlink" in msg and "not a normalised path" in msg and "is a symlink" in msg
    assert sorted(os.listdir(outside)) == [] and not (root / ".patchguard").exists()


def test_python_m_patchguard_works() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "patchguard", "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and proc.stdout.startswith("patchguard ")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give files to another owner")
def test_every_write_keeps_mode_setuid_setgid_and_owner(env: Env, house: Path, tmp_path: Path) -> None:
    patches = tmp_path / "patches"
    shutil.copytree(REPO / "patches", patches, ignore=shutil.ignore_patterns("README.md"))
    modes = {MLA: 0o4755, WEIGHTS: 0o6750}
    for rel, mode in modes.items():
        p = env.site / rel
        os.chown(p, 65534, 65534)
        p.chmod(mode)  # after the chown: chown clears setuid/setgid

    def kept(step: str) -> None:
        for rel, mode in modes.items():
            st = (env.site / rel).stat()
            assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (mode, 65534, 65534), (step, rel)

    site = [str(env.site)]
    patchguard.apply_set("glm5-debug", patches=str(patches), site_packages=site)
    kept("apply")
    patchguard.revert_set("glm5-debug", patches=str(patches), site_packages=site)
    kept("revert")
    for rel in modes:
        p = env.site / rel
        with open(p, "a") as f:  # an edit in place keeps inode, owner and mode
            f.write("\nimport pdb\n")
    patchguard.restore(["minillm"], site_packages=site, wheelhouse=[str(house)], offline=True)
    kept("restore")
    assert run_cli("scan", "minillm", "--site-packages", str(env.site)).returncode == 0


def test_enospc_while_writing_the_journal_leaves_no_debris(
    env: Env, house: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    break_it(env)
    before = tree(env.site)
    real = txn.durable.write_durable

    def half_written(path: str, data: bytes, mode: int) -> None:
        real(path, data[: len(data) // 2], mode)  # the temp journal exists, half full, then the disk is
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    patch_txn(monkeypatch, "write_durable", half_written)
    with pytest.raises(txn.TransactionError, match=r"No space left on device.*nothing was changed"):
        patchguard.restore(["minillm"], site_packages=[str(env.site)], wheelhouse=[str(house)], offline=True)
    assert tree(env.site) == before  # no journal.json.tmp, no backup directory, no new directory
