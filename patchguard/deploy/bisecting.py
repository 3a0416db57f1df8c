"""``patchguard.bisect``: which hand-made change of an environment breaks a test (the search and its trials
are :mod:`patchguard.patchsets.bisect`), and which processes of the environment ran while it held trial
states."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import IO, Any

from ..env import resolve_target
from ..errors import PatchguardError
from ..patchsets.bisect import BisectResult, By, Test, Trial, run_bisect
from ..pristine.sources import SourceOptions
from .running import running

__all__ = ["bisect"]


def bisect(
    distributions: Sequence[str] = (),
    *,
    test: str,
    sets: Sequence[str] = (),
    by: str | By = By.FILE,
    repeat: int = 1,
    timeout: float | None = None,
    keep_going: bool = False,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    wheelhouse: Sequence[str] = (),
    offline: bool = False,
    fetch: SourceOptions | None = None,
    patches: str | None = None,
    output: IO[Any] | int | None = None,
    progress: Callable[[Trial], None] | None = None,
) -> BisectResult:
    """Find the hand-made changes a test needs to fail: delta debugging over the changes of
    ``distributions`` against their pristine wheels (or over the applied ``sets``), each trial one
    transaction, the environment put back byte for byte at the end, whatever happens.

    ``test`` is a shell command: exit 0 good, 125 cannot tell, anything else bad (``timeout`` seconds: a
    hang is bad). ``by``: ``file`` (then the hunks of the culprit files), ``hunk`` or ``set``.

    >>> import patchguard
    >>> result = patchguard.bisect(["vllm"], test="pytest tests/test_coherence.py")  # doctest: +SKIP
    >>> [u.label for u in result.culprits]  # doctest: +SKIP
    ['vllm/model_executor/models/deepseek_v2.py hunk 2 (lines 606-612)']

    Raises :class:`~patchguard.patchsets.bisect.BisectError` when the test fails without any change
    (nothing changed then); ``result.found`` is false when it passes with every change.
    """
    target = resolve_target(python, site_packages)
    result = run_bisect(
        target,
        Test(test, repeat, timeout, output),
        distributions=distributions,
        sets=sets,
        by=By(by),
        keep_going=keep_going,
        patches=patches,
        fetch=SourceOptions.of(fetch, wheelhouse, offline),
        progress=progress,
    )
    try:
        alive = running(site_packages=site_packages, python=python)
    except (PatchguardError, OSError):
        return result
    ran = tuple(p.pid for p in alive.processes if p.started <= result.finished)
    return dataclasses.replace(result, running=ran)
