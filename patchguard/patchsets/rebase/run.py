"""Rebase: carry a set written for one release of its distribution to another, with a three-way merge.

For every file of the set: base = the pristine file of the release the set was written for, theirs = base
with the set applied, ours = the pristine file of the target release (:mod:`.inputs` finds both, proven:
the installed one against its RECORD, the other against its wheel's RECORD and — when the set was applied
here — the pre-image hashes ``state.json`` kept). :func:`.merge.merge` merges them.

* carried: merged cleanly (or upstream did not touch the file); the new set's diff is against the target;
* moved: the file is gone from the target release, and a file new in it (same extension) is at least
  :data:`~.moves.MOVED_THRESHOLD` similar: the merge goes there (below the threshold the file is *lost*);
* upstream: the target release already has the set's change; nothing left to carry for that file;
* conflict: written with ``diff3`` markers into the review directory ``patches/NAME.rebase/``, never into
  site-packages or the set. Resolve the markers there (or delete a lost file's ``.lost.patch`` to drop its
  changes) and run the same ``rebase`` again: resolutions are taken up while the set and both releases are
  the ones the review directory was made from.

Only a fully carried set is rewritten: new diffs, ``version = "==<target>"``, and the old toml and diffs
kept in ``history/<old release>/`` under the set with a ``[[history]]`` entry in ``patchset.toml``.

This module drives one rebase and merges each file; the stages it drives are modules of their own, each
importing only what lies below it: :mod:`.inputs` (the set and both releases), :mod:`.moves` (where
vanished files went), :mod:`.review` (the review directory) and :mod:`.rewrite` (the set rewritten with
its history), with the values they hand on in :mod:`.outcome`. What it makes, a
:class:`~patchguard.results.rebase.RebaseResult`, is defined in :mod:`patchguard.results.rebase`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence

from ...diffs import is_binary
from ...env import Target
from ...errors import UsageError
from ...integrity.records import InstalledDistribution, canonicalize
from ...model import printable
from ...pristine.sources import SourceOptions, Sources
from ...results.rebase import FileOutcome, RebasedFile, RebaseResult
from ...state import AppliedRecord, read_state
from ...txn import write_point
from ..installed import SetEnvironment, owned_paths
from ..model import PatchSet, PatchSetError, SetTarget, find_set, load_sets, patches_dir
from ..planner import PlanFailed, plan_patches
from ..setdir import set_lock
from .inputs import RebaseInputs, checked_version, open_inputs
from .merge import Merged, MergeJob, merge, merge_all, merge_file
from .moves import MOVED_THRESHOLD, find_moves
from .outcome import Rebased
from .review import done_with, must_be_review, pointed, retire, review_dir, take_resolutions, write_review
from .rewrite import rewrite

__all__ = [
    "MOVED_THRESHOLD",
    "FileOutcome",
    "RebaseResult",
    "RebasedFile",
    "part_of",
    "rebase_all",
    "rebase_set",
    "sets_to_carry",
    "touched_by_upgrade",
]


def rebase_set(
    name: str,
    *,
    environment: Target,
    to_version: str | None = None,
    from_version: str | None = None,
    patches: str | None = None,
    dry_run: bool = False,
    fetch: SourceOptions | None = None,
    target: str | None = None,
) -> RebaseResult:
    """Carry set ``name`` to ``to_version`` (default: the installed version of its distribution in
    ``environment``); ``target``: the set's part to carry. :func:`patchguard.rebase_set` is its public face,
    which says what happens."""
    lock = contextlib.nullcontext() if dry_run else set_lock(patches_dir(patches), name)
    with lock:  # a second rebase (or capture) of the set waits, then reads what the first one wrote
        return _rebase(
            name, to_version, from_version, patches, environment, dry_run, target, fetch or SourceOptions()
        )


def touched_by_upgrade(
    t: SetTarget, version: str, record: AppliedRecord | None, dist: InstalledDistribution
) -> bool:
    """Whether a set's target ``t`` must be carried when its distribution is (or will be) at ``version``: its
    version does not admit that release, or the set was applied on another one (the record of it in
    state.json: an upgrade replaces the files it patched)."""
    recorded = record.distributions if record is not None else None
    applied_on = recorded.get(dist.name) if recorded is not None else None
    return not t.admits(version) or (applied_on is not None and applied_on != version)


def sets_to_carry(
    patches: str | None, installed: Sequence[InstalledDistribution], versions: Mapping[str, str] | None = None
) -> Iterator[tuple[PatchSet, SetTarget, str]]:
    """(set, target, release) for each target of each set that must be carried when the distributions are
    at ``versions`` (canonical name → release; by default the installed ones), by :func:`touched_by_upgrade`;
    ``plan`` asks before the upgrade what ``rebase --all`` then does."""
    by_name = {d.canonical_name: d for d in installed}
    for ps in load_sets(patches):
        for t in ps.distributions:
            key = canonicalize(t.distribution)
            dist = by_name.get(key)
            release = None if dist is None else dist.version if versions is None else versions.get(key)
            if dist is None or release is None:
                continue
            record = read_state(dist.site_dir).get(ps.name)
            if touched_by_upgrade(t, release, record, dist):
                yield ps, t, release


def part_of(ps: PatchSet, t: SetTarget) -> str | None:
    """The ``target`` to give :func:`rebase_set` for one target of a set: its distribution when the set
    spans several, else ``None`` (the set's one distribution)."""
    return t.distribution if len(ps.distributions) > 1 else None


def rebase_all(
    *,
    environment: Target,
    patches: str | None = None,
    dry_run: bool = False,
    fetch: SourceOptions | None = None,
) -> tuple[RebaseResult, ...]:
    """Carry every set to the releases installed in ``environment`` now: each target of each set whose
    version does not admit its installed release, or that was applied on another release
    (:func:`touched_by_upgrade`), by :func:`rebase_set`. :func:`patchguard.rebase_all` is its public face."""
    env = SetEnvironment.open(environment)
    return tuple(
        rebase_set(
            ps.name,
            environment=env.target,
            patches=patches,
            fetch=fetch,
            dry_run=dry_run,
            target=part_of(ps, t),
        )
        for ps, t, _release in sets_to_carry(patches, env.dists)
    )


def _rebase(
    name: str,
    to_version: str | None,
    from_version: str | None,
    patches: str | None,
    environment: Target,
    dry_run: bool,
    target: str | None,
    fetch: SourceOptions,
) -> RebaseResult:
    whole = find_set(name, patches)
    env = SetEnvironment.open(environment) if whole.distributions else None
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
    chosen: SetTarget,
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
    to = checked_version(to_version or (dist.version if dist else None), dist_name, "--to-version")
    record = read_state(dist.site_dir).get(ps.name) if dist else None
    if record is not None and record.digest != ps.digest:
        record = None  # a record of another form of the set (before an earlier rebase, say): not this one
    inputs = open_inputs(ps, dist, to, from_version, record, sources)
    review = review_dir(ps)
    if inputs is None:  # already written for that release: a review directory left behind is kept aside
        notes = () if dry_run else done_with(review, whole)
        return RebaseResult(ps.name, dist_name, to, to, (), dry_run=dry_run, notes=notes)
    if ps is not whole:
        inputs.whole = whole
    inputs.moves = find_moves(ps.paths, inputs.base, inputs.target)
    merged = _merged_ahead(inputs, ps.paths)
    files = _with_conflicting_hunks(inputs, [_rebase_file(inputs, path, merged) for path in ps.paths])
    rebased = take_resolutions(inputs, review, files)
    result = RebaseResult(
        ps.name,
        dist_name,
        inputs.base.version,
        to,
        tuple(r.file if dry_run else pointed(r.file, review) for r in rebased),
        inputs.base.description,
        inputs.target.description,
        dry_run=dry_run,
    )
    return result if dry_run else _finish(inputs, review, rebased, result)


def _named_target(ps: PatchSet, named: str) -> SetTarget:
    """The set's target for the distribution ``named`` (``--target``), or a :class:`UsageError` naming
    its targets."""
    found = [t for t in ps.distributions if canonicalize(t.distribution) == canonicalize(named)]
    if not found:
        raise UsageError(
            f"{ps.name} has no target {printable(named)}",
            path=ps.directory,
            hint=f"its targets: {', '.join(t.distribution for t in ps.distributions)}",
        )
    return found[0]


def _chosen_target(
    ps: PatchSet, named: str | None, env: SetEnvironment, versions_named: bool
) -> SetTarget | None:
    """The distribution target to carry: the one named, the only one, or the one whose installed release
    its version no longer admits (``None``: every target admits its own)."""
    targets = ps.distributions
    if named is not None:
        return _named_target(ps, named)
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


def _part(ps: PatchSet, chosen: SetTarget, dist: InstalledDistribution | None) -> PatchSet:
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


def _finish(
    inputs: RebaseInputs, review: str, rebased: Sequence[Rebased], result: RebaseResult
) -> RebaseResult:
    """Write the review directory (something is left to resolve) or the set (everything is carried)."""
    must_be_review(review)
    if not result.complete:
        return dataclasses.replace(result, review_dir=review, notes=write_review(inputs, review, rebased))
    written, history = rewrite(inputs, rebased)
    write_point()
    notes = retire(inputs, review)
    return dataclasses.replace(result, written=written, history_dir=history, notes=notes)


# -- one file ---------------------------------------------------------------------------------------------


def _merged_ahead(inputs: RebaseInputs, paths: Sequence[str]) -> dict[str, Merged]:
    """The three-way merge of every file that needs one, made up front (in parallel: :func:`merge_all`)."""
    jobs: list[tuple[str, MergeJob]] = []
    for path in paths:
        base, theirs = inputs.base.get(path), inputs.theirs[path]
        found = _locate(inputs, path, base, theirs, 0)
        if isinstance(found, Rebased):
            continue
        new_path, ours, _score = found
        job = _merge_job(inputs, new_path, ours, base, theirs)
        if job is not None and not is_binary(job[1]) and not is_binary(job[3]):  # text only: _text_only says
            jobs.append((path, job))
    return dict(zip((p for p, _ in jobs), merge_all([j for _, j in jobs]), strict=True))


def _merge_job(
    inputs: RebaseInputs, new_path: str, ours: bytes | None, base: bytes | None, theirs: bytes | None
) -> MergeJob | None:
    """The three-way merge a file of the set needs; ``None`` when it needs none: the release already has
    the set's change or none of upstream's, or one side is absent (a file created or deleted)."""
    if ours is None or theirs is None or ours in (theirs, base):
        return None
    return new_path, ours, base or b"", theirs, inputs.labels


def _hunks_and_mode(inputs: RebaseInputs, path: str) -> tuple[int, int | None]:
    """How many hunks the set has for ``path``, and the mode it gives a file it creates or deletes."""
    mine = [fp for fp in inputs.ps.patches if fp.path == path]
    hunks = sum(max(len(fp.patched), 1) for fp in mine)
    return hunks, next((fp.mode for fp in mine if fp.creates or fp.deletes), None)


def _rebase_file(inputs: RebaseInputs, path: str, ahead: Mapping[str, Merged]) -> Rebased:
    hunks, mode = _hunks_and_mode(inputs, path)
    base, theirs = inputs.base.get(path), inputs.theirs[path]
    found = _locate(inputs, path, base, theirs, hunks)
    if isinstance(found, Rebased):
        return found
    new_path, ours, score = found
    _text_only(inputs, path, new_path, base, ours)
    kind = FileOutcome.MOVED if new_path != path else FileOutcome.CARRIED
    upstream = RebasedFile(path, FileOutcome.UPSTREAM, new_path, hunks, similarity=score)
    if ours == theirs:
        return Rebased(upstream, ours, ours)
    if ours == base:
        return Rebased(RebasedFile(path, kind, new_path, hunks, similarity=score), theirs, ours, mode)
    if theirs is None or ours is None:  # deleting a file upstream changed; creating one upstream created
        got = merge(ours or b"", base or b"", theirs or b"", inputs.labels)
        regions = max(got.conflicts, 1)
        conflict = RebasedFile(path, FileOutcome.CONFLICT, new_path, hunks, hunks, regions, score)
        return Rebased(conflict, got.data, ours, mode)
    job = _merge_job(inputs, new_path, ours, base, theirs)
    assert job is not None  # the cases it has none for are above
    got = ahead.get(path) or merge_file(*job)
    if got.conflicts == 0 and got.data == ours:  # the release has the set's change, among others
        return Rebased(upstream, ours, ours)
    return Rebased(_merged(path, kind, new_path, hunks, score, got), got.data, ours, mode)


def _merged(
    path: str, kind: FileOutcome, new_path: str, hunks: int, score: float | None, got: Merged
) -> RebasedFile:
    """A file the three-way merge carried, or left in conflict (its conflicting hunks counted later, for
    every conflicting file at once: :func:`_with_conflicting_hunks`)."""
    by = got.by if got.by != "lines" else ""
    if got.conflicts == 0:
        return RebasedFile(path, kind, new_path, hunks, similarity=score, adjacent=got.adjacent, merged_by=by)
    return RebasedFile(
        path,
        FileOutcome.CONFLICT,
        new_path,
        hunks,
        0,
        got.conflicts,
        score,
        adjacent=got.adjacent,
        doubt=got.doubt,
    )


def _text_only(
    inputs: RebaseInputs, path: str, new_path: str, base: bytes | None, ours: bytes | None
) -> None:
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
    inputs: RebaseInputs, path: str, base: bytes | None, theirs: bytes | None, hunks: int
) -> tuple[str, bytes | None, float | None] | Rebased:
    """(where the file is in the target release, its bytes there, the similarity when it moved), or the
    outcome already known: gone upstream along with what the set deletes, or lost."""
    if path in inputs.target.entries or base is None:
        return path, inputs.target.get(path), None
    new_path, score = inputs.moves.get(path, (None, None))
    if new_path is None and theirs is None:  # the set deletes a file upstream took away too
        return Rebased(RebasedFile(path, FileOutcome.UPSTREAM, None, hunks), None, None)
    if new_path is None:
        return Rebased(RebasedFile(path, FileOutcome.LOST, None, hunks, hunks, similarity=score), None, None)
    return new_path, inputs.target.get(new_path), score


