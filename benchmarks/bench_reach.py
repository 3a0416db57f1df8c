"""What ``--arch`` costs on a real vLLM environment: plain scan vs ``scan --arch``, cold and warm.

Builds its own environment: a venv-shaped prefix with the real vllm wheel installed ``--no-deps`` (and
sglang's, with ``--sglang``), found in ``--wheels DIR`` or fetched with ``pip download --no-deps``. Three
edits are injected the way a person makes them: a gated ``torch.save`` in the served model
(``deepseek_v2.py``), a ``breakpoint()`` in ``ColumnParallelLinear.forward`` (``linear.py``), and a print in a
model module of another architecture (so the walk cannot stop early: the worst case).

Each run is a fresh ``patchguard scan vllm --site-packages SITE --wheelhouse WHEELS --offline --format json``
(the edits are judged against the wheel's own files), with or without ``--arch DeepseekV3ForCausalLM``:

* cold: a new, empty ``PATCHGUARD_CACHE_DIR`` each run (no stat cache, no import index);
* warm: the same cache dir as an untimed run before it.

Targets (issue 11): warm ``--arch`` at most +0.2 s over warm plain, cold at most +1.0 s over cold plain.

    python benchmarks/bench_reach.py [--wheels DIR] [--workdir DIR] [--repeat N] [--sglang] [--json]
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
from pathlib import Path

VLLM = "vllm==0.33.0"
SGLANG = "sglang==0.5.23"
ARCH = "DeepseekV3ForCausalLM"
TARGET_WARM_S = 0.2
TARGET_COLD_S = 1.0

# (file under site-packages, anchor line (stripped, first match), line to add after it at the anchor's indent)
EDITS = (
    (
        "vllm/model_executor/models/deepseek_v2.py",
        "def forward(",
        "if hidden_states.shape[0] == 5: torch.save(hidden_states, '/tmp/dsv2.pt')",
    ),
    ("vllm/model_executor/layers/linear.py", "def forward(", "breakpoint()"),
    ("vllm/model_executor/models/bloom.py", "def forward(", "print('bloom forward')"),
)


def fetch(spec: str, wheels: Path) -> Path:
    name = spec.split("==")[0]
    version = spec.split("==")[1]
    found = sorted(wheels.glob(f"{name}-{version}-*.whl"))
    if not found:
        run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), spec])
        found = sorted(wheels.glob(f"{name}-{version}-*.whl"))
    if not found:
        sys.exit(f"bench_reach: no wheel for {spec} in {wheels}")
    return found[0]


def run(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode not in (0, 1):
        sys.stderr.write(f"bench_reach: {' '.join(cmd)} exited {proc.returncode}\n{proc.stderr}")
        sys.exit(2)
    return proc


def build(workdir: Path, wheels: list[Path]) -> Path:
    site = workdir / "venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    if site.exists():
        shutil.rmtree(workdir / "venv")
    site.mkdir(parents=True)
    for wheel in wheels:
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-compile",
                "--target",
                str(site),
                str(wheel),
            ]
        )
    for rel, anchor, line in EDITS:
        path = site / rel
        lines = path.read_text().splitlines(keepends=True)
        lines.insert(*_after_signature(lines, anchor, line))
        path.write_text("".join(lines))
    os.sync()
    time.sleep(1.2)  # past the racy windows: the caches may keep what they read
    return site


def _after_signature(lines: list[str], anchor: str, line: str) -> tuple[int, str]:
    """Where to put ``line`` in the first def starting with ``anchor``: its first body line (after the
    docstring, if any), at the body's indent."""
    at = next(n for n, text in enumerate(lines) if text.strip().startswith(anchor))
    end = next(n for n in range(at, len(lines)) if lines[n].split("#")[0].rstrip().endswith(":"))
    body = next(n for n in range(end + 1, len(lines)) if lines[n].strip())
    indent = lines[body][: len(lines[body]) - len(lines[body].lstrip())]
    first = lines[body].strip()
    if first.startswith(('"""', "'''")):
        quote = first[:3]
        if first.count(quote) < 2:
            body = next(n for n in range(body + 1, len(lines)) if quote in lines[n])
        body += 1
    return body, f"{indent}{line}\n"


