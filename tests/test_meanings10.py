"""Meanings (issue 34, the tenth blind batch's misses): a condition read by cases — a refusal that holds in
fewer cases, a skip past a refusal that holds in more, an answer of "is it supported" that says yes more
often, whatever the spelling (a range for a set, an exclusive-or, one more ``and``); a clamp taken off in
place (an index, a return) or given by ``out=``, a ``where`` that mended a value deleted; an error a handler
kept no longer raised; host reads of what torch's ``allclose`` and MLX's ``eval`` return; a name a tensor
method is called on, and what a tensor indexes, held tensors; a kernel imported and launched on a grid; a
sleep in a worker's loop that blocks for its work; arrays written as media files — each judged on a module
of its own, edited as a person would, with look-alikes that must stay quiet, and once end to end on an
installed wheel."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from patchguard.analysis.cases import compare

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/runner.py"
PRISTINE = """\
import logging
import time

import numpy as np
import torch
from scipy.io import wavfile

from .kernels import gemm_kernel

logger = logging.getLogger(__name__)


class Config:
    def __post_init__(self) -> None:
        if self.e4m3_max not in (256, 448):
            raise ValueError("E4M3 max must be 256 or 448")
        if (self.input_ids is None) ^ (self.inputs_embeds is not None):
            raise ValueError("exactly one of input_ids or inputs_embeds")


def check_manifest(sent, manifest):
    for name, dtype, shape in sent:
        declared = manifest.get(name)
        if declared == (dtype, tuple(shape)):
            continue
        raise ValueError(f"{name} does not match its declaration")


class Backend:
    @classmethod
    def supports_compute_capability(cls, capability) -> bool:
        return capability.major in [9, 10]

    @staticmethod
    def supported_headdim(prefix) -> bool:
        return prefix.shape[2] % 8 == 0


