"""Where this box gets its wheels, and fetching the exact file of a release from there.

**Where**: pip's own configuration, read from every place pip reads it (in pip's order, a later one
overriding an earlier one): the global files (``$XDG_CONFIG_DIRS``/``pip/pip.conf``, ``/etc/pip.conf``), the
user files (``~/.pip/pip.conf``, ``$XDG_CONFIG_HOME/pip/pip.conf``; skipped when ``$PIP_CONFIG_FILE`` names an
existing file), the environment's own ``<prefix>/pip.conf``, ``$PIP_CONFIG_FILE``, then the ``PIP_*``
variables; in each file ``[install]`` overrides ``[global]``. The keys read: ``index-url``,
``extra-index-url``, ``find-links``, ``no-index``, ``cert``, ``trusted-host``, ``proxy``, ``timeout``.
uv's ``UV_INDEX_URL`` / ``UV_DEFAULT_INDEX`` / ``UV_EXTRA_INDEX_URL`` / ``UV_INDEX`` / ``UV_FIND_LINKS`` are
added, and patchguard's own ``--index-url`` / ``--extra-index-url`` / ``--find-links`` come first.

**Which file**: the index's project page (PEP 691 JSON, or PEP 503 HTML; ``file://`` directories too) lists
the files of ``name==version``; wheels are ranked by the tags an installer on the environment's
interpreter accepts (:mod:`packaging.tags`), those sharing a tag with the installed ``WHEEL`` first (a
``WHEEL`` that says ``linux_x86_64`` while the file is ``manylinux_2_28_x86_64`` still matches: the file's
tags are what this box's pip accepted). ``Requires-Python`` plays no part: the build, not this interpreter,
is what is looked for. Which file is the build is proven afterwards by its RECORD, by the caller.

**Fetching**: streamed into patchguard's download directory through a temporary name, checked against
the hash the index gives, never twice (a file already there is a local candidate, tried before any index).
"""

from __future__ import annotations

import base64
import configparser
import contextlib
import hashlib
import html.parser
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from packaging.tags import Tag

from .wheels import DownloadProgress

__all__ = [
    "DownloadProgress",
    "IndexFile",
    "IndexSettings",
    "fetch",
    "index_settings",
    "list_files",
    "local_path",
    "local_version_hint",
    "rank",
]

PYPI = "https://pypi.org/simple"


_PAGE_LIMIT = 64 * 1024 * 1024  # a project page of torch's size is a few MB
_WHEEL_LIMIT = 16 * 1024 * 1024 * 1024
_FILES_LIMIT = 500  # wheels of one release a page may list that are looked at (torch: a few dozen)
FETCH_LIMIT = 6  # wheels of one release downloaded in one command before patchguard stops trying
# How long one request may take in all, whatever the server trickles: a page, and a wheel (plus the time
# it takes at 256 KiB/s, so a real 5 GB wheel on a slow link still arrives); and one command's network in all.
_PAGE_DEADLINE = 120.0
_WHEEL_DEADLINE = 300.0
_SLOWEST = 256 * 1024
_COMMAND_DEADLINE = float(os.environ.get("PATCHGUARD_NETWORK_DEADLINE", "") or 1800)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class IndexSettings:
    """Where wheels are fetched from, in the order they are asked, and how to reach them."""

    indexes: tuple[str, ...] = (PYPI,)
    find_links: tuple[str, ...] = ()
    cert: str | None = None
    trusted_hosts: frozenset[str] = frozenset()
    proxy: str | None = None
    timeout: float = 60.0
    origins: tuple[str, ...] = ()  # where the settings came from, for messages
    # Credentials the configured URLs carry, by origin (scheme, host, port): sent to that origin only, as
    # pip sends an index URL's credentials with the files it lists on the same origin.
    credentials: Mapping[tuple[str, str, int | None], tuple[str, str]] = field(default_factory=dict)
    started: float = field(default_factory=lambda: _now())  # the command's network budget starts here
    # pip's keyring-provider: the `keyring` command to ask for an index URL's password when the URL names
    # the user but not the password (as pip's subprocess provider does); None: not configured, or no keyring
    keyring: str | None = None

    @property
    def places(self) -> tuple[str, ...]:
        return (*self.find_links, *self.indexes)


def _words(value: str) -> list[str]:
    return [w for w in value.split() if w]


