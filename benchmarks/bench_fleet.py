"""``patchguard fleet`` on 500 hosts of a real vLLM environment: wall time and peak memory, against reading
the same documents with ``json`` alone.

Builds its own environment: a fresh venv (``python -m venv --without-pip``) holding the real ``vllm==0.33.0``
wheel and a handful of real wheels a vLLM server runs with (transformers, tokenizers, fastapi, pydantic,
numpy, ...), each installed with ``pip --python VENV/bin/python install --no-deps --no-compile`` from
``--wheels DIR`` or fetched there with ``pip download --no-deps --only-binary=:all:``. Then it edits the
environment the way a person does — a shape-gated ``torch.save`` in ``deepseek_v2.py``'s first ``forward``,
a line appended to ``vllm/platforms/cuda.py``, an NCCL ``.pth`` startup hook — and writes its lock with
``patchguard lock --python VENV/bin/python``. From that lock it writes 500 host documents, ``gpu-000.json`` …
``gpu-499.json`` (each with its own host name and time, as each host's lock would have), of which five drift:
vllm's version bumped (two hosts), a changed file's digest, a patch set applied, a ``.pth`` added.

What it measures, page cache warm, after one untimed run of each (medians of ``--repeat``):

* fleet: ``patchguard fleet DIR --format json`` (and the table), wall time and the child's own peak RSS
  (``os.wait4``'s ``ru_maxrss``);
* reference: the same interpreter running ``json.load`` over the same 500 files and nothing else;
* start-up: ``patchguard --version``.

Checks (PASS/FAIL): fleet exits 1; exactly the five drifted hosts differ, each in what it was given; target
(issue 27): 500 hosts "well under a second", fleet ≤ 0.5 s (``--hosts N``: in proportion). Any child exiting
otherwise aborts (exit 2).

    python benchmarks/bench_fleet.py [--wheels DIR] [--workdir DIR] [--hosts N] [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_reach import _after_signature as after_signature  # the first body line of a def, at its indent

VLLM = "vllm==0.33.0"
# Real wheels a vLLM server environment holds beside vllm (its own dependencies; torch and the CUDA wheels
# left out for their size): whatever the index has of each, named in the output.
OTHERS = (
    *("transformers", "tokenizers", "safetensors", "huggingface-hub", "fastapi", "starlette", "pydantic"),
    *("pydantic-core", "uvicorn", "aiohttp", "requests", "numpy", "pyyaml", "jinja2", "regex", "tqdm"),
    *("msgspec", "openai", "prometheus-client", "protobuf"),
)
TARGET_S = 0.5
GATED_DUMP = "if hidden_states.shape[0] == 5: torch.save(hidden_states, '/tmp/dsv2.pt')"
DSV2 = "vllm/model_executor/models/deepseek_v2.py"
CUDA = "vllm/platforms/cuda.py"


class BenchError(Exception):
    pass


@dataclass
class Run:
    seconds: float
    code: int
    maxrss_kib: int
    stdout: bytes


def run(cmd: list[str], env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> Run:
    """Run ``cmd``; its wall time, exit code, own peak RSS (``wait4``) and output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read().decode("utf-8", "replace")
    if code not in ok:
        raise BenchError(f"{' '.join(cmd)} exited {code}:\n{stderr[-3000:]}")
    maxrss = usage.ru_maxrss // 1024 if sys.platform == "darwin" else usage.ru_maxrss
    return Run(seconds, code, maxrss, stdout)


def fetch(wheels: Path) -> list[Path]:
    """The vllm wheel and the others, from ``wheels`` or downloaded into it."""
    name, version = VLLM.split("==")
    if not list(wheels.glob(f"{name}-{version}-*.whl")):
        run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), VLLM])
    have = {_project(p) for p in wheels.glob("*.whl")}
    missing = [o for o in OTHERS if o not in have]
    if missing:
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        run([*pip, "-d", str(wheels), *missing])
    others: dict[str, Path] = {}
    for p in sorted(wheels.glob("*.whl")):  # one of each, the last by name (the newest version, mostly)
        if _project(p) in OTHERS:
            others[_project(p)] = p
    return [sorted(wheels.glob(f"{name}-{version}-*.whl"))[0], *others.values()]


def _project(wheel: Path) -> str:
    return wheel.name.split("-")[0].lower().replace("_", "-")


def build(work: Path, wheels: list[Path]) -> Path:
    """A fresh venv with every wheel installed, edited by hand; returns its interpreter."""
    venv = work / "venv"
    if venv.exists():
        shutil.rmtree(venv)
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-compile"]
    run([*pip, *map(str, wheels)])
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(run([str(python), "-c", code]).stdout.decode().strip())
    model = site / DSV2
    lines = model.read_text().splitlines(keepends=True)
    lines.insert(*after_signature(lines, "def forward(", GATED_DUMP))
    model.write_text("".join(lines))
    with open(site / CUDA, "a") as f:
        f.write("\n# SM120: treat as Hopper for the fused MoE kernels\n")
    (site / "nccl_env.pth").write_text("import os; os.environ['NCCL_P2P_DISABLE'] = '1'\n")
    return python


def patchguard() -> list[str]:
    exe = Path(sys.executable).parent / "patchguard"
    found = str(exe) if exe.exists() else shutil.which("patchguard")
    return [found] if found else [sys.executable, "-m", "patchguard"]


# The drifting hosts: (index, what is done to its copy of the lock, what fleet must say).
DRIFTS: tuple[tuple[int, str], ...] = (
    (17, "version"),
    (123, "version"),
    (250, "file"),
    (333, "set"),
    (444, "hook"),
)


