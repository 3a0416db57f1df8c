"""The former path of :mod:`patchguard.deploy.check.policy`: the names it had, handed on from there."""

from .check.policy import Policy, load_policy

__all__ = ["Policy", "load_policy"]
