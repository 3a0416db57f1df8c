"""Code analysis: the corpus of injected and benign edits, reach evidence, and the scan end to end."""

from __future__ import annotations

import importlib.util
import py_compile
import sys
from pathlib import Path
from typing import Any

import pytest

import patchguard
from patchguard import Kind, Loaded, Reach, Severity
from patchguard.analysis import CodeChange, analyse
from patchguard.model import Gate, GateKind

from .helpers import MINILLM_SRC, REPO, Env

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CORPUS = REPO / "fixtures" / "analysis"


def _cases(name: str) -> list[dict[str, Any]]:
    path = CORPUS / name
    if not path.exists():
        return []
    cases: list[dict[str, Any]] = tomllib.loads(path.read_text())["case"]
    return cases


def edit(case: dict[str, Any], root: Path = MINILLM_SRC) -> tuple[str, str, int]:
    """(before, after, offset in `after` where the edit starts) for a corpus case of the package at `root`."""
    before = (root / case["file"]).read_text()
    anchor = case["anchor"]
    assert before.count(anchor) == 1, f"{case['id']}: anchor must occur once"
    at = before.index(anchor)
    if "replace" in case:
        return before, before[:at] + case["replace"] + before[at + len(anchor) :], at
    return before, before[: at + len(anchor)] + case["insert"] + before[at + len(anchor) :], at + len(anchor)


def expected_line(after: str, start: int, needle: str) -> int:
    offset = after.index(needle, after.rfind("\n", 0, start) + 1)
    return after.count("\n", 0, offset) + 1


def judged(
    case: dict[str, Any], root: Path = MINILLM_SRC, distribution: str = "minillm", version: str = "0.4.0"
) -> tuple[list[patchguard.Finding], str, int]:
    before, after, start = edit(case, root)
    findings = analyse(CodeChange(case["file"], before.encode(), after.encode(), distribution, version))
    return findings, after, start


INJECTED = _cases("injected.toml")
BENIGN = _cases("benign.toml")


def test_the_corpus_is_big_enough() -> None:
    assert len(INJECTED) >= 40 and len(BENIGN) >= 15


@pytest.mark.parametrize("case", INJECTED, ids=[c["id"] for c in INJECTED])
def test_injected_case(case: dict[str, Any]) -> None:
    check_injected(case, *judged(case))


def check_injected(case: dict[str, Any], findings: list[patchguard.Finding], after: str, start: int) -> None:
    """Every expectation of an injected case is found on its line, and nothing else at moderate or above."""
    expected = set()
    for exp in case["expect"]:
        line = expected_line(after, start, exp["line_contains"])
        expected.add((exp["rule"], line))
        match = [f for f in findings if f.line == line and exp["rule"] in (f.rule, *_also(f))]
        assert match, f"expected {exp['rule']} on line {line}; got {[(f.rule, f.line) for f in findings]}"
        f = match[0]
        if f.rule != exp["rule"]:  # one finding per line: a lesser rule is named by the line's finding
            assert Severity.parse(exp["severity"]) <= f.severity, (exp, f.rule)
            continue
        assert f.severity is Severity.parse(exp["severity"]), (f.severity, f.message)
        gate = exp.get("gate", "none")
        assert (f.gate.kind.value if f.gate else "none") == gate, f.gate
        assert (f.function or "") == exp.get("function", ""), f.function
        assert f.kind is (
            Kind.COSMETIC_CHANGE
            if f.rule == "cosmetic-change"
            else Kind.FUNCTIONAL_CHANGE
            if f.rule == "functional-change"
            else Kind.INJECTED_CODE
        )
        assert f.source and f.source.strip() in after
    extra = [
        (f.rule, f.line)
        for f in findings
        if f.severity >= Severity.MODERATE and (f.rule, f.line) not in expected
    ]
    assert not extra, f"unexpected findings: {extra}"
    lines = [f.line for f in findings if f.kind is Kind.INJECTED_CODE]
    assert len(lines) == len(set(lines)), "one injected-code finding per line"


