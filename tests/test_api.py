"""The API a deploy script uses (issue 35): every public name's annotations resolve, ``lock()`` and
``check(wheelhouse=, offline=)`` without shelling out."""

from __future__ import annotations

import inspect
import json
import typing
from pathlib import Path

import patchguard

from .helpers import Env, cli


def test_every_public_name_s_type_hints_resolve() -> None:
    """pydantic, typer and sphinx read annotations with ``typing.get_type_hints``: every public function
    and class of ``__all__`` resolves (no name left behind a TYPE_CHECKING import)."""
    broken = []
    for name in patchguard.__all__:
        obj = getattr(patchguard, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            try:
                typing.get_type_hints(obj)
            except Exception as exc:  # every failure is listed
                broken.append(f"{name}: {exc.__class__.__name__}: {exc}")
    assert not broken, broken
    for needed in ("lock", "SourceOptions", "ProgressCallback", "Policy", "CheckResult"):
        assert needed in patchguard.__all__


def test_lock_and_check_through_the_api(env: Env, tmp_path: Path, minillm_wheel: Path) -> None:
    site = [str(env.site)]
    out = tmp_path / "env.lock"
    doc = patchguard.lock(site_packages=site, output=str(out))
    assert doc["schema"] == "patchguard.lock/1" and json.loads(out.read_text()) == doc
    _code, _out, err = cli("lock", "--site-packages", str(env.site), "-o", str(tmp_path / "cli.lock"))
    assert (tmp_path / "cli.lock").read_bytes() == out.read_bytes(), err  # the same bytes as the CLI
    (env.site / "minillm" / "platforms" / "cuda.py").write_text("import pdb; pdb.set_trace()\n")
    result = patchguard.check(
        site_packages=site, lock=str(out), wheelhouse=[str(minillm_wheel.parent)], offline=True
    )
    assert not result.passed
    assert any(f.rule == "debugger" for f in result.report.findings)  # judged against the wheelhouse's wheel
