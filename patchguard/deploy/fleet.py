"""The former path of :mod:`patchguard.deploy.identity.fleet`: the names it had, handed on from there."""

from .identity.fleet import (
    FLEET_SCHEMA,
    Aspect,
    Change,
    Chosen,
    Difference,
    FleetGroup,
    FleetResult,
    differences,
    fleet,
)

__all__ = [
    "FLEET_SCHEMA",
    "Aspect",
    "Change",
    "Chosen",
    "Difference",
    "FleetGroup",
    "FleetResult",
    "differences",
    "fleet",
]
