"""Meanings (issue 34, third blind batch): what an edit does to a check, a handler, a wait or another
module — judged by what the code means where it stands, each on a real fixture file, edited."""

from __future__ import annotations

import ast

import pytest

from patchguard.analysis import CodeChange, analyse
from patchguard.analysis.hotpath import hot_functions

from .helpers import MINILLM_SRC, judged_edit

LINEAR = "minillm/layers/linear.py"
REGISTRY = "minillm/models/registry.py"
CUDA = "minillm/platforms/cuda.py"
WEIGHTS = "minillm/model_loader/weights.py"
LOADER = (
    "    def weight_loader(self, param: nn.Parameter, loaded: torch.Tensor) -> None:\n"
    "        shard = self.output_size_per_partition\n"
)
DIVIDE_CHECK = (
    "    if numerator % denominator != 0:\n"
    '        raise ValueError(f"{numerator} is not divisible by {denominator}")\n'
)
RESOLVE_HANDLER = (
    "        except KeyError:\n"
    "            raise ValueError(\n"
    '                f"unsupported architecture {arch!r}; "\n'
    '                f"choose one of {self.supported_architectures()}"\n'
    "            ) from None\n"
)


_found = judged_edit
DIVIDE_END = "    return numerator // denominator\n"


def _helper(body: str) -> str:
    """A helper of the module handed a tensor, with ``body`` in it (put after ``DIVIDE_END``)."""
    return "\n\ndef _scaled(x: torch.Tensor) -> torch.Tensor:\n" + body + "    return x\n"


def _rules(rel: str, anchor: str, text: str, *, replace: bool = False) -> set[str]:
    return {rule for rule, _ in _found(rel, anchor, text, replace=replace)}


def test_a_log_line_where_tensors_are_handed_in_costs_every_call() -> None:
    """A helper given a tensor (``x: torch.Tensor``): its log line is the device path's. (``weight_loader``
    is given one too, but runs while the weights load: once a process, minor.)"""
    text = '    logger.warning("scaling %s", x.shape)\n'
    assert ("logging", "MODERATE") in _found(LINEAR, DIVIDE_END, _helper(text))
    loading = '        logger.warning("loading %s", loaded.shape)\n'
    assert ("logging", "MINOR") in _found(LINEAR, LOADER, loading)
    # the same line in a function of numbers only is a host's log line: shown, not moderate
    divide = "def _divide(numerator: int, denominator: int) -> int:\n"
    assert ("logging", "MINOR") in _found(LINEAR, divide, '    logger.warning("dividing %s", numerator)\n')


def test_an_assert_turned_into_a_raise_is_the_same_check() -> None:
    before = "        self.weight = nn.Parameter(\n"
    edit = "        assert tp_size > 0\n" + before
    src = (MINILLM_SRC / LINEAR).read_text().replace(before, edit, 1)
    after = src.replace(
        "        assert tp_size > 0\n",
        "        if tp_size <= 0:\n            raise ValueError(f'bad tp_size {tp_size}')\n",
        1,
    )
    findings = analyse(CodeChange(LINEAR, src.encode(), after.encode(), "minillm", "0.4.0"))
    assert "removed-check" not in {f.rule for f in findings}


def test_a_handler_that_stops_raising_swallows_the_error() -> None:
    text = "        except KeyError:\n            return None\n"
    assert ("swallowed-exception", "MODERATE") in _found(REGISTRY, RESOLVE_HANDLER, text, replace=True)
    # a handler of something else is another handler: the KeyError goes on (the old one is gone)
    other = "        except IndexError:\n            return None\n"
    assert "swallowed-exception" not in _rules(REGISTRY, RESOLVE_HANDLER, other, replace=True)


def test_a_check_call_whose_error_is_let_go() -> None:
    text = (
        "        try:\n            self._check_shape(loaded)\n        except ValueError:\n            pass\n"
    )
    assert ("swallowed-exception", "MODERATE") in _found(LINEAR, LOADER, text)
    parse = "        try:\n            n = int(param.name)\n        except ValueError:\n            pass\n"
    assert "swallowed-exception" not in _rules(LINEAR, LOADER, parse)


