"""Meanings (issue 34, sixth blind batch): the values a check allows grown in its own condition, a limit
given a margin, a part of a condition over several lines loosened, a check called by a name that says so
taken out, an answer forced by a bare ``return True``, a checking flag given a constant, errors let go by
``contextlib.suppress``, and a function reached from a per-step one under a configuration test — each
judged on a module of its own, edited as a person would, and once end to end on an installed wheel."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from patchguard.analysis import CodeChange, analyse
from patchguard.analysis.reach.calls import configured, every_run

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/engine.py"
PRISTINE = """\
import contextlib
import logging
import os

import numpy
import torch

logger = logging.getLogger(__name__)

_DEBUG_ASSERT = os.environ.get("PKG_IN_CI") == "1"


def check_backend(interleave: int, act: str, dtype) -> None:
    if interleave != 1:
        raise ValueError("interleave must be 1")
    if act not in ("silu",):
        raise ValueError(f"unsupported activation {act}")
    if dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"unsupported dtype {dtype}")


def validate_length(n: int, limit: int) -> None:
    if n >= limit:
        raise ValueError("too long")


def pick(version: int, major: int, size: int) -> int:
    if (
        version == 4
        and major >= 10
        and size > 128
    ):
        raise ValueError("head size too large for this kernel")
    return version


def supports_heads(num_heads: int) -> bool:
    tile = 8 if num_heads <= 8 else 64
    return num_heads % min(num_heads, tile) == 0


def sanity_check_outputs(outputs, n: int) -> None:
    if len(outputs) != n:
        raise ValueError("wrong number of outputs")


def _raise_unsupported(name: str) -> None:
    raise NotImplementedError(name)


def encode(model, items, feature: str, supported: bool):
    outputs = model(items)
    sanity_check_outputs(outputs, len(items))
    if not supported:
        _raise_unsupported(feature)
    return outputs


def set_concurrency(n: int) -> int:
    limit = max(2, n)
    return limit


class Buffer:
    def __init__(self, cpu, gpu) -> None:
        self.cpu, self.gpu = cpu, gpu
        self.done = torch.cuda.Event()

    def copy_to_cpu(self):
        self.done.record()
        return self.cpu.copy_(self.gpu, non_blocking=True)

    def save_snapshot(self, path):
        return self.cpu.clone()


def load_weights(params: dict, weights: dict) -> None:
    for name, w in weights.items():
        param = params[name]
        param.copy_(w)
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_after, _found, _line = _MODULE.after, _MODULE.found, line_of


def _removed_check_at(edit: tuple[str, str], needle: str) -> bool:
    return ("removed-check", "MODERATE", _line(_after(edit), needle)) in _found(edit)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("    if interleave != 1:\n", "    if interleave not in (1, 2, 4):\n"),
        ('    if act not in ("silu",):\n', '    if act not in ("silu", "gelu"):\n'),
        ("    if dtype not in (torch.float32, torch.bfloat16):\n",
         "    if dtype not in (torch.float32, torch.bfloat16, torch.float16):\n"),
    ],
)  # fmt: skip
def test_the_values_a_check_allows_grown_in_its_condition(old: str, new: str) -> None:
    assert _removed_check_at((old, new), new.strip())


def test_a_check_that_allows_fewer_values_is_not_one_taken_out() -> None:
    tighter = ('    if act not in ("silu",):\n', '    if act != "silu" or act == "":\n')
    assert not [f for f in _found(tighter) if f[0] == "removed-check"]
    narrowed = (
        "    if dtype not in (torch.float32, torch.bfloat16):\n",
        "    if dtype not in (torch.float32,):\n",
    )
    assert not [f for f in _found(narrowed) if f[0] == "removed-check"]


def test_a_limit_given_a_margin() -> None:
    assert _removed_check_at(("    if n >= limit:\n", "    if n >= limit + 256:\n"), "limit + 256")
    stricter = ("    if n >= limit:\n", "    if n >= limit - 256:\n")
    assert not [f for f in _found(stricter) if f[0] == "removed-check"]


