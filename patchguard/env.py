"""Which environment to work on: its interpreter, prefix and site-packages directories.

Three ways to name one, as on the command line:

* nothing: the interpreter running patchguard (its purelib and platlib, deduplicated);
* ``--python PATH``: another interpreter, asked for its paths in an isolated subprocess (``-I -S``: no
  ``site``, so no ``.pth`` file of the scanned environment is ever executed, and nothing of it is imported
  here);
* ``--site-packages DIR`` (repeatable): directories given outright — a venv's, a system one, or a
  ``pip install --target`` directory.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from ._fs import not_a_directory
from .errors import EnvironmentNotFound, UsageError

__all__ = ["Target", "host_name", "resolve_target", "runs_patchguard", "timestamp"]

# Runs inside the *other* interpreter with -I -S. It must work on any Python >= 3.8 and import nothing
# of that environment. Without `site`, a venv is not recognised by the interpreter itself, so the
# pyvenv.cfg lookup that site.venv() would do is repeated here (without processing any .pth file).
_PROBE = r"""
import json, os, sys, sysconfig
exe = os.path.abspath(sys.executable)
prefix = sys.prefix
bindir = os.path.dirname(exe)
for cfg in (os.path.join(bindir, "pyvenv.cfg"), os.path.join(os.path.dirname(bindir), "pyvenv.cfg")):
    if os.path.isfile(cfg):
        prefix = os.path.dirname(cfg)
        break
paths = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})
system = None
if prefix == sys.base_prefix and "deb_system" in sysconfig.get_scheme_names():
    system = sysconfig.get_paths("deb_system")["purelib"]
print(json.dumps({
    "python": ".".join(map(str, sys.version_info[:3])),
    "implementation": sys.implementation.name,
    "prefix": prefix,
    "purelib": paths["purelib"],
    "platlib": paths["platlib"],
    "scripts": paths["scripts"],
    "system": system,
    "dont_write_bytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
}))
"""


def host_name() -> str:
    """This machine's name, as the documents patchguard writes name where they were written (``uname -n``)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket  # pragma: no cover - not POSIX

    return socket.gethostname()  # pragma: no cover


def timestamp(seconds: float | None = None) -> str:
    """``seconds`` (default: now) as the documents write a time: ISO 8601, UTC, to the second.

    ``$SOURCE_DATE_EPOCH`` (the reproducible-builds convention), when it is what the specification says —
    ASCII decimal digits, a time the documents can write (up to the end of year 9999) — is the time instead:
    a lock written twice of one environment on one host is then the same bytes. Anything else is said once
    on stderr and the current time is used.

    >>> timestamp(0)
    '1970-01-01T00:00:00Z'
    """
    import time

    if seconds is None:
        seconds = source_date_epoch()
        if seconds is None:
            seconds = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


_LAST_SECOND = 253402300799  # 9999-12-31T23:59:59Z: the last time ISO 8601's four-digit year writes
_warned: set[str] = set()


def source_date_epoch() -> int | None:
    """``$SOURCE_DATE_EPOCH`` as the reproducible-builds specification reads it, or ``None`` (unset, or not
    a usable value: then one warning on stderr, once per value)."""
    raw = os.environ.get("SOURCE_DATE_EPOCH")
    if raw is None or raw == "":
        return None
    if raw.isascii() and raw.isdigit() and int(raw) <= _LAST_SECOND:
        return int(raw)
    if raw not in _warned:
        _warned.add(raw)
        shown = raw.encode("unicode_escape", "backslashreplace").decode("ascii")[:40]
        sys.stderr.write(
            f"patchguard: warning: SOURCE_DATE_EPOCH={shown} is not a time in whole seconds up to the "
            "year 9999 (ASCII digits): the current time is used\n"
        )
    return None


