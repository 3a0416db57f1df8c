"""The human formats: the scan table and its summary line, ``check``, the unified diff, ``sets`` and
``status``.

Pure: each function takes finished values and returns a string; the CLI prints it. The classes at the end
are these formats behind the one interface (:class:`~.interface.Format`).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ..diffs import FileDiff, unified_diff
from ..model import (
    AppliedSet,
    CaptureDocument,
    EnvironmentStatus,
    Finding,
    Kind,
    Loaded,
    Report,
    RestoreDocument,
    SetChange,
    SetState,
    SetStatus,
    Severity,
    command,
    for_terminal,
)
from .documents import CheckDocument, ReportDocument
from .interface import Format

__all__ = [
    "CaptureText",
    "CheckStatus",
    "CheckText",
    "DiffText",
    "RestoreText",
    "SetChangeText",
    "SetsText",
    "StatusText",
    "Table",
    "TextTable",
    "format_check_status",
    "format_check_text",
    "format_sets",
    "format_status",
    "format_table",
    "next_steps",
    "summary_line",
]


# Kinds named in the summary line, in this order, with the words used there (one, several).
_SUMMARY_WORDS: Sequence[tuple[Kind, str, str]] = (
    (Kind.INJECTED_CODE, "injected", "injected"),
    (Kind.FUNCTIONAL_CHANGE, "changed", "changed"),
    (Kind.COSMETIC_CHANGE, "cosmetic", "cosmetic"),
    (Kind.MODIFIED, "modified", "modified"),
    (Kind.MISSING, "missing", "missing"),
    (Kind.UNEXPECTED, "unexpected", "unexpected"),
    (Kind.STARTUP_HOOK, "startup hook", "startup hooks"),
    (Kind.RECORD_INVALID, "invalid RECORD row", "invalid RECORD rows"),
    (Kind.UNVERIFIABLE, "unverifiable", "unverifiable"),
    (Kind.DRIFT, "drifted", "drifted"),
)


def _quirk(f: Finding) -> bool:
    """A fact about an upstream RECORD (a wrong row, a path listed twice), or a file another distribution
    installed over this one's: said, but no change of anyone's and no fault."""
    return (f.kind is Kind.RECORD_INVALID and f.severity is Severity.INFO) or f.owned_by is not None


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def summary_line(report: Report) -> str:
    """``6557 files in 3 distributions checked in 0.4 s: 2 modified, 1 missing, 3 injected (2 files)``: the
    wall time of the whole run; each kind once per finding (one per changed line), and the files when a
    kind's findings spread over fewer files than findings."""
    diffed = [f for f in report.findings if not f.baseline_none and not _quirk(f)]
    kinds = Counter(f.kind for f in diffed)
    files: dict[Kind, set[str]] = {}
    for f in diffed:
        files.setdefault(f.kind, set()).add(f.path)
    parts = []
    for k, one, many in _SUMMARY_WORDS:
        if kinds.get(k):
            n_files = len(files[k])
            spread = f" ({_plural(n_files, 'file')})" if n_files < kinds[k] else ""
            parts.append(f"{_plural(kinds[k], one, many)}{spread}")
    parts += _facts(report.findings)
    n_dist = len(report.distributions)
    head = f"{report.files_checked} files in {_plural(n_dist, 'distribution')}"
    head += f" checked in {report.seconds:.1f} s"
    return f"{head}: {', '.join(parts)}" if parts else f"{head}: no findings"


def _facts(findings: Sequence[Finding]) -> list[str]:
    """The summary's words for what is no one's change: files two distributions install, upstream RECORD
    quirks, and rule hits in files judged without a baseline."""
    parts = []
    shared = sum(1 for f in findings if f.owned_by is not None)
    if shared:
        parts.append(f"{shared} overwritten by another distribution")
    quirks = sum(1 for f in findings if _quirk(f) and f.owned_by is None)
    if quirks:
        parts.append(f"{_plural(quirks, 'upstream RECORD quirk')} (info)")
    whole = [f for f in findings if f.baseline_none]
    if whole:
        n_files = len({f.path for f in whole})
        parts.append(
            f"{_plural(len(whole), 'rule hit')} without a baseline "
            f"({_plural(n_files, 'file')}: may be upstream code)"
        )
    return parts