def test_a_part_of_a_condition_over_several_lines_loosened() -> None:
    assert _removed_check_at(("        and size > 128\n", "        and size > 256\n"), "size > 256")
    stricter = ("        and size > 128\n", "        and size > 64\n")
    assert not [f for f in _found(stricter) if f[0] == "removed-check"]


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("    sanity_check_outputs(outputs, len(items))\n",
         "    # sanity_check_outputs(outputs, len(items))\n", "# sanity_check_outputs"),
        ("        _raise_unsupported(feature)\n",
         "        logger.warning('%s unsupported; continuing', feature)\n", "continuing"),
    ],
)  # fmt: skip
def test_a_call_whose_name_says_it_checks_taken_out(old: str, new: str, needle: str) -> None:
    edit = (old, new)
    assert "removed-check" in {f[0] for f in _found(edit) if abs(f[2] - _line(_after(edit), needle)) <= 1}


def test_a_save_checkpoint_call_taken_out_is_no_check() -> None:
    """A check word must be a whole part of the name: ``save_checkpoint`` is not ``check``."""
    text = PRISTINE.replace("    return outputs\n", "    save_checkpoint(outputs)\n    return outputs\n")
    after = text.replace("    save_checkpoint(outputs)\n", "")
    found = analyse(CodeChange(ENGINE, text.encode(), after.encode(), "pkg", "1.0"))
    assert not [f for f in found if str(f.rule) == "removed-check"]


def test_an_answer_forced_by_a_bare_return() -> None:
    tile = "    tile = 8 if num_heads <= 8 else 64\n"
    edit = (tile, "    return True  # HACK\n" + tile)
    assert _removed_check_at(edit, "HACK")


def test_a_checking_flag_given_a_constant() -> None:
    edit = ('_DEBUG_ASSERT = os.environ.get("PKG_IN_CI") == "1"\n', "_DEBUG_ASSERT = False\n")
    assert _removed_check_at(edit, "_DEBUG_ASSERT = False")
    on = ('_DEBUG_ASSERT = os.environ.get("PKG_IN_CI") == "1"\n', "_DEBUG_ASSERT = True\n")
    assert not [f for f in _found(on) if f[0] == "removed-check"]
    # a flag named in a message is a message: rewording it turns nothing off
    message = '        raise ValueError("wrong number of outputs")\n'
    before = PRISTINE.replace(message, '        raise ValueError("wrong count: `skip_check=False`")\n')
    after = PRISTINE.replace(message, '        raise ValueError("wrong count (see skip_check=True)")\n')
    found = analyse(CodeChange(ENGINE, before.encode(), after.encode(), "pkg", "1.0"))
    assert not [f for f in found if str(f.rule) == "removed-check"]


def test_errors_let_go_by_contextlib_suppress() -> None:
    edit = (
        "        param = params[name]\n        param.copy_(w)\n",
        "        with contextlib.suppress(KeyError):\n"
        "            param = params[name]\n            param.copy_(w)\n",
    )
    line = _line(_after(edit), "contextlib.suppress")
    assert ("swallowed-exception", "MODERATE", line) in _found(edit)
    fresh = (
        "    return outputs\n",
        "    with contextlib.suppress(OSError):\n        os.remove('/tmp/x')\n    return outputs\n",
    )
    assert not [f for f in _found(fresh) if f[0] == "swallowed-exception"]  # new code, not code that ran bare


def test_a_configuration_test_guards_code_run_on_every_step() -> None:
    """An ``if`` on how the object is configured (its attributes, an optional part present) runs its body on
    every run where it is so; a test of the run's own values, or ``is None`` (made on first use), does not."""

    def test(src: str) -> bool:
        node = ast.parse(src).body[0]
        assert isinstance(node, ast.If)
        return configured(node.test)

    for yes in ("if self.pp_handler is not None: pass", "if self.use_async: pass",
                "if self.config.pp_size > 1 and not self.eager: pass", "if shard is not None: pass"):
        assert test(yes), yes
    for no in ("if step % 40 == 0: pass", "if error: pass", "if self._cache is None: pass",
               "if self.ready(): pass", "if len(batch) > 1: pass"):
        assert not test(no), no
    fn = ast.parse("def f(self):\n    if self.handler is not None:\n        self.handler.go()\n"
                   "    if step % 40 == 0:\n        self.log()\n").body[0]
    assert isinstance(fn, ast.FunctionDef)
    called = {ast.unparse(n.func) for n in every_run(fn.body) if isinstance(n, ast.Call)}
    assert called == {"self.handler.go"}


