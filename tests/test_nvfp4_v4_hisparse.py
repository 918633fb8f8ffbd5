"""0.5.23's NVFP4 back-end rewrite (R-NVFP4-BACKENDS, KV4-NVFP4-*, the native layout's
speculative, PD and HiCache refusals KV4-NVFP4-NATIVE-*, KV4-UNIFIED-MEMORY), DeepSeek V4's dsv4
override (R-ATTN-MODEL), validate_hisparse's feature checks (HISPARSE-MIXED-CHUNK,
HISPARSE-SPEC-TOPK) and handle_cache_compatibility's order (SWA-RATIO-RANGE after the
host-pool, HiCache and offload checks), against SGLang's own answers.

Each row was answered by SGLang 0.5.23's resolution and check_server_args() (the shared
oracle, `oracle.py --launch`, platform cuda with the row's GPU class installed as platform
facts, FlashInfer available); DeepSeek V4 is a hand-made `DeepseekV4ForCausalLM` config (the
oracle has none). The corpus predates these steps, so the answers are kept here.
"""

from __future__ import annotations

from typing import Any

import pytest

from fidelity.compare import model
from meshsat.solver import validate
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.model_spec import ModelSpec

_NEITHER = "NVFP4 prefill supports an FP8 E4M3 workspace or native NVFP4, but backend "
_V4 = ModelSpec(architecture="DeepseekV4ForCausalLM")
_NATIVE_PD = "SM100 native NVFP4 with trtllm_mha does not yet support PD disaggregation because"
_NATIVE_HICACHE = "SM100 native NVFP4 with trtllm_mha does not yet support hierarchical KV cache"
_UNIFIED = "FP4 KV cache does not yet support --enable-unified-memory: the unified MHA pool"
_NATIVE_SPEC = (
    "SM100 native NVFP4 speculative decoding supports EAGLE, EAGLE3, NEXTN, and breadth-1 "
    "NGRAM; got "
)

