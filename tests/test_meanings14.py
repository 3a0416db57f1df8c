"""Meanings (issue 34, the fourteenth blind batch's misses): a deciding ``return`` over several lines made
constant; a collection named for what is refused, asked through set algebra, that shrinks; an allow-list
tested by an ``if`` whose body calls what raises; a bail-out (or a checklist of what disqualifies) that fires
less; a function handed the step's batch by its declared type works on the device; ``torch.testing``'s
comparisons read values back; a raise that passed on a failure given a stand-in; a handler that no longer
hands on (or keeps) what it caught; a check of another module replaced; a check taken out of a list of
checks; a local made for a check removed with it; ``gc.set_threshold``; a lenient keyword given to a call
that was not told; a call named for what it answers forced; a log line made louder where the function only
logged quieter; a call told to exit; an assertion whose message goes on below; a named allow-list handed to
a call; a suppression narrowed — each judged on a module of its own, with look-alikes that must stay quiet,
and once end to end on an installed wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/checks.py"
PRISTINE = """\
import contextlib
import faulthandler
import gc
import logging

import numpy as np
import torch

from . import backend as _backend
from .batch import ForwardBatch

logger = logging.getLogger(__name__)

_UNSUPPORTED_KEYWORDS = frozenset(
    {
        "contains",
        "else",
        "if",
    }
)
_FORMATS = frozenset(
    {
        "date",
        "uuid",
    }
)
ALLOWED_IMAGE_FORMATS = (
    "BMP",
    "PNG",
)


def open_image(fp, opener):
    return opener(fp, formats=ALLOWED_IMAGE_FORMATS)


def validate(schema):
    unsupported = sorted(_UNSUPPORTED_KEYWORDS.intersection(schema))
    if unsupported:
        _raise_unsupported("xgrammar", f"keywords {unsupported}")
    name = schema.get("format")
    if (
        not isinstance(name, str)
        or name not in _FORMATS
    ):
        _raise_unsupported("xgrammar", f"format {name!r}")


def can_think_more(self):
    return (
        self.max_think < 0
        or self.think_tokens < self.max_think
    )


def permute_supported():
    return torch.ops.moe.permute_supported()


def nvlink_comm(group):
    comm = getattr(group, "comm", None)
    if comm is None or not getattr(comm, "has_multicast", False):
        return None
    return comm


def fast_argmax(logits):
    if (
        not logits.is_cuda
        or logits.ndim != 2
        or logits.stride(1) != 1
        or logits.shape[1] < 4096
    ):
        return logits.argmax(dim=-1)
    return kernel_argmax(logits)


def pick(x, mode):
    if mode == "a" or mode == "b":
        return path_a(x)
    return path_c(x)


class Backend:
    def prepare_lora_batch(self, forward_batch: ForwardBatch, ranks: list[int]):
        slots = forward_batch.token_slots[: len(ranks)]
        self.slots = slots
        return slots

    def plan(self, config, ranks: list[int]):
        slots = config.slots[: len(ranks)]
        return slots

    def push(self, local: torch.Tensor):
        pushed = self._push(local)
        return pushed

    def check(self, result) -> None:
        if result != 0:
            text = self.error_string(result)
            raise RuntimeError(f"CUDART error: {text}")

    def check_rank(self, rank) -> None:
        if rank > 64:
            raise ValueError("rank over 64")

    def record_batch(self, batch):
        try:
            logger.debug("batch of %d", batch.size)
            self.gauge.set(batch.size)
        except Exception:
            logger.warning("metrics failed")
        return batch


async def batch_tokenize(futures, work):
    try:
        results = await work()
    except Exception as e:
        logger.error("batch failed: %s", e)
        for fut in futures:
            fut.set_exception(e)
        return None
    return results


def grammar_done(self):
    try:
        self._grammar = self._grammar.result()
    except Exception as e:
        self._grammar = e
    return True


def get_default_validity_checks():
    return [
        single_softmax_rule,
        indices_terminal_rule,
    ]


def get_default_processors():
    return [
        top_k_processor,
        top_p_processor,
    ]


