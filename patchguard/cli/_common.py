"""What every command shares: exit codes, the common options, expected errors as one line, progress."""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

import click

from ..errors import PatchguardError
from ..model import for_terminal, selecting

if TYPE_CHECKING:
    from ..env import Target
    from ..formats import Format

F = TypeVar("F", bound=Callable[..., Any])
D = TypeVar("D")
# Told when the environment named cannot be resolved: the error and the command's other arguments.
Unresolved = Callable[[Exception, dict[str, Any]], None]

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
QUIET = False  # -q: notes on stderr are left out (errors never are)


def note(text: str) -> None:
    """An informational line on stderr (not an error), unless ``-q``: one line, whatever names it holds
    (control characters shown escaped)."""
    if not QUIET:
        click.echo(for_terminal(text), err=True)


FAIL_ON = ("high", "moderate", "minor", "info", "never")


@overload
def environment_options(func: F) -> F: ...
@overload
def environment_options(*, unresolved: Unresolved) -> Callable[[F], F]: ...
def environment_options(func: F | None = None, *, unresolved: Unresolved | None = None) -> Any:
    """``--python`` / ``--site-packages``: the environment selectors every command accepts, resolved here,
    once, into the :class:`~patchguard.env.Target` the command receives as ``environment``. A command about
    to work on the very environment patchguard runs from says once, on stderr, why that is weaker.

    An environment that cannot be resolved is an error line and exit 2 — after ``unresolved``, when given,
    has been told (with the command's other arguments): a health check says it in its own words first."""
    if func is None:
        return functools.partial(environment_options, unresolved=unresolved)
    command = func

    @functools.wraps(command)
    def resolved(*args: Any, python: str | None, site_packages: tuple[str, ...], **kwargs: Any) -> Any:
        from ..env import resolve_target, runs_patchguard

        def resolve() -> Target:
            try:
                return resolve_target(python, site_packages or None)
            except (PatchguardError, OSError) as exc:
                if unresolved is not None:
                    unresolved(exc, kwargs)
                raise

        target = errors_to_exit(resolve)()
        with selecting(target.selector):
            if runs_patchguard(target):
                note(SELF_NOTE)
            return command(*args, environment=target, **kwargs)

    func = resolved  # type: ignore[assignment]
    func = click.option(
        "--site-packages",
        "site_packages",
        multiple=True,
        metavar="DIR",
        help="Work on this site-packages directory (repeatable) instead of the running interpreter's.",
    )(func)
    func = click.option(
        "--python",
        "python",
        metavar="PATH",
        help="Work on the environment of this interpreter (asked in an isolated subprocess).",
    )(func)
    return func


SELF_NOTE = (
    "note: patchguard runs from the environment it checks, so that environment's code (click, packaging, …) "
    "ran before any check; in production install patchguard in its own environment (pipx install, or a "
    "dedicated venv) and pass --python /path/to/env/bin/python"
)


output_option = click.option(
    "--output",
    "-o",
    "output",
    metavar="FILE",
    help="Write the document to FILE (atomically: complete or absent) instead of standard output.",
)


def use_colour(output: str | None, no_color: bool) -> bool:
    """Colour the severities on a terminal — or wherever ``$FORCE_COLOR`` / ``$CLICOLOR_FORCE`` ask for it
    (a CI log that renders colour) — and never with ``--no-color``, ``$NO_COLOR`` or into a file."""
    import os

    if output or no_color or os.environ.get("NO_COLOR"):
        return False
    forced = any(os.environ.get(v, "") not in ("", "0") for v in ("FORCE_COLOR", "CLICOLOR_FORCE"))
    return forced or sys.stdout.isatty()


