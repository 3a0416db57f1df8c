"""``<site-packages>/.patchguard/state.json``: which sets patchguard applied, and to what.

Per applied set: the sha256 of the set, per-file pre- and post-image hashes, the releases it was applied on,
when, and by which patchguard. The file is parsed once, here, into frozen values (:class:`AppliedRecord`);
nothing else reads it as a dict. It only ever changes as one more file of a transaction
(:func:`state_change`), so it commits and rolls back together with the files it describes; what a newer
patchguard wrote into a record that this one does not know is written back as it was.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ._fs import STATE_DIR, STATE_FILE, parse_json, read_input, sha256_bytes
from ._version import __version__
from .errors import PatchguardError
from .model import printable
from .txn import Change, check_state_dir

__all__ = ["STATE_FILE", "STATE_SCHEMA", "AppliedRecord", "Images", "read_state", "state_change"]

STATE_SCHEMA = "patchguard.state/1"


@dataclass(frozen=True, slots=True)
class Images:
    """A file's sha256 before the set (``pre``) and with it (``post``); ``None``: the file is absent then."""

    pre: str | None
    post: str | None


@dataclass(frozen=True, slots=True)
class AppliedRecord:
    """What state.json says of one applied set."""

    digest: str  # the set's digest ("" when the record names none)
    files: Mapping[str, Images]  # path in site-packages → its images
    distributions: Mapping[str, str] | None = None  # the releases it was applied on (``None``: not recorded)
    time: str | None = None
    tool_version: str | None = None
    # The record as read (or as :meth:`made` writes it): written back unchanged, keys a newer patchguard
    # added included.
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def made(
        cls, digest: str, distributions: Mapping[str, str], files: Mapping[str, Images]
    ) -> AppliedRecord:
        """The record of a set applied now, by this patchguard."""
        raw = {
            "digest": digest,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "tool_version": __version__,
            "distributions": dict(distributions),
            "files": {p: {"pre": i.pre, "post": i.post} for p, i in files.items()},
        }
        return cls.parse(raw)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> AppliedRecord:
        """A record read from its JSON object (checked by :func:`read_state`: ``files`` is an object)."""
        files = raw.get("files", {})
        releases = raw.get("distributions")
        return cls(
            digest=_text(raw.get("digest")) or "",
            files=MappingProxyType({str(p): _images(h) for p, h in files.items()}),
            distributions=(
                MappingProxyType({k: v for k, v in releases.items() if isinstance(v, str)})
                if isinstance(releases, dict)
                else None
            ),
            time=_text(raw.get("time")),
            tool_version=_text(raw.get("tool_version")),
            raw=MappingProxyType(dict(raw)),
        )

    def json(self) -> dict[str, Any]:
        return dict(self.raw)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _images(hashes: object) -> Images:
    if not isinstance(hashes, dict):
        return Images(None, None)
    return Images(_text(hashes.get("pre")), _text(hashes.get("post")))


Applied = dict[str, AppliedRecord]  # set name -> its record


def read_state(site: str) -> Mapping[str, AppliedRecord]:
    """The applied sets of a site dir, each with its record (none when no state was ever written)."""
    return MappingProxyType(_load_state(site)[1])


def _load_state(site: str) -> tuple[bytes | None, Applied, dict[str, Any]]:
    """The state file's bytes (``None``: absent), its records, and the rest of its document."""
    path = os.path.join(site, STATE_DIR, STATE_FILE)
    check_state_dir(site, writing=False)  # a symlinked .patchguard: another environment's state, or anything
    try:
        raw = read_input(path)
        doc = parse_json(raw)
    except (FileNotFoundError, NotADirectoryError):  # no state (a stray file named .patchguard holds none)
        return None, {}, {"schema": STATE_SCHEMA}
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
    assert isinstance(doc, dict)
    rest = {k: v for k, v in doc.items() if k != "applied"}
    return raw, {str(n): AppliedRecord.parse(rec) for n, rec in applied.items()}, rest


def state_change(site: str, update: Callable[[Applied], object]) -> Change:
    """The state file as one more file of the transaction, so state and files change together: ``update``
    changes the records (set name → record) in place."""
    old, applied, rest = _load_state(site)
    update(applied)
    doc = {**rest, "applied": {name: record.json() for name, record in applied.items()}}
    new = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
    return Change(os.path.join(site, STATE_DIR, STATE_FILE), new, sha256_bytes(old))