def _group(findings: Iterable[Finding]) -> dict[tuple[str | None, str | None], list[Finding]]:
    groups: dict[tuple[str | None, str | None], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.distribution, f.version), []).append(f)
    return groups


# ANSI colours of the severity labels (a terminal only: the CLI decides).
_COLOURS = {"HIGH": "\x1b[1;31m", "MODERATE": "\x1b[33m", "MINOR": "\x1b[36m", "INFO": "\x1b[2m"}


def _label(f: Finding, colour: bool) -> str:
    text = f"{f.severity.label.upper():<9}"
    if not colour:
        return text
    word = text.rstrip()
    return f"{_COLOURS.get(word, '')}{word}\x1b[0m{text[len(word) :]}"


def _code_tail(f: Finding, said: _Said) -> list[str]:
    """What a code finding's last line says: other rules on its line, its gate, its reach and why (unless the
    table says that once), whether it was loaded since the edit (and why that is unknown, when it is)."""
    tail = []
    also = [e[len("also: ") :] for e in f.evidence if e.startswith("also: ")]
    if also:
        tail.append(f"also: {for_terminal(', '.join(also))}")
    if f.gate:
        tail.append(f"gate: {for_terminal(str(f.gate.condition or f.gate.kind.value))}")
    if f.reach:
        why = f.evidence[0] if f.evidence and f.evidence[0] != said.reach else None
        tail.append(f"reach: {f.reach.value}" + (f" ({for_terminal(why)})" if why else ""))
    if f.loaded is Loaded.UNKNOWN:
        why = _loaded_why(f)
        tail.append(f.loaded.words + (f": {for_terminal(why)}" if why and why != said.loaded else ""))
    elif f.loaded:
        tail.append(f.loaded.words)
    return tail


def _finding_lines(f: Finding, kind_w: int, colour: bool = False, said: _Said | None = None) -> list[str]:
    """A finding's lines in the table (``said``: the reasons the table says once, under it)."""
    pad = " " * 11
    if f.source is not None and f.line is not None:
        # A code finding: where and which rule, the line itself, then its gate and reach.
        rule = f"{f.rule} (no baseline)" if f.baseline_none else f.rule
        head = f"  {_label(f, colour)}{for_terminal(f.path)}:{f.line}  {rule}"
        out = [head + (f"  {for_terminal(f.function)}" if f.function else ""), pad + for_terminal(f.source)]
        tail = _code_tail(f, said or _Said(None, None))
        if f.patch_set:
            tail.append(f"patch set: {for_terminal(f.patch_set)}")
        if f.baseline_none:
            tail.append(
                "baseline: none (no pristine wheel: the whole file was judged, this may be upstream code)"
            )
        return [*out, pad + " · ".join(tail)] if tail else out
    where = for_terminal(f.path) + (f":{f.line}" if f.line else "")
    detail = [for_terminal(f.message)]
    if f.function:
        detail.insert(0, for_terminal(f.function))
    if f.patch_set:
        detail.append(f"patch set: {for_terminal(f.patch_set)}")
    return [f"  {_label(f, colour)}{f.rule:<{kind_w + 2}}{where}", pad + " · ".join(detail)]


