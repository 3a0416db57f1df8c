"""The ``patchguard`` command: parse arguments, call the library, print, map outcomes to exit codes.

Exit codes (stable): 0 nothing at or above the threshold / success; 1 findings at or above the threshold;
2 usage error or the operation could not be done. Expected errors print one line on stderr, never a
traceback. The commands live in :mod:`.scanning` (reading an environment) and :mod:`.changing` (writing
it, and where patch sets stand); they call the library and switch on its typed results.
"""

from __future__ import annotations

import click

from .._version import __version__
from . import changing, scanning

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="patchguard", message="%(prog)s %(version)s")
def main() -> None:
    """Verify a hand-patched Python environment against the wheels it came from."""


for _command in (
    scanning.scan,
    scanning.diff,
    changing.restore,
    changing.apply,
    changing.revert,
    changing.sets,
    changing.status,
    changing.capture,
    scanning.check,
    scanning.lock,
):
    main.add_command(_command)
