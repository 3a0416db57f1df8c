"""SGLang: the model registry is ``sglang/srt/models/registry.py``, the model modules live in
``sglang.srt.models``."""

from __future__ import annotations

from .profile import Profile, read_dict_literals

__all__ = ["PROFILE", "read_registry"]


def read_registry(path: str) -> dict[str, str]:
    """Architecture → model module name, read like vLLM's registry (its dict literals) for now."""
    return read_dict_literals(path)


PROFILE = Profile("sglang", "sglang/srt/models/registry.py", "sglang.srt.models", read_registry)