def format_table(report: Report, colour: bool = False, wanted: frozenset[str] = frozenset()) -> str:
    """A human table grouped by distribution, worst first, then the summary line. No hint suggests
    reverting a ``wanted`` set (one the policy allows or requires)."""
    lines: list[str] = []
    groups = _group(report.findings)
    said = _said_once(report.findings)
    hints: dict[tuple[str | None, str | None], str] = {
        (n.distribution, n.version): n.hint for n in report.no_baseline
    }
    # Distributions in name order; unowned files (distribution None) last, under their own heading.
    for dist, version in sorted(groups, key=lambda k: (k[0] is None, (k[0] or "").lower())):
        items = sorted(groups[(dist, version)], key=lambda f: (-f.severity, f.path, f.line or 0))
        lines.append(for_terminal(f"{dist} {version}") if dist else "not owned by any distribution")
        kind_w = max(len(f.rule) for f in items)  # the rule id, as in check, JSON, SARIF and policies
        shown, folded = _fold_minor_changes(items)
        for f in shown:
            lines.extend(_finding_lines(f, kind_w, colour, said))
        lines += folded
        steps = next_steps(dist, version, items, hints.get((dist, version)), wanted)
        lines += [f"  → {step}" for step in steps]
        lines.append("")
    for n in report.no_baseline:
        dist = for_terminal(f"{n.distribution} {n.version}")
        lines.append(
            f"no pristine source for {dist} ({for_terminal(n.reason)}): its changes cannot be shown or "
            f"judged against upstream; {for_terminal(n.hint)}"
        )
    if said.reach is not None:
        lines.append(f"reach, where no other reason is given above: {for_terminal(said.reach)}")
    if said.loaded is not None:
        lines.append(f"loaded, where it cannot be told and no reason is given: {for_terminal(said.loaded)}")
    lines.append(summary_line(report))
    return "\n".join(lines) + "\n"


class _Said(NamedTuple):
    """Reasons the table says once, under it, instead of on every row that shares them."""

    reach: str | None
    loaded: str | None


def _loaded_why(f: Finding) -> str | None:
    """Why it cannot be told whether a changed file was loaded since its edit (the bytecode's evidence)."""
    return next((e for e in f.evidence[1:] if "bytecode" in e), None) if f.loaded is Loaded.UNKNOWN else None


def _said_once(findings: Sequence[Finding]) -> _Said:
    """The reach reason (``what is served is not known: pass --arch …``) and the reason a file's loading is
    unknown that most code findings share, when several do: the table says each once."""
    coded = [f for f in findings if f.reach is not None and f.line]
    reach = Counter(f.evidence[0] for f in coded if f.evidence).most_common(1)
    loaded = Counter(w for w in map(_loaded_why, coded) if w).most_common(1)
    return _Said(
        reach[0][0] if reach and reach[0][1] > 1 else None,
        loaded[0][0] if loaded and loaded[0][1] > 1 else None,
    )


_FOLD_FROM = 4  # a file with this many minor changes shows them as one line


def _fold_minor_changes(items: Sequence[Finding]) -> tuple[list[Finding], list[str]]:
    """The findings to show one by one, and one line per file for its many minor functional or cosmetic
    changes (an upgraded file has dozens: the JSON keeps every one)."""
    minor = (Kind.FUNCTIONAL_CHANGE, Kind.COSMETIC_CHANGE)
    per_file = Counter(f.path for f in items if f.kind in minor)
    many = {path for path, n in per_file.items() if n >= _FOLD_FROM}
    shown = [f for f in items if not (f.kind in minor and f.path in many)]
    folded = []
    for path in sorted(many):
        lines = sorted(f.line for f in items if f.kind in minor and f.path == path and f.line is not None)
        where = ", ".join(map(str, lines[:6])) + (", …" if len(lines) > 6 else "")
        count = per_file[path]
        folded.append(
            f"  {'MINOR':<9}{for_terminal(path)}  {count} functional or cosmetic changes (lines {where})"
        )
    return shown, folded


_RESTORED = (
    Kind.MODIFIED,
    Kind.MISSING,
    Kind.INJECTED_CODE,
    Kind.FUNCTIONAL_CHANGE,
    Kind.COSMETIC_CHANGE,
)


def next_steps(
    dist: str | None,
    version: str | None,
    findings: Sequence[Finding],
    no_wheel: str | None = None,
    wanted: frozenset[str] = frozenset(),
) -> list[str]:
    """What fixes one group of findings: revert the sets that explain changes, restore the rest from the
    wheel (once there is one: ``no_wheel`` says how to get it), delete what nobody installed, reinstall
    what has a broken RECORD (not one the wheel shipped so)."""
    sets = sorted({f.patch_set for f in findings if f.patch_set and f.patch_set not in wanted})
    steps = [command("revert", "--set", name) for name in sets]
    if dist is None:  # files no distribution owns: a set's (wanted, or reverted), else deleted or kept
        return steps + _unowned_steps(findings)
    steps += _restore_step(dist, findings, no_wheel)
    if any(f.kind is Kind.RECORD_INVALID and f.severity > Severity.INFO for f in findings):
        steps.append(f"pip install --force-reinstall --no-deps {for_terminal(f'{dist}=={version}')}")
    return steps


