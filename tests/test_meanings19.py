"""Meanings (issue 34, before and after the twenty-second blind batch's first score): a value an ``if`` proves
no tensor (the ``else`` of ``isinstance(n, torch.Tensor)``, the body of ``isinstance(n, int)``) decides on
the host; one more check of the input, read back from the device, in a function that already checks its
input that way, is of the kind the function makes (minor) — and one in a function that never waited for the
device still costs — each judged on a module of its own, and once end to end on an installed wheel."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from patchguard.analysis.cases import compare

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/plan.py"
PRISTINE = """\
from typing import Optional, Union

import torch


def select(scores: torch.Tensor, topk: int, num_pages: Optional[Union[int, torch.Tensor]] = None):
    if scores.dtype != torch.float32:
        raise ValueError("scores must be float32")
    if isinstance(num_pages, torch.Tensor):
        if num_pages.dtype != torch.int32 or not num_pages.is_contiguous():
            raise ValueError("num_pages must be contiguous int32")
        if num_pages.numel() != scores.shape[-1]:
            raise ValueError("one entry per token")
    else:
        if num_pages is None:
            num_pages = scores.shape[1]
    return torch.topk(scores, topk)


class Dispatcher:
    def publish(self, spectra: torch.Tensor) -> None:
        if spectra.dim() != 2:
            raise ValueError("spectra must be 2-D")
        if not torch.isfinite(spectra).all().item():
            raise ValueError("spectra must be finite")
        self._plan = spectra.clone()

    def route(self, hidden: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        if weights.dim() != 2:
            raise ValueError("weights must be 2-D")
        return hidden @ weights
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_near = _MODULE.near

_SCALAR = "            num_pages = scores.shape[1]\n"
_FINITE = '            raise ValueError("spectra must be finite")\n'
_NONNEG = (
    _FINITE,
    _FINITE + "        if (spectra < 0).any().item():\n"
    '            raise ValueError("spectra must be non-negative")\n',
)


@pytest.mark.parametrize(
    ("added", "needle"),
    [
        # the ``else`` of ``isinstance(num_pages, torch.Tensor)``: a number here
        ("        if not 0 < num_pages <= scores.shape[1]:\n            raise ValueError('out of range')\n",
         "if not 0 < num_pages"),
        ("        pages = int(num_pages)\n", "pages = int("),
    ],
)  # fmt: skip
def test_a_value_an_if_proves_no_tensor_decides_on_the_host(added: str, needle: str) -> None:
    edit = (_SCALAR, _SCALAR + added)
    assert "device-sync" not in _near(edit, needle)


def test_in_the_tensor_branch_it_still_waits() -> None:
    added = "        if num_pages.max().item() > scores.shape[1]:\n            raise ValueError('too many')\n"
    edit = ('            raise ValueError("one entry per token")\n',
            '            raise ValueError("one entry per token")\n' + added)  # fmt: skip
    assert "device-sync" in _near(edit, "num_pages.max().item()")


def test_one_more_check_of_the_kind_the_function_makes_is_minor() -> None:
    found = _MODULE.found(_NONNEG)
    line = line_of(_MODULE.after(_NONNEG), "(spectra < 0)")
    assert ("device-sync", "MINOR", line) in found, found


def test_a_check_read_back_where_the_function_never_waited_costs() -> None:
    old = '            raise ValueError("weights must be 2-D")\n'
    edit = (old, old + "        assert not torch.isnan(hidden).any(), 'NaN in hidden'\n")
    assert "device-sync" in _near(edit, "torch.isnan(hidden)")


def test_end_to_end_on_an_installed_wheel(tmp_path: Path) -> None:
    edited = _MODULE.after(_NONNEG)
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    line = line_of(edited, "(spectra < 0)")
    assert ("device-sync", line) in found, found


# After the twenty-second batch's first score: a module of its own.
SERVER = "pkg/serve.py"
SERVER_PRISTINE = """\
import ast
import json
import logging
import os

import requests

logger = logging.getLogger(__name__)

_SERVER = "https://stats.example.org/usage"


class Decision:
    def __init__(self, allowed: bool, status: int = 401):
        self.allowed = allowed
        self.status = status


def decide(path: str, header: str, key: str) -> Decision:
    if (
        path.startswith("/health")
        or path.startswith("/metrics")
    ):
        return Decision(allowed=True)
    if header != key:
        return Decision(allowed=False)
    return Decision(allowed=True)


def invalid_parameters(params, valid):
    invalid = []
    for k in params:
        if k in valid:
            continue
        if getattr(params, k, None) is not None:
            invalid.append(k)
    if invalid:
        raise ValueError(f"unsupported: {invalid}")


def parse_arguments(detail):
    args = detail.group(3)
    args = json.loads(args)
    return args


def forward_args(fn, args):
    out = fn(args)
    return out


def check_config(cfg):
    for name, expected in {
        "block_size": 128,
        "topk_blocks": 16,
        "index_heads": 4,
    }.items():
        if cfg.get(name) != expected:
            raise ValueError(f"requires {name}={expected}")


_REQUIRED_KEYS = (
    "model",
    "tokenizer",
)


def check_keys(cfg):
    for key in _REQUIRED_KEYS:
        if key not in cfg:
            raise KeyError(key)


def workers_for(n):
    workers = int(os.environ.get("WORKERS", "4"))
    available = _host_memory()
    if available is not None:
        workers = min(workers, available // n)
    return workers


def get_supported_mm_limits():
    return {"image": 1}


def target(major: int):
    return dict(
        arch=major,
        use_packed_fma=major >= 10,
    )


def send_usage(data):
    try:
        with requests.Session() as client:
            client.post(_SERVER, json=data)
    except requests.exceptions.RequestException:
        logger.debug("usage not sent")


def decode_all(parts, decode):
    for base, part in parts:
        yield base, decode(base, part)


def update_features(features, get):
    missing = []
    for f in features:
        try:
            f.data = get(f.key)
        except KeyError as e:
            missing.extend(e.args)
    if missing:
        raise KeyError(missing)
    return features


def _host_memory():
    return None
"""

_SERVE = EditedModule(SERVER, SERVER_PRISTINE)
_LOOP = SERVER_PRISTINE[SERVER_PRISTINE.index("    invalid = []") : SERVER_PRISTINE.index("    if invalid:")]
_COMPREHENSION = """\
    invalid = [
        k for k in params if k not in valid and getattr(params, k, None) is not None
    ]
"""
_PREFIX = '        or path.startswith("/metrics")\n'
_MIRROR = ('            client.post(_SERVER, json=data)\n',
           '            client.post(_SERVER, json=data)\n'
           '            client.post("http://10.0.0.12:8099/usage", json=data, timeout=2)\n')  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "needle", "rule"),
    [
        # a branch that lets a request by before the refusals below it, made to take more paths
        (_PREFIX, _PREFIX + '        or path.startswith("/flush_cache")\n', "/flush_cache",
         "removed-check"),
        # an entry of a table the code checks entry by entry, commented out
        ('        "topk_blocks": 16,\n', '        # "topk_blocks": 16,\n', '# "topk_blocks"',
         "removed-check"),
        # …and one of a table a name is given, that a loop walks
        ('    "tokenizer",\n', "", '    "model",', "removed-check"),
        # a value the code worked out replaced by None just above the ``if`` that caps by it
        ("    available = _host_memory()\n", "    available = None  # _host_memory()\n",
         "available = None", "removed-check"),
        # a table of limits a function says are supported, raised
        ('    return {"image": 1}\n', '    return {"image": 8}\n', '"image": 8', "removed-check"),
        # a flag that picks a path, given as a keyword on a line of its own, made to hold for more devices
        ("        use_packed_fma=major >= 10,\n", "        use_packed_fma=major >= 9,\n", "major >= 9",
         "removed-check"),
        # the same payload also sent to an address of its own, by the client the function made
        (*_MIRROR, "10.0.0.12", "network"),
        # a call taken out into a name and wrapped, its error skipped
        ("        yield base, decode(base, part)\n",
         "        try:\n            value = decode(base, part)\n"
         "        except ValueError:\n            continue\n"
         "        yield base, value\n", "except ValueError", "swallowed-exception"),
        # the errors the handlers collected, raised together, now only logged
        ("    if missing:\n        raise KeyError(missing)\n",
         "    if missing:\n        logger.warning('ignoring %d misses', len(missing))\n", "ignoring",
         "swallowed-exception"),
    ],
)  # fmt: skip
def test_meanings_after_the_twenty_second_batch(old: str, new: str, needle: str, rule: str) -> None:
    assert rule in _SERVE.named((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a loop that collects the invalid names, rewritten as a comprehension with the same tests
        (_LOOP, _COMPREHENSION, "k for k in params"),
        # a value converted in place, converted another way when the first way cannot read it
        ("    args = json.loads(args)\n",
         "    try:\n        args = json.loads(args)\n    except json.JSONDecodeError:\n"
         "        args = ast.literal_eval(args)\n", "except json.JSONDecodeError"),
        # a table entry moved, not taken out
        ('        "topk_blocks": 16,\n        "index_heads": 4,\n',
         '        "index_heads": 4,\n        "topk_blocks": 16,\n', '"topk_blocks"'),
    ],
)  # fmt: skip
def test_look_alikes_after_the_twenty_second_batch_stay_quiet(old: str, new: str, needle: str) -> None:
    assert not {"removed-check", "swallowed-exception"} & _SERVE.named((old, new), needle)