def _drift(doc: dict[str, Any], how: str) -> tuple[str, str]:
    """Drift one host's document; returns the (aspect, name) fleet must report."""
    if how == "version":
        doc["distributions"]["vllm"]["version"] = "0.33.1"
        return "distribution", "vllm"
    if how == "file":
        doc["distributions"]["vllm"]["changes"][DSV2] = "sha256:" + "5a" * 32
        return "file", DSV2
    if how == "set":
        doc["applied_sets"]["sm120-support"] = "c0ffee" * 10 + "c0de"
        return "set", "sm120-support"
    doc["unowned"].append("zz_debug.pth\t" + "d1" * 32)
    return "startup-hook", "zz_debug.pth"


def hosts(lock: dict[str, Any], fleet: Path, n: int) -> dict[str, tuple[str, str]]:
    """``n`` host documents of the lock in ``fleet``; returns the drifting hosts and what each must show."""
    if fleet.exists():
        shutil.rmtree(fleet)
    fleet.mkdir(parents=True)
    drifts = {i: how for i, how in DRIFTS if i < n}
    expected: dict[str, tuple[str, str]] = {}
    for i in range(n):
        doc = json.loads(json.dumps(lock))
        name = f"gpu-{i:03}"
        doc["host"] = f"{name}.cluster.example"
        doc["time"] = f"2025-01-31T12:{i // 60 % 60:02}:{i % 60:02}Z"
        if i in drifts:
            expected[name] = _drift(doc, drifts[i])
        (fleet / f"{name}.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    os.sync()
    return expected


REFERENCE = (
    "import json, os, sys\n"
    "d = sys.argv[1]\n"
    "names = sorted(n for n in os.listdir(d) if n.endswith('.json'))\n"
    "docs = [json.load(open(os.path.join(d, n), encoding='utf-8')) for n in names]\n"
)


def measure(fleet: Path, env: dict[str, str], repeat: int) -> dict[str, Any]:
    as_json = [*patchguard(), "fleet", str(fleet), "--format", "json"]
    table = [*patchguard(), "fleet", str(fleet)]
    reference = [sys.executable, "-c", REFERENCE, str(fleet)]
    for cmd in (as_json, table, reference):  # untimed: bytecode compiled, page cache warm
        run(cmd, env, ok=(0, 1))
    runs: dict[str, list[Run]] = {"json": [], "table": [], "reference": [], "startup": []}
    for _ in range(repeat):
        runs["json"].append(run(as_json, env, ok=(1,)))
        runs["table"].append(run(table, env, ok=(1,)))
        runs["reference"].append(run(reference, env))
        runs["startup"].append(run([*patchguard(), "--version"], env))
    out: dict[str, Any] = {}
    for name, done in runs.items():
        out[f"{name}_s"] = statistics.median(r.seconds for r in done)
        out[f"{name}_maxrss_mib"] = max(r.maxrss_kib for r in done) / 1024
    # What is fleet's own work, start-up (importing click and patchguard) aside.
    out["json_minus_startup_s"] = out["json_s"] - out["startup_s"]
    out["ratio_json_to_reference"] = out["json_s"] / out["reference_s"]
    out["ratio_table_to_reference"] = out["table_s"] / out["reference_s"]
    out["document"] = json.loads(runs["json"][-1].stdout)
    out["table_tail"] = runs["table"][-1].stdout.decode().splitlines()[-1]
    return out


def checks(result: dict[str, Any], expected: dict[str, tuple[str, str]], n: int) -> dict[str, str]:
    doc = result.pop("document")
    got = {host: [(d["aspect"], d["name"]) for d in diffs] for host, diffs in doc["differing"].items()}
    same = got == {host: [want] for host, want in expected.items()}
    target = TARGET_S * max(1.0, n / 500)  # the target is for 500 hosts; more may take proportionally longer
    return {
        "differing_hosts": "PASS" if same else f"FAIL: {got}",
        "fleet_wall": "PASS"
        if max(result["json_s"], result["table_s"]) <= target
        else f"FAIL (> {target:.2f} s)",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--wheels", type=Path, default=None, help="where the wheels are (or go); default: workdir"
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="kept after the run (default: a temporary one)"
    )
    parser.add_argument("--hosts", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = None if args.workdir else tempfile.TemporaryDirectory()
    work = args.workdir or Path(tmp.name)  # type: ignore[union-attr]
    work.mkdir(parents=True, exist_ok=True)
    wheels = args.wheels or work / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")  # compiled once, not on every run
    env["PATCHGUARD_CACHE_DIR"] = str(work / "cache")
    try:
        found = fetch(wheels)
        python = build(work, found)
        started = time.perf_counter()
        lock_run = run([*patchguard(), "lock", "--python", str(python)], env)
        lock_s = time.perf_counter() - started
        lock = json.loads(lock_run.stdout)
        expected = hosts(lock, work / "fleet", args.hosts)
        result = measure(work / "fleet", env, args.repeat)
        document_bytes = (work / "fleet" / "gpu-000.json").stat().st_size
        verdicts = checks(result, expected, args.hosts)
    except BenchError as exc:
        sys.stderr.write(f"bench_fleet: {exc}\n")
        return 2
    finally:
        if tmp is not None:
            tmp.cleanup()
    summary = {
        "environment": [p.name for p in found],
        "distributions": len(lock["distributions"]),
        "changed_files_in_lock": sum(len(d.get("changes", {})) for d in lock["distributions"].values()),
        "document_bytes": document_bytes,
        "hosts": args.hosts,
        "lock_s": lock_s,
        **result,
        **verdicts,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    for key, value in summary.items():
        if isinstance(value, list):
            print(f"{key}:")
            for item in value:
                print(f"    {item}")
        else:
            print(f"{key:<26} {value:.3f}" if isinstance(value, float) else f"{key:<26} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