def _unowned_steps(findings: Sequence[Finding]) -> list[str]:
    """Files no distribution owns and no set explains: deleted — or, for a startup hook whose settings are
    wanted (NCCL settings in ``sitecustomize.py``), kept in a set, so check, lock and a fleet know them."""
    loose = sorted(
        {f.path for f in findings if f.kind in (Kind.STARTUP_HOOK, Kind.UNEXPECTED) and not f.patch_set}
    )
    steps = [f"delete {for_terminal(p)} (no distribution owns it)" for p in loose]
    hooks = sorted({f.path for f in findings if f.kind is Kind.STARTUP_HOOK and not f.patch_set})
    if hooks:
        paths = [w for p in hooks for w in ("--path", p)]
        steps.append(
            "or, if its settings are wanted, keep them in a set: "
            + command("capture", "--set", "startup-hooks", "--unowned", *paths)
        )
    return steps


def _restore_step(dist: str, findings: Sequence[Finding], no_wheel: str | None) -> list[str]:
    """``patchguard restore`` of the changes no set explains (and files nobody installed)."""
    rest = sorted(
        {f.path for f in findings if f.kind in _RESTORED and not f.patch_set and f.owned_by is None}
    )
    unexpected = any(f.kind is Kind.UNEXPECTED for f in findings)
    if no_wheel is not None and rest:
        return [f"{for_terminal(no_wheel)}, then {command('restore', dist)}"]
    if not rest and not unexpected:
        return []
    paths = [w for p in rest for w in ("--path", p)] if 0 < len(rest) <= 3 and not unexpected else []
    return [command("restore", dist, *paths, *(["--remove-unexpected"] if unexpected else []))]


def format_check_text(passed: bool, violations: Sequence[str], policy: str | None, report: Report) -> str:
    """``check``'s verdict for a person: every violation, then one line saying pass or fail."""
    lines = [for_terminal(v) for v in violations]
    n = len(violations)
    where = f" (policy: {for_terminal(policy)})" if policy else ""
    n_dist = len(report.distributions)
    summary = f"{report.files_checked} files in {n_dist} distribution{'s' if n_dist != 1 else ''}"
    if passed:
        lines.append(f"check passed: {summary}, no violation{where}")
    else:
        lines.append(f"check failed: {n} violation{'s' if n != 1 else ''} in {summary}{where}")
    return "\n".join(lines) + "\n"


_STATUS_WIDTH = 200  # a health check's line: node-problem-detector keeps max_output_length (80 by default)


def format_check_status(passed: bool, violations: Sequence[str], report: Report) -> str:
    """``check``'s verdict as one line for a health checker (node-problem-detector's custom plugins, Slurm's
    NHC): ``OK: ...`` (exit 0), ``PROBLEM: <n> violations; <the first>`` (exit 1); the count and the first
    violation first, as a checker that keeps a line's start keeps what matters."""
    n_dist = len(report.distributions)
    summary = f"{report.files_checked} files in {n_dist} distribution{'s' if n_dist != 1 else ''}"
    if passed:
        line = f"OK: {summary} checked, no violation"
    else:
        n = len(violations)
        line = f"PROBLEM: {n} violation{'s' if n != 1 else ''}; {for_terminal(violations[0]) if n else ''}"
    return (line if len(line) <= _STATUS_WIDTH else line[: _STATUS_WIDTH - 1] + "…") + "\n"


def format_sets(states: Sequence[SetState]) -> str:
    """``patchguard sets``: one line per set (name, targets, state, files), its details below it."""
    w_name = max(len(for_terminal(s.name)) for s in states)
    w_targets = max(len(for_terminal(s.targets)) for s in states)
    lines: list[str] = []
    for s in states:
        files = f"{s.files} file{'s' if s.files != 1 else ''}"
        name, targets = for_terminal(s.name), for_terminal(s.targets)
        lines.append(f"{name:<{w_name}}  {targets:<{w_targets}}  {s.state.value:<18} {files}")
        lines += [f"{'':<{w_name}}  {for_terminal(d)}" for d in s.detail]
    return "\n".join(lines) + "\n"


