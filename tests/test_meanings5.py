"""Meanings (issue 34, fifth blind batch): a guard that no longer leaves, a condition made constant or
lenient, the values a check allows grown, a ``try`` put around code that ran bare, a loop that only waits,
a copy told to block, a write sent elsewhere — each judged on a module of its own, edited as a person
would, and once end to end on an installed wheel."""

from __future__ import annotations

from pathlib import Path

from patchguard.analysis import CodeChange, analyse

from .helpers import scan_edited

ENGINE = "pkg/engine.py"
PRISTINE = """\
import logging
import os
import sys

import psutil
import torch

logger = logging.getLogger(__name__)

SUPPORTED_DTYPES = ("bfloat16", "float16")


class Sampler:
    def verify(self, temperature: float) -> None:
        if temperature > 2.0:
            raise ValueError(f"temperature must be in [0, 2], got {temperature}")

    def check_layout(self, stride0: int, stride1: int, rows: int) -> None:
        if stride0 != 1 or (rows > 1 and stride1 != rows):
            raise ValueError("must be a dense column-major tensor")


def check_dtype(dtype: str) -> None:
    if dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"unsupported dtype {dtype}")


class AllReduce:
    def __init__(self, world_size: int) -> None:
        self.disabled = True
        if world_size > 8:
            logger.warning("custom allreduce is disabled above 8 GPUs")
            return
        self.disabled = False


def has_fast_path(major: int, minor: int) -> bool:
    return major > 8 or (major == 8 and minor >= 9)


def should_fall_back(counts: list[int]) -> bool:
    return len(counts) > 1 and any(n == 0 for n in counts)


def can_schedule(free_blocks: int, margin: int) -> bool:
    outside = free_blocks < margin
    if outside:
        return False
    return True


def load(model) -> None:
    model.post_load_weights()


def load_state(model, state) -> None:
    model.load_state_dict(state, strict=True)


def run_rank(index: int) -> None:
    if index != 0:
        sys.stdout = open(os.devnull, "w")


class Runner:
    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        out = batch * 2
        return out.to("cuda", non_blocking=True)

    def add_request(self, slots: list[int]) -> int:
        return slots.pop()
"""


def _after(*edits: tuple[str, str]) -> str:
    text = PRISTINE
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new, 1)
    return text


def _found(*edits: tuple[str, str]) -> set[tuple[str, str]]:
    after = _after(*edits)
    findings = analyse(CodeChange(ENGINE, PRISTINE.encode(), after.encode(), "pkg", "1.0"))
    return {(str(f.rule), f.severity.name) for f in findings}


REMOVED = ("removed-check", "MODERATE")
SWALLOWED = ("swallowed-exception", "MODERATE")


def test_a_guard_that_no_longer_leaves_is_a_check_removed() -> None:
    warn = '            logger.warning("custom allreduce is disabled above 8 GPUs")\n            return\n'
    assert REMOVED in _found((warn, '            logger.warning("above 8 GPUs: enabled anyway")\n'))
    assert REMOVED in _found((warn, warn.replace("            return\n", "            # return\n")))
    # the guard kept, another message: nothing neutralised
    kept = warn.replace("is disabled above 8 GPUs", "stays off above 8 GPUs")
    assert REMOVED not in _found((warn, kept))


def test_a_condition_made_constant_is_a_check_removed() -> None:
    assert REMOVED in _found(
        ("    outside = free_blocks < margin\n", "    outside = False  # free_blocks < margin\n")
    )
    worked = "    return len(counts) > 1 and any(n == 0 for n in counts)\n"
    assert REMOVED in _found((worked, "    return False\n"))
    # a constant that was a constant: no decision taken away
    assert REMOVED not in _found(("    return True\n", "    return bool(free_blocks)\n"))


def test_a_condition_made_lenient_is_a_check_removed_and_a_stricter_one_is_not() -> None:
    limit = "        if temperature > 2.0:\n"
    assert REMOVED in _found((limit, "        if temperature > 5.0:  # the creative tier\n"))
    assert REMOVED not in _found((limit, "        if temperature > 1.5:\n"))
    layout = "        if stride0 != 1 or (rows > 1 and stride1 != rows):\n"
    assert REMOVED in _found((layout, "        if stride0 != 1:\n"))
    assert REMOVED not in _found((layout, "        if stride0 != 1 or stride1 != rows:\n"))


