"""Reach and loaded, on real installed wheels: a second framework with an ``EntryClass`` registry, import
chains, bytecode evidence (fresh, stale, racy), the kept import index, and files of a newer grammar."""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import textwrap
import time
from pathlib import Path

import pytest

import patchguard
from patchguard import Kind, Loaded, Reach, Severity
from patchguard.analysis.reach import ReachContext
from patchguard.model import Gate, GateKind

from .helpers import Env, build_wheel, cli

# A small SGLang-shaped framework: models register through `EntryClass`, the server imports every model.
TOY_SGLANG = {
    "sglang/__init__.py": "",
    "sglang/srt/__init__.py": "",
    "sglang/srt/entrypoints/__init__.py": "",
    "sglang/srt/entrypoints/http_server.py": "from sglang.srt.managers import scheduler\n",
    "sglang/srt/managers/__init__.py": "",
    "sglang/srt/managers/scheduler.py": (
        "import sglang.srt.model_executor.model_runner as model_runner\n\n\ndef step(batch):\n"
        "    return model_runner.run(batch)\n"
    ),
    "sglang/srt/model_executor/__init__.py": "",
    "sglang/srt/model_executor/model_runner.py": textwrap.dedent(
        """\
        def run(batch):
            return batch


        def load_quantized(path):
            from sglang.srt.layers import quant

            return quant.load(path)
        """
    ),
    "sglang/srt/layers/__init__.py": "",
    "sglang/srt/layers/linear.py": textwrap.dedent(
        """\
        import torch


        class RowLinear:
            def forward(self, x):
                y = x @ x
                return y
        """
    ),
    "sglang/srt/layers/quant.py": textwrap.dedent(
        """\
        import torch


        def load(path):
            weights = torch.load(path)
            return weights
        """
    ),
    "sglang/srt/layers/typing_only.py": textwrap.dedent(
        """\
        import torch


        class Hints:
            def shape(self, x):
                s = x.shape
                return s
        """
    ),
    "sglang/srt/models/__init__.py": "",
    "sglang/srt/models/toy_v2.py": textwrap.dedent(
        """\
        from typing import TYPE_CHECKING

        import torch

        from sglang.srt.layers.linear import RowLinear

        if TYPE_CHECKING:
            from sglang.srt.layers.typing_only import Hints


        class ToyV2ForCausalLM:
            def forward(self, hidden):
                out = RowLinear().forward(hidden)
                return out


        class ToyV3ForCausalLM(ToyV2ForCausalLM):
            pass


        EntryClass = [ToyV2ForCausalLM, ToyV3ForCausalLM]
        """
    ),
    "sglang/srt/models/other.py": textwrap.dedent(
        """\
        import torch


        class OtherForCausalLM:
            def forward(self, hidden):
                out = hidden + 1
                return out


        EntryClass = OtherForCausalLM
        """
    ),
}

DUMP = "torch.save(x, '/tmp/dump.pt')"


@pytest.fixture
def sg_env(env: Env, tmp_path: Path) -> Env:
    """minillm and the toy SGLang, side by side in one environment."""
    env.install(build_wheel(tmp_path / "house", "sglang", "0.5.0", TOY_SGLANG))
    return env


def put(env: Env, rel: str, after: str, line: str = DUMP) -> Path:
    """Insert ``line`` (a dump, unless told) after the line ``after`` of an installed file."""
    return env.insert_after(rel, after, line)


def findings(env: Env, *dists: str, **kw: object) -> dict[str, patchguard.Finding]:
    """The injected-code finding of each changed file."""
    report = patchguard.scan(list(dists), site_packages=[str(env.site)], **kw)  # type: ignore[arg-type]
    return {f.path: f for f in report.findings if f.kind is Kind.INJECTED_CODE}


# --- reach: SGLang's EntryClass registry, import chains ------------------------------------------------


