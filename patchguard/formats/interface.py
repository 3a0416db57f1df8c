"""The one seam between a finished result and the text written for it.

A *format* is an object with a ``name`` (what ``--format NAME`` says) and ``render(document) -> str``. The
formats of one kind of document (a scan's report, ``check``'s verdict, a diff, …) are registered together
in one :class:`Formats`; the registries are in :mod:`patchguard.formats`. The CLI takes a format by name
from the registry of the document it writes, hands it the finished value and prints what ``render``
returns: it never formats a document itself and never branches on a format's name. A new format is a
class in its family's module and a name in its registry, nothing in the CLI.

Guarantees every format keeps: ``render`` and ``notes`` are pure (no IO, no click: the finished value in,
text out), and every name of outside origin in the text is escaped as its family says (``for_terminal``
for people, the JSON name encoding for programs). What a format needs besides the result (colour, the
sets in place) is in the document the CLI builds for it; a format that needs something costly to gather
says so (:attr:`Format.needs_applied_sets`), so that the CLI gathers it only then.

A registry knows its names without importing its formats: building the command line (``patchguard
--version``) imports no formatter.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Generic, TypeVar

__all__ = ["Format", "Formats"]

D = TypeVar("D")
D_contra = TypeVar("D_contra", contravariant=True)


class Format(ABC, Generic[D_contra]):
    """One way to write one kind of document."""

    #: What ``--format`` calls it (unique among the formats of its document kind).
    name: ClassVar[str]
    #: The document must carry the sets in place in the environment: costly to find (every set's state),
    #: so the CLI gathers them only for a format that says it reads them.
    needs_applied_sets: ClassVar[bool] = False
    #: What an error about writing the text calls it, when not what its command calls the document.
    what: ClassVar[str | None] = None
    #: The exit codes of the command in this format: (passed, failed, could not be done). patchguard's own
    #: are 0, 1, 2; a format for a monitoring system may speak its language (Nagios: 0, 2, 3).
    exits: ClassVar[tuple[int, int, int]] = (0, 1, 2)

    @abstractmethod
    def render(self, document: D_contra) -> str:
        """The document as text, empty or ending in a newline: what is printed, or written to ``-o``."""

    def notes(self, document: D_contra) -> tuple[str, ...]:
        """Lines for stderr beside the document (``-q`` leaves them out), escaped for a terminal."""
        return ()

    def failure(self, reason: str) -> str:
        """The text written instead of the document when the command could not be done (exit 2), beside
        the one-line error on stderr: nothing for most formats; a health check's verdict line says so."""
        return ""


@dataclass(frozen=True, slots=True)
class Formats(Generic[D]):
    """The formats of one kind of document: their names (the first is the default), and a function that
    imports them, called on first use."""

    kind: str
    names: tuple[str, ...]
    load: Callable[[], Sequence[Format[D]]] = field(repr=False, compare=False)

    @property
    def default(self) -> str:
        return self.names[0]

    def formats(self) -> tuple[Format[D], ...]:
        """Every format of the kind, in the order of :attr:`names` (which they must match: the names are
        what ``--help`` offers before any format is imported)."""
        loaded = tuple(self.load())
        if tuple(f.name for f in loaded) != self.names:
            raise LookupError(
                f"the {self.kind} formats are {[f.name for f in loaded]}, registered as {list(self.names)}"
            )
        return loaded

    def get(self, name: str | None = None) -> Format[D]:
        """The format called ``name`` (by default, the default one)."""
        wanted = self.default if name is None else name
        for f in self.formats():
            if f.name == wanted:
                return f
        raise LookupError(f"no {wanted!r} format of {self.kind} documents (known: {', '.join(self.names)})")
