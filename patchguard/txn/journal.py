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
from .values import JOURNAL_SCHEMA, Journal, JournalEntry, JournalError


def _discard_journal_tmp(state: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(state, _JOURNAL + ".tmp"))


def _write_journal(state: str, journal: Journal) -> None:
    tmp = os.path.join(state, _JOURNAL + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    write_point()
    write_durable(tmp, json.dumps(journal.to_json(), indent=1).encode(), 0o644)
    write_point()
    os.replace(tmp, os.path.join(state, _JOURNAL))
    fsync_dir(state)


def pending(root: str) -> Journal | None:
    """The journal an interrupted transaction left in ``root``, if any: parsed and checked here, once, or
    :class:`JournalError` (unreadable, malformed, or another patchguard's format: a person must look)."""
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
    return _parsed(doc, path)


def _malformed(journal_file: str) -> JournalError:
    return JournalError(
        "malformed transaction journal", path=journal_file, hint="inspect it, then delete it by hand"
    )


def _parsed(doc: object, journal_file: str) -> Journal:
    """The journal ``doc`` holds: its txid a plain name and its entries objects, or :class:`JournalError`.
    Fields of the wrong type inside an entry make that entry one recovery skips, never a guess."""
    if not isinstance(doc, dict):
        raise _malformed(journal_file)
    schema = doc.get("schema", JOURNAL_SCHEMA)
    if schema != JOURNAL_SCHEMA:  # a newer patchguard's: its rollback rules may not be these
        raise JournalError(
            f"a transaction journal of another format ({printable(str(schema))[:40]!r}) is pending",
            path=journal_file,
            hint="finish it with the patchguard that wrote it",
        )
    txid, entries, label = doc.get("txid"), doc.get("entries"), doc.get("label")
    valid_txid = isinstance(txid, str) and txid and os.sep not in txid and txid not in (".", "..")
    if not valid_txid or not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise _malformed(journal_file)
    assert isinstance(txid, str)
    return Journal(
        txid,
        label if isinstance(label, str) else "",
        _texts(doc.get("also")),
        tuple(_entry(e) for e in entries),
        _rmdirs(doc.get("rmdirs")),
    )


def _texts(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _entry(e: dict[str, object]) -> JournalEntry:
    path, before = _text(e.get("path")), e.get("before")
    if before is not None and not isinstance(before, str):
        path = None
    return JournalEntry(
        path,
        _text(before),
        _text(e.get("after")),
        _text(e.get("tmp")),
        _text(e.get("backup")),
        _texts(e.get("mkdirs")),
    )


def _rmdirs(value: object) -> tuple[tuple[str, int], ...]:
    """The removed directories with their modes (0o755 where the mode is not a number)."""
    if not isinstance(value, list):
        return ()
    wanted = [r for r in value if isinstance(r, list) and len(r) == 2 and isinstance(r[0], str)]
    return tuple(
        (d, mode if isinstance(mode, int) and not isinstance(mode, bool) else 0o755) for d, mode in wanted
    )
