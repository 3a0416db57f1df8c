"""Meanings (issue 34, the thirteenth blind batch's misses): a collection tested by ``in`` grown by what is
added to it (``SUPPORTED + (x,)``); a number read as a truth value (``hidden % 256``); two things compared
whose comparison changed both ways as facts, read as numbers (``a != b.shape[1]`` → ``>``); a flag for what
may be done given, on one line, a condition that holds in more cases; a no made yes exactly where the code
said no; a lookup that raised on a missing key made to skip it; a call that enforces a limit taken out; the
raise of the case nobody handled given a stand-in (swallowed as well as removed); a bail-out taken out of a
function whose other ``return`` decides something else; a method of a class the file defines replaced from
outside it; an experiment tracker's API; a log line that logs once; a sleep in a loop that counts its way
through work; code added where it cannot run; tensors known by a move to another tensor's device, by the
docstring, and in a loss named for load balancing; a tensor's contents read back on their way into a file;
and a name given an empty list above the line, a list there — each judged on a module of its own, with
look-alikes that must stay quiet, and once end to end on an installed wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/gates.py"
PRISTINE = """\
import dataclasses
import logging
import time

import torch

logger = logging.getLogger(__name__)

_DTYPES = (torch.int32, torch.int64)


class Mlp:
    registry = {}

    def __init__(self, n):
        self.n = n

    def get_quant_config(self, config):
        return config.quant


class Reducer:
    def __init__(self, tms, multinode, max_size):
        self._graph_ok = not tms and not multinode
        self.max_size = max_size
        self.disabled = False

    def should_custom_ar(self, inp) -> bool:
        if self.disabled:
            return False
        inp_size = inp.numel() * inp.element_size()
        if inp_size % 16 != 0:
            return False
        return inp_size <= self.max_size


def check_seqlens(cu_seqlens):
    if cu_seqlens.dtype not in _DTYPES:
        raise ValueError(f"cu_seqlens must be an integer dtype, got {cu_seqlens.dtype}")


def check_sizes(hidden, inter):
    if hidden <= 0 or hidden % 256 or inter <= 0 or inter % 128:
        raise ValueError("hidden must be a multiple of 256 and inter of 128")


def check_vocab(name, vocab, tensor):
    if "embed" in name and vocab is not None and vocab != tensor.shape[1]:
        raise RuntimeError("the embedding must match the vocabulary")


def block_support(device, geometry):
    sup = backend_support(device, geometry)
    return sup


def load(weights, params):
    for name, loaded in weights:
        param = params[name]
        param.loader(param, loaded)


def bind(sock, endpoint):
    if endpoint.startswith("tcp://"):
        restrict_peers(sock)
    sock.bind(endpoint)


def hidden_dim(config, module):
    if module == "q_proj":
        return config.hidden, config.hidden
    elif module == "lm_head":
        return config.hidden, config.vocab
    else:
        raise NotImplementedError("no dims for " + module)


def checked_rank(rank, limit):
    if rank > limit:
        raise ValueError("rank over the limit")
    return rank


def encode(obj):
    to_item = getattr(obj, "item", None)
    if to_item is not None:
        return to_item()
    raise NotImplementedError("cannot encode")


def rearrange(state, num_layers):
    layer = 0
    while layer < num_layers:
        state.move(layer)
        layer += 1


def wait_ready(path):
    while not path.exists():
        state = path.stat()


def finish(x):
    y = x * 2
    return y


def row_norm(q, k):
    d = q.shape[-1]
    if not 0 < d <= 65536 // q.element_size():
        raise ValueError("rows up to 64 KiB")
    return q


def mix(self, x):
    if self._jit_mix_ok and x.is_cuda and x.shape[0] <= 24:
        return fast_mix(x)
    if x.is_cuda and x.shape[1] <= 24:
        return half_mix(x)
    return slow_mix(x)
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_near, _rules, _found = _MODULE.near, _MODULE.rules, _MODULE.found


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # an allow-list grown by concatenation
        ("    if cu_seqlens.dtype not in _DTYPES:\n",
         "    if cu_seqlens.dtype not in _DTYPES + (torch.int16, torch.uint8):\n", "torch.int16"),
        # numbers as truth values, each part weaker
        ("hidden % 256 or inter <= 0 or inter % 128", "hidden % 64 or inter <= 0 or inter % 64",
         "hidden % 64"),
        # compared with each other; read as facts each changed both ways, as numbers one fires less
        ("vocab != tensor.shape[1]", "vocab > tensor.shape[1]", "vocab > tensor"),
        # a flag of what may be done given, on one line, a condition that holds in more cases
        ("        self._graph_ok = not tms and not multinode\n", "        self._graph_ok = not tms\n",
         "self._graph_ok"),
        # a no made yes where the code said no
        ("    return sup\n",
         "    if not sup.served:\n"
         "        sup = dataclasses.replace(sup, served=True, reason=None)\n    return sup\n",
         "if not sup.served"),
        # a lookup that raised, made to skip
        ("        param = params[name]\n",
         "        param = params.get(name)\n        if param is None:\n            continue\n", "params.get"),
        # a limit worked out from what is asked of a value, raised
        ("65536 // q.element_size()", "262144 // q.element_size()", "262144"),
        # the gate of a path kept for what it supports, admitting more
        ("x.is_cuda and x.shape[0] <= 24:", "x.is_cuda and x.shape[0] <= 256:", "shape[0] <= 256"),
    ],
)  # fmt: skip
def test_a_check_let_go(old: str, new: str, needle: str) -> None:
    assert "removed-check" in _near((old, new), needle)


