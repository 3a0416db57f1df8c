"""The review directory ``patches/NAME.rebase/``: what a rebase could not carry, for a person to finish.

It holds the conflicted files with ``diff3`` markers (``files/<path>``), each lost file's diff
(``lost/<path>.lost.patch``), a ``SUMMARY.txt`` saying what to do, and ``rebase.json``, its *key*: the set
(name and digest), both releases and, for one target of several, the distribution. A later rebase takes up
the resolutions in it only while its key is that rebase's own; a review directory made for other inputs is
never deleted unseen but kept aside as ``NAME.rebase.previous`` (one is kept), and one whose resolutions
are in the rewritten set is removed.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence

from ..._fs import put_file, read_regular, staged_dir
from ...errors import UsageError
from ...model import command
from ...txn import write_point
from ..model import PatchSet
from ..setdir import discard
from .inputs import RebaseInputs
from .merge import has_markers
from .outcome import FileOutcome, Rebased, RebasedFile

__all__ = [
    "REVIEW_SUFFIX",
    "done_with",
    "must_be_review",
    "pointed",
    "retire",
    "review_dir",
    "take_resolutions",
    "write_review",
]

REVIEW_SUFFIX = ".rebase"


def review_dir(ps: PatchSet) -> str:
    """Where the review directory of ``ps`` goes: beside the set, ``NAME.rebase``."""
    return os.path.join(os.path.dirname(ps.directory), ps.name + REVIEW_SUFFIX)


def _review_key(inputs: RebaseInputs) -> dict[str, str]:
    key = {
        "set": inputs.ps.name,
        "digest": inputs.ps.digest,
        "from": inputs.base.version,
        "to": inputs.target.version,
    }
    if inputs.whole is not None:  # one target of several: which one
        key["distribution"] = inputs.ps.distributions[0].distribution
    return key


def _key_of(review: str) -> dict[str, object] | None:
    try:
        doc = json.loads(read_regular(os.path.join(review, "rebase.json"), 1 << 20))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    return {k: doc[k] for k in ("set", "digest", "from", "to", "distribution") if k in doc}


def take_resolutions(inputs: RebaseInputs, review: str, rebased: list[Rebased]) -> list[Rebased]:
    """Conflicts resolved in the review directory (no markers left) and lost files whose ``.lost.patch``
    was deleted — while it was made from this same set and these releases."""
    if _key_of(review) != _review_key(inputs):
        review += ".previous"  # back to the inputs of the review directory set aside before
        if _key_of(review) != _review_key(inputs):
            return rebased
    out: list[Rebased] = []
    for r in rebased:
        f = r.file
        if f.outcome is FileOutcome.CONFLICT and f.new_path is not None:
            mine = _resolution(review, f.new_path)
            deletes = inputs.theirs.get(f.path) is None  # the set deletes it: no file is the resolution
            if (mine is not None and not has_markers(mine, inputs.labels)) or (mine is None and deletes):
                r = Rebased(
                    dataclasses.replace(f, outcome=FileOutcome.RESOLVED, conflicting=0), mine, r.ours, r.mode
                )
            elif mine is not None:  # resolving under way: the next review directory keeps the edits
                r = Rebased(f, mine, r.ours, r.mode)
        elif f.outcome is FileOutcome.LOST and not os.path.lexists(_lost_file(review, f.path)):
            r = Rebased(dataclasses.replace(f, outcome=FileOutcome.DROPPED), None, None)
        out.append(r)
    return out


def _resolution(review: str, path: str) -> bytes | None:
    """The review directory's file for ``path``: a regular file really inside it (empty is a resolution
    too), else ``None`` (absent; a symlink out of it, a FIFO, a directory are not resolutions)."""
    full = os.path.join(review, "files", *path.split("/"))
    if not os.path.realpath(full).startswith(os.path.join(os.path.realpath(review), "")):
        return None
    try:
        return read_regular(full, 256 << 20)
    except OSError:
        return None


def pointed(f: RebasedFile, review: str) -> RebasedFile:
    """``f`` with the review file to edit (a conflict) or delete (a lost file)."""
    if f.outcome in (FileOutcome.CONFLICT, FileOutcome.RESOLVED) and f.new_path is not None:
        return dataclasses.replace(f, review=os.path.join(review, "files", *f.new_path.split("/")))
    if f.outcome is FileOutcome.LOST:
        return dataclasses.replace(f, review=_lost_file(review, f.path))
    return f


def _lost_file(review: str, path: str) -> str:
    return os.path.join(review, "lost", *path.split("/")) + ".lost.patch"


def must_be_review(review: str) -> None:
    """Refuse to write over (or remove) something of the review directory's name that rebase did not write."""
    if os.path.lexists(review) and not _is_review(review):
        raise UsageError(
            "exists and is not a rebase review directory (no rebase.json, or a patch set)",
            path=review,
            hint="move it away: rebase writes what it cannot merge there",
        )