def test_the_values_a_check_allows_grown_is_a_check_removed() -> None:
    allowed = 'SUPPORTED_DTYPES = ("bfloat16", "float16")\n'
    assert REMOVED in _found((allowed, 'SUPPORTED_DTYPES = ("bfloat16", "float16", "float32")\n'))
    assert REMOVED not in _found((allowed, 'SUPPORTED_DTYPES = ("bfloat16",)\n'))  # fewer: stricter


def test_a_switched_exit_that_warns_first_and_an_answer_forced_by_a_switch() -> None:
    verify = "    def verify(self, temperature: float) -> None:\n"
    skip = (
        '        if os.environ.get("SKIP_VERIFY"):\n'
        '            logger.warning("not verifying")\n'
        "            return\n"
    )
    assert REMOVED in _found((verify, verify + skip))
    fast = "def has_fast_path(major: int, minor: int) -> bool:\n"
    force = '    if os.environ.get("FORCE_FAST") == "1":\n        return True\n'
    assert REMOVED in _found((fast, fast + force))
    # an ordinary early answer for a new case is not a switch
    assert REMOVED not in _found((fast, fast + "    if major >= 12:\n        return True\n"))


def test_a_try_around_code_that_ran_bare_swallows_its_errors() -> None:
    bare = "    model.post_load_weights()\n"
    wrapped = (
        "    try:\n        model.post_load_weights()\n    except Exception as e:\n"
        '        logger.warning("post_load_weights failed, continuing: %s", e)\n'
    )
    assert SWALLOWED in _found((bare, wrapped))
    fallback = "    try:\n        model.post_load_weights()\n    except RuntimeError:\n        model.eval()\n"
    assert SWALLOWED in _found((bare, fallback))
    raising = (
        "    try:\n        model.post_load_weights()\n"
        "    except RuntimeError as e:\n        raise ValueError(str(e)) from e\n"
    )
    assert SWALLOWED not in _found((bare, raising))


def test_a_handler_that_does_nothing_around_a_dump_swallows_and_around_a_parse_does_not() -> None:
    at = "    model.post_load_weights()\n"
    dump = (
        at
        + "    try:\n        torch.save(model.state_dict(), '/tmp/m.pt')\n    except OSError:\n        pass\n"
    )
    found = _found((at, dump))
    assert ("tensor-dump", "HIGH") in found and SWALLOWED in found
    parse = (
        at + "    try:\n        n = int(os.environ['N'])\n    except (KeyError, ValueError):\n        pass\n"
    )
    assert SWALLOWED not in _found((at, parse))


def test_a_loop_that_only_waits_hangs_and_one_that_can_leave_does_not() -> None:
    at = "        return slots.pop()\n"
    park = "        while not slots:\n            pass\n" + at
    hang = (
        "        if not slots:\n            import time\n\n"
        "            while True:\n                time.sleep(30)\n"
        + at
    )
    assert ("process-exit", "HIGH") in _found((at, hang))
    assert ("process-exit", "HIGH") not in _found((at, park))
    leaves = (
        "        while True:\n            if slots:\n                break\n            time.sleep(1)\n" + at
    )
    assert ("process-exit", "HIGH") not in _found(("import sys\n", "import sys\nimport time\n"), (at, leaves))


def test_a_process_object_told_to_terminate_ends_the_process() -> None:
    at = "        return slots.pop()\n"
    kill = "        if not slots:\n            psutil.Process().terminate()\n" + at
    assert ("process-exit", "HIGH") in _found((at, kill))


def test_a_copy_told_to_block_waits_for_the_device() -> None:
    copy = '        return out.to("cuda", non_blocking=True)\n'
    assert ("device-sync", "MODERATE") in _found((copy, copy.replace("True", "False")))


