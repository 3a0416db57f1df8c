"""``patchguard plan``'s text, and ``rebase --all``'s: what an upgrade does to the hand patches.

Pure: the plan (or the rebases) in, the text out, every name escaped for a terminal.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import PlannedSet, PlanVerdict, RollbackResult, UpgradePlan, command, for_terminal
from ..results import RebaseResult
from .interface import Format
from .rebase import format_rebase_text

__all__ = ["PlanText", "RebaseAllText", "RollbackText", "format_plan_text"]


def format_plan_text(plan: UpgradePlan) -> str:
    """The upgrade, each set (and its files) with its verdict, the changed files the upgrade replaces, the
    startup hooks, and what to do next."""
    lines = ["upgrade:"]
    lines += [f"  {u.distribution} {u.from_version or '(new)'} -> {u.to_version}" for u in plan.upgrades] or [
        "  nothing changes: every distribution named is at that release already"
    ]
    lines.append("sets:" if plan.sets else "sets: none touched by the upgrade")
    for s in plan.sets:
        lines += _set_lines(s)
    if plan.edits:
        lines.append("changed files the upgrade replaces:")
        lines += [f"  {e.fate:<24} {e.path} ({e.distribution}; {e.severity} {e.rule})" for e in plan.edits]
    if plan.hooks:
        lines.append("startup hooks:")
        lines += [f"  {e.fate:<24} {e.path}" for e in plan.hooks]
    lines.append(_next(plan))
    return "\n".join(for_terminal(line) for line in lines) + "\n"


def _set_lines(s: PlannedSet) -> list[str]:
    head = f"  {s.verdict.value:<16} {s.name} ({s.distribution} {s.from_version or '?'} -> {s.to_version})"
    out = [head]
    for f in s.files:
        detail = f.how if f.verdict is PlanVerdict.CARRIES else f.why
        hunks = f"{f.carried} of {f.hunks} hunk{'s' if f.hunks != 1 else ''}"
        out.append(f"    {f.verdict.value:<16} {f.path} ({hunks}{'; ' + detail if detail else ''})")
    out += [f"    note: {n}" for n in s.notes]
    return out


def _next(plan: UpgradePlan) -> str:
    if plan.complete:
        retire = [s.name for s in plan.sets if s.verdict is PlanVerdict.UPSTREAM]
        said = f"; retire {', '.join(retire)} (already upstream)" if retire else ""
        return (
            f"→ everything carries{said}: {command('lock', '-o', 'before-upgrade.lock')}, upgrade, then "
            f"{command('rebase', '--all')}"
        )
    parts = []
    review = [s.name for s in plan.sets if s.verdict.open]
    if review:
        parts.append(f"{len(review)} set{'s' if len(review) != 1 else ''} to review ({', '.join(review)})")
    if plan.in_no_set:
        n = len(plan.in_no_set)
        parts.append(
            f"{n} changed file{'s' if n != 1 else ''} in no set (the upgrade loses them: "
            f"{command('capture', '--set', 'NAME')} keeps them)"
        )
    return "→ " + "; ".join(parts)


class PlanText(Format[UpgradePlan]):
    name = "text"

    def render(self, document: UpgradePlan) -> str:
        return format_plan_text(document)

    def notes(self, document: UpgradePlan) -> tuple[str, ...]:
        return tuple(for_terminal(n) for n in document.notes)


class RebaseAllText(Format[Sequence[RebaseResult]]):
    """Each set's rebase, one after the other, and how many are carried."""

    name = "text"

    def render(self, document: Sequence[RebaseResult]) -> str:
        if not document:
            return "every set is written for the releases installed: nothing to rebase\n"
        parts = [format_rebase_text(r) for r in document]
        done = sum(1 for r in document if r.complete)
        parts.append(f"{done} of {len(document)} set{'s' if len(document) != 1 else ''} carried whole\n")
        return "\n".join(parts)


class RollbackText(Format[RollbackResult]):
    """Each distribution put back, the sets applied again, and the transaction."""

    name = "text"

    def render(self, document: RollbackResult) -> str:
        if document.nothing_to_do:
            return "the environment is as the lock says already: nothing to roll back\n"
        lines = []
        for d in document.distributions:
            if d.to_version is None:
                lines.append(f"remove     {d.name} {d.from_version} ({d.files} files)")
            else:
                lines.append(
                    f"reinstall  {d.name} {d.from_version or '(absent)'} -> {d.to_version} ({d.wheel})"
                )
        lines += [f"apply      {name} (as the lock had it)" for name in document.sets]
        verb = "would change" if document.dry_run else "changed"
        lines.append(f"{verb} {document.changes} files in one transaction")
        if document.backup_dir:
            lines.append(f"the files it replaced are kept in {document.backup_dir}")
        return "\n".join(for_terminal(line) for line in lines) + "\n"

    def notes(self, document: RollbackResult) -> tuple[str, ...]:
        return tuple(for_terminal(n) for n in document.notes)
