"""``patchguard fleet`` (issue 27): many hosts' locks or scan reports, one answer.

Every host is a real environment: wheels built here, installed, then drifted the way a person drifts a box
(a version bumped, a file edited or deleted, a set applied, a ``.pth`` dropped in); each writes its document
with the real command, and ``fleet`` reads the directory an Ansible fetch would have filled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

import patchguard
from patchguard.deploy.identity.fleet import differences
from patchguard.deploy.identity.hostdocs import Fingerprint
from patchguard.model import json_name

from .helpers import REPO, Env, build_wheel, cli, patchguard_exe
from .test_deploy import dump_in_mla
from .test_output_escaping import _RAW_CONTROL, FORGED, HOSTILE
from .test_schemas import _schema

MLA = "minillm/models/mla.py"
CUDA = "minillm/platforms/cuda.py"


def _helper(tmp_path: Path, version: str) -> Path:
    return build_wheel(
        tmp_path / "wheels" / version,
        "helper-lib",
        version,
        {"helper_lib/__init__.py": f"VERSION = {version!r}\n"},
    )


def _host(tmp_path: Path, name: str, minillm_wheel: Path, helper: str = "2.0") -> Env:
    """A host: its own environment with minillm and helper-lib installed from their wheels."""
    env = Env(tmp_path / "hosts" / name / "venv")
    env.install(minillm_wheel)
    env.install(_helper(tmp_path, helper))
    return env


def _lock(env: Env, into: Path, name: str) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    out = into / f"{name}.json"
    code, _, err = cli("lock", "--site-packages", str(env.site), "-o", str(out))
    assert code == 0, err
    return out


def _report(env: Env, into: Path, name: str, wheels: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    out = into / f"{name}.json"
    site = ("--site-packages", str(env.site), "--wheelhouse", str(wheels), "--offline")
    code, _, err = cli("scan", *site, "--format", "json", "--fail-on", "never", "-o", str(out))
    assert code == 0, err
    return out


def _fleet(*args: str) -> tuple[int, dict[str, Any], str]:
    """The fleet as JSON (validated against the shipped schema), and as the table."""
    code, out, err = cli("fleet", *args, "--format", "json")
    assert code in (0, 1), err
    doc: dict[str, Any] = json.loads(out)
    jsonschema.validate(doc, _schema("fleet-1"), cls=jsonschema.Draft202012Validator)
    table_code, table, _ = cli("fleet", *args)
    assert table_code == code
    return code, doc, table


def _digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _group_of(doc: dict[str, Any], host: str) -> dict[str, Any]:
    group: dict[str, Any] = doc["groups"][doc["documents"][host]["group"]]
    return group


def test_a_fleet_of_alike_hosts_exits_0(tmp_path: Path, minillm_wheel: Path) -> None:
    fleet = tmp_path / "fleet"
    for name in ("gpu-01", "gpu-02", "gpu-03"):
        _lock(_host(tmp_path, name, minillm_wheel), fleet, name)
    code, doc, table = _fleet(str(fleet))
    assert code == 0 and doc["alike"]
    assert doc["summary"] == {"hosts": 3, "groups": 1, "differing": 0}
    assert doc["groups"] == [{"hosts": ["gpu-01", "gpu-02", "gpu-03"], "reference": True, "differences": []}]
    assert doc["reference"] == {"chosen": "largest", "group": 0, "tied": 0, "baseline": None}
    assert doc["differing"] == {}
    host = os.uname().nodename
    assert doc["documents"]["gpu-02"] == {
        "path": str(fleet / "gpu-02.json"),
        "kind": "lock",
        "host": host,
        "time": json.loads((fleet / "gpu-02.json").read_text())["time"],
        "version": patchguard.__version__,
        "group": 0,
    }
    assert table.splitlines()[0].startswith(f"REFERENCE  gpu-01 ({host}), gpu-02 ({host}), gpu-03 ({host})")
    assert table.splitlines()[-1] == "3 hosts, 1 environment: all alike"


def test_every_kind_of_difference_is_named(
    tmp_path: Path, minillm_wheel: Path, patches: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three alike hosts are the reference; every other host drifted in one way, and says exactly how."""
    monkeypatch.setenv("PATCHGUARD_PATCHES", str(patches))
    fleet = tmp_path / "fleet"
    for name in ("a-1", "a-2", "a-3"):
        _lock(_host(tmp_path, name, minillm_wheel), fleet, name)
    _lock(_host(tmp_path, "bumped", minillm_wheel, helper="2.1"), fleet, "bumped")
    edited = _host(tmp_path, "edited", minillm_wheel)
    dump_in_mla(edited)
    (edited.site / CUDA).unlink()
    (edited.site / "minillm" / "debug_dump.py").write_text("import pdb\n")
    _lock(edited, fleet, "edited")
    patched = _host(tmp_path, "patched", minillm_wheel)
    assert cli("apply", "--set", "sm120-support", "--site-packages", str(patched.site))[0] == 0
    _lock(patched, fleet, "patched")
    hooked = _host(tmp_path, "hooked", minillm_wheel)
    (hooked.site / "nccl_env.pth").write_text("import os; os.environ['NCCL_P2P_DISABLE'] = '1'\n")
    (hooked.site / "stray.txt").write_text("left behind\n")
    _lock(hooked, fleet, "hooked")

    code, doc, table = _fleet(str(fleet))
    assert code == 1 and not doc["alike"]
    assert doc["summary"] == {"hosts": 7, "groups": 5, "differing": 4}
    assert doc["groups"][0]["hosts"] == ["a-1", "a-2", "a-3"] and doc["groups"][0]["reference"]
    assert sorted(doc["differing"]) == ["bumped", "edited", "hooked", "patched"]

    def diff(
        aspect: str, change: str, name: str, ref: str | None, here: str | None, dist: str | None = None
    ) -> dict[str, Any]:
        return {
            "aspect": aspect,
            "change": change,
            "name": name,
            "distribution": dist,
            "reference": ref,
            "here": here,
        }

    assert doc["differing"]["bumped"] == [diff("distribution", "changed", "helper-lib", "2.0", "2.1")]
    assert doc["differing"]["edited"] == [
        diff(
            "file",
            "added",
            "minillm/debug_dump.py",
            None,
            f"unexpected:{_digest(edited.site / 'minillm/debug_dump.py')}",
            "minillm",
        ),
        diff("file", "added", MLA, None, _digest(edited.site / MLA), "minillm"),
        diff("file", "added", CUDA, None, "missing", "minillm"),
    ]
    digest = next(s.digest for s in patchguard.load_sets(str(patches)) if s.name == "sm120-support")
    patched_diffs = doc["differing"]["patched"]
    assert diff("set", "added", "sm120-support", None, digest) in patched_diffs
    assert {d["aspect"] for d in patched_diffs} == {"file", "set"}
    for d in patched_diffs:
        if d["aspect"] == "file":
            assert d["here"] == _digest(patched.site / d["name"]) and d["reference"] is None
    assert doc["differing"]["hooked"] == [
        diff("startup-hook", "added", "nccl_env.pth", None, _digest(hooked.site / "nccl_env.pth")),
        diff("unowned", "added", "stray.txt", None, _digest(hooked.site / "stray.txt")),
    ]
    # The table says the same, one line each, under the hosts it is about.
    lines = table.splitlines()
    assert "           distribution helper-lib: 2.1 here, 2.0 in the reference" in lines
    mla_hex = _digest(edited.site / MLA)[7:19]
    assert (
        f"           file {MLA} (minillm): modified {mla_hex} here, as RECORD says in the reference" in lines
    )
    assert f"           file {CUDA} (minillm): missing here, as RECORD says in the reference" in lines
    assert f"           patch set sm120-support applied here ({digest[:12]}), not in the reference" in lines
    hook = _digest(hooked.site / "nccl_env.pth")[7:19]
    assert f"           startup hook nccl_env.pth here ({hook}), not in the reference" in lines
    stray = _digest(hooked.site / "stray.txt")[7:19]
    assert f"           unowned file stray.txt here ({stray}), not in the reference" in lines
    summary = "7 hosts, 5 environments: 4 differ from the reference: bumped, edited, hooked, patched"
    assert lines[-1] == summary


