"""``fleet``'s values: one document per host (:class:`HostDocument`) and the :class:`Fingerprint` of its
environment, the groups of hosts alike (:class:`FleetGroup`), what a group differs in from the reference
(:class:`Difference`), and the answer (:class:`FleetResult`, ``patchguard.fleet/1``).

:mod:`patchguard.deploy.identity.hostdocs` reads the documents into them;
:mod:`patchguard.deploy.identity.fleet` compares.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._version import __version__
from ..model import json_name, json_name_or_none, printable

__all__ = [
    "FLEET_SCHEMA",
    "Aspect",
    "Change",
    "Chosen",
    "Difference",
    "Fingerprint",
    "FleetGroup",
    "FleetResult",
    "HostDocument",
]

FLEET_SCHEMA = "patchguard.fleet/1"


@dataclass(frozen=True, slots=True, kw_only=True)
class Fingerprint:
    """What makes two environments the same, as one document says it."""

    python: str
    distributions: Mapping[str, str]  # canonical name -> version
    builds: Mapping[str, str]  # canonical name -> digest of all its files (locks only)
    files: Mapping[str, Mapping[str, str]]  # distribution -> path -> state (files not as RECORD says)
    sets: Mapping[str, str]  # set name -> digest of the set
    unowned: Mapping[str, str]  # path -> state of files no distribution owns (startup hooks among them)

    def key(self, builds: bool) -> tuple[object, ...]:
        """A value equal for two fingerprints of the same environment (``builds``: the digests count)."""
        return (
            self.python,
            tuple(sorted(self.distributions.items())),
            tuple(sorted(self.builds.items())) if builds else (),
            tuple(sorted((d, tuple(sorted(f.items()))) for d, f in self.files.items() if f)),
            tuple(sorted(self.sets.items())),
            tuple(sorted(self.unowned.items())),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class HostDocument:
    """One host's document: the host (the file's name), where it was read, what wrote it and when, and
    the fingerprint of its environment."""

    name: str  # the file name without .json: the host, as the inventory names it
    path: str
    kind: str  # "lock" or "report"
    host: str | None  # the host name the document gives (absent from older locks)
    time: str | None  # when it was written (ISO 8601 UTC)
    version: str | None  # the patchguard that wrote it
    fingerprint: Fingerprint = field(repr=False, compare=False)


class Aspect(str, enum.Enum):
    """What about an environment differs."""

    PYTHON = "python"  # the interpreter's major.minor
    DISTRIBUTION = "distribution"  # installed or not, its version
    BUILD = "build"  # same version, other files (a lock's digest of all of them), no changed file to name
    FILE = "file"  # a distribution's file: as RECORD says, modified (its digest), missing, unexpected
    SET = "set"  # a patch set in place or not, or another version of it
    STARTUP_HOOK = "startup-hook"  # a .pth file or site/usercustomize.py no distribution owns
    UNOWNED = "unowned"  # any other file no distribution owns at the top of site-packages


class Change(str, enum.Enum):
    """How: here and not in the reference, the other way round, or in both but not the same."""

    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


class Chosen(str, enum.Enum):
    """How the reference was chosen."""

    LARGEST = "largest"  # the largest group
    TIE = "tie"  # groups tie for the largest: the one holding the host first by name
    HOST = "host"  # --baseline HOST: that host's group
    FILE = "file"  # --baseline FILE: a lock (or report) of no host of the fleet


@dataclass(frozen=True, slots=True)
class Difference:
    """One thing a group's environment has other than the reference's.

    ``name`` is the distribution (``DISTRIBUTION``, ``BUILD``), the set, or the file's path (relative to
    site-packages; ``FILE`` names its ``distribution`` too). ``reference`` and ``here`` are the version, the
    digest or the file's state (``sha256:<hex>`` modified, ``missing``, ``unexpected:sha256:<hex>``,
    ``unexpected:dir``) on each side; ``None`` where there is none (not installed, not applied, as RECORD
    says, no such file).
    """

    aspect: Aspect
    change: Change
    name: str
    reference: str | None
    here: str | None
    distribution: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "aspect": self.aspect.value,
            "change": self.change.value,
            "name": json_name(self.name),
            "distribution": json_name_or_none(self.distribution),
            "reference": printable(self.reference) if self.reference is not None else None,
            "here": printable(self.here) if self.here is not None else None,
        }


@dataclass(frozen=True, slots=True)
class FleetGroup:
    """Hosts whose environments are the same (by name), whether they are the reference, and what they
    differ in from it (nothing, for the reference)."""

    hosts: tuple[HostDocument, ...]
    reference: bool
    differences: tuple[Difference, ...] = ()


@dataclass(frozen=True, slots=True)
class FleetResult:
    """The fleet's environments: its groups, the reference first (when a group is it), then the others
    largest first; how the reference was chosen; the ``--baseline`` file's document when one was given."""

    groups: tuple[FleetGroup, ...]
    chosen: Chosen
    baseline: HostDocument | None = None
    tied: int = 0  # how many groups tie for the largest (``Chosen.TIE``)

    @property
    def hosts(self) -> tuple[HostDocument, ...]:
        return tuple(sorted((h for g in self.groups for h in g.hosts), key=lambda h: h.name))

    @property
    def reference(self) -> FleetGroup | None:
        """The group that is the reference (none when a baseline file matches no host)."""
        return next((g for g in self.groups if g.reference), None)

    @property
    def differing(self) -> tuple[HostDocument, ...]:
        """Every host whose environment is not the reference's, by name."""
        return tuple(
            sorted((h for g in self.groups if not g.reference for h in g.hosts), key=lambda h: h.name)
        )

    @property
    def alike(self) -> bool:
        """Every host has the reference's environment (exit 0; else 1)."""
        return not self.differing

    def to_json(self) -> dict[str, Any]:
        """``patchguard.fleet/1``: names in the JSON name encoding, a host's differences its group's."""
        index = {h.name: i for i, g in enumerate(self.groups) for h in g.hosts}
        ref = next((i for i, g in enumerate(self.groups) if g.reference), None)
        return {
            "schema": FLEET_SCHEMA,
            "tool": {"name": "patchguard", "version": __version__},
            "alike": self.alike,
            "summary": {"hosts": len(index), "groups": len(self.groups), "differing": len(self.differing)},
            "reference": {
                "chosen": self.chosen.value,
                "group": ref,
                "tied": self.tied,
                "baseline": _document_json(self.baseline) if self.baseline is not None else None,
            },
            "groups": [
                {
                    "hosts": [json_name(h.name) for h in g.hosts],
                    "reference": g.reference,
                    "differences": [d.to_json() for d in g.differences],
                }
                for g in self.groups
            ],
            "documents": {
                json_name(h.name): {**_document_json(h), "group": index[h.name]} for h in self.hosts
            },
            "differing": {
                json_name(h.name): [d.to_json() for d in self.groups[index[h.name]].differences]
                for h in self.differing
            },
        }


def _document_json(h: HostDocument) -> dict[str, Any]:
    return {
        "path": json_name(h.path),
        "kind": h.kind,
        "host": json_name_or_none(h.host),
        "time": printable(h.time) if h.time is not None else None,
        "version": printable(h.version) if h.version is not None else None,
    }
