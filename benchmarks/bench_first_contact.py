"""First contact on a real vLLM box, caches empty: scan, rescan, diff, restore; patchguard fetches the wheel.

Builds its own environment: a fresh venv (``python3 -m venv``) with ``pip install --no-deps --no-cache-dir
vllm==0.33.0`` (``--keep DIR`` makes it in DIR once and reuses it), then edits it the way a person would: two
shape-gated ``torch.save`` dumps in an attention ``forward`` of ``models/deepseek_v2.py`` and an SM120 change
in ``platforms/cuda.py``, each file written to a temporary name and renamed over the original, like an editor.

Every patchguard run is ``patchguard ... --python VENV/bin/python`` with ``PIP_CACHE_DIR`` and
``UV_CACHE_DIR`` empty, so the pristine wheel can only come from the index: (a) a first scan, empty
``PATCHGUARD_CACHE_DIR``; (b) warm scans in that cache; (c) the reference: warm scans with ``--wheelhouse``
holding the wheel (a) fetched, in a cache of their own; (d) ``diff`` and (e) ``restore vllm`` in (a)'s cache.

    python benchmarks/bench_first_contact.py [--keep DIR] [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import ast
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
from pathlib import Path
from typing import Any

VLLM = "vllm==0.33.0"
MODEL = "vllm/model_executor/models/deepseek_v2.py"
PLATFORM = "vllm/platforms/cuda.py"
# SM120 edits tried in order on platforms/cuda.py: the first line holding the old text gets the new one
SM120 = (("device_capability.major == 10", "device_capability.major in (10, 12)"), ("(10, 0)", "(12, 0)"))
TARGET_RATIO = 1.10
STEPS = {"a": "first scan, empty cache", "b": "second scan", "c": "wheelhouse scan, warm (reference)"}
STEPS |= {"d": "diff, warm cache", "e": "restore vllm, warm cache"}


def run(cmd: list[str], env: dict[str, str] | None = None, ok: tuple[int, ...] = (0, 1)) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in ok:
        sys.stderr.write(f"bench_first_contact: {' '.join(cmd)} exited {proc.returncode}\n{proc.stderr}")
        sys.exit(2)
    return wall, proc.stdout


def patchguard() -> list[str]:
    beside = Path(sys.executable).parent / "patchguard"
    exe = str(beside) if beside.exists() else shutil.which("patchguard")
    return [exe] if exe else [sys.executable, "-m", "patchguard"]


def record_digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def record_rows(site: Path) -> dict[str, str]:
    with open(site / "vllm-0.33.0.dist-info" / "RECORD", newline="", encoding="utf-8") as fh:
        return {r[0]: r[1] for r in csv.reader(fh) if len(r) >= 2 and r[0] in (MODEL, PLATFORM)}


def prepare(venv: Path) -> Path:
    """The venv with vllm (installed unless it is there), the two files to edit as the wheel has them."""
    python, saved = venv / "bin" / "python", venv / "bench-pristine"
    if not python.exists():
        run(["python3", "-m", "venv", str(venv)], ok=(0,))
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(run([str(python), "-c", purelib], ok=(0,))[1].strip())
    if not (site / "vllm-0.33.0.dist-info").is_dir():
        log(f"installing {VLLM} into {venv} ...")
        run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-cache-dir", VLLM], ok=(0,))
        shutil.rmtree(saved, ignore_errors=True)
    for rel, digest in record_rows(site).items():  # with --keep: undo a run that stopped before its restore
        if not (saved / rel).exists():
            (saved / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(site / rel, saved / rel)
        if record_digest((site / rel).read_bytes()) != digest:
            if record_digest((saved / rel).read_bytes()) != digest:
                sys.exit(f"bench_first_contact: {site / rel} differs from its RECORD row; delete {venv}")
            write_like_an_editor(site / rel, (saved / rel).read_text(encoding="utf-8"))
    return site


def write_like_an_editor(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text, encoding="utf-8")
    shutil.copymode(path, tmp)
    os.replace(tmp, path)


def edit(site: Path) -> dict[str, list[list[int]]]:
    """Apply the edits; return the edited line numbers per file, one list per edit."""
    lines = (site / MODEL).read_text(encoding="utf-8").splitlines(keepends=True)
    forwards = [
        (cls.name, f, arg)
        for cls in ast.walk(ast.parse("".join(lines)))
        if isinstance(cls, ast.ClassDef) and "Attention" in cls.name
        for f in cls.body
        if isinstance(f, ast.FunctionDef) and f.name == "forward" and len(f.body) >= 3
        if isinstance(f.body[-1], ast.Return) and isinstance(f.body[-1].value, ast.Name)
        for arg in [a.arg for a in f.args.args if "hidden" in a.arg][:1]
    ]
    if not forwards:
        sys.exit(f"bench_first_contact: no attention forward to edit in {MODEL}")
    name, fn, param = max(forwards, key=lambda cf: len(cf[1].body))  # the longest body: room for two dumps
    first, last = fn.body[0], fn.body[-1]
    assert isinstance(last, ast.Return) and isinstance(last.value, ast.Name)
    pad = " " * first.col_offset
    edited: dict[str, list[list[int]]] = {MODEL: []}
    # after the first statement (0-based index of the next line) and before the return; the dumped variable
    blocks = [(first.end_lineno or first.lineno, param, "in"), (last.lineno - 1, last.value.id, "out")]
    for n, (at, var, dump) in enumerate(blocks):  # top first: the first block moves the second down by two
        save = f'{pad}    torch.save({var}.detach().cpu(), "/tmp/mla_{dump}.pt")\n'
        lines[at + 2 * n : at + 2 * n] = [f"{pad}if {var}.shape[0] == 5:\n", save]
        edited[MODEL].append([at + 2 * n + 1, at + 2 * n + 2])
    write_like_an_editor(site / MODEL, "".join(lines))
    log(f"edited {name}.forward in {MODEL}: dump blocks at lines {edited[MODEL]}")
    lines = (site / PLATFORM).read_text(encoding="utf-8").splitlines(keepends=True)
    hit = next(((n, old, new) for old, new in SM120 for n, text in enumerate(lines) if old in text), None)
    if hit is None:
        sys.exit(f"bench_first_contact: no compute-capability check to edit in {PLATFORM}")
    lines[hit[0]] = lines[hit[0]].replace(hit[1], hit[2], 1)
    edited[PLATFORM] = [[hit[0] + 1]]
    write_like_an_editor(site / PLATFORM, "".join(lines))
    log(f"edited {PLATFORM}:{hit[0] + 1}: {lines[hit[0]].strip()}")
    for rel in edited:
        ast.parse((site / rel).read_text(encoding="utf-8"))  # still valid Python
    os.sync()
    time.sleep(1.2)  # past the racy window of the stat cache
    return edited


def downloads(cache: Path) -> dict[str, int]:
    top = cache / "downloads"
    return {str(p.relative_to(top)): p.stat().st_size for p in top.rglob("*") if p.is_file()}


def step(cmd: list[str], env: dict[str, str], ok: tuple[int, ...] = (0, 1)) -> tuple[float, str, int]:
    """Run a patchguard command: its wall time, stdout and the bytes it added to its cache's downloads."""
    cache = Path(env["PATCHGUARD_CACHE_DIR"])
    before = downloads(cache)
    wall, out = run(cmd, env, ok)
    return wall, out, sum(size for name, size in downloads(cache).items() if before.get(name) != size)


