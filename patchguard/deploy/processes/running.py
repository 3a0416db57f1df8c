"""Which running processes of an environment still execute code older than its files: ``patchguard running``.

Read from ``/proc`` only — never a signal, never an attach. A process belongs to the environment when its
command line starts with the environment's ``bin/`` or it maps a file of its site-packages. For each:

* compiled extensions it maps that were replaced since (the inode it maps is no longer at that path, which
  the kernel's `` (deleted)`` after a name says too — but a file may be named so): it runs the old machine
  code. Its ``maps`` is read whole, by the kernel's format (a name's newline is written ``\\012``);
* ``.py`` files of the environment changed after it started (their ctime), split into those it has evidently
  imported — bytecode written after it started and before the change, or a mapped extension of the same
  top-level package — and those it may have;
* the transactions patchguard committed after it started (their backup directories).

Verdict: ``stale`` when code of the environment changed after it started (a replaced extension, a changed
``.py`` it imported or may import): restart it; ``current`` otherwise; ``unknown`` when ``/proc/<pid>``
cannot be read (another user's process) — said, not guessed.

The values (:class:`~patchguard.results.running.Running`, its processes and their verdicts) are defined in
:mod:`patchguard.results.running`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..._fs import PYCACHE, STATE_DIR, bytecode_of
from ...env import Target
from ...errors import PatchguardError
from ...integrity.managed import installed_distributions
from ...results.running import RUNNING_SCHEMA, Process, Running, Verdict

__all__ = ["RUNNING_SCHEMA", "Process", "Running", "Verdict", "running"]

# A start time is the boot time (whole seconds) plus clock ticks: it may be up to a second early. A change
# within that second of the start is not counted against the process.
_START_SLACK = 1.0
# What the kernel writes after the name of a mapped file that was unlinked (a file may also be named so).
_DELETED = " (deleted)"
# A name with more ``\012`` than this is read two ways only (all newlines, or none), not 2**n.
_MAX_ESCAPES = 6


def running(target: Target, *, proc: str = "/proc") -> Running:
    """Every process of the environment and whether it runs what the disk holds."""
    sites = [os.path.realpath(s) for s in target.site_packages]
    bin_dir = os.path.join(target.prefix, "bin") + os.sep
    boot, tick = _boot_time(proc), os.sysconf("SC_CLK_TCK")
    py_files = list(_python_files(target))
    out: list[Process] = []
    for pid in _pids(proc):
        if pid == os.getpid():
            continue
        found = _process(proc, pid, sites, bin_dir, boot, tick, py_files, target)
        if found is not None:
            out.append(found)
    return Running(target, tuple(out))


@dataclass(frozen=True, slots=True)
class Habit:
    """A process of the environment as bytecode evidence needs it: when it started, whether it writes
    bytecode beside the sources (``why`` says why not)."""

    pid: int
    started: float
    writes_bytecode: bool
    why: str = ""


def bytecode_habits(target: Target, proc: str = "/proc") -> list[Habit]:
    """The processes of the environment this user can see, and whether each writes ``__pycache__``
    (``PYTHONDONTWRITEBYTECODE``, ``-B``, ``PYTHONPYCACHEPREFIX`` / ``-X pycache_prefix`` say it does not).
    Empty when the process table cannot be read: then nothing is known of them."""
    sites = [os.path.realpath(s) for s in target.site_packages]
    bin_dir = os.path.join(target.prefix, "bin") + os.sep
    try:
        pids = [int(n) for n in os.listdir(proc) if n.isdigit()]
        boot, tick = _boot_time(proc), os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return []
    out: list[Habit] = []
    for pid in sorted(pids):
        base = os.path.join(proc, str(pid))
        argv = [a for a in (_read(os.path.join(base, "cmdline")) or "").split("\0") if a]
        if pid == os.getpid() or not argv or not _launched_from(argv, " ".join(argv), bin_dir, sites):
            continue
        stat = _read(os.path.join(base, "stat"))
        if stat is None:
            continue
        started = boot + int(stat.rsplit(")", 1)[1].split()[19]) / tick
        why = _no_bytecode(argv, _read(os.path.join(base, "environ")))
        out.append(Habit(pid, started, not why, why))
    return out


def _no_bytecode(argv: Sequence[str], environ: str | None) -> str:
    """Why a Python process writes no bytecode beside its sources ('' : it does, as far as can be seen)."""
    options = _interpreter_options(argv)
    flags = "".join(o[1:] for o in options if not o.startswith(("--", "-X", "-W")))
    if "B" in flags:
        return "runs with -B (writes no bytecode)"
    if any(o.startswith("-Xpycache_prefix") or o == "-X" for o in options) and "pycache_prefix" in " ".join(
        argv
    ):
        return "runs with -X pycache_prefix (its bytecode is written elsewhere)"
    env = dict(v.split("=", 1) for v in (environ or "").split("\0") if "=" in v)
    if env.get("PYTHONDONTWRITEBYTECODE"):
        return "runs with PYTHONDONTWRITEBYTECODE (writes no bytecode)"
    if env.get("PYTHONPYCACHEPREFIX"):
        return "runs with PYTHONPYCACHEPREFIX (its bytecode is written elsewhere)"
    return ""


def _interpreter_options(argv: Sequence[str]) -> list[str]:
    """The interpreter's own options, before the script, ``-m`` or ``-c``."""
    options: list[str] = []
    for arg in argv[1:]:
        if not arg.startswith("-") or arg in ("-m", "-c") or arg.startswith(("-m", "-c")):
            break
        options.append(arg)
    return options


