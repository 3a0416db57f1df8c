"""``patchguard bisect``: which hand-made change of a live environment breaks a test.

The changes (every file of the named distributions that differs from its pristine wheel, or the applied
sets named) are cut into units (:mod:`.units`); the search (:mod:`.search`) picks subsets; each trial puts
the environment into that subset's state in one transaction and runs the test. The whole run is a
:func:`~patchguard.txn.session`: whatever happens — a culprit found, an error, Ctrl-C, SIGTERM — every file
is committed back to its start bytes before this returns, and a bisect killed with SIGKILL leaves the start
state for the next patchguard command to put back. What it makes, a
:class:`~patchguard.results.bisect.BisectResult` of trials and units, is defined in
:mod:`patchguard.results.bisect`.
"""

from __future__ import annotations

import hashlib
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import IO, Any

from ..._fs import read_regular, sha256_bytes, sha256_file
from ...env import Target
from ...errors import PatchguardError, UsageError
from ...integrity.inventory import changed_files
from ...pristine.explain import Explainer, read_installed, survey
from ...pristine.sources import SourceOptions
from ...results.bisect import BISECT_SCHEMA, BisectResult, By, Outcome, Trial, Unit
from ...txn import Change, Plan, commit, note_trial, session
from ..installed import SetEnvironment, reader
from ..model import load_set, patches_dir
from .search import search
from .units import FileChange, StateImpossible, Units, by_files, by_hunks, by_sets

__all__ = ["BISECT_SCHEMA", "BisectError", "BisectResult", "By", "Trial", "run_bisect"]

SKIP_EXIT = 125  # the test cannot tell (as for ``git bisect run``)


class BisectError(PatchguardError):
    """The bisect cannot be done (the test fails without the changes, nothing to bisect); nothing changed."""


@dataclass(frozen=True, slots=True)
class Test:
    """The test command and how to run it."""

    command: str
    repeat: int = 1
    timeout: float | None = None
    output: IO[Any] | int | None = None  # where the test's output goes (None: nowhere)


# -- the changes -------------------------------------------------------------------------------------------


def file_changes(
    distributions: Sequence[str], target: Target, fetch: SourceOptions | None
) -> list[FileChange]:
    """Every file of the named distributions (all, when none is named) that differs from its pristine
    wheel, with its pristine and start bytes; files no distribution owns only when none is named."""
    scanned = survey(distributions or None, target=target)
    explainer = Explainer((fetch or SourceOptions()).open(target))
    out: list[FileChange] = []
    for c in changed_files(scanned):
        if c.dist is None and distributions:
            continue  # a file no distribution owns is not a change of the ones named
        pristine = explainer.pristine_bytes(c) if c.dist is not None else None
        start = None if c.status == "deleted" else read_installed(c.path)
        if pristine == start:
            continue  # a wheel whose own RECORD is wrong about the file: nothing changed
        mode = os.stat(c.path).st_mode & 0o777 if start is not None else 0o644
        out.append(FileChange(c.path, c.finding.path, pristine, start, mode))
    return sorted(out, key=lambda f: f.shown)


def set_units(names: Sequence[str], target: Target, patches: str | None) -> tuple[Units, str]:
    """The applied sets named, as units, and the site dir they live in."""
    env = SetEnvironment.open(target)
    directory = patches_dir(patches)
    sets = [load_set(os.path.join(directory, n), n) for n in names]
    sites = {env.site(env.installed(ps, force_version=True)) for ps in sets}
    if len(sites) != 1:
        raise UsageError("the sets named are applied in different site directories", hint="bisect them apart")
    site = sites.pop()
    read = reader(site)
    return by_sets(sets, read, lambda rel: os.path.join(site, *rel.split("/"))), site


# -- running trials ----------------------------------------------------------------------------------------


