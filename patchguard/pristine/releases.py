"""The pristine files of a whole release, installed or not: what ``rebase`` merges between.

An installed release reads its files from disk when they still hash to their RECORD row, else from the
pristine store or its proven wheel (:func:`~.sources.find_pristine`). A release that is not installed is a
wheel found where :mod:`.sources` looks (wheelhouses, pip's and uv's caches, earlier downloads, finally
the indexes this box uses unless offline), each member checked against the wheel's own RECORD hash; a
caller that knows more about the build it wants (the hashes a set was applied on) rejects the other builds
with ``accept`` (raising :class:`~.sources.Rejected`), and the next candidate is tried.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.tags import Tag

from .._fs import read_regular
from ..integrity.records import InstalledDistribution, RecordEntry, matches
from .sources import (
    NoPristineSource,
    Pristine,
    ReleaseId,
    Sources,
    candidates,
    find_pristine,
    remote,
    unlisted_hint,
)
from .wheels import INSTALLED_LIMIT, READ_ERRORS, Candidate, Rejected, in_site, wheel_record

__all__ = ["ReleaseFiles", "installed_release", "wheel_release"]


@dataclass
class ReleaseFiles:
    """The pristine files of one release, by path relative to site-packages (``/``-separated)."""

    name: str
    version: str
    description: str  # where the bytes come from, for the user
    entries: dict[str, RecordEntry]
    _read: Callable[[str, RecordEntry], bytes] = field(repr=False)
    _cache: dict[str, bytes] = field(default_factory=dict, repr=False)

    def get(self, rel: str) -> bytes | None:
        """The pristine bytes of ``rel`` (``None``: the release has no such file)."""
        entry = self.entries.get(rel)
        if entry is None:
            return None
        if rel not in self._cache:
            self._cache[rel] = self._read(rel, entry)
        return self._cache[rel]


def installed_release(dist: InstalledDistribution, sources: Sources) -> ReleaseFiles:
    """The release ``dist`` is: installed files that still match RECORD, else the store or its wheel."""
    entries = {e.path: e for e in dist.entries if e.digest is not None and not e.path.startswith("../")}
    wheel: list[Pristine] = []

    def read(_rel: str, entry: RecordEntry) -> bytes:
        try:  # a regular file only: a FIFO where an installed file should be never blocks
            data = read_regular(dist.resolve(entry.path), INSTALLED_LIMIT + 1)
            if matches(entry, data):
                return data
        except OSError:
            pass
        stored = sources.store.for_entry(entry)
        if stored is not None:
            return stored
        if not wheel:
            wheel.append(find_pristine(dist, sources))
        return wheel[0].bytes_for(entry)

    return ReleaseFiles(dist.name, dist.version, f"installed {dist.name} {dist.version}", entries, read)


def wheel_release(
    release: ReleaseId,
    sources: Sources,
    *,
    tags: frozenset[Tag] = frozenset(),
    accept: Callable[[ReleaseFiles], None] | None = None,
) -> ReleaseFiles:
    """The first wheel of ``release`` whose RECORD reads and that ``accept`` does not reject (it raises
    :class:`Rejected` with the reason); :class:`NoPristineSource` lists every place tried and every
    candidate rejected."""
    tried: list[str] = []
    for cand in itertools.chain(candidates(release, sources, tried), remote(release, sources, tried, tags)):
        try:
            got = _release_of(release, cand, sources)
            if accept is not None:
                accept(got)
        except Rejected as exc:
            tried.append(f"rejected {cand.location}: {exc.message}")
            cand.close()
            continue
        return got
    raise NoPristineSource(
        f"no usable wheel of {release.name} {release.version}; looked in: " + "; ".join(tried),
        hint=unlisted_hint(release, sources),
    )


def _release_of(release: ReleaseId, cand: Candidate, sources: Sources) -> ReleaseFiles:
    """The release ``cand`` holds; :class:`Rejected` says why it cannot be read."""
    wheel_entries = wheel_record(cand)
    # path relative to site-packages -> (member, RECORD row), for the hashed members installed there
    members = {rel: (e.path, e) for e in wheel_entries if e.digest is not None and (rel := in_site(e.path))}

    def read(rel: str, entry: RecordEntry) -> bytes:
        stored = sources.store.for_entry(entry)
        if stored is not None:
            return stored
        member = members[rel][0]
        try:
            data = cand.read(member, entry.size if entry.size is not None else INSTALLED_LIMIT)
        except READ_ERRORS as exc:
            raise NoPristineSource(f"cannot read {member} ({exc})", path=cand.location) from None
        if not matches(entry, data):
            raise NoPristineSource(
                f"{member} does not match the wheel's own RECORD hash (a damaged or edited copy)",
                path=cand.location,
                hint="delete that copy, or pass --wheelhouse DIR holding an intact wheel",
            )
        sources.store.put(data)
        return data

    entries = {rel: e for rel, (_m, e) in members.items()}
    where = f"{cand.kind} {cand.location}"
    return ReleaseFiles(release.name, release.version, where, entries, read)
