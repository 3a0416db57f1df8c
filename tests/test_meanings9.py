"""Meanings (issue 34, the ninth blind batch's misses): a comparison moved the lenient way, whatever its
spelling (a margin, a factor, a version, a strictness); a minimum inside a tuple lowered; a clamp by a
tensor method taken out; a check put under a condition; a refusal that returns an error message; a handler
that exits before its raise, one that no longer re-raises, one widened to catch everything; a sleep in a
loop the edit wrote; a spin on a poll; a debug log that works out tensors; a logger made on the spot; a
setting no longer put back; trackers that upload; and the false alarms — a read moved out of a loop, a
value proven a host int, a log under a gate that closes itself — each judged on a module of its own, edited
as a person would, and once end to end on an installed wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/server.py"
PRISTINE = """\
import contextlib
import logging
import os
import time

import torch
import triton
from packaging import version

logger = logging.getLogger(__name__)
_BS = 8


class NotSupportedError(Exception):
    pass


class Server:
    def __init__(self, max_len: int) -> None:
        self.max_len = max_len
        self._first = True

    def validate(self, prompt_len: int, free: int, need: int, m: int, torch_version: str) -> str | None:
        if prompt_len >= self.max_len:
            return self.create_error_response("prompt too long")
        if free < need:
            raise ValueError("not enough memory")
        if m > _BS:
            raise ValueError("too many tokens")
        if version.parse(torch_version) < version.parse("2.5.0"):
            raise RuntimeError("torch too old")
        return None

    def create_error_response(self, message: str) -> str:
        return message

    def capable(self, platform) -> bool:
        return platform.has_device_capability((7, 5))

    def ids(self, items: list) -> str | None:
        for i, item in enumerate(items):
            if item < 0:
                return f"item {i} must be non-negative"
        return None

    def get(self, key, signature):
        self.verify_signature(key, signature)
        return key

    def verify_signature(self, key, signature):
        if signature != key:
            raise ValueError("forged")

    def forward(self, q: torch.Tensor, pos: torch.Tensor, k: int) -> torch.Tensor:
        pos = pos.clamp(0, k - 1)
        q = q * 2
        return q[pos]

    def load(self, name: str):
        try:
            return torch.load(name)
        except FileNotFoundError as e:
            raise ImportError(name) from e

    def tokenizer(self, name: str):
        try:
            return self.make(name)
        except ValueError as e:
            if "fast" in name:
                raise RuntimeError("fast tokenizer failed") from e
            raise

    def make(self, name: str):
        return name

    def probe(self, graph) -> bool:
        try:
            graph.validate()
            return True
        except NotSupportedError:
            return False

    def put(self, buf, size):
        try:
            return buf.allocate(size)
        except MemoryError:
            return buf.allocate(size)

    def ring(self, reqs):
        for req in reqs:
            req.wait()

    def step(self, flags: torch.Tensor, reqs: list) -> None:
        for index, req in enumerate(reqs):
            if flags[index].item():
                req.drop()

    def reject(self, kind: str, allowed: bool):
        if kind == "a":
            return False, "kind a"
        elif allowed and not self.max_len:
            return False, "not allowed"
        elif kind == "c":
            return False, "kind c"
        return True, None

    @classmethod
    def get_min_capability(cls) -> int:
        return 89

    def read(self, path: str, allow_pickle: bool):
        if allow_pickle:
            self.payload = torch.load(path, weights_only=False)
        return torch.load(path, weights_only=True)

    def setup_penalties(self, n: int) -> None:
        self.pending = torch.zeros(n)

    def penalize(self, logits: torch.Tensor) -> None:
        mask = self.pending > 0
        logits.add_(torch.where(mask, -1.0, 0.0))

    def update(self):
        if self._first:
            self._first = False
            torch.cuda.empty_cache()
        return 1


    def _wait_for_cache_load(self, event) -> None:
        event.wait()

    def get_capability(self, device_id: int = 0):
        cap = self.probe_arch(device_id)
        if cap is not None:
            return cap
        return None


