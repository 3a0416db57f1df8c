"""The ``patchguard`` command: parse arguments, call the library, print, map outcomes to exit codes.

Exit codes (stable): 0 nothing at or above the threshold / success; 1 findings at or above the threshold;
2 usage error or the operation could not be done. Expected errors print one line on stderr, never a
traceback. The commands live in :mod:`.scanning` (reading an environment) and :mod:`.changing` (writing
it, and where patch sets stand); they call the library and switch on its typed results.
"""

from __future__ import annotations

import logging
import sys

import click

from .._version import __version__
from . import bisecting, changing, fleet, rebasing, scanning

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="patchguard", message="%(prog)s %(version)s")
@click.option("-q", "--quiet", is_flag=True, help="Errors only: no notes on stderr.")
@click.option(
    "-v", "--verbose", is_flag=True, help="Say more on stderr (which pristine source was used, ...)."
)
def main(quiet: bool, verbose: bool) -> None:
    """Verify a hand-patched Python environment against the wheels it came from."""
    _say(quiet, verbose)


def _say(quiet: bool, verbose: bool) -> None:
    """``-q``/``-v``: before the command (``patchguard -q scan``) or after it (``patchguard scan -q``, as
    pip, ruff and bandit take them); either place counts."""
    from . import _common

    _common.QUIET = quiet and not verbose
    log = logging.getLogger("patchguard")
    for old in [h for h in log.handlers if getattr(h, "patchguard_cli", False)]:
        log.removeHandler(old)  # one invocation's settings (the CLI may run many times in one process)
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_TerminalFormatter("patchguard: %(message)s"))
        handler.patchguard_cli = True  # type: ignore[attr-defined]
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def _after_the_command(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        from . import _common

        _say(param.name == "quiet" or _common.QUIET, param.name == "verbose")
    return value


def _takes_quiet_and_verbose(command: click.Command) -> None:
    """``-q``/``-v`` on a command, unless it has its own (``bisect -q``: no progress lines)."""
    taken = {opt for p in command.params for opt in getattr(p, "opts", [])}
    for short, long, words in (
        ("-q", "--quiet", "Errors only: no notes on stderr (also before the command)."),
        ("-v", "--verbose", "Say more on stderr (also before the command)."),
    ):
        if short not in taken:
            command.params.append(
                click.Option(
                    [short, long], is_flag=True, expose_value=False, callback=_after_the_command, help=words
                )
            )


class _TerminalFormatter(logging.Formatter):
    """``-v``'s lines on stderr: the names a message holds shown with control characters escaped."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        from ..model import for_terminal

        return for_terminal(super().formatMessage(record))


# An `Examples:` section at the end of every command's --help ("\b": click keeps the lines as they are).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "scan": (
        "patchguard scan",
        "patchguard scan vllm --arch DeepseekV3ForCausalLM",
        "patchguard scan --python /srv/venv/bin/python --format json -o report.json",
        "patchguard scan --format sarif -o patchguard.sarif",
    ),
    "diff": (
        "patchguard diff vllm --path '*/deepseek_v2.py'",
        "patchguard diff --format json -o changes.json",
    ),
    "restore": ("patchguard restore vllm --dry-run", "patchguard restore vllm --path '*/deepseek_v2.py'"),
    "apply": ("patchguard apply --set sm120-support --dry-run", "patchguard apply --set sm120-support"),
    "revert": ("patchguard revert --set glm5-debug",),
    "sets": ("patchguard sets", "patchguard sets --patches /srv/patches"),
    "status": ("patchguard status",),
    "capture": ("patchguard capture --set sm120-support vllm --path '*/cuda.py'",),
    "rebase": (
        "patchguard rebase --set sm120-support --dry-run",
        "patchguard rebase --set sm120-support --to-version 0.34.0 --format json",
        "patchguard rebase --all   # after an upgrade: every set to the releases installed",
    ),
    "rollback": (
        "patchguard rollback --lock before-upgrade.lock --dry-run",
        "patchguard rollback --lock before-upgrade.lock",
    ),
    "plan": (
        "patchguard plan vllm==0.34.0",
        "patchguard plan -r requirements.txt --format json",
        "pip install --dry-run --report up.json -U vllm && patchguard plan --report up.json",
    ),
    "check": (
        "patchguard check --policy /srv/patchguard.toml",
        "patchguard check --python /srv/venv/bin/python --lock env.lock --format json",
        "patchguard check --python /srv/venv/bin/python --format status   # a health check's one line",
    ),
    "lock": ("patchguard lock -o env.lock", "patchguard check --lock env.lock"),
    "running": ("patchguard running --python /srv/venv/bin/python", "patchguard running --format json"),
    "bisect": (
        "patchguard bisect vllm --test './smoke.sh' --timeout 600",
        "patchguard bisect --sets sm120-support,nccl-tuning --test 'pytest -x tests/test_coherence.py'",
        "patchguard bisect vllm --by hunk --repeat 3 --test './flaky.sh' --format json",
    ),
    "fleet": (
        "patchguard fleet fleet/",
        "patchguard fleet fleet/ --baseline gpu-01 --format json -o fleet.json",
        "patchguard fleet fleet/*.json --baseline env.lock",
    ),
}

for _command in (
    scanning.scan,
    scanning.diff,
    changing.restore,
    changing.apply,
    changing.revert,
    changing.sets,
    changing.status,
    changing.capture,
    rebasing.rebase,
    rebasing.plan,
    rebasing.rollback,
    scanning.check,
    scanning.lock,
    scanning.running,
    bisecting.bisect,
    fleet.fleet,
):
    main.add_command(_command)

for _command in main.commands.values():
    _takes_quiet_and_verbose(_command)

for _name, _lines in EXAMPLES.items():
    main.commands[_name].epilog = "\b\nExamples:\n" + "\n".join(f"  {line}" for line in _lines)
