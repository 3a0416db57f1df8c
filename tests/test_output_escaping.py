"""Output that lies or attacks the terminal (issue 24): hostile file names, ``.pth`` lines and command lines.

A real environment gets files whose names hold a newline and a fake ``HIGH`` line, ANSI and OSC escapes, a
bidi override, an 8-bit CSI, a byte that is not UTF-8 (and its look-alike spelling ``\\xff``), and the
characters a URI must encode; a ``.pth`` whose import line carries escape sequences. Every text output must
show them as visible escapes, on the lines they belong to; every machine format must keep each name exact
and distinct.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from patchguard.diffs import FileDiff, hunks_json
from patchguard.formats.jsondoc import format_running
from patchguard.formats.prometheus import format_prometheus
from patchguard.formats.sarif import format_sarif, uri_path
from patchguard.formats.text import format_table
from patchguard.model import (
    Environment,
    Finding,
    Kind,
    Report,
    RuleId,
    Severity,
    for_terminal,
    from_json_name,
    json_name,
    printable,
)

from .helpers import Env

# Everything a terminal may act on (newlines aside: text output has lines, and a test counts them).
_RAW_CONTROL = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)
# RFC 3986 path characters patchguard keeps: unreserved, "/" and percent-encoded octets.
_URI_PATH = re.compile(r"(?:[A-Za-z0-9\-._~/]|%[0-9A-F]{2})*")

FORGED = "x\n  HIGH     forged.py"  # a newline and a fake HIGH line
HOSTILE: dict[str, bytes] = {
    FORGED: FORGED.encode(),
    "ansi": b"esc\x1b[31mred\x1b[0m\x1b]0;pwned\x07.py",
    "bidi": "bidi\u202egnp.py".encode(),
    "c1": "csi\u009b2J.py".encode(),
    "raw": b"dup\xff.py",  # not UTF-8
    "look-alike": b"dup\\xff.py",  # the four characters \xff: must not collide with the one above
    "uri": b"sp ace%41#frag?q='\"`.py",
    "tab": b"tab\there\rcr.py",
}
PTH_LINE = "import os; os.environ['PG_TEST'] = '\x1b[2J\x1b]0;pwned\x07'\n"


def _names(env: Env) -> set[str]:
    """The hostile files' paths relative to site-packages, as ``os.fsdecode`` gives them."""
    return {"minillm/" + os.fsdecode(raw) for raw in HOSTILE.values()}


@pytest.fixture
def hostile(env: Env) -> Env:
    pkg = os.fsencode(env.site / "minillm")
    for raw in HOSTILE.values():
        with open(pkg + b"/" + raw, "wb") as out:
            out.write(b"x = 1\n")
    (env.site / "minillm" / "notes.txt").write_text("++ not a diff header\n-- nor this\n")
    (env.site / "hostile.pth").write_text(PTH_LINE)
    return env


