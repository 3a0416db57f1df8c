"""The seams between stages (issue 25): a changed file keeps its origin from the inventory on, so no later
stage searches for it again, and no side table keys findings by ``id()``."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from patchguard.integrity.inventory import ChangedFile, Scanned

PACKAGE = Path(__file__).resolve().parent.parent / "patchguard"


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
    assert {f.name for f in dataclasses.fields(ChangedFile)} == {"finding", "dist", "entry", "path"}
