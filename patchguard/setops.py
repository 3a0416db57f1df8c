"""Apply, revert, capture and inspect named patch sets in an environment.

Planning is :mod:`patchguard.patchsets` (in memory); writing is :mod:`patchguard.txn` (one transaction per
command, the state file included). State lives in ``<site-packages>/.patchguard/state.json``: per applied
set, the sha256 of the set, per-file pre- and post-image hashes, when, and by which patchguard. RECORD files
are never rewritten: integrity stays anchored to the wheel.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from . import __version__
from .env import Target, resolve_target
from .errors import PatchguardError, UsageError
from .patchsets import (
    SET_NAME,
    FilePlan,
    PatchSet,
    PatchSetError,
    PlanFailed,
    find_set,
    load_set,
    load_sets,
    patches_dir,
    plan_patches,
    plan_set,
)
from .records import InstalledDistribution, canonicalize, discover, matches
from .txn import STATE_DIR, Change, Committed, Plan, check_path, commit, environment_lock, recover_all

__all__ = [
    "SetOutcome",
    "SetState",
    "apply_set",
    "capture_set",
    "read_state",
    "revert_set",
    "set_states",
    "states_of",
]

_STATE = "state.json"


def _sha(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


def read_state(site: str) -> dict[str, Any]:
    """The applied-sets record of a site dir (empty when none was ever written)."""
    return _load_state(site)[1]


def _load_state(site: str) -> tuple[bytes | None, dict[str, Any]]:
    """The state file's bytes (``None``: absent) and its validated content."""
    path = os.path.join(site, STATE_DIR, _STATE)
    try:
        with open(path, "rb") as f:
            raw = f.read()
        doc = json.loads(raw)
    except FileNotFoundError:
        return None, {"schema": "patchguard.state/1", "applied": {}}
    except (OSError, ValueError) as exc:
        raise PatchguardError(
            f"unreadable state file ({exc})", path=path, hint="inspect or delete it"
        ) from None
    applied = doc.get("applied") if isinstance(doc, dict) else None
    if not isinstance(applied, dict) or not all(
        isinstance(rec, dict) and isinstance(rec.get("files", {}), dict) for rec in applied.values()
    ):
        raise PatchguardError("malformed state file", path=path, hint="inspect or delete it")
    return raw, doc


@dataclass
class _Env:
    target: Target
    dists: list[InstalledDistribution]
    recovered: tuple[str, ...] = ()

    @classmethod
    def open(cls, site_packages: Sequence[str] | None, python: str | None) -> _Env:
        target = resolve_target(python, site_packages)
        recovered = recover_all(target.site_packages, target.roots)
        return cls(target, discover(target.site_packages), recovered)

    def installed(self, ps: PatchSet, force_version: bool) -> list[InstalledDistribution]:
        """The installed distribution of every target of ``ps``; refuses missing ones and wrong versions."""
        out: list[InstalledDistribution] = []
        problems: list[str] = []
        for t in ps.targets:
            dist = next((d for d in self.dists if d.canonical_name == canonicalize(t.distribution)), None)
            if dist is None:
                problems.append(f"{t.distribution} is not installed")
                continue
            if not t.admits(dist.version) and not force_version:
                problems.append(f"{ps.name} is for {t.distribution} {t.version}; {dist.version} is installed")
            out.append(dist)
        if problems:
            hint = "use --force-version to try anyway" if out else "choose the environment with --python"
            raise UsageError("; ".join(problems), path=ps.directory, hint=hint)
        return out


@dataclass(frozen=True, slots=True)
class SetOutcome:
    """What apply/revert did (or would do): per file what changed, and the verdicts."""

    name: str
    action: str  # "applied", "reverted", "already applied", "not applied"
    files: tuple[FilePlan, ...]
    dry_run: bool = False
    committed: Committed | None = None
    verdicts: tuple[tuple[str, str], ...] = ()  # (path, "verified pristine" | why not)
    recovered: tuple[str, ...] = ()