def test_another_computation_in_the_failed_ones_place_still_swallows() -> None:
    edit = ("    out = fn(args)\n",
            "    try:\n        out = fn(args)\n"
            "    except RuntimeError:\n        out = fallback(args)\n")  # fmt: skip
    assert "swallowed-exception" in _SERVE.named(edit, "except RuntimeError")


def test_a_request_on_a_client_made_in_a_with_talks_and_is_the_functions_job() -> None:
    # to the address the function posts to already: one more request of its job (minor), not a new place
    edit = ("            client.post(_SERVER, json=data)\n",
            "            client.post(_SERVER, json=data)\n"
            "            client.get(_SERVER + '/ack')\n")  # fmt: skip
    line = line_of(_SERVE.after(edit), "client.get")
    assert ("network", "MINOR", line) in _SERVE.found(edit)


def test_end_to_end_after_the_twenty_second_batch(tmp_path: Path) -> None:
    edit = ('        "topk_blocks": 16,\n', '        # "topk_blocks": 16,\n')
    edited = _SERVE.after(edit)
    found = scan_edited(tmp_path, SERVER, SERVER_PRISTINE, edited)
    assert ("removed-check", line_of(edited, '# "topk_blocks"')) in found, found


# While the weights load: once a process, whatever the function is handed.
LOADER = "pkg/layers/embedding.py"
LOADER_PRISTINE = """\
import logging

import torch

logger = logging.getLogger(__name__)


class Embedding(torch.nn.Module):
    def weight_loader(self, param: torch.nn.Parameter, loaded_weight: torch.Tensor):
        param.data.copy_(loaded_weight)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.weight[input_ids]
"""

