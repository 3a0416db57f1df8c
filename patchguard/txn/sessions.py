"""What a session keeps: the start bytes of every file it holds, the hashes of what its trials wrote, and
the session record; the lock a live session holds."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from .._fs import (
    PYCACHE,
    STATE_DIR,
    bytecode_of,
    parse_json,
    read_input,
    read_regular,
    sha256_file,
)
from .._fs import SESSION as _SESSION
from ..model import printable
from .durable import fsync_dir, write_durable
from .locking import check_state_dir
from .paths import _check_paths, _inside, _missing_dirs, check_path
from .staging import _bytecode
from .values import _SESSION_DIR, _TRIALS, SESSION_SCHEMA, Change, JournalError, SessionBusy

_own_sessions: set[str] = set()  # the roots this process holds a session on (its commits do not undo it)


@dataclass(frozen=True, slots=True)
class _Held:
    """One file of a session: its start bytes' hash (``None``: absent), where they are kept, its mode."""

    path: str
    start: str | None
    saved: str | None
    mode: int


def note_trial(root: str, digests: Sequence[str | None]) -> None:
    """Remember, before a trial's commit, the hashes of what it writes: a killed session put back later
    tells its own trials' bytes from someone's edit made since (kept aside then)."""
    path = os.path.join(os.path.abspath(root), STATE_DIR, _SESSION_DIR, _TRIALS)
    lines = "".join(f"{d}\n" for d in digests if d)
    if lines:
        with open(path, "a", encoding="ascii") as f:
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())


def _trial_hashes(state: str) -> frozenset[str]:
    try:
        text = read_regular(os.path.join(state, _SESSION_DIR, _TRIALS), 64 << 20).decode("ascii", "replace")
    except OSError:
        return frozenset()
    return frozenset(text.split())


def live_session(root: str) -> str | None:
    """Who holds ``root`` in trial states right now (``"bisect (pid 4242)"``), or ``None``: no session, its
    process died (the next writer's recovery puts it back), or this very process holds it."""
    import fcntl

    root = os.path.abspath(root)
    state = os.path.join(root, STATE_DIR)
    path = os.path.join(state, _SESSION)
    if root in _own_sessions or not os.path.lexists(path):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            doc = _read_session(state)
        except JournalError:
            doc = None
        return _holder(doc, "bisect")
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def _holder(doc: object, default: str) -> str:
    """Who a session file says holds the environment: its label (escaped, cut short) and pid."""
    entry = doc if isinstance(doc, dict) else {}
    label, pid = entry.get("label"), entry.get("pid")
    who = printable(label)[:40] if isinstance(label, str) else default
    return who + (f" (pid {pid})" if isinstance(pid, int) and not isinstance(pid, bool) else "")


def refuse_during_session(roots: Sequence[str]) -> None:
    """Refuse a write command while a session holds one of ``roots`` in trial states: what it would read
    and change is a trial, and the session puts its own start back at the end (one line naming it)."""
    for root in roots:
        who = live_session(root)
        if who is not None:
            raise SessionBusy(
                f"{who} holds this environment in trial states: nothing is changed while it runs",
                path=root,
                hint="wait for it to end, or stop it (Ctrl-C: it puts every file back first)",
            )