def parse_schedule(parsed):
    first_start = parsed[0][0]
    if first_start != 1:
        raise ValueError(
            "The first range must start at 1"
        )
    return parsed


def freeze():
    gc.collect()
    gc.freeze()


def load_numpy(buffer):
    return torch.from_numpy(np.load(buffer))


def enter(self):
    assert self.comm.nccl_version >= 22703, (
        "NCCL 2.27.3 is required"
    )
    return self


def extra_config(config):
    allowed_keys = {
        "threads",
        "track",
    }
    unexpected = set(config) - allowed_keys
    if unexpected:
        raise ValueError(f"unexpected {unexpected}")


def normalize(image):
    with contextlib.suppress(Exception):
        image = transpose(image)
    return image


def hang_watch(self):
    self.ready = True
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_near, _rules, _found = _MODULE.near, _MODULE.rules, _MODULE.found


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a deciding return over several lines made constant
        ("    return (\n        self.max_think < 0\n        or self.think_tokens < self.max_think\n    )\n",
         "    return True\n", "return True"),
        # what a call named for the answer said, forced
        ("    return torch.ops.moe.permute_supported()\n", "    return True\n", "return True"),
        # a deny-list asked through set algebra, shrunk
        ('        "else",\n        "if",\n', "", '"contains"'),
        # an allow-list tested by an if whose body calls what raises, grown
        ('        "uuid",\n', '        "uuid",\n        "phone",\n', '"phone"'),
        # a named allow-list handed to a call, grown
        ('    "PNG",\n', '    "PNG",\n    "EPS",\n', '"EPS"'),
        # a bail-out that fires less
        ('    if comm is None or not getattr(comm, "has_multicast", False):\n', "    if comm is None:\n",
         "if comm is None:"),
        # a checklist of what disqualifies the fast path, one part taken out
        ("        or logits.stride(1) != 1\n", "", "logits.shape[1] < 4096"),
        # a check taken out of a list of checks
        ("        single_softmax_rule,\n", "", "indices_terminal_rule"),
        # a local made for the check, taken out with it
        ('    first_start = parsed[0][0]\n    if first_start != 1:\n        raise ValueError(\n'
         '            "The first range must start at 1"\n        )\n', "", "    return parsed"),
        # a lenient keyword given to a call that was not told
        ("np.load(buffer))", "np.load(buffer, allow_pickle=True))", "allow_pickle"),
        # an assertion whose message goes on below the edited line
        ("nccl_version >= 22703", "nccl_version >= 22600", "22600"),
    ],
)  # fmt: skip
def test_a_check_let_go(old: str, new: str, needle: str) -> None:
    assert "removed-check" in _near((old, new), needle)


