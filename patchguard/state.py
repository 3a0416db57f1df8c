"""``<site-packages>/.patchguard/state.json``: which sets patchguard applied, and to what.

Per applied set: the sha256 of the set, per-file pre- and post-image hashes, when, and by which patchguard.
The file only ever changes as one more file of a transaction (:func:`state_change`), so it commits and
rolls back together with the files it describes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from ._fs import STATE_DIR, STATE_FILE, parse_json, read_input, sha256_bytes
from .errors import PatchguardError
from .model import printable
from .txn import Change, check_state_dir

__all__ = ["STATE_FILE", "STATE_SCHEMA", "read_state", "state_change"]

STATE_SCHEMA = "patchguard.state/1"

Applied = dict[str, dict[str, Any]]  # set name -> its record


def read_state(site: str) -> dict[str, Any]:
    """The applied-sets record of a site dir (empty when none was ever written)."""
    return _load_state(site)[1]


def _load_state(site: str) -> tuple[bytes | None, dict[str, Any]]:
    """The state file's bytes (``None``: absent) and its validated content."""
    path = os.path.join(site, STATE_DIR, STATE_FILE)
    check_state_dir(site, writing=False)  # a symlinked .patchguard: another environment's state, or anything
    try:
        raw = read_input(path)
        doc = parse_json(raw)
    except (FileNotFoundError, NotADirectoryError):  # no state (a stray file named .patchguard holds none)
        return None, {"schema": STATE_SCHEMA, "applied": {}}
    except (OSError, ValueError) as exc:
        raise PatchguardError(
            f"unreadable state file ({exc})", path=path, hint="inspect or delete it"
        ) from None
    schema = doc.get("schema", STATE_SCHEMA) if isinstance(doc, dict) else STATE_SCHEMA
    if schema != STATE_SCHEMA:  # a newer patchguard's: rewriting it would lose what it knows
        raise PatchguardError(
            f"a state file of another format ({printable(str(schema))[:40]!r})",
            path=path,
            hint="use the patchguard that wrote it",
        )
    applied = doc.get("applied") if isinstance(doc, dict) else None
    if not isinstance(applied, dict) or not all(
        isinstance(rec, dict) and isinstance(rec.get("files", {}), dict) for rec in applied.values()
    ):
        raise PatchguardError("malformed state file", path=path, hint="inspect or delete it")
    return raw, doc


def state_change(site: str, update: Callable[[Applied], object]) -> Change:
    """The state file as one more file of the transaction, so state and files change together."""
    old, doc = _load_state(site)
    update(doc["applied"])
    new = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
    return Change(os.path.join(site, STATE_DIR, STATE_FILE), new, sha256_bytes(old))
