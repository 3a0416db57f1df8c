#!/usr/bin/env python3
"""Noise of ``patchguard scan`` on real, untouched installs: every HIGH or MODERATE finding is a bug.

Usage::

    python benchmarks/bench_realbox.py [--population a|b|all] [--installer pip|uv|all] [--batch-size N]
                                       [--limit N] [--python PY] [--repeat N] [--json] [--json-file FILE]

Populations (their lists live in ``benchmarks/populations/``; the venvs never live in the repository):

* ``a`` / ``vllm-sglang``: one venv where ``pip install vllm==0.33.0`` and then ``pip install sglang==0.5.23``
  ran one after the other (``vllm-sglang.txt``: one ``pip install`` step a line). ``--python PY`` scans that
  existing environment instead of building it.
* ``b`` / ``top1000``: the 1,000 most downloaded PyPI packages (``top1000.txt``), in batches of
  ``--batch-size`` names a venv, installed with pip (``--prefer-binary``, byte-compiled as pip does by
  default) and with uv (``uv venv`` + ``uv pip install --python VENV/bin/python``). A batch that fails to
  resolve or build is installed one name at a time into its venv; the names that still fail are skipped and
  listed.

The venvs are made under ``${PATCHGUARD_BENCH_DIR:-~/.cache/patchguard-bench}/realbox/``; one holding a
complete marker (``.patchguard-realbox.json``, written when its install finished) is reused, so a rerun only
scans.

For every venv: ``patchguard scan --python VENV/bin/python --format json --no-cache`` with a fresh, empty
``PATCHGUARD_CACHE_DIR`` (cold; its report gives the findings), the same without ``--no-cache`` in a cache
dir filled by an untimed run (warm), and ``patchguard check --python VENV/bin/python --format status`` once.
A run exiting other than 0/1, printing a traceback, or giving no JSON report is a crash: recorded, and the
benchmark goes on. Times are compared with a hand-written single-thread RECORD check of the same
site-packages (the reference verifier of ``bench_scan.py``): median of ``--repeat`` rounds for (a), one
round a venv, summed, for (b).

Progress goes to stderr; one table per population and installer (or, with ``--json``, one JSON object) goes
to stdout. Exit status: 0 when the benchmark ran (it is a measure, not a gate), 2 when an environment could
not be built at all (or a tool could not be run).

Standard library only (plus the ``patchguard`` and ``uv`` executables).
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHUNK = 64 * 1024
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b.*:")  # "RuntimeError: failed to ..."
HERE = Path(__file__).resolve().parent
POPULATIONS = HERE / "populations"
MARKER = ".patchguard-realbox.json"
SEVERITIES = ("high", "moderate", "minor", "info")
POPULATION_NAMES = {"a": "vllm-sglang", "b": "top1000"}
SYSCONFIG_QUERY = "import sysconfig,json;print(json.dumps(sysconfig.get_paths()))"

# Targets printed beside the figures (a measure, not a gate).
TARGET_HIGH = 0
TARGET_MODERATE = 0
TARGET_CRASHES = 0
TARGET_COLD_RATIO = 0.5
TARGET_WARM_RATIO = 0.1

BIG_REFERENCE_S = 3.0  # venvs whose reference check takes this long are "big" (their ratios are printed too)
EXAMPLES_PER_RULE = 5
MESSAGE_CHARS = 300
STDERR_TAIL_CHARS = 2000
# Environment variables that would change what the installers write (no byte-compiling, another venv).
INSTALL_ENV_DROP = ("PYTHONDONTWRITEBYTECODE", "PIP_NO_COMPILE", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")


class BenchError(Exception):
    """A tool the benchmark needs could not be run; the script exits 2."""


class BuildError(BenchError):
    """An environment could not be built at all; the script exits 2."""


def log(message: str) -> None:
    print(f"[realbox {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def bench_root() -> Path:
    base = Path(os.environ.get("PATCHGUARD_BENCH_DIR") or "~/.cache/patchguard-bench").expanduser()
    return base / "realbox"


def install_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in INSTALL_ENV_DROP}


def scan_env(cache_dir: Path) -> dict[str, str]:
    # Without PYTHONDONTWRITEBYTECODE: else every run compiles patchguard's modules from source again (tens
    # of milliseconds a run, most of a small environment's scan), which no installed patchguard does.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PATCHGUARD_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env["PATCHGUARD_CACHE_DIR"] = str(cache_dir)
    return env


# --------------------------------------------------------------------------------------------------------
# Populations
# --------------------------------------------------------------------------------------------------------


def read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BenchError(f"cannot read the population list {path}: {exc}") from exc
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def read_steps(path: Path) -> list[list[str]]:
    """Ordered install steps: each line holds the arguments of one ``pip install``."""
    return [line.split() for line in read_lines(path)]


def read_ranked(path: Path) -> list[str]:
    """Names in rank order: the first column of each line."""
    return [line.split()[0] for line in read_lines(path)]


# --------------------------------------------------------------------------------------------------------
# Building the venvs
# --------------------------------------------------------------------------------------------------------


@dataclass
class Tools:
    patchguard: list[str]
    uv: str | None
    base_python: str


@dataclass
class BuildOptions:
    batch_timeout: float
    name_timeout: float
    min_free_gb: float
    budget_s: float | None  # stop starting new builds after this much installing (None: no limit)
    started: float = field(default_factory=time.monotonic)
    install_s: float = 0.0  # spent installing in this invocation

    def out_of_budget(self) -> bool:
        return self.budget_s is not None and self.install_s >= self.budget_s


@dataclass
class Venv:
    """One environment to measure, built here (or given with ``--python``)."""

    name: str
    path: Path
    python: Path
    names: list[str]  # what was asked for (install arguments, in order)
    status: str = "pending"  # built | reused | given | skipped
    skip_reason: str = ""
    build_s: float = 0.0
    failed: list[dict[str, str]] = field(default_factory=list)  # names that would not install, with why
    batch_ok: bool = True  # the batch installed in one go (no one-at-a-time fallback)

    @property
    def usable(self) -> bool:
        return self.status in ("built", "reused", "given")


@dataclass
class Step:
    rc: int
    seconds: float
    tail: str
    timed_out: bool = False


def run_logged(cmd: Sequence[str], log_path: Path, timeout: float) -> Step:
    """Run an install command with its output appended to *log_path*; kill its process group on time-out."""
    with open(log_path, "ab") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n".encode())
        fh.flush()
        offset = fh.tell()
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(cmd),
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=install_env(),
                start_new_session=True,
            )
        except OSError as exc:
            raise BuildError(f"cannot run {' '.join(cmd)}: {exc}") from exc
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            rc = proc.wait()
        seconds = time.monotonic() - start
        fh.write(f"# exit {rc}{' (timed out)' if timed_out else ''} after {seconds:.1f}s\n".encode())
    with open(log_path, "rb") as fh:
        fh.seek(offset)
        out = fh.read().decode("utf-8", "replace")
    return Step(rc, seconds, out[-STDERR_TAIL_CHARS:], timed_out)


def failure_reason(step: Step) -> str:
    """A short why from an install's output: the last exception raised, then the installer's error lines."""
    if step.timed_out:
        return f"timed out after {step.seconds:.0f}s"
    lines = [line.strip() for line in step.tail.splitlines()]
    lines = [line for line in lines if line and not line.startswith(("# exit", "note:", "hint:"))]
    raised = [line for line in lines if EXCEPTION_LINE.match(line)]
    errors = [
        line
        for line in lines
        if line.lower().startswith(("error", "caused by", "\u00d7", "\u2570")) or "No matching" in line
    ]
    picked = raised[-1:] + [e for e in errors[-3:] if e not in raised[-1:]]
    return " | ".join(picked or lines[-3:])[:500] or f"exit {step.rc}"


def create_command(installer: str, venv: Path, tools: Tools) -> list[str]:
    if installer == "uv":
        assert tools.uv is not None
        return [tools.uv, "venv", "--python", tools.base_python, str(venv)]
    return [tools.base_python, "-m", "venv", str(venv)]


def install_command(installer: str, python: Path, names: Sequence[str], tools: Tools) -> list[str]:
    if installer == "uv":
        assert tools.uv is not None
        return [tools.uv, "pip", "install", "--python", str(python), *names]
    return [str(python), "-m", "pip", "install", "--prefer-binary", *names]


def read_marker(venv: Venv) -> dict[str, Any] | None:
    try:
        data = json.loads((venv.path / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def may_start_build(venv: Venv, opts: BuildOptions) -> bool:
    if opts.out_of_budget():
        venv.status, venv.skip_reason = "skipped", f"install budget of {opts.budget_s:.0f}s spent"
        return False
    free_gb = shutil.disk_usage(venv.path.parent).free / 1e9
    if free_gb < opts.min_free_gb:
        venv.status = "skipped"
        venv.skip_reason = f"only {free_gb:.1f} GB free on disk (< {opts.min_free_gb:g} GB)"
        return False
    return True


def prepare(
    venv: Venv, installer: str, tools: Tools, opts: BuildOptions, steps: Sequence[Sequence[str]] | None
) -> None:
    """Reuse *venv* when its marker says it is complete for the same request, else (re)build it.

    ``steps`` given: population (a), every step must succeed (else :class:`BuildError`). Otherwise one batch
    of names, with the one-at-a-time fallback.
    """
    marker = read_marker(venv)
    if marker is not None and marker.get("names") == venv.names and venv.python.exists():
        venv.status = "reused"
        venv.build_s = float(marker.get("build_s", 0.0))
        venv.failed = list(marker.get("failed", []))
        venv.batch_ok = bool(marker.get("batch_ok", True))
        log(
            f"{venv.name}: reusing {venv.path} (built in {venv.build_s:.0f}s, "
            f"{len(venv.failed)} names failed)"
        )
        return
    venv.path.parent.mkdir(parents=True, exist_ok=True)
    if not may_start_build(venv, opts):
        log(f"{venv.name}: not built: {venv.skip_reason}")
        return
    if venv.path.exists():
        log(f"{venv.name}: {venv.path} exists without a complete marker; removing it")
        shutil.rmtree(venv.path)
    install_log = (
        venv.path.parent / f"{venv.name}.install.log"
    )  # beside: `uv venv` wants no files in the venv
    install_log.unlink(missing_ok=True)
    start = time.monotonic()
    try:
        step = run_logged(create_command(installer, venv.path, tools), install_log, 600)
        if step.rc != 0:
            raise BuildError(f"{venv.name}: creating the venv failed: {failure_reason(step)}")
        if installer == "pip":
            step = run_logged(
                [str(venv.python), "-m", "pip", "install", "--upgrade", "pip"], install_log, 900
            )
            if step.rc != 0:
                log(
                    f"{venv.name}: upgrading pip failed ({failure_reason(step)}); "
                    "going on with the venv's pip"
                )
        if steps is not None:
            for args in steps:
                log(f"{venv.name}: {installer} install {' '.join(args)} (log: {install_log})")
                step = run_logged(
                    install_command(installer, venv.python, args, tools), install_log, opts.batch_timeout
                )
                log(f"  exit {step.rc} after {step.seconds:.0f}s")
                if step.rc != 0:
                    raise BuildError(
                        f"{venv.name}: install step {' '.join(args)} failed: {failure_reason(step)}"
                    )
        else:
            log(f"{venv.name}: {installer} install of {len(venv.names)} names (log: {install_log})")
            step = run_logged(
                install_command(installer, venv.python, venv.names, tools), install_log, opts.batch_timeout
            )
            log(f"  exit {step.rc} after {step.seconds:.0f}s")
            if step.rc != 0:
                venv.batch_ok = False
                log(f"{venv.name}: the batch failed ({failure_reason(step)[:200]}); one name at a time")
                for name in venv.names:
                    one = run_logged(
                        install_command(installer, venv.python, [name], tools), install_log, opts.name_timeout
                    )
                    if one.rc != 0:
                        reason = failure_reason(one)
                        venv.failed.append({"name": name, "reason": reason})
                        log(f"  {name}: failed ({reason[:160]})")
    finally:
        opts.install_s += time.monotonic() - start
    venv.build_s = time.monotonic() - start
    venv.status = "built"
    marker_doc = {
        "names": venv.names,
        "installer": installer,
        "build_s": venv.build_s,
        "failed": venv.failed,
        "batch_ok": venv.batch_ok,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (venv.path / MARKER).write_text(json.dumps(marker_doc, indent=1) + "\n", encoding="utf-8")
    log(f"{venv.name}: built in {venv.build_s:.0f}s; {len(venv.failed)} of {len(venv.names)} names failed")


def population_venvs(population: str, installer: str, args: argparse.Namespace) -> list[Venv]:
    root = bench_root()
    if population == "vllm-sglang":
        if args.python is not None:
            python = args.python.absolute()
            return [Venv(f"given:{python}", python.parent.parent, python, [], status="given")]
        steps = read_steps(POPULATIONS / "vllm-sglang.txt")
        path = root / f"vllm-sglang-{installer}"
        return [Venv(path.name, path, path / "bin" / "python", [" ".join(s) for s in steps])]
    names = read_ranked(POPULATIONS / "top1000.txt")
    if args.limit is not None:
        names = names[: args.limit]
    venvs = []
    for lo in range(0, len(names), args.batch_size):
        batch = names[lo : lo + args.batch_size]
        path = root / f"top1000-{installer}-{lo + 1:04d}-{lo + len(batch):04d}"
        venvs.append(Venv(path.name, path, path / "bin" / "python", batch))
    return venvs


# --------------------------------------------------------------------------------------------------------
# The reference verifier (the approach of bench_scan.py: single thread, csv rows, hashlib, 64 KiB chunks)
# --------------------------------------------------------------------------------------------------------


@dataclass
class Reference:
    records: int = 0
    files: int = 0
    bytes: int = 0
    mismatched: int = 0
    missing: int = 0
    unsupported: int = 0


def reference_verify(sites: Sequence[Path]) -> Reference:
    """Naive, single-threaded RECORD verification of every distribution in *sites*."""
    result = Reference()
    for site in sites:
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
                except OSError:
                    result.missing += 1
                    continue
                result.files += 1
                if base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii") != expected:
                    result.mismatched += 1
    return result


def site_dirs(python: Path) -> list[Path]:
    """purelib and platlib of *python*'s environment (asked with ``-I``: the venv's, not the base's)."""
    cmd = [str(python), "-I", "-c", SYSCONFIG_QUERY]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise BenchError(f"cannot run {python}: {exc}") from exc
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    paths = json.loads(proc.stdout)
    out: list[Path] = []
    for key in ("purelib", "platlib"):
        p = Path(paths[key])
        if p.is_dir() and p not in out:
            out.append(p)
    return out