def emit(text: str, output: str | None, what: str = "the output") -> None:
    """Print ``text``, or write it to ``output`` through a temp file and a rename (never half-written)."""
    if not output:
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
        sys.stdout.buffer.flush()
        return
    from .._fs import write_atomically

    try:
        write_atomically(output, text.encode("utf-8", "surrogateescape"), make_dirs=False)
    except OSError as exc:
        raise PatchguardError(f"cannot write {what} ({exc.strerror or exc})", path=output) from None


def write(chosen: Format[D], document: D, output: str | None, what: str) -> None:
    """Write a document in the format chosen: the format's notes on stderr, then its text (:func:`emit`;
    ``what`` names the document in an error about writing it, unless the format names itself)."""
    for line in chosen.notes(document):
        note(line)
    emit(chosen.render(document), output, chosen.what or what)


def source_options(func: F) -> F:
    """``--wheelhouse`` / ``--offline`` / the index options: where pristine wheels come from, handed to the
    command as one ``fetch`` argument (a :class:`~patchguard.pristine.sources.SourceOptions` that shows a
    download's bytes on a terminal)."""
    command = func

    @functools.wraps(command)
    def with_fetch(*args: Any, **kwargs: Any) -> Any:
        from ..pristine.sources import SourceOptions

        kwargs["fetch"] = SourceOptions(
            wheelhouse=kwargs.pop("wheelhouse"),
            offline=kwargs.pop("offline"),
            index_url=kwargs.pop("index_url"),
            extra_index_urls=kwargs.pop("extra_index_urls"),
            find_links=kwargs.pop("find_links"),
            progress=DownloadBar(),
        )
        return command(*args, **kwargs)

    func = with_fetch  # type: ignore[assignment]
    for decorator in (
        click.option(
            "--find-links",
            "find_links",
            multiple=True,
            metavar="DIR|URL",
            help="A directory or page of wheels to fetch pristine wheels from (repeatable; added to pip's).",
        ),
        click.option(
            "--extra-index-url",
            "extra_index_urls",
            multiple=True,
            metavar="URL",
            help="Another package index to fetch pristine wheels from (repeatable; added to pip's own).",
        ),
        click.option(
            "--index-url",
            "index_url",
            metavar="URL",
            help="The package index to fetch pristine wheels from instead of pip's index-url.",
        ),
        click.option(
            "--offline",
            is_flag=True,
            help="Never fetch: no package index, find-links page or direct_url.json URL is asked; only the "
            "store, wheelhouses, the pip/uv caches and earlier downloads are used (also: offline = true).",
        ),
        click.option(
            "--wheelhouse",
            "wheelhouse",
            multiple=True,
            metavar="DIR",
            help="A directory of wheels to take pristine files from (repeatable; "
            "also $PATCHGUARD_WHEELHOUSE).",
        ),
    ):
        func = decorator(func)
    return func


