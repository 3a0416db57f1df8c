"""Fuzz the merge rebase makes on real files: random statement edits on both sides, every clean result checked
against the reference merge (issue 33: "never a silent wrong merge").

From the ``.py`` files of a real wheel (default: vLLM 0.33.0, found in ``--wheels DIR`` or fetched with
``pip download --no-deps``) the script takes functions whose body has at least four one-line statements, and
for each of ``--cases`` random cases (seeded: the same cases every run):

* the set (base -> theirs) inserts ``_pg_set = 1`` right after one statement of the body;
* upstream (base -> ours) inserts, at random places of the same body, copies of its own one-line statements
  (look-alikes of the anchor among them) and new statements;
* ``patchguard.patchsets.rebase.merge.merge_file`` merges; a conflict is "left for review" (no harm done); a
  clean result must be the reference — upstream's file with the set's line right after the very statement it
  was written after — else it is counted **wrong**.

Prints cases, clean, left for review, wrong (target 0) and the wall time. Exits 0 when it ran.

    python benchmarks/bench_merge_fuzz.py [--wheels DIR] [--wheel FILE] [--cases N] [--seed N] [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from patchguard.patchsets.rebase.merge import merge_file

LABELS = ("target", "base", "base + set")


@dataclass(frozen=True)
class Body:
    path: str
    text: str
    lines: tuple[int, ...]  # 0-based line of each one-line statement of the body, in order
    indent: str


def _bodies(path: str, text: str) -> list[Body]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines(keepends=True)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        simple = [
            s.lineno - 1
            for s in node.body
            if s.end_lineno == s.lineno and not isinstance(s, (ast.Return, ast.Raise, ast.Expr))
        ]
        if len(simple) < 4:
            continue
        first = lines[simple[0]]
        out.append(Body(path, text, tuple(simple), first[: len(first) - len(first.lstrip())]))
    return out


def _case(body: Body, rng: random.Random) -> tuple[str, str, str, str]:
    """(base, theirs, ours, reference) of one case."""
    lines = body.text.splitlines(keepends=True)
    anchor = rng.choice(body.lines)
    set_line = f"{body.indent}_pg_set = 1\n"
    theirs = [*lines[: anchor + 1], set_line, *lines[anchor + 1 :]]
    # upstream: insertions at statement boundaries of the body, tracked so the anchor is known afterwards
    inserts: dict[int, list[str]] = {}
    for _ in range(rng.randint(1, 3)):
        at = rng.choice([*body.lines, body.lines[-1] + 1])  # before a statement, or after the last one
        copy = lines[rng.choice(body.lines)] if rng.random() < 0.7 else f"{body.indent}_pg_up = 0\n"
        inserts.setdefault(at, []).append(copy)
    ours: list[str] = []
    reference: list[str] = []
    for n, line in enumerate(lines):
        ours += inserts.get(n, [])
        reference += inserts.get(n, [])
        ours.append(line)
        reference.append(line)
        if n == anchor:
            reference.append(set_line)
    return body.text, "".join(theirs), "".join(ours), "".join(reference)


def _wheel(args: argparse.Namespace, work: Path) -> Path:
    if args.wheel:
        return Path(args.wheel)
    for d in args.wheels:
        found = sorted(Path(d).glob("vllm-0.33.0-*.whl"))
        if found:
            return found[0]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(work), "vllm==0.33.0"],
        check=True,
    )
    return sorted(work.glob("vllm-0.33.0-*.whl"))[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", action="append", default=[], help="a directory holding the wheel")
    parser.add_argument("--wheel", default=None, help="the wheel whose .py files are fuzzed")
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = _wheel(args, Path(tmp))
        bodies: list[Body] = []
        with zipfile.ZipFile(wheel) as zf:
            for name in sorted(zf.namelist()):
                if name.endswith(".py") and "/" in name:
                    bodies += _bodies(name, zf.read(name).decode("utf-8", "replace"))
    rng = random.Random(args.seed)
    clean = review = wrong = 0
    wrong_cases: list[str] = []
    for k in range(args.cases):
        body = rng.choice(bodies)
        base, theirs, ours, reference = _case(body, rng)
        got = merge_file(body.path, ours.encode(), base.encode(), theirs.encode(), LABELS)
        if got.conflicts:
            review += 1
        elif got.data.decode() == reference:
            clean += 1
        else:
            wrong += 1
            wrong_cases.append(f"case {k}: {body.path}")
    out = {
        "wheel": wheel.name,
        "functions": len(bodies),
        "cases": args.cases,
        "clean": clean,
        "review": review,
        "wrong": wrong,
        "wrong_cases": wrong_cases[:20],
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"bench_merge_fuzz: {wheel.name}, {len(bodies)} functions with 4+ one-line statements")
        print(f"  cases {args.cases}: clean {clean}, left for review {review}, wrong {wrong} (target 0)")
        for line in wrong_cases[:20]:
            print(f"  wrong: {line}")
        print(f"  {out['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