def _files(n: int) -> str:
    return f"{n} file{'s' if n != 1 else ''}"


def format_status(
    recovered: Sequence[str], applied: Sequence[AppliedSet], states: Sequence[SetState]
) -> str:
    """``patchguard status``: what recovery put back, the sets patchguard applied, the sets in trouble."""
    lines: list[str] = []
    if recovered:
        lines.append(f"  rolled back: {len(recovered)} file{'s' if len(recovered) != 1 else ''} put back")
    by_name = {s.name: s for s in states}
    for a in applied:
        name, files = a.name, _files(a.files)
        when, tool = for_terminal(a.time), for_terminal(a.tool_version)
        lines.append(f"applied  {for_terminal(name)}  at {when}  ({files}, by patchguard {tool})")
        now = by_name.get(name)
        if now is not None and not now.state.in_place and not now.state.troubled:
            lines.append(
                f"  not in place now: {now.state.value}" + "".join(f"; {for_terminal(d)}" for d in now.detail)
            )
    if not applied:
        lines.append("no set applied by patchguard")
    for s in states:
        if s.state.troubled or s.state is SetStatus.BY_HAND:
            lines.append(f"{s.state.value:<18} {for_terminal(s.name)}")
            lines += [f"  {for_terminal(d)}" for d in s.detail]
    return "\n".join(lines) + "\n"


class Table(Format[ReportDocument]):
    """The scan table (``--format table``, the default)."""

    name = "table"

    def render(self, document: ReportDocument) -> str:
        return format_table(document.report, colour=document.colour, wanted=document.wanted)


class TextTable(Table):
    """The scan table under its other name (``--format text``, as every other command calls it)."""

    name = "text"


class CheckText(Format[CheckDocument]):
    """``check``'s verdict for a person."""

    name = "text"

    def render(self, document: CheckDocument) -> str:
        r = document.result
        return format_check_text(r.passed, r.violations, r.policy.path, r.report)


class CheckStatus(Format[CheckDocument]):
    """``check --format status``: one line, ``OK:``/``PROBLEM:``/``UNKNOWN:``, for health checkers that read
    the exit code (0 ok, 1 problem, other unknown) and a line of output."""

    name = "status"
    what = "the status"

    def render(self, document: CheckDocument) -> str:
        r = document.result
        return format_check_status(r.passed, r.violations, r.report)

    def failure(self, reason: str) -> str:
        line = f"UNKNOWN: could not check: {for_terminal(reason)}"
        return (line if len(line) <= _STATUS_WIDTH else line[: _STATUS_WIDTH - 1] + "…") + "\n"


class CheckNagios(Format[CheckDocument]):
    """``check --format nagios``: the Nagios plugin guidelines' one line, ``PATCHGUARD OK - …`` / ``CRITICAL``
    / ``UNKNOWN`` with performance data, and their exit codes (0 OK, 2 CRITICAL, 3 UNKNOWN) — what Nagios,
    Icinga, Sensu and Checkmk read (their 2 is CRITICAL: patchguard's own 2, "could not check", is 3 here)."""

    name = "nagios"
    what = "the status"
    exits = (0, 2, 3)

    def render(self, document: CheckDocument) -> str:
        r = document.result
        by = Counter(f.severity.label for f in r.report.findings)
        levels = (Severity.HIGH, Severity.MODERATE, Severity.MINOR, Severity.INFO)
        perf = " ".join(f"{s.label}={by[s.label]};;;0" for s in levels)
        perf += f" violations={len(r.violations)};;;0"
        if r.passed:
            text = f"PATCHGUARD OK - {r.report.files_checked} files checked, no violation"
        else:
            n = len(r.violations)
            first = for_terminal(r.violations[0]) if n else ""
            text = f"PATCHGUARD CRITICAL - {n} violation{'s' if n != 1 else ''}; {first}"
        text = text.replace("|", "/")  # '|' starts Nagios's performance data
        return (text if len(text) <= _STATUS_WIDTH else text[: _STATUS_WIDTH - 1] + "…") + f" | {perf}\n"

    def failure(self, reason: str) -> str:
        text = f"PATCHGUARD UNKNOWN - could not check: {for_terminal(reason)}".replace("|", "/")
        return (text if len(text) <= _STATUS_WIDTH else text[: _STATUS_WIDTH - 1] + "…") + "\n"


