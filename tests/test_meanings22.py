"""Meanings (issue 34, after the twenty-sixth blind batch's first score), each judged on a module of its own
and end to end on an installed wheel:

- a statement over several lines read without the comment of each of its lines (a comment inside a
  ``return (`` … ``)`` no longer cuts it short), and the header of a line nested in brackets found through
  the brackets around it (``return (`` … ``and (`` … the line);
- a predicate named for what something can be (``_is_launchable``) says what may be done;
- a bound handed through a conversion (``int(sr * seconds)``) and an ``if``-expression read by its value;
- ``return super()._validate_kwargs(**kwargs)`` is a check: replaced by a constant, it is gone;
- an assertion that now asks only what kind a value is (``isinstance(n, int) and n > 0`` for
  ``is_pow_2(n)``);
- a set handed to a declaration of capabilities (``Capabilities(scales=frozenset({"none"}))``), grown;
- a handler that handed on what it caught — returned it, made it a field — and lets it go now; a call told
  to hand its errors back (``return_exceptions=True``); a lookup that ran bare wrapped in a ``try``;
- a function that calls one named for running device code computes on the device; an array reduction of
  what a call made of a tensor is a tensor's; ``torch.distributed.TCPStore`` opens a connection;
- quiet: a guard folded into a stand-in (``(kv_params or {}).get(k)``); a suppression around code whose
  errors the pristine file let go already; ``ProcessorMixin.__call__`` is a host stage; a search's stop
  (``if lib is not None: break``) moved; ``compile`` told to build a syntax tree only;
- a check commented out of the literal a loop of validators walks; ``not (… and n in (64, 128) and …)``
  whose part admits more, in a condition too long to count its cases; a ``Literal`` type given more values.
"""

from __future__ import annotations

from pathlib import Path

from .helpers import EditedModule, scan_edited

