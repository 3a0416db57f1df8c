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

__version__ = "0.1.0"

from .errors import EnvironmentNotFound, PatchguardError, UsageError
from .report import Finding, Kind, Report, Severity

if TYPE_CHECKING:
    from .config import ConfigError
    from .explain import diff
    from .patchsets import PatchSetError, PlanFailed, load_sets
    from .policy import CheckResult, Policy, check
    from .pristine import NoPristineSource
    from .restoration import restore
    from .scanner import scan
    from .setops import apply_set, capture_set, revert_set
    from .txn import LockTimeout, TransactionError

__all__ = [
    "CheckResult",
    "ConfigError",
    "EnvironmentNotFound",
    "Finding",
    "Kind",
    "LockTimeout",
    "NoPristineSource",
    "PatchSetError",
    "PatchguardError",
    "PlanFailed",
    "Policy",
    "Report",
    "Severity",
    "TransactionError",
    "UsageError",
    "__version__",
    "apply_set",
    "capture_set",
    "check",
    "diff",
    "load_sets",
    "restore",
    "revert_set",
    "scan",
]

_LAZY = {
    "scan": "scanner",
    "diff": "explain",
    "restore": "restoration",
    "apply_set": "setops",
    "revert_set": "setops",
    "capture_set": "setops",
    "load_sets": "patchsets",
    "check": "policy",
    "Policy": "policy",
    "CheckResult": "policy",
    "ConfigError": "config",
    "NoPristineSource": "pristine",
    "PatchSetError": "patchsets",
    "PlanFailed": "patchsets",
    "TransactionError": "txn",
    "LockTimeout": "txn",
}


def __getattr__(name: str) -> Any:
    # The machinery is imported on first use, not at `import patchguard`.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'patchguard' has no attribute {name!r}")