@pytest.mark.slow  # CLI subprocesses or many environments
def test_a_report_and_a_lock_of_one_environment_are_alike(tmp_path: Path, minillm_wheel: Path) -> None:
    """A fleet may send scan reports (judged code findings and all) or locks: the same environment is one
    group, whichever it sent — drifted or not."""
    fleet, wheels = tmp_path / "fleet", minillm_wheel.parent
    clean = _host(tmp_path, "clean", minillm_wheel)
    _lock(clean, fleet, "clean-lock")
    _report(clean, fleet, "clean-report", wheels)
    drifted = _host(tmp_path, "drifted", minillm_wheel)
    dump_in_mla(drifted)
    (drifted.site / CUDA).unlink()
    (drifted.site / "minillm" / "debug_hooks.py").write_text(
        "import pdb\n\ndef hook(x):\n    pdb.set_trace()\n"
    )
    (drifted.site / "nccl_env.pth").write_text("import os\n")
    (drifted.site / "sitecustomize.py").write_text("import os\nos.environ['X'] = '1'\n")
    _lock(drifted, fleet, "drifted-lock")
    report = _report(drifted, fleet, "drifted-report", wheels)
    rules = {f["rule"] for f in json.loads(report.read_text())["findings"]}
    assert {"tensor-dump", "debugger", "missing-file", "pth-import"} <= rules  # judged, not bare findings

    code, doc, _ = _fleet(str(fleet), "--baseline", "clean-lock")
    assert code == 1
    assert [g["hosts"] for g in doc["groups"]] == [
        ["clean-lock", "clean-report"],
        ["drifted-lock", "drifted-report"],
    ]
    assert doc["documents"]["drifted-report"]["kind"] == "report"
    names = [(d["aspect"], d["name"]) for d in doc["groups"][1]["differences"]]
    assert names == [
        ("file", "minillm/debug_hooks.py"),
        ("file", MLA),
        ("file", CUDA),
        ("startup-hook", "nccl_env.pth"),
        ("startup-hook", "sitecustomize.py"),
    ]


