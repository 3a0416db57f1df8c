"""Apply and revert named patch sets in an environment: all files or none.

Planning is :mod:`.planner` (in memory); writing is :mod:`patchguard.txn` (one transaction per command, the
state file included, :mod:`patchguard.state`). RECORD files are never rewritten: integrity stays anchored to
the wheel.
"""

from __future__ import annotations

import contextlib
import enum
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from .._fs import sha256_bytes
from ..env import Target
from ..integrity.records import InstalledDistribution, matches
from ..model import SetChange, SetFileChange
from ..state import AppliedRecord, Images, read_state, state_change
from ..txn import Change, Committed, Plan, commit, environment_lock, refuse_during_session
from .installed import SetEnvironment, check_paths, owned_paths, reader
from .model import FilePatch, PatchSet, PatchSetError, find_set, load_set, safe_relpath
from .planner import FilePlan, HunkFailure, PlanFailed, Reader, plan_patches

__all__ = ["FileVerdict", "SetAction", "SetOutcome", "Verdict", "apply_set", "form_by_digest", "revert_set"]


class SetAction(str, enum.Enum):
    """What apply/revert did to a set."""

    APPLIED = "applied"
    REVERTED = "reverted"
    ALREADY_APPLIED = "already applied"  # apply of a set already in place: nothing to do
    NOT_APPLIED = "not applied"  # revert of a set not in place: nothing to do

    @property
    def changed(self) -> bool:
        return self in (SetAction.APPLIED, SetAction.REVERTED)


class Verdict(str, enum.Enum):
    """Where a reverted file stands against its RECORD hash."""

    PRISTINE = "verified pristine"
    REMOVED = "removed (no RECORD row: it was new)"
    UNLISTED = "not listed in any RECORD"
    OTHER_SETS = "still differs from RECORD: also changed by set"
    OTHER_CHANGES = "still differs from RECORD: other changes remain (see patchguard diff)"

    @property
    def clean(self) -> bool:
        """Nothing is left to look at: the file is the wheel's, or it was new and is gone."""
        return self in (Verdict.PRISTINE, Verdict.REMOVED)


@dataclass(frozen=True, slots=True)
class FileVerdict:
    """The verdict on one reverted file (``detail``: the other sets, for ``OTHER_SETS``)."""

    path: str
    verdict: Verdict
    detail: str = ""

    @property
    def text(self) -> str:
        """``"verified pristine"``, ``"still differs from RECORD: also changed by set sm120"``, …"""
        return f"{self.verdict.value} {self.detail}" if self.detail else self.verdict.value


@dataclass(frozen=True, slots=True)
class SetOutcome:
    """What apply/revert did (or would do): per file what changed, and the verdicts."""

    name: str
    action: SetAction
    files: tuple[FilePlan, ...]
    dry_run: bool = False
    committed: Committed | None = None
    verdicts: tuple[FileVerdict, ...] = ()  # after a revert: each file against its RECORD hash
    recovered: tuple[str, ...] = ()

    def document(self, reverse: bool) -> SetChange:
        """The command's document (:class:`~patchguard.model.SetChange`), what its formats write."""
        verdicts = {v.path: v for v in self.verdicts}
        files = tuple(
            SetFileChange(
                f.path,
                _change(f.before, f.after, reverse),
                f.offsets,
                verdicts[f.path].text if f.path in verdicts else None,
                verdicts[f.path].verdict.clean if f.path in verdicts else None,
            )
            for f in (self.files if self.action.changed else ())
        )
        committed = self.committed
        return SetChange(
            "revert" if reverse else "apply",
            self.name,
            self.action.value,
            files,
            self.dry_run,
            committed.txid if committed else None,
            committed.backup_dir if committed else None,
            self.recovered,
        )


def _change(before: bytes | None, after: bytes | None, reverse: bool) -> str:
    """What a set does to a file: ``create``/``patch``/``delete`` applied, ``recreate``/``revert``/``remove``
    reverted."""
    if reverse:
        return "remove" if after is None else "recreate" if before is None else "revert"
    return "create" if before is None else "delete" if after is None else "patch"


def _plan_or_noop(ps: PatchSet, read: Reader, reverse: bool) -> tuple[list[FilePlan], list[FilePlan]] | None:
    """(the plan of the files not in the wanted state yet, the files already in it — as the other direction
    would change them), or ``None`` when every file already is. File by file: a set that ``restore`` put
    half back, or half applied by hand, is finished instead of refused."""
    by_file: dict[str, list[FilePatch]] = {}
    for fp in ps.patches:
        by_file.setdefault(fp.path, []).append(fp)
    todo: list[FilePlan] = []
    done: list[FilePlan] = []
    failures: list[HunkFailure] = []
    for fps in by_file.values():
        try:
            todo += plan_patches(ps.name, fps, read, reverse=reverse)
        except PlanFailed as wanted:
            try:
                done += plan_patches(ps.name, fps, read, reverse=not reverse)
            except PlanFailed:
                failures += wanted.failures
    if failures:
        raise PlanFailed(failures, f"{'reverting' if reverse else 'applying'} {ps.name}")
    return (todo, done) if todo else None


