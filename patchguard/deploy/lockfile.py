"""The former path of :mod:`patchguard.deploy.identity.lockfile`: the names it had, handed on from there."""

from .identity.lockfile import LOCK_SCHEMA, applied_sets, compare_locks, lock_bytes, make_lock, read_lock
from .identity.lockfile import build_digest as build_digest

__all__ = ["LOCK_SCHEMA", "applied_sets", "compare_locks", "lock_bytes", "make_lock", "read_lock"]
