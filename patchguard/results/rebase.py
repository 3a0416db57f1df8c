"""``rebase``'s values: what became of each file of a set (:class:`FileOutcome`, :class:`RebasedFile`) and
what the rebase did (:class:`RebaseResult`, ``patchguard.rebase/1``). The stages of
:mod:`patchguard.patchsets.rebase` make them.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from ..model import json_name, json_name_or_none

__all__ = ["FileOutcome", "RebaseResult", "RebasedFile"]


class FileOutcome(str, enum.Enum):
    """What happened to one file of the set."""

    CARRIED = "carried"
    MOVED = "moved"
    UPSTREAM = "upstream"  # the target release already has the change
    RESOLVED = "resolved"  # a conflict resolved by hand in the review directory
    CONFLICT = "conflict"
    LOST = "lost"  # gone from the target release, no similar file found
    DROPPED = "dropped"  # lost, and its changes left behind on purpose (its .lost.patch deleted)

    @property
    def open(self) -> bool:
        """Still needs a person: the set cannot be rewritten while any file is here."""
        return self in (FileOutcome.CONFLICT, FileOutcome.LOST)


@dataclass(frozen=True, slots=True)
class RebasedFile:
    """One file of the set: where it went, and how many of its hunks could not be carried."""

    path: str  # in the set as written
    outcome: FileOutcome
    new_path: str | None  # in the target release (``None``: lost or dropped)
    hunks: int
    conflicting: int = 0  # hunks that conflict (all of them when lost)
    regions: int = 0  # conflict regions in the merged file
    similarity: float | None = None  # for a moved (or lost) file: the best match found
    review: str | None = None  # the file to resolve (conflict) or delete (lost)
    adjacent: int = 0  # regions where both sides' changes touch, merged line by line (see .merge)
    merged_by: str = ""  # "statements" when the merge by statement carried it (see .pymerge)
    doubt: str = ""  # why a clean line merge was not accepted: its carried lines are left to review


@dataclass(frozen=True, slots=True)
class RebaseResult:
    """What ``rebase`` did (or would do: ``dry_run``)."""

    name: str
    distribution: str
    from_version: str
    to_version: str
    files: tuple[RebasedFile, ...]
    base_source: str = ""
    target_source: str = ""
    review_dir: str | None = None  # written when something is left to resolve
    written: bool = False  # the set was rewritten for the target release
    dry_run: bool = False
    history_dir: str | None = None
    notes: tuple[str, ...] = ()  # what the user should know (a previous review directory kept aside, ...)

    def _with(self, *outcomes: FileOutcome) -> tuple[RebasedFile, ...]:
        return tuple(f for f in self.files if f.outcome in outcomes)

    @property
    def carried(self) -> tuple[RebasedFile, ...]:
        return self._with(FileOutcome.CARRIED, FileOutcome.MOVED, FileOutcome.RESOLVED)

    @property
    def moved(self) -> tuple[RebasedFile, ...]:
        return tuple(f for f in self.files if f.new_path is not None and f.new_path != f.path)

    @property
    def conflicts(self) -> tuple[RebasedFile, ...]:
        return self._with(FileOutcome.CONFLICT)

    @property
    def lost(self) -> tuple[RebasedFile, ...]:
        return self._with(FileOutcome.LOST)

    @property
    def upstream(self) -> tuple[RebasedFile, ...]:
        return self._with(FileOutcome.UPSTREAM)

    @property
    def complete(self) -> bool:
        """Nothing is left to resolve: the set is (or would be) carried whole."""
        return not any(f.outcome.open for f in self.files)

    def to_json(self) -> dict[str, object]:
        """``patchguard.rebase/1``: what ``rebase --format json`` prints. Paths and names in the JSON name
        encoding every document uses (:func:`patchguard.model.json_name`)."""
        total, carried, _left = self.hunks
        lost = sum(f.conflicting for f in self.lost)
        name = json_name_or_none
        return {
            "schema": "patchguard.rebase/1",
            "set": json_name(self.name),
            "distribution": json_name(self.distribution),
            "from_version": self.from_version,
            "to_version": self.to_version,
            "base_source": self.base_source,
            "target_source": self.target_source,
            "hunks": {
                "total": total,
                "carried": carried,
                "conflicting": sum(f.conflicting for f in self.conflicts),
                "lost": lost,
            },
            "files": [
                {
                    **dataclasses.asdict(f),
                    "path": name(f.path),
                    "new_path": name(f.new_path),
                    "review": name(f.review),
                    "outcome": f.outcome.value,
                }
                for f in self.files
            ],
            "carried": [name(f.path) for f in self.carried],
            "moved": [
                {"from": name(f.path), "to": name(f.new_path), "similarity": f.similarity} for f in self.moved
            ],
            "conflicts": [
                {"path": name(f.path), "regions": f.regions, "hunks": f.conflicting, "review": name(f.review)}
                for f in self.conflicts
            ],
            "lost": [name(f.path) for f in self.lost],
            "upstream": [name(f.path) for f in self.upstream],
            "complete": self.complete,
            "review_dir": name(self.review_dir),
            "written": self.written,
            "history_dir": name(self.history_dir),
            "dry_run": self.dry_run,
            "notes": list(self.notes),
        }

    @property
    def hunks(self) -> tuple[int, int, int]:
        """(hunks in the set, hunks carried, hunks not carried: conflicting or lost)."""
        total = sum(f.hunks for f in self.files)
        left = sum(f.conflicting for f in self.files if f.outcome.open)
        return total, total - left, left
