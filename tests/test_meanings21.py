"""Meanings (issue 34, after the twenty-fifth blind batch's first score), each judged on a module of its own
and end to end on an installed wheel:

- a condition written over several lines whose closing ``):`` the diff kept alike on both sides;
- what a function that says what is supported answers, read in parts: a membership of tuples grown
  (``(major, minor) in ((12, 0),)`` → ``((10, 0), (12, 0))``), and a membership turned into an order of its
  first part (``cap() in ((10, 0), (10, 3))`` → ``cap()[0] >= 10``) in the gate of a path;
- an answer whose tests are gone, asking only that the value be there (``return bool(x)``);
- a collection of what is refused, tested by what it shares with the input (``bad & kwargs.keys()``), shrunk;
- a raise put under a further condition;
- a named limit written as arithmetic (``1 << 20``), held by a clamp (``min(n, LIMIT)``);
- a bound scaled up after it was worked out, returned by a function named for it;
- a closure reads the tensors of the function around it; a loop over a tensor walks tensors;
- an attribute given a partial of its own value (``self.model.generate = partial(self.model.generate, …)``);
- a method that writes its receiver in a file's format handed a file's name (``table.to_csv("/tmp/t.csv")``);
- a raise whose message says something failed, and a call that concludes a failure, replaced by a warning:
  the failure is swallowed, not only unchecked.
"""

from __future__ import annotations

from pathlib import Path

from .helpers import EditedModule, scan_edited

