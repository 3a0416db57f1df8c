"""Rebase: carry a set written for one release of its distribution to another, with a three-way merge.

For every file of the set: base = the pristine file of the release the set was written for, theirs = base
with the set applied, ours = the pristine file of the target release (:mod:`patchguard.pristine.releases`
finds both, proven: the installed one against its RECORD, the other against its wheel's RECORD and — when
the set was applied here — the pre-image hashes ``state.json`` kept). :func:`.merge.merge` merges them.

* carried: merged cleanly (or upstream did not touch the file); the new set's diff is against the target;
* moved: the file is gone from the target release, and a file new in it (same extension) is at least
  :data:`MOVED_THRESHOLD` similar: the merge goes there (below the threshold the file is *lost*);
* upstream: the target release already has the set's change; nothing left to carry for that file;
* conflict: written with ``diff3`` markers into the review directory ``patches/NAME.rebase/``, never into
  site-packages or the set. Resolve the markers there (or delete a lost file's ``.lost.patch`` to drop its
  changes) and run the same ``rebase`` again: resolutions are taken up while the set and both releases are
  the ones the review directory was made from.

Only a fully carried set is rewritten: new diffs, ``version = "==<target>"``, and the old toml and diffs
kept in ``history/<old release>/`` under the set with a ``[[history]]`` entry in ``patchset.toml``.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import json
import os
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .._fs import put_file, read_regular, sha256_bytes, staged_dir
from .._version import __version__
from ..diffs import FileDiff, is_binary
from ..errors import PatchguardError, UsageError
from ..integrity.records import InstalledDistribution, canonicalize
from ..model import printable
from ..pristine.releases import ReleaseFiles, installed_release, wheel_release
from ..pristine.sources import ReleaseId, SourceOptions, Sources, local_versions, wheel_tags
from ..state import read_state
from ..txn import write_point
from .capture import DiffText, set_header, write_set
from .installed import SetEnvironment, owned_paths
from .merge import has_markers, line_counts, merge, similarity
from .model import MAX_PATCH_BYTES, FilePatch, PatchSet, PatchSetError, Target, find_set, patches_dir
from .planner import PlanFailed, plan_patches
from .setdir import discard, set_lock

__all__ = ["MOVED_THRESHOLD", "FileOutcome", "RebaseResult", "RebasedFile", "rebase_set"]

MOVED_THRESHOLD = 0.6
"""How alike (:func:`.merge.similarity`) a new file of the target release must be to a vanished one to be
taken as where it moved. Above git's 50 %: modules of one framework share much boilerplate (two vLLM model
files score 0.55), and a set merged into the wrong module is worse than a file reported lost. Each file of the
release takes at most one vanished file, the most similar pair first."""

REVIEW_SUFFIX = ".rebase"


class FileOutcome(str, enum.Enum):
    """What happened to one file of the set."""

    CARRIED = "carried"
    MOVED = "moved"
    UPSTREAM = "upstream"  # the target release already has the change
    RESOLVED = "resolved"  # a conflict resolved by hand in the review directory
    CONFLICT = "conflict"
    LOST = "lost"  # gone from the target release, no similar file found
    DROPPED = "dropped"  # lost, and its changes left behind on purpose (its .lost.patch deleted)

    @property
    def open(self) -> bool:
        """Still needs a person: the set cannot be rewritten while any file is here."""
        return self in (FileOutcome.CONFLICT, FileOutcome.LOST)


@dataclass(frozen=True, slots=True)
class RebasedFile:
    """One file of the set: where it went, and how many of its hunks could not be carried."""

    path: str  # in the set as written
    outcome: FileOutcome
    new_path: str | None  # in the target release (``None``: lost or dropped)
    hunks: int
    conflicting: int = 0  # hunks that conflict (all of them when lost)
    regions: int = 0  # conflict regions in the merged file
    similarity: float | None = None  # for a moved (or lost) file: the best match found
    review: str | None = None  # the file to resolve (conflict) or delete (lost)
    adjacent: int = 0  # regions where both sides' changes touch, merged line by line (see .merge)


@dataclass(frozen=True, slots=True)
class RebaseResult:
    """What ``rebase`` did (or would do: ``dry_run``)."""

    name: str
    distribution: str
    from_version: str
    to_version: str
    files: tuple[RebasedFile, ...]
    base_source: str = ""
    target_source: str = ""
    review_dir: str | None = None  # written when something is left to resolve
    written: bool = False  # the set was rewritten for the target release
    dry_run: bool = False
    history_dir: str | None = None
    notes: tuple[str, ...] = ()  # what the user should know (a previous review directory kept aside, ...)

    def _with(self, *outcomes: FileOutcome) -> tuple[RebasedFile, ...]:
        return tuple(f for f in self.files if f.outcome in outcomes)

    @property
    def carried(self) -> tuple[RebasedFile, ...]:
        return self._with(FileOutcome.CARRIED, FileOutcome.MOVED, FileOutcome.RESOLVED)

    @property
    def moved(self) -> tuple[RebasedFile, ...]:
        return tuple(f for f in self.files if f.new_path is not None and f.new_path != f.path)

    @property
    def conflicts(self) -> tuple[RebasedFile, ...]:
        return self._with(FileOutcome.CONFLICT)

    @property
    def lost(self) -> tuple[RebasedFile, ...]:
        return self._with(FileOutcome.LOST)

    @property
    def upstream(self) -> tuple[RebasedFile, ...]:
        return self._with(FileOutcome.UPSTREAM)

    @property
    def complete(self) -> bool:
        """Nothing is left to resolve: the set is (or would be) carried whole."""
        return not any(f.outcome.open for f in self.files)

    def to_json(self) -> dict[str, object]:
        """``patchguard.rebase/1``: what ``rebase --format json`` prints."""
        total, carried, _left = self.hunks
        lost = sum(f.conflicting for f in self.lost)
        return {
            "schema": "patchguard.rebase/1",
            "set": self.name,
            "distribution": self.distribution,
            "from_version": self.from_version,
            "to_version": self.to_version,
            "base_source": self.base_source,
            "target_source": self.target_source,
            "hunks": {
                "total": total,
                "carried": carried,
                "conflicting": sum(f.conflicting for f in self.conflicts),
                "lost": lost,
            },
            "files": [{**dataclasses.asdict(f), "outcome": f.outcome.value} for f in self.files],
            "carried": [f.path for f in self.carried],
            "moved": [{"from": f.path, "to": f.new_path, "similarity": f.similarity} for f in self.moved],
            "conflicts": [
                {"path": f.path, "regions": f.regions, "hunks": f.conflicting, "review": f.review}
                for f in self.conflicts
            ],
            "lost": [f.path for f in self.lost],
            "upstream": [f.path for f in self.upstream],
            "complete": self.complete,
            "review_dir": self.review_dir,
            "written": self.written,
            "history_dir": self.history_dir,
            "dry_run": self.dry_run,
            "notes": list(self.notes),
        }

    @property
    def hunks(self) -> tuple[int, int, int]:
        """(hunks in the set, hunks carried, hunks not carried: conflicting or lost)."""
        total = sum(f.hunks for f in self.files)
        left = sum(f.conflicting for f in self.files if f.outcome.open)
        return total, total - left, left


@dataclass
class _Inputs:
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


def rebase_set(
    name: str,
    *,
    to_version: str | None = None,
    from_version: str | None = None,
    patches: str | None = None,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    wheelhouse: Sequence[str] = (),
    offline: bool = False,
    dry_run: bool = False,
    fetch: SourceOptions | None = None,
    target: str | None = None,
) -> RebaseResult:
    """Carry set ``name`` to ``to_version`` (default: the installed version of its distribution).

    A set of several distributions is carried one target at a time (``target``; by default the one
    whose installed release its version no longer admits): that target's files are merged, its version
    pinned and a history entry written for it; the other targets' files and versions stay as they are.
    Files no distribution owns (the environment target) are never rebased.

    Never writes into the environment. Writes the set (when every file is carried) or the review directory
    ``patches/NAME.rebase/`` (when conflicts or lost files remain); nothing with ``dry_run``.

    >>> import patchguard
    >>> r = patchguard.rebase_set("sm120-support")  # doctest: +SKIP
    >>> r.complete, [f.path for f in r.conflicts]  # doctest: +SKIP
    (True, [])
    """
    fetch = SourceOptions.of(fetch, wheelhouse, offline)
    lock = contextlib.nullcontext() if dry_run else set_lock(patches_dir(patches), name)
    with lock:  # a second rebase (or capture) of the set waits, then reads what the first one wrote
        return _rebase(name, to_version, from_version, patches, site_packages, python, dry_run, target, fetch)


def _rebase(
    name: str,
    to_version: str | None,
    from_version: str | None,
    patches: str | None,
    site_packages: Sequence[str] | None,
    python: str | None,
    dry_run: bool,
    target: str | None,
    fetch: SourceOptions,
) -> RebaseResult:
    whole = find_set(name, patches)
    env = SetEnvironment.open(site_packages, python) if whole.distributions else None
    chosen = _chosen_target(whole, target, env, bool(to_version or from_version)) if env else None
    if env is None or chosen is None:
        return RebaseResult(whole.name, "", "", "", (), dry_run=dry_run, notes=(_nothing_to_carry(whole),))
    sources = fetch.open(env.target)
    return _carry(whole, chosen, env, sources, to_version, from_version, dry_run)


def _nothing_to_carry(ps: PatchSet) -> str:
    if not ps.distributions:  # files no distribution owns: no release replaces them
        return "it changes only files no distribution owns, which no release replaces"
    return f"every target admits its installed release ({', '.join(str(t) for t in ps.distributions)})"


def _carry(
    whole: PatchSet,
    chosen: Target,
    env: SetEnvironment,
    sources: Sources,
    to_version: str | None,
    from_version: str | None,
    dry_run: bool,
) -> RebaseResult:
    """Rebase the part of ``whole`` that belongs to ``chosen`` (all of it for a set of one distribution)."""
    dist_name = chosen.distribution
    dist = next((d for d in env.dists if d.canonical_name == canonicalize(dist_name)), None)
    ps = _part(whole, chosen, dist)
    to = _version(to_version or (dist.version if dist else None), dist_name, "--to-version")
    record = read_state(dist.site_dir)["applied"].get(ps.name) if dist else None
    if record is not None and record.get("digest") != ps.digest:
        record = None  # a record of another form of the set (before an earlier rebase, say): not this one
    inputs = _open_inputs(ps, dist, to, from_version, record, sources)
    review = os.path.join(os.path.dirname(ps.directory), ps.name + REVIEW_SUFFIX)
    if inputs is None:  # already written for that release: a review directory left behind is kept aside
        notes = () if dry_run else _done_with(review, whole)
        return RebaseResult(ps.name, dist_name, to, to, (), dry_run=dry_run, notes=notes)
    if ps is not whole:
        inputs.whole = whole
    inputs.moves = _find_moves(inputs)
    rebased = _take_resolutions(inputs, review, [_rebase_file(inputs, path) for path in ps.paths])
    result = RebaseResult(
        ps.name,
        dist_name,
        inputs.base.version,
        to,
        tuple(r.file if dry_run else _pointed(r.file, review) for r in rebased),
        inputs.base.description,
        inputs.target.description,
        dry_run=dry_run,
    )
    return result if dry_run else _finish(inputs, review, rebased, result)


def _chosen_target(
    ps: PatchSet, named: str | None, env: SetEnvironment, versions_named: bool
) -> Target | None:
    """The distribution target to carry: the one named, the only one, or the one whose installed release
    its version no longer admits (``None``: every target admits its own)."""
    targets = ps.distributions
    if named is not None:
        found = [t for t in targets if canonicalize(t.distribution) == canonicalize(named)]
        if not found:
            raise UsageError(
                f"{ps.name} has no target {printable(named)}",
                path=ps.directory,
                hint=f"its targets: {', '.join(t.distribution for t in targets)}",
            )
        return found[0]
    if len(targets) == 1:
        return targets[0]
    installed = {d.canonical_name: d.version for d in env.dists}
    behind = [
        t
        for t in targets
        if canonicalize(t.distribution) in installed and not t.admits(installed[canonicalize(t.distribution)])
    ]
    if len(behind) == 1 and not versions_named:
        return behind[0]
    if not behind and not versions_named:
        return None
    names = ", ".join(t.distribution for t in targets)
    raise UsageError(
        f"{ps.name} targets several distributions; rebase carries one at a time",
        path=ps.directory,
        hint=f"name it with --target DIST ({names})",
    )


def _part(ps: PatchSet, chosen: Target, dist: InstalledDistribution | None) -> PatchSet:
    """The part of ``ps`` that belongs to ``chosen``: all of it for a set of that one distribution, else the
    files the installed distribution owns or holds in its packages (same name and digest: what state.json
    and the review directory know the set by)."""
    if ps.targets == (chosen,):
        return ps
    if dist is None:
        raise UsageError(
            f"{chosen.distribution} is not installed here; a set of several targets is carried by what the "
            "installed distribution owns",
            path=ps.directory,
            hint="run rebase in the environment that has it (--python)",
        )
    owned = owned_paths([dist], dist.site_dir)
    tops = {p.split("/", 1)[0] for p in owned if "/" in p and not p.startswith("..")}
    mine = [fp for fp in ps.patches if fp.path in owned or fp.path.split("/", 1)[0] in tops]
    if not mine:
        raise UsageError(
            f"{ps.name} changes no file of {chosen.distribution}: nothing to carry for it",
            path=ps.directory,
        )
    return dataclasses.replace(ps, targets=(chosen,), patches=tuple(mine))


def _finish(inputs: _Inputs, review: str, rebased: Sequence[_Rebased], result: RebaseResult) -> RebaseResult:
    """Write the review directory (something is left to resolve) or the set (everything is carried)."""
    if os.path.lexists(review) and not _is_review(review):
        raise UsageError(
            "exists and is not a rebase review directory (no rebase.json, or a patch set)",
            path=review,
            hint="move it away: rebase writes what it cannot merge there",
        )
    if not result.complete:
        return dataclasses.replace(result, review_dir=review, notes=_write_review(inputs, review, rebased))
    written, history = _rewrite(inputs, rebased)
    write_point()
    notes: tuple[str, ...] = ()
    if _key_of(review) == _review_key(inputs):
        discard(review)  # its resolutions are in the set now
    else:
        notes = _set_aside(review)
    return dataclasses.replace(result, written=written, history_dir=history, notes=notes)


def _done_with(review: str, ps: PatchSet) -> tuple[str, ...]:
    """A review directory left beside a set already written for the release: removed when the set's history
    says it was rewritten from exactly that review's inputs (a rebase killed after rewriting the set, before
    removing it: its resolutions are in the set), else kept aside."""
    key = _key_of(review) if _is_review(review) else None
    made_from = {(h.get("digest"), h.get("release"), h.get("to")) for h in ps.history}
    if key is not None and (key.get("digest"), key.get("from"), key.get("to")) in made_from:
        discard(review)
        return ()
    return _set_aside(review)


def _set_aside(review: str) -> tuple[str, ...]:
    """Keep a review directory made for other inputs as ``NAME.rebase.previous`` (one is kept): the
    resolutions in it are never deleted unseen."""
    if not _is_review(review):
        return ()
    previous = review + ".previous"
    if os.path.lexists(previous) and not _is_review(previous):
        raise UsageError(
            "exists and is not a rebase review directory",
            path=previous,
            hint=f"move it away: rebase keeps {os.path.basename(review)} there",
        )
    discard(previous)
    os.rename(review, previous)
    return (f"the review directory made for other inputs (resolutions included) is now {previous}",)


def _is_review(path: str) -> bool:
    """A review directory rebase wrote (not a set, not a symlink, not something else of that name)."""
    return (
        os.path.isdir(path)
        and not os.path.islink(path)
        and os.path.isfile(os.path.join(path, "rebase.json"))
        and not os.path.lexists(os.path.join(path, "patchset.toml"))
    )


def _version(raw: str | None, dist_name: str, what: str) -> str:
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


# -- the two releases -------------------------------------------------------------------------------------


def _open_inputs(
    ps: PatchSet,
    dist: InstalledDistribution | None,
    to: str,
    from_version: str | None,
    record: dict[str, object] | None,
    sources: Sources,
) -> _Inputs | None:
    """Both releases, proven, and the set applied to the base; ``None`` when the set already is for ``to``."""
    target = ps.distributions[0]
    choices = _base_versions(ps, dist, from_version, record, sources, to)
    if to in choices[:1]:
        return None
    failures: list[str] = []
    for version in choices:
        try:
            base = _release(target.distribution, version, dist, sources, _proof(ps, record, version))
        except PatchguardError as exc:
            failures.append(f"{version}: {exc.message}")
            continue
        theirs = _applied(ps, base)
        if isinstance(theirs, str):
            failures.append(f"{version}: {theirs}")
            continue
        return _Inputs(ps, base, _release(target.distribution, to, dist, sources, None), theirs)
    raise PatchSetError(
        f"cannot tell the release {ps.name} was written for: " + "; ".join(failures),
        path=ps.directory,
        hint="name it with --from-version V (and point --wheelhouse at its wheel)",
    )


def _base_versions(
    ps: PatchSet,
    dist: InstalledDistribution | None,
    from_version: str | None,
    record: dict[str, object] | None,
    sources: Sources,
    to: str,
) -> list[str]:
    """The releases the set may have been written for, most likely first."""
    target = ps.distributions[0]
    if from_version:
        return [_version(from_version, target.distribution, "--from-version")]
    recorded = record.get("distributions") if record else None
    if isinstance(recorded, dict) and dist is not None and isinstance(recorded.get(dist.name), str):
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
    accept: Callable[[ReleaseFiles], str | None] | None,
) -> ReleaseFiles:
    if dist is not None and dist.version == version:
        release = installed_release(dist, sources)
        why = accept(release) if accept else None
        if why is None:
            return release
    tags = wheel_tags(dist) if dist is not None else frozenset()
    return wheel_release(ReleaseId(name, version), sources, tags=tags, accept=accept)


def _proof(
    ps: PatchSet, record: dict[str, object] | None, version: str
) -> Callable[[ReleaseFiles], str | None]:
    """The base must be the build the set was applied on here (``state.json``'s pre-images), if it was."""
    files = record.get("files") if record else None
    recorded = record.get("distributions") if record else None
    dist = canonicalize(ps.distributions[0].distribution)
    same = isinstance(recorded, dict) and any(
        canonicalize(str(k)) == dist and v == version for k, v in recorded.items()
    )

    def accept(release: ReleaseFiles) -> str | None:
        if not same or not isinstance(files, dict):
            return None
        for path, hashes in files.items():
            pre = hashes.get("pre") if isinstance(hashes, dict) else None
            if path in release.entries and pre is not None and sha256_bytes(release.get(path)) != pre:
                return f"a different build: {path} is not the file {ps.name} was applied on"
        return None

    return accept


def _applied(ps: PatchSet, base: ReleaseFiles) -> dict[str, bytes | None] | str:
    """Each file of the set as the set makes it from the base, or why the set does not apply there."""
    try:
        plans = plan_patches(ps.name, ps.patches, base.get)
    except PlanFailed as exc:
        return f"the set does not apply to its pristine files ({len(exc.failures)} hunks fail)"
    except PatchguardError as exc:
        return exc.message
    return {p.path: p.after for p in plans}


# -- one file ---------------------------------------------------------------------------------------------


@dataclass
class _Rebased:
    """One file's outcome, the bytes the new set makes of it, and the target release's bytes."""

    file: RebasedFile
    result: bytes | None  # what the file becomes (``None``: absent)
    ours: bytes | None  # the target release's file (at ``file.new_path``)
    mode: int | None = None


def _rebase_file(inputs: _Inputs, path: str) -> _Rebased:
    mine = [fp for fp in inputs.ps.patches if fp.path == path]
    hunks = sum(max(len(fp.patched), 1) for fp in mine)
    mode = next((fp.mode for fp in mine if fp.creates or fp.deletes), None)
    base, theirs = inputs.base.get(path), inputs.theirs[path]
    found = _locate(inputs, path, base, theirs, hunks)
    if isinstance(found, _Rebased):
        return found
    new_path, ours, score = found
    _text_only(inputs, path, new_path, base, ours)
    kind = FileOutcome.MOVED if new_path != path else FileOutcome.CARRIED
    upstream = RebasedFile(path, FileOutcome.UPSTREAM, new_path, hunks, similarity=score)
    if ours == theirs:
        return _Rebased(upstream, ours, ours)
    if ours == base:
        return _Rebased(RebasedFile(path, kind, new_path, hunks, similarity=score), theirs, ours, mode)
    if theirs is None or ours is None:  # deleting a file upstream changed; creating one upstream created
        got = merge(ours or b"", base or b"", theirs or b"", inputs.labels)
        regions = max(got.conflicts, 1)
        conflict = RebasedFile(path, FileOutcome.CONFLICT, new_path, hunks, hunks, regions, score)
        return _Rebased(conflict, got.data, ours, mode)
    got = merge(ours, base or b"", theirs, inputs.labels)
    if got.conflicts == 0:
        if got.data == ours:  # the release has the set's change, among others
            return _Rebased(upstream, ours, ours)
        carried = RebasedFile(path, kind, new_path, hunks, similarity=score, adjacent=got.adjacent)
        return _Rebased(carried, got.data, ours, mode)
    bad = _conflicting_hunks(inputs, mine, base or b"", ours)
    conflict = RebasedFile(
        path, FileOutcome.CONFLICT, new_path, hunks, bad, got.conflicts, score, adjacent=got.adjacent
    )
    return _Rebased(conflict, got.data, ours, mode)


def _text_only(inputs: _Inputs, path: str, new_path: str, base: bytes | None, ours: bytes | None) -> None:
    """A set carries text diffs: refuse, before anything is written, a file either release has as bytes
    that are not UTF-8 text."""
    for release, data in ((inputs.base, base), (inputs.target, ours)):
        if data is not None and is_binary(data):
            raise PatchSetError(
                f"{new_path if release is inputs.target else path} is not UTF-8 text in "
                f"{release.name} {release.version}: a patch set carries text diffs only",
                path=inputs.ps.directory,
                hint="carry this file's change by hand, or leave it out of the set",
            )


def _locate(
    inputs: _Inputs, path: str, base: bytes | None, theirs: bytes | None, hunks: int
) -> tuple[str, bytes | None, float | None] | _Rebased:
    """(where the file is in the target release, its bytes there, the similarity when it moved), or the
    outcome already known: gone upstream along with what the set deletes, or lost."""
    if path in inputs.target.entries or base is None:
        return path, inputs.target.get(path), None
    new_path, score = inputs.moves.get(path, (None, None))
    if new_path is None and theirs is None:  # the set deletes a file upstream took away too
        return _Rebased(RebasedFile(path, FileOutcome.UPSTREAM, None, hunks), None, None)
    if new_path is None:
        return _Rebased(RebasedFile(path, FileOutcome.LOST, None, hunks, hunks, similarity=score), None, None)
    return new_path, inputs.target.get(new_path), score


def _find_moves(inputs: _Inputs) -> dict[str, tuple[str | None, float | None]]:
    """For each file of the set gone from the target release: where it went — the most similar file new
    in the release (with the same extension), one vanished file per new file, best pairs first — or
    ``(None, the best score seen)``."""
    gone = [p for p in inputs.ps.paths if p not in inputs.target.entries and p in inputs.base.entries]
    new = sorted(p for p in inputs.target.entries if p not in inputs.base.entries)
    scores: list[tuple[float, str, str]] = []
    best: dict[str, float] = {}
    counts: dict[str, collections.Counter[bytes]] = {}  # each candidate read and counted once
    for path in gone:
        old = line_counts(inputs.base.get(path) or b"")
        ext = os.path.splitext(path)[1]
        for p in new:
            if os.path.splitext(p)[1] != ext:
                continue
            if p not in counts:
                counts[p] = line_counts(inputs.target.get(p) or b"")
            n, m = old.total(), counts[p].total()
            if not n + m or 2 * min(n, m) / (n + m) < MOVED_THRESHOLD:
                continue  # the sizes alone say it cannot be similar enough
            score = round(similarity(old, counts[p]), 3)
            best[path] = max(best.get(path, 0.0), score)
            scores.append((score, path, p))
    moves: dict[str, tuple[str | None, float | None]] = {p: (None, best.get(p)) for p in gone}
    taken: set[str] = set()
    for score, path, p in sorted(scores, reverse=True):
        if score >= MOVED_THRESHOLD and moves[path][0] is None and p not in taken:
            moves[path] = (p, score)
            taken.add(p)
    return moves


def _conflicting_hunks(inputs: _Inputs, mine: Sequence[FilePatch], base: bytes, ours: bytes) -> int:
    """How many of a conflicting file's hunks conflict on their own (each merged alone)."""
    from unidiff.patch import PatchedFile

    bad = 0
    for fp in mine:
        for hunk in fp.patched:
            pf = PatchedFile(fp.patched.patch_info, fp.patched.source_file, fp.patched.target_file)
            pf.append(hunk)
            try:
                alone = plan_patches(inputs.ps.name, [dataclasses.replace(fp, patched=pf)], lambda _p: base)
            except PlanFailed:
                bad += 1
                continue
            if merge(ours, base, alone[0].after or b"", inputs.labels).conflicts:
                bad += 1
    return max(bad, 1)


# -- the review directory ---------------------------------------------------------------------------------


def _review_key(inputs: _Inputs) -> dict[str, str]:
    key = {
        "set": inputs.ps.name,
        "digest": inputs.ps.digest,
        "from": inputs.base.version,
        "to": inputs.target.version,
    }
    if inputs.whole is not None:  # one target of several: which one
        key["distribution"] = inputs.ps.distributions[0].distribution
    return key


def _take_resolutions(inputs: _Inputs, review: str, rebased: list[_Rebased]) -> list[_Rebased]:
    """Conflicts resolved in the review directory (no markers left) and lost files whose ``.lost.patch``
    was deleted — while it was made from this same set and these releases."""
    if _key_of(review) != _review_key(inputs):
        review += ".previous"  # back to the inputs of the review directory set aside before
        if _key_of(review) != _review_key(inputs):
            return rebased
    out: list[_Rebased] = []
    for r in rebased:
        f = r.file
        if f.outcome is FileOutcome.CONFLICT and f.new_path is not None:
            mine = _resolution(review, f.new_path)
            deletes = inputs.theirs.get(f.path) is None  # the set deletes it: no file is the resolution
            if (mine is not None and not has_markers(mine, inputs.labels)) or (mine is None and deletes):
                r = _Rebased(
                    dataclasses.replace(f, outcome=FileOutcome.RESOLVED, conflicting=0), mine, r.ours, r.mode
                )
            elif mine is not None:  # resolving under way: the next review directory keeps the edits
                r = _Rebased(f, mine, r.ours, r.mode)
        elif f.outcome is FileOutcome.LOST and not os.path.lexists(_lost_file(review, f.path)):
            r = _Rebased(dataclasses.replace(f, outcome=FileOutcome.DROPPED), None, None)
        out.append(r)
    return out


def _resolution(review: str, path: str) -> bytes | None:
    """The review directory's file for ``path``: a regular file really inside it (empty is a resolution
    too), else ``None`` (absent; a symlink out of it, a FIFO, a directory are not resolutions)."""
    full = os.path.join(review, "files", *path.split("/"))
    if not os.path.realpath(full).startswith(os.path.join(os.path.realpath(review), "")):
        return None
    try:
        return read_regular(full, 256 << 20)
    except OSError:
        return None


def _pointed(f: RebasedFile, review: str) -> RebasedFile:
    """``f`` with the review file to edit (a conflict) or delete (a lost file)."""
    if f.outcome in (FileOutcome.CONFLICT, FileOutcome.RESOLVED) and f.new_path is not None:
        return dataclasses.replace(f, review=os.path.join(review, "files", *f.new_path.split("/")))
    if f.outcome is FileOutcome.LOST:
        return dataclasses.replace(f, review=_lost_file(review, f.path))
    return f


def _lost_file(review: str, path: str) -> str:
    return os.path.join(review, "lost", *path.split("/")) + ".lost.patch"


def _write_review(inputs: _Inputs, review: str, rebased: Sequence[_Rebased]) -> tuple[str, ...]:
    """``patches/NAME.rebase/``: conflicted (and resolved) files, lost files' diffs, a summary, the key.
    A review directory made from other inputs (another target, an edited set) is kept aside, not lost:
    the notes say where."""
    notes: tuple[str, ...] = ()
    hint = "make the patches directory writable, or see what would happen with --dry-run"
    with staged_dir(review, "the review directory", hint) as staging:
        for r in rebased:
            f = r.file
            if f.outcome in (FileOutcome.CONFLICT, FileOutcome.RESOLVED) and f.new_path is not None:
                if r.result is not None or f.outcome is FileOutcome.CONFLICT:
                    put_file(os.path.join(staging, "files", *f.new_path.split("/")), r.result or b"")
            elif f.outcome is FileOutcome.LOST:
                text = "".join(str(fp.patched) for fp in inputs.ps.patches if fp.path == f.path)
                put_file(_lost_file(staging, f.path), text.encode("utf-8", "surrogateescape"))
        doc = {**_review_key(inputs), "files": {r.file.path: r.file.outcome.value for r in rebased}}
        put_file(os.path.join(staging, "rebase.json"), json.dumps(doc, indent=1).encode())
        put_file(os.path.join(staging, "SUMMARY.txt"), _summary(inputs, review, rebased).encode())
        write_point()
        if _key_of(review) != _review_key(inputs):
            notes = _set_aside(review)
    return notes


def _key_of(review: str) -> dict[str, object] | None:
    try:
        doc = json.loads(read_regular(os.path.join(review, "rebase.json"), 1 << 20))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    return {k: doc[k] for k in ("set", "digest", "from", "to", "distribution") if k in doc}


def _summary(inputs: _Inputs, review: str, rebased: Sequence[_Rebased]) -> str:
    ps, base, target = inputs.ps, inputs.base, inputs.target
    lines = [
        f"rebase of patch set {ps.name}: {base.name} {base.version} -> {target.version}",
        f"base: {base.description}",
        f"target: {target.description}",
        "",
    ]
    for r in rebased:
        f = _pointed(r.file, review)
        where = f" -> {f.new_path}" if f.new_path and f.new_path != f.path else ""
        todo = f"  [{os.path.relpath(f.review, review)}]" if f.review else ""
        lines.append(f"{f.outcome.value:<9} {f.path}{where}{todo}")
    outcomes = {r.file.outcome for r in rebased}
    lines += ["", "What to do:"]
    if FileOutcome.CONFLICT in outcomes:
        lines += [
            "  conflicts: edit files/<path> here and resolve every <<<<<<< ... >>>>>>> region (the upper",
            f"    side is {target.version}, the lower the set's change); a file without markers is resolved",
            "    (an empty file too). For a file the set deletes, deleting files/<path> keeps the deletion.",
        ]
    if FileOutcome.LOST in outcomes:
        lines += [
            "  lost: lost/<path>.lost.patch is a change with no file to go to in the new release; delete it",
            "    to leave that change behind.",
        ]
    lines += [
        f"  then run again: patchguard rebase --set {ps.name} (the same releases); the set is rewritten",
        "  once nothing is left, and this directory removed.",
    ]
    return "\n".join(lines) + "\n"


# -- rewriting the set ------------------------------------------------------------------------------------


def _rewrite(inputs: _Inputs, rebased: Sequence[_Rebased]) -> tuple[bool, str | None]:
    """Write the set for the target release, the old one kept in its history; ``(False, None)`` when
    nothing is left to carry (the release has every change: the set is left as it is)."""
    diffs: list[DiffText] = []
    for r in rebased:
        path = r.file.new_path
        if path is None or r.result == r.ours:
            continue
        mode = "100755" if r.mode is not None and r.mode & 0o111 else "100644"
        diffs.append(FileDiff(path, r.ours, r.result, mode))
    if not diffs:
        return False, None
    part, base, target = inputs.ps, inputs.base, inputs.target
    ps = inputs.whole or part
    diffs += _other_targets_diffs(ps, part)
    kept = f"history/{base.version}"
    for n in range(2, 1000):  # a release the set was already carried from once (there and back again)
        if not os.path.lexists(os.path.join(ps.directory, *kept.split("/"))):
            break
        kept = f"history/{base.version}-{n}"
    entry = {
        "distribution": part.distributions[0].distribution,
        "version": part.distributions[0].version,
        "release": base.version,
        "to": target.version,
        "rebased": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "digest": ps.digest,
        "tool": f"patchguard {__version__}",
        "kept": kept,
    }
    carried = part.distributions[0]
    targets = [
        None
        if t.is_environment
        else (t.distribution, "==" + target.version if t == carried else t.version)
        for t in ps.targets
    ]
    header = set_header(ps.name, ps.description, targets)
    tables = "".join(
        "\n[[history]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in h.items())
        for h in (*ps.history, entry)
    )
    write_set(
        os.path.dirname(ps.directory), ps.name, header, diffs, footer=tables, keep=_kept_files(ps, kept)
    )
    return True, os.path.join(ps.directory, kept)


@dataclass(frozen=True, slots=True)
class _KeptDiff:
    """A file's diff carried over as written (another target's, or the environment's)."""

    path: str
    body: str

    def text(self) -> str:
        return self.body


def _other_targets_diffs(ps: PatchSet, part: PatchSet) -> list[_KeptDiff]:
    """The diffs of the files of ``ps`` outside ``part``: a diff file of the set that holds none of
    ``part``'s files byte for byte, the others' file diffs as unidiff writes them."""
    if part is ps:
        return []
    mine = set(part.paths)
    out: list[_KeptDiff] = []
    for origin in dict.fromkeys(fp.origin for fp in ps.patches):
        fps = [fp for fp in ps.patches if fp.origin == origin]
        others = [fp for fp in fps if fp.path not in mine]
        if not others:
            continue
        if len(others) == len(fps):
            text = read_regular(origin, MAX_PATCH_BYTES + 1).decode("utf-8", "surrogateescape")
        else:
            text = "".join(str(fp.patched) for fp in others)
        out.append(_KeptDiff(others[0].path, text))
    return out


KEPT_LIMIT = 64 << 20


def _kept_files(ps: PatchSet, kept: str) -> dict[str, tuple[bytes, int]]:
    """What the rewritten set directory keeps, with each file's mode: the old set's toml and diffs under
    ``kept``, and every other file of the directory as it is (its history, a README, notes). What cannot be
    carried faithfully — a symlink, a FIFO, a file over 64 MiB, a directory that cannot be read — is refused
    before anything is written."""
    out: dict[str, tuple[bytes, int]] = {}
    for fname in ("patchset.toml", *ps.files):
        out[f"{kept}/{fname}"] = _kept(os.path.join(ps.directory, fname))
    replaced = {"patchset.toml", *ps.files}
    problems: list[str] = []
    history = os.path.join(ps.directory, "history")
    if os.path.lexists(history) and (os.path.islink(history) or not os.path.isdir(history)):
        problems.append("history: not a directory (rebase keeps earlier forms of the set there)")

    def unreadable(exc: OSError) -> None:
        problems.append(f"{exc.filename}: cannot be read ({exc.strerror})")

    for dirpath, dirs, names in os.walk(ps.directory, onerror=unreadable):
        for n in [*dirs, *names]:
            full = os.path.join(dirpath, n)
            rel = os.path.relpath(full, ps.directory).replace(os.sep, "/")
            st = os.lstat(full)
            if stat.S_ISDIR(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                problems.append(f"{rel}: not a regular file")
            elif st.st_size > KEPT_LIMIT:
                problems.append(f"{rel}: larger than {KEPT_LIMIT >> 20} MiB")
            elif rel not in replaced and rel not in out:
                out[rel] = _kept(full)
    if problems:
        raise PatchSetError(
            "cannot rewrite the set: its directory holds what rebase cannot carry over\n  "
            + "\n  ".join(problems),
            path=ps.directory,
            hint="move those out of the set directory, then run rebase again (nothing was written)",
        )
    return out


def _kept(path: str) -> tuple[bytes, int]:
    data = read_regular(path, KEPT_LIMIT + 1)
    if len(data) > KEPT_LIMIT:
        raise PatchSetError(f"larger than {KEPT_LIMIT >> 20} MiB", path=path)
    return data, stat.S_IMODE(os.stat(path).st_mode)