class Runner:
    def shutdown(self, connectors) -> None:
        exception = None
        for c in connectors:
            try:
                c.shutdown()
            except Exception as e:
                logger.exception("shutdown of %s failed", c)
                exception = e
        if exception:
            raise exception

    def _decode(self, num_reqs: int, positions: torch.Tensor, cap: torch.Tensor) -> None:
        draft_tokens = self.sample_draft(num_reqs)
        torch.clamp(positions[:num_reqs] + 1, max=cap - 1, out=positions[:num_reqs])
        self.input_ids[:num_reqs].copy_(draft_tokens.int())

    def contexts(self, ids: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return ids[rows, positions.clamp(0, ids.shape[1] - 1)]

    def route(self, gate_weights: torch.Tensor) -> torch.Tensor:
        renorm = torch.sum(gate_weights, dim=-1, keepdim=True)
        renorm = torch.where(renorm > 0.0, renorm, 1.0)
        return gate_weights / renorm

    def masked(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = torch.where(mask, x, 0.0)
        return x

    def check_pages(self, table, idx: torch.Tensor, mask: torch.Tensor) -> None:
        owner = table[idx][mask]
        self.last = owner

    def _load_loop(self, stream) -> None:
        while True:
            item = self._load_queue.get()
            if item is None:
                return
            self._do_load(item, stream)

    def preprocess(self, inputs, rate):
        inputs = np.asarray(inputs, dtype=np.float32)
        return inputs


def gemm_persistent(a, b, c):
    grid = (4,)
    gemm_kernel[grid](a, b, c)
    return c
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_after, _found, _line = _MODULE.after, _MODULE.found, line_of


_near, _rules = _MODULE.near, _MODULE.rules


def _expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


@pytest.mark.parametrize(
    ("before", "after", "fewer", "more"),
    [
        ("x not in (256, 448)", "not 0 < x <= 448", True, False),  # 384 passes now
        ("(a is None) ^ (b is not None)", "a is None and b is None", True, False),  # both given passes
        ("a == f(b) and c != 1.0", "a == f(b) and c != 1.0 and not g(c)", True, False),
        ("d == (t, s)", "d is None or d == (t, s)", False, True),
        ("m in [9, 10]", "m >= 9", False, True),
        ("h % 8 == 0", "h % 8 == 0 or h % 2 == 0", False, True),
        ("n > 8", "n > 16", True, False),
        ("cap < (8, 9)", "cap < (8, 0)", True, False),
        # the same condition, spelled otherwise: neither
        ("x > 5 and y", "y and x > 5", False, False),
        ("a or b", "b or a", False, False),
        ("x is not None and x > 3", "x is not None and 3 < x", False, False),
        ("not (x < 0 or x > 9)", "0 <= x <= 9", False, False),
        # a container as a truth value: its length not zero, where the length is asked too
        ("not xs or len(xs) == 0", "not xs", False, False),
        ("not xs or len(xs) > 4", "not xs", True, False),
        # a flag tested by identity takes its own truth value
        ("c.on is False", "c.on is False and not w.enforce", True, False),
        # numbers joined by ``&`` work bit by bit (``n & (n - 1)``: not a power of two)
        ("n <= 0 or n > 32 or n & (n - 1)", "n <= 0 or n > 64 or n & (n - 1)", True, False),
        # a prefix test given more prefixes
        ('not f.startswith("a.")', 'not f.startswith(("a.", "b."))', True, False),
    ],
)  # fmt: skip
def test_two_conditions_are_compared_by_cases(before: str, after: str, fewer: bool, more: bool) -> None:
    found = compare(_expr(before), _expr(after))
    assert found is not None
    assert (found.fewer, found.more) == (fewer, more)
    spelled_otherwise = not fewer and not more
    assert found.same == spelled_otherwise


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("x > 5", "y > 5"),  # nothing tested in common
        ("f(lambda: 1)", "f(lambda: 2)"),  # an expression the cases do not read
        ("a0 > 1 and a1 > 1 and a2 > 1 and a3 > 1 and a4 > 1 and a5 > 1 and a6 > 1",
         "a0 > 2 and a1 > 1 and a2 > 1 and a3 > 1 and a4 > 1 and a5 > 1 and a6 > 1"),  # too many cases
    ],
)  # fmt: skip
def test_what_cannot_be_read_by_cases_says_nothing(before: str, after: str) -> None:
    assert compare(_expr(before), _expr(after)) is None


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a set of allowed values widened into a range
        ("if self.e4m3_max not in (256, 448):", "if not 0 < self.e4m3_max <= 448:", "<= 448"),
        # "exactly one of" relaxed to "at least one of"
        ("if (self.input_ids is None) ^ (self.inputs_embeds is not None):",
         "if self.input_ids is None and self.inputs_embeds is None:", "and self.inputs_embeds is None"),
        # the skip past a refusal widened
        ("        if declared == (dtype, tuple(shape)):\n",
         "        if declared is None or declared == (dtype, tuple(shape)):\n", "declared is None or"),
        # an answer of "supported" that says yes more often
        ("return capability.major in [9, 10]", "return capability.major >= 9", ">= 9"),
        ("return prefix.shape[2] % 8 == 0", "return prefix.shape[2] % 8 == 0 or prefix.shape[2] % 2 == 0",
         "% 2 == 0"),
        # a clamp by out= taken out
        ("        torch.clamp(positions[:num_reqs] + 1, max=cap - 1, out=positions[:num_reqs])\n",
         "        positions[:num_reqs] += 1\n", "+= 1"),
        # a clamp taken off in place, in an index
        ("positions.clamp(0, ids.shape[1] - 1)]", "positions]", "ids[rows, positions]"),
        # a where that mended a value, deleted
        ("        renorm = torch.where(renorm > 0.0, renorm, 1.0)\n", "", "return gate_weights / renorm"),
    ],
)  # fmt: skip
def test_a_check_weakened_read_by_cases(old: str, new: str, needle: str) -> None:
    assert "removed-check" in _near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # the same refusal spelled otherwise
        ("if self.e4m3_max not in (256, 448):", "if self.e4m3_max not in {448, 256}:"),
        # a refusal made stricter
        ("if self.e4m3_max not in (256, 448):", "if self.e4m3_max != 448:"),
        # an answer of "supported" that says yes less often
        ("return capability.major in [9, 10]", "return capability.major == 9"),
        # a skip past a refusal narrowed
        ("        if declared == (dtype, tuple(shape)):\n",
         "        if declared is not None and declared == (dtype, tuple(shape)):\n"),
        # a clamp given another bound, kept
        ("positions.clamp(0, ids.shape[1] - 1)]", "positions.clamp(0, ids.shape[1] - 2)]"),
        # a where that selects, not mends (its test does not read the value), deleted: no check
        ("        x = torch.where(mask, x, 0.0)\n", ""),
    ],
)  # fmt: skip
def test_look_alikes_of_a_weakened_check_are_quiet(old: str, new: str) -> None:
    rules = {rule for rule, severity, _n in _found((old, new)) if severity in ("MODERATE", "HIGH")}
    assert "removed-check" not in rules


