"""Where the files of a set went in another release: a file gone from it is taken to have moved to the most
similar file new in it (:func:`.merge.similarity`), when that one is similar enough.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator, Sequence

from ...pristine.releases import ReleaseFiles
from .merge import line_counts, similarity

__all__ = ["MOVED_THRESHOLD", "find_moves"]

MOVED_THRESHOLD = 0.6
"""How alike (:func:`.merge.similarity`) a new file of the target release must be to a vanished one to be
taken as where it moved. Above git's 50 %: modules of one framework share much boilerplate (two vLLM model
files score 0.55), and a set merged into the wrong module is worse than a file reported lost. Each file of the
release takes at most one vanished file, the most similar pair first."""


def _likenesses(
    old: collections.Counter[bytes],
    path: str,
    new: Sequence[str],
    target: ReleaseFiles,
    counts: dict[str, collections.Counter[bytes]],
) -> Iterator[tuple[float, str]]:
    """How like the vanished file (its line counts ``old``) each new file of its extension is, for those
    whose size alone does not rule it out; ``counts`` keeps each candidate's line counts."""
    ext = os.path.splitext(path)[1]
    for p in new:
        if os.path.splitext(p)[1] != ext:
            continue
        if p not in counts:
            counts[p] = line_counts(target.get(p) or b"")
        n, m = old.total(), counts[p].total()
        if not n + m or 2 * min(n, m) / (n + m) < MOVED_THRESHOLD:
            continue  # the sizes alone say it cannot be similar enough
        yield round(similarity(old, counts[p]), 3), p


def find_moves(
    paths: Sequence[str], base: ReleaseFiles, target: ReleaseFiles
) -> dict[str, tuple[str | None, float | None]]:
    """For each of ``paths`` in ``base`` but gone from ``target``: where it went — the most similar file new
    in the release (with the same extension), one vanished file per new file, best pairs first — or
    ``(None, the best score seen)``."""
    gone = [p for p in paths if p not in target.entries and p in base.entries]
    new = sorted(p for p in target.entries if p not in base.entries)
    scores: list[tuple[float, str, str]] = []
    best: dict[str, float] = {}
    counts: dict[str, collections.Counter[bytes]] = {}  # each candidate read and counted once
    for path in gone:
        for score, p in _likenesses(line_counts(base.get(path) or b""), path, new, target, counts):
            best[path] = max(best.get(path, 0.0), score)
            scores.append((score, path, p))
    moves: dict[str, tuple[str | None, float | None]] = {p: (None, best.get(p)) for p in gone}
    taken: set[str] = set()
    for score, path, p in sorted(scores, reverse=True):
        if score >= MOVED_THRESHOLD and moves[path][0] is None and p not in taken:
            moves[path] = (p, score)
            taken.add(p)
    return moves