@dataclass
class _Runner:
    """Puts the environment into a state, runs the test, remembers every outcome by the state's bytes."""

    root: str
    also: tuple[str, ...]
    test: Test
    current: dict[str, bytes | None]
    modes: dict[str, int]
    trials: list[Trial] = field(default_factory=list)
    seen: dict[str, Outcome] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)  # held files the test changed
    progress: Callable[[Trial], None] | None = None
    last: tuple[tuple[int, frozenset[int]], dict[str, bytes | None], str] | None = None

    def key(self, files: dict[str, bytes | None]) -> str:
        merged = {**self.current, **files}
        h = hashlib.sha256()
        for path in sorted(merged):
            h.update(f"{path}\0{sha256_bytes(merged[path])}\0".encode())
        return h.hexdigest()

    def _state(self, units: Units, included: frozenset[int]) -> tuple[dict[str, bytes | None], str]:
        """The files of a state and its key, made once: the search asks if it is known, then tries it."""
        asked = (id(units), included)
        if self.last is None or self.last[0] != asked:
            files = units.state(included)
            self.last = (asked, files, self.key(files))
        return self.last[1], self.last[2]

    def known(self, units: Units, included: frozenset[int]) -> Outcome | None:
        try:
            return self.seen.get(self._state(units, included)[1])
        except StateImpossible:
            return Outcome.SKIP

    def trial(self, units: Units, included: frozenset[int], phase: str) -> Outcome:
        started = time.perf_counter()
        try:
            files, key = self._state(units, included)
        except StateImpossible as exc:
            return self._record(phase, included, Outcome.SKIP, (), 0.0, 0.0, str(exc))
        self._put(files)
        self.last = None  # the current files changed: a key is worked out against them
        overhead = time.perf_counter() - started
        outcome, codes, seconds, note = self._run()
        self._after_test()
        self.seen[key] = outcome
        return self._record(phase, included, outcome, codes, seconds, overhead, note)

    def _record(
        self,
        phase: str,
        included: frozenset[int],
        outcome: Outcome,
        codes: tuple[int, ...],
        seconds: float,
        overhead: float,
        note: str = "",
    ) -> Outcome:
        failures = sum(1 for c in codes if c not in (0, SKIP_EXIT))
        t = Trial(
            len(self.trials) + 1,
            phase,
            tuple(sorted(included)),
            outcome,
            len(codes),
            failures,
            codes,
            seconds,
            overhead,
            note,
        )
        self.trials.append(t)
        if self.progress is not None:
            self.progress(t)
        return outcome

    def _after_test(self) -> None:
        """What the test did to the held files: a file it changed is what the next trial is planned against
        (and is named at the end); the way back restores it to the start with the rest."""
        for path, data in self.current.items():
            try:
                now: bytes | None = read_regular(path)
            except FileNotFoundError:
                now = None
            except OSError:
                continue  # not readable now: the next trial's commit says so
            if now != data:
                self.touched.add(path)
                self.current[path] = now

    def _put(self, files: dict[str, bytes | None]) -> None:
        """One transaction: every file whose bytes differ from the state wanted."""
        changes = [
            Change(p, data, sha256_bytes(self.current.get(p)), self.modes.get(p, 0o644))
            for p, data in sorted(files.items())
            if self.current.get(p) != data
        ]
        if changes:
            note_trial(self.root, [sha256_bytes(c.new) for c in changes])
            commit(Plan(self.root, tuple(changes), "bisect trial", self.also), keep_backup=False)
            self.current.update({c.path: c.new for c in changes})

    def _run(self) -> tuple[Outcome, tuple[int, ...], float, str]:
        """The test, up to ``repeat`` times: bad at its first failure, good when no run failed, skipped when
        every run said it cannot tell."""
        codes: list[int] = []
        spent = 0.0
        for _ in range(self.test.repeat):
            started = time.perf_counter()
            code, hung = run_test(self.test)
            spent += time.perf_counter() - started
            codes.append(code)
            if hung:
                return Outcome.BAD, tuple(codes), spent, f"timed out after {self.test.timeout:g} s"
            if code not in (0, SKIP_EXIT):
                return Outcome.BAD, tuple(codes), spent, ""
        if all(c == SKIP_EXIT for c in codes):
            return Outcome.SKIP, tuple(codes), spent, "the test cannot tell (exit 125)"
        return Outcome.GOOD, tuple(codes), spent, ""