def _also(f: patchguard.Finding) -> list[str]:
    """The other rules a finding's line hits (one finding per line names them in its evidence)."""
    return [r for e in f.evidence if e.startswith("also: ") for r in e[6:].split(", ")]


@pytest.mark.parametrize("case", BENIGN, ids=[c["id"] for c in BENIGN])
def test_benign_case(case: dict[str, Any]) -> None:
    findings, after, start = judged(case)
    assert not [f for f in findings if f.severity is Severity.HIGH], [
        (f.rule, f.line, f.message) for f in findings
    ]
    for exp in case.get("expect", []):
        line = expected_line(after, start, exp["line_contains"])
        assert any(f.rule == exp["rule"] and f.line == line for f in findings), [
            (f.rule, f.line) for f in findings
        ]


def test_names_resolve_through_aliases() -> None:
    before = (MINILLM_SRC / "minillm/models/llama.py").read_text()
    after = before.replace(
        "import torch\n", "import torch\nimport torch as th\nfrom pickle import dump as keep\n", 1
    )
    after += "\n\ndef _debug(x):\n    th.save(x, '/dev/shm/x.pt')\n"
    after += "\n\ndef _keep(x):\n    keep(x, open('/tmp/x.pkl', 'wb'))\n"
    found = {(f.rule, f.source) for f in analyse(CodeChange("llama.py", before.encode(), after.encode()))}
    assert ("tensor-dump", "th.save(x, '/dev/shm/x.pt')") in found
    assert ("tensor-dump", "keep(x, open('/tmp/x.pkl', 'wb'))") in found


def test_a_legitimate_dump_in_the_pristine_file_is_not_reported() -> None:
    before = (MINILLM_SRC / "minillm/utils/serial.py").read_text()
    assert "torch.save(" in before
    after = before.replace("        torch.save(", "        # keep the format stable\n        torch.save(", 1)
    assert after != before
    findings = analyse(CodeChange("serial.py", before.encode(), after.encode()))
    assert not [f for f in findings if f.rule == "tensor-dump"]


def test_without_a_baseline_the_whole_file_is_judged() -> None:
    src = (MINILLM_SRC / "minillm/utils/serial.py").read_bytes()
    findings = analyse(CodeChange("serial.py", None, src))
    dump = [f for f in findings if f.rule == "tensor-dump"]
    assert dump and all("baseline: none" in f.evidence for f in findings)


# --- reach, on a real installed package ------------------------------------------------------------------

INJECT = "        num_tokens, _ = hidden.shape\n"
BLOCK = "        if hidden.shape[0] == 5:\n            torch.save(hidden, '/tmp/mla_in.pt')\n"


def inject(env: Env, rel: str = "minillm/models/mla.py", anchor: str = INJECT, block: str = BLOCK) -> Path:
    p = env.site / rel
    text = p.read_text()
    assert anchor in text
    p.write_text(text.replace(anchor, anchor + block, 1))
    return p


def dump_finding(env: Env, **kw: Any) -> patchguard.Finding:
    report = patchguard.scan(["minillm"], site_packages=[str(env.site)], **kw)
    (f,) = [f for f in report.findings if f.rule == "tensor-dump"]
    return f


def test_fresh_pyc_means_loaded_since_the_edit(env: Env) -> None:
    mla = inject(env)
    py_compile.compile(str(mla), cfile=importlib.util.cache_from_source(str(mla)), doraise=True)
    _age_source(mla)
    f = dump_finding(env)
    assert f.loaded is Loaded.SINCE_EDIT
    assert f.reach is Reach.UNKNOWN  # nothing said what is served: bytecode never decides reach
    assert "loaded since the edit" in " ".join(f.evidence)
    assert f.gate == Gate(GateKind.SHAPE, "hidden.shape[0] == 5")
    assert (f.function, f.line) == (
        "MLAAttention.forward",
        mla.read_text().splitlines().index("            torch.save(hidden, '/tmp/mla_in.pt')") + 1,
    )