def test_the_baseline_is_a_host_or_a_lock_file(tmp_path: Path, minillm_wheel: Path) -> None:
    fleet, elsewhere = tmp_path / "fleet", tmp_path / "reference"
    for name in ("a", "b"):
        _lock(_host(tmp_path, name, minillm_wheel), fleet, name)
    odd = _host(tmp_path, "odd", minillm_wheel, helper="3.0")
    _lock(odd, fleet, "odd")
    # --baseline HOST: that host's group is the reference, however small.
    code, doc, table = _fleet(str(fleet), "--baseline", "odd")
    assert code == 1 and doc["reference"]["chosen"] == "host"
    assert doc["groups"][0]["hosts"] == ["odd"] and doc["groups"][0]["reference"]
    assert doc["differing"]["a"] == doc["differing"]["b"] != []
    assert "(the group of --baseline)" in table.splitlines()[0]
    # --baseline LOCK: a document of no host; the hosts that have its environment are the reference.
    golden = _lock(_host(tmp_path, "golden", minillm_wheel), elsewhere, "env")
    code, doc, table = _fleet(str(fleet), "--baseline", str(golden))
    assert code == 1 and doc["reference"]["chosen"] == "file" and doc["groups"][0]["hosts"] == ["a", "b"]
    assert doc["reference"]["baseline"]["path"] == str(golden) and list(doc["differing"]) == ["odd"]
    assert f"(--baseline {golden}, written on {os.uname().nodename} at " in table.splitlines()[0]
    code, doc, _ = _fleet(str(fleet / "a.json"), str(fleet / "b.json"), "--baseline", str(golden))
    assert code == 0 and doc["alike"]
    # ... and when no host has it, every host differs.
    code, doc, table = _fleet(str(fleet / "odd.json"), "--baseline", str(golden))
    assert code == 1 and doc["reference"]["group"] is None and list(doc["differing"]) == ["odd"]
    assert table.startswith("REFERENCE  no host has it  (--baseline ")


