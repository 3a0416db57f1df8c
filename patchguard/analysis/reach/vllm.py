"""vLLM: ``vllm/model_executor/models/registry.py`` maps each architecture to a module of
``vllm.model_executor.models`` in dict literals (``"LlamaForCausalLM": ("llama", "LlamaForCausalLM")``); the
server imports the served model's module lazily, by name."""

from __future__ import annotations

from .profile import Profile, dict_literal_registry

__all__ = ["PROFILE"]

PROFILE = Profile(
    "vllm",
    "vllm",
    "vllm.model_executor.models",
    dict_literal_registry("vllm/model_executor/models/registry.py"),
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
