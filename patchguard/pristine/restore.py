"""Put files back to the wheel's bytes, all in one transaction.

Every modified or missing file (or the ``--path`` subset) gets the pristine bytes of its wheel, each checked
against the installed RECORD hash *before* anything is written; unexpected files stay unless asked, and
then they are moved into the transaction's backup, not deleted. Writing goes through :mod:`patchguard.txn`
only: replaced, never written in place, so the other hard links of a uv-installed file keep their bytes.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .._fs import sha256_bytes, sha256_file
from ..env import Target
from ..errors import UsageError
from ..integrity.inventory import ChangedFile, Scanned, changed_files
from ..model import Kind, Report, RestoreDocument, command
from ..state import read_state, state_change
from ..txn import Change, Committed, Plan, commit, refuse_during_session
from .explain import WRONG_RECORD, Explainer, cache_link_note, survey
from .sources import SourceOptions

__all__ = ["Action", "FileAction", "Protect", "RestoreResult", "restore"]

# The files of sets in place that no state records (applied by hand): absolute path → set name. The patch
# sets room knows them (:func:`patchguard.patchsets.status.by_hand`); restore only refuses to undo them.
Protect = Callable[["Scanned"], Mapping[str, str]]


class FileAction(str, enum.Enum):
    """What restore does to one file."""

    RESTORE = "restore"  # modified: back to the wheel's bytes
    RECREATE = "recreate"  # missing: written again
    REMOVE = "remove"  # unexpected: moved into the transaction's backup (--remove-unexpected)


@dataclass(frozen=True, slots=True)
class Action:
    """A file restore touches, and what it does to it."""

    action: FileAction
    path: str
    shown: str


@dataclass(frozen=True, slots=True)
class RestoreResult:
    """What restore did (or, with ``dry_run``, would do), and the scan of those distributions after it."""

    actions: tuple[Action, ...]
    dry_run: bool
    committed: Committed | None
    after: Report | None
    recovered: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what else to do: e.g. uv's cache still holds an edit
    # The installers' records the files were verified against: "RECORD", "conda-meta", "dpkg".
    records: tuple[str, ...] = ("RECORD",)

    def document(self) -> RestoreDocument:
        """The command's document (:class:`~patchguard.model.RestoreDocument`), what its formats write: the
        files restored that the scan after it still finds modified or missing are named in ``still``."""
        still: tuple[str, ...] = ()
        if not self.dry_run and self.after is not None:
            left = {f.path for f in self.after.findings if f.kind in (Kind.MODIFIED, Kind.MISSING)}
            put_back = [a.shown for a in self.actions if a.action is not FileAction.REMOVE]
            still = tuple(shown for shown in put_back if shown in left)
        committed = self.committed
        return RestoreDocument(
            tuple((a.action.value, a.shown) for a in self.actions),
            self.dry_run,
            still,
            self.records,
            committed.txid if committed else None,
            committed.backup_dir if committed else None,
            self.recovered,
            self.notes,
        )


def restore(
    distributions: Iterable[str],
    *,
    target: Target,
    paths: Sequence[str] = (),
    dry_run: bool = False,
    remove_unexpected: bool = False,
    fetch: SourceOptions | None = None,
    force: bool = False,
    protect: Protect | None = None,
) -> RestoreResult:
    """Restore every modified and missing file of ``distributions`` in ``target`` to its wheel's bytes
    (:func:`patchguard.restore` is its public face).

    Raises :class:`~patchguard.pristine.sources.NoPristineSource` when a file has no pristine source and
    :class:`~patchguard.txn.TransactionError` when the environment cannot be written; in both cases
    nothing was changed. A file that holds an applied patch set's change is not restored (that would undo
    the set: :class:`~patchguard.errors.UsageError` names it) unless ``force``.
    """
    names = list(distributions)
    if not names:
        raise UsageError("name the distributions to restore", hint="e.g. patchguard restore vllm")
    scanned = survey(names, target=target, paths=paths)
    refuse_during_session(scanned.target.site_packages)  # what it read is a trial; the session puts back
    explainer = Explainer((fetch or SourceOptions()).open(scanned.target))
    changes, actions, notes, root = _planned(scanned, explainer, paths, remove_unexpected)
    root = root or scanned.target.site_packages[0]
    if changes and not force:  # a dry run says what the real one would: the same refusal
        _refuse_undoing_sets(root, changes, scanned, protect)
    if dry_run or not changes:
        return RestoreResult(tuple(actions), dry_run, None, None, scanned.recovered, tuple(notes))
    changes += _sets_undone(root, changes)
    # Writes stay inside the environment (its site dirs and scripts dir), whatever a RECORD says.
    also = [r for r in scanned.target.roots if r != root]
    committed = commit(Plan(root, tuple(changes), label="restore " + " ".join(names), also=tuple(also)))
    after = survey(names, target=scanned.target).report
    records = tuple(sorted({d.baseline for d in scanned.selected})) or ("RECORD",)
    return RestoreResult(tuple(actions), False, committed, after, scanned.recovered, tuple(notes), records)


def _planned(
    scanned: Scanned, explainer: Explainer, paths: Sequence[str], remove_unexpected: bool
) -> tuple[list[Change], list[Action], list[str], str | None]:
    """(changes, actions, notes, the site dir of the first restored file) of a restore."""
    changes: list[Change] = []
    actions: list[Action] = []
    notes: list[str] = []
    root: str | None = None  # the site dir of the first restored file holds the transaction's state
    for c in changed_files(scanned, paths):
        if c.dist is None or c.finding.kind is Kind.STARTUP_HOOK:
            continue
        if explainer.editable(c.dist) is not None:
            raise UsageError(
                f"{c.dist.name} is an editable install: its files are a git checkout",
                path=c.path,
                hint="use git checkout / git stash in the source tree",
            )
        if c.finding.kind is Kind.UNEXPECTED:
            if remove_unexpected:
                changes.append(Change(c.path, None, sha256_file(c.path)))
                actions.append(Action(FileAction.REMOVE, c.path, c.finding.path))
            continue
        change = _restoring(c, explainer)
        if change.before is not None and change.before == sha256_bytes(change.new):
            notes.append(f"{c.finding.path}: {WRONG_RECORD}; left alone")
            continue
        changes.append(change)
        note = cache_link_note(c)
        if note is not None:
            notes.append(f"{c.finding.path} was {note}")
        action = FileAction.RECREATE if change.before is None else FileAction.RESTORE
        actions.append(Action(action, c.path, c.finding.path))
        root = root or c.dist.site_dir
    return changes, actions, notes, root


def _refuse_undoing_sets(
    root: str, changes: Sequence[Change], scanned: Scanned, protect: Protect | None
) -> None:
    """Refuse to restore a file whose bytes are a set in place: the set is wanted (applied on purpose,
    perhaps required by the policy) whoever put it there — patchguard (its post-image, as the state
    records it) or a person (every edit of a set of the patches directory is in the files, as right after
    ``capture``: ``protect`` says which, path → set); ``revert`` is how it is undone, ``--force`` the one
    way through."""
    _refuse_undoing_applied(root, changes, scanned)
    by_hand = protect(scanned) if protect is not None else {}
    for c in changes:
        name = by_hand.get(c.path)
        if name is not None:
            raise UsageError(
                f"{scanned.display(c.path)} holds patch set {name}, in place (applied by hand): "
                "restoring it undoes it",
                hint=f"{command('revert', '--set', name)} undoes it; pass --force to restore the file anyway",
            )


def _refuse_undoing_applied(root: str, changes: Sequence[Change], scanned: Scanned) -> None:
    for name, record in sorted(read_state(root).items()):
        posts = {os.path.join(root, *rel.split("/")): images.post for rel, images in record.files.items()}
        hits = [
            c.path for c in changes if c.path in posts and c.before is not None and c.before == posts[c.path]
        ]
        if hits:
            raise UsageError(
                f"{scanned.display(hits[0])} holds patch set {name}, applied here: restoring it undoes it",
                hint=f"{command('revert', '--set', name)} undoes it; pass --force to restore the file anyway",
            )


def _sets_undone(root: str, changes: Sequence[Change]) -> list[Change]:
    """The state file's change, in the same transaction, when the restore leaves an applied set with no
    file at its patched content: that set is not applied any more, and every command must say so."""
    records = read_state(root)
    written = {c.path: sha256_bytes(c.new) for c in changes}
    undone = []
    for name, record in records.items():
        files = {os.path.join(root, *rel.split("/")): images for rel, images in record.files.items()}
        if not files or not any(p in written for p in files):
            continue  # this restore does not touch the set
        if all((written[p] if p in written else sha256_file(p)) != h.post for p, h in files.items()):
            undone.append(name)
    if not undone:
        return []
    return [state_change(root, lambda applied: [applied.pop(n, None) for n in undone])]


def _restoring(c: ChangedFile, explainer: Explainer) -> Change:
    """The change that puts one file back: pristine bytes checked against the installed RECORD."""
    assert c.dist is not None and c.entry is not None
    data = explainer.pristine_bytes(c)
    if data is None:  # pragma: no cover - a RECORD row always has a pristine counterpart or raises
        raise UsageError("no pristine bytes", path=c.path)
    outside = not c.path.startswith(os.path.join(c.dist.site_dir, ""))
    mode = 0o755 if outside or data.startswith(b"#!") else 0o644
    return Change(c.path, data, sha256_file(c.path), mode)
