"""Hashing in helper processes and the stat cache's key blobs, on real installed wheels.

A cold scan of a large environment hashes in helper processes (forked, or started as ``python -I -S``
where forking is not safe); a small one hashes in threads. Whichever does it, every file must get the same
verdict, and a helper that dies or answers nonsense must cost nothing but speed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeAlias, TypeVar

import pytest

import patchguard
from patchguard import Kind
from patchguard.integrity import hashing
from patchguard.integrity import verifier as fingerprint
from patchguard.integrity.records import discover
from patchguard.integrity.verifier import Status, Verifier

from .helpers import Env, record_hash

T = TypeVar("T")
Started: TypeAlias = "int | subprocess.Popen[bytes]"  # a helper process: its pid when forked, else a Popen
# A helper as _start_helpers returns it: (requests fd, replies fd, the process).
Process: TypeAlias = tuple[int, int, Started]


def _single_threaded_soon(seconds: float = 10.0) -> bool:
    """Whether this process is single-threaded (forking a helper wants it), or becomes so within ``seconds``.

    ``fingerprint._single_threaded`` counts the kernel's tasks (``/proc/self/task``). A thread that has been
    joined is gone for Python at once, but its task is listed until it has really exited, a moment later:
    right after a scan that hashed in threads (this test's or the previous test's) the count can still be
    two, and a verifier would not fork then. A live Python thread does not go away by waiting: False at once.
    """
    if sys.platform != "linux":
        return False
    deadline = time.monotonic() + seconds
    while not fingerprint._single_threaded():
        if threading.active_count() > 1 or time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def _break(env: Env) -> None:
    """Break an installed minillm every way a file can be broken."""
    site = env.site / "minillm"
    mla = site / "models/mla.py"
    data = mla.read_bytes()
    mla.write_bytes(data.replace(b"def ", b"def_", 1))  # same size, other bytes
    (site / "platforms/cuda.py").write_text("# shorter\n")  # other size
    (site / "model_loader/weights.py").unlink()  # missing
    fifo = site / "layers/rotary.py"
    fifo.unlink()
    os.mkfifo(fifo)  # not a regular file: must not hang the scan
    (site / "platforms/__init__.py").unlink()
    (site / "platforms/__init__.py").mkdir()  # a directory where a file was
    loader_init = site / "model_loader/__init__.py"
    loader_init.unlink()
    loader_init.symlink_to(site / "nowhere.py")  # broken symlink


def _verdicts(env: Env, processes: bool | None) -> list[tuple[str, Status, str | None, int | None]]:
    (dist,) = discover([str(env.site)])
    v = Verifier(workers=2, processes=processes)
    v.add(dist.checks, dist)
    result = v.finish()
    site = str(env.site) + "/"
    return [(o.check.path.removeprefix(site), o.status, o.reason, o.actual_size) for o in result.failures]


EXPECTED = [
    ("minillm/layers/rotary.py", Status.UNREADABLE, "not a regular file", None),
    ("minillm/model_loader/__init__.py", Status.UNREADABLE, "broken symlink", None),
    ("minillm/model_loader/weights.py", Status.MISSING, None, None),
    ("minillm/models/mla.py", Status.MODIFIED, None, None),  # actual size checked below
    ("minillm/platforms/__init__.py", Status.UNREADABLE, "not a regular file", None),
    ("minillm/platforms/cuda.py", Status.MODIFIED, None, len("# shorter\n")),
]


def _normalised(
    got: list[tuple[str, Status, str | None, int | None]],
) -> list[tuple[str, Status, str | None, int | None]]:
    return sorted((p, s, r, n if p.endswith("cuda.py") else None) for p, s, r, n in got)


@pytest.mark.parametrize("processes", [False, True], ids=["threads", "helpers"])
def test_every_verdict_is_the_same_in_threads_and_in_helper_processes(env: Env, processes: bool) -> None:
    _break(env)
    assert _normalised(_verdicts(env, processes)) == sorted(EXPECTED)


@pytest.fixture
def started_helpers(monkeypatch: pytest.MonkeyPatch) -> list[Started]:
    """Every helper process the test starts: a pid when forked, a ``Popen`` when spawned."""
    started: list[Started] = []
    real = fingerprint._start_helpers

    def spy(n: int) -> list[Process]:
        got = real(n)
        started.extend(p for _, _, p in got)
        return got

    monkeypatch.setattr(fingerprint, "_start_helpers", spy)
    return started


def test_helpers_started_as_python_when_forking_is_not_safe(
    env: Env, monkeypatch: pytest.MonkeyPatch, started_helpers: list[Started]
) -> None:
    _break(env)
    started = started_helpers
    monkeypatch.setattr(fingerprint, "_single_threaded", lambda: False)  # as if other threads were running
    assert _normalised(_verdicts(env, True)) == sorted(EXPECTED)
    assert len(started) == 2 and all(not isinstance(p, int) for p in started)  # Popen objects: spawned


def test_helpers_are_forked_when_single_threaded(env: Env, started_helpers: list[Started]) -> None:
    if not _single_threaded_soon():
        pytest.skip("forking helpers needs Linux and a single-threaded test process")
    started = started_helpers
    assert _verdicts(env, True) == []
    assert len(started) == 2 and all(isinstance(p, int) for p in started)  # pids: forked


@pytest.mark.parametrize(
    "helper",
    [
        "import sys; sys.exit(0)",  # dies at once
        "import sys; sys.stdin.buffer.read(4); "
        "sys.stdout.buffer.write(b'\\x05\\0\\0\\0junk!'); sys.stdout.flush()",  # not marshal
        "import sys, marshal; sys.stdin.buffer.read(4); d = marshal.dumps([('h',)]); "
        "sys.stdout.buffer.write(len(d).to_bytes(4, 'little') + d); sys.stdout.flush()",  # wrong count
        "import sys, marshal\n"  # one answer per file, each of them nonsense
        "i, o = sys.stdin.buffer, sys.stdout.buffer\n"
        "while h := i.read(4):\n"
        "    batch = marshal.loads(i.read(int.from_bytes(h, 'little')))\n"
        "    bad = [('h', 5, 'x'), ('s', None), ('e',), ('?', 1, 2), ('h', 'd', (1, 2))] * len(batch)\n"
        "    d = marshal.dumps(bad[: len(batch)])\n"
        "    o.write(len(d).to_bytes(4, 'little') + d)\n"
        "    o.flush()",
    ],
    ids=["exits", "garbage", "short-answer", "nonsense"],
)
def test_a_failing_helper_costs_only_speed(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helper: str
) -> None:
    _break(env)
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!{sys.executable}\n{helper}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(fingerprint, "_single_threaded", lambda: False)
    monkeypatch.setattr(sys, "executable", str(fake))
    assert _normalised(_verdicts(env, True)) == sorted(EXPECTED)


def test_cold_scan_of_a_large_environment_hashes_in_helpers(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The switch to helpers depends on the pending work: lower the bar and scan through the public API."""
    _break(env)
    in_threads = patchguard.scan(site_packages=[str(env.site)], analyse=False, use_cache=False)
    calls: list[int] = []
    real = fingerprint._start_helpers
    monkeypatch.setattr(fingerprint, "_HELPER_FILES", 1)

    def spy(n: int) -> list[Process]:
        calls.append(n)
        return real(n)

    monkeypatch.setattr(fingerprint, "_start_helpers", spy)
    in_helpers = patchguard.scan(site_packages=[str(env.site)], analyse=False, use_cache=False)
    assert calls, "no helper was started"

    def strip(r: patchguard.Report) -> list[tuple[Kind, str, str, str]]:
        return [(f.kind, f.rule, f.path, f.message) for f in r.findings]

    assert strip(in_helpers) == strip(in_threads)
    assert {f.path for f in in_helpers.findings if f.kind is Kind.MODIFIED} == {
        "minillm/models/mla.py",
        "minillm/platforms/cuda.py",
    }


