"""Reading a candidate wheel: a wheel file or an unpacked one, its members bounded by their RECORD size and an
absolute cap, its own RECORD (refused when a member names a path outside the wheel's root), and where each
member installs in site-packages. Nothing here decides *which* wheel: that is :mod:`.sources`.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable, Sequence

from .._fs import plain_relpath, read_regular
from ..errors import PatchguardError
from ..integrity.records import InstalledDistribution, RecordEntry, parse_record
from ..model import printable

__all__ = [
    "INSTALLED_LIMIT",
    "READ_ERRORS",
    "Candidate",
    "DownloadProgress",
    "Rejected",
    "SizeMismatch",
    "UnpackedWheel",
    "WheelFile",
    "in_site",
    "is_script_member",
    "member_map",
    "own_record_wrong",
    "wheel_record",
]

# (label, bytes done, bytes in all or None, finished): what a download reports as it goes.
DownloadProgress = Callable[[str, int, "int | None", bool], None]

INSTALLED_LIMIT = 256 * 1024 * 1024
"""The most of one file read for a diff or for analysis, installed or from a wheel (whose member is capped
at its RECORD size when RECORD gives one)."""


def _within_cap(limit: int) -> None:
    """Refuse to read a member larger than :data:`INSTALLED_LIMIT`, whatever size its RECORD row gives:
    an honest 2 GiB member is not source to diff, and reading it would take the memory of the box."""
    if limit > INSTALLED_LIMIT:
        raise ValueError(f"{limit} bytes, over the {INSTALLED_LIMIT >> 20} MiB patchguard reads of one file")


RECORD_LIMIT = 64 * 1024 * 1024
"""The most of a wheel's own RECORD that is read (torch's is about 3 MB): one that inflates to hundreds of MiB
is refused, never read into memory."""

# What reading a candidate wheel can raise when it is truncated, corrupt or not what it claims.
READ_ERRORS = (OSError, KeyError, UnicodeDecodeError, zipfile.BadZipFile, EOFError, ValueError)


class SizeMismatch(ValueError):
    """A candidate's member is not the size the installed RECORD gives: not the file that was installed."""


class Rejected(PatchguardError):
    """A candidate wheel is not the one wanted (unreadable, a malformed RECORD, another build): the message
    says why, and the next candidate is tried."""


# -- candidate wheels -------------------------------------------------------------------------------------


