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
        "CONDA_PKGS_DIRS",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RATTLER_CACHE_DIR", str(tmp_path / "rattler-cache"))  # not the user's package cache
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


@pytest.fixture(scope="session")
def promtool(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Prometheus' own checker of the text format: on PATH, or taken from Debian's prometheus package
    (``apt-get download`` and ``dpkg-deb -x``: nothing installed, no service started)."""
    found = shutil.which("promtool")
    if found:
        return found
    import subprocess

    where = tmp_path_factory.mktemp("promtool")
    got = subprocess.run(
        ["apt-get", "download", "prometheus"], cwd=where, capture_output=True, text=True, timeout=600
    )
    debs = list(where.glob("prometheus_*.deb"))
    if got.returncode != 0 or not debs:
        pytest.skip(f"no promtool: apt-get download prometheus failed: {got.stderr.strip()[-200:]}")
    subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(where / "root")], check=True)
    return str(where / "root/usr/bin/promtool")