def test_a_small_rescan_starts_no_process(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def none_started(n: int) -> list[Process]:
        calls.append(n)
        return []

    monkeypatch.setattr(fingerprint, "_start_helpers", none_started)
    report = patchguard.scan(site_packages=[str(env.site)], analyse=False, use_cache=False)
    assert report.files_hashed > 0 and calls == []


# --- what the stat cache remembers ----------------------------------------------------------------------


def _settle() -> None:
    time.sleep(0.12)  # past the racy-clean window


@pytest.fixture(params=["serial", "forked"], ids=["stat-here", "stat-in-helper"])
def stat_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each warm-scan test twice: stat keys taken here, and half of them by a forked helper (the bar for
    that lowered to one file). Returns the list of helpers forked (one per warm scan in the second case)."""
    forked: list[int] = []
    if request.param == "forked":
        if not _single_threaded_soon():
            pytest.skip("forking a stat helper needs Linux and a single-threaded test process")
        monkeypatch.setattr(fingerprint, "_PARALLEL_STAT", 1)
        real = Verifier.start_stats

        def spy(self: Verifier) -> None:
            _single_threaded_soon()  # the previous scan's hashing threads gone: a warm scan always forks
            real(self)
            if self._stat_child is not None:
                forked.append(self._stat_child[0])

        monkeypatch.setattr(Verifier, "start_stats", spy)
    return forked


def _scan(env: Env) -> patchguard.Report:
    return patchguard.scan(site_packages=[str(env.site)], analyse=False)


def test_a_modified_file_stays_reported_without_being_read_again(env: Env, stat_mode: list[int]) -> None:
    mla = env.site / "minillm/models/mla.py"
    mla.write_bytes(mla.read_bytes().replace(b"def ", b"def_", 1))
    _settle()
    first = _scan(env)
    again = _scan(env)
    assert [f.path for f in again.findings] == [f.path for f in first.findings] == ["minillm/models/mla.py"]
    assert again.files_hashed == 0
    assert again.findings[0].message == first.findings[0].message
    assert len(stat_mode) in (0, 1)  # forked once: for the one warm scan


def test_a_missing_file_stays_missing_on_a_warm_scan(env: Env, stat_mode: list[int]) -> None:
    (env.site / "minillm/model_loader/weights.py").unlink()
    _settle()
    assert [f.kind for f in _scan(env).findings] == [Kind.MISSING]
    assert [f.kind for f in _scan(env).findings] == [Kind.MISSING]


def test_a_file_put_back_is_clean_again(env: Env, stat_mode: list[int]) -> None:
    mla = env.site / "minillm/models/mla.py"
    original = mla.read_bytes()
    mla.write_bytes(original.replace(b"def ", b"def_", 1))
    _settle()
    assert len(_scan(env).findings) == 1
    mla.write_bytes(original)
    report = _scan(env)
    assert report.findings == () and report.files_hashed == 1


def test_rows_of_a_cached_distribution_are_read_again_from_record(env: Env) -> None:
    from patchguard.audit import run
    from patchguard.env import resolve_target
    from patchguard.errors import PatchguardError

    _settle()
    cold = run(target=resolve_target(site_packages=[str(env.site)]))
    warm = run(target=resolve_target(site_packages=[str(env.site)]))
    (fresh,), (cached,) = cold.dists, warm.dists
    assert cached.rows is None  # from the cache: not parsed until asked for
    assert cached.entries == fresh.entries
    assert cached.checks == fresh.checks
    again = run(target=resolve_target(site_packages=[str(env.site)]))
    record = Path(again.dists[0].record_path)
    record.write_text(record.read_text() + "minillm/extra.py,,\n")
    with pytest.raises(PatchguardError, match="RECORD changed"):
        _ = again.dists[0].entries


def test_an_error_mid_scan_stops_the_helpers_without_finishing_the_work(
    env: Env, started_helpers: list[Started]
) -> None:
    """Ctrl-C (or any error) while files are queued: nothing more is hashed, every helper is reaped."""
    (dist,) = discover([str(env.site)])
    with pytest.raises(KeyboardInterrupt), Verifier(workers=2, processes=True) as v:
        for _ in range(200):  # far more work than can be done before the interrupt
            v.add(dist.checks, dist)
        raise KeyboardInterrupt
    pids = [p if isinstance(p, int) else p.pid for p in started_helpers]
    assert pids
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # already reaped
    assert sum(len(w) for w, _ in v._done) < 200 * len(dist.checks)


# --- regressions from review: helpers that die, threads that cannot start ---------------------------------


def _many_files(tmp_path: Path, n: int = 3000) -> list[tuple[str, str, str, int | None]]:
    """``n`` small files and checks for them, every fifth one with a wrong digest."""
    checks: list[tuple[str, str, str, int | None]] = []
    for i in range(n):
        d = tmp_path / "many" / f"d{i // 50}"
        d.mkdir(parents=True, exist_ok=True)
        data = f"x = {i}\n".encode()
        (d / f"f{i}.py").write_bytes(data)
        digest = record_hash(data).removeprefix("sha256=")
        checks.append((str(d / f"f{i}.py"), "sha256", digest if i % 5 else "A" * 43, len(data)))
    return checks


def _in_time(fn: Callable[[], T], seconds: float = 120) -> T:
    """Run ``fn`` in a thread; fail (instead of hanging the suite) if it does not return in time."""
    out: list[T] = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the verifier hung"
    return out[0]


@pytest.mark.slow  # 3000 files written, then every helper process killed as it starts
@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
def test_helpers_killed_at_start_do_not_hang_the_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fork: bool
) -> None:
    import signal

    if fork and not _single_threaded_soon():
        pytest.skip("forking helpers needs Linux and a single-threaded test process")
    checks = _many_files(tmp_path)
    real = fingerprint._start_helpers
    started: list[Started] = []

    def killed(n: int) -> list[Process]:
        got = real(n)
        for _, _, p in got:
            os.kill(p if isinstance(p, int) else p.pid, signal.SIGKILL)
            started.append(p)
        return got

    monkeypatch.setattr(fingerprint, "_start_helpers", killed)
    if not fork:
        monkeypatch.setattr(fingerprint, "_single_threaded", lambda: False)

    def verify() -> list[str]:
        with Verifier(workers=2, processes=True) as v:
            v.add(checks, "tag")
            return [o.check.path for o in v.finish().failures]

    if fork:
        # Forking wants this thread to be the only one, so no watchdog thread (_in_time, and
        # faulthandler.dump_traceback_later too, which starts one): a hang ends the run with a traceback on
        # SIGALRM instead (faulthandler dumps it, then chains to the default action, which ends the process).
        import faulthandler

        faulthandler.register(signal.SIGALRM, chain=True)
        signal.alarm(120)
        try:
            failed = verify()
        finally:
            signal.alarm(0)
            faulthandler.unregister(signal.SIGALRM)
    else:
        failed = _in_time(verify)
    assert failed == [c[0] for i, c in enumerate(checks) if i % 5 == 0]
    assert started and all(isinstance(p, int) == fork for p in started)  # pids when forked, else Popen


def test_no_reader_thread_means_hashing_here_not_a_silent_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks = _many_files(tmp_path, 1500)

    def no_thread(*args: object, **kw: object) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(fingerprint._Helper, "__init__", no_thread)
    with Verifier(workers=2, processes=True) as v:
        v.add(checks, "tag")
        failed = [o.check.path for o in v.finish().failures]
    assert failed == [c[0] for i, c in enumerate(checks) if i % 5 == 0]


def test_a_worker_thread_that_dies_leaves_no_file_unverified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks = _many_files(tmp_path, 600)
    real = hashing.verify_batch  # what the verifier calls (it imports it from hashing)
    calls = [0]

    def flaky(batch: list[tuple[str, str, int, int]]) -> list[hashing.Result]:
        calls[0] += 1
        if calls[0] == 2:
            raise MemoryError  # the thread dies with its batch
        return real(batch)

    monkeypatch.setattr(fingerprint, "verify_batch", flaky)
    with Verifier(workers=2, processes=False) as v:
        v.add(checks, "tag")
        failed = [o.check.path for o in v.finish().failures]
    assert failed == [c[0] for i, c in enumerate(checks) if i % 5 == 0]


def test_an_edit_with_the_mtime_put_back_is_caught_whoever_takes_the_stat(
    env: Env, stat_mode: list[int]
) -> None:
    """The stat cache's promise, with the keys taken in a forked helper too: same size, same mtime."""
    _settle()
    assert _scan(env).findings == ()
    for rel in ("minillm/models/mla.py", "minillm/layers/linear.py"):  # one in each half, most likely
        f = env.site / rel
        st = f.stat()
        data = f.read_bytes()
        f.write_bytes(data.replace(b"def ", b"def_", 1))
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    report = _scan(env)
    assert sorted(f.path for f in report.findings) == ["minillm/layers/linear.py", "minillm/models/mla.py"]
    assert report.files_hashed == 2
    if stat_mode:
        assert all(pid > 0 for pid in stat_mode)
        for pid in stat_mode:
            with pytest.raises(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reaped


def test_a_stat_helper_that_dies_costs_only_speed(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    if not _single_threaded_soon():
        pytest.skip("forking a stat helper needs Linux and a single-threaded test process")
    import signal

    _settle()
    _scan(env)  # cold: hashed in threads, joined when it returns but perhaps not yet gone
    assert _single_threaded_soon(), "the first scan left a thread running"  # or start_stats would not fork
    (env.site / "minillm/models/mla.py").write_text("# gone\n")
    monkeypatch.setattr(fingerprint, "_PARALLEL_STAT", 1)
    real = Verifier.start_stats

    def killed(self: Verifier) -> None:
        real(self)
        assert self._stat_child is not None
        os.kill(self._stat_child[0], signal.SIGKILL)

    monkeypatch.setattr(Verifier, "start_stats", killed)
    assert [f.path for f in _scan(env).findings] == ["minillm/models/mla.py"]