def _reader(site: str) -> Any:
    def read(rel: str) -> bytes | None:
        try:
            with open(os.path.join(site, *rel.split("/")), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise PatchSetError("is a directory, not a file", path=os.path.join(site, rel)) from None
        except OSError as exc:
            raise PatchSetError(
                f"cannot read ({exc.strerror or exc})", path=os.path.join(site, rel)
            ) from None

    return read


def _check_paths(ps: PatchSet, site: str) -> None:
    problems = []
    for rel in ps.paths:
        why = check_path(site, os.path.join(site, *rel.split("/")))
        if why:
            problems.append(f"{rel}: {why}")
    if problems:
        raise PatchSetError("refused, nothing written:\n  " + "\n  ".join(problems), path=ps.directory)


def _owned(dists: Sequence[InstalledDistribution], site: str) -> set[str]:
    prefix = os.path.join(site, "")
    return {p[len(prefix) :].replace(os.sep, "/") for d in dists for p in d.paths if p.startswith(prefix)}


def _state_change(site: str, update: Any) -> Change:
    """The state file as one more file of the transaction, so state and files change together."""
    old, doc = _load_state(site)
    update(doc["applied"])
    new = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
    return Change(os.path.join(site, STATE_DIR, _STATE), new, _sha(old))


def _plan_or_noop(ps: PatchSet, read: Any, reverse: bool) -> list[FilePlan] | None:
    """The plan, or ``None`` when the set is already in the wanted state (the other direction applies)."""
    try:
        return plan_set(ps, read, reverse=reverse)
    except PlanFailed as wanted:
        try:
            plan_set(ps, read, reverse=not reverse)
        except PlanFailed:
            raise wanted from None
        return None


def apply_set(
    name: str,
    *,
    patches: str | None = None,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    dry_run: bool = False,
    force_version: bool = False,
) -> SetOutcome:
    """Apply a named set: all files or none. Already applied (by patchguard or by hand) is a no-op.

    >>> import patchguard
    >>> patchguard.apply_set("sm120-support", dry_run=True).files  # doctest: +SKIP
    """
    return _move(name, False, patches, site_packages, python, dry_run, force_version)


def revert_set(
    name: str,
    *,
    patches: str | None = None,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    dry_run: bool = False,
    force_version: bool = False,
) -> SetOutcome:
    """Revert a named set, whether patchguard applied it or the same edits were made by hand.

    After reverting, each file is checked against its RECORD hash: ``verified pristine``, or what still
    touches it.

    >>> import patchguard
    >>> [v for _, v in patchguard.revert_set("glm5-debug").verdicts]  # doctest: +SKIP
    ['verified pristine', 'verified pristine']
    """
    return _move(name, True, patches, site_packages, python, dry_run, force_version)


def _move(
    name: str,
    reverse: bool,
    patches: str | None,
    site_packages: Sequence[str] | None,
    python: str | None,
    dry_run: bool,
    force_version: bool,
) -> SetOutcome:
    ps = find_set(name, patches)
    env = _Env.open(site_packages, python)
    dists = env.installed(ps, force_version)
    site = dists[0].site_dir
    _check_paths(ps, site)
    if dry_run:
        return _plan_move(ps, reverse, env, dists, site, dry_run=True)
    # Plan under the lock: a second writer waits, then plans against what the first one wrote.
    with environment_lock(site, allowed=env.target.roots) as recovered:
        env.recovered += recovered
        return _plan_move(ps, reverse, env, dists, site, dry_run=False)


def _plan_move(
    ps: PatchSet, reverse: bool, env: _Env, dists: list[InstalledDistribution], site: str, *, dry_run: bool
) -> SetOutcome:
    read = _reader(site)
    plan = _plan_or_noop(ps, read, reverse)
    if plan is None:
        return SetOutcome(
            ps.name, "not applied" if reverse else "already applied", (), dry_run, recovered=env.recovered
        )
    owned = _owned(env.dists, site)
    unowned_deletes = [f.path for f in plan if f.after is None and f.path not in owned]
    if unowned_deletes:
        raise PatchSetError(
            "refused, nothing written: deletes files no RECORD owns: " + ", ".join(unowned_deletes),
            path=ps.directory,
        )
    changes = [Change(os.path.join(site, *f.path.split("/")), f.after, _sha(f.before)) for f in plan]
    if reverse:
        changes.append(_state_change(site, lambda applied: applied.pop(ps.name, None)))
    else:
        record = {
            "digest": ps.digest,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "tool_version": __version__,
            "distributions": {d.name: d.version for d in dists},
            "files": {f.path: {"pre": _sha(f.before), "post": _sha(f.after)} for f in plan},
        }
        changes.append(_state_change(site, lambda applied: applied.__setitem__(ps.name, record)))
    action = "reverted" if reverse else "applied"
    if dry_run:
        return SetOutcome(ps.name, action, tuple(plan), True, recovered=env.recovered)
    label = f"{'revert' if reverse else 'apply'} {ps.name}"
    committed = commit(Plan(site, tuple(changes), label=label), locked=True)
    verdicts = _verdicts(ps, plan, env.dists, site) if reverse else ()
    return SetOutcome(ps.name, action, tuple(plan), False, committed, verdicts, env.recovered)


def _verdicts(
    ps: PatchSet, plan: Sequence[FilePlan], dists: Sequence[InstalledDistribution], site: str
) -> tuple[tuple[str, str], ...]:
    """After a revert: is each file back to its RECORD hash, and if not, what else touches it?"""
    entries = {p: e for d in dists for e, p in zip(d.entries, d.paths, strict=True)}
    applied = read_state(site)["applied"]
    out: list[tuple[str, str]] = []
    for f in plan:
        path = os.path.join(site, *f.path.split("/"))
        entry = entries.get(path)
        if entry is None or entry.digest is None:
            gone = f.after is None
            out.append(
                (f.path, "removed (no RECORD row: it was new)" if gone else "not listed in any RECORD")
            )
            continue
        if f.after is not None and matches(entry, f.after):
            out.append((f.path, "verified pristine"))
            continue
        others = [n for n, rec in applied.items() if n != ps.name and f.path in rec.get("files", {})]
        if others:
            out.append((f.path, f"still differs from RECORD: also changed by set {', '.join(others)}"))
        else:
            out.append((f.path, "still differs from RECORD: other changes remain (see patchguard diff)"))
    return tuple(out)


# -- state of sets ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetState:
    """Where one set stands in an environment."""

    name: str
    targets: str
    state: str  # applied | applied (by hand) | not applied | partially applied | drifted | conflict | n/a
    files: int
    detail: tuple[str, ...] = field(default=())


def _file_state(ps: PatchSet, rel: str, read: Any) -> str:
    mine = [p for p in ps.patches if p.path == rel]
    try:
        plan_patches(ps.name, mine, read, reverse=True)
        return "applied"
    except PlanFailed:
        pass
    try:
        plan_patches(ps.name, mine, read)
        return "not applied"
    except PlanFailed:
        return "conflict"


def set_states(
    *, patches: str | None = None, site_packages: Sequence[str] | None = None, python: str | None = None
) -> tuple[list[SetState], tuple[str, ...]]:
    """Every set of the patches directory and its state in the environment (plus what recovery put back)."""
    env = _Env.open(site_packages, python)
    return states_of(env.target, env.dists, patches), env.recovered


def states_of(
    target: Target, dists: list[InstalledDistribution], patches: str | None = None
) -> list[SetState]:
    """:func:`set_states` for an environment already read (``check`` has scanned it: no second pass)."""
    env = _Env(target, dists)
    out: list[SetState] = []
    for ps in load_sets(patches):
        targets = ", ".join(f"{t.distribution} {t.version}".strip() for t in ps.targets)
        try:
            dists = env.installed(ps, force_version=False)
        except UsageError as exc:
            out.append(SetState(ps.name, targets, "n/a", len(ps.paths), (exc.message,)))
            continue
        site = dists[0].site_dir
        read = _reader(site)
        states = {rel: _file_state(ps, rel, read) for rel in ps.paths}
        record = read_state(site)["applied"].get(ps.name)
        detail: list[str] = []
        drifted = []
        if record is not None:
            for rel, hashes in record.get("files", {}).items():
                if _sha(read(rel)) != hashes.get("post"):
                    drifted.append(rel)
            if record.get("digest") != ps.digest:
                detail.append("the set changed since it was applied")
        values = set(states.values())
        if drifted:
            state = "drifted"
            detail += [f"{rel} changed after apply" for rel in drifted]
        elif values == {"applied"}:
            state = "applied" if record is not None else "applied (by hand)"
        elif values == {"not applied"}:
            state = "not applied"
        elif "conflict" in values:
            state = "conflict"
            detail += [
                f"{rel}: neither applies nor reverts cleanly" for rel, v in states.items() if v == "conflict"
            ]
        else:
            state = "partially applied"
            detail += [f"{rel}: {v}" for rel, v in states.items()]
        out.append(SetState(ps.name, targets, state, len(ps.paths), tuple(detail)))
    return out


# -- capture ----------------------------------------------------------------------------------------------


def capture_set(
    name: str,
    distribution: str,
    *,
    paths: Sequence[str] = (),
    version: str | None = None,
    description: str = "",
    force: bool = False,
    patches: str | None = None,
    site_packages: Sequence[str] | None = None,
    python: str | None = None,
    wheelhouse: Sequence[str] = (),
    offline: bool = False,
) -> PatchSet:
    """Write ``patches/<name>/`` from the current modifications of ``distribution``'s files.

    Targets are pinned to ``version`` (a specifier; default ``==`` the installed version). Refuses to
    overwrite an existing set unless ``force``. The set is written to a temporary directory and renamed into
    place, so a failure leaves no half-written set.
    """
    from .explain import diff

    root = patches_dir(patches)
    final = os.path.join(root, name)
    if not SET_NAME.fullmatch(name):
        raise UsageError(f"set name {name!r} must be letters, digits, '.', '_' or '-'")
    if os.path.exists(final) and not force:
        raise UsageError(
            "a patch set of that name exists", path=final, hint="choose another name or pass --force"
        )
    if version is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(version)
        except InvalidSpecifier:
            raise UsageError(
                f"--version {version!r} is not a version specifier", hint="e.g. '>=0.4,<0.5'"
            ) from None
    diffs = diff(
        [distribution],
        site_packages=site_packages,
        python=python,
        paths=paths,
        wheelhouse=wheelhouse,
        offline=offline,
    )
    diffs = [d for d in diffs if not d.path.startswith("../")]
    if not diffs:
        raise UsageError(
            f"no modified files of {distribution} match", hint="check --path, or run patchguard diff"
        )
    binary = [d.path for d in diffs if d.binary]
    if binary:
        raise UsageError(f"binary files cannot go into a patch set: {', '.join(binary)}")
    env = resolve_target(python, site_packages)
    dist = next(d for d in discover(env.site_packages) if d.canonical_name == canonicalize(distribution))
    spec = version or f"=={dist.version}"
    files: list[str] = []
    try:
        os.makedirs(root, exist_ok=True)
        staging: str | None = tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=root)
    except OSError as exc:
        raise UsageError(
            f"cannot write patch sets here ({exc.strerror or exc})", path=root, hint="pass --patches DIR"
        ) from None
    assert staging is not None
    try:
        for i, d in enumerate(diffs, start=1):
            fname = f"{i:04d}-{os.path.basename(d.path).replace('.', '-')}.patch"
            with open(
                os.path.join(staging, fname), "w", encoding="utf-8", errors="surrogateescape", newline=""
            ) as f:
                f.write(d.text())
            files.append(fname)
        with open(os.path.join(staging, "patchset.toml"), "w", encoding="utf-8") as f:
            f.write(
                f"name = {json.dumps(name)}\n"
                f"description = {json.dumps(description or f'captured from {dist.name} {dist.version}')}\n"
                f"targets = [{{distribution = {json.dumps(dist.name)}, version = {json.dumps(spec)}}}]\n"
                f"files = [{', '.join(json.dumps(x) for x in files)}]\n"
            )
        load_set(staging, name)  # validate before anything existing is touched
        # Complete sets only: the directory appears under its name in one rename.
        aside = None
        if os.path.exists(final):
            aside = f"{staging}-replaced"
            os.rename(final, aside)
        os.rename(staging, final)
        staging = None
        if aside:
            shutil.rmtree(aside, ignore_errors=True)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return load_set(final)


