"""The values every command hands on: what a stage makes and the formats and the CLI read, frozen where they
are finished, one module by kind of result — ``check``'s policy and verdict (:mod:`.check`), ``running``'s
processes (:mod:`.running`), a rebase (:mod:`.rebase`), a bisect (:mod:`.bisect`) and a fleet
(:mod:`.fleet`), each with its ``to_json`` (the one definition of its document's shape) and schema name.

A bottom package: it imports only what lies below it (the model, the configuration, the rule table, the
environment's :class:`~patchguard.env.Target`), so that every stage above may make these values and the
formats may read them without importing the stages.
"""

from .bisect import BISECT_SCHEMA, BisectResult, By, Outcome, Trial, Unit, UnitKind
from .check import CHECK_SCHEMA, CheckResult, Policy
from .fleet import (
    FLEET_SCHEMA,
    Aspect,
    Change,
    Chosen,
    Difference,
    Fingerprint,
    FleetGroup,
    FleetResult,
    HostDocument,
)
from .rebase import FileOutcome, RebasedFile, RebaseResult
from .running import RUNNING_SCHEMA, Process, Running, Verdict

__all__ = [
    "BISECT_SCHEMA",
    "CHECK_SCHEMA",
    "FLEET_SCHEMA",
    "RUNNING_SCHEMA",
    "Aspect",
    "BisectResult",
    "By",
    "Change",
    "CheckResult",
    "Chosen",
    "Difference",
    "FileOutcome",
    "Fingerprint",
    "FleetGroup",
    "FleetResult",
    "HostDocument",
    "Outcome",
    "Policy",
    "Process",
    "RebaseResult",
    "RebasedFile",
    "Running",
    "Trial",
    "Unit",
    "UnitKind",
    "Verdict",
]