def keys(report: str) -> list[str]:
    return sorted(f"{f['kind']} {f['rule']} {f['path']}:{f['line']}" for f in json.loads(report)["findings"])


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measure(venv: Path, work: Path, repeat: int) -> dict[str, Any]:
    site = prepare(venv)
    edited = edit(site)
    lines = {(rel, n) for rel, edits in edited.items() for e in edits for n in e}
    py, pg = ["--python", str(venv / "bin" / "python")], patchguard()
    base = {k: v for k, v in os.environ.items() if not k.startswith("PATCHGUARD_")}
    base.pop("PYTHONDONTWRITEBYTECODE", None)  # else the editable install recompiles itself on every run
    for name in ("pip-cache", "uv-cache", "cache-a", "cache-c", "wheelhouse"):
        (work / name).mkdir()
    base |= {"PIP_CACHE_DIR": str(work / "pip-cache"), "UV_CACHE_DIR": str(work / "uv-cache")}
    base |= {"PYTHONPYCACHEPREFIX": str(work / "pycache")}
    env_a = {**base, "PATCHGUARD_CACHE_DIR": str(work / "cache-a")}
    env_c = {**base, "PATCHGUARD_CACHE_DIR": str(work / "cache-c")}
    run([*pg, "--version"], base, ok=(0,))  # untimed: patchguard's own bytecode
    scan = [*pg, "scan", *py, "--format", "json"]
    res: dict[str, Any] = {"environment": str(venv), "repeat": repeat, "patchguard": " ".join(pg)}
    a_s, out, a_bytes = step(scan, env_a)
    report = json.loads(out)["findings"]
    wheels = sorted(n for n in downloads(work / "cache-a") if n.endswith(".whl"))
    res["a"] = dict(s=a_s, bytes=a_bytes, wheels=wheels, note=f"{len(wheels)} wheel(s): {' '.join(wheels)}")
    dumps = [f["line"] for f in report if f["rule"] == "tensor-dump" and f["path"] == MODEL]
    res["dump_sites_found"] = sum(any(n in block for n in dumps) for block in edited[MODEL])
    res["baseline_none"] = sum(f.get("baseline") == "none" for f in report)
    res["upstream_lines_flagged"] = [
        f"{f['kind']} {f['rule']} {f['path']}:{f['line']}: {f['source']}"
        for f in report
        if f["line"] is not None and (f["path"], f["line"]) not in lines
    ]
    res["findings_a"] = keys(out)
    for rel in wheels:
        shutil.copy2(work / "cache-a" / "downloads" / rel, work / "wheelhouse")
    house = [*scan, "--wheelhouse", str(work / "wheelhouse")]
    run(house, env_c)  # (c)'s first, cold run: untimed
    b_runs, c_runs, b_bytes, same = [], [], 0, True
    for _ in range(repeat):  # interleaved: each ratio compares runs made seconds apart
        wall, out, got = step(scan, env_a)
        b_runs.append(wall)
        b_bytes, same = b_bytes + got, same and keys(out) == res["findings_a"]
        c_runs.append(step(house, env_c)[0])
    c_bytes = sum(downloads(work / "cache-c").values())
    res["b"] = {"s": statistics.median(b_runs), "bytes": b_bytes, "note": f"same findings as (a): {same}"}
    res["c"] = {"s": statistics.median(c_runs), "bytes": c_bytes, "note": "--wheelhouse with (a)'s wheel"}
    res["ratio_b_c"] = statistics.median(b / c for b, c in zip(b_runs, c_runs, strict=True))
    d_s, diff, d_bytes = step([*pg, "diff", *py], env_a)
    added = {line[1:] for line in diff.splitlines() if line.startswith("+")}
    text = {rel: (site / rel).read_text(encoding="utf-8").splitlines() for rel in edited}
    missing = [text[rel][n - 1] for rel, n in sorted(lines) if text[rel][n - 1] not in added]
    note = f"edited lines not in it: {len(missing)}"
    res["d"] = dict(s=d_s, bytes=d_bytes, missing_lines=missing, note=note)
    e_s, _, e_bytes = step([*pg, "restore", "vllm", *py], env_a, ok=(0,))
    out = run([*scan, "--no-analysis"], env_a)[1]
    left = [f["path"] for f in json.loads(out)["findings"] if f["kind"] == "modified" and f["path"] in edited]
    rows = record_rows(site)
    hashes = all(record_digest((site / rel).read_bytes()) == rows[rel] for rel in edited)
    note = f"modified left: {len(left)}; RECORD hashes match: {hashes}"
    res["e"] = dict(s=e_s, bytes=e_bytes, modified_left=left, record_hashes_match=hashes, note=note)
    res["pip_uv_caches_used"] = any(any((work / d).rglob("*.whl")) for d in ("pip-cache", "uv-cache"))
    ok = {
        "first scan fetches only vllm": len(wheels) == 1 and wheels[0].startswith("vllm-0.33.0-"),
        "second scan within 10 % of warm wheelhouse scan": res["ratio_b_c"] <= TARGET_RATIO,
        "nothing downloaded twice": b_bytes == c_bytes == d_bytes == e_bytes == 0,
        "both dump sites found": res["dump_sites_found"] == len(edited[MODEL]),
        "no untouched upstream line called injected": not res["upstream_lines_flagged"],
        "no finding has baseline none": res["baseline_none"] == 0,
        "diff shows every inserted line": not missing,
        "restore puts RECORD hashes back": hashes and not left,
    }
    res["verdicts"] = {k: "PASS" if v else "FAIL" for k, v in ok.items()}
    return res


