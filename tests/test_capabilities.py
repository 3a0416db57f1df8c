"""Detection by capability (issue 23): what a change does, not how it is spelled — process-wide switches,
handlers that swallow by what they do, checks neutralised without being deleted."""

from __future__ import annotations

import pytest

from patchguard.analysis import CodeChange, analyse

HANDLER = (
    "        except RuntimeError as exc:\n"
    '            logger.error("forward failed: %s", exc)\n'
    "            raise\n"
)
PRISTINE = """import logging
import torch
from unittest import mock

logger = logging.getLogger(__name__)


class Runner:
    def execute_model(self, batch):
        assert batch.size > 0, "empty batch"
        if batch.tokens.dim() != 2:
            raise ValueError("bad rank")
        try:
            out = self.model(batch)
        except RuntimeError as exc:
            logger.error("forward failed: %s", exc)
            raise
        return out
"""


def _found(after: str) -> list[tuple[str, str, int]]:
    change = CodeChange("runner.py", PRISTINE.encode(), after.encode(), "miniengine", "1.0")
    return [(f.rule, f.severity.label, f.line or 0) for f in analyse(change) if f.rule != "functional-change"]


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), start=1) if needle in line)


@pytest.mark.parametrize(
    "switch",
    [
        "torch.autograd.set_detect_anomaly(True)",
        "torch.use_deterministic_algorithms(True)",
        "torch.backends.cudnn.benchmark = False",
        "logging.getLogger().setLevel(logging.DEBUG)",
        'mock.patch("torch.distributed.barrier").start()',
        "import sys; sys.settrace(lambda *a: None)",
        "torch.manual_seed(0)",  # the random state every sampler of the process draws from
    ],
)
def test_a_process_wide_switch_is_its_own_finding(switch: str) -> None:
    after = PRISTINE.replace("        try:\n", f"        {switch}\n        try:\n", 1)
    assert ("global-switch", "moderate", _line(after, switch.split(";")[-1].strip())) in _found(after)


@pytest.mark.parametrize(
    "benign",
    ["logger.setLevel(logging.WARNING)", "torch.Generator().manual_seed(0)", 'patcher = mock.patch("x.y")'],
)
def test_switch_look_alikes_are_not_switches(benign: str) -> None:
    after = PRISTINE.replace("        try:\n", f"        {benign}\n        try:\n", 1)
    assert not [f for f in _found(after) if f[0] == "global-switch"]


@pytest.mark.parametrize(
    "handler",
    [
        "        except Exception:\n            return None\n",
        "        except BaseException:\n            pass\n",
        "        except (ValueError, Exception) as exc:\n"
        "            logger.debug(exc)\n            return None\n",
        "        except:\n            ...\n",
        # logged and let go: every error, not only the one it re-raised, now stops here ("log and continue";
        # it was read as handling until the twentieth blind batch)
        "        except Exception as exc:\n"
        '            logger.error("failed: %s", exc)\n            return None\n',
    ],
)
def test_a_broad_handler_that_lets_the_error_go_swallows_it(handler: str) -> None:
    after = PRISTINE.replace(HANDLER, handler)
    assert ("swallowed-exception", "moderate", _line(after, "except")) in _found(after)


@pytest.mark.parametrize(
    "handler",
    [
        "        except Exception:\n            logger.warning('retrying')\n            raise\n",
        "        except ValueError:\n            return None\n",
    ],
)
def test_a_handler_that_handles_is_not_swallowing(handler: str) -> None:
    after = PRISTINE.replace(HANDLER, handler)
    assert not [f for f in _found(after) if f[0] == "swallowed-exception"]


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ('assert batch.size > 0, "empty batch"', 'assert batch.size > 0 or True, "empty batch"', "or True"),
        ("if batch.tokens.dim() != 2:", "if batch.tokens.dim() != 2 and False:", "and False"),
        (
            "if batch.tokens.dim() != 2:",
            "return self.model(batch)\n        if batch.tokens.dim() != 2:",
            "return",
        ),
    ],
)
def test_a_neutralised_check_is_a_removed_check(old: str, new: str, where: str) -> None:
    after = PRISTINE.replace(old, new, 1)
    assert ("removed-check", "moderate", _line(after, where)) in _found(after)


def test_a_strengthened_check_is_not_removed() -> None:
    after = PRISTINE.replace('assert batch.size > 0, "empty batch"', 'assert batch.size > 1, "tiny"')
    assert not [f for f in _found(after) if f[0] == "removed-check"]


