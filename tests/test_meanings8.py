"""Meanings (issue 34, the eighth blind batch's misses): an assertion that asks less, a part deep in a
condition loosened (inside ``any(…)``, a divisor), a check that mends rather than refuses, a clamp taken
out, an ordering between streams taken out, a block forced never to run, an answer forced by an early
``return None``, what a ``get_supported_*`` allows grown, a trust flag forced, a busy wait on a clock, a
handler widened that no longer raises — each judged on a module of its own, edited as a person would, and
once end to end on an installed wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchguard.analysis import CodeChange, analyse

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/runner.py"
PRISTINE = """\
import logging
import time

import torch
import torch.distributed as dist

from .utils import maybe_detect_oob

logger = logging.getLogger(__name__)


class Runner:
    def __init__(self, vocab_size: int, page_size: int) -> None:
        self.vocab_size = vocab_size
        if page_size <= 0 or page_size % 64 != 0:
            raise ValueError("page_size must be a positive multiple of 64")
        self.page_size = page_size
        self.done = None

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        return [64, 128, 256]

    def add(self, top_k: int, ids: list) -> int:
        if any((not isinstance(i, int) or i < 0) for i in ids):
            raise ValueError("ids must be non-negative ints")
        if top_k <= 0 or top_k > self.vocab_size:
            top_k = self.vocab_size
        return top_k

    def step(self, num_reqs: int, cap: int, evicted: int, stream, x):
        num_reqs = min(num_reqs, cap)
        assert evicted >= 0 and evicted % self.page_size == 0
        stream.wait_event(self.done)
        maybe_detect_oob(x, 0, self.vocab_size)
        if num_reqs > 1 << 20:
            self.table.fill_(-1)
        return num_reqs

    def stale(self, rows):
        if rows is None:
            return None
        mask = rows > 0
        return mask

    def load_config(self, path: str, trust_remote_code: bool = False):
        if path.endswith(".json"):
            trust_remote_code = False
        return path, trust_remote_code

    def gather(self, t):
        try:
            return dist.all_gather(t)
        except AssertionError:
            raise AssertionError("not distributed")

    def timed(self, t):
        torch.cuda.synchronize()
        return t * 2
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_after, _found, _line = _MODULE.after, _MODULE.found, line_of


def _rules_near(edit: tuple[str, str], needle: str) -> set[str]:
    line = _line(_after(edit), needle)
    return {rule for rule, severity, n in _found(edit) if abs(n - line) <= 1 and severity == "MODERATE"}


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # an assertion that asks less
        ("        assert evicted >= 0 and evicted % self.page_size == 0\n",
         "        assert evicted >= 0\n", "assert evicted >= 0"),
        # a part of the test inside any(...) taken out
        ("        if any((not isinstance(i, int) or i < 0) for i in ids):\n",
         "        if any(not isinstance(i, int) for i in ids):\n", "if any(not isinstance"),
        # a divisor made a divisor of itself
        ("page_size % 64 != 0:", "page_size % 16 != 0:", "page_size % 16"),
        # a check that mends the value, loosened
        ("        if top_k <= 0 or top_k > self.vocab_size:\n", "        if top_k <= 0:\n", "if top_k <= 0:"),
        # a clamp taken out
        ("        num_reqs = min(num_reqs, cap)\n",
         "        # num_reqs = min(num_reqs, cap)\n", "# num_reqs"),
        # an ordering between streams taken out
        ("        stream.wait_event(self.done)\n",
         "        # stream.wait_event(self.done)\n", "# stream.wait"),
        # a call that detects, commented out
        ("        maybe_detect_oob(x, 0, self.vocab_size)\n",
         "        # maybe_detect_oob(x)\n", "# maybe_detect"),
        # a block that does work, forced never to run
        ("        if num_reqs > 1 << 20:\n", "        if False and num_reqs > 1 << 20:\n", "if False and"),
        # an answer forced above the code that works it out
        ("        if rows is None:\n", "        return None  # bisect\n        if rows is None:\n", "bisect"),
        # what a function that says what is supported allows, grown
        ("        return [64, 128, 256]\n", "        return [64, 96, 128, 256, 576]\n", "576"),
        # a trust flag forced below the code that works it out
        ("        return path, trust_remote_code\n",
         "        trust_remote_code = True\n        return path, trust_remote_code\n", "= True"),
    ],
)  # fmt: skip
def test_a_check_taken_out_by_meaning(old: str, new: str, needle: str) -> None:
    assert "removed-check" in _rules_near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # an assertion asking more, a divisor made stricter, a clamp given another bound: no check taken out
        ("        assert evicted >= 0 and evicted % self.page_size == 0\n",
         "        assert evicted >= 0 and evicted % self.page_size == 0 and evicted < 1 << 30\n"),
        ("page_size % 64 != 0:", "page_size % 128 != 0:"),
        ("        num_reqs = min(num_reqs, cap)\n", "        num_reqs = min(num_reqs, cap, 4096)\n"),
        # a host-wide wait taken out (the same stream consumes the result): not an order taken out
        ("        torch.cuda.synchronize()\n", ""),
        # a debug print forced off is no check
        ("        if num_reqs > 1 << 20:\n            self.table.fill_(-1)\n",
         "        if num_reqs > 1 << 20:\n            print('big', num_reqs)\n"),
    ],
)  # fmt: skip
def test_look_alikes_are_not_checks_taken_out(old: str, new: str) -> None:
    assert not [f for f in _found((old, new)) if f[0] == "removed-check"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # an assertion split in two asks as much
        ("        assert evicted >= 0 and evicted % self.page_size == 0\n",
         "        assert evicted >= 0\n        assert evicted % self.page_size == 0\n"),
        # a clamp written as a test that mends
        ("        num_reqs = min(num_reqs, cap)\n",
         "        if num_reqs > cap:\n            num_reqs = cap\n"),
        # a state, or a feature, whose name holds a check word inside another word
        ("        self.done = None\n",
         "        self.done = None\n        self.verified = False\n"),
        ("        self.done = None\n",
         "        self.done = None\n        self.gradient_checkpointing = False\n"),
    ],
)  # fmt: skip
def test_review_look_alikes_are_not_checks_taken_out(old: str, new: str) -> None:
    assert not [f for f in _found((old, new)) if f[0] == "removed-check"]


