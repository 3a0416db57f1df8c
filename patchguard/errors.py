"""The one error root of patchguard.

Every error patchguard expects (bad input, an environment it cannot read, a wheel it cannot trust) is a
:class:`PatchguardError`. It carries the file it is about and a hint saying what to do, so the CLI can print
one line and exit 2 without a traceback. Anything else escaping the library is a bug.
"""

from __future__ import annotations

__all__ = [
    "EnvironmentNotFound",
    "PatchguardError",
    "UsageError",
]


class PatchguardError(Exception):
    """Root of every error patchguard raises on purpose.

    >>> err = PatchguardError("cannot read RECORD", path="/x/RECORD", hint="reinstall the package")
    >>> str(err)
    '/x/RECORD: cannot read RECORD (reinstall the package)'
    """

    def __init__(self, message: str, *, path: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.hint = hint

    def __str__(self) -> str:
        """One complete first line — where, what, and what to do — then any details, indented."""
        first, _, details = self.message.partition("\n")
        text = f"{self.path}: {first}" if self.path else first
        if self.hint:
            text = f"{text} ({self.hint})"
        lines = [line if line.startswith("  ") else "  " + line for line in details.splitlines() if line]
        return "\n".join([text, *lines])


class UsageError(PatchguardError):
    """The caller asked for something that cannot be done as asked (unknown distribution, bad option)."""


class EnvironmentNotFound(PatchguardError):
    """The environment to work on does not exist or its interpreter does not run."""