# --------------------------------------------------------------------------------------------------------
# Running patchguard
# --------------------------------------------------------------------------------------------------------


def patchguard_command() -> list[str]:
    beside = Path(sys.executable).parent / "patchguard"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("patchguard")
    if found:
        return [found]
    return [sys.executable, "-m", "patchguard"]


def uv_command() -> str | None:
    beside = Path(sys.executable).parent / "uv"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("uv")


@dataclass
class Run:
    what: str
    seconds: float
    exit_code: int
    cpu_s: float
    stdout: str
    stderr: str


def run_child(what: str, cmd: Sequence[str], env: Mapping[str, str], cwd: Path) -> Run:
    """Run *cmd*; its wall time, exit code, output and CPU time (its helper processes included: ``wait4``)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(
                list(cmd), stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=dict(env), cwd=cwd
            )
        except OSError as exc:
            raise BenchError(f"cannot run {' '.join(cmd)}: {exc}") from exc
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4: Popen must not wait again
        out.seek(0)
        err.seek(0)
        return Run(
            what,
            seconds,
            proc.returncode,
            usage.ru_utime + usage.ru_stime,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
        )


def read_report(run: Run, want_json: bool = True) -> tuple[dict[str, Any] | None, list[str]]:
    """The run's JSON report (when one is wanted) and what is wrong with the run: an exit code other than 0
    or 1, a traceback, no report (or no output at all)."""
    why = []
    if run.exit_code not in (0, 1):
        why.append(f"exit {run.exit_code}")
    if "Traceback (most recent call last)" in run.stderr or "Traceback (most recent call last)" in run.stdout:
        why.append("traceback")
    report: dict[str, Any] | None = None
    if want_json:
        try:
            doc = json.loads(run.stdout)
        except ValueError:
            why.append("no JSON report on stdout")
        else:
            if isinstance(doc, dict) and isinstance(doc.get("findings"), list):
                report = doc
            else:
                why.append("the JSON has no findings list")
    elif not run.stdout.strip():
        why.append("no output")
    return report, why


def crash_of(run: Run, venv: Venv, want_json: bool) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The run's JSON report (scan) and its crash record, if it crashed."""
    report, why = read_report(run, want_json)
    if not why:
        return report, None
    crash = {
        "venv": venv.name,
        "run": run.what,
        "exit_code": run.exit_code,
        "why": ", ".join(why),
        "stderr_tail": run.stderr[-STDERR_TAIL_CHARS:],
        "stdout_head": run.stdout[:300] if not want_json or report is None else "",
    }
    return report, crash


