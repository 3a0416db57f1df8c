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
)
