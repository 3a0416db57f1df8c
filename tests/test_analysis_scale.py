"""Analysis at scale: results kept between runs, many files judged on every core, one finding per line,
and the prefilter that spares the parser never hiding a hit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import patchguard
from patchguard import Kind, Severity
from patchguard.analysis import CodeChange, analyse
from patchguard.analysis.kept import KeptAnalyses, analyse_many
from patchguard.analysis.rules import CALLS, METHODS, could_hit

from .helpers import MINILLM_SRC, Env

MLA = "minillm/models/mla.py"
DUMP = "        num_tokens, _ = hidden.shape\n"


def _edit(env: Env) -> Path:
    p = env.site / MLA
    p.write_text(
        p.read_text().replace(DUMP, DUMP + "        torch.save(hidden.detach().cpu(), '/tmp/kept.pt')\n", 1)
    )
    time.sleep(0.12)  # past the stat cache's racy window
    return p


def _code(report: patchguard.Report) -> list[tuple[str, int | None, str]]:
    return [(f.rule, f.line, f.message) for f in report.findings if f.kind is Kind.INJECTED_CODE]


def test_a_warm_rescan_judges_nothing_again(
    env: Env, minillm_wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mla = _edit(env)
    kw = {"site_packages": [str(env.site)], "wheelhouse": [str(minillm_wheel.parent)]}
    cold = patchguard.scan(["minillm"], **kw)  # type: ignore[arg-type]
    assert [(r, n) for r, n, _ in _code(cold)] == [("tensor-dump", _line(mla, "torch.save("))]

    import patchguard.analysis as analysis_pkg

    calls: list[str] = []
    real = analysis_pkg.analyse

    def counted(change: CodeChange) -> list[patchguard.Finding]:
        calls.append(change.path)
        return real(change)

    monkeypatch.setattr(analysis_pkg, "analyse", counted)
    warm = patchguard.scan(["minillm"], **kw)  # type: ignore[arg-type]
    assert calls == [] and _code(warm) == _code(cold)  # kept: neither the wheel nor the parser was needed

    mla.write_text(mla.read_text().replace("/tmp/kept.pt", "/tmp/kept-2.pt"))  # same size class of edit
    edited = patchguard.scan(["minillm"], **kw)  # type: ignore[arg-type]
    assert calls == [MLA] and "/tmp/kept-2.pt" in _code(edited)[0][2]
    uncached = patchguard.scan(["minillm"], use_cache=False, **kw)  # type: ignore[arg-type]
    assert calls == [MLA, MLA] and _code(uncached) == _code(edited)


def _line(path: Path, needle: str) -> int:
    return next(n for n, text in enumerate(path.read_text().splitlines(), 1) if needle in text)


def test_a_corrupt_kept_result_is_judged_again(tmp_path: Path) -> None:
    kept = KeptAnalyses(str(tmp_path))
    before = (MINILLM_SRC / MLA).read_bytes()
    after = before.replace(DUMP.encode(), DUMP.encode() + b"        breakpoint()\n")
    found = analyse(CodeChange(MLA, before, after, "minillm", "0.4.0"))
    key = kept.key(MLA, "minillm", "0.4.0", "sha256=x", after)
    kept.put(key, found)
    assert kept.get(key) == found
    (file,) = [p for p in (tmp_path / "analysis").rglob("*.json")]
    file.write_text('[{"kind": "no-such-kind"}]')
    assert kept.get(key) is None
    assert KeptAnalyses(str(tmp_path), enabled=False).get(key) is None


def test_many_files_are_judged_alike_on_every_core() -> None:
    before = (MINILLM_SRC / MLA).read_bytes()
    changes = []
    for n in range(20):
        extra = f"        torch.save(hidden, '/tmp/{n}.pt')\n" if n % 2 else f"        x{n} = {n}\n"
        changes.append(CodeChange(f"m{n}.py", before, before.replace(DUMP.encode(), (DUMP + extra).encode())))
    parallel = analyse_many(changes)
    assert parallel == [analyse(c) for c in changes]
    assert sum(1 for found in parallel if any(f.rule == "tensor-dump" for f in found)) == 10


def test_judging_collects_lazily_and_gives_the_setting_back(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    import patchguard.analysis as analysis_pkg
    from patchguard.analysis import kept

    before = (MINILLM_SRC / MLA).read_bytes()
    seen: list[tuple[int, int, int]] = []
    real = analysis_pkg.analyse

    def watched(change: CodeChange) -> list[patchguard.Finding]:
        seen.append(gc.get_threshold())
        return real(change)

    monkeypatch.setattr(analysis_pkg, "analyse", watched)
    mine = gc.get_threshold()
    gc.set_threshold(123, 4, 5)
    try:
        found = analyse_many([CodeChange(MLA, before, before.replace(DUMP.encode(), DUMP.encode() * 2))] * 3)
        assert seen == [kept._JUDGING_THRESHOLDS] * 3 and gc.get_threshold() == (123, 4, 5)
        assert found == [real(CodeChange(MLA, before, before.replace(DUMP.encode(), DUMP.encode() * 2)))] * 3
    finally:
        gc.set_threshold(*mine)


def test_one_finding_per_line_at_the_highest_severity() -> None:
    before = (MINILLM_SRC / MLA).read_bytes()
    line = "        torch.save(hidden.detach().cpu(), '/tmp/x.pt'); print(hidden.item())\n"
    after = before.replace(DUMP.encode(), (DUMP + line).encode())
    (f,) = [f for f in analyse(CodeChange(MLA, before, after)) if f.kind is Kind.INJECTED_CODE]
    assert (f.rule, f.severity) == ("tensor-dump", Severity.HIGH)
    assert "also: print, device-sync" in f.evidence and "(also print, device-sync on this line)" in f.message


@pytest.mark.parametrize("qualname", sorted(CALLS))
def test_the_prefilter_lets_every_rule_call_through(qualname: str) -> None:
    head = qualname.split(".", 1)[0]
    assert could_hit(f"    x = {qualname}(z)\n", "", {head: head})
    if "." in qualname:  # under another name, and imported by its own
        module, name = qualname.rsplit(".", 1)
        assert could_hit(f"    x = m.{name}(z)\n", "", {"m": module})
        assert could_hit(f"    x = {name}(z)\n", "", {name: qualname})


@pytest.mark.parametrize("name", sorted(METHODS))
def test_the_prefilter_lets_every_rule_method_through(name: str) -> None:
    assert could_hit(f"    x = y.{name}(z)\n", "", {})


def test_the_prefilter_reads_a_rule_word_by_what_it_names() -> None:
    """A word a rule knows only inside a qualified name counts where the name resolves to the rule's call —
    not as a variable's name or another object's method; a method judged by its receiver needs its word."""
    imports = {"requests": "requests", "shutil": "shutil", "threading": "threading", "os": "os"}
    assert not could_hit("    for r in requests:\n        self.requests.pop(r)\n", "", imports)
    assert not could_hit("    kept = self.cache.copy()\n", "", imports)
    assert could_hit("    shutil.copy(a, b)\n", "", imports)
    assert could_hit("    requests.Session().post(url)\n", "", imports)
    assert not could_hit("    self.done.wait()\n", "", imports)
    assert could_hit("    threading.Event().wait()\n", "", imports)
    assert could_hit("    E().wait()\n", "", {"E": "threading.Event"})
    assert not could_hit("    worker.start()\n", "", imports)
    assert could_hit("    mock.patch('a.b').start()\n", "", {"mock": "unittest.mock"})
    assert could_hit("    self.logger.setLevel(logging.DEBUG)\n", "", {"logging": "logging"})


def test_the_prefilter_reads_the_environment_and_constants_by_what_they_do() -> None:
    """The environment read is no rule's, set or read in a test it is (a switch); a constant that neutralises
    a test counts, the first number of a comparison does not."""
    os_ = {"os": "os"}
    assert not could_hit('    n = int(os.environ.get("N", "4"))\n', "", os_)
    assert could_hit('    os.environ["N"] = "4"\n', "", os_)
    assert could_hit('    os.environ.setdefault("N", "4")\n', "", os_)
    assert could_hit('    env = os.environ\n    env["N"] = "4"\n', "", os_)
    assert could_hit('    if os.getenv("SKIP_CHECK"):\n', "", os_)
    assert could_hit('        and os.getenv("SKIP_CHECK")\n', "", os_)
    assert not could_hit("    assert 1 <= block_size <= 256\n", "", {})
    assert could_hit("    assert 1\n", "", {})
    assert could_hit('    assert True, "checked elsewhere"\n', "", {})
    assert not could_hit("    ok = n > 0 and 0 < m\n", "", {})
    assert could_hit("    if n > 0 and 0:\n", "", {})
    assert could_hit("    if bad or 1:\n", "", {})
    # a line of a statement over several lines: a switch's part, a loader's argument
    assert could_hit('            os.environ.get("STRICT")):\n', "", os_)
    assert could_hit('        os.environ["HOOK_LIB"]\n', "", os_)
    # constants as the judge reads them (``truth``), and a comparison on the next line is not this one's
    for constant in ("True;", "1_000", '"""x must be positive"""', '"x can\\"t be negative"', "b'x'"):
        assert could_hit(f"    assert {constant}\n", "", {}), constant
    assert could_hit("    assert x > 0 or True\n    (h, w) = shape\n", "", {})


def test_the_prefilter_places_exits_and_decisions() -> None:
    """An early exit counts above a check, not below every one; a quiet line under a handler; a decision
    where one of its words may hold a tensor."""
    unit = "def f(x):\n    if x is None:\n        raise ValueError\n    y = x + 1\n    return y\n"
    assert not could_hit("    return y\n", unit, {})
    assert could_hit("    return y\n", unit.replace("    y = x + 1\n", "    return y\n    assert y\n"), {})
    handler = "def g():\n    try:\n        go()\n    except OSError:\n        pass\n"
    assert could_hit("        pass\n", handler, {})
    assert not could_hit(
        "        pass\n",
        handler.replace(
            "    try:\n        go()\n    except OSError:\n", "    if a:\n        b()\n    if c:\n"
        ),
        {},
    )
    tensors = frozenset({"mask", "torch"})
    assert could_hit("    if mask:\n", "def forward(mask):\n    if mask:\n", {}, False, lambda: tensors)
    assert not could_hit("    if n > 0:\n", "def forward(mask):\n    if n > 0:\n", {}, False, lambda: tensors)
    assert could_hit("    if n > 0:\n", "def forward(mask):\n    if n > 0:\n", {}, False, lambda: None)
    # a write is a dump only of a tensor's data; a statement's words are read to where its brackets close
    unit = "def forward(mask, f):\n    f.write(\n        mask.numpy().tobytes()\n    )\n"
    assert could_hit("    f.write(\n", unit, {}, False, lambda: tensors)
    assert not could_hit("    f.write(header)\n", unit + "    f.write(header)\n", {}, False, lambda: tensors)


def test_the_prefilter_asks_the_judges_own_question_of_a_changed_test() -> None:
    """A changed ``if``/``assert``/conditional expression is parsed alone and asked what the judge asks
    (does it decide a tensor?), with every name of the function that may hold one a tensor: its metadata
    (``x.shape``, ``x.dtype``) and an ``is None`` decide nothing on the device; its values do."""
    unit = "def forward(x, batch):\n    if X:\n        y = 1\n"
    words = frozenset({"x", "torch", "seq_lens", "bfloat16"})

    def asks(test: str) -> bool:
        return could_hit(test, unit.replace("if X:", test.strip()), {"torch": "torch"}, False, lambda: words)

    for decided in (
        "    if x.any():\n",
        "    assert x.sum() > 0\n",
        "    elif (x > 0).all():\n",
        "    while batch.seq_lens.max() > 3:\n",
        "    y = 1 if x.any() else 2\n",
        "    assert (\n",
        "    if not x:\n",
    ):
        assert asks(decided), decided
    for metadata in (
        "    if x.shape[0] == 5:\n",
        "    assert x.dtype == torch.bfloat16\n",
        "    if x is None:\n",
        "    assert x.ndim == 2 and x.stride(-1) == 1\n",
    ):
        assert not asks(metadata), metadata


def test_the_prefilter_places_an_exit_in_its_block() -> None:
    """An exit cuts off the checks after it in its own block — or, last in an ``if`` that may be a switch
    (the environment, a constant), those after the ``if``; not a check after an ordinary ``if``."""
    ordinary = "def f(x):\n    if x:\n        return 1\n    raise ValueError(x)\n"
    assert not could_hit("        return 1\n", ordinary, {})
    switched = ordinary.replace("if x:", "if os.environ.get('SKIP'):")
    assert could_hit("        return 1\n", switched, {"os": "os"})
    assert could_hit("        return 1\n", ordinary.replace("if x:", "if x or True:"), {})
    same_block = "def f(x):\n    return 1\n    if x:\n        raise ValueError(x)\n"
    assert could_hit("    return 1\n", same_block, {})
    # a line that stands twice: each place is asked
    twice = (
        "def f(x):\n    for a in x:\n        if a:\n            continue\n        assert a\n"
        "    for b in x:\n        if b:\n            continue\n        go(b)\n"
    )
    assert could_hit("            continue\n", twice.replace("if a:", "if True:"), {})


def test_the_prefilter_follows_aliases_and_module_assignments() -> None:
    assert could_hit("    keep(x, f)\n", "", {"keep": "pickle.dump"})
    assert could_hit("    r.get(url)\n", "", {"r": "requests"})
    assert could_hit("    st()\n", "    from pdb import set_trace as st\n    st()\n", {})
    assert could_hit("    torch.backends.cudnn.enabled = False\n", "", {"torch": "torch"})
    assert could_hit("    logger.info('x')\n", "", {})
    assert not could_hit("    y = x + 1\n    return y\n", "", {"torch": "torch"})


PRISTINE = """import torch