def test_a_check_of_another_module_replaced() -> None:
    edit = ("def open_image(fp, opener):\n",
            "_backend.check_inputs = lambda x: x.shape\n\n\ndef open_image(fp, opener):\n")  # fmt: skip
    from patchguard.analysis import CodeChange, analyse

    change = CodeChange(ENGINE, PRISTINE.encode(), _MODULE.after(edit).encode(), "pkg", "1.0")
    line = line_of(_MODULE.after(edit), "check_inputs")
    found = [f for f in analyse(change) if f.line == line]
    assert [str(f.rule) for f in found] == ["monkeypatch"]  # one finding on the line, naming both
    assert "also removed-check" in found[0].message
    helper = ("def open_image(fp, opener):\n",
              "_backend.helper = lambda x: x.shape\n\n\ndef open_image(fp, opener):\n")  # fmt: skip
    assert _near(helper, "_backend.helper") == {"monkeypatch"}


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a list of what is no check, shrunk
        ("        top_k_processor,\n", "", "top_p_processor"),
        # a branch of two parts that does its work elsewhere, loosened: a dispatch, no checklist
        ('    if mode == "a" or mode == "b":\n', '    if mode == "a":\n', 'if mode == "a":'),
        # an allow-list of keys a set difference reads, grown: a new option
        ('        "track",\n', '        "track",\n        "progress",\n', '"progress"'),
        # a keyword given that makes the call stricter
        ("np.load(buffer))", "np.load(buffer, allow_pickle=False))", "allow_pickle"),
    ],
)  # fmt: skip
def test_look_alikes_of_a_check_let_go_are_quiet(old: str, new: str, needle: str) -> None:
    assert "removed-check" not in _near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a raise that passed on what a call reported, given a warning
        ('            raise RuntimeError(f"CUDART error: {text}")\n',
         '            logger.warning(f"CUDART error ignored: {text}")\n', "CUDART error ignored"),
        # a handler that handed the error to whoever waits for it, handing a default now
        ("            fut.set_exception(e)\n", '            fut.set_result({"ids": []})\n', "set_result"),
        # one that kept it for later, keeping nothing
        ("        self._grammar = e\n", "        self._grammar = None\n", "self._grammar = None"),
        # a suppression widened
        ("    with contextlib.suppress(Exception):\n        image = transpose(image)\n",
         "    with contextlib.suppress(BaseException):\n        image = transpose(image)\n", "suppress"),
    ],
)  # fmt: skip
def test_an_error_let_go(old: str, new: str, needle: str) -> None:
    assert "swallowed-exception" in _near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a validation raise turned into a warning: a check gone, nothing swallowed
        ('            raise ValueError("rank over 64")\n', '            logger.warning("rank over 64")\n',
         "rank over 64"),
        # the handler still hands the error on
        ("            fut.set_exception(e)\n", "            fut.set_exception(RuntimeError(str(e)))\n",
         "set_exception"),
        # a suppression narrowed
        ("    with contextlib.suppress(Exception):\n",
         "    with contextlib.suppress(OSError, ValueError):\n", "suppress"),
    ],
)  # fmt: skip
def test_errors_still_seen_are_quiet(old: str, new: str, needle: str) -> None:
    assert "swallowed-exception" not in _near((old, new), needle)


def test_a_function_handed_the_steps_batch_works_on_the_device() -> None:
    assertion = "        assert bool(((slots >= -1) & (slots < 8)).all())\n"
    edit = ("        self.slots = slots\n", f"        self.slots = slots\n{assertion}")
    assert "device-sync" in _near(edit, "assert bool")
    quiet = ("        slots = config.slots[: len(ranks)]\n",
             f"        slots = config.slots[: len(ranks)]\n{assertion}")  # fmt: skip
    assert "device-sync" not in _near(quiet, "assert bool")


def test_torch_testing_reads_values_back() -> None:
    edit = ("        pushed = self._push(local)\n",
            "        pushed = self._push(local)\n"
            "        torch.testing.assert_close(pushed, local)\n")  # fmt: skip
    assert "device-sync" in _near(edit, "assert_close")


def test_process_wide_collector_settings() -> None:
    edit = ("    gc.freeze()\n", "    gc.freeze()\n    gc.set_threshold(50_000, 20, 100)\n")
    assert "global-switch" in _near(edit, "set_threshold")


def test_a_log_line_made_louder_where_the_function_logged_quieter() -> None:
    edit = ("logger.debug(\"batch of", "logger.info(\"batch of")
    assert "logging" in _near(edit, "logger.info")


def test_a_call_told_to_exit() -> None:
    told = ("    self.ready = True\n",
            "    self.ready = True\n    faulthandler.dump_traceback_later(1800, exit=True)\n")  # fmt: skip
    assert "process-exit" in _near(told, "dump_traceback_later")
    untold = (
        "    self.ready = True\n",
        "    self.ready = True\n    faulthandler.dump_traceback_later(1800)\n",
    )
    assert "process-exit" not in _near(untold, "dump_traceback_later")


def test_end_to_end_on_an_installed_wheel(tmp_path: Path) -> None:
    edited = _MODULE.after(
        ('        "else",\n        "if",\n', ""),
        ("            fut.set_exception(e)\n", '            fut.set_result({"ids": []})\n'),
        ('    "PNG",\n', '    "PNG",\n    "EPS",\n'),
    )
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    for needle, rule in (('"contains"', "removed-check"), ("set_result", "swallowed-exception"),
                         ('"EPS"', "removed-check")):  # fmt: skip
        line = line_of(edited, needle)
        assert any(r == rule and abs(n - line) <= 1 for r, n in found), (needle, found)
