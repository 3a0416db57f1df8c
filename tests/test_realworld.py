"""What real installs look like, built as real wheels and installed by pip: upstream quirks are facts, never a
crash and never tampering.

- numpy's wheel ships ``numpy/distutils/__pycache__/conv_template.cpython-311.pyc``; pip byte-compiles the
  same path over it and appends its own hashless row: RECORD lists the path twice.
- ``torch_c_dlpack_ext`` and ``flashinfer-python`` both ship a top-level ``build_backend.py``;
  ``openai-harmony`` and ``oss-harmony`` both own ``openai_harmony/openai_harmony.abi3.so``: the second
  install's copy is there.
- ``pynvvideocodec``'s own RECORD gives its ``.so`` members other sizes (and hashes) than the bytes it packs;
  pip copies the rows. Only something independent of that RECORD may vouch for those bytes: the sha256 the
  index publishes for the wheel file. A member swapped under a real RECORD is never called pristine.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import OUTER_ENV, Env, build_wheel, cli, make_venv, record_hash
from .test_index import Index, _rewritten, _serve

TAG = sys.implementation.cache_tag  # cpython-311


def _pip(env: Env, *args: str, index: str | None = None) -> None:
    """pip itself installing into the venv (``--python``: the venv has no pip of its own), byte-compiling
    as it does by default."""
    extra = ["--index-url", index] if index else ["--no-index"]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(env.prefix / "bin" / "python"),
            "install",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            *extra,
            *args,
        ],
        check=True,
        capture_output=True,
        env={k: v for k, v in OUTER_ENV.items() if not k.startswith("PIP_")}
        | {"PIP_CONFIG_FILE": "/dev/null", "PYTHONDONTWRITEBYTECODE": ""},
    )


def _scan(env: Env, *args: str) -> tuple[int, dict[str, object], str]:
    code, out, err = cli("scan", "--python", str(env.prefix / "bin" / "python"), "--format", "json", *args)
    return code, json.loads(out) if out else {}, err


def _findings(doc: dict[str, object]) -> list[dict[str, object]]:
    found = doc["findings"]
    assert isinstance(found, list)
    return found


@pytest.fixture
def venv(tmp_path: Path) -> Env:
    return make_venv(tmp_path / "venv")


def test_pip_compiling_over_the_wheels_own_bytecode_is_a_fact_not_a_crash(tmp_path: Path, venv: Env) -> None:
    code = compile("X = 1\n", "tmpl.py", "exec")
    pyc = importlib.util.MAGIC_NUMBER + b"\0" * 12 + __import__("marshal").dumps(code)
    wheel = build_wheel(
        tmp_path / "w",
        "numpyish",
        "2.3.5",
        {
            "numpyish/__init__.py": "",
            "numpyish/tmpl.py": "X = 1\n",
            f"numpyish/__pycache__/tmpl.{TAG}.pyc": pyc,
        },
    )
    _pip(venv, str(wheel))
    record = (venv.dist_info("numpyish", "2.3.5") / "RECORD").read_text()
    assert record.count(f"numpyish/__pycache__/tmpl.{TAG}.pyc,") == 2  # the premise: pip listed it twice
    for args in ((), ("numpyish",), ("--offline",)):
        code_, doc, err = _scan(venv, "--fail-on", "moderate", *args)
        assert code_ == 0, err
        (f,) = _findings(doc)
        assert (f["kind"], f["severity"], f["rule"]) == ("record-invalid", "info", "record-duplicate")
        assert "compiled over it" in str(f["message"])
    code_, out, err = cli("check", "--python", str(venv.prefix / "bin" / "python"), "--format", "status")
    assert code_ == 0 and out.startswith("OK") and out.count("\n") == 1, (out, err)
    # The text says what it is: a quirk of the upstream RECORD, not an invalid row.
    code_, out, _ = cli("scan", "--python", str(venv.prefix / "bin" / "python"))
    assert code_ == 0 and "1 upstream RECORD quirk (info)" in out and "invalid" not in out


def test_exact_and_dot_slash_duplicate_rows_are_one_file(tmp_path: Path, venv: Env) -> None:
    wheel = build_wheel(tmp_path / "w", "dups", "1.0", {"dups/__init__.py": "", "dups/a.py": "A = 1\n"})
    row = f"dups/a.py,{record_hash(b'A = 1' + bytes([10]))},6\n"
    doubled = _rewritten(wheel, tmp_path / wheel.name, lambda r: r + row + "./" + row)
    _pip(venv, str(doubled))
    assert (venv.dist_info("dups", "1.0") / "RECORD").read_text().count("dups/a.py,") == 3
    code, doc, err = _scan(venv, "--fail-on", "minor")
    assert code == 0, err
    assert {f["rule"] for f in _findings(doc)} == {"record-duplicate"}
    # The file is still verified: an edit of it is found.
    (venv.site / "dups" / "a.py").write_text("A = 1\nimport pdb; pdb.set_trace()\n")
    code, doc, _ = _scan(venv, "--offline")
    assert code == 1 and "debugger" in {f["rule"] for f in _findings(doc)}


def _two_owners(tmp_path: Path, venv: Env) -> None:
    """aa, then bb: both ship build_backend.py and one extension module; bb's copies are the ones on disk."""
    aa = build_wheel(
        tmp_path / "w",
        "aa",
        "1.0",
        {"aa/__init__.py": "", "build_backend.py": "import os\n", "harmony/h.abi3.so": b"\x7fELF-aa"},
    )
    bb = build_wheel(
        tmp_path / "w",
        "bb",
        "2.0",
        {
            "bb/__init__.py": "",
            "build_backend.py": "import subprocess\nsubprocess.run(['make'])\nbreakpoint()\n",
            "harmony/h.abi3.so": b"\x7fELF-bb-other",
        },
    )
    _pip(venv, str(aa))
    _pip(venv, str(bb))


