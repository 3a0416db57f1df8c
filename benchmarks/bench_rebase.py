"""Carrying a patch set to the next release: ``patchguard rebase`` against ``git apply --reject`` (issue 13).

For each pair of real adjacent releases X -> Y of a distribution (default: packaging 24.0 -> 24.1,
rich 13.6.0 -> 13.7.0, vllm 0.33.0 -> 0.34.0) the benchmark builds its own environment from the real
wheels, found in ``--wheels DIR`` or fetched with ``pip download --no-deps --only-binary=:all:``:

1. wheel X installed with ``pip install --no-deps --no-compile --target`` into a venv-shaped prefix
   ``WORK/<dist>/<X>-<Y>/venv/lib/pythonX.Y/site-packages``;
2. a deterministic local edit of X, in the ``.py`` files upstream changed between X and Y (different bytes
   in Y, or gone from Y): in every 5th function (``ast`` order by line: indices 0, 5, 10, 15, at most 4 per
   file) the line ``_pg_local = 1  # local edit`` inserted just before the first statement of the body,
   with its indentation; at most ``--max-files`` files (default 100 for vllm, all for the others), in path
   order;
3. ``patchguard capture --set bench DIST`` writes the set (``WORK/<dist>/<X>-<Y>/patches/bench``);
4. the upgrade: the site rebuilt fresh from wheel Y (``pip install --upgrade --target`` would leave X's
   dist-info beside Y's);
5. the reference: each ``.patch`` of the set with ``git apply --reject --verbose -p1`` on a copy of Y's files:
   rejected hunks, and files missing from Y (lost: all their hunks fail);
6. timed: ``patchguard rebase --set bench --site-packages SITE --patches DIR --wheelhouse WHEELS --offline
   --format json``, once cold (empty ``PATCHGUARD_CACHE_DIR``) then ``--repeat`` times warm (same cache), the
   set and no review directory restored before every run; exits 0 and 1 both count as runs;
7. mis-merge spot check: for every file the rebase carried, ``git merge-file -p <Y> <X> <X edited>``
   compared with Y plus the rewritten set (``git apply``); when the rebase leaves conflicts (exit 1) the
   carried files alone are rebased again, as a set of their own, and checked the same way.

Per pair it prints the set (files, hunks), ``git apply``'s failing hunks and lost files, the rebase's carried,
conflicting and lost, its moved files, the ratio of the rebase's failed hunks (conflicting + lost) to
``git apply``'s (target <= 1/3), cold and warm times (target for the 100-file vllm set: warm < 5 s) and the
spot check (target: 0 mismatches), then the same figures summed over all pairs. While ``patchguard rebase``
does not exist its columns read ``-``.

    python benchmarks/bench_rebase.py --wheels DIR [--workdir DIR] [--pairs DIST:X:Y ...] [--skip-vllm]
        [--max-files N] [--select spread|first] [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import ast
import collections
import difflib
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

# Adjacent releases with a large upstream change: packaging 24.1 modernized its annotations (13 of 14 modules,
# many ``def`` lines), rich 13.7.0 touched 27 modules; vllm 0.34.0 about 1,600 files, some moved or removed.
DEFAULT_PAIRS = ["packaging:24.0:24.1", "rich:13.6.0:13.7.0", "vllm:0.33.0:0.34.0"]
DEFAULT_MAX_FILES = {"vllm": 100}
EDIT_LINE = "_pg_local = 1  # local edit"
EVERY, PER_FILE = 5, 4
TARGET_RATIO, TARGET_WARM_S, TARGET_WARM_FILES = 1 / 3, 5.0, 100
SET = "bench"

Json = dict[str, object]


def say(msg: str) -> None:
    sys.stderr.write(f"bench_rebase: {msg}\n")
    sys.stderr.flush()


def run(
    cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, ok: tuple[int, ...] = (0,)
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    if proc.returncode not in ok:
        say(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
        sys.exit(2)
    return proc


def child_env(work: Path, cache: Path | None = None) -> dict[str, str]:
    """patchguard's environment: bytecode written (an editable install otherwise compiles on every run)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    if cache is not None:
        env["PATCHGUARD_CACHE_DIR"] = str(cache)
    return env


