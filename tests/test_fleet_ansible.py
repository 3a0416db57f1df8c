"""``contrib/ansible/fleet.yml``, run for real: ansible-core from the package index (the test extras), an
inventory of local hosts (``ansible_connection=local``), each its own virtual environment with the minillm
wheel built here and installed; one host edited by hand so that it drifts.

Ansible keeps everything it writes under the test's directory (``ANSIBLE_HOME``, its local and remote
temporary directories, an empty configuration file): nothing of this machine's Ansible setup is read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import REPO, Env, make_venv
from .test_deploy import MLA, dump_in_mla

PLAYBOOK = REPO / "contrib" / "ansible" / "fleet.yml"
BIN = Path(sys.executable).parent
HOSTS = ("gpu-01", "gpu-02", "gpu-03")


def _ansible_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "ansible"
    for d in ("home", "local-tmp", "remote-tmp"):
        (home / d).mkdir(parents=True, exist_ok=True)
    config = home / "ansible.cfg"
    config.write_text("[defaults]\n")
    return {
        **os.environ,
        "ANSIBLE_HOME": str(home / "home"),
        "ANSIBLE_LOCAL_TEMP": str(home / "local-tmp"),
        "ANSIBLE_REMOTE_TEMP": str(home / "remote-tmp"),
        "ANSIBLE_CONFIG": str(config),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_HOST_KEY_CHECKING": "0",
        "LC_ALL": "C.UTF-8",  # ansible-core refuses to run in a locale that is not UTF-8
        "TMPDIR": str(home / "remote-tmp"),  # where the playbook's tempfile task puts each host's lock
    }


def _inventory(tmp_path: Path, hosts: dict[str, Env]) -> Path:
    exe = BIN / "patchguard"
    assert exe.exists(), "the test environment has no patchguard console script"
    lines = ["[gpus]"]
    lines += [f"{name} patchguard_python={env.prefix / 'bin' / 'python'}" for name, env in hosts.items()]
    lines += [
        "",
        "[all:vars]",
        "ansible_connection=local",
        f"ansible_python_interpreter={sys.executable}",
        f"patchguard={exe}",
        f"patchguard_controller={exe}",
        f"fleet_dir={tmp_path / 'fleet'}",
    ]
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("\n".join(lines) + "\n")
    return inventory


def _play(tmp_path: Path, inventory: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), str(PLAYBOOK), *more],
        capture_output=True,
        text=True,
        env=_ansible_env(tmp_path),
        cwd=tmp_path,
        timeout=600,
        check=False,
    )


@pytest.mark.slow  # ansible-playbook, three hosts: seconds
def test_the_play_fails_naming_the_drifting_host_and_passes_when_all_alike(
    tmp_path: Path, minillm_wheel: Path
) -> None:
    hosts: dict[str, Env] = {}
    for name in HOSTS:
        env = make_venv(tmp_path / "hosts" / name)
        env.install(minillm_wheel)
        hosts[name] = env
    pristine = (hosts["gpu-02"].site / MLA).read_text()
    dump_in_mla(hosts["gpu-02"])  # the hand edit: a torch.save in the forward
    inventory = _inventory(tmp_path, hosts)

    proc = _play(tmp_path, inventory)
    out = proc.stdout
    assert proc.returncode == 2, out + proc.stderr  # a host failed
    recap = {line.split()[0]: line for line in out.split("PLAY RECAP")[1].splitlines() if ":" in line}
    assert "failed=1" in recap["gpu-02"], recap
    assert "failed=0" in recap["gpu-01"] and "failed=0" in recap["gpu-03"], recap
    assert "fatal: [gpu-02]: FAILED!" in out and "gpu-02: its environment is not the reference's" in out
    assert '"REFERENCE  gpu-01 (' in out and '"DIFFERS    gpu-02 (' in out
    assert f"file {MLA} (minillm): modified " in out
    # The documents the play fetched, one per host, named by the inventory.
    fleet = tmp_path / "fleet"
    assert sorted(p.name for p in fleet.iterdir()) == [f"{h}.json" for h in HOSTS]
    doc = json.loads((fleet / "gpu-02.json").read_text())
    assert doc["schema"] == "patchguard.lock/1" and MLA in doc["distributions"]["minillm"]["changes"]
    assert not list((tmp_path / "ansible" / "remote-tmp").glob("*.json"))  # each host's copy removed

    (hosts["gpu-02"].site / MLA).write_text(pristine)  # put back by hand
    proc = _play(tmp_path, inventory)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 hosts, 1 environment: all alike" in proc.stdout
    assert "failed=0" in proc.stdout and "failed=1" not in proc.stdout


@pytest.mark.slow  # ansible-playbook, three hosts: seconds
def test_the_play_fails_exactly_the_host_fleet_names_whatever_its_name(
    tmp_path: Path, minillm_wheel: Path
) -> None:
    """A host named like a path (``rack1/gpu-03``) drifts: the play fails that host and no other, under
    ``--check`` too; a host named ``../../x`` writes its lock inside fleet_dir like every other."""
    names = ("rack1/gpu-03", "../../x", "gpu-01")
    hosts: dict[str, Env] = {}
    for n, name in enumerate(names):
        env = make_venv(tmp_path / "hosts" / f"h{n}")
        env.install(minillm_wheel)
        hosts[name] = env
    dump_in_mla(hosts["rack1/gpu-03"])
    hosts["extra"] = make_venv(tmp_path / "hosts" / "h3")
    hosts["extra"].install(minillm_wheel)
    inventory = _inventory(tmp_path, hosts)
    for check in (False, True):
        proc = _play(tmp_path, inventory, *(["--check"] if check else []))
        out = proc.stdout
        assert proc.returncode == 2, out + proc.stderr
        recap = {line.split()[0]: line for line in out.split("PLAY RECAP")[1].splitlines() if ":" in line}
        assert "failed=1" in recap["rack1/gpu-03"], recap
        assert all("failed=0" in recap[h] for h in ("../../x", "gpu-01", "extra")), recap
        fleet = tmp_path / "fleet"
        assert sorted(p.name for p in fleet.iterdir()) == sorted(
            ["rack1%2Fgpu-03.json", "..%2F..%2Fx.json", "gpu-01.json", "extra.json"]
        )
        assert not (tmp_path / "x.json").exists() and not (tmp_path.parent / "x.json").exists()
