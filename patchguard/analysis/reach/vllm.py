"""vLLM: ``vllm/model_executor/models/registry.py`` maps each architecture to a module of
``vllm.model_executor.models`` in dict literals (``"LlamaForCausalLM": ("llama", "LlamaForCausalLM")``)."""

from __future__ import annotations

from .profile import Profile, read_dict_literals

__all__ = ["PROFILE", "read_registry"]


def read_registry(path: str) -> dict[str, str]:
    """Architecture → model module name, from the registry's dict literals."""
    return read_dict_literals(path)


PROFILE = Profile(
    "vllm", "vllm/model_executor/models/registry.py", "vllm.model_executor.models", read_registry
)
