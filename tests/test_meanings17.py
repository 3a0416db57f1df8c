"""Meanings (issue 34, the nineteenth blind batch's first score): a value read back to be printed or logged
(``print(ids.tolist())``); a function named for a one-time stage (``capture``) that is handed tensors; a
tensor torch makes on the CPU (no device named) read back, no sync; a parameter that is a function taking
a tensor is no tensor; an ``if``/``elif`` chain of answers (a lookup) rewritten as a table, no bail-out
gone; a branch of a chain that ends in a raise made to take more cases; a flag named for what may be done,
set over several lines, made to hold more; a declared range in a signature's annotation moved; a closeness
test's tolerance widened; a module's ``forward`` inputs read on the host — each judged on a module of its
own, with look-alikes that must stay quiet, and once end to end on an installed wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/router.py"
PRISTINE = """\
import argparse
import logging
import os
import time
from typing import Annotated, Callable, Optional

import torch
from fastapi import Query

from .profiling import in_profiling

logger = logging.getLogger(__name__)


def dispatch(expert_counts, expected_m):
    combined = expert_counts + expected_m
    return combined


class Recorder:
    def capture(self, layer_id: int, topk_ids: torch.Tensor):
        self.buffer[layer_id].copy_(topk_ids)


def align(sorted_ids: torch.Tensor, max_loras, block_size, device):
    padded = torch.zeros(max_loras, dtype=torch.int32)
    for lora in range(max_loras):
        padded[lora] = block_size * lora
    return padded.to(device)


def profile_graph(run, *, repeat: int, record: Optional[Callable[[torch.Tensor], None]] = None):
    events = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return events


def dtype_name(x: torch.Tensor) -> str:
    if x.dtype == torch.bfloat16:
        return "bfloat16"
    elif x.dtype == torch.float16:
        return "float16"
    else:
        raise ValueError(f"unsupported dtype {x.dtype}")


def gated(activation):
    if activation == "silu":
        gate = True
    elif activation == "relu2":
        gate = False
    else:
        raise ValueError(f"unsupported activation {activation!r}")
    return gate


def check_scheme(capability, min_capability):
    supported = capability >= min_capability
    if not supported:
        raise RuntimeError("the scheme needs a newer GPU")
    return supported


async def sleep(
    level: Annotated[int, Query(ge=0, le=2)] = 1,
    mode: Annotated[str, Query()] = "abort",
):
    return level, mode


def check_norms(spectra):
    norms = torch.linalg.vector_norm(spectra, dim=1)
    if not torch.allclose(norms, torch.ones_like(norms)):
        raise ValueError("rows must have unit norm")
    return norms


def report_tokens(input_ids: torch.Tensor, image_token: int):
    ids = input_ids.flatten()
    return ids


def launch(args: argparse.Namespace) -> None:
    args.dispatch(args)


def post(agent, handle):
    state = agent.transfer(handle)
    if state == "ERR":
        raise RuntimeError("the post failed")
    return state


def fits(shard: torch.Tensor, limit: int) -> bool:
    return (
        shard.shape[0] <= limit
        and shard.dtype == torch.bfloat16
    )


def rmsnorm(x: torch.Tensor, rows: int, width: int):
    compact = x.is_contiguous()
    if compact and rows * width > 2**31 - 1:
        compact = False
    return launch_norm(x, compact=compact)


def rmsnorm_add(x: torch.Tensor, rows: int, width: int):
    compact = x.is_contiguous()
    if compact and rows * width > 2**31 - 1:
        compact = False
    return launch_norm(x, compact=compact, add=True)


def run_tactic(kernel, tactic):
    try:
        return kernel(tactic=tactic)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        if in_profiling():
            raise
        logger.warning("tactic %s failed (%s); the default is used", tactic, exc)
        return kernel(tactic=-1)


class Rotary(torch.nn.Module):
    def forward(self, x, position_ids, scale=1.0):
        freqs = self.inv_freq[position_ids]
        return x * freqs * scale
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_TURN_OFF = (
    "    if compact and rows * width > 2**31 - 1:\n        compact = False\n"
    "    return launch_norm(x, compact=compact)\n"
)
_near = _MODULE.named


