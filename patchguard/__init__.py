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
    Gate,
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
    Violation,
)

if TYPE_CHECKING:
    from .api import (
        apply_set,
        bisect,
        capture_set,
        check,
        diff,
        environment_status,
        lock,
        plan,
        rebase_all,
        rebase_set,
        restore,
        revert_set,
        rollback,
        scan,
        set_states,
    )
    from .config import ConfigError
    from .deploy.identity.fleet import fleet
    from .deploy.identity.hostdocs import FleetInputError
    from .diffs import FileDiff
    from .integrity.inventory import ProgressCallback
    from .patchsets.bisect import BisectError
    from .patchsets.model import PatchSet, PatchSetError, load_sets
    from .patchsets.ops import FileVerdict, SetAction, SetOutcome, Verdict
    from .patchsets.planner import FilePlan, PlanFailed
    from .pristine.restore import Action, FileAction, RestoreResult
    from .pristine.sources import NoPristineSource, SourceOptions
    from .results import (
        Aspect,
        BisectResult,
        Change,
        CheckResult,
        Chosen,
        Difference,
        FileOutcome,
        FleetGroup,
        FleetResult,
        HostDocument,
        Policy,
        RebasedFile,
        RebaseResult,
        Trial,
    )
    from .txn import Committed, LockTimeout, SessionBusy, TransactionError

# Name -> the module that defines it, imported on first use (not at `import patchguard`).
_LAZY = {
    "scan": "api",
    "check": "api",
    "lock": "api",
    "plan": "api",
    "rollback": "api",
    "rebase_all": "api",
    "SourceOptions": "pristine.sources",
    "ProgressCallback": "integrity.inventory",
    "diff": "api",
    "FileDiff": "diffs",
    "restore": "api",
    "RestoreResult": "pristine.restore",
    "Action": "pristine.restore",
    "FileAction": "pristine.restore",
    "apply_set": "api",
    "revert_set": "api",
    "SetOutcome": "patchsets.ops",
    "SetAction": "patchsets.ops",
    "Verdict": "patchsets.ops",
    "FileVerdict": "patchsets.ops",
    "capture_set": "api",
    "rebase_set": "api",
    "RebaseResult": "results.rebase",
    "RebasedFile": "results.rebase",
    "FileOutcome": "results.rebase",
    "set_states": "api",
    "environment_status": "api",
    "load_sets": "patchsets.model",
    "PatchSet": "patchsets.model",
    "PatchSetError": "patchsets.model",
    "PlanFailed": "patchsets.planner",
    "FilePlan": "patchsets.planner",
    "Policy": "results.check",
    "CheckResult": "results.check",
    "fleet": "deploy.identity.fleet",
    "FleetResult": "results.fleet",
    "FleetGroup": "results.fleet",
    "Difference": "results.fleet",
    "Aspect": "results.fleet",
    "Change": "results.fleet",
    "Chosen": "results.fleet",
    "HostDocument": "results.fleet",
    "FleetInputError": "deploy.identity.hostdocs",
    "ConfigError": "config",
    "NoPristineSource": "pristine.sources",
    "TransactionError": "txn",
    "LockTimeout": "txn",
    "Committed": "txn",
    "SessionBusy": "txn",
    "bisect": "api",
    "BisectResult": "results.bisect",
    "BisectError": "patchsets.bisect",
    "Trial": "results.bisect",
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
    "Gate",
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
    "Violation",
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