def _run(*args: str) -> tuple[int, str, str]:
    """The CLI in-process; stdout decoded strictly: output that is not UTF-8 fails here."""
    from click.testing import CliRunner

    from patchguard.cli import main

    result = CliRunner().invoke(main, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout_bytes.decode("utf-8"), result.stderr


def _assert_terminal_safe(text: str) -> None:
    found = _RAW_CONTROL.search(text)
    assert found is None, f"raw {found.group()!r} reaches the terminal" if found else ""


def _severity_lines(text: str) -> dict[str, int]:
    """How many lines of a table start as a finding of each severity."""
    counts = {"high": 0, "moderate": 0, "minor": 0, "info": 0}
    for line in text.split("\n"):
        word = line.strip().split(" ", 1)[0].lower()
        if line.startswith("  ") and word in counts:
            counts[word] += 1
    return counts


def _json_strings(doc: Any) -> list[str]:
    if isinstance(doc, str):
        return [doc]
    if isinstance(doc, dict):
        return [s for k, v in doc.items() for s in [k, *_json_strings(v)]]
    if isinstance(doc, list):
        return [s for v in doc for s in _json_strings(v)]
    return []


def _assert_no_lone_surrogate(doc: Any) -> None:
    json.dumps(doc, ensure_ascii=False).encode("utf-8")
    assert not any(re.search("[\ud800-\udfff]", s) for s in _json_strings(doc))


# --- text --------------------------------------------------------------------------------------------------


def test_scan_table_shows_hostile_names_escaped_on_their_own_lines(hostile: Env) -> None:
    site = str(hostile.site)
    code, out, err = _run("scan", "--site-packages", site)
    assert code == 1, err
    _assert_terminal_safe(out + err)
    _code, doc_text, _ = _run("scan", "--site-packages", site, "--format", "json")
    counts = json.loads(doc_text)["summary"]["findings"]
    assert _severity_lines(out) == counts  # no line forged: one finding line per finding
    assert "minillm/x\\n  HIGH     forged.py" in out
    assert "esc\\x1b[31mred\\x1b[0m\\x1b]0;pwned\\x07.py" in out
    assert "bidi\\u202egnp.py" in out and "csi\\u009b2J.py" in out and "tab\\there\\rcr.py" in out
    assert "dup\\xff.py" in out
    assert "os.environ['PG_TEST'] = '\\x1b[2J\\x1b]0;pwned\\x07'" in out


def test_check_text_shows_violations_escaped(hostile: Env, tmp_path: Path) -> None:
    policy = tmp_path / "patchguard.toml"
    policy.write_text('fail_on = "moderate"\n')
    code, out, err = _run("check", "--site-packages", str(hostile.site), "--policy", str(policy))
    assert code == 1, err
    _assert_terminal_safe(out + err)
    lines = out.rstrip("\n").split("\n")
    assert lines[-1].startswith("check failed: ")
    n = int(lines[-1].split()[2])
    assert len(lines) == n + 1  # one line per violation, none forged
    assert sum(line.startswith("HIGH ") for line in lines) == 1  # the .pth, nothing else
    assert any("minillm/x\\n  HIGH     forged.py" in line for line in lines)


def test_restore_dry_run_lists_hostile_names_escaped(hostile: Env, minillm_wheel: Path) -> None:
    site, wheels = str(hostile.site), str(minillm_wheel.parent)
    args = ("restore", "minillm", "--remove-unexpected", "--dry-run", "--offline", "--wheelhouse", wheels)
    code, out, err = _run(*args, "--site-packages", site)
    assert code == 0, err
    _assert_terminal_safe(out + err)
    assert len(out.rstrip("\n").split("\n")) == len(HOSTILE) + 1  # each file one line (and notes.txt)


def test_an_error_naming_a_hostile_path_is_one_escaped_line(tmp_path: Path) -> None:
    where = tmp_path / "no\x1b[2Jsuch\nHIGH forged"
    code, out, err = _run("scan", "--site-packages", str(where))
    assert code == 2
    _assert_terminal_safe(out + err)
    assert len(err.rstrip("\n").split("\n")) == 1 and "no\\x1b[2Jsuch\\nHIGH forged" in err


def test_error_details_and_verbose_lines_are_escaped() -> None:
    import logging

    from patchguard.cli import _TerminalFormatter
    from patchguard.cli._common import error_text
    from patchguard.errors import PatchguardError

    exc = PatchguardError("cannot read\x1b[2J\n  a\x1b]0;x\x07", path="/p\n\udcff", hint="do \u202eit")
    text = error_text(exc)
    assert text == "/p\\n\\xff: cannot read\\x1b[2J (do \\u202eit)\n  a\\x1b]0;x\\x07"  # details stay lines
    record = logging.LogRecord("patchguard", logging.INFO, __file__, 1, "using %s", ("w\x1b[2J\nx",), None)
    assert _TerminalFormatter("patchguard: %(message)s").format(record) == "patchguard: using w\\x1b[2J\\nx"


def test_sets_and_status_show_hostile_set_details_escaped() -> None:
    from patchguard.formats.text import format_sets, format_status
    from patchguard.model import AppliedSet, SetState, SetStatus

    state = SetState("evil\x1b]0;x\x07", "minillm ==0.4.0\n  fake", SetStatus.DRIFTED, 1, ("a\nb\u202e",))
    applied = AppliedSet("evil\n", "/site", "t\x1b[2J", "None", 0)
    text = format_sets([state]) + format_status([], [applied], [state])
    _assert_terminal_safe(text)
    assert "evil\\x1b]0;x\\x07" in text and "a\\nb\\u202e" in text and "t\\x1b[2J" in text


# --- JSON --------------------------------------------------------------------------------------------------


def test_report_json_keeps_every_name_exact_and_distinct(hostile: Env) -> None:
    code, out, err = _run("scan", "--site-packages", str(hostile.site), "--format", "json")
    assert code == 1, err
    doc = json.loads(out)
    _assert_no_lone_surrogate(doc)
    paths = [f["path"] for f in doc["findings"]]
    decoded = {from_json_name(p) for p in paths if p.startswith("minillm/")}
    assert _names(hostile) <= decoded
    assert "minillm/dup\\xff.py" in paths and "minillm/dup\\\\xff.py" in paths  # distinct
    assert "minillm/x\n  HIGH     forged.py" in paths  # valid UTF-8, no backslash: the name itself
    pth = [f for f in doc["findings"] if f["path"] == "hostile.pth"]
    assert any("\x1b[2J" in (f["source"] or "") for f in pth)  # source text is kept as it is, JSON-escaped


def test_check_json_has_no_lone_surrogate(hostile: Env, tmp_path: Path) -> None:
    policy = tmp_path / "patchguard.toml"
    policy.write_text('fail_on = "moderate"\n')
    code, out, _ = _run(
        "check", "--site-packages", str(hostile.site), "--policy", str(policy), "--format", "json"
    )
    assert code == 1
    doc = json.loads(out)
    _assert_no_lone_surrogate(doc)
    assert doc["policy"] == str(policy)
    assert any("dup\\xff.py" in v for v in doc["violations"])


def test_diff_json_of_hostile_names_needs_no_reparse(hostile: Env) -> None:
    code, out, err = _run("diff", "--site-packages", str(hostile.site), "--format", "json", "--offline")
    assert code == 0, err
    doc = json.loads(out)
    _assert_no_lone_surrogate(doc)
    files = {from_json_name(f["path"]): f for f in doc["files"]}
    assert _names(hostile) <= set(files)
    forged = files["minillm/" + FORGED]
    assert forged["status"] == "added" and forged["hunks"][0]["lines"] == ["+x = 1"]
    notes = files["minillm/notes.txt"]["hunks"][0]
    assert notes["header"] == "@@ -0,0 +1,2 @@"
    assert notes["lines"] == ["+++ not a diff header", "+-- nor this"]


def test_diff_text_and_json_keep_lines_that_look_like_headers() -> None:
    """A removed ``-- x`` is ``--- x`` in the body, an added ``++ y`` is ``+++ y``: both are lines of the hunk
    (they were dropped from the text, and the JSON failed to parse it back)."""
    old = b"a\n-- x\nb\nc\nd\ne\nf\ng\nh\n"
    new = b"a\n++ y\nb\nc\nd\ne\nf\ng\nh\nlast"
    text = FileDiff("p.py", old, new).text(context=1)
    body = text.split("+++ b/p.py\n", 1)[1].rstrip("\n").split("\n")
    assert body == [
        "@@ -1,3 +1,3 @@", " a", "--- x", "+++ y", " b",
        "@@ -9 +9,2 @@", " h", "+last", "\\ No newline at end of file",
    ]  # fmt: skip
    doc = hunks_json(FileDiff("p\nq.py", old, new), context=1)
    assert doc["path"] == "p\nq.py"
    assert [line for h in doc["hunks"] for line in h["lines"]] == [b for b in body if not b.startswith("@@")]
    assert [h["header"] for h in doc["hunks"]] == ["@@ -1,3 +1,3 @@", "@@ -9,1 +9,2 @@"]


def test_running_output_of_a_hostile_command_line(env: Env) -> None:
    """A process of the environment whose command line holds a newline and a fake ``stale`` line, an OSC
    sequence and a byte that is not UTF-8 (in its interpreter's name: the table shows 100 characters)."""
    if not os.path.isdir("/proc/self"):
        pytest.skip("needs /proc")
    env.bin.mkdir(exist_ok=True)
    python = os.fsencode(env.bin) + b"/p\nstale    pid 1 \x1b]0;x\x07\xff"
    os.symlink(sys.executable, python)
    code = b"import time; print('ready', flush=True); time.sleep(60)"
    argv = [python, b"-S", b"-c", code, b"x\nstale    pid 2  forged\x1b[2J"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        _code, out, err = _run("running", "--site-packages", str(env.site))
        _assert_terminal_safe(out + err)
        mine = [line for line in out.split("\n") if f"pid {proc.pid} " in line]
        assert len(mine) == 1 and "/p\\nstale    pid 1 \\x1b]0;x\\x07\\xff -S" in mine[0], out
        assert not any(line.startswith("stale") for line in out.split("\n"))  # nothing changed: none stale
        _code, out, _ = _run("running", "--site-packages", str(env.site), "--format", "json")
        doc = json.loads(out)
        _assert_no_lone_surrogate(doc)
        (process,) = [p for p in doc["processes"] if p["pid"] == proc.pid]
        assert from_json_name(process["command"]) == os.fsdecode(b" ".join(argv))
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def test_running_json_formatter_encodes_names() -> None:
    from patchguard.deploy.processes.running import Process, Running, Verdict
    from patchguard.env import Target

    process = Process(
        pid=1,
        command="py \udcfe",
        started=0.0,
        verdict=Verdict.STALE,
        replaced_extensions=("/a\udcff.so",),
        maybe_changed=("/b\\c.py",),
    )
    found = Running(Target("/v/bin/python", "/v\udcff", ("/v\\s",), None), (process,))
    out = json.loads(format_running(found).encode("utf-8"))
    assert out["environment"] == {"prefix": "/v\\xff", "site_packages": ["/v\\\\s"]}
    p = out["processes"][0]
    assert p["command"] == "py \\xfe" and p["replaced_extensions"] == ["/a\\xff.so"]
    assert p["maybe_changed"] == ["/b\\\\c.py"]


# --- SARIF and Prometheus ----------------------------------------------------------------------------------


def _validate_sarif(text: str) -> dict[str, Any]:
    import jsonschema

    schema = json.loads((Path(__file__).parent / "data/sarif-schema-2.1.0.json").read_text())
    doc: dict[str, Any] = json.loads(text)
    jsonschema.validate(doc, schema, cls=jsonschema.Draft4Validator)
    return doc


def test_sarif_uris_are_percent_encoded_bytes(hostile: Env) -> None:
    code, out, err = _run("scan", "--site-packages", str(hostile.site), "--format", "sarif")
    assert code == 1, err
    doc = _validate_sarif(out)
    _assert_no_lone_surrogate(doc)
    run = doc["runs"][0]
    base = run["originalUriBaseIds"]["SITE_PACKAGES"]["uri"]
    assert base.startswith("file://") and _URI_PATH.fullmatch(base[len("file://") :])
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]]
    assert all(_URI_PATH.fullmatch(u) for u in uris), uris
    decoded = {unquote_to_bytes(u) for u in uris}
    assert {b"minillm/" + raw for raw in HOSTILE.values()} <= decoded
    prints = [r["partialFingerprints"]["patchguardFinding/v1"] for r in run["results"]]
    assert len(set(prints)) == len(prints)  # the look-alikes too


