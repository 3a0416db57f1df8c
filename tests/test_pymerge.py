"""The merge by statement (issue 26): a set's edits follow the statements they belong to where upstream
added a docstring or a decorator, re-wrapped a signature, moved a function or reordered imports; a merge
that is not certain — git's clean line merge included — is a conflict to review, never silent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from patchguard.patchsets.rebase.merge import merge, merge_file
from patchguard.patchsets.rebase.pymerge import carry, doubt

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


def test_hunks_certain_alone_are_carried_beside_the_one_left_to_review(tmp_path: Path) -> None:
    """Upstream renamed ``helper_2``: the set's line in it is not certain, so the whole file was a conflict
    and the line in ``forward`` — certain on its own — went to review with it. Each hunk is tried alone:
    only the renamed function's stays a conflict."""
    base = BASE.replace(
        "def helper_2(x):\n    return x * 2\n",
        "def helper_2(x):\n    x = x * 2\n    x = x + 1\n    y = x - 3\n    return -y\n",
    )
    theirs = base.replace("    z = x + y\n", "    z = x + y\n    _debug = os.environ.get('DEBUG')\n")
    theirs = theirs.replace("    x = x + 1\n", "    x = x + 1\n    _trace = 1\n")
    ours = base.replace("def helper_2(x):", "def helper_two(x):")
    got = merge_file("pkg/m.py", ours.encode(), base.encode(), theirs.encode(), LABELS)
    assert got.conflicts == 1 and got.doubt
    text = got.data.decode()
    carried = "def forward(x, y):\n    z = x + y\n    _debug = os.environ.get('DEBUG')\n    return z\n"
    assert carried in text  # outside any conflict
    assert text.index("<<<<<<<") < text.index("_trace = 1") < text.index(">>>>>>>") < text.index(carried)
    code, doc, _text = _rebase(tmp_path, base, theirs, ours)
    assert code == 1
    assert doc["hunks"] == {"total": 2, "carried": 1, "conflicting": 1, "lost": 0}
    review = (tmp_path / "patches" / "local.rebase" / "files" / "pkg" / "m.py").read_text()
    assert carried in review


def test_an_insertion_above_a_docstring_upstream_reworded_is_carried(tmp_path: Path) -> None:
    """A line put above a function's docstring (it is no docstring then); upstream rewrote the docstring:
    the line goes above the new one, in the same function."""
    base = BASE.replace("def forward(x, y):\n", 'def forward(x, y):\n    """Add them."""\n')
    theirs = base.replace('    """Add them."""\n', '    _seen = True\n    """Add them."""\n')
    ours = base.replace('    """Add them."""\n', '    """The elementwise sum of two tensors."""\n')
    assert merge(ours.encode(), base.encode(), theirs.encode(), LABELS).conflicts  # git alone conflicts
    code, doc, text = _rebase(tmp_path, base, theirs, ours)
    assert code == 0, text
    assert doc["files"][0]["outcome"] == "carried"
    got = merge_file("pkg/m.py", ours.encode(), base.encode(), theirs.encode(), LABELS)
    assert got.conflicts == 0
    text = got.data.decode()
    assert 'def forward(x, y):\n    _seen = True\n    """The elementwise sum of two tensors."""\n' in text
    # upstream renamed the function and put another under its name: not carried there
    other = ours.replace("def forward(x, y):", "def forward_pair(x, y):").replace(
        "def backward(g):\n    return -g\n",
        "def backward(g):\n    return -g\n\n\ndef forward(a):\n    return a\n",
    )
    got = merge_file("pkg/m.py", other.encode(), base.encode(), theirs.encode(), LABELS)
    assert got.conflicts or "def forward(a):\n    _seen" not in got.data.decode()


def test_a_class_renamed_upstream_with_a_new_one_under_its_name_is_left_to_review() -> None:
    """Upstream renamed ``Kernel`` to ``KernelV1`` (the same code) and wrote a new ``Kernel``: whether the
    set's line belongs to the old code or the new class of the old name is for a person to say."""
    method = "    def step_{0}(self, x):\n        y = x * {0}\n        return y{1}\n\n"
    methods = "".join(method.format(i, "") for i in range(4))
    base = "class Kernel:\n" + methods
    theirs = base.replace("        y = x * 2\n", "        y = x * 2\n        _trace = y\n")
    fresh = "".join(method.format(i, " + 1") for i in range(4))
    ours = base.replace("class Kernel:", "class KernelV1:") + "\nclass Kernel:\n" + fresh
    got = merge_file("pkg/m.py", ours.encode(), base.encode(), theirs.encode(), LABELS)
    assert got.conflicts and got.doubt


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
    from patchguard.patchsets.rebase.merge import _PARALLEL_FROM, merge_all

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


# -- anchors by content and position (issue 33: silent wrong merges) ---------------------------------------

ANCHORED = (
    "def f(a, x):\n"
    "    z = prep(a)\n"
    "    y = compute(\n"
    "        x, 0)\n"
    "    return y\n"
)
ANCHORED_SET = ANCHORED.replace("        x, 0)\n", "        x, 0)\n    log(y)\n")


def _placed_right(merged: str) -> None:
    """``log(y)`` comes right after the ``y = compute(x, 0)`` it was written after, or the file conflicts."""
    if "<<<<<<<" in merged:
        return
    assert "        x, 0)\n    log(y)\n" in merged and merged.count("log(y)") == 1, merged


def test_an_insertion_stays_after_its_statement_when_upstream_adds_a_look_alike_earlier() -> None:
    ours = ANCHORED.replace("    z = prep(a)\n", "    y = compute(\n        a, 1)\n    z = prep(a)\n")
    got = merge_file("pkg/m.py", ours.encode(), ANCHORED.encode(), ANCHORED_SET.encode(), LABELS)
    _placed_right(got.data.decode())
    wrong = ours.replace("        a, 1)\n", "        a, 1)\n    log(y)\n")
    assert doubt(ANCHORED.encode(), ANCHORED_SET.encode(), ours.encode(), wrong.encode())