class Candidate:
    """A possible pristine source: a wheel file or an unpacked wheel directory."""

    kind: str
    location: str

    def record_text(self) -> str:
        raise NotImplementedError

    def members_for(self, dist: InstalledDistribution) -> dict[str, str] | None:
        """Installed RECORD path → member, proven by the candidate itself; ``None`` (a wheel): the caller
        proves it by its RECORD. Raises :class:`Rejected` when it is not the installed build."""
        return None

    def read(self, member: str, limit: int) -> bytes:
        """The member's bytes; an error when it holds more than ``limit`` (the RECORD size): a member
        that inflates without end is never read into memory."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class WheelFile(Candidate):
    """A wheel file. ``vouched`` says what proves its bytes independently of the RECORD inside it (the
    sha256 an index published for it, checked as it was downloaded), when something does."""

    def __init__(self, kind: str, path: str, vouched: str | None = None) -> None:
        self.kind, self.location, self.vouched = kind, path, vouched
        self._zip: zipfile.ZipFile | None = None
        self._dist_info: str | None = None

    def _open(self) -> zipfile.ZipFile:
        if self._zip is None:
            self._zip = zipfile.ZipFile(self.location)
            infos = {n.split("/", 1)[0] for n in self._zip.namelist() if n.endswith(".dist-info/RECORD")}
            if len(infos) != 1:
                raise zipfile.BadZipFile(f"expected one .dist-info/RECORD, found {len(infos)}")
            self._dist_info = infos.pop()
        return self._zip

    def record_text(self) -> str:
        self._open()  # which .dist-info holds the RECORD
        why = f"its RECORD is larger than {RECORD_LIMIT >> 20} MiB"
        return self._bounded(f"{self._dist_info}/RECORD", RECORD_LIMIT, why).decode("utf-8")

    def read(self, member: str, limit: int) -> bytes:
        _within_cap(limit)
        return self._bounded(member, limit, f"larger than the {limit} bytes RECORD gives")

    def _bounded(self, member: str, limit: int, why: str) -> bytes:
        """A member's bytes, never more than ``limit``: its header's size is checked, and since that may
        lie, the stream is read no further than the limit either (``SizeMismatch`` saying ``why``)."""
        zf = self._open()
        if zf.getinfo(member).file_size > limit:
            raise SizeMismatch(why)
        with zf.open(member) as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise SizeMismatch(f"{why} (it inflates beyond)")
        return data

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
            self._zip = None


class UnpackedWheel(Candidate):
    """uv's ``archive-v*/<id>/``: a wheel's contents, unzipped (and hard-linked into environments)."""

    def __init__(self, path: str, dist_info: str) -> None:
        self.kind, self.location, self._dist_info = "uv-cache", path, dist_info

    def record_text(self) -> str:
        data = read_regular(os.path.join(self.location, self._dist_info, "RECORD"), RECORD_LIMIT + 1)
        if len(data) > RECORD_LIMIT:
            raise SizeMismatch(f"its RECORD is larger than {RECORD_LIMIT >> 20} MiB")
        return data.decode("utf-8")

    def read(self, member: str, limit: int) -> bytes:
        _within_cap(limit)
        norm = os.path.normpath(member)
        if norm.startswith("..") or os.path.isabs(norm):
            raise OSError(f"member {member!r} leaves the archive")
        data = read_regular(os.path.join(self.location, norm), limit + 1)
        if len(data) > limit:
            raise SizeMismatch(f"larger than the {limit} bytes RECORD gives")
        return data


def in_site(member: str) -> str | None:
    """Where a wheel member installs inside site-packages, relative to it: a root member at its own path,
    ``<name>.data/purelib|platlib/X`` at ``X``; ``None`` for the other ``.data`` schemes (scripts, headers,
    data), which install elsewhere."""
    first, _, rest = member.partition("/")
    if first.endswith(".data") and rest:
        scheme, _, sub = rest.partition("/")
        return sub if scheme in ("purelib", "platlib") else None
    return member


def member_map(wheel_entries: Sequence[RecordEntry], dist: InstalledDistribution) -> dict[str, str]:
    """Installed RECORD path → wheel member, for every member the installer copied verbatim.

    Root members install to the same path; ``<name>.data/purelib|platlib/X`` to ``X``; other ``.data``
    schemes (scripts, data, headers) to somewhere outside site-packages, matched by path suffix.
    """
    installed = [e.path for e in dist.entries]
    outside = [p for p in installed if p.startswith("../") or os.path.isabs(p)]
    out: dict[str, str] = {}
    for e in wheel_entries:
        member = e.path
        rel = in_site(member)
        if rel is not None:
            out[rel] = member
            continue
        scheme, _, sub = member.partition("/")[2].partition("/")
        suffix = {"scripts": "bin/" + sub, "headers": sub, "data": sub}.get(scheme, sub)
        hits = [p for p in outside if p.endswith("/" + suffix)]
        if len(hits) == 1:
            out[hits[0]] = member
    return out


def is_script_member(member: str) -> bool:
    first, _, rest = member.partition("/")
    return first.endswith(".data") and rest.startswith("scripts/")


def own_record_wrong(cand: Candidate, member: str, entry: RecordEntry) -> bool:
    """Whether a wheel *file*'s own RECORD gives ``member`` the installed row's hash although the member
    holds other bytes: the upstream RECORD is wrong (some torch releases; the member is what shipped).
    Never for an unpacked wheel (uv's cache): its member may be the installed file itself, hard-linked and
    edited."""
    if not isinstance(cand, WheelFile):
        return False
    try:
        rows = wheel_record(cand)
    except Rejected:
        return False
    own = next((e for e in rows if e.path == member), None)
    return own is not None and (own.algorithm, own.digest) == (entry.algorithm, entry.digest)


def wheel_record(cand: Candidate) -> list[RecordEntry]:
    """A candidate's own RECORD; :class:`Rejected` says why it cannot be read."""
    try:
        wheel_entries, problems = parse_record(cand.record_text())
    except READ_ERRORS as exc:
        raise Rejected(f"unreadable ({exc.__class__.__name__}: {exc})") from None
    if problems:
        raise Rejected(f"its RECORD is malformed (line {problems[0].line}: {problems[0].message})")
    unsafe = [e.path for e in wheel_entries if not plain_relpath(e.path)]
    if unsafe:  # a wheel member must stay inside the wheel's root: nothing of it is used
        raise Rejected(f"its RECORD names a member outside the wheel's root: {printable(unsafe[0])!r}")
    return wheel_entries
