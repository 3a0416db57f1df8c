"""Carrying a set's edits to the next release, four ways, on the same edits (issue 26).

For each pair of real adjacent releases X -> Y (default: packaging 24.0 -> 24.1, rich 13.6.0 -> 13.7.0,
vllm 0.33.0 -> 0.34.0; wheels in ``--wheels DIR`` or fetched with ``pip download --no-deps``) the local
edit of ``bench_rebase.py`` is made in X's ``.py`` files that upstream changed (``_pg_local = 1  # local
edit`` before the first statement of every 5th function, at most 4 per file; at most ``--max-files`` files,
100 for vllm), then each edited file present in Y is carried four ways:

* ``git apply --reject`` of the file's diff X -> X edited onto Y's file (what a person does by hand);
* plain ``git merge-file -p Y X X-edited`` (a line merge; a conflict leaves the file's edits for review);
* patchguard before issue 26 (``merge``: git's merge plus the touching-lines rule);
* patchguard now (``merge_file``: git's merge checked, the merge by statement where git conflicts).

Every edit is then judged by its anchor: *carried* when the function it was made in (by qualified name)
starts with the edit line in the result, *mis-placed* when the line is somewhere else (another function, a
second copy), *left* when it is not in the result (a rejected hunk, or a conflict left for review — the
review gets it, no harm done). A file gone from Y is *lost* for every method (moves are ``rebase``'s job, not
the merge's). Also one real downstream patch (``--downstream``): an SM120 capability edit in
``sglang/srt/utils/common.py`` and a communicator edit in ``custom_all_reduce.py``, carried from sglang
0.5.22 to 0.5.23.

    python benchmarks/bench_merge.py [--wheels DIR] [--pairs DIST:X:Y ...] [--downstream] [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_rebase import EDIT_LINE, fetch, local_edits, py_members

from patchguard.patchsets.rebase.merge import merge, merge_file

DEFAULT_PAIRS = ["packaging:24.0:24.1", "rich:13.6.0:13.7.0", "vllm:0.33.0:0.34.0"]
LABELS = ("ours", "base", "theirs")
METHODS = ("git apply", "git merge-file", "patchguard before", "patchguard now")
DOWNSTREAM = {
    "sglang/srt/utils/common.py": (
        "_check_cuda_device_version, device_capability_majors=[10], cuda_version=(12, 8)",
        "_check_cuda_device_version, device_capability_majors=[10, 12], cuda_version=(12, 8)",
    ),
    "sglang/srt/distributed/device_communicators/custom_all_reduce.py": (
        "    _SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]\n",
        "    _SUPPORTED_WORLD_SIZES = [2, 4, 6, 8, 16]  # our 16-GPU boxes\n",
    ),
}


def edited_functions(text: str) -> list[str]:
    """The qualified names of the functions whose body starts with the edit line (after the function's
    docstring, when upstream gave it one: the edit is the first statement there)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines()
    out: list[str] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                body = child.body
                if not isinstance(child, ast.ClassDef) and body:
                    docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    firsts = body[:2] if docstring else body[:1]
                    if any(lines[s.lineno - 1].strip() == EDIT_LINE for s in firsts):
                        out.append(name)
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def as_target(text: str) -> str:
    """A merged file with its conflicts taken as the target has them: what is carried outside them stays."""
    out: list[str] = []
    side = ""
    for line in text.splitlines(keepends=True):
        mark = line[:7]
        if mark == "<" * 7:
            side = "ours"
        elif mark == "|" * 7:
            side = "base"
        elif mark == "=" * 7 and side:
            side = "theirs"
        elif mark == ">" * 7 and side:
            side = ""
        elif side in ("", "ours"):
            out.append(line)
    return "".join(out)


def judge(result: str | None, wanted: list[str]) -> dict[str, int]:
    """carried / mis-placed / left, for the edits ``wanted`` (their functions), in ``result`` (conflict
    regions left for review: the target's side counted)."""
    if result is None:
        return {"carried": 0, "misplaced": 0, "left": len(wanted)}
    result = as_target(result)
    got = edited_functions(result)
    carried = sum(1 for f in wanted if f in got)
    present = sum(1 for line in result.splitlines() if line.strip() == EDIT_LINE)
    misplaced = max(present - carried, 0)
    return {"carried": carried, "misplaced": misplaced, "left": len(wanted) - carried - misplaced}


def git_apply(base: bytes, theirs: bytes, ours: bytes, scratch: Path) -> str:
    import difflib

    (scratch / "f.py").write_bytes(ours)
    for rej in scratch.glob("*.rej"):
        rej.unlink()
    a, b = base.decode().splitlines(keepends=True), theirs.decode().splitlines(keepends=True)
    diff = "".join(difflib.unified_diff(a, b, "a/f.py", "b/f.py"))
    (scratch / "f.patch").write_text(diff)
    subprocess.run(
        ["git", "apply", "--reject", "-p1", "f.patch"], cwd=scratch, capture_output=True, check=False,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull},
    )  # fmt: skip
    return (scratch / "f.py").read_text()