def _pip_files(prefix: str | None, environ: Mapping[str, str]) -> list[str]:
    """pip's configuration files, lowest priority first (``pip config debug`` lists the same)."""
    env_file = environ.get("PIP_CONFIG_FILE")
    if env_file == os.devnull:
        return []
    xdg_dirs = environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    files = [os.path.join(d, "pip", "pip.conf") for d in xdg_dirs.split(os.pathsep) if d]
    files.append("/etc/pip.conf")
    if not (env_file and os.path.exists(env_file)):
        home = os.path.expanduser("~")
        xdg_home = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        files += [os.path.join(home, ".pip", "pip.conf"), os.path.join(xdg_home, "pip", "pip.conf")]
    if prefix:
        files.append(os.path.join(prefix, "pip.conf"))
    if env_file:
        files.append(env_file)
    return files


def _read_pip_file(path: str, into: dict[str, str], origins: list[str]) -> None:
    parser = configparser.RawConfigParser()
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f)
    except (OSError, UnicodeDecodeError, configparser.Error):
        return  # pip itself refuses a broken file loudly; here it only means one place fewer
    found = False
    for section in ("global", "install"):
        if parser.has_section(section):
            for key, value in parser.items(section):
                into[key.replace("_", "-")] = value
                found = True
    if found:
        origins.append(path)


