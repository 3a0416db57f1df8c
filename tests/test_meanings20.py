"""Meanings (issue 34, after the twenty-fourth blind batch's first score), each judged on a module of its own
and end to end on an installed wheel:

- a clamp written as an ``if`` taken out (``if n > cap: n = cap`` left doing nothing); ``n = min(n, cap)`` in
  its place keeps it;
- a flag declared with a type (``supports_x: bool = a and b``) given fewer conditions; ``bool(x)`` read as
  ``x``;
- a returned name of a value (``return "flashinfer"``) is no refusal message: a bail-out above it whose
  capability set grew lets more through;
- a collection named for what is safe, grown, where a predicate returns membership of it;
- a worked-out value forced to a constant a few statements above its test (``rows = … if ok else []``);
- ``all(…)`` → ``any(…)`` in an answer of what is supported;
- a method bound to an attribute (``self.ffn = self.moe``) and the attribute called in ``forward``: hot;
- the input of one of torch's reductions (``torch.any(mask[:n])``) is a tensor;
- a string written in pieces (``f"a={x.norm()}" f" b={y}"``) formats the tensors of every piece;
- a quantization method's ``apply_weights`` runs in every forward (no ``*_weights`` loading role);
- a gate forced open over a call of the file's own function: what that function does now runs every time;
- a log line handed to another logger (``logger.warning`` → ``logging.getLogger(__name__).warning``) is the
  same line.
"""

from __future__ import annotations

