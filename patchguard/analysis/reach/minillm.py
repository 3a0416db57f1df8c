"""minillm (the test fixture): ``minillm/models/registry.py`` maps each architecture to a module of
``minillm.models`` in dict literals, the way vLLM does (``"MiniMLAForCausalLM": ("mla", "MiniMLA…")``)."""

from __future__ import annotations

import os

from .index import FactIndex
from .profile import Profile, read_dict_literals

__all__ = ["PROFILE", "read_registry"]

REGISTRY = "minillm/models/registry.py"


def read_registry(site_dir: str, index: FactIndex) -> dict[str, tuple[str, ...]]:
    """Architecture → model module name, from the registry's dict literals."""
    return index.registry(os.path.join(site_dir, REGISTRY), read_dict_literals)


PROFILE = Profile(
    "minillm",
    "minillm",
    "minillm.models",
    read_registry,
    server_modules=("minillm.entrypoints.serve",),
    by_name=("minillm.platforms.cuda",),
)
