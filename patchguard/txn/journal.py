"""The transaction journal: written durably before anything changes, read (and refused when it cannot be
trusted) by recovery."""

from __future__ import annotations

import contextlib
import json
import os

from .._fs import JOURNAL as _JOURNAL
from .._fs import (
    journal_path,
    parse_json,
    read_input,
)
from ..model import printable
from .durable import fsync_dir, write_durable, write_point
from .values import JOURNAL_SCHEMA, JournalError


def _discard_journal_tmp(state: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(state, _JOURNAL + ".tmp"))


def _write_journal(state: str, journal: dict[str, object]) -> None:
    tmp = os.path.join(state, _JOURNAL + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    write_point()
    write_durable(tmp, json.dumps(journal, indent=1).encode(), 0o644)
    write_point()
    os.replace(tmp, os.path.join(state, _JOURNAL))
    fsync_dir(state)


def pending(root: str) -> dict[str, object] | None:
    """The journal an interrupted transaction left in ``root``, if any."""
    path = journal_path(root)
    try:
        doc = parse_json(read_input(path))
    except (FileNotFoundError, NotADirectoryError):  # a stray file named .patchguard holds no journal
        return None
    except (OSError, ValueError) as exc:
        raise JournalError(
            f"unreadable transaction journal ({exc})",
            path=path,
            hint="inspect it; the backups it names are in .patchguard/backups/",
        ) from None
    if not isinstance(doc, dict):
        raise JournalError(
            "malformed transaction journal", path=path, hint="inspect it, then delete it by hand"
        )
    return doc


def _validated(journal: dict[str, object], journal_file: str) -> tuple[str, list[dict[str, object]], object]:
    """The journal's txid (a plain name), entries (all dicts) and ``also``, or :class:`JournalError`."""
    schema = journal.get("schema", JOURNAL_SCHEMA)
    if schema != JOURNAL_SCHEMA:  # a newer patchguard's: its rollback rules may not be these
        raise JournalError(
            f"a transaction journal of another format ({printable(str(schema))[:40]!r}) is pending",
            path=journal_file,
            hint="finish it with the patchguard that wrote it",
        )
    txid, entries, also = journal.get("txid"), journal.get("entries"), journal.get("also", [])
    valid_txid = isinstance(txid, str) and txid and os.sep not in txid and txid not in (".", "..")
    if not valid_txid or not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise JournalError(
            "malformed transaction journal", path=journal_file, hint="inspect it, then delete it by hand"
        )
    assert isinstance(txid, str)
    return txid, entries, also