def _runnable(command: str) -> None:
    """A test whose program is not there is a mistake to name, before any trial: never "the test fails
    without any of the changes too". Only the first word is looked at, when it names a file (``./smoke.sh``)
    or a program on ``PATH``; anything the shell itself runs (``cd x && …``, builtins) is left to it."""
    import shlex
    import shutil

    try:
        first = shlex.split(command)[0] if command.strip() else ""
    except ValueError as exc:
        raise UsageError(f"--test is not a shell command ({exc})") from None
    if not first or "=" in first or first in _SHELL_WORDS:
        if not first:
            raise UsageError("--test is empty", hint="e.g. --test './smoke.sh'")
        return
    if "/" in first:
        if not os.path.exists(first):
            raise UsageError(f"the test program {first!r} does not exist", path=os.path.abspath(first))
        if not os.access(first, os.X_OK) or os.path.isdir(first):
            raise UsageError(
                f"the test program {first!r} is not executable",
                path=os.path.abspath(first),
                hint=f"chmod +x {shlex.quote(first)}, or run it through its interpreter (bash {first})",
            )
    elif shutil.which(first) is None:
        raise UsageError(f"the test program {first!r} is not on PATH", hint="give its path, e.g. ./smoke.sh")


# Words a shell runs itself: the first word of such a command is not a program to look for.
_SHELL_WORDS = frozenset(
    {"!", "(", "{", "[", "[[", ".", ":", "cd", "exec", "export", "set", "source", "test", "time", "true"}
    | {"false", "if", "for", "while", "until", "case", "eval", "env", "exit", "return", "echo", "printf"}
    | {"read", "wait", "ulimit", "umask", "trap", "unset", "type", "command", "builtin", "let", "pwd"}
)


def run_test(test: Test) -> tuple[int, bool]:
    """Run the test command in its own process group: (its exit code — minus the signal that killed it —,
    whether it ran past the timeout and was killed). Whatever it started in its group is killed after it.
    It does not write bytecode into the environment (``PYTHONDONTWRITEBYTECODE``)."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    out = test.output if test.output is not None else subprocess.DEVNULL
    proc = subprocess.Popen(
        test.command,
        shell=True,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=out,
        env=env,
    )
    hung = False
    try:
        proc.wait(timeout=test.timeout)
    except subprocess.TimeoutExpired:
        hung = True
    finally:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the test, if it still runs, and what it left behind
        proc.wait()
    return proc.returncode, hung


@contextmanager
def _terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP end a bisect like Ctrl-C: the files go back to the start first."""

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may handle signals
        return
    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


# -- the bisect --------------------------------------------------------------------------------------------


def run_bisect(
    target: Target,
    test: Test,
    *,
    distributions: Sequence[str] = (),
    sets: Sequence[str] = (),
    by: By = By.FILE,
    keep_going: bool = False,
    patches: str | None = None,
    fetch: SourceOptions | None = None,
    progress: Callable[[Trial], None] | None = None,
) -> BisectResult:
    """Find the changes the test needs to fail (see the module docstring). Raises :class:`BisectError`
    (nothing changed) when the test fails without any change, :class:`UsageError` on bad arguments."""
    if test.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    _runnable(test.command)
    started = time.time()
    if sets or by is By.SET:
        if not sets:
            raise UsageError("--by set needs the sets: --sets A,B,…")
        units, root = set_units(sets, target, patches)
        changes: list[FileChange] = []
        by = By.SET
    else:
        changes = file_changes(distributions, target, fetch)
        units = by_hunks(changes) if by is By.HUNK else by_files(changes)
        root = _root_of(target, list(units.files))
    if not units.units:
        raise BisectError("there are no changes to bisect", hint="patchguard scan shows what differs")
    also = tuple(r for r in target.roots if r != root)
    runner = _Runner(root, also, test, dict(units.start), dict(units.modes), progress=progress)
    before = _fingerprint(target, distributions)
    with _terminated_as_interrupt(), session(root, list(units.files), label="bisect", also=also):
        result = _search_all(runner, units, changes, by, keep_going)
    after = _fingerprint(target, distributions)
    held = set(units.files)
    outside = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    outside = [p for p in outside if p not in held]
    return BisectResult(
        target,
        by,
        tuple(result[0].units),
        result[1],
        tuple(runner.trials),
        test.repeat,
        result[2],
        len(units.units),
        started,
        time.time(),
        touched=tuple(sorted(runner.touched)),
        outside=tuple(outside),
    )


