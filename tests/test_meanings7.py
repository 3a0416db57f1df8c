"""Meanings (issue 34, before the eighth blind batch): a log line where the reach cannot tell is graded by
where the code runs (once, on failure, in a function that reports, or else per request); the message of a
check turned into a warning is the check's voice, not output; a validator — a function whose whole job is to
refuse — called no more; a tuple compared read by its parts; a minimum asked for made lower; a wait for the
device said wherever it is added, at its cost — each judged on a module of its own, edited as a person
would, and once end to end on an installed wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchguard.analysis import CodeChange, analyse
from patchguard.analysis.rules import runs_once

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/engine.py"
PRISTINE = """\
import logging

import torch

from .platform import has_device_capability, is_triton_available

logger = logging.getLogger(__name__)


def _disjoint(name, out, *sources):
    storage = out.data_ptr()
    if any(s is not None and s.data_ptr() == storage for s in sources):
        raise ValueError(f"{name} must not share storage")


def conv(x, weight, out):
    _disjoint("out", out, x, weight)
    return torch.conv1d(x, weight, out=out)


def locality(major: int, minor: int) -> None:
    if (major, minor) != (10, 7):
        raise RuntimeError("locality domains need SM107")


def use_fp8(kv_dtype: str) -> bool:
    if kv_dtype.startswith("fp8") and not has_device_capability(89):
        raise ValueError("fp8 KV cache needs SM89")
    return is_triton_available("3.4.0")


class Fp8Config:
    @classmethod
    def get_min_capability(cls) -> int:
        return 89


class Dispatcher:
    def __init__(self, sizes) -> None:
        self.sizes = sizes
        self.done = torch.cuda.Event()

    def dispatch(self, n: int) -> int:
        fits = n <= max(self.sizes)
        return n if fits else -1

    def log_stats(self, served: int) -> None:
        logger.info("served %d", served)

    def read(self, path):
        try:
            return open(path).read()
        except OSError:
            raise

    def check_shapes(self, n: int) -> None:
        if n % 8:
            raise ValueError("n must be a multiple of 8")


def build_engine(args):
    return Dispatcher(args.sizes)


def main(args):
    engine = build_engine(args)
    return engine
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_after, _found, _line = _MODULE.after, _MODULE.found, line_of


def _at(edit: tuple[str, str], needle: str) -> set[tuple[str, str]]:
    line = _line(_after(edit), needle)
    return {(rule, severity) for rule, severity, n in _found(edit) if n == line}


FITS = "        fits = n <= max(self.sizes)\n"


@pytest.mark.parametrize(
    ("edit", "needle", "severity"),
    [
        # a method nobody says is per step, and no role that runs once: it may run per request
        ((FITS, FITS + '        logger.info("dispatch n=%d fits=%s", n, fits)\n'), "dispatch n=", "MODERATE"),
        # a constructor, or what only a command's entry calls: once
        (("        self.sizes = sizes\n",
          '        self.sizes = sizes\n        logger.info("sizes %s", sizes)\n'), "sizes %s", "MINOR"),
        (("    return Dispatcher(args.sizes)\n",
          '    logger.warning("args %r", args)\n    return Dispatcher(args.sizes)\n'), "args %r", "MINOR"),
        # on failure only, and in a function whose job is to report
        (("        except OSError:\n",
          '        except OSError:\n            logger.error("cannot read %s", path)\n'),
         "cannot read", "MINOR"),
        (('        logger.info("served %d", served)\n',
          '        logger.info("served %d", served)\n        logger.info("sizes %s", self.sizes)\n'),
         "sizes %s", "MINOR"),
    ],
)  # fmt: skip
def test_a_log_line_is_graded_by_where_the_code_runs(
    edit: tuple[str, str], needle: str, severity: str
) -> None:
    assert _at(edit, needle) == {("logging", severity)}


def test_a_function_whose_job_is_to_say_things_logs_as_its_job() -> None:
    """``log``, ``log_stats``, ``report_*``: a log line more is the function's job — but ``log_softmax`` is
    arithmetic, not a report."""
    from patchguard.analysis.engine import _reports

    assert all(map(_reports, ["log", "log_metrics", "_print_summary", "report_stats", "show"]))
    assert not any(map(_reports, ["log_softmax", "logprobs", "logits", "dispatch", "catalog"]))


def test_a_value_read_of_a_tensor_made_with_a_device_handed_as_an_argument() -> None:
    anchor = "        fits = n <= max(self.sizes)\n"
    made = anchor + "        lens = make_lens(n, self.device)\n        top = int(lens.max())\n"
    assert ("device-sync", "MODERATE") in _at((anchor, made), "int(lens.max())")
    host = anchor + "        lens = make_lens(n, cpu_buffer)\n        top = int(lens.max())\n"
    assert "device-sync" not in {rule for rule, _severity in _at((anchor, host), "int(lens.max())")}