def test_every_family_names_a_rule_of_the_rulebook() -> None:
    from patchguard.analysis.families import FAMILIES
    from patchguard.rulebook import RULES

    assert {f.rule for f in FAMILIES} <= set(RULES)
    members = [c for f in FAMILIES for c in f.calls]
    assert len(members) == len(set(members)), "a call target belongs to one family"


@pytest.mark.parametrize(
    ("imports", "call", "rule"),
    [
        ("import torch", 'torch.serialization.save(batch, "/tmp/b.pt")', "tensor-dump"),
        ("import numpy as np", 'np.lib.npyio.save("/tmp/x.npy", batch)', "tensor-dump"),
        ("import pickle", 'pickle.Pickler(open("/tmp/p", "wb")).dump(batch)', "tensor-dump"),
        ("import wandb", "wandb.log({'hidden': batch})", "network"),
        ("from torch.utils.tensorboard import SummaryWriter", "SummaryWriter('/tmp/tb')", "tensor-dump"),
        ("import zmq", "zmq.Context().socket(zmq.PUSH)", "network"),
        ("import ctypes", 'ctypes.CDLL("/tmp/libhack.so")', "dynamic-exec"),
        ("import rich", "rich.print(batch)", "print"),
        ("import sys", "sys.__stdout__.write(str(batch))", "print"),
        ("import signal", "signal.pause()", "process-exit"),  # a hang: as bad as an exit
        ("import debugpy", "debugpy.configure(python='/usr/bin/python')", "debugger"),
        ("import sh", "sh.nvidia_smi()", "subprocess"),
    ],
)
def test_a_family_is_its_modules_not_a_closed_list(imports: str, call: str, rule: str) -> None:
    after = PRISTINE.replace("import logging\n", f"import logging\n{imports}\n", 1).replace(
        "        try:\n", f"        {call}\n        try:\n", 1
    )
    assert rule in {r for r, _s, n in _found(after) if n == _line(after, f"        {call}")}


@pytest.mark.parametrize(
    "call", ['__import__("pickle").dump(batch, fh)', 'importlib.import_module("torch").save(batch, "/tmp/b")']
)
def test_a_module_imported_by_name_is_resolved(call: str) -> None:
    after = PRISTINE.replace("import logging\n", "import importlib\nimport logging\n", 1).replace(
        "        try:\n", f"        {call}\n        try:\n", 1
    )
    assert ("tensor-dump", "high", _line(after, call)) in _found(after)


IO_HELPER = """import time
import urllib.request


def fetch(url, attempts=5):
    for attempt in range(attempts):
        try:
            return urllib.request.urlopen(url, timeout=10).read()
        except OSError:
            pass
    raise RuntimeError(url)


if __name__ == "__main__":
    print(fetch("http://localhost:8000/health"))
"""


def _io_found(after: str) -> list[tuple[str, str, int]]:
    change = CodeChange("io.py", IO_HELPER.encode(), after.encode(), "miniengine", "1.0")
    return [(f.rule, f.severity.label, f.line or 0) for f in analyse(change)]


def test_a_backoff_in_a_retry_loop_is_minor() -> None:
    after = IO_HELPER.replace("            pass\n", "            time.sleep(2 ** attempt)\n")
    assert ("sleep", "minor", _line(after, "time.sleep")) in _io_found(after)
    hot = after.replace("def fetch(", "def forward(").replace("fetch(", "forward(")
    assert ("sleep", "moderate", _line(hot, "time.sleep")) in _io_found(hot)


def test_a_main_block_is_not_library_code() -> None:
    after = IO_HELPER.replace(
        '    print(fetch("http://localhost:8000/health"))\n',
        '    import pdb; pdb.set_trace()\n    print(fetch("http://localhost:8000/health"))\n',
    )
    assert ("debugger", "minor", _line(after, "pdb.set_trace")) in _io_found(after)
    library = after.replace('if __name__ == "__main__":', "if DEBUG_FETCH:")
    assert ("debugger", "high", _line(library, "pdb.set_trace")) in _io_found(library)


@pytest.mark.parametrize("call", ['ctypes.CDLL("libcuda.so.1")', "ctypes.CDLL(None)", "ctypes.CDLL(name)"])
def test_a_system_library_by_name_is_not_foreign_code(call: str) -> None:
    after = PRISTINE.replace("import logging\n", "import ctypes\nimport logging\n", 1).replace(
        "        try:\n", f"        name = 'libnuma.so'\n        {call}\n        try:\n", 1
    )
    assert not [f for f in _found(after) if f[0] == "dynamic-exec"]


