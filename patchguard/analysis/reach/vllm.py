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
    # Once per step: the engine core's step, the scheduler, the worker and its model runner (both layouts),
    # the output processor and every attention backend's metadata builder.
    hot=(
        "vllm.v1.engine.core.EngineCore.step",
        "vllm.v1.engine.core.EngineCore.step_with_batch_queue",
        "vllm.v1.engine.core.EngineCoreProc.run_busy_loop",
        "vllm.v1.core.sched.scheduler.Scheduler.schedule",
        "vllm.v1.core.sched.scheduler.Scheduler.update_from_output",
        "vllm.v1.worker.gpu_worker.Worker.execute_model",
        "vllm.v1.worker.gpu_worker.Worker.sample_tokens",
        "vllm.v1.worker.gpu_model_runner.GPUModelRunner.execute_model",
        "vllm.v1.worker.gpu_model_runner.GPUModelRunner.sample_tokens",
        "vllm.v1.worker.gpu.model_runner.GPUModelRunner.execute_model",
        "vllm.v1.worker.gpu.model_runner.GPUModelRunner.sample_tokens",
        "vllm.v1.engine.output_processor.OutputProcessor.process_outputs",
        "vllm.v1.sample.sampler.Sampler.forward",
        "vllm.v1.attention.backends.*.*MetadataBuilder.build",
        "vllm.v1.attention.backends.mla.*.*MetadataBuilder.build",
    ),
)
