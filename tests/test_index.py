"""Pristine wheels fetched from real package indexes served on 127.0.0.1, as a box with nothing handed to it.

Two indexes (PEP 691 JSON and PEP 503 HTML) run as real HTTP servers in the test; pip's configuration names
them through ``PIP_CONFIG_FILE``; there is no wheelhouse and every cache is empty. The wheels are built the
way real ones go wrong: a ``WHEEL`` saying ``linux_<arch>`` while the file is ``manylinux_2_28_<arch>``, a
``Requires-Python`` that excludes this interpreter, a ``+cu999`` build served only by the extra index, a
wheel whose own RECORD is wrong about a file, and one whose RECORD hashes are hex.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import platform
import threading
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import patchguard

from .helpers import Env, build_wheel, cli, record_hash

ARCH = platform.machine()
ATTN = "gpukit/attn.py"
SOURCE = """import torch


class Attention:
    def forward(self, hidden):
        out = hidden * 2
        return out
"""
DUMP = """        if hidden.shape[0] == 5:
            torch.save(hidden, "/tmp/attn_in.pt")
"""


@dataclass
class Index:
    """One package index: ``/simple/<project>/`` pages and ``/files/<wheel>``; every request is logged."""

    json_pages: bool
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    url: str = ""
    unhashed: bool = False  # list the files without their sha256 (a find-links page, a careless mirror)
    requires_python: str = ">=3.99"  # excludes every interpreter: pip would install nothing from it

    def add(self, wheel: Path, filename: str | None = None) -> None:
        self.files[filename or wheel.name] = wheel.read_bytes()

    def page(self, project: str) -> tuple[str, bytes]:
        names = sorted(n for n in self.files if n.split("-")[0].replace("_", "-").lower() == project)
        entries = [
            (n, f"../../files/{n.replace('+', '%2B')}", hashlib.sha256(self.files[n]).hexdigest())
            for n in names
        ]
        if self.unhashed:
            links = "".join(f'<a href="{u}">{n}</a>\n' for n, u, _h in entries)
            return "text/html", f"<!DOCTYPE html><html><body>{links}</body></html>".encode()
        if self.json_pages:
            py = self.requires_python
            doc = {
                "meta": {"api-version": "1.1"},
                "name": project,
                "files": [
                    {"filename": n, "url": u, "hashes": {"sha256": h}, "requires-python": py}
                    for n, u, h in entries
                ],
            }
            return "application/vnd.pypi.simple.v1+json", json.dumps(doc).encode()
        links = "".join(
            f'<a href="{u}#sha256={h}" data-requires-python="{self.requires_python.replace(">", "&gt;")}">'
            f"{n}</a>\n"
            for n, u, h in entries
        )
        return "text/html", f"<!DOCTYPE html><html><body>{links}</body></html>".encode()


def _serve(index: Index) -> Iterator[Index]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            index.requests.append(self.path)
            parts = self.path.split("?")[0].strip("/").split("/")
            if len(parts) == 2 and parts[0] == "simple":
                kind, body = index.page(parts[1])
                wants_json = "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", "")
                if kind.endswith("+json") and not wants_json:
                    self.send_error(406)
                    return
            elif len(parts) == 2 and parts[0] == "files" and parts[1].replace("%2B", "+") in index.files:
                kind, body = "application/octet-stream", index.files[parts[1].replace("%2B", "+")]
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A short poll keeps the shutdown at teardown quick (the default waits up to half a second).
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    index.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def primary() -> Iterator[Index]:
    yield from _serve(Index(json_pages=True))


@pytest.fixture
def extra() -> Iterator[Index]:
    yield from _serve(Index(json_pages=False))


@pytest.fixture
def pip_config(tmp_path: Path, primary: Index, extra: Index, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip configured as on a CUDA box: the main index, and an extra one for the local-version builds."""
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nindex-url = {primary.url}\n[install]\nextra-index-url = {extra.url}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.delenv("PIP_NO_INDEX")
    return conf


def _rewritten(wheel: Path, out: Path, record: Callable[[str], str]) -> Path:
    """``wheel`` with its RECORD text passed through ``record``, written to ``out``."""
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.endswith(".dist-info/RECORD"):
                data = record(data.decode()).encode()
            dst.writestr(info.filename, data)
    return out


