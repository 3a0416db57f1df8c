"""transformers: no server and no model registry patchguard reads (on an inference box it is a library of
vLLM or SGLang, whose own model serves an architecture), but a generation loop: ``generate`` runs one of
the decoding methods below, each a loop over the tokens it makes — what they call per token is hot."""

from __future__ import annotations

from .profile import Profile, no_registry

__all__ = ["PROFILE"]

PROFILE = Profile(
    "transformers",
    "transformers",
    "transformers.models",
    no_registry,
    hot=(
        "transformers.generation.utils.GenerationMixin._sample",
        "transformers.generation.utils.GenerationMixin._beam_search",
        "transformers.generation.utils.GenerationMixin._assisted_decoding",
        "transformers.generation.utils.GenerationMixin._dola_decoding",
        "transformers.generation.utils.GenerationMixin._contrastive_search",
    ),
)