ENGINE = "pkg/gate.py"
PRISTINE = """\
import logging

import torch

logger = logging.getLogger(__name__)

_MAX_REQUESTS = 65535
_UNEXPECTED = {"chat_template", "tokenize"}


def check_family(platform, device):
    if not platform.is_family(
        100, device=device
    ):
        raise NotImplementedError("needs SM100")


def supports_capability(capability) -> bool:
    return (capability.major, capability.minor) in ((12, 0), (12, 1))


def is_valid_id(value: str) -> bool:
    return value.isalnum() and len(value) == 9


def default_backend(enabled):
    if (
        enabled
        and torch.cuda.get_device_capability() in ((10, 0), (10, 3))
    ):
        return "flashinfer"
    return None


def resolve_kwargs(kwargs, strict):
    if strict and (found := _UNEXPECTED & kwargs.keys()):
        raise ValueError(f"unexpected kwargs: {found}")
    return {k: v for k, v in kwargs.items() if k not in _UNEXPECTED}


def launch(offsets):
    longest = max(b - a for a, b in zip(offsets, offsets[1:]))
    if longest > 16384:
        raise ValueError("sequences up to 16384")
    return longest


def requests_per_launch(num_tokens):
    return min(num_tokens, _MAX_REQUESTS)


def derive_max_len(config):
    derived_max_len = float("inf")
    for key in ("max_position_embeddings", "n_positions"):
        value = getattr(config, key, None)
        if value is not None:
            derived_max_len = min(derived_max_len, value)
    return derived_max_len


def experts(hidden: torch.Tensor, topk_ids: torch.Tensor, stage: str):
    ids = topk_ids.view(-1, 1)

    def run_delta():
        out = hidden @ hidden.T
        return out

    def label():
        return stage.upper()

    return run_delta(), label()


def embed(mask: torch.Tensor, hidden: torch.Tensor):
    for row in mask:
        n = row.sum()
        hidden = hidden[:n]
    return hidden


def lengths(rows: list[list[int]], hidden: torch.Tensor):
    for row in rows:
        n = sum(row)
        hidden = hidden[:n]
    return hidden


class Pipeline:
    def run(self, table, inputs):
        encoded = self.tokenizer(table, inputs)
        outputs = self.model.generate(**encoded)
        return outputs


class Controller:
    def stop(self, thread):
        thread.join(timeout=10)
        if thread.is_alive():
            raise RuntimeError("Failed to stop the ticket thread cleanly.")

    def admit(self, size):
        if size > 4096:
            raise ValueError("size must be at most 4096")
        return size

    def transfer(self, room, reason):
        if reason is not None:
            self.conclude_failure(room=room, reason=reason)
            return True
        return False
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_near, _named = _MODULE.near, _MODULE.named


_FAMILY = "    if not platform.is_family(\n        100, device=device\n    ):\n"


def test_a_condition_over_lines_whose_closing_line_stays_alike() -> None:
    new = (
        "    if not (\n        platform.is_family(100, device=device)\n"
        "        or platform.is_family(90, device=device)\n    ):\n"
    )
    assert "removed-check" in _near((_FAMILY, new), "    if not (")


def test_a_condition_over_lines_made_stricter_is_quiet() -> None:
    new = (
        "    if not (\n        platform.is_family(100, device=device)\n"
        "        and device is not None\n    ):\n"
    )
    assert "removed-check" not in _MODULE.rules((_FAMILY, new))


_SUPPORTS = "    return (capability.major, capability.minor) in ((12, 0), (12, 1))\n"


def test_an_answer_of_tuples_grown() -> None:
    edit = (_SUPPORTS, _SUPPORTS.replace("((12, 0)", "((10, 0), (12, 0)"))
    assert "removed-check" in _near(edit, "(10, 0), (12, 0)")


def test_an_answer_of_tuples_shrunk_is_quiet() -> None:
    edit = (_SUPPORTS, _SUPPORTS.replace(", (12, 1))", ")"))
    assert "removed-check" not in _MODULE.rules(edit)


_VALID = "    return value.isalnum() and len(value) == 9\n"


def test_an_answer_that_only_asks_the_value_be_there() -> None:
    assert "removed-check" in _near((_VALID, "    return bool(value)\n"), "return bool(value)")


def test_an_answer_that_asks_more_of_the_value_is_quiet() -> None:
    edit = (_VALID, "    return bool(value) and value.isalnum() and len(value) == 9\n")
    assert "removed-check" not in _MODULE.rules(edit)


_CAPABILITY = "        and torch.cuda.get_device_capability() in ((10, 0), (10, 3))\n"


def test_a_membership_of_capabilities_turned_into_an_order() -> None:
    edit = (_CAPABILITY, "        and torch.cuda.get_device_capability()[0] >= 10\n")
    assert "removed-check" in _near(edit, "get_device_capability()[0] >= 10")


def test_a_membership_of_capabilities_narrowed_to_one_is_quiet() -> None:
    edit = (_CAPABILITY, "        and torch.cuda.get_device_capability() == (10, 0)\n")
    assert "removed-check" not in _MODULE.rules(edit)


_SET = '_UNEXPECTED = {"chat_template", "tokenize"}\n'


def test_a_refused_set_tested_by_what_it_shares_shrunk() -> None:
    assert "removed-check" in _near((_SET, '_UNEXPECTED = {"tokenize"}\n'), "_UNEXPECTED = {")


def test_a_refused_set_grown_is_quiet() -> None:
    edit = (_SET, '_UNEXPECTED = {"chat_template", "tokenize", "tools"}\n')
    assert "removed-check" not in _MODULE.rules(edit)


_RAISED = '        raise ValueError("sequences up to 16384")\n'


def test_a_raise_put_under_a_further_condition() -> None:
    new = '        if longest > 65536:\n            raise ValueError("sequences up to 65536")\n'
    assert "removed-check" in _near((_RAISED, new), "if longest > 65536")


def test_a_raise_split_over_the_same_conditions_is_quiet() -> None:
    old = "    if longest > 16384:\n" + _RAISED
    new = (
        "    if longest > 0:\n        if longest > 16384:\n"
        "            raise ValueError('sequences up to 16384')\n"
    )
    assert "removed-check" not in _MODULE.rules((old, new))


def test_a_limit_written_as_arithmetic_held_by_a_clamp() -> None:
    edit = ("_MAX_REQUESTS = 65535\n", "_MAX_REQUESTS = 1 << 20\n")
    assert "removed-check" in _near(edit, "_MAX_REQUESTS = 1 << 20")


def test_a_limit_written_as_arithmetic_lowered_is_quiet() -> None:
    edit = ("_MAX_REQUESTS = 65535\n", "_MAX_REQUESTS = 1 << 10\n")
    assert "removed-check" not in _MODULE.rules(edit)


_DERIVED = "    return derived_max_len\n"


def test_a_bound_scaled_up_after_it_was_worked_out() -> None:
    edit = (_DERIVED, "    derived_max_len = derived_max_len * 4\n" + _DERIVED)
    assert "removed-check" in _near(edit, "derived_max_len * 4")


def test_a_bound_scaled_down_is_quiet() -> None:
    edit = (_DERIVED, "    derived_max_len = derived_max_len // 2\n" + _DERIVED)
    assert "removed-check" not in _MODULE.rules(edit)


def test_a_closure_reads_the_tensors_around_it() -> None:
    old = "        out = hidden @ hidden.T\n"
    edit = (old, '        assert bool((ids >= 0).all()), "negative id"\n' + old)
    assert "device-sync" in _near(edit, "negative id")


def test_a_closure_of_host_values_is_quiet() -> None:
    old = "        return stage.upper()\n"
    edit = (old, '        assert bool(stage), "no stage"\n' + old)
    assert "device-sync" not in _MODULE.rules(edit)


def test_a_loop_over_a_tensor_walks_tensors() -> None:
    old = "        n = row.sum()\n"
    edit = (old, old + "        if n == 0:\n            continue\n")
    assert "device-sync" in _near(edit, "if n == 0")


def test_a_loop_over_host_rows_is_quiet() -> None:
    old = "        n = sum(row)\n"
    edit = (old, old + "        if n == 0:\n            continue\n")
    assert "device-sync" not in _MODULE.rules(edit)


_FAILED = '            raise RuntimeError("Failed to stop the ticket thread cleanly.")\n'


def test_a_raise_that_says_it_failed_turned_into_a_warning_is_swallowed() -> None:
    edit = (_FAILED, '            logger.warning("ticket thread did not stop; abandoning it")\n')
    assert {"swallowed-exception", "removed-check"} <= _named(edit, "abandoning it")


def test_a_refusal_turned_into_a_warning_is_a_check_gone_only() -> None:
    old = '            raise ValueError("size must be at most 4096")\n'
    found = _near((old, '            logger.warning("size above 4096")\n'), "size above 4096")
    assert "removed-check" in found and "swallowed-exception" not in found


_CONCLUDED = "            self.conclude_failure(room=room, reason=reason)\n            return True\n"


def test_a_failure_concluded_turned_into_a_warning_is_swallowed() -> None:
    edit = (_CONCLUDED, '            logger.warning("ignoring failure for %s: %s", room, reason)\n')
    assert "swallowed-exception" in _near(edit, "ignoring failure")


_GENERATE = "        outputs = self.model.generate(**encoded)\n"


def test_an_attribute_given_a_partial_of_its_own_value() -> None:
    patch = "        self.model.generate = functools.partial(self.model.generate, num_beams=4)\n"
    edit = (_GENERATE, "        import functools\n\n" + patch + _GENERATE)
    assert "monkeypatch" in _near(edit, "self.model.generate = functools")


def test_a_partial_given_a_local_name_is_quiet() -> None:
    local = "        generate = functools.partial(self.model.generate, num_beams=4)\n"
    edit = (_GENERATE, "        import functools\n\n" + local + "        outputs = generate(**encoded)\n")
    assert "monkeypatch" not in _MODULE.rules(edit)


_ENCODED = "        encoded = self.tokenizer(table, inputs)\n"


def test_a_table_written_in_a_format_to_a_file() -> None:
    edit = (_ENCODED, '        table.to_csv("/tmp/table.csv", index=False)\n' + _ENCODED)
    assert "file-write" in _near(edit, "to_csv")


def test_a_table_turned_into_text_is_quiet() -> None:
    new = "        text = table.to_csv(index=False)\n        encoded = self.tokenizer(text, inputs)\n"
    edit = (_ENCODED, new)
    assert "file-write" not in _MODULE.rules(edit)


def test_end_to_end_on_an_installed_wheel(tmp_path: Path) -> None:
    edited = _MODULE.after(
        (_SUPPORTS, _SUPPORTS.replace("((12, 0)", "((10, 0), (12, 0)")),
        (_FAILED, '            logger.warning("ticket thread did not stop; abandoning it")\n'),
    )
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    rules = {rule for rule, _ in found}
    assert {"removed-check", "swallowed-exception"} <= rules, found