def _as_pip_copies(env: Env, name: str, record: Callable[[str], str]) -> None:
    """pip and uv copy the wheel's RECORD rows into the installed RECORD (pypa/installer hashes what it
    wrote instead): the installed rows made as theirs."""
    path = env.dist_info(name, "1.0") / "RECORD"
    path.write_text(record(path.read_text()))


def _gpukit(tmp_path: Path, version: str = "1.0", body: str = SOURCE) -> Path:
    """A GPU wheel whose WHEEL says ``linux_<arch>`` and whose METADATA excludes this interpreter."""
    wheel = build_wheel(
        tmp_path / f"build-{version}",
        "gpukit",
        version,
        {ATTN: body, "gpukit/__init__.py": ""},
        tag=f"cp38-abi3-linux_{ARCH}",
        purelib=False,
    )
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read(f"gpukit-{version}.dist-info/METADATA").decode()
    assert "Requires-Python" not in meta
    return wheel


@pytest.fixture
def box(tmp_path: Path, primary: Index, extra: Index, pip_config: Path) -> Env:
    """gpukit 1.0 installed from its linux-tagged wheel; the index serves it under its manylinux name, beside
    a build for another machine that must never be fetched."""
    env = Env(tmp_path / "venv")
    wheel = _gpukit(tmp_path)
    env.install(wheel)
    primary.add(wheel, f"gpukit-1.0-cp38-abi3-manylinux_2_28_{ARCH}.whl")
    other = "aarch64" if ARCH != "aarch64" else "x86_64"
    decoy = _gpukit(tmp_path / "decoy", body=SOURCE.replace("* 2", "* 3"))
    primary.add(decoy, f"gpukit-1.0-cp38-abi3-manylinux_2_28_{other}.whl")
    (env.site / ATTN).write_text(
        SOURCE.replace("        out = hidden * 2\n", "        out = hidden * 2\n" + DUMP)
    )
    return env


def _downloads(primary: Index) -> list[str]:
    return [r for r in primary.requests if r.startswith("/files/")]


def test_scan_fetches_the_build_the_box_installed_and_judges_the_diff(box: Env, primary: Index) -> None:
    code, out, err = cli("scan", "--site-packages", str(box.site), "--format", "json")
    assert code == 1, err
    doc = json.loads(out)
    (dump,) = [f for f in doc["findings"] if f["rule"] == "tensor-dump"]
    assert (dump["path"], dump["line"]) == (ATTN, 8)
    assert all("baseline" not in f for f in doc["findings"])
    assert "no_baseline" not in doc["summary"]
    assert _downloads(primary) == [f"/files/gpukit-1.0-cp38-abi3-manylinux_2_28_{ARCH}.whl"]
    # The second scan needs no index at all: the pristine bytes are in the store.
    before = list(primary.requests)
    code, out2, _ = cli("scan", "--site-packages", str(box.site), "--format", "json")
    assert code == 1 and primary.requests == before
    assert json.loads(out2)["findings"] == doc["findings"]


def test_offline_scan_says_which_distribution_has_no_baseline_and_what_to_do(
    box: Env, primary: Index
) -> None:
    code, out, _ = cli("scan", "--site-packages", str(box.site), "--offline")
    assert code == 1
    assert primary.requests == []
    assert "tensor-dump (no baseline)" in out
    assert "no pristine source for gpukit 1.0" in out and "drop --offline" in out
    assert "injected" not in out.splitlines()[-1]  # a hit without a baseline is not called an injection
    _, out, _ = cli("scan", "--site-packages", str(box.site), "--offline", "--format", "json")
    doc = json.loads(out)
    assert {f["baseline"] for f in doc["findings"] if f["kind"] == "injected-code"} == {"none"}
    (missing,) = doc["summary"]["no_baseline"]
    assert missing["distribution"] == "gpukit" and "--offline" in missing["hint"]


