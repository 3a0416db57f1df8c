"""Meanings (issue 34, the eleventh blind batch's misses): a decision forced whatever it was spelled as (a
predicate call's answer made a constant); a bail-out whose tested names live on elsewhere in the file taken
out; refusals known by what they do — abort the case, count it failed, answer no in a "supported" function;
an allow-list wrapped in ``frozenset`` grown; a call's allowed list grown; a keyword that kept a call safe
dropped; an error path that now answers yes; an eligibility limit raised; a dump into a file a ``with``
opened at a literal path; the environment changed through ``__import__``; a class patched through
``type(obj)``; a print from the device; a call named for writing handed a file's name — each judged on a
module of its own, edited as a person would, with look-alikes that must stay quiet, and once end to end on
an installed wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/gate.py"
PRISTINE = """\
import logging
import os
import pickle

import torch
import triton
import triton.language as tl

logger = logging.getLogger(__name__)

_MAX_ROWS = 2048
MAX_STOP_COUNT = 32
_SUPPORTED_ARCHITECTURES = frozenset(
    {
        "LlamaForCausalLM",
        "Qwen2ForCausalLM",
    }
)


def supported_compute_capability(caps):
    def wrap(fn):
        return fn

    return wrap


def _read_meta(path):
    return open(path).read()


class Cache:
    def __init__(self, path, expected):
        self.meta_path = path
        self.expected_meta = expected

    def try_load(self):
        if _read_meta(self.meta_path) != self.expected_meta:
            return None
        return self._load()

    def _load(self):
        return 1


def radix_ok(logits) -> bool:
    return logits.is_contiguous()


def should_share(w, target_w) -> bool:
    return torch.equal(w, target_w)


def should_use_fast_gate(rows, mode) -> bool:
    return mode.is_decode() and 0 < rows <= _MAX_ROWS


def check_stops(stop_strs):
    if len(stop_strs) > MAX_STOP_COUNT:
        raise ValueError("too many stop strings")


def mega_gate_supported(sm, model_type) -> bool:
    if sm // 10 != 10 or model_type != "deepseek":
        return False
    return True


def unsupported_reason(arch, dtype):
    rules = (
        (dtype not in ("fp16", "bf16"), "FP16 or BF16 only"),
        (arch not in _SUPPORTED_ARCHITECTURES, "not in the allowlist"),
    )
    return next((why for bad, why in rules if bad), None)


@supported_compute_capability([89, 90, 100])
def fused_routing(scores):
    return scores


class Grammar:
    def poll(self, queue, limit):
        failed = set()
        for i, entry in enumerate(queue):
            entry.wait_ct += 1
            if entry.wait_ct >= limit:
                failed.add(i)
        return failed

    def cached(self, req, value):
        if value.invalid:
            req.set_finish_with_abort(value.error_message)
        return req


def probe(topo, peer, nvml):
    try:
        topo.peer_nvlink[peer] = nvml.p2p_ok(peer)
    except OSError:
        topo.peer_nvlink[peer] = False
    return topo


@triton.jit
def _copy_kernel(dst, src, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    data = tl.load(src + offs, mask=mask)
    tl.store(dst + offs, data, mask=mask)


def _launch_copy(dst, src, n):
    _copy_kernel[(1,)](dst, src, n, BLOCK=128)


def copy_fwd(dst, src, n):
    _launch_copy(dst, src, n)
    return dst


class Builder:
    def build(self, seq_lens: torch.Tensor, n: int):
        padded = seq_lens[:n] == 0
        return padded

    def build_table(self, config):
        table = torch.zeros(4)
        return table


def combine(out, result):
    out.copy_(result)
    return out


def serialize(obj) -> bytes:
    logger.warning("falling back to pickle for %s", type(obj))
    return pickle.dumps(obj)


class Hybrid:
    def __init__(self, prefill, decode):
        self.prefill = prefill
        self.decode = decode


def capture(graph, key):
    graph.replay()
    return graph
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_after, _found, _line = _MODULE.after, _MODULE.found, line_of


_near, _rules = _MODULE.near, _MODULE.rules


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a predicate's answer made a constant
        ("    return logits.is_contiguous()\n", "    return True  # strided is fine\n", "strided is fine"),
        ("    return torch.equal(w, target_w)\n", "    return True\n", "return True"),
        # a bail-out whose tested names the file still has, taken out
        ("        if _read_meta(self.meta_path) != self.expected_meta:\n            return None\n",
         "        pass  # meta mismatch tolerated\n", "tolerated"),
        # the condition of an if that counts the case failed, loosened
        ("if entry.wait_ct >= limit:", "if entry.wait_ct >= limit * 10_000:", "10_000"),
        # a call that aborts the case taken out
        ("            req.set_finish_with_abort(value.error_message)\n",
         "            logger.warning('serving unconstrained')\n", "unconstrained"),
        # a "supported" function's refusal that holds in fewer cases
        ("if sm // 10 != 10 or", "if sm < 90 or", "sm < 90"),
        # an allow-list wrapped in frozenset, grown
        ('        "Qwen2ForCausalLM",\n', '        "Qwen2ForCausalLM",\n        "MistralForCausalLM",\n',
         "MistralForCausalLM"),
        # a call's allowed list grown
        ("@supported_compute_capability([89, 90, 100])",
         "@supported_compute_capability([80, 89, 90, 100])", "[80, 89"),
        # the mask that bounded a store dropped
        ("    tl.store(dst + offs, data, mask=mask)\n", "    tl.store(dst + offs, data)\n", "tl.store"),
        # the error path answers yes now
        ("        topo.peer_nvlink[peer] = False\n", "        topo.peer_nvlink[peer] = True\n", "= True"),
        # an eligibility limit raised
        ("_MAX_ROWS = 2048\n", "_MAX_ROWS = 16384\n", "_MAX_ROWS = 16384"),
        # a limit on what a caller may ask, raised (``if len(stop_strs) > MAX_STOP_COUNT: raise``)
        ("MAX_STOP_COUNT = 32\n", "MAX_STOP_COUNT = 64\n", "MAX_STOP_COUNT = 64"),
    ],
)  # fmt: skip
def test_a_check_let_go_by_what_it_does(old: str, new: str, needle: str) -> None:
    assert "removed-check" in _near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a limit made lower: stricter
        ("MAX_STOP_COUNT = 32\n", "MAX_STOP_COUNT = 16\n"),
        # a bail-out replaced by a call that says it checks
        ("        if _read_meta(self.meta_path) != self.expected_meta:\n            return None\n",
         "        self.verify_meta()\n"),
        # a predicate's answer computed otherwise, not made a constant
        ("    return logits.is_contiguous()\n", "    return logits.stride(-1) == 1\n"),
        # a condition made stricter
        ("if entry.wait_ct >= limit:", "if entry.wait_ct >= limit // 2:"),
        # the error path answers no still, another way
        ("        topo.peer_nvlink[peer] = False\n", "        topo.peer_nvlink[peer] = bool(0)\n"),
        # a keyword that keeps nothing safe dropped
        ("    data = tl.load(src + offs, mask=mask)\n",
         "    data = tl.load(src + offs, mask=mask)  # masked\n"),
        # an allow-list shrunk
        ('        "Qwen2ForCausalLM",\n', ""),
    ],
)  # fmt: skip
def test_look_alikes_of_a_check_let_go_are_quiet(old: str, new: str) -> None:
    assert "removed-check" not in _rules((old, new))