def _session_lock(root: str, state: str) -> int:
    """An exclusive ``flock`` on the session file itself, taken without waiting: its process holds it for
    the session's whole life (and deletes the file before letting go), so a session file nobody holds is
    one whose process died. Raises :class:`SessionBusy` when it is held."""
    import fcntl

    path = os.path.join(state, _SESSION)
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK
    try:
        fd = os.open(path, flags)
    except OSError as exc:  # gone (its session ended just now: nothing to do), or a symlink
        if isinstance(exc, FileNotFoundError):
            raise
        raise JournalError(
            f"cannot open the session file ({exc.strerror or exc})",
            path=path,
            hint="patchguard keeps it as a regular file; inspect it (and look at who changed it)",
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise JournalError("is not a regular file", path=path, hint="inspect it (and look at who made it)")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SessionBusy(
            f"{_holder(_read_session(state), 'a bisect')} holds this environment in trial states",
            path=root,
            hint="wait for it to end, or stop it (Ctrl-C: it puts every file back first)",
        ) from None
    return fd


def _save_start(
    root: str, state: str, paths: Sequence[str], also: Sequence[str]
) -> tuple[list[_Held], list[str]]:
    """Keep the start bytes of ``paths`` and of their bytecode; the directories a trial may create."""
    wanted: list[str] = []
    for p in paths:
        wanted.append(p)
        if p.endswith(".py"):
            with contextlib.suppress(OSError):
                wanted += sorted(bytecode_of(p))
    _check_paths(root, wanted, also)
    check_state_dir(root)
    saved_dir = os.path.join(state, _SESSION_DIR)
    import shutil

    shutil.rmtree(saved_dir, ignore_errors=True)
    os.makedirs(saved_dir)
    held: list[_Held] = []
    dirs: list[str] = []
    for n, p in enumerate(dict.fromkeys(wanted)):
        try:
            st = os.stat(p)
        except FileNotFoundError:
            held.append(_Held(p, None, None, 0o644))
            dirs += [d for d in _missing_dirs(os.path.dirname(p)) if d not in dirs]
            continue
        name = f"{n:05d}"
        # A copy, never a hard link: a test that appends to the file in place would change a linked
        # "start" with it, and the way back would keep the test's bytes.
        shutil.copyfile(p, os.path.join(saved_dir, name), follow_symlinks=False)
        held.append(_Held(p, sha256_file(os.path.join(saved_dir, name)), name, stat.S_IMODE(st.st_mode)))
    fsync_dir(saved_dir)
    return held, dirs


def _write_session(state: str, doc: dict[str, object]) -> None:
    tmp = os.path.join(state, _SESSION + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    write_durable(tmp, json.dumps(doc, indent=1).encode(), 0o644)
    os.replace(tmp, os.path.join(state, _SESSION))
    fsync_dir(state)


def _read_session(state: str) -> object:
    try:
        return parse_json(read_input(os.path.join(state, _SESSION)))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise JournalError(
            f"unreadable session file ({exc})",
            path=os.path.join(state, _SESSION),
            hint=f"the start state is in {_SESSION_DIR}/ beside it; inspect both",
        ) from None


def _drop_session(state: str) -> None:
    """Forget a finished session: its file first (then nothing is pending), then its kept bytes."""
    import shutil

    for name in (_SESSION, _SESSION + ".tmp"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(state, name))
    fsync_dir(state)
    shutil.rmtree(os.path.join(state, _SESSION_DIR), ignore_errors=True)


def _to_start(state: str, held: Sequence[_Held]) -> list[Change]:
    """The changes that put every held file that differs back to its start bytes — and the start bytecode of
    a ``.py`` they write, even where it is unchanged (writing a ``.py`` drops its bytecode: ``sed -i``)."""
    changes: list[Change] = []
    kept: list[_Held] = []  # held bytecode already at its start
    for h in held:
        now = sha256_file(h.path)
        if now == h.start:
            if h.saved is not None and os.sep + PYCACHE + os.sep in h.path:
                kept.append(h)
            continue
        data = read_regular(os.path.join(state, _SESSION_DIR, h.saved)) if h.saved is not None else None
        changes.append(Change(h.path, data, now, h.mode))
    if changes and kept:
        dropped = {pyc for c in changes if c.path.endswith(".py") for pyc in _bytecode(c.path)}
        for h in kept:
            if h.path in dropped and h.saved is not None:
                data = read_regular(os.path.join(state, _SESSION_DIR, h.saved))
                changes.append(Change(h.path, data, h.start, h.mode))
    return changes


def _emptied(dirs: Sequence[str], gone: set[str]) -> tuple[str, ...]:
    """Of the directories trials may have created, those the plan leaves empty (innermost first)."""
    out: list[str] = []
    for d in sorted(dirs, key=len, reverse=True):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        if all(os.path.join(d, n) in gone or os.path.join(d, n) in out for n in names):
            out.append(d)
    return tuple(out)


_recovering: set[str] = set()  # the roots whose killed session this process is putting back


def _validated_session(
    doc: object, root: str, state: str, allowed: Sequence[str]
) -> tuple[list[_Held], list[str], list[str]]:
    """The files, created directories and other roots of a session file, each checked, or
    :class:`JournalError`: a file outside the environment, kept bytes that are not the start's."""
    if not isinstance(doc, dict) or doc.get("schema") != SESSION_SCHEMA:
        raise _bad_session(state, "a session file of another format")
    also = [a for a in doc.get("also", []) if isinstance(a, str) and a in allowed]
    files, dirs = doc.get("files"), doc.get("dirs", [])
    if not isinstance(files, list) or not isinstance(dirs, list):
        raise _bad_session(state, "malformed session file")
    held = [_held_entry(f, root, state, also) for f in files]
    inside = [d for d in dirs if isinstance(d, str) and _inside((root, *also), d)]
    return held, inside, also


def _bad_session(state: str, why: str) -> JournalError:
    return JournalError(
        f"{why}; the start state was not put back",
        path=os.path.join(state, _SESSION),
        hint=f"inspect it and the kept files in {_SESSION_DIR}/ beside it, then delete both",
    )


def _held_entry(f: object, root: str, state: str, also: Sequence[str]) -> _Held:
    """One file of a session file, checked: writable by a transaction, its kept bytes the start's."""
    entry = f if isinstance(f, dict) else {}
    path, start, saved, mode = (entry.get(k) for k in ("path", "start", "saved", "mode"))
    if not isinstance(path, str) or check_path(root, path, also) is not None:
        raise _bad_session(state, f"it names a file patchguard may not write ({printable(str(path))[:80]})")
    mode = _tame(path, mode)
    if start is None:
        return _Held(path, None, None, mode)
    valid_name = isinstance(saved, str) and saved not in ("", ".", "..") and os.path.basename(saved) == saved
    kept = os.path.join(state, _SESSION_DIR, saved) if valid_name and isinstance(saved, str) else ""
    if not isinstance(start, str) or not kept or sha256_file(kept) != start:
        raise _bad_session(state, f"the kept start bytes of {printable(path)} are missing or changed")
    return _Held(path, start, os.path.basename(kept), mode)


def _tame(path: str, mode: object) -> int:
    """A mode read from a session file (which anyone who could write ``.patchguard/`` could have written),
    as it may be given back: permission bits only, and setuid, setgid, sticky or world-write only where the
    file has them now (a session kept them as it found them; it never grants them)."""
    if not isinstance(mode, int) or isinstance(mode, bool):
        return 0o644
    try:
        now = stat.S_IMODE(os.lstat(path).st_mode)
    except OSError:
        now = 0
    risky = 0o7002
    return (mode & 0o777 & ~risky) | (mode & now & risky)