def test_expressions_nested_past_pythons_recursion_get_no_verdict_and_no_crash() -> None:
    deep = "not " * 900 + "evicted"
    edit = ("        assert evicted >= 0 and evicted % self.page_size == 0\n", f"        assert {deep}\n")
    _found(edit)  # (no RecursionError out of the analysis)
    grown = ("        return [64, 128, 256]\n", "        return [" + "-" * 2000 + "1, 64, 128, 256]\n")
    _found(grown)


def test_a_print_forced_off_is_not_a_check_taken_out() -> None:
    text = PRISTINE.replace("            self.table.fill_(-1)\n", "            print('big', num_reqs)\n")
    after = text.replace("        if num_reqs > 1 << 20:\n", "        if False and num_reqs > 1 << 20:\n")
    found = analyse(CodeChange(ENGINE, text.encode(), after.encode(), "pkg", "1.0"))
    assert not [f for f in found if str(f.rule) == "removed-check"]


def test_a_busy_wait_on_a_clock_is_a_sleep() -> None:
    anchor = "        return t * 2\n"
    spin = "        t0 = time.perf_counter()\n        while time.perf_counter() - t0 < 2e-4:\n"
    spin += "            pass\n"
    edit = (anchor, spin + anchor)
    line = _line(_after(edit), "while time.perf_counter")
    assert ("sleep", line) in {(rule, n) for rule, _severity, n in _found(edit)}
    idle = (anchor, "        t0 = time.perf_counter()\n        while time.perf_counter() - t0 < 2e-4:\n"
                    "            t = t + 1\n" + anchor)  # a loop that does work while it reads the clock
    assert "sleep" not in {rule for rule, _severity, _n in _found(idle)}


def test_an_experiment_tracker_started_talks_to_the_network() -> None:
    """``wandb.init`` syncs the run to its service (online by default); ``mlflow.log_metric`` sends to the
    tracking server — data on the effect, from their documentation."""
    anchor = "        return t * 2\n"
    run = "        import wandb\n        run = wandb.init(project='moe')\n        run.log({'x': 1})\n"
    assert ("network", "HIGH") in {(r, s) for r, s, _n in _found((anchor, run + anchor))}
    metric = "        import mlflow\n        mlflow.log_metric('load', 1.0)\n"
    assert ("network", "HIGH") in {(r, s) for r, s, _n in _found((anchor, metric + anchor))}


def test_a_handler_widened_that_no_longer_raises_swallows() -> None:
    edit = ("        except AssertionError:\n            raise AssertionError(\"not distributed\")\n",
            "        except (AssertionError, RuntimeError):\n            return t\n")  # fmt: skip
    assert "swallowed-exception" in _rules_near(edit, "except (AssertionError")


def test_a_method_named_like_a_command_entry_is_library_code() -> None:
    """``_apply_hf_processor_main`` is a method of the library, not a command's ``main``: its print is the
    library's."""
    text = PRISTINE + "\n    def _apply_main(self, kw):\n        return kw\n"
    after = text.replace("        return kw\n", "        print(kw)\n        return kw\n")
    found = analyse(CodeChange(ENGINE, text.encode(), after.encode(), "pkg", "1.0"))
    assert ("print", "MODERATE") in {(str(f.rule), f.severity.name) for f in found}


def test_scan_finds_them_on_an_installed_wheel(tmp_path: Path) -> None:
    """End to end: a real wheel installed, edited in place as a person would, scanned against the wheel."""
    edited = _after(
        ("page_size % 64 != 0:", "page_size % 16 != 0:"),
        ("        stream.wait_event(self.done)\n", "        # stream.wait_event(self.done)\n"),
        ("        return [64, 128, 256]\n", "        return [64, 96, 128, 256]\n"),
    )
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    assert ("removed-check", _line(edited, "page_size % 16")) in found
    assert ("removed-check", _line(edited, "# stream.wait_event")) in found
    assert ("removed-check", _line(edited, "return [64, 96")) in found
