"""The JSON documents: ``patchguard.report/1``, ``patchguard.check/1``, ``patchguard.diff/1``, the lock,
``patchguard.running/1``, ``patchguard.rebase/1`` and ``patchguard.fleet/1``.

Pure: each takes finished values and returns the text, ending in a newline. Each document's shape is defined
once: by the ``to_json`` of its result (:meth:`patchguard.model.Report.to_json`, ``CheckResult.to_json``,
``Running.to_json``, ``RebaseResult.to_json``, ``FleetResult.to_json``), by the lock's
:func:`~patchguard.deploy.identity.lockfile.make_lock`, or here (the diff); this module only writes them.

Names of outside origin (paths, site directories, prefixes, command lines, set and distribution names) are
in the JSON name encoding of :func:`patchguard.model.json_name` (injective: valid UTF-8 without a backslash
is the name itself); other text (messages, source lines) has its undecodable bytes as ``\\xNN``. No document
holds a lone surrogate: every one encodes as UTF-8.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from ..diffs import FileDiff, hunks_json
from ..model import (
    CaptureDocument,
    EnvironmentStatus,
    Report,
    RestoreDocument,
    RollbackResult,
    SetChange,
    UpgradePlan,
    printable,
)
from ..results import BisectResult, FleetResult, RebaseResult, Running
from .documents import CheckDocument, ReportDocument
from .interface import Format

__all__ = [
    "DIFF_SCHEMA",
    "CheckJson",
    "DiffJson",
    "DocumentJson",
    "FleetJson",
    "LockJson",
    "RebaseJson",
    "ReportJson",
    "RunningJson",
    "format_diff",
    "format_json",
    "format_lock",
    "format_rebase",
    "format_running",
    "valid_text",
]

DIFF_SCHEMA = "patchguard.diff/1"


def valid_text(doc: Any) -> Any:
    """``doc`` with every string that would not encode as UTF-8 (a lone surrogate) made printable: the last
    guard of a JSON document, for text fields no formatter chose an encoding for."""
    if isinstance(doc, str):
        return printable(doc)
    if isinstance(doc, Mapping):
        return {printable(str(k)): valid_text(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [valid_text(v) for v in doc]
    return doc


def _dumps(doc: object) -> str:
    return json.dumps(valid_text(doc), indent=2, ensure_ascii=False) + "\n"


def format_json(report: Report) -> str:
    """The report as the stable JSON document (``patchguard.report/1``)."""
    return _dumps(report.to_json())


def format_diff(diffs: Sequence[FileDiff]) -> str:
    """Every changed file's hunks (``patchguard.diff/1``)."""
    return _dumps({"schema": DIFF_SCHEMA, "files": [hunks_json(d) for d in diffs]})


def format_lock(lock: Mapping[str, Any]) -> str:
    """An environment lock, keys sorted: the same environment always gives the same bytes."""
    return json.dumps(lock, indent=2, sort_keys=True) + "\n"


def format_running(found: Running) -> str:
    """``patchguard running --format json`` (``patchguard.running/1``, as ``Running.to_json`` gives it)."""
    return _dumps(found.to_json())


def format_rebase(result: RebaseResult) -> str:
    """``patchguard rebase --format json`` (``patchguard.rebase/1``, as ``RebaseResult.to_json`` gives it):
    ASCII, every other character as a JSON escape."""
    return json.dumps(valid_text(result.to_json()), indent=2) + "\n"


class ReportJson(Format[ReportDocument]):
    name = "json"

    def render(self, document: ReportDocument) -> str:
        return format_json(document.report)


class CheckJson(Format[CheckDocument]):
    name = "json"

    def render(self, document: CheckDocument) -> str:
        return _dumps(document.result.to_json())


class DiffJson(Format[Sequence[FileDiff]]):
    name = "json"

    def render(self, document: Sequence[FileDiff]) -> str:
        return format_diff(document)


class LockJson(Format[Mapping[str, Any]]):
    name = "json"

    def render(self, document: Mapping[str, Any]) -> str:
        return format_lock(document)


class RunningJson(Format[Running]):
    name = "json"

    def render(self, document: Running) -> str:
        return format_running(document)


class BisectJson(Format[BisectResult]):
    name = "json"

    def render(self, document: BisectResult) -> str:
        """``patchguard.bisect/1``, as ``BisectResult.to_json`` gives it: ASCII, every other character as a
        JSON escape."""
        return json.dumps(valid_text(document.to_json()), indent=2) + "\n"


class RebaseJson(Format[RebaseResult]):
    name = "json"

    def render(self, document: RebaseResult) -> str:
        return format_rebase(document)


class FleetJson(Format[FleetResult]):
    name = "json"

    def render(self, document: FleetResult) -> str:
        return _dumps(document.to_json())


class RebaseAllJson(Format[Sequence[RebaseResult]]):
    """``patchguard rebase --all --format json``: ``patchguard.rebase-all/1``, each set's
    ``patchguard.rebase/1`` document in ``sets``."""

    name = "json"

    def render(self, document: Sequence[RebaseResult]) -> str:
        doc = {
            "schema": "patchguard.rebase-all/1",
            "sets": [r.to_json() for r in document],
            "complete": all(r.complete for r in document),
        }
        return json.dumps(valid_text(doc), indent=2) + "\n"


# The documents whose value writes its own JSON (``to_json``): the upgrade plan, rollback, apply/revert,
# restore, capture, status.
_WritesItself: TypeAlias = (
    UpgradePlan | RollbackResult | SetChange | RestoreDocument | CaptureDocument | EnvironmentStatus
)


class DocumentJson(Format[_WritesItself]):
    """A document whose value writes its own JSON (its ``to_json`` is the one definition of its shape): the
    upgrade plan, rollback, apply/revert, restore, capture, status."""

    name = "json"

    def render(self, document: _WritesItself) -> str:
        return json.dumps(valid_text(document.to_json()), indent=2) + "\n"