def test_a_file_two_distributions_install_is_the_one_it_matches(tmp_path: Path, venv: Env) -> None:
    _two_owners(tmp_path, venv)
    code, doc, err = _scan(venv, "--fail-on", "moderate")
    assert code == 0, err
    found = sorted((f["distribution"], f["path"], f["severity"], f["rule"]) for f in _findings(doc))
    assert found == [
        ("aa", "build_backend.py", "minor", "overwritten"),
        ("aa", "harmony/h.abi3.so", "minor", "overwritten"),
    ]
    assert all(f["owned_by"] == {"distribution": "bb", "version": "2.0"} for f in _findings(doc))
    # No restore hint that would put aa's copy over bb's, and restore has nothing to do.
    python = str(venv.prefix / "bin" / "python")
    code, out, _ = cli("scan", "--python", python)
    assert "restore" not in out and "2 overwritten by another distribution" in out
    before = (venv.site / "build_backend.py").read_bytes()
    code, out, err = cli("restore", "aa", "--python", python, "--offline")
    assert code == 0 and (venv.site / "build_backend.py").read_bytes() == before, (out, err)
    # An edit of the shared file is bb's (installed last), judged against bb's wheel only.
    (venv.site / "build_backend.py").write_bytes(before + b"import pdb; pdb.set_trace()\n")
    code, doc, _ = _scan(venv, "--wheelhouse", str(tmp_path / "w"))
    rules = {(f["distribution"], f["rule"]) for f in _findings(doc)}
    assert ("bb", "debugger") in rules and ("aa", "overwritten") in rules
    assert not {r for d, r in rules if d == "bb"} & {"subprocess"}  # bb's own code is not an edit


