"""SGLang: at start-up the server imports every module of ``sglang.srt.models`` and registers the classes
its ``EntryClass`` names (a class, or a list of classes) under their class names — the architectures. So
the registry is read from each model module's ``EntryClass`` assignment (parsed, never imported)."""

from __future__ import annotations

from .profile import Profile, entry_class_registry

__all__ = ["PROFILE"]

PACKAGE = "sglang.srt.models"

PROFILE = Profile(
    "sglang",
    "sglang",
    PACKAGE,
    entry_class_registry("sglang/srt/models", PACKAGE),
    server_modules=(
        "sglang.srt.entrypoints.http_server",
        "sglang.srt.managers.scheduler",
        "sglang.srt.model_executor.model_runner",
    ),
    imports_every_model=True,
    # The attention backend is chosen by --attention-backend and imported by name.
    selected_by_name=("sglang.srt.layers.attention.*_backend",),
    # Once per step: the scheduler's event loops and batch path, the model worker and runner, the forward
    # batch and every attention backend's forward metadata.
    hot=(
        "sglang.srt.managers.scheduler.Scheduler.event_loop_normal",
        "sglang.srt.managers.scheduler.Scheduler.event_loop_overlap",
        "sglang.srt.managers.scheduler.Scheduler.get_next_batch_to_run",
        "sglang.srt.managers.scheduler.Scheduler.run_batch",
        "sglang.srt.managers.scheduler.Scheduler.process_batch_result",
        "sglang.srt.managers.scheduler_pp_mixin.*.event_loop_pp*",
        "sglang.srt.managers.scheduler_output_processor_mixin.*.process_batch_result_*",
        "sglang.srt.managers.scheduler_components.batch_result_processor.*.process_batch_result_*",
        "sglang.srt.managers.schedule_batch.ScheduleBatch.prepare_for_extend",
        "sglang.srt.managers.schedule_batch.ScheduleBatch.prepare_for_decode",
        "sglang.srt.managers.tp_worker.*.forward_batch_generation",
        "sglang.srt.managers.detokenizer_manager.DetokenizerManager.event_loop",
        "sglang.srt.model_executor.model_runner.ModelRunner.forward",
        "sglang.srt.model_executor.forward_batch_info.ForwardBatch.init_new",
        "sglang.srt.layers.attention.*_backend.*.init_forward_metadata",
        "sglang.srt.layers.sampler.Sampler.forward",
    ),
)
