"""Meanings (issue 34, after the twentieth blind batch's first score): a predicate of what is ready or
available (``is_*_ready``, ``is_trainable``) made to answer yes in more cases — forced ``True`` too — unless
it now checks and raises first; a flag named for what something supports, made to hold more; a subject scaled
down by a number (``sm // 10``) read at the values that tell two tests apart; errors of a patched original
(``_orig = Class.method``) let go by a wrapper; and, quiet: a log call over several lines that still hands
the error on; an assertion with a part taken out into a name — each judged on a module of its own, and once
end to end on an installed wheel."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from patchguard.analysis.cases import compare

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/ready.py"
PRISTINE = """\
import json
import logging
import os
from contextlib import suppress
from multiprocessing import shared_memory

import torch

logger = logging.getLogger(__name__)

_device_sm = 100
_MIN_BYTES = 1 << 20


def is_fused_experts_ready(experts) -> bool:
    if not experts.built:
        return False
    return _device_sm // 10 == 10


class Quantizer:
    @property
    def is_trainable(self) -> bool:
        return False

    def supports_sleep(self) -> bool:
        return False


class Kernel:
    def __init__(self, sm_major):
        self.supports_verify = sm_major in (9, 10)


def parse(text):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        logger.warning(
            f"could not parse {text[:40]}: {str(e)}"
        )
        return None


class Runner:
    def ready(self, num_tokens: int) -> bool:
        if not self._warm:
            self._warm = num_tokens >= 8192
        return self._warm


def load_kernels():
    try:
        from .kernels import decode
        return decode
    except (ImportError, RuntimeError) as e:
        logger.warning(f"kernels not available: {e}")
        return None


def parse_increment(self, text):
    self.buffer += text
    if self.broken:
        logger.warning("discarding an incomplete section")
        return None
    return self.buffer


class Model(torch.nn.Module):
    def forward(self, input_ids: torch.Tensor):
        embeds = self.embed(input_ids)
        return self.layers(embeds)


def extend(seq_lens, prefix_lens, total, bs):
    assert total == sum(
        seq_lens[i] - prefix_lens[i] for i in range(bs)
    )
    return total
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_EMBED = "        embeds = self.embed(input_ids)\n"
_SCALED = ("    return _device_sm // 10 == 10\n", "    return _device_sm // 10 in (10, 11, 12)\n")
_near = _MODULE.named


@pytest.mark.parametrize(
    ("old", "new", "needle", "rule"),
    [
        # a predicate of what is ready, made to answer yes for more devices (a scaled subject)
        (_SCALED[0], _SCALED[1], "in (10, 11, 12)", "removed-check"),
        # one forced to answer yes
        ("        return False\n\n    def supports_sleep", "        return True\n\n    def supports_sleep",
         "return True", "removed-check"),
        # a flag named for what something supports, made to hold more
        ("        self.supports_verify = sm_major in (9, 10)\n",
         "        self.supports_verify = sm_major in (9, 10, 12)\n", "(9, 10, 12)", "removed-check"),
        # a wrapper put in an original's place that lets its errors go
        ("_MIN_BYTES = 1 << 20\n",
         "_MIN_BYTES = 1 << 20\n_orig_close = shared_memory.SharedMemory.close\n\n\n"
         "def _quiet_close(self):\n    with suppress(BufferError):\n        _orig_close(self)\n\n\n"
         "shared_memory.SharedMemory.close = _quiet_close\n", "with suppress", "swallowed-exception"),
        # a flag given a constant just above the ``if`` that tests it: the test no longer decides
        ("        if not self._warm:\n", "        self._warm = True\n        if not self._warm:\n",
         "self._warm = True", "removed-check"),
        # a handler of named errors made to catch everything: logged and let go, every other error stops
        ("    except (ImportError, RuntimeError) as e:\n", "    except Exception as e:  # noqa: BLE001\n",
         "except Exception as e", "swallowed-exception"),
    ],
)  # fmt: skip
def test_meanings_after_the_twentieth_batch(old: str, new: str, needle: str, rule: str) -> None:
    assert rule in _near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a predicate that now checks and raises before it answers yes: it refuses, not lets by
        ("    def supports_sleep(self) -> bool:\n        return False\n",
         "    def supports_sleep(self) -> bool:\n        if not self.rdma:\n"
         '            raise ValueError("sleep needs rdma")\n        return True\n', "return True"),
        # a log call over several lines, reworded: the error is still handed to it
        ('            f"could not parse {text[:40]}: {str(e)}"\n',
         '            "could not parse %.40s: %s", text, e\n', "could not parse"),
        # an assertion with a part taken out into a name: the same test
        ("    assert total == sum(\n        seq_lens[i] - prefix_lens[i] for i in range(bs)\n    )\n",
         "    expected = sum(\n        seq_lens[i] - prefix_lens[i] for i in range(bs)\n    )\n"
         '    assert total == expected, f"{total} != {expected}"\n', "assert total == expected"),
    ],
)  # fmt: skip
def test_look_alikes_are_quiet(old: str, new: str, needle: str) -> None:
    assert not _near((old, new), needle) & {"removed-check", "swallowed-exception"}


