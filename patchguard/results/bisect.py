"""``bisect``'s values: the changes it includes or leaves out (:class:`Unit`, of a :class:`UnitKind`), each
trial's :class:`Outcome` and :class:`Trial`, and what it found (:class:`BisectResult`,
``patchguard.bisect/1``). :mod:`patchguard.patchsets.bisect` makes them: the units (``.units``), the search
(``.search``) and the run (``.run``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ..env import Target
from ..model import json_name

__all__ = ["BISECT_SCHEMA", "BisectResult", "By", "Outcome", "Trial", "Unit", "UnitKind"]

BISECT_SCHEMA = "patchguard.bisect/1"


class UnitKind(str, enum.Enum):
    FILE = "file"
    HUNK = "hunk"
    SET = "set"


@dataclass(frozen=True, slots=True)
class Unit:
    """One change the search includes or leaves out (numbered from 1, in a fixed order)."""

    number: int
    kind: UnitKind
    name: str  # the file as shown, or the set's name
    hunk: int | None = None  # by hunk: its number in the file's diff, from 1
    lines: tuple[int, int] | None = None  # by hunk: its first and last changed line in the installed file
    diff: str = ""

    @property
    def label(self) -> str:
        if self.kind is UnitKind.HUNK:
            assert self.lines is not None
            first, last = self.lines
            where = f"line {first}" if first == last else f"lines {first}-{last}"
            return f"{self.name} hunk {self.hunk} ({where})"
        return f"set {self.name}" if self.kind is UnitKind.SET else self.name


class Outcome(str, enum.Enum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"


class By(str, enum.Enum):
    FILE = "file"  # files first, then the hunks of the culprit files
    HUNK = "hunk"
    SET = "set"


@dataclass(frozen=True, slots=True)
class Trial:
    """One state tried: which units it included, the outcome, the test's runs and failures, its time."""

    number: int
    phase: str  # "files", "hunks", "sets"
    included: tuple[int, ...]
    outcome: Outcome
    runs: int
    failures: int
    exit_codes: tuple[int, ...]
    seconds: float  # the test's own time
    overhead: float  # putting the environment into the state
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "phase": self.phase,
            "included": list(self.included),
            "outcome": self.outcome.value,
            "runs": self.runs,
            "failures": self.failures,
            "exit_codes": list(self.exit_codes),
            "seconds": round(self.seconds, 4),
            "overhead": round(self.overhead, 4),
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class BisectResult:
    """What a bisect found. ``culprits`` empty: the test passed with every change (exit 1)."""

    target: Target
    by: By
    units: tuple[Unit, ...]  # the units of the last phase (the culprits are among them)
    culprits: tuple[Unit, ...]
    trials: tuple[Trial, ...]
    repeat: int
    unsplit: tuple[tuple[int, ...], ...] = ()
    changes: int = 0  # the units of the first phase
    started: float = 0.0
    finished: float = 0.0
    running: tuple[int, ...] = ()  # processes of the environment alive at the end (filled by deploy)
    # Files the test itself changed: held ones (put back to the start with the rest) and others (left as
    # the test left them: no change of the bisect's, and nothing else would say so).
    touched: tuple[str, ...] = ()
    outside: tuple[str, ...] = ()

    @property
    def runs(self) -> int:
        return sum(t.runs for t in self.trials)

    @property
    def found(self) -> bool:
        return bool(self.culprits)

    @property
    def exit_code(self) -> int:
        return 0 if self.found else 1

    @property
    def flakiness(self) -> float | None:
        """The estimated chance that a failing state passes one run (from the failing trials: runs stop at
        the first failure, so a failing state that passed first shows it); ``None``: one run per state."""
        bad = [t for t in self.trials if t.outcome is Outcome.BAD]
        if self.repeat <= 1 or not bad:
            return None
        return 1.0 - len(bad) / sum(t.runs for t in bad)

    @property
    def confidence(self) -> float:
        """The chance that no trial judged good was a failing state that passed every run."""
        miss = self.flakiness
        if not miss:
            return 1.0
        good = sum(1 for t in self.trials if t.outcome is Outcome.GOOD)
        return (1.0 - miss**self.repeat) ** good

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": BISECT_SCHEMA,
            "environment": {
                "prefix": json_name(self.target.prefix),
                "site_packages": [json_name(p) for p in self.target.site_packages],
            },
            "by": self.by.value,
            "changes": self.changes,
            "runs": self.runs,
            "repeat": self.repeat,
            "confidence": round(self.confidence, 6),
            "flakiness": None if self.flakiness is None else round(self.flakiness, 6),
            "culprits": [_unit_json(u) for u in self.culprits],
            "unsplit": [list(group) for group in self.unsplit],
            "trials": [t.to_json() for t in self.trials],
            "running": list(self.running),
            "changed_by_test": {
                "held": [json_name(p) for p in self.touched],
                "outside": [json_name(p) for p in self.outside],
            },
        }


def _unit_json(u: Unit) -> dict[str, Any]:
    doc: dict[str, Any] = {"number": u.number, "kind": u.kind.value, "path": json_name(u.name)}
    if u.hunk is not None and u.lines is not None:
        doc["hunk"] = u.hunk
        doc["lines"] = list(u.lines)
    doc["diff"] = json_name(u.diff)
    return doc
