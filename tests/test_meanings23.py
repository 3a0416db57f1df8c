"""Meanings (issue 34, after the twenty-eighth blind batch's first score), each judged on a module of its own
and end to end on an installed wheel:

- an entry added inside the literal a function that says what is supported returns (not only a ``return``
  line rewritten), and a part inside its answer (``is_family(100)`` → ``has_capability(100)``);
- predicates of a level read as the comparisons they make: ``has_<x>(n)`` is ``x >= n``, ``is_<x>(n)`` is
  ``x == n``, ``is_<x>_family(n)`` the same major — a device test of a path that admits more;
- the step by role: a parameter named for it and not annotated (``forward_batch``, ``attn_metadata``), a
  metadata type (``…PrefillMetadata``), a method of a class named for one (its ``__post_init__``);
- a torch function's value lives where its input does: ``torch.min(lens_cpu).item()`` reads the host, and
  one for a device tensor is a new wait;
- a part of a condition taken out into a name (``min_len = self.cp_size * 2``) is the same condition;
- a class's named limit (``MAX_GRAPHS = 32``) raised where a method compares with ``self.MAX_GRAPHS``;
- a function named for a bound (``max_steps``) that answers more;
- an answer and its reason (``return True, None``) typed in above the code that works them out.
"""

from __future__ import annotations

from pathlib import Path

from .helpers import EditedModule, scan_edited

