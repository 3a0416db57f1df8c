"""What an edit means beyond the calls it adds: a check taken out, narrowed, forced or loosened
(:mod:`.checks`), a limit moved (:mod:`.limits`), what a table or an answer lets by grown
(:mod:`.tables`), errors let go and settings left on (:mod:`.handlers`). Each reading compares the
pristine text with the installed one; what they share about refusals is in :mod:`.refusals`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...model import Finding
from ..change import Edit
from ..structure import Region
from .checks import (
    answers_overridden,
    bypasses_added,
    checks_made_conditional,
    disqualifiers_gone,
    flags_turned_off,
    forced_conditions,
    gates_forced_open,
    lookups_softened,
    narrowed_checks,
    raises_narrowed,
    refusals_preempted,
    removed_checks,
)
from .handlers import (
    error_answers_dropped,
    errors_handed_back,
    errors_kept_back,
    failures_told_as_successes,
    handlers_widened,
    new_handlers,
    refusals_retried,
    switches_left_on,
)
from .limits import (
    bounds_dropped,
    bounds_raised,
    bounds_scaled,
    calls_loosened,
    declared_bounds_moved,
    limits_moved,
    requirements_lowered,
)
from .tables import (
    answer_widened,
    checks_dropped,
    flags_widened,
    literal_types_grown,
    supported_grown,
    table_entries_dropped,
    widened_sets,
)

__all__ = ["meanings"]


def meanings(regions: Sequence[Region], edit: Edit, changed: set[int], found: list[Finding]) -> list[Finding]:
    """What the edit means beyond the rule hits ``found``: checks removed, narrowed, forced, loosened;
    handlers that let errors go; switches left on; gates forced open."""
    out = removed_checks(regions, edit, found)
    for meaning in (narrowed_checks, forced_conditions, flags_turned_off, bounds_dropped):
        out += _shallow(meaning, regions, edit)
    out += _shallow(requirements_lowered, regions, edit) + _shallow(supported_grown, regions, edit)
    out += _shallow(answer_widened, regions, edit) + _shallow(calls_loosened, regions, edit)
    out += _shallow(flags_widened, regions, edit)
    out += _shallow(limits_moved, regions, edit) + _shallow(answers_overridden, regions, edit)
    out += _shallow(bounds_raised, regions, edit) + _shallow(refusals_preempted, regions, edit)
    out += _shallow(declared_bounds_moved, regions, edit) + _shallow(bounds_scaled, regions, edit)
    out += _shallow(lookups_softened, regions, edit) + _shallow(errors_kept_back, regions, edit)
    out += _shallow(error_answers_dropped, regions, edit) + _shallow(refusals_retried, regions, edit)
    out += _shallow(errors_handed_back, regions, edit) + _shallow(failures_told_as_successes, regions, edit)
    out += _shallow(disqualifiers_gone, regions, edit) + _shallow(table_entries_dropped, regions, edit)
    out += _shallow(checks_dropped, regions, edit) + _shallow(raises_narrowed, regions, edit)
    out += _shallow(literal_types_grown, regions, edit) + _shallow(bypasses_added, regions, edit)
    out += widened_sets(edit, changed | {r.start for r in regions if r.removed and not r.lines})
    out += new_handlers(edit, changed, [*found, *out], regions)
    out += _shallow(handlers_widened, regions, edit) + _shallow(switches_left_on, regions, edit)
    return out + _shallow(checks_made_conditional, regions, edit) + gates_forced_open(edit, changed)


def _shallow(
    meaning: Callable[[Sequence[Region], Edit], list[Finding]], regions: Sequence[Region], edit: Edit
) -> list[Finding]:
    """A reading of the edit's meaning, or none when its expressions nest deeper than Python's own
    recursion can follow (``not not … x`` two thousand times): no verdict on such code, never a crash."""
    try:
        return meaning(regions, edit)
    except (RecursionError, MemoryError):
        return []
