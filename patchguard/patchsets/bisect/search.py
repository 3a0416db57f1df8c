"""The search of ``bisect``: which of n changes a test needs to fail — pure, no files, no processes.

Changes are numbered 1..n in a fixed order. The search assumes what delta debugging assumes: adding changes
to a failing state keeps it failing (a culprit, or a set of culprits that break only together, stays
present). It finds one culprit at a time by binary search over prefixes — the shortest prefix that, with
the culprits found so far, fails ends with the next culprit — and stops as soon as the culprits found fail
on their own. That is ``log2(n)`` trials per culprit plus one check, about ``k·log2(n/k)`` for ``k``; the
set it returns is 1-minimal (leave any one out and the test passes), interactions included.

A trial that cannot tell (the test exits 125, or the state cannot be made) is skipped like ``git bisect
skip``: the search probes another point of the same interval, and when every point of it is skipped it
keeps the whole interval as one culprit it could not split (``unsplit``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...results.bisect import Outcome

__all__ = ["Outcome", "Search", "search"]


Oracle = Callable[[frozenset[int]], Outcome]
Known = Callable[[frozenset[int]], "Outcome | None"]


@dataclass(frozen=True, slots=True)
class Search:
    """The culprits (change numbers, in the order found) and the groups the search could not split."""

    culprits: tuple[int, ...]
    unsplit: tuple[tuple[int, ...], ...] = ()


def search(changes: Sequence[int], test: Oracle, known: Known) -> Search:
    """The culprits among ``changes``; ``test`` runs a trial with the changes given (the others left out),
    ``known`` tells an outcome already seen. The state with every change must be known bad and the one
    with none known good before the search starts."""
    found: list[int] = []
    unsplit: list[tuple[int, ...]] = []
    rest = list(changes)
    while rest:
        base = frozenset(found)
        if found and _outcome(base, test, known) is Outcome.BAD:
            break
        lo, hi = _shortest_failing_prefix(rest, base, test, known)
        if hi - lo > 1:  # every probe of the interval skipped: keep it whole
            unsplit.append(tuple(rest[lo:hi]))
        found.extend(rest[lo:hi])
        rest = rest[:lo]
    return Search(tuple(found), tuple(unsplit))


def _outcome(state: frozenset[int], test: Oracle, known: Known) -> Outcome:
    seen = known(state)
    return seen if seen is not None else test(state)


def _shortest_failing_prefix(
    rest: Sequence[int], base: frozenset[int], test: Oracle, known: Known
) -> tuple[int, int]:
    """``(lo, hi)`` with ``base + rest[:lo]`` passing and ``base + rest[:hi]`` failing, ``hi - lo`` 1 unless
    every probe between them was skipped. ``base + rest`` fails; ``base`` alone passes."""
    lo, hi = 0, len(rest)
    skipped: set[int] = set()
    while hi - lo > 1:
        probe = _probe(lo, hi, skipped)
        if probe is None:
            break
        got = _outcome(base | frozenset(rest[:probe]), test, known)
        if got is Outcome.SKIP:
            skipped.add(probe)
        elif got is Outcome.BAD:
            hi = probe
        else:
            lo = probe
    return lo, hi


def _probe(lo: int, hi: int, skipped: set[int]) -> int | None:
    """The untried point of ``(lo, hi)`` nearest its middle, or ``None`` when all were skipped."""
    mid = (lo + hi) // 2
    for step in range(hi - lo):
        for point in (mid - step, mid + step):
            if lo < point < hi and point not in skipped:
                return point
    return None