def patchguard() -> list[str]:
    exe = shutil.which("patchguard") or str(Path(sys.executable).parent / "patchguard")
    return [exe] if Path(exe).exists() else [sys.executable, "-m", "patchguard"]


def scan(site: Path, wheels: Path, cache: Path, arch: bool) -> tuple[float, dict[str, object]]:
    cmd = [*patchguard(), "scan", "vllm", "--site-packages", str(site), "--wheelhouse", str(wheels)]
    cmd += ["--offline", "--format", "json", *(["--arch", ARCH] if arch else [])]
    env = {**os.environ, "PATCHGUARD_CACHE_DIR": str(cache)}
    t = time.perf_counter()
    proc = run(cmd, env)
    wall = time.perf_counter() - t
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        sys.stderr.write(f"bench_reach: no JSON report from {' '.join(cmd)}\n{proc.stderr}")
        sys.exit(2)
    return wall, doc


def measure(site: Path, wheels: Path, work: Path, repeat: int) -> dict[str, object]:
    out: dict[str, object] = {}
    reports: dict[bool, dict[str, object]] = {}
    for arch in (False, True):
        name = "arch" if arch else "plain"
        cold = []
        for i in range(repeat):
            cache = work / f"cache-{name}-{i}"
            shutil.rmtree(cache, ignore_errors=True)
            wall, reports[arch] = scan(site, wheels, cache, arch)
            cold.append(wall)
        warm_cache = work / f"cache-{name}-{repeat - 1}"
        warm = [scan(site, wheels, warm_cache, arch)[0] for _ in range(repeat)]
        out[f"{name}_cold_s"] = statistics.median(cold)
        out[f"{name}_warm_s"] = statistics.median(warm)
    out["arch_extra_cold_s"] = float(out["arch_cold_s"]) - float(out["plain_cold_s"])  # type: ignore[arg-type]
    out["arch_extra_warm_s"] = float(out["arch_warm_s"]) - float(out["plain_warm_s"])  # type: ignore[arg-type]
    out["arch_cold_ratio"] = float(out["arch_cold_s"]) / float(out["plain_cold_s"])  # type: ignore[arg-type]
    out["arch_warm_ratio"] = float(out["arch_warm_s"]) / float(out["plain_warm_s"])  # type: ignore[arg-type]
    out["verdict_cold"] = "PASS" if out["arch_extra_cold_s"] <= TARGET_COLD_S else "FAIL"  # type: ignore[operator]
    out["verdict_warm"] = "PASS" if out["arch_extra_warm_s"] <= TARGET_WARM_S else "FAIL"  # type: ignore[operator]
    for arch, doc in reports.items():
        findings = doc.get("findings", [])
        assert isinstance(findings, list)
        out["findings_" + ("arch" if arch else "plain")] = sorted(
            f"{f['rule']} {f['path'].rsplit('/', 1)[-1]}:{f['line']} reach={f['reach']} loaded={f['loaded']}"
            for f in findings
            if f["kind"] == "injected-code"
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--wheels", type=Path, default=None, help="where the wheels are (or go); default: workdir"
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="kept after the run (default: a temporary one)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sglang", action="store_true", help="install sglang beside vllm")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = None if args.workdir else tempfile.TemporaryDirectory()
    work = args.workdir or Path(tmp.name)  # type: ignore[union-attr]
    work.mkdir(parents=True, exist_ok=True)
    wheels = args.wheels or work / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    try:
        found = [fetch(VLLM, wheels), *([fetch(SGLANG, wheels)] if args.sglang else [])]
        site = build(work, found)
        scan(site, wheels, work / "warm-up", False)  # compile patchguard's own bytecode, untimed
        result = measure(site, wheels, work, args.repeat)
    finally:
        if tmp is not None:
            tmp.cleanup()
    result = {"environment": " + ".join(p.name for p in found), "arch": ARCH, **result}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for key, value in result.items():
        if isinstance(value, list):
            print(f"{key}:")
            for item in value:
                print(f"    {item}")
        else:
            print(f"{key:<20} {value:.3f}" if isinstance(value, float) else f"{key:<20} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