def git_env(scratch: Path) -> dict[str, str]:
    """git confined to the scratch directory: no enclosing repository's config (whitespace, crlf) applies."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CEILING_DIRECTORIES"] = str(scratch.parent.resolve())
    return env


def patchguard() -> list[str]:
    beside = Path(sys.executable).parent / "patchguard"
    exe = str(beside) if beside.exists() else shutil.which("patchguard")
    return [exe] if exe else [sys.executable, "-m", "patchguard"]


# --- wheels and environments --------------------------------------------------------------------------------


def normalize(dist: str) -> str:
    return re.sub(r"[-_.]+", "_", dist).lower()


def find_wheel(dist: str, version: str, wheels: Path) -> Path | None:
    prefix = f"{normalize(dist)}-{version}-"
    found = sorted(p for p in wheels.iterdir() if p.name.lower().startswith(prefix) and p.suffix == ".whl")
    return found[0] if found else None


def fetch(dist: str, version: str, wheels: Path) -> Path:
    found = find_wheel(dist, version, wheels)
    if found is None:
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        run([*pip, "-d", str(wheels), f"{dist}=={version}"])
        found = find_wheel(dist, version, wheels)
    if found is None:
        sys.exit(f"bench_rebase: no {dist} {version} wheel in {wheels}")
    return found


def py_members(wheel: Path) -> dict[str, bytes]:
    """The wheel's ``.py`` files by installed path (relative to site-packages)."""
    with zipfile.ZipFile(wheel) as zf:
        return {
            n: zf.read(n)
            for n in zf.namelist()
            if n.endswith(".py") and ".dist-info/" not in n and ".data/" not in n
        }


def install(work: Path, wheel: Path) -> Path:
    """A fresh venv-shaped prefix holding only ``wheel``; returns its site-packages."""
    site = work / "venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    shutil.rmtree(work / "venv", ignore_errors=True)
    site.mkdir(parents=True)
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
    return site


def settle() -> None:
    os.sync()
    time.sleep(1.2)  # past the stat cache's racy window


# --- the local edit -----------------------------------------------------------------------------------------