def check(a, b, items):
    assert a is None
    if b < 0:
        raise ValueError("b must not be negative")
    for item in items:
        total = item + 1
    return total


def helper(x):
    if x is None:
        raise TypeError("x is required")
    return x


class Model:
    def forward(self, hidden):
        out = hidden * 2
        return out

    def test_roundtrip(self, hidden):
        out = hidden * 2
        return out
"""


RAISE = 'raise ValueError("b must not be negative")'


def _removed(after: str) -> list[tuple[int | None, str]]:
    found = analyse(CodeChange("m.py", PRISTINE.encode(), after.encode()))
    return [
        (f.line, f.message) for f in found if f.rule == "removed-check" or "removed-check" in str(f.evidence)
    ]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # moved into the loop
            f"    if b < 0:\n        {RAISE}\n    for item in items:\n",
            f"    for item in items:\n        if b < 0:\n            {RAISE}\n",
        ),
        ("    assert a is None\n", "    assert a is None and b is not None\n"),  # strengthened
        (  # re-wrapped
            '        raise ValueError("b must not be negative")\n',
            '        raise ValueError(\n            "b must not be negative"\n        )\n',
        ),
        (
            '        raise ValueError("b must not be negative")\n',
            '        raise ValueError(f"b={b} < 0")\n',
        ),
        (  # left with its whole function
            'def helper(x):\n    if x is None:\n        raise TypeError("x is required")\n    return x\n',
            "",
        ),
    ],
    ids=["moved", "strengthened", "rewrapped", "reworded", "function-deleted"],
)
def test_what_is_not_a_removed_check(old: str, new: str) -> None:
    assert old in PRISTINE
    assert _removed(PRISTINE.replace(old, new)) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('        raise ValueError("b must not be negative")\n', "        pass\n"),
        ("    assert a is None\n", "    # assert a is None\n"),
        ("    assert a is None\n", "    assert True\n"),
        ('    if b < 0:\n        raise ValueError("b must not be negative")\n', ""),
    ],
    ids=["raise-to-pass", "assert-commented", "assert-voided", "check-deleted"],
)
def test_what_is_a_removed_check(old: str, new: str) -> None:
    assert len(_removed(PRISTINE.replace(old, new))) == 1


def test_a_sync_in_a_test_function_is_not_on_the_hot_path() -> None:
    def syncs(method: str) -> list[str]:
        anchor = f"    def {method}(self, hidden):\n        out = hidden * 2\n"
        after = PRISTINE.replace(anchor, anchor + "        torch.cuda.synchronize()\n")
        return [f.rule for f in analyse(CodeChange("m.py", PRISTINE.encode(), after.encode()))]

    assert "device-sync" in syncs("forward")
    assert "device-sync" not in syncs("test_roundtrip")