def attribute(scanned: Any, patches: str | None = None) -> list[Any]:
    """The scan's findings, with each modification that a known set explains attributed to it.

    A modified file is the work of a set when reverse-applying that set's part for the file gives back
    exactly its RECORD hash; a set that reverses cleanly but leaves other differences is named too, with
    "plus other changes". Sets that cannot be loaded attribute nothing (the scan is not the place to fail).
    """
    from dataclasses import replace

    from .report import Kind

    findings = list(scanned.report.findings)
    if not any(f.kind is Kind.MODIFIED for f in findings):
        return findings
    try:
        sets = load_sets(patches)
    except PatchguardError:
        return findings
    if not sets:
        return findings
    for i, f in enumerate(findings):
        if f.kind is not Kind.MODIFIED or f.distribution is None or os.path.isabs(f.path):
            continue
        dist, entry, _path = scanned.locate(f)
        if dist is None or entry is None:
            continue
        read = _reader(dist.site_dir)
        for ps in sets:
            if f.path not in ps.paths or canonicalize(f.distribution) not in {
                canonicalize(t.distribution) for t in ps.targets
            }:
                continue
            try:
                (fp,) = [
                    p
                    for p in plan_patches(
                        ps.name, [x for x in ps.patches if x.path == f.path], read, reverse=True
                    )
                ]
            except (PlanFailed, ValueError):
                continue
            exact = fp.after is not None and matches(entry, fp.after)
            message = f.message if exact else f"{f.message} (patch set {ps.name} plus other changes)"
            findings[i] = replace(f, patch_set=ps.name, message=message, patch_set_exact=exact)
            break
    return findings
