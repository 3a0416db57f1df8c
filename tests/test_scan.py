"""The integrity scan on real installed wheels, broken the way people break them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

import patchguard
from patchguard import Kind, Severity
from patchguard.formats.jsondoc import format_json
from patchguard.formats.text import format_table

from .helpers import Env, build_wheel, record_hash


def run_scan(env: Env, *names: str, **kw: object) -> patchguard.Report:
    """The integrity scan, code analysis off: these tests are about files (test_analysis.py: about code)."""
    kw.setdefault("analyse", False)
    return patchguard.scan(list(names), site_packages=[str(env.site)], **kw)  # type: ignore[arg-type]


def by_path(report: patchguard.Report) -> dict[str, patchguard.Finding]:
    found = {f.path: f for f in report.findings}
    assert len(found) == len(report.findings), report.findings
    return found


def test_pristine_install_has_no_findings(env: Env) -> None:
    report = run_scan(env)
    assert report.findings == ()
    assert report.distributions == (("minillm", "0.4.0"),)
    # Every file of the wheel plus the generated console script and installer metadata was hashed.
    assert (
        report.files_checked
        == len((env.dist_info("minillm", "0.4.0") / "RECORD").read_text().splitlines()) - 1
    )
    assert report.worst is Severity.NONE


def test_edited_python_file_is_modified_moderate(env: Env) -> None:
    mla = env.site / "minillm/models/mla.py"
    mla.write_text(mla.read_text() + "\nimport torch; torch.save(1, '/tmp/x.pt')\n")
    f = by_path(run_scan(env))["minillm/models/mla.py"]
    assert (f.kind, f.severity, f.rule) == (Kind.MODIFIED, Severity.MODERATE, "modified-python")
    assert (f.distribution, f.version) == ("minillm", "0.4.0")
    assert "RECORD says" in f.message


def test_same_size_edit_is_caught_by_hash(env: Env) -> None:
    cfg = env.site / "minillm/kernels/configs/E=8,N=128,device_name=Fake.json"
    data = bytearray(cfg.read_bytes())
    data[5] = ord("X") if data[5] != ord("X") else ord("Y")
    cfg.write_bytes(bytes(data))
    f = by_path(run_scan(env))[cfg.relative_to(env.site).as_posix()]
    assert (f.kind, f.severity, f.rule) == (Kind.MODIFIED, Severity.MINOR, "modified-data")
    assert "sha256 differs" in f.message


def test_missing_file(env: Env) -> None:
    (env.site / "minillm/platforms/cuda.py").unlink()
    f = by_path(run_scan(env))["minillm/platforms/cuda.py"]
    assert (f.kind, f.severity, f.rule) == (Kind.MISSING, Severity.MODERATE, "missing-file")


def test_modified_compiled_extension_is_high(tmp_path: Path) -> None:
    env = Env(tmp_path / "venv")
    so = "fastops/_C.cpython-311-x86_64-linux-gnu.so"
    env.install(
        build_wheel(
            tmp_path / "w", "fastops", "1.0", {"fastops/__init__.py": "", so: b"\x7fELF" + bytes(500)}
        )
    )
    target = env.site / so
    target.write_bytes(b"\x7fELF" + bytes(499) + b"\x01")
    report = run_scan(env)
    f = by_path(report)[so]
    assert (f.kind, f.severity, f.rule) == (Kind.MODIFIED, Severity.HIGH, "modified-extension")
    assert report.worst is Severity.HIGH


def test_unexpected_files_in_a_package(env: Env) -> None:
    pkg = env.site / "minillm"
    (pkg / "models/debug_hooks.py").write_text("import pdb\n")
    (pkg / "kernels/configs/E=16,N=64,device_name=H200.json").write_text("{}")
    # The interpreter's own bytecode of a listed source is not a finding.
    (pkg / "models/__pycache__").mkdir()
    (pkg / "models/__pycache__/mla.cpython-311.pyc").write_bytes(b"\x00" * 16)
    (pkg / "models/__pycache__/gone.cpython-311.pyc").write_bytes(b"\x00" * 16)
    (pkg / "layers/fused.pyc").write_bytes(b"\x00" * 16)
    found = by_path(run_scan(env))
    assert set(found) == {
        "minillm/models/debug_hooks.py",
        "minillm/kernels/configs/E=16,N=64,device_name=H200.json",
        "minillm/models/__pycache__/gone.cpython-311.pyc",
        "minillm/layers/fused.pyc",
    }
    py = found["minillm/models/debug_hooks.py"]
    assert (py.kind, py.severity, py.rule, py.distribution) == (
        Kind.UNEXPECTED,
        Severity.MODERATE,
        "unexpected-python",
        "minillm",
    )
    data = found["minillm/kernels/configs/E=16,N=64,device_name=H200.json"]
    assert (data.severity, data.rule) == (Severity.MINOR, "unexpected-file")
    assert found["minillm/models/__pycache__/gone.cpython-311.pyc"].rule == "orphan-bytecode"
    assert found["minillm/layers/fused.pyc"].rule == "unexpected-bytecode"


def test_startup_hooks_and_unowned_top_level(env: Env, tmp_path: Path) -> None:
    # An owned .pth that nobody touched is not a finding (like setuptools' distutils-precedence.pth).
    env.install(
        build_wheel(
            tmp_path / "w",
            "hookpkg",
            "1.0",
            {"hookpkg.pth": "import hookpkg_boot\n", "hookpkg_boot.py": "X = 1\n"},
        )
    )
    (env.site / "nccl_env.pth").write_text("import os; os.environ['NCCL_P2P_DISABLE'] = '1'\n")
    (env.site / "extra_paths.pth").write_text("/opt/patched/vllm\n")
    (env.site / "sitecustomize.py").write_text("import os\n")
    (env.site / "vllm_patched").mkdir()
    (env.site / "vllm_patched/__init__.py").write_text("")
    (env.site / "notes.txt").write_text("tried sm120 patch")
    (env.site / "README.txt").write_text(
        "This directory exists so that 3rd party packages can be installed\n"
        "here.  Read the source for site.py.\n"
    )
    found = by_path(run_scan(env))
    assert set(found) == {"nccl_env.pth", "extra_paths.pth", "sitecustomize.py", "vllm_patched/", "notes.txt"}
    pth = found["nccl_env.pth"]
    assert (pth.kind, pth.severity, pth.rule, pth.distribution) == (
        Kind.STARTUP_HOOK,
        Severity.HIGH,
        "pth-import",
        None,
    )
    assert "NCCL_P2P_DISABLE" in pth.message
    assert (found["extra_paths.pth"].kind, found["extra_paths.pth"].severity) == (
        Kind.UNEXPECTED,
        Severity.MODERATE,
    )
    sc = found["sitecustomize.py"]
    assert (sc.kind, sc.severity) == (Kind.STARTUP_HOOK, Severity.MODERATE)
    d = found["vllm_patched/"]
    assert (d.kind, d.severity, d.rule) == (Kind.UNEXPECTED, Severity.MODERATE, "unexpected-directory")
    assert found["notes.txt"].severity is Severity.MINOR


def test_modified_owned_pth_gaining_an_import_is_high(env: Env, tmp_path: Path) -> None:
    env.install(build_wheel(tmp_path / "w", "pathpkg", "1.0", {"pathpkg.pth": "./pathpkg_src\n"}))
    (env.site / "pathpkg.pth").write_text("./pathpkg_src\nimport os; os.system('id')\n")
    f = by_path(run_scan(env))["pathpkg.pth"]
    assert (f.kind, f.severity, f.rule) == (Kind.MODIFIED, Severity.HIGH, "modified-pth")


def test_naming_distributions_limits_the_scan(env: Env, tmp_path: Path) -> None:
    env.install(build_wheel(tmp_path / "w", "other", "2.0", {"other/__init__.py": "x = 1\n"}))
    (env.site / "other/__init__.py").write_text("x = 2\n")
    (env.site / "evil.pth").write_text("import os\n")
    report = run_scan(env, "MiniLLM")  # names are matched PEP 503-normalised
    assert report.distributions == (("minillm", "0.4.0"),)
    assert report.findings == ()
    with pytest.raises(patchguard.UsageError, match="not installed: vllm"):
        run_scan(env, "vllm")


def test_console_script_is_verified_by_absolute_path(env: Env) -> None:
    script = env.bin / "minillm-serve"
    rows = (env.dist_info("minillm", "0.4.0") / "RECORD").read_text()
    assert "../../../bin/minillm-serve" in rows
    script.write_text(script.read_text() + "\nimport pdb; pdb.set_trace()\n")
    f = by_path(run_scan(env))[str(script)]
    assert (f.kind, f.rule, f.severity) == (Kind.MODIFIED, "modified-script", Severity.MODERATE)
    script.unlink()
    assert by_path(run_scan(env))[str(script)].kind is Kind.MISSING


def _rewrite_record(env: Env, edit: str) -> None:
    record = env.dist_info("minillm", "0.4.0") / "RECORD"
    record.write_text(record.read_text() + edit)


def test_malformed_record_rows_are_findings_and_the_scan_goes_on(env: Env) -> None:
    record = env.dist_info("minillm", "0.4.0") / "RECORD"
    lines = record.read_text().splitlines()
    n = len(lines)
    _rewrite_record(
        env,
        "minillm/a.py,sha256=abc\n"  # two columns
        "minillm/b.py,md7=AAAA,4\n"  # unknown algorithm
        "minillm/c.py,sha256=not*base64,4\n"
        "minillm/d.py,sha256=" + "A" * 43 + ",-1\n",
    )
    (env.site / "minillm/envs.py").write_text("tampered = True\n")
    report = run_scan(env)
    bad = [f for f in report.findings if f.kind is Kind.RECORD_INVALID]
    assert [(f.line, f.severity) for f in bad] == [(n + i, Severity.MODERATE) for i in range(1, 5)]
    assert all(f.path == "minillm-0.4.0.dist-info/RECORD" for f in bad)
    messages = " | ".join(f.message for f in bad)
    assert "found 2" in messages and "unknown hash algorithm 'md7'" in messages
    assert "not urlsafe base64" in messages and "'-1' is not a whole number" in messages
    assert by_path_kind(report, Kind.MODIFIED) == ["minillm/envs.py"]


def by_path_kind(report: patchguard.Report, kind: Kind) -> list[str]:
    return [f.path for f in report.findings if f.kind is kind]


def test_no_record_and_egg_info_are_unverifiable_not_unexpected(env: Env, tmp_path: Path) -> None:
    (env.site / "legacy").mkdir()
    (env.site / "legacy/__init__.py").write_text("")
    egg = env.site / "legacy-0.1-py3.11.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: legacy\nVersion: 0.1\n")
    (egg / "top_level.txt").write_text("legacy\n")
    env.install(build_wheel(tmp_path / "w", "stripped", "3.0", {"stripped/__init__.py": ""}))
    (env.dist_info("stripped", "3.0") / "RECORD").unlink()
    report = run_scan(env)
    found = by_path(report)
    assert set(found) == {"legacy-0.1-py3.11.egg-info", "stripped-3.0.dist-info"}
    assert {(f.kind, f.severity, f.rule) for f in found.values()} == {
        (Kind.UNVERIFIABLE, Severity.INFO, "record-absent")
    }


def test_two_metadata_dirs_for_one_name(env: Env, tmp_path: Path) -> None:
    stale = env.site / "minillm-0.3.0.dist-info"
    shutil.copytree(env.dist_info("minillm", "0.4.0"), stale)
    (stale / "METADATA").write_text("Metadata-Version: 2.1\nName: minillm\nVersion: 0.3.0\n")
    dup = [f for f in run_scan(env).findings if f.rule == "duplicate-metadata"]
    assert sorted(f.path for f in dup) == ["minillm-0.3.0.dist-info", "minillm-0.4.0.dist-info"]
    assert all(f.kind is Kind.UNVERIFIABLE and f.severity is Severity.MODERATE for f in dup)


def test_could_not_check_is_not_a_failure(env: Env) -> None:
    weights = env.site / "minillm/model_loader/weights.py"
    weights.unlink()
    weights.mkdir()  # not a regular file
    cuda = env.site / "minillm/platforms/cuda.py"
    cuda.unlink()
    cuda.symlink_to(env.site / "nowhere.py")  # broken symlink
    found = by_path(run_scan(env))
    assert found["minillm/model_loader/weights.py"].kind is Kind.UNVERIFIABLE
    assert "not a regular file" in found["minillm/model_loader/weights.py"].message
    assert found["minillm/platforms/cuda.py"].kind is Kind.UNVERIFIABLE
    assert "broken symlink" in found["minillm/platforms/cuda.py"].message
    assert {f.severity for f in found.values()} == {Severity.MINOR}


def test_non_utf8_file_names_do_not_break_output(env: Env) -> None:
    bad = os.fsencode(env.site / "minillm") + b"/dump-\xff.bin"
    with open(bad, "wb") as out:
        out.write(b"x")
    report = run_scan(env)
    (f,) = report.findings
    assert f.kind is Kind.UNEXPECTED
    text = format_table(report) + format_json(report)
    text.encode("utf-8")  # printable: no lone surrogates left
    assert "dump-\\xff.bin" in text


def test_report_json_is_the_stable_schema(env: Env) -> None:
    (env.site / "minillm/models/mla.py").write_text("x = 1\n")
    before = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    doc = json.loads(format_json(run_scan(env)))
    # Issue 27 added where, when, what and which sets (additive: every key of /1 is still there).
    assert set(doc) == {
        "schema",
        "tool",
        "host",
        "time",
        "environment",
        "summary",
        "distributions",
        "applied_sets",
        "findings",
    }
    assert doc["schema"] == "patchguard.report/1"
    assert doc["tool"] == {"name": "patchguard", "version": patchguard.__version__}
    assert doc["host"] == os.uname().nodename
    assert before <= doc["time"] <= time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    assert doc["distributions"] == [{"name": "minillm", "version": "0.4.0"}]
    assert doc["applied_sets"] == {}
    assert doc["environment"]["site_packages"] == [str(env.site)]
    assert doc["environment"]["python"].startswith(f"{sys.version_info[0]}.")
    assert doc["summary"]["distributions"] == 1
    assert doc["summary"]["findings"] == {"high": 0, "moderate": 1, "minor": 0, "info": 0}
    (finding,) = doc["findings"]
    assert finding == {
        "kind": "modified",
        "severity": "moderate",
        "rule": "modified-python",
        "distribution": "minillm",
        "version": "0.4.0",
        "path": "minillm/models/mla.py",
        "digest": "sha256:" + hashlib.sha256(b"x = 1\n").hexdigest(),
        "line": None,
        "end_line": None,
        "function": None,
        "gate": None,
        "reach": None,
        "loaded": None,
        "evidence": [],
        "patch_set": None,
        "message": finding["message"],
        "source": None,
    }


# --- the stat cache --------------------------------------------------------------------------------------


def _settle() -> None:
    """Let fresh files age past the racy-clean window, so the cache may remember them."""
    time.sleep(0.12)


def test_warm_rescan_hashes_nothing(env: Env, _isolated_cache: Path) -> None:
    _settle()
    cold = run_scan(env)
    assert cold.files_hashed == cold.files_checked > 0
    warm = run_scan(env)
    assert warm.files_hashed == 0
    assert warm.findings == ()
    assert list((_isolated_cache / "statcache").glob("*.bin"))


def test_cache_never_hides_an_edit_with_reset_mtime(env: Env) -> None:
    _settle()
    run_scan(env)
    mla = env.site / "minillm/models/mla.py"
    st = mla.stat()
    original = mla.read_bytes()
    tampered = original.replace(b"def ", b"def_", 1)
    assert len(tampered) == len(original)
    with open(mla, "r+b") as f:  # in place: same inode, same size
        f.write(tampered)
    os.utime(mla, ns=(st.st_atime_ns, st.st_mtime_ns))  # `touch -d`: mtime as before
    assert (mla.stat().st_mtime_ns, mla.stat().st_size, mla.stat().st_ino) == (
        st.st_mtime_ns,
        st.st_size,
        st.st_ino,
    )
    report = run_scan(env)
    assert by_path_kind(report, Kind.MODIFIED) == ["minillm/models/mla.py"]
    assert report.files_hashed == 1


def test_record_change_invalidates_the_cache(env: Env) -> None:
    _settle()
    run_scan(env)
    _rewrite_record(env, "\n")
    assert run_scan(env).files_hashed > 0


def test_corrupt_cache_is_discarded(env: Env, _isolated_cache: Path) -> None:
    import hashlib
    import marshal

    _settle()
    run_scan(env)
    (cache_file,) = (_isolated_cache / "statcache").glob("*.bin")
    good = cache_file.read_bytes()
    magic = good[: good.index(b"\n") + 1]
    wrong_shape = marshal.dumps({"x": 5})
    for garbage in (
        b"",
        b"\x00not a cache",
        good[: len(good) // 2],  # truncated
        good[:-1] + bytes([good[-1] ^ 1]),  # one bit flipped: checksum mismatch
        magic + hashlib.sha256(wrong_shape).digest() + wrong_shape,  # checksum fine, shape wrong
    ):
        cache_file.write_bytes(garbage)
        report = run_scan(env)
        assert report.findings == ()
        assert report.files_hashed == report.files_checked
        assert cache_file.read_bytes().startswith(magic)


def test_no_cache_neither_reads_nor_writes(env: Env, _isolated_cache: Path) -> None:
    _settle()
    report = run_scan(env, use_cache=False)
    assert report.files_hashed == report.files_checked
    assert not _isolated_cache.exists()


# --- other environment shapes ---------------------------------------------------------------------------


@pytest.mark.slow  # pip install --target
def test_pip_target_directory_scripts_are_found_not_missing(tmp_path: Path, minillm_wheel: Path) -> None:
    import subprocess
    import sys

    target = tmp_path / "target"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(minillm_wheel),
        ],
        check=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert (target / "bin/minillm-serve").exists()
    report = patchguard.scan(site_packages=[str(target)])
    assert report.findings == ()
    (target / "bin/minillm-serve").write_text("#!/bin/sh\nexit 0\n")
    f = by_path(patchguard.scan(site_packages=[str(target)]))["bin/minillm-serve"]
    assert f.kind is Kind.MODIFIED


def test_record_paths_pointing_nowhere_are_unverifiable_not_missing(env: Env) -> None:
    shutil.rmtree(env.bin)
    (f,) = run_scan(env).findings
    assert (f.kind, f.rule, f.severity) == (Kind.UNVERIFIABLE, "files-elsewhere", Severity.INFO)
    assert f.message.startswith("1 file RECORD places outside site-packages")


def test_other_hash_algorithms_in_record(tmp_path: Path) -> None:
    import base64
    import hashlib

    env = Env(tmp_path / "venv")
    env.install(build_wheel(tmp_path / "w", "algos", "1.0", {"algos/__init__.py": "a = 1\n"}))
    record = env.dist_info("algos", "1.0") / "RECORD"
    data = b"a = 1\n"
    rows = []
    for line in record.read_text().splitlines():
        if line.startswith("algos/__init__.py,"):
            digest = base64.urlsafe_b64encode(hashlib.blake2b(data).digest()).rstrip(b"=").decode()
            line = f"algos/__init__.py,blake2b={digest},{len(data)}"
        rows.append(line)
    record.write_text("\n".join(rows) + "\n")
    assert run_scan(env).findings == ()
    (env.site / "algos/__init__.py").write_text("a = 2\n")
    assert by_path_kind(run_scan(env), Kind.MODIFIED) == ["algos/__init__.py"]
    assert record_hash(data).startswith("sha256=")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_permission_denied_is_could_not_check(minillm_wheel: Path) -> None:
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="pg-perm-"))
    try:
        top.chmod(0o755)
        env = Env(top / "venv")
        env.install(minillm_wheel)
        for p in [top, *top.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        assert run_scan(env, use_cache=False).findings == ()  # imports done while still root
        secret = env.site / "minillm/platforms/cuda.py"
        secret.chmod(0o000)
        os.seteuid(65534)  # nobody: root reads everything, a user does not
        try:
            report = run_scan(env, use_cache=False)
        finally:
            os.seteuid(0)
        (f,) = report.findings
        assert (f.path, f.kind, f.severity) == (
            "minillm/platforms/cuda.py",
            Kind.UNVERIFIABLE,
            Severity.MINOR,
        )
        assert f.message == "could not check: permission denied"
    finally:
        shutil.rmtree(top)


# --- regressions from review --------------------------------------------------------------------------------


def test_a_directory_swapped_in_for_a_listed_file_is_walked(env: Env) -> None:
    """pkg/mod.py replaced by a package pkg/mod.py/__init__.py: its code is unexpected, not overlooked."""
    mla = env.site / "minillm/models/mla.py"
    mla.unlink()
    mla.mkdir()
    (mla / "__init__.py").write_text("import os\nos.system('id')\n")
    found = {(f.kind, f.path) for f in run_scan(env).findings}
    assert (Kind.UNEXPECTED, "minillm/models/mla.py/__init__.py") in found
    assert (Kind.UNVERIFIABLE, "minillm/models/mla.py") in found


def test_metadata_that_is_not_utf8_falls_back_to_the_directory_name(env: Env) -> None:
    meta = env.dist_info("minillm", "0.4.0") / "METADATA"
    meta.write_bytes(meta.read_bytes().replace(b"Name: minillm", b"Name: minill\xe9m"))
    report = patchguard.scan(["minillm"], site_packages=[str(env.site)], analyse=False, use_cache=False)
    assert report.distributions == (("minillm", "0.4.0"),)
    json.dumps(report.to_json(), ensure_ascii=False).encode("utf-8")  # nothing unencodable in the output


def test_fifos_where_patchguard_reads_do_not_hang_the_scan(env: Env, tmp_path: Path) -> None:
    """A FIFO named RECORD, METADATA, a .pth or the site's README: a plain open() would wait forever."""
    import subprocess
    import sys

    other = build_wheel(tmp_path / "w", "other", "1.0", {"other/__init__.py": b""})
    env.install(other)
    for victim in (
        env.dist_info("minillm", "0.4.0") / "RECORD",
        env.dist_info("other", "1.0") / "METADATA",
        env.site / "hooks.pth",
        env.site / "README.txt",
    ):
        victim.unlink(missing_ok=True)
        os.mkfifo(victim)
    proc = subprocess.run(
        [sys.executable, "-m", "patchguard", "scan", "--site-packages", str(env.site), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    messages = {(f["rule"], f["path"]): f["message"] for f in report["findings"]}
    assert (
        "cannot read RECORD (not a regular file)"
        in messages[("record-row", "minillm-0.4.0.dist-info/RECORD")]
    )
    assert report["summary"]["distributions"] == 2  # "other" is still there, named by its directory
    assert any(path == "hooks.pth" for _, path in messages)
