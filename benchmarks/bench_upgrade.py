"""Code analysis at scale: vLLM 0.34.0's ``.py`` files laid over a vLLM 0.33.0 install, scanned.

A real upstream change, not an injected one: about 1,600 changed files. The benchmark builds its own
environment — the real ``vllm==0.33.0`` wheel installed ``--no-deps --no-compile --target`` into a
venv-shaped prefix, then every ``.py`` member of the ``vllm==0.34.0`` wheel written over it (new files
included) — from wheels found in ``--wheels DIR`` or fetched with ``pip download --no-deps``. Then:

* cold: ``patchguard scan vllm --site-packages SITE --wheelhouse WHEELS --offline --format json`` with an
  empty ``PATCHGUARD_CACHE_DIR`` (no stat cache, no pristine store, no analysis results);
* warm: the same again, in the cold run's cache directory;
* no baseline: the same cold, with no wheelhouse (every changed file judged whole).

* reference: with ``--reference REV``, the same cold scan by patchguard as it was at that git revision
  (its ``patchguard/`` exported with ``git archive`` and run from there, by the same interpreter), in the
  same run: the ratio of the two cold times, and whether both found the same (every finding's rule,
  severity, path and lines).

It prints the wall times, the number of changed files, and the findings per rule and severity.
Targets (issue 12): cold <= 90 s using both cores, warm <= 5 s, no-baseline bounded like cold; (issue 34)
cold <= 0.5x the reference's, the same findings.

    python benchmarks/bench_upgrade.py [--wheels DIR] [--workdir DIR] [--skip-no-baseline]
                                       [--reference REV] [--json]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

OLD, NEW = "0.33.0", "0.34.0"
TARGET_COLD_S, TARGET_WARM_S = 90.0, 5.0


def run(
    cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, cwd=cwd)
    if proc.returncode not in (0, 1):
        sys.stderr.write(f"bench_upgrade: {' '.join(cmd)} exited {proc.returncode}\n{proc.stderr[-3000:]}")
        sys.exit(2)
    return proc


def fetch(version: str, wheels: Path) -> Path:
    found = sorted(wheels.glob(f"vllm-{version}-*.whl"))
    if not found:
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-q",
                "-d",
                str(wheels),
                f"vllm=={version}",
            ]
        )
        found = sorted(wheels.glob(f"vllm-{version}-*.whl"))
    if not found:
        sys.exit(f"bench_upgrade: no vllm {version} wheel in {wheels}")
    return found[0]


def build(work: Path, old: Path, new: Path) -> tuple[Path, int]:
    """The 0.33 install with 0.34's .py files over it; returns the site dir and how many files differ."""
    site = work / "venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    if site.exists():
        shutil.rmtree(work / "venv")
    site.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(site)]
    run([*pip, str(old)])
    changed = 0
    with zipfile.ZipFile(new) as zf:
        for name in zf.namelist():
            if not name.endswith(".py") or ".dist-info/" in name:
                continue
            data = zf.read(name)
            target = site / name
            if target.exists() and target.read_bytes() == data:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            changed += 1
    os.sync()
    time.sleep(1.2)  # past the racy windows
    return site, changed


def patchguard() -> list[str]:
    exe = shutil.which("patchguard") or str(Path(sys.executable).parent / "patchguard")
    return [exe] if Path(exe).exists() else [sys.executable, "-m", "patchguard"]


