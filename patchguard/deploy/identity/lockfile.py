"""Environment locks: a deterministic, content-addressed description of an environment, for fleets.

``patchguard lock`` on a reference host writes one; ``patchguard check --lock FILE`` on every other host says
whether it is the same environment, or exactly what differs; ``patchguard fleet`` compares the locks of many
hosts. Two environments installed from the same wheels produce the same lock but for where and when it was
written (``host``, ``time``, ``tool``: what ``fleet`` shows, never compared): paths are relative to
site-packages, and what legitimately differs between two installs (console scripts, whose shebang names the
interpreter; ``INSTALLER``, ``REQUESTED``, ``direct_url.json``; bytecode) is left out. With
``$SOURCE_DATE_EPOCH`` set, the same environment on the same host gives the same bytes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Any

from ..._fs import parse_json, read_input, sha256_file
from ...env import Target
from ...errors import PatchguardError
from ...integrity.inventory import Scanned
from ...integrity.records import INSTALLER_FILES, InstalledDistribution
from ...model import Finding, Kind, json_name
from ...state import read_state

__all__ = ["LOCK_SCHEMA", "applied_sets", "compare_locks", "lock_bytes", "make_lock", "read_lock"]

LOCK_SCHEMA = "patchguard.lock/1"


def _sha256(path: str) -> str:
    try:
        return sha256_file(path) or "missing"
    except OSError as exc:
        return f"unreadable:{exc.errno}"


# Code findings stand for a modified file too (analysis replaces the file's bare `modified` finding).
_EDITED = (Kind.MODIFIED, Kind.MISSING, Kind.INJECTED_CODE, Kind.FUNCTIONAL_CHANGE, Kind.COSMETIC_CHANGE)


def applied_sets(
    target: Target, dists: list[InstalledDistribution], patches: str | None = None
) -> dict[str, str]:
    """Every set in place in the environment → its digest: those patchguard applied (its state), and those
    of the patches directory whose every edit is in the files, however they got there (by hand). A patches
    directory that cannot be read adds none: the state still says what patchguard did."""
    found: dict[str, str] = {}
    for site in target.site_packages:
        found.update({n: r.digest for n, r in read_state(site).items()})
    from ...patchsets.model import load_sets
    from ...patchsets.status import states_of

    try:
        sets = {ps.name: ps for ps in load_sets(patches)}
        states = states_of(target, dists, patches) if sets else []
    except PatchguardError:
        return found
    for s in states:
        if s.state.in_place and s.name not in found:
            found[s.name] = sets[s.name].digest
    return found


def make_lock(scanned: Scanned, patches: str | None = None) -> dict[str, Any]:
    """The lock of a scanned environment (the sets in place: see :func:`applied_sets`)."""
    applied = applied_sets(scanned.target, scanned.dists, patches)
    report = scanned.report
    changed = {(f.distribution, f.path): f for f in report.findings if f.kind in _EDITED}
    unexpected: dict[str | None, list[str]] = {}
    for f in report.findings:
        if f.kind in (Kind.UNEXPECTED, Kind.STARTUP_HOOK) and not os.path.isabs(f.path):
            unexpected.setdefault(f.distribution, []).append(f.path)
    dists: dict[str, Any] = {}
    for dist in scanned.selected:
        rows = _file_rows(scanned, dist, changed) + _unexpected_rows(dist, unexpected.get(dist.name, []))
        rows.sort(key=_row)
        meta = os.path.basename(dist.metadata_dir)
        key = dist.canonical_name if dist.canonical_name not in dists else f"{dist.canonical_name}@{meta}"
        dists[key] = {
            "version": dist.version,
            "files": len(rows),
            "digest": "sha256:"
            + hashlib.sha256("".join(map(_row, rows)).encode("utf-8", "surrogateescape")).hexdigest(),
            # The files that are not as RECORD says, and what they are: what a lock diff names.
            "changes": {json_name(path): state for path, state in sorted(_changes(rows))},
            "build": build_digest(_record_rows(scanned, dist)),
        }
    hooks = sorted(
        _row((json_name(c.finding.path), _sha256(c.path))).rstrip("\n")
        for c in scanned.changes
        if c.finding.distribution is None and c.finding.kind in (Kind.STARTUP_HOOK, Kind.UNEXPECTED)
    )
    python = report.environment.python
    return {
        "schema": LOCK_SCHEMA,
        "tool": {"name": "patchguard", "version": report.tool_version},
        "host": json_name(report.host),
        "time": report.time,
        "python": python.rsplit(".", 1)[0] if python.count(".") > 1 else python,
        "distributions": dict(sorted(dists.items())),
        "applied_sets": dict(sorted(applied.items())),
        "unowned": hooks,
    }


def _row(row: tuple[str, str]) -> str:
    """``path<TAB>state<NL>``, the form a lock digests: a backslash, tab or newline of a name escaped (a
    name cannot forge a row; ordinary names are themselves)."""
    path, state = row
    if "\\" in path or "\t" in path or "\n" in path:
        path = path.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
    return f"{path}\t{state}\n"


def _file_rows(
    scanned: Scanned, dist: InstalledDistribution, changed: dict[tuple[str | None, str], Finding]
) -> list[tuple[str, str]]:
    """(path, state) of every file ``dist``'s RECORD lists with a hash (installer files left out)."""
    rows: list[tuple[str, str]] = []
    meta = os.path.basename(dist.metadata_dir)
    for entry, path in zip(dist.entries, dist.paths, strict=True):
        rel = scanned.display(path)
        if os.path.isabs(rel) or entry.digest is None or rel.startswith(".."):
            continue
        if rel.startswith(meta + "/") and rel.split("/", 1)[1] in INSTALLER_FILES:
            continue
        finding = changed.get((dist.name, rel))
        if finding is None:
            state = f"{entry.algorithm}={entry.digest}"
        elif finding.kind is Kind.MISSING:
            state = "missing"
        else:
            state = "sha256:" + _sha256(path)
        rows.append((rel, state))
    return rows


