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
The values it makes (:class:`~patchguard.results.fleet.FleetResult` and its parts) are defined in
:mod:`patchguard.results.fleet`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ...results.fleet import (
    FLEET_SCHEMA,
    Aspect,
    Change,
    Chosen,
    Difference,
    Fingerprint,
    FleetGroup,
    FleetResult,
    HostDocument,
)
from .hostdocs import FleetInputError, gather, read_document

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
    chosen, reference = _reference(ordered, base_host, base_doc, builds, tied)
    groups = tuple(
        FleetGroup(tuple(g), same, () if same else differences(reference, g[0].fingerprint, builds))
        for g in ordered
        for same in [g[0].fingerprint.key(builds) == reference.key(builds)]
    )
    return FleetResult(groups, chosen, base_doc, tied if chosen is Chosen.TIE else 0)


def _reference(
    ordered: list[list[HostDocument]],
    base_host: HostDocument | None,
    base_doc: HostDocument | None,
    builds: bool,
    tied: int,
) -> tuple[Chosen, Fingerprint]:
    """How the reference is chosen and its fingerprint: the ``--baseline`` file's, else the group of the
    ``--baseline`` host, else the largest group (the first by host name among ties); ``ordered`` is put in
    report order, the reference's group first."""
    if base_doc is not None:
        reference = base_doc.fingerprint
        ref_key = reference.key(builds)
        ordered.sort(key=lambda g: g[0].fingerprint.key(builds) != ref_key)  # stable: the match first
        return Chosen.FILE, reference
    first = next(g for g in ordered if base_host is None or base_host in g)
    ordered.remove(first)
    ordered.insert(0, first)
    chosen = Chosen.HOST if base_host is not None else Chosen.TIE if tied > 1 else Chosen.LARGEST
    return chosen, first[0].fingerprint


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