_LOAD = EditedModule(LOADER, LOADER_PRISTINE)
_COPIED = "        param.data.copy_(loaded_weight)\n"
_NAN = "        if torch.isnan(loaded_weight).any():\n            raise ValueError('NaN in the checkpoint')\n"


def test_a_check_read_back_while_the_weights_load_is_minor() -> None:
    edit = (_COPIED, _COPIED + _NAN)
    line = line_of(_LOAD.after(edit), "torch.isnan")
    assert ("device-sync", "MINOR", line) in _LOAD.found(edit)


def test_the_same_check_in_the_forward_still_costs() -> None:
    old = "        return self.weight[input_ids]\n"
    edit = (old, "        if torch.isnan(self.weight).any():\n            raise ValueError('NaN')\n" + old)
    assert "device-sync" in _LOAD.near(edit, "torch.isnan")


def test_any_function_of_a_model_loader_package_runs_at_load_time() -> None:
    module = EditedModule("pkg/model_loader/utils.py", LOADER_PRISTINE.replace("weight_loader", "copy_param"))
    old = "        param.data.copy_(loaded_weight)\n"
    edit = (old, old + "        logger.info('copied %s', tuple(param.shape))\n")
    line = line_of(module.after(edit), "logger.info")
    assert ("logging", "MINOR", line) in module.found(edit)


