"""Capture: write ``patches/<name>/`` from the current modifications of a distribution's files."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Protocol

from .._fs import put_file, staged_dir
from ..diffs import FileDiff
from ..env import Target
from ..errors import PatchguardError, UsageError
from ..integrity.managed import installed_distributions
from ..integrity.records import InstalledDistribution, canonicalize
from ..model import Finding
from ..pristine.explain import diff
from ..pristine.sources import SourceOptions
from ..txn import refuse_during_session, write_point
from .model import SET_NAME, FilePatch, PatchSet, load_set, load_sets, parse_diff, patches_dir
from .setdir import set_lock

__all__ = ["DiffText", "capture_set", "set_header", "write_set"]


def capture_set(
    name: str,
    distribution: str | Sequence[str],
    *,
    paths: Sequence[str] = (),
    version: str | None = None,
    description: str = "",
    force: bool = False,
    patches: str | None = None,
    target: Target,
    fetch: SourceOptions | None = None,
    unowned: bool = False,
) -> PatchSet:
    """Write ``patches/<name>/`` from the current modifications of ``distribution``'s files — of several
    distributions' (one target each) when it names more than one — and with ``unowned``, of the files no
    distribution owns (``sitecustomize.py``, ``.pth`` files, ...: the target ``{environment = true}``).

    Targets are pinned to ``version`` (a specifier, one distribution only; default ``==`` the installed
    version). Refuses to overwrite an existing set unless ``force``. The set is written to a temporary
    directory and renamed into place, so a failure leaves no half-written set.
    """
    names = [distribution] if isinstance(distribution, str) else list(dict.fromkeys(distribution))
    if not names and not unowned:
        raise UsageError("name a distribution to capture", hint="or pass --unowned for files no one owns")
    root = patches_dir(patches, must_exist=False)
    final = os.path.join(root, name)
    _check_request(name, final, version, force)
    _check_pin(version, names)
    refuse_during_session(target.site_packages)  # a bisect's trial is not the change to keep
    dists = _installed(target, names)
    diffs = _captured_diffs(dists, paths, target, fetch or SourceOptions(), unowned)
    targets: list[tuple[str, str] | None] = [(d.name, version or f"=={d.version}") for d in dists]
    if unowned:
        targets.append(None)
    if not force:
        _refuse_a_copy(root, name, diffs)
    what = ", ".join([f"{d.name} {d.version}" for d in dists] + ["files no distribution owns"] * unowned)
    header = set_header(name, description or f"captured from {what}", targets)
    with set_lock(root, name):  # a rebase of the set under way finishes first
        _check_request(name, final, version, force)
        write_set(root, name, header, diffs)
    return load_set(final)


def _check_pin(version: str | None, names: Sequence[str]) -> None:
    """``--version`` pins one distribution: refused with none (only unowned files) or several."""
    if version is not None and not names:
        raise UsageError(
            "--version pins a distribution; files no distribution owns have no version",
            hint="capture them without --version",
        )
    if version is not None and len(names) > 1:
        raise UsageError(
            "--version pins one distribution", hint="capture without it, then edit patchset.toml"
        )


def _installed(target: Target, names: Sequence[str]) -> list[InstalledDistribution]:
    """The installed distributions ``names`` name, in their order, or :class:`UsageError` for the first
    that is not installed."""
    installed = {d.canonical_name: d for d in installed_distributions(target)}
    missing = [n for n in names if canonicalize(n) not in installed]
    if missing:
        raise UsageError(f"{missing[0]} is not installed", hint="name an installed distribution")
    return [installed[canonicalize(n)] for n in names]


def _check_request(name: str, final: str, version: str | None, force: bool) -> None:
    """Refuse a bad set name, an existing set (unless ``force``) and a bad version specifier."""
    if not SET_NAME.fullmatch(name):
        raise UsageError(f"set name {name!r} must be letters, digits, '.', '_' or '-'")
    if os.path.exists(final) and not force:
        raise UsageError(
            "a patch set of that name exists", path=final, hint="choose another name or pass --force"
        )
    if version is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(version)
            if version != version.strip() or not version.isprintable():
                raise InvalidSpecifier(version)
        except InvalidSpecifier:
            raise UsageError(
                f"--version {version!r} is not a version specifier", hint="e.g. '>=0.4,<0.5'"
            ) from None


def _captured_diffs(
    dists: Sequence[InstalledDistribution],
    paths: Sequence[str],
    env: Target,
    fetch: SourceOptions,
    unowned: bool,
) -> list[FileDiff]:
    """The diffs of the distributions' changed files inside site-packages (and of the files no
    distribution owns, with ``unowned``); refuses a distribution with none, and binary ones."""
    names = {canonicalize(d.name) for d in dists}

    def wanted(f: Finding) -> bool:
        return canonicalize(f.distribution) in names if f.distribution else unowned

    diffs = diff(
        None if unowned else sorted(names),
        target=env,
        paths=paths,
        fetch=fetch,
        select=wanted,
    )
    diffs = [d for d in diffs if not d.path.startswith("../")]
    _refuse_nothing_to_capture(dists, diffs, unowned)
    return diffs


def _refuse_nothing_to_capture(
    dists: Sequence[InstalledDistribution], diffs: list[FileDiff], unowned: bool
) -> None:
    """A :class:`UsageError` for a distribution none of whose files changed, for ``unowned`` with no unowned
    file changed, and for binary diffs."""
    owned: set[str] = set()
    for dist in dists:
        own = {e.path for e in dist.entries}
        owned |= own
        if not any(d.path in own for d in diffs):
            raise UsageError(
                f"no modified files of {dist.name} match", hint="check --path, or run patchguard diff"
            )
    if unowned and all(d.path in owned for d in diffs):
        raise UsageError(
            "no file that no distribution owns matches", hint="check --path, or run patchguard diff"
        )
    binary = [d.path for d in diffs if d.binary]
    if binary:
        raise UsageError(f"binary files cannot go into a patch set: {', '.join(binary)}")


def _signature(patches: Sequence[FilePatch]) -> dict[str, tuple[object, ...]]:
    """What a set does, file by file, whatever its diffs' headers and file names: the hunks."""
    out: dict[str, tuple[object, ...]] = {}
    for fp in patches:
        hunks = tuple(
            (h.source_start, h.source_length, h.target_start, h.target_length, tuple(str(x) for x in h))
            for h in fp.patched
        )
        out[fp.path] = (*out.get(fp.path, ()), fp.creates, fp.deletes, hunks)
    return out