def apply_set(
    name: str,
    *,
    target: Target,
    patches: str | None = None,
    dry_run: bool = False,
    force_version: bool = False,
) -> SetOutcome:
    """Apply a named set to ``target``: all files or none. Already applied (by patchguard or by hand) is a
    no-op. :func:`patchguard.apply_set` is its public face."""
    return _move(name, False, patches, target, dry_run, force_version)


def revert_set(
    name: str,
    *,
    target: Target,
    patches: str | None = None,
    dry_run: bool = False,
    force_version: bool = False,
) -> SetOutcome:
    """Revert a named set in ``target``, whether patchguard applied it or the same edits were made by hand;
    each file is checked against its RECORD hash after. :func:`patchguard.revert_set` is its public face."""
    return _move(name, True, patches, target, dry_run, force_version)


def _move(
    name: str, reverse: bool, patches: str | None, target: Target, dry_run: bool, force_version: bool
) -> SetOutcome:
    refuse_during_session(target.site_packages)
    ps = find_set(name, patches)
    env = SetEnvironment.open(target)
    applied = _applied_form(ps, env) if reverse else ps
    ps = applied if applied is not ps else env.form_for(ps)  # the form for the versions installed here
    dists = env.installed(ps, force_version)
    site = env.site(dists)
    check_paths(ps, site)
    env.refuse_foreign(ps, dists, site)
    if dry_run:
        return _plan_move(ps, reverse, env, dists, site, dry_run=True)
    # Plan under the lock: a second writer waits, then plans against what the first one wrote.
    with environment_lock(site, allowed=env.target.roots) as recovered:
        env = replace(env, recovered=env.recovered + recovered)
        return _plan_move(ps, reverse, env, dists, site, dry_run=False)


def _applied_form(ps: PatchSet, env: SetEnvironment) -> PatchSet:
    """The form of the set that is applied here: after a ``rebase`` carried it to another release, the
    state record names the previous form by digest, and the set keeps it in its history: revert that."""
    for site in env.target.site_packages:
        record = read_state(site).get(ps.name)
        if record is None or record.digest == ps.digest:
            continue
        form = form_by_digest(ps, record.digest)
        if form is not None:
            return form
    return ps


def form_by_digest(ps: PatchSet, digest: str) -> PatchSet | None:
    """The form of the set with that digest: the set itself, or one its history keeps (``history/<release>/``,
    written by a ``rebase``) — the very form, unedited since (its digest checked); ``None``: no such form."""
    if ps.digest == digest:
        return ps
    for h in ps.history:
        kept = h.kept
        if h.digest == digest and kept and not safe_relpath(kept):
            form = load_set(os.path.join(ps.directory, *kept.split("/")), ps.name)
            if form.digest == digest:
                return form
    return None


def _applied_change(
    ps: PatchSet,
    site: str,
    applying: tuple[list[InstalledDistribution], list[FilePlan], list[FilePlan]] | None,
) -> Change:
    """The state change of a move: the set's applied record dropped (``applying`` is ``None``), or written
    from the distributions it applies to, the files it changes and those already changed."""
    if applying is None:
        return state_change(site, lambda applied: applied.pop(ps.name, None))
    dists, plan, done = applying
    record = AppliedRecord.made(
        ps.digest,
        {d.name: d.version for d in dists},
        {
            **{f.path: Images(sha256_bytes(f.after), sha256_bytes(f.before)) for f in done},
            **{f.path: Images(sha256_bytes(f.before), sha256_bytes(f.after)) for f in plan},
        },
    )
    return state_change(site, lambda applied: applied.__setitem__(ps.name, record))


