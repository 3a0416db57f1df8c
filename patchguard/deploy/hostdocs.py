"""The former path of :mod:`patchguard.deploy.identity.hostdocs`: the names it had, handed on from there."""

from .identity.hostdocs import Fingerprint, FleetInputError, HostDocument, gather, read_document

__all__ = ["Fingerprint", "FleetInputError", "HostDocument", "gather", "read_document"]
