"""The way back after an upgrade: the environment put back as a lock says, in one transaction.

``patchguard lock`` wrote, before the upgrade, each distribution's release and a digest of its files (every
RECORD row, and what was changed); ``rollback`` reads it and, for every distribution whose release differs now
(or that the upgrade added, or removed), lays out the locked release's files from its wheel with pypa's
``installer`` — the wheel taken from the store, the pip/uv caches, the wheelhouses or the box's indexes, and
proven twice: every member against the wheel's own RECORD, and the wheel's RECORD against the lock's digest
(the very build the lock names, not another build of the same version) — and applies again the sets the lock
had in place (each in the form it had then: the set, or the form its history keeps). The files of the
release installed now are removed, the new ones written, the sets' files patched and ``state.json`` updated:
one :class:`~patchguard.txn.Plan`, committed or not at all (kill -9 anywhere: before or after). No pip runs.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..._fs import read_regular, sha256_bytes
from ...env import Target
from ...errors import PatchguardError, UsageError
from ...integrity.records import InstalledDistribution, RecordEntry, canonicalize, matches
from ...model import Reinstall, RollbackResult, printable
from ...patchsets.installed import SetEnvironment
from ...patchsets.model import PatchSet, load_sets
from ...patchsets.ops import form_by_digest
from ...patchsets.planner import PlanFailed, plan_patches
from ...pristine.sources import NoPristineSource, ReleaseId, SourceOptions, Sources, candidates, remote
from ...pristine.wheels import Candidate, in_site, wheel_record
from ...state import AppliedRecord, Images, state_change
from ...txn import Change, Plan, commit
from ..identity.lockfile import build_digest, read_lock

__all__ = ["Reinstall", "RollbackResult", "rollback"]


def rollback(
    lock: str,
    *,
    target: Target,
    patches: str | None = None,
    fetch: SourceOptions | None = None,
    dry_run: bool = False,
) -> RollbackResult:
    """Put ``target`` back as the lock at ``lock`` says (see the module docstring): all of it in one
    transaction, or nothing when anything cannot be had or proven. :func:`patchguard.rollback` is its
    public face."""
    doc = read_lock(lock)
    env = SetEnvironment.open(target)
    sources = (fetch or SourceOptions()).open(env.target)
    work = _Work(env.target, {d.canonical_name: d for d in env.dists})
    wanted = _locked(doc)
    for key, locked in sorted(wanted.items()):
        have = work.installed.get(key)
        if have is None or have.version != locked["version"]:
            work.put_back(key, locked, have, sources)
    for key, have in sorted(work.installed.items()):
        ours = have.baseline == "RECORD" and have.has_record  # (conda's, dpkg's: theirs to remove)
        if key not in wanted and have.site_dir in env.target.site_packages and ours:
            work.remove(have)
    reapplied = work.reapply(doc.get("applied_sets", {}), patches) if work.actions else ()
    if not work.actions:
        return RollbackResult(lock, (), (), dry_run, notes=("the environment is as the lock says already",))
    plan = work.plan(f"rollback to {os.path.basename(lock)}", reapplied)
    if dry_run:
        return RollbackResult(lock, tuple(work.actions), reapplied, True, changes=len(plan.changes))
    done = commit(plan)
    return RollbackResult(
        lock,
        tuple(work.actions),
        reapplied,
        False,
        done.txid,
        done.backup_dir,
        len(plan.changes),
        done.recovered,
    )


def _locked(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The lock's distributions by canonical name (a second copy of one, ``name@meta``, is left out)."""
    return {canonicalize(k): v for k, v in doc["distributions"].items() if "@" not in k}