def test_sglang_entry_class_registry_and_import_chains(sg_env: Env) -> None:
    put(sg_env, "sglang/srt/models/toy_v2.py", "out = RowLinear().forward(hidden)")
    put(sg_env, "sglang/srt/models/other.py", "out = hidden + 1")
    put(sg_env, "sglang/srt/layers/linear.py", "y = x @ x")
    put(sg_env, "sglang/srt/layers/quant.py", "weights = torch.load(path)")
    put(sg_env, "sglang/srt/layers/typing_only.py", "s = x.shape")
    by_path = findings(sg_env, "sglang", architectures=["ToyV3ForCausalLM"])

    served = by_path["sglang/srt/models/toy_v2.py"]
    assert served.reach is Reach.ACTIVE
    assert served.evidence[0] == "serves ToyV3ForCausalLM (sglang model registry)"

    other = by_path["sglang/srt/models/other.py"]  # imported at start-up, its forward never runs
    assert other.reach is Reach.DORMANT and "another architecture" in other.evidence[0]

    linear = by_path["sglang/srt/layers/linear.py"]
    assert linear.reach is Reach.ACTIVE
    assert linear.evidence[0].startswith("via sglang.srt.models.toy_v2 → sglang.srt.layers.linear")

    quant = by_path["sglang/srt/layers/quant.py"]  # reached only through an import inside a function
    assert quant.reach is Reach.CONDITIONAL
    assert (
        "sglang.srt.model_executor.model_runner imports sglang.srt.layers.quant inside a function"
        in (quant.evidence[0])
    )

    hints = by_path["sglang/srt/layers/typing_only.py"]  # imported under TYPE_CHECKING only
    assert hints.reach is Reach.UNKNOWN
    assert hints.evidence[0].startswith("not imported by what is served")


def test_module_level_code_of_another_sglang_model_is_live(sg_env: Env) -> None:
    p = sg_env.site / "sglang/srt/models/other.py"
    p.write_text(p.read_text() + f"\n{DUMP.replace('x', 'OtherForCausalLM')}\n")
    (f,) = findings(sg_env, "sglang", architectures=["ToyV2ForCausalLM"]).values()
    assert f.reach is Reach.ACTIVE  # sglang imports every model module: this line runs at start-up


def test_arch_resolves_across_every_installed_framework(sg_env: Env) -> None:
    put(sg_env, "sglang/srt/models/toy_v2.py", "out = RowLinear().forward(hidden)")
    put(sg_env, "minillm/models/mla.py", "num_tokens, _ = hidden.shape", "torch.save(hidden, '/tmp/m.pt')")
    put(sg_env, "minillm/models/other_arch.py", "return x + attn_out + mlp_out")
    archs = ["ToyV2ForCausalLM", "MiniMLAForCausalLM"]
    by_path = findings(sg_env, "sglang", "minillm", architectures=archs)
    assert by_path["sglang/srt/models/toy_v2.py"].reach is Reach.ACTIVE
    assert by_path["minillm/models/mla.py"].reach is Reach.ACTIVE
    assert by_path["minillm/models/mla.py"].evidence[0].startswith("serves MiniMLAForCausalLM")
    assert by_path["minillm/models/other_arch.py"].reach is Reach.DORMANT


def test_an_architecture_no_framework_serves_is_a_usage_error(sg_env: Env) -> None:
    site = str(sg_env.site)
    code, _, err = cli("scan", "--site-packages", site, "--arch", "toyv3forcausallm")
    assert code == 2 and "no installed framework serves toyv3forcausallm" in err
    assert "did you mean ToyV3ForCausalLM?" in err
    code, _, err = cli("scan", "--site-packages", site, "--arch", "NoSuchArch")  # clean env: still refused
    assert code == 2 and "no installed framework serves NoSuchArch" in err
    assert len(err.strip().splitlines()) == 1


def test_an_entry_that_is_not_installed_is_a_usage_error(sg_env: Env) -> None:
    code, _, err = cli("scan", "--site-packages", str(sg_env.site), "--entry", "sglang.srt.nowhere")
    assert code == 2 and "--entry sglang.srt.nowhere: no such module" in err


# --- loaded: bytecode evidence -------------------------------------------------------------------------


def _pyc(path: Path) -> Path:
    return Path(importlib.util.cache_from_source(str(path)))


def _compile(path: Path) -> None:
    py_compile.compile(str(path), cfile=str(_pyc(path)), doraise=True)


def _at(path: Path, seconds: float) -> None:
    ns = int(seconds * 1e9)
    os.utime(path, ns=(ns, ns))