def test_a_tie_for_the_largest_group_is_broken_by_host_name_and_said(
    tmp_path: Path, minillm_wheel: Path
) -> None:
    fleet = tmp_path / "fleet"
    for name, helper in (("m-1", "2.0"), ("z-2", "2.0"), ("b-1", "2.1"), ("y-2", "2.1"), ("c", "9.9")):
        _lock(_host(tmp_path, name, minillm_wheel, helper), fleet, name)
    files = sorted(str(p) for p in fleet.iterdir())
    first = _fleet(*files)
    again = _fleet(*reversed(files))  # the order documents are named in changes nothing
    assert first == again
    code, doc, table = first
    assert code == 1 and doc["reference"] == {"chosen": "tie", "group": 0, "tied": 2, "baseline": None}
    assert [g["hosts"] for g in doc["groups"]] == [["b-1", "y-2"], ["m-1", "z-2"], ["c"]]
    assert "(2 groups tie for the largest: the one with the first host by name is taken)" in table


def test_the_documents_own_host_name_is_shown_beside_the_file_name(
    tmp_path: Path, minillm_wheel: Path
) -> None:
    fleet = tmp_path / "fleet"
    lock = _lock(_host(tmp_path, "gpu-07", minillm_wheel), fleet, "gpu-07")
    doc = json.loads(lock.read_text())
    doc["host"] = "node17.cluster"
    lock.write_text(json.dumps(doc))
    shutil.copy(lock, fleet / "node17.cluster.json")
    code, out, table = _fleet(str(fleet))
    assert code == 0
    assert out["documents"]["gpu-07"]["host"] == "node17.cluster"
    assert table.splitlines()[0].startswith("REFERENCE  gpu-07 (node17.cluster), node17.cluster  (")


def test_hostile_names_are_escaped_in_the_table_and_exact_in_json(
    tmp_path: Path, minillm_wheel: Path
) -> None:
    """Host names (file names on the controller, host names in documents) and file names (in the drifting
    host's site-packages) that hold newlines, ANSI and OSC escapes, bidi overrides, bytes not UTF-8."""
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    _lock(_host(tmp_path, "ref", minillm_wheel), fleet, "ref")
    drifted = _host(tmp_path, "drifted", minillm_wheel)
    pkg = os.fsencode(drifted.site / "minillm")
    for raw in HOSTILE.values():
        with open(pkg + b"/" + raw, "wb") as handle:
            handle.write(b"x = 1\n")
    lock = _lock(drifted, tmp_path, "drifted")
    stem = b"evil\x1b[31m\n  HIGH  \xff\xe2\x80\xae"
    doc = json.loads(lock.read_text())
    doc["host"] = "node\x1b]0;pwned\x07\nHIGH"
    with open(os.fsencode(fleet) + b"/" + stem + b".json", "w", encoding="utf-8") as handle:
        json.dump(doc, handle)

    code, out, table = _fleet(str(fleet), "--baseline", "ref")
    assert code == 1
    host = json_name(os.fsdecode(stem))
    assert out["groups"][1]["hosts"] == [host] and list(out["differing"]) == [host]
    assert out["documents"][host]["host"] == doc["host"]
    names = {d["name"] for d in out["differing"][host]}
    assert names == {json_name("minillm/" + os.fsdecode(raw)) for raw in HOSTILE.values()}
    # The table: nothing a terminal acts on, and no line a name made (one line per difference).
    assert not _RAW_CONTROL.search(table)
    lines = table.splitlines()
    assert len(lines) == 1 + 1 + len(HOSTILE) + 2
    assert lines[1] == "DIFFERS    evil\\x1b[31m\\n  HIGH  \\xff\\u202e (node\\x1b]0;pwned\\x07\\nHIGH)"
    assert not any(line.lstrip().startswith("HIGH") for line in lines)
    assert f"file minillm/{FORGED.replace(chr(10), chr(92) + 'n')} (minillm): unexpected " in table