def reference(rev: str, into: Path) -> Path:
    """patchguard's package as it was at git revision ``rev``, exported under ``into``."""
    repo = Path(__file__).resolve().parent.parent
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", rev, "patchguard"],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        sys.exit(f"bench_upgrade: git archive {rev}: {archive.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def scan(
    site: Path, cache: Path, wheels: Path | None, code: Path | None = None
) -> tuple[float, dict[str, object]]:
    exe = [sys.executable, "-m", "patchguard"] if code is not None else patchguard()
    cmd = [*exe, "scan", "vllm", "--site-packages", str(site), "--offline", "--format", "json"]
    if wheels is not None:
        cmd += ["--wheelhouse", str(wheels)]
    env = {**os.environ, "PATCHGUARD_CACHE_DIR": str(cache)}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    # (``python -m`` puts the working directory first on sys.path: the reference runs from its own)
    proc = run(cmd, env, cwd=code)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return wall, json.loads(proc.stdout)


CPU: list[float] = []  # the processor time of each scan so far (its workers included), in order


def per_rule(doc: dict[str, object]) -> dict[str, int]:
    findings = doc["findings"]
    assert isinstance(findings, list)
    counts = collections.Counter(f"{f['severity']:<8} {f['rule']}" for f in findings)
    return dict(sorted(counts.items()))


def keys(doc: dict[str, object]) -> collections.Counter[tuple[object, ...]]:
    findings = doc["findings"]
    assert isinstance(findings, list)
    return collections.Counter(
        (f["rule"], f["severity"], f.get("path"), f.get("line"), f.get("end_line")) for f in findings
    )


def compare(
    result: dict[str, object],
    site: Path,
    work: Path,
    house: Path,
    rev: str,
    cold: float,
    doc: dict[str, object],
) -> None:
    """The reference's cold scan of the same environment: the time ratio and the findings compared."""
    code = reference(rev, work / "reference")
    ref_cache = work / "cache-reference"
    shutil.rmtree(ref_cache, ignore_errors=True)
    ref_cold, ref_doc = scan(site, ref_cache, house, code)
    ref_cpu = CPU[-1]
    mine, theirs = keys(doc), keys(ref_doc)
    result["reference"] = rev
    result["reference_cold_s"] = round(ref_cold, 1)
    result["cold_ratio"] = round(cold / ref_cold, 2)
    result["reference_cold_cpu_s"] = round(ref_cpu, 1)
    result["cold_cpu_ratio"] = round(float(str(result["cold_cpu_s"])) / ref_cpu, 2)
    result["verdict_ratio"] = "PASS" if cold <= 0.5 * ref_cold else "FAIL"
    result["same_findings_as_reference"] = mine == theirs
    result["only_reference"] = sum((theirs - mine).values())
    result["only_current"] = sum((mine - theirs).values())
    # what differs, by rule and severity (a change of detection between the two shows here)
    result["only_reference_by_rule"] = _by_rule(theirs - mine)
    result["only_current_by_rule"] = _by_rule(mine - theirs)


def _by_rule(keys: collections.Counter[tuple[object, ...]]) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for key, n in keys.items():
        counts[f"{key[1]:<8} {key[0]}"] += n
    return dict(sorted(counts.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--skip-no-baseline", action="store_true")
    parser.add_argument("--reference", default=None, metavar="REV", help="git revision to compare with")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = None if args.workdir else tempfile.TemporaryDirectory()
    work = args.workdir or Path(tmp.name)  # type: ignore[union-attr]
    work.mkdir(parents=True, exist_ok=True)
    wheels = args.wheels or work / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    try:
        old, new = fetch(OLD, wheels), fetch(NEW, wheels)
        house = work / "house"  # only the release installed: the pristine source
        shutil.rmtree(house, ignore_errors=True)
        house.mkdir()
        os.link(old, house / old.name) if old.stat().st_dev == house.stat().st_dev else shutil.copy(
            old, house
        )
        site, changed = build(work, old, new)
        cache = work / "cache-cold"
        shutil.rmtree(cache, ignore_errors=True)
        cold, doc = scan(site, cache, house)
        cold_cpu = CPU[-1]
        warm, warm_doc = scan(site, cache, house)
        result: dict[str, object] = {
            "environment": f"vllm {OLD} with {NEW}'s .py files over it",
            "changed_files": changed,
            "cores": os.cpu_count(),
            "cold_s": round(cold, 1),
            "cold_cpu_s": round(cold_cpu, 1),
            "warm_s": round(warm, 2),
            "verdict_cold": "PASS" if cold <= TARGET_COLD_S else "FAIL",
            "verdict_warm": "PASS" if warm <= TARGET_WARM_S else "FAIL",
            "same_findings_warm": doc["findings"] == warm_doc["findings"],
            "findings": len(doc["findings"]),  # type: ignore[arg-type]
            "per_rule": per_rule(doc),
        }
        if args.reference:
            compare(result, site, work, house, args.reference, cold, doc)
        if not args.skip_no_baseline:
            bare = work / "cache-no-baseline"
            shutil.rmtree(bare, ignore_errors=True)
            nob, nob_doc = scan(site, bare, None)
            result["no_baseline_cold_s"] = round(nob, 1)
            result["no_baseline_per_rule"] = per_rule(nob_doc)
    finally:
        if tmp is not None:
            tmp.cleanup()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for key, value in result.items():
        if isinstance(value, dict):
            print(f"{key}:")
            for k, v in value.items():
                print(f"    {v:>6}  {k}")
        else:
            print(f"{key:<22} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
