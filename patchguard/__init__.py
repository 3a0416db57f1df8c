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

from .errors import EnvironmentNotFound, InvalidRecord, PatchguardError, UsageError
from .report import Finding, Kind, Report, Severity

if TYPE_CHECKING:
    from .explain import diff
    from .restoration import restore
    from .scanner import scan

__all__ = [
    "EnvironmentNotFound",
    "Finding",
    "InvalidRecord",
    "Kind",
    "PatchguardError",
    "Report",
    "Severity",
    "UsageError",
    "__version__",
    "diff",
    "restore",
    "scan",
]

_LAZY = {"scan": "scanner", "diff": "explain", "restore": "restoration"}


def __getattr__(name: str) -> Any:
    # The machinery is imported on first use, not at `import patchguard`.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'patchguard' has no attribute {name!r}")