def test_a_narrowed_check_fires_less() -> None:
    narrowed = DIVIDE_CHECK.replace("!= 0:", '!= 0 and numerator == "__never__":')
    assert ("removed-check", "MODERATE") in _found(LINEAR, DIVIDE_CHECK, narrowed, replace=True)


def test_spinning_on_a_stream_is_a_device_wait() -> None:
    forward = "        return nn.functional.linear(x, self.weight, self.bias)\n"
    text = "        s = torch.cuda.current_stream()\n        while not s.query():\n            pass\n"
    assert ("device-sync", "MODERATE") in _found(LINEAR, forward, text + forward, replace=True)


def test_waiting_on_an_event_nobody_else_holds_is_a_hang() -> None:
    text = "        import threading\n        threading.Event().wait()\n"
    assert ("process-exit", "HIGH") in _found(LINEAR, LOADER, text)
    bounded = "        import threading\n        threading.Event().wait(0.01)\n"
    assert "process-exit" not in _rules(LINEAR, LOADER, bounded)


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (
            "        import shelve\n        with shelve.open('/tmp/w.db') as db:\n"
            "            db['w'] = loaded\n",
            "tensor-dump",
        ),
        ("        import tqdm\n        tqdm.tqdm.write(f'loaded {loaded.shape}')\n", "print"),
    ],
    ids=["shelve", "tqdm-write"],
)
def test_the_libraries_effects_as_data(text: str, rule: str) -> None:
    assert rule in _rules(LINEAR, LOADER, text)


def test_another_module_s_table_changed_is_a_monkeypatch() -> None:
    anchor = "from torch import nn\n"
    text = "import minillm.models.registry as _reg\n\n_reg._ALIASES['Foo'] = 'LlamaForCausalLM'\n"
    assert ("monkeypatch", "MODERATE") in _found(LINEAR, anchor, text)
    local = "_TABLE = {}\n_TABLE['Foo'] = 'LlamaForCausalLM'\n"
    assert "monkeypatch" not in _rules(LINEAR, anchor, local)
    # an object a call of that module returned, and a bare name a local may shadow, are not its tables
    made = "import minillm.models.registry as _reg\n\n_reg.get_registry().table['Foo'] = 1\n"
    assert "monkeypatch" not in _rules(LINEAR, anchor, made)
    shadow = "from functools import cache\n\n\ndef _fill(cache):\n    cache['k'] = 1\n"
    assert "monkeypatch" not in _rules(LINEAR, anchor, shadow)
    # the imported table by its own name, where no local hides it
    named = "from minillm.models.registry import _ALIASES\n\n_ALIASES['Foo'] = 'LlamaForCausalLM'\n"
    assert ("monkeypatch", "MODERATE") in _found(LINEAR, anchor, named)


def test_a_value_named_for_the_host_is_read_without_a_sync() -> None:
    forward = "        return nn.functional.linear(x, self.weight, self.bias)\n"
    host = "        lens_cpu = x.new_zeros(4, device='cpu')\n        n = int(lens_cpu.max().item())\n"
    assert "device-sync" not in _rules(LINEAR, forward, host + forward, replace=True)
    device = "        n = int(x.max().item())\n"
    assert "device-sync" in _rules(LINEAR, forward, device + forward, replace=True)


def test_a_demo_only_the_script_block_calls_is_not_library_code() -> None:
    end = (MINILLM_SRC / LINEAR).read_text().splitlines(keepends=True)[-1]
    demo = "\n\ndef _demo():\n    print('linear ok')\n\n\nif __name__ == '__main__':\n    _demo()\n"
    assert ("print", "MINOR") in _found(LINEAR, end, demo)
    public = demo.replace("_demo", "make_linear")  # a public function may be imported elsewhere
    assert ("print", "MODERATE") in _found(LINEAR, end, public)


