"""What SGLang keeps back from the KV pool for a multimodal model, per release pack.

Why its own reserve: from 0.5.18, `_profile_available_bytes` (mem_cache/
kv_cache_configurator.py) subtracts `mm_runtime_reservation_gb` from the bytes left after
the weights and the `mem_fraction_static` slack, per rank and before a hybrid's state pool
is split off (`state.split_rest`): the multimodal embedding cache and feature-transport
pools are allocated only after the KV pool is sized. It is `SGLANG_VLM_CACHE_SIZE_MB`
(100 MiB by default), plus `SGLANG_MM_FEATURE_CACHE_MB` (1 GiB) with `--mm-feature-transport`
`cuda_ipc` or `cuda_vmm`, and nothing for a model that is not multimodal. 0.4.6.post5 (and
`legacy`) reserve nothing. The amount is the same in 0.5.18, 0.5.19 and 0.5.23.

"Multimodal" is the release's `ModelConfig.is_multimodal` (configs/model_config.py): an
architecture the release lists as multimodal (`multimodal_archs.py`) or a config that wraps
its language model in a sub-config (`text_config`, `llm_config`, `language_config`,
`thinker_config`), unless the release serves the architecture as text by default (Gemma 3,
Llama 4, Step3-VL and Inkling as `...ForConditionalGeneration`, and MiMo-V2 checkpoints
without both a vision and an audio config; `--enable-multimodal` overrides that list) or
the model is served as a language model only: the config's `language_model_only`, and from
0.5.23 `--language-model-only` too (0.5.18 and 0.5.19 read only the config there). Not read:
the Transformers back-end's sub-config rule and 0.5.23's DeepSeek-V4.1 vision layers.
`tests/test_memory_reserves.py` replays the release's own `ModelConfig` and
`mm_runtime_reservation_gb` on the catalogue (`fidelity/memory_reserves.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from meshsat.solver.memory.multimodal_archs import MULTIMODAL_ARCHITECTURES

if TYPE_CHECKING:
    from meshsat.solver.memory.facts import ModelFacts

#: `SGLANG_VLM_CACHE_SIZE_MB`'s default: the embedding cache's reserve.
EMBEDDING_CACHE_MIB = 100
#: `SGLANG_MM_FEATURE_CACHE_MB`'s default, added for the CUDA feature transports.
FEATURE_CACHE_MIB = 1024
CUDA_TRANSPORTS = ("cuda_ipc", "cuda_vmm")
#: Packs that reserve nothing.
NO_RESERVE = ("0.4.6.post5", "legacy")
#: Sub-configs whose presence makes SGLang's text config differ from the model's.
WRAPPERS = ("text_config", "llm_config", "language_config", "thinker_config")
#: Architectures SGLang serves as text only unless `--enable-multimodal` is given.
TEXT_BY_DEFAULT = (
    "Gemma3ForConditionalGeneration",
    "Llama4ForConditionalGeneration",
    "Step3VLForConditionalGeneration",
    "InklingForConditionalGeneration",
)
#: MiMo-V2's multimodal architecture (`MIMO_V2_MULTIMODAL_ARCHS`), text only without both
#: towers' configs.
MIMO_V2 = ("MiMoV2ForCausalLM",)
#: Packs whose `--language-model-only` leaves `is_multimodal` as the config says.
CONFIG_ONLY_LMO = ("0.5.18", "0.5.19")


def wraps_language_model(hf: Mapping[str, Any]) -> bool:
    """The config keeps its language model in a sub-config (SGLang's text config is then
    not the model's config)."""
    return any(isinstance(hf.get(k), Mapping) for k in WRAPPERS)


def text_by_default(hf: Mapping[str, Any]) -> bool:
    """The release serves this config as text unless told otherwise (`--enable-multimodal`
    left unset)."""
    archs = hf.get("architectures") or []
    arch = archs[0] if archs else ""
    if arch in TEXT_BY_DEFAULT:
        return True
    return arch in MIMO_V2 and not ("vision_config" in hf and "audio_config" in hf)


def is_multimodal(
    f: ModelFacts, pack: str, language_model_only: bool = False, *, enable_multimodal: bool = False
) -> bool:
    """`ModelConfig.is_multimodal` as `pack` resolves it for a launch (0.4.6.post5 and
    `legacy`, which reserve nothing for it, are read with 0.5.18's list).
    `--enable-multimodal` skips the release's text-by-default list (the config's own
    `language_model_only` key still holds)."""
    if f.language_model_only or (language_model_only and pack not in CONFIG_ONLY_LMO):
        return False
    if f.multimodal_text_by_default and not enable_multimodal:
        return False
    archs = MULTIMODAL_ARCHITECTURES.get(pack, MULTIMODAL_ARCHITECTURES["0.5.18"])
    return f.multimodal_wrapper or f.architecture in archs


def runtime_reserve_mib(pack: str, multimodal: bool, transport: str | None = None) -> float:
    """MiB `pack` takes off each rank's KV budget for a (multimodal) model."""
    if not multimodal or pack in NO_RESERVE:
        return 0.0
    return EMBEDDING_CACHE_MIB + (FEATURE_CACHE_MIB if transport in CUDA_TRANSPORTS else 0)


def vision_fraction_factor(hf: Mapping[str, Any]) -> float:
    """What `adjust_mem_fraction_for_vlm` multiplies a default `mem_fraction_static` by for a
    config with a top-level `vision_config` (1 without one): 0.95 × a ViT-size term,
    `1 - 0.1·(L·H² / (24·1024²) - 1)` clamped to [0.8, 1.05], where L and H are the
    tower's `num_hidden_layers` and `hidden_size` (24 and 1024 when the config has no such
    key: Qwen3.5's tower names its depth `depth`, so it counts as 24 layers)."""
    v = hf.get("vision_config")
    if not isinstance(v, Mapping):
        return 1.0
    layers, hidden = v.get("num_hidden_layers", 24), v.get("hidden_size", 1024)
    ratio = layers * hidden**2 / (24 * 1024**2)
    return float(0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0))))


def default_fraction_factor(
    vision_factor: float,
    multimodal: bool,
    pack: str,
    *,
    language_only: bool = False,
    language_model_only: bool = False,
    disaggregation_mode: str = "null",
) -> float:
    """The factor `pack` applies to its default `mem_fraction_static` (only when the user
    gives none): the vision factor for a model it serves as multimodal, except with
    `--language-only`, `--language-model-only` (which in 0.5.18 and 0.5.19 leaves the model
    multimodal but skips this) or as a PD decode engine; 1 otherwise, and in 0.4.6.post5."""
    if not multimodal or pack in NO_RESERVE:
        return 1.0
    if language_only or language_model_only or disaggregation_mode == "decode":
        return 1.0
    return vision_factor