def test_printed_commands_carry_the_environment_the_user_selected(tmp_path: Path, venv: Env) -> None:
    wheel = build_wheel(tmp_path / "w", "sel", "1.0", {"sel/__init__.py": "", "sel/m.py": "M = 1\n"})
    _pip(venv, str(wheel))
    (venv.site / "sel" / "m.py").unlink()
    python = str(venv.prefix / "bin" / "python")
    code, out, _ = cli("scan", "--python", python, "--fail-on", "moderate")
    assert code == 1
    (hint,) = [line for line in out.splitlines() if "→" in line]
    assert hint.strip() == f"→ patchguard restore sel --path sel/m.py --python {python}"


# -- a wheel whose own RECORD is wrong, and one whose member was swapped under a real RECORD ---------------


@pytest.fixture
def index() -> Iterator[Index]:
    yield from _serve(Index(json_pages=True))


def _wrong_record_wheel(tmp_path: Path) -> tuple[Path, bytes]:
    """pynvvideocodec's kind: the wheel's RECORD gives its extension another size and hash than it packs."""
    packed = b"\x7fELF" + b"\x01" * 300
    good = build_wheel(
        tmp_path / "b", "codec", "2.0.4", {"codec/__init__.py": "", "codec/_c.abi3.so": packed}
    )
    claimed = f"{record_hash(packed[:-100])},{len(packed) - 100}"
    wrong = _rewritten(
        good, tmp_path / good.name, lambda r: r.replace(f"{record_hash(packed)},{len(packed)}", claimed)
    )
    return wrong, packed


def test_a_wrong_upstream_record_is_as_shipped_when_the_index_vouches_for_the_wheel(
    tmp_path: Path, venv: Env, index: Index
) -> None:
    wheel, packed = _wrong_record_wheel(tmp_path)
    index.add(wheel)
    index.requires_python = ">=3.8"
    _pip(venv, "codec==2.0.4", index=index.url)
    assert (venv.site / "codec" / "_c.abi3.so").read_bytes() == packed
    code, doc, err = cli(
        "scan",
        "--python",
        str(venv.prefix / "bin" / "python"),
        "--index-url",
        index.url,
        "--fail-on",
        "moderate",
        "--format",
        "json",
    )
    assert code == 0, err
    (f,) = json.loads(doc)["findings"]
    assert (f["severity"], f["rule"], f["path"]) == ("info", "record-wrong", "codec/_c.abi3.so")
    code, out, err = cli(
        "diff", "codec", "--python", str(venv.prefix / "bin" / "python"), "--index-url", index.url
    )
    assert code == 0 and out == "", (out, err)


@pytest.mark.parametrize("where", ["wheelhouse", "index-without-hash"])
def test_a_record_the_bytes_contradict_vouches_for_nothing(
    tmp_path: Path, venv: Env, index: Index, where: str
) -> None:
    real = build_wheel(
        tmp_path / "b", "m", "1.0", {"m/__init__.py": "", "m/m001.py": "def f():\n    return 1\n"}
    )
    _pip(venv, str(real))
    target = venv.site / "m" / "m001.py"
    target.write_text("def f():\n    return 2\n")  # the operator's edit, to be restored
    # The attacker's wheel: the real RECORD, a same-size member with other code.
    evil = tmp_path / "evil" / real.name
    evil.parent.mkdir()
    with zipfile.ZipFile(real) as src, zipfile.ZipFile(evil, "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            dst.writestr(
                info.filename,
                b"import os\nos.system('x')\n"[: len(data)].ljust(len(data), b"#")
                if info.filename == "m/m001.py"
                else data,
            )
    real.unlink()  # direct_url.json names it: the genuine wheel is nowhere now
    python = str(venv.prefix / "bin" / "python")
    if where == "wheelhouse":
        args = ["--wheelhouse", str(evil.parent), "--offline"]
    else:
        index.add(evil)
        index.unhashed = True
        args = ["--index-url", index.url]
    edited = target.read_bytes()
    code, out, err = cli("restore", "m", "--path", "m/m001.py", "--python", python, *args)
    assert code == 2 and target.read_bytes() == edited, (out, err)
    assert "nothing independent of that RECORD vouches for the wheel file" in err, err
