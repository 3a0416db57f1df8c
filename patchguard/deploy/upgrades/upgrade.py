"""Upgrade day, before the upgrade: which releases it installs, and what becomes of the hand patches.

:func:`read_targets` reads what the upgrade installs — requirements pinned to a release (``vllm==0.34.0``),
requirement files of them, or pip's own installation report (``pip install --dry-run --report FILE``: every
distribution pip would install, dependencies included). :func:`plan_upgrade` then says, for every set the
upgrade touches (one whose version will not admit the new release, or that is in place now and so will be
replaced), what ``rebase --all`` will do after it — it runs the same rebase, as a dry run, against the new
release's pristine files fetched now — and, of the scan, which changed files the upgrade replaces (carried
by a set, or lost: in no set) and what becomes of each startup hook. Nothing in the environment changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ...env import Target
from ...errors import PatchguardError, UsageError
from ...integrity.inventory import Scanned
from ...integrity.records import canonicalize
from ...model import (
    Finding,
    Kind,
    PlannedEdit,
    PlannedFile,
    PlannedSet,
    PlanVerdict,
    Upgrade,
    UpgradePlan,
    printable,
)
from ...patchsets.model import PatchSet, SetTarget
from ...patchsets.rebase import part_of, rebase_set, sets_to_carry
from ...pristine.sources import SourceOptions
from ...results import FileOutcome, RebasedFile, RebaseResult

__all__ = ["plan_upgrade", "read_targets"]


def read_targets(
    requirements: Sequence[str] = (), files: Sequence[str] = (), report: str | None = None
) -> dict[str, tuple[str, str]]:
    """Canonical name → (name as written, release) of what the upgrade installs. A requirement must pin one
    release (``==``): a range is pip's to resolve (its ``--dry-run --report`` says what it chose)."""
    out: dict[str, tuple[str, str]] = {}
    if report is not None:
        out.update(_from_report(report))
    for path in files:
        for text in _requirement_lines(Path(path), set()):
            _pin(out, text, path)
    for text in requirements:
        _pin(out, text, None)
    if not out:
        raise UsageError("plan needs what the upgrade installs", hint="name it: patchguard plan vllm==0.34.0")
    return out


def _pin(out: dict[str, tuple[str, str]], text: str, path: str | None) -> None:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError(f"not a requirement: {printable(text)} ({exc})", path=path) from exc
    if req.marker is not None and not req.marker.evaluate():
        return  # not for this platform, as pip would skip it
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator not in ("==", "===") or "*" in specs[0].version:
        raise UsageError(
            f"{printable(text)} does not pin one release",
            path=path,
            hint="pin it (name==version), or let pip choose: pip install --dry-run --report plan.json "
            "REQUIREMENTS, then patchguard plan --report plan.json",
        )
    out[canonicalize(req.name)] = (req.name, specs[0].version)


def _requirement_lines(path: Path, seen: set[Path]) -> Iterable[str]:
    """The requirements of a requirements file (comments, blank lines and pip options left out; ``-r``
    files followed, each once)."""
    where = path.resolve()
    if where in seen:
        return
    seen.add(where)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {printable(str(path))}: {exc}", path=str(path)) from exc
    for line in text.replace("\\\n", " ").splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        nested = _NESTED.match(line)
        if nested:
            yield from _requirement_lines(path.parent / nested.group(1).strip(), seen)
        elif not line.startswith("-"):
            yield line


# ``-r FILE``, ``-rFILE``, ``--requirement FILE``, ``--requirement=FILE``: another requirements file.
_NESTED = re.compile(r"(?:-r|--requirement)(?:=|\s+)?(\S.*)$")


def _from_report(path: str) -> dict[str, tuple[str, str]]:
    """What pip's installation report (``pip install --dry-run --report FILE``) says it would install."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        installs = doc["install"]
        pairs = [(item["metadata"]["name"], item["metadata"]["version"]) for item in installs]
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"cannot read pip's report: {exc}", path=path) from exc
    except (KeyError, TypeError) as exc:
        raise UsageError(
            "not pip's installation report (no install list of metadata names and versions)",
            path=path,
            hint="write one with: pip install --dry-run --report FILE REQUIREMENTS",
        ) from exc
    if not all(isinstance(n, str) and isinstance(v, str) for n, v in pairs):
        raise UsageError("pip's report names a distribution or version that is not text", path=path)
    return {canonicalize(n): (n, v) for n, v in pairs}


def plan_upgrade(
    scanned: Scanned,
    targets: Mapping[str, tuple[str, str]],
    *,
    patches: str | None,
    fetch: SourceOptions,
) -> UpgradePlan:
    """The plan of an upgrade to ``targets`` (:func:`read_targets`) of the scanned environment."""
    installed = {d.canonical_name: d for d in scanned.dists}
    upgrades = tuple(
        Upgrade(installed[c].name, installed[c].version, v) if c in installed else Upgrade(name, None, v)
        for c, (name, v) in sorted(targets.items())
        if c not in installed or not _same_version(installed[c].version, v)
    )
    changing = {canonicalize(u.distribution): u.to_version for u in upgrades}
    sets = [
        _planned(ps, t, version, patches, scanned.target, fetch)
        for ps, t, version in sets_to_carry(patches, scanned.dists, changing)
    ]
    findings = scanned.report.findings
    edits = _edits(findings, changing, sets)
    hooks = tuple(_hook(f, changing) for f in findings if f.kind is Kind.STARTUP_HOOK)
    return UpgradePlan(upgrades, tuple(sets), hooks, edits)


def _planned(
    ps: PatchSet,
    t: SetTarget,
    version: str,
    patches: str | None,
    environment: Target,
    fetch: SourceOptions,
) -> PlannedSet:
    """What ``rebase`` would do to the set's part for ``t`` when its distribution is at ``version``."""
    try:
        result = rebase_set(
            ps.name,
            to_version=version,
            environment=environment,
            patches=patches,
            fetch=fetch,
            dry_run=True,
            target=part_of(ps, t),
        )
    except PatchguardError as exc:  # the new release cannot be had, a file cannot be read: say so
        return PlannedSet(ps.name, t.distribution, "", version, PlanVerdict.REVIEW, notes=(exc.message,))
    return planned_set(result)


