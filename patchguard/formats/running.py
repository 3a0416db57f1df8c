"""``patchguard running``'s table: a line per process of the environment, what it runs that changed below it.

Pure: the processes in, the text out. Command lines and paths are shown escaped (a newline in a command line
starts no line).
"""

from __future__ import annotations

from datetime import datetime

from ..model import for_terminal
from ..results import Process, Running, Verdict
from .interface import Format

__all__ = ["RunningTable", "format_running_table"]

_PAD = " " * 9
_MAYBE_SHOWN = 20  # the modules a process may have imported: the first ones (the JSON has them all)


def _process_lines(p: Process) -> list[str]:
    when = datetime.fromtimestamp(p.started).strftime("%Y-%m-%d %H:%M:%S") if p.started else "?"
    lines = [f"{p.verdict.value:<8} pid {p.pid}  started {when}  {for_terminal(p.command[:100])}"]
    lines += [f"{_PAD}extension replaced since: {for_terminal(x)}" for x in p.replaced_extensions]
    lines += [f"{_PAD}changed since, imported: {for_terminal(x)}" for x in p.imported_changed]
    lines += [
        f"{_PAD}changed since, may be imported: {for_terminal(x)}" for x in p.maybe_changed[:_MAYBE_SHOWN]
    ]
    lines += [f"{_PAD}transaction since: {for_terminal(t)}" for t in p.transactions]
    if p.reason:
        lines.append(f"{_PAD}{for_terminal(p.reason)}")
    return lines


def format_running_table(found: Running) -> str:
    """Every process, then how many there are and how many to restart."""
    lines = [line for p in found.processes for line in _process_lines(p)]
    n = len(found.processes)
    stale = sum(1 for p in found.processes if p.verdict is Verdict.STALE)
    lines.append(
        f"{n} process{'es' if n != 1 else ''} of the environment, {stale} stale"
        + (": restart them" if stale else "")
    )
    return "\n".join(lines) + "\n"


class RunningTable(Format[Running]):
    name = "text"

    def render(self, document: Running) -> str:
        return format_running_table(document)
