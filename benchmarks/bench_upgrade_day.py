"""Upgrade day on a real vLLM box: ``plan``, pip's upgrade, ``rebase --all``, ``apply`` and ``rollback``.

The benchmark builds its own box in WORKDIR: a real venv (``python3 -m venv WORK/venv``) holding the real
``vllm==0.33.0`` wheel (``WORK/venv/bin/python -m pip install --no-deps --no-compile``), from ``--wheels DIR``
or fetched with ``pip download --no-deps``. It edits the installed files the way a person would and captures
the edits as three sets (``patchguard capture``):

* ``sm120``: SM120 (Blackwell workstation) capability edits in three files: ``platforms/cuda.py`` (the
  attention backend priorities of SM100 for SM120 too), ``attention/sparse_mla_attention.py`` and
  ``quantization/online/nvfp4.py`` (capability family 100 or 120);
* ``allreduce``: SGLang-style custom all-reduce tuning: a 16 MiB ``max_size`` default and custom all-reduce up
  to 16 ranks in ``custom_all_reduce.py`` (a line upstream changed too: a conflict), larger SM90 thresholds in
  ``all_reduce_utils.py``;
* ``nccl-tuning``: the startup hook ``zz-nccl.pth`` (``os.environ.setdefault("NCCL_P2P_DISABLE", "1")``),
  captured with ``--unowned`` (a set whose target is the environment).

Then the upgrade day, each patchguard run with ``--patches WORK/patches --site-packages SITE --wheelhouse
WORK/house --offline`` (the house: both wheels) and ``PATCHGUARD_CACHE_DIR=WORK/cache``:

1. the sets applied (``patchguard apply --set NAME``; a no-op where capture left them applied), every file of
   vllm 0.33.0's RECORD hashed, ``patchguard lock -o WORK/before.lock``;
2. timed: ``patchguard plan vllm==0.34.0 --format json`` (``plan_s``), its verdict per set and file;
3. timed: the upgrade, ``pip install --no-deps --no-compile <vllm 0.34.0 wheel>`` (``pip_upgrade_s``);
4. timed: ``patchguard rebase --all --format json`` (``rebase_all_s``); each file's outcome mapped to a plan
   verdict (carried, moved, resolved: carries; upstream: already upstream; conflict: needs review; lost,
   dropped: lost) and compared with the plan, file by file (``plan_matches_rebase_all``: the same sets, the
   same files, the same verdicts);
5. ``patchguard apply --set NAME`` of every set ``rebase --all`` carried whole;
6. timed: ``patchguard rollback --lock WORK/before.lock --format json`` (``rollback_s``); then every file of
   vllm 0.33.0's RECORD (but ``INSTALLER``, ``RECORD``, ``REQUESTED``, ``direct_url.json``) hashed again and
   compared with step 1 (``rollback_byte_identical``, ``rollback_differing_files``, of them members of the
   wheel: ``rollback_differing_wheel_files``, the others are written by the installer — console scripts —
   and their first differing line is shown; ``leftover_files``: files under ``vllm/`` the RECORD does not
   list), and ``patchguard check --lock WORK/before.lock`` (``check_exit``, with the default policy; its
   ``LOCK`` lines: ``check_lock_violations``), then again with a policy of ``allowed_sets = [the three
   sets]`` (``check_allowed_sets_exit``);
7. the reference: pip's upgrade to 0.34.0 again and the carried sets applied again (untimed: the state
   rollback started from), then timed: ``pip install --no-deps --no-compile --force-reinstall <vllm 0.33.0
   wheel>`` (``pip_force_reinstall_s``); with ``--repeat N`` (default 3) N of each, interleaved, every later
   rollback from the same upgraded state and hashed again (``rollback_differing_later_runs``); medians, their
   processor time, and the ratio ``rollback_s / pip_force_reinstall_s``. pip puts the pristine release back;
   rollback puts back the release *and* the sets the lock had in place.

A patchguard run exiting 2 (or another code it should not) aborts the benchmark with its output (exit 2).
Otherwise the script exits 0 whatever the checks say. It prints ``key value`` lines, or with ``--json`` one
JSON object. About 2 GB of disk in WORKDIR (the venv, rollback's backups); about two minutes on 2 cores.

    python benchmarks/bench_upgrade_day.py [--wheels DIR] [--workdir DIR] [--python PYTHON3]
                                           [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import collections
import csv
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

OLD, NEW = "0.33.0", "0.34.0"
DIST = "vllm"
HOOK = "zz-nccl.pth"
HOOK_TEXT = 'import os; os.environ.setdefault("NCCL_P2P_DISABLE", "1")\n'
NOT_HASHED = {"INSTALLER", "RECORD", "REQUESTED", "direct_url.json"}

# rebase's outcome of a file -> the plan's verdict for it
VERDICT = {
    "carried": "carries",
    "moved": "carries",
    "resolved": "carries",
    "upstream": "already upstream",
    "conflict": "needs review",
    "lost": "lost",
    "dropped": "lost",
}

_CUDA = "vllm/platforms/cuda.py"
_SPARSE_MLA = "vllm/model_executor/layers/attention/sparse_mla_attention.py"
_NVFP4 = "vllm/model_executor/layers/quantization/online/nvfp4.py"
_CUSTOM_AR = "vllm/distributed/device_communicators/custom_all_reduce.py"
_AR_UTILS = "vllm/distributed/device_communicators/all_reduce_utils.py"

# set -> (description, [(file, text of 0.33.0 that occurs once, replacement)])
SETS: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "sm120": (
        "Run on sm120 (RTX PRO 6000 Blackwell): SM100's attention backends and MLA/NVFP4 paths on SM120 too",
        [
            (
                _CUDA,
                "        if device_capability.major == 10 and not use_non_causal:\n",
                "        if device_capability.major in (10, 12) and not use_non_causal:  # sm120 too\n",
            ),
            (
                _SPARSE_MLA,
                "    if not current_platform.is_device_capability_family(100):\n        return False\n",
                "    if not (\n"
                "        current_platform.is_device_capability_family(100)\n"
                "        or current_platform.is_device_capability_family(120)  # sm120\n"
                "    ):\n"
                "        return False\n",
            ),
            (
                _NVFP4,
                "        if not current_platform.is_device_capability_family(100):\n"
                "            raise ValueError(\n",
                "        if not (\n"
                "            current_platform.is_device_capability_family(100)\n"
                "            or current_platform.is_device_capability_family(120)  # sm120\n"
                "        ):\n"
                "            raise ValueError(\n",
            ),
        ],
    ),
    "allreduce": (
        "SGLang-style custom all-reduce: 16 MiB buffer, up to 16 ranks, larger SM90 thresholds",
        [
            (
                _CUSTOM_AR,
                "        max_size=8192 * 1024,\n",
                "        max_size=16384 * 1024,  # as SGLang: 16 MiB\n",
            ),
            (
                _CUSTOM_AR,
                "        if self.disabled or self.world_size > 8:\n",
                "        if self.disabled or self.world_size > 16:  # 16 ranks are supported\n",
            ),
            (
                _AR_UTILS,
                "        6: MiB // 2,  # 512 KB\n        8: MiB // 4,  # 256 KB\n",
                "        6: 2 * MiB,  # 2 MB (SGLang)\n        8: 2 * MiB,  # 2 MB (SGLang)\n",
            ),
        ],
    ),
}
HOOK_SET = "nccl-tuning"

Json = dict[str, object]


def say(msg: str) -> None:
    sys.stderr.write(f"bench_upgrade_day: {msg}\n")
    sys.stderr.flush()


def run(
    cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, ok: tuple[int, ...] = (0,)
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    if proc.returncode not in ok:
        say(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr[-5000:]}")
        sys.exit(2)
    return proc


def timed(
    cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, ok: tuple[int, ...] = (0,)
) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall seconds, processor seconds (the child's and its waited-for children's) and the run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = run(cmd, env, cwd, ok)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc


def settle() -> None:
    os.sync()
    time.sleep(1.2)  # past the stat cache's racy window


def parse(proc: subprocess.CompletedProcess[str], what: str) -> Json:
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        tail = f"{proc.stdout[-1000:]}{proc.stderr[-3000:]}"
        say(f"{what} printed no JSON report (exit {proc.returncode})\n{tail}")
        sys.exit(2)
    if not isinstance(doc, dict):
        say(f"{what}'s JSON report is not an object")
        sys.exit(2)
    return doc


# --- wheels and the box -------------------------------------------------------------------------------------


def fetch(version: str, wheels: Path) -> Path:
    found = sorted(wheels.glob(f"{DIST}-{version}-*.whl"))
    if not found:
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        run([*pip, "-d", str(wheels), f"{DIST}=={version}"])
        found = sorted(wheels.glob(f"{DIST}-{version}-*.whl"))
    if not found:
        sys.exit(f"bench_upgrade_day: no {DIST} {version} wheel in {wheels}")
    return found[0].resolve()


def pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def pip_install(python: Path, wheel: Path, *extra: str) -> list[str]:
    return [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-compile", *extra, str(wheel)]


def make_venv(base: str, work: Path, wheel: Path) -> tuple[Path, Path]:
    """A fresh venv holding ``wheel``; returns its interpreter and its site-packages."""
    venv = work / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    run([base, "-m", "venv", str(venv)], pip_env())
    python = venv / "bin" / "python"
    run(pip_install(python, wheel), pip_env())
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], pip_env())
    return python, Path(purelib.stdout.strip())


def edit(site: Path, path: str, old: str, new: str) -> None:
    target = site / path
    text = target.read_text(encoding="utf-8")
    if text.count(old) != 1:
        sys.exit(f"bench_upgrade_day: {path}: the line to edit occurs {text.count(old)} times, not once")
    target.write_text(text.replace(old, new), encoding="utf-8")


# --- hashing ------------------------------------------------------------------------------------------------


def record_files(site: Path, version: str) -> list[Path]:
    """The installed ``vllm==version``'s RECORD files but INSTALLER, RECORD, REQUESTED, direct_url.json."""
    record = site / f"{DIST}-{version}.dist-info" / "RECORD"
    out: list[Path] = []
    with record.open(newline="", encoding="utf-8") as f:
        for row in csv.reader(f):
            if not row or not row[0]:
                continue
            rel = row[0]
            if ".dist-info/" in rel and rel.rsplit("/", 1)[-1] in NOT_HASHED:
                continue
            out.append(Path(os.path.normpath(site / rel)))
    return sorted(out)


