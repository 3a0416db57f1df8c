"""Meanings (issue 34, after the twenty-ninth blind batch's first score), each judged on a module of its own
and end to end on an installed wheel:

- a check of an attribute the object has from a base class elsewhere, taken out, is a check gone (the
  attribute did not leave with it: the file never gave it);
- a ``raise`` whose place a call named for checking took, where the file's function of that name makes
  the thing so (it sets an attribute) rather than refuses: the refused case is worked around;
- a flag named for whether something may go ahead (``_kda_available``) given a value that holds in more
  cases;
- a flag kept in a tensor (``enable_chain_assert.fill_(1)`` → ``fill_(0)``) turned off;
- a least spelled as a version (``MIN_CUDA = "13.0"`` → ``"12.8"``) lowered where the file asks whether it is
  met (``is_cuda_version_at_least(MIN_CUDA)``);
- ``any(… for x in items)`` holds only where there are items: ``if out_of_range:`` → ``if any(i > n for i in
  out_of_range):`` raises in fewer cases;
- a part of a refusal's ``or`` made the test of an ``if`` above that mends the value instead;
- a failure a handler reported, reported as a success (``task_done(False, t)`` → ``task_done(True, t)``,
  the parameter named by the file's ``def``);
- a function that says whether to use a path (``should_use_*``) answering a condition where it said
  ``False``; one that answers a level of support (``get_cudagraph_support``) answering more than ``NEVER``;
- a function named for setting up that is handed the step itself (``_init_kpool_metadata(…, forward_batch:
  ForwardBatch)``) sets up each step: a device read there waits;
- a spin on ``all(ev.query() for ev in pending)`` waits for the device as one on ``stream.query()`` does;
- what a function hands back, where it says it returns a numpy array (``-> np.ndarray | None``), is on the
  host: reading it decides nothing on the device;
- one more line printed by a function that prints already (a visualizer) is its job;
- a wait for the device in a server's sleep-mode lifecycle (``suspend``, ``resume``, ``wake_up``) is seldom;
- a part of the test of a path that asks whether something is there (``hasattr(torch.ops._C, "op")``) taken
  out;
- an entry taken out of a table of reasons to refuse (``(hicache, "…moves KV between steps")``) that a
  comprehension keeps the reasons of whose condition holds;
- a call the edit took out (``quant_info.wrapper.run(…)``) run again inside a ``try`` of a helper the edit
  wrote, whose handler answers a default: its errors are swallowed.
"""

from __future__ import annotations

from pathlib import Path

from .helpers import EditedModule, scan_edited