def test_loaded_since_before_and_racy(sg_env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    quant = put(sg_env, "sglang/srt/layers/quant.py", "weights = torch.load(path)")
    t = 1_700_000_000
    _at(quant, t)
    _compile(quant)
    _at(_pyc(quant), t + 30)  # compiled well after the edit: loaded since
    (f,) = findings(sg_env, "sglang").values()
    assert f.loaded is Loaded.SINCE_EDIT

    _at(_pyc(quant), t + 0.5)  # written in the edit's own second: a same-size edit would match too
    (f,) = findings(sg_env, "sglang").values()
    assert f.loaded is Loaded.UNKNOWN and any("same second" in e for e in f.evidence)

    # ... and such an edit is made: same size, same second. The header still matches; nothing loaded it.
    text = quant.read_text()
    quant.write_text(text.replace("/tmp/dump.pt", "/tmp/dump.px"))
    _at(quant, t + 0.7)
    (f,) = findings(sg_env, "sglang").values()
    assert f.loaded is Loaded.UNKNOWN

    quant.write_text(text.replace("/tmp/dump.pt", "/tmp/dump-later.pt"))  # edited after the pyc
    _at(quant, t + 60)
    (f,) = findings(sg_env, "sglang", architectures=["ToyV2ForCausalLM"]).values()
    assert f.loaded is Loaded.BEFORE_EDIT
    assert f.reach is Reach.CONDITIONAL  # stale bytecode never makes code dormant
    assert "takes effect at the next restart" in " ".join(f.evidence)
    code, out, _ = cli("scan", "sglang", "--site-packages", str(sg_env.site))
    assert code == 1 and "not loaded since the edit: takes effect at the next restart" in out


def test_never_loaded_when_its_neighbours_were(sg_env: Env) -> None:
    """``never`` needs a module beside it compiled *after* the file was written. A pyc older than the file
    (the installer's, the file then written by hand or by a patchguard transaction, which removes its
    bytecode) says nothing of a server that writes none."""
    linear = sg_env.site / "sglang/srt/layers/linear.py"
    _compile(linear)
    quant = put(sg_env, "sglang/srt/layers/quant.py", "weights = torch.load(path)")
    t = 1_700_000_000
    _at(_pyc(linear), t)
    _at(quant, t + 10)
    (f,) = findings(sg_env, "sglang").values()
    assert f.loaded is Loaded.UNKNOWN and any("nothing beside it compiled since" in e for e in f.evidence)
    _at(_pyc(linear), t + 20)  # the package was imported after the edit; quant.py was not
    (f,) = findings(sg_env, "sglang").values()
    assert f.loaded is Loaded.NEVER


def test_json_and_sarif_carry_loaded(sg_env: Env) -> None:
    import json

    put(sg_env, "sglang/srt/layers/quant.py", "weights = torch.load(path)")
    code, out, _ = cli("scan", "sglang", "--site-packages", str(sg_env.site), "--format", "json")
    (f,) = [f for f in json.loads(out)["findings"] if f["kind"] == "injected-code"]
    assert code == 1 and (f["reach"], f["loaded"]) == ("unknown", "unknown")
    code, out, _ = cli("scan", "sglang", "--site-packages", str(sg_env.site), "--format", "sarif")
    (result,) = [r for r in json.loads(out)["runs"][0]["results"] if r["ruleId"] == "tensor-dump"]
    assert code == 1 and result["properties"]["loaded"] == "unknown"


# --- the kept import index -----------------------------------------------------------------------------


def _settle() -> None:
    """Let fresh files age past the racy window (their ctime is now), so the index may keep them."""
    time.sleep(0.12)


def test_the_import_index_is_kept_between_runs(sg_env: Env, tmp_path: Path) -> None:
    _settle()
    cache = str(tmp_path / "reach-cache")

    def run() -> ReachContext:
        ctx = ReachContext([str(sg_env.site)], architectures=["ToyV2ForCausalLM"], cache_dir=cache)
        ctx.prepare()
        return ctx

    cold = run()
    assert cold.index.read > 5
    warm = run()
    assert warm.index.read == 0
    linear = str(sg_env.site / "sglang/srt/layers/linear.py")
    assert warm.reach(linear).reach is Reach.ACTIVE

    # An edit that drops an import is seen: the file is read again, and the closure changes.
    runner = sg_env.site / "sglang/srt/model_executor/model_runner.py"
    runner.write_text(runner.read_text().replace("    from sglang.srt.layers import quant\n", ""))
    _settle()
    edited = run()
    assert edited.index.read == 1
    assert edited.reach(str(sg_env.site / "sglang/srt/layers/quant.py")).reach is Reach.UNKNOWN


def test_a_corrupt_index_is_rebuilt(sg_env: Env, tmp_path: Path) -> None:
    _settle()
    cache = tmp_path / "reach-cache"
    ReachContext([str(sg_env.site)], architectures=["ToyV2ForCausalLM"], cache_dir=str(cache)).prepare()
    (kept,) = [p for p in cache.rglob("*") if p.is_file()]
    kept.write_bytes(kept.read_bytes()[:40] + b"\x00garbage")
    ctx = ReachContext([str(sg_env.site)], architectures=["ToyV2ForCausalLM"], cache_dir=str(cache))
    ctx.prepare()
    assert ctx.index.read > 5
    assert ctx.reach(str(sg_env.site / "sglang/srt/layers/linear.py")).reach is Reach.ACTIVE


# --- the target's grammar ------------------------------------------------------------------------------

NEWER = textwrap.dedent(
    """\
    import torch as th


    def first[T](xs: list[T]) -> T:
        head = xs[0]
        return head


    type Pair[T] = tuple[T, T]


    class Cache[K, V]:
        def get(self, key: K) -> V | None:
            value = self.data.get(key)
            return value
    """
)


def test_a_newer_pythons_syntax_is_still_judged(env: Env, tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "house", "newpy", "1.0", {"newpy/__init__.py": NEWER})
    env.install(wheel)
    p = env.site / "newpy/__init__.py"
    p.write_text(
        p.read_text()
        .replace(
            "    head = xs[0]\n",
            "    head = xs[0]\n    if len(xs) == 5:\n        th.save(xs, '/tmp/xs.pt')\n",
        )
        .replace(
            "        value = self.data.get(key)\n",
            "        value = self.data.get(key)\n        breakpoint()\n",
        )
    )
    report = patchguard.scan(["newpy"], site_packages=[str(env.site)], wheelhouse=[str(wheel.parent)])
    found = {(str(f.rule), f.function): f for f in report.findings}
    dump = found[("tensor-dump", "first")]
    assert dump.severity is Severity.HIGH
    assert dump.gate == Gate(GateKind.SHAPE, "len(xs) == 5")
    assert found[("debugger", "Cache.get")].severity is Severity.HIGH
    assert "baseline: none" not in dump.evidence
    assert not [f for f in report.findings if f.rule in ("unparseable", "functional-change")]


def test_a_file_nothing_parses_is_unparseable_and_still_matched(env: Env, minillm_wheel: Path) -> None:
    mla = env.site / "minillm/models/mla.py"
    text = mla.read_text()
    anchor = "        num_tokens, _ = hidden.shape\n"
    conflict = (
        "<<<<<<< HEAD\n"
        f"{anchor}"
        "=======\n"
        f"{anchor}"
        "        print('tokens', num_tokens)\n"
        "        torch.save(hidden,\n"
        "                   '/tmp/conflict.pt')\n"
        ">>>>>>> debug-mla\n"
    )
    mla.write_text(text.replace(anchor, conflict, 1))
    lines = mla.read_text().splitlines()
    report = patchguard.scan(
        ["minillm"], site_packages=[str(env.site)], wheelhouse=[str(minillm_wheel.parent)]
    )
    by_rule = {str(f.rule): f for f in report.findings}
    bad = by_rule["unparseable"]
    assert bad.severity is Severity.MODERATE and "merge-conflict markers" in bad.message
    assert bad.line == lines.index("<<<<<<< HEAD") + 1
    dump = by_rule["tensor-dump"]
    assert dump.severity is Severity.HIGH and dump.function == "MLAAttention.forward"
    assert dump.line == lines.index("        torch.save(hidden,") + 1
    assert by_rule["print"].line == lines.index("        print('tokens', num_tokens)") + 1


def test_a_truncated_file_is_unparseable(env: Env, minillm_wheel: Path) -> None:
    mla = env.site / "minillm/models/mla.py"
    text = mla.read_text()
    mla.write_text(text[: text.index("        num_tokens, _ = hidden.shape") + 24])  # "num_tokens, _ = "
    report = patchguard.scan(
        ["minillm"], site_packages=[str(env.site)], wheelhouse=[str(minillm_wheel.parent)]
    )
    (bad,) = [f for f in report.findings if f.rule == "unparseable"]
    assert bad.severity is Severity.MODERATE and bad.path == "minillm/models/mla.py"


def test_a_pycache_nobody_may_write_makes_loaded_unknown(sg_env: Env) -> None:
    quant = put(sg_env, "sglang/srt/layers/quant.py", "weights = torch.load(path)")
    t = 1_700_000_000
    _compile(quant)
    _at(_pyc(quant), t)
    _at(quant, t + 60)  # edited after the installer compiled it
    (f,) = findings(sg_env, "sglang").values()
    assert f.loaded is Loaded.BEFORE_EDIT
    cache = _pyc(quant).parent
    cache.chmod(0o555)  # a read-only image layer, say: no new bytecode can be written
    try:
        (f,) = findings(sg_env, "sglang").values()
        assert f.loaded is Loaded.UNKNOWN and any("nobody may write" in e for e in f.evidence)
    finally:
        cache.chmod(0o755)


# --- the serving framework, named ----------------------------------------------------------------------


def test_a_module_the_server_loads_by_name_is_live_with_the_profile_named(sg_env: Env) -> None:
    """The fixture profile (as vLLM's does for vllm/platforms/cuda.py) lists a module its server loads by
    name, reached by no import statement: live once the framework is named, not before."""
    cuda = "minillm/platforms/cuda.py"
    put(sg_env, cuda, '"""Return the compute capability of this device, or ``None`` if absent."""', DUMP)
    assert findings(sg_env, "minillm")[cuda].reach is Reach.UNKNOWN
    f = findings(sg_env, "minillm", frameworks=["minillm"])[cuda]
    assert f.reach is Reach.ACTIVE
    assert "the minillm server loads it by name (minillm profile)" in f.evidence[0]
    f = findings(sg_env, "minillm", architectures=["MiniMLAForCausalLM"])[cuda]
    assert f.reach is Reach.ACTIVE  # the framework that serves the architecture loads it too


def test_the_framework_named_is_the_one_that_serves(sg_env: Env) -> None:
    """Both frameworks installed; only the one named serves: the other's server modules are not live."""
    put(sg_env, "sglang/srt/models/toy_v2.py", "out = RowLinear().forward(hidden)")
    f = findings(sg_env, "sglang", frameworks=["minillm"])["sglang/srt/models/toy_v2.py"]
    assert f.reach is Reach.UNKNOWN
    found = findings(sg_env, "sglang", frameworks=["sglang"], architectures=["ToyV2ForCausalLM"])
    assert found["sglang/srt/models/toy_v2.py"].reach is Reach.ACTIVE
    code, _out, err = cli("scan", "--site-packages", str(sg_env.site), "--framework", "tgi")
    assert code == 2 and "--framework tgi: no such framework profile" in err and "sglang" in err


def test_arch_suggestions_rank_by_the_whole_name(sg_env: Env) -> None:
    code, _out, err = cli("scan", "--site-packages", str(sg_env.site), "--arch", "MiniDeepseekV2")
    assert code == 2
    assert "did you mean MiniDeepseekV2ForCausalLM" in err  # the name it begins, before look-alikes


def test_check_judges_what_is_served_as_scan_does(sg_env: Env, tmp_path: Path) -> None:
    """check takes --arch / --framework (and the policy's framework / arch keys) and source options."""
    cuda = "minillm/platforms/cuda.py"
    put(sg_env, cuda, '"""Return the compute capability of this device, or ``None`` if absent."""', DUMP)
    site = ("--site-packages", str(sg_env.site))
    _code, out, _ = cli("check", *site, "--format", "json")
    (dump,) = [d["finding"] for d in json.loads(out)["details"] if d["type"] == "finding"]
    assert dump["reach"] == "unknown"
    _code, out, _ = cli("check", *site, "--framework", "minillm", "--offline", "--format", "json")
    (dump,) = [d["finding"] for d in json.loads(out)["details"] if d["type"] == "finding"]
    assert dump["reach"] == "active"
    policy = tmp_path / "patchguard.toml"
    policy.write_text('framework = "minillm"\narch = ["MiniMLAForCausalLM"]\noffline = true\n')
    _code, out, _ = cli("check", *site, "--policy", str(policy), "--format", "json")
    (dump,) = [d["finding"] for d in json.loads(out)["details"] if d["type"] == "finding"]
    assert dump["reach"] == "active"