def planned_set(result: RebaseResult) -> PlannedSet:
    """A rebase's result, as the plan says it: each file's verdict, and the set's."""
    files = tuple(_planned_file(f) for f in result.files)
    verdicts = {f.verdict for f in files}
    if not files:
        verdict = PlanVerdict.UNCHANGED
    elif PlanVerdict.REVIEW in verdicts:
        verdict = PlanVerdict.REVIEW
    elif PlanVerdict.LOST in verdicts:
        verdict = PlanVerdict.LOST
    elif verdicts == {PlanVerdict.UPSTREAM}:
        verdict = PlanVerdict.UPSTREAM
    else:
        verdict = PlanVerdict.CARRIES
    return PlannedSet(
        result.name, result.distribution, result.from_version, result.to_version, verdict, files, result.notes
    )


_VERDICTS = {
    FileOutcome.CARRIED: PlanVerdict.CARRIES,
    FileOutcome.MOVED: PlanVerdict.CARRIES,
    FileOutcome.RESOLVED: PlanVerdict.CARRIES,
    FileOutcome.UPSTREAM: PlanVerdict.UPSTREAM,
    FileOutcome.CONFLICT: PlanVerdict.REVIEW,
    FileOutcome.LOST: PlanVerdict.LOST,
    FileOutcome.DROPPED: PlanVerdict.LOST,
}


def _planned_file(f: RebasedFile) -> PlannedFile:
    verdict = _VERDICTS[f.outcome]
    how = ""
    if verdict is PlanVerdict.CARRIES:
        how = f.merged_by or "lines"
        if f.new_path and f.new_path != f.path:
            how += f", moved to {f.new_path} ({(f.similarity or 0):.0%} alike)"
        if f.outcome is FileOutcome.RESOLVED:
            how = "resolved by hand"
    why = ""
    if f.outcome is FileOutcome.CONFLICT:
        why = f.doubt or f"{f.conflicting} of {f.hunks} hunks conflict with the new release"
    elif verdict is PlanVerdict.LOST:
        why = "the file is gone from the new release and no new file is like it"
    carried = f.hunks - f.conflicting if verdict is not PlanVerdict.LOST else 0
    return PlannedFile(f.path, verdict, f.hunks, carried, how, why, f.new_path)


_REPLACED = (Kind.MODIFIED, Kind.MISSING)


def _same_version(installed: str, wanted: str) -> bool:
    """``0.34`` is ``0.34.0`` (PEP 440); a version that does not parse is compared as written."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(installed) == Version(wanted)
    except InvalidVersion:
        return installed == wanted


def _set_fate(name: str, path: str, sets: Sequence[PlannedSet]) -> str:
    """What the upgrade does to a file of set ``name``, as the set's plan says: carried, or not."""
    mine = [s for s in sets if s.name == name]
    verdicts = {f.verdict for s in mine for f in s.files if path in (f.path, f.new_path)}
    verdicts |= {s.verdict for s in mine if not s.files and s.verdict is PlanVerdict.REVIEW}
    if PlanVerdict.REVIEW in verdicts:
        return f"in set {name}: needs review"
    if PlanVerdict.LOST in verdicts:
        return f"in set {name}: lost"
    if verdicts == {PlanVerdict.UPSTREAM}:
        return f"in set {name}: already upstream"
    return f"carried by {name}"


def _edits(
    findings: Sequence[Finding], changing: Mapping[str, str], sets: Sequence[PlannedSet] = ()
) -> tuple[PlannedEdit, ...]:
    """The changed files of the distributions the upgrade replaces: carried by a set (or, as the set's plan
    says, needing review, lost, already upstream), or lost (in no set); each with the worst finding about
    it, which the upgrade removes."""
    replaced = [
        f
        for f in findings
        if f.kind in _REPLACED and f.distribution is not None and canonicalize(f.distribution) in changing
    ]
    worst_of: dict[tuple[str | None, str], Finding] = {}
    for g in findings:  # the worst finding about each file (one pass: a box has thousands)
        key = (g.distribution, g.path)
        if key not in worst_of or g.severity > worst_of[key].severity:
            worst_of[key] = g
    out = []
    for f in replaced:
        worst = worst_of[(f.distribution, f.path)]
        if f.patch_set and f.patch_set_exact:
            fate = _set_fate(f.patch_set, f.path, sets)
        elif f.patch_set:
            fate = f"lost: changes beyond set {f.patch_set} are in no set"
        else:
            fate = "lost: in no set"
        out.append(
            PlannedEdit(f.path, f.distribution, fate, f.kind.value, worst.severity.label, worst.rule.value)
        )
    return tuple(out)


def _hook(f: Finding, changing: Mapping[str, str]) -> PlannedEdit:
    if f.distribution is None:
        fate = "kept: no distribution owns it"
    elif canonicalize(f.distribution) in changing:
        fate = "replaced by the upgrade"
    else:
        fate = "kept: its distribution keeps its release"
    return PlannedEdit(f.path, f.distribution, fate, f.kind.value, f.severity.label, f.rule.value)
