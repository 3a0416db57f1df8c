"""Build real wheels and install them, the way a user's environment comes to be.

Wheels are zip files written here (METADATA, WHEEL, entry points, RECORD with real hashes) and installed
with pypa's ``installer`` into a venv-shaped prefix, or with pip where pip's own behaviour is the point.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from installer import install
from installer.destinations import SchemeDictionaryDestination
from installer.sources import WheelFile

REPO = Path(__file__).resolve().parent.parent
MINILLM_SRC = REPO / "fixtures" / "minillm"
PYVER = f"python{sys.version_info[0]}.{sys.version_info[1]}"
# The environment the tests started in, before conftest isolates pip's configuration: what a pip that must
# reach this machine's package registries (building patchguard's own wheel) runs with.
OUTER_ENV = dict(os.environ)


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(
    out_dir: Path,
    name: str,
    version: str,
    files: Mapping[str, bytes | str],
    *,
    console_scripts: Mapping[str, str] | None = None,
    scripts: Mapping[str, bytes | str] | None = None,
    tag: str = "py3-none-any",
    purelib: bool = True,
) -> Path:
    """Write ``{name}-{version}-{tag}.whl`` holding ``files`` (paths relative to site-packages)."""
    dist_info = f"{name}-{version}.dist-info"
    members: dict[str, bytes] = {p: (c.encode() if isinstance(c, str) else c) for p, c in files.items()}
    for script, content in (scripts or {}).items():
        members[f"{name}-{version}.data/scripts/{script}"] = (
            content.encode() if isinstance(content, str) else content
        )
    members[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    members[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: patchguard-tests\n"
        f"Root-Is-Purelib: {str(purelib).lower()}\nTag: {tag}\n"
    ).encode()
    if console_scripts:
        lines = "".join(f"{k} = {v}\n" for k, v in console_scripts.items())
        members[f"{dist_info}/entry_points.txt"] = f"[console_scripts]\n{lines}".encode()
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for path, data in members.items():
        writer.writerow([path, record_hash(data), len(data)])
    writer.writerow([f"{dist_info}/RECORD", "", ""])
    members[f"{dist_info}/RECORD"] = record.getvalue().encode()
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"{name.replace('-', '_')}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in members.items():
            zf.writestr(path, data)
    return wheel


def minillm_files(version: str = "0.4.0") -> dict[str, bytes]:
    """Every file of the fixture package, as wheel members."""
    root = MINILLM_SRC / "minillm"
    files: dict[str, bytes] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
            files[p.relative_to(MINILLM_SRC).as_posix()] = p.read_bytes()
    return files


@dataclass
class Env:
    """A venv-shaped prefix: ``<prefix>/lib/pythonX.Y/site-packages`` and ``<prefix>/bin``."""

    prefix: Path

    @property
    def site(self) -> Path:
        return self.prefix / "lib" / PYVER / "site-packages"

    @property
    def bin(self) -> Path:
        return self.prefix / "bin"

    def install(self, wheel: Path) -> None:
        self.site.mkdir(parents=True, exist_ok=True)
        dest = SchemeDictionaryDestination(
            {
                "purelib": str(self.site),
                "platlib": str(self.site),
                "headers": str(self.prefix / "include"),
                "scripts": str(self.bin),
                "data": str(self.prefix),
            },
            interpreter=str(self.prefix / "bin" / "python"),
            script_kind="posix",
        )
        with WheelFile.open(wheel) as source:
            install(source, dest, {"INSTALLER": b"patchguard-tests"})

    def dist_info(self, name: str, version: str) -> Path:
        return self.site / f"{name}-{version}.dist-info"

    def insert_after(self, rel: str, after: str, line: str) -> Path:
        """A hand edit: ``line`` inserted after the (unique) line ``after`` of an installed file (``rel``
        below site-packages), at that line's indent."""
        path = self.site / rel
        text = path.read_text()
        (anchor,) = [ln for ln in text.splitlines(keepends=True) if ln.strip() == after]
        indent = anchor[: len(anchor) - len(anchor.lstrip())]
        path.write_text(text.replace(anchor, f"{anchor}{indent}{line}\n", 1))
        return path