def test_sarif_absolute_uris_round_trip() -> None:
    name = "/srv/bin/run me%#?\udcff"
    finding = Finding(
        kind=Kind.UNEXPECTED, severity=Severity.MINOR, rule=RuleId.UNEXPECTED_FILE, path=name, message="m"
    )
    report = Report(Environment("3", "/srv", ("/srv/site packages",)), (), 1, (finding,))
    doc = _validate_sarif(format_sarif(report))
    location = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location["uri"].startswith("file:///") and "uriBaseId" not in location
    assert unquote_to_bytes(location["uri"][len("file://") :]) == os.fsencode(name)
    assert doc["runs"][0]["originalUriBaseIds"]["SITE_PACKAGES"]["uri"] == "file:///srv/site%20packages/"


def test_prometheus_output_is_utf8_with_escaped_labels(hostile: Env, promtool: str) -> None:
    import subprocess

    code, out, _ = _run("scan", "--site-packages", str(hostile.site), "--format", "prometheus")
    assert code == 1 and "patchguard_findings" in out
    report = Report(Environment("3", "/v", ("/v/s",)), (), 0, ())
    names = ["glm5\udcff", 'a"b\\c\nd', "plain"]
    text = format_prometheus(report, applied_sets=names)
    text.encode("utf-8")
    for doc in (out, text):  # hostile names through Prometheus' own parser
        checked = subprocess.run([promtool, "check", "metrics"], input=doc, capture_output=True, text=True)
        assert checked.returncode == 0, (checked.stdout, checked.stderr)
    labels = re.findall(r'^patchguard_set_applied\{set="((?:[^"\\]|\\.)*)"\} 1$', text, re.MULTILINE)
    assert sorted(from_json_name(_unescape_label(v)) for v in labels) == sorted(names)
    assert 'set="plain"' in text