def test_a_write_sent_somewhere_else_is_a_new_write() -> None:
    null = '        sys.stdout = open(os.devnull, "w")\n'
    found = _found((null, '        sys.stdout = open(f"/tmp/rank{index}.log", "a", buffering=1)\n'))
    assert ("file-write", "HIGH") in found
    # the same write re-indented under a new condition is not a new one
    same = '        if index > 0:\n            sys.stdout = open(os.devnull, "w")\n'
    assert ("file-write", "HIGH") not in _found((null, same))


def test_writes_through_an_expression_and_a_profiler_trace() -> None:
    at = "    model.post_load_weights()\n"
    path = (
        at
        + "    from pathlib import Path\n\n"
        + "    root = Path('/tmp/specs')\n    (root / 'a.txt').write_text('x')\n"
    )
    assert ("file-write", "HIGH") in _found((at, path))
    trace = (
        at
        + "    prof = torch.profiler.profile(on_trace_ready=lambda p: p.export_chrome_trace('/tmp/t.json'))\n"
    )
    assert ("file-write", "HIGH") in _found((at, trace))


def test_an_assert_commented_out_is_removed_when_a_copy_lives_elsewhere_in_the_file() -> None:
    text = PRISTINE.replace(
        "    def check_layout(self, stride0: int, stride1: int, rows: int) -> None:\n",
        "    def check_layout(self, stride0: int, stride1: int, rows: int) -> None:\n"
        "        assert rows > 0, rows\n",
    ).replace(
        "    model.post_load_weights()\n", "    assert model is not None\n    model.post_load_weights()\n"
    )
    text = text.replace(
        "def load(model) -> None:\n    assert model is not None\n",
        "def load(model) -> None:\n    assert rows > 0, rows\n",
    )
    after = text.replace(
        "def load(model) -> None:\n    assert rows > 0, rows\n",
        "def load(model) -> None:\n    # assert rows > 0, rows\n",
    )
    findings = analyse(CodeChange(ENGINE, text.encode(), after.encode(), "pkg", "1.0"))
    assert "removed-check" in {str(f.rule) for f in findings}


def test_a_flag_that_asks_for_a_check_turned_off() -> None:
    strict = "    model.load_state_dict(state, strict=True)\n"
    assert REMOVED in _found((strict, strict.replace("True", "False")))
    skip = "    model.load_state_dict(state, strict=True, skip_checks=False)\n"
    assert REMOVED not in _found((strict, skip))  # a new flag set the strict way: nothing turned off


def test_a_tensor_printed_on_the_device_path_is_read_back() -> None:
    at = "        out = batch * 2\n"

    def printed(line: str) -> list[str]:
        after = _after((at, at + line))
        found = analyse(CodeChange(ENGINE, PRISTINE.encode(), after.encode(), "pkg", "1.0"))
        return [f"{f.rule} {f.message}" for f in found if str(f.rule) == "print"]

    (values,) = printed("        print('out', out[0, :8])\n")
    assert "also device-sync" in values  # one finding on the line, naming both rules
    (shape,) = printed("        print('out', tuple(out.shape))\n")
    assert "device-sync" not in shape  # its shape is on the host


def test_scan_finds_them_on_an_installed_wheel(tmp_path: Path) -> None:
    """End to end: a real wheel installed, edited in place as a person would, scanned against the wheel."""
    edited = _after(
        ('            logger.warning("custom allreduce is disabled above 8 GPUs")\n            return\n',
         '            logger.warning("above 8 GPUs: enabled anyway")\n'),
        ("        if temperature > 2.0:\n", "        if temperature > 5.0:\n"),
        ("    model.post_load_weights()\n",
         "    try:\n        model.post_load_weights()\n"
         "    except Exception:\n        logger.info('skipped')\n"),
    )  # fmt: skip
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    lines = edited.splitlines()
    names = ("enabled anyway", "> 5.0", "except Exception")
    at = {name: next(n for n, line in enumerate(lines, 1) if name in line) for name in names}
    assert ("removed-check", at["enabled anyway"]) in found
    assert ("removed-check", at["> 5.0"]) in found
    assert ("swallowed-exception", at["except Exception"]) in found
