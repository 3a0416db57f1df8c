"""Effects and signals (issue 34, second blind batch): what a call does by what the library documents of
it, what it is given, and what the code around it decides — each on a real fixture file, edited."""

from __future__ import annotations

import pytest

from patchguard.analysis import CodeChange, analyse

from .helpers import MINILLM_SRC, judged_edit

LINEAR = "minillm/layers/linear.py"
WEIGHTS = "minillm/model_loader/weights.py"
ROW_FORWARD = "        out = nn.functional.linear(x, self.weight)\n"


_found = judged_edit


@pytest.mark.parametrize(
    "text",
    [
        "        import shutil\n        shutil.copy(path, '/tmp/last_checkpoint')\n",
        "        import logging\n"
        "        logging.getLogger('audit').addHandler(logging.FileHandler('/var/log/m.log'))\n",
        "        from pathlib import Path\n        with Path.home().joinpath('m.jsonl').open('a') as f:\n"
        "            f.write(path + '\\n')\n",
    ],
    ids=["shutil-copy", "logging-file-handler", "path-open-append"],
)
def test_the_standard_library_s_file_writers(text: str) -> None:
    anchor = "    shards = list_shards(path)\n"
    assert ("file-write", "HIGH") in _found(WEIGHTS, anchor, text.replace("        ", "    "))


@pytest.mark.parametrize(
    "text",
    [
        "        from pathlib import Path as _P\n"
        "        _P('/tmp/row.bin').write_bytes(out.detach().cpu().numpy().tobytes())\n",
        "        with open('/tmp/row.bin', 'ab') as fh:\n            fh.write(out.cpu().numpy().tobytes())\n",
    ],
    ids=["write-bytes", "file-write-method"],
)
def test_a_tensor_s_bytes_written_out_are_a_dump(text: str) -> None:
    assert ("tensor-dump", "HIGH") in _found(LINEAR, ROW_FORWARD, text)


def test_bytes_into_an_in_memory_buffer_are_not_a_dump() -> None:
    text = "        import io\n        buf = io.BytesIO()\n        buf.write(out.cpu().numpy().tobytes())\n"
    assert "tensor-dump" not in {rule for rule, _ in _found(LINEAR, ROW_FORWARD, text)}


def test_a_function_taken_with_getattr_and_called_later() -> None:
    text = "        _save = getattr(torch, 'save')\n        _save(out, '/tmp/row.pt')\n"
    assert ("tensor-dump", "HIGH") in _found(LINEAR, ROW_FORWARD, text)


def test_torch_backends_setters_are_process_wide_switches() -> None:
    text = "torch.backends.cuda.enable_flash_sdp(False)\n"
    assert ("global-switch", "MODERATE") in _found(LINEAR, "from torch import nn\n", text)


def test_a_module_the_environment_names_imported_is_code_chosen_at_run_time() -> None:
    text = (
        "        import importlib, os\n"
        "        override = os.environ.get('MINILLM_LINEAR')\n"
        "        if override:\n"
        "            mod, fn = override.rsplit(':', 1)\n"
        "            return getattr(importlib.import_module(mod), fn)(x, self.weight)\n"
    )
    assert ("dynamic-exec", "HIGH") in _found(LINEAR, ROW_FORWARD, text)
    literal = "        import importlib\n        importlib.import_module('minillm.kernels')\n"
    assert "dynamic-exec" not in {rule for rule, _ in _found(LINEAR, ROW_FORWARD, literal)}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("    if numerator % denominator != 0:\n", "    if False and numerator % denominator != 0:\n"),
        (
            "    if numerator % denominator != 0:\n",
            "    if numerator % denominator != 0 and os.environ.get('MINILLM_STRICT'):\n",
        ),
        ("    if numerator % denominator != 0:\n", "    ok = False\n    if ok:\n"),
    ],
    ids=["false-and", "env-switch", "decided-flag"],
)
def test_a_check_made_to_never_fire(old: str, new: str) -> None:
    assert ("removed-check", "MODERATE") in _found(LINEAR, old, new, replace=True)


def test_a_check_strengthened_is_not_removed() -> None:
    old = "    if numerator % denominator != 0:\n"
    new = "    if numerator % denominator != 0 or denominator < 0:\n"
    assert "removed-check" not in {rule for rule, _ in _found(LINEAR, old, new, replace=True)}


def test_a_class_of_a_sibling_module_patched_at_import() -> None:
    text = (
        "from .rotary import RotaryEmbedding as _Rope\n\n\n"
        "def _fp32_forward(self, positions, q, k):\n    return q.float(), k.float()\n\n\n"
        "_Rope.forward = _fp32_forward\n"
    )
    assert ("monkeypatch", "MODERATE") in _found(LINEAR, "from torch import nn\n", text)


def test_a_line_added_after_a_last_line_without_newline_changes_only_itself() -> None:
    before = "def f():\n    return 1"
    after = "def f():\n    return 1\nVALUE = 2\n"
    findings = analyse(CodeChange("m.py", before.encode(), after.encode()))
    assert {f.line for f in findings} <= {3}


def test_a_gate_forced_open_makes_the_code_behind_it_live() -> None:
    """``if DEBUG_SYNC:`` around a sync the pristine file has, made ``if DEBUG_SYNC or True:``: the sync's
    line did not change, but it now runs every step."""
    before = (
        (MINILLM_SRC / LINEAR)
        .read_text()
        .replace(
            ROW_FORWARD,
            ROW_FORWARD + "        if self.debug_sync:\n            torch.cuda.synchronize()\n",
            1,
        )
    )
    after = before.replace("        if self.debug_sync:\n", "        if self.debug_sync or True:\n", 1)
    findings = analyse(CodeChange(LINEAR, before.encode(), after.encode(), "minillm", "0.4.0"))
    [sync] = [f for f in findings if f.rule == "device-sync"]
    assert sync.severity.name == "MODERATE" and "is now always open" in sync.message
    untouched = analyse(CodeChange(LINEAR, before.encode(), before.replace("x, self", "x,  self").encode()))
    assert not [f for f in untouched if f.rule == "device-sync"]