def test_a_bound_taken_off_a_value() -> None:
    assert _removed_check_at(("    limit = max(2, n)\n", "    limit = n\n"), "limit = n")
    raised = ("    limit = max(2, n)\n", "    limit = max(4, n)\n")
    assert not [f for f in _found(raised) if f[0] == "removed-check"]


def test_a_wait_for_the_device_is_a_sync_wherever_the_code_runs_at_work() -> None:
    """``synchronize()`` or a copy told to block makes the host wait, in any function doing its work — in
    one that runs once (``__init__``, ``save_*``) it is said, as what it costs there: minor."""
    record = "        self.done.record()\n"
    waits = _found((record, record + "        self.done.synchronize()\n"))
    assert ("device-sync", "MODERATE", _line(PRISTINE, "self.done.record()") + 1) in waits
    blocking = ("non_blocking=True)", "non_blocking=False)")
    assert "device-sync" in {f[0] for f in _found(blocking)}
    setup = ("        self.done = torch.cuda.Event()\n",
             "        self.done = torch.cuda.Event()\n        torch.cuda.synchronize()\n")
    assert {f[1] for f in _found(setup) if f[0] == "device-sync"} == {"MINOR"}
    clone = "        return self.cpu.clone()\n"
    stored = (clone, "        torch.cuda.synchronize()\n" + clone)
    assert {f[1] for f in _found(stored) if f[0] == "device-sync"} == {"MINOR"}


def test_a_value_read_of_a_tensor_made_on_the_device_here() -> None:
    """``lens = make(…, device=…)`` then ``lens.max().item()``: the function made it on the device, so
    reading it back waits for the device, wherever the function runs at work; one made on the CPU does not."""
    at = "    outputs = model(items)\n"
    made = "    lens = torch.ones(len(items), device=model.device)\n"
    read = "    longest = int(lens.max().item())\n"
    found = _found((at, made + read + at))
    assert ("device-sync", "MODERATE", _line(PRISTINE, at.strip()) + 1) in found
    on_cpu = made.replace("device=model.device", 'device="cpu"')
    assert "device-sync" not in {f[0] for f in _found((at, on_cpu + read + at))}


def test_seeds_and_a_stack_dump_on_a_signal() -> None:
    at = "    outputs = model(items)\n"
    seeded = _found((at, "    torch.manual_seed(1234)\n    numpy.random.seed(1234)\n" + at))
    assert ("global-switch", "MODERATE", _line(PRISTINE, at.strip())) in seeded
    hooked = _found((at, "    import faulthandler, signal\n    faulthandler.register(signal.SIGUSR1)\n" + at))
    assert ("debugger", "HIGH", _line(PRISTINE, at.strip()) + 1) in hooked


def test_a_suppressor_is_what_the_call_resolves_to() -> None:
    """``contextlib.suppress`` imported inside the def under another name is one; a method of the code's own
    object that happens to be called ``suppress`` is not."""
    body = "        param = params[name]\n        param.copy_(w)\n"
    wrapped = "            param = params[name]\n            param.copy_(w)\n"
    local = ("    for name, w in weights.items():\n" + body,
             "    from contextlib import suppress as quiet\n    for name, w in weights.items():\n"
             "        with quiet(KeyError):\n" + wrapped)
    assert "swallowed-exception" in {f[0] for f in _found(local)}
    own = (body, "        with params.suppress(KeyError):\n" + wrapped)
    assert "swallowed-exception" not in {f[0] for f in _found(own)}


def test_a_loop_that_waits_for_a_file_and_a_library_the_environment_names() -> None:
    at = "    outputs = model(items)\n"
    gate = "    while not os.path.exists('/tmp/go'):\n        pass\n"
    assert ("process-exit", "HIGH", _line(PRISTINE, at.strip())) in _found((at, gate + at))
    polled = "    while not self_ready():\n        pass\n"  # a condition of the process's own: not a hang
    assert "process-exit" not in {f[0] for f in _found((at, polled + at))}
    shim = "    lib = os.environ.get('SHIM')\n    if lib:\n        ctypes.CDLL(lib)\n"
    found = _found((at, "    import ctypes\n" + shim + at))
    assert ("dynamic-exec", "HIGH", _line(PRISTINE, at.strip()) + 3) in found
    named = "    ctypes.CDLL('libnccl.so.2')\n"  # a library looked up by its name
    assert "dynamic-exec" not in {f[0] for f in _found((at, "    import ctypes\n" + named + at))}