def _pids(proc: str) -> list[int]:
    """Every process id ``proc`` lists; an error when it cannot be read or hides other users' processes
    (``hidepid``): "no process" must never be said of processes patchguard cannot see."""
    try:
        pids = sorted(int(n) for n in os.listdir(proc) if n.isdigit())
    except OSError as exc:
        raise PatchguardError(
            f"cannot read the process table ({exc.strerror or exc})",
            path=proc,
            hint="run where /proc is mounted (in a container: share the host's PID namespace)",
        ) from None
    if 1 not in pids or not os.path.isdir(os.path.join(proc, str(os.getpid()))):
        raise PatchguardError(
            "the process table shows only some processes (hidepid, or not a procfs)",
            path=proc,
            hint="run as root, or mount /proc without hidepid",
        )
    return pids


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(8 << 20).decode("utf-8", "surrogateescape")
    except OSError:
        return None


def _boot_time(proc: str) -> float:
    for line in (_read(os.path.join(proc, "stat")) or "").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0


def _process(
    proc: str,
    pid: int,
    sites: Sequence[str],
    bin_dir: str,
    boot: float,
    tick: int,
    py_files: Sequence[str],
    target: Target,
) -> Process | None:
    base = os.path.join(proc, str(pid))
    cmdline = _read(os.path.join(base, "cmdline"))
    if not cmdline:
        return None  # a kernel thread, or gone
    argv = [a for a in cmdline.split("\0") if a]
    command = " ".join(argv)[:300]
    mapped = _mapped(os.path.join(base, "maps"), sites)
    if not (mapped or _launched_from(argv, command, bin_dir, sites)):
        return None
    stat = _read(os.path.join(base, "stat"))
    if mapped is None or stat is None:
        if not os.path.exists(base):
            return None  # it exited between the listing and the reading
        why = f"cannot read /proc/{pid}: another user's process"
        return Process(pid, command, 0.0, Verdict.UNKNOWN, reason=why)
    started = boot + int(stat.rsplit(")", 1)[1].split()[19]) / tick
    replaced = tuple(sorted({p for p, gone in mapped if gone}))
    imported, maybe = _changed_since(py_files, started, {_package(p, sites) for p, _gone in mapped})
    txs = tuple(_transactions_after(target, started))
    # Any code of the environment newer than the process: what it runs (or will import next) is not what the
    # disk holds. The split says how sure that is for each file.
    verdict = Verdict.STALE if replaced or imported or maybe else Verdict.CURRENT
    return Process(pid, command, started, verdict, replaced, tuple(imported), tuple(maybe), txs)


def _launched_from(argv: Sequence[str], command: str, bin_dir: str, sites: Sequence[str]) -> bool:
    """Whether a command line runs the environment's interpreter or names its site-packages."""
    return (bool(argv) and argv[0].startswith(bin_dir)) or any(s in command for s in sites)


def _mapped(maps: str, sites: Sequence[str]) -> list[tuple[str, bool]] | None:
    """(name, replaced) of every file of the environment's site dirs the process maps; None when its maps
    file cannot be read. The file is read whole, a line at a time — a server maps thousands of regions, and a
    long name makes a line of 4 KiB — and only the distinct files of the site dirs are kept."""
    found: set[tuple[str, int]] = set()
    try:
        with open(maps, "rb") as f:
            for line in f:
                entry = _map_entry(line)
                if entry is not None and any(_inside(n, sites) for n in _readings(entry[0])):
                    found.add(entry)
    except OSError:
        return None
    return [_resolve(pathname, inode) for pathname, inode in sorted(found)]


