"""The network is hostile, not only absent: real servers on 127.0.0.1 that answer what no index should.

Each server is a real socket in a thread of the test: a status line that is not HTTP, a 70 KiB header line, a
chunked body that breaks off, a body trickled a byte at a time, a page listing thousands of wheels of one
release, a private index that wants the credentials of its URL for its files too, and a redirect to another
origin that must not get them.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchguard.pristine import index
from patchguard.pristine.index import IndexError_, IndexFile, IndexSettings, fetch, list_files

from .helpers import Env, build_wheel, cli


def _raw_server(reply: Callable[[socket.socket], None]) -> Iterator[str]:
    """A TCP server whose every connection gets ``reply``; yields its base URL."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                try:
                    conn.recv(65536)
                    reply(conn)
                except OSError:
                    pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}/simple"
    finally:
        stop.set()
        t.join(2)
        srv.close()


def _not_http(conn: socket.socket) -> None:
    conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")


def _long_header(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (70 * 1024) + b"\r\n\r\n")


def _broken_chunks(conn: socket.socket) -> None:
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/html\r\n\r\nzz\r\nab\r\n"
    )


def _slowloris(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n")
    for _ in range(200):
        conn.sendall(b"<")
        time.sleep(0.05)


def _slow_headers(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    for _ in range(200):
        conn.sendall(b"X-Slow: 1\r\n")
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (_slow_headers, "did not arrive in time"),
        (_not_http, "its answer is not HTTP (BadStatusLine"),
        (_long_header, "its answer is not HTTP (LineTooLong"),
        (_broken_chunks, "IncompleteRead"),
        (_slowloris, "did not arrive in time"),
    ],
)
def test_a_hostile_answer_is_one_line(
    reply: Callable[[socket.socket], None], said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index, "_PAGE_DEADLINE", 1.5)
    for url in _raw_server(reply):
        settings_ = IndexSettings(indexes=(url,), timeout=1.0)
        started = time.monotonic()
        with pytest.raises(IndexError_) as caught:
            list_files("gpukit", "1.0", url, settings_, True)
        assert said in str(caught.value) and "\n" not in str(caught.value)
        assert time.monotonic() - started < 8


def test_a_hostile_index_is_one_line_in_the_cli(env: Env, minillm_wheel: Path) -> None:
    (env.site / "minillm" / "platforms" / "cuda.py").write_text("import pdb; pdb.set_trace()\n")
    for url in _raw_server(_not_http):
        code, _out, err = cli("diff", "minillm", "--site-packages", str(env.site), "--index-url", url)
        assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err
        assert "its answer is not HTTP" in err


class _Private(http.server.BaseHTTPRequestHandler):
    """A private index: every request must carry Basic credentials user:s3cret; its page lists many
    wheels of one release (none of them the build), and one file redirects to another origin."""

    wheels: ClassVar[dict[str, bytes]] = {}
    seen: ClassVar[list[tuple[str, str | None]]] = []
    other = ""

    def do_GET(self) -> None:
        auth = self.headers.get("Authorization")
        type(self).seen.append((self.path, auth))
        if auth != "Basic " + base64.b64encode(b"user:s3cret").decode():
            self.send_error(401)
            return
        if self.path.startswith("/simple/"):
            files = [
                {"filename": n, "url": f"/files/{n}", "hashes": {"sha256": hashlib.sha256(b).hexdigest()}}
                for n, b in sorted(self.wheels.items())
            ]
            body = json.dumps({"meta": {"api-version": "1.1"}, "files": files}).encode()
            self._send(200, "application/vnd.pypi.simple.v1+json", body)
        elif self.path == "/files/redirect":
            self.send_response(302)
            self.send_header("Location", f"{self.other}/files/x.whl")
            self.end_headers()
        elif self.path.startswith("/files/") and self.path[7:] in self.wheels:
            self._send(200, "application/octet-stream", self.wheels[self.path[7:]])
        else:
            self.send_error(404)

    def _send(self, code: int, kind: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _http(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_page_of_thousands_of_wheels_is_not_downloaded_one_by_one(env: Env, tmp_path: Path) -> None:
    """Credentials in the index URL go with the files of the same origin (as pip sends them); a page
    listing 3,000 wheels of the release gets a few downloads at most, and what was not the build is not
    kept."""
    decoy = build_wheel(tmp_path / "d", "minillm", "0.4.0", {"minillm/__init__.py": "# another build\n"})
    data = decoy.read_bytes()
    _Private.wheels = {f"minillm-0.4.0-{n}-py3-none-any.whl": data for n in range(3000)}
    _Private.seen = []
    (env.site / "minillm" / "platforms" / "cuda.py").write_text("import pdb; pdb.set_trace()\n")
    for where in _http(_Private):
        url = f"http://user:s3cret@{where}/simple"
        started = time.monotonic()
        code, _out, err = cli("diff", "minillm", "--site-packages", str(env.site), "--index-url", url)
        assert code == 2 and "no wheel of minillm 0.4.0" in err, err
        assert time.monotonic() - started < 30
    files = [p for p, _auth in _Private.seen if p.startswith("/files/")]
    assert 0 < len(files) <= index.FETCH_LIMIT
    assert all(auth is not None for _p, auth in _Private.seen), "the same origin gets the credentials"
    assert "s3cret" not in err
    kept = list((tmp_path / "pg-cache" / "downloads").glob("*.whl"))
    assert kept == [], "wheels that were not the build are not kept"


def test_credentials_never_follow_a_redirect_to_another_origin(tmp_path: Path) -> None:
    class Other(_Private):
        seen: ClassVar[list[tuple[str, str | None]]] = []

    for other in _http(Other):
        _Private.other = f"http://{other}"
        _Private.seen = []
        for where in _http(_Private):
            url = f"http://user:s3cret@{where}/simple"
            settings_ = IndexSettings(indexes=(url,), timeout=5.0, credentials=index._credentials([url]))
            wanted = IndexFile("x.whl", f"http://{where}/files/redirect", None, url)
            with pytest.raises(IndexError_):
                fetch(wanted, str(tmp_path / "dl"), settings_)
        assert _Private.seen and _Private.seen[0][1] is not None  # the index itself got them
        assert Other.seen and all(auth is None for _p, auth in Other.seen)  # the other origin did not


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=4096), chunked=st.booleans())
def test_any_bytes_an_index_answers_are_a_page_or_one_line(body: bytes, chunked: bool) -> None:
    """Whatever bytes come back after a well-formed status line — JSON or not, chunked or not, cut short —
    listing a project gives a list or one :class:`IndexError_`, never another exception."""

    def reply(conn: socket.socket) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.pypi.simple.v1+json\r\n"
        if chunked:
            conn.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n" + body)
        else:
            conn.sendall(head + b"Content-Length: %d\r\n\r\n" % (len(body) + 3) + body)

    for url in _raw_server(reply):
        try:
            found = list_files("gpukit", "1.0", url, IndexSettings(indexes=(url,), timeout=0.5), True)
        except IndexError_ as exc:
            assert "\n" not in str(exc)
        else:
            assert isinstance(found, list)


