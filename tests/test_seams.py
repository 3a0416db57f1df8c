"""The seams between stages (issue 25): a changed file keeps its origin from the inventory on, so no later
stage searches for it again, and no side table keys findings by ``id()``."""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from pathlib import Path

import pytest

from patchguard.integrity.inventory import ChangedFile, Scanned

from .helpers import Env

PACKAGE = Path(__file__).resolve().parent.parent / "patchguard"


@functools.lru_cache(maxsize=1)
def _modules() -> list[tuple[str, ast.Module]]:
    return [(str(p.relative_to(PACKAGE)), ast.parse(p.read_text())) for p in sorted(PACKAGE.rglob("*.py"))]


def test_no_stage_locates_a_finding_again() -> None:
    assert not hasattr(Scanned, "locate")
    calls = [
        f"{name}:{node.lineno}"
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "locate"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "scanned"
    ]
    assert not calls, calls


def test_no_table_is_keyed_by_a_findings_identity() -> None:
    """``id(f)`` / ``id(finding)`` as a key: a value that forgot its origin, looked up by address."""
    found = [
        f"{name}:{node.lineno}"
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "id"
        and node.args
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id in ("f", "finding")
    ]
    assert not found, found


def test_a_scan_is_a_value() -> None:
    """``Scanned`` is frozen: a stage makes a new one (``evolve``), it never changes the one it was given."""
    assert dataclasses.fields(Scanned)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Scanned.__setattr__(object.__new__(Scanned), "report", None)
    assert {f.name for f in dataclasses.fields(ChangedFile)} == {"finding", "dist", "entry", "path", "note"}


def test_a_framework_profile_is_data_the_user_names(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fixture framework is not shipped: without its profile file it is unknown; a broken profile file
    is one line naming it."""
    from .helpers import cli

    site = ("--site-packages", str(env.site))
    assert cli("scan", *site, "--arch", "MiniMLAForCausalLM")[0] in (0, 1)
    monkeypatch.delenv("PATCHGUARD_PROFILES")
    code, _out, err = cli("scan", *site, "--framework", "minillm")
    assert code == 2 and "no such framework profile" in err
    bad = tmp_path / "bad.profile.toml"
    for text, why in (
        (
            'name = "x"\npackage = "x"\nmodels_package = "x.m"\nregistry = {imports = "x"}\n',
            "registry must be",
        ),
        ('name = "x"\nserver = 1\n', "unknown key 'server'"),
        ("name = [", "invalid TOML"),
    ):
        bad.write_text(text)
        monkeypatch.setenv("PATCHGUARD_PROFILES", str(bad))
        code, _out, err = cli("scan", *site, "--arch", "MiniMLAForCausalLM")
        assert code == 2 and why in err and str(bad) in err, err
        assert len(err.strip().splitlines()) == 1


def test_one_rule_id_per_rule_of_the_rulebook_and_the_families() -> None:
    """``Finding.rule`` is a ``RuleId``; the rulebook gives each id its severity and rationale, and every
    family names a rule of it: the three stay in step."""
    from patchguard.analysis.families import FAMILIES
    from patchguard.model import RuleId
    from patchguard.rulebook import FILE_RULES, RULES

    ids = {r.value for r in RuleId}
    assert ids == set(RULES) | set(FILE_RULES)
    assert {f.rule for f in FAMILIES} <= set(RULES)
    assert str(RuleId.TENSOR_DUMP) == f"{RuleId.TENSOR_DUMP}" == "tensor-dump"
    assert {"tensor-dump": 1}[RuleId.TENSOR_DUMP] == 1  # equal to its id, and hashed as it
    with pytest.raises(ValueError):
        RuleId("no-such-rule")


def test_the_rule_id_enum_is_generated_from_the_rulebook() -> None:
    """The members of ``model.RuleId`` are the rulebook's entries, in its order, each named after its id: the
    enum is written out (so mypy knows each member) but never by hand — on a new rule this test prints the
    block to paste."""
    from patchguard.rulebook import FILE_RULES, RULES

    ids = [*RULES, *FILE_RULES]
    generated = "".join(f'    {i.upper().replace("-", "_")} = "{i}"\n' for i in ids)
    source = (PACKAGE / "model.py").read_text()
    block = source.split("class RuleId(str, enum.Enum):", 1)[1]
    written = "".join(
        line + "\n" for line in block.splitlines() if re.fullmatch(r'    [A-Z_]+ = "[a-z-]+"', line)
    )
    assert written == generated, "model.RuleId's members must be, from the rulebook:\n" + generated


def test_every_statement_rule_is_reached_by_the_walk() -> None:
    """The walk knows where it is, not what a rule looks for: each node kind the statement rules register
    is dispatched to them by a ``visit_<Kind>`` of the walker (a kind registered but never dispatched would
    be a rule that silently never fires)."""
    import inspect

    from patchguard.analysis.judge import _Walker
    from patchguard.analysis.statements import STATEMENT_RULES

    for kind in STATEMENT_RULES:
        visit = getattr(_Walker, f"visit_{kind.__name__}", None)
        assert visit is not None, f"no visit_{kind.__name__}"
        assert "self._statements(node)" in inspect.getsource(visit), kind.__name__
    walker = inspect.getsource(_Walker)
    assert not any(f"RuleId.{r}" in walker for r in ("REMOVED_CHECK", "SWALLOWED_EXCEPTION", "PROCESS_EXIT"))