class DiffText(Format[Sequence[FileDiff]]):
    """The unified diff, with the file names' bytes as they are on disk (``git apply`` must take them)."""

    name = "text"

    def render(self, document: Sequence[FileDiff]) -> str:
        return unified_diff(document)

    def notes(self, document: Sequence[FileDiff]) -> tuple[str, ...]:
        return () if document else ("no changes: every file is as its wheel installed it",)


class SetsText(Format[Sequence[SetState]]):
    """``patchguard sets`` (saying so when there is none)."""

    name = "text"

    def render(self, document: Sequence[SetState]) -> str:
        if not document:
            return "no patch sets (looked in the patches directory; see --patches)\n"
        return format_sets(document)


class StatusText(Format[EnvironmentStatus]):
    """``status``: the interrupted transactions found, the sets applied and in trouble, the backups kept."""

    name = "text"

    def render(self, document: EnvironmentStatus) -> str:
        unfinished = "".join(
            f"unfinished transaction {for_terminal(txid)} ({for_terminal(label)}) in {for_terminal(site)}\n"
            for site, txid, label in document.unfinished
        )
        status = format_status(document.recovered, document.applied, document.states)
        return unfinished + status + "".join(_backups_line(*b) for b in document.backups)


def _backups_line(site: str, kept: Sequence[tuple[str, int]], keep: int) -> str:
    """The backups kept in a site directory: one line, or none when none is kept."""
    if not kept:
        return ""
    size = sum(n for _txid, n in kept)
    where = for_terminal(os.path.join(site, ".patchguard", "backups"))
    return (
        f"backups  {len(kept)} transaction{'s' if len(kept) != 1 else ''}, {size / 1e6:.1f} MB in "
        f"{where} (the last {keep} are kept: keep_backups)\n"
    )


class SetChangeText(Format[SetChange]):
    """What apply or revert did to each file, and the transaction: the lines a person reads."""

    name = "text"

    def render(self, document: SetChange) -> str:
        if not document.changed:
            return for_terminal(f"{document.name} is {document.action}; nothing to do") + "\n"
        lines = []
        for f in document.files:
            moved = [o for o in f.offsets if o]
            note = f" (hunks moved by {', '.join(f'{o:+d}' for o in moved)} lines)" if moved else ""
            line = ("would " if document.dry_run else "") + f"{f.change:<9}{for_terminal(f.path)}{note}"
            lines.append(line + (f": {for_terminal(f.verdict)}" if f.verdict is not None else ""))
        if not document.dry_run:
            n = len(document.files)
            what = f"{document.action} {for_terminal(document.name)}"
            lines.append(f"{what}: {n} file{'s' if n != 1 else ''} in one transaction")
        return "".join(line + "\n" for line in lines)


class RestoreText(Format[RestoreDocument]):
    """Each file restore put back (or would), and the transaction that did it."""

    name = "text"

    def render(self, document: RestoreDocument) -> str:
        if not document.files:
            return "nothing to restore\n"
        would = "would " if document.dry_run else ""
        lines = [f"{would}{action:<9}{for_terminal(path)}" for action, path in document.files]
        if not document.dry_run and document.txid is not None and document.clean:
            n = len(document.files)
            lines.append(
                f"{n} file{'s' if n != 1 else ''} restored in one transaction; "
                f"verified pristine against {' and '.join(document.records)} "
                f"(originals kept in {for_terminal(document.backup_dir or '')})"
            )
        return "".join(line + "\n" for line in lines)


class CaptureText(Format[CaptureDocument]):
    """Where the set was written, for what, and the files it holds."""

    name = "text"

    def render(self, document: CaptureDocument) -> str:
        targets = ", ".join(
            "environment" if not d else f"{d} {v}".strip() for d, v in document.targets
        )
        return (
            f"wrote {for_terminal(document.directory)} ({for_terminal(targets)}): "
            f"{for_terminal(', '.join(document.paths))}\n"
        )