def _record_rows(scanned: Scanned, dist: InstalledDistribution) -> list[tuple[str, str]]:
    """(path, RECORD hash) of every file of ``dist``'s RECORD in site-packages, as the wheel has it."""
    rows = []
    for entry, path in zip(dist.entries, dist.paths, strict=True):
        rel = scanned.display(path)
        if not os.path.isabs(rel) and entry.digest is not None and not rel.startswith(".."):
            rows.append((rel, f"{entry.algorithm}={entry.digest}"))
    return rows


def build_digest(rows: Sequence[tuple[str, str]]) -> str:
    """The digest of a build: of its RECORD rows (``path``, ``algorithm=hash``) — the files installers add
    (bytecode, ``INSTALLER``, ``direct_url.json``…) aside — the same whether the rows come from an installed
    RECORD or a wheel's. Two builds of one version differ in it; the files' state now does not count."""
    kept = sorted(
        _row((p, s))
        for p, s in rows
        if "__pycache__/" not in p and not (".dist-info/" in p and p.split("/", 1)[1] in INSTALLER_FILES)
    )
    return "sha256:" + hashlib.sha256("".join(kept).encode("utf-8", "surrogateescape")).hexdigest()


def _changes(rows: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(path, state) of the rows that are not a RECORD hash (modified, missing, unexpected)."""
    return [(path, state) for path, state in rows if state.startswith(("sha256:", "missing", "unexpected:"))]


def _unexpected_rows(dist: InstalledDistribution, unexpected: list[str]) -> list[tuple[str, str]]:
    """(path, ``unexpected:<sha256 or dir>``) of every unexpected file found in ``dist``'s packages."""
    rows: list[tuple[str, str]] = []
    for rel in sorted(unexpected):
        full = os.path.join(dist.site_dir, *rel.rstrip("/").split("/"))
        rows.append((rel, f"unexpected:{'dir' if rel.endswith('/') else _sha256(full)}"))
    return rows


def read_lock(path: str) -> dict[str, Any]:
    try:
        doc = parse_json(read_input(path))
    except OSError as exc:
        raise PatchguardError(f"cannot read lock ({exc.strerror or exc})", path=path) from None
    except ValueError as exc:
        raise PatchguardError(
            f"not a lock file ({exc})", path=path, hint="write one with patchguard lock"
        ) from None
    if not (isinstance(doc, dict) and doc.get("schema") == LOCK_SCHEMA and _well_formed(doc)):
        raise PatchguardError(f"not a {LOCK_SCHEMA} file", path=path, hint="write one with patchguard lock")
    return doc


def _well_formed(doc: dict[str, Any]) -> bool:
    """Whether a lock's parts have the types the format says: each distribution a version and a digest,
    the applied sets names to digests, the unowned files paths."""
    dists = doc.get("distributions")
    sets, unowned = doc.get("applied_sets", {}), doc.get("unowned", [])
    return (
        isinstance(dists, dict)
        and all(
            isinstance(d, dict) and isinstance(d.get("version"), str) and isinstance(d.get("digest"), str)
            for d in dists.values()
        )
        and isinstance(sets, dict)
        and all(isinstance(v, str) for v in sets.values())
        and isinstance(unowned, list)
        and all(isinstance(u, str) for u in unowned)
    )


def _file_differences(
    name: str, expected: dict[str, Any], actual: dict[str, Any], local_changes: Sequence[str]
) -> list[str]:
    """File by file, what differs in one distribution (a lock written before per-file changes were kept
    says only that the files differ, and which are changed here)."""
    ea, eb = expected.get("changes"), actual.get("changes")
    if not isinstance(ea, dict) or not isinstance(eb, dict):
        here = [c for c in local_changes if c.startswith(name + ":")]
        detail = f" (here: {'; '.join(c.split(':', 1)[1] for c in here)})" if here else ""
        return [f"distribution {name}: files differ from the lock{detail}"]
    out = []
    for path in sorted(set(ea) | set(eb)):
        want, got = ea.get(path, "as RECORD says"), eb.get(path, "as RECORD says")
        if want != got:
            out.append(f"distribution {name}: {path} is {_state(got)} here, {_state(want)} in the lock")
    return out or [f"distribution {name}: files differ from the lock"]


def _state(state: object) -> str:
    text = str(state)
    if text == "missing" or text == "as RECORD says":
        return text
    if text.startswith("unexpected:"):
        return "unexpected " + ("directory" if text.endswith(":dir") else text.split(":", 1)[1][:12])
    return "modified " + text.split(":", 1)[-1][:12]


def compare_locks(
    expected: dict[str, Any], actual: dict[str, Any], local_changes: Sequence[str] = ()
) -> list[str]:
    """Every difference between the reference lock and this host's, one line each."""
    out: list[str] = []
    a, b = expected["distributions"], actual["distributions"]
    for name in sorted(set(a) - set(b)):
        out.append(f"distribution {name} {a[name]['version']} is in the lock but not installed here")
    for name in sorted(set(b) - set(a)):
        out.append(f"distribution {name} {b[name]['version']} is installed here but not in the lock")
    for name in sorted(set(a) & set(b)):
        if a[name]["version"] != b[name]["version"]:
            out.append(f"distribution {name}: {b[name]['version']} here, {a[name]['version']} in the lock")
        elif a[name]["digest"] != b[name]["digest"]:
            out += _file_differences(name, a[name], b[name], local_changes)
    sa, sb = expected.get("applied_sets", {}), actual.get("applied_sets", {})
    for name in sorted(set(sa) - set(sb)):
        out.append(f"patch set {name} is applied in the lock but not here")
    for name in sorted(set(sb) - set(sa)):
        out.append(f"patch set {name} is applied here but not in the lock")
    for name in sorted(set(sa) & set(sb)):
        if sa[name] != sb[name]:
            out.append(f"patch set {name}: a different version of the set is applied here")
    ua, ub = set(expected.get("unowned", [])), set(actual.get("unowned", []))
    for h in sorted(ub - ua):
        out.append(f"unowned file here, not in the lock: {h.split(chr(9))[0]}")
    for h in sorted(ua - ub):
        out.append(f"unowned file in the lock, not here: {h.split(chr(9))[0]}")
    if expected.get("python") != actual.get("python"):
        out.append(f"python {actual.get('python')} here, {expected.get('python')} in the lock")
    return out


def lock_bytes(doc: dict[str, Any]) -> bytes:
    """A lock as ``patchguard lock`` writes it: keys sorted, so one environment always gives the same bytes
    (``formats.jsondoc.format_lock`` writes the same; a test holds the two together)."""
    import json

    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode("utf-8")