ENGINE = "pkg/policy.py"
PRISTINE = """\
import asyncio
import logging
import os

import torch
import torch.distributed as dist
from typing import Literal

from pkg.caps import Capabilities
from pkg.kernels import fused_kernel_experts
from transformers import ProcessorMixin

logger = logging.getLogger(__name__)

PLAN = Capabilities(
    name="fa2",
    scales=frozenset({"none"}),
    graphs=True,
)


def supports_device(p) -> bool:
    return (
        p.is_cuda()
        and (
            p.is_family(90)
            # 110 excluded: upstream issue 3134
            or p.is_family(100)
        )
        and p.has_library()
    )


def _is_launchable(world_size: int, ordered: bool, blocks: int) -> bool:
    return (
        world_size == 8
        and ordered
        and blocks == 1
    )


def load_audio(sr, seconds, frames):
    max_samples = int(sr * seconds) if seconds is not None else None
    total = 0
    for frame in frames:
        total += len(frame)
        if max_samples is not None and total > max_samples:
            raise ValueError("audio too long")
    return total


class Processor:
    def _validate_kwargs(self, **kwargs):
        kwargs.pop("do_resize", None)
        return super()._validate_kwargs(**kwargs)


def scan(x, chunk_size):
    assert is_pow_2(chunk_size), "chunk_size must be a power of 2"
    return x.reshape(-1, chunk_size)


def probe(names):
    for name in names:
        try:
            __import__(name)
        except (ImportError, OSError) as exc:
            return f"cannot import {name}: {exc}"
    return None


async def beams(tasks):
    output = [x[0] for x in await asyncio.gather(*tasks)]
    return output


class Parser:
    def __init__(self, vocab, pieces):
        self.vocab = vocab
        self.ids = [self.vocab[piece] for piece in pieces]


class Runner:
    def run(self, runner_input, quant_info):
        output = fused_kernel_experts(runner_input.hidden_states, quant_info.w13)
        return output


def expect(inv, value: torch.Tensor, msg: str = ""):
    if value.numel() > 0:
        detail = f"{inv.name}: {msg}"
        inv.report(inv.prop.ok(value), detail)
    return value


def remote_source(kv_params):
    if not kv_params:
        return None
    return kv_params.get("remote_kv_source")


def cleanup(marker, temp_path):
    try:
        if os.path.exists(temp_path):
            os.remove(temp_path)
    except Exception:
        pass
    return marker


class ImageProcessor(ProcessorMixin):
    def __call__(self, text, grid, merge):
        count = grid.prod() // merge
        return text * count


def find_library(ctypes, names):
    lib = None
    for so in names:
        try:
            lib = ctypes.CDLL(so)
        except OSError:
            lib = None
        if lib is not None:
            break
    return lib


def parse_tools(text):
    import ast

    module = ast.parse(text)
    return module.body


def apply_validators(self, tokens):
    for validator in (
        self._token_truncation,
        self._token_len_check,
    ):
        tokens = validator(tokens)
    return tokens


def check_backend(arch_ok, head_size, dtype, alibi, ratio_ok):
    if not (
        arch_ok
        and head_size in (64, 128, 256)
        and ratio_ok
        and dtype in ("auto", "float16", "bfloat16", "fp8")
        and alibi is None
    ):
        raise ValueError("unsupported configuration")


Ranks = Literal[1, 8, 16, 512]


def bootstrap():
    try:
        store = dist.distributed_c10d._get_default_store()
    except (AttributeError, RuntimeError) as e:
        raise ValueError("no default store") from e
    return store
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_near, _named = _MODULE.near, _MODULE.named


_FAMILY = "            or p.is_family(100)\n"


def test_a_part_added_to_an_answer_with_a_comment_inside() -> None:
    edit = (_FAMILY, _FAMILY + "            or p.is_family(110)\n")
    assert "removed-check" in _near(edit, "is_family(110)")


def test_a_part_taken_from_an_answer_with_a_comment_inside_is_quiet() -> None:
    edit = (_FAMILY, "")
    assert "removed-check" not in _MODULE.rules(edit)


def test_a_predicate_of_what_something_can_be_lost_a_part() -> None:
    edit = ("        and ordered\n", "")
    assert "removed-check" in _near(edit, "and blocks == 1")


def test_a_predicate_of_what_something_can_be_given_a_part_is_quiet() -> None:
    edit = ("        and ordered\n", "        and ordered\n        and world_size % 2 == 0\n")
    assert "removed-check" not in _MODULE.rules(edit)


_SAMPLES = "    max_samples = int(sr * seconds) if seconds is not None else None\n"


def test_a_bound_through_a_conversion_raised() -> None:
    edit = (_SAMPLES, _SAMPLES.replace("int(sr * seconds)", "int(sr * seconds * 10)"))
    assert "removed-check" in _near(edit, "seconds * 10")


def test_a_bound_through_a_conversion_lowered_is_quiet() -> None:
    edit = (_SAMPLES, _SAMPLES.replace("int(sr * seconds)", "int(sr * seconds // 2)"))
    assert "removed-check" not in _MODULE.rules(edit)


_VALIDATED = "        return super()._validate_kwargs(**kwargs)\n"


def test_a_returned_validation_replaced_by_a_constant() -> None:
    assert "removed-check" in _near((_VALIDATED, "        return ()\n"), "return ()")


def test_a_returned_validation_kept_is_quiet() -> None:
    edit = (_VALIDATED, "        kwargs.pop('do_rescale', None)\n" + _VALIDATED)
    assert "removed-check" not in _MODULE.rules(edit)


_POW2 = '    assert is_pow_2(chunk_size), "chunk_size must be a power of 2"\n'


def test_an_assertion_that_asks_only_the_kind() -> None:
    new = '    assert isinstance(chunk_size, int) and chunk_size > 0, "chunk_size must be positive"\n'
    assert "removed-check" in _near((_POW2, new), "isinstance(chunk_size, int)")


def test_an_assertion_that_asks_the_kind_too_is_quiet() -> None:
    new = (
        '    assert isinstance(chunk_size, int) and is_pow_2(chunk_size), "chunk_size must be a power of 2"\n'
    )
    assert "removed-check" not in _MODULE.rules((_POW2, new))


_SCALES = '    scales=frozenset({"none"}),\n'


def test_a_declared_capability_set_grown() -> None:
    edit = (_SCALES, '    scales=frozenset({"none", "per-tensor"}),\n')
    assert "removed-check" in _near(edit, "per-tensor")


def test_a_declared_capability_set_shrunk_is_quiet() -> None:
    edit = (_SCALES, "    scales=frozenset(),\n")
    assert "removed-check" not in _MODULE.rules(edit)


_RETURNED = '            return f"cannot import {name}: {exc}"\n'


def test_a_handler_that_returned_the_error_lets_it_go() -> None:
    assert "swallowed-exception" in _near((_RETURNED, "            continue\n"), "continue")


def test_a_handler_that_returns_the_error_another_way_is_quiet() -> None:
    edit = (_RETURNED, '            return f"{name} failed to import: {exc!r}"\n')
    assert "swallowed-exception" not in _MODULE.rules(edit)


_GATHERED = "    output = [x[0] for x in await asyncio.gather(*tasks)]\n"


def test_a_call_told_to_hand_its_errors_back() -> None:
    new = (
        "    results = await asyncio.gather(*tasks, return_exceptions=True)\n"
        "    output = [x[0] for x in results if not isinstance(x, BaseException)]\n"
    )
    assert "swallowed-exception" in _near((_GATHERED, new), "return_exceptions=True")


def test_a_call_told_to_raise_its_errors_is_quiet() -> None:
    new = "    output = [x[0] for x in await asyncio.gather(*tasks, return_exceptions=False)]\n"
    assert "swallowed-exception" not in _MODULE.rules((_GATHERED, new))


_LOOKED_UP = "        self.ids = [self.vocab[piece] for piece in pieces]\n"


def test_a_lookup_that_ran_bare_wrapped_in_a_try() -> None:
    new = (
        "        self.ids = []\n        for piece in pieces:\n            try:\n"
        "                self.ids.append(self.vocab[piece])\n"
        "            except KeyError:\n                continue\n"
    )
    assert "swallowed-exception" in _near((_LOOKED_UP, new), "except KeyError")


def test_a_lookup_made_lenient_by_get_is_another_finding() -> None:
    new = "        self.ids = [self.vocab.get(piece, 0) for piece in pieces]\n"
    assert "swallowed-exception" not in _MODULE.rules((_LOOKED_UP, new))


_OUTPUT = "        output = fused_kernel_experts(runner_input.hidden_states, quant_info.w13)\n"


def test_a_function_that_calls_a_kernel_computes_on_the_device() -> None:
    edit = (
        _OUTPUT,
        _OUTPUT + "        if torch.isnan(output).any():\n            output = output.nan_to_num()\n",
    )
    assert "device-sync" in _near(edit, "torch.isnan(output).any()")


def test_a_function_that_calls_no_kernel_is_quiet() -> None:
    old = "def probe(names):\n    for name in names:\n"
    edit = (old, old + "        if torch.isnan(torch.zeros(1)).any():\n            continue\n")
    assert "device-sync" not in _MODULE.rules(edit)


_DETAIL = '        detail = f"{inv.name}: {msg}"\n'


def test_a_reduction_of_what_a_call_made_of_a_tensor() -> None:
    edit = (_DETAIL, _DETAIL + "        if not inv.prop.ok(value).all():\n            breakpoint()\n")
    assert "device-sync" in _named(edit, "inv.prop.ok(value).all()")


def test_a_reduction_of_what_a_call_made_of_host_values_is_quiet() -> None:
    edit = (_DETAIL, _DETAIL + "        if not inv.prop.ok(msg).all():\n            detail = msg\n")
    assert "device-sync" not in _MODULE.rules(edit)


_RAISED = '        raise ValueError("no default store") from e\n'


def test_a_tcp_store_opened() -> None:
    edit = (_RAISED, '        store = dist.TCPStore("127.0.0.1", 29561, 1, True)\n')
    assert "network" in _near(edit, "dist.TCPStore")


_GUARD = '    if not kv_params:\n        return None\n    return kv_params.get("remote_kv_source")\n'


def test_a_guard_folded_into_a_stand_in_is_quiet() -> None:
    edit = (_GUARD, '    return (kv_params or {}).get("remote_kv_source")\n')
    assert "removed-check" not in _MODULE.rules(edit)


def test_a_guard_taken_out_unfolded_is_a_check_gone() -> None:
    edit = (_GUARD, '    return kv_params.get("remote_kv_source")\n')
    assert "removed-check" in _MODULE.rules(edit)


_CLEANUP = (
    "    try:\n        if os.path.exists(temp_path):\n            os.remove(temp_path)\n"
    "    except Exception:\n        pass\n"
)


def test_a_suppression_of_what_was_let_go_already_is_quiet() -> None:
    new = "    import contextlib\n\n    with contextlib.suppress(FileNotFoundError):\n"
    new += "        os.remove(temp_path)\n"
    assert "swallowed-exception" not in _MODULE.rules((_CLEANUP, new))


def test_a_suppression_of_what_raised_is_news() -> None:
    bare = EditedModule(ENGINE, _MODULE.after((_CLEANUP, "    os.remove(temp_path)\n")))
    new = "    import contextlib\n\n    with contextlib.suppress(OSError):\n        os.remove(temp_path)\n"
    assert "swallowed-exception" in bare.rules(("    os.remove(temp_path)\n", new))


_COUNT = "        count = grid.prod() // merge\n"


def test_a_value_read_back_in_a_processors_call_is_on_the_host() -> None:
    edit = (_COUNT, "        count = int(grid.prod().item()) // merge\n")
    assert "device-sync" not in _MODULE.rules(edit)


def test_a_log_line_in_a_loop_of_a_step_is_moderate() -> None:
    old = "        output = fused_kernel_experts(runner_input.hidden_states, quant_info.w13)\n"
    new = old + "        for name in quant_info.names:\n            logger.info(f'expert {name}')\n"
    assert "logging" in _near((old, new), "expert {name}")


_SEARCH = (
    "        try:\n            lib = ctypes.CDLL(so)\n        except OSError:\n            lib = None\n"
    "        if lib is not None:\n            break\n"
)


def test_a_search_that_stops_where_it_found_it_moved_is_quiet() -> None:
    new = "        try:\n            lib = ctypes.CDLL(so)\n            break\n"
    new += "        except OSError:\n            lib = None\n"
    assert "removed-check" not in _MODULE.rules((_SEARCH, new))


_PARSED = "    module = ast.parse(text)\n"


def test_compile_told_to_build_a_syntax_tree_runs_nothing() -> None:
    edit = (_PARSED, '    module = compile(text, "<tools>", "exec", ast.PyCF_ONLY_AST)\n')
    assert "dynamic-exec" not in _MODULE.rules(edit)


def test_compile_of_code_to_run_is_dynamic() -> None:
    edit = (_PARSED, '    module = compile(text, "<tools>", "exec")\n    exec(module)\n')
    assert "dynamic-exec" in _MODULE.rules(edit)


def test_a_validator_commented_out_of_a_loop_of_validators() -> None:
    edit = ("        self._token_len_check,\n", "        # self._token_len_check,\n")
    assert "removed-check" in _near(edit, "# self._token_len_check")


def test_a_validator_added_to_a_loop_of_validators_is_quiet() -> None:
    old = "        self._token_len_check,\n"
    assert "removed-check" not in _MODULE.rules((old, old + "        self._token_padding,\n"))


_HEADS = "        and head_size in (64, 128, 256)\n"


def test_a_part_of_a_long_negated_condition_admits_more() -> None:
    edit = (_HEADS, "        and head_size in (64, 80, 96, 128, 256)\n")
    assert "removed-check" in _near(edit, "(64, 80, 96, 128, 256)")


def test_a_part_of_a_long_negated_condition_admits_less_is_quiet() -> None:
    edit = (_HEADS, "        and head_size in (64, 128)\n")
    assert "removed-check" not in _MODULE.rules(edit)


_RANKS = "Ranks = Literal[1, 8, 16, 512]\n"


def test_a_literal_type_given_more_values() -> None:
    assert "removed-check" in _near((_RANKS, "Ranks = Literal[1, 8, 16, 512, 1024]\n"), "1024")


def test_a_literal_type_given_fewer_values_is_quiet() -> None:
    assert "removed-check" not in _MODULE.rules((_RANKS, "Ranks = Literal[1, 8, 16]\n"))


def test_end_to_end_on_an_installed_wheel(tmp_path: Path) -> None:
    edited = _MODULE.after(
        (_FAMILY, _FAMILY + "            or p.is_family(110)\n"),
        (_RETURNED, "            continue\n"),
    )
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    rules = {rule for rule, _ in found}
    assert {"removed-check", "swallowed-exception"} <= rules, found