def _refuse_a_copy(root: str, name: str, diffs: Sequence[FileDiff]) -> None:
    """Refuse to write a set that does exactly what an existing set does (attribution would then name the
    copy): the set is named, ``--force`` writes it all the same."""
    ours = _signature([fp for d in diffs for fp in parse_diff(d.text(), d.path)])
    try:
        existing = load_sets(root) if os.path.isdir(root) else []
    except PatchguardError:
        return  # a broken set elsewhere in the directory is not this command's business
    for ps in existing:
        if ps.name != name and _signature(ps.patches) == ours:
            raise UsageError(
                f"these changes are exactly patch set {ps.name!r}",
                path=ps.directory,
                hint="use that set, or pass --force to write a copy",
            )


def set_header(name: str, description: str, targets: Sequence[tuple[str, str] | None]) -> str:
    """The head of a ``patchset.toml``: name, description and its targets, (distribution, version
    specifier) each, ``None`` for the environment (``files`` follows)."""
    listed = ", ".join(
        "{environment = true}"
        if t is None
        else f"{{distribution = {json.dumps(t[0])}, version = {json.dumps(t[1])}}}"
        for t in targets
    )
    return f"name = {json.dumps(name)}\ndescription = {json.dumps(description)}\ntargets = [{listed}]\n"


class DiffText(Protocol):
    """A file's diff as ``write_set`` takes it: where, and its unified diff text."""

    @property
    def path(self) -> str: ...

    def text(self) -> str: ...


def write_set(
    root: str,
    name: str,
    header: str,
    diffs: Sequence[DiffText],
    *,
    footer: str = "",
    keep: Mapping[str, tuple[bytes, int]] | None = None,
) -> None:
    """Write ``root/name`` — ``header`` + ``files = [...]`` + ``footer`` as its toml, one diff file per
    file, and ``keep`` (relative path → (bytes, mode)) — into a staging directory, validate it, then put it
    in place in one step: complete or absent, the old set or the new one, never none."""
    files: list[str] = []
    with staged_dir(os.path.join(root, name), "patch sets", "pass --patches DIR") as staging:
        for rel, (data, mode) in (keep or {}).items():
            put_file(os.path.join(staging, *rel.split("/")), data, mode)
        for i, d in enumerate(diffs, start=1):
            fname = f"{i:04d}-{os.path.basename(d.path).replace('.', '-')}.patch"
            if keep and fname in keep:  # a file of that name is kept: the diff takes another
                fname = f"{i:04d}-{os.path.basename(d.path).replace('.', '-')}-{len(diffs)}.patch"
            put_file(os.path.join(staging, fname), d.text().encode("utf-8", "surrogateescape"))
            files.append(fname)
            write_point()
        toml = header + f"files = [{', '.join(json.dumps(x) for x in files)}]\n" + footer
        put_file(os.path.join(staging, "patchset.toml"), toml.encode("utf-8"))
        load_set(staging, name)  # validate before anything existing is touched
        write_point()