def _with_conflicting_hunks(inputs: RebaseInputs, rebased: list[Rebased]) -> list[Rebased]:
    """Each conflicting file with how many of its hunks conflict on their own: every hunk of every such
    file merged alone, all at once (in parallel: :func:`merge_all`)."""
    jobs: list[MergeJob] = []
    owners: list[int] = []
    failed = [0] * len(rebased)
    for n, r in enumerate(rebased):
        placeholder = r.file.outcome is FileOutcome.CONFLICT and r.file.conflicting == 0
        if not placeholder or r.ours is None or r.file.new_path is None:
            continue
        for job in _hunk_jobs(inputs, r.file.path, r.file.new_path, r.ours):
            if job is None:
                failed[n] += 1
            else:
                jobs.append(job)
                owners.append(n)
    for n, got in zip(owners, merge_all(jobs), strict=True):
        failed[n] += 1 if got.conflicts else 0
    return [
        dataclasses.replace(r, file=dataclasses.replace(r.file, conflicting=max(failed[n], 1)))
        if r.file.outcome is FileOutcome.CONFLICT and r.file.conflicting == 0
        else r
        for n, r in enumerate(rebased)
    ]


def _hunk_jobs(inputs: RebaseInputs, path: str, new_path: str, ours: bytes) -> list[MergeJob | None]:
    """The merge of each hunk of the set's file alone (``None``: the hunk does not apply to the base)."""
    from unidiff.patch import PatchedFile

    base = inputs.base.get(path) or b""
    out: list[MergeJob | None] = []
    for fp in (fp for fp in inputs.ps.patches if fp.path == path):
        for hunk in fp.patched:
            pf = PatchedFile(fp.patched.patch_info, fp.patched.source_file, fp.patched.target_file)
            pf.append(hunk)
            try:
                alone = plan_patches(inputs.ps.name, [dataclasses.replace(fp, patched=pf)], lambda _p: base)
            except PlanFailed:
                out.append(None)
                continue
            out.append((new_path, ours, base, alone[0].after or b"", inputs.labels))
    return out