_NAMES = st.sampled_from(["a", "b", "c"])
_VALUES = st.sampled_from(["1", "2"])
_MAPS = st.dictionaries(_NAMES, _VALUES, max_size=3)
_UNOWNED = st.sampled_from(["x.pth", "sitecustomize.py", "y.txt", "d/"])
_FINGERPRINTS = st.builds(
    Fingerprint,
    python=st.sampled_from(["3.11", "3.12"]),
    distributions=_MAPS,
    builds=_MAPS,
    files=st.dictionaries(_NAMES, _MAPS, max_size=3),
    sets=_MAPS,
    unowned=st.dictionaries(_UNOWNED, _VALUES, max_size=4),
)


@pytest.mark.slow  # CLI subprocesses or many environments
@given(_FINGERPRINTS, _FINGERPRINTS, st.booleans())
def test_two_environments_are_grouped_apart_exactly_when_a_difference_is_named(
    a: Fingerprint, b: Fingerprint, builds: bool
) -> None:
    """No host is put in a group of its own without a word on why, nor with the reference while differing."""
    named = differences(a, b, builds)
    assert (a.key(builds) == b.key(builds)) == (named == ())
    assert (named == ()) == (differences(b, a, builds) == ())


# --- input that cannot be read: exit 2, one line naming the file, nothing on stdout -------------------------


def _lock_text(tmp_path: Path, minillm_wheel: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        _lock(_host(tmp_path, "ok", minillm_wheel), tmp_path / "made", "ok").read_text()
    )
    return doc


BAD_DOCUMENTS: dict[str, tuple[Any, str]] = {
    "malformed": ("{not json", "not JSON"),
    "empty": ("", "not JSON (Expecting value: line 1 column 1 (char 0))"),
    "not-utf8": (b'{"schema": "patchguard.lock/1", "python": "\xff\xfe"}', "not JSON ("),
    "list": ("[1, 2]", "not a lock or scan report (not a JSON object)"),
    "check": ({"schema": "patchguard.check/1", "passed": True}, "a patchguard.check/1 document, not a lock"),
    "unknown": ({"hello": 1}, "a document of no known schema, not a lock or scan report"),
    "deep": ("[" * 100_000 + "]" * 100_000, "not JSON (nested too deeply)"),
    "newline-schema": ({"schema": "evil\n  HIGH\x1b[2J"}, "a evil HIGH\\x1b[2J document, not a lock"),
    "old-report": ({"schema": "patchguard.report/1", "findings": []}, "does not list its distributions"),
    "bad-dists": ("distributions", "distributions must be an object"),
    "bad-version": ("version", "distributions.minillm.version must be a string"),
    "bad-unowned": ("unowned", "unowned must be a list of 'path<TAB>digest' strings"),
    "bad-sets": ("applied_sets", "applied_sets must be an object of strings"),
    "bad-host": ("host", "host must be a string"),
}


def _bad_lock(doc: dict[str, Any], which: str) -> dict[str, Any]:
    broken: dict[str, Any] = json.loads(json.dumps(doc))
    if which == "distributions":
        broken["distributions"] = ["minillm"]
    elif which == "version":
        broken["distributions"]["minillm"]["version"] = 4
    elif which == "unowned":
        broken["unowned"] = ["no tab here"]
    elif which == "applied_sets":
        broken["applied_sets"] = {"s": None}
    else:
        broken["host"] = ["a", "list"]
    return broken


