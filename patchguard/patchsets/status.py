"""Where each set stands in an environment: applied (by patchguard or by hand), not applied, drifted, …"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._fs import sha256_bytes
from ..env import Target
from ..errors import PatchguardError, UsageError
from ..integrity.records import InstalledDistribution
from ..model import AppliedSet, EnvironmentStatus, SetState, SetStatus, for_terminal
from ..state import AppliedRecord, read_state
from .installed import SetEnvironment, reader
from .model import PatchSet, load_sets
from .planner import PlanFailed, Reader, plan_patches

__all__ = ["SetState", "SetStatus", "environment_status", "set_states", "states_of"]


def _file_state(ps: PatchSet, rel: str, read: Reader) -> str:
    mine = [p for p in ps.patches if p.path == rel]
    try:
        read(rel)
    except PatchguardError as exc:  # one unreadable file: this set cannot be told, the others can
        return f"unknown: {exc.message}"
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


def set_states(*, target: Target, patches: str | None = None) -> tuple[list[SetState], tuple[str, ...]]:
    """Every set of the patches directory and its state in ``target`` (plus what recovery put back)."""
    env = SetEnvironment.open(target)
    return states_of(env.target, env.dists, patches), env.recovered


def environment_status(*, target: Target, patches: str | None = None) -> EnvironmentStatus:
    """``status``: the interrupted transactions of each site directory (read before opening the environment
    rolls them back), what that recovery put back, the sets patchguard applied, every set's state, the
    backups. The environment is resolved once; a bad backups setting is refused before anything is rolled
    back, and an error after the rollback still says what was rolled back."""
    from ..txn import backups, keep_backups, pending

    keep = keep_backups()
    unfinished = []
    for site in target.site_packages:
        journal = pending(site)
        if journal is not None:
            unfinished.append((site, journal.txid, journal.label))
    try:
        env = SetEnvironment.open(target)
        states = states_of(env.target, env.dists, patches)
    except PatchguardError as exc:
        exc.message += "".join(
            f"\nbefore this, the unfinished transaction {for_terminal(txid)} ({for_terminal(label)}) in "
            f"{for_terminal(site)} was rolled back"
            for site, txid, label in unfinished
        )
        raise
    applied = tuple(
        AppliedSet(name, site, str(record.time), str(record.tool_version), len(record.files))
        for site in target.site_packages
        for name, record in sorted(read_state(site).items())
    )
    kept = tuple((site, tuple(backups(site)), keep) for site in target.site_packages)
    return EnvironmentStatus(tuple(unfinished), env.recovered, applied, tuple(states), kept)


def states_of(
    target: Target, dists: Sequence[InstalledDistribution], patches: str | None = None
) -> list[SetState]:
    """:func:`set_states` for an environment already read (``check`` has scanned it: no second pass)."""
    env = SetEnvironment(target, tuple(dists))
    out: list[SetState] = []
    for ps in load_sets(patches):
        ps = env.form_for(ps)  # the form for the installed versions is the set here
        targets = ", ".join(str(t) for t in ps.targets)
        try:
            dists = env.installed(ps, force_version=False)
        except UsageError as exc:
            out.append(SetState(ps.name, targets, SetStatus.NOT_APPLICABLE, len(ps.paths), (exc.message,)))
            continue
        out.append(_state_of(ps, targets, env.site(dists), dists))
    return out


def _state_of(ps: PatchSet, targets: str, site: str, dists: Sequence[InstalledDistribution]) -> SetState:
    """Where one set stands in ``site``: its files' states, read against the record of its apply."""
    read = reader(site)
    states = {rel: _file_state(ps, rel, read) for rel in ps.paths}
    record = read_state(site).get(ps.name)
    detail: list[str] = []
    gone = _replaced_since(record, dists)
    if gone:  # an upgrade replaced the files the record speaks of: it says nothing about these
        detail.append(gone)
        record = None
    unknown = [f"{rel}: {v.split(': ', 1)[1]}" for rel, v in states.items() if v.startswith("unknown")]
    if unknown:
        return SetState(ps.name, targets, SetStatus.UNKNOWN, len(ps.paths), tuple(unknown))
    drifted = _drifted(record, read)
    if record is not None and record.digest != ps.digest:
        detail.append("the set changed since it was applied")
    state = _overall(states, record is not None, bool(drifted))
    if drifted:
        detail += [f"{rel} changed after apply" for rel in drifted]
    elif state is SetStatus.CONFLICT:
        detail += [
            f"{rel}: neither applies nor reverts cleanly" for rel, v in states.items() if v == "conflict"
        ]
    elif state is SetStatus.PARTIAL:
        detail += [f"{rel}: {v}" for rel, v in states.items()]
    return SetState(ps.name, targets, state, len(ps.paths), tuple(detail))


def _drifted(record: AppliedRecord | None, read: Callable[[str], bytes | None]) -> list[str]:
    """The files of an applied set that are neither as the apply left them nor back at their pre-image
    (restored or reverted by hand is "not applied", not drift)."""
    if record is None:
        return []
    return [
        rel
        for rel, images in record.files.items()
        if sha256_bytes(read(rel)) not in (images.post, images.pre)
    ]


def _replaced_since(record: AppliedRecord | None, dists: Sequence[InstalledDistribution]) -> str | None:
    """Why a state record is about another release than the installed one (``None``: it is not)."""
    recorded = record.distributions if record is not None else None
    if recorded is None:
        return None
    for d in dists:
        then = recorded.get(d.name)
        if then is not None and then != d.version:
            return f"applied on {d.name} {then}; {d.name} {d.version} replaced its files since"
    return None


def _overall(files: dict[str, str], recorded: bool, drifted: bool) -> SetStatus:
    """A set's status from its files' (``applied`` / ``not applied`` / ``conflict``)."""
    values = set(files.values())
    if drifted:
        return SetStatus.DRIFTED
    if values == {"applied"}:
        return SetStatus.APPLIED if recorded else SetStatus.BY_HAND
    if values == {"not applied"}:
        return SetStatus.NOT_APPLIED
    if "conflict" in values:
        return SetStatus.CONFLICT
    return SetStatus.PARTIAL