def _unescape_label(value: str) -> str:
    """A label value as a Prometheus parser reads it."""
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), value)


# --- properties --------------------------------------------------------------------------------------------

_ANY_NAME = st.one_of(
    st.text(),
    st.binary().map(os.fsdecode),  # what a directory listing gives: undecodable bytes as surrogates
    st.text(st.characters(exclude_categories=()) | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)),
    st.text(st.sampled_from(["\\", "x", "f", "u", "\udcff", "\n", "\x1b", "\u202e", "\x85", "0"])),
)


@settings(max_examples=500, deadline=None)
@given(_ANY_NAME)
def test_any_name_is_safe_on_a_terminal(name: str) -> None:
    shown = for_terminal(name)
    assert "\n" not in shown and _RAW_CONTROL.search(shown) is None
    shown.encode("utf-8")
    printable(name).encode("utf-8")  # the text fields' guard never fails either
    if "\n" not in name and not _RAW_CONTROL.search(name):
        assert shown == name  # what needs no escape is left as it is


@settings(max_examples=500, deadline=None)
@given(_ANY_NAME, _ANY_NAME)
def test_the_json_name_encoding_is_injective_and_valid_utf8(name: str, other: str) -> None:
    encoded = json_name(name)
    encoded.encode("utf-8")
    assert from_json_name(encoded) == name
    if "\\" not in name and not re.search("[\ud800-\udfff]", name):
        assert encoded == name
    if name != other:
        assert json_name(other) != encoded


