"""patchguard: verify a hand-patched Python environment against the wheels it came from.

>>> import patchguard
>>> report = patchguard.scan(["pip"])  # doctest: +SKIP
>>> [f.path for f in report.findings if f.kind is patchguard.Kind.MODIFIED]  # doctest: +SKIP
['pip/_internal/cli/main.py']

This module stays light on purpose: ``patchguard --version`` imports it, so nothing heavy (libcst, git,
importlib-metadata) is imported until a function needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import EnvironmentNotFound, PatchguardError, UsageError
from .model import (
    Finding,
    GateKind,
    Kind,
    Loaded,
    PlannedEdit,
    PlannedFile,
    PlannedSet,
    PlanVerdict,
    Reach,
    Reinstall,
    Report,
    RollbackResult,
    RuleId,
    SetState,
    SetStatus,
    Severity,
    Upgrade,
    UpgradePlan,
)

if TYPE_CHECKING:
    from .audit import check, lock, plan, scan
    from .config import ConfigError
    from .deploy.bisecting import bisect
    from .deploy.fleet import Aspect, Change, Chosen, Difference, FleetGroup, FleetResult, fleet
    from .deploy.gate import CheckResult
    from .deploy.hostdocs import FleetInputError, HostDocument
    from .deploy.policy import Policy
    from .deploy.rollback import rollback
    from .diffs import FileDiff
    from .integrity.inventory import ProgressCallback
    from .patchsets.bisect import BisectError, BisectResult, Trial
    from .patchsets.capture import capture_set
    from .patchsets.keep import restore
    from .patchsets.model import PatchSet, PatchSetError, load_sets
    from .patchsets.ops import FileVerdict, SetAction, SetOutcome, Verdict, apply_set, revert_set
    from .patchsets.planner import FilePlan, PlanFailed
    from .patchsets.rebase import FileOutcome, RebasedFile, RebaseResult, rebase_all, rebase_set
    from .patchsets.status import environment_status, set_states
    from .pristine.explain import diff
    from .pristine.restore import Action, FileAction, RestoreResult
    from .pristine.sources import NoPristineSource, SourceOptions
    from .txn import Committed, LockTimeout, SessionBusy, TransactionError

# Name -> the module that defines it, imported on first use (not at `import patchguard`).
_LAZY = {
    "scan": "audit",
    "check": "audit",
    "lock": "audit",
    "plan": "audit",
    "rollback": "deploy.rollback",
    "rebase_all": "patchsets.rebase",
    "SourceOptions": "pristine.sources",
    "ProgressCallback": "integrity.inventory",
    "diff": "pristine.explain",
    "FileDiff": "diffs",
    "restore": "patchsets.keep",
    "RestoreResult": "pristine.restore",
    "Action": "pristine.restore",
    "FileAction": "pristine.restore",
    "apply_set": "patchsets.ops",
    "revert_set": "patchsets.ops",
    "SetOutcome": "patchsets.ops",
    "SetAction": "patchsets.ops",
    "Verdict": "patchsets.ops",
    "FileVerdict": "patchsets.ops",
    "capture_set": "patchsets.capture",
    "rebase_set": "patchsets.rebase",
    "RebaseResult": "patchsets.rebase",
    "RebasedFile": "patchsets.rebase",
    "FileOutcome": "patchsets.rebase",
    "set_states": "patchsets.status",
    "environment_status": "patchsets.status",
    "load_sets": "patchsets.model",
    "PatchSet": "patchsets.model",
    "PatchSetError": "patchsets.model",
    "PlanFailed": "patchsets.planner",
    "FilePlan": "patchsets.planner",
    "Policy": "deploy.policy",
    "CheckResult": "deploy.gate",
    "fleet": "deploy.fleet",
    "FleetResult": "deploy.fleet",
    "FleetGroup": "deploy.fleet",
    "Difference": "deploy.fleet",
    "Aspect": "deploy.fleet",
    "Change": "deploy.fleet",
    "Chosen": "deploy.fleet",
    "HostDocument": "deploy.hostdocs",
    "FleetInputError": "deploy.hostdocs",
    "ConfigError": "config",
    "NoPristineSource": "pristine.sources",
    "TransactionError": "txn",
    "LockTimeout": "txn",
    "Committed": "txn",
    "SessionBusy": "txn",
    "bisect": "deploy.bisecting",
    "BisectResult": "patchsets.bisect",
    "BisectError": "patchsets.bisect",
    "Trial": "patchsets.bisect",
}

__all__ = [
    "Action",
    "Aspect",
    "BisectError",
    "BisectResult",
    "Change",
    "CheckResult",
    "Chosen",
    "Committed",
    "ConfigError",
    "Difference",
    "EnvironmentNotFound",
    "FileAction",
    "FileDiff",
    "FileOutcome",
    "FilePlan",
    "FileVerdict",
    "Finding",
    "FleetGroup",
    "FleetInputError",
    "FleetResult",
    "GateKind",
    "HostDocument",
    "Kind",
    "Loaded",
    "LockTimeout",
    "NoPristineSource",
    "PatchSet",
    "PatchSetError",
    "PatchguardError",
    "PlanFailed",
    "PlanVerdict",
    "PlannedEdit",
    "PlannedFile",
    "PlannedSet",
    "Policy",
    "ProgressCallback",
    "Reach",
    "RebaseResult",
    "RebasedFile",
    "Reinstall",
    "Report",
    "RestoreResult",
    "RollbackResult",
    "RuleId",
    "SessionBusy",
    "SetAction",
    "SetOutcome",
    "SetState",
    "SetStatus",
    "Severity",
    "SourceOptions",
    "TransactionError",
    "Trial",
    "Upgrade",
    "UpgradePlan",
    "UsageError",
    "Verdict",
    "__version__",
    "apply_set",
    "bisect",
    "capture_set",
    "check",
    "diff",
    "environment_status",
    "fleet",
    "load_sets",
    "lock",
    "plan",
    "rebase_all",
    "rebase_set",
    "restore",
    "revert_set",
    "rollback",
    "scan",
    "set_states",
]


def __getattr__(name: str) -> Any:
    # The machinery is imported on first use, not at `import patchguard`.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'patchguard' has no attribute {name!r}")
