"""The values of a transaction: what a plan changes, what a commit did, the errors, and the names of the
files patchguard keeps in an environment's ``.patchguard/``."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import PatchguardError

_LOCK = "lock"


JOURNAL_SCHEMA = "patchguard.journal/1"


_BACKUPS = "backups"


_SESSION_DIR = "session"  # a session's kept start bytes


_TRIALS = "trials"  # in it: the sha256 of every file a trial wrote, one "<hash>" a line


_TMP_MARK = ".pg-tmp-"


class TransactionError(PatchguardError):
    """The transaction could not be planned or committed; nothing was changed."""


class LockTimeout(TransactionError):
    """Another patchguard process holds the environment lock."""


class JournalError(TransactionError):
    """A leftover transaction journal that cannot be read or trusted: a person must look at it."""


@dataclass(frozen=True, slots=True)
class Change:
    """One file of a plan. ``path`` is absolute and inside the plan's root.

    ``new`` is the content to write, ``None`` to remove the file (it is moved into the transaction's
    backup, never just deleted). ``before`` is the sha256 hex the file must have now, ``None`` if it must
    not exist. ``mode`` applies to a file that did not exist (an existing file keeps its own).
    """

    path: str
    new: bytes | None
    before: str | None
    mode: int = 0o644


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything one transaction will write, decided before anything is written.

    ``root`` is the site-packages dir whose ``.patchguard/`` holds the lock, journal and backups; ``also``
    names further directories the plan may write in (another site dir, the scripts dir).
    """

    root: str
    changes: tuple[Change, ...]
    label: str = ""
    also: tuple[str, ...] = ()
    rmdirs: tuple[str, ...] = ()  # directories the changes leave empty, to remove (innermost first)


@dataclass(frozen=True, slots=True)
class Committed:
    """What a committed transaction did: its id, where the originals are kept, what was recovered first."""

    txid: str
    backup_dir: str
    recovered: tuple[str, ...] = ()
    removed_bytecode: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One file of a journal: its path, its sha256 before and after (``None``: absent), the temp file staged
    beside it and the backup of its original (``None``: none), and the directories the transaction created
    for it (outermost first, removed by a rollback).

    Read back from a file anyone who could write ``.patchguard/`` could have written: ``path`` is ``None``
    when the entry names no path or a ``before`` that is not a hash, and recovery skips it."""

    path: str | None
    before: str | None
    after: str | None = None
    tmp: str | None = None
    backup: str | None = None
    mkdirs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "before": self.before,
            "after": self.after,
            "tmp": self.tmp,
            "backup": self.backup,
            "mkdirs": list(self.mkdirs),
        }


@dataclass(frozen=True, slots=True)
class Journal:
    """A transaction's journal (``patchguard.journal/1``): written before anything changes, deleted as the
    commit; what a crash leaves for recovery to undo. ``also``: the further directories the plan may write in;
    ``rmdirs``: the directories it removes, with their modes (a rollback makes them again)."""

    txid: str
    label: str
    also: tuple[str, ...]
    entries: tuple[JournalEntry, ...]
    rmdirs: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "schema": JOURNAL_SCHEMA,
            "txid": self.txid,
            "label": self.label,
            "also": list(self.also),
            "entries": [e.to_json() for e in self.entries],
            "rmdirs": [[d, mode] for d, mode in self.rmdirs],
        }


SESSION_SCHEMA = "patchguard.session/1"


class SessionBusy(TransactionError):
    """Another process holds the environment in trial states (a running ``bisect``)."""
