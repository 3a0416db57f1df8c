"""The former path of :mod:`patchguard.deploy.upgrades.rollback`: the names it had, handed on from there."""

from .upgrades.rollback import Reinstall, RollbackResult, rollback

__all__ = ["Reinstall", "RollbackResult", "rollback"]
