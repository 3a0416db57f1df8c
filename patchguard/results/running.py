"""``running``'s values: the processes of an environment (:class:`Running`, ``patchguard.running/1``), each
with its :class:`Verdict` — whether it runs what the disk holds.
:mod:`patchguard.deploy.processes.running` finds them (in ``/proc``) and says what each verdict means.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ..env import Target
from ..model import json_name

__all__ = ["RUNNING_SCHEMA", "Process", "Running", "Verdict"]

RUNNING_SCHEMA = "patchguard.running/1"


class Verdict(str, enum.Enum):
    CURRENT = "current"
    STALE = "stale"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Process:
    """One process of the environment and what it runs that the disk no longer holds."""

    pid: int
    command: str
    started: float  # epoch seconds
    verdict: Verdict
    replaced_extensions: tuple[str, ...] = ()
    imported_changed: tuple[str, ...] = ()  # .py changed after start that it had evidently imported
    maybe_changed: tuple[str, ...] = ()  # .py changed after start it may have imported
    transactions: tuple[str, ...] = ()  # patchguard transactions committed after it started
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """The process as ``patchguard.running/1`` has it: its command line and paths in the JSON name
        encoding (:func:`~patchguard.model.json_name`)."""
        return {
            "pid": self.pid,
            "command": json_name(self.command),
            "started": self.started,
            "verdict": self.verdict.value,
            "replaced_extensions": [json_name(p) for p in self.replaced_extensions],
            "imported_changed": [json_name(p) for p in self.imported_changed],
            "maybe_changed": [json_name(p) for p in self.maybe_changed],
            "transactions": [json_name(t) for t in self.transactions],
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class Running:
    """The processes of one environment."""

    target: Target
    processes: tuple[Process, ...] = ()

    @property
    def exit_code(self) -> int:
        verdicts = {p.verdict for p in self.processes}
        return 1 if Verdict.STALE in verdicts else 2 if Verdict.UNKNOWN in verdicts else 0

    def to_json(self) -> dict[str, Any]:
        """``patchguard.running/1`` (``running --format json``): the prefix and site directories, like every
        name, in the JSON name encoding."""
        return {
            "schema": RUNNING_SCHEMA,
            "environment": {
                "prefix": json_name(self.target.prefix),
                "site_packages": [json_name(p) for p in self.target.site_packages],
            },
            "processes": [p.to_json() for p in self.processes],
        }
