#!/usr/bin/env python3
"""Benchmark ``patchguard scan`` against a naive reference RECORD verifier on a large environment.

Usage::

    python benchmarks/bench_scan.py [--site-packages DIR | --python PY] [--repeat N] [--json]

With neither ``--site-packages`` nor ``--python`` the script creates (or reuses) a virtual environment at
``${PATCHGUARD_BENCH_DIR:-~/.cache/patchguard-bench}/venv`` holding ``torch==2.13.0 transformers scipy`` and
measures its purelib directory.

Everything is measured with the files already in the page cache: the reference verifier runs once, untimed,
before any timing starts. Each of the ``--repeat`` rounds runs the reference, a cold scan (``--no-cache``), a
warm scan and the warm ``check`` back to back, and each ratio is the median of the per-round ratios: a
shared machine's speed drifts over minutes, and runs seconds apart see the same machine. The CPU time of a
cold scan (its helper processes included) against the reference's is printed too: it says what the cold
ratio becomes with more cores than this machine has.

Progress goes to stderr; the result table (or, with ``--json``, a JSON object) goes to stdout. The exit
status is 0 whenever the benchmark ran, whatever the PASS/FAIL verdicts, and 2 when something could not be
run.

Standard library only.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CHUNK = 64 * 1024
BENCH_REQUIREMENTS = ("torch==2.13.0", "transformers", "scipy")
SYSCONFIG_QUERY = "import sysconfig,json;print(json.dumps(sysconfig.get_paths()))"
READY_MARKER = ".patchguard-bench-ready"
VERSION_RUNS = 10

# Targets: cold and warm scans relative to the reference verifier, peak RSS, start-up time.
TARGET_COLD_RATIO = 0.6
TARGET_WARM_RATIO = 0.2
TARGET_CHECK_S = 1.0  # `patchguard check` with a warm cache: "well under a second" before every restart
TARGET_RSS_MIB = 200.0
TARGET_VERSION_S = 0.15


class BenchError(Exception):
    """Something the benchmark needs could not be run; the script exits 2."""


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------------
# The environment to measure
# --------------------------------------------------------------------------------------------------------


def venv_root_of(python: Path) -> Path | None:
    """The virtual environment *python* belongs to (``pyvenv.cfg`` beside it or one level up), if any."""
    for candidate in (python.parent, python.parent.parent):
        if (candidate / "pyvenv.cfg").is_file():
            return candidate
    return None


def is_within(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def query_paths(python: Path, flags: Sequence[str]) -> dict[str, str]:
    cmd = [str(python), *flags, "-c", SYSCONFIG_QUERY]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise BenchError(f"cannot run {python}: {exc}") from exc
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    paths: dict[str, str] = json.loads(proc.stdout)
    return paths


def purelib_of(python: Path) -> Path:
    """Ask *python* for its purelib, without running ``site`` (``-S``) if that gives the right answer.

    With ``-S`` a virtual environment's interpreter reports its base installation's paths (``site`` is what
    switches ``sys.prefix`` to the venv), so when *python* lies in a venv and the ``-S`` answer is outside it,
    ask again without ``-S``.
    """
    python = python.absolute()  # not resolve(): a venv's python is a symlink to the base interpreter
    venv = venv_root_of(python)
    paths = query_paths(python, ["-I", "-S"])
    purelib = Path(paths["purelib"])
    log(f"{python} -I -S reports purelib {purelib}")
    if venv is not None and not is_within(purelib, venv):
        log(f"that is outside the venv {venv} (with -S the base prefix is reported); asking again without -S")
        paths = query_paths(python, ["-I"])
        purelib = Path(paths["purelib"])
        log(f"{python} -I reports purelib {purelib}")
        if not is_within(purelib, venv):
            log(f"warning: purelib {purelib} is still outside the venv {venv}")
    if paths.get("platlib") and Path(paths["platlib"]) != purelib:
        log(f"note: platlib {paths['platlib']} differs from purelib; only purelib is measured")
    if not purelib.is_dir():
        raise BenchError(f"purelib {purelib} of {python} is not a directory")
    return purelib


def default_python() -> Path:
    """Create or reuse the benchmark venv and return its interpreter."""
    base = Path(os.environ.get("PATCHGUARD_BENCH_DIR") or "~/.cache/patchguard-bench").expanduser()
    venv = base / "venv"
    python = venv / "bin" / "python"
    marker = venv / READY_MARKER
    if python.exists() and marker.exists():
        log(f"reusing benchmark venv {venv}")
        return python
    try:
        if not python.exists():
            log(f"creating benchmark venv {venv} with {sys.executable}")
            base.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        cmd = [str(python), "-m", "pip", "install", *BENCH_REQUIREMENTS]
        log(f"installing: {' '.join(cmd)} (this takes a while)")
        subprocess.run(cmd, check=True, stdout=sys.stderr)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BenchError(f"could not prepare the benchmark venv {venv}: {exc}") from exc
    marker.write_text(" ".join(BENCH_REQUIREMENTS) + "\n", encoding="utf-8")
    return python


# --------------------------------------------------------------------------------------------------------
# The reference verifier
# --------------------------------------------------------------------------------------------------------


@dataclass
class ReferenceResult:
    records: int = 0
    files: int = 0  # files hashed and compared
    bytes: int = 0
    mismatched: int = 0
    missing: int = 0
    unsupported: int = 0  # rows whose hash algorithm hashlib does not know, or malformed hash fields


def reference_verify(site: Path) -> ReferenceResult:
    """Naive, single-threaded RECORD verification of every distribution in *site*."""
    result = ReferenceResult()
    for record in sorted(site.glob("*.dist-info/RECORD")):
        result.records += 1
        with open(record, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        for row in rows:
            if len(row) < 2 or not row[1]:
                continue
            algo, sep, expected = row[1].partition("=")
            if not sep:
                result.unsupported += 1
                continue
            try:
                digest = hashlib.new(algo)
            except ValueError:
                result.unsupported += 1
                continue
            try:
                with open(site / row[0], "rb") as fh:
                    while chunk := fh.read(CHUNK):
                        digest.update(chunk)
                        result.bytes += len(chunk)
            except FileNotFoundError:
                result.missing += 1
                continue
            result.files += 1
            if base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii") != expected:
                result.mismatched += 1
    return result


def warm_page_cache(site: Path) -> ReferenceResult:
    """Read every RECORD-listed file once (and stat the whole tree) so later runs hit the page cache."""
    for path in site.rglob("*"):
        try:
            path.lstat()
        except OSError:
            pass
    return reference_verify(site)


# --------------------------------------------------------------------------------------------------------
# Running patchguard
# --------------------------------------------------------------------------------------------------------


def patchguard_command() -> list[str]:
    found = shutil.which("patchguard")
    if found:
        return [found]
    beside = Path(sys.executable).parent / "patchguard"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-m", "patchguard"]


@dataclass
class Run:
    seconds: float
    exit_code: int
    maxrss_kib: int
    stderr: str = ""
    cpu_s: float = 0.0  # user + system time, its helper processes included (they are waited for)

    def __str__(self) -> str:
        return (
            f"{self.seconds:.3f}s (cpu {self.cpu_s:.2f}s), exit {self.exit_code}, "
            f"peak RSS {self.maxrss_kib / 1024:.1f} MiB"
        )


def run_child(
    cmd: Sequence[str],
    env: Mapping[str, str],
    stdout_path: Path | None = None,
    ok_codes: Sequence[int] = (0, 1),
) -> Run:
    """Run *cmd*; return its wall time, exit code and its own peak RSS (``wait4``, not RUSAGE_CHILDREN)."""
    with tempfile.TemporaryFile() as err:
        out = open(stdout_path, "wb") if stdout_path else None  # noqa: SIM115 - closed below
        try:
            start = time.perf_counter()
            try:
                proc = subprocess.Popen(cmd, stdout=out or subprocess.DEVNULL, stderr=err, env=dict(env))
            except OSError as exc:
                raise BenchError(f"cannot run {' '.join(cmd)}: {exc}") from exc
            _, status, usage = os.wait4(proc.pid, 0)
            seconds = time.perf_counter() - start
        finally:
            if out:
                out.close()
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code  # reaped by wait4: tell Popen so it does not wait again
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    if code not in ok_codes:
        raise BenchError(f"{' '.join(cmd)} exited {code}; its stderr:\n{stderr}")
    maxrss = usage.ru_maxrss // 1024 if sys.platform == "darwin" else usage.ru_maxrss  # bytes on macOS
    return Run(seconds, code, maxrss, stderr, usage.ru_utime + usage.ru_stime)


def timed(fn: Callable[[], Run], repeat: int) -> list[Run]:
    return [fn() for _ in range(repeat)]


def median_seconds(runs: Sequence[Run]) -> float:
    return statistics.median(r.seconds for r in runs)


def summarize_findings(report_path: Path, run: Run) -> dict[str, Any]:
    """Count the findings of a scan's JSON report by kind and keep a few examples.

    A run that printed no JSON at all did not scan (exit 1 from a missing module looks like "findings").
    """
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        message = f"the scan exited {run.exit_code} without a JSON report on stdout ({exc})"
        raise BenchError(f"{message}; its stderr:\n{run.stderr}") from exc
    findings = report.get("findings") if isinstance(report, dict) else None
    if not isinstance(findings, list):
        return {"error": "the JSON report has no 'findings' list"}
    kinds = Counter(str(f.get("kind")) for f in findings if isinstance(f, dict))
    examples = [
        {k: f.get(k) for k in ("kind", "severity", "distribution", "path")}
        for f in findings[:5]
        if isinstance(f, dict)
    ]
    summary = report.get("summary")
    checked = summary.get("files_checked") if isinstance(summary, dict) else None
    return {"total": len(findings), "by_kind": dict(kinds), "examples": examples, "files_checked": checked}


# --------------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def benchmark(site: Path, repeat: int) -> dict[str, Any]:
    log(f"site-packages: {site}")
    log("warming the page cache: one untimed reference pass (every measurement below reads from it)")
    t0 = time.perf_counter()
    warm = warm_page_cache(site)
    log(
        f"  {warm.files} files, {warm.bytes / 1e6:.1f} MB from {warm.records} RECORDs in "
        f"{time.perf_counter() - t0:.2f}s; mismatched {warm.mismatched}, missing {warm.missing}, "
        f"unsupported {warm.unsupported}"
    )

    pg = patchguard_command()
    log(f"patchguard command: {' '.join(pg)}")
    scan = [*pg, "scan", "--site-packages", str(site)]
    gate_cmd = [*pg, "check", "--site-packages", str(site)]

    with tempfile.TemporaryDirectory(prefix="pgbench-") as tmp:
        tmpdir = Path(tmp)
        cold_cache = tmpdir / "cold-cache"
        warm_cache = tmpdir / "warm-cache"
        cold_cache.mkdir()
        warm_cache.mkdir()
        cold_env = {**os.environ, "PATCHGUARD_CACHE_DIR": str(cold_cache)}
        warm_env = {**os.environ, "PATCHGUARD_CACHE_DIR": str(warm_cache)}
        report_path = tmpdir / "report.json"

        cold_cmd = [*scan, "--no-cache", "--format", "json"]
        warm_cmd = [*scan, "--format", "json"]
        log(f"cold: one untimed check run of {' '.join(cold_cmd)}")
        check = run_child(cold_cmd, cold_env, stdout_path=report_path)
        log(f"  {check}")
        findings = summarize_findings(report_path, check)
        log(f"warm: filling the cache (untimed) with {' '.join(warm_cmd)}")
        fill = run_child(warm_cmd, warm_env)
        log(f"  {fill}")

        # One round = reference, cold, warm, check, back to back: this machine's speed drifts over
        # minutes, so each ratio compares runs made within seconds of each other (median over rounds).
        ref_times: list[float] = []
        ref_cpu: list[float] = []
        cold: list[Run] = []
        warm_runs: list[Run] = []
        gate_runs: list[Run] = []
        for i in range(repeat):
            cpu0, start = time.process_time(), time.perf_counter()
            reference_verify(site)
            ref_times.append(time.perf_counter() - start)
            ref_cpu.append(time.process_time() - cpu0)
            cold.append(run_child(cold_cmd, cold_env))
            warm_runs.append(run_child(warm_cmd, warm_env))
            gate_runs.append(run_child(gate_cmd, warm_env))
            log(
                f"round {i + 1}/{repeat}: reference {ref_times[-1]:.3f}s (cpu {ref_cpu[-1]:.2f}s); "
                f"cold {cold[-1]}; warm {warm_runs[-1]}; check {gate_runs[-1].seconds:.3f}s"
            )
        no_cache_wrote = sorted(str(p.relative_to(cold_cache)) for p in cold_cache.rglob("*"))
        if no_cache_wrote:
            log(f"warning: --no-cache runs wrote into PATCHGUARD_CACHE_DIR: {no_cache_wrote[:5]}")
        if any(r.exit_code != check.exit_code for r in [*cold, fill, *warm_runs]):
            log("warning: exit codes differ between runs")

    version_cmd = [*pg, "--version"]
    with tempfile.TemporaryDirectory(prefix="pgbench-") as tmp:
        version_out = Path(tmp) / "version.txt"
        run_child(version_cmd, os.environ, version_out, ok_codes=(0,))  # untimed: compiles, caches
        version_text = version_out.read_text(encoding="utf-8", errors="replace").strip()
    log(f"patchguard --version: {version_text!r}")
    versions = timed(lambda: run_child(version_cmd, os.environ, ok_codes=(0,)), VERSION_RUNS)
    version_s = median_seconds(versions)
    log(f"--version: median {version_s:.3f}s of {VERSION_RUNS}")

    ref_s = statistics.median(ref_times)
    cold_s = median_seconds(cold)
    warm_s = median_seconds(warm_runs)
    check_s = median_seconds(gate_runs)
    cold_ratio = statistics.median(c.seconds / r for c, r in zip(cold, ref_times, strict=True))
    warm_ratio = statistics.median(w.seconds / r for w, r in zip(warm_runs, ref_times, strict=True))
    cold_cpu_ratio = statistics.median(c.cpu_s / r for c, r in zip(cold, ref_cpu, strict=True))
    rss_cold = max(r.maxrss_kib for r in [check, *cold]) / 1024
    rss_warm = max(r.maxrss_kib for r in [fill, *warm_runs]) / 1024
    rss = max(rss_cold, rss_warm)
    return {
        "site_packages": str(site),
        "patchguard": pg,
        "patchguard_version": version_text,
        "repeat": repeat,
        "page_cache": "warm (one untimed reference pass before timing)",
        "files": warm.files,
        "bytes": warm.bytes,
        "reference": asdict(warm),
        "reference_s": ref_s,
        "cold_s": cold_s,
        "warm_s": warm_s,
        "check_s": check_s,
        "cold_ratio": cold_ratio,
        "warm_ratio": warm_ratio,
        "cold_cpu_ratio": cold_cpu_ratio,
        "cpus": os.cpu_count(),
        "peak_rss_mib": rss,
        "peak_rss_cold_mib": rss_cold,
        "peak_rss_warm_mib": rss_warm,
        "version_s": version_s,
        "scan_exit_code": check.exit_code,
        "findings": findings,
        "no_cache_wrote_files": len(no_cache_wrote),
        "targets": {
            "cold_ratio": TARGET_COLD_RATIO,
            "warm_ratio": TARGET_WARM_RATIO,
            "peak_rss_mib": TARGET_RSS_MIB,
            "version_s": TARGET_VERSION_S,
            "check_s": TARGET_CHECK_S,
        },
        "verdicts": {
            "cold_ratio": verdict(cold_ratio <= TARGET_COLD_RATIO),
            "warm_ratio": verdict(warm_ratio <= TARGET_WARM_RATIO),
            "peak_rss_mib": verdict(rss <= TARGET_RSS_MIB),
            "version_s": verdict(version_s <= TARGET_VERSION_S),
            "check_s": verdict(check_s < TARGET_CHECK_S),
        },
    }


def row(name: str, value: str, target: str = "", result: str = "") -> str:
    return f"{name:<22}{value:>12}  {target:>10}  {result}".rstrip()


def format_table(res: Mapping[str, Any]) -> str:
    v = res["verdicts"]
    f = res["findings"]
    lines = [
        f"site-packages : {res['site_packages']}",
        f"patchguard    : {' '.join(res['patchguard'])} ({res['patchguard_version']})",
        f"page cache    : {res['page_cache']}; medians of {res['repeat']} rounds on {res['cpus']} CPUs",
        f"files         : {res['files']}",
        f"bytes         : {res['bytes']} ({res['bytes'] / 1e6:.1f} MB)",
        "",
        f"{'measure':<22}{'value':>12}  {'target':>10}  verdict",
        row("reference (s)", f"{res['reference_s']:.3f}"),
        row("cold scan (s)", f"{res['cold_s']:.3f}"),
        row("warm scan (s)", f"{res['warm_s']:.3f}"),
        row("warm check (s)", f"{res['check_s']:.3f}", f"< {TARGET_CHECK_S}", v["check_s"]),
        row("cold / reference", f"{res['cold_ratio']:.3f}", f"<= {TARGET_COLD_RATIO}", v["cold_ratio"]),
        row("warm / reference", f"{res['warm_ratio']:.3f}", f"<= {TARGET_WARM_RATIO}", v["warm_ratio"]),
        row("cold cpu / ref cpu", f"{res['cold_cpu_ratio']:.3f}") + "  (CPU time, helpers included)",
        row("peak RSS (MiB)", f"{res['peak_rss_mib']:.1f}", f"<= {TARGET_RSS_MIB:g}", v["peak_rss_mib"])
        + f"  (cold {res['peak_rss_cold_mib']:.1f}, warm {res['peak_rss_warm_mib']:.1f})",
        row("--version (s)", f"{res['version_s']:.3f}", f"<= {TARGET_VERSION_S}", v["version_s"]),
        "",
        f"reference: {res['reference']['mismatched']} mismatched, {res['reference']['missing']} missing",
    ]
    if "error" in f:
        lines.append(f"patchguard report: {f['error']}")
    else:
        lines.append(
            f"patchguard scan: exit {res['scan_exit_code']}, checked {f['files_checked']} files, "
            f"{f['total']} findings {f['by_kind']}"
        )
        lines.extend(f"  e.g. {json.dumps(e)}" for e in f["examples"])
    if res["no_cache_wrote_files"]:
        lines.append(
            f"warning: --no-cache wrote {res['no_cache_wrote_files']} files into PATCHGUARD_CACHE_DIR"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--site-packages", type=Path, metavar="DIR", help="the site-packages directory to scan"
    )
    where.add_argument("--python", type=Path, metavar="PY", help="scan the purelib of this interpreter")
    parser.add_argument(
        "--repeat", type=int, default=5, metavar="N", help="timed rounds (reference, cold, warm, check)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.site_packages is not None:
            site = args.site_packages.absolute()
            if not site.is_dir():
                raise BenchError(f"{site} is not a directory")
        else:
            site = purelib_of(args.python if args.python is not None else default_python())
        result = benchmark(site, args.repeat)
    except BenchError as exc:
        print(f"bench_scan: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else format_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