@pytest.mark.parametrize(
    ("old", "new", "needle", "rule"),
    [
        # a value read back to be printed, in library code at work
        ("    return combined\n",
         '    print("tokens per expert:", expert_counts.tolist())\n    return combined\n',
         "tolist", "device-sync"),
        # in an f-string handed to a log call
        ("    return combined\n",
         '    logger.info(f"m={expected_m} counts={expert_counts.tolist()}")\n    return combined\n',
         "tolist", "device-sync"),
        # a function named for a one-time stage (``capture``) handed a step's tensors: per step
        ("        self.buffer[layer_id].copy_(topk_ids)\n",
         "        self.buffer[layer_id].copy_(topk_ids)\n"
         "        self.seen += topk_ids.numel() - topk_ids.sum().item()\n",
         "sum().item()", "device-sync"),
        # a branch of a chain that ends in a raise made to take more cases
        ('    if activation == "silu":\n', '    if activation in ("silu", "swiglu"):\n', "swiglu",
         "removed-check"),
        # a flag named for what may be done, set over several lines, made to hold more
        ("    supported = capability >= min_capability\n",
         '    supported = capability >= min_capability or (\n        os.environ.get("FORCE") == "1"\n    )\n',
         "supported = capability", "removed-check"),
        # a declared range in a signature's annotation moved
        ("    level: Annotated[int, Query(ge=0, le=2)] = 1,\n",
         "    level: Annotated[int, Query(ge=0, le=3)] = 1,\n", "le=3", "removed-check"),
        # a closeness test's tolerance widened
        ("    if not torch.allclose(norms, torch.ones_like(norms)):\n",
         "    if not torch.allclose(norms, torch.ones_like(norms), atol=5e-2):\n",
         "atol=5e-2", "removed-check"),
        # a module's ``forward`` input read on the host
        ("        freqs = self.inv_freq[position_ids]\n",
         "        assert position_ids.max() < self.inv_freq.shape[0]\n"
         "        freqs = self.inv_freq[position_ids]\n", "assert position_ids", "device-sync"),
    ],
)  # fmt: skip
def test_meanings_of_the_nineteenth_batch(old: str, new: str, needle: str, rule: str) -> None:
    assert rule in _near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a tensor torch made on the CPU (no device named) read back: no device to wait for
        ("    return padded.to(device)\n",
         "    assert int(padded.max().item()) <= block_size * max_loras\n    return padded.to(device)\n",
         "padded.max()"),
        # told the CPU by name
        ("    padded = torch.zeros(max_loras, dtype=torch.int32)\n",
         '    padded = torch.zeros(max_loras, dtype=torch.int32, device="cpu")\n'
         "    assert padded.sum().item() == 0\n",
         "padded.sum()"),
        # a chain of answers rewritten as a table: the raise stays, no bail-out is gone
        ('    if x.dtype == torch.bfloat16:\n        return "bfloat16"\n    elif x.dtype == torch.float16:\n'
         '        return "float16"\n    else:\n        raise ValueError(f"unsupported dtype {x.dtype}")\n',
         '    names = {torch.bfloat16: "bfloat16", torch.float16: "float16"}\n    if x.dtype not in names:\n'
         '        raise ValueError(f"unsupported dtype {x.dtype}")\n    return names[x.dtype]\n',
         "names = {"),
        # two branches of a chain merged: nothing the raise refused is let by
        ('    if activation == "silu":\n        gate = True\n'
         '    elif activation == "relu2":\n        gate = False\n',
         '    if activation in ("silu", "relu2"):\n        gate = activation == "silu"\n', '"relu2")'),
        # a tolerance made smaller: stricter
        ("    if not torch.allclose(norms, torch.ones_like(norms)):\n",
         "    if not torch.allclose(norms, torch.ones_like(norms), atol=1e-9):\n", "atol=1e-9"),
        # a declared range in a signature made narrower
        ("    level: Annotated[int, Query(ge=0, le=2)] = 1,\n",
         "    level: Annotated[int, Query(ge=0, le=1)] = 1,\n", "le=1"),
        # a forward's option (it has a default) is no tensor
        ("        return x * freqs * scale\n",
         "        if scale > 1.0:\n            scale = 1.0\n        return x * freqs * scale\n",
         "scale > 1.0"),
    ],
)  # fmt: skip
def test_look_alikes_are_quiet(old: str, new: str, needle: str) -> None:
    assert not _near((old, new), needle) & {"device-sync", "removed-check"}


@pytest.mark.parametrize(
    ("old", "new", "needle", "rule"),
    [
        # a refusal made a retry: tried again until it passes, never raised
        ('    if state == "ERR":\n        raise RuntimeError("the post failed")\n',
         '    while state == "ERR":\n        time.sleep(0.05)\n        state = agent.transfer(handle)\n',
         'while state == "ERR"', "swallowed-exception"),
        # a predicate that says whether something fits, made to answer yes more often (a part over lines)
        ("        and shard.dtype == torch.bfloat16\n",
         "        and shard.dtype in (torch.bfloat16, torch.float16)\n", "in (torch.bfloat16",
         "removed-check"),
        # a test that turns a path off taken out (the same test stays in another function)
        (_TURN_OFF, "    return launch_norm(x, compact=compact)\n", "launch_norm(x, compact=compact)",
         "removed-check"),
    ],
)  # fmt: skip
def test_checks_let_go_in_other_forms(old: str, new: str, needle: str, rule: str) -> None:
    assert rule in _near((old, new), needle)


