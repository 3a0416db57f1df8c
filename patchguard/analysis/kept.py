"""Analysis results kept between runs, and many files judged at once.

What :func:`~patchguard.analysis.analyse` says of a file depends only on the file's path and distribution,
its pristine bytes, its installed bytes, what of it is on the hot path from elsewhere, and the rules. So the
findings are kept under a key of exactly those — the pristine file's RECORD digest (``none`` without a
baseline), the sha256 of the installed bytes, the functions of it that a framework's per-step entry point
in another module calls, and the version of the analysis code itself — in ``<cache>/analysis/``: a warm
re-scan of an upgraded environment neither opens a wheel nor parses a line. A kept entry that cannot be
read is judged again.

:func:`analyse_many` judges the files that are not kept on every core: a large upgrade is a few thousand
files, each judged on its own.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .._fs import cache_root, read_regular, write_atomically
from ..model import Finding, Gate, GateKind, Kind, RuleId, Severity

__all__ = ["KeptAnalyses", "analyse_many"]

_PARALLEL_FROM = 16  # below this many files, starting worker processes costs more than it saves
# The collector's thresholds while files are judged. Judging builds and drops millions of syntax-tree nodes,
# almost none of them in a cycle (reference counting frees them); at the default (700, 10, 10) the collector
# runs every 700 of them and walks the older generations' live trees again and again — a fifth of the time
# of a large upgrade. mypy raises the first threshold for the same reason.
_JUDGING_THRESHOLDS = (100_000, 50, 1_000)


@contextlib.contextmanager
def collecting_less() -> Iterator[None]:
    """The cycle collector at :data:`_JUDGING_THRESHOLDS` inside the block, as it was after it (a process
    that imports patchguard keeps its own setting)."""
    before = gc.get_threshold()
    gc.set_threshold(*_JUDGING_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _worker_started() -> None:
    gc.set_threshold(*_JUDGING_THRESHOLDS)  # a worker process judges files and nothing else


def _code_version() -> str:
    """A digest of the analysis code and the rule table: kept results of other code are not used."""
    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    files = sorted(n for n in os.listdir(here) if n.endswith(".py"))
    reach = os.path.join(here, "reach")  # the hot path and reach change verdicts too
    files += sorted(os.path.join("reach", n) for n in os.listdir(reach) if n.endswith(".py"))
    for path in [*(os.path.join(here, n) for n in files), os.path.join(here, "..", "rulebook.py")]:
        try:
            h.update(read_regular(path))
        except OSError:
            h.update(b"?")
    return h.hexdigest()[:16]


class KeptAnalyses:
    """Findings of analysed files, kept per (path, distribution, pristine digest, installed digest, code)."""

    def __init__(self, cache_dir: str | None = None, enabled: bool = True) -> None:
        self.enabled = enabled
        self.root = os.path.join(cache_dir or cache_root(), "analysis", _code_version()) if enabled else ""
        self.hits = 0

    def key(
        self,
        path: str,
        dist: str | None,
        version: str | None,
        baseline: str,
        after: bytes,
        hot: Sequence[tuple[str, str]] = (),
    ) -> str:
        """The key of one file's findings; ``hot``: its functions a framework's entry point elsewhere calls
        (what other files say of it), so a change there judges it again."""
        h = hashlib.sha256()
        for part in (path, dist or "", version or "", baseline, *(f"{q}\1{c}" for q, c in hot)):
            h.update(part.encode("utf-8", "surrogateescape") + b"\0")
        h.update(hashlib.sha256(after).digest())
        return h.hexdigest()

    def _file(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key + ".json")

    def get(self, key: str) -> list[Finding] | None:
        if not self.enabled:
            return None
        try:
            doc = json.loads(read_regular(self._file(key), 64 * 1024 * 1024))
            found = [_decode(item) for item in doc]
        except (OSError, ValueError, TypeError, KeyError, RecursionError):
            return None
        self.hits += 1
        return found

    def put(self, key: str, findings: Sequence[Finding]) -> None:
        if not self.enabled:
            return
        data = json.dumps([_encode(f) for f in findings], separators=(",", ":")).encode()
        try:
            write_atomically(self._file(key), data)
        except OSError:
            pass  # only a cache


def _encode(f: Finding) -> dict[str, Any]:
    return {
        "kind": f.kind.value,
        "severity": f.severity.name,
        "rule": f.rule,
        "path": f.path,
        "message": f.message,
        "distribution": f.distribution,
        "version": f.version,
        "line": f.line,
        "end_line": f.end_line,
        "function": f.function,
        "gate": f.gate.to_json() if f.gate is not None else None,
        "evidence": list(f.evidence),
        "source": f.source,
    }


def _decode(d: Mapping[str, Any]) -> Finding:
    kept = d["gate"]  # a kept gate of a kind this code does not know: ValueError, judged again
    gate = Gate(GateKind(kept["kind"]), kept["condition"]) if kept is not None else None
    return Finding(
        kind=Kind(d["kind"]),
        severity=Severity[d["severity"]],
        rule=RuleId(str(d["rule"])),
        path=str(d["path"]),
        message=str(d["message"]),
        distribution=d["distribution"],
        version=d["version"],
        line=d["line"],
        end_line=d["end_line"],
        function=d["function"],
        gate=gate,
        evidence=tuple(d["evidence"]),
        source=d["source"],
    )


def analyse_many(changes: Sequence[Any]) -> list[list[Finding]]:
    """:func:`~patchguard.analysis.analyse` of every change, in order — on every core when there are many
    (worker processes forked when this process runs no other thread, else started afresh). A pool that
    cannot start or breaks costs only speed: the rest is judged here."""
    from . import analyse

    workers = min(os.cpu_count() or 1, 8)
    if len(changes) < _PARALLEL_FROM or workers < 2:
        with collecting_less():
            return [analyse(c) for c in changes]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    forkable = threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if forkable else "spawn")
    out: list[list[Finding]] = []
    try:
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_started) as pool:
            for found in pool.map(analyse, changes, chunksize=max(1, len(changes) // (workers * 8))):
                out.append(found)
    except (BrokenProcessPool, OSError):
        with collecting_less():
            out += [analyse(c) for c in changes[len(out) :]]
    return out