def sha256(path: Path) -> str | None:
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    except FileNotFoundError:
        return None
    return h.hexdigest()


def snapshot(files: list[Path]) -> dict[Path, str | None]:
    return {p: sha256(p) for p in files}


def first_difference(before: bytes, after: bytes | None) -> str:
    """The first line that differs, before -> after."""
    if after is None:
        return "missing"
    old, new = before.splitlines(), after.splitlines()
    if len(old) != len(new):
        return f"{len(old)} lines -> {len(new)} lines"
    lines = [(i, a, b) for i, (a, b) in enumerate(zip(old, new, strict=True), 1) if a != b]
    if not lines:
        return "the same lines, other line endings"
    i, a, b = lines[0]
    first = f"line {i}: {a.decode(errors='replace')!r} -> {b.decode(errors='replace')!r}"
    return f"{len(lines)} of {len(old)} lines differ; {first}"


def tree_mb(path: Path) -> float:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return round(total / 2**20, 1)


# --- plan against rebase --all ------------------------------------------------------------------------------


def plan_files(doc: Json) -> tuple[dict[tuple[str, str], str], dict[str, str]]:
    """(set, path) -> the plan's verdict for that file; set -> its verdict."""
    files: dict[tuple[str, str], str] = {}
    sets: dict[str, str] = {}
    for s in doc.get("sets") or []:  # type: ignore[union-attr]
        sets[s["set"]] = s["verdict"]
        for f in s["files"]:
            files[(s["set"], f["path"])] = f["verdict"]
    return files, sets