def _age_source(path: Path) -> None:
    """Move the source's mtime a few seconds back (and the pyc's header with it) so the pyc is not racy."""
    import os

    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))
    py_compile.compile(str(path), cfile=importlib.util.cache_from_source(str(path)), doraise=True)


def test_stale_pyc_is_before_edit_never_dormant(env: Env) -> None:
    mla = env.site / "minillm/models/mla.py"
    py_compile.compile(str(mla), cfile=importlib.util.cache_from_source(str(mla)), doraise=True)
    inject(
        env,
        block="        if hidden.shape[0] == 5:\n            torch.save(hidden, '/tmp/mla_in_stale.pt')\n",
    )
    f = dump_finding(env)
    assert f.loaded is Loaded.BEFORE_EDIT and f.reach is not Reach.DORMANT
    assert any("takes effect at the next restart" in e for e in f.evidence)
    served = dump_finding(env, architectures=["MiniMLAForCausalLM"])
    assert served.loaded is Loaded.BEFORE_EDIT and served.reach is Reach.CONDITIONAL


def test_hash_based_pyc_is_read_too(env: Env) -> None:
    mla = inject(env)
    py_compile.compile(
        str(mla),
        cfile=importlib.util.cache_from_source(str(mla)),
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
    )
    f = dump_finding(env)
    assert f.loaded is Loaded.SINCE_EDIT
    assert any(e.startswith("hash-based bytecode matches") for e in f.evidence)


def test_no_bytecode_anywhere_is_unknown(env: Env) -> None:
    inject(env)
    f = dump_finding(env)
    assert (f.reach, f.loaded) == (Reach.UNKNOWN, Loaded.UNKNOWN)
    assert any("pass --arch, --model-config or --entry" in e for e in f.evidence)


def test_arch_profile_marks_other_models_dormant(env: Env) -> None:
    inject(env)
    inject(env, "minillm/models/other_arch.py", *_other_arch_edit(env))
    report = patchguard.scan(["minillm"], site_packages=[str(env.site)], architectures=["MiniMLAForCausalLM"])
    by_file = {f.path: f for f in report.findings if f.kind is Kind.INJECTED_CODE}
    assert by_file["minillm/models/mla.py"].reach == "conditional"
    assert "serves MiniMLAForCausalLM" in by_file["minillm/models/mla.py"].evidence[0]
    other = by_file["minillm/models/other_arch.py"]
    assert other.reach == "dormant" and "another architecture" in other.evidence[0]


def _other_arch_edit(env: Env) -> tuple[str, str]:
    text = (env.site / "minillm/models/other_arch.py").read_text()
    line = next(ln for ln in text.splitlines(keepends=True) if ln.strip().startswith("def load_weights"))
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    # Insert right after the def line's first body line would need parsing; a docstring-free spot is the
    # line after the signature when the signature fits one line.
    assert line.rstrip().endswith(":")
    return line, f"{indent}print('loading other arch weights')\n"


def test_entry_reach(env: Env) -> None:
    inject(env)
    report = patchguard.scan(["minillm"], site_packages=[str(env.site)], entries=["minillm.models.mla"])
    (f,) = [f for f in report.findings if f.rule == "tensor-dump"]
    assert f.reach == "conditional" and "--entry minillm.models.mla" in f.evidence[0]