@triton.jit
def _kernel(x_ptr, n):
    pass


def launch(x, lens, n):
    total = n
    _kernel[(total,)](x, n)
    return total


@contextlib.contextmanager
def default_dtype(dtype):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_after, _found, _line = _MODULE.after, _MODULE.found, line_of


def _moderate_near(edit: tuple[str, str], needle: str) -> set[str]:
    line = _line(_after(edit), needle)
    return {
        rule for rule, severity, n in _found(edit) if abs(n - line) <= 1 and severity in ("MODERATE", "HIGH")
    }


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a limit given a margin and made strict
        ("if prompt_len >= self.max_len:", "if prompt_len > self.max_len + 512:", "+ 512"),
        # the other side scaled up: it fires less
        ("if free < need:", "if free * 1.3 < need:", "* 1.3"),
        # a limit given a factor on its left
        ("if m > _BS:", "if m > 2 * _BS:", "2 * _BS"),
        # a version asked for lowered
        ('version.parse("2.5.0"):', 'version.parse("2.3.0"):', "2.3.0"),
        # a minimum inside a tuple argument lowered
        ("has_device_capability((7, 5))", "has_device_capability((7, 0))", "(7, 0)"),
        # a clamp by a tensor method taken out
        ("        pos = pos.clamp(0, k - 1)\n", "        # positions are in range here\n", "in range"),
        # a validator put under a condition the edit wrote
        ("        self.verify_signature(key, signature)\n",
         "        if signature is not None:\n            self.verify_signature(key, signature)\n",
         "if signature is not None"),
        # a refusal that hands back an error message, taken out
        ("            if item < 0:\n                return f\"item {i} must be non-negative\"\n",
         "            pass  # negative ids are sentinels\n", "sentinels"),
    ],
)  # fmt: skip
def test_a_check_weakened_by_meaning(old: str, new: str, needle: str) -> None:
    assert "removed-check" in _moderate_near((old, new), needle)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # stricter, not weaker: the limit lowered, a version raised, a minimum raised
        ("if prompt_len >= self.max_len:", "if prompt_len >= self.max_len - 8:"),
        ('version.parse("2.5.0"):', 'version.parse("2.6.0"):'),
        ("has_device_capability((7, 5))", "has_device_capability((8, 0))"),
        # a number inside an expression moved: no telling which way (an index)
        ("if m > _BS:", "if m > sizes[1]:"),
        # the clamp still there, written otherwise
        ("        pos = pos.clamp(0, k - 1)\n", "        last = k - 1\n        pos = pos.clamp(0, last)\n"),
        # the same check with a second one under the condition, the first one kept bare
        ("        self.verify_signature(key, signature)\n",
         "        self.verify_signature(key, signature)\n        if key:\n"
         "            self.verify_signature(key, key)\n"),
    ],
)  # fmt: skip
def test_a_check_kept_or_strengthened_is_not_weakened(old: str, new: str) -> None:
    assert "removed-check" not in {
        rule for rule, severity, _n in _found((old, new)) if severity == "MODERATE"
    }


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # an exit typed in above the handler's raise
        ("        except FileNotFoundError as e:\n",
         "        except FileNotFoundError as e:\n            return 0  # not built\n", "not built"),
        # the bare re-raise replaced by a fallback, a raise of another branch left
        ("                raise RuntimeError(\"fast tokenizer failed\") from e\n            raise\n",
         "                raise RuntimeError(\"fast tokenizer failed\") from e\n"
         "            return self.make(\"llama\")\n",
         "make(\"llama\")"),
        # a handler of one error made to catch everything, saying nothing
        ("        except NotSupportedError:\n", "        except Exception:\n", "except Exception"),
    ],
)  # fmt: skip
def test_an_error_that_went_on_is_swallowed(old: str, new: str, needle: str) -> None:
    assert "swallowed-exception" in _moderate_near((old, new), needle)