@dataclass(frozen=True, slots=True)
class Target:
    """A resolved environment: the site directories to scan and where its console scripts live."""

    python: str
    prefix: str
    site_packages: tuple[str, ...]
    scripts: str | None
    implementation: str = "cpython"
    conda: str | None = None  # the prefix, when conda made the environment (it has ``conda-meta/``)
    # How the user named it (``--python PATH``, ``--site-packages DIR``…; nothing: the running one): what the
    # commands patchguard prints for a person to run repeat. Not part of what the environment is.
    selector: tuple[str, ...] = field(default=(), compare=False)

    @property
    def roots(self) -> tuple[str, ...]:
        """Where patchguard may ever write in this environment: its site dirs and its scripts dir — and in a
        conda environment its whole prefix (conda installs libraries and tools beside Python's files)."""
        return (
            *self.site_packages,
            *([self.scripts] if self.scripts else []),
            *([self.conda] if self.conda else []),
        )


def conda_prefix(prefix: str, site_packages: Sequence[str]) -> str | None:
    """The prefix of the conda environment holding ``site_packages``, if conda made it: the interpreter's
    prefix or ``<prefix>/lib/pythonX.Y/site-packages``'s, holding a ``conda-meta`` directory."""
    ups = [os.path.dirname(os.path.dirname(os.path.dirname(os.path.normpath(s)))) for s in site_packages]
    for candidate in dict.fromkeys([prefix, *ups]):
        if candidate and os.path.isdir(os.path.join(candidate, "conda-meta")):
            return os.path.abspath(candidate)
    return None


def _dedupe_existing(dirs: Iterable[str]) -> tuple[str, ...]:
    """Keep existing directories, each once, by real path (``lib64`` is often a link to ``lib``)."""
    seen: set[str] = set()
    out: list[str] = []
    for d in dirs:
        real = os.path.realpath(d)
        if real not in seen and os.path.isdir(real):
            seen.add(real)
            out.append(os.path.abspath(d))
    return tuple(out)


def _running() -> Target:
    import platform

    paths = sysconfig.get_paths()
    system = []
    if sys.prefix == sys.base_prefix and "deb_system" in sysconfig.get_scheme_names():
        system = [sysconfig.get_paths("deb_system")["purelib"]]  # Debian's own interpreter: apt's packages
    site = _dedupe_existing([paths["purelib"], paths["platlib"], *system])
    return Target(
        python=platform.python_version(),
        prefix=sys.prefix,
        site_packages=site,
        scripts=paths.get("scripts"),
        implementation=sys.implementation.name,
        conda=conda_prefix(sys.prefix, site),
    )


def _interpreter_file(python: str) -> str:
    """The absolute path of ``--python``'s file, or :class:`EnvironmentNotFound` saying what it is instead."""
    exe = os.path.abspath(python)
    if not os.path.exists(exe):
        raise EnvironmentNotFound("no such interpreter", path=python, hint="pass the path of a python binary")
    if os.path.isdir(exe):  # the venv itself: its interpreter is inside
        names = (os.path.join(python, "bin", n) for n in ("python", "python3"))
        inside = [p for p in names if os.path.isfile(p)]
        raise EnvironmentNotFound(
            "is a directory, not an interpreter",
            path=python,
            hint=f"did you mean --python {shlex.quote(inside[0])}?"
            if inside
            else "pass the environment's python binary (e.g. VENV/bin/python), or --site-packages DIR",
        )
    return exe


def _other(python: str) -> Target:
    import subprocess  # here: scanning the running interpreter's environment does not need it

    exe = _interpreter_file(python)
    try:
        code, out, err = _run_bounded([exe, "-I", "-S", "-c", _PROBE])
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentNotFound(
            f"interpreter does not run ({exc.__class__.__name__}: {exc})",
            path=python,
            hint="pass a working python binary with --python",
        ) from None
    try:
        info = json.loads(out) if code == 0 else None
    except (ValueError, RecursionError):
        info = None
    keys = ("python", "prefix", "purelib", "platlib", "scripts", "implementation")
    if not isinstance(info, dict) or not all(isinstance(info.get(k), str) for k in keys):
        last = (err.strip().splitlines() or ["no answer" if code == 0 else "no output"])[-1][:200]
        raise EnvironmentNotFound(
            f"interpreter did not report its paths (exit {code}: {last})",
            path=python,
            hint="pass a working python binary with --python",
        )
    # Debian's own interpreter: apt's python3-* packages are in /usr/lib/python3/dist-packages, beside pip's
    # /usr/local/lib/python3.X/dist-packages (its purelib).
    system = [info["system"]] if isinstance(info.get("system"), str) else []
    site = _dedupe_existing([info["purelib"], info["platlib"], *system])
    return Target(
        python=info["python"],
        prefix=info["prefix"],
        site_packages=site,
        scripts=info["scripts"],
        implementation=info["implementation"],
        conda=conda_prefix(info["prefix"], site),
    )