@dataclass
class _Work:
    """The files the transaction will write (``None``: remove), by absolute path, as they are worked out."""

    target: Target
    installed: dict[str, InstalledDistribution]
    files: dict[str, tuple[bytes | None, int]] = field(default_factory=dict)
    actions: list[Reinstall] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # distribution name → its release after
    _records: dict[str, tuple[str, AppliedRecord]] = field(default_factory=dict)  # set → (site, record)

    def _ours(self, have: InstalledDistribution) -> None:
        """A distribution another package manager installed (conda, dpkg) is its to put back."""
        if have.baseline != "RECORD" or not have.has_record:
            raise UsageError(
                f"{printable(have.name)} {printable(have.version)} was not installed from a wheel "
                "(its package manager keeps its record): roll it back with that package manager",
                path=have.metadata_dir,
            )

    def remove(self, have: InstalledDistribution) -> None:
        self._ours(have)
        gone = [p for p in _owned_files(have, self.target) if p not in self.files]
        for path in gone:
            self.files[path] = (None, 0)
        self.actions.append(Reinstall(have.name, have.version, None, "", len(gone)))

    def put_back(
        self, key: str, locked: Mapping[str, Any], have: InstalledDistribution | None, sources: Sources
    ) -> None:
        if have is not None:
            self._ours(have)
        name = have.name if have is not None else key
        version = str(locked["version"])
        site = have.site_dir if have is not None else self.target.site_packages[0]
        interpreter = _interpreter(self.target, have)
        rows = zip(have.entries, have.paths, strict=True) if have else ()
        recorded = {os.path.abspath(p): e for e, p in rows}
        wheel, laid = _proven_layout(
            ReleaseId(name, version), locked, sources, site, self.target, (interpreter, recorded)
        )
        if have is not None:
            for path in _owned_files(have, self.target):
                self.files.setdefault(path, (None, 0))
        for path, data in laid.items():
            self.files[path] = data
        self.actions.append(Reinstall(name, have.version if have else None, version, wheel, len(laid)))
        self.versions[name] = version

    def reapply(self, applied: Mapping[str, str], patches: str | None) -> tuple[str, ...]:
        """Apply again, onto the files laid out, the sets the lock had in place (their forms by digest)."""
        if not applied:
            return ()
        sets = {ps.name: ps for ps in load_sets(patches)}
        done = []
        for name, digest in sorted(applied.items()):
            ps = sets.get(name)
            form = form_by_digest(ps, digest) if ps is not None else None
            if form is None:
                raise UsageError(
                    f"the lock had set {printable(name)} in place, and no form of it with that digest is in "
                    "the patches directory or its history",
                    hint="give the patches directory the lock was written with (--patches DIR)",
                )
            self._apply(form)
            done.append(name)
        return tuple(done)

    def _apply(self, ps: PatchSet) -> None:
        site = self._site_of(ps)

        def read(rel: str) -> bytes | None:
            path = os.path.join(site, *rel.split("/"))
            if path in self.files:
                return self.files[path][0]
            try:
                return read_regular(path)
            except FileNotFoundError:
                return None

        try:
            planned = plan_patches(ps.name, ps.patches, read)
        except PlanFailed:
            try:  # already in place on files the rollback leaves as they are: nothing to do
                plan_patches(ps.name, ps.patches, read, reverse=True)
                return
            except PlanFailed:
                raise UsageError(
                    f"set {printable(ps.name)} does not apply to the files the lock names",
                    path=ps.directory,
                ) from None
        record_files = {}
        for f in planned:
            path = os.path.join(site, *f.path.split("/"))
            self.files[path] = (f.after, f.mode or self.files.get(path, (None, 0o644))[1] or 0o644)
            record_files[f.path] = Images(sha256_bytes(f.before), sha256_bytes(f.after))
        releases = {
            t.distribution: self.versions.get(t.distribution) or self._installed_version(t.distribution)
            for t in ps.distributions
        }
        self._records[ps.name] = (site, AppliedRecord.made(ps.digest, releases, record_files))

    def _installed_version(self, name: str) -> str:
        d = self.installed.get(canonicalize(name))
        return d.version if d is not None else ""

    def _site_of(self, ps: PatchSet) -> str:
        for t in ps.distributions:
            d = self.installed.get(canonicalize(t.distribution))
            if d is not None:
                return d.site_dir
        return self.target.site_packages[0]

    def _file_changes(self) -> list[Change]:
        """Each file put back (or removed), against what is there now."""
        changes = []
        for path, (data, mode) in sorted(self.files.items()):
            before = _current(path)
            if data is None and before is None:
                continue  # listed in RECORD, already gone
            changes.append(Change(path, data, before, mode or 0o644))
        return changes

    def plan(self, label: str, reapplied: Sequence[str]) -> Plan:
        root = self.target.site_packages[0]
        changes = self._file_changes()
        sites = {site for site, _ in self._records.values()} or {root}
        for site in sorted(sites):
            records = {n: r for n, (s, r) in self._records.items() if s == site}
            changes.append(state_change(site, functools.partial(_recorded, records=records)))
        gone = {p for p, (data, _m) in self.files.items() if data is None}
        written = {p for p, (data, _m) in self.files.items() if data is not None}
        others = tuple(r for r in self.target.roots if r != root)
        return Plan(root, tuple(changes), label, others, _emptied(gone, written, self.target.roots))