def test_diff_restore_and_capture_fetch_the_wheel_once(box: Env, primary: Index, tmp_path: Path) -> None:
    code, out, err = cli("diff", "--site-packages", str(box.site))
    assert code == 0, err
    assert '+            torch.save(hidden, "/tmp/attn_in.pt")' in out
    assert f"fetching gpukit-1.0-cp38-abi3-manylinux_2_28_{ARCH}.whl from {primary.url}" in err  # not a tty
    code, _, err = cli("capture", "--set", "attn-dump", "gpukit", "--site-packages", str(box.site))
    assert code == 0, err
    code, out, err = cli("restore", "gpukit", "--site-packages", str(box.site))
    assert code == 2 and "holds patch set attn-dump, in place" in err  # the set just captured is wanted
    code, out, err = cli("restore", "gpukit", "--site-packages", str(box.site), "--force")
    assert code == 0, err
    assert (box.site / ATTN).read_text() == SOURCE
    assert len(_downloads(primary)) == 1  # diff fetched it; capture and restore found it where it was kept
    report = patchguard.scan(["gpukit"], site_packages=[str(box.site)], analyse=False)
    assert report.findings == ()


def test_rebase_fetches_the_release_it_carries_the_set_to(box: Env, primary: Index, tmp_path: Path) -> None:
    newer = _gpukit(tmp_path / "v11", "1.1", SOURCE.replace("class Attention:", "class Attention:  # v1.1"))
    primary.add(newer, f"gpukit-1.1-cp38-abi3-manylinux_2_28_{ARCH}.whl")
    code, _, err = cli("capture", "--set", "attn-dump", "gpukit", "--site-packages", str(box.site))
    assert code == 0, err
    code, out, err = cli(
        "rebase",
        "--set",
        "attn-dump",
        "--to-version",
        "1.1",
        "--site-packages",
        str(box.site),
        "--format",
        "json",
    )
    assert code == 0, err
    assert json.loads(out)["to_version"] == "1.1"
    assert f"/files/gpukit-1.1-cp38-abi3-manylinux_2_28_{ARCH}.whl" in _downloads(primary)
    patch = next((tmp_path / "patches/attn-dump").glob("*.patch")).read_text()
    assert "# v1.1" in patch and "attn_in.pt" in patch


def _torchish(tmp_path: Path, local: str, scale: str) -> Path:
    return build_wheel(
        tmp_path / local,
        "torchish",
        f"2.0+{local}",
        {"torchish/ops.py": f"def scale(x):\n    return x * {scale}\n"},
        tag=f"cp311-cp311-linux_{ARCH}",
        purelib=False,
    )


def test_a_local_version_is_found_on_the_extra_index(
    tmp_path: Path, primary: Index, extra: Index, pip_config: Path
) -> None:
    env = Env(tmp_path / "venv")
    cuda = _torchish(tmp_path, "cu999", "2")
    env.install(cuda)
    primary.add(_torchish(tmp_path, "cpu", "3"))  # the main index serves another build only
    extra.add(cuda)
    (env.site / "torchish/ops.py").write_text("def scale(x):\n    breakpoint()\n    return x * 2\n")
    code, out, err = cli("diff", "--site-packages", str(env.site))
    assert code == 0, err
    assert "+    breakpoint()" in out
    assert [r for r in primary.requests if r.startswith("/files/")] == []