def _refused(*args: str) -> str:
    code, out, err = cli("fleet", *args)
    assert code == 2, (out, err)
    assert out == ""
    assert err.startswith("patchguard: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("case", sorted(BAD_DOCUMENTS))
def test_a_document_that_is_not_a_hosts_environment_is_one_line(
    tmp_path: Path, minillm_wheel: Path, case: str
) -> None:
    fleet = tmp_path / "fleet"
    good = _lock_text(tmp_path, minillm_wheel)
    fleet.mkdir()
    (fleet / "good.json").write_text(json.dumps(good))
    content, message = BAD_DOCUMENTS[case]
    if case.startswith("bad-"):
        content = _bad_lock(good, content)
    bad = fleet / "bad.json"
    if isinstance(content, bytes):
        bad.write_bytes(content)
    else:
        bad.write_text(content if isinstance(content, str) else json.dumps(content))
    err = _refused(str(fleet))
    assert f"{bad}: " in err and message in err, err
    assert "(write it again with patchguard lock" in err or "(write it again with this patchguard" in err


FETCH_AGAIN = "(fetch the host's document again)"
NAME_THEM = "(name the documents (one lock or scan report per host) or the directory holding them)"


def test_what_is_not_a_readable_document_is_one_line(tmp_path: Path, minillm_wheel: Path) -> None:
    fleet = tmp_path / "fleet"
    good = json.dumps(_lock_text(tmp_path, minillm_wheel))
    fleet.mkdir()
    (fleet / "good.json").write_text(good)
    os.mkfifo(fleet / "fifo.json")
    (fleet / "loop.json").symlink_to("loop.json")
    (fleet / "dangling.json").symlink_to("nowhere.json")
    (fleet / "dir.json").mkdir()
    with open(fleet / "huge.json", "wb") as big:
        big.truncate(16 * 1024 * 1024 + 1)
    cases = {
        "fifo.json": "cannot read (not a regular file)",
        "loop.json": "cannot read (Too many levels of symbolic links)",
        "dangling.json": "cannot read (No such file or directory)",
        "dir.json": "cannot read (not a regular file)",
        "huge.json": "cannot read (larger than 16 MiB: not an input patchguard reads)",
    }
    # Found in the directory: each stops the whole comparison, nothing is printed half.
    for name in sorted(cases):  # read in name order: the first that cannot be read is said
        err = _refused(str(fleet))
        assert err == f"patchguard: error: {fleet / name}: {cases[name]} {FETCH_AGAIN}\n"
        (fleet / name).rmdir() if name == "dir.json" else (fleet / name).unlink()
    assert cli("fleet", str(fleet))[0] == 0
    # Named on the command line: what cannot even be looked at says how to name documents.
    (fleet / "loop.json").symlink_to("loop.json")
    err = _refused(str(fleet / "loop.json"), str(fleet / "good.json"))
    assert err == f"patchguard: error: {fleet / 'loop.json'}: {cases['loop.json']} {NAME_THEM}\n"


@pytest.mark.slow  # a CLI subprocess
def test_a_fifo_in_the_directory_never_hangs_the_real_command(tmp_path: Path, minillm_wheel: Path) -> None:
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / "good.json").write_text(json.dumps(_lock_text(tmp_path, minillm_wheel)))
    os.mkfifo(fleet / "zz-fifo.json")
    proc = subprocess.run(
        [*patchguard_exe(), "fleet", str(fleet)], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert (
        proc.stderr == f"patchguard: error: {fleet / 'zz-fifo.json'}: cannot read (not a regular file) "
        "(fetch the host's document again)\n"
    )


def test_two_documents_of_one_host_nothing_to_read_or_no_such_baseline(
    tmp_path: Path, minillm_wheel: Path
) -> None:
    good = json.dumps(_lock_text(tmp_path, minillm_wheel))
    for d in ("one", "two", "empty"):
        (tmp_path / d).mkdir()
    (tmp_path / "one" / "gpu-1.json").write_text(good)
    (tmp_path / "two" / "gpu-1.json").write_text(good)
    (tmp_path / "empty" / "notes.txt").write_text("not a document\n")
    (tmp_path / "empty" / ".hidden.json").write_text(good)
    err = _refused(str(tmp_path / "one"), str(tmp_path / "two"))
    assert f"{tmp_path / 'two' / 'gpu-1.json'}: a second document of host gpu-1 (the first: " in err
    assert "keep one document per host" in err
    assert f"{tmp_path / 'empty'}: no *.json documents" in _refused(str(tmp_path / "empty"))
    assert "nowhere: cannot read (No such file or directory)" in _refused(str(tmp_path / "nowhere"))
    err = _refused(str(tmp_path / "one"), "--baseline", "gpu-9")
    assert err.startswith(
        "patchguard: error: gpu-9: no host of that name among the documents, and no such file"
    )


# --- the library and the scale ----------------------------------------------------------------------------


def test_the_library_returns_frozen_values(tmp_path: Path, minillm_wheel: Path) -> None:
    fleet = tmp_path / "fleet"
    _lock(_host(tmp_path, "a", minillm_wheel), fleet, "a")
    _lock(_host(tmp_path, "b", minillm_wheel, helper="2.5"), fleet, "b")
    result = patchguard.fleet([fleet], baseline="a")
    assert isinstance(result, patchguard.FleetResult) and result.chosen is patchguard.Chosen.HOST
    assert [h.name for h in result.differing] == ["b"] and not result.alike
    (difference,) = result.groups[1].differences
    assert difference == patchguard.Difference(
        patchguard.Aspect.DISTRIBUTION, patchguard.Change.CHANGED, "helper-lib", "2.0", "2.5"
    )
    for value in (result, result.groups[0], difference, result.hosts[0]):
        first = dataclasses.fields(value)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, first, None)
    with pytest.raises(patchguard.FleetInputError) as caught:
        patchguard.fleet([tmp_path / "nowhere"])
    assert isinstance(caught.value, patchguard.PatchguardError)


