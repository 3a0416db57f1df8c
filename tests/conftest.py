from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .helpers import REPO, Env, build_wheel, minillm_files


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test runs in its own directory with its own caches: no test sees another's state, nor the
    user's pip/uv caches, wheelhouses, patch sets or configuration."""
    cache = tmp_path / "pg-cache"
    monkeypatch.setenv("PATCHGUARD_CACHE_DIR", str(cache))
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    for var in (
        "PATCHGUARD_WHEELHOUSE",
        "PATCHGUARD_PATCHES",
        "PATCHGUARD_LOCK_TIMEOUT",
        "PATCHGUARD_TEST_CRASH_AT",
        "PATCHGUARD_CONFIG",
    ):
        monkeypatch.delenv(var, raising=False)
    # No package index or find-links of this machine's pip or uv configuration: a test that wants an index
    # serves one itself (tests/test_index.py) and names it.
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    for var in (
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_FIND_LINKS",
        "UV_INDEX_URL",
        "UV_DEFAULT_INDEX",
        "UV_EXTRA_INDEX_URL",
        "UV_INDEX",
        "UV_FIND_LINKS",
    ):
        monkeypatch.delenv(var, raising=False)
    # The fixture framework's profile is data of the tests, not shipped: named here, as a user names theirs.
    monkeypatch.setenv("PATCHGUARD_PROFILES", str(REPO / "fixtures" / "minillm.profile.toml"))
    monkeypatch.chdir(tmp_path)
    return cache


@pytest.fixture(scope="session")
def minillm_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fixtures/minillm as a wheel, with its console script."""
    out = tmp_path_factory.mktemp("wheels")
    return build_wheel(
        out,
        "minillm",
        "0.4.0",
        minillm_files(),
        console_scripts={"minillm-serve": "minillm.entrypoints.serve:main"},
    )


@pytest.fixture
def env(tmp_path: Path, minillm_wheel: Path) -> Env:
    """A venv-shaped prefix with minillm installed from its wheel."""
    e = Env(tmp_path / "venv")
    e.install(minillm_wheel)
    return e


@pytest.fixture
def patches(tmp_path: Path) -> Path:
    """A copy of the repository's example sets (tests never write into the repo)."""
    dest = tmp_path / "patches"
    shutil.copytree(REPO / "patches", dest, ignore=shutil.ignore_patterns("README.md"))
    return dest