@pytest.mark.parametrize(
    ("old", "new", "needle", "rule"),
    [
        # a dump into a file a `with` opened at a literal path: no serializer's job
        ("    return pickle.dumps(obj)\n",
         "    with open(f'/tmp/fallback_{type(obj).__name__}.pkl', 'wb') as fh:\n"
         "        pickle.dump(obj, fh)\n    return pickle.dumps(obj)\n",
         "pickle.dump(obj, fh)", "tensor-dump"),
        # the environment changed through __import__
        ("_MAX_ROWS = 2048\n", "_MAX_ROWS = 2048\n__import__('os').environ.update(NCCL_DEBUG='INFO')\n",
         "environ.update", "env-mutation"),
        # a class patched through type(obj)
        ("        self.decode = decode\n",
         "        self.decode = decode\n        type(decode).supports_graph = property(lambda _s: True)\n",
         "type(decode)", "monkeypatch"),
        # a print from the device on every launch
        ("    mask = offs < n\n", "    mask = offs < n\n    tl.device_print('n', n)\n",
         "device_print", "print"),
        # a call named for writing handed a file's name
        ("    graph.replay()\n", "    graph.replay()\n    graph.debug_dump(f'/tmp/graph_{key}.dot')\n",
         "debug_dump", "file-write"),
    ],
)  # fmt: skip
def test_effects_found_by_what_the_code_does(old: str, new: str, needle: str, rule: str) -> None:
    assert rule in _near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a call named for writing handed no file's name
        ("    graph.replay()\n", "    graph.replay()\n    graph.debug_dump(key)\n"),
        ("    graph.replay()\n", "    graph.replay()\n    cache.store('graph-key', graph)\n"),
        # an attribute set on an object, not its class
        ("        self.decode = decode\n",
         "        self.decode = decode\n        decode.supports_graph = True\n"),
    ],
)  # fmt: skip
def test_look_alikes_of_effects_are_quiet(old: str, new: str) -> None:
    assert not _rules((old, new)) & {"file-write", "monkeypatch"}


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a function that calls what launches a kernel: on the device path
        ("    _launch_copy(dst, src, n)\n", "    _launch_copy(dst, src, n)\n    total = dst.sum().item()\n",
         "total = "),
        # a builder handed the step's tensors: per step
        ("        return padded\n", "        self.any_padded = bool(padded.any())\n        return padded\n",
         "any_padded"),
        # a function that writes into tensors in place: device work
        ("    out.copy_(result)\n", "    out.copy_(result)\n    if torch.isnan(result).any():\n"
         "        raise RuntimeError('nan')\n", "isnan"),
    ],
)  # fmt: skip
def test_host_reads_where_the_device_works(old: str, new: str, needle: str) -> None:
    assert "device-sync" in _near((old, new), needle)


def test_a_builder_handed_no_tensors_sets_up() -> None:
    edit = ("        return table\n", "        first = table.sum().item()\n        return table\n")
    assert "device-sync" not in _rules(edit)


def test_scan_finds_them_on_an_installed_wheel(tmp_path: Path) -> None:
    """End to end: a real wheel installed, edited in place as a person would, scanned against the wheel."""
    edited = _after(
        ("    return logits.is_contiguous()\n", "    return True  # strided is fine\n"),
        ("    tl.store(dst + offs, data, mask=mask)\n", "    tl.store(dst + offs, data)\n"),
        ("        topo.peer_nvlink[peer] = False\n", "        topo.peer_nvlink[peer] = True\n"),
    )
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    assert ("removed-check", _line(edited, "strided is fine")) in found
    assert ("removed-check", _line(edited, "tl.store(dst + offs, data)")) in found
    assert ("removed-check", _line(edited, "peer_nvlink[peer] = True")) in found
