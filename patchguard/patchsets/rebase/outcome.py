"""What becomes of each file of a set in a rebase: the values every stage of :mod:`.rebase` hands on.

They sit below the stages (:mod:`.review`, :mod:`.rewrite` and the driver :mod:`.rebase`) so that each
stage imports them from here and none imports another stage sideways.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["FileOutcome", "Rebased", "RebasedFile"]


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


@dataclass
class Rebased:
    """One file's outcome, the bytes the new set makes of it, and the target release's bytes."""

    file: RebasedFile
    result: bytes | None  # what the file becomes (``None``: absent)
    ours: bytes | None  # the target release's file (at ``file.new_path``)
    mode: int | None = None
