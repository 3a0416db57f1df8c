"""bisect on a real environment: test runs against k·log2(n/k), and what a trial costs beyond the test.

Builds its own environment from a real wheel: ``pip download --no-deps PACKAGE`` (default ``pip==24.3.1``,
a pure-Python wheel of ~1,000 files; ``--package vllm==0.33.0`` for the GPU stack), installed with ``pip
install --no-deps`` into a fresh venv (``--keep DIR`` makes it once and reuses it). For each n (8, 32, 128)
and k (1, 2) it hand-edits n of the package's modules the way a person would (a debug line after the first
line, written to a temporary name and renamed over the file, like an editor), k of them with a marker the
test looks for, and runs ``patchguard bisect --python VENV/bin/python --wheelhouse DIR --format json``.
The test is a shell ``grep`` (a few milliseconds), so the trial's own cost shows: ``overhead`` is what
putting the environment into the trial's state took, read from the JSON per trial, with the number of files
that trial changed. The environment is checked byte for byte against its start after every bisect.

    python benchmarks/bench_bisect.py [--keep DIR] [--package SPEC] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_OVERHEAD = 0.3  # seconds, for a trial that changes about 10 files
MARKER = "PATCHGUARD_BENCH_CULPRIT"


def patchguard() -> list[str]:
    beside = Path(sys.executable).parent / "patchguard"
    exe = str(beside) if beside.exists() else shutil.which("patchguard")
    return [exe] if exe else [sys.executable, "-m", "patchguard"]


def build(workdir: Path, package: str) -> tuple[Path, Path]:
    """(the venv's python, the wheelhouse holding the wheel it was installed from)."""
    wheels, venv = workdir / "wheels", workdir / "venv"
    if not any(wheels.glob("*.whl")):
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), package],
            check=True,
        )
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        (wheel,) = wheels.glob("*.whl")
        subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
            check=True,
        )
    return python, wheels


def site_of(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return Path(out.stdout.strip())


def modules(site: Path, package: str) -> list[Path]:
    """The package's modules, largest first (what a person debugging would open), a stable order."""
    top = site / package.split("==")[0].replace("-", "_")
    found = [p for p in top.rglob("*.py") if p.stat().st_size > 2000]
    return sorted(found, key=lambda p: (-p.stat().st_size, str(p)))


def edit(path: Path, line: str) -> None:
    """A hand edit: a line after the first one, written beside and renamed over (an editor's save)."""
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(1, line + "\n")
    tmp = path.with_name(path.name + ".swp")
    tmp.write_text("".join(lines))
    os.replace(tmp, path)


def digest_tree(site: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(site.rglob("*")):
        if p.is_file() and ".patchguard" not in p.parts:
            h.update(str(p).encode() + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def one(
    python: Path, wheels: Path, site: Path, files: list[Path], n: int, k: int, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    chosen = rng.sample(files, n)
    culprits = rng.sample(chosen, k)
    originals = {p: p.read_bytes() for p in chosen}
    try:
        for i, p in enumerate(chosen):
            edit(p, f"{MARKER} = True  # {i}" if p in culprits else f"# looked at this on the box ({i})")
        start = digest_tree(site)
        # bad when every culprit holds its marker: k culprits break it only together
        test = " && ".join(f"grep -q {MARKER} {p}" for p in culprits)
        test = f"if {test}; then exit 1; else exit 0; fi"
        cmd = [
            *patchguard(), "bisect", "--python", str(python), "--wheelhouse", str(wheels), "--offline",
            "--test", test, "--format", "json", "-q",
        ]  # fmt: skip
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.stderr.write(f"bench_bisect: exit {proc.returncode}\n{proc.stderr}")
            sys.exit(2)
        doc = json.loads(proc.stdout)
        assert digest_tree(site) == start, "the environment is not its start state after the bisect"
    finally:
        for p, data in originals.items():
            p.write_bytes(data)
    found = {c["path"] for c in doc["culprits"]}
    wanted = {str(p.relative_to(site)) for p in culprits}
    trials = doc["trials"]
    changed = _files_changed(trials, doc)
    ten = [t["overhead"] for t, c in zip(trials, changed, strict=True) if 8 <= c <= 12]
    test_time = sum(t["seconds"] for t in trials)
    return {
        "n": n,
        "k": k,
        "runs": doc["runs"],
        "k_log2_n_over_k": round(k * math.log2(n / k), 1),
        "found": found == wanted,
        "wall": round(wall, 2),
        "test_seconds": round(test_time, 2),
        "overhead_mean": round(statistics.mean(t["overhead"] for t in trials), 4),
        "overhead_max": round(max(t["overhead"] for t in trials), 4),
        "overhead_10_files": round(statistics.mean(ten), 4) if ten else None,
        "trials_10_files": len(ten),
        "beyond_trials": round(wall - test_time - sum(t["overhead"] for t in trials), 2),
    }


def _files_changed(trials: list[dict[str, Any]], doc: dict[str, Any]) -> list[int]:
    """How many files each trial changed: the units whose membership differs from the state before it
    (a file unit is one file; hunks of one file count once)."""
    out: list[int] = []
    previous: set[int] | None = None
    phase = None
    for t in trials:
        now = set(t["included"])
        if t["phase"] != phase or previous is None:
            # the first trial of a phase starts from the state the last one left: count it whole
            out.append(len(now) if phase is None else len(now ^ (previous or set())))
        else:
            out.append(len(now ^ previous))
        previous, phase = now, t["phase"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keep", type=Path, help="make the environment here once and reuse it")
    parser.add_argument("--package", default="pip==24.3.1")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="bench-bisect-"))
    python, wheels = build(workdir, args.package)
    site = site_of(python)
    files = modules(site, args.package)
    rows = [
        one(python, wheels, site, files, n, k, seed=n * 10 + k)
        for n in (8, 32, 128)
        for k in (1, 2)
        if n <= len(files)
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"bisect on {args.package} ({len(files)} modules over 2 KB), test: a shell grep")
    print(f"{'n':>4} {'k':>2} {'runs':>5} {'k·log2(n/k)':>12} {'found':>6} {'wall s':>7} {'test s':>7} "
          f"{'trial s':>8} {'max s':>6} {'~10 files s':>12} {'rest s':>7}")  # fmt: skip
    for r in rows:
        ten = f"{r['overhead_10_files']:.3f} ({r['trials_10_files']})" if r["overhead_10_files"] else "-"
        print(
            f"{r['n']:>4} {r['k']:>2} {r['runs']:>5} {r['k_log2_n_over_k']:>12} {r['found']!s:>6} "
            f"{r['wall']:>7} {r['test_seconds']:>7} {r['overhead_mean']:>8.3f} {r['overhead_max']:>6.3f} "
            f"{ten:>12} {r['beyond_trials']:>7}"
        )
    worst = max((r["overhead_10_files"] or 0) for r in rows)
    verdict = "PASS" if worst < TARGET_OVERHEAD else "FAIL"
    print(
        f"overhead of a trial changing ~10 files: worst mean {worst:.3f} s "
        f"(target < {TARGET_OVERHEAD} s): {verdict}"
    )
    print(
        "runs / k·log2(n/k): "
        + ", ".join(f"n={r['n']},k={r['k']}: {r['runs'] / max(r['k_log2_n_over_k'], 1):.2f}" for r in rows)
    )


if __name__ == "__main__":
    main()