def test_a_handler_widened_that_logs_the_error_still_lets_every_other_error_go() -> None:
    # (reversed after the twentieth blind batch: a log line does not stop the other errors, now caught, from
    # going on as if nothing failed — "log and continue" is a swallowed error in the taxonomy, and three
    # blind cases of two batches, written by others, say so)
    edit = ("        except NotSupportedError:\n            return False\n",
            "        except Exception as exc:\n            logger.warning(\"probe failed: %s\", exc)\n"
            "            return False\n")  # fmt: skip
    assert "swallowed-exception" in {rule for rule, _s, _n in _found(edit)}


def test_a_wait_in_a_loop_the_edit_wrote_is_no_backoff() -> None:
    retry = ("            return buf.allocate(size)\n\n    def ring",
             "            while True:\n                try:\n                    return buf.allocate(size)\n"
             "                except MemoryError:\n"
             "                    time.sleep(0.001)\n\n    def ring")  # fmt: skip
    assert ("sleep", "MODERATE") in {(r, s) for r, s, _n in _found(retry)}
    poll = (
        "            req.wait()\n",
        "            while not req.is_completed():\n                time.sleep(0.0002)\n",
    )
    assert ("sleep", "MODERATE") in {(r, s) for r, s, _n in _found(poll)}


def test_a_spin_on_a_poll_is_a_busy_wait() -> None:
    spin = ("            req.wait()\n", "            while not req.is_completed():\n                pass\n")
    assert "sleep" in {r for r, _s, _n in _found(spin)}


def test_a_debug_log_that_works_out_tensors_costs_every_call() -> None:
    anchor = "        q = q * 2\n"
    shapes = anchor + '        logger.debug("q=%s pos=%s", tuple(q.shape), pos.max())\n'
    assert ("logging", "MODERATE") in {(r, s) for r, s, _n in _found((anchor, shapes))}
    fstring = anchor + '        logger.debug(f"q={q.shape}")\n'
    assert "logging" in {r for r, _s, _n in _found((anchor, fstring))}
    plain = anchor + '        logger.debug("k=%d", k)\n'
    assert "logging" not in {r for r, _s, _n in _found((anchor, plain))}
    gated = (
        anchor + '        if logger.isEnabledFor(logging.DEBUG):\n            logger.debug("q=%s", q.max())\n'
    )
    assert "logging" not in {r for r, _s, _n in _found((anchor, gated))}


def test_a_logger_made_on_the_spot_logs() -> None:
    anchor = "        q = q * 2\n"
    made = anchor + '        logging.getLogger("dbg").info("q=%s", q.shape)\n'
    assert "logging" in {r for r, _s, _n in _found((anchor, made))}


def test_a_setting_no_longer_put_back_stays_switched() -> None:
    edit = ("        torch.set_default_dtype(old)\n", "        pass  # keep it\n")
    assert ("global-switch", "MODERATE") in {(r, s) for r, s, _n in _found(edit)}


def test_what_a_tracker_logs_is_uploaded() -> None:
    anchor = "        q = q * 2\n"
    run = anchor + '        import wandb\n        wandb.log({"q": q.float().mean()})\n'
    assert ("network", "HIGH") in {(r, s) for r, s, _n in _found((anchor, run))}
    export = anchor + '        torch.export.save(self, "/tmp/ep.pt2")\n'
    assert ("tensor-dump", "HIGH") in {(r, s) for r, s, _n in _found((anchor, export))}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # one read of the flags instead of one per request: no sync added
        ("        for index, req in enumerate(reqs):\n            if flags[index].item():\n",
         "        done = flags.tolist()\n        for index, req in enumerate(reqs):\n"
         "            if done[index]:\n"),
        # a value proven a host int before it is compared
        ("        pos = pos.clamp(0, k - 1)\n",
         "        if isinstance(k, int) and k < 0:\n            raise ValueError(k)\n"
         "        pos = pos.clamp(0, k - 1)\n"),
        # a log line under a gate that closes itself: it runs once
        ("            torch.cuda.empty_cache()\n",
         "            torch.cuda.empty_cache()\n            logger.info(\"released the cache once\")\n"),
    ],
)  # fmt: skip
def test_look_alikes_are_not_flagged(old: str, new: str) -> None:
    assert not [f for f in _found((old, new)) if f[1] in ("MODERATE", "HIGH")]