def _recorded(applied: dict[str, AppliedRecord], *, records: Mapping[str, AppliedRecord]) -> None:
    """state.json after the rollback: the sets applied again recorded; no record of another form left."""
    for name in list(applied):
        if name not in records:
            applied.pop(name, None)
    applied.update(records)


def _current(path: str) -> str | None:
    try:
        return hashlib.sha256(read_regular(path)).hexdigest()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PatchguardError(f"cannot read {printable(path)} ({exc.strerror or exc})", path=path) from None


def _owned_files(dist: InstalledDistribution, target: Target) -> list[str]:
    """The files a distribution's RECORD lists inside the environment's roots (what pip uninstall removes)."""
    roots = [os.path.join(os.path.abspath(r), "") for r in target.roots]
    paths = (os.path.abspath(p) for p in dist.paths)
    return [p for p in paths if any(p.startswith(r) for r in roots)]


def _emptied(gone: set[str], written: set[str], roots: Sequence[str]) -> tuple[str, ...]:
    """The directories the removals leave empty (bytecode caches aside), innermost first."""
    tops = {os.path.abspath(r) for r in roots}
    dirs: set[str] = set()
    for path in gone:
        parent = os.path.dirname(path)
        while parent not in tops and parent != os.path.dirname(parent):
            dirs.add(parent)
            parent = os.path.dirname(parent)
    keep = {os.path.dirname(p) for p in written}
    out: list[str] = []
    for d in sorted(dirs, key=lambda d: -d.count(os.sep)):
        if any(k == d or k.startswith(d + os.sep) for k in keep):
            continue
        try:
            names = os.listdir(d)
        except OSError:
            continue
        left = {os.path.join(d, n) for n in names if n != "__pycache__"} - gone - set(out)
        if not left:
            out.append(d)
    return tuple(out)


# -- the wheel, proven the build the lock names ---------------------------------------------------------


def _proven_layout(
    release: ReleaseId,
    locked: Mapping[str, Any],
    sources: Sources,
    site: str,
    target: Target,
    scripts: tuple[str, Mapping[str, RecordEntry]],
) -> tuple[str, dict[str, tuple[bytes | None, int]]]:
    """(the wheel, the files it lays out) of the first wheel file of ``release`` whose RECORD gives the
    lock's build digest (the very build) and whose every member matches that RECORD — checked as it is
    laid out, so the wheel is read once; :class:`NoPristineSource` lists what was tried."""
    tried: list[str] = []
    for cand in _wheels(release, sources, tried):
        why = _not_the_build(cand, locked)
        if why is None:
            try:
                return cand.location, _lay_out(cand.location, site, target, release.name, scripts)
            except _Lying as exc:
                why = str(exc)
        tried.append(f"rejected {cand.location}: {why}")
    raise NoPristineSource(
        f"no wheel of {release.name} {release.version} that is the build the lock names; looked in: "
        + "; ".join(tried),
        hint="put the wheel the environment was installed from in a --wheelhouse DIR",
    )