FORWARD = """import torch
from torch import nn


class Attention(nn.Module):
    def forward(self, hidden: torch.Tensor, positions: torch.Tensor, meta=None) -> torch.Tensor:
        scores = torch.matmul(hidden, hidden.transpose(-1, -2))
        probs = scores.softmax(dim=-1)
        out = probs @ hidden
        return out
"""


def _forward_found(after: str) -> list[tuple[str, str, int]]:
    change = CodeChange("attn.py", FORWARD.encode(), after.encode(), "miniengine", "1.0")
    return [(f.rule, f.severity.label, f.line or 0) for f in analyse(change)]


@pytest.mark.parametrize(
    "line",
    [
        "if probs.isnan().any():\n            raise RuntimeError('nan')",
        "if scores.max() > 1e4:\n            scores = scores.clamp(max=1e4)",
        "if positions:\n            pass",
        "n = int(positions[-1])",
        "flag = bool(probs.sum())",
        "host = probs.to(torch.device('cpu'))",
        "host = probs.to('cpu', non_blocking=False)",
        "same = torch.equal(probs, scores)",
    ],
)
def test_a_tensor_read_on_the_host_in_a_forward_is_a_sync(line: str) -> None:
    first = line.splitlines()[0]
    after = FORWARD.replace(
        "        out = probs @ hidden\n", f"        {line}\n        out = probs @ hidden\n"
    )
    assert ("device-sync", "moderate", _line(after, first)) in _forward_found(after)


@pytest.mark.parametrize(
    "line",
    [
        "if hidden.shape[0] == 5:\n            pass",
        "if positions is None:\n            pass",
        "if meta:\n            pass",
        "n = int(hidden.size(0))",
        "if self.training:\n            pass",
        "ids = meta.sample(probs).to('cuda')\n        if ids:\n            pass",  # a device: no dtype
        "ids = meta.sample(probs).astype('int64')\n        if (ids < 0).any():\n            pass",  # numpy
        # a stream made to wait on the device: the host goes on at once (torch.cuda.Stream's docs)
        "torch.cuda.current_stream().wait_event(self.ready)",
        "torch.cuda.current_stream().wait_stream(self.copy_stream)",
        "self.ready.wait(torch.cuda.current_stream())",
    ],
)
def test_host_side_metadata_is_no_sync(line: str) -> None:
    after = FORWARD.replace(
        "        out = probs @ hidden\n", f"        {line}\n        out = probs @ hidden\n"
    )
    assert not [f for f in _forward_found(after) if f[0] == "device-sync"]


@pytest.mark.parametrize(
    ("made", "test"),
    [
        ("ids = meta.sample(probs).to(torch.int64)", "if (ids < 0).any():"),
        ("ids = meta.sample(probs).to(hidden.device, dtype=torch.long)", "if ids.sum() > 0:"),
        ("mask = meta.pick(probs).masked_fill(probs > 0, 0)", "if mask.any():"),
    ],
)
def test_what_an_unknown_call_returns_is_a_tensor_once_a_tensor_only_method_converts_it(
    made: str, test: str
) -> None:
    after = FORWARD.replace(
        "        out = probs @ hidden\n",
        f"        {made}\n        {test}\n            pass\n        out = probs @ hidden\n",
    )
    assert ("device-sync", "moderate", _line(after, test)) in _forward_found(after)


CALLS = """import torch


class Block:
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self._mix(x)
        if x.shape[0] == 0:
            self._idle()
        return y

    def _mix(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    def _idle(self) -> None:
        return None

    def load(self) -> None:
        return None
"""


def test_what_a_forward_calls_every_step_is_hot_too() -> None:
    def found(after: str) -> list[tuple[str, str, str]]:
        change = CodeChange("block.py", CALLS.encode(), after.encode(), "miniengine", "1.0")
        return [(f.rule, f.function or "", f.message) for f in analyse(change) if f.rule == "device-sync"]

    mixed = CALLS.replace("        return x * 2\n", "        n = x.sum().item()\n        return x * 2\n")
    assert [(r, fn) for r, fn, _m in found(mixed)] == [("device-sync", "Block._mix")]
    assert "called from Block.forward" in found(mixed)[0][2]
    idle = CALLS.replace(
        "    def _idle(self) -> None:\n        return None\n",
        "    def _idle(self) -> None:\n        t = torch.ones(1)\n"
        "        print(t.item())\n        return None\n",
    )
    assert not found(idle)  # called only when the batch is empty: not every step's
    loading = CALLS.replace(
        "    def load(self) -> None:\n        return None\n",
        "    def load(self) -> None:\n        t = torch.ones(1)\n        t.item()\n        return None\n",
    )
    assert not found(loading)