# After the twenty-third batch's first score: a module of its own.
KERNELS = "pkg/kernels.py"
KERNELS_PRISTINE = """\
import logging
import multiprocessing as mp
import os

import torch

logger = logging.getLogger(__name__)

_MAX_TOKENS = 1024


def pick_backend(backend):
    if backend == "auto":
        if get_device_capability() >= (10, 0):
            backend = "cutedsl"
        elif (10, 0) > get_device_capability() >= (8, 0):
            backend = "marlin"
        else:
            backend = "cutlass"
    return backend


def flat_topk_applies(logits: torch.Tensor) -> bool:
    num_tokens = logits.shape[0]
    return (
        num_tokens <= _MAX_TOKENS
        and logits.is_contiguous()
    )


def pipeline(model, trust_remote_code=None):
    hub_kwargs = {
        "revision": None,
        "trust_remote_code": trust_remote_code,
    }
    return model, hub_kwargs


def start_sidecar(name, endpoint):
    proc = mp.get_context("spawn").Process(target=_run, args=(name, endpoint))
    proc.start()
    return proc


def fused_lora(
    hidden: torch.Tensor,
    num_active: torch.Tensor,  # CPU tensor [1], number of active adapters
    scale: torch.Tensor,  # on the device
):
    out = hidden * scale
    return out


def get_device_capability():
    return (9, 0)


def resolve_trace_path(env):
    if not env:
        raise RuntimeError("set TRACE_PATH")
    return env


def get_num_sms(load):
    dg = load()
    return int(dg.get_num_sms())


def worker_loop(sock, handle):
    try:
        while True:
            handle(sock.recv())
    except Exception as e:
        logger.critical("worker crashed: %s", e)
        os._exit(1)


def _run(name, endpoint):
    pass
"""

_KERN = EditedModule(KERNELS, KERNELS_PRISTINE)
_HIDDEN = "    out = hidden * scale\n"


@pytest.mark.parametrize(
    ("old", "new", "needle", "rule"),
    [
        # the device test of a kernel path let down to older devices
        ("        elif (10, 0) > get_device_capability() >= (8, 0):\n",
         "        elif (10, 0) > get_device_capability() >= (7, 5):\n", ">= (7, 5)", "removed-check"),
        # a bound an answer returned compares with, raised
        ("_MAX_TOKENS = 1024\n", "_MAX_TOKENS = 8192\n", "_MAX_TOKENS = 8192", "removed-check"),
        # a flag that turns a check off, made to default that way
        ('        "trust_remote_code": trust_remote_code,\n',
         '        "trust_remote_code": True if trust_remote_code is None else trust_remote_code,\n',
         "True if trust_remote_code", "removed-check"),
        # a download from the Hugging Face Hub where a refusal stood
        ('        raise RuntimeError("set TRACE_PATH")\n',
         "        from huggingface_hub import snapshot_download\n\n"
         '        env = snapshot_download(repo_id="org/traces", repo_type="dataset")\n',
         "snapshot_download(repo_id", "network"),
        # a module a call handed back, its function wrapped, the original kept in a name
        ("    dg = load()\n",
         "    dg = load()\n    _orig = dg.get_num_sms\n    dg.get_num_sms = lambda: min(_orig(), 112)\n",
         "dg.get_num_sms = lambda", "monkeypatch"),
        # a handler that ended the process on the error, made to return
        ("        os._exit(1)\n", "        return\n", "        return", "swallowed-exception"),
        # a parameter the comment says is on the device: still a wait
        (_HIDDEN, _HIDDEN + "    total = scale.sum().item()\n", "scale.sum().item()", "device-sync"),
    ],
)  # fmt: skip
def test_meanings_after_the_twenty_third_batch(old: str, new: str, needle: str, rule: str) -> None:
    assert rule in _KERN.named((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a value the comment on its parameter says lives on the host, read into a number
        (_HIDDEN, _HIDDEN + "    n_active = int(num_active.item())\n", "num_active.item()"),
        # a log line where a process is started: a server's start, not a step
        ("    proc.start()\n",
         "    logger.info('starting sidecar %s at %s', name, endpoint)\n    proc.start()\n",
         "starting sidecar"),
        # the device test of a path made stricter
        ("        elif (10, 0) > get_device_capability() >= (8, 0):\n",
         "        elif (10, 0) > get_device_capability() >= (9, 0):\n", ">= (9, 0)"),
    ],
)  # fmt: skip
def test_look_alikes_after_the_twenty_third_batch_stay_quiet(old: str, new: str, needle: str) -> None:
    assert not {"removed-check", "device-sync", "logging"} & _KERN.named((old, new), needle)