def _fingerprint(target: Target, distributions: Sequence[str]) -> dict[str, str]:
    """Every changed file of the distributions (all, with none named) → what it is now: before and after a
    bisect, what the test changed outside the changes shows as a difference."""
    from ...integrity.inventory import take_inventory

    scanned = take_inventory(distributions, target=target)
    out: dict[str, str] = {}
    for c in scanned.changes:
        if os.path.isdir(c.path):
            out[c.path] = "dir"
            continue
        try:
            out[c.path] = sha256_file(c.path) or "missing"
        except OSError:
            out[c.path] = "could not be read"
    return out


def _root_of(target: Target, paths: Sequence[str]) -> str:
    """The site dir whose ``.patchguard/`` holds the session: the one holding the first file."""
    for site in target.site_packages:
        if any(p.startswith(os.path.join(site, "")) for p in paths):
            return site
    return target.site_packages[0]


def _search_all(
    runner: _Runner, units: Units, changes: Sequence[FileChange], by: By, keep_going: bool
) -> tuple[Units, tuple[Unit, ...], tuple[tuple[int, ...], ...]]:
    phase = "sets" if by is By.SET else "hunks" if by is By.HUNK else "files"
    every = frozenset(u.number for u in units.units)
    first = runner.trial(units, every, phase)
    if first is Outcome.SKIP:
        raise BisectError(
            "the test cannot tell (exit 125) with every change in place: nothing to bisect",
            hint="make the test exit 0 when it passes and 1 when it fails",
        )
    if first is Outcome.GOOD:
        return units, (), ()  # the test passes with every change: it does not depend on them
    if runner.trial(units, frozenset(), phase) is not Outcome.GOOD:
        raise BisectError(
            "the test fails without any of the changes too (or cannot tell): nothing to bisect",
            hint="check the test on a pristine environment (patchguard restore), then bisect again",
        )
    found, unsplit = _culprits(runner, units, every, phase, keep_going)
    if by is By.FILE and not unsplit:
        culprit_files = [c for c in changes if any(u.name == c.shown for u in found)]
        hunks = by_hunks(culprit_files)
        if len(hunks.units) > len(found):
            return _hunk_phase(runner, units, hunks, keep_going)
    return units, found, unsplit


def _culprits(
    runner: _Runner, units: Units, every: frozenset[int], phase: str, keep_going: bool
) -> tuple[tuple[Unit, ...], tuple[tuple[int, ...], ...]]:
    by_number = {u.number: u for u in units.units}
    found: list[int] = []
    unsplit: list[tuple[int, ...]] = []
    left = every
    while True:
        got = search(
            sorted(left),
            lambda s: runner.trial(units, s, phase),
            lambda s: runner.known(units, s),
        )
        found += got.culprits
        unsplit += got.unsplit
        left = left - frozenset(got.culprits)
        if not keep_going or not left or runner.trial(units, left, phase) is not Outcome.BAD:
            break
    return tuple(by_number[n] for n in sorted(found)), tuple(unsplit)


def _hunk_phase(
    runner: _Runner, files: Units, hunks: Units, keep_going: bool
) -> tuple[Units, tuple[Unit, ...], tuple[tuple[int, ...], ...]]:
    """The hunks of the culprit files that break the test, every other file pristine."""
    pristine = files.state(frozenset())
    merged = Units(hunks.units, dict(hunks.files), dict(hunks.start), dict(hunks.modes))
    for path, data in pristine.items():
        merged.files.setdefault(path, _constant(data))
    every = frozenset(u.number for u in hunks.units)
    found, unsplit = _culprits(runner, merged, every, "hunks", keep_going)
    return merged, found, unsplit


def _constant(data: bytes | None) -> Callable[[frozenset[int]], bytes | None]:
    return lambda included: data


def trials_per_culprit(n: int, k: int) -> float:
    """``k·log2(n/k)``: the runs a search of ``k`` culprits among ``n`` should take, about."""
    return k * math.log2(max(n / max(k, 1), 1))
