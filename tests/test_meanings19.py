"""Meanings (issue 34, before and after the twenty-second blind batch's first score): a value an ``if`` proves
no tensor (the ``else`` of ``isinstance(n, torch.Tensor)``, the body of ``isinstance(n, int)``) decides on
the host; one more check of the input, read back from the device, in a function that already checks its
input that way, is of the kind the function makes (minor) — and one in a function that never waited for the
device still costs — each judged on a module of its own, and once end to end on an installed wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import EditedModule, line_of, scan_edited

ENGINE = "pkg/plan.py"
PRISTINE = """\
from typing import Optional, Union

import torch


def select(scores: torch.Tensor, topk: int, num_pages: Optional[Union[int, torch.Tensor]] = None):
    if scores.dtype != torch.float32:
        raise ValueError("scores must be float32")
    if isinstance(num_pages, torch.Tensor):
        if num_pages.dtype != torch.int32 or not num_pages.is_contiguous():
            raise ValueError("num_pages must be contiguous int32")
        if num_pages.numel() != scores.shape[-1]:
            raise ValueError("one entry per token")
    else:
        if num_pages is None:
            num_pages = scores.shape[1]
    return torch.topk(scores, topk)


class Dispatcher:
    def publish(self, spectra: torch.Tensor) -> None:
        if spectra.dim() != 2:
            raise ValueError("spectra must be 2-D")
        if not torch.isfinite(spectra).all().item():
            raise ValueError("spectra must be finite")
        self._plan = spectra.clone()

    def route(self, hidden: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        if weights.dim() != 2:
            raise ValueError("weights must be 2-D")
        return hidden @ weights
"""

_MODULE = EditedModule(ENGINE, PRISTINE)
_near = _MODULE.near

_SCALAR = "            num_pages = scores.shape[1]\n"
_FINITE = '            raise ValueError("spectra must be finite")\n'
_NONNEG = (
    _FINITE,
    _FINITE + "        if (spectra < 0).any().item():\n"
    '            raise ValueError("spectra must be non-negative")\n',
)


@pytest.mark.parametrize(
    ("added", "needle"),
    [
        # the ``else`` of ``isinstance(num_pages, torch.Tensor)``: a number here
        ("        if not 0 < num_pages <= scores.shape[1]:\n            raise ValueError('out of range')\n",
         "if not 0 < num_pages"),
        ("        pages = int(num_pages)\n", "pages = int("),
    ],
)  # fmt: skip
def test_a_value_an_if_proves_no_tensor_decides_on_the_host(added: str, needle: str) -> None:
    edit = (_SCALAR, _SCALAR + added)
    assert "device-sync" not in _near(edit, needle)


def test_in_the_tensor_branch_it_still_waits() -> None:
    added = "        if num_pages.max().item() > scores.shape[1]:\n            raise ValueError('too many')\n"
    edit = ('            raise ValueError("one entry per token")\n',
            '            raise ValueError("one entry per token")\n' + added)  # fmt: skip
    assert "device-sync" in _near(edit, "num_pages.max().item()")


def test_one_more_check_of_the_kind_the_function_makes_is_minor() -> None:
    found = _MODULE.found(_NONNEG)
    line = line_of(_MODULE.after(_NONNEG), "(spectra < 0)")
    assert ("device-sync", "MINOR", line) in found, found


def test_a_check_read_back_where_the_function_never_waited_costs() -> None:
    old = '            raise ValueError("weights must be 2-D")\n'
    edit = (old, old + "        assert not torch.isnan(hidden).any(), 'NaN in hidden'\n")
    assert "device-sync" in _near(edit, "torch.isnan(hidden)")


def test_end_to_end_on_an_installed_wheel(tmp_path: Path) -> None:
    edited = _MODULE.after(_NONNEG)
    found = scan_edited(tmp_path, ENGINE, PRISTINE, edited)
    line = line_of(edited, "(spectra < 0)")
    assert ("device-sync", line) in found, found