class _Lying(Exception):
    """A wheel member that does not match the wheel's own RECORD."""


def _wheels(release: ReleaseId, sources: Sources, tried: list[str]) -> Iterator[Candidate]:
    for cand in (*candidates(release, sources, tried), *remote(release, sources, tried)):
        if os.path.isfile(cand.location) and cand.location.endswith(".whl"):
            yield cand
        else:
            tried.append(f"{cand.location}: not a wheel file (rollback installs wheel files)")


def _not_the_build(cand: Candidate, locked: Mapping[str, Any]) -> str | None:
    """Why the wheel is not the build the lock names (``None``: it is)."""
    from installer.exceptions import InstallerError
    from installer.sources import WheelFile

    try:
        entries = wheel_record(cand)
    except PatchguardError as exc:
        return exc.message
    build = locked.get("build")
    if not isinstance(build, str):
        return "the lock names no build (written before build digests: write the lock again before upgrading)"
    rows = [(rel, f"{e.algorithm}={e.digest}") for e in entries if e.digest and (rel := in_site(e.path))]
    if build_digest(rows) != build:
        return "its RECORD is not the build the lock names (another build of that release)"
    try:  # every member listed, none twice (each member's bytes are checked as it is laid out)
        with WheelFile.open(Path(cand.location)) as source:
            source.validate_record(validate_contents=False)
    except (InstallerError, OSError, ValueError) as exc:
        return f"its RECORD does not list its members ({exc})"
    return None


def _lay_out(
    wheel: str, site: str, target: Target, name: str, scripts: tuple[str, Mapping[str, RecordEntry]]
) -> dict[str, tuple[bytes | None, int]]:
    """Every file pypa's installer writes for ``wheel`` into the environment — absolute path → (bytes, mode)
    — caught before it reaches the disk (the transaction writes them), every hashed member checked against
    the wheel's RECORD on the way (:class:`_Lying` when one does not match, or was not laid out). ``scripts``:
    the interpreter of the console scripts, and the installed RECORD rows that prove a launcher kept."""
    from installer import install
    from installer.sources import WheelFile

    prefix = target.prefix
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    scheme = {
        "purelib": site,
        "platlib": site,
        "scripts": target.scripts or os.path.join(prefix, "bin"),
        "data": prefix,
        "headers": os.path.join(prefix, "include", "site", version, name),
    }
    interpreter, dest_recorded = scripts
    dest = _caught_destination()(scheme, interpreter=interpreter, script_kind="posix")
    dest.recorded = dest_recorded
    with WheelFile.open(Path(wheel)) as source:
        dest.expect(source.data_dir, source.read_dist_info("RECORD"))
        install(source, dest, {"INSTALLER": b"patchguard\n"})
    unchecked = dest.unchecked()
    if unchecked:
        raise _Lying(
            f"{printable(unchecked[0])} of its RECORD was not laid out where its hash could be checked"
        )
    caught: dict[str, tuple[bytes | None, int]] = dest.caught
    return caught


def _interpreter(target: Target, have: InstalledDistribution | None) -> str:
    """The interpreter a console script of the environment starts: the one its installer wrote into the
    scripts being replaced (``#!<prefix>/bin/python``), else into the other scripts there, else
    ``<scripts>/python``."""
    scripts = target.scripts or os.path.join(target.prefix, "bin")
    own = [p for p in (have.paths if have is not None else ()) if os.path.dirname(p) == scripts]
    try:
        others = [os.path.join(scripts, n) for n in sorted(os.listdir(scripts))]
    except OSError:
        others = []
    prefix = os.path.join(os.path.abspath(target.prefix), "")
    for path in (*own, *others):
        found = _shebang(path)
        if found.startswith(prefix) and " " not in found and "python" in os.path.basename(found):
            return found
    return os.path.join(scripts, "python")


