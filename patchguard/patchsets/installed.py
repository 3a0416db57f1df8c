"""Where a set meets an environment: the installed distributions it targets, and reading their files."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from .._fs import read_regular
from ..env import Target
from ..errors import UsageError
from ..integrity.managed import installed_distributions
from ..integrity.records import InstalledDistribution, canonicalize
from ..model import command
from ..txn import check_path, recover_all
from .model import PatchSet, PatchSetError, load_set, safe_relpath
from .planner import Reader

__all__ = ["SetEnvironment", "check_paths", "owned_paths", "reader"]


@dataclass(frozen=True, slots=True)
class SetEnvironment:
    """An environment read for set operations: its target, distributions, and what recovery put back."""

    target: Target
    dists: tuple[InstalledDistribution, ...]
    recovered: tuple[str, ...] = ()

    @classmethod
    def open(cls, target: Target) -> SetEnvironment:
        """The environment ``target`` (what ``--python``/``--site-packages`` resolved to), read; an
        unfinished transaction rolled back first."""
        recovered = recover_all(target.site_packages, target.roots)
        return cls(target, tuple(installed_distributions(target)), recovered)

    def form_for(self, ps: PatchSet) -> PatchSet:
        """The form of ``ps`` written for the versions installed here: the set itself, or — when a rebase
        carried it ahead of an upgrade this box has not had yet — the form its history keeps for them
        (``history/<release>/``, newest first). A set carries a form per target version; the installed
        version's form is what sets, status, check, apply and revert work with."""
        if self._admits(ps):
            return ps
        for h in reversed(ps.history):
            kept = h.kept
            if not kept or safe_relpath(kept):
                continue
            try:
                form = load_set(os.path.join(ps.directory, *kept.split("/")), ps.name)
            except PatchSetError:
                continue  # a kept form that no longer loads speaks for no release
            if self._admits(form):
                return form
        return ps

    def _admits(self, ps: PatchSet) -> bool:
        for t in ps.targets:
            if t.is_environment:
                continue
            dist = next((d for d in self.dists if d.canonical_name == canonicalize(t.distribution)), None)
            if dist is None or not t.admits(dist.version):
                return False
        return True

    def installed(self, ps: PatchSet, force_version: bool) -> list[InstalledDistribution]:
        """The installed distribution of every target of ``ps``; refuses missing ones and wrong versions."""
        out: list[InstalledDistribution] = []
        problems: list[str] = []
        for t in ps.targets:
            if t.is_environment:
                continue  # the environment itself: always here, any version
            dist = next((d for d in self.dists if d.canonical_name == canonicalize(t.distribution)), None)
            if dist is None:
                problems.append(f"{t.distribution} is not installed")
                continue
            if not t.admits(dist.version) and not force_version:
                problems.append(
                    f"{ps.name} is for {t.distribution} {t.version}; {dist.version} is installed "
                    f"(carry it over: {command('rebase', '--set', ps.name, '--to-version', dist.version)})"
                )
            out.append(dist)
        if problems:
            hint = (
                "or use --force-version to try it as it is" if out else "choose the environment with --python"
            )
            raise UsageError("; ".join(problems), path=ps.directory, hint=hint)
        return out

    def site(self, dists: Sequence[InstalledDistribution]) -> str:
        """The site dir a set is applied in: its distributions' (the first one's), or for a set of the
        environment alone the environment's first site dir (purelib: where ``sitecustomize.py`` goes)."""
        return dists[0].site_dir if dists else self.target.site_packages[0]

    def refuse_foreign(self, ps: PatchSet, dists: Sequence[InstalledDistribution], site: str) -> None:
        """A set with the environment target changes files no distribution owns and those of its own
        targets, never a file another distribution installed (that would escape its version check)."""
        if not any(t.is_environment for t in ps.targets):
            return
        mine = {id(d) for d in dists}
        owner = {rel: d.name for d in self.dists if id(d) not in mine for rel in owned_paths([d], site)}
        foreign = [f"{rel} (installed by {owner[rel]})" for rel in ps.paths if rel in owner]
        if foreign:
            raise PatchSetError(
                "refused, nothing written: the set changes files of a distribution it does not target: "
                + ", ".join(foreign),
                path=ps.directory,
                hint="add that distribution to its targets (patchset.toml)",
            )


MAX_FILE_BYTES = 256 * 1024 * 1024  # a file a set patches: source, never this big


def reader(site: str) -> Reader:
    """``read(relpath)``: the bytes of a file of ``site`` (``None``: absent); errors name the file."""

    def read(rel: str) -> bytes | None:
        try:
            data = read_regular(os.path.join(site, *rel.split("/")), MAX_FILE_BYTES + 1)  # never a FIFO
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise PatchSetError(
                f"cannot read ({exc.strerror or exc})", path=os.path.join(site, rel)
            ) from None
        if len(data) > MAX_FILE_BYTES:
            raise PatchSetError(f"larger than {MAX_FILE_BYTES >> 20} MiB", path=os.path.join(site, rel))
        return data

    return read


def check_paths(ps: PatchSet, site: str) -> None:
    """Refuse a set any of whose paths would be written outside ``site`` (or into patchguard's state)."""
    problems = []
    for rel in ps.paths:
        why = check_path(site, os.path.join(site, *rel.split("/")))
        if why:
            problems.append(f"{rel}: {why}")
    if problems:
        raise PatchSetError(
            f"refused, nothing written: {len(problems)} path{'s' if len(problems) != 1 else ''} of the set "
            "cannot be written safely\n  " + "\n  ".join(problems),
            path=ps.directory,
            hint="a set changes only regular files inside site-packages, never through a symlink",
        )


def owned_paths(dists: Sequence[InstalledDistribution], site: str) -> set[str]:
    """Paths (relative to ``site``, POSIX) that some RECORD lists."""
    prefix = os.path.join(site, "")
    return {p[len(prefix) :].replace(os.sep, "/") for d in dists for p in d.paths if p.startswith(prefix)}