def rebase_files(doc: Json) -> tuple[dict[tuple[str, str], str], dict[str, bool]]:
    """(set, path) -> rebase's outcome as a plan verdict; set -> carried whole."""
    files: dict[tuple[str, str], str] = {}
    sets: dict[str, bool] = {}
    for s in doc.get("sets") or []:  # type: ignore[union-attr]
        sets[s["set"]] = bool(s["complete"])
        for f in s["files"]:
            files[(s["set"], f["path"])] = VERDICT.get(f["outcome"], f"? {f['outcome']}")
    return files, sets


# --- the run ------------------------------------------------------------------------------------------------


def patchguard() -> list[str]:
    beside = Path(sys.executable).parent / "patchguard"
    exe = str(beside) if beside.exists() else shutil.which("patchguard")
    return [exe] if exe else [sys.executable, "-m", "patchguard"]


def bench(args: argparse.Namespace, work: Path, wheels: Path) -> Json:
    old, new = fetch(OLD, wheels), fetch(NEW, wheels)
    house = work / "house"  # both releases: the pristine sources of every run
    shutil.rmtree(house, ignore_errors=True)
    house.mkdir()
    for wheel in (old, new):
        (house / wheel.name).symlink_to(wheel)
    patches, cache, lock = work / "patches", work / "cache", work / "before.lock"
    for stale in (patches, cache, work / "pycache"):
        shutil.rmtree(stale, ignore_errors=True)
    lock.unlink(missing_ok=True)
    patches.mkdir()

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PATCHGUARD_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    env["PATCHGUARD_CACHE_DIR"] = str(cache)
    pg = patchguard()

    t = time.perf_counter()
    python, site = make_venv(args.python, work, old)
    setup_s = time.perf_counter() - t
    say(f"venv with vllm {OLD}: {setup_s:.1f} s; site {site}")

    def cmd(*words: str, wheelhouse: bool = True) -> list[str]:
        out = [*pg, *words, "--patches", str(patches), "--site-packages", str(site)]
        return out + (["--wheelhouse", str(house), "--offline"] if wheelhouse else [])

    def pg_run(
        *words: str, ok: tuple[int, ...] = (0,), wheelhouse: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return run(cmd(*words, wheelhouse=wheelhouse), env, work, ok)

    run([*pg, "--version"], env, work)  # untimed: compiles patchguard's bytecode

    # --- the sets: edits by hand, then capture --------------------------------------------------------------
    for name, (description, edits) in SETS.items():
        for path, before, after in edits:
            edit(site, path, before, after)
        settle()
        paths = sorted({p for p, _, _ in edits})
        words = ["capture", "--set", name, DIST, "--description", description]
        for p in paths:
            words += ["--path", p]
        pg_run(*words)
    (site / HOOK).write_text(HOOK_TEXT, encoding="utf-8")
    settle()
    pg_run("capture", "--set", HOOK_SET, "--unowned", "--path", HOOK, "--description", "NCCL P2P off")
    names = [*SETS, HOOK_SET]
    applied = {n: pg_run("apply", "--set", n, wheelhouse=False).stdout.strip() for n in names}
    sets_before = pg_run("sets", wheelhouse=False).stdout.strip()
    settle()

    # --- before the upgrade: the hashes, the lock, the plan -------------------------------------------------
    files = record_files(site, OLD)
    before = snapshot(files)
    with zipfile.ZipFile(old) as zf:
        members = set(zf.namelist())
    # the RECORD's files that are no member of the wheel: written by the installer (console scripts)
    generated = {p: p.read_bytes() for p in files if os.path.relpath(p, site) not in members}
    pg_run("lock", "-o", str(lock), wheelhouse=False)
    plan_s, _, proc = timed(cmd("plan", f"{DIST}=={NEW}", "--format", "json"), env, work, (0, 1))
    plan_exit, plan = proc.returncode, parse(proc, "plan")
    planned, planned_sets = plan_files(plan)
    say(f"plan: {plan_s:.1f} s, exit {plan_exit}")

    # --- the upgrade, then rebase --all ---------------------------------------------------------------------
    pip_upgrade_s, _, _ = timed(pip_install(python, new), pip_env())
    settle()
    rebase_s, _, proc = timed(cmd("rebase", "--all", "--format", "json"), env, work, (0, 1))
    rebase_exit, rebased = proc.returncode, parse(proc, "rebase --all")
    carried, carried_sets = rebase_files(rebased)
    say(f"rebase --all: {rebase_s:.1f} s, exit {rebase_exit}")

    keys = sorted(set(planned) | set(carried))
    matching = sum(1 for k in keys if planned.get(k) == carried.get(k))
    matches = bool(planned) and set(planned_sets) == set(carried_sets) and matching == len(keys)

    # --- the carried sets applied, then rollback ------------------------------------------------------------
    complete = [n for n, whole in carried_sets.items() if whole]
    apply_after: dict[str, object] = {}
    for n in complete:
        p = run(cmd("apply", "--set", n, wheelhouse=False), env, work, ok=tuple(range(256)))
        apply_after[n] = "ok" if p.returncode == 0 else f"exit {p.returncode}: {p.stderr.strip()[-300:]}"
    for n in carried_sets:
        apply_after.setdefault(n, "not applied: not carried whole (left to review)")
    settle()
    rollback_cmd = cmd("rollback", "--lock", str(lock), "--format", "json")
    rollback_s, rollback_cpu, proc = timed(rollback_cmd, env, work)
    rollback = parse(proc, "rollback")
    settle()
    after = snapshot(files)
    differing = sorted(os.path.relpath(p, site) for p in files if before[p] != after[p])
    differing_members = [d for d in differing if d in members]
    described = [
        f"{os.path.relpath(p, site)} (written at install, not in the wheel): "
        + first_difference(generated[p], p.read_bytes() if p.exists() else None)
        if p in generated
        else os.path.relpath(p, site)
        for p in files
        if before[p] != after[p]
    ]
    backup = rollback.get("backup_dir")  # measured now: later transactions prune old backups
    backup_mb = tree_mb(Path(backup)) if isinstance(backup, str) and os.path.isdir(backup) else None
    listed = set(files)
    leftover = sorted(
        str(p.relative_to(site)) for p in (site / DIST).rglob("*") if p.is_file() and p not in listed
    )
    dist_infos = sorted(p.name for p in site.glob(f"{DIST}-*.dist-info"))
    proc = run(cmd("check", "--lock", str(lock), "--format", "json"), env, work, ok=(0, 1))
    check_exit, check = proc.returncode, parse(proc, "check")
    details = [d for d in check.get("details") or [] if isinstance(d, dict)]  # type: ignore[union-attr]
    policy = work / "policy.toml"  # the sets are expected here: what a deployment's policy says
    policy.write_text(f"allowed_sets = {json.dumps(sorted(names))}\n", encoding="utf-8")
    proc = run(cmd("check", "--lock", str(lock), "--policy", str(policy)), env, work, ok=(0, 1))
    check_policy_exit = proc.returncode
    hook_kept = (site / HOOK).is_file() and (site / HOOK).read_text(encoding="utf-8") == HOOK_TEXT
    sets_after = pg_run("sets", wheelhouse=False).stdout.strip()

    # --- the reference: pip's force-reinstall from the same upgraded state, rollback again -----------------
    def upgraded() -> None:
        """The state rollback started from: pip's upgrade, the sets rebase --all carried applied."""
        run(pip_install(python, new), pip_env())
        for n in complete:
            run(cmd("apply", "--set", n, wheelhouse=False), env, work, ok=tuple(range(256)))
        settle()

    rollbacks, rollback_cpus, pips, pip_cpus = [rollback_s], [rollback_cpu], [], []
    later_differing: list[int] = []  # files differing after each later rollback
    for i in range(args.repeat):
        upgraded()
        wall, cpu, _ = timed(pip_install(python, old, "--force-reinstall"), pip_env())
        pips.append(wall)
        pip_cpus.append(cpu)
        if i + 1 < args.repeat:
            upgraded()
            wall, cpu, _ = timed(rollback_cmd, env, work)
            rollbacks.append(wall)
            rollback_cpus.append(cpu)
            settle()
            again = snapshot(files)
            later_differing.append(sum(1 for p in files if before[p] != again[p]))
    say(f"rollback {rollbacks} s, pip --force-reinstall {pips} s")
    rollback_med, pip_med = statistics.median(rollbacks), statistics.median(pips)

    counts = collections.Counter(planned.values())
    result: Json = {
        "box": f"venv ({python}), vllm {OLD} -> {NEW} with pip, real wheels",
        "cores": os.cpu_count(),
        "setup_s": round(setup_s, 1),
        "sets_applied": applied,
        "sets_planned": len(planned_sets),
        "files_planned": len(planned),
        "files_rebased": len(carried),
        "files_matching": matching,
        "plan_matches_rebase_all": matches,
        "plan_exit": plan_exit,
        "plan_complete": plan.get("complete"),
        "predicted": dict(sorted(counts.items())),
        "plan_set_verdicts": planned_sets,
        "file_verdicts": {
            f"{s} {p}": f"plan: {planned.get((s, p), '-')}; rebase --all: {carried.get((s, p), '-')}"
            for s, p in keys
        },
        "plan_edits": len(plan.get("edits") or []),  # type: ignore[arg-type]
        "plan_in_no_set": len(plan.get("in_no_set") or []),  # type: ignore[arg-type]
        "plan_startup_hooks": {
            h["path"]: h["fate"]
            for h in plan.get("startup_hooks") or []  # type: ignore[union-attr]
        },
        "rebase_all_exit": rebase_exit,
        "rebase_all_complete": rebased.get("complete"),
        "rebase_all_sets_carried": carried_sets,
        "apply_after_rebase": apply_after,
        "rollback_distributions": [
            f"{d['name']} {d['from']} -> {d['to']} ({d['files']} files)"
            for d in rollback.get("distributions") or []  # type: ignore[union-attr]
        ],
        "rollback_sets": rollback.get("sets"),
        "record_files_hashed": len(files),
        "rollback_byte_identical": not differing,
        "rollback_differing_files": len(differing),
        "rollback_differing_wheel_files": len(differing_members),
        "rollback_differing": described[:20],
        "rollback_changes": rollback.get("changes"),
        "rollback_backup_mb": backup_mb,
        "leftover_files": len(leftover),
        "leftover": leftover[:20],
        "dist_infos_after_rollback": dist_infos,
        "startup_hook_kept": hook_kept,
        "check_exit": check_exit,
        "check_lock_violations": sum(1 for d in details if d.get("type") == "lock"),
        "check_violations": [str(d.get("text")) for d in details][:10],
        "check_allowed_sets_exit": check_policy_exit,
        "sets_before_lock": sets_before.splitlines(),
        "sets_after_rollback": sets_after.splitlines(),
        "plan_s": round(plan_s, 2),
        "pip_upgrade_s": round(pip_upgrade_s, 2),
        "rebase_all_s": round(rebase_s, 2),
        "rollback_differing_later_runs": later_differing,
        "repeat": args.repeat,
        "rollback_runs_s": [round(w, 2) for w in rollbacks],
        "pip_force_reinstall_runs_s": [round(w, 2) for w in pips],
        "rollback_s": round(rollback_med, 2),
        "rollback_cpu_s": round(statistics.median(rollback_cpus), 2),
        "pip_force_reinstall_s": round(pip_med, 2),
        "pip_force_reinstall_cpu_s": round(statistics.median(pip_cpus), 2),
        "rollback_over_pip": round(rollback_med / pip_med, 2),
    }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=None, help="wheels found here, downloaded into it")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the box here (its venv is replaced)")
    parser.add_argument("--python", default=shutil.which("python3") or sys.executable, help="makes the venv")
    parser.add_argument("--repeat", type=int, default=3, help="rollback and pip runs, interleaved (median)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat: 1 or more")
    tmp = None if args.workdir else tempfile.TemporaryDirectory()
    work = (args.workdir or Path(tmp.name)).resolve()  # type: ignore[union-attr]
    work.mkdir(parents=True, exist_ok=True)
    wheels = (args.wheels or work / "wheels").resolve()
    wheels.mkdir(parents=True, exist_ok=True)
    try:
        result = bench(args, work, wheels)
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
                print(f"    {k}: {v}")
        elif isinstance(value, list):
            print(f"{key}:")
            for v in value:
                print(f"    {v}")
        else:
            print(f"{key:<26} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
