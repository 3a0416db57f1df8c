"""Policy: what fails the pre-restart gate, found and read (the gate itself is :mod:`.gate`; the value,
:class:`~patchguard.results.check.Policy`, and the reading of its table are in :mod:`patchguard.results`).

A policy is the ``[tool.patchguard]`` table of the nearest ``pyproject.toml`` or a ``patchguard.toml``
(or ``--policy FILE``)::

    [tool.patchguard]
    fail_on = "moderate"                       # high | moderate | minor | info | never
    allowed_sets = ["sm120-support"]           # modifications exactly matching these sets are expected
    required_sets = ["sm120-support"]          # must be applied, or the check fails
    expected_files = ["vllm/model_executor/layers/fused_moe/configs/*.json"]   # unexpected, but expected
    ignore = [{rule = "print", distribution = "vllm"}, {path = "vllm/entrypoints/*"}]

Unknown keys and values of the wrong type are errors naming the key.
"""

from __future__ import annotations

import os

from ...config import find_config, patchguard_table, read_toml
from ...results.check import Policy

__all__ = ["Policy", "load_policy"]


def load_policy(path: str | None = None) -> Policy:
    """The policy in ``path`` (patchguard.toml or pyproject.toml), else the nearest one, else the default."""
    if path is not None:
        doc = read_toml(path)
        default = doc if os.path.basename(path) != "pyproject.toml" else {}
        table = patchguard_table(doc, path, default) or {}
        return Policy.from_table(table, path)
    found = find_config()
    if found is None:
        return Policy()
    return Policy.from_table(found[1], found[0])