@settings(max_examples=500, deadline=None)
@given(st.binary())
def test_sarif_uris_give_back_the_bytes(raw: bytes) -> None:
    uri = uri_path(os.fsdecode(raw))
    assert _URI_PATH.fullmatch(uri)
    assert unquote_to_bytes(uri) == raw


@settings(max_examples=300, deadline=None)
@given(_ANY_NAME)
def test_any_name_gives_a_valid_uri(name: str) -> None:
    assert _URI_PATH.fullmatch(uri_path(name))


@settings(max_examples=200, deadline=None)
@given(_ANY_NAME)
def test_prometheus_labels_round_trip(name: str) -> None:
    report = Report(Environment("3", "/v", ("/v/s",)), (), 0, ())
    text = format_prometheus(report, applied_sets=[name])
    text.encode("utf-8")
    (line,) = [line for line in text.split("\n") if line.startswith("patchguard_set_applied{")]
    value = line[len('patchguard_set_applied{set="') : -len('"} 1')]
    assert from_json_name(_unescape_label(value)) == name


def test_ordinary_names_are_unchanged(env: Env) -> None:
    (env.site / "minillm" / "models" / "mla.py").write_text("x = 1\n")
    from patchguard import scan

    report = scan(site_packages=[str(env.site)])
    assert "minillm/models/mla.py" in format_table(report)
    assert json_name("minillm/models/mla.py") == "minillm/models/mla.py"
    assert uri_path("minillm/models/mla.py") == "minillm/models/mla.py"
    assert for_terminal("é · → 中 😀") == "é · → 中 😀"
