"""The one place that writes into an environment: all files or none, crash-safe.

A :class:`Plan` says what every file must become (new bytes, or gone) and what it must be now. Committing it:

1. take the environment lock (``<site>/.patchguard/lock``, ``flock``; a second writer waits, then fails
   clearly), and roll back any transaction a crash left behind;
2. check every path (inside the site dir, not through a symlink leaving it, a regular file or absent) and
   every file's current bytes against the plan — if anything differs, nothing is written;
3. write the journal (what will change, where the backups and temp files go) and fsync it;
4. write each new file as a temp file in its own directory and fsync it; hard-link (or copy) each original
   into the transaction's backup directory;
5. ``os.replace`` each temp over its target (never write in place: uv hard-links installed files to its
   cache, and an in-place edit would change every environment sharing the inode), unlink deleted files,
   fsync the directories, remove stale ``__pycache__`` entries of touched ``.py`` files;
6. delete the journal: that is the commit.

Recovery (:func:`recover`) reads a leftover journal and puts every file whose bytes are not the before-state
back from its backup, removes files the transaction created and its temp files, then deletes the journal.
It is idempotent, so a crash during recovery is recovered by the next command. Either way every file ends
byte-identical to the full before-state or the full after-state.

The package, by job, lowest first (each module imports only those above it in this list): ``values``
(plans, results, errors, the state directory's names), ``durable`` (fsynced writes and the write points the
crash tests kill at), ``locking``, ``paths`` (what may be written), ``journal``, ``rollback`` (a journal
undone), ``backups``, ``staging`` (the steps of a commit), ``sessions`` (what a session keeps) and
``transaction`` (commit, recover, session: the protocol).
"""

from .._fs import STATE_DIR
from .backups import DEFAULT_KEEP_BACKUPS, backups, keep_backups, prune_backups
from .durable import write_point
from .journal import pending
from .locking import check_state_dir, directory_lock
from .paths import check_path
from .sessions import live_session, note_trial, refuse_during_session
from .transaction import commit, environment_lock, recover, recover_all, session
from .values import (
    JOURNAL_SCHEMA,
    SESSION_SCHEMA,
    Change,
    Committed,
    Journal,
    JournalEntry,
    JournalError,
    LockTimeout,
    Plan,
    SessionBusy,
    TransactionError,
)

__all__ = [
    "DEFAULT_KEEP_BACKUPS",
    "JOURNAL_SCHEMA",
    "SESSION_SCHEMA",
    "STATE_DIR",
    "Change",
    "Committed",
    "Journal",
    "JournalEntry",
    "JournalError",
    "LockTimeout",
    "Plan",
    "SessionBusy",
    "TransactionError",
    "backups",
    "check_path",
    "check_state_dir",
    "commit",
    "directory_lock",
    "environment_lock",
    "keep_backups",
    "live_session",
    "note_trial",
    "pending",
    "prune_backups",
    "recover",
    "recover_all",
    "refuse_during_session",
    "session",
    "write_point",
]
