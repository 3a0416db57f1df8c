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
        text = f"{self.path}: {self.message}" if self.path else self.message
        return f"{text} ({self.hint})" if self.hint else text


class UsageError(PatchguardError):
    """The caller asked for something that cannot be done as asked (unknown distribution, bad option)."""


class EnvironmentNotFound(PatchguardError):
    """The environment to work on does not exist or its interpreter does not run."""