# A stage a framework hands host values: a transformers pipeline's ``postprocess``.
PIPELINE = "pkg/pipelines/detect.py"
PIPELINE_PRISTINE = """\
import logging

import torch

from .base import ChunkPipeline

logger = logging.getLogger(__name__)


class DetectionPipeline(ChunkPipeline):
    def _forward(self, model_inputs):
        outputs = self.model(**model_inputs)
        return outputs

    def postprocess(self, model_outputs, threshold=0.1):
        results = []
        for output in model_outputs:
            scores = output["scores"]
            results.append(scores)
        return results
"""

_PIPE = EditedModule(PIPELINE, PIPELINE_PRISTINE)


def test_a_value_read_back_in_a_pipelines_postprocess_waits_for_no_device() -> None:
    old = '            scores = output["scores"]\n'
    edit = (old, old + '            logger.debug("%d above", int((scores > 0).sum().item()))\n')
    assert "device-sync" not in _PIPE.named(edit, "int((scores")


def test_the_same_read_in_its_forward_still_waits() -> None:
    old = "        outputs = self.model(**model_inputs)\n"
    edit = (old, old + '        print("max", outputs.logits.max().item())\n')
    assert "device-sync" in _PIPE.named(edit, "outputs.logits.max()")


@pytest.mark.parametrize(
    ("before", "after", "more"),
    [
        # a subject equated with named constants, or looked up among them: one more member is more
        ("out_dtype is torch.bfloat16 or out_dtype is torch.float16",
         "out_dtype in (torch.bfloat16, torch.float16, torch.float32)", True),
        ("dtype != torch.bfloat16", "dtype not in (torch.bfloat16, torch.float16)", False),
    ],
)  # fmt: skip
def test_named_constants_are_values_of_their_own(before: str, after: str, more: bool) -> None:
    found = compare(ast.parse(before, mode="eval").body, ast.parse(after, mode="eval").body)
    assert found is not None and not found.same and found.more is more and found.fewer is not more


def test_the_same_members_spelled_as_a_lookup_are_the_same_condition() -> None:
    before = ast.parse("x is torch.bfloat16 or x is torch.float16", mode="eval").body
    found = compare(before, ast.parse("x in (torch.float16, torch.bfloat16)", mode="eval").body)
    assert found is not None and found.same


def test_an_attribute_that_is_ordered_is_a_number_not_a_constant() -> None:
    before = ast.parse("b.major != d.major or b.minor > d.minor", mode="eval").body
    found = compare(before, ast.parse("b.major > d.major or b.minor > d.minor", mode="eval").body)
    assert found is not None and found.fewer


# A table looked up, whose miss is refused: its keys are what it lets by.
ORACLE = "pkg/oracle.py"
ORACLE_PRISTINE = """\
_PREVIOUSLY_SUPPORTED_MODELS = {
    "OldForCausalLM": "0.10",
}


def map_backend(runner_backend: str) -> str:
    mapping = {
        "triton": "TRITON",
        "humming": "HUMMING",
    }
    if backend := mapping.get(runner_backend):
        return backend
    raise ValueError(f"no int8 backend for {runner_backend}")


def check_arch(arch: str) -> None:
    if arch in _PREVIOUSLY_SUPPORTED_MODELS:
        raise ValueError(f"{arch} was removed in {_PREVIOUSLY_SUPPORTED_MODELS[arch]}")
"""

_ORACLE = EditedModule(ORACLE, ORACLE_PRISTINE)


def test_a_table_looked_up_whose_miss_is_refused_grown_lets_more_by() -> None:
    old = '        "humming": "HUMMING",\n'
    edit = (old, old + '        "marlin": "TRITON",\n')
    assert "removed-check" in _ORACLE.named(edit, '"marlin"')


def test_a_table_of_refusals_named_supported_grown_refuses_more() -> None:
    old = '    "OldForCausalLM": "0.10",\n'
    edit = (old, old + '    "OlderForCausalLM": "0.9",\n')
    assert "removed-check" not in _ORACLE.named(edit, '"OlderForCausalLM"')