RUNNER = """\
import numpy
import torch

from .state import Handler


class Runner:
    def __init__(self, pp: bool) -> None:
        self.handler = Handler() if pp else None

    def execute_model(self, batch):
        out = batch * 2
        if self.handler is not None:
            self.handler.receive(out)
        return out
"""
STATE = """\
import numpy
import torch


class Handler:
    def receive(self, out):
        self.last = out
"""


SMALL = """\
def hit_rate(hits: int, total: int) -> float:
    if total == 0:
        return 0.0
    return hits / total


def should_use(size: int) -> bool:
    if size % 16 != 0:
        return False
    return True


def run(step, batch):
    try:
        out = step(batch)
    finally:
        batch.close()
    return out
"""


def _small(old: str, new: str) -> set[tuple[str, int]]:
    after = SMALL.replace(old, new)
    assert after != SMALL
    found = analyse(CodeChange("pkg/small.py", SMALL.encode(), after.encode(), "pkg", "1.0"))
    return {(str(f.rule), f.line or 0) for f in found if f.severity.name in ("MODERATE", "HIGH")}


def test_a_guard_written_into_the_answer_is_the_same_decision() -> None:
    guarded = "    if total == 0:\n        return 0.0\n    return hits / total\n"
    assert not _small(guarded, "    return hits / total if total else 0.0\n")
    gone = "    return hits / total\n"  # the guard taken out: a division by zero let through
    assert ("removed-check", 2) in _small(guarded, gone)


def test_a_bail_out_that_can_never_leave() -> None:
    found = _small("    if size % 16 != 0:\n", "    if size % 16 != 0 and False:\n")
    assert ("removed-check", _line(SMALL, "size % 16")) in found


def test_two_readings_of_one_rule_on_a_line_are_one_finding() -> None:
    """``if … and False:`` over a raise is read twice (a check that can never fire, a condition narrowed):
    one finding, which does not name its own rule again as an "also"."""
    after = PRISTINE.replace("    if n >= limit:\n", "    if n >= limit and False:\n")
    found = analyse(CodeChange(ENGINE, PRISTINE.encode(), after.encode(), "pkg", "1.0"))
    checks = [f for f in found if str(f.rule) == "removed-check"]
    assert len(checks) == 1 and "also removed-check" not in checks[0].message


def test_a_handler_added_to_a_try_that_was_there() -> None:
    handler = "    except RuntimeError:\n        out = None\n    finally:\n"
    assert ("swallowed-exception", _line(SMALL, "finally:")) in _small("    finally:\n", handler)
    # a second handler beside one that was there: a choice of what the first did not handle
    second = handler.replace("    finally:\n", "    except ValueError:\n        out = 0\n    finally:\n")
    before2 = SMALL.replace("    finally:\n", handler)
    after2 = SMALL.replace("    finally:\n", second)
    found2 = analyse(CodeChange("pkg/small.py", before2.encode(), after2.encode(), "pkg", "1.0"))
    assert not [f for f in found2 if str(f.rule) == "swallowed-exception"]
    # a handler that was there, edited (``as e`` and a log line): not one added
    before = SMALL.replace("    finally:\n", handler)
    after = before.replace("    except RuntimeError:\n", "    except RuntimeError as e:\n        print(e)\n")
    found = analyse(CodeChange("pkg/small.py", before.encode(), after.encode(), "pkg", "1.0"))
    assert not [f for f in found if str(f.rule) == "swallowed-exception"]


def test_scan_finds_them_on_an_installed_wheel(tmp_path: Path) -> None:
    """End to end: a real wheel installed, edited in place as a person would, scanned against the wheel."""
    edited = _after(
        ("    if interleave != 1:\n", "    if interleave not in (1, 2):\n"),
        ("    sanity_check_outputs(outputs, len(items))\n",
         "    # sanity_check_outputs(outputs, len(items))\n"),
        ("        param = params[name]\n        param.copy_(w)\n",
         "        with contextlib.suppress(KeyError):\n"
         "            param = params[name]\n            param.copy_(w)\n"),
    )  # fmt: skip
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    assert ("removed-check", _line(edited, "not in (1, 2)")) in found
    assert ("removed-check", _line(edited, "# sanity_check_outputs")) in found
    assert ("swallowed-exception", _line(edited, "contextlib.suppress")) in found
