"""What one rebase reads: the part of the set carried, both releases proven, the set applied to the base.

The base is the release the set was written for — named (``--from-version``), recorded in ``state.json``
when the set was applied here, pinned by the set, or else each release of its range at hand, newest first —
and must be the build the set was applied on (``state.json``'s pre-image hashes) and a release the set
applies to. The target is the release the set is carried to. Both come from
:mod:`patchguard.pristine.releases`, proven against a RECORD.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from ..._fs import sha256_bytes
from ...errors import PatchguardError, UsageError
from ...integrity.records import InstalledDistribution, canonicalize
from ...pristine.releases import ReleaseFiles, installed_release, wheel_release
from ...pristine.sources import ReleaseId, Sources, local_versions, wheel_tags
from ...pristine.wheels import Rejected
from ...state import AppliedRecord
from ..model import PatchSet, PatchSetError
from ..planner import PlanFailed, plan_patches

__all__ = ["DoesNotApply", "RebaseInputs", "checked_version", "open_inputs"]


class DoesNotApply(PatchSetError):
    """The set does not apply to a release's pristine files: not the release it was written for."""


@dataclass
class RebaseInputs:
    """Everything one rebase reads: the set, both releases, and the set applied to the base."""

    ps: PatchSet  # the part of the set being carried: one distribution target and its files
    base: ReleaseFiles
    target: ReleaseFiles
    theirs: dict[str, bytes | None]
    moves: dict[str, tuple[str | None, float | None]] = dataclasses.field(default_factory=dict)
    whole: PatchSet | None = None  # the whole set, when it has other targets (kept as they are)

    @property
    def labels(self) -> tuple[str, str, str]:
        name = self.base.name
        return (f"{name} {self.target.version}", f"{name} {self.base.version}", f"set {self.ps.name}")


def checked_version(raw: str | None, dist_name: str, what: str) -> str:
    """``raw`` if it is a version as the user wrote it (``what``: the option that names it)."""
    from packaging.version import InvalidVersion, Version

    if raw is None:
        raise UsageError(f"{dist_name} is not installed here", hint=f"name the release to carry to: {what} V")
    try:
        Version(raw)
        if raw != raw.strip() or not raw.isprintable():  # packaging strips what would go into names
            raise InvalidVersion(raw)
    except InvalidVersion:
        raise UsageError(f"{what} {raw!r} is not a version", hint="e.g. 0.34.0") from None
    return raw


def open_inputs(
    ps: PatchSet,
    dist: InstalledDistribution | None,
    to: str,
    from_version: str | None,
    record: AppliedRecord | None,
    sources: Sources,
) -> RebaseInputs | None:
    """Both releases, proven, and the set applied to the base; ``None`` when the set already is for ``to``."""
    target = ps.distributions[0]
    choices = _base_versions(ps, dist, from_version, record, sources, to)
    if to in choices[:1]:
        return None
    failures: list[str] = []
    for version in choices:
        try:
            base = _release(target.distribution, version, dist, sources, _proof(ps, record, version))
            theirs = _applied(ps, base)
        except PatchguardError as exc:
            failures.append(f"{version}: {exc.message}")
            continue
        return RebaseInputs(ps, base, _release(target.distribution, to, dist, sources, None), theirs)
    raise PatchSetError(
        f"cannot tell the release {ps.name} was written for: " + "; ".join(failures),
        path=ps.directory,
        hint="name it with --from-version V (and point --wheelhouse at its wheel)",
    )


def _base_versions(
    ps: PatchSet,
    dist: InstalledDistribution | None,
    from_version: str | None,
    record: AppliedRecord | None,
    sources: Sources,
    to: str,
) -> list[str]:
    """The releases the set may have been written for, most likely first."""
    target = ps.distributions[0]
    if from_version:
        return [checked_version(from_version, target.distribution, "--from-version")]
    recorded = record.distributions if record is not None else None
    if recorded is not None and dist is not None and dist.name in recorded:
        return [recorded[dist.name]]
    if target.admits(to):
        return [to]  # written for a range that holds the target already: nothing to carry
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    pins = [s.version for s in SpecifierSet(target.version) if s.operator in ("==", "===")]
    if len(pins) == 1 and "*" not in pins[0]:
        return [pins[0]]
    local = sorted((v for v in local_versions(target.distribution, sources) if target.admits(v)), key=Version)
    found = list(dict.fromkeys(reversed(local)))
    if not found:
        raise PatchSetError(
            f"{ps.name} is for {target.distribution} {target.version}, and no wheel of such a release is "
            "at hand",
            path=ps.directory,
            hint="name the release it was written for with --from-version V",
        )
    return found


def _release(
    name: str,
    version: str,
    dist: InstalledDistribution | None,
    sources: Sources,
    accept: Callable[[ReleaseFiles], None] | None,
) -> ReleaseFiles:
    """The release ``name==version``: the installed one when it is that release and ``accept`` takes it,
    else a wheel's that ``accept`` does not reject (:class:`~patchguard.pristine.sources.Rejected`)."""
    if dist is not None and dist.version == version:
        release = installed_release(dist, sources)
        try:
            if accept is not None:
                accept(release)
        except Rejected:
            pass  # another build than the set was applied on: look for the right one's wheel
        else:
            return release
    tags = wheel_tags(dist) if dist is not None else frozenset()
    return wheel_release(ReleaseId(name, version), sources, tags=tags, accept=accept)


def _proof(ps: PatchSet, record: AppliedRecord | None, version: str) -> Callable[[ReleaseFiles], None]:
    """The base must be the build the set was applied on here (``state.json``'s pre-images), if it was:
    an ``accept`` that raises :class:`~patchguard.pristine.sources.Rejected` for another build."""
    recorded = record.distributions if record is not None else None
    dist = canonicalize(ps.distributions[0].distribution)
    same = recorded is not None and any(canonicalize(k) == dist and v == version for k, v in recorded.items())

    def accept(release: ReleaseFiles) -> None:
        if not same or record is None:
            return
        for path, images in record.files.items():
            pre = images.pre
            if path in release.entries and pre is not None and sha256_bytes(release.get(path)) != pre:
                raise Rejected(f"a different build: {path} is not the file {ps.name} was applied on")

    return accept


def _applied(ps: PatchSet, base: ReleaseFiles) -> dict[str, bytes | None]:
    """Each file of the set as the set makes it from the base; :class:`DoesNotApply` (or the
    :class:`~patchguard.errors.PatchguardError` reading the base raised) when the set does not apply there."""
    try:
        plans = plan_patches(ps.name, ps.patches, base.get)
    except PlanFailed as exc:
        raise DoesNotApply(
            f"the set does not apply to its pristine files ({len(exc.failures)} hunks fail)"
        ) from None
    return {p.path: p.after for p in plans}