def test_an_anchor_upstream_duplicated_goes_to_review_or_stays_put() -> None:
    ours = ANCHORED.replace("    return y\n", "    y = compute(\n        x, 0)\n    return y\n")
    got = merge_file("pkg/m.py", ours.encode(), ANCHORED.encode(), ANCHORED_SET.encode(), LABELS)
    merged = got.data.decode()
    assert got.conflicts or merged.index("log(y)") < merged.index("    return y"), merged
    _placed_right(merged)


def test_a_function_renamed_and_replaced_by_a_new_one_of_its_name_is_not_merged_into() -> None:
    base = "def f(x):\n    a = x + 1\n    return a\n\n\ndef g():\n    return 0\n"
    theirs = base.replace("def f(x):\n", "def f(x):\n    print('entered f', x)\n")
    ours = (
        "def f_old(x):\n    a = x + 1\n    return a\n\n\n"
        "def f(x):\n    b = x * 2\n    return b\n\n\ndef g():\n    return 0\n"
    )
    got = merge_file("pkg/m.py", ours.encode(), base.encode(), theirs.encode(), LABELS)
    merged = got.data.decode()
    if not got.conflicts:  # a clean merge carried it with the code it was written for, into f_old
        assert "def f_old(x):\n    print('entered f', x)\n" in merged, merged
        assert "def f(x):\n    print(" not in merged


def _statements(seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    names = ["a", "b", "y", "z", "out"]
    return [
        f"    {rng.choice(names)} = compute({rng.choice(names)}, {rng.randint(0, 3)})\n" for _ in range(12)
    ]


def test_fuzz_statement_edits_on_both_sides_never_misplace() -> None:
    """Random statement insertions by the set and by upstream in one function: every clean result holds each
    of the set's lines right after the statement it followed in the set, and upstream's lines in order — the
    reference merge is the obvious one, checked line by line; how many went to review is counted."""
    import random

    clean = review = 0
    for seed in range(300):
        rng = random.Random(seed)
        body = _statements(seed)
        base = "def f(a, b):\n" + "".join(body) + "    return out\n"
        set_at = sorted(rng.sample(range(1, len(body) + 1), 2))
        mine = list(body)
        for k, at in enumerate(reversed(set_at)):
            mine.insert(at, f"    log_{k}(out)\n")
        theirs = "def f(a, b):\n" + "".join(mine) + "    return out\n"
        up = list(body)
        for at in sorted(rng.sample(range(0, len(body) + 1), 2), reverse=True):
            up.insert(at, rng.choice(body))  # a look-alike of an existing statement
        ours = "def f(a, b):\n" + "".join(up) + "    return out\n"
        got = merge_file("pkg/m.py", ours.encode(), base.encode(), theirs.encode(), LABELS)
        if got.conflicts:
            review += 1
            continue
        clean += 1
        merged = got.data.decode().splitlines(keepends=True)
        assert [x for x in merged if "log_" not in x] == ours.splitlines(keepends=True), seed
        for k, _at in enumerate(reversed(set_at)):
            line = f"    log_{k}(out)\n"
            before = mine[mine.index(line) - 1]
            # the line before it in the merge is the same statement text it followed in the set, and the
            # copies of that text before it are as many as in the set (the same one, not a look-alike)
            n = merged.index(line)
            assert merged[n - 1] == before or merged[n - 1].startswith("    log_"), (seed, merged)
    assert clean + review == 300
    print(f"fuzz: {clean} clean, {review} to review, 0 misplaced")


_STMT = st.builds(
    lambda t, s, n: f"    {t} = compute({s}, {n})\n",
    st.sampled_from(["a", "y", "out"]),
    st.sampled_from(["a", "b", "y"]),
    st.integers(0, 2),
)


@settings(max_examples=150, deadline=None)
@given(
    body=st.lists(_STMT, min_size=2, max_size=10),
    data=st.data(),
)
def test_hypothesis_a_clean_merge_is_the_reference_merge(body: list[str], data: st.DataObject) -> None:
    """Hypothesis drives both sides: the set inserts a line after one statement, upstream inserts copies
    of existing statements anywhere. A clean merge is upstream's file with the set's line right after the
    statement it followed (its copy of that text at the same rank among the copies): the reference."""
    at = data.draw(st.integers(1, len(body)), label="set inserts after statement")
    base = "def f(a, b):\n" + "".join(body) + "    return out\n"
    theirs = "def f(a, b):\n" + "".join([*body[:at], "    log(out)\n", *body[at:]]) + "    return out\n"
    up: list[tuple[str, int | None]] = [(line, k) for k, line in enumerate(body)]  # (text, original index)
    for _ in range(data.draw(st.integers(1, 3), label="upstream insertions")):
        up.insert(data.draw(st.integers(0, len(up)), label="where"), (data.draw(st.sampled_from(body)), None))
    ours = "def f(a, b):\n" + "".join(t for t, _k in up) + "    return out\n"
    got = merge_file("pkg/m.py", ours.encode(), base.encode(), theirs.encode(), LABELS)
    if got.conflicts:
        return
    merged = got.data.decode().splitlines(keepends=True)[1:-1]
    # The reference: upstream's file with the line right after the very statement it followed.
    after = next(n for n, (_t, k) in enumerate(up) if k == at - 1)
    expected = [t for t, _k in up[: after + 1]] + ["    log(out)\n"] + [t for t, _k in up[after + 1 :]]
    assert merged == expected