#: (config, model, the start of SGLang's first error or None, its resolved attention_backend
#: when it accepts).
ORACLE_0_5_23: tuple[tuple[dict[str, Any], str, str | None, str | None], ...] = (
    # A typed tokenspeed_mla prefill is trtllm_mla by the time the NVFP4 handler reads it.
    (
        {"gpu_sm": 100, "kv_cache_dtype": "nvfp4", "prefill_attention_backend": "tokenspeed_mla"},
        "llama",
        _NEITHER + "'trtllm_mla' provides neither.",
        None,
    ),
    # DeepSeek V3's SM100 override (trtllm_mla) runs before the handler, which refuses it.
    (
        {"gpu_sm": 100, "kv_cache_dtype": "nvfp4"},
        "deepseek_v3",
        _NEITHER + "'trtllm_mla' provides neither.",
        None,
    ),
    # SM100 prefills natively: the pair (trtllm_mha, trtllm_mha) is the base back-end.
    ({"gpu_sm": 100, "kv_cache_dtype": "nvfp4"}, "llama", None, "trtllm_mha"),
    (
        {"gpu_sm": 100, "kv_cache_dtype": "nvfp4", "attention_backend": "flashinfer"},
        "llama",
        None,
        "flashinfer",
    ),
    # SM120: the FP8 workspace (FlashInfer prefill, trtllm_mha decode) beside the default.
    ({"gpu_sm": 120, "kv_cache_dtype": "nvfp4"}, "qwen3_moe", None, "flashinfer"),
    (
        {"gpu_sm": 90, "kv_cache_dtype": "nvfp4", "decode_attention_backend": "flashinfer"},
        "llama",
        "NVFP4 decode requires --decode-attention-backend=trtllm_mha; got 'flashinfer'.",
        None,
    ),
    # DeepSeek V4 runs dsv4 whatever was typed, and deterministic inference refuses it.
    ({"gpu_sm": 90, "tp_size": 8, "attention_backend": "fa3"}, "v4", None, "dsv4"),
    (
        {"gpu_sm": 100, "tp_size": 8, "enable_deterministic_inference": True},
        "v4",
        "Currently only ['ascend', 'fa3', 'fa4', 'flashinfer', 'intel_xpu', 'triton'] "
        "attention backends are supported for deterministic inference, but you explicitly "
        "specified 'dsv4'.",
        None,
    ),
    (
        {
            "gpu_sm": 90,
            "tp_size": 8,
            "enable_hisparse": True,
            "disable_radix_cache": True,
            "enable_mixed_chunk": True,
        },
        "deepseek_v32",
        "--enable-hisparse does not support --enable-mixed-chunk yet.",
        None,
    ),
    # handle_kv4_compatibility: SM100 (SM103 too) native NVFP4, trtllm_mha in either phase of
    # the resolved pair (R-NVFP4-BACKENDS decodes every nvfp4 cache on it), refuses PD
    # disaggregation and HiCache / LMCache, PD first, before the cache handler's checks.
    (
        {"gpu_sm": 100, "kv_cache_dtype": "nvfp4", "enable_hierarchical_cache": True},
        "llama",
        _NATIVE_HICACHE,
        None,
    ),
    (
        {"gpu_sm": 100, "kv_cache_dtype": "nvfp4", "attention_backend": "flashinfer"}
        | {"enable_lmcache": True},
        "qwen3_moe",
        _NATIVE_HICACHE,
        None,
    ),
    (
        {"gpu_sm": 103, "kv_cache_dtype": "nvfp4", "disaggregation_mode": "decode"},
        "llama",
        _NATIVE_PD,
        None,
    ),
    (
        {"gpu_sm": 100, "kv_cache_dtype": "nvfp4", "prefill_attention_backend": "flashinfer"}
        | {"disaggregation_mode": "decode", "enable_hierarchical_cache": True},
        "llama",
        _NATIVE_PD,
        None,
    ),
    # SM120 is not SM100: the same pair serves PD and HiCache.
    (
        {"gpu_sm": 120, "kv_cache_dtype": "nvfp4", "disaggregation_mode": "decode"},
        "llama",
        None,
        "flashinfer",
    ),
    (
        {"gpu_sm": 120, "kv_cache_dtype": "nvfp4", "enable_lmcache": True},
        "qwen3_moe",
        None,
        "flashinfer",
    ),
    # handle_kv4_compatibility (0.5.23), after its Blackwell check: --enable-unified-memory
    # with either FP4 dtype on any CUDA GPU, then, on the SM100 native layout, DFlash/DSpark,
    # any algorithm outside EAGLE/EAGLE3/NEXTN/NGRAM (UNO and a typed NONE too) and an NGRAM
    # tree wider than 1 (its default breadth is 10), before the PD check.
    (
        {"gpu_sm": 120, "kv_cache_dtype": "nvfp4", "enable_unified_memory": True},
        "llama",
        _UNIFIED,
        None,
    ),
    (
        {"gpu_sm": 100, "kv_cache_dtype": "fp4_mx_block16", "attention_backend": "triton"}
        | {"enable_unified_memory": True, "speculative_algorithm": "UNO"},
        "llama",
        _UNIFIED,
        None,
    ),
    (
        {"gpu_sm": 100, "kv_cache_dtype": "nvfp4", "speculative_algorithm": "DFLASH"}
        | {"disaggregation_mode": "decode"},
        "llama",
        "SM100 native NVFP4 speculative decoding does not yet support DFLASH; use EAGLE/NEXTN "
        "or NGRAM.",
        None,
    ),
    (
        {"gpu_sm": 100, "kv_cache_dtype": "nvfp4", "speculative_algorithm": "FROZEN_KV_MTP"},
        "llama",
        _NATIVE_SPEC + "FROZEN_KV_MTP.",
        None,
    ),
    (
        {"gpu_sm": 100, "kv_cache_dtype": "nvfp4", "attention_backend": "flashinfer"}
        | {"speculative_algorithm": "NONE"},
        "llama",
        _NATIVE_SPEC + "NONE.",
        None,
    ),
    (
        {"gpu_sm": 100, "kv_cache_dtype": "nvfp4", "speculative_algorithm": "UNO"}
        | {"uno_lora_path": True, "speculative_num_draft_tokens": 4},
        "llama",
        _NATIVE_SPEC + "UNO.",
        None,
    ),
    (
        {"gpu_sm": 100, "kv_cache_dtype": "nvfp4", "speculative_algorithm": "NGRAM"},
        "llama",
        "SM100 native NVFP4 NGRAM speculative decoding requires "
        "--speculative-ngram-max-bfs-breadth=1 because trtllm_mha supports linear target "
        "verification only; got 10.",
        None,
    ),
    (
        {"gpu_sm": 100, "kv_cache_dtype": "nvfp4", "speculative_algorithm": "ngram"}
        | {"speculative_ngram_max_bfs_breadth": 1},
        "llama",
        None,
        "trtllm_mha",
    ),
    # SM120 is not the native layout: FROZEN_KV_MTP and a wide NGRAM tree pass.
    (
        {"gpu_sm": 120, "kv_cache_dtype": "nvfp4", "speculative_algorithm": "FROZEN_KV_MTP"},
        "llama",
        None,
        "flashinfer",
    ),
    (
        {"gpu_sm": 120, "kv_cache_dtype": "nvfp4", "speculative_algorithm": "NGRAM"},
        "llama",
        None,
        "flashinfer",
    ),
    # handle_cache_compatibility: the host pool, then the offload, then the ratio.
    (
        {
            "gpu_sm": 90,
            "swa_full_tokens_ratio": 0.0,
            "disaggregation_decode_retraction_backup": "host_pool",
            "enable_hierarchical_cache": True,
            "disable_radix_cache": True,
            "disaggregation_decode_enable_offload_kvcache": True,
        },
        "llama",
        "--disaggregation-decode-retraction-backup=host_pool is only supported on a PD",
        None,
    ),
    (
        {
            "gpu_sm": 90,
            "swa_full_tokens_ratio": 1.5,
            "disaggregation_decode_enable_offload_kvcache": True,
        },
        "llama",
        "The argument disaggregation-decode-enable-offload-kvcache is only supported for",
        None,
    ),
    (
        {"gpu_sm": 90, "swa_full_tokens_ratio": 1.5},
        "llama",
        "--swa-full-tokens-ratio should be in range (0, 1.0].",
        None,
    ),
)