def _plan_move(
    ps: PatchSet,
    reverse: bool,
    env: SetEnvironment,
    dists: list[InstalledDistribution],
    site: str,
    *,
    dry_run: bool,
) -> SetOutcome:
    read = reader(site)
    planned = _plan_or_noop(ps, read, reverse)
    if planned is None:
        noop = SetAction.NOT_APPLIED if reverse else SetAction.ALREADY_APPLIED
        return SetOutcome(ps.name, noop, (), dry_run, recovered=env.recovered)
    plan, done = planned
    owned = owned_paths(env.dists, site)
    if not reverse:
        _refuse_unowned_deletes(ps, plan, owned)
    changes = [
        Change(os.path.join(site, *f.path.split("/")), f.after, sha256_bytes(f.before), f.mode or 0o644)
        for f in plan
    ]
    changes.append(_applied_change(ps, site, None if reverse else (dists, plan, done)))
    action = SetAction.REVERTED if reverse else SetAction.APPLIED
    if dry_run:
        return SetOutcome(ps.name, action, tuple(plan), True, recovered=env.recovered)
    label = f"{'revert' if reverse else 'apply'} {ps.name}"
    emptied = _emptied_dirs(site, [c.path for c in changes if c.new is None], owned)
    committed = commit(Plan(site, tuple(changes), label=label, rmdirs=emptied), locked=True)
    verdicts = _verdicts(ps, plan, env.dists, site) if reverse else ()
    return SetOutcome(ps.name, action, tuple(plan), False, committed, verdicts, env.recovered)


def _refuse_unowned_deletes(ps: PatchSet, plan: Sequence[FilePlan], owned: Collection[str]) -> None:
    """Applying a set deletes only files a distribution installed, or with the environment target files no
    one owns. (Reverting may delete what the set created: the plan matched the file to the set's content.)"""
    unowned_deletes = [f.path for f in plan if f.after is None and f.path not in owned]
    if unowned_deletes and not any(t.is_environment for t in ps.targets):
        raise PatchSetError(
            "refused, nothing written: deletes files no RECORD owns: " + ", ".join(unowned_deletes),
            path=ps.directory,
            hint="a set may delete only files a distribution installed, or with the target "
            "{environment = true} files no distribution owns",
        )


def _emptied_dirs(site: str, deleted: Sequence[str], owned: Collection[str]) -> tuple[str, ...]:
    """The directories the deletions leave empty (their ``__pycache__`` aside), innermost first, that no
    RECORD owns anything in: a set that created a package directory takes it away again on revert."""
    gone = set(deleted)
    out: list[str] = []
    candidates = sorted({os.path.dirname(p) for p in deleted}, key=len, reverse=True)
    while candidates:
        d = candidates.pop(0)
        rel = os.path.relpath(d, site).replace(os.sep, "/")
        if d in out or rel.startswith("..") or rel == "." or any(o.startswith(rel + "/") for o in owned):
            continue
        names = _emptied(d, gone, out)
        if names is None:
            continue
        if "__pycache__" in names:
            out.append(os.path.join(d, "__pycache__"))
        out.append(d)
        parent = os.path.dirname(d)
        if parent not in candidates:
            candidates.append(parent)
            candidates.sort(key=len, reverse=True)
    return tuple(out)


def _emptied(d: str, gone: set[str], out: Sequence[str]) -> list[str] | None:
    """The names in directory ``d`` when the deletions (``gone``, and the directories already in ``out``)
    leave it empty but for bytecode; ``None`` when something else is left, or it cannot be read."""
    try:
        names = os.listdir(d)
    except OSError:
        return None
    left = [n for n in names if os.path.join(d, n) not in gone and os.path.join(d, n) not in out]
    if left == ["__pycache__"]:
        with contextlib.suppress(OSError):
            if all(n.endswith(".pyc") for n in os.listdir(os.path.join(d, "__pycache__"))):
                left = []  # bytecode only: the transaction removes the pycs of deleted modules
    return None if left else names


def _verdicts(
    ps: PatchSet, plan: Sequence[FilePlan], dists: Sequence[InstalledDistribution], site: str
) -> tuple[FileVerdict, ...]:
    """After a revert: is each file back to its RECORD hash, and if not, what else touches it?"""
    entries = {p: e for d in dists for e, p in zip(d.entries, d.paths, strict=True)}
    applied = read_state(site)
    out: list[FileVerdict] = []
    for f in plan:
        path = os.path.join(site, *f.path.split("/"))
        entry = entries.get(path)
        if entry is None or entry.digest is None:
            gone = f.after is None
            out.append(FileVerdict(f.path, Verdict.REMOVED if gone else Verdict.UNLISTED))
        elif f.after is not None and matches(entry, f.after):
            out.append(FileVerdict(f.path, Verdict.PRISTINE))
        else:
            others = [n for n, rec in applied.items() if n != ps.name and f.path in rec.files]
            if others:
                out.append(FileVerdict(f.path, Verdict.OTHER_SETS, ", ".join(others)))
            else:
                out.append(FileVerdict(f.path, Verdict.OTHER_CHANGES))
    return tuple(out)