def test_a_local_version_no_index_serves_is_one_line_naming_the_option(
    tmp_path: Path, primary: Index, pip_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "only-primary.conf"
    conf.write_text(f"[global]\nindex-url = {primary.url}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    env = Env(tmp_path / "venv")
    env.install(_torchish(tmp_path, "cu999", "2"))
    (env.site / "torchish/ops.py").write_text("def scale(x):\n    return x * 4\n")
    code, out, err = cli("diff", "--site-packages", str(env.site))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert primary.url in line
    assert "--extra-index-url https://download.pytorch.org/whl/cu999" in line


def test_a_wheel_whose_own_record_is_wrong_is_not_tampering(
    tmp_path: Path, primary: Index, pip_config: Path
) -> None:
    good = build_wheel(
        tmp_path / "b", "wrongrec", "1.0", {"wrongrec/a.py": "A = 1\n", "wrongrec/b.py": "B = 2\n"}
    )
    wrong = record_hash(b"B = 3\n")  # the build tool hashed another content than it packed
    broken = _rewritten(good, tmp_path / good.name, lambda r: r.replace(record_hash(b"B = 2\n"), wrong))
    primary.add(broken)
    env = Env(tmp_path / "venv")
    env.install(broken)
    _as_pip_copies(env, "wrongrec", lambda r: r.replace(record_hash(b"B = 2\n"), wrong))
    code, out, err = cli("scan", "--site-packages", str(env.site), "--format", "json")
    assert code == 0, err
    (f,) = json.loads(out)["findings"]
    assert (f["kind"], f["severity"], f["rule"], f["path"]) == (
        "record-invalid",
        "info",
        "record-wrong",
        "wrongrec/b.py",
    )
    assert "as shipped" in f["message"] and f["distribution"] == "wrongrec" and f["version"] == "1.0"
    before = (env.site / "wrongrec/b.py").stat()
    code, out, err = cli("restore", "wrongrec", "--site-packages", str(env.site))
    assert code == 0 and "left alone" in err
    assert (env.site / "wrongrec/b.py").stat().st_ino == before.st_ino  # not rewritten
    # An edit of that file is still an edit.
    (env.site / "wrongrec/b.py").write_text("B = 2\nimport pdb; pdb.set_trace()\n")
    code, out, _ = cli("scan", "--site-packages", str(env.site), "--format", "json")
    assert code == 1 and {f["rule"] for f in json.loads(out)["findings"]} == {"debugger"}


def test_hex_record_hashes_are_read_as_hex(tmp_path: Path, primary: Index, pip_config: Path) -> None:
    good = build_wheel(tmp_path / "b", "hexrec", "1.0", {"hexrec/a.py": "A = 1\n"})

    def to_hex(text: str) -> str:
        rows = []
        for row in text.splitlines():
            path, digest, size = row.split(",")
            if digest:
                import base64

                raw = base64.urlsafe_b64decode(digest[7:] + "=" * (-len(digest[7:]) % 4))
                digest = "sha256=" + raw.hex()
            rows.append(f"{path},{digest},{size}")
        return "\n".join(rows) + "\n"

    hexed = _rewritten(good, tmp_path / good.name, to_hex)
    env = Env(tmp_path / "venv")
    env.install(hexed)
    _as_pip_copies(env, "hexrec", to_hex)
    code, out, err = cli("scan", "--site-packages", str(env.site), "--format", "json")
    assert code == 0, err
    (f,) = json.loads(out)["findings"]
    assert (f["severity"], f["rule"]) == ("info", "record-hex") and "hex" in f["message"]
    (env.site / "hexrec/a.py").write_text("A = 2\n")
    code, out, _ = cli("scan", "--site-packages", str(env.site), "--format", "json", "--fail-on", "minor")
    assert "hexrec/a.py" in {f["path"] for f in json.loads(out)["findings"]}


@pytest.mark.parametrize("where", ["url", "file"])
def test_the_file_or_url_direct_url_json_names(tmp_path: Path, primary: Index, where: str) -> None:
    """Installed with ``pip install URL-or-path-of-a-wheel``: no index knows it, ``direct_url.json`` does."""
    wheel = build_wheel(tmp_path / "b", "direct", "1.0", {"direct/m.py": "X = 1\n"})
    env = Env(tmp_path / "venv")
    env.install(wheel)
    primary.add(wheel)  # served, but listed on no index page patchguard is told of (PIP_NO_INDEX)
    url = f"{primary.url.removesuffix('/simple')}/files/{wheel.name}" if where == "url" else wheel.as_uri()
    doc = {"url": url, "archive_info": {"hash": "sha256=" + hashlib.sha256(wheel.read_bytes()).hexdigest()}}
    (env.dist_info("direct", "1.0") / "direct_url.json").write_text(json.dumps(doc))
    (env.site / "direct/m.py").write_text("X = 1\nimport os; os._exit(3)\n")
    code, out, err = cli("diff", "--site-packages", str(env.site))
    assert code == 0, err
    assert "+import os; os._exit(3)" in out
    assert len(_downloads(primary)) == (1 if where == "url" else 0)
