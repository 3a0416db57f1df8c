"""Pristine sources and diffs: wheelhouses, pip and uv caches, download, build proof, editable installs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

import patchguard
from patchguard import Kind, Severity
from patchguard.cli import main
from patchguard.diffs import parse_patch, unified_diff

from .helpers import Env, build_wheel, cli, minillm_files

MLA = "minillm/models/mla.py"
DEBUG_BLOCK = "        if num_tokens == 5:\n            torch.save(hidden, '/tmp/mla_in.pt')\n"


def edit_like_a_person(env: Env) -> None:
    mla = env.site / MLA
    text = mla.read_text()
    assert "num_tokens, _ = hidden.shape\n" in text
    mla.write_text(
        text.replace("num_tokens, _ = hidden.shape\n", "num_tokens, _ = hidden.shape\n" + DEBUG_BLOCK, 1)
    )
    (env.site / "minillm/platforms/cuda.py").unlink()
    (env.site / "minillm/models/notes.txt").write_text("tried sm120\n")
    (env.site / "minillm/models/dump.bin").write_bytes(b"\x00\x01\x02")


def wheelhouse(minillm_wheel: Path, tmp_path: Path) -> Path:
    house = tmp_path / "wheelhouse"
    house.mkdir(exist_ok=True)
    shutil.copy(minillm_wheel, house)
    return house


def test_diff_shows_exact_edits_deletions_and_additions(
    env: Env, minillm_wheel: Path, tmp_path: Path
) -> None:
    edit_like_a_person(env)
    diffs = patchguard.diff(
        ["minillm"],
        site_packages=[str(env.site)],
        wheelhouse=[str(wheelhouse(minillm_wheel, tmp_path))],
        offline=True,
    )
    by_path = {d.path: d for d in diffs}
    assert set(by_path) == {
        MLA,
        "minillm/platforms/cuda.py",
        "minillm/models/notes.txt",
        "minillm/models/dump.bin",
    }
    text = unified_diff(diffs)
    patch = parse_patch(text)
    files = {p.path: p for p in patch}
    mla = files[MLA]
    added = [line.value for h in mla for line in h if line.is_added]
    assert added == DEBUG_BLOCK.splitlines(keepends=True)
    assert not [line for h in mla for line in h if line.is_removed]
    assert files["minillm/platforms/cuda.py"].is_removed_file
    assert files["minillm/models/notes.txt"].is_added_file
    assert "Binary files /dev/null and b/minillm/models/dump.bin differ" in text
    # git accepts it: reversing it on the installed tree is exactly a restore of the text files.
    if shutil.which("git"):
        text_only = unified_diff([d for d in diffs if not d.binary])
        proc = subprocess.run(
            ["git", "apply", "-R", "--check", "-"],
            input=text_only,
            text=True,
            cwd=env.site,
            capture_output=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr


def test_diff_json_carries_hunks(env: Env, minillm_wheel: Path, tmp_path: Path) -> None:
    edit_like_a_person(env)
    result = CliRunner().invoke(
        main,
        [
            "diff",
            "minillm",
            "--site-packages",
            str(env.site),
            "--path",
            "*/mla.py",
            "--wheelhouse",
            str(wheelhouse(minillm_wheel, tmp_path)),
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (f,) = doc["files"]
    assert (f["path"], f["status"], f["binary"]) == (MLA, "modified", False)
    (hunk,) = f["hunks"]
    assert hunk["target_length"] - hunk["source_length"] == 2
    assert "+        if num_tokens == 5:" in hunk["lines"]


def test_second_diff_needs_no_wheel(env: Env, minillm_wheel: Path, tmp_path: Path) -> None:
    edit_like_a_person(env)
    house = wheelhouse(minillm_wheel, tmp_path)
    first = patchguard.diff(["minillm"], site_packages=[str(env.site)], wheelhouse=[str(house)], offline=True)
    shutil.rmtree(house)
    second = patchguard.diff(["minillm"], site_packages=[str(env.site)], offline=True)
    assert unified_diff(second) == unified_diff(first)


def test_no_wheel_anywhere_is_one_clear_line_exit_2(env: Env) -> None:
    edit_like_a_person(env)
    result = CliRunner().invoke(main, ["diff", "minillm", "--site-packages", str(env.site), "--offline"])
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert "no wheel of minillm 0.4.0 (this build) found; looked in: pip cache" in line
    assert "uv cache" in line and "indexes: not asked (--offline)" in line
    assert "drop --offline" in line and "--wheelhouse" in line


def test_a_different_build_is_rejected_and_the_right_one_used(
    env: Env, minillm_wheel: Path, tmp_path: Path
) -> None:
    edit_like_a_person(env)
    other = minillm_files()
    other["minillm/layers/linear.py"] = b"# built for another GPU\n" + other["minillm/layers/linear.py"]
    wrong = build_wheel(tmp_path / "wrong", "minillm", "0.4.0", other, tag="py3-none-any")
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(wrong, house / "minillm-0.4.0-py3-none-any.whl")
    result = CliRunner().invoke(
        main, ["diff", "minillm", "--site-packages", str(env.site), "--offline", "--wheelhouse", str(house)]
    )
    assert result.exit_code == 2
    assert "rejected" in result.stderr and "a different build: minillm/layers/linear.py" in result.stderr
    right = tmp_path / "right"
    right.mkdir()
    shutil.copy(minillm_wheel, right)
    diffs = patchguard.diff(
        ["minillm"], site_packages=[str(env.site)], offline=True, wheelhouse=[str(house), str(right)]
    )
    assert MLA in {d.path for d in diffs}


def test_truncated_wheel_is_rejected_with_the_reason(env: Env, minillm_wheel: Path, tmp_path: Path) -> None:
    edit_like_a_person(env)
    house = tmp_path / "house"
    house.mkdir()
    data = minillm_wheel.read_bytes()
    (house / minillm_wheel.name).write_bytes(data[: len(data) // 2])
    result = CliRunner().invoke(
        main, ["diff", "minillm", "--site-packages", str(env.site), "--offline", "--wheelhouse", str(house)]
    )
    assert result.exit_code == 2
    assert "rejected" in result.stderr and "unreadable (BadZipFile" in result.stderr


def test_pip_cache_built_wheels_and_http_bodies(env: Env, minillm_wheel: Path, tmp_path: Path) -> None:
    edit_like_a_person(env)
    built = tmp_path / "pip-cache/wheels/3f/9a/0c"
    built.mkdir(parents=True)
    shutil.copy(minillm_wheel, built)
    assert MLA in {d.path for d in patchguard.diff(["minillm"], site_packages=[str(env.site)], offline=True)}
    shutil.rmtree(tmp_path / "pip-cache/wheels")
    shutil.rmtree(tmp_path / "pg-cache/pristine")  # so the wheel must be found again
    body = tmp_path / "pip-cache/http-v2/a/b/c/d/e"
    body.mkdir(parents=True)
    shutil.copy(minillm_wheel, body / "4f2c0a7d1e.body")
    (body / "4f2c0a7d1e").write_bytes(b"not a wheel: the response metadata")
    assert MLA in {d.path for d in patchguard.diff(["minillm"], site_packages=[str(env.site)], offline=True)}


def test_the_http_cache_of_pip_before_23_3(env: Env, minillm_wheel: Path, tmp_path: Path) -> None:
    """pip < 23.3 cached whole responses in http/: cachecontrol's "cc=4," + msgpack, body inside. The entry
    is written with the serializer pip itself vendors, as that pip wrote it."""
    import io

    from pip._vendor.cachecontrol.serialize import Serializer
    from pip._vendor.requests import PreparedRequest
    from pip._vendor.urllib3 import HTTPResponse

    edit_like_a_person(env)
    request = PreparedRequest()
    request.prepare(method="GET", url=f"https://files.example.invalid/{minillm_wheel.name}", headers={})
    body = minillm_wheel.read_bytes()
    response = HTTPResponse(
        body=io.BytesIO(body),
        headers={"Content-Type": "binary/octet-stream"},
        status=200,
        preload_content=False,
    )
    entry = tmp_path / "pip-cache/http/7/1/c/e/0/71ce0a5b9d"
    entry.parent.mkdir(parents=True)
    entry.write_bytes(Serializer().dumps(request, response, body))
    assert entry.read_bytes().startswith(b"cc=4,")
    diffs = patchguard.diff(["minillm"], site_packages=[str(env.site)], offline=True)
    assert DEBUG_BLOCK in unified_diff(diffs).replace("+", "")


def _uv_archive(minillm_wheel: Path, tmp_path: Path) -> Path:
    archive = tmp_path / "uv-cache/archive-v0/Xk3pQ0lA1bC2"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(minillm_wheel) as zf:
        zf.extractall(archive)
    return archive


def test_uv_unpacked_archive(env: Env, minillm_wheel: Path, tmp_path: Path) -> None:
    edit_like_a_person(env)
    _uv_archive(minillm_wheel, tmp_path)
    diffs = patchguard.diff(["minillm"], site_packages=[str(env.site)], offline=True)
    assert DEBUG_BLOCK in unified_diff(diffs).replace("+", "")


def _uv_installed_and_edited(minillm_wheel: Path, tmp_path: Path) -> tuple[Path, Env]:
    """minillm installed the way uv does it (mla.py a hard link of uv's unpacked archive), then edited in
    place: the archive's copy is edited too."""
    archive = _uv_archive(minillm_wheel, tmp_path)
    env = Env(tmp_path / "venv")
    env.install(minillm_wheel)
    installed = env.site / MLA
    installed.unlink()
    os.link(archive / MLA, installed)
    with open(installed, "a") as f:
        f.write("print('debug')\n")
    return archive, env


def test_uv_archive_edited_through_a_hard_link_is_not_trusted(tmp_path: Path, minillm_wheel: Path) -> None:
    # uv installs by hard-linking from its archive: an in-place edit changes the archive's copy too.
    _archive, env = _uv_installed_and_edited(minillm_wheel, tmp_path)
    result = CliRunner().invoke(main, ["diff", "minillm", "--site-packages", str(env.site), "--offline"])
    assert result.exit_code == 2
    assert "does not match the installed RECORD" in result.stderr
    assert "(edited through a hard link?)" in result.stderr


def test_an_edited_uv_cache_entry_is_skipped_for_the_next_source_and_named(
    tmp_path: Path, minillm_wheel: Path
) -> None:
    """uv-installed files are hard links of uv's cache: edited in place, the cache holds the edit too. The
    cached copy fails its RECORD hash, the next source (a wheelhouse) is used, and scan and restore say
    that uv's cache must be cleaned."""
    archive, env = _uv_installed_and_edited(minillm_wheel, tmp_path)
    installed = env.site / MLA
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(minillm_wheel, house)
    site = ["--site-packages", str(env.site)]

    report = patchguard.scan(["minillm"], site_packages=[str(env.site)], analyse=False)
    (finding,) = report.findings
    assert "uv cache clean minillm" in finding.message and str(archive / MLA) in finding.message
    code, out, err = cli("diff", "minillm", *site, "--wheelhouse", str(house), "--offline")
    assert code == 0 and "+print('debug')" in out, err
    code, out, err = cli("restore", "minillm", *site, "--wheelhouse", str(house), "--offline")
    assert code == 0, err
    assert "note: minillm/models/mla.py was a hard link of uv's cache" in err
    assert "uv cache clean minillm" in err
    assert installed.read_bytes() == zipfile.ZipFile(minillm_wheel).read(MLA)
    assert (archive / MLA).read_bytes().endswith(b"print('debug')\n")  # uv's copy is uv's to clean
    assert cli("scan", "minillm", *site)[0] == 0


def _simple_index(tmp_path: Path, wheel: Path) -> str:
    project = tmp_path / "index/simple/minillm"
    project.mkdir(parents=True)
    shutil.copy(wheel, project)
    (project / "index.html").write_text(
        f'<html><body><a href="{wheel.name}">{wheel.name}</a></body></html>\n'
    )
    (tmp_path / "index/simple/index.html").write_text(
        '<html><body><a href="minillm/">minillm</a></body></html>\n'
    )
    return (tmp_path / "index/simple").as_uri()


def test_a_file_index_of_the_pip_configuration_is_read_in_place(
    env: Env, minillm_wheel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``file://`` index (a local mirror) is read where it is: nothing is copied into the downloads."""
    edit_like_a_person(env)
    monkeypatch.setenv("PIP_INDEX_URL", _simple_index(tmp_path, minillm_wheel))
    monkeypatch.delenv("PIP_NO_INDEX")
    diffs = patchguard.diff(["minillm"], site_packages=[str(env.site)], paths=["*/mla.py"])
    assert [d.path for d in diffs] == [MLA]
    assert not list((tmp_path / "pg-cache/downloads").glob("*.whl"))


def test_console_script_shebang_is_restored_as_the_installer_wrote_it(tmp_path: Path) -> None:
    env = Env(tmp_path / "venv")
    wheel = build_wheel(
        tmp_path / "w",
        "tools",
        "1.0",
        {"tools/__init__.py": ""},
        scripts={"tool-run": "#!python\nimport tools\nprint('run')\n"},
    )
    env.install(wheel)
    script = env.bin / "tool-run"
    installed = script.read_bytes()
    assert not installed.startswith(b"#!python\n")  # the installer rewrote it
    script.write_bytes(installed + b"import pdb; pdb.set_trace()\n")
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(wheel, house)
    result = patchguard.restore(
        ["tools"], site_packages=[str(env.site)], wheelhouse=[str(house)], offline=True
    )
    assert [a.action for a in result.actions] == ["restore"]
    assert script.read_bytes() == installed
    assert result.after is not None and result.after.findings == ()


def test_verify_record_catches_a_file_edited_with_its_record_row(
    env: Env, minillm_wheel: Path, tmp_path: Path
) -> None:
    import base64
    import hashlib

    mla = env.site / MLA
    new = mla.read_bytes() + b"import os\n"
    mla.write_bytes(new)
    record = env.dist_info("minillm", "0.4.0") / "RECORD"
    digest = base64.urlsafe_b64encode(hashlib.sha256(new).digest()).rstrip(b"=").decode()
    lines = [
        f"{MLA},sha256={digest},{len(new)}" if line.startswith(MLA + ",") else line
        for line in record.read_text().splitlines()
    ]
    (env.site / "minillm/backdoor.py").write_text("import os\n")
    lines.append(
        "minillm/backdoor.py,sha256="
        + base64.urlsafe_b64encode(hashlib.sha256(b"import os\n").digest()).rstrip(b"=").decode()
        + ",10"
    )
    record.write_text("\n".join(lines) + "\n")
    assert patchguard.scan(site_packages=[str(env.site)]).findings == ()  # RECORD agrees with the files
    house = wheelhouse(minillm_wheel, tmp_path)
    report = patchguard.scan(
        site_packages=[str(env.site)], verify_record=True, wheelhouse=[str(house)], offline=True
    )
    found = {f.path: f for f in report.findings}
    assert (found[MLA].rule, found[MLA].severity) == ("record-tampered", Severity.HIGH)
    assert (found["minillm/backdoor.py"].rule, found["minillm/backdoor.py"].kind) == (
        "record-added",
        Kind.UNEXPECTED,
    )
    assert len(found) == 2


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout


def _checkout(tmp_path: Path) -> Path:
    """A git checkout of a small package, one commit."""
    repo = tmp_path / "src"
    (repo / "edpkg").mkdir(parents=True)
    (repo / "edpkg/__init__.py").write_text("VALUE = 1\n")
    (repo / "edpkg/model.py").write_text("def forward(x):\n    return x\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first")
    return repo


def _editable_install(tmp_path: Path, repo: Path) -> Env:
    """``repo`` installed editable (a .pth and a PEP 610 direct_url.json), as pip -e leaves it."""
    env = Env(tmp_path / "venv")
    env.install(build_wheel(tmp_path / "w", "edpkg", "1.0", {"__editable__.edpkg-1.0.pth": f"{repo}\n"}))
    meta = env.dist_info("edpkg", "1.0")
    (meta / "direct_url.json").write_text(json.dumps({"url": repo.as_uri(), "dir_info": {"editable": True}}))
    with open(meta / "RECORD", "a") as f:
        f.write("edpkg-1.0.dist-info/direct_url.json,,\n")
    return env


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_editable_install_against_its_git_checkout(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    (repo / "edpkg/model.py").write_text("def forward(x):\n    return x * 2\n")
    _git(repo, "commit", "-qam", "committed change")
    env = _editable_install(tmp_path, repo)
    (repo / "edpkg/__init__.py").write_text("VALUE = 2\nimport pdb\n")
    (repo / "edpkg/debug_hook.py").write_text("print('hi')\n")

    report = patchguard.scan(["edpkg"], site_packages=[str(env.site)], analyse=False)
    kinds = {(f.kind, os.path.relpath(f.path, repo)) for f in report.findings}
    assert kinds == {(Kind.MODIFIED, "edpkg/__init__.py"), (Kind.UNEXPECTED, "edpkg/debug_hook.py")}
    judged = patchguard.scan(["edpkg"], site_packages=[str(env.site)])  # against the checkout's HEAD
    assert {(f.rule, os.path.relpath(f.path, repo), f.line) for f in judged.findings} == {
        ("functional-change", "edpkg/__init__.py", 1),
        ("unexpected-python", "edpkg/debug_hook.py", None),  # the untracked file itself ...
        ("print", "edpkg/debug_hook.py", 1),  # ... and what its code does
    }
    against_first = patchguard.scan(["edpkg"], site_packages=[str(env.site)], against="HEAD~1", analyse=False)
    assert (Kind.MODIFIED, str(repo / "edpkg/model.py")) in {(f.kind, f.path) for f in against_first.findings}

    text = unified_diff(patchguard.diff(["edpkg"], site_packages=[str(env.site)]))
    assert "diff --git a/edpkg/__init__.py b/edpkg/__init__.py" in text and "+import pdb" in text
    assert "new file mode 100644\n--- /dev/null\n+++ b/edpkg/debug_hook.py" in text


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_checkouts_own_git_filters_and_hooks_never_run(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    marker = tmp_path / "ran"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\necho ran >> {marker}\ncat\n")
    script.chmod(0o755)
    (repo / ".gitattributes").write_text("*.py filter=evil diff=evil\n")
    for key, value in (
        ("filter.evil.clean", str(script)),
        ("filter.evil.smudge", str(script)),
        ("filter.evil.process", str(script)),
        ("diff.evil.textconv", str(script)),
        ("core.fsmonitor", str(script)),
    ):
        _git(repo, "config", key, value)
    hooks = repo / ".git" / "hooks"
    for hook in ("post-index-change", "reference-transaction", "pre-auto-gc"):
        (hooks / hook).write_text(f"#!/bin/sh\necho {hook} >> {marker}\n")
        (hooks / hook).chmod(0o755)
    marker.unlink(missing_ok=True)
    time.sleep(1.1)  # a file git's index thinks racily clean would be re-hashed (and filtered) by git
    (repo / "edpkg/model.py").write_text("def forward(x):\n    breakpoint()\n    return x\n")
    (repo / "edpkg/debug_hook.py").write_text("print('hi')\n")
    (repo / "edpkg/__init__.py").touch()  # same bytes, new mtime: git would re-hash it through the filter

    env = _editable_install(tmp_path, repo)
    report = patchguard.scan(["edpkg"], site_packages=[str(env.site)])
    found = {(f.rule, os.path.relpath(f.path, repo)) for f in report.findings}
    assert ("debugger", "edpkg/model.py") in found and ("unexpected-python", "edpkg/debug_hook.py") in found
    assert not any(path == "edpkg/__init__.py" for _, path in found)  # touched, unchanged
    text = unified_diff(patchguard.diff(["edpkg"], site_packages=[str(env.site)]))
    assert "+    breakpoint()" in text
    code, _, _ = cli("check", "--site-packages", str(env.site))
    assert code in (0, 1)
    assert not marker.exists(), marker.read_text()


def test_vcs_install_is_unverifiable_with_its_commit(env: Env) -> None:
    meta = env.dist_info("minillm", "0.4.0")
    (meta / "direct_url.json").write_text(
        json.dumps(
            {
                "url": "https://git.example.invalid/minillm.git",
                "vcs_info": {"vcs": "git", "commit_id": "0123456789abcdef0123456789abcdef01234567"},
            }
        )
    )
    with open(meta / "RECORD", "a") as record:
        record.write("minillm-0.4.0.dist-info/direct_url.json,,\n")
    (f,) = patchguard.scan(["minillm"], site_packages=[str(env.site)]).findings
    assert (f.kind, f.rule, f.severity) == (Kind.UNVERIFIABLE, "vcs-install", Severity.INFO)
    assert "@0123456789abcdef0123456789abcdef01234567" in f.message


@pytest.mark.parametrize("command", ["diff", "restore", "capture"])
def test_a_path_glob_that_matches_nothing_is_exit_2(env: Env, command: str) -> None:
    edit_like_a_person(env)
    args = {
        "diff": ["diff", "minillm"],
        "restore": ["restore", "minillm"],
        "capture": ["capture", "--set", "x", "minillm"],
    }
    code, out, err = cli(*args[command], "--site-packages", str(env.site), "--path", "*/nomatch.py")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "--path '*/nomatch.py' matches no file" in line
    # A glob that names an installed file that is unchanged is not a mistake: nothing to do.
    if command != "capture":
        code, _out, err = cli(
            *args[command], "--site-packages", str(env.site), "--path", "minillm/__init__.py"
        )
        assert code == 0, err


def test_an_edit_through_uv_hard_links_names_every_environment_sharing_it(
    tmp_path: Path, minillm_wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real uv installs one wheel into three projects' venvs as hard links of its cache: an edit made in
    place in one is live in all three. scan names the other two and the command for each."""
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    run_env = {**os.environ, "UV_LINK_MODE": "hardlink", "UV_NO_CONFIG": "1", "UV_OFFLINE": "1"}
    venvs = [tmp_path / "projects" / p / ".venv" for p in ("serve", "bench", "eval")]
    for venv in venvs:
        subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True, env=run_env)
        subprocess.run(
            [
                uv,
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--python",
                str(venv / "bin/python"),
                str(minillm_wheel),
            ],
            check=True,
            env=run_env,
        )
    site = next((venvs[0] / "lib").glob("python*/site-packages"))
    installed = site / MLA
    assert installed.stat().st_nlink == 4  # uv's cache and three environments
    with open(installed, "a") as f:  # an editor saving in place
        f.write("print('debug')\n")
    monkeypatch.setenv("PATCHGUARD_ENV_ROOTS", str(tmp_path / "elsewhere"))  # only the project's siblings
    report = patchguard.scan(["minillm"], site_packages=[str(site)], analyse=False)
    (finding,) = report.findings
    for other in venvs[1:]:
        assert str(other) in finding.message
        assert f"patchguard restore minillm --python {other / 'bin/python'}" in finding.message
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(minillm_wheel, house)
    code, _, err = cli(
        "restore", "minillm", "--site-packages", str(site), "--wheelhouse", str(house), "--offline"
    )
    assert code == 0 and str(venvs[1]) in err, err
    assert installed.stat().st_nlink == 1
    # the others still hold the edit, as said
    other_site = next((venvs[1] / "lib").glob("python*/site-packages"))
    assert (other_site / MLA).read_bytes().endswith(b"print('debug')\n")