def test_a_bail_out_taken_out_beside_a_return_that_decides_something_else() -> None:
    edit = ("        if inp_size % 16 != 0:\n            return False\n", "")
    assert "removed-check" in _near(edit, "return inp_size <= self.max_size")


def test_a_call_that_enforces_a_limit_taken_out() -> None:
    edit = ('    if endpoint.startswith("tcp://"):\n        restrict_peers(sock)\n', "")
    assert "removed-check" in _near(edit, "sock.bind")


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ('        raise NotImplementedError("no dims for " + module)\n',
         '        logger.warning("no dims for %s", module)\n        return config.hidden, config.hidden\n',
         "no dims for"),
        ('    raise NotImplementedError("cannot encode")\n', "    return repr(obj)\n", "return repr(obj)"),
    ],
)  # fmt: skip
def test_the_unhandled_case_given_a_stand_in_is_swallowed(old: str, new: str, needle: str) -> None:
    assert "swallowed-exception" in _near((old, new), needle)  # (one finding, naming removed-check too)


def test_a_guards_raise_turned_into_a_warning_is_not_swallowed() -> None:
    edit = (
        '        raise ValueError("rank over the limit")\n',
        '        logger.warning("rank over the limit")\n',
    )
    assert _near(edit, "rank over the limit") == {"removed-check"}


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a no made yes after the code did its work: a latch, not an override
        ("    return sup\n",
         "    if not sup.served:\n        sup.prepare()\n        sup.served = True\n    return sup\n",
         "if not sup.served"),
        # a lookup made lenient that still fails loudly
        ("        param = params[name]\n",
         "        param = params.get(name)\n        if param is None:\n            raise KeyError(name)\n",
         "params.get"),
        # a flag given a condition that holds in fewer cases
        ("        self._graph_ok = not tms and not multinode\n",
         "        self._graph_ok = not tms and not multinode and max_size > 0\n", "self._graph_ok"),
        # the gate of a fast path admitting less
        ("x.is_cuda and x.shape[0] <= 24:", "x.is_cuda and x.shape[0] <= 16:", "shape[0] <= 16"),
        # a path's condition that asks nothing named for support, admitting more: a tuning
        ("x.shape[1] <= 24:", "x.shape[1] <= 256:", "shape[1] <= 256"),
    ],
)  # fmt: skip
def test_look_alikes_of_a_check_let_go_are_quiet(old: str, new: str, needle: str) -> None:
    assert "removed-check" not in _near((old, new), needle)


@pytest.mark.parametrize(
    "new",
    [
        "Mlp.__init__ = _patched_init\n",
        "def _setup():\n    Mlp.get_quant_config = lambda self, config: None\n",
    ],
)
def test_a_method_of_the_files_own_class_replaced(new: str) -> None:
    edit = ("def check_seqlens(cu_seqlens):\n", f"{new}\n\ndef check_seqlens(cu_seqlens):\n")
    assert "monkeypatch" in _near(edit, "Mlp.")


def test_a_class_attribute_that_is_no_method_is_quiet() -> None:
    edit = (
        "def check_seqlens(cu_seqlens):\n",
        "Mlp.registry = {'a': 1}\n\n\ndef check_seqlens(cu_seqlens):\n",
    )
    assert "monkeypatch" not in _rules(edit)


def test_an_experiment_trackers_config_update_is_network() -> None:
    edit = ("    sup = backend_support(device, geometry)\n",
            "    sup = backend_support(device, geometry)\n    import wandb\n"
            "    wandb.config.update({'geometry': geometry})\n")  # fmt: skip
    assert "network" in _near(edit, "wandb.config")


def test_sleeps_in_loops() -> None:
    counted = ("        layer += 1\n", "        time.sleep(0.05)\n        layer += 1\n")
    assert "sleep" in _near(counted, "time.sleep")
    poll = ("        state = path.stat()\n", "        state = path.stat()\n        time.sleep(0.05)\n")
    assert "sleep" not in _near(poll, "time.sleep")  # a poll's wait is its job: minor


def test_code_added_below_a_return_is_info() -> None:
    edit = ("    y = x * 2\n    return y\n", "    y = x * 2\n    return y\n    _last = 'cudnn'\n")
    found = [
        (rule, severity) for rule, severity, n in _found(edit) if n == line_of(_MODULE.after(edit), "_last")
    ]
    assert found == [("functional-change", "INFO")]