def table(res: dict[str, Any]) -> str:
    out = [f"environment: {res['environment']}", f"patchguard:  {res['patchguard']}", ""]
    out.append(f"b and c: medians of {res['repeat']} interleaved runs")
    out.append(f"{'step':<38} {'wall s':>8} {'bytes downloaded':>17}  notes")
    for k, what in STEPS.items():
        out.append(f"{k + ' ' + what:<38} {res[k]['s']:>8.3f} {res[k]['bytes']:>17,}  {res[k]['note']}")
    out += ["", f"ratio b / c: {res['ratio_b_c']:.3f} (target <= {TARGET_RATIO}; median of per-round ratios)"]
    out.append(f"ratio a / c: {res['a']['s'] / res['c']['s']:.1f} (the fetch and the cold scan)")
    out.append(f"dump sites found: {res['dump_sites_found']} of 2; baseline none: {res['baseline_none']}")
    out.append(f"findings at lines not edited: {len(res['upstream_lines_flagged'])}")
    out += [f"    {f}" for f in res["upstream_lines_flagged"]]
    out += ["first scan's findings:", *(f"    {f}" for f in res["findings_a"])]
    out += [f"missing from the diff: {t}" for t in res["d"]["missing_lines"]]
    if res["pip_uv_caches_used"]:
        out.append("warning: a wheel appeared in PIP_CACHE_DIR or UV_CACHE_DIR")
    out += ["", *(f"{v}  {k}" for k, v in res["verdicts"].items())]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, metavar="DIR", help="the venv: made if absent, kept, reused")
    parser.add_argument("--repeat", type=int, default=3, metavar="N", help="warm runs of (b) and (c); median")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    with tempfile.TemporaryDirectory(prefix="pg-first-contact-") as tmp:
        venv = args.keep.absolute() if args.keep else Path(tmp) / "venv"
        (Path(tmp) / "work").mkdir()
        res = measure(venv, Path(tmp) / "work", args.repeat)
    print(json.dumps(res, indent=2) if args.json else table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