def _map_entry(line: bytes) -> tuple[str, int] | None:
    """(pathname as the kernel wrote it, inode) of one line of a maps file, None for a region of no file.

    The kernel's format: ``address perms offset dev inode``, spaces to a column, then the pathname — which
    may hold spaces, and ends where the line ends (its newlines are written ``\\012``)."""
    fields = line.rstrip(b"\n").split(b" ", 5)
    if len(fields) < 6 or not fields[4].isdigit():
        return None
    pathname = fields[5].lstrip(b" ")
    if not pathname.startswith(b"/"):
        return None  # [heap], [stack], [anon:...], or no name at all
    return os.fsdecode(pathname), int(fields[4])


def _readings(pathname: str) -> list[str]:
    """The names a maps pathname may stand for, the likeliest first: the kernel writes a newline of a name as
    ``\\012`` but a backslash as itself, so each ``\\012`` is a newline or those four characters."""
    pieces = pathname.split("\\012")
    if len(pieces) == 1:
        return [pathname]
    if len(pieces) > _MAX_ESCAPES + 1:
        return ["\n".join(pieces), pathname]
    return [
        pieces[0] + "".join(sep + piece for sep, piece in zip(seps, pieces[1:], strict=True))
        for seps in itertools.product(("\n", "\\012"), repeat=len(pieces) - 1)
    ]


def _resolve(pathname: str, inode: int) -> tuple[str, bool]:
    """(the file's name, whether the disk no longer holds what the process maps) for one mapped file.

    The mapping is current when a reading of its name holds its inode: the name as written first — a file
    may be named ``x (deleted)`` — then, when it ends in `` (deleted)``, the name before that suffix (a file
    unlinked, maybe linked again). Otherwise the file was replaced or removed: it is named by the first
    reading that exists, else the likeliest (without the suffix when the kernel wrote one)."""
    literal = _readings(pathname)
    unlinked = _readings(pathname.removesuffix(_DELETED)) if pathname.endswith(_DELETED) else []
    inodes = {name: _inode(name) for name in (*literal, *unlinked)}
    for name, found in inodes.items():
        if found == inode:
            return name, False
    likely = unlinked or literal
    return next((name for name in likely if inodes[name] is not None), likely[0]), True


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except (OSError, ValueError):
        return None


def _inside(path: str, sites: Sequence[str]) -> bool:
    return any(path.startswith(s + os.sep) for s in sites)


def _package(path: str, sites: Sequence[str]) -> str:
    for s in sites:
        if path.startswith(s + os.sep):
            return path[len(s) + 1 :].split(os.sep, 1)[0]
    return ""


def _python_files(target: Target) -> Iterator[str]:
    for dist in installed_distributions(target):
        for path in dist.paths:
            if path.endswith(".py"):
                yield path


def _changed_since(files: Sequence[str], started: float, packages: set[str]) -> tuple[list[str], list[str]]:
    """(.py files changed after ``started`` that the process evidently imported, those it may have)."""
    imported: list[str] = []
    maybe: list[str] = []
    for path in files:
        try:
            changed = os.stat(path).st_ctime
        except OSError:
            continue
        if changed <= started + _START_SLACK:
            continue
        evident = _compiled_between(path, started, changed) or any(
            f"{os.sep}{pkg}{os.sep}" in path for pkg in packages if pkg
        )
        (imported if evident else maybe).append(path)
    return imported, maybe


def _compiled_between(path: str, started: float, changed: float) -> bool:
    """Bytecode of ``path`` written after the process started and before the file changed: imported then."""
    try:
        pycs = bytecode_of(path)
    except OSError:
        return False
    for pyc in pycs:
        try:
            written = os.stat(pyc).st_mtime
        except OSError:
            continue
        if started <= written <= changed and PYCACHE in pyc:
            return True
    return False


def _transactions_after(target: Target, started: float) -> Iterator[str]:
    """The patchguard transactions committed after ``started`` (their backup directories' times)."""
    for site in target.site_packages:
        top = os.path.join(site, STATE_DIR, "backups")
        try:
            names = sorted(os.listdir(top))
        except OSError:
            continue
        for name in names:
            try:
                if os.stat(os.path.join(top, name)).st_mtime >= started:
                    yield name
            except OSError:
                continue
