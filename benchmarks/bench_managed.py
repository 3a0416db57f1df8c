#!/usr/bin/env python3
"""Packages another package manager installed — Debian's dpkg, conda — verified by its record: noise, recall,
restore and speed of ``patchguard scan`` on real packages.

Usage::

    python benchmarks/bench_managed.py [--workdir DIR] [--count N] [--edits K] [--only debian|conda]
                                       [--repeat N] [--seed S] [--json]

Two populations, each built here from real packages (downloads are cached in ``--workdir`` and reused; the
environments themselves are made anew every run, since the edits below change them and, for conda, the
package cache they are hard-linked from):

* ``debian``: ``apt-get download`` of up to ``--count`` real ``python3-*`` packages (a fixed list, popular
  pure and compiled ones; those that fail to download are skipped and counted) into ``WORK/debs``, unpacked
  with the real dpkg into a root of our own (``dpkg --root=WORK/debroot --admindir=WORK/debroot/var/lib/dpkg
  --force-not-root --force-script-chrootless --force-depends --unpack``: no maintainer script configures
  anything). The site dir is ``WORK/debroot/usr/lib/python3/dist-packages``, checked by dpkg's md5sums.
* ``conda``: ``pip download --no-deps --only-binary=:all:`` of up to ``--count`` real wheels into
  ``WORK/wheels``, each turned into a conda package as conda-build does for ``noarch: python`` (the wheel's
  files under ``site-packages/``, its dist-info with ``INSTALLER`` ``conda`` and an installer's RECORD,
  ``info/index.json``, ``info/paths.json`` with the sha256 and size of every file, ``info/files``,
  ``info/link.json`` with the console scripts), half ``.conda`` and half ``.tar.bz2``, plus a stand-in
  ``python`` package, in a local channel (``WORK/channel``) indexed by py-rattler, solved and installed by
  py-rattler into ``WORK/condaenv`` from its package cache ``WORK/pkgs`` (hard links). The site dir is
  ``WORK/condaenv/lib/pythonX.Y/site-packages``, checked by ``conda-meta/*.json``.

For each population:

1. the untouched scan (``patchguard scan --site-packages SITE --format json --offline``, a fresh
   ``PATCHGUARD_CACHE_DIR``): findings by severity and rule (the goal: no HIGH, no MODERATE), files checked,
   distributions;
2. (debian only) the noise dpkg's record removes: how many packages ship a ``.dist-info/RECORD`` and how many
   of those RECORDs disagree with the installed bytes (each row hashed here);
3. time: a cold scan (a fresh, empty ``PATCHGUARD_CACHE_DIR``: no stat cache) and a warm scan (a cache dir
   an untimed scan filled), each against a reference measured in the same round: a plain Python loop that
   reads and hashes every file the manager's record lists with a hash (debian: md5 of every md5sums file
   under the site dir; conda: sha256 of every conda-meta file with a hash). Page cache warm (the untouched
   scan and one untimed reference pass come first); ``--repeat`` rounds, medians. A scan of an empty
   directory is timed too: patchguard's fixed cost (start-up), which weighs on environments this small;
4. recall: ``--edits`` random installed ``.py`` files of random packages get ``import pdb; pdb.set_trace()``
   appended — debian: written to a new file renamed over the old one; conda: in place (``r+b``, seek to the
   end, write), as an editor writing through conda's hard link would, so the package cache's copy changes
   too. The scan a user runs (the warm cache dir) must report each (a finding on that path); the same with
   ``--no-analysis`` (integrity findings only) and with ``--wheelhouse DIR`` (a baseline: the only rule on
   an edited file should be ``debugger``) are counted too; for conda, the edited files whose findings name
   conda's package cache (the hard-link note) are counted in the default and the ``--no-analysis`` scan;
5. restore: ``patchguard restore DIST --site-packages SITE --wheelhouse DIR --offline`` for each edited
   distribution (debian: DIR = ``WORK/debs``; conda: ``WORK/channel/noarch``), then a rescan must show
   nothing the untouched scan did not, and every edited file must be byte-identical to the .deb's member
   (read with ``dpkg-deb --fsys-tarfile``) or the wheel's;
6. (conda only) the console scripts rattler wrote for the packages' entry points (``path_type``
   ``unix_python_entry_point``, recorded with a sha256 in conda-meta) are edited, scanned, and put back by
   hand: how many of those edits are reported.

patchguard runs as ``sys.executable -m patchguard`` with ``PATCHGUARD_CACHE_DIR`` in the workdir,
``PIP_NO_INDEX=1`` and ``PIP_CONFIG_FILE=/dev/null`` (no other ``PIP_*``: nothing is fetched from an index),
``RATTLER_CACHE_DIR`` and ``CONDA_PKGS_DIRS`` pointed into the workdir, and without
``PYTHONDONTWRITEBYTECODE`` (else every run compiles patchguard from source again).

Progress goes to stderr; one report per population (or, with ``--json``, one JSON object) to stdout. Exit
status: 0 when measured (it is a measure, not a gate), 2 when an environment could not be built.

Standard library, plus py-rattler and a zstd module (``compression.zstd`` or ``backports.zstd``) for the
conda population, ``apt-get``, ``dpkg`` and ``dpkg-deb`` for the debian one.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import csv
import hashlib
import io
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# the realbox benchmark's runner (wall, exit code, output and processor time of a child), its reading of a
# scan's report, and its errors
from bench_realbox import BenchError, BuildError, Run, read_report, run_child

CHUNK = 64 * 1024
HERE = Path(__file__).resolve().parent
SEVERITIES = ("high", "moderate", "minor", "info")
EDIT_LINE = b"import pdb; pdb.set_trace()\n"
DEB_SITE = "usr/lib/python3/dist-packages"
PYVER = f"{sys.version_info[0]}.{sys.version_info[1]}"
CONDA_SITE = f"lib/python{PYVER}/site-packages"
CONDA_BUILD = "pyhd8ed1ab_0"  # a noarch build string as conda-forge writes them
CACHE_NOTE = "conda's package cache"  # what the hard-link note of a conda package's finding says
MTIME = 1700000000

# In order of preference; the first --count that download are used.
DEBIAN_PACKAGES = (
    "python3-requests", "python3-urllib3", "python3-yaml", "python3-cryptography", "python3-numpy",
    "python3-six", "python3-jinja2", "python3-markupsafe", "python3-certifi", "python3-idna",
    "python3-chardet", "python3-setuptools", "python3-pip", "python3-wheel", "python3-attr",
    "python3-dateutil", "python3-tz", "python3-lxml", "python3-pil", "python3-psutil",
    "python3-serial", "python3-click", "python3-pygments", "python3-docutils", "python3-pyparsing",
    "python3-packaging", "python3-toml", "python3-simplejson", "python3-msgpack", "python3-zmq",
    "python3-scipy", "python3-cffi", "python3-bs4", "python3-soupsieve", "python3-html5lib",
    "python3-webencodings", "python3-charset-normalizer", "python3-distro", "python3-jsonschema",
    "python3-pyrsistent", "python3-ruamel.yaml", "python3-tqdm", "python3-rich", "python3-markdown",
    "python3-nacl", "python3-paramiko", "python3-bcrypt", "python3-decorator", "python3-typing-extensions",
    "python3-pluggy", "python3-babel", "python3-sqlalchemy", "python3-greenlet", "python3-werkzeug",
    "python3-flask",
)  # fmt: skip
WHEELS = (
    "requests", "urllib3", "idna", "certifi", "charset-normalizer", "six", "attrs", "packaging",
    "pyparsing", "jinja2", "markupsafe", "click", "rich", "pygments", "tqdm", "pyyaml",
    "typing-extensions", "filelock", "fsspec", "pydantic", "pydantic-core", "annotated-types", "sniffio",
    "anyio", "h11", "httpcore", "httpx", "jsonschema", "jsonschema-specifications", "referencing",
    "rpds-py", "tomli", "platformdirs", "distlib", "virtualenv", "wheel", "setuptools", "protobuf",
    "python-dateutil", "pytz", "markdown-it-py", "mdurl", "iniconfig", "pluggy", "pytest", "colorama",
    "tabulate", "decorator", "wrapt", "cachetools", "pyasn1", "rsa", "docutils", "babel", "werkzeug",
)  # fmt: skip

# Targets printed beside the figures (a measure, not a gate); the time targets are bench_realbox's.
TARGET_HIGH = 0
TARGET_MODERATE = 0
TARGET_COLD_RATIO = 0.5
TARGET_WARM_RATIO = 0.1

EXAMPLES_PER_RULE = 5
MESSAGE_CHARS = 300
STDERR_TAIL_CHARS = 2000
DOWNLOAD_TIMEOUT = 300.0


def log(message: str) -> None:
    print(f"[managed {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def file_digest(path: str, algorithm: str) -> tuple[str, int]:
    """Hex digest and size of the file at ``path`` (64 KiB reads)."""
    h = hashlib.new(algorithm)
    n = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
            n += len(chunk)
    return h.hexdigest(), n


def fresh_dir(path: Path) -> Path:
    if path.exists() or path.is_symlink():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


# --------------------------------------------------------------------------------------------------------
# Running patchguard
# --------------------------------------------------------------------------------------------------------


class Patchguard:
    """``sys.executable -m patchguard`` with its caches and the package managers' caches in the workdir."""

    def __init__(self, work: Path, population: str) -> None:
        self.cmd = [sys.executable, "-m", "patchguard"]
        self.work = work
        self.cwd = work / "cwd"  # no pyproject.toml or patchguard.toml up from here: no policy is picked up
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.caches = fresh_dir(work / "pg-cache" / population)
        self.n = 0
        self.crashes: list[dict[str, Any]] = []

    def env(self, cache: Path) -> dict[str, str]:
        drop = ("PYTHONDONTWRITEBYTECODE", "RATTLER_CACHE_DIR", "CONDA_PKGS_DIRS", "PYTHONPATH", "PYTHONHOME")
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("PATCHGUARD_", "PIP_")) and k not in drop
        }
        env.update(
            PATCHGUARD_CACHE_DIR=str(cache),
            PIP_NO_INDEX="1",
            PIP_CONFIG_FILE=os.devnull,
            RATTLER_CACHE_DIR=str(self.work / "rattler-cache"),
            CONDA_PKGS_DIRS=str(self.work / "pkgs"),
        )
        return env

    def fresh_cache(self, label: str) -> Path:
        self.n += 1
        return fresh_dir(self.caches / f"{self.n:03d}-{label}")

    def run(self, what: str, args: Sequence[str], cache: Path) -> Run:
        return run_child(what, [*self.cmd, *args], self.env(cache), self.cwd)

    def scan(self, what: str, site: Path, cache: Path, *more: str) -> tuple[Run, dict[str, Any] | None]:
        """A JSON scan; its report (``None`` when it crashed: recorded)."""
        run = self.run(
            what, ["scan", "--site-packages", str(site), "--format", "json", "--offline", *more], cache
        )
        report, why = read_report(run)
        if why:
            self.crash(run, ", ".join(why))
            return run, None
        return run, report

    def crash(self, run: Run, why: str) -> None:
        log(f"  CRASH in {run.what}: {why}: {run.stderr.strip()[-300:]}")
        self.crashes.append(
            {
                "run": run.what,
                "exit_code": run.exit_code,
                "why": why,
                "stderr_tail": run.stderr[-STDERR_TAIL_CHARS:],
                "stdout_head": run.stdout[:300],
            }
        )


