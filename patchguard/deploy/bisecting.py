"""``patchguard.bisect``: which hand-made change of an environment breaks a test (the search and its trials
are :mod:`patchguard.patchsets.bisect`), and which processes of the environment ran while it held trial
states."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import IO, Any

from ..env import Target
from ..errors import PatchguardError
from ..patchsets.bisect import BisectResult, By, Test, Trial, run_bisect
from ..pristine.sources import SourceOptions
from .processes.running import running

__all__ = ["bisect"]


def bisect(
    distributions: Sequence[str] = (),
    *,
    target: Target,
    test: str,
    sets: Sequence[str] = (),
    by: str | By = By.FILE,
    repeat: int = 1,
    timeout: float | None = None,
    keep_going: bool = False,
    fetch: SourceOptions | None = None,
    patches: str | None = None,
    output: IO[Any] | int | None = None,
    progress: Callable[[Trial], None] | None = None,
) -> BisectResult:
    """Find the hand-made changes of ``target`` a test needs to fail (:func:`patchguard.bisect` is its public
    face, which says how), and which of its processes ran while it held trial states."""
    result = run_bisect(
        target,
        Test(test, repeat, timeout, output),
        distributions=distributions,
        sets=sets,
        by=By(by),
        keep_going=keep_going,
        patches=patches,
        fetch=fetch or SourceOptions(),
        progress=progress,
    )
    try:
        alive = running(target)
    except (PatchguardError, OSError):
        return result
    ran = tuple(p.pid for p in alive.processes if p.started <= result.finished)
    return dataclasses.replace(result, running=ran)
