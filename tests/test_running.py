"""``patchguard running``: real processes started from a real venv, then the environment changed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

import patchguard
from patchguard import Loaded
from patchguard.deploy.processes.running import Process, Verdict, running
from patchguard.env import resolve_target

from .helpers import REPO, cli, make_venv

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")


def _start(python: Path) -> subprocess.Popen[bytes]:
    """A server-like process: imports the fixture package (writing its bytecode), then sleeps."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code = "import minillm.envs, time; print('ready', flush=True); time.sleep(120)"
    proc = subprocess.Popen([str(python), "-c", code], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


@pytest.fixture
def server(tmp_path: Path, minillm_wheel: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    venv = make_venv(tmp_path / "venv")
    subprocess.run(
        [str(venv.prefix / "bin/python"), "-m", "ensurepip", "--default-pip"],
        check=False,
        capture_output=True,
    )
    venv.install(minillm_wheel)
    proc = _start(venv.prefix / "bin/python")
    try:
        yield venv.site, proc
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.mark.slow  # real processes, and seconds between their start and the change
def test_a_server_running_old_code_is_stale_and_a_new_one_current(
    server: tuple[Path, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    site, old = server
    found = {p.pid: p for p in running(resolve_target(site_packages=[str(site)])).processes}
    assert found[old.pid].verdict is Verdict.CURRENT  # nothing changed since it started

    time.sleep(2.1)  # start times are known to the second: the change comes clearly after the start
    patches = tmp_path / "patches"
    shutil.copytree(REPO / "patches", patches)
    patchguard.apply_set("glm5-debug", patches=str(patches), site_packages=[str(site)])
    found = {p.pid: p for p in running(resolve_target(site_packages=[str(site)])).processes}
    stale = found[old.pid]
    assert stale.verdict is Verdict.STALE
    changed = {os.path.relpath(p, site) for p in (*stale.imported_changed, *stale.maybe_changed)}
    assert changed == {"minillm/models/mla.py", "minillm/model_loader/weights.py"}
    assert stale.transactions  # the apply, named

    new = _start(site.parent.parent.parent / "bin/python")
    try:
        found = {p.pid: p for p in running(resolve_target(site_packages=[str(site)])).processes}
        assert found[new.pid].verdict is Verdict.CURRENT and found[old.pid].verdict is Verdict.STALE
        code, out, _ = cli("running", "--site-packages", str(site), "--format", "json")
        assert code == 1
        doc = json.loads(out)
        schema = (resources.files("patchguard") / "schemas" / "running-1.schema.json").read_text()
        jsonschema.validate(doc, json.loads(schema), cls=jsonschema.Draft202012Validator)
        verdicts = {p["pid"]: p["verdict"] for p in doc["processes"]}
        assert verdicts[old.pid] == "stale" and verdicts[new.pid] == "current"
        code, out, _ = cli("running", "--site-packages", str(site))
        assert code == 1 and f"stale    pid {old.pid}" in out and "restart them" in out
    finally:
        _stop(new)


def test_nothing_running_is_current(tmp_path: Path, minillm_wheel: Path) -> None:
    venv = make_venv(tmp_path / "venv")
    venv.install(minillm_wheel)
    code, out, _ = cli("running", "--site-packages", str(venv.site))
    assert code == 0 and out.strip().endswith("0 processes of the environment, 0 stale")
    assert sys.platform.startswith("linux")


@pytest.mark.slow  # real processes, and seconds between their start and the change
def test_writes_name_the_processes_to_restart_and_check_can_refuse(
    server: tuple[Path, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    site, old = server
    time.sleep(2.1)
    patches = tmp_path / "patches"
    shutil.copytree(REPO / "patches", patches)
    opts = ["--site-packages", str(site), "--patches", str(patches)]
    code, _out, err = cli("apply", "--set", "sm120-support", *opts)
    assert code == 0 and f"restart needed: pid {old.pid} runs the code from before this change" in err
    policy = tmp_path / "patchguard.toml"
    policy.write_text('fail_on = "never"\nrunning = "fail"\n')
    code, out, _ = cli("check", *opts, "--policy", str(policy))
    assert code == 1 and f"RUNNING pid {old.pid} runs code older than the environment" in out
    policy.write_text('fail_on = "never"\nrunning = "warn"\n')
    code, out, err = cli("check", *opts, "--policy", str(policy))
    assert code == 0 and f"warning: RUNNING pid {old.pid}" in err
    policy.write_text('running = "sometimes"\n')
    code, _out, err = cli("check", *opts, "--policy", str(policy))
    assert code == 2 and "running = 'sometimes': expected fail, warn or ignore" in err


def test_prometheus_text_for_scan_check_and_running(
    tmp_path: Path, minillm_wheel: Path, promtool: str
) -> None:
    import re

    venv = make_venv(tmp_path / "venv")
    venv.install(minillm_wheel)
    p = venv.site / "minillm/envs.py"
    p.write_text(p.read_text() + "\nbreakpoint()\n")
    site = ["--site-packages", str(venv.site)]
    sample = re.compile(r'^[a-z_]+(\{([a-z_]+="[^"]*",?)*\})? -?[0-9.e+-]+$')
    out_file = tmp_path / "patchguard.prom"
    for args, expected in (
        (
            ["scan", *site, "--format", "prometheus", "-o", str(out_file)],
            'patchguard_findings_by_severity{severity="high"} 1',
        ),
        (["check", *site, "--format", "prometheus", "-o", str(out_file)], "patchguard_check_passed 0"),
        (["running", *site, "--format", "prometheus", "-o", str(out_file)], "patchguard_stale_processes 0"),
    ):
        cli(*args)
        text = out_file.read_text()
        assert expected in text.splitlines(), (args, text)
        names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
        for line in text.splitlines():
            if not line.startswith("#"):
                assert sample.match(line), line
                assert line.split("{")[0].split()[0] in names, line
        # Prometheus' own parser and linter (naming, HELP/TYPE, duplicates) accept it
        checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert checked.returncode == 0, (args, checked.stdout, checked.stderr)


@pytest.mark.slow  # real processes, and seconds between their start and the change
def test_other_environments_and_vanished_processes(
    server: tuple[Path, subprocess.Popen[bytes]],
    tmp_path: Path,
    minillm_wheel: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    site, mine = server
    other = make_venv(tmp_path / "other")
    other.install(minillm_wheel)
    theirs = _start(other.prefix / "bin/python")
    try:
        pids = {p.pid for p in running(resolve_target(site_packages=[str(site)])).processes}
        assert mine.pid in pids and theirs.pid not in pids  # a process of another environment is not listed
    finally:
        _stop(theirs)

    # A process that exits between the listing of /proc and the reading of its files is skipped, not an error.
    import patchguard.deploy.processes.running as running_mod

    fake = tmp_path / "proc"
    (fake / "4242").mkdir(parents=True)
    (fake / "1").mkdir()
    (fake / str(os.getpid())).mkdir()
    (fake / "stat").write_text("btime 1700000000\n")
    real_read = running_mod._read

    def exits_meanwhile(path: str) -> str | None:
        if path.endswith("4242/cmdline"):
            shutil.rmtree(fake / "4242")
            return f"{site.parent.parent.parent}/bin/python\0-c\0pass\0"
        return real_read(path)

    monkeypatch.setattr(running_mod, "_read", exits_meanwhile)
    assert running(resolve_target(site_packages=[str(site)]), proc=str(fake)).processes == ()


def test_a_process_table_that_cannot_be_read_is_exit_2_not_zero_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No /proc, or one that hides the other processes (hidepid): never "0 processes, 0 stale"."""
    import patchguard.deploy.processes.running as running_mod
    from patchguard.errors import PatchguardError

    site = tmp_path / "venv/lib/python3.11/site-packages"
    site.mkdir(parents=True)
    with pytest.raises(PatchguardError, match="cannot read the process table"):
        running(resolve_target(site_packages=[str(site)]), proc=str(tmp_path / "no-proc"))
    hidden = tmp_path / "proc"
    (hidden / str(os.getpid())).mkdir(parents=True)  # only our own process is shown
    with pytest.raises(PatchguardError, match="shows only some processes"):
        running(resolve_target(site_packages=[str(site)]), proc=str(hidden))
    real = running_mod.running
    monkeypatch.setattr(running_mod, "running", lambda target: real(target, proc=str(hidden)))
    code, out, err = cli("running", "--site-packages", str(site))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "shows only some processes" in line and "hidepid" in line


@pytest.mark.slow  # real processes, seconds apart
def test_a_server_that_writes_no_bytecode_makes_loaded_unknown_with_its_start(
    tmp_path: Path, minillm_wheel: Path
) -> None:
    """A container's server runs with PYTHONDONTWRITEBYTECODE=1: the installer's pyc is older than the edit
    whether or not the server imported the edited module. ``loaded`` is then ``unknown``, saying why, and
    each process of the environment is said to have started before or after the edit."""
    import py_compile

    venv = make_venv(tmp_path / "venv")
    venv.install(minillm_wheel)
    mla = venv.site / "minillm/models/mla.py"
    py_compile.compile(str(mla), doraise=True)  # as pip compiles at install time
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    code = "import minillm.envs, time; print('ready', flush=True); time.sleep(120)"

    def start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [str(venv.prefix / "bin/python"), "-c", code], stdout=subprocess.PIPE, env=env
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        return proc

    before = start()
    try:
        time.sleep(2.1)  # start times are known to the second
        text = mla.read_text()
        mla.write_text(
            text.replace(
                "num_tokens, _ = hidden.shape\n",
                "num_tokens, _ = hidden.shape\n        import pdb; pdb.set_trace()\n",
                1,
            )
        )
        time.sleep(2.1)
        after = start()
        try:
            house = tmp_path / "wheels"
            house.mkdir()
            shutil.copy(minillm_wheel, house)
            report = patchguard.scan(["minillm"], site_packages=[str(venv.site)], wheelhouse=[str(house)])
            (f,) = [f for f in report.findings if f.rule == "debugger"]
            assert f.loaded is Loaded.UNKNOWN, f.evidence
            evidence = " | ".join(f.evidence)
            assert f"bytecode cannot tell: pid {before.pid} runs with PYTHONDONTWRITEBYTECODE" in evidence
            assert f"pid {before.pid} started before the edit" in evidence
            assert f"pid {after.pid} started after the edit" in evidence
        finally:
            _stop(after)
    finally:
        _stop(before)


# A process that maps files: each of ``files`` once with the mmap module, ``many`` (path, count) that many
# times with libc's mmap (the mmap module keeps a descriptor per map: thousands would pass the fd limit), and
# ``libs`` loaded as shared objects. Its paths come on stdin: only its maps tie it to the environment.
_HOLDER = """
import ctypes, json, mmap, os, sys, time
spec = json.loads(sys.stdin.readline())
keep = []
for path in spec["files"]:
    with open(path, "rb") as f:
        keep.append(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ))
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
int_ = ctypes.c_int
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, int_, int_, int_, ctypes.c_long]
for path, count in spec["many"]:
    fd = os.open(path, os.O_RDONLY)
    for _ in range(count):
        addr = libc.mmap(None, mmap.PAGESIZE, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    os.close(fd)
for path in spec["libs"]:
    keep.append(ctypes.CDLL(path))
    assert keep[-1].answer() == 42
print("ready", flush=True)
time.sleep(120)
"""


def _hold(
    files: Sequence[Path], many: Sequence[tuple[Path, int]] = (), libs: Sequence[Path] = ()
) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    spec = {
        "files": [str(p) for p in files],
        "many": [(str(p), n) for p, n in many],
        "libs": [str(p) for p in libs],
    }
    proc.stdin.write(json.dumps(spec).encode() + b"\n")
    proc.stdin.close()
    if proc.stdout.readline().strip() != b"ready":
        _stop(proc)
        pytest.fail("the process that maps the files did not start")
    return proc


def _replace(path: Path, content: bytes) -> None:
    """As an installer replaces a file: a new inode renamed over the name."""
    new = path.with_name(".new")
    new.write_bytes(content)
    os.replace(new, path)


def _find(site: Path, pid: int) -> Process:
    (found,) = [p for p in running(resolve_target(site_packages=[str(site)])).processes if p.pid == pid]
    return found


@pytest.mark.slow  # real processes
def test_mapped_names_are_read_as_the_kernel_writes_them(tmp_path: Path) -> None:
    """A newline in a mapped name is written ``\\012``; `` (deleted)`` follows an unlinked file's name, and
    a file may be named so; a backslash is written as itself. Only what was really replaced is named."""
    site = Path(os.path.realpath(make_venv(tmp_path / "venv").site))
    names = {
        "kept": "ext\nnewline.so",
        "replaced": "ext\nreplaced.so",
        "literal": "lit.so (deleted)",
        "literal replaced": "lit_replaced.so (deleted)",
        "backslash": "back\\012slash.so",
        "plain": "plain.so",
    }
    paths = {key: site / name for key, name in names.items()}
    for path in paths.values():
        path.write_bytes(b"\x7fELF old code" * 400)
    proc = _hold(list(paths.values()))
    try:
        maps = Path(f"/proc/{proc.pid}/maps").read_bytes()
        assert b"ext\\012newline.so" in maps and b"lit.so (deleted)\n" in maps  # what the test is about
        found = _find(site, proc.pid)
        assert found.verdict is Verdict.CURRENT and found.replaced_extensions == (), found

        for key in ("replaced", "literal replaced", "plain"):
            _replace(paths[key], b"\x7fELF new code")
        maps = Path(f"/proc/{proc.pid}/maps").read_bytes()
        assert b"lit_replaced.so (deleted) (deleted)\n" in maps and b"ext\\012replaced.so (deleted)\n" in maps
        found = _find(site, proc.pid)
        expected = sorted(str(paths[k]) for k in ("replaced", "literal replaced", "plain"))
        assert found.verdict is Verdict.STALE and list(found.replaced_extensions) == expected

        code, out, _ = cli("running", "--site-packages", str(site), "--format", "json")
        (doc,) = [p for p in json.loads(out)["processes"] if p["pid"] == proc.pid]
        assert code == 1 and doc["verdict"] == "stale" and doc["replaced_extensions"] == expected
    finally:
        _stop(proc)


@pytest.mark.slow  # real processes
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_a_loaded_shared_object_with_a_newline_in_its_name_replaced_is_named_once(tmp_path: Path) -> None:
    site = Path(os.path.realpath(make_venv(tmp_path / "venv").site))
    source = tmp_path / "answer.c"
    source.write_text("int answer(void) { return 42; }\n")
    ext = site / "native\nmod.cpython.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(ext), str(source)], check=True)
    proc = _hold([], libs=[ext])
    try:
        assert Path(f"/proc/{proc.pid}/maps").read_bytes().count(b"native\\012mod.cpython.so\n") > 1
        found = _find(site, proc.pid)
        assert found.verdict is Verdict.CURRENT and found.replaced_extensions == (), found
        source.write_text("int answer(void) { return 43; }\n")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "new.so"), str(source)], check=True)
        os.replace(tmp_path / "new.so", ext)
        found = _find(site, proc.pid)
        assert found.verdict is Verdict.STALE and found.replaced_extensions == (str(ext),)
    finally:
        _stop(proc)


def _deep_file(top: Path, length: int) -> Path:
    """A file below ``top`` whose path is about ``length`` characters: directories of 250-character names."""
    path = top / "deep"
    while len(str(path)) + 251 + 20 < length:
        path /= "d" * 250
    path.mkdir(parents=True)
    (path / "long_ext.so").write_bytes(b"\x7fELF" * 1024)
    return path / "long_ext.so"


@pytest.mark.slow  # real processes, and a maps file of 12 MB
def test_maps_is_read_whole_past_8_mib(tmp_path: Path) -> None:
    """3,000 mappings of a file whose path is 3,900 characters: 12 MB of maps. No cut line is taken for a
    replaced file, and the file really replaced, listed after 8 MiB, is named."""
    site = Path(os.path.realpath(make_venv(tmp_path / "venv").site))
    deep = _deep_file(site, 3900)
    target = site / "target.so"
    target.write_bytes(b"\x7fELF old code" * 400)
    proc = _hold([target], many=[(deep, 3000)])  # target first: the many go below it, listed before it
    try:
        maps = Path(f"/proc/{proc.pid}/maps").read_bytes()
        assert len(maps) > 10 << 20 and maps.count(str(deep).encode() + b"\n") == 3000
        assert maps.index(str(target).encode() + b"\n") > 8 << 20  # what the test is about
        found = _find(site, proc.pid)
        assert found.verdict is Verdict.CURRENT and found.replaced_extensions == (), found

        _replace(target, b"\x7fELF new code")
        assert (
            Path(f"/proc/{proc.pid}/maps").read_bytes().index(str(target).encode() + b" (deleted)") > 8 << 20
        )
        found = _find(site, proc.pid)
        assert found.verdict is Verdict.STALE and found.replaced_extensions == (str(target),)
        code, out, _ = cli("running", "--site-packages", str(site), "--format", "json")
        (doc,) = [p for p in json.loads(out)["processes"] if p["pid"] == proc.pid]
        assert code == 1 and doc["replaced_extensions"] == [str(target)]
    finally:
        _stop(proc)