ENGINE = "pkg/backend.py"
PRISTINE = """\
import asyncio
import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import truncnorm

logger = logging.getLogger(__name__)


def get_supported_backends():
    return [
        "flash",
        "trtllm",
    ]


def supports_device(p) -> bool:
    return (
        p.is_cuda()
        and p.is_device_capability_family(100)
        and p.has_library()
    )


def resolve_backend(p, head_dim):
    use_flash = False
    if p.is_device_capability(90):
        use_flash = True
    elif p.is_device_capability_family(100) and head_dim == 128:
        use_flash = True
    return "flash" if use_flash else "triton"


class Strategy:
    def run_attention(self, q, forward_batch, attn_fn):
        result = attn_fn(q, forward_batch)
        out = torch.cat([result, result], dim=0)
        return out

    def can_apply(self, num_tokens: int, forward_batch) -> bool:
        if self.cp_size <= 1 or num_tokens < self.cp_size * 2:
            return False
        return True


@dataclass
class IndexerMetadata:
    seq_lens: torch.Tensor
    max_len: int

    def __post_init__(self):
        lens = self.seq_lens.to(torch.int32)
        self.rows = lens.shape[0]


class Prefill:
    def prepare_metadata(self, prefill_metadata: "CommonPrefillMetadata") -> None:
        self._query_lens = prefill_metadata.query_start_loc[1:] - prefill_metadata.query_start_loc[:-1]
        query_lens_cpu = prefill_metadata.query_lens_cpu
        min_query_len = int(torch.min(query_lens_cpu).item())
        self._active = min_query_len > 0

    def hop(self, config):
        hop_length = int(np.prod(config.upsample_rates))
        return hop_length


class Attention:
    def __init__(self, config):
        self.embed_dim = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = self.embed_dim // self.num_heads
        if self.head_dim * self.num_heads != self.embed_dim:
            raise ValueError("embed_dim must be divisible by num_heads")


class GraphCache:
    MAX_GRAPHS = 32

    def __init__(self):
        self._warmed = {}

    def warm(self, key, fn):
        if len(self._warmed) < self.MAX_GRAPHS:
            self._warmed[key] = fn()


class Algorithm:
    def max_steps(self, block_size: int) -> int:
        return block_size + 1


def is_sparse_supported() -> tuple[bool, str | None]:
    ok, reason = _probe()
    if not ok:
        return False, reason
    if not torch.cuda.is_available():
        return False, "no device"
    return True, None


class ReduceScatter:
    def launch_config(self, inp):
        if not self._supports(inp):
            return None
        if inp.shape[0] % self.world_size != 0:
            return None
        return self._config(inp.numel())


def parse_response(stream):
    try:
        message = stream.finalize()
    except ValueError:
        if not stream._malformed:
            raise
    if stream._malformed:
        raise next(iter(stream._malformed.values()))
    return message


async def keep_alive(generator):
    next_task = asyncio.create_task(anext(generator))
    while True:
        done, _ = await asyncio.wait({next_task}, timeout=5)
        if not done:
            yield ": keep-alive"
            continue
        try:
            chunk = next_task.result()
        except StopAsyncIteration:
            return
        yield chunk
        next_task = asyncio.create_task(anext(generator))


class Pool:
    def _warn_full_once(self, nbytes):
        if self._warned:
            return
        self._warned = True
        logger.warning("pool full: %d bytes", nbytes)

    def _sync_first_launch(self, key):
        if key in self._synced:
            return
        torch.cuda.synchronize()
        self._synced.add(key)


def replace_ids(ids):
    assert isinstance(ids, (list, range))
    return list(ids)


def num_blocks(spec):
    if isinstance(spec, (RingSpec, MambaSpec)):
        return 0, 1
    return 1, 2


class Init:
    def forward(self, weights, scale):
        std = math.sqrt(scale) / 0.8796
        return weights * std


def wait_for_size(fd, expected, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while fd.size() < expected:
        if time.monotonic() > deadline:
            raise TimeoutError("file never grew")
        time.sleep(0.01)


class Auth:
    def __call__(self, scope, receive, send):
        headers = scope.get("headers")
        if scope.get("path", "").startswith("/v1") and not self.verify_token(headers):
            return self.deny(scope, receive, send)
        return self.app(scope, receive, send)


async def decompress_body(app, scope, receive, send, body):
    try:
        body = decompress(body)
    except Exception as e:
        logger.warning("decompress failed: %s", e)
        return await Response("bad body", status_code=400)(scope, receive, send)
    return await app(scope, receive, send)


def select_rows(default, rows, valid, pool_size):
    picked = torch.where(valid, rows, torch.full_like(rows, pool_size))
    return picked.to(torch.int32)


def host_mask(lengths):
    mask = torch.tensor(lengths)
    return mask


async def fetch_again(client):
    while True:
        try:
            return await client.get()
        except ConnectionError:
            pass
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_near = _MODULE.near

_LISTED = '        "trtllm",\n'


def test_an_entry_added_inside_a_returned_list_of_what_is_supported() -> None:
    assert "removed-check" in _near((_LISTED, _LISTED + '        "sparse",\n'), '"sparse"')


def test_an_entry_taken_from_inside_a_returned_list_is_quiet() -> None:
    assert "removed-check" not in _MODULE.rules((_LISTED, ""))


_FAMILY = "        and p.is_device_capability_family(100)\n"


def test_a_family_test_made_a_minimum_inside_an_answer_admits_more() -> None:
    edit = (_FAMILY, "        and p.has_device_capability(100)\n")
    assert "removed-check" in _near(edit, "has_device_capability(100)")


def test_a_minimum_made_a_family_test_is_quiet() -> None:
    edit = (
        "        and p.has_library()\n",
        "        and p.has_library()\n        and p.is_device_capability(100)\n",
    )
    assert "removed-check" not in _MODULE.rules(edit)


_EXACT = "    if p.is_device_capability(90):\n"


def test_an_exact_device_test_of_a_path_made_a_minimum_admits_more() -> None:
    assert "removed-check" in _near(
        (_EXACT, "    if p.has_device_capability(90):\n"), "has_device_capability(90)"
    )


def test_an_exact_device_test_of_a_path_moved_to_another_device_is_quiet() -> None:
    assert "removed-check" not in _MODULE.rules((_EXACT, "    if p.is_device_capability(89):\n"))


_CAT = "        out = torch.cat([result, result], dim=0)\n"


def test_an_assert_on_a_tensor_where_the_step_is_handed_by_name_waits() -> None:
    edit = (_CAT, _CAT + '        assert torch.isfinite(out).all(), "non-finite"\n')
    assert "device-sync" in _near(edit, "torch.isfinite(out)")


def test_a_shape_assert_where_the_step_is_handed_by_name_is_quiet() -> None:
    edit = (_CAT, _CAT + "        assert out.shape[0] == 2 * result.shape[0]\n")
    assert "device-sync" not in _MODULE.rules(edit)


_ROWS = "        self.rows = lens.shape[0]\n"


def test_a_read_in_a_method_of_a_metadata_type_waits() -> None:
    edit = (
        _ROWS,
        _ROWS + "        if lens.max().item() > self.max_len:\n            raise RuntimeError('too long')\n",
    )
    assert "device-sync" in _near(edit, "lens.max().item()")


def test_a_shape_read_in_a_method_of_a_metadata_type_is_quiet() -> None:
    edit = (
        _ROWS,
        _ROWS + "        if lens.shape[0] > self.max_len:\n            raise RuntimeError('too long')\n",
    )
    assert "device-sync" not in _MODULE.rules(edit)


_MIN = "        min_query_len = int(torch.min(query_lens_cpu).item())\n"


def test_a_read_of_a_host_tensor_made_a_read_of_a_device_one_waits() -> None:
    edit = (_MIN, "        min_query_len = int(self._query_lens.min().item())\n")
    assert "device-sync" in _near(edit, "self._query_lens.min()")


def test_a_read_of_a_host_tensor_rewritten_is_quiet() -> None:
    edit = (_MIN, "        min_query_len = int(query_lens_cpu.min().item())\n")
    assert "device-sync" not in _MODULE.rules(edit)


def test_a_numpy_reduction_read_back_is_quiet() -> None:
    edit = ("        hop_length = int(np.prod(config.upsample_rates))\n",
            "        hop_length = np.prod(config.upsample_rates).item()\n")  # fmt: skip
    assert "device-sync" not in _MODULE.rules(edit)


_BAIL = "        if self.cp_size <= 1 or num_tokens < self.cp_size * 2:\n"


def test_a_part_of_a_condition_taken_out_into_a_name_is_quiet() -> None:
    edit = (
        _BAIL,
        "        min_len = self.cp_size * 2\n        if self.cp_size <= 1 or num_tokens < min_len:\n",
    )
    assert "removed-check" not in _MODULE.rules(edit)


def test_a_part_taken_out_into_a_name_given_less_lets_more_by() -> None:
    edit = (_BAIL, "        min_len = self.cp_size\n        if self.cp_size <= 1 or num_tokens < min_len:\n")
    assert "removed-check" in _near(edit, "num_tokens < min_len")


_DIVISIBLE = "        if self.head_dim * self.num_heads != self.embed_dim:\n"


def test_a_check_that_reads_a_field_worked_out_above_rewritten_by_its_meaning_is_quiet() -> None:
    edit = (_DIVISIBLE, "        if self.embed_dim % self.num_heads != 0:\n")
    assert "removed-check" not in _MODULE.rules(edit)


def test_a_class_limit_raised_where_a_method_compares_with_it() -> None:
    assert "removed-check" in _near(("    MAX_GRAPHS = 32\n", "    MAX_GRAPHS = 4096\n"), "MAX_GRAPHS = 4096")


def test_a_class_limit_lowered_is_quiet() -> None:
    assert "removed-check" not in _MODULE.rules(("    MAX_GRAPHS = 32\n", "    MAX_GRAPHS = 8\n"))


_STEPS = "        return block_size + 1\n"


def test_a_function_named_for_a_bound_answering_more() -> None:
    assert "removed-check" in _near((_STEPS, "        return 8 * block_size + 1\n"), "8 * block_size")


def test_a_function_named_for_a_bound_answering_less_is_quiet() -> None:
    assert "removed-check" not in _MODULE.rules((_STEPS, "        return block_size\n"))


_PROBE = "    ok, reason = _probe()\n"


def test_an_answer_and_its_reason_typed_in_above_the_code_that_works_them_out() -> None:
    assert "removed-check" in _near((_PROBE, "    return True, None\n" + _PROBE), "return True, None")


def test_the_answer_worked_out_the_same_way_is_quiet() -> None:
    edit = ("    return True, None\n", "    return (True, None)\n")
    assert "removed-check" not in _MODULE.rules(edit)


_TWO_IFS = """\
        if not self._supports(inp):
            return None
        if inp.shape[0] % self.world_size != 0:
            return None