def test_hundreds_of_hosts_take_well_under_a_second(tmp_path: Path, minillm_wheel: Path) -> None:
    """500 documents, a few drifting (a version, a file's digest, a set, a startup hook): one pass."""
    base = _lock_text(tmp_path, minillm_wheel)
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for i in range(500):
        doc = json.loads(json.dumps(base))
        if i == 100:
            doc["distributions"]["helper-lib"]["version"] = "2.1"
        elif i == 200:
            doc["distributions"]["minillm"]["changes"][MLA] = "sha256:" + "ab" * 32
        elif i == 300:
            doc["applied_sets"]["glm5-debug"] = "cd" * 32
        elif i == 400:
            doc["unowned"].append("nccl_env.pth\t" + "ef" * 32)
        (fleet / f"gpu-{i:03}.json").write_text(json.dumps(doc, indent=2))
    started = time.perf_counter()
    result = patchguard.fleet([fleet])
    took = time.perf_counter() - started
    assert [h.name for h in result.differing] == ["gpu-100", "gpu-200", "gpu-300", "gpu-400"]
    assert len(result.groups[0].hosts) == 496
    assert took < 1.0, f"{took:.2f} s for 500 hosts"


# --- check as a health check ------------------------------------------------------------------------------


def test_check_status_is_one_line_with_the_health_checkers_exit_codes(env: Env, tmp_path: Path) -> None:
    site = ("--site-packages", str(env.site))
    code, out, _ = cli("check", *site, "--format", "status")
    assert (code, out) == (0, "OK: 27 files in 1 distribution checked, no violation\n")
    dump_in_mla(env)
    code, out, _ = cli("check", *site, "--format", "status")
    assert code == 1 and out.count("\n") == 1
    assert re.fullmatch(r"PROBLEM: 1 violation; HIGH minillm/models/mla\.py:\d+ tensor-dump: .+\n", out), out
    policy = tmp_path / "broken.toml"
    policy.write_text("fail_on = [\n")
    code, out, err = cli("check", *site, "--policy", str(policy), "--format", "status")
    assert (
        code == 2
        and out.startswith(f"UNKNOWN: could not check: {policy}: invalid TOML")
        and out.count("\n") == 1
    )
    assert err.startswith(f"patchguard: error: {policy}: invalid TOML")