def summary_counts(report: Mapping[str, Any] | None) -> dict[str, int] | None:
    if report is None:
        return None
    summary = report.get("summary")
    counts = summary.get("findings") if isinstance(summary, dict) else None
    if not isinstance(counts, dict):
        return None
    return {s: int(counts.get(s, 0)) for s in SEVERITIES}


@dataclass
class Measured:
    venv: Venv
    report: dict[str, Any] | None = None
    crashes: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reference: Reference | None = None
    ref_times: list[float] = field(default_factory=list)
    ref_cpu: list[float] = field(default_factory=list)
    cold: list[Run] = field(default_factory=list)
    warm: list[Run] = field(default_factory=list)
    check: Run | None = None
    check_line: str = ""
    scan_wall_s: float = 0.0

    @property
    def timed(self) -> bool:
        return bool(self.ref_times) and len(self.cold) == len(self.ref_times) == len(self.warm)


def measure(venv: Venv, pg: Sequence[str], rounds: int) -> Measured:
    """Findings (first cold scan), crashes, timings and the status check of one environment."""
    result = Measured(venv)
    wall = time.monotonic()
    py = str(venv.python)
    scan = [*pg, "scan", "--python", py, "--format", "json"]
    with tempfile.TemporaryDirectory(prefix="pg-realbox-") as tmp:
        tmpdir = Path(tmp)
        cwd = tmpdir / "cwd"  # no pyproject.toml or patchguard.toml up from here: no policy is picked up
        cwd.mkdir()
        n_cold = 0

        def fresh_cache() -> Path:
            nonlocal n_cold
            n_cold += 1
            d = tmpdir / f"cold-{n_cold}"
            d.mkdir()
            return d

        def record(run: Run, want_json: bool = True) -> dict[str, Any] | None:
            report, crash = crash_of(run, venv, want_json)
            if crash is not None:
                log(f"  CRASH in {run.what}: {crash['why']}: {run.stderr.strip()[-300:]}")
                result.crashes.append(crash)
            return report

        log(f"{venv.name}: cold scan (findings run) of {py}")
        first = run_child("cold scan (findings run)", [*scan, "--no-cache"], scan_env(fresh_cache()), cwd)
        result.report = record(first)
        counts = summary_counts(result.report)
        log(f"  {first.seconds:.1f}s, exit {first.exit_code}, findings {counts}")

        sites = site_dirs(venv.python)
        warm_cache = tmpdir / "warm"
        warm_cache.mkdir()
        fill = run_child("warm scan (cache fill)", scan, scan_env(warm_cache), cwd)
        record(fill)
        for i in range(rounds):
            cpu0, start = time.process_time(), time.perf_counter()
            ref = reference_verify(sites)
            result.ref_times.append(time.perf_counter() - start)
            result.ref_cpu.append(time.process_time() - cpu0)
            result.reference = ref
            cold = run_child(f"cold scan round {i + 1}", [*scan, "--no-cache"], scan_env(fresh_cache()), cwd)
            cold_counts = summary_counts(record(cold))
            warm = run_child(f"warm scan round {i + 1}", scan, scan_env(warm_cache), cwd)
            warm_counts = summary_counts(record(warm))
            result.cold.append(cold)
            result.warm.append(warm)
            for run, got in ((cold, cold_counts), (warm, warm_counts)):
                if counts is not None and got is not None and got != counts:
                    result.notes.append(f"{run.what} found {got}, the findings run {counts}")
            log(
                f"  round {i + 1}/{rounds}: reference {result.ref_times[-1]:.2f}s ({ref.files} files, "
                f"{ref.bytes / 1e6:.0f} MB, {ref.mismatched} mismatched, {ref.missing} missing); "
                f"cold {cold.seconds:.2f}s; warm {warm.seconds:.2f}s"
            )
        check = run_child(
            "check --format status",
            [*pg, "check", "--python", py, "--format", "status"],
            scan_env(warm_cache),
            cwd,
        )
        record(check, want_json=False)
        result.check = check
        result.check_line = check.stdout.strip().splitlines()[0] if check.stdout.strip() else ""
        log(f"  check: exit {check.exit_code}: {result.check_line[:200]}")
    result.scan_wall_s = time.monotonic() - wall
    return result


