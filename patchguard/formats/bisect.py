"""``patchguard bisect``'s text: the culprits with their diffs, the trials, how sure the result is.

Pure: the result in, the text out. Paths, set names and diff lines are shown escaped (a control character
in a file name or a diff starts no line and moves no cursor).
"""

from __future__ import annotations

from ..model import for_terminal
from ..results import BisectResult, Trial
from .interface import Format

__all__ = ["BisectText", "format_bisect_text"]


def _trial_line(t: Trial, total: int) -> str:
    runs = f"{t.runs} run{'s' if t.runs != 1 else ''}" + (f", {t.failures} failed" if t.failures else "")
    note = f"  {for_terminal(t.note)}" if t.note else ""
    return (
        f"  trial {t.number:>3}  {t.phase:<5} {len(t.included):>4} of {total:<4} {t.outcome.value:<4}  "
        f"{runs}  test {t.seconds:.2f} s, state {t.overhead:.2f} s{note}"
    )


def format_bisect_text(result: BisectResult) -> str:
    lines: list[str] = []
    total = {u.number for u in result.units}
    if not result.culprits:
        lines.append(
            f"the test passed with all {result.changes} changes in place: it does not depend on them"
        )
    else:
        n = len(result.culprits)
        together = " (they break it only together)" if n > 1 else ""
        lines.append(f"{n} culprit{'s' if n != 1 else ''} among {result.changes} changes{together}:")
        for u in result.culprits:
            lines.append(f"  {for_terminal(u.label)}")
        for group in result.unsplit:
            lines.append(
                f"  (changes {', '.join(map(str, group))} could not be told apart: the test could not tell)"
            )
        for u in result.culprits:
            if u.diff:
                lines.append("")
                lines += [for_terminal(line) for line in u.diff.rstrip("\n").split("\n")]
    lines.append("")
    lines.append(f"{result.runs} test runs in {len(result.trials)} trials:")
    lines += [_trial_line(t, len(total)) for t in result.trials]
    if result.flakiness is not None:
        lines.append(
            f"the test looked flaky: a failing state passed a run {result.flakiness:.0%} of the time; with "
            f"{result.repeat} runs per trial, confidence {result.confidence:.1%}"
        )
    lines.append("every file is back as it was before the bisect")
    lines += _changed_by_test(result)
    if result.running:
        pids = ", ".join(map(str, result.running[:10]))
        lines.append(
            f"processes of this environment ran during the bisect (pid {pids}): they may hold a trial's "
            "code; restart them (patchguard running)"
        )
    return "\n".join(lines) + "\n"


def _changed_by_test(result: BisectResult) -> list[str]:
    """What the test command itself changed: the held files (put back with the rest), and those no change
    touches (left as the test left them: only this says so)."""
    out = []
    if result.touched:
        out.append(
            f"the test changed {len(result.touched)} of the files bisected (put back to the start with the "
            f"rest): {for_terminal(', '.join(result.touched[:5]))}"
        )
    if result.outside:
        out.append(
            f"the test changed {len(result.outside)} file{'s' if len(result.outside) != 1 else ''} no change "
            f"touches, left as it left them: {for_terminal(', '.join(result.outside[:5]))}"
        )
    return out


class BisectText(Format[BisectResult]):
    name = "text"

    def render(self, document: BisectResult) -> str:
        return format_bisect_text(document)