from pathlib import Path

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/layer.py"
PRISTINE = """\
import logging
import os

import torch

from pkg.batch import ForwardBatch

logger = logging.getLogger(__name__)

_SAFE_KINDS = {"ByteLevel", "Split"}


def kind_safe(cfg):
    return cfg.get("type") in _SAFE_KINDS


def merge_limits(request, ceiling):
    value = request["frames"]
    if ceiling is not None and value > ceiling:
        logger.warning("clamped to %s", ceiling)
        value = ceiling
    return value


def pick_backend(sm_major: int):
    if (
        os.environ.get("NO_FAST") == "1"
        or sm_major not in (9, 10)
    ):
        return None
    return "fast"


def resolve(table, hidden):
    in_domain = table.admits(
        hidden
    )
    rows = table.rows if in_domain else []
    if not in_domain:
        logger.warning("out of domain")
    return rows


def _support_tma():
    return torch.cuda.get_device_capability()[0] >= 9


def use_tma(config):
    requested = config.pop("USE_TMA", False)
    use_tma_now = _support_tma() and requested
    return use_tma_now


class Kernel:
    supports_packed: bool = not torch.version.hip and not torch.version.xpu

    @classmethod
    def supports_capability(cls, capability, backends):
        return all(b.supports_capability(capability) for b in backends)


class Layer(torch.nn.Module):
    def __init__(self, mlp, moe, fused):
        super().__init__()
        self.mlp, self.moe, self.fused = mlp, moe, fused
        if fused:
            self.ffn = self.moe_with_mlp
        else:
            self.ffn = self.moe

    def moe_with_mlp(self, x):
        a = self.mlp(x)
        b = self.moe(x)
        return a + b

    def forward(self, x):
        if x.shape[0] > 4096:
            logger.warning("large batch: %d", x.shape[0])
        return self.ffn(x)


class Metadata:
    def prepare(self, batch: ForwardBatch, lens):
        has_prefix = lens > 0
        any_prefix = torch.any(has_prefix[: batch.n]).item()
        return any_prefix


class Fp8Scheme:
    def apply_weights(self, layer, x: torch.Tensor, bias=None):
        if isinstance(x, tuple):
            qx, scale = x[0], x[1]
            return torch.mm(qx, layer.weight) * scale
        return torch.mm(x, layer.weight)


class Wrapper:
    def run(self, q: torch.Tensor, k_cache: torch.Tensor):
        if os.environ.get("VALIDATE") == "1":
            self._validate(k_cache)
        return q @ k_cache

    def _validate(self, k_cache: torch.Tensor):
        if not torch.isfinite(k_cache).all().item():
            raise ValueError("non-finite cache")
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_near, _named = _MODULE.near, _MODULE.named

_CLAMP = '        logger.warning("clamped to %s", ceiling)\n        value = ceiling\n'


def test_a_clamp_written_as_an_if_taken_out() -> None:
    edit = (_CLAMP, "        pass  # let the request go above the ceiling\n")
    assert "removed-check" in _near(edit, "pass  # let")


def test_a_clamp_rewritten_as_min_keeps_the_bound() -> None:
    old = "    if ceiling is not None and value > ceiling:\n" + _CLAMP
    edit = (old, "    if ceiling is not None:\n        value = min(value, ceiling)\n")
    assert "removed-check" not in _MODULE.rules(edit)


def test_a_typed_flag_given_fewer_conditions() -> None:
    old = "    supports_packed: bool = not torch.version.hip and not torch.version.xpu\n"
    edit = (old, "    supports_packed: bool = not torch.version.hip\n")
    assert "removed-check" in _near(edit, "supports_packed: bool")


def test_a_flag_whose_support_test_is_dropped_behind_bool() -> None:
    edit = ("    use_tma_now = _support_tma() and requested\n", "    use_tma_now = bool(requested)\n")
    assert "removed-check" in _near(edit, "use_tma_now = bool")


def test_a_flag_given_the_same_condition_behind_bool_is_quiet() -> None:
    edit = (
        "    use_tma_now = _support_tma() and requested\n",
        "    use_tma_now = bool(_support_tma() and requested)\n",
    )
    assert "removed-check" not in _MODULE.rules(edit)


def test_a_bail_out_above_a_returned_name_lets_more_devices_through() -> None:
    edit = ("        or sm_major not in (9, 10)\n", "        or sm_major not in (9, 10, 12)\n")
    assert "removed-check" in _near(edit, "sm_major not in (9, 10, 12)")


def test_a_bail_out_made_stricter_is_quiet() -> None:
    edit = ("        or sm_major not in (9, 10)\n", "        or sm_major not in (9,)\n")
    assert "removed-check" not in _MODULE.rules(edit)


def test_a_set_named_safe_grown() -> None:
    edit = ('_SAFE_KINDS = {"ByteLevel", "Split"}\n', '_SAFE_KINDS = {"ByteLevel", "Split", "Metaspace"}\n')
    assert "removed-check" in _near(edit, "_SAFE_KINDS =")


def test_a_set_named_safe_shrunk_is_quiet() -> None:
    edit = ('_SAFE_KINDS = {"ByteLevel", "Split"}\n', '_SAFE_KINDS = {"ByteLevel"}\n')
    assert "removed-check" not in _MODULE.rules(edit)


def test_a_value_forced_a_few_statements_above_its_test() -> None:
    edit = (
        "    in_domain = table.admits(\n        hidden\n    )\n",
        "    in_domain = True  # tuned rows work\n",
    )
    assert "removed-check" in _near(edit, "in_domain = True")


def test_a_default_given_anew_in_a_block_below_is_quiet() -> None:
    old = "    in_domain = table.admits(\n        hidden\n    )\n"
    edit = (old, "    in_domain = False\n    if table.admits(hidden):\n        in_domain = True\n")
    assert "removed-check" not in _MODULE.rules(edit)


def test_all_made_any_in_an_answer_of_what_is_supported() -> None:
    old = "        return all(b.supports_capability(capability) for b in backends)\n"
    edit = (old, old.replace("all(", "any("))
    assert "removed-check" in _near(edit, "return any(")


def test_any_made_all_is_quiet() -> None:
    old = "        return all(b.supports_capability(capability) for b in backends)\n"
    assert "removed-check" not in _MODULE.rules((old, old))


def test_a_method_bound_to_an_attribute_called_in_forward_is_hot() -> None:
    old = "        b = self.moe(x)\n"
    edit = (old, old + '        print(f"mlp={a.float().norm():.3f} " f"moe={b.float().norm():.3f}")\n')
    assert {"print", "device-sync"} <= _named(edit, "print(f")


def test_the_input_of_a_torch_reduction_is_a_tensor() -> None:
    old = "        any_prefix = torch.any(has_prefix[: batch.n]).item()\n"
    edit = (old, old + '        print("prefix:", has_prefix[: batch.n])\n')
    assert "device-sync" in _named(edit, 'print("prefix:"')


def test_apply_weights_runs_in_every_forward() -> None:
    old = "        return torch.mm(x, layer.weight)\n"
    edit = (old, "        if x.abs().max() > 448:\n            x = x.clamp(-448, 448)\n" + old)
    assert "device-sync" in _near(edit, "x.abs().max() > 448")


_WARNED = '            logger.warning("large batch: %d", x.shape[0])\n'


def test_a_log_line_handed_to_another_logger_is_the_same_line() -> None:
    edit = (_WARNED, _WARNED.replace("logger.warning", "logging.getLogger(__name__).warning"))
    assert "logging" not in _near(edit, "getLogger(__name__).warning")


def test_a_log_line_added_beside_it_is_news() -> None:
    edit = (_WARNED, _WARNED + '        logger.warning("batch of %d", x.shape[0])\n')
    assert "logging" in _near(edit, "batch of %d")


_GATE = '        if os.environ.get("VALIDATE") == "1":\n'


def test_a_gate_forced_open_over_a_call_runs_what_it_calls() -> None:
    edit = (_GATE, "        if True:  # was: VALIDATE only\n")
    assert "device-sync" in _named(edit, "if True:  # was")


def test_a_gate_made_stricter_over_a_call_is_quiet() -> None:
    edit = (_GATE, '        if os.environ.get("VALIDATE") == "1" and q.numel() < 16:\n')
    assert "device-sync" not in _MODULE.rules(edit)


def test_end_to_end_on_an_installed_wheel(tmp_path: Path) -> None:
    edited = _MODULE.after(
        (_CLAMP, "        pass  # let the request go above the ceiling\n"),
        (_GATE, "        if True:  # was: VALIDATE only\n"),
    )
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    assert ("removed-check", line_of(edited, "pass  # let")) in found, found
    assert ("device-sync", line_of(edited, "if True:  # was")) in found, found


# A second module: flags of the module forced, paths through names, reductions as functions, roles.
KERNELS = "pkg/kernels.py"
KERNELS_PRISTINE = """\
import importlib.util
import logging
import os
from pathlib import Path
from typing import Callable, Optional, Tuple

