"""minillm: ``minillm/models/registry.py`` maps each architecture to a module of ``minillm.models`` in
dict literals, the way vLLM does (``"MiniMLAForCausalLM": ("mla", "MiniMLAForCausalLM")``)."""

from __future__ import annotations

from .profile import Profile, read_dict_literals

__all__ = ["PROFILE", "read_registry"]


def read_registry(path: str) -> dict[str, str]:
    """Architecture → model module name, from the registry's dict literals."""
    return read_dict_literals(path)


PROFILE = Profile("minillm", "minillm/models/registry.py", "minillm.models", read_registry)
