"""``patchguard fleet``'s table: the reference group, then each other group with what it differs in, then
one line saying how many hosts differ and which.

Pure: the finished result in, text out. Host names, file names, versions and digests come from documents
other machines wrote: every one is shown through :func:`~patchguard.model.for_terminal`, so none can start a
line or speak to the terminal. Long lists are cut (``--format json`` has every host and difference).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..model import for_terminal
from ..results import Chosen, Difference, FleetGroup, FleetResult, HostDocument
from .interface import Format

__all__ = ["FleetTable", "format_fleet"]

_HEX = re.compile(r"[0-9a-f]{64}")
_HOSTS_SHOWN = 20  # host names per group, and in the last line
_DIFFERENCES_SHOWN = 30  # differences per group


def _host(h: HostDocument) -> str:
    """The host as its file names it, and the name its document gives when that is another."""
    shown = for_terminal(h.name)
    return f"{shown} ({for_terminal(h.host)})" if h.host and h.host != h.name else shown


def _names(hosts: Sequence[HostDocument], beside: bool = True, limit: int = _HOSTS_SHOWN) -> str:
    """The hosts (with the names their documents give, ``beside``), the first ``limit`` of them."""
    text = ", ".join(_host(h) if beside else for_terminal(h.name) for h in hosts[:limit])
    return text + (f", … and {len(hosts) - limit} more" if len(hosts) > limit else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _why(result: FleetResult) -> str:
    """How the reference was chosen, in words."""
    chosen = result.chosen
    if chosen is Chosen.FILE:
        base = result.baseline
        where = f"{for_terminal(base.path)}" if base is not None else "the baseline"
        written = f", written on {for_terminal(base.host)}" if base is not None and base.host else ""
        when = f" at {for_terminal(base.time)}" if base is not None and base.time else ""
        return f"--baseline {where}{written}{when}"
    if chosen is Chosen.HOST:
        return "the group of --baseline"
    if chosen is Chosen.TIE:
        return f"{result.tied} groups tie for the largest: the one with the first host by name is taken"
    return "the largest group"


def _state(value: str | None, file: bool) -> str:
    """A file's state or a digest, short: ``modified 47a3a1eb0e15``, ``missing``, ``unexpected directory``
    (``file``: a distribution's file, where none is ``as RECORD says``)."""
    if value is None:
        return "as RECORD says" if file else "none"
    if value.startswith("sha256:"):
        return ("modified " if file else "") + for_terminal(value[7:19])
    if value.startswith("unexpected:"):
        rest = value[len("unexpected:") :]
        return (
            "unexpected directory"
            if rest == "dir"
            else f"unexpected {for_terminal(rest.split(':')[-1][:12])}"
        )
    if value == "dir":
        return "directory"
    return for_terminal(value[:12] if _HEX.fullmatch(value) else value[:40])  # a set's digest: bare hex


# What a difference says, by (aspect, change); "*" for every change. {here} and {ref} are the values on each
# side (a version, a digest, a file's state), {name} the distribution, set or path, {dist} a file's owner.
_LINES = {
    ("python", "*"): "python {here} here, {ref} in the reference",
    ("distribution", "added"): "distribution {name} {here} installed here, not in the reference",
    ("distribution", "removed"): "distribution {name} {ref} in the reference, not installed here",
    ("distribution", "changed"): "distribution {name}: {here} here, {ref} in the reference",
    (
        "build",
        "*",
    ): "distribution {name}: other files than the reference's in the same version (another build?)",
    ("file", "*"): "file {name} ({dist}): {here} here, {ref} in the reference",
    ("set", "added"): "patch set {name} applied here ({here}), not in the reference",
    ("set", "removed"): "patch set {name} applied in the reference ({ref}), not here",
    ("set", "changed"): "patch set {name}: another version of it applied here ({here}; the reference: {ref})",
    ("startup-hook", "added"): "startup hook {name} here ({here}), not in the reference",
    ("startup-hook", "removed"): "startup hook {name} in the reference ({ref}), not here",
    ("startup-hook", "changed"): "startup hook {name}: {here} here, {ref} in the reference",
    ("unowned", "added"): "unowned file {name} here ({here}), not in the reference",
    ("unowned", "removed"): "unowned file {name} in the reference ({ref}), not here",
    ("unowned", "changed"): "unowned file {name}: {here} here, {ref} in the reference",
}


def difference_line(d: Difference) -> str:
    """One difference, for people: what, here, and in the reference."""
    aspect, change = d.aspect.value, d.change.value
    template = _LINES.get((aspect, change)) or _LINES[(aspect, "*")]
    digests = aspect in ("file", "set", "startup-hook", "unowned", "build")
    here = _state(d.here, aspect == "file") if digests else for_terminal(d.here or "?")
    ref = _state(d.reference, aspect == "file") if digests else for_terminal(d.reference or "?")
    return template.format(
        name=for_terminal(d.name), dist=for_terminal(d.distribution or "?"), here=here, ref=ref
    )


def _group_lines(group: FleetGroup) -> list[str]:
    lines = [f"DIFFERS    {_names(group.hosts)}"]
    shown = group.differences[:_DIFFERENCES_SHOWN]
    lines += [f"           {difference_line(d)}" for d in shown]
    more = len(group.differences) - len(shown)
    if more:
        lines.append(f"           … and {_plural(more, 'more difference')} (--format json lists every one)")
    return lines


def format_fleet(result: FleetResult) -> str:
    """The fleet as a table (see the module's docstring)."""
    hosts = sum(len(g.hosts) for g in result.groups)
    reference = next((g for g in result.groups if g.reference), None)
    lines = [
        f"REFERENCE  {_names(reference.hosts)}  ({_why(result)})"
        if reference is not None
        else f"REFERENCE  no host has it  ({_why(result)})"
    ]
    for group in result.groups:
        if not group.reference:
            lines += _group_lines(group)
    envs = _plural(len(result.groups), "environment")
    differing = result.differing
    if not differing:
        lines.append(f"\n{_plural(hosts, 'host')}, {envs}: all alike")
    else:
        verb = "differs" if len(differing) == 1 else "differ"
        head, which = f"{_plural(hosts, 'host')}, {envs}", _names(differing, beside=False)
        lines.append(f"\n{head}: {len(differing)} {verb} from the reference: {which}")
    return "\n".join(lines) + "\n"


class FleetTable(Format[FleetResult]):
    name = "table"

    def render(self, document: FleetResult) -> str:
        return format_fleet(document)
