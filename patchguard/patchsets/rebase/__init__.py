"""Rebase: carry a set written for one release of its distribution to another, by job — the set and both
releases, proven (:mod:`.inputs`), where vanished files went (:mod:`.moves`), git's line merge and the merge
by statement (:mod:`.merge`, :mod:`.pymerge`), the review directory (:mod:`.review`), the set rewritten with
its history (:mod:`.rewrite`), the values they hand on (:mod:`.outcome`), and the run that drives them
(:mod:`.run`)."""

from .run import (
    MOVED_THRESHOLD,
    FileOutcome,
    RebasedFile,
    RebaseResult,
    part_of,
    rebase_all,
    rebase_set,
    sets_to_carry,
    touched_by_upgrade,
)

__all__ = [
    "MOVED_THRESHOLD",
    "FileOutcome",
    "RebaseResult",
    "RebasedFile",
    "part_of",
    "rebase_all",
    "rebase_set",
    "sets_to_carry",
    "touched_by_upgrade",
]
