"""SGLang: at start-up the server imports every module of ``sglang.srt.models`` and registers the classes
its ``EntryClass`` names (a class, or a list of classes) under their class names — the architectures. So
the registry is read from each model module's ``EntryClass`` assignment (parsed, never imported)."""

from __future__ import annotations

import os

from .index import FactIndex
from .profile import Profile

__all__ = ["PROFILE", "read_registry"]

MODELS = "sglang/srt/models"
PACKAGE = "sglang.srt.models"


def read_registry(site_dir: str, index: FactIndex) -> dict[str, tuple[str, ...]]:
    """Architecture → model module names, from the ``EntryClass`` of every model module."""
    try:
        names = sorted(os.listdir(os.path.join(site_dir, MODELS)))
    except OSError:
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for name in names:
        if not name.endswith(".py") or name == "__init__.py":
            continue
        module = f"{PACKAGE}.{name[:-3]}"
        for arch in index.entry_classes(module, os.path.join(site_dir, MODELS, name)):
            out[arch] = (*out.get(arch, ()), name[:-3])
    return out


PROFILE = Profile(
    "sglang",
    "sglang",
    PACKAGE,
    read_registry,
    server_modules=(
        "sglang.srt.entrypoints.http_server",
        "sglang.srt.managers.scheduler",
        "sglang.srt.model_executor.model_runner",
    ),
    imports_every_model=True,
    # The attention backend is chosen by --attention-backend and imported by name.
    selected_by_name=("sglang.srt.layers.attention.*_backend",),
)