def test_model_config_and_table_output(env: Env, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from patchguard.cli import main

    inject(env)
    config = tmp_path / "config.json"
    config.write_text('{"architectures": ["MiniMLAForCausalLM"], "hidden_size": 64}')
    result = CliRunner().invoke(
        main, ["scan", "minillm", "--site-packages", str(env.site), "--model-config", str(config)]
    )
    assert result.exit_code == 1  # tensor-dump is high
    lines = result.stdout.splitlines()
    i = next(n for n, line in enumerate(lines) if "tensor-dump" in line)
    assert lines[i].split() == [
        "HIGH",
        f"minillm/models/mla.py:{_line_of(env)}",
        "tensor-dump",
        "(no",
        "baseline)",  # no wheel anywhere: the whole file was judged
        "MLAAttention.forward",
    ]
    assert lines[i + 1].strip() == "torch.save(hidden, '/tmp/mla_in.pt')"
    assert lines[i + 2].strip().startswith("gate: hidden.shape[0] == 5 · reach: conditional (serves MiniMLA")


def _line_of(env: Env) -> int:
    return (env.site / "minillm/models/mla.py").read_text().splitlines().index(
        "            torch.save(hidden, '/tmp/mla_in.pt')"
    ) + 1


def test_analysis_never_imports_libcst_for_a_clean_scan(env: Env) -> None:
    import subprocess

    code = (
        "import sys, patchguard\n"
        f"patchguard.scan(site_packages=[{str(env.site)!r}])\n"
        "print('libcst' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_two_dump_sites_in_one_forward_are_two_findings(
    env: Env, minillm_wheel: Path, tmp_path: Path
) -> None:
    """The founding story: the input and the output of a forward dumped by two shape-gated blocks, 23 lines
    apart. Each is its own HIGH finding, with its line, gate and written path; table, JSON and SARIF keep
    both. A run of prints in a row stays one finding that lists its lines."""
    import json
    import shutil

    from .helpers import cli

    house = tmp_path / "wheels"
    house.mkdir()
    shutil.copy(minillm_wheel, house)
    mla = env.site / "minillm/models/mla.py"
    text = mla.read_text()
    first = "        num_tokens, _ = hidden.shape\n"
    last = "        return self.o_proj(context)\n"
    dump_in = '        if hidden.shape[0] == 5:\n            torch.save(hidden, "/tmp/mla_in.pt")\n'
    dump_out = (
        "        out = self.o_proj(context)\n"
        "        if out.shape[0] == 5:\n"
        '            torch.save(out, "/tmp/mla_out.pt")\n'
        '            print("dumped", out.shape)\n'
        '            print("dumped", out.dtype)\n'
        "        return out\n"
    )
    edited = text.replace(first, first + dump_in, 1).replace(last, dump_out, 1)
    mla.write_text(edited)
    lines = edited.splitlines()
    report = patchguard.scan(
        ["minillm"], site_packages=[str(env.site)], wheelhouse=[str(house)], offline=True
    )
    assert not any(f.baseline_none for f in report.findings)
    dumps = [f for f in report.findings if f.rule == "tensor-dump"]
    assert [(f.line, f.gate and f.gate.condition) for f in dumps] == [
        (lines.index('            torch.save(hidden, "/tmp/mla_in.pt")') + 1, "hidden.shape[0] == 5"),
        (lines.index('            torch.save(out, "/tmp/mla_out.pt")') + 1, "out.shape[0] == 5"),
    ]
    assert "/tmp/mla_in.pt" in dumps[0].message and "/tmp/mla_out.pt" in dumps[1].message
    (prints,) = [f for f in report.findings if f.rule == "print"]
    n = lines.index('            print("dumped", out.shape)') + 1
    assert (prints.line, prints.end_line) == (n, n + 1) and f"lines: {n}, {n + 1}" in prints.evidence
    site = ("--site-packages", str(env.site), "--wheelhouse", str(house), "--offline")
    for fmt in ("json", "sarif"):
        _code, out, _ = cli("scan", "minillm", *site, "--format", fmt)
        doc = json.loads(out)
        found = doc["findings"] if fmt == "json" else doc["runs"][0]["results"]
        key = "rule" if fmt == "json" else "ruleId"
        assert [r[key] for r in found].count("tensor-dump") == 2, fmt
    _code, out, _ = cli("scan", "minillm", *site)
    assert out.count("tensor-dump") == 2
