"""The former path of :mod:`patchguard.deploy.check.gate`: the names it had, handed on from there."""

from .check.gate import CHECK_SCHEMA, CheckResult, evaluate
from .check.gate import stale_processes as stale_processes

__all__ = ["CHECK_SCHEMA", "CheckResult", "evaluate"]