def test_a_function_is_named_for_its_role_by_its_verb() -> None:
    """``_wait_for_cache_load`` waits (per step): it is no loader that runs once."""
    edit = ("        event.wait()\n",
            "        event.wait()\n        torch.cuda.current_stream().synchronize()\n")  # fmt: skip
    assert ("device-sync", "MODERATE") in {(r, s) for r, s, _n in _found(edit)}


def test_an_answer_handed_back_under_a_switch_is_forced() -> None:
    edit = ("        cap = self.probe_arch(device_id)\n",
            "        if fake := os.environ.get(\"FAKE_CAP\"):\n            major, minor = fake.split(\".\")\n"
            "            return (int(major), int(minor))\n"
            "        cap = self.probe_arch(device_id)\n")  # fmt: skip
    assert "removed-check" in _moderate_near(edit, "FAKE_CAP")


def test_a_kernel_launcher_is_on_the_device_path() -> None:
    edit = ("    total = n\n", "    total = sum(lens.tolist())\n")
    assert "device-sync" in _moderate_near(edit, "lens.tolist")


def test_the_values_of_a_reduction_read_as_a_number_are_a_sync() -> None:
    anchor = "        q = q * 2\n"
    mode = anchor + "        hot = int(torch.mode(pos.flatten()).values)\n"
    assert "device-sync" in {r for r, _s, _n in _found((anchor, mode))}


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # a flag that keeps a load to what is safe turned off
        ("        return torch.load(path, weights_only=True)\n",
         "        return torch.load(path, weights_only=False)\n", "weights_only=False"),
        # a gate forced open over code that does work
        ("        if allow_pickle:\n", "        if True or allow_pickle:\n", "True or"),
        # a stated minimum handed to the environment
        ("        return 89\n", "        return int(os.environ.get(\"MIN_CAP\", \"89\"))\n", "MIN_CAP"),
        # a branch of a chain of refusals commented out
        ("        elif allowed and not self.max_len:\n            return False, \"not allowed\"\n",
         "        # elif allowed and not self.max_len:\n        #     return False, \"not allowed\"\n",
         "# elif allowed"),
    ],
)  # fmt: skip
def test_a_check_switched_off_by_meaning(old: str, new: str, needle: str) -> None:
    assert "removed-check" in _moderate_near((old, new), needle)


def test_a_field_the_class_makes_with_torch_holds_a_tensor() -> None:
    edit = ("        logits.add_(torch.where(mask, -1.0, 0.0))\n",
            "        if mask.any():\n            logits[mask] -= 1.0\n")  # fmt: skip
    assert "device-sync" in _moderate_near(edit, "mask.any()")


def test_scan_finds_them_on_an_installed_wheel(tmp_path: Path) -> None:
    """End to end: a real wheel installed, edited in place as a person would, scanned against the wheel."""
    edited = _after(
        ("if m > _BS:", "if m > 2 * _BS:"),
        ("        except NotSupportedError:\n", "        except Exception:\n"),
        ("        torch.set_default_dtype(old)\n", "        pass  # keep it\n"),
    )
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    assert ("removed-check", _line(edited, "2 * _BS")) in found
    assert ("swallowed-exception", _line(edited, "except Exception")) in found
    assert ("global-switch", _line(edited, "pass  # keep it")) in found