def counts_of(report: Mapping[str, Any] | None) -> dict[str, int]:
    counts = ((report or {}).get("summary") or {}).get("findings") or {}
    return {s: int(counts.get(s, 0)) for s in SEVERITIES}


def findings_of(report: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [f for f in (report or {}).get("findings") or [] if isinstance(f, dict)]


def finding_key(f: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(f.get("rule")), str(f.get("distribution")), str(f.get("path")))


def example_of(f: Mapping[str, Any]) -> dict[str, Any]:
    message = str(f.get("message") or "")
    if len(message) > MESSAGE_CHARS:
        message = message[: MESSAGE_CHARS - 1] + "…"
    return {
        "distribution": f.get("distribution"),
        "version": f.get("version"),
        "path": f.get("path"),
        "line": f.get("line"),
        "message": message,
    }


def rule_table(findings: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Findings by (severity, kind, rule): count, distributions, examples (one a distribution first)."""
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for f in findings:
        key = (str(f.get("severity")), str(f.get("kind")), str(f.get("rule")))
        groups.setdefault(key, []).append(f)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    rows = []
    for key in sorted(groups, key=lambda k: (order.get(k[0], 9), -len(groups[k]), k[1], k[2])):
        fs = groups[key]
        picked: list[Mapping[str, Any]] = []
        seen: set[Any] = set()
        for f in fs:
            if f.get("distribution") not in seen:
                seen.add(f.get("distribution"))
                picked.append(f)
        picked += [f for f in fs if f not in picked]
        rows.append(
            {
                "severity": key[0],
                "kind": key[1],
                "rule": key[2],
                "count": len(fs),
                "distributions": len({f.get("distribution") for f in fs}),
                "examples": [example_of(f) for f in picked[:EXAMPLES_PER_RULE]],
            }
        )
    return rows


def untouched(pg: Patchguard, site: Path) -> dict[str, Any]:
    """The scan of the environment as installed: its findings (the noise) and what it checked."""
    log(f"untouched scan of {site}")
    run, report = pg.scan("untouched scan", site, pg.fresh_cache("untouched"))
    summary = (report or {}).get("summary") or {}
    out = {
        "exit_code": run.exit_code,
        "seconds": run.seconds,
        "findings": counts_of(report),
        "files_checked": summary.get("files_checked"),
        "distributions": summary.get("distributions"),
        "distribution_names": [d.get("name") for d in (report or {}).get("distributions") or []],
        "rules": rule_table(findings_of(report)),
        "report_ok": report is not None,
        "_keys": sorted({finding_key(f) for f in findings_of(report)}),
    }
    log(
        f"  exit {run.exit_code} in {run.seconds:.2f}s: {out['distributions']} distributions, "
        f"{out['files_checked']} files checked, findings {out['findings']}"
    )
    return out


# --------------------------------------------------------------------------------------------------------
# Timing: the reference loop against cold and warm scans
# --------------------------------------------------------------------------------------------------------


@dataclass
class Reference:
    files: int = 0
    bytes: int = 0
    mismatched: int = 0
    missing: int = 0


def reference_loop(rows: Sequence[tuple[str, str]], algorithm: str) -> Reference:
    """Read and hash every ``(path, expected hex digest)``: the work any verifier of this record must do."""
    ref = Reference()
    for path, expected in rows:
        try:
            digest, size = file_digest(path, algorithm)
        except OSError:
            ref.missing += 1
            continue
        ref.files += 1
        ref.bytes += size
        if digest != expected:
            ref.mismatched += 1
    return ref


def timings(pg: Patchguard, site: Path, reference: Callable[[], Reference], rounds: int) -> dict[str, Any]:
    """Cold and warm scans against the reference, ``rounds`` rounds back to back; medians."""
    log("timing: one untimed reference pass (page cache), then a scan filling the warm cache")
    ref = reference()
    empty = fresh_dir(pg.caches / "empty-site")  # a scan of nothing: patchguard's fixed cost
    warm_cache = pg.fresh_cache("warm")
    _, fill_report = pg.scan("warm scan (cache fill)", site, warm_cache)
    expected = counts_of(fill_report)
    ref_s: list[float] = []
    ref_cpu: list[float] = []
    cold: list[Run] = []
    warm: list[Run] = []
    fixed: list[Run] = []
    notes: list[str] = []
    for i in range(rounds):
        cpu0, start = time.process_time(), time.perf_counter()
        ref = reference()
        ref_s.append(time.perf_counter() - start)
        ref_cpu.append(time.process_time() - cpu0)
        c, c_report = pg.scan(f"cold scan round {i + 1}", site, pg.fresh_cache(f"cold{i + 1}"))
        w, w_report = pg.scan(f"warm scan round {i + 1}", site, warm_cache)
        fixed.append(pg.scan(f"empty scan round {i + 1}", empty, pg.fresh_cache(f"empty{i + 1}"))[0])
        cold.append(c)
        warm.append(w)
        for run, got in ((c, c_report), (w, w_report)):
            if got is not None and counts_of(got) != expected:
                notes.append(f"{run.what} found {counts_of(got)}, the cache fill {expected}")
        log(
            f"  round {i + 1}/{rounds}: reference {ref_s[-1]:.3f}s ({ref.files} files, "
            f"{ref.bytes / 1e6:.1f} MB, {ref.mismatched} mismatched, {ref.missing} missing); "
            f"cold {c.seconds:.3f}s; warm {w.seconds:.3f}s; empty {fixed[-1].seconds:.3f}s"
        )
    return {
        "rounds": rounds,
        "reference_files": ref.files,
        "reference_bytes": ref.bytes,
        "reference_mismatched": ref.mismatched,
        "reference_missing": ref.missing,
        "reference_s": statistics.median(ref_s),
        "cold_s": statistics.median(r.seconds for r in cold),
        "warm_s": statistics.median(r.seconds for r in warm),
        "cold_ratio": statistics.median(c.seconds / r for c, r in zip(cold, ref_s, strict=True) if r > 0),
        "warm_ratio": statistics.median(w.seconds / r for w, r in zip(warm, ref_s, strict=True) if r > 0),
        "fixed_s": statistics.median(r.seconds for r in fixed),
        "cold_less_fixed_ratio": statistics.median(
            (c.seconds - f.seconds) / r for c, f, r in zip(cold, fixed, ref_s, strict=True) if r > 0
        ),
        "warm_less_fixed_ratio": statistics.median(
            (w.seconds - f.seconds) / r for w, f, r in zip(warm, fixed, ref_s, strict=True) if r > 0
        ),
        "cold_cpu_ratio": statistics.median(c.cpu_s / r for c, r in zip(cold, ref_cpu, strict=True) if r > 0),
        "reference_times": ref_s,
        "cold_times": [r.seconds for r in cold],
        "warm_times": [r.seconds for r in warm],
        "notes": notes,
        "_warm_cache": str(warm_cache),
    }


# --------------------------------------------------------------------------------------------------------
# Recall and restore (both populations)
# --------------------------------------------------------------------------------------------------------


@dataclass
class Edit:
    package: str  # the Debian package or conda package name
    rel: str  # path relative to the site dir
    path: Path


def pick_edits(rng: random.Random, candidates: Mapping[str, Sequence[str]], k: int, site: Path) -> list[Edit]:
    """``k`` files: each time a random package with a ``.py`` file left, then a random one of its files."""
    left = {p: sorted(set(files)) for p, files in sorted(candidates.items()) if files}
    edits: list[Edit] = []
    while len(edits) < k and left:
        package = rng.choice(sorted(left))
        rel = left[package].pop(rng.randrange(len(left[package])))
        if not left[package]:
            del left[package]
        edits.append(Edit(package, rel, site / rel))
    return edits


def edited_bytes(data: bytes) -> bytes:
    """``import pdb; pdb.set_trace()`` after the file's last line."""
    return data + (b"\n" if data and not data.endswith(b"\n") else b"") + EDIT_LINE


def edit_by_rename(path: Path) -> None:
    """A new file with the edit, renamed over the old one (a new inode, as most editors save)."""
    data = path.read_bytes()
    tmp = path.with_name(f".{path.name}.bench-edit")
    tmp.write_bytes(edited_bytes(data))
    shutil.copymode(path, tmp)
    os.replace(tmp, path)


def edit_in_place(path: Path) -> None:
    """The edit written into the file itself (the same inode: through a hard link, its other names too)."""
    with open(path, "r+b") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell():
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                fh.write(b"\n")
        fh.write(EDIT_LINE)


def on_edited(findings: Sequence[dict[str, Any]], edits: Sequence[Edit]) -> dict[str, Any]:
    """What one scan says of the edited files: which are reported, worst severity, rules, hard-link notes."""
    by_path: dict[str, list[dict[str, Any]]] = {}
    for f in findings:
        by_path.setdefault(str(f.get("path")), []).append(f)
    hit = [e for e in edits if e.rel in by_path]
    order = {s: i for i, s in enumerate(SEVERITIES)}
    worst = Counter(
        min((str(f.get("severity")) for f in by_path[e.rel]), key=lambda s: order.get(s, 9)) for e in hit
    )
    on = [f for e in hit for f in by_path[e.rel]]
    # The edit adds one debugger line: any other rule judged against a baseline is about code not changed.
    beside = [f for f in on if f.get("rule") != "debugger" and f.get("baseline") != "none"]
    return {
        "by_path": by_path,
        "reported": len(hit),
        "worst": dict(worst),
        "rules": dict(Counter(str(f.get("rule")) for f in on).most_common()),
        "no_baseline": sum(1 for f in on if f.get("baseline") == "none"),
        "beside_the_edit": [
            example_of(f) | {"rule": f.get("rule"), "severity": f.get("severity"), "source": f.get("source")}
            for f in beside
        ],
        "cache_note_files": sum(
            1 for e in hit if any(CACHE_NOTE in str(f.get("message")) for f in by_path[e.rel])
        ),
    }


def recall_and_restore(
    pg: Patchguard,
    site: Path,
    edits: Sequence[Edit],
    edit: Callable[[Path], None],
    wheelhouse: Path,
    pristine: Callable[[Sequence[Edit]], dict[str, bytes]],
    baseline_keys: Iterable[tuple[str, str, str]],
    warm_cache: Path,
) -> dict[str, Any]:
    """Edit, scan (each edit must be reported), restore each edited distribution, rescan, compare bytes."""
    baseline = set(baseline_keys)
    log(f"recall: editing {len(edits)} files in {len({e.package for e in edits})} packages")
    for e in edits:
        edit(e.path)
    edited = {e.rel for e in edits}
    # The scan a user runs (analysis on, no pristine source given); the integrity findings alone; and the
    # scan given the packages (--wheelhouse, a cache dir of its own: the pristine store it fills is not the
    # one the restores below read).
    run, report = pg.scan("scan after the edits", site, warm_cache)
    _, bare = pg.scan("scan after the edits (--no-analysis)", site, warm_cache, "--no-analysis")
    _, explained = pg.scan(
        "scan after the edits (--wheelhouse)",
        site,
        pg.fresh_cache("explained"),
        "--wheelhouse",
        str(wheelhouse),
    )
    views = {
        name: on_edited(findings_of(doc), edits)
        for name, doc in (("default", report), ("no_analysis", bare), ("wheelhouse", explained))
    }
    by_path = views["default"]["by_path"]
    reported = [e for e in edits if e.rel in by_path]
    missed = [e for e in edits if e.rel not in by_path]
    others = [
        f for f in findings_of(report) if str(f.get("path")) not in edited and finding_key(f) not in baseline
    ]
    log(
        f"  exit {run.exit_code}: {len(reported)}/{len(edits)} edits reported "
        f"(worst severity {views['default']['worst']}), {len(others)} other new findings; "
        f"--no-analysis: {views['no_analysis']['reported']}, --wheelhouse: {views['wheelhouse']['reported']} "
        f"reported; cache notes {views['default']['cache_note_files']} (default), "
        f"{views['no_analysis']['cache_note_files']} (--no-analysis)"
    )
    # Which distribution each edited file belongs to, as patchguard names it (by the finding).
    dists: dict[str, str] = {}
    for e in edits:
        for view in views.values():
            found = view["by_path"].get(e.rel, ())
            names = [str(f.get("distribution")) for f in found if f.get("distribution")]
            if names:
                dists[e.rel] = Counter(names).most_common(1)[0][0]
                break
    restores: list[dict[str, Any]] = []
    for dist in sorted(set(dists.values())):
        r = pg.run(
            f"restore {dist}",
            ["restore", dist, "--site-packages", str(site), "--wheelhouse", str(wheelhouse), "--offline"],
            warm_cache,
        )
        if "Traceback (most recent call last)" in r.stderr:
            pg.crash(r, "traceback")
        restores.append(
            {
                "distribution": dist,
                "exit_code": r.exit_code,
                "seconds": r.seconds,
                "cache_note": CACHE_NOTE in r.stderr,
                "stderr_tail": r.stderr[-600:] if r.exit_code != 0 else "",
            }
        )
        log(f"  restore {dist}: exit {r.exit_code} in {r.seconds:.2f}s")
    rerun, rereport = pg.scan("rescan after restoring", site, warm_cache)
    after = findings_of(rereport)
    still_edited = [f for f in after if str(f.get("path")) in edited]
    new_after = [f for f in after if finding_key(f) not in baseline]
    wanted = pristine(edits)
    identical, differ, unknown = [], [], []
    for e in edits:
        want = wanted.get(e.rel)
        if want is None:
            unknown.append(e.rel)
        elif e.path.read_bytes() == want:
            identical.append(e.rel)
        else:
            differ.append(e.rel)
    log(
        f"  rescan exit {rerun.exit_code}: {len(new_after)} findings the untouched scan did not have; "
        f"{len(identical)}/{len(edits)} files byte-identical to the package's"
    )
    return {
        "edits": len(edits),
        "packages_edited": len({e.package for e in edits}),
        "scan_exit_code": run.exit_code,
        "reported": len(reported),
        "missed": [{"package": e.package, "path": e.rel} for e in missed],
        "worst_severity": views["default"]["worst"],
        "rules": views["default"]["rules"],
        "other_new_findings": [
            example_of(f) | {"rule": f.get("rule"), "severity": f.get("severity")} for f in others
        ],
        "files_with_cache_note": views["default"]["cache_note_files"],
        "scans": {k: {x: v[x] for x in v if x != "by_path"} for k, v in views.items()},
        "distributions_restored": len(restores),
        "restores_ok": sum(1 for r in restores if r["exit_code"] == 0),
        "restores_with_cache_note": sum(1 for r in restores if r["cache_note"]),
        "restores": restores,
        "not_restored": [{"package": e.package, "path": e.rel} for e in edits if e.rel not in dists],
        "restored_as": dict(sorted(Counter(dists.values()).items())),
        "rescan_exit_code": rerun.exit_code,
        "rescan_new_findings": [
            example_of(f) | {"rule": f.get("rule"), "severity": f.get("severity")} for f in new_after
        ],
        "rescan_edited_findings": len(still_edited),
        "rescan_clean": rereport is not None and not new_after,
        "identical": len(identical),
        "differ": differ,
        "no_pristine_member": unknown,
        "edited_files": [{"package": e.package, "path": e.rel} for e in edits],
    }


# --------------------------------------------------------------------------------------------------------
# debian: apt-get download, dpkg --unpack into a root of our own
# --------------------------------------------------------------------------------------------------------


def newest(paths: Iterable[Path]) -> Path | None:
    found = sorted(paths, key=lambda p: (p.stat().st_mtime, p.name))
    return found[-1] if found else None


def download_debs(
    names: Sequence[str], debs: Path, count: int
) -> tuple[list[tuple[str, Path]], list[dict[str, str]]]:
    """The first ``count`` of ``names`` apt-get can download (cached in ``debs``), and those it could not."""
    if shutil.which("apt-get") is None:
        raise BuildError("no apt-get on PATH")
    return download_first(
        names,
        count,
        lambda name: newest(debs.glob(f"{name}_*.deb")),
        lambda name: ["apt-get", "download", name],
        "apt-get download",
        cwd=debs,
    )


def download_first(
    names: Sequence[str],
    count: int,
    cached: Callable[[str], Path | None],
    command: Callable[[str], list[str]],
    what: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[list[tuple[str, Path]], list[dict[str, str]]]:
    """The first ``count`` of ``names`` found ``cached`` or fetched by ``command`` (then found), and those
    that could not be (with the last line the fetch said)."""
    used: list[tuple[str, Path]] = []
    failed: list[dict[str, str]] = []
    for name in names:
        if len(used) >= count:
            break
        got = cached(name)
        if got is None:
            log(f"{what} {name}")
            try:
                ran = subprocess.run(
                    command(name),
                    cwd=cwd,
                    capture_output=True,
                    text=True,
                    timeout=DOWNLOAD_TIMEOUT,
                    env=None if env is None else dict(env),
                    stdin=subprocess.DEVNULL,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                failed.append({"name": name, "reason": str(exc)[:300]})
                continue
            got = cached(name)
            if ran.returncode != 0 or got is None:
                reason = (ran.stderr.strip().splitlines() or [f"exit {ran.returncode}"])[-1]
                failed.append({"name": name, "reason": reason[:300]})
                log(f"  failed: {reason[:200]}")
                continue
        used.append((name, got))
    return used, failed


def dpkg_status(admin: Path) -> dict[str, tuple[str, str]]:
    """Package → (version, status word) from dpkg's ``status``."""
    out: dict[str, tuple[str, str]] = {}
    try:
        text = (admin / "status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for stanza in text.split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line[:1] not in (" ", "\t") and ":" in line:
                k, _, v = line.partition(":")
                fields[k.strip().lower()] = v.strip()
        if "package" in fields:
            out[fields["package"]] = (fields.get("version", ""), fields.get("status", "").rpartition(" ")[2])
    return out


def dpkg_unpack(root: Path, debs: Sequence[Path], log_file: Path) -> subprocess.CompletedProcess[str]:
    admin = root / "var/lib/dpkg"
    for d in ("info", "updates", "triggers"):
        (admin / d).mkdir(parents=True, exist_ok=True)
    (admin / "status").touch()
    cmd = [
        "dpkg",
        f"--root={root}",
        f"--admindir={admin}",
        f"--log={log_file}",
        "--force-not-root",
        "--force-script-chrootless",
        "--force-depends",
        "--unpack",
        *map(str, debs),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)


def md5sums_of(root: Path, package: str) -> dict[str, str]:
    """dpkg's md5sums of ``package``: path relative to the root → md5 hex."""
    info = root / "var/lib/dpkg/info"
    out: dict[str, str] = {}
    for f in [info / f"{package}.md5sums", *sorted(info.glob(f"{package}:*.md5sums"))]:
        try:
            text = f.read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            continue
        for line in text.splitlines():
            digest, _, rel = line.partition("  ")
            if rel:
                out[rel.strip()] = digest.lower()
    return out


def record_noise(site: Path) -> dict[str, Any]:
    """What the packages' own RECORDs say of the installed bytes: the noise that judging by RECORD made."""
    dist_infos = sorted(site.glob("*.dist-info"))
    egg_infos = sorted(site.glob("*.egg-info"))
    with_record = []
    disagree = []
    rows = mismatched = missing = unhashed = 0
    for d in dist_infos:
        record = d / "RECORD"
        if not record.is_file():
            continue
        with_record.append(d.name)
        bad = gone = 0
        with open(record, newline="", encoding="utf-8", errors="replace") as fh:
            for row in csv.reader(fh):
                if len(row) < 2 or not row[0]:
                    continue
                if not row[1]:
                    unhashed += 1
                    continue
                algo, sep, expected = row[1].partition("=")
                rows += 1
                path = os.path.normpath(os.path.join(site, row[0]))
                try:
                    digest = hashlib.new(algo) if sep else None
                except ValueError:
                    digest = None
                if digest is None:
                    bad += 1
                    continue
                try:
                    with open(path, "rb") as f:
                        while chunk := f.read(CHUNK):
                            digest.update(chunk)
                except OSError:
                    gone += 1
                    continue
                if b64(digest.digest()) != expected:
                    bad += 1
        mismatched += bad
        missing += gone
        if bad or gone:
            disagree.append({"dist_info": d.name, "mismatched": bad, "missing": gone})
    return {
        "dist_info": len(dist_infos),
        "egg_info": len(egg_infos),
        "with_record": len(with_record),
        "records_disagreeing": len(disagree),
        "rows_hashed": rows,
        "rows_mismatched": mismatched,
        "rows_missing": missing,
        "rows_unhashed": unhashed,
        "disagreeing": disagree,
    }


def deb_members(deb: Path, wanted: set[str]) -> dict[str, bytes]:
    """The files ``wanted`` (relative to the root) as the .deb holds them (``dpkg-deb --fsys-tarfile``)."""
    proc = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=False)
    if proc.returncode != 0:
        return {}
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as t:
        for m in t:
            name = m.name[2:] if m.name.startswith("./") else m.name
            if name in wanted and m.isfile():
                f = t.extractfile(m)
                if f is not None:
                    out[name] = f.read()
    return out


def debian(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    res: dict[str, Any] = {"population": "debian"}
    for tool in ("dpkg", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise BuildError(f"no {tool} on PATH")
    debs_dir = work / "debs"
    debs_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    used, failed = download_debs(DEBIAN_PACKAGES, debs_dir, args.count)
    res["download_s"] = time.monotonic() - t0
    res["asked"] = args.count
    res["download_failed"] = failed
    if not used:
        raise BuildError("no Debian package could be downloaded")
    root = fresh_dir(work / "debroot")
    (work / "dpkg.log").unlink(missing_ok=True)
    log(f"dpkg --unpack of {len(used)} packages into {root}")
    t0 = time.monotonic()
    got = dpkg_unpack(root, [deb for _, deb in used], work / "dpkg.log")
    res["unpack_s"] = time.monotonic() - t0
    status = dpkg_status(root / "var/lib/dpkg")
    on_disk = [
        (name, deb) for name, deb in used if status.get(name, ("", ""))[1] in ("unpacked", "installed")
    ]
    res["unpack_failed"] = [name for name, deb in used if (name, deb) not in on_disk]
    if got.returncode != 0:
        log(f"  dpkg exited {got.returncode}: {got.stderr.strip()[-600:]}")
        res["dpkg_stderr_tail"] = got.stderr[-STDERR_TAIL_CHARS:]
    site = root / DEB_SITE
    if not on_disk or not site.is_dir():
        raise BuildError(f"dpkg unpacked nothing into {site}: {got.stderr.strip()[-600:]}")
    res["packages"] = [
        {"package": name, "version": status[name][0], "deb": deb.name} for name, deb in on_disk
    ]
    res["used"] = len(on_disk)
    res["site"] = str(site)
    res["root"] = str(root)
    sums = {name: md5sums_of(root, name) for name, _ in on_disk}
    prefix = DEB_SITE + "/"
    ref_rows = [
        (str(root / rel), digest)
        for name in sorted(sums)
        for rel, digest in sorted(sums[name].items())
        if rel.startswith(prefix)
    ]
    res["site_bytes"] = sum(os.path.getsize(p) for p, _ in ref_rows if os.path.isfile(p))
    log(f"  {len(on_disk)} packages on disk, {len(ref_rows)} md5sums files in the site dir")

    pg = Patchguard(work, "debian")
    res["untouched"] = untouched(pg, site)
    log("RECORD noise: hashing every row of every RECORD in the site dir")
    res["record_noise"] = record_noise(site)
    res["time"] = timings(pg, site, lambda: reference_loop(ref_rows, "md5"), args.repeat)

    candidates = {
        name: [rel[len(prefix) :] for rel in files if rel.startswith(prefix) and rel.endswith(".py")]
        for name, files in sums.items()
    }
    edits = pick_edits(random.Random(args.seed), candidates, args.edits, site)
    deb_of = dict(on_disk)

    def pristine(edits: Sequence[Edit]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        by_package: dict[str, set[str]] = {}
        for e in edits:
            by_package.setdefault(e.package, set()).add(prefix + e.rel)
        for package, wanted in by_package.items():
            for rel, data in deb_members(deb_of[package], wanted).items():
                out[rel[len(prefix) :]] = data
        return out

    res["recall"] = recall_and_restore(
        pg,
        site,
        edits,
        edit_by_rename,
        debs_dir,
        pristine,
        res["untouched"]["_keys"],
        Path(res["time"]["_warm_cache"]),
    )
    res["crashes"] = pg.crashes
    return res


# --------------------------------------------------------------------------------------------------------
# conda: wheels made into noarch: python packages, installed by py-rattler
# --------------------------------------------------------------------------------------------------------


def wheel_project(path: Path) -> str:
    return canonical(path.name.split("-", 1)[0])


_PIP_DOWNLOAD = (sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet")


def download_wheels(
    names: Sequence[str], wheels: Path, count: int
) -> tuple[list[tuple[str, Path]], list[dict[str, str]]]:
    """The first ``count`` of ``names`` pip can download as a wheel (cached in ``wheels``), and the rest."""
    return download_first(
        names,
        count,
        lambda name: newest(w for w in wheels.glob("*.whl") if wheel_project(w) == canonical(name)),
        lambda name: [*_PIP_DOWNLOAD, "-d", str(wheels), name],
        "pip download",
        env={k: v for k, v in os.environ.items() if k != "PIP_NO_INDEX"},
    )


class CondaPackage:
    name: str
    version: str
    files: dict[str, bytes]  # path in the package → bytes
    build: str = CONDA_BUILD
    noarch: str | None = "python"
    depends: Sequence[str] = ("python",)
    link: dict[str, Any] | None = None  # info/link.json
    fmt: str = ".tar.bz2"
    members: dict[str, str] = field(default_factory=dict)  # site-relative path → the wheel's member
    wheel: Path | None = None  # what it was made of

    @property
    def stem(self) -> str:
        return f"{self.name}-{self.version}-{self.build}"


def tar_bytes(members: Mapping[str, bytes], bz2: bool) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:bz2" if bz2 else "w") as t:
        for path, data in sorted(members.items()):
            ti = tarfile.TarInfo(path)
            ti.size, ti.mtime = len(data), MTIME
            ti.mode = 0o755 if path.startswith(("bin/", "python-scripts/")) else 0o644
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def zstd_compress(data: bytes) -> bytes:
    try:
        from compression import zstd  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        from backports import zstd  # type: ignore[no-redef,unused-ignore]
    out: bytes = zstd.compress(data)
    return out


def write_conda_package(channel: Path, pkg: CondaPackage) -> Path:
    """``pkg`` into ``channel/<subdir>/`` in its format, with the ``info/`` conda-build writes."""
    subdir = "noarch" if pkg.noarch else "linux-64"
    (channel / subdir).mkdir(parents=True, exist_ok=True)
    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    index: dict[str, Any] = {
        "name": pkg.name, "version": pkg.version, "build": pkg.build, "build_number": 0,
        "depends": list(pkg.depends), "subdir": subdir, "timestamp": MTIME * 1000, "license": "unknown",
    }  # fmt: skip
    if pkg.noarch:
        index["noarch"] = pkg.noarch
    else:
        index.update(arch="x86_64", platform="linux")
    paths = [
        {
            "_path": p,
            "path_type": "hardlink",
            "sha256": hashlib.sha256(data).hexdigest(),
            "size_in_bytes": len(data),
        }
        for p, data in sorted(pkg.files.items())
    ]
    info = {
        "info/index.json": json.dumps(index, indent=2).encode(),
        "info/paths.json": json.dumps({"paths": paths, "paths_version": 1}, indent=2).encode(),
        "info/files": ("\n".join(sorted(pkg.files)) + "\n").encode(),
    }
    if pkg.link is not None:
        info["info/link.json"] = json.dumps(pkg.link, indent=2).encode()
    out = channel / subdir / (pkg.stem + pkg.fmt)
    if pkg.fmt == ".tar.bz2":
        out.write_bytes(tar_bytes({**pkg.files, **info}, bz2=True))
    else:
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
            z.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
            z.writestr(f"pkg-{pkg.stem}.tar.zst", zstd_compress(tar_bytes(pkg.files, bz2=False)))
            z.writestr(f"info-{pkg.stem}.tar.zst", zstd_compress(tar_bytes(info, bz2=False)))
    return out


def python_package() -> CondaPackage:
    """A stand-in for conda's ``python`` package: noarch packages need one to say where site-packages is."""
    return CondaPackage(
        "python",
        f"{PYVER}.0",
        {
            f"lib/python{PYVER}/os.py": b"# the standard library, as conda ships it\n",
            "bin/python.txt": b"stub\n",
        },
        build="0",
        noarch=None,
        depends=(),
    )


def console_scripts(entry_points: str) -> list[str]:
    """``name = module:func`` of the ``[console_scripts]`` section of ``entry_points.txt``."""
    out, section = [], ""
    for line in entry_points.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]").strip()
        elif section == "console_scripts" and "=" in line and not line.startswith("#"):
            name, _, target = line.partition("=")
            out.append(f"{name.strip()} = {target.strip()}")
    return out


def conda_from_wheel(wheel: Path, fmt: str) -> CondaPackage:
    """The ``noarch: python`` package conda-build makes of ``wheel``: its files where pip would install them
    relative to the prefix (``site-packages/``, ``python-scripts/``), the dist-info with ``INSTALLER``
    ``conda`` and the RECORD pip writes, console scripts in ``info/link.json``."""
    files: dict[str, bytes] = {}
    members: dict[str, str] = {}
    dist_info = ""
    entry_points = ""
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            name = info.filename
            if name.endswith("/"):
                continue
            top, _, rest = name.partition("/")
            data = z.read(info)
            if top.endswith(".dist-info"):
                dist_info = top
                if rest == "RECORD":
                    continue
                if rest == "entry_points.txt":
                    entry_points = data.decode("utf-8", "replace")
            if top.endswith(".data"):
                scheme, _, sub = rest.partition("/")
                if scheme in ("purelib", "platlib"):
                    rel = sub
                elif scheme == "scripts":
                    files[f"python-scripts/{sub}"] = data
                    continue
                elif scheme == "data":
                    files[sub] = data
                    continue
                else:  # headers
                    files[f"include/{sub}"] = data
                    continue
            else:
                rel = name
            files[f"site-packages/{rel}"] = data
            members[rel] = name
    if not dist_info:
        raise ValueError(f"{wheel.name} has no .dist-info")
    files[f"site-packages/{dist_info}/INSTALLER"] = b"conda\n"
    rows = []
    for path, data in sorted(files.items()):
        if path.startswith("site-packages/"):
            rel = path[len("site-packages/") :]
        elif path.startswith("python-scripts/"):
            rel = "../../../bin/" + path[len("python-scripts/") :]
        else:
            continue
        rows.append([rel, f"sha256={b64(hashlib.sha256(data).digest())}", str(len(data))])
    rows.append([f"{dist_info}/RECORD", "", ""])
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    files[f"site-packages/{dist_info}/RECORD"] = buf.getvalue().encode()
    project, version = dist_info[: -len(".dist-info")].rsplit("-", 1)
    scripts = console_scripts(entry_points)
    link = {"noarch": {"type": "python", "entry_points": scripts}, "package_metadata_version": 1}
    return CondaPackage(canonical(project), version, files, link=link, fmt=fmt, members=members, wheel=wheel)


def rattler_install(channel: Path, prefix: Path, pkgs: Path, specs: Sequence[str], work: Path) -> None:
    """Index ``channel`` and install ``specs`` from it into ``prefix`` with py-rattler (package cache
    ``pkgs``), as conda, mamba or pixi would."""
    try:
        import rattler
        import rattler.index
    except ImportError as exc:
        raise BuildError(f"py-rattler is not installed: {exc}") from exc

    async def run() -> None:
        await rattler.index.index_fs(channel)
        gateway = rattler.Gateway(cache_dir=work / "rattler-cache")
        records = await rattler.solve(
            [channel.as_uri()], list(specs), gateway=gateway, platforms=["linux-64", "noarch"]
        )
        await rattler.install(records, prefix, cache_dir=pkgs, show_progress=False)

    try:
        asyncio.run(run())
    except Exception as exc:
        raise BuildError(f"rattler could not install the channel: {exc.__class__.__name__}: {exc}") from exc


def conda_meta(prefix: Path) -> list[dict[str, Any]]:
    out = []
    for f in sorted((prefix / "conda-meta").glob("*.json")):
        try:
            doc = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            doc["_file"] = f.name
            out.append(doc)
    return out


def meta_paths(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    paths = (record.get("paths_data") or {}).get("paths") or []
    return [p for p in paths if isinstance(p, dict) and isinstance(p.get("_path"), str)]


def conda(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    res: dict[str, Any] = {"population": "conda"}
    wheels_dir = work / "wheels"
    wheels_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    used, failed = download_wheels(WHEELS, wheels_dir, args.count)
    res["download_s"] = time.monotonic() - t0
    res["asked"] = args.count
    res["download_failed"] = failed
    if not used:
        raise BuildError("no wheel could be downloaded")
    channel = fresh_dir(work / "channel")
    t0 = time.monotonic()
    packages: list[CondaPackage] = []
    res["convert_failed"] = []
    for i, (name, wheel) in enumerate(used):
        try:
            pkg = conda_from_wheel(wheel, ".conda" if i % 2 == 0 else ".tar.bz2")
            write_conda_package(channel, pkg)
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            res["convert_failed"].append({"name": name, "reason": f"{exc.__class__.__name__}: {exc}"})
            continue
        packages.append(pkg)
    write_conda_package(channel, python_package())
    res["formats"] = dict(Counter(p.fmt for p in packages))
    prefix, pkgs = work / "condaenv", work / "pkgs"
    for d in (prefix, pkgs):
        if d.exists():
            shutil.rmtree(d)
    log(f"rattler: indexing {channel} and installing {len(packages)} packages into {prefix}")
    rattler_install(channel, prefix, pkgs, [p.name for p in packages] + ["python"], work)
    res["build_s"] = time.monotonic() - t0
    site = prefix / CONDA_SITE
    metas = conda_meta(prefix)
    installed = {str(m.get("name")): m for m in metas}
    missing = [p.name for p in packages if p.name not in installed]
    if not site.is_dir() or not metas:
        raise BuildError(f"rattler installed nothing into {site}")
    packages = [p for p in packages if p.name in installed]
    res["install_missing"] = missing
    res["used"] = len(packages)
    res["packages"] = [
        {"package": p.name, "version": p.version, "format": p.fmt, "files": len(p.files)} for p in packages
    ]
    res["site"] = str(site)
    res["prefix"] = str(prefix)
    ref_rows = []
    entry_points: list[Path] = []  # console scripts the installer wrote, recorded with their sha256
    for m in metas:
        for p in meta_paths(m):
            digest = p.get("sha256_in_prefix") or p.get("sha256")
            ptype = p.get("path_type", "hardlink")
            if isinstance(digest, str) and ptype not in ("softlink", "directory"):
                ref_rows.append((str(prefix / p["_path"]), digest.lower()))
                if ptype == "unix_python_entry_point":
                    entry_points.append(prefix / p["_path"])
    res["site_bytes"] = sum(os.path.getsize(p) for p, _ in ref_rows if os.path.isfile(p))
    links = [os.stat(p).st_nlink for p, _ in ref_rows if os.path.isfile(p)]
    res["hard_linked"] = sum(1 for n in links if n > 1)
    log(
        f"  {len(metas)} conda-meta records, {len(ref_rows)} hashed files ({res['hard_linked']} hard-linked "
        f"from the package cache)"
    )

    pg = Patchguard(work, "conda")
    res["untouched"] = untouched(pg, site)
    res["time"] = timings(pg, site, lambda: reference_loop(ref_rows, "sha256"), args.repeat)

    site_prefix = CONDA_SITE + "/"
    by_name = {p.name: p for p in packages}
    candidates = {
        name: [
            p["_path"][len(site_prefix) :]
            for p in meta_paths(installed[name])
            if p["_path"].startswith(site_prefix) and p["_path"].endswith(".py")
        ]
        for name in by_name
    }
    edits = pick_edits(random.Random(args.seed), candidates, args.edits, site)

    def pristine(edits: Sequence[Edit]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for e in edits:
            pkg = by_name[e.package]
            member = pkg.members.get(e.rel)
            if member is None or pkg.wheel is None:
                continue
            with zipfile.ZipFile(pkg.wheel) as z:
                out[e.rel] = z.read(member)
        return out

    res["recall"] = recall_and_restore(
        pg,
        site,
        edits,
        edit_in_place,
        channel / "noarch",
        pristine,
        res["untouched"]["_keys"],
        Path(res["time"]["_warm_cache"]),
    )
    res["entry_points"] = entry_point_probe(pg, site, prefix, entry_points, Path(res["time"]["_warm_cache"]))
    res["crashes"] = pg.crashes
    return res


def entry_point_probe(
    pg: Patchguard, site: Path, prefix: Path, scripts: Sequence[Path], cache: Path
) -> dict[str, Any]:
    """The console scripts rattler wrote (``unix_python_entry_point``, recorded with sha256 and size in
    conda-meta): each edited by rename as above, scanned, then put back by hand (not by patchguard)."""
    if not scripts:
        return {"recorded": 0, "reported": 0, "paths": []}
    log(f"entry points: editing the {len(scripts)} console scripts conda-meta records with a sha256")
    kept = {p: p.read_bytes() for p in scripts}
    for p in scripts:
        edit_by_rename(p)
    _, report = pg.scan("scan after editing the console scripts", site, cache)
    paths = {str(f.get("path")) for f in findings_of(report)}
    reported = [p for p in scripts if os.path.relpath(p, site) in paths or str(p) in paths]
    for p, data in kept.items():
        tmp = p.with_name(f".{p.name}.bench-back")
        tmp.write_bytes(data)
        shutil.copymode(p, tmp)
        os.replace(tmp, p)
    log(f"  {len(reported)}/{len(scripts)} reported")
    return {
        "recorded": len(scripts),
        "reported": len(reported),
        "paths": [str(p.relative_to(prefix)) for p in scripts],
    }


# --------------------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------------------


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("PASS" if ok else "FAIL")


def row(name: str, value: str, target: str = "", result: str = "") -> str:
    return f"{name:<26}{value:>12}  {target:>9}  {result}".rstrip()


def format_report(res: Mapping[str, Any]) -> str:
    pop = res["population"]
    u = res["untouched"]
    f = u["findings"]
    t = res["time"]
    r = res["recall"]
    sc = r["scans"]
    failed = res["download_failed"]
    kind = "python3-* .debs unpacked by dpkg" if pop == "debian" else "wheels made conda packages, rattler"
    lines = [
        f"== {pop}: {res['used']} packages ({kind}) ==",
        f"packages        : {res['used']} used of {res['asked']} asked; {len(failed)} failed to download"
        + (f" ({', '.join(x['name'] for x in failed)})" if failed else ""),
    ]
    if pop == "conda":
        lines.append(
            f"formats         : {', '.join(f'{n} {k}' for k, n in sorted(res['formats'].items()))}; "
            f"{res['hard_linked']} files hard-linked from {res['prefix'].rsplit('/', 1)[0]}/pkgs"
        )
    lines += [
        f"site dir        : {res['site']} ({res['site_bytes'] / 1e6:.1f} MB hashed by the reference)",
        f"untouched scan  : exit {u['exit_code']}, {u['distributions']} distributions, "
        f"{u['files_checked']} files checked, {u['seconds']:.2f} s",
        "",
        f"{'measure':<26}{'value':>12}  {'target':>9}  verdict",
        row("HIGH findings", str(f["high"]), str(TARGET_HIGH), verdict(f["high"] <= TARGET_HIGH)),
        row(
            "MODERATE findings",
            str(f["moderate"]),
            str(TARGET_MODERATE),
            verdict(f["moderate"] <= TARGET_MODERATE),
        ),
        row("minor findings", str(f["minor"])),
        row("info findings", str(f["info"])),
        row(
            "edits reported",
            f"{r['reported']}/{r['edits']}",
            f"{r['edits']}/{r['edits']}",
            verdict(r["reported"] == r["edits"]),
        ),
        row("  --no-analysis", f"{sc['no_analysis']['reported']}/{r['edits']}")
        + "  (integrity findings only)",
        row("  --wheelhouse", f"{sc['wheelhouse']['reported']}/{r['edits']}")
        + "  (the scan given the packages: a baseline)",
        row(
            "other new findings", str(len(r["other_new_findings"])), "0", verdict(not r["other_new_findings"])
        ),
    ]
    if pop == "conda":
        lines += [
            row("hard-link note", f"{r['files_with_cache_note']}/{r['reported']}")
            + "  (edited files whose findings name conda's package cache, default scan)",
            row("  --no-analysis", f"{sc['no_analysis']['cache_note_files']}/{sc['no_analysis']['reported']}")
            + "  (the same, integrity findings only)",
        ]
    lines += [
        row(
            "restores exit 0",
            f"{r['restores_ok']}/{r['distributions_restored']}",
            "all",
            verdict(r["restores_ok"] == r["distributions_restored"] and not r["not_restored"]),
        ),
        row("rescan clean", "yes" if r["rescan_clean"] else "no", "yes", verdict(r["rescan_clean"])),
        row(
            "files byte-identical",
            f"{r['identical']}/{r['edits']}",
            f"{r['edits']}/{r['edits']}",
            verdict(r["identical"] == r["edits"]),
        ),
        row("reference (s)", f"{t['reference_s']:.3f}"),
        row("cold scan (s)", f"{t['cold_s']:.3f}"),
        row("warm scan (s)", f"{t['warm_s']:.3f}"),
        row(
            "cold / reference",
            f"{t['cold_ratio']:.3f}",
            f"<= {TARGET_COLD_RATIO}",
            verdict(t["cold_ratio"] <= TARGET_COLD_RATIO),
        ),
        row(
            "warm / reference",
            f"{t['warm_ratio']:.3f}",
            f"<= {TARGET_WARM_RATIO}",
            verdict(t["warm_ratio"] <= TARGET_WARM_RATIO),
        ),
        row("cold cpu / ref cpu", f"{t['cold_cpu_ratio']:.3f}") + "  (CPU time, helpers included)",
        row("empty-dir scan (s)", f"{t['fixed_s']:.3f}") + "  (the fixed cost: start-up, a scan of nothing)",
        row("(cold - empty) / ref", f"{t['cold_less_fixed_ratio']:.3f}"),
        row("(warm - empty) / ref", f"{t['warm_less_fixed_ratio']:.3f}"),
        f"reference       : {'md5' if pop == 'debian' else 'sha256'} of {t['reference_files']} files "
        f"({t['reference_bytes'] / 1e6:.1f} MB) the {'md5sums' if pop == 'debian' else 'conda-meta'} list; "
        f"{t['reference_mismatched']} mismatched, {t['reference_missing']} missing; "
        f"median of {t['rounds']} rounds",
        f"edits           : {r['edits']} files in {r['packages_edited']} packages "
        f"({'new file + rename' if pop == 'debian' else 'in place, through the hard link'}); worst severity "
        f"{r['worst_severity']}; restored as {len(r['restored_as'])} distributions",
        f"rules on edits  : default scan {r['rules']} ({sc['default']['no_baseline']} without a baseline)",
        f"                  --wheelhouse {sc['wheelhouse']['rules']} "
        f"({sc['wheelhouse']['no_baseline']} without a baseline)",
    ]
    if pop == "debian":
        n = res["record_noise"]
        lines.append(
            f"RECORD noise    : {n['dist_info']} .dist-info ({n['with_record']} with a RECORD), "
            f"{n['egg_info']} .egg-info; {n['records_disagreeing']} of {n['with_record']} RECORDs disagree "
            f"with the installed bytes ({n['rows_mismatched']} rows mismatched, {n['rows_missing']} missing, "
            f"of {n['rows_hashed']} hashed rows)"
        )
        lines.extend(
            f"    {d['dist_info']}: {d['mismatched']} mismatched, {d['missing']} missing"
            for d in n["disagreeing"]
        )
    else:
        ep = res["entry_points"]
        lines += [
            f"restore notes   : {r['restores_with_cache_note']}/{r['distributions_restored']} restores name "
            f"conda's package cache on stderr",
            f"console scripts : {ep['reported']}/{ep['recorded']} edited entry points reported (extra probe: "
            "the scripts rattler wrote, recorded with a sha256 in conda-meta)",
        ]
    if u["rules"]:
        lines += ["", "untouched findings by severity, kind, rule (count, distributions):"]
        lines += rule_lines(u["rules"])
    problems = []
    problems += [f"missed edit: {m['package']}: {m['path']}" for m in r["missed"]]
    problems += [f"not restored (not reported): {m['package']}: {m['path']}" for m in r["not_restored"]]
    problems += [f"differs from the package after restore: {p}" for p in r["differ"]]
    problems += [f"no pristine member to compare: {p}" for p in r["no_pristine_member"]]
    for x in r["restores"]:
        if x["exit_code"] != 0:
            problems.append(
                f"restore {x['distribution']} exited {x['exit_code']}: {x['stderr_tail'].strip()[-400:]}"
            )
    for label, items in (("new finding after the edits", r["other_new_findings"]),
                         ("finding after restoring", r["rescan_new_findings"])):  # fmt: skip
        problems += [
            f"{label}: {x['severity']} {x['rule']} {x['distribution']}: {x['path']}: {x['message']}"
            for x in items
        ]
    problems += [f"{c['run']}: {c['why']}: {c['stderr_tail'].strip()[-300:]}" for c in res["crashes"]]
    problems += t["notes"]
    for x in sc["wheelhouse"]["beside_the_edit"]:
        problems.append(
            f"with --wheelhouse, a finding beside the added debugger line: {x['severity']} {x['rule']} "
            f"{x['distribution']}: {x['path']}:{x['line']}: {x['source']!r}: {x['message']}"
        )
    ep = res.get("entry_points")
    if ep and ep["reported"] < ep["recorded"]:
        problems.append(
            f"console scripts: {ep['recorded'] - ep['reported']} of {ep['recorded']} edited entry points "
            f"(conda-meta path_type unix_python_entry_point, with a sha256) not reported: "
            f"{', '.join(ep['paths'][:10])}"
        )
    if pop == "conda" and sc["no_analysis"]["cache_note_files"] > r["files_with_cache_note"]:
        problems.append(
            f"the hard-link note is on {sc['no_analysis']['cache_note_files']} edited files with "
            f"--no-analysis but on {r['files_with_cache_note']} in the default scan (the code findings "
            "replace the integrity finding that carried it)"
        )
    if res.get("unpack_failed"):
        problems.append(f"dpkg did not unpack: {', '.join(res['unpack_failed'])}")
    if res.get("convert_failed") or res.get("install_missing"):
        problems.append(f"not made or installed: {res.get('convert_failed')} {res.get('install_missing')}")
    if problems:
        lines += ["", "problems:"]
        lines += [f"  {p}" for p in problems]
    return "\n".join(lines)


def rule_lines(rules: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for r in rules:
        lines.append(
            f"  {r['severity']:<9}{r['kind']:<22}{r['rule']:<28}{r['count']:>6}"
            f"  {r['distributions']:>4} dists"
        )
        shown = r["examples"] if r["severity"] in ("high", "moderate") else r["examples"][:1]
        for ex in shown:
            owner = f"{ex['distribution']} {ex['version']}" if ex["distribution"] else "(no distribution)"
            lines.append(f"      e.g. {owner}: {ex['path']}" + (f":{ex['line']}" if ex.get("line") else ""))
            lines.append(f"           {ex['message']}")
    return lines


# --------------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------------


def code_state() -> dict[str, Any]:
    """Which patchguard was measured: its version, and the commit and changed files of this checkout."""

    def out(cmd: Sequence[str]) -> str:
        try:  # from the repository's root: the pathspec below is relative to it
            proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False, cwd=HERE.parent)
        except OSError:
            return ""
        return proc.stdout if proc.returncode == 0 else ""

    # (not stripped: a porcelain line starts with its status columns, " M path")
    status = out(["git", "status", "--porcelain", "--", "patchguard"])
    return {
        "version": out([sys.executable, "-m", "patchguard", "--version"]).strip(),
        "commit": out(["git", "rev-parse", "HEAD"]).strip(),
        "changed": [line[3:] for line in status.splitlines() if len(line) > 3],
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def default_workdir() -> Path:
    base = Path(os.environ.get("PATCHGUARD_BENCH_DIR") or "~/.cache/patchguard-bench").expanduser()
    return base / "managed"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        metavar="DIR",
        help="kept and reused: downloads are cached here, environments made anew "
        "(default: ${PATCHGUARD_BENCH_DIR:-~/.cache/patchguard-bench}/managed)",
    )
    parser.add_argument("--count", type=int, default=40, metavar="N", help="packages per population")
    parser.add_argument("--edits", type=int, default=30, metavar="K", help="files edited per population")
    parser.add_argument("--only", choices=("debian", "conda"), help="measure one population only")
    parser.add_argument("--repeat", type=int, default=3, metavar="N", help="timed rounds (medians)")
    parser.add_argument("--seed", type=int, default=0, help="which files are edited")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    if args.count < 1 or args.edits < 1 or args.repeat < 1:
        parser.error("--count, --edits and --repeat must be at least 1")
    return args


def strip_private(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: strip_private(v) for k, v in doc.items() if not str(k).startswith("_")}
    if isinstance(doc, list):
        return [strip_private(v) for v in doc]
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    work = (args.workdir or default_workdir()).absolute()
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"bench_managed: error: cannot make {work}: {exc}", file=sys.stderr)
        return 2
    log(f"workdir {work}; patchguard: {sys.executable} -m patchguard")
    code = code_state()
    if not args.json:
        print(
            f"patchguard {code['version']!r}, commit {code['commit'][:12]}, "
            f"{len(code['changed'])} changed file(s) under patchguard/ at {code['time']}; "
            f"{os.cpu_count()} CPUs; workdir {work}",
            flush=True,
        )
    results: list[dict[str, Any]] = []
    errors: list[str] = []
    exit_code = 0
    for population, fn in (("debian", debian), ("conda", conda)):
        if args.only not in (None, population):
            continue
        t0 = time.monotonic()
        try:
            res = fn(args, work)
        except BenchError as exc:
            log(f"error: {population}: {exc}")
            errors.append(f"{population}: {exc}")
            exit_code = 2
            continue
        res["wall_s"] = time.monotonic() - t0
        results.append(res)
        if not args.json:
            print(flush=True)
            print(format_report(res), flush=True)
    for e in errors:
        print(f"bench_managed: error: {e}", file=sys.stderr)
    if args.json:
        doc = {
            "code": code,
            "workdir": str(work),
            "cpus": os.cpu_count(),
            "results": results,
            "errors": errors,
        }
        print(json.dumps(strip_private(doc), indent=2))
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