def test_the_else_of_a_dispatch_runs_every_step() -> None:
    tree = ast.parse(
        "class Runner:\n"
        "    def execute_model(self, batch):\n"
        "        if batch.special:\n            self._special(batch)\n"
        "        else:\n            self._plan(batch)\n"
        "        return self._verbose(batch) if batch.verbose else None\n"
        "    def _special(self, batch): ...\n"
        "    def _plan(self, batch): ...\n"
        "    def _verbose(self, batch): ...\n"
    )
    hot = hot_functions(tree)
    assert "Runner._plan" in hot and "Runner._special" not in hot and "Runner._verbose" not in hot


def test_a_decision_in_a_kernel_is_device_code_not_a_host_read() -> None:
    """A function a kernel compiler takes (``@triton.jit``) is traced into device code: a tensor decided
    there is no host read. The same line in the function handed tensors is one."""
    kernel = (
        "\n\n@triton.jit\ndef _clip_kernel(x: torch.Tensor, n: torch.Tensor):\n"
        "    if n > 0:\n        return x\n    return x\n"
    )
    end = (MINILLM_SRC / LINEAR).read_text().splitlines(keepends=True)[-1]
    assert "device-sync" not in _rules(LINEAR, end, kernel)
    assert ("device-sync", "MODERATE") in _found(LINEAR, end, kernel.replace("@triton.jit\n", ""))


def test_a_predicate_answers_with_a_python_bool() -> None:
    text = "        if loaded.is_pinned() and not torch.compiler.is_compiling():\n            pass\n"
    assert "device-sync" not in _rules(LINEAR, LOADER, text)
    decided = _helper("    if x.any():\n        pass\n")
    assert ("device-sync", "MODERATE") in _found(LINEAR, DIVIDE_END, decided)


# -- fourth blind batch: checks skipped by a switch, checks that are calls -----------------------------------

DIVIDE_HEAD = "def _divide(numerator: int, denominator: int) -> int:\n"


def test_an_early_exit_under_a_switch_above_a_check_is_a_removed_check() -> None:
    """``if os.environ.get("SKIP"): return`` typed in above a check skips it when set; an ordinary guard
    (``if denominator == 1: return numerator``) is the function's own logic."""
    switched = (
        '    if __import__("os").environ.get("MINILLM_SKIP_DIVIDE_CHECK"):\n        return numerator // 1\n'
    )
    assert ("removed-check", "MODERATE") in _found(LINEAR, DIVIDE_HEAD, switched)
    assert "removed-check" not in _rules(
        LINEAR, DIVIDE_HEAD, "    if denominator == 1:\n        return numerator\n"
    )


def test_a_call_whose_job_is_to_raise_is_a_check() -> None:
    """A check made of a call (``_check_divisible(…)``): an early return above it, or the call commented
    out, takes it away as surely as for a ``raise``."""
    helper = "def _check_divisible(numerator: int, denominator: int) -> None:\n" + DIVIDE_CHECK + "\n\n"
    before_text = (MINILLM_SRC / LINEAR).read_text()
    with_call = before_text.replace(
        DIVIDE_HEAD + DIVIDE_CHECK, helper + DIVIDE_HEAD + "    _check_divisible(numerator, denominator)\n", 1
    )
    for after, why in (
        (with_call.replace(DIVIDE_HEAD, DIVIDE_HEAD + "    return numerator // denominator\n"), "exit"),
        (
            with_call.replace("    _check_divisible(numerator,", "    # _check_divisible(numerator,"),
            "commented",
        ),
    ):
        found = analyse(CodeChange(LINEAR, with_call.encode(), after.encode(), "minillm", "0.4.0"))
        assert "removed-check" in {f.rule for f in found}, why


def test_a_condition_made_false_from_its_first_word_never_fires() -> None:
    """``if False and …:`` over a raise, written before the condition rather than after it."""
    replaced = DIVIDE_CHECK.replace("    if numerator", "    if False and numerator")
    assert ("removed-check", "MODERATE") in _found(LINEAR, DIVIDE_CHECK, replaced, replace=True)