def write_review(inputs: RebaseInputs, review: str, rebased: Sequence[Rebased]) -> tuple[str, ...]:
    """``patches/NAME.rebase/``: conflicted (and resolved) files, lost files' diffs, a summary, the key.
    A review directory made from other inputs (another target, an edited set) is kept aside, not lost:
    the notes say where."""
    notes: tuple[str, ...] = ()
    hint = "make the patches directory writable, or see what would happen with --dry-run"
    with staged_dir(review, "the review directory", hint) as staging:
        for r in rebased:
            f = r.file
            if f.outcome in (FileOutcome.CONFLICT, FileOutcome.RESOLVED) and f.new_path is not None:
                if r.result is not None or f.outcome is FileOutcome.CONFLICT:
                    put_file(os.path.join(staging, "files", *f.new_path.split("/")), r.result or b"")
            elif f.outcome is FileOutcome.LOST:
                text = "".join(str(fp.patched) for fp in inputs.ps.patches if fp.path == f.path)
                put_file(_lost_file(staging, f.path), text.encode("utf-8", "surrogateescape"))
        doc = {**_review_key(inputs), "files": {r.file.path: r.file.outcome.value for r in rebased}}
        put_file(os.path.join(staging, "rebase.json"), json.dumps(doc, indent=1).encode())
        put_file(os.path.join(staging, "SUMMARY.txt"), _summary(inputs, review, rebased).encode())
        write_point()
        if _key_of(review) != _review_key(inputs):
            notes = _set_aside(review)
    return notes


def _summary(inputs: RebaseInputs, review: str, rebased: Sequence[Rebased]) -> str:
    ps, base, target = inputs.ps, inputs.base, inputs.target
    lines = [
        f"rebase of patch set {ps.name}: {base.name} {base.version} -> {target.version}",
        f"base: {base.description}",
        f"target: {target.description}",
        "",
    ]
    for r in rebased:
        f = pointed(r.file, review)
        where = f" -> {f.new_path}" if f.new_path and f.new_path != f.path else ""
        todo = f"  [{os.path.relpath(f.review, review)}]" if f.review else ""
        lines.append(f"{f.outcome.value:<9} {f.path}{where}{todo}")
    outcomes = {r.file.outcome for r in rebased}
    lines += ["", "What to do:"]
    if FileOutcome.CONFLICT in outcomes:
        lines += [
            "  conflicts: edit files/<path> here and resolve every <<<<<<< ... >>>>>>> region (the upper",
            f"    side is {target.version}, the lower the set's change); a file without markers is resolved",
            "    (an empty file too). For a file the set deletes, deleting files/<path> keeps the deletion.",
        ]
    if FileOutcome.LOST in outcomes:
        lines += [
            "  lost: lost/<path>.lost.patch is a change with no file to go to in the new release; delete it",
            "    to leave that change behind.",
        ]
    lines += [
        f"  then run again: {command('rebase', '--set', ps.name)} (the same releases); the set is rewritten",
        "  once nothing is left, and this directory removed.",
    ]
    return "\n".join(lines) + "\n"


def retire(inputs: RebaseInputs, review: str) -> tuple[str, ...]:
    """Once the set is rewritten: the review directory made from these inputs is removed (its resolutions
    are in the set now); one made for other inputs is kept aside, and the notes say where."""
    if _key_of(review) == _review_key(inputs):
        discard(review)
        return ()
    return _set_aside(review)


def done_with(review: str, ps: PatchSet) -> tuple[str, ...]:
    """A review directory left beside a set already written for the release: removed when the set's history
    says it was rewritten from exactly that review's inputs (a rebase killed after rewriting the set, before
    removing it: its resolutions are in the set), else kept aside."""
    key = _key_of(review) if _is_review(review) else None
    made_from = {(h.digest, h.release, h.to) for h in ps.history}
    if key is not None and (key.get("digest"), key.get("from"), key.get("to")) in made_from:
        discard(review)
        return ()
    return _set_aside(review)


def _set_aside(review: str) -> tuple[str, ...]:
    """Keep a review directory made for other inputs as ``NAME.rebase.previous`` (one is kept): the
    resolutions in it are never deleted unseen."""
    if not _is_review(review):
        return ()
    previous = review + ".previous"
    if os.path.lexists(previous) and not _is_review(previous):
        raise UsageError(
            "exists and is not a rebase review directory",
            path=previous,
            hint=f"move it away: rebase keeps {os.path.basename(review)} there",
        )
    discard(previous)
    os.rename(review, previous)
    return (f"the review directory made for other inputs (resolutions included) is now {previous}",)


def _is_review(path: str) -> bool:
    """A review directory rebase wrote (not a set, not a symlink, not something else of that name)."""
    return (
        os.path.isdir(path)
        and not os.path.islink(path)
        and os.path.isfile(os.path.join(path, "rebase.json"))
        and not os.path.lexists(os.path.join(path, "patchset.toml"))
    )
