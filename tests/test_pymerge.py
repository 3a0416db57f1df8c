"""The merge by statement (issue 26): a set's edits follow the statements they belong to where upstream
added a docstring or a decorator, re-wrapped a signature, moved a function or reordered imports; a merge
that is not certain — git's clean line merge included — is a conflict to review, never silent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from patchguard.patchsets.merge import merge, merge_file
from patchguard.patchsets.pymerge import carry, doubt

from .test_rebase import _rebase_pkg, _set, _two_releases

LABELS = ("pkg 1.1", "pkg 1.0", "pkg 1.0 + set")
HELPERS = "".join(f"def helper_{i}(x):\n    return x * {i}\n\n\n" for i in range(8))


def _diff(path: str, old: str, new: str) -> str:
    import difflib

    body = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}", n=3
    )
    return "".join(body)


def _rebase(tmp_path: Path, base: str, theirs: str, ours: str) -> tuple[int, dict[str, Any], str]:
    env, house = _two_releases(
        tmp_path, {"pkg/__init__.py": "", "pkg/m.py": base}, {"pkg/__init__.py": "", "pkg/m.py": ours}
    )
    patches = tmp_path / "patches"
    _set(patches, "local", _diff("pkg/m.py", base, theirs))
    code, out, err = _rebase_pkg(env, patches, house, "local", "--format", "json")
    doc = json.loads(out)
    merged = ""
    if code == 0:
        text = "".join(p.read_text() for p in sorted((patches / "local").glob("0*.patch")))
        merged = text
    return code, doc, merged + err


BASE = (
    "import os\nimport sys\n\n\n" + HELPERS + "def forward(x, y):\n    z = x + y\n    return z\n\n\n"
    "def backward(g):\n    return -g\n"
)
THEIRS = BASE.replace("    z = x + y\n", "    _debug = os.environ.get('DEBUG')\n    z = x + y\n")


def test_an_insertion_follows_its_statement_past_a_new_docstring(tmp_path: Path) -> None:
    ours = BASE.replace("def forward(x, y):\n", 'def forward(x, y):\n    """Add them."""\n')
    assert merge(ours.encode(), BASE.encode(), THEIRS.encode(), LABELS).conflicts  # git alone conflicts
    code, doc, text = _rebase(tmp_path, BASE, THEIRS, ours)
    assert code == 0, text
    (f,) = doc["files"]
    assert f["outcome"] == "carried" and f["merged_by"] == "statements"
    merged = merge_file("pkg/m.py", ours.encode(), BASE.encode(), THEIRS.encode(), LABELS).data.decode()
    assert '"""Add them."""\n    _debug = os.environ' in merged


def test_an_insertion_follows_a_function_upstream_moved_and_reindented(tmp_path: Path) -> None:
    moved = "def forward(x, y):\n    z = x + y\n    return z\n\n\n"
    ours = BASE.replace(moved, "").replace(
        "def backward(g):\n    return -g\n",
        "def backward(g):\n    return -g\n\n\nclass Layer:\n    def forward(x, y):\n        z = x + y\n"
        "        return z\n",
    )
    got = merge_file("pkg/m.py", ours.encode(), BASE.encode(), THEIRS.encode(), LABELS)
    # the function is a method now: its key changed, so the statement merge does not follow it; git may
    # not either — but nothing is placed silently where it does not belong
    if got.conflicts == 0:
        assert doubt(BASE.encode(), THEIRS.encode(), ours.encode(), got.data) is None
    same_level = BASE.replace(moved, "") + "\n\n" + moved.rstrip("\n") + "\n"
    got = merge_file("pkg/m.py", same_level.encode(), BASE.encode(), THEIRS.encode(), LABELS)
    assert got.conflicts == 0
    assert "def forward(x, y):\n    _debug = os.environ.get('DEBUG')\n    z = x + y\n" in got.data.decode()


def test_a_rewrapped_signature_and_a_new_decorator(tmp_path: Path) -> None:
    ours = BASE.replace("def forward(x, y):\n", "@torch.compile\ndef forward(\n    x,\n    y,\n):\n").replace(
        "import sys\n", "import sys\n\nimport torch\n"
    )
    code, _doc, text = _rebase(tmp_path, BASE, THEIRS, ours)
    assert code == 0, text
    assert "+    _debug = os.environ.get('DEBUG')" in text


def test_imports_reordered_upstream_take_the_sets_import(tmp_path: Path) -> None:
    theirs = BASE.replace("import sys\n", "import sys\nimport pdb\n")
    ours = BASE.replace("import os\nimport sys\n", "import sys\nimport os\nimport json\n")
    got = merge_file("pkg/m.py", ours.encode(), BASE.encode(), theirs.encode(), LABELS)
    assert got.conflicts == 0, got.data.decode()
    assert got.data.decode().count("import pdb\n") == 1
    assert doubt(BASE.encode(), theirs.encode(), ours.encode(), got.data) is None


def test_a_change_inside_a_statement_upstream_also_changed_is_left_to_review(tmp_path: Path) -> None:
    theirs = BASE.replace("    return -g\n", "    return -g * 2\n")
    ours = BASE.replace("    return -g\n", "    return -g.clone()\n")
    assert carry(BASE.encode(), theirs.encode(), ours.encode()) is None
    code, doc, _text = _rebase(tmp_path, BASE, theirs, ours)
    assert code == 1 and doc["files"][0]["outcome"] == "conflict"


def test_a_line_placed_in_another_function_is_doubted() -> None:
    """What a silent mis-merge looks like: the line the set put in ``forward`` lands in ``backward``."""
    wrong = BASE.replace("def backward(g):\n", "def backward(g):\n    _debug = os.environ.get('DEBUG')\n")
    assert doubt(BASE.encode(), THEIRS.encode(), BASE.encode(), wrong.encode())
    twice = THEIRS.replace("def backward(g):\n", "def backward(g):\n    _debug = os.environ.get('DEBUG')\n")
    assert doubt(BASE.encode(), THEIRS.encode(), BASE.encode(), twice.encode())
    assert doubt(BASE.encode(), THEIRS.encode(), BASE.encode(), THEIRS.encode()) is None
    broken = THEIRS.replace("    return z\n", "  return z\n")
    assert doubt(BASE.encode(), THEIRS.encode(), BASE.encode(), broken.encode())


def test_a_clean_line_merge_that_is_not_certain_goes_to_review(tmp_path: Path) -> None:
    """Two identical helper bodies: upstream deletes the first helper; a line-based merge can carry an
    insertion meant for one into the other. Whatever git does, the result is never a silent misplacement."""
    body = "    x = 1\n    y = 2\n    return x + y\n"
    twin = f"def a():\n{body}\n\ndef b():\n{body}"
    theirs = twin.replace("def a():\n    x = 1\n", "def a():\n    x = 1\n    x += 1  # local\n")
    ours = twin.replace("def a():\n    x = 1\n    y = 2\n    return x + y\n\n\n", "")
    got = merge_file("pkg/m.py", ours.encode(), twin.encode(), theirs.encode(), LABELS)
    assert got.conflicts, got.data.decode()  # a() is gone: its line has nowhere certain to go


def test_many_files_are_merged_in_helper_processes_alike() -> None:
    """From 8 files on, merges run in helper processes: the same results, in the same order, as one by
    one — a conflict, a merge by statement and a clean line merge among them."""
    from patchguard.patchsets.merge import _PARALLEL_FROM, merge_all

    docstring = BASE.replace("def forward(x, y):\n", 'def forward(x, y):\n    """Add them."""\n')
    clash = (
        BASE.replace("    return -g\n", "    return -g.clone()\n"),
        BASE.replace("    return -g\n", "    return -g * 2\n"),
    )
    pairs = [(docstring, THEIRS), clash, (BASE.replace("def backward", "def backward_pass"), THEIRS)] * 4
    jobs = [(f"pkg/m{n}.py", o.encode(), BASE.encode(), t.encode(), LABELS) for n, (o, t) in enumerate(pairs)]
    assert len(jobs) >= _PARALLEL_FROM
    together = merge_all(jobs)
    alone = [merge_file(*job) for job in jobs]
    assert together == alone
    assert {m.by for m in together} == {"lines", "statements"} and any(m.conflicts for m in together)