# --------------------------------------------------------------------------------------------------------
# Summing up a population
# --------------------------------------------------------------------------------------------------------


def example_of(finding: Mapping[str, Any], venv: str) -> dict[str, Any]:
    message = str(finding.get("message") or "")
    if len(message) > MESSAGE_CHARS:
        message = message[: MESSAGE_CHARS - 1] + "…"
    return {
        "distribution": finding.get("distribution"),
        "version": finding.get("version"),
        "path": finding.get("path"),
        "line": finding.get("line"),
        "message": message,
        "venv": venv,
    }


def pick_examples(candidates: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Up to five examples, one per distribution first (the same bug in five packages says more)."""
    picked: list[dict[str, Any]] = []
    seen: set[Any] = set()
    for ex in candidates:
        if ex["distribution"] not in seen:
            seen.add(ex["distribution"])
            picked.append(ex)
        if len(picked) == EXAMPLES_PER_RULE:
            return picked
    for ex in candidates:
        if ex not in picked:
            picked.append(ex)
        if len(picked) == EXAMPLES_PER_RULE:
            break
    return picked


def ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def big_venv_ratios(timed_venvs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Many small venvs: patchguard's fixed cost (start-up, asking the interpreter) weighs on the sums; the
    big venvs alone say what a scan costs where it matters."""
    big = [v for v in timed_venvs if v["reference_s"] >= BIG_REFERENCE_S]
    big_ref = sum(v["reference_s"] for v in big)
    return {
        "big_venvs": len(big),
        "big_cold_ratio": ratio(sum(v["cold_s"] for v in big), big_ref),
        "big_warm_ratio": ratio(sum(v["warm_s"] for v in big), big_ref),
        "min_warm_s": min((v["warm_s"] for v in timed_venvs), default=None),
    }


def summarize(
    population: str,
    installer: str,
    venvs: Sequence[Venv],
    measured: Sequence[Measured],
    build_wall_s: float,
    scan_wall_s: float,
) -> dict[str, Any]:
    findings = dict.fromkeys(SEVERITIES, 0)
    rules: dict[tuple[str, str, str], dict[str, Any]] = {}
    candidates: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    distributions = 0
    distinct: set[tuple[str, str]] = set()
    files_checked = 0
    per_venv: list[dict[str, Any]] = []
    for m in measured:
        report = m.report or {}
        summary = report.get("summary") if isinstance(report.get("summary"), dict) else {}
        assert isinstance(summary, dict)
        counts = summary_counts(m.report) or dict.fromkeys(SEVERITIES, 0)
        for s in SEVERITIES:
            findings[s] += counts[s]
        distributions += int(summary.get("distributions") or 0)
        files_checked += int(summary.get("files_checked") or 0)
        for d in report.get("distributions") or []:
            if isinstance(d, dict):
                distinct.add((str(d.get("name")), str(d.get("version"))))
        for f in report.get("findings") or []:
            if not isinstance(f, dict):
                continue
            key = (str(f.get("severity")), str(f.get("kind")), str(f.get("rule")))
            entry = rules.setdefault(key, {"count": 0, "distributions": set(), "venvs": set()})
            entry["count"] += 1
            entry["distributions"].add(f.get("distribution"))
            entry["venvs"].add(m.venv.name)
            bucket = candidates.setdefault(key, [])
            if len(bucket) < 400:
                bucket.append(example_of(f, m.venv.name))
        timed = m.timed
        ref_s = statistics.median(m.ref_times) if timed else None
        cold_s = statistics.median(r.seconds for r in m.cold) if timed else None
        warm_s = statistics.median(r.seconds for r in m.warm) if timed else None
        per_venv.append(
            {
                "name": m.venv.name,
                "path": str(m.venv.path),
                "python": str(m.venv.python),
                "status": m.venv.status,
                "names": len(m.venv.names),
                "batch_ok": m.venv.batch_ok,
                "failed": m.venv.failed,
                "build_s": m.venv.build_s,
                "distributions": summary.get("distributions"),
                "files_checked": summary.get("files_checked"),
                "findings": summary_counts(m.report),
                "reference": vars(m.reference) if m.reference else None,
                "reference_s": ref_s,
                "cold_s": cold_s,
                "warm_s": warm_s,
                "cold_cpu_s": statistics.median(r.cpu_s for r in m.cold) if timed else None,
                "reference_cpu_s": statistics.median(m.ref_cpu) if timed else None,
                "cold_ratios": [c.seconds / r for c, r in zip(m.cold, m.ref_times, strict=False) if r > 0],
                "warm_ratios": [w.seconds / r for w, r in zip(m.warm, m.ref_times, strict=False) if r > 0],
                "check": {"exit_code": m.check.exit_code, "line": m.check_line} if m.check else None,
                "crashes": len(m.crashes),
                "notes": m.notes,
                "scan_wall_s": m.scan_wall_s,
            }
        )
    timed_venvs = [v for v in per_venv if v["reference_s"] is not None]
    ref_sum = sum(v["reference_s"] for v in timed_venvs)
    cold_sum = sum(v["cold_s"] for v in timed_venvs)
    warm_sum = sum(v["warm_s"] for v in timed_venvs)
    if len(timed_venvs) == 1:  # one environment: the median of the per-round ratios
        cold_ratio = (
            statistics.median(timed_venvs[0]["cold_ratios"]) if timed_venvs[0]["cold_ratios"] else None
        )
        warm_ratio = (
            statistics.median(timed_venvs[0]["warm_ratios"]) if timed_venvs[0]["warm_ratios"] else None
        )
    else:  # many environments: summed times
        cold_ratio, warm_ratio = ratio(cold_sum, ref_sum), ratio(warm_sum, ref_sum)
    cold_cpu = sum(v["cold_cpu_s"] for v in timed_venvs)
    ref_cpu = sum(v["reference_cpu_s"] for v in timed_venvs)
    rule_rows = []
    order = {s: i for i, s in enumerate(SEVERITIES)}
    for key in sorted(rules, key=lambda k: (order.get(k[0], 9), -rules[k]["count"], k[1], k[2])):
        entry = rules[key]
        rule_rows.append(
            {
                "severity": key[0],
                "kind": key[1],
                "rule": key[2],
                "count": entry["count"],
                "distributions": len(entry["distributions"]),
                "venvs": len(entry["venvs"]),
                "examples": pick_examples(candidates[key]),
            }
        )
    crashes = [c for m in measured for c in m.crashes]
    checks = [m for m in measured if m.check is not None]
    check_ok = sum(1 for m in checks if m.check_line.startswith("OK"))
    failed_installs = [{"venv": v.name, **f} for v in venvs for f in v.failed]
    skipped = [
        {"venv": v.name, "names": len(v.names), "reason": v.skip_reason or v.status}
        for v in venvs
        if not v.usable
    ]
    return {
        "population": population,
        "installer": installer,
        "venvs_total": len(venvs),
        "venvs_measured": len(measured),
        "names_requested": sum(len(v.names) for v in venvs) if population == "top1000" else None,
        "names_failed": len(failed_installs),
        "distributions": distributions,
        "distinct_distributions": len(distinct),
        "files_checked": files_checked,
        "reference_files": sum((v["reference"] or {}).get("files", 0) for v in per_venv),
        "reference_bytes": sum((v["reference"] or {}).get("bytes", 0) for v in per_venv),
        "reference_mismatched": sum((v["reference"] or {}).get("mismatched", 0) for v in per_venv),
        "reference_missing": sum((v["reference"] or {}).get("missing", 0) for v in per_venv),
        "findings": findings,
        "crashes": crashes,
        "check": {
            "ok": check_ok,
            "total": len(checks),
            "not_ok": [
                {"venv": m.venv.name, "exit_code": m.check.exit_code, "line": m.check_line}
                for m in checks
                if m.check is not None and not m.check_line.startswith("OK")
            ],
        },
        "reference_s": ref_sum,
        "cold_s": cold_sum,
        "warm_s": warm_sum,
        "cold_ratio": cold_ratio,
        "warm_ratio": warm_ratio,
        "cold_cpu_ratio": ratio(cold_cpu, ref_cpu),
        **big_venv_ratios(timed_venvs),
        "ratio_basis": "median of per-round ratios" if len(timed_venvs) == 1 else "sums over venvs",
        "rounds": len(timed_venvs[0]["cold_ratios"]) if len(timed_venvs) == 1 else 1,
        "rules": rule_rows,
        "failed_installs": failed_installs,
        "not_built": skipped,
        "notes": [f"{m.venv.name}: {n}" for m in measured for n in m.notes],
        "build_s": sum(v.build_s for v in venvs if v.status == "built"),
        "build_s_recorded": sum(v.build_s for v in venvs if v.usable),
        "reused": sum(1 for v in venvs if v.status == "reused"),
        "build_wall_s": build_wall_s,
        "scan_wall_s": scan_wall_s,
        "per_venv": per_venv,
        "targets": {
            "high": TARGET_HIGH,
            "moderate": TARGET_MODERATE,
            "crashes": TARGET_CRASHES,
            "cold_ratio": TARGET_COLD_RATIO,
            "warm_ratio": TARGET_WARM_RATIO,
        },
    }


# --------------------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------------------


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("PASS" if ok else "FAIL")


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def format_table(res: Mapping[str, Any]) -> str:
    f = res["findings"]
    n_crash = len(res["crashes"])
    cr, wr = res["cold_ratio"], res["warm_ratio"]
    lines = [
        f"== {res['population']} / {res['installer']} ==",
        f"venvs           : {res['venvs_measured']} measured of {res['venvs_total']}"
        + (f" ({res['reused']} reused)" if res["reused"] else ""),
    ]
    if res["names_requested"] is not None:
        lines.append(
            f"names           : {res['names_requested']} asked, {res['names_failed']} failed to install"
        )
    lines += [
        f"distributions   : {res['distributions']} ({res['distinct_distributions']} distinct name/version)",
        f"files checked   : {res['files_checked']} (reference hashed {res['reference_files']} files, "
        f"{res['reference_bytes'] / 1e9:.2f} GB; {res['reference_mismatched']} mismatched, "
        f"{res['reference_missing']} missing)",
        "",
        f"{'measure':<24}{'value':>12}  {'target':>9}  verdict",
        f"{'HIGH findings':<24}{f['high']:>12}  {TARGET_HIGH:>9}  {verdict(f['high'] <= TARGET_HIGH)}",
        f"{'MODERATE findings':<24}{f['moderate']:>12}  {TARGET_MODERATE:>9}  "
        f"{verdict(f['moderate'] <= TARGET_MODERATE)}",
        f"{'minor findings':<24}{f['minor']:>12}",
        f"{'info findings':<24}{f['info']:>12}",
        f"{'crashes':<24}{n_crash:>12}  {TARGET_CRASHES:>9}  {verdict(n_crash <= TARGET_CRASHES)}",
        f"{'check OK lines':<24}{str(res['check']['ok']) + '/' + str(res['check']['total']):>12}",
        f"{'reference (s)':<24}{res['reference_s']:>12.2f}",
        f"{'cold scan (s)':<24}{res['cold_s']:>12.2f}",
        f"{'warm scan (s)':<24}{res['warm_s']:>12.2f}",
        f"{'cold / reference':<24}{fmt_ratio(cr):>12}  {'<= ' + str(TARGET_COLD_RATIO):>9}  "
        f"{verdict(None if cr is None else cr <= TARGET_COLD_RATIO)}",
        f"{'warm / reference':<24}{fmt_ratio(wr):>12}  {'<= ' + str(TARGET_WARM_RATIO):>9}  "
        f"{verdict(None if wr is None else wr <= TARGET_WARM_RATIO)}",
        f"{'cold cpu / ref cpu':<24}{fmt_ratio(res['cold_cpu_ratio']):>12}  (CPU time, helpers included)",
        f"ratios          : {res['ratio_basis']} ({res['rounds']} round(s) a venv)",
    ]
    if res["venvs_measured"] > 1 and res.get("big_venvs"):
        lines.append(
            f"big venvs only  : cold/ref {fmt_ratio(res['big_cold_ratio'])}, warm/ref "
            f"{fmt_ratio(res['big_warm_ratio'])} ({res['big_venvs']} venvs with a reference >= "
            f"{BIG_REFERENCE_S:g} s); fastest warm scan {res['min_warm_s']:.2f} s (the fixed cost)"
        )
    lines += [
        f"wall            : install {res['build_wall_s']:.0f}s in this run "
        f"(recorded install time of the venvs "
        f"{res['build_s_recorded']:.0f}s), scans {res['scan_wall_s']:.0f}s",
    ]
    if res["rules"]:
        lines += ["", "findings by severity, kind, rule (count, distributions, venvs):"]
        for r in res["rules"]:
            lines.append(
                f"  {r['severity']:<9}{r['kind']:<22}{r['rule']:<28}{r['count']:>6}"
                f"  {r['distributions']:>4} dists"
                f"  {r['venvs']:>3} venvs"
            )
            shown = r["examples"] if r["severity"] in ("high", "moderate") else r["examples"][:1]
            for ex in shown:
                owner = f"{ex['distribution']} {ex['version']}" if ex["distribution"] else "(no distribution)"
                where = f"{owner}: {ex['path']}"
                if ex.get("line"):
                    where += f":{ex['line']}"
                lines.append(f"      e.g. [{ex['venv']}] {where}")
                lines.append(f"           {ex['message']}")
    if res["crashes"]:
        lines += ["", "crashes:"]
        for c in res["crashes"]:
            lines.append(f"  [{c['venv']}] {c['run']}: {c['why']}")
            tail = c["stderr_tail"].strip().splitlines()[-8:]
            lines.extend(f"      | {t}" for t in tail)
            if c.get("stdout_head"):
                lines.append(f"      stdout: {c['stdout_head'][:200]!r}")
    if res["check"]["not_ok"]:
        lines += ["", "check not OK:"]
        lines.extend(
            f"  [{c['venv']}] exit {c['exit_code']}: {c['line'][:300]}" for c in res["check"]["not_ok"]
        )
    if res["notes"]:
        lines += ["", "notes:"]
        lines.extend(f"  {n}" for n in res["notes"])
    if res["failed_installs"]:
        lines += ["", f"failed to install ({len(res['failed_installs'])}):"]
        lines.extend(f"  [{x['venv']}] {x['name']}: {x['reason'][:240]}" for x in res["failed_installs"])
    if res["not_built"]:
        lines += ["", "venvs not built:"]
        lines.extend(f"  {x['venv']} ({x['names']} names): {x['reason']}" for x in res["not_built"])
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--population", choices=("a", "b", "all", "vllm-sglang", "top1000"), default="all")
    parser.add_argument(
        "--installer",
        choices=("pip", "uv", "all"),
        default="all",
        help="installer of the venvs (population a is built with pip only)",
    )
    parser.add_argument("--batch-size", type=int, default=50, metavar="N", help="names a venv (population b)")
    parser.add_argument("--limit", type=int, metavar="N", help="the first N names of population b only")
    parser.add_argument(
        "--python",
        type=Path,
        metavar="PY",
        help="scan this existing environment as population a instead of building it",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        metavar="N",
        help="timed rounds for population a (population b: one round a venv)",
    )
    parser.add_argument("--build-only", action="store_true", help="build (or check) the venvs, scan nothing")
    parser.add_argument(
        "--discard",
        action="store_true",
        help="remove each built venv once measured (a pip venv holding torch takes ~9 GB; reruns rebuild it)",
    )
    parser.add_argument(
        "--min-free-gb",
        type=float,
        default=8.0,
        metavar="GB",
        help="do not start building a venv with less free disk than this",
    )
    parser.add_argument(
        "--install-budget",
        type=float,
        metavar="MIN",
        help="start no new venv build after this many minutes of installing",
    )
    parser.add_argument(
        "--install-timeout",
        type=float,
        default=3600.0,
        metavar="S",
        help="time-out of one install step or batch",
    )
    parser.add_argument(
        "--name-timeout",
        type=float,
        default=900.0,
        metavar="S",
        help="time-out of one name's install in the one-at-a-time fallback",
    )
    parser.add_argument("--base-python", metavar="PY", help="interpreter the venvs are made with")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument(
        "--render",
        type=Path,
        metavar="FILE",
        help="print the tables of a JSON file written by --json-file (or --json), run nothing",
    )
    parser.add_argument("--json-file", type=Path, metavar="FILE", help="also write the JSON object here")
    args = parser.parse_args(argv)
    args.population = POPULATION_NAMES.get(args.population, args.population)
    if args.batch_size < 1 or args.repeat < 1 or (args.limit is not None and args.limit < 1):
        parser.error("--batch-size, --repeat and --limit must be at least 1")
    return args


def write_json(path: Path, doc: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def code_state(pg: Sequence[str]) -> dict[str, Any]:
    """Which patchguard was measured: its version, and the commit and changed files of this checkout."""

    def out(cmd: Sequence[str]) -> str:
        try:
            proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False, cwd=HERE)
        except OSError:
            return ""
        return proc.stdout.strip() if proc.returncode == 0 else ""

    status = out(["git", "status", "--porcelain", "--", "patchguard"])
    return {
        "version": out([*pg, "--version"]),
        "commit": out(["git", "rev-parse", "HEAD"]),
        "changed": [line[3:] for line in status.splitlines()],
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def plan(args: argparse.Namespace) -> list[tuple[str, str]]:
    pops = ["vllm-sglang", "top1000"] if args.population == "all" else [args.population]
    installers = ["pip", "uv"] if args.installer == "all" else [args.installer]
    out = []
    for pop in pops:
        for inst in installers:
            if pop == "vllm-sglang" and inst == "uv" and args.python is None:
                log("population vllm-sglang is built with pip only; skipping it for uv")
                continue
            if pop == "vllm-sglang" and args.python is not None:
                if ("vllm-sglang", "given") not in out:
                    out.append(("vllm-sglang", "given"))
                continue
            out.append((pop, inst))
    return out


def render(path: Path) -> int:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        code = doc["code"]
        results = doc["results"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"bench_realbox: error: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    print(
        f"patchguard {code['version']!r}, commit {code['commit'][:12]}, "
        f"{len(code['changed'])} changed file(s) under patchguard/ at {code['time']}"
        + (" (partial: the run was cut short)" if doc.get("partial") else "")
    )
    for res in results:
        if "big_venvs" not in res:  # written before these figures were added
            res.update(big_venv_ratios([v for v in res["per_venv"] if v["reference_s"] is not None]))
        print()
        print(format_table(res))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render is not None:
        return render(args.render)
    tools = Tools(
        patchguard=patchguard_command(),
        uv=uv_command(),
        base_python=args.base_python or getattr(sys, "_base_executable", None) or sys.executable,
    )
    opts = BuildOptions(
        batch_timeout=args.install_timeout,
        name_timeout=args.name_timeout,
        min_free_gb=args.min_free_gb,
        budget_s=args.install_budget * 60 if args.install_budget is not None else None,
    )
    log(f"patchguard: {' '.join(tools.patchguard)}; uv: {tools.uv}; venvs made with {tools.base_python}")
    log(f"venvs under {bench_root()}")
    code_at_start = code_state(tools.patchguard)
    if not args.json:
        print(
            f"patchguard {code_at_start['version']!r}, commit {code_at_start['commit'][:12]}, "
            f"{len(code_at_start['changed'])} changed file(s) under patchguard/ at {code_at_start['time']}",
            flush=True,
        )
        print(flush=True)
    doc_head: dict[str, Any] = {
        "patchguard": tools.patchguard,
        "code": code_at_start,
        "bench_dir": str(bench_root()),
        "cpus": os.cpu_count(),
    }
    results: list[dict[str, Any]] = []
    exit_code = 0
    for population, installer in plan(args):
        if installer == "uv" and tools.uv is None:
            log("no uv executable (PATH or beside this interpreter); skipping the uv venvs")
            exit_code = 2
            continue
        try:
            venvs = population_venvs(population, installer, args)
        except BenchError as exc:
            print(f"bench_realbox: error: {exc}", file=sys.stderr)
            return 2
        steps = read_steps(POPULATIONS / "vllm-sglang.txt") if population == "vllm-sglang" else None
        rounds = args.repeat if population == "vllm-sglang" else 1
        build_wall = scan_wall = 0.0
        measured = []
        # One venv at a time: build (or reuse) it, measure it, then the next one; nothing else runs meanwhile.
        for venv in venvs:
            if venv.status == "given":
                if not venv.python.exists():
                    print(f"bench_realbox: error: {venv.python} does not exist", file=sys.stderr)
                    return 2
            else:
                t0 = time.monotonic()
                try:
                    prepare(venv, installer, tools, opts, steps)
                except BuildError as exc:
                    log(f"error: {exc}")
                    venv.status, venv.skip_reason = "skipped", f"build failed: {exc}"
                    exit_code = 2
                build_wall += time.monotonic() - t0
            if args.build_only or not venv.usable:
                continue
            t0 = time.monotonic()
            try:
                measured.append(measure(venv, tools.patchguard, rounds))
            except BenchError as exc:
                log(f"error: {venv.name}: {exc}")
                exit_code = 2
            scan_wall += time.monotonic() - t0
            if args.json_file is not None:  # so far, in case the run is cut short
                partial = summarize(population, installer, venvs, measured, build_wall, scan_wall)
                write_json(args.json_file, {**doc_head, "partial": True, "results": [*results, partial]})
            if args.discard and venv.status in ("built", "reused"):
                log(f"{venv.name}: measured; removing it (--discard)")
                shutil.rmtree(venv.path, ignore_errors=True)
        if args.build_only:
            for v in venvs:
                log(f"{v.name}: {v.status} {v.skip_reason}".rstrip())
            continue
        res = summarize(population, installer, venvs, measured, build_wall, scan_wall)
        results.append(res)
        if not args.json:
            print(format_table(res), flush=True)
            print(flush=True)
    doc = {**doc_head, "code_at_end": code_state(tools.patchguard), "results": results}
    if args.json:
        print(json.dumps(doc, indent=2))
    if args.json_file is not None:
        write_json(args.json_file, doc)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