ENGINE = "pkg/runner.py"
PRISTINE = """\
import enum
import logging
import time

import numpy as np
import torch

from .base import BaseParser, ForwardBatch, SiluAndMul, current_platform, render, silu_and_mul_nvfp4

logger = logging.getLogger(__name__)

MIN_CUDA = "13.0"
_FUSED = {}


class Support(enum.Enum):
    NEVER = 0
    UNIFORM_BATCH = 1
    ALWAYS = 2


class Parser(BaseParser):
    def __init__(self, tokenizer, limit):
        super().__init__(tokenizer)
        self.limit = limit
        if not self.model_tokenizer:
            raise ValueError("the model tokenizer must be passed")
        if self.limit < 0:
            raise ValueError("limit must not be negative")


class Window:
    def _ensure_workspace(self, rows):
        if self.workspace is not None and self.workspace.size >= rows:
            return
        self.workspace = torch.empty(rows, dtype=torch.uint8, device="cuda")

    def _check_layout(self, layout):
        if layout.size <= 0:
            raise ValueError("empty layout")

    def activate(self, layout):
        if self.workspace is None:
            self._ensure_workspace(layout.size)
        elif self.workspace.size < layout.size:
            raise RuntimeError(f"workspace too small: {self.workspace.size} rows for {layout.size}")
        self.state.enable_chain_assert.fill_(1)
        self.state.step.fill_(1)


def load_kernel(is_cuda):
    kernel_available = (
        is_cuda() and torch.cuda.get_device_capability()[0] >= 10
    )
    return kernel_available


def toolkit_unavailable(is_cuda_version_at_least):
    if is_cuda_version_at_least(MIN_CUDA):
        return None
    return f"the kernels need CUDA {MIN_CUDA} or newer"


def check_layers(layer_ids, num_layers):
    out_of_range = [i for i in layer_ids if i >= num_layers]
    if out_of_range:
        raise ValueError(f"layer ids {out_of_range} out of range")


class Cache:
    def put(self, value, size_bytes):
        if size_bytes is None or size_bytes < 0 or size_bytes > self.max_size_bytes:
            return False
        self.items.append(value)
        return True


class Job:
    def task_done(self, success, transfer_time):
        self.ok = success
        return True, success, transfer_time

    def run(self, state, start):
        try:
            state.read()
            done, success, total = state.task_done(True, time.monotonic() - start)
        except OSError as exc:
            logger.error("job failed: %s", exc)
            elapsed = time.monotonic() - start
            done, success, total = state.task_done(False, elapsed)
        return done, success, total


def should_use_fast_attention(attn_type, dtype):
    if attn_type != "encoder":
        return False
    if dtype == torch.bfloat16:
        return torch.cpu._is_avx512_bf16_supported()
    return False


def encoder_attention_dtype(attn_type, dtype):
    if attn_type != "encoder":
        return False
    return False


class Builder:
    def get_cudagraph_support(self, config):
        return Support.NEVER


class Backend:
    def _init_kpool_metadata(self, metadata, forward_batch: ForwardBatch):
        if forward_batch.forward_mode.is_decode():
            return self.plan(metadata, forward_batch)
        return metadata

    def _init_weights(self, weights: torch.Tensor):
        self.weights = weights
        return self.weights


class Allocator:
    def suspend(self, tags):
        self._state = "SUSPENDED"
        self.pool.sleep(tags)

    def forward(self, x: torch.Tensor):
        self.pool.touch(x)
        return x


def run_parallel(pending, default_fn):
    result = default_fn()
    for ev in pending:
        ev.wait()
    return result


def need_mask(batch: ForwardBatch) -> np.ndarray | None:
    mask = batch.computed_np + batch.scheduled >= batch.prefill_np
    return mask if mask.any() else None


def show_mask(mask, rows):
    text = render(mask)
    print(text)
    print("-" * rows)


if current_platform.is_cuda() and hasattr(torch.ops._C, "silu_and_mul_nvfp4_quant"):
    _FUSED[(SiluAndMul, "nvfp4")] = silu_and_mul_nvfp4


def why_not_deferred(static_verify, unified_kv, hicache, attn_dp):
    reasons = (
        (not static_verify, "the verify is not static"),
        (unified_kv, "unified KV writes the draft window through its ring"),
        (hicache, "a HiCache storage backend moves KV between steps"),
        (attn_dp, "attention DP runs idle draft forwards"),
    )
    return "; ".join(why for refused, why in reasons if refused)


def fused_experts(x, quant_info, topk_ids):
    x = x.contiguous()
    output = quant_info.wrapper.run(
        x=x,
        token_selected_experts=topk_ids,
    )
    return output
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_near = _MODULE.near


def test_a_check_of_an_attribute_a_base_class_gives_taken_out_is_gone() -> None:
    check = "        if not self.model_tokenizer:\n"
    edit = (check + '            raise ValueError("the model tokenizer must be passed")\n', "")
    assert "removed-check" in _MODULE.rules(edit)


def test_a_check_taken_out_with_the_attribute_the_file_gave_is_quiet() -> None:
    given = ("        self.limit = limit\n", "")
    taken = ("    def __init__(self, tokenizer, limit):\n", "    def __init__(self, tokenizer):\n")
    check = ('        if self.limit < 0:\n            raise ValueError("limit must not be negative")\n', "")
    found = _MODULE.found(taken, given, check)
    assert not [f for f in found if f[0] == "removed-check" and f[1] != "MINOR"], found


_RAISE = (
    '            raise RuntimeError(f"workspace too small: {self.workspace.size} rows for {layout.size}")\n'
)


def test_a_raise_replaced_by_a_call_that_makes_the_thing_so_is_a_check_gone() -> None:
    edit = (_RAISE, "            self.workspace = None\n            self._ensure_workspace(layout.size)\n")
    assert "removed-check" in _near(edit, "self.workspace = None")


def test_a_raise_replaced_by_a_call_that_refuses_is_quiet() -> None:
    edit = (_RAISE, "            self._check_layout(layout)\n")
    assert "removed-check" not in _MODULE.rules(edit)


_AVAILABLE = "        is_cuda() and torch.cuda.get_device_capability()[0] >= 10\n"


def test_a_flag_of_what_is_available_given_more_cases() -> None:
    edit = (_AVAILABLE, _AVAILABLE.replace(">= 10", ">= 9"))
    assert "removed-check" in _near(edit, ">= 9")


def test_a_flag_of_what_is_available_given_fewer_cases_is_quiet() -> None:
    assert "removed-check" not in _MODULE.rules((_AVAILABLE, _AVAILABLE.replace(">= 10", ">= 11")))


def test_a_flag_kept_in_a_tensor_turned_off() -> None:
    edit = (
        "        self.state.enable_chain_assert.fill_(1)\n",
        "        self.state.enable_chain_assert.fill_(0)\n",
    )
    assert "removed-check" in _near(edit, "enable_chain_assert.fill_(0)")


def test_a_tensor_that_is_no_check_filled_otherwise_is_quiet() -> None:
    edit = ("        self.state.step.fill_(1)\n", "        self.state.step.fill_(0)\n")
    assert "removed-check" not in _MODULE.rules(edit)


def test_a_least_version_lowered_where_the_file_asks_whether_it_is_met() -> None:
    assert "removed-check" in _near(('MIN_CUDA = "13.0"\n', 'MIN_CUDA = "12.8"\n'), "MIN_CUDA =")


def test_a_least_version_raised_is_quiet() -> None:
    assert "removed-check" not in _MODULE.rules(('MIN_CUDA = "13.0"\n', 'MIN_CUDA = "13.1"\n'))


_OUT_OF_RANGE = "    if out_of_range:\n"


def test_any_over_the_items_a_refusal_tested_fires_in_fewer_cases() -> None:
    edit = (_OUT_OF_RANGE, "    if any(i > num_layers for i in out_of_range):\n")
    assert "removed-check" in _near(edit, "if any(")


def test_the_items_asked_for_by_their_length_is_quiet() -> None:
    assert "removed-check" not in _MODULE.rules((_OUT_OF_RANGE, "    if len(out_of_range) > 0:\n"))
    assert "removed-check" not in _MODULE.rules(
        (_OUT_OF_RANGE, "    if any(i >= num_layers for i in layer_ids):\n")
    )


_REFUSAL = "        if size_bytes is None or size_bytes < 0 or size_bytes > self.max_size_bytes:\n"


def test_a_part_of_a_refusal_made_an_if_that_mends_the_value() -> None:
    edit = (
        _REFUSAL,
        "        if size_bytes is None:\n            size_bytes = 0\n"
        "        if size_bytes < 0 or size_bytes > self.max_size_bytes:\n",
    )
    assert "removed-check" in _near(edit, "if size_bytes < 0")


def test_a_part_of_a_refusal_made_a_refusal_of_its_own_is_quiet() -> None:
    edit = (
        _REFUSAL,
        "        if size_bytes is None:\n            return False\n"
        "        if size_bytes < 0 or size_bytes > self.max_size_bytes:\n",
    )
    assert "removed-check" not in _MODULE.rules(edit)


_FAILED = "            done, success, total = state.task_done(False, elapsed)\n"


def test_a_failure_a_handler_reported_told_as_a_success() -> None:
    edit = (_FAILED, _FAILED.replace("task_done(False", "task_done(True"))
    assert "swallowed-exception" in _near(edit, "task_done(True, elapsed)")


def test_a_failure_reported_with_another_time_is_quiet() -> None:
    edit = (_FAILED, _FAILED.replace("elapsed)", "0.0)"))
    assert "swallowed-exception" not in _MODULE.rules(edit)


_LAST = "        return torch.cpu._is_avx512_bf16_supported()\n    return False\n"


def test_whether_to_use_a_path_answered_by_a_condition_where_it_said_no() -> None:
    edit = (_LAST, _LAST.replace("    return False\n", "    return dtype == torch.float16\n"))
    assert "removed-check" in _near(edit, "return dtype == torch.float16")


def test_a_function_not_named_for_a_path_answering_a_condition_is_quiet() -> None:
    last = "        return False\n    return False\n\n\nclass Builder"
    edit = (last, last.replace("    return False\n\n", "    return dtype == torch.float16\n\n"))
    assert "removed-check" not in _MODULE.rules(edit)


def test_a_level_of_support_answered_where_there_was_none() -> None:
    edit = ("        return Support.NEVER\n", "        return Support.UNIFORM_BATCH\n")
    assert "removed-check" in _near(edit, "Support.UNIFORM_BATCH")


def test_no_support_answered_where_there_was_some_is_quiet() -> None:
    module = EditedModule(ENGINE, PRISTINE.replace("return Support.NEVER", "return Support.ALWAYS"))
    assert "removed-check" not in module.rules(
        ("        return Support.ALWAYS\n", "        return Support.NEVER\n")
    )


_DECODE = "        if forward_batch.forward_mode.is_decode():\n"


def test_a_read_where_a_setup_function_is_handed_the_step_waits() -> None:
    edit = (_DECODE, _DECODE + '            assert (forward_batch.seq_lens > 0).all(), "empty sequence"\n')
    assert "device-sync" in _near(edit, "assert (forward_batch.seq_lens")


def test_a_read_where_a_setup_function_is_handed_no_step_is_quiet() -> None:
    edit = (
        "        self.weights = weights\n",
        "        self.weights = weights\n        assert bool(weights.isfinite().all())\n",
    )
    assert "device-sync" not in _MODULE.rules(edit)


_WAITED = "    for ev in pending:\n        ev.wait()\n"


def test_a_spin_until_every_event_has_finished_waits() -> None:
    edit = (_WAITED, "    while not all(ev.query() for ev in pending):\n        pass\n" + _WAITED)
    assert "device-sync" in _MODULE.named(edit, "while not all(ev.query()")


def test_waiting_on_each_event_as_before_is_quiet() -> None:
    edit = (_WAITED, "    for event in pending:\n        event.wait()\n")
    assert "device-sync" not in _MODULE.rules(edit)


_MASKED = "    return mask if mask.any() else None\n"


def test_a_read_of_what_a_function_returns_as_a_numpy_array_is_quiet() -> None:
    edit = (_MASKED, "    any_needed = bool(mask.any())\n    return mask if any_needed else None\n")
    assert "device-sync" not in _MODULE.rules(edit)


def test_a_read_of_a_tensor_the_function_is_handed_still_waits() -> None:
    edit = (_MASKED, "    n = int(batch.seq_lens.sum().item())\n" + _MASKED)
    assert "device-sync" in _near(edit, "n = int(batch.seq_lens")


_PRINTED = '    print("-" * rows)\n'


def test_one_more_line_printed_by_a_function_that_prints_is_its_job() -> None:
    assert "print" not in _MODULE.rules((_PRINTED, _PRINTED + '    print(f"rows: {rows}")\n'))


def test_a_print_added_to_a_function_that_prints_nothing_is_reported() -> None:
    edit = (_WAITED, _WAITED + '    print(f"{len(pending)} events")\n')
    assert "print" in _near(edit, "events")


_PROBED = 'if current_platform.is_cuda() and hasattr(torch.ops._C, "silu_and_mul_nvfp4_quant"):\n'


def test_a_test_that_what_a_path_uses_is_there_taken_out() -> None:
    assert "removed-check" in _near((_PROBED, "if current_platform.is_cuda():\n"), "if current_platform")


def test_a_test_that_what_a_path_uses_is_there_moved_to_an_if_around_it_is_quiet() -> None:
    edit = (
        _PROBED + '    _FUSED[(SiluAndMul, "nvfp4")] = silu_and_mul_nvfp4\n',
        'if hasattr(torch.ops._C, "silu_and_mul_nvfp4_quant"):\n    if current_platform.is_cuda():\n'
        '        _FUSED[(SiluAndMul, "nvfp4")] = silu_and_mul_nvfp4\n',
    )
    assert "removed-check" not in _MODULE.rules(edit)


def test_a_test_of_the_platform_taken_out_is_quiet() -> None:
    edit = (_PROBED, 'if hasattr(torch.ops._C, "silu_and_mul_nvfp4_quant"):\n')
    assert "removed-check" not in _MODULE.rules(edit)


_RUN = "    output = quant_info.wrapper.run(\n"


def test_a_call_taken_out_and_run_in_a_try_of_a_helper_that_answers_a_default() -> None:
    helper = (
        "    def _safe_run(**kw):\n        try:\n            return quant_info.wrapper.run(**kw)\n"
        "        except RuntimeError:\n            return torch.zeros_like(x)\n\n    output = _safe_run(\n"
    )
    assert "swallowed-exception" in _MODULE.rules((_RUN, helper))


def test_a_helper_that_lets_the_errors_of_the_call_go_on_is_quiet() -> None:
    helper = "    def _run(**kw):\n        return quant_info.wrapper.run(**kw)\n\n    output = _run(\n"
    assert "swallowed-exception" not in _MODULE.rules((_RUN, helper))


_REASON = '        (hicache, "a HiCache storage backend moves KV between steps"),\n'


def test_a_reason_to_refuse_taken_out_of_its_table() -> None:
    assert "removed-check" in _MODULE.rules((_REASON, ""))


def test_a_reason_to_refuse_taken_out_while_its_condition_is_logged_elsewhere() -> None:
    joined = '    return "; ".join(why for refused, why in reasons if refused)\n'
    logged = '    logger.debug("%s", (hicache, attn_dp))\n' + joined
    module = EditedModule(ENGINE, PRISTINE.replace(joined, logged))
    assert "removed-check" in module.rules((_REASON, ""))


def test_a_reason_to_refuse_reworded_is_quiet() -> None:
    assert "removed-check" not in _MODULE.rules((_REASON, _REASON.replace("moves KV", "moves the KV")))


def test_a_wait_where_the_server_is_put_to_sleep_is_seldom() -> None:
    edit = (
        '        self._state = "SUSPENDED"\n',
        '        self._state = "SUSPENDED"\n        torch.cuda.synchronize()\n',
    )
    found = [(r, sev) for r, sev, _n in _MODULE.found(edit) if r == "device-sync"]
    assert found == [("device-sync", "MINOR")], found


def test_a_wait_in_a_forward_still_waits() -> None:
    edit = ("        self.pool.touch(x)\n", "        self.pool.touch(x)\n        torch.cuda.synchronize()\n")
    assert "device-sync" in _MODULE.rules(edit)


def test_end_to_end_on_an_installed_wheel(tmp_path: Path) -> None:
    edited = _MODULE.after(
        ('MIN_CUDA = "13.0"\n', 'MIN_CUDA = "12.8"\n'),
        (_FAILED, _FAILED.replace("task_done(False", "task_done(True")),
    )
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    rules = {rule for rule, _ in found}
    assert {"removed-check", "swallowed-exception"} <= rules, found