def test_a_record_that_inflates_without_end_is_refused_not_read(
    env: Env, tmp_path: Path, minillm_wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wheelhouse wheel whose RECORD inflates far past any real one (here past a lowered cap) is refused
    as unreadable, never read into memory; the environment is untouched."""
    from patchguard.pristine import wheels

    monkeypatch.setattr(wheels, "RECORD_LIMIT", 1 << 20)
    import zipfile

    house = tmp_path / "house"
    house.mkdir()
    bomb = house / minillm_wheel.name
    with zipfile.ZipFile(minillm_wheel) as src, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.endswith(".dist-info/RECORD"):
                data += b"x" * (8 << 20)
            dst.writestr(info.filename, data)
    cuda = env.site / "minillm" / "platforms" / "cuda.py"
    cuda.write_text("import pdb; pdb.set_trace()\n")
    code, _out, err = cli(
        "restore", "minillm", "--site-packages", str(env.site), "--wheelhouse", str(house), "--offline"
    )
    assert code == 2 and ("RECORD is larger than" in err or "RECORD inflates" in err), err
    assert cuda.read_text() == "import pdb; pdb.set_trace()\n"


def test_an_index_url_naming_the_user_gets_its_password_from_keyring(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip's ``keyring-provider = subprocess``: the URL names the user, ``keyring get URL USER`` gives the
    password, sent to that origin only (the keyring here is a program on PATH, as pip calls it)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    keyring = bindir / "keyring"
    asked = tmp_path / "asked.txt"
    keyring.write_text(
        f'#!/bin/sh\necho "$@" >> {asked}\n'
        'if [ "$1" = get ] && [ "$3" = user ]; then echo s3cret; exit 0; fi\nexit 1\n'
    )
    keyring.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    decoy = build_wheel(tmp_path / "d", "minillm", "0.4.0", {"minillm/__init__.py": "# another build\n"})
    _Private.wheels = {"minillm-0.4.0-py3-none-any.whl": decoy.read_bytes()}
    _Private.seen = []
    (env.site / "minillm" / "platforms" / "cuda.py").write_text("import pdb; pdb.set_trace()\n")
    for where in _http(_Private):
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[global]\nindex-url = http://user@{where}/simple\nkeyring-provider = subprocess\n")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
        monkeypatch.delenv("PIP_NO_INDEX", raising=False)
        _code, _out, err = cli("diff", "minillm", "--site-packages", str(env.site))
        assert "s3cret" not in err
    good = "Basic " + base64.b64encode(b"user:s3cret").decode()
    assert _Private.seen and all(auth == good for _p, auth in _Private.seen), _Private.seen
    assert any(p.startswith("/files/") for p, _auth in _Private.seen)  # the page let it through
    assert "get" in asked.read_text() and "user" in asked.read_text()