_PROBE_LIMIT = 1 << 20  # the probe answers in a few hundred bytes
_PROBE_TIMEOUT = 30.0


def _run_bounded(cmd: list[str]) -> tuple[int, str, str]:
    """Run the probe: (exit code, stdout, stderr). A program that writes more than :data:`_PROBE_LIMIT`
    bytes or runs longer than :data:`_PROBE_TIMEOUT` is killed: it is not a Python interpreter."""
    import selectors
    import subprocess
    import time

    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    deadline = time.monotonic() + _PROBE_TIMEOUT
    total = 0
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0 or total > _PROBE_LIMIT:
                proc.kill()
                proc.wait()
                proc.stdout.close()
                proc.stderr.close()
                raise subprocess.SubprocessError("it wrote too much or ran too long for a Python interpreter")
            for key, _ in sel.select(timeout=min(left, 1.0)):
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                chunks[key.fd].append(data)
                total += len(data)
    code = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    text = {fd: b"".join(c).decode("utf-8", "surrogateescape") for fd, c in chunks.items()}
    return code, text[out_fd], text[err_fd]


def _given(dirs: Sequence[str]) -> Target:
    for d in dirs:
        what = not_a_directory(d)
        if what:
            raise EnvironmentNotFound(
                f"site-packages directory {what}",
                path=d,
                hint="pass an existing directory to --site-packages",
            )
    site = _dedupe_existing(dirs)
    # A venv's site dir is <prefix>/lib/pythonX.Y/site-packages; anything else is its own prefix.
    first = site[0]
    parts = os.path.normpath(first).split(os.sep)
    prefix = os.sep.join(parts[:-3]) if len(parts) > 3 and parts[-3] in ("lib", "lib64") else first
    scripts = os.path.join(prefix, "bin") if prefix != first else None
    # lib/python3.11/site-packages names its Python; a --target directory names none.
    python = parts[-2][len("python") :] if len(parts) > 1 and parts[-2].startswith("python") else "unknown"
    conda = conda_prefix(prefix, site) if prefix != first else None
    return Target(python=python, prefix=prefix or os.sep, site_packages=site, scripts=scripts, conda=conda)


def resolve_target(python: str | None = None, site_packages: Sequence[str] | None = None) -> Target:
    """Resolve the environment selectors of every command into a :class:`Target`.

    Raises :class:`EnvironmentNotFound` for a missing directory or an interpreter that does not run, and
    :class:`UsageError` when both selectors are given.
    """
    if python and site_packages:
        raise UsageError("give either --python or --site-packages, not both")
    if site_packages:
        words = tuple(w for site in site_packages for w in ("--site-packages", site))
        return replace(_given(site_packages), selector=words)
    target = _other(python) if python else _running()
    if not target.site_packages:
        raise EnvironmentNotFound(
            "the interpreter has no existing site-packages directory",
            path=python or sys.executable,
            hint="pass --site-packages DIR",
        )
    return replace(target, selector=("--python", python)) if python else target


def runs_patchguard(target: Target) -> bool:
    """Whether ``target`` is the environment patchguard runs from: one of its site directories is the running
    interpreter's purelib or platlib — compared as environments, never as interpreter binaries (two venvs of
    one base interpreter link the same binary and are still two environments)."""
    paths = sysconfig.get_paths()
    own = {os.path.realpath(paths["purelib"]), os.path.realpath(paths["platlib"])}
    return any(os.path.realpath(site) in own for site in target.site_packages)
