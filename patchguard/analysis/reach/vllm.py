"""vLLM: ``vllm/model_executor/models/registry.py`` maps each architecture to a module of
``vllm.model_executor.models`` in dict literals (``"LlamaForCausalLM": ("llama", "LlamaForCausalLM")``); the
server imports the served model's module lazily, by name."""

from __future__ import annotations

import os

from .index import FactIndex
from .profile import Profile, read_dict_literals

__all__ = ["PROFILE", "read_registry"]

REGISTRY = "vllm/model_executor/models/registry.py"


def read_registry(site_dir: str, index: FactIndex) -> dict[str, tuple[str, ...]]:
    """Architecture → model module name, from the registry's dict literals."""
    return index.registry(os.path.join(site_dir, REGISTRY), read_dict_literals)


PROFILE = Profile(
    "vllm",
    "vllm",
    "vllm.model_executor.models",
    read_registry,
    server_modules=(
        "vllm.entrypoints.openai.api_server",
        "vllm.v1.engine.core",
        "vllm.v1.worker.gpu_worker",
        "vllm.v1.worker.gpu_model_runner",
    ),
    # current_platform resolves the device's platform class from a string: on a CUDA box, this module.
    by_name=("vllm.platforms.cuda",),
    # The attention backend registry names its classes by dotted path; the configuration picks one.
    selected_by_name=("vllm.v1.attention.backends.*", "vllm.v1.attention.backends.mla.*"),
)