def test_a_switch_made_for_one_block_is_undone_with_it() -> None:
    scoped = "with torch.set_grad_enabled(False):\n            pass"
    after = PRISTINE.replace("        try:\n", f"        {scoped}\n        try:\n", 1)
    assert not [f for f in _found(after) if f[0] == "global-switch"]


KERNELS = """import torch


def merge_state(v_a: torch.Tensor, s_a: torch.Tensor, v_b: torch.Tensor, s_b: torch.Tensor):
    out = torch.empty_like(v_a)
    return out


def save_state(state: torch.Tensor, path: str) -> None:
    torch.save(state, path)


def describe(n: int) -> str:
    return str(n)
"""


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ("    if bool(torch.isneginf(s_a).all()):\n        raise RuntimeError('empty')\n", "moderate"),
        ("    peak = int(v_b.max())\n", "moderate"),
        ("    ids = s_b.cpu().tolist()\n", "moderate"),
    ],
)
def test_a_device_sync_where_tensors_are_computed_on_whatever_the_function_is_called(
    edit: str, expected: str
) -> None:
    """The device path by role: a function handed tensors to compute on (flashinfer's ``merge_state``, a
    communicator's ``all_reduce``) is where reading one back stalls the device — no list of names needed;
    a function whose role is storage (``save_state``) or that holds no tensor is not."""
    after = KERNELS.replace(
        "    out = torch.empty_like(v_a)\n", "    out = torch.empty_like(v_a)\n" + edit, 1
    )
    change = CodeChange("kern.py", KERNELS.encode(), after.encode(), "kern", "1.0")
    found = {(f.rule, f.severity.label) for f in analyse(change)}
    assert ("device-sync", expected) in found, found
    elsewhere = KERNELS.replace(
        "    torch.save(state, path)\n", "    torch.save(state, path)\n    n = state.sum().item()\n"
    )
    change = CodeChange("kern.py", KERNELS.encode(), elsewhere.encode(), "kern", "1.0")
    assert "device-sync" not in {f.rule for f in analyse(change)}


def test_code_under_while_false_is_unreachable() -> None:
    after = KERNELS.replace(
        "    out = torch.empty_like(v_a)\n",
        "    out = torch.empty_like(v_a)\n    while False:\n        print('merge', v_a.shape)\n",
        1,
    )
    change = CodeChange("kern.py", KERNELS.encode(), after.encode(), "kern", "1.0")
    found = [(f.rule, f.severity.label, f.gate.kind.value if f.gate else None) for f in analyse(change)]
    assert found and all(sev == "info" and gate == "dead" for _r, sev, gate in found), found


def test_a_handler_that_sets_a_flag_swallows_the_error() -> None:
    after = KERNELS.replace(
        "    out = torch.empty_like(v_a)\n",
        "    try:\n        out = torch.empty_like(v_a)\n    except Exception:\n        _failed = True\n",
        1,
    )
    change = CodeChange("kern.py", KERNELS.encode(), after.encode(), "kern", "1.0")
    assert "swallowed-exception" in {f.rule for f in analyse(change)}
    handled = after.replace("        _failed = True\n", "        _failed = True\n        raise\n")
    change = CodeChange("kern.py", KERNELS.encode(), handled.encode(), "kern", "1.0")
    assert "swallowed-exception" not in {f.rule for f in analyse(change)}


def test_a_save_method_writing_where_it_is_told_is_doing_its_job() -> None:
    """``torch.save`` of extra metadata in a save method, to the directory its caller gave: minor (the
    method's job); the same call to a literal ``/tmp`` path, or under a debug gate, stays a HIGH dump."""
    extra = '    torch.save({"n": 1}, path + ".meta")\n'
    after = KERNELS.replace("    torch.save(state, path)\n", "    torch.save(state, path)\n" + extra, 1)
    change = CodeChange("kern.py", KERNELS.encode(), after.encode(), "kern", "1.0")
    assert ("tensor-dump", "minor") in {(f.rule, f.severity.label) for f in analyse(change)}
    for dump in (
        '    torch.save(state, "/tmp/state.pt")\n',
        '    if state.shape[0] == 5:\n        torch.save(state, path + ".dbg")\n',
    ):
        after = KERNELS.replace("    torch.save(state, path)\n", "    torch.save(state, path)\n" + dump, 1)
        change = CodeChange("kern.py", KERNELS.encode(), after.encode(), "kern", "1.0")
        assert ("tensor-dump", "high") in {(f.rule, f.severity.label) for f in analyse(change)}, dump