def _shebang(path: str) -> str:
    try:
        with open(path, "rb") as f:
            first = f.readline(4096)
    except OSError:
        return ""
    return first[2:].strip().decode("utf-8", "replace") if first.startswith(b"#!") else ""


def _same_launcher(path: object, module: str, attr: str, recorded: Mapping[str, RecordEntry]) -> bytes | None:
    """The launcher installed at ``path`` when it starts the same entry point (``from module import name``,
    ``sys.exit(name())``) and is as its installer recorded it (the installed RECORD's hash: never bytes on
    their own word): left as its installer wrote it (pip's template and installer's differ in quotes)."""
    entry = recorded.get(os.path.abspath(str(path)))
    try:
        data = read_regular(str(path), 64 * 1024)
    except OSError:
        return None
    if entry is None or not matches(entry, data):
        return None
    head = attr.split(".", 1)[0]
    starts = f"from {module} import {head}".encode() in data and f"sys.exit({attr}())".encode() in data
    return data if starts and data.startswith(b"#!") else None


def _record_of(text: str) -> dict[str, Any]:
    """A wheel's RECORD as installer reads it: member → its ``RecordEntry``."""
    from installer.records import RecordEntry, parse_record_file

    entries = (RecordEntry.from_elements(*row) for row in parse_record_file(text.splitlines()))
    return {e.path: e for e in entries}


def _caught_destination() -> type:
    from installer.destinations import SchemeDictionaryDestination
    from installer.records import Hash, RecordEntry
    from installer.scripts import Script
    from installer.utils import Scheme

    class Caught(SchemeDictionaryDestination):
        """installer's destination, its writes kept in memory: the transaction writes them."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.caught: dict[str, tuple[bytes | None, int]] = {}
            self.record: dict[str, RecordEntry] = {}
            self.checked: set[str] = set()
            self.recorded: Mapping[str, Any] = {}
            self.data_dir = ""

        def expect(self, data_dir: str, record: str) -> None:
            """The wheel's RECORD, that every member laid out must match."""
            self.data_dir, self.record = data_dir, _record_of(record)

        def _check(self, scheme: Scheme, path: str, data: bytes) -> None:
            member = path if scheme in ("purelib", "platlib") and path in self.record else None
            member = member or f"{self.data_dir}/{scheme}/{path}"  # a ``.data`` scheme's member
            entry = self.record.get(member)
            if entry is not None and entry.hash_ is not None:
                if not entry.validate(data):
                    raise _Lying(
                        f"{printable(member)} does not match its own RECORD (a damaged or edited wheel)"
                    )
                self.checked.add(member)

        def unchecked(self) -> list[str]:
            """The hashed members of the RECORD no write was checked against (none, for a sound wheel)."""
            return sorted(m for m, e in self.record.items() if e.hash_ is not None and m not in self.checked)

        def write_to_fs(
            self, scheme: Scheme, path: str, stream: BinaryIO, is_executable: bool
        ) -> RecordEntry:
            target = str(self._path_with_destdir(scheme, path))  # (refuses a path leaving its scheme)
            data = stream.read()
            self._check(scheme, path, data)
            self.caught[target] = (data, 0o755 if is_executable else 0o644)
            digest = hashlib.new(self.hash_algorithm, data).digest()
            encoded = base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")
            return RecordEntry(path, Hash(self.hash_algorithm, encoded), len(data))

        def write_script(self, name: str, module: str, attr: str, section: Any) -> RecordEntry:
            """installer's launcher, written as the others (installer's own chmods the file on disk)."""
            script = Script(name, module, attr, section)
            script_name, data = script.generate(self.interpreter, self.script_kind)
            data = (
                _same_launcher(
                    self._path_with_destdir(Scheme("scripts"), script_name), module, attr, self.recorded
                )
                or data
            )
            return self.write_to_fs(Scheme("scripts"), script_name, io.BytesIO(data), is_executable=True)

    return Caught