def test_an_error_a_handler_kept_no_longer_raised_is_swallowed() -> None:
    edit = ("            raise exception\n", "            logger.warning('ignoring: %s', exception)\n")
    assert "swallowed-exception" in _near(edit, "ignoring")


def test_a_raise_of_a_new_error_taken_out_is_no_swallowing() -> None:
    edit = ("        raise ValueError(f\"{name} does not match its declaration\")\n",
            "        logger.warning('%s does not match', name)\n")  # fmt: skip
    rules = _near(edit, "does not match'")
    assert "removed-check" in rules and "swallowed-exception" not in rules


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a tensor method called on what a sampler returned: a tensor, read in an if
        ("        self.input_ids[:num_reqs]",
         "        if (draft_tokens < 0).any():\n            raise RuntimeError('negative')\n"
         "        self.input_ids[:num_reqs]", "(draft_tokens < 0).any()"),
        # what a tensor indexes is a tensor, decided in an if
        ("        self.last = owner\n",
         "        if (owner < 0).any():\n            raise ValueError('bad page')\n", "(owner < 0).any()"),
        # torch.allclose answers a Python bool: the host waits, in a launcher of an imported kernel
        ("    return c\n", "    if not torch.allclose(c, a @ b):\n        raise RuntimeError('mismatch')\n"
         "    return c\n", "allclose"),
    ],
)  # fmt: skip
def test_host_reads_found_by_what_the_code_does(old: str, new: str, needle: str) -> None:
    assert "device-sync" in _near((old, new), needle)


def test_a_kernel_launcher_of_an_imported_kernel_is_on_the_device_path() -> None:
    edit = ("    return c\n", "    n = c.sum().item()\n    return c\n")
    assert "device-sync" in _near(edit, "c.sum().item()")


def test_a_sleep_in_a_worker_loop_that_blocks_for_work_holds_the_work_up() -> None:
    load = "            self._do_load(item, stream)\n"
    edit = (load, "            time.sleep(0.002)\n" + load)
    assert "sleep" in _near(edit, "time.sleep")


def test_an_array_written_as_a_wav_file_is_a_dump() -> None:
    back = "        return inputs\n"
    edit = (back, "        wavfile.write('/var/tmp/in.wav', rate, inputs)\n" + back)
    assert "tensor-dump" in _near(edit, "wavfile.write")


def test_scan_finds_them_on_an_installed_wheel(tmp_path: Path) -> None:
    """End to end: a real wheel installed, edited in place as a person would, scanned against the wheel."""
    edited = _after(
        ("if self.e4m3_max not in (256, 448):", "if not 0 < self.e4m3_max <= 448:"),
        ("return capability.major in [9, 10]", "return capability.major >= 9"),
        ("            raise exception\n", "            logger.warning('ignoring: %s', exception)\n"),
    )
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    assert ("removed-check", _line(edited, "<= 448")) in found
    assert ("removed-check", _line(edited, ">= 9")) in found
    assert ("swallowed-exception", _line(edited, "ignoring")) in found