def edit(source: str) -> str | None:
    """``EDIT_LINE`` before the first body statement of functions 0, 5, 10, 15; None when nothing to edit."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    funcs = sorted(
        (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))),
        key=lambda n: n.lineno,
    )
    lines = source.splitlines(keepends=True)
    points: list[tuple[int, str, str]] = []  # (0-based line, indentation, newline)
    for fn in funcs[::EVERY][:PER_FILE]:
        first = fn.body[0]
        line = lines[first.lineno - 1]
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if first.lineno == fn.lineno or len(indent) != first.col_offset:
            continue  # ``def f(): pass``, or code before the statement on its line
        points.append((first.lineno - 1, indent, "\r\n" if line.endswith("\r\n") else "\n"))
    if not points:
        return None
    for at, indent, nl in sorted(set(points), reverse=True):
        lines.insert(at, f"{indent}{EDIT_LINE}{nl}")
    return "".join(lines)


def local_edits(
    old: dict[str, bytes], new: dict[str, bytes], cap: int | None, spread: bool
) -> tuple[dict[str, bytes], int]:
    """The edited X files (path -> bytes) among those upstream changed, and how many changed upstream.

    At most ``cap`` files: the first ones in path order, or (``spread``) ones evenly spaced over all the
    editable files in path order, so that a capped set also holds files upstream moved or removed.
    """
    changed = sorted(p for p, data in old.items() if new.get(p) != data)
    edited: dict[str, bytes] = {}
    for path in changed:
        if cap is not None and len(edited) >= cap and not spread:
            break
        try:
            text = old[path].decode("utf-8")
        except UnicodeDecodeError:
            continue
        out = edit(text)
        if out is not None:
            edited[path] = out.encode("utf-8")
    if cap is not None and len(edited) > cap:
        paths = list(edited)
        edited = {p: edited[p] for p in (paths[i * len(paths) // cap] for i in range(cap))}
    return edited, len(changed)


# --- the set ------------------------------------------------------------------------------------------------


def read_set(directory: Path) -> dict[str, tuple[str, int]]:
    """Each file the set patches (``a/`` path) -> (its .patch file, its hunks)."""
    out: dict[str, tuple[str, int]] = {}
    for patch in sorted(directory.glob("*.patch")):
        current = None
        for line in patch.read_text(encoding="utf-8", errors="surrogateescape").splitlines():
            if line.startswith("--- "):
                name = line[4:].split("\t")[0]
                current = name[2:] if name.startswith("a/") else name
                out[current] = (patch.name, 0)
            elif line.startswith("@@") and current is not None:
                out[current] = (patch.name, out[current][1] + 1)
    return out


def capture(dist: str, site: Path, patches: Path, wheels: Path, work: Path) -> None:
    shutil.rmtree(patches, ignore_errors=True)
    cmd = [*patchguard(), "capture", "--set", SET, dist, "--site-packages", str(site)]
    cmd += ["--patches", str(patches), "--wheelhouse", str(wheels), "--offline"]
    run(cmd, child_env(work, work / "cache-capture"))


# --- the reference: git apply --reject ----------------------------------------------------------------------


def git_apply_reference(
    set_dir: Path, files: dict[str, tuple[str, int]], new: dict[str, bytes], scratch: Path
) -> Json:
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for path in files:
        if path in new:
            (scratch / path).parent.mkdir(parents=True, exist_ok=True)
            (scratch / path).write_bytes(new[path])
    env = git_env(scratch)
    rejected = lost_hunks = offset = 0
    lost: list[str] = []
    errors: list[str] = []
    by_patch: dict[str, list[str]] = {}
    for path, (patch, _) in files.items():
        by_patch.setdefault(patch, []).append(path)
    for patch, paths in sorted(by_patch.items()):
        cmd = ["git", "apply", "--reject", "--verbose", "-p1", str((set_dir / patch).resolve())]
        proc = run(cmd, env, scratch, ok=(0, 1))
        err = proc.stderr
        rejected += len(re.findall(r"^Rejected hunk #", err, re.M))
        offset += len(re.findall(r"^Hunk #\d+ succeeded at \d+ \(offset", err, re.M))
        for path in paths:
            if f"{path}: No such file or directory" in err or f"{path}: does not exist in index" in err:
                lost.append(path)
                lost_hunks += files[path][1]
        if proc.returncode and "Rejected hunk #" not in err and not any(p in lost for p in paths):
            errors.append(f"{patch}: {err.strip().splitlines()[-1] if err.strip() else proc.returncode}")
            rejected += sum(files[p][1] for p in paths)
    return {
        "failing_hunks": rejected + lost_hunks,
        "rejected_hunks": rejected,
        "lost_files": len(lost),
        "lost_hunks": lost_hunks,
        "lost": lost,
        "offset_hunks": offset,
        "errors": errors,
    }


# --- patchguard rebase --------------------------------------------------------------------------------------


def rebase_available() -> bool:
    proc = subprocess.run([*patchguard(), "rebase", "--help"], capture_output=True, text=True, check=False)
    return proc.returncode == 0


def restore_patches(snapshot: Path, patches: Path) -> None:
    shutil.rmtree(patches, ignore_errors=True)
    shutil.copytree(snapshot, patches)


def digest(site: Path, paths: list[str]) -> str:
    h = hashlib.sha256()
    for p in paths:
        f = site / p
        h.update(p.encode() + (f.read_bytes() if f.exists() else b"<missing>"))
    return h.hexdigest()


def rebase(site: Path, patches: Path, wheels: Path, work: Path, cache: Path) -> tuple[float, int, Json]:
    cmd = [*patchguard(), "rebase", "--set", SET, "--site-packages", str(site), "--patches", str(patches)]
    cmd += ["--wheelhouse", str(wheels), "--offline", "--format", "json"]
    t = time.perf_counter()
    proc = run(cmd, child_env(work, cache), ok=(0, 1))
    wall = time.perf_counter() - t
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        tail = f"{proc.stdout[-1000:]}{proc.stderr[-2000:]}"
        say(f"rebase printed no JSON report (exit {proc.returncode})\n{tail}")
        sys.exit(2)
    if not isinstance(doc, dict):
        say("rebase's JSON report is not an object")
        sys.exit(2)
    return wall, proc.returncode, doc


def paths_of(items: object, key: str = "path") -> list[str]:
    """A list of paths, whether given as strings or as objects holding one under ``key``."""
    out: list[str] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and isinstance(item.get(key), str):
            out.append(item[key])
    return out


def moves_of(doc: Json) -> dict[str, str]:
    moved = doc.get("moved")
    return {
        m["from"]: m["to"]
        for m in (moved if isinstance(moved, list) else [])
        if isinstance(m, dict) and isinstance(m.get("from"), str) and isinstance(m.get("to"), str)
    }


def summarize(doc: Json, files: dict[str, tuple[str, int]]) -> Json:
    hunks = doc.get("hunks")
    hunks = hunks if isinstance(hunks, dict) else {}
    lost = paths_of(doc.get("lost"))
    conflicts = doc.get("conflicts")
    conflicting = hunks.get("conflicting")
    if not isinstance(conflicting, int):
        conflicting = sum(
            int(c.get("hunks", 1))
            for c in (conflicts if isinstance(conflicts, list) else [])
            if isinstance(c, dict)
        )
    lost_hunks = hunks.get("lost")
    if not isinstance(lost_hunks, int):
        lost_hunks = sum(files.get(p, ("", 0))[1] for p in lost)
    return {
        "hunks_total": hunks.get("total"),
        "hunks_carried": hunks.get("carried"),
        "hunks_conflicting": conflicting,
        "lost_files": len(lost),
        "lost_hunks": lost_hunks,
        "failed_hunks": conflicting + lost_hunks,
        "conflict_files": len(paths_of(conflicts)),
        "moved_files": len(moves_of(doc)),
        "upstream_files": len(paths_of(doc.get("upstream"))),
        "written": doc.get("written"),
        "review_dir": doc.get("review_dir"),
    }


# --- the mis-merge spot check -------------------------------------------------------------------------------


def spot_check(
    set_dir: Path,
    checked: list[str],
    moves: dict[str, str],
    old: dict[str, bytes],
    edited: dict[str, bytes],
    new: dict[str, bytes],
    scratch: Path,
) -> Json:
    """``git merge-file -p Y X X-edited`` for each checked file against Y + the rewritten set."""
    shutil.rmtree(scratch, ignore_errors=True)
    tree, three = scratch / "tree", scratch / "three"
    tree.mkdir(parents=True)
    three.mkdir()
    for path in {moves.get(p, p) for p in checked} | set(read_set(set_dir)):
        if path in new:
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / path).write_bytes(new[path])
    env = git_env(tree)
    apply_failed: list[str] = []
    for patch in sorted(set_dir.glob("*.patch")):
        proc = run(["git", "apply", "-p1", str(patch.resolve())], env, tree, ok=(0, 1))
        if proc.returncode:
            apply_failed.append(patch.name)
    mismatches: list[str] = []
    unverifiable: list[str] = []
    touching: list[str] = []
    for i, path in enumerate(checked):
        target = moves.get(path, path)
        if target not in new or path not in old or path not in edited:
            unverifiable.append(path)
            continue
        ours, base, theirs = three / f"{i}.ours", three / f"{i}.base", three / f"{i}.theirs"
        ours.write_bytes(new[target])
        base.write_bytes(old[path])
        theirs.write_bytes(edited[path])
        merged = subprocess.run(
            ["git", "merge-file", "-p", str(ours), str(base), str(theirs)],
            capture_output=True,
            env=env,
            check=False,
        )
        got = tree / target
        if merged.returncode != 0:
            # git conflicts where the two changes only touch; rebase merged those line by line. Check that
            # the rewritten set makes exactly the set's change: the same lines added and removed.
            touching.append(path)
            if not got.exists() or change(old[path], edited[path]) != change(new[target], got.read_bytes()):
                mismatches.append(path)
            continue
        if not got.exists() or got.read_bytes() != merged.stdout:
            mismatches.append(path)
    return {
        "checked": len(checked) - len(unverifiable),
        "checked_line_by_line": len(touching),
        "mismatches": len(mismatches),
        "mismatched": mismatches,
        "unverifiable": unverifiable,
        "set_apply_failures": apply_failed,
    }


def change(before: bytes, after: bytes) -> tuple[collections.Counter[bytes], collections.Counter[bytes]]:
    """The lines a change removes and adds (as multisets): what a set does, wherever its context is."""
    a, b = before.splitlines(), after.splitlines()
    removed: collections.Counter[bytes] = collections.Counter()
    added: collections.Counter[bytes] = collections.Counter()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            removed.update(a[i1:i2])
            added.update(b[j1:j2])
    return removed, added


def carried_subset(
    snapshot: Path, dest: Path, doc: Json, files: dict[str, tuple[str, int]]
) -> list[str] | None:
    """A copy of the set holding only the files the rebase did not fail on; None when there are none."""
    failing = set(paths_of(doc.get("conflicts"))) | set(paths_of(doc.get("lost")))
    moves = moves_of(doc)
    keep = sorted(p for p in files if p not in failing and moves.get(p, p) not in failing)
    if not keep:
        return None
    shutil.rmtree(dest, ignore_errors=True)
    (dest / SET).mkdir(parents=True)
    names = sorted({files[p][0] for p in keep})
    for name in names:
        shutil.copy(snapshot / SET / name, dest / SET / name)
    toml = (snapshot / SET / "patchset.toml").read_text(encoding="utf-8")
    listed = "files = [" + ", ".join(json.dumps(n) for n in names) + "]"
    (dest / SET / "patchset.toml").write_text(re.sub(r"^files = \[.*\]$", listed, toml, flags=re.M), "utf-8")
    return keep


# --- one pair -----------------------------------------------------------------------------------------------


def bench_pair(
    dist: str, x: str, y: str, args: argparse.Namespace, work: Path, wheels: Path, can_rebase: bool
) -> Json:
    times: dict[str, float] = {}
    root = work / normalize(dist) / f"{x}-{y}"
    root.mkdir(parents=True, exist_ok=True)

    t = time.perf_counter()
    wx, wy = fetch(dist, x, wheels), fetch(dist, y, wheels)
    times["fetch_s"] = time.perf_counter() - t
    old, new = py_members(wx), py_members(wy)

    t = time.perf_counter()
    site = install(root, wx)
    times["install_x_s"] = time.perf_counter() - t

    cap = args.max_files if args.max_files is not None else DEFAULT_MAX_FILES.get(normalize(dist))
    cap = cap or None  # 0: no cap
    edited, changed = local_edits(old, new, cap, args.select == "spread")
    if not edited:
        sys.exit(f"bench_rebase: {dist} {x} -> {y}: no function to edit in the files upstream changed")
    for path, data in edited.items():
        (site / path).write_bytes(data)
    settle()

    patches = root / "patches"
    t = time.perf_counter()
    capture(dist, site, patches, wheels, root)
    times["capture_s"] = time.perf_counter() - t
    set_dir = patches / SET
    files = read_set(set_dir)
    snapshot = root / "patches.orig"
    shutil.rmtree(snapshot, ignore_errors=True)
    shutil.copytree(patches, snapshot)

    t = time.perf_counter()
    site = install(root, wy)
    times["install_y_s"] = time.perf_counter() - t
    dist_infos = sorted(p.name for p in site.glob("*.dist-info"))

    t = time.perf_counter()
    ref = git_apply_reference(set_dir, files, new, root / "git-apply")
    times["git_apply_s"] = time.perf_counter() - t
    settle()

    result: Json = {
        "distribution": dist,
        "from_version": x,
        "to_version": y,
        "upstream_changed_py": changed,
        "upstream_gone_py": sum(1 for p in old if p not in new),
        "max_files": cap,
        "select": args.select if cap is not None else None,
        "set_files": len(files),
        "set_hunks": sum(h for _, h in files.values()),
        "dist_infos_after_upgrade": dist_infos,
        "git_apply": ref,
        "setup": {k: round(v, 2) for k, v in times.items()},
    }
    if not can_rebase:
        result["rebase"] = None
        return result

    cache = root / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    watched = sorted(set(files) | {p for p in files if p in new})
    before = digest(site, watched)
    site_touched = False

    def one_run() -> tuple[float, int, Json]:
        nonlocal site_touched
        restore_patches(snapshot, patches)
        wall, code, doc = rebase(site, patches, wheels, root, cache)
        if digest(site, watched) != before:  # rebase should leave the environment alone; put it back if not
            site_touched = True
            for p in watched:
                if p in new:
                    (site / p).write_bytes(new[p])
            settle()
        return wall, code, doc

    cold, code, doc = one_run()
    # Kept for a look afterwards: the rewritten set (exit 0), the review directory (exit 1).
    rewritten, review = root / "rebased", root / "review"
    shutil.rmtree(rewritten, ignore_errors=True)
    shutil.rmtree(review, ignore_errors=True)
    if code == 0 and set_dir.is_dir():
        shutil.copytree(set_dir, rewritten)
    review_dir = doc.get("review_dir")
    if code == 1 and isinstance(review_dir, str) and os.path.isdir(review_dir):
        shutil.copytree(review_dir, review)
    warm_runs = [one_run()[0] for _ in range(args.repeat)]
    warm = statistics.median(warm_runs)
    summary = summarize(doc, files)
    git_failed = ref["failing_hunks"]
    assert isinstance(git_failed, int)
    failed = summary["failed_hunks"]
    assert isinstance(failed, int)
    result["rebase"] = {
        "exit": code,
        **summary,
        "ratio": round(failed / git_failed, 3) if git_failed else None,
        "verdict_ratio": ("PASS" if failed <= TARGET_RATIO * git_failed else "FAIL") if git_failed else None,
        **kept_ratio(summary, ref),
        "cold_s": round(cold, 3),
        "warm_s": round(warm, 3),
        "warm_runs_s": [round(w, 3) for w in warm_runs],
        "site_modified": site_touched,
        "report": doc,
    }

    # The spot check: the rewritten set, or (exit 1) the carried files rebased again as a set of their own.
    check: Json | None = None
    if code == 0 and rewritten.is_dir():
        check = spot_check(rewritten, sorted(files), moves_of(doc), old, edited, new, root / "check")
        check["source"] = "rewritten set"
    elif code == 1:
        subset = root / "patches.carried"
        keep = carried_subset(snapshot, subset, doc, files)
        if keep is not None:
            _, sub_code, sub_doc = rebase(site, subset, wheels, root, cache)
            if sub_code == 0:
                check = spot_check(subset / SET, keep, moves_of(sub_doc), old, edited, new, root / "check")
                check["source"] = "carried files rebased alone"
            else:
                check = {"source": "carried files rebased alone", "error": f"exit {sub_code}"}
    result["spot_check"] = check
    restore_patches(snapshot, patches)
    return result


def kept_ratio(summary: Json, ref: Json) -> Json:
    """The ratio over the files upstream kept: hunks in files the release deleted are lost to every method
    (git's lost files and the rebase's lost and moved files left out of both sides)."""
    conflicting, rejected = summary.get("hunks_conflicting"), ref.get("rejected_hunks")
    if not isinstance(conflicting, int) or not isinstance(rejected, int) or not rejected:
        return {"ratio_kept_files": None}
    return {"ratio_kept_files": round(conflicting / rejected, 3)}


# --- output -------------------------------------------------------------------------------------------------


def cell(value: object, fmt: str = "") -> str:
    return "-" if value is None else format(value, fmt)


def totals(results: list[Json]) -> Json:
    """The figures summed over the pairs (one ratio over small per-pair denominators)."""

    def total(key: str, part: str | None = None) -> int | None:
        values = []
        for r in results:
            src = r.get(part) if part else r
            value = src.get(key) if isinstance(src, dict) else None
            if not isinstance(value, int) or isinstance(value, bool):
                return None
            values.append(value)
        return sum(values)

    git_failed, failed = total("failing_hunks", "git_apply"), total("failed_hunks", "rebase")
    ratio = round(failed / git_failed, 3) if failed is not None and git_failed else None
    return {
        "set_files": total("set_files"),
        "set_hunks": total("set_hunks"),
        "git_apply": {"failing_hunks": git_failed, "lost_files": total("lost_files", "git_apply")},
        "rebase": None
        if failed is None
        else {
            "hunks_carried": total("hunks_carried", "rebase"),
            "hunks_conflicting": total("hunks_conflicting", "rebase"),
            "lost_files": total("lost_files", "rebase"),
            "moved_files": total("moved_files", "rebase"),
            "failed_hunks": failed,
            "ratio": ratio,
            "verdict_ratio": None if ratio is None else "PASS" if ratio <= TARGET_RATIO else "FAIL",
        },
    }


def table(results: list[Json]) -> None:
    head = (
        f"{'dist':<10} {'X -> Y':<17} {'files':>5} {'hunks':>5} {'git-fail':>8} {'git-lost':>8} "
        f"{'carried':>7} {'confl':>5} {'lost':>4} {'moved':>5} {'ratio':>6} {'cold s':>7} {'warm s':>7}"
    )
    print(head)
    print("-" * len(head))
    rows = results if len(results) < 2 else [*results, {"distribution": "all", **totals(results)}]
    for r in rows:
        ref = r["git_apply"]
        rb = r.get("rebase")
        assert isinstance(ref, dict)
        rb = rb if isinstance(rb, dict) else {}
        span = f"{r['from_version']} -> {r['to_version']}" if "from_version" in r else ""
        cells = [
            f"{r['distribution']!s:<10}",
            f"{span:<17}",
            f"{r['set_files']!s:>5}",
            f"{r['set_hunks']!s:>5}",
            f"{ref['failing_hunks']!s:>8}",
            f"{ref['lost_files']!s:>8}",
            f"{cell(rb.get('hunks_carried')):>7}",
            f"{cell(rb.get('hunks_conflicting')):>5}",
            f"{cell(rb.get('lost_files')):>4}",
            f"{cell(rb.get('moved_files')):>5}",
            f"{cell(rb.get('ratio'), '.2f'):>6}",
            f"{cell(rb.get('cold_s'), '.2f'):>7}",
            f"{cell(rb.get('warm_s'), '.2f'):>7}",
        ]
        print(" ".join(cells))
    print()
    for r in results:
        name = f"{r['distribution']} {r['from_version']} -> {r['to_version']}"
        ref = r["git_apply"]
        assert isinstance(ref, dict)
        print(
            f"{name}: {r['upstream_changed_py']} .py files changed upstream ({r['upstream_gone_py']} gone); "
            f"git apply: {ref['rejected_hunks']} rejected hunks, {ref['lost_files']} lost files "
            f"({ref['lost_hunks']} hunks), {ref['offset_hunks']} applied at an offset"
            + (f", errors: {ref['errors']}" if ref["errors"] else "")
        )
        rb = r.get("rebase")
        if not isinstance(rb, dict):
            print(f"{name}: rebase: not available")
            continue
        print(
            f"{name}: rebase exit {rb['exit']}, failed hunks {rb['failed_hunks']} (conflicting + lost) "
            f"vs git apply {ref['failing_hunks']}: ratio {cell(rb['ratio'], '.2f')} (target <= 0.33) "
            f"{cell(rb['verdict_ratio'])}; on the files upstream kept: conflicting {rb['hunks_conflicting']} "
            f"vs rejected {ref['rejected_hunks']}, ratio {cell(rb.get('ratio_kept_files'), '.2f')}"
            + ("; WARNING: rebase modified the site" if rb["site_modified"] else "")
        )
        sc = r.get("spot_check")
        if isinstance(sc, dict) and "checked" in sc:
            print(
                f"{name}: mis-merge check ({sc['source']}): {sc['checked']} files checked, "
                f"{sc['mismatches']} mismatches (target 0; {sc.get('checked_line_by_line', 0)} of them "
                f"where git conflicts, checked line by line), {len(sc['unverifiable'])} unverifiable "
                "(git merge-file conflicts)"
                + (f", set did not apply: {sc['set_apply_failures']}" if sc["set_apply_failures"] else "")
            )
        elif isinstance(sc, dict):
            print(f"{name}: mis-merge check ({sc['source']}): not run, {sc.get('error')}")
        else:
            print(f"{name}: mis-merge check: not run (nothing carried)")
        size, warm = r["set_files"], rb["warm_s"]
        if isinstance(size, int) and size >= TARGET_WARM_FILES and isinstance(warm, float):
            verdict = "PASS" if warm < TARGET_WARM_S else "FAIL"
            print(f"{name}: rebase of the {size}-file set: warm {warm:.2f} s (target < 5 s) {verdict}")


def parse_pair(text: str) -> tuple[str, str, str]:
    parts = text.split(":")
    if len(parts) != 3 or not all(parts):
        raise argparse.ArgumentTypeError(f"expected DIST:X:Y, got {text!r}")
    return parts[0], parts[1], parts[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=None, help="wheels found here, downloaded into it")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the environments here")
    parser.add_argument("--pairs", type=parse_pair, nargs="+", default=None, metavar="DIST:X:Y")
    parser.add_argument("--skip-vllm", action="store_true", help="leave out vllm (wheels of ~300 MB)")
    parser.add_argument(
        "--max-files", type=int, default=None, help="files in each set (default: vllm 100; 0: all)"
    )
    parser.add_argument(
        "--select",
        choices=["spread", "first"],
        default="spread",
        help="with a cap: files evenly spaced in path order (default), or the first ones",
    )
    parser.add_argument("--repeat", type=int, default=3, help="warm rebase runs (median)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    pairs: list[tuple[str, str, str]] = args.pairs or [parse_pair(p) for p in DEFAULT_PAIRS]
    if args.skip_vllm:
        pairs = [p for p in pairs if normalize(p[0]) != "vllm"]
    tmp = None if args.workdir else tempfile.TemporaryDirectory()
    work = (args.workdir or Path(tmp.name)).resolve()  # type: ignore[union-attr]
    work.mkdir(parents=True, exist_ok=True)
    wheels = (args.wheels or work / "wheels").resolve()
    wheels.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        run([*patchguard(), "--version"], child_env(work))  # untimed: compiles patchguard's bytecode
        can_rebase = rebase_available()
        if not can_rebase:
            say("rebase: not available (patchguard has no rebase command): its figures are left out")
        results = []
        for dist, x, y in pairs:
            t = time.perf_counter()
            results.append(bench_pair(dist, x, y, args, work, wheels, can_rebase))
            say(f"{dist} {x} -> {y}: {time.perf_counter() - t:.1f} s")
    finally:
        if tmp is not None:
            tmp.cleanup()
    if args.json:
        total = round(time.perf_counter() - started, 1)
        doc: Json = {
            "rebase_available": can_rebase,
            "pairs": results,
            "all": totals(results),
            "total_s": total,
        }
        print(json.dumps(doc, indent=2))
        return 0
    table(results)
    if not can_rebase:
        print("rebase: not available")
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
