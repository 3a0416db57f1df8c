"""``patchguard rebase``'s text: what became of each file of the set, the hunks carried, and the one thing to
do next.

Pure: the rebase's result in, the text out (names shown escaped). Where the pristine releases came from and
the rebase's notes are lines for stderr (:meth:`RebaseText.notes`), not part of the text.
"""

from __future__ import annotations

from ..model import command, for_terminal
from ..results import FileOutcome, RebasedFile, RebaseResult
from .interface import Format

__all__ = ["RebaseText", "format_rebase_text"]


def format_rebase_text(r: RebaseResult) -> str:
    """The set's files one line each (and what to edit or delete), the count of hunks carried, and what
    became of the set."""
    if not r.files:
        what = f"is written for {r.distribution} {r.to_version}" if r.distribution else r.notes[0]
        return for_terminal(f"{r.name} {what}: nothing to rebase") + "\n"
    lines = [for_terminal(f"rebase {r.name}: {r.distribution} {r.from_version} -> {r.to_version}")]
    for f in r.files:
        lines += _file_lines(r, f)
    total, carried, _left = r.hunks
    lines.append(
        f"{carried} of {total} hunks carried; {len(r.conflicts)} file{'s' if len(r.conflicts) != 1 else ''} "
        f"in conflict, {len(r.lost)} lost"
    )
    lines.append(_outcome(r))
    return "\n".join(lines) + "\n"


def _file_lines(r: RebaseResult, f: RebasedFile) -> list[str]:
    """One file's line, and the review file to edit (a conflict) or delete (lost) when one was written."""
    where = f" -> {for_terminal(f.new_path)}" if f.new_path and f.new_path != f.path else ""
    plural = "s" if f.hunks != 1 else ""
    extra = {
        "moved": f" ({(f.similarity or 0):.0%} similar)",
        "upstream": f" ({r.to_version} already has this change)",
        "conflict": f" ({f.conflicting} of {f.hunks} hunk{plural} conflict, {f.regions} region"
        f"{'s' if f.regions != 1 else ''})",
        "lost": " (no file new in the release is similar enough"
        + (f"; the best was {f.similarity:.0%} alike" if f.similarity else "")
        + ")",
        "dropped": " (its changes left behind)",
    }.get(f.outcome.value, f" ({f.hunks} hunk{plural})")
    if f.adjacent:
        extra += f" ({f.adjacent} next to an upstream change, merged line by line: review it)"
    if f.merged_by:
        extra += f" (merged by {f.merged_by})"
    if f.doubt:
        extra += f" (a clean merge that is not certain: {f.doubt})"
    lines = [f"  {f.outcome.value:<9} {for_terminal(f.path)}{where}{for_terminal(extra)}"]
    if f.review and f.outcome.open and not r.dry_run:
        what = "edit" if f.outcome is FileOutcome.CONFLICT else "delete to drop"
        lines.append(f"            {what}: {for_terminal(f.review)}")
    return lines


def _outcome(r: RebaseResult) -> str:
    """What became of the set, and the one thing to do next (names shown escaped)."""
    name, dist, to = for_terminal(r.name), for_terminal(r.distribution), for_terminal(r.to_version)
    if not r.complete:
        if r.dry_run:
            return f"→ would write the files to resolve to patches/{name}.rebase/; the set stays as it is"
        return (
            f"→ resolve them in {for_terminal(str(r.review_dir))} (SUMMARY.txt says how), then run "
            f"`{command('rebase', '--set', r.name)}` again; the set stays as it is until then"
        )
    if r.written:
        return (
            f"rewrote {name} for {dist} =={to} (the {for_terminal(r.from_version)} set is kept in "
            f"{for_terminal(str(r.history_dir))})\n→ {command('apply', '--set', r.name)}"
        )
    if r.dry_run:
        return f"→ would rewrite {name} for {dist} =={to}"
    return (
        f"{dist} {to} already has every change of {name}: nothing to carry "
        "(the set is left as it is; delete it once no environment needs it)"
    )


class RebaseText(Format[RebaseResult]):
    """The rebase for a person; where the pristine releases came from, and its notes, on stderr."""

    name = "text"

    def render(self, document: RebaseResult) -> str:
        return format_rebase_text(document)

    def notes(self, document: RebaseResult) -> tuple[str, ...]:
        if not document.files:
            return ()
        return tuple(
            for_terminal(line)
            for line in (
                f"  base:   {document.base_source}",
                f"  target: {document.target_source}",
                *(f"note: {text}" for text in document.notes),
            )
        )