def make_venv(path: Path) -> Env:
    """A real virtual environment (no pip in it: nothing needs one, and it is fast)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    env = Env(path)
    assert env.site.is_dir(), env.site
    return env


def patchguard_exe() -> list[str]:
    """The installed console script (the way a user runs it), else ``python -m patchguard``."""
    exe = Path(sys.executable).parent / "patchguard"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "patchguard"]


def run_cli(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [*patchguard_exe(), *args], capture_output=True, text=True, env=full_env, check=False, timeout=120
    )


def cli(*args: str) -> tuple[int, str, str]:
    """Run the command line in-process (click's CliRunner): (exit code, stdout, stderr).

    An exception that is not a clean exit is re-raised: a traceback is a bug, never an outcome.
    """
    from click.testing import CliRunner

    from patchguard.cli import main

    result = CliRunner().invoke(main, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def tree(root: Path) -> dict[str, tuple[str, int, str]]:
    """Everything below ``root`` as (kind, mode, content): files (sha256), symlinks (target) and
    directories, ``__pycache__`` and patchguard's state included — what "byte-for-byte before or after"
    compares. Left out: patchguard's lock file, and its state and backups directories while empty;
    transaction ids in backup paths read ``<tx0>``, ``<tx1>``, … in their order."""
    import hashlib
    import stat

    out: dict[str, tuple[str, int, str]] = {}
    backups = root / ".patchguard" / "backups"
    order = {n: f"<tx{i}>" for i, n in enumerate(sorted(os.listdir(backups)) if backups.is_dir() else [])}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            st = p.lstat()
            if rel == ".patchguard/lock":
                continue
            parts = rel.split("/")
            if parts[:2] == [".patchguard", "backups"] and len(parts) > 2:
                parts[2] = order.get(parts[2], parts[2])  # ids are times: the same backups, in the same order
                rel = "/".join(parts)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", 0, os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                if rel in (".patchguard", ".patchguard/backups") and not any(
                    c.name != "lock" for c in p.iterdir()
                ):
                    continue
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), "")
            else:
                data = p.read_bytes()
                if rel == ".patchguard/state.json":  # when a set was applied is not part of the state
                    import json

                    doc = json.loads(data)
                    for record in doc.get("applied", {}).values():
                        record.pop("time", None)
                    data = json.dumps(doc, sort_keys=True).encode()
                out[rel] = ("file", stat.S_IMODE(st.st_mode), hashlib.sha256(data).hexdigest())
    return out


def judged_edit(rel: str, anchor: str, text: str, *, replace: bool = False) -> set[tuple[str, str]]:
    """(rule, severity name) of every finding of one edit of a minillm fixture file: ``text`` put after
    ``anchor`` (which must occur once), or in its place."""
    from patchguard.analysis import CodeChange, analyse

    before = (MINILLM_SRC / rel).read_text()
    assert before.count(anchor) == 1, anchor
    after = before.replace(anchor, text if replace else anchor + text, 1)
    findings = analyse(CodeChange(rel, before.encode(), after.encode(), "minillm", "0.4.0"))
    also = {  # the rules a finding names beside its own, on its line ("also: device-sync")
        (rule, f.severity.name)
        for f in findings
        for e in f.evidence
        if e.startswith("also: ")
        for rule in e[len("also: ") :].split(", ")
    }
    return {(f.rule, f.severity.name) for f in findings} | also


def scan_edited(tmp_path: Path, path: str, pristine: str, edited: str) -> set[tuple[str, int]]:
    """End to end, as a person edits a library: a real wheel of one package (``path`` holding ``pristine``)
    built and installed, the file replaced by ``edited`` (a new file, as an editor that writes a copy does),
    ``patchguard scan`` run against the wheel: the (rule, line) of every code finding. Exit 0 is asserted:
    moderate findings are below scan's default threshold (high)."""
    import json

    house = tmp_path / "house"
    package = path.split("/", 1)[0]
    wheel = build_wheel(house, package, "1.0", {f"{package}/__init__.py": "", path: pristine})
    env = Env(tmp_path / "venv")
    env.install(wheel)
    (env.site / path).unlink()
    (env.site / path).write_text(edited)
    code, out, err = cli(
        "scan", "--site-packages", str(env.site), "--wheelhouse", str(house), "--format", "json"
    )
    assert code == 0, err
    return {(f["rule"], f["line"]) for f in json.loads(out)["findings"] if f.get("rule")}


@dataclass(frozen=True)
class EditedModule:
    """A module of a meanings test, edited as a person would: ``after`` replaces each ``(old, new)`` (each
    ``old`` found exactly once), ``found`` is what the analysis reports of the edit — (rule, severity name,
    line) — against the pristine text."""

    path: str
    pristine: str

    def after(self, *edits: tuple[str, str]) -> str:
        text = self.pristine
        for old, new in edits:
            assert text.count(old) == 1, old
            text = text.replace(old, new)
        return text

    def found(self, *edits: tuple[str, str]) -> list[tuple[str, str, int]]:
        from patchguard.analysis import CodeChange, analyse

        change = CodeChange(self.path, self.pristine.encode(), self.after(*edits).encode(), "pkg", "1.0")
        return [(str(f.rule), f.severity.name, f.line or 0) for f in analyse(change)]

    def messages(self, *edits: tuple[str, str]) -> list[tuple[str, str, int]]:
        """(rule, message, line) of each finding the analysis reports of the edit."""
        from patchguard.analysis import CodeChange, analyse

        change = CodeChange(self.path, self.pristine.encode(), self.after(*edits).encode(), "pkg", "1.0")
        return [(str(f.rule), f.message, f.line or 0) for f in analyse(change)]

    def near(self, edit: tuple[str, str], needle: str) -> set[str]:
        """The rules found at moderate or above within a line of the edited line that holds ``needle``."""
        line = line_of(self.after(edit), needle)
        return {rule for rule, severity, n in self.found(edit) if abs(n - line) <= 1 and severity in _SERIOUS}

    def named(self, edit: tuple[str, str], needle: str) -> set[str]:
        """:meth:`near`, with the rules a finding names beside its own on its line ("also: device-sync")."""
        from patchguard.analysis import CodeChange, analyse

        line = line_of(self.after(edit), needle)
        change = CodeChange(self.path, self.pristine.encode(), self.after(edit).encode(), "pkg", "1.0")
        near = [f for f in analyse(change) if abs((f.line or 0) - line) <= 1 and f.severity.name in _SERIOUS]
        also = {r for f in near for e in f.evidence if e.startswith("also: ") for r in e[6:].split(", ")}
        return {str(f.rule) for f in near} | also

    def rules(self, edit: tuple[str, str]) -> set[str]:
        """The rules found at moderate or above anywhere in the edited module."""
        return {rule for rule, severity, _n in self.found(edit) if severity in _SERIOUS}


_SERIOUS = ("MODERATE", "HIGH")


def line_of(text: str, needle: str) -> int:
    """The number of the first line of ``text`` that holds ``needle``."""
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def patch_txn(monkeypatch: Any, name: str, replacement: object) -> object:
    """Replace a step of the transaction package (``write_durable``, ``write_point``, ``apply_changes``)
    wherever its modules call it; returns the real one."""
    import importlib
    import pkgutil

    import patchguard.txn as package

    real = None
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"patchguard.txn.{info.name}")
        if name in vars(module):
            real = real or vars(module)[name]
            monkeypatch.setattr(module, name, replacement)
    assert real is not None, f"no step {name} in patchguard.txn"
    return real