class DownloadBar:
    """A download's bytes as a bar on a terminal; elsewhere one line when it starts (unless ``-q``)."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.label: str | None = None
        self.shown = 0

    def __call__(self, label: str, done: int, total: int | None, finished: bool) -> None:
        if finished:
            if self.bar is not None:
                self.bar.render_finish()
                self.bar = None
            self.label = None
            return
        if self.label != label:
            self.label, self.shown = label, 0
            size = f" ({total / 1e6:.0f} MB)" if total else ""
            if sys.stderr.isatty() and not QUIET and total:
                self.bar = click.progressbar(
                    length=total, label=f"fetching {for_terminal(label)}{size}", file=sys.stderr
                )
            else:
                note(f"fetching {label}{size}")
        if self.bar is not None:
            self.bar.update(done - self.shown)
        self.shown = done


# ``--framework NAME`` (scan, check): what serves; its server's modules (loaded by name too) are live.
framework_option = click.option(
    "--framework",
    "frameworks",
    multiple=True,
    metavar="NAME",
    help="The framework that serves (vllm, sglang): its server's modules are live, those it loads by name "
    "too; other installed frameworks are not taken to serve (also: framework = in the policy).",
)


def patches_option(func: F) -> F:
    return click.option(
        "--patches",
        "patches",
        metavar="DIR",
        help="Where patch sets live (default: $PATCHGUARD_PATCHES, [tool.patchguard] patches, ./patches).",
    )(func)


# ``--path GLOB`` (diff, restore, capture): only the files whose RECORD path matches.
path_option = click.option(
    "--path", "paths", multiple=True, metavar="GLOB", help="Only files whose path matches (repeatable)."
)

against_option = click.option(
    "--against",
    default="HEAD",
    show_default=True,
    metavar="REV",
    help="Revision editable installs are compared with.",
)


def errors_to_exit(func: F) -> F:
    """Turn expected errors into one line on stderr and exit 2.

    An ``OSError`` that reaches here (a file the user may not read or write) is expected too: it names
    the file, and nothing was changed (writes go through transactions, which roll back).
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (PatchguardError, OSError) as exc:
            click.echo(f"patchguard: error: {error_line(exc)}", err=True)
            sys.exit(EXIT_ERROR)
        except KeyboardInterrupt:
            click.echo("patchguard: interrupted", err=True)
            sys.exit(130)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:  # a bug: still "could not be done" (exit 2), never 1, which means findings
            click.echo(f"patchguard: error: {internal_error(exc)}", err=True)
            if os.environ.get("PATCHGUARD_DEBUG"):
                raise
            sys.exit(EXIT_ERROR)

    return wrapper  # type: ignore[return-value]


def internal_error(exc: BaseException) -> str:
    """An unexpected exception as one line: what it was, where, and what to do (a monitor reads exit 2,
    "could not check", never 1, "findings")."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}" if tb is not None else ""
    what = for_terminal(f"{exc.__class__.__name__}: {exc}")[:300]
    return (
        f"internal error ({what}{where}): nothing was changed; this is a bug in patchguard — rerun with "
        "PATCHGUARD_DEBUG=1 for the traceback and report it"
    )


def error_line(exc: PatchguardError | OSError) -> str:
    """An expected error as the one line ``patchguard: error:`` introduces: a :class:`PatchguardError` as
    :func:`error_text` shows it; an ``OSError`` with the file it names and what to do."""
    if isinstance(exc, PatchguardError):
        return error_text(exc)
    name = exc.filename
    where = (
        f"{for_terminal(os.fsdecode(name) if isinstance(name, (str, bytes)) else str(name))}: "
        if name
        else ""
    )
    what = for_terminal(str(exc.strerror or exc))
    return f"{where}{what} (check the permissions, or run as the environment's owner)"


def error_text(exc: PatchguardError) -> str:
    """An expected error as the terminal shows it: its first line and each line of its details stay lines,
    and nothing of the names it holds can add one (control characters shown escaped)."""
    message = "\n".join(for_terminal(line) for line in exc.message.split("\n"))
    path = for_terminal(exc.path) if exc.path is not None else None
    return str(PatchguardError(message, path=path, hint=for_terminal(exc.hint) if exc.hint else None))


class Progress:
    """A progress bar on stderr, only on a terminal and only once the work has taken a second; its ETA
    counts from the start of the work (not from when the bar appeared), and it clears itself at the end."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.started = time.monotonic()
        self.bar: Any = None
        self.shown = 0

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if time.monotonic() - self.started < 1.0:
                return
            self.bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
            self.bar.__enter__()
            # The rate so far is the work done since the start, not since the bar appeared.
            self.bar.start = time.time() - (time.monotonic() - self.started)
        self.bar.update(done - self.shown)
        self.shown = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar = None
            sys.stderr.write("\r\x1b[2K")  # erase the bar's line: the report starts on a clean screen
            sys.stderr.flush()


def say_recovered(paths: tuple[str, ...]) -> None:
    if paths:
        note(
            f"patchguard: rolled back an interrupted transaction first ({len(paths)} file"
            f"{'s' if len(paths) != 1 else ''} put back)"
        )