def git_merge_file(base: bytes, theirs: bytes, ours: bytes, scratch: Path) -> str:
    for name, data in (("o", ours), ("b", base), ("t", theirs)):
        (scratch / name).write_bytes(data)
    proc = subprocess.run(
        ["git", "merge-file", "-p", "--diff3", "o", "b", "t"], cwd=scratch, capture_output=True, check=False
    )
    return proc.stdout.decode()


def carried_by(method: str, path: str, base: bytes, theirs: bytes, ours: bytes, scratch: Path) -> str:
    """The file ``method`` makes of the set's edit (base -> theirs) on ``ours``, conflicts included."""
    if method == "git apply":
        return git_apply(base, theirs, ours, scratch)
    if method == "git merge-file":
        return git_merge_file(base, theirs, ours, scratch)
    if method == "patchguard before":
        return merge(ours, base, theirs, LABELS).data.decode()
    return merge_file(path, ours, base, theirs, LABELS).data.decode()


def carry_all(files: dict[str, tuple[bytes, bytes, bytes]], wanted: dict[str, list[str]]) -> dict[str, Any]:
    totals = {m: {"carried": 0, "misplaced": 0, "left": 0} for m in METHODS}
    seconds = dict.fromkeys(METHODS, 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for path, (base, theirs, ours) in files.items():
            for method in METHODS:
                t0 = time.perf_counter()
                result: str | None = carried_by(method, path, base, theirs, ours, scratch)
                seconds[method] += time.perf_counter() - t0
                for key, n in judge(result, wanted[path]).items():
                    totals[method][key] += n
    return {"methods": totals, "seconds": {m: round(s, 2) for m, s in seconds.items()}}


def bench_pair(dist: str, x: str, y: str, wheels: Path, max_files: int | None) -> dict[str, Any]:
    old, new = py_members(fetch(dist, x, wheels)), py_members(fetch(dist, y, wheels))
    edited, changed = local_edits(old, new, max_files, spread=True)
    files = {p: (old[p], data, new[p]) for p, data in edited.items() if p in new}
    wanted = {p: edited_functions(edited[p].decode()) for p in files}
    lost = sum(len(edited_functions(edited[p].decode())) for p in edited if p not in new)
    out = carry_all(files, wanted)
    edits = sum(map(len, wanted.values()))
    out.update({"pair": f"{dist} {x} -> {y}", "files": len(files), "edits": edits, "lost": lost})
    out["upstream_changed"] = changed
    return out


def downstream(wheels: Path) -> dict[str, Any]:
    """The hand-written SM120 and communicator edits, carried from sglang 0.5.22 to 0.5.23."""
    old, new = py_members(fetch("sglang", "0.5.22", wheels)), py_members(fetch("sglang", "0.5.23", wheels))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for path, (before, after) in DOWNSTREAM.items():
            base, ours = old[path], new[path]
            assert before.encode() in base, path
            theirs = base.replace(before.encode(), after.encode(), 1)
            row = {"file": path}
            for method in METHODS:
                result = carried_by(method, path, base, theirs, ours, scratch)
                if result is None or "<<<<<<<" in result:
                    row[method] = "left for review"
                elif after in result and result.count(after.strip()) == 1 and before not in result:
                    row[method] = "carried"
                else:
                    row[method] = "WRONG" if after.strip() in result else "lost"
            rows.append(row)
    return {"pair": "sglang 0.5.22 -> 0.5.23 (downstream patch)", "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--wheels", type=Path, default=Path(tempfile.gettempdir()) / "bench-merge-wheels")
    parser.add_argument("--pairs", nargs="*", default=DEFAULT_PAIRS)
    parser.add_argument("--downstream", action="store_true")
    parser.add_argument("--max-files", type=int, default=100, help="files edited in vllm (default 100)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.wheels.mkdir(parents=True, exist_ok=True)
    results = []
    for spec in args.pairs:
        dist, x, y = spec.split(":")
        results.append(bench_pair(dist, x, y, args.wheels, args.max_files if dist == "vllm" else None))
    extra = downstream(args.wheels) if args.downstream else None
    if args.json:
        print(json.dumps({"pairs": results, "downstream": extra}, indent=2))
        return
    for r in results:
        head = f"{r['pair']}: {r['files']} files, {r['edits']} edits"
        print(f"\n{head} ({r['lost']} more in files gone upstream)")
        print(f"  {'method':<18} {'carried':>8} {'left':>6} {'mis-placed':>11} {'seconds':>8}")
        for m in METHODS:
            t = r["methods"][m]
            print(f"  {m:<18} {t['carried']:>8} {t['left']:>6} {t['misplaced']:>11} {r['seconds'][m]:>8}")
        apply_failed = r["methods"]["git apply"]["left"] + r["methods"]["git apply"]["misplaced"]
        now = r["methods"]["patchguard now"]
        ratio = now["left"] / apply_failed if apply_failed else 0.0
        print(f"  left for a person / git apply's failures: {ratio:.2f} (target <= 0.33); "
              f"mis-placed now: {now['misplaced']} (target 0)")  # fmt: skip
    if extra:
        print(f"\n{extra['pair']}")
        for row in extra["rows"]:
            print(f"  {row['file']}")
            for m in METHODS:
                print(f"    {m:<18} {row[m]}")


if __name__ == "__main__":
    main()