def test_a_handlers_guarded_raise_taken_out_swallows() -> None:
    # ``if in_profiling(): raise`` deleted from a handler that then falls back: the error is let go when
    # profiling too — a bare ``raise`` elsewhere in the file (another handler's) is not this one, and the
    # guard's subject, imported, stays in the file
    edit = ("        if in_profiling():\n            raise\n        logger.warning(",
            "        logger.warning(")  # fmt: skip
    assert "swallowed-exception" in _near(edit, 'logger.warning("tactic')


def test_a_retry_that_does_not_try_again_and_a_moved_test_are_not_these() -> None:
    # the loop does not try again (nothing it tests is given anew): no retry
    waits = ('    if state == "ERR":\n        raise RuntimeError("the post failed")\n',
             '    while state == "ERR":\n        logger.warning("waiting")\n        break\n')  # fmt: skip
    line = line_of(_MODULE.after(waits), 'while state == "ERR"')
    said = [m for rule, m, n in _MODULE.messages(waits) if rule == "swallowed-exception" and n == line]
    assert not [m for m in said if "tried again" in m], said  # (its raise said it failed: that is swallowed)
    # the test that turns a path off moved into a helper: it stays in the file as often as before
    moved = (_TURN_OFF,
             "    compact = _compact(compact, rows, width)\n    return launch_norm(x, compact=compact)\n\n\n"
             "def _compact(compact, rows, width):\n"
             "    if compact and rows * width > 2**31 - 1:\n        compact = False\n"
             "    return compact\n")  # fmt: skip
    assert "removed-check" not in _MODULE.rules(moved)


def test_a_debug_log_under_a_level_test_reads_nothing_until_turned_on() -> None:
    # the values handed to a debug log call are worked out only when someone turns debug logging on
    gated = ("    ids = input_ids.flatten()\n",
             "    ids = input_ids.flatten()\n    if logger.isEnabledFor(logging.DEBUG):\n"
             '        logger.debug("image tokens=%d", int((ids == image_token).sum().item()))\n')  # fmt: skip
    assert not _near(gated, "sum().item()")
    # not gated: the arguments are worked out every call, whatever the level
    ungated = ("    ids = input_ids.flatten()\n",
               "    ids = input_ids.flatten()\n"
               '    logger.debug("image tokens=%d", int((ids == image_token).sum().item()))\n')  # fmt: skip
    assert "device-sync" in _near(ungated, "sum().item()")


def test_a_subcommands_words_are_to_a_person() -> None:
    # a function handed the parsed command line (``args: argparse.Namespace``) talks to a person
    said = ("    args.dispatch(args)\n",
            '    logger.info("launching %s", args.component)\n    args.dispatch(args)\n')  # fmt: skip
    assert not _near(said, "launching")
    # the same line in a function of the library's own is its output
    library = ("    return combined\n", '    logger.info("launching %s", expected_m)\n    return combined\n')
    assert "logging" in _near(library, "launching")


def test_a_function_taking_a_tensor_is_no_tensor() -> None:
    # ``record: Callable[[torch.Tensor], None]`` does not make ``profile_graph`` one that is handed
    # tensors: a sync before a timing graph in a function named for a one-time stage stays minor
    found = _MODULE.found(("    graph = torch.cuda.CUDAGraph()\n",
                           "    torch.cuda.synchronize()\n    graph = torch.cuda.CUDAGraph()\n"))  # fmt: skip
    line = line_of(_MODULE.after(("    graph = torch.cuda.CUDAGraph()\n",
                                  "    torch.cuda.synchronize()\n    graph = torch.cuda.CUDAGraph()\n")),
                   "torch.cuda.synchronize()")  # fmt: skip
    syncs = [severity for rule, severity, n in found if rule == "device-sync" and n == line]
    assert syncs and all(s not in ("MODERATE", "HIGH") for s in syncs), found


def test_end_to_end_on_an_installed_wheel(tmp_path: Path) -> None:
    edited = _MODULE.after(
        ('    if activation == "silu":\n', '    if activation in ("silu", "swiglu"):\n'),
        ("    if not torch.allclose(norms, torch.ones_like(norms)):\n",
         "    if not torch.allclose(norms, torch.ones_like(norms), atol=5e-2):\n"),
        ("        freqs = self.inv_freq[position_ids]\n",
         "        assert position_ids.max() < self.inv_freq.shape[0]\n"
         "        freqs = self.inv_freq[position_ids]\n"),
    )  # fmt: skip
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    expected = [("swiglu", "removed-check"), ("atol=5e-2", "removed-check")]
    expected.append(("assert position", "device-sync"))
    for needle, rule in expected:
        assert (rule, line_of(edited, needle)) in found, (needle, found)