def _readme_block(after: str, lang: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8").split(after, 1)[1]
    return text.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def _seconds(duration: str) -> float:
    """A Go duration as node-problem-detector's configuration writes them (``120s``)."""
    assert duration.endswith("s"), duration
    return float(duration[:-1])


@pytest.mark.slow  # CLI subprocesses or many environments
def test_the_readme_node_problem_detector_plugin_works_as_configured(env: Env, tmp_path: Path) -> None:
    """The README's custom-plugin-monitor configuration: valid as node-problem-detector checks it (its
    pluginConfig.Validate: a custom plugin, a permanent rule's condition among the defaults, no rule timeout
    over the global one), and its rule's command gives the exit codes and line the plugin protocol reads."""
    config = json.loads(_readme_block("### Health checks: node-problem-detector", "json"))
    assert config["plugin"] == "custom"
    (rule,) = config["rules"]
    assert rule["type"] == "permanent" and rule["condition"] in {c["type"] for c in config["conditions"]}
    assert _seconds(rule["timeout"]) <= _seconds(config["pluginConfig"]["timeout"])
    assert config["pluginConfig"]["max_output_length"] >= 80
    assert rule["path"] == "/opt/patchguard/bin/patchguard"
    args = rule["args"]
    assert args[:3] == ["check", "--python", "/srv/venv/bin/python"]

    def plugin(site: Path) -> tuple[int, str]:
        """The rule's command, on this test's environment (its site-packages for the README's venv)."""
        command = [*patchguard_exe(), args[0], "--site-packages", str(site), *args[3:]]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert "Traceback" not in proc.stderr
        return proc.returncode, proc.stdout

    code, out = plugin(env.site)
    assert code == 0 and out == "OK: 27 files in 1 distribution checked, no violation\n"
    dump_in_mla(env)
    code, out = plugin(env.site)
    assert code == 1 and out.startswith("PROBLEM: 1 violation; HIGH minillm/models/mla.py:")
    code, out = plugin(tmp_path / "gone")
    assert code == 2 and out.startswith("UNKNOWN: could not check: ") and out.count("\n") == 1


@pytest.mark.slow  # CLI subprocesses or many environments
def test_the_readme_nhc_check_drains_on_a_problem_only(env: Env, tmp_path: Path) -> None:
    """The README's NHC check, sourced by bash as NHC sources /etc/nhc/scripts/*.nhc, with NHC's own
    ``die`` and ``log`` contract (die: the check failed, with its reason; log: a line in NHC's log)."""
    script = _readme_block("(`/etc/nhc/scripts/patchguard.nhc`)", "bash")
    exe = " ".join(patchguard_exe())
    script = script.replace("/opt/patchguard/bin/patchguard", exe)
    line = _readme_block("and one line in `nhc.conf`", "text").strip().splitlines()[-1]
    assert line.startswith("* || check_patchguard ")
    # NHC's die: an optional numeric code first, then the reason (the node is marked offline with it).
    nhc = (
        'die() { local RET=1; if [[ "$1" =~ ^[0-9]+$ ]]; then RET=$1; shift; fi; echo "DIE $*"; '
        "return $RET; }\n"
        'log() { echo "LOG $*"; }\n' + script
    )

    def run(*args: str) -> tuple[int, str]:
        proc = subprocess.run(
            ["bash", "-c", nhc + '\ncheck_patchguard "$@"', "nhc", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        return proc.returncode, proc.stdout

    site = ("--site-packages", str(env.site))
    assert run(*site) == (0, "")
    dump_in_mla(env)
    code, out = run(*site)
    assert code == 1 and out.startswith(
        "DIE check_patchguard: PROBLEM: 1 violation; HIGH minillm/models/mla.py:"
    )
    code, out = run("--site-packages", str(tmp_path / "gone"))
    assert code == 0 and out.startswith("LOG check_patchguard: UNKNOWN: could not check: ")
