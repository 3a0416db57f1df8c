"""Many hosts, one answer: which environments of a fleet differ, and in what.

``fleet`` reads one document per host — the lock (``patchguard lock``) or scan report (``scan --format
json``) an Ansible play or any ssh fan-out fetched — and groups the hosts whose environments are the same:
the same distributions in the same versions, the same bytes in every changed file, the same sets in place and
the same files no distribution owns (startup hooks). One group is the reference: ``baseline`` names a host
(its group) or a lock file; else the largest group, and when groups tie for the largest, the one holding
the host first by name — deterministic, and the result says it was a tie. Every other group gets what
differs from the reference, which is what each of its hosts differs in.

Pure but for reading the documents (:mod:`.hostdocs`): no host is contacted, nothing is written. The work is
one pass over each document and a dictionary of fingerprints, so hundreds of hosts take well under a second.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._version import __version__
from ..model import json_name, json_name_or_none, printable
from .hostdocs import Fingerprint, FleetInputError, HostDocument, gather, read_document

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

FLEET_SCHEMA = "patchguard.fleet/1"


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


def fleet(
    paths: Sequence[str | os.PathLike[str]], baseline: str | os.PathLike[str] | None = None
) -> FleetResult:
    """Group the hosts of ``paths`` (documents, or directories of ``*.json`` documents: one per host, the
    file name without ``.json`` naming it) by environment, and say what each group differs in from the
    reference: the group of host ``baseline``, or the environment of the lock (or report) file
    ``baseline``, or the largest group.

    >>> import patchguard
    >>> result = patchguard.fleet(["fleet/"])  # doctest: +SKIP
    >>> [h.name for h in result.differing]  # doctest: +SKIP
    ['gpu-17']

    Raises :class:`~.hostdocs.FleetInputError` (a :class:`~patchguard.errors.PatchguardError`) naming the
    file when a document cannot be read as one host's environment, two documents name one host, or
    ``baseline`` is neither a host nor a readable document: nothing is compared then.
    """
    hosts = [read_document(name, path) for name, path in gather([os.fspath(p) for p in paths])]
    base_host, base_doc = _baseline(None if baseline is None else os.fspath(baseline), hosts)
    # A lock's digest of each distribution's files counts only when every side has one.
    builds = all(h.kind == "lock" for h in hosts) and (base_doc is None or base_doc.kind == "lock")
    buckets: dict[tuple[object, ...], list[HostDocument]] = {}
    for h in hosts:
        buckets.setdefault(h.fingerprint.key(builds), []).append(h)
    ordered = sorted(buckets.values(), key=lambda g: (-len(g), g[0].name))
    tied = sum(1 for g in ordered if len(g) == len(ordered[0]))
    if base_doc is not None:
        chosen, reference = Chosen.FILE, base_doc.fingerprint
        ref_key = reference.key(builds)
        ordered.sort(key=lambda g: g[0].fingerprint.key(builds) != ref_key)  # stable: the match first
    else:
        first = next(g for g in ordered if base_host is None or base_host in g)
        ordered.remove(first)
        ordered.insert(0, first)
        chosen = Chosen.HOST if base_host is not None else Chosen.TIE if tied > 1 else Chosen.LARGEST
        reference = first[0].fingerprint
    groups = tuple(
        FleetGroup(tuple(g), same, () if same else differences(reference, g[0].fingerprint, builds))
        for g in ordered
        for same in [g[0].fingerprint.key(builds) == reference.key(builds)]
    )
    return FleetResult(groups, chosen, base_doc, tied if chosen is Chosen.TIE else 0)


def _baseline(
    baseline: str | None, hosts: Sequence[HostDocument]
) -> tuple[HostDocument | None, HostDocument | None]:
    """(the host named ``baseline``, or the document at ``baseline``): a host's name wins over a file."""
    if baseline is None:
        return None, None
    named = next((h for h in hosts if h.name == baseline), None)
    if named is not None:
        return named, None
    if not os.path.lexists(baseline):
        raise FleetInputError(
            "no host of that name among the documents, and no such file",
            path=baseline,
            hint="--baseline takes a host (a document's file name without .json) or a lock file",
        )
    return None, read_document(os.path.basename(baseline), baseline)


def differences(reference: Fingerprint, here: Fingerprint, builds: bool = False) -> tuple[Difference, ...]:
    """Everything ``here`` has other than ``reference``: the interpreter, distributions, files of the
    distributions installed in the same version in both, sets, unowned files — each in name order."""
    out: list[Difference] = []
    if reference.python != here.python:
        out.append(Difference(Aspect.PYTHON, Change.CHANGED, "python", reference.python, here.python))
    out += _compared(Aspect.DISTRIBUTION, reference.distributions, here.distributions)
    # A distribution's files, where it is in the same version on both sides (another version, or installed on
    # one side only, is one difference already).
    for dist in sorted({*reference.files, *here.files, *reference.builds, *here.builds}):
        if reference.distributions.get(dist) != here.distributions.get(dist):
            continue
        files = _compared(Aspect.FILE, reference.files.get(dist, {}), here.files.get(dist, {}), dist)
        out += files
        a, b = reference.builds.get(dist), here.builds.get(dist)
        if builds and not files and a != b:
            out.append(Difference(Aspect.BUILD, Change.CHANGED, dist, a, b))
    out += _compared(Aspect.SET, reference.sets, here.sets)
    for aspect in (Aspect.STARTUP_HOOK, Aspect.UNOWNED):
        mine = {p: s for p, s in reference.unowned.items() if _aspect_of(p) is aspect}
        theirs = {p: s for p, s in here.unowned.items() if _aspect_of(p) is aspect}
        out += _compared(aspect, mine, theirs)
    return tuple(out)


def _aspect_of(path: str) -> Aspect:
    """A file no distribution owns: a startup hook (runs at every interpreter start) or just unowned."""
    name = path.rsplit("/", 1)[-1]
    hook = name.endswith(".pth") or name in ("sitecustomize.py", "usercustomize.py")
    return Aspect.STARTUP_HOOK if hook and "/" not in path.rstrip("/") else Aspect.UNOWNED


def _compared(
    aspect: Aspect, reference: Mapping[str, str], here: Mapping[str, str], distribution: str | None = None
) -> list[Difference]:
    """One :class:`Difference` per name whose value differs (present on one side only, or not equal)."""
    out: list[Difference] = []
    for name in sorted(set(reference) | set(here)):
        a, b = reference.get(name), here.get(name)
        if a != b:
            change = Change.ADDED if a is None else Change.REMOVED if b is None else Change.CHANGED
            out.append(Difference(aspect, change, name, a, b, distribution))
    return out