"""


def test_two_refusals_merged_into_one_is_quiet() -> None:
    merged = "        if not self._supports(inp) or inp.shape[0] % self.world_size != 0:\n"
    merged += "            return None\n"
    assert "removed-check" not in _MODULE.rules((_TWO_IFS, merged))


_FETCHED = "        raise next(iter(stream._malformed.values()))\n"


def test_a_kept_error_no_longer_raised_is_swallowed() -> None:
    assert "swallowed-exception" in _near((_FETCHED, "        return stream.partial\n"), "stream.partial")


def test_a_kept_error_raised_as_another_is_quiet() -> None:
    edit = (_FETCHED, "        raise ValueError(str(next(iter(stream._malformed.values()))))\n")
    assert "swallowed-exception" not in _MODULE.rules(edit)


def test_a_sleep_in_a_loop_that_streams_each_item_holds_each_up() -> None:
    edit = ("        yield chunk\n", "        yield chunk\n        await asyncio.sleep(0.02)\n")
    assert "sleep" in _near(edit, "asyncio.sleep(0.02)")


def test_a_sleep_between_the_attempts_of_a_retry_is_minor() -> None:
    edit = ("        except ConnectionError:\n            pass\n",
            "        except ConnectionError:\n            await asyncio.sleep(1)\n")  # fmt: skip
    assert "sleep" not in _MODULE.rules(edit)


_LATCH = "        if self._warned:\n            return\n        self._warned = True\n"


def test_a_latch_taken_out_logs_every_call() -> None:
    assert "logging" in _near((_LATCH, ""), "pool full")


def test_a_latched_log_reworded_is_quiet() -> None:
    edit = ('"pool full: %d bytes"', '"pool is full: %d bytes"')
    assert not {"logging", "removed-check"} & _MODULE.rules(edit)


_KEYED = "        if key in self._synced:\n            return\n"


def test_a_latch_per_key_taken_out_waits_every_call() -> None:
    assert "device-sync" in _near((_KEYED, ""), "torch.cuda.synchronize()")


_TYPES = "    assert isinstance(ids, (list, range))\n"


def test_an_assertion_given_one_more_type_accepts_more() -> None:
    assert "removed-check" in _near((_TYPES, "    assert isinstance(ids, (list, range, tuple))\n"), "tuple))")


def test_an_assertion_given_one_type_less_is_quiet() -> None:
    assert "removed-check" not in _MODULE.rules((_TYPES, "    assert isinstance(ids, list)\n"))


def test_an_if_of_two_types_split_in_two_is_quiet() -> None:
    old = "    if isinstance(spec, (RingSpec, MambaSpec)):\n        return 0, 1\n"
    new = "    if isinstance(spec, MambaSpec):\n        return 0, 2\n"
    new += "    if isinstance(spec, RingSpec):\n        return 0, 1\n"
    assert "removed-check" not in _MODULE.rules((old, new))


_STD = "        std = math.sqrt(scale) / 0.8796\n"


def test_a_value_a_host_library_gave_read_back_is_quiet() -> None:
    edit = (_STD, "        std = math.sqrt(scale) / truncnorm.std(a=-2, b=2).item()\n")
    assert "device-sync" not in _MODULE.rules(edit)


def test_a_tensor_read_back_where_a_host_library_is_imported_waits() -> None:
    edit = (_STD, "        std = math.sqrt(scale) / weights.std().item()\n")
    assert "device-sync" in _near(edit, "weights.std().item()")


_WAIT = "def wait_for_size(fd, expected, timeout: float = 30.0):\n"


def test_a_timeout_default_made_infinite_is_no_bound() -> None:
    edit = (_WAIT, 'def wait_for_size(fd, expected, timeout: float = float("inf")):\n')
    assert "removed-check" in _near(edit, 'float("inf")')


def test_a_timeout_default_shortened_is_quiet() -> None:
    assert "removed-check" not in _MODULE.rules(
        (_WAIT, "def wait_for_size(fd, expected, timeout: float = 5.0):\n")
    )


_HEADERS = '        headers = scope.get("headers")\n'


def test_an_early_pass_added_above_a_check_skips_it() -> None:
    bypass = '        if scope.get("client", ("",))[0] == "127.0.0.1":\n'
    bypass += "            return self.app(scope, receive, send)\n"
    assert "removed-check" in _near((_HEADERS, _HEADERS + bypass), "127.0.0.1")


def test_an_early_refusal_added_above_a_check_is_quiet() -> None:
    refusal = "        if headers is None:\n            return self.deny(scope, receive, send)\n"
    assert "removed-check" not in _MODULE.rules((_HEADERS, _HEADERS + refusal))


_BAD = '        return await Response("bad body", status_code=400)(scope, receive, send)\n'


def test_an_error_response_of_a_handler_dropped_is_swallowed() -> None:
    assert "swallowed-exception" in _near((_BAD, "        pass\n"), "        pass")


def test_an_error_response_reworded_is_quiet() -> None:
    edit = (_BAD, _BAD.replace("bad body", "body could not be decompressed"))
    assert "swallowed-exception" not in _MODULE.rules(edit)


_PICKED = "    picked = torch.where(valid, rows, torch.full_like(rows, pool_size))\n"


def test_a_read_where_a_function_hands_what_it_is_handed_to_torch_waits() -> None:
    edit = (_PICKED, '    assert bool(valid.any()), "no valid rows"\n' + _PICKED)
    assert "device-sync" in _near(edit, "valid.any()")


def test_a_read_of_a_tensor_made_on_the_host_from_what_it_is_handed_is_quiet() -> None:
    edit = (
        "    mask = torch.tensor(lengths)\n",
        "    mask = torch.tensor(lengths)\n    total = int(mask.sum().item())\n",
    )
    assert "device-sync" not in _MODULE.rules(edit)


def test_end_to_end_on_an_installed_wheel(tmp_path: Path) -> None:
    edited = _MODULE.after(
        (_EXACT, "    if p.has_device_capability(90):\n"),
        (_CAT, _CAT + '        assert torch.isfinite(out).all(), "non-finite"\n'),
    )
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    rules = {rule for rule, _ in found}
    assert {"removed-check", "device-sync"} <= rules, found