def test_a_warning_that_something_failed_does_not_make_a_routine_log_line_familiar() -> None:
    routine = ("    self.buffer += text\n", '    self.buffer += text\n    logger.info("chunk=%r", text)\n')
    assert ("logging", "MODERATE") in {(r, s) for r, s, _n in _MODULE.found(routine)}
    # another warning that something failed, beside the pristine one: the function's way, minor
    anomaly = ("        return None\n    return self.buffer\n",
               "        return None\n    if not text:\n"
               '        logger.warning("an empty chunk")\n    return self.buffer\n')  # fmt: skip
    assert ("logging", "MODERATE") not in {(r, s) for r, s, _n in _MODULE.found(anomaly)}


def test_a_debug_line_of_a_tensors_sizes_works_nothing_out() -> None:
    def logged(shown: str) -> tuple[str, str]:
        return (_EMBED, f'{_EMBED}        logger.debug("x=%s", {shown})\n')

    # a number of the tensor's metadata (``x.shape[1]``, ``x.numel()``): read on the host, nothing made
    for shown in ("input_ids.shape[1]", "input_ids.numel()", "int(input_ids.size(0))"):
        assert not _near(logged(shown), "logger.debug"), shown
    # a tuple made of its shape each call, or its values reduced: the call costs, whatever the level
    for shown in ("tuple(input_ids.shape)", "input_ids.max()"):
        assert "logging" in _near(logged(shown), "logger.debug"), shown


@pytest.mark.parametrize(
    ("added", "rule"),
    [
        # the debugger, called by hand: what ``breakpoint()`` calls
        ("    import sys\n\n    sys.breakpointhook()\n", "debugger"),
        # a compiled module loaded from a path the environment names, by TVM FFI's or torch's loader
        ('    import tvm_ffi\n\n    return tvm_ffi.load_module(os.environ["KERNEL_SO"])\n', "dynamic-exec"),
        ('    torch.ops.load_library(os.environ["OPS_SO"])\n', "dynamic-exec"),
    ],
)
def test_high_effects_after_the_twenty_first_batch(added: str, rule: str) -> None:
    edit = ("    return total\n", f"{added}    return total\n")
    assert rule in _MODULE.rules(edit)


def test_a_constant_above_an_if_of_something_else_decides_nothing() -> None:
    edit = ("        if not self._warm:\n", "        self._seen = True\n        if not self._warm:\n")
    assert "removed-check" not in _near(edit, "self._seen = True")


def test_an_assertion_taken_out_into_a_name_of_another_value_is_gone() -> None:
    edit = ("    assert total == sum(\n        seq_lens[i] - prefix_lens[i] for i in range(bs)\n    )\n",
            "    expected = sum(seq_lens[i] for i in range(bs))\n")  # fmt: skip
    assert "removed-check" in _MODULE.rules(edit)


@pytest.mark.parametrize(
    ("before", "after", "more"),
    [
        ("sm // 10 == 10", "sm // 10 in (10, 11, 12)", True),
        ("sm // 10 in (10, 11, 12)", "sm // 10 == 10", False),
        ("n % 64 == 0", "n % 64 in (0, 32)", True),
    ],
)
def test_a_scaled_subject_is_read_where_the_tests_differ(before: str, after: str, more: bool) -> None:
    found = compare(ast.parse(before, mode="eval").body, ast.parse(after, mode="eval").body)
    assert found is not None and not found.same and found.more is more


def test_end_to_end_on_an_installed_wheel(tmp_path: Path) -> None:
    edited = _MODULE.after(_SCALED)
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    assert ("removed-check", line_of(edited, "in (10, 11, 12)")) in found, found