@pytest.mark.parametrize(("config", "name", "error", "backend"), ORACLE_0_5_23)
def test_0_5_23_answers(
    config: dict[str, Any], name: str, error: str | None, backend: str | None
) -> None:
    spec = _V4 if name == "v4" else model(name)
    report = validate(
        Config(platform="cuda", **config), spec, explain=False, sglang_version="0.5.23"
    )
    errors = [v for v in report.violations if v.severity == "error"]
    if error is None:
        assert errors == []
        assert report.resolved["attention_backend"] == backend
    else:
        assert errors, "SGLang refuses this layout"
        assert errors[0].message.startswith(error), errors[0].message


def test_hisparse_linear_speculation_only_in_0_5_23() -> None:
    """validate_hisparse's top-k check (0.5.23): a draft tree is refused, top-k 1 passes;
    0.5.19 has no such check."""
    base = {
        "tp_size": 8,
        "enable_hisparse": True,
        "disable_radix_cache": True,
        "speculative_algorithm": "EAGLE",
        "speculative_num_steps": 3,
        "speculative_num_draft_tokens": 8,
    }
    dsa = model("deepseek_v32")

    def ids(version: str, topk: int) -> set[str]:
        cfg = Config(**base, speculative_eagle_topk=topk)
        report = validate(cfg, dsa, explain=False, sglang_version=version)
        return {v.rule for v in report.violations}

    assert "HISPARSE-SPEC-TOPK" in ids("0.5.23", 4)
    assert "HISPARSE-SPEC-TOPK" not in ids("0.5.23", 1)
    assert "HISPARSE-SPEC-TOPK" not in ids("0.5.19", 4)