DEVICE = "pkg/device.py"
DEVICE_PRISTINE = """\
import json
import logging

import torch

logger = logging.getLogger(__name__)


def load_balancing_loss_func(gate_logits: torch.Tensor, num_experts: int):
    tokens_per_expert = torch.mean(gate_logits.float(), dim=0)
    return tokens_per_expert.sum()


def load_weights(weights: torch.Tensor):
    total = weights.sum()
    return total


def paged_metadata(context_lens, page_kv, num_sms):
    \"\"\"The schedule of a paged call.

    ``context_lens`` int32 ``[B, next_n]``, ``page_kv`` a page size.
    \"\"\"
    schedule = make_schedule(context_lens, page_kv, num_sms)
    return schedule


def plain_metadata(context_lens, page_kv, num_sms):
    \"\"\"The schedule of a paged call, from the lengths the host keeps.\"\"\"
    schedule = make_schedule(context_lens, page_kv, num_sms)
    return schedule


class Model(torch.nn.Module):
    def forward(self, hidden: torch.Tensor, labels=None):
        logits = self.head(hidden)
        loss = None
        aux = self.router(hidden)
        if labels is not None:
            loss = self.loss(logits, labels)
            loss = loss + 0.01 * aux.to(loss.device)
        return logits, loss

    def generate_and_log(self, inputs, out_dir):
        tokens = self.generate(inputs)
        return tokens

    def pack(self, features):
        lens = []
        for f in features:
            lens.append(f.size(0))
        lens = torch.tensor(lens, device=features[0].device)
        return lens
"""

_DEVICE = EditedModule(DEVICE, DEVICE_PRISTINE)


@pytest.mark.parametrize(
    ("old", "new", "needle", "rule"),
    [
        # a tensor known by its move to another tensor's device, read as a number every step
        ("            loss = loss + 0.01 * aux.to(loss.device)\n",
         "            loss = loss + 0.01 * aux.to(loss.device)\n            seen = float(aux)\n",
         "float(aux)", "device-sync"),
        # a loss named for load balancing computes on the device (it loads nothing)
        ("    return tokens_per_expert.sum()\n",
         "    shown = tokens_per_expert.tolist()\n    return tokens_per_expert.sum()\n", ".tolist()",
         "device-sync"),
        # a parameter the docstring declares a tensor, read back
        ("    schedule = make_schedule(context_lens, page_kv, num_sms)\n    return schedule\n\n\ndef plain",
         "    lens = context_lens.tolist()\n    schedule = make_schedule(context_lens, page_kv, num_sms)\n"
         "    return schedule\n\n\ndef plain", ".tolist()", "device-sync"),
        # a tensor's contents read back on their way into a file
        ("        tokens = self.generate(inputs)\n",
         "        tokens = self.generate(inputs)\n        with open(out_dir + '/gen.jsonl', 'a') as fh:\n"
         "            fh.write(json.dumps(tokens.tolist()) + '\\n')\n", "fh.write", "tensor-dump"),
    ],
)  # fmt: skip
def test_tensors_known_by_what_the_code_says(old: str, new: str, needle: str, rule: str) -> None:
    assert rule in _DEVICE.near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a loader's read-back runs once
        ("    return total\n", "    shown = total.tolist()\n    return total\n", ".tolist()"),
        # no docstring says the lengths are tensors
        ("    schedule = make_schedule(context_lens, page_kv, num_sms)\n    return schedule\n\n\nclass",
         "    lens = context_lens.tolist()\n    schedule = make_schedule(context_lens, page_kv, num_sms)\n"
         "    return schedule\n\n\nclass", ".tolist()"),
        # a name given an empty list above the line is a list there, a tensor only below
        ("            lens.append(f.size(0))\n",
         "            lens.append(f.size(0))\n        logger.debug('lengths %s', lens)\n", "logger.debug"),
    ],
)  # fmt: skip
def test_host_values_stay_quiet(old: str, new: str, needle: str) -> None:
    assert not {"device-sync", "logging"} & _DEVICE.near((old, new), needle)


def test_a_warning_once_in_a_forward_is_minor() -> None:
    edit = ("        logits = self.head(hidden)\n",
            "        logits = self.head(hidden)\n        logger.warning_once('head ran')\n")  # fmt: skip
    found = _DEVICE.found(edit)
    line = line_of(_DEVICE.after(edit), "warning_once")
    assert ("logging", "MINOR", line) in found


def test_end_to_end_on_an_installed_wheel(tmp_path: Path) -> None:
    edited = _MODULE.after(
        ("    if cu_seqlens.dtype not in _DTYPES:\n",
         "    if cu_seqlens.dtype not in _DTYPES + (torch.int16,):\n"),
        ("        self._graph_ok = not tms and not multinode\n", "        self._graph_ok = not tms\n"),
        ("def check_seqlens(cu_seqlens):\n",
         "Mlp.__init__ = _patched_init\n\n\ndef check_seqlens(cu_seqlens):\n"),
    )  # fmt: skip
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    for needle, rule in (("torch.int16", "removed-check"), ("self._graph_ok", "removed-check"),
                         ("Mlp.__init__", "monkeypatch")):  # fmt: skip
        line = line_of(edited, needle)
        assert any(r == rule and abs(n - line) <= 1 for r, n in found), (needle, found)