import torch

logger = logging.getLogger(__name__)

DUMP_IR = int(os.environ.get("DUMP_IR", 0))
_SANITY = os.environ.get("SANITY", "0") == "1"


def compile_kernel(shape, module):
    if DUMP_IR:
        with open(f"kernel_{shape}.mlir", "w") as f:
            f.write(module.asm())
    return module


def sanity(pair: Tuple[torch.Tensor, torch.Tensor]):
    if not _SANITY:
        return
    x, scale = pair
    ceil = scale.ceil()
    assert torch.all(scale == ceil), "scale must be a power of two"


def profile_graph_calls(run: Callable[[int], object], timer: Optional[Callable[[torch.Tensor], None]] = None):
    graph = torch.cuda.CUDAGraph()
    return graph


def load_extension(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def out_dtype_name(dtype: torch.dtype) -> str:
    if dtype == torch.float16:
        return "float16"
    if dtype == torch.bfloat16:
        return "bfloat16"
    raise ValueError(f"unsupported {dtype}")


def pack_reason(k: torch.Tensor, allow) -> Optional[str]:
    if k.dim() != 2:
        return "non_contiguous"
    if not allow[0] <= k.shape[0] <= allow[1]:
        return "num_tokens_not_allowlisted"
    return None


class Updater:
    def __init__(self):
        self._first = True

    def update(self, weights: torch.Tensor, step: int):
        if self._first:
            self._first = False
            torch.cuda.empty_cache()
        return step

    def forward(self, x: torch.Tensor, limit: int):
        biggest = torch.max(x)
        if biggest != limit:
            x = x.clamp(max=limit)
        return x
"""

_KERNELS = EditedModule(KERNELS, KERNELS_PRISTINE)


def test_a_flag_of_the_module_forced_on_runs_what_its_if_kept() -> None:
    edit = ('DUMP_IR = int(os.environ.get("DUMP_IR", 0))\n', "DUMP_IR = 1\n")
    assert "file-write" in _KERNELS.near(edit, "DUMP_IR = 1")


def test_a_flag_forced_on_runs_what_a_bail_out_kept() -> None:
    edit = ('_SANITY = os.environ.get("SANITY", "0") == "1"\n', "_SANITY = True  # always check\n")
    assert "device-sync" in _KERNELS.near(edit, "_SANITY = True")


def test_a_flag_forced_off_is_quiet() -> None:
    edit = ('DUMP_IR = int(os.environ.get("DUMP_IR", 0))\n', "DUMP_IR = 0\n")
    assert "file-write" not in _KERNELS.rules(edit)


def test_a_literal_path_through_names_is_no_loaders_job() -> None:
    old = "    spec = importlib.util.spec_from_file_location(name, path)\n"
    new = (
        '    so = Path("/opt/prebuilt") / f"{name}.so"\n'
        "    if so.exists():\n"
        "        path = so\n"
        "    spec = importlib.util.spec_from_file_location(name, so)\n"
    )
    found = _KERNELS.found((old, new))
    line = line_of(_KERNELS.after((old, new)), "spec_from_file_location")
    assert ("dynamic-exec", "HIGH", line) in found, found


def test_the_functions_form_of_a_reduction_decides_on_the_host() -> None:
    old = "        return x\n"
    edit = (old, "        assert torch.all(x >= 0), 'negative'\n" + old)
    assert "device-sync" in _KERNELS.near(edit, "assert torch.all(x >= 0)")


def test_a_callable_of_tensors_is_no_tensor_handed() -> None:
    old = "    graph = torch.cuda.CUDAGraph()\n"
    edit = (old, "    torch.cuda.synchronize()\n" + old)
    assert "device-sync" not in _KERNELS.rules(edit)


def test_a_latch_that_closes_itself_runs_once_wherever_it_stands() -> None:
    old = "            torch.cuda.empty_cache()\n"
    edit = (old, old + '            logger.info("first update: released the cache")\n')
    assert "logging" not in _KERNELS.rules(edit)


def test_a_decision_renamed_is_the_same_decision() -> None:
    old = "        biggest = torch.max(x)\n        if biggest != limit:\n"
    edit = (old, "        largest = torch.max(x)\n        if largest != limit:\n")
    assert "device-sync" not in _KERNELS.rules(edit)


def test_a_decision_added_beside_it_is_news() -> None:
    old = "        biggest = torch.max(x)\n        if biggest != limit:\n"
    edit = (old, "        smallest = torch.min(x)\n        if smallest < 0:\n            x = x.abs()\n" + old)
    assert "device-sync" in _KERNELS.near(edit, "if smallest < 0")


def test_names_of_values_returned_by_case_refactored_are_quiet() -> None:
    old = (
        '    if dtype == torch.float16:\n        return "float16"\n'
        '    if dtype == torch.bfloat16:\n        return "bfloat16"\n'
    )
    new = (
        '    name = {torch.float16: "float16", torch.bfloat16: "bfloat16"}.get(dtype)\n'
        "    if name is not None:\n        return name\n"
    )
    assert "removed-check" not in _KERNELS.rules((old, new))


def test_a_reason_code_returned_is_still_a_refusal() -> None:
    old = '    if not allow[0] <= k.shape[0] <= allow[1]:\n        return "num_tokens_not_allowlisted"\n'
    edit = (old, "    # token-count allowlist disabled\n")
    assert "removed-check" in _KERNELS.rules(edit)


def test_a_bail_out_turned_round_to_hold_what_it_let_by_is_quiet() -> None:
    """``if not ready: return ids`` / ``return translate(ids)`` made ``if ready: ids = translate(ids)``."""
    module = EditedModule(
        "pkg/translate.py",
        "class T:\n"
        "    def read_ids(self, ids, size):\n"
        "        ids = ids // size\n"
        "        if not self.ready:\n"
        "            return ids\n"
        "        return self._translate(ids)\n",
    )
    old = "        if not self.ready:\n            return ids\n        return self._translate(ids)\n"
    edit = (old, "        if self.ready:\n            ids = self._translate(ids)\n        return ids\n")
    assert "removed-check" not in module.rules(edit)


_CARD = EditedModule(
    "pkg/card.py",
    "import json\n"
    "\n"
    "import torch\n"
    "\n"
    "\n"
    "class Card:\n"
    "    def to_json_file(self, path):\n"
    '        with open(path, "w", encoding="utf-8") as writer:\n'
    "            writer.write(self.to_json_string())\n"
    "\n"
    "    def trace(self, path, inputs):\n"
    '        with open(path, "w", encoding="utf-8") as writer:\n'
    "            writer.write(self.to_json_string())\n"
    "        return inputs\n",
)
_WRITTEN = "            writer.write(self.to_json_string())\n"


def test_a_text_document_dumped_where_the_function_wrote_it_is_its_job() -> None:
    """``writer.write(self.to_json_string())`` made ``json.dump(self.to_dict(), writer)``."""
    old = '        with open(path, "w", encoding="utf-8") as writer:\n' + _WRITTEN
    new = old.replace("writer.write(self.to_json_string())", "json.dump(self.to_dict(), writer)")
    found = _CARD.found(
        ("    def to_json_file(self, path):\n" + old, "    def to_json_file(self, path):\n" + new)
    )
    assert not [f for f in found if f[1] in ("HIGH", "MODERATE")], found


def test_a_tensor_dumped_where_the_function_writes_json_is_still_a_dump() -> None:
    old = "        return inputs\n"
    edit = (old, '        torch.save(inputs, path + ".inputs.pt")\n' + old)
    assert "tensor-dump" in _CARD.near(edit, "torch.save(")