def test_an_except_block_is_found_by_its_indentation_not_by_a_line_like_its_header() -> None:
    """A log line after a try/except whose handler holds a line like the block's own header is not in the
    handler; a docstring naming the function is not its caller."""
    from patchguard.analysis.engine import _callers, _in_handler, locate

    lines = [
        "def update(self):\n", "    with self._lock:\n", "        try:\n", "            x()\n",
        "        except KeyError:\n", "            with self._lock:\n", "                y()\n",
        "        logger.info('n')\n",
    ]  # fmt: skip
    st = locate("".join(lines))
    assert not _in_handler(st, 8) and _in_handler(st, 7)
    doc = ['"""Call encode_batch(texts) once per request."""\n', "def run():\n", "    encode_batch(t)\n"]
    assert _callers("encode_batch", locate("".join(doc)), doc) == ["run"]


def test_a_logger_of_another_library_bound_to_any_name() -> None:
    edit = (FITS, FITS + '        from loguru import logger as _lg\n        _lg.info("n={}", n)\n')
    assert ("logging", "MODERATE") in _at(edit, "_lg.info")


def test_runs_once_by_role_not_by_any_word() -> None:
    assert all(map(runs_once, ["__init__", "load_weights", "_warmup", "init_feature_buffer", "from_config"]))
    assert not any(map(runs_once, ["init_forward_metadata", "dispatch", "build_attn_metadata", "get_rope"]))


def test_a_check_turned_into_a_warning_is_the_check_not_output() -> None:
    edit = ('            raise ValueError("n must be a multiple of 8")\n',
            '            logger.warning("n=%d is not a multiple of 8", n)\n')  # fmt: skip
    assert _at(edit, "logger.warning") == {("removed-check", "MODERATE")}


def test_a_validator_called_no_more_whatever_its_name() -> None:
    edit = ('    _disjoint("out", out, x, weight)\n', '    # _disjoint("out", out, x, weight)  # in place\n')
    assert ("removed-check", "MODERATE") in _at(edit, "# _disjoint")
    other = ("    return torch.conv1d(x, weight, out=out)\n", "    return torch.conv1d(x, weight)\n")
    assert not [f for f in _found(other) if f[0] == "removed-check"]


def test_a_tuple_compared_is_read_by_its_parts() -> None:
    edit = ("    if (major, minor) != (10, 7):\n", "    if major != 10:\n")
    assert ("removed-check", "MODERATE") in _at(edit, "if major != 10")
    stricter = ("    if (major, minor) != (10, 7):\n", "    if (major, minor) != (10, 7) or minor < 7:\n")
    assert not [f for f in _found(stricter) if f[0] == "removed-check"]


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("has_device_capability(89)", "has_device_capability(80)", "has_device_capability(80)"),
        ('is_triton_available("3.4.0")', 'is_triton_available("3.3.0")', '"3.3.0"'),
        ("        return 89\n", "        return 75  # T4 demo\n", "return 75"),
    ],
)
def test_a_minimum_asked_for_made_lower(old: str, new: str, needle: str) -> None:
    assert ("removed-check", "MODERATE") in _at((old, new), needle)


def test_a_minimum_made_higher_or_a_bound_of_min_is_no_check_taken_out() -> None:
    higher = ("has_device_capability(89)", "has_device_capability(90)")
    assert not [f for f in _found(higher) if f[0] == "removed-check"]
    newer = ('is_triton_available("3.4.0")', 'is_triton_available("3.5.0")')
    assert not [f for f in _found(newer) if f[0] == "removed-check"]
    ceiling = ("        fits = n <= max(self.sizes)\n", "        fits = n <= min(max(self.sizes), 64)\n")
    lowered = (ceiling[1], "        fits = n <= min(max(self.sizes), 32)\n")
    after = _after(ceiling)
    found = analyse(CodeChange(ENGINE, after.encode(), after.replace(*lowered).encode(), "pkg", "1.0"))
    assert not [f for f in found if str(f.rule) == "removed-check"]


def test_a_wait_for_the_device_is_said_wherever_it_is_added() -> None:
    event = "        self.done = torch.cuda.Event()\n"
    at_setup = (event, event + "        torch.cuda.synchronize()\n")
    assert _at(at_setup, "synchronize") == {("device-sync", "MINOR")}
    waits = (FITS, FITS + "        torch.cuda.current_stream().synchronize()\n")
    assert _at(waits, "synchronize") == {("device-sync", "MODERATE")}


def test_scan_finds_them_on_an_installed_wheel(tmp_path: Path) -> None:
    """End to end: a real wheel installed, edited in place as a person would, scanned against the wheel."""
    edited = _after(
        ('    _disjoint("out", out, x, weight)\n', '    # _disjoint("out", out, x, weight)\n'),
        ("has_device_capability(89)", "has_device_capability(80)"),
        (FITS, FITS + '        logger.info("dispatch n=%d", n)\n'),
    )
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    assert ("removed-check", _line(edited, "# _disjoint")) in found
    assert ("removed-check", _line(edited, "has_device_capability(80)")) in found
    assert ("logging", _line(edited, "dispatch n=")) in found