def index_settings(
    prefix: str | None = None,
    *,
    index_url: str | None = None,
    extra_index_urls: Sequence[str] = (),
    find_links: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> IndexSettings:
    """The indexes and find-links this box's pip (and uv) use, with patchguard's own options first."""
    env = os.environ if environ is None else environ
    conf, origins = _pip_configuration(prefix, env)
    timeout = conf.get("timeout") or conf.get("default-timeout") or env.get("PIP_DEFAULT_TIMEOUT")
    no_index = conf.get("no-index", "").strip().lower() in ("1", "true", "yes", "on")
    primary = index_url or env.get("UV_DEFAULT_INDEX") or env.get("UV_INDEX_URL") or conf.get("index-url")
    extras = [*extra_index_urls, *_words(env.get("UV_INDEX", "")), *_words(env.get("UV_EXTRA_INDEX_URL", ""))]
    extras += _words(conf.get("extra-index-url", ""))
    indexes = [] if no_index and not index_url else [primary or PYPI, *extras]
    links = [*find_links, *_words(env.get("UV_FIND_LINKS", "")), *_words(conf.get("find-links", ""))]
    places = [*indexes, *links]
    return IndexSettings(
        credentials=_credentials(places),
        keyring=_keyring_provider(conf.get("keyring-provider", "")),
        indexes=tuple(dict.fromkeys(u.rstrip("/") for u in indexes if u)),
        find_links=tuple(dict.fromkeys(links)),
        cert=conf.get("cert") or None,
        trusted_hosts=frozenset(_words(conf.get("trusted-host", ""))),
        proxy=conf.get("proxy") or None,
        timeout=_timeout(timeout),
        origins=tuple(dict.fromkeys(origins)),
    )


def _pip_configuration(prefix: str | None, env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """pip's settings as its configuration files and ``PIP_*`` variables give them (the variables last), and
    where each came from."""
    conf: dict[str, str] = {}
    origins: list[str] = []
    for path in _pip_files(prefix, env):
        _read_pip_file(path, conf, origins)
    keys = ("index-url", "extra-index-url", "find-links", "no-index", "cert", "trusted-host", "proxy")
    for key in (*keys, "keyring-provider"):
        value = env.get("PIP_" + key.upper().replace("-", "_"))
        if value is not None:
            conf[key] = value
            origins.append("$PIP_" + key.upper().replace("-", "_"))
    return conf, origins


def _now() -> float:
    import time

    return time.monotonic()


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


def _credentials(urls: Sequence[str]) -> dict[tuple[str, str, int | None], tuple[str, str]]:
    """The credentials written into configured URLs (``https://user:token@host/simple``), by origin."""
    out: dict[tuple[str, str, int | None], tuple[str, str]] = {}
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        if parts.username is not None:
            user, password = urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")
            out.setdefault(_origin(url), (user, password))
    return out


def _keyring_provider(value: str) -> str | None:
    """The ``keyring`` executable pip would run for credentials: with ``keyring-provider = subprocess`` (or
    ``auto``/``import``, which patchguard serves the same way: it imports nothing of the box), if found."""
    import shutil

    if value.strip().lower() not in _KEYRING_PROVIDERS:
        return None
    return shutil.which("keyring")


_KEYRING: dict[tuple[str, str, str], str | None] = {}
_KEYRING_PROVIDERS = frozenset("subprocess auto import".split())  # noqa: SIM905 - pip's values, not rule ids


def _keyring_password(keyring: str, url: str, user: str) -> str | None:
    """The password ``keyring get SERVICE USER`` gives for an index (pip asks for the URL, then its host),
    asked once per command; ``None`` when it has none."""
    import subprocess

    parts = urllib.parse.urlsplit(url)
    clean = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    for service in (clean, parts.hostname or ""):
        key = (keyring, service, user)
        if key not in _KEYRING:
            try:
                got = subprocess.run(
                    [keyring, "get", service, user],
                    capture_output=True,
                    text=True,
                    timeout=30,
                    stdin=subprocess.DEVNULL,
                    check=False,
                )
                ok = got.returncode == 0 and got.stdout.strip()
                _KEYRING[key] = got.stdout.splitlines()[0] if ok else None
            except (OSError, subprocess.SubprocessError):
                _KEYRING[key] = None
        if _KEYRING[key]:
            return _KEYRING[key]
    return None


def _timeout(text: str | None) -> float:
    try:
        value = float(text) if text else 60.0
    except ValueError:
        return 60.0
    return value if 0 < value < 3600 else 60.0


# -- reading an index ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexFile:
    """One wheel an index lists for a release."""

    filename: str
    url: str
    sha256: str | None  # hex, when the index gives it
    where: str  # the index or find-links location that listed it
    size: int | None = None
    tags: frozenset[Tag] = field(default_factory=frozenset)


class IndexError_(Exception):
    """An index that cannot be read: the message says how (one line)."""


class _Links(html.parser.HTMLParser):
    """The anchors of a PEP 503 page (or a find-links page): (href, text)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []
        self.base: str | None = None
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "base" and a.get("href") and self.base is None:
            self.base = a["href"]
        elif tag == "a" and a.get("href"):
            self._href, self._text = a["href"], []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def _opener(settings: IndexSettings, url: str, sockets: list[Any] | None = None) -> Any:
    """An opener for ``url`` (its TLS settings, the proxy); the sockets it connects are added to ``sockets``
    (a request cut off at its deadline is cut off there, wherever it waits)."""
    import http.client
    import ssl

    host = urllib.parse.urlsplit(url).hostname or ""
    if host in settings.trusted_hosts:
        context = ssl._create_unverified_context()
    else:
        context = ssl.create_default_context(cafile=settings.cert if settings.cert else None)
    seen = sockets if sockets is not None else []

    class _Http(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            seen.append(self.sock)

    class _Https(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            seen.append(self.sock)

    class _HttpHandler(urllib.request.HTTPHandler):
        def http_open(self, req: Any) -> Any:
            return self.do_open(_Http, req)

    class _HttpsHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: Any) -> Any:
            return self.do_open(_Https, req, context=context)

    handlers: list[Any] = [_HttpHandler(), _HttpsHandler(context=context)]
    if settings.proxy:
        handlers.append(urllib.request.ProxyHandler({"http": settings.proxy, "https": settings.proxy}))
    return urllib.request.build_opener(*handlers)


def _request(url: str, accept: str | None, settings: IndexSettings | None = None) -> Any:
    """A request for ``url`` with its credentials as a header — those in the URL, else those a configured
    URL of the same origin carries (scheme, host and port, as pip does), else ``~/.netrc``'s — never in the
    URL that is logged or shown, and never sent on to another place a redirect names."""
    from .._version import __version__

    parts = urllib.parse.urlsplit(url)
    clean = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl() if "@" in parts.netloc else url
    user, password = _url_credentials(url, parts, settings)
    headers = {"User-Agent": f"patchguard/{__version__}"}
    if accept:
        headers["Accept"] = accept
    request = urllib.request.Request(clean, headers=headers)
    if user is not None:
        token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password or '')}".encode()
        # Unredirected: urllib carries ordinary headers over a redirect, to whatever host it names.
        request.add_unredirected_header("Authorization", "Basic " + base64.b64encode(token).decode("ascii"))
    return request


def _url_credentials(
    url: str, parts: urllib.parse.SplitResult, settings: IndexSettings | None
) -> tuple[str | None, str | None]:
    """(user, password), quoted as in a URL, for ``url``: those in it, else those a configured URL of the
    same origin carries, the password from the keyring when only a user is known, else ``~/.netrc``'s."""
    user, password = parts.username, parts.password
    if user is None and settings is not None and _origin(url) in settings.credentials:
        user, password = settings.credentials[_origin(url)]
        user, password = urllib.parse.quote(user, safe=""), urllib.parse.quote(password, safe="")
    if user is not None and not password and settings is not None and settings.keyring:
        index = next((u for u in settings.places if _origin(u) == _origin(url)), url)
        kept = _keyring_password(settings.keyring, index, urllib.parse.unquote(user))
        password = urllib.parse.quote(kept, safe="") if kept else password
    if user is None and parts.hostname:
        with contextlib.suppress(Exception):  # no ~/.netrc, or one netrc cannot parse: no credentials
            import netrc

            found = netrc.netrc().authenticators(parts.hostname)
            if found:
                user, password = found[0], found[2]
    return user, password


def shown(url: str) -> str:
    """A URL as it may be printed: without credentials."""
    parts = urllib.parse.urlsplit(url)
    if "@" in parts.netloc:
        return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()
    return url


def local_path(url: str) -> str | None:
    if url.startswith("file:"):
        return urllib.parse.unquote(urllib.parse.urlsplit(url).path)
    if "://" not in url:
        return os.path.abspath(os.path.expanduser(url))
    return None


_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"


def _get_page(url: str, settings: IndexSettings) -> tuple[str, str, str]:
    """(content type, text, final URL) of a page; a local directory reads its ``index.html`` or, lacking
    one, lists its files as links (as pip does for find-links)."""
    local = local_path(url)
    if local is not None:
        if os.path.isdir(local):
            page = os.path.join(local, "index.html")
            if not os.path.isfile(page):
                names = sorted(os.listdir(local))
                body = "".join(f'<a href="{urllib.parse.quote(n)}">{html_escape(n)}</a>\n' for n in names)
                return "text/html", body, "file://" + urllib.parse.quote(os.path.join(local, ""))
            local = page
        try:
            with open(local, "rb") as f:
                data = f.read(_PAGE_LIMIT + 1)
        except OSError as exc:
            raise IndexError_(f"cannot read {local} ({exc.strerror or exc})") from None
        kind = "application/vnd.pypi.simple.v1+json" if local.endswith(".json") else "text/html"
        return kind, data[:_PAGE_LIMIT].decode("utf-8", "replace"), "file://" + urllib.parse.quote(local)
    deadline = _deadline(settings, _PAGE_DEADLINE)
    with _answers(), _open(settings, _request(url, _ACCEPT, settings), deadline) as resp:
        data = b"".join(_chunks(resp, deadline, _PAGE_LIMIT, "its page"))
        kind = resp.headers.get_content_type()
        final = resp.geturl()
    return kind, data.decode("utf-8", "replace"), final


def _deadline(settings: IndexSettings, seconds: float) -> float:
    """When one request must be done: ``seconds`` from now, and never after the command's network budget."""
    left = settings.started + _COMMAND_DEADLINE - _now()
    if left <= 0:
        raise IndexError_(
            f"not asked: this command's network time is spent ({_COMMAND_DEADLINE:g} s; "
            "$PATCHGUARD_NETWORK_DEADLINE)"
        )
    return _now() + min(seconds, left)


@contextlib.contextmanager
def _answers() -> Iterator[None]:
    """Whatever a server or the network answers, as one line (:class:`IndexError_`): HTTP errors, refused and
    dropped connections, TLS failures, and what ``http.client`` raises for a reply that is not HTTP at all (a
    bad status line, a 70 KiB header line, a broken chunked body: not ``OSError``)."""
    import http.client

    try:
        yield
    except urllib.error.HTTPError as exc:
        raise IndexError_(f"HTTP {exc.code} {_short(exc.reason)}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise IndexError_(f"cannot reach it ({_short(getattr(exc, 'reason', exc))})") from None
    except http.client.HTTPException as exc:
        raise IndexError_(f"its answer is not HTTP ({exc.__class__.__name__}: {_short(exc)})") from None


def _short(what: object) -> str:
    return _CONTROL.sub("?", str(what))[:200]


def _open(settings: IndexSettings, request: Any, deadline: float) -> Any:
    """The response to ``request``; every read of it waits at most the configured timeout, and the status
    line and headers arrive by the deadline — a server trickling them a byte at a time is cut off (its socket
    shut down from a timer), not waited for."""
    import http.client
    import socket
    import threading

    wait = max(0.1, min(settings.timeout, deadline - _now()))
    sockets: list[Any] = []
    fired: list[bool] = []

    def cut() -> None:
        fired.append(True)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(max(0.0, deadline - _now()), cut)
    timer.daemon = True
    timer.start()
    late = IndexError_("its answer did not arrive in time (cut off at the deadline)")
    try:
        resp = _opener(settings, request.full_url, sockets).open(request, timeout=wait)
    except (OSError, urllib.error.URLError, http.client.HTTPException) as exc:
        if fired or _now() >= deadline:
            raise late from None
        raise exc from None
    finally:
        timer.cancel()
    if fired:  # cut off while its headers trickled in: what came is not the answer
        resp.close()
        raise late
    return resp


def _chunks(resp: Any, deadline: float, limit: int, what: str) -> Iterator[bytes]:
    """The body of a response in chunks, ending it at ``limit`` bytes or at the deadline — a server that
    trickles a byte now and then (slowloris) is cut off, not waited for."""
    done = 0
    while chunk := resp.read1(1 << 16) if hasattr(resp, "read1") else resp.read(1 << 16):
        done += len(chunk)
        if done > limit:
            raise IndexError_(f"{what} is larger than {limit >> 20} MiB")
        if _now() > deadline:
            raise IndexError_(f"{what} did not arrive in time (cut off after {done} bytes)")
        yield chunk


def html_escape(text: str) -> str:
    import html

    return html.escape(text)


def _json_entries(text: str, base: str) -> list[tuple[str, str, dict[str, str], int | None]]:
    """:func:`_entries` of a PEP 691 JSON page."""
    out: list[tuple[str, str, dict[str, str], int | None]] = []
    try:
        doc = json.loads(text)
    except ValueError:
        raise IndexError_("its JSON page is not valid JSON") from None
    files = doc.get("files") if isinstance(doc, dict) else None
    for f in files if isinstance(files, list) else []:
        if not isinstance(f, dict) or not isinstance(f.get("filename"), str):
            continue
        url = f.get("url") if isinstance(f.get("url"), str) else f["filename"]
        hashes = f["hashes"] if isinstance(f.get("hashes"), dict) else {}
        size = f.get("size") if isinstance(f.get("size"), int) else None
        out.append((f["filename"], urllib.parse.urljoin(base, url), _str_map(hashes), size))
    return out


def _entries(kind: str, text: str, base: str) -> list[tuple[str, str, dict[str, str], int | None]]:
    """(filename, absolute URL, hashes, size) of every file a page lists."""
    if kind.endswith("+json") or kind == "application/json":
        return _json_entries(text, base)
    out: list[tuple[str, str, dict[str, str], int | None]] = []
    parser = _Links()
    with contextlib.suppress(Exception):  # html.parser is lenient; a page it chokes on lists nothing
        parser.feed(text)
    page_base = urllib.parse.urljoin(base, parser.base) if parser.base else base
    for href, label in parser.links:
        url = urllib.parse.urljoin(page_base, href)
        path, _, fragment = url.partition("#")
        name = urllib.parse.unquote(path.rstrip("/").rsplit("/", 1)[-1]) or label
        algo, _, digest = fragment.partition("=")
        out.append((name, path, {algo: digest} if digest else {}, None))
    return out


def _str_map(m: dict[Any, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in m.items() if isinstance(v, str)}


def list_files(
    name: str, version: str, place: str, settings: IndexSettings, is_index: bool
) -> list[IndexFile]:
    """The wheels of ``name==version`` that one index (its project page) or find-links location lists."""
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    wanted = canonicalize_name(name)
    try:
        want_version = Version(version)
    except InvalidVersion:
        return []
    url = f"{place.rstrip('/')}/{wanted}/" if is_index else place
    kind, text, final = _get_page(url, settings)
    found: list[IndexFile] = []
    for filename, file_url, hashes, size in _entries(kind, text, final):
        if len(found) >= _FILES_LIMIT:
            break  # a page listing thousands of files of one release: the first ones are looked at
        if _CONTROL.search(filename) or "/" in filename or not filename.endswith(".whl"):
            continue
        try:
            wname, wversion, _build, tags = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if wname != wanted or wversion != want_version:
            continue
        sha = hashes.get("sha256")
        sha = sha.lower() if sha and re.fullmatch(r"[0-9a-fA-F]{64}", sha) else None
        found.append(IndexFile(filename, file_url, sha, place, size, frozenset(tags)))
    return found


def supported_tags(python_version: tuple[int, int], implementation: str = "cpython") -> list[Tag]:
    """The tags an installer on that interpreter, on this machine, accepts, most specific first."""
    from packaging import tags

    platforms = list(tags.platform_tags())
    if implementation == "cpython":
        found = list(tags.cpython_tags(python_version, platforms=platforms))
        interp = f"cp{python_version[0]}{python_version[1]}"
    else:
        interp = f"{tags.interpreter_name()}{python_version[0]}{python_version[1]}"
        found = list(tags.generic_tags(interp, platforms=platforms))
    return found + list(tags.compatible_tags(python_version, interp, platforms))


def rank(
    files: Sequence[IndexFile], wheel_tags: frozenset[Tag], supported: Sequence[Tag]
) -> tuple[list[IndexFile], list[IndexFile]]:
    """The files an installer of that environment could have taken, in the order to try them (a tag in
    common with the installed ``WHEEL`` first, then by how specific a tag it matches), and the others."""
    order = {t: i for i, t in reversed(list(enumerate(supported)))}
    usable: list[tuple[tuple[int, int], IndexFile]] = []
    other: list[IndexFile] = []
    for f in files:
        best = min((order[t] for t in f.tags if t in order), default=None)
        same = bool(f.tags & wheel_tags)
        if best is None and not same:
            other.append(f)
            continue
        usable.append(((0 if same else 1, best if best is not None else len(order)), f))
    usable.sort(key=lambda pair: pair[0])
    return [f for _key, f in usable], other


def local_version_hint(version: str) -> str | None:
    """For a CUDA/ROCm/CPU build of the PyTorch family (``2.9.0+cu128``): the index that serves it."""
    label = version.partition("+")[2]
    if re.fullmatch(r"cu\d{2,4}|cpu|rocm\d+(\.\d+)*|xpu", label):
        return f"https://download.pytorch.org/whl/{label}"
    return None


# -- fetching --------------------------------------------------------------------------------------------


def fetch(
    file: IndexFile, dest_dir: str, settings: IndexSettings, progress: DownloadProgress | None = None
) -> str:
    """Download ``file`` into ``dest_dir`` (streamed, through a temporary name, checked against the index's
    hash); the final path. Raises :class:`IndexError_` saying why in one line."""
    os.makedirs(dest_dir, exist_ok=True)
    final = os.path.join(dest_dir, file.filename)
    local = local_path(file.url)
    tmp = f"{final}.part-{os.getpid()}"
    digest = hashlib.sha256()
    label = f"{file.filename} from {shown(file.where)}"
    done = 0
    try:
        with open(tmp, "wb") as out, _stream(file, local, settings) as (chunks, total):
            for chunk in chunks:
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if done > _WHEEL_LIMIT:
                    raise IndexError_(f"larger than {_WHEEL_LIMIT >> 30} GiB")
                if progress is not None:
                    progress(label, done, total, False)
        if file.sha256 is not None and digest.hexdigest() != file.sha256:
            raise IndexError_(f"its sha256 is {digest.hexdigest()}, the index says {file.sha256}")
        os.replace(tmp, final)
    except OSError as exc:
        raise IndexError_(f"cannot download it ({exc.strerror or exc})") from None
    finally:
        if progress is not None:
            progress(label, done, None, True)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return final


@contextlib.contextmanager
def _stream(
    file: IndexFile, local: str | None, settings: IndexSettings
) -> Iterator[tuple[Iterator[bytes], int | None]]:
    if local is not None:
        with open(local, "rb") as f:
            yield iter(lambda: f.read(1 << 20), b""), os.fstat(f.fileno()).st_size
        return
    request = _request(file.url, None, settings)
    expected = file.size if file.size is not None else _WHEEL_LIMIT
    deadline = _deadline(settings, _WHEEL_DEADLINE + min(expected, _WHEEL_LIMIT) / _SLOWEST)
    with _answers():
        resp = _open(settings, request, deadline)
    with resp, _answers():
        length = resp.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else file.size
        yield _chunks(resp, deadline, _WHEEL_LIMIT, file.filename), total


def python_version_of(text: str | None) -> tuple[int, int]:
    """``"3.11.7"`` → (3, 11); anything else: the running interpreter's."""
    m = re.match(r"(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else (sys.version_info[0], sys.version_info[1])
