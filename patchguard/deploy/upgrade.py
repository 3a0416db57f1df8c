"""The former path of :mod:`patchguard.deploy.upgrades.upgrade`: the names it had, handed on from there."""

from .upgrades.upgrade import plan_upgrade, read_targets
from .upgrades.upgrade import planned_set as planned_set

__all__ = ["plan_upgrade", "read_targets"]
