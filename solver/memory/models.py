"""Embedded catalogue: the facts of widely served open models, keyed by HF repository id.

Why embedded: `--model deepseek-ai/DeepSeek-V3` must work offline. Each entry is the subset
of the public `config.json` the memory model reads, in the config's own key spelling, so it
goes through the same reader (`facts.facts_from_config`) as a user's file. Numbers are
copied as facts from each repository's public `config.json` on huggingface.co
(https://huggingface.co/<repo id>/blob/main/config.json). `published` holds the total and
active parameter counts the model's card or release announcement states, with its source.
Where aiconfigurator-core bundles the same checkpoint's `config.json` (or one of the same
architecture), `tests/test_catalogue_configs.py` compares every key and derived fact with it
and lists the entries it cannot check.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.lang.checkpoint_files import read_checkpoint_config
from meshsat.solver.memory.bundled_models import CONFIGS as BUNDLED
from meshsat.solver.memory.facts import ModelFacts, facts_from_config
from meshsat.solver.memory.quantized_checkpoints import VARIANTS

_FP8_BLOCK = {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [128, 128],
}

_DEEPSEEK_V3: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "topk_method": "noaux_tc",
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 129280,
    "tie_word_embeddings": False,
    "num_nextn_predict_layers": 1,
    "torch_dtype": "bfloat16",
    "quantization_config": _FP8_BLOCK,
}

_QWEN3_MOE = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe"}
_QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128}
_QWEN2 = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}
_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256}
_MIXTRAL = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral"}
_GLM = {
    "architectures": ["Glm4MoeForCausalLM"],
    "model_type": "glm4_moe",
    "head_dim": 128,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "attention_bias": True,
    "vocab_size": 151552,
    "tie_word_embeddings": False,
    "num_nextn_predict_layers": 1,
}
_GEMMA3_TEXT = {"model_type": "gemma3_text", "torch_dtype": "bfloat16", "tie_word_embeddings": True}
#: Gemma 3's SigLIP `vision_config` (4B, 12B and 27B share it).
_SIGLIP = {
    "model_type": "siglip_vision_model",
    "hidden_size": 1152,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "intermediate_size": 4304,
    "image_size": 896,
    "patch_size": 14,
}
_MISTRAL = {
    "architectures": ["MistralForCausalLM"],
    "model_type": "mistral",
    "tie_word_embeddings": False,
}


def _gemma3(**text: Any) -> dict[str, Any]:
    return {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": _m(_GEMMA3_TEXT, **text),
        "vision_config": _SIGLIP,
    }


def _hf(repo: str, note: str = "model card") -> str:
    return f"https://huggingface.co/{repo} ({note})"


_GPT_OSS = {
    "architectures": ["GptOssForCausalLM"],
    "model_type": "gpt_oss",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "experts_per_token": 4,
    "num_experts_per_tok": 4,
    "vocab_size": 201088,
    "sliding_window": 128,
    "attention_bias": True,
    "tie_word_embeddings": False,
    "quantization_config": {
        "quant_method": "mxfp4",
        "modules_to_not_convert": [
            "model.layers.*.self_attn",
            "model.layers.*.mlp.router",
            "model.embed_tokens",
            "lm_head",
        ],
    },
}
_LLAMA4_TEXT = {
    "model_type": "llama4_text",
    "hidden_size": 5120,
    "num_hidden_layers": 48,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 8192,
    "intermediate_size_mlp": 16384,
    "num_experts_per_tok": 1,
    "vocab_size": 202048,
    "attention_chunk_size": 8192,
}
#: Llama 4's `vision_config` (Scout and Maverick share it).
_LLAMA4_VISION = {
    "model_type": "llama4_vision_model",
    "hidden_size": 1408,
    "num_hidden_layers": 34,
    "num_attention_heads": 16,
    "intermediate_size": 5632,
    "image_size": 336,
    "patch_size": 14,
    "num_channels": 3,
    "pixel_shuffle_ratio": 0.5,
    "projector_input_dim": 4096,
    "projector_output_dim": 4096,
    "vision_output_dim": 4096,
    "multi_modal_projector_bias": False,
}


def _m(*parts: Mapping[str, Any], **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in parts:
        out.update(p)
    out.update(kw)
    return out


#: Kimi-K2's text model: DeepSeek-V3's MLA widths with 64 heads and 384 experts.
_KIMI_K2 = _m(
    _DEEPSEEK_V3,
    model_type="kimi_k2",
    num_attention_heads=64,
    num_key_value_heads=64,
    n_routed_experts=384,
    first_k_dense_replace=1,
    vocab_size=163840,
    num_nextn_predict_layers=0,
)
#: Kimi-K2.5 as published: INT4 only (compressed-tensors WNA16 experts in groups of 32;
#: attention, shared experts and the dense MLP left 16-bit), Kimi-K2's text model with its
#: long-context YaRN, and the MoonViT tower (`vision_config`, KimiK25VisionConfig's names);
#: the keys are those of the config.json aiconfigurator-core 0.12.0 bundles
#: (moonshotai--Kimi-K2.5_config.json, checked key by key by tests/test_catalogue_configs.py).
_KIMI_K25_INT4: dict[str, Any] = {
    "config_groups": {
        "group_0": {
            "input_activations": None,
            "output_activations": None,
            "targets": ["Linear"],
            "weights": {
                "actorder": None,
                "block_structure": None,
                "dynamic": False,
                "group_size": 32,
                "num_bits": 4,
                "observer": "minmax",
                "observer_kwargs": {},
                "strategy": "group",
                "symmetric": True,
                "type": "int",
            },
        }
    },
    "format": "pack-quantized",
    "ignore": [
        "lm_head",
        "re:.*self_attn.*",
        "re:.*shared_experts.*",
        "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
    ],
    "kv_cache_scheme": None,
    "quant_method": "compressed-tensors",
    "quantization_status": "compressed",
}
_KIMI_K25: dict[str, Any] = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "model_type": "kimi_k25",
    "tie_word_embeddings": False,
    "media_placeholder_token_id": 163605,
    "text_config": _m(
        {k: v for k, v in _KIMI_K2.items() if k != "torch_dtype"},
        n_group=1,
        topk_group=1,
        max_position_embeddings=262144,
        rope_scaling={
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "factor": 64.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
            "type": "yarn",
        },
        rope_theta=50000.0,
        quantization_config=_KIMI_K25_INT4,
    ),
    "vision_config": {
        "init_pos_emb_height": 64,
        "init_pos_emb_time": 4,
        "init_pos_emb_width": 64,
        "merge_kernel_size": [2, 2],
        "merge_type": "sd2_tpool",
        "mm_hidden_size": 1152,
        "mm_projector_type": "patchmerger",
        "patch_size": 14,
        "pos_emb_type": "divided_fixed",
        "projector_hidden_act": "gelu",
        "projector_ln_eps": 1e-05,
        "text_hidden_size": 7168,
        "video_attn_type": "spatial_temporal",
        "vt_hidden_size": 1152,
        "vt_intermediate_size": 4304,
        "vt_num_attention_heads": 16,
        "vt_num_hidden_layers": 27,
    },
}


def _alternating(n: int) -> list[str]:
    return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]


@dataclass(frozen=True)
class Published:
    """A model's published parameter counts (billions) and where they are stated."""

    total_b: float
    active_b: float
    source: str
    #: What the publisher counts as active: "all" parameters a token touches, or
    #: "no_embedding" (the input embedding is a lookup, not a matmul), or
    #: "no_embeddings_or_head" (embedding and LM head both left out).
    active_counts: str = "all"
    #: The same for the total figure.
    total_counts: str = "all"
    #: Whether the total includes the checkpoint's MTP (nextn) layers.
    total_counts_mtp: bool = False


def _glm_355b(repo: str) -> tuple[dict[str, Any], Published]:
    """GLM-4.5 and GLM-4.6: one architecture, counted as the GLM-4.5 report counts it."""
    return (
        _m(
            _GLM,
            hidden_size=5120,
            num_hidden_layers=92,
            num_attention_heads=96,
            num_key_value_heads=8,
            intermediate_size=12288,
            moe_intermediate_size=1536,
            n_routed_experts=160,
            first_k_dense_replace=3,
            use_qk_norm=True,
        ),
        Published(
            355,
            32,
            f"https://huggingface.co/{repo} (model card; the GLM-4.5 report,"
            " arXiv 2508.06471, Table 1 lists its 1 MTP layer). GLM counts without the"
            " embedding and LM head (its 32B/12B active figures match only so) and with"
            " the MTP layer",
            active_counts="no_embeddings_or_head",
            total_counts="no_embeddings_or_head",
            total_counts_mtp=True,
        ),
    )


#: repo id -> (config facts, published figures).
_CATALOGUE: dict[str, tuple[dict[str, Any], Published]] = {
    "deepseek-ai/DeepSeek-V3": (
        _DEEPSEEK_V3,
        Published(
            671,
            37,
            "https://huggingface.co/deepseek-ai/DeepSeek-V3 (model card)",
            active_counts="no_embedding",
        ),
    ),
    "deepseek-ai/DeepSeek-R1": (
        _DEEPSEEK_V3,
        Published(
            671,
            37,
            "https://huggingface.co/deepseek-ai/DeepSeek-R1 (model card)",
            active_counts="no_embedding",
        ),
    ),
    "deepseek-ai/DeepSeek-V3.1": (
        _DEEPSEEK_V3,
        Published(
            671,
            37,
            "https://huggingface.co/deepseek-ai/DeepSeek-V3.1 (model card)",
            active_counts="no_embedding",
        ),
    ),
    "deepseek-ai/DeepSeek-V3.2-Exp": (
        _m(
            _DEEPSEEK_V3,
            architectures=["DeepseekV32ForCausalLM"],
            model_type="deepseek_v32",
            index_head_dim=128,
            index_n_heads=64,
            index_topk=2048,
        ),
        Published(
            671,
            37,
            "https://api-docs.deepseek.com/news/news250929 (V3.2-Exp, V3.1-Terminus base)",
            active_counts="no_embedding",
        ),
    ),
    "moonshotai/Kimi-K2-Instruct": (
        _KIMI_K2,
        Published(
            1026.5,
            32,
            "https://huggingface.co/moonshotai/Kimi-K2-Instruct: the Hub's count of the"
            " checkpoint's tensors, 1026.5B (the card rounds to 1T total, 32B activated;"
            " the tech report, arXiv 2507.20534, says 1.04T, which no count of this"
            " config reaches)",
            active_counts="no_embedding",
        ),
    ),
    "moonshotai/Kimi-K2.5": (
        _KIMI_K25,
        Published(
            1026.9,
            32,
            _hf(
                "moonshotai/Kimi-K2.5",
                "1T total, 32B activated, a 400M MoonViT encoder; the"
                " text model is Kimi-K2's (the Hub's count of that checkpoint, 1026.5B) and the"
                " total adds the encoder",
            ),
            active_counts="no_embedding",
        ),
    ),
    "Qwen/Qwen3-235B-A22B": (
        _m(
            _QWEN3_MOE,
            hidden_size=4096,
            num_hidden_layers=94,
            num_attention_heads=64,
            num_key_value_heads=4,
            head_dim=128,
            num_experts=128,
            num_experts_per_tok=8,
            moe_intermediate_size=1536,
            intermediate_size=12288,
            vocab_size=151936,
            tie_word_embeddings=False,
        ),
        Published(235, 22, "https://huggingface.co/Qwen/Qwen3-235B-A22B (model card)"),
    ),
    "Qwen/Qwen3-30B-A3B": (
        _m(
            _QWEN3_MOE,
            hidden_size=2048,
            num_hidden_layers=48,
            num_attention_heads=32,
            num_key_value_heads=4,
            head_dim=128,
            num_experts=128,
            num_experts_per_tok=8,
            moe_intermediate_size=768,
            intermediate_size=6144,
            vocab_size=151936,
            tie_word_embeddings=False,
        ),
        Published(30.5, 3.3, "https://huggingface.co/Qwen/Qwen3-30B-A3B (model card)"),
    ),
    "Qwen/Qwen3-32B": (
        _m(
            _QWEN3,
            hidden_size=5120,
            num_hidden_layers=64,
            num_attention_heads=64,
            num_key_value_heads=8,
            intermediate_size=25600,
            vocab_size=151936,
            tie_word_embeddings=False,
        ),
        Published(32.8, 32.8, "https://huggingface.co/Qwen/Qwen3-32B (model card)"),
    ),
    "Qwen/Qwen3-8B": (
        _m(
            _QWEN3,
            hidden_size=4096,
            num_hidden_layers=36,
            num_attention_heads=32,
            num_key_value_heads=8,
            intermediate_size=12288,
            vocab_size=151936,
            tie_word_embeddings=False,
        ),
        Published(8.2, 8.2, "https://huggingface.co/Qwen/Qwen3-8B (model card)"),
    ),
    "Qwen/Qwen2.5-7B-Instruct": (
        _m(
            _QWEN2,
            hidden_size=3584,
            num_hidden_layers=28,
            num_attention_heads=28,
            num_key_value_heads=4,
            intermediate_size=18944,
            vocab_size=152064,
            tie_word_embeddings=False,
        ),
        Published(7.61, 7.61, "https://huggingface.co/Qwen/Qwen2.5-7B-Instruct (model card)"),
    ),
    "Qwen/Qwen2.5-72B-Instruct": (
        _m(
            _QWEN2,
            hidden_size=8192,
            num_hidden_layers=80,
            num_attention_heads=64,
            num_key_value_heads=8,
            intermediate_size=29568,
            vocab_size=152064,
            tie_word_embeddings=False,
        ),
        Published(72.7, 72.7, "https://huggingface.co/Qwen/Qwen2.5-72B-Instruct (model card)"),
    ),
    "Qwen/QwQ-32B": (
        _m(
            _QWEN2,
            hidden_size=5120,
            num_hidden_layers=64,
            num_attention_heads=40,
            num_key_value_heads=8,
            intermediate_size=27648,
            vocab_size=152064,
            tie_word_embeddings=False,
        ),
        Published(32.5, 32.5, "https://huggingface.co/Qwen/QwQ-32B (model card)"),
    ),
    "meta-llama/Llama-3.1-8B-Instruct": (
        _m(
            _LLAMA,
            hidden_size=4096,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            intermediate_size=14336,
        ),
        Published(
            8.03, 8.03, "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct (8.03B params)"
        ),
    ),
    "meta-llama/Llama-3.1-70B-Instruct": (
        _m(
            _LLAMA,
            hidden_size=8192,
            num_hidden_layers=80,
            num_attention_heads=64,
            num_key_value_heads=8,
            intermediate_size=28672,
        ),
        Published(
            70.6, 70.6, "https://huggingface.co/meta-llama/Llama-3.1-70B-Instruct (70.6B params)"
        ),
    ),
    "meta-llama/Llama-3.1-405B-Instruct": (
        _m(
            _LLAMA,
            hidden_size=16384,
            num_hidden_layers=126,
            num_attention_heads=128,
            num_key_value_heads=8,
            intermediate_size=53248,
        ),
        Published(
            406, 406, "https://huggingface.co/meta-llama/Llama-3.1-405B-Instruct (406B params)"
        ),
    ),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": (
        {
            "architectures": ["Llama4ForConditionalGeneration"],
            "model_type": "llama4",
            "text_config": _m(_LLAMA4_TEXT, num_local_experts=16, interleave_moe_layer_step=1),
            "vision_config": _LLAMA4_VISION,
        },
        Published(
            109,
            17,
            "https://ai.meta.com/blog/llama-4-multimodal-intelligence/ (the total includes"
            " the vision tower; the 17B active are text)",
        ),
    ),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": (
        {
            "architectures": ["Llama4ForConditionalGeneration"],
            "model_type": "llama4",
            "text_config": _m(_LLAMA4_TEXT, num_local_experts=128, interleave_moe_layer_step=2),
            "vision_config": _LLAMA4_VISION,
        },
        Published(400, 17, "https://ai.meta.com/blog/llama-4-multimodal-intelligence/"),
    ),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": (
        _m(
            _MIXTRAL,
            hidden_size=4096,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            intermediate_size=14336,
            num_local_experts=8,
            num_experts_per_tok=2,
            vocab_size=32000,
            tie_word_embeddings=False,
        ),
        Published(46.7, 12.9, "https://mistral.ai/news/mixtral-of-experts"),
    ),
    "mistralai/Mixtral-8x22B-Instruct-v0.1": (
        _m(
            _MIXTRAL,
            hidden_size=6144,
            num_hidden_layers=56,
            num_attention_heads=48,
            num_key_value_heads=8,
            intermediate_size=16384,
            num_local_experts=8,
            num_experts_per_tok=2,
            vocab_size=32768,
            tie_word_embeddings=False,
        ),
        Published(141, 39, "https://mistral.ai/news/mixtral-8x22b"),
    ),
    "zai-org/GLM-4.5": _glm_355b("zai-org/GLM-4.5"),
    "zai-org/GLM-4.6": _glm_355b("zai-org/GLM-4.6"),
    "zai-org/GLM-4.5-Air": (
        _m(
            _GLM,
            hidden_size=4096,
            num_hidden_layers=46,
            num_attention_heads=96,
            num_key_value_heads=8,
            intermediate_size=10944,
            moe_intermediate_size=1408,
            n_routed_experts=128,
            first_k_dense_replace=1,
            use_qk_norm=False,
        ),
        Published(
            106,
            12,
            "https://huggingface.co/zai-org/GLM-4.5-Air (model card), counted as GLM-4.5's",
            active_counts="no_embeddings_or_head",
            total_counts="no_embeddings_or_head",
            total_counts_mtp=True,
        ),
    ),
    "openai/gpt-oss-120b": (
        _m(
            _GPT_OSS,
            num_hidden_layers=36,
            num_local_experts=128,
            layer_types=_alternating(36),
        ),
        Published(
            116.8,
            5.13,
            "https://openai.com/index/introducing-gpt-oss/ (model card table)",
            active_counts="no_embedding",
        ),
    ),
    "openai/gpt-oss-20b": (
        _m(
            _GPT_OSS,
            num_hidden_layers=24,
            num_local_experts=32,
            layer_types=_alternating(24),
        ),
        Published(
            20.9,
            3.61,
            "https://openai.com/index/introducing-gpt-oss/ (model card table)",
            active_counts="no_embedding",
        ),
    ),
    "MiniMaxAI/MiniMax-M2": (
        {
            "architectures": ["MiniMaxM2ForCausalLM"],
            "model_type": "minimax_m2",
            "hidden_size": 3072,
            "num_hidden_layers": 62,
            "num_attention_heads": 48,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "intermediate_size": 1536,
            "num_local_experts": 256,
            "num_experts_per_tok": 8,
            "use_qk_norm": True,
            "vocab_size": 200064,
            "tie_word_embeddings": False,
            # MiniMax's own spelling: `fmt` names the torch dtype, and the router (`gate`),
            # its correction bias and the head stay 16-bit.
            "quantization_config": {
                **_FP8_BLOCK,
                "fmt": "float8_e4m3fn",
                "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"],
            },
        },
        Published(
            229,
            10,
            "https://huggingface.co/collections/MiniMaxAI/minimax-m2 (the Hub's count of the"
            " checkpoint's tensors: 229B; the card's 230B total rounds it); 10B active from"
            " https://huggingface.co/MiniMaxAI/MiniMax-M2 (model card)",
            active_counts="no_embeddings_or_head",
        ),
    ),
}


def _qwen2(
    hidden: int, layers: int, heads: int, kv: int, inter: int, vocab: int, tie: bool
) -> dict[str, Any]:
    return _m(
        _QWEN2,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=tie,
    )


def _qwen3(hidden: int, layers: int, heads: int, inter: int, tie: bool) -> dict[str, Any]:
    return _m(
        _QWEN3,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=8,
        intermediate_size=inter,
        vocab_size=151936,
        tie_word_embeddings=tie,
    )


def _llama(hidden: int, layers: int, heads: int, kv: int, inter: int, **kw: Any) -> dict[str, Any]:
    return _m(
        _LLAMA,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=inter,
        **kw,
    )


_QWEN25_7B = _qwen2(3584, 28, 28, 4, 18944, 152064, False)
_QWEN25_14B = _qwen2(5120, 48, 40, 8, 13824, 152064, False)
_QWEN25_32B = _qwen2(5120, 64, 40, 8, 27648, 152064, False)


def _mistral(hidden: int, layers: int, inter: int, vocab: int, **kw: Any) -> dict[str, Any]:
    return _m(
        _MISTRAL,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=inter,
        vocab_size=vocab,
        **kw,
    )


_LLAMA_8B = _llama(4096, 32, 32, 8, 14336)
_LLAMA_70B = _llama(8192, 80, 64, 8, 28672)

#: The small and mid-size models served most, added for issue 24 (configs from each
#: repository's config.json; counts from the model card or the Hub's tensor count).
_COMMON: dict[str, tuple[dict[str, Any], Published]] = {
    "Qwen/Qwen2-7B-Instruct": (
        _QWEN25_7B,
        Published(7.62, 7.62, _hf("Qwen/Qwen2-7B-Instruct", "the Hub's count: 7.62B")),
    ),
    "Qwen/Qwen2.5-0.5B-Instruct": (
        _qwen2(896, 24, 14, 2, 4864, 151936, True),
        Published(0.49, 0.49, _hf("Qwen/Qwen2.5-0.5B-Instruct")),
    ),
    "Qwen/Qwen2.5-1.5B-Instruct": (
        _qwen2(1536, 28, 12, 2, 8960, 151936, True),
        Published(1.54, 1.54, _hf("Qwen/Qwen2.5-1.5B-Instruct")),
    ),
    "Qwen/Qwen2.5-3B-Instruct": (
        _qwen2(2048, 36, 16, 2, 11008, 151936, True),
        Published(3.09, 3.09, _hf("Qwen/Qwen2.5-3B-Instruct")),
    ),
    "Qwen/Qwen2.5-14B-Instruct": (
        _QWEN25_14B,
        Published(14.7, 14.7, _hf("Qwen/Qwen2.5-14B-Instruct")),
    ),
    "Qwen/Qwen2.5-32B-Instruct": (
        _QWEN25_32B,
        Published(
            32.8,
            32.8,
            _hf("Qwen/Qwen2.5-32B-Instruct", "the Hub's count: 32.8B; the card says 32.5B"),
        ),
    ),
    "Qwen/Qwen2.5-Coder-32B-Instruct": (
        _QWEN25_32B,
        Published(32.8, 32.8, _hf("Qwen/Qwen2.5-Coder-32B-Instruct", "the Hub's count: 32.8B")),
    ),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": (
        _QWEN25_7B,
        Published(
            7.62, 7.62, _hf("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "the Hub's count: 7.62B")
        ),
    ),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": (
        _QWEN25_14B,
        Published(
            14.8, 14.8, _hf("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "the Hub's count: 14.8B")
        ),
    ),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": (
        _QWEN25_32B,
        Published(
            32.8, 32.8, _hf("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "the Hub's count: 32.8B")
        ),
    ),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": (
        _LLAMA_8B,
        Published(
            8.03, 8.03, _hf("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "the Hub's count: 8.03B")
        ),
    ),
    "Qwen/Qwen3-0.6B": (
        _qwen3(1024, 28, 16, 3072, True),
        Published(0.6, 0.6, _hf("Qwen/Qwen3-0.6B")),
    ),
    "Qwen/Qwen3-1.7B": (
        _qwen3(2048, 28, 16, 6144, True),
        Published(1.7, 1.7, _hf("Qwen/Qwen3-1.7B")),
    ),
    "Qwen/Qwen3-4B": (_qwen3(2560, 36, 32, 9728, True), Published(4.0, 4.0, _hf("Qwen/Qwen3-4B"))),
    "Qwen/Qwen3-14B": (
        _qwen3(5120, 40, 40, 17408, False),
        Published(14.8, 14.8, _hf("Qwen/Qwen3-14B")),
    ),
    "meta-llama/Meta-Llama-3-8B-Instruct": (
        _LLAMA_8B,
        Published(8.03, 8.03, _hf("meta-llama/Meta-Llama-3-8B-Instruct", "the Hub's count: 8.03B")),
    ),
    "meta-llama/Llama-3.2-1B-Instruct": (
        _llama(2048, 16, 32, 8, 8192, head_dim=64, tie_word_embeddings=True),
        Published(1.24, 1.24, _hf("meta-llama/Llama-3.2-1B-Instruct", "the Hub's count: 1.24B")),
    ),
    "meta-llama/Llama-3.2-3B-Instruct": (
        _llama(3072, 28, 24, 8, 8192, head_dim=128, tie_word_embeddings=True),
        Published(3.21, 3.21, _hf("meta-llama/Llama-3.2-3B-Instruct", "the Hub's count: 3.21B")),
    ),
    "meta-llama/Llama-3.3-70B-Instruct": (
        _LLAMA_70B,
        Published(70.6, 70.6, _hf("meta-llama/Llama-3.3-70B-Instruct", "the Hub's count: 70.6B")),
    ),
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0": (
        _llama(2048, 22, 32, 4, 5632, vocab_size=32000),
        Published(1.1, 1.1, _hf("TinyLlama/TinyLlama-1.1B-Chat-v1.0")),
    ),
    "mistralai/Mistral-7B-Instruct-v0.3": (
        _mistral(4096, 32, 14336, 32768),
        Published(7.25, 7.25, _hf("mistralai/Mistral-7B-Instruct-v0.3", "the Hub's count: 7.25B")),
    ),
    "mistralai/Mistral-7B-Instruct-v0.2": (
        _mistral(4096, 32, 14336, 32000),
        Published(7.24, 7.24, _hf("mistralai/Mistral-7B-Instruct-v0.2", "the Hub's count: 7.24B")),
    ),
    "mistralai/Mistral-Small-24B-Instruct-2501": (
        _mistral(5120, 40, 32768, 131072, head_dim=128),
        Published(
            23.6, 23.6, _hf("mistralai/Mistral-Small-24B-Instruct-2501", "the Hub's count: 23.6B")
        ),
    ),
    "google/gemma-3-1b-it": (
        _m(
            _GEMMA3_TEXT,
            architectures=["Gemma3ForCausalLM"],
            hidden_size=1152,
            num_hidden_layers=26,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=256,
            intermediate_size=6912,
            vocab_size=262144,
            sliding_window=512,
        ),
        Published(1.0, 1.0, _hf("google/gemma-3-1b-it", "the Hub's count: 1.0B")),
    ),
    "google/gemma-3-4b-it": (
        _gemma3(
            hidden_size=2560,
            num_hidden_layers=34,
            num_attention_heads=8,
            num_key_value_heads=4,
            head_dim=256,
            intermediate_size=10240,
            vocab_size=262208,
            sliding_window=1024,
        ),
        Published(
            4.3, 3.88, _hf("google/gemma-3-4b-it", "the Hub's count: 4.3B with the SigLIP tower")
        ),
    ),
    "google/gemma-3-12b-it": (
        _gemma3(
            hidden_size=3840,
            num_hidden_layers=48,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=256,
            intermediate_size=15360,
            vocab_size=262208,
            sliding_window=1024,
        ),
        Published(
            12.2, 11.8, _hf("google/gemma-3-12b-it", "the Hub's count: 12.2B with the SigLIP tower")
        ),
    ),
    "google/gemma-3-27b-it": (
        _gemma3(
            hidden_size=5376,
            num_hidden_layers=62,
            num_attention_heads=32,
            num_key_value_heads=16,
            head_dim=128,
            intermediate_size=21504,
            vocab_size=262208,
            sliding_window=1024,
        ),
        Published(
            27.4, 27.0, _hf("google/gemma-3-27b-it", "the Hub's count: 27.4B with the SigLIP tower")
        ),
    ),
}
_CATALOGUE.update(_COMMON)

#: Families read from bundled config copies (`bundled_models.SOURCES`); their published
#: parameter counts, and what each publisher counts.
_BUNDLED_PUBLISHED: dict[str, Published] = {
    "Qwen/Qwen3.5-397B-A17B": Published(397, 17, _hf("Qwen/Qwen3.5-397B-A17B", "name and card")),
    "Qwen/Qwen3.5-122B-A10B": Published(122, 10, _hf("Qwen/Qwen3.5-122B-A10B", "name and card")),
    "Qwen/Qwen3.5-35B-A3B": Published(35, 3, _hf("Qwen/Qwen3.5-35B-A3B", "name and card")),
    "Qwen/Qwen3.5-27B": Published(27, 27, _hf("Qwen/Qwen3.5-27B", "name and card")),
    "zai-org/GLM-5": Published(
        744,
        40,
        _hf("zai-org/GLM-5", "744B total, 40B active; active without the embedding and head"),
        active_counts="no_embeddings_or_head",
    ),
    "stepfun-ai/Step-3.5-Flash": Published(
        196,
        11,
        _hf("stepfun-ai/Step-3.5-Flash", "196B total, 11B active; also vllm-project/recipes"
            " StepFun/Step-3.5-Flash.md"),
    ),
}  # fmt: skip
for _repo, _cfg in BUNDLED.items():
    _CATALOGUE[_repo] = (_cfg, _BUNDLED_PUBLISHED[_repo])

#: Qwen3-Next-80B-A3B (Instruct and Thinking share the config): the GatedDeltaNet hybrid
#: Qwen3.5 grew from, a text-only `Qwen3NextForCausalLM` with no `layer_types` (SGLang's
#: `Qwen3NextConfig.layers_block_type` derives them from `full_attention_interval`).
#: Every field below, 48 layers and the 151936-token vocabulary included, equals the
#: Thinking release's config.json as aiconfigurator bundles it (ai-dynamo/aiconfigurator@
#: 1b7cfb10a6fa06880ad7911db5ddb949882ff76a src/aiconfigurator/model_configs/
#: Qwen--Qwen3-Next-80B-A3B-Thinking_config.json) and the Instruct release's as transformers
#: 5.7.0 loads it (gogongxt/python@cbff706dc959707a9944e38e8164783122dfa32a
#: scripts/models/qwen3_next_80b_a3b_instruct.md).
_QWEN3_NEXT: dict[str, Any] = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "intermediate_size": 5120,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "full_attention_interval": 4,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 262144,
    "partial_rotary_factor": 0.25,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
for _repo in ("Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen3-Next-80B-A3B-Thinking"):
    _CATALOGUE[_repo] = (
        _QWEN3_NEXT,
        Published(80, 3, _hf(_repo, "model card: 80B in total and 3B activated")),
    )


_YARN_4K = {"type": "yarn", "original_max_position_embeddings": 4096}


def _each(repos: tuple[str, ...], rope: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The same rope facts for several repositories (read only: `_with_rope` copies)."""
    return {repo: rope for repo in repos}


#: The rotary-cache length facts (`max_position_embeddings`, YaRN's `rope_scaling`,
#: `partial_rotary_factor`, `rotary_dim`) of each repository's config.json, kept apart
#: because repositories sharing shapes differ here (Qwen2-7B 32k, its R1 distill 128k).
_ROPE: dict[str, dict[str, Any]] = {
    **_each(
        (
            "deepseek-ai/DeepSeek-V3",
            "deepseek-ai/DeepSeek-R1",
            "deepseek-ai/DeepSeek-V3.1",
            "deepseek-ai/DeepSeek-V3.2-Exp",
        ),
        {"max_position_embeddings": 163840, "rope_scaling": {**_YARN_4K, "factor": 40}},
    ),
    "moonshotai/Kimi-K2-Instruct": {
        "max_position_embeddings": 131072,
        "rope_scaling": {**_YARN_4K, "factor": 32},
    },
    **_each(
        ("openai/gpt-oss-120b", "openai/gpt-oss-20b"),
        {
            "max_position_embeddings": 131072,
            # gpt-oss spells the kind `rope_type` (transformers' name), DeepSeek `type`.
            "rope_scaling": {
                "rope_type": "yarn",
                "original_max_position_embeddings": 4096,
                "factor": 32,
            },
        },
    ),
    **_each(
        (
            "Qwen/Qwen3-235B-A22B",
            "Qwen/Qwen3-30B-A3B",
            "Qwen/Qwen3-32B",
            "Qwen/Qwen3-8B",
            "Qwen/Qwen3-0.6B",
            "Qwen/Qwen3-1.7B",
            "Qwen/Qwen3-4B",
            "Qwen/Qwen3-14B",
            "Qwen/QwQ-32B",
        ),
        {"max_position_embeddings": 40960},
    ),
    **_each(
        (
            "Qwen/Qwen2.5-7B-Instruct",
            "Qwen/Qwen2.5-72B-Instruct",
            "Qwen/Qwen2-7B-Instruct",
            "Qwen/Qwen2.5-0.5B-Instruct",
            "Qwen/Qwen2.5-1.5B-Instruct",
            "Qwen/Qwen2.5-3B-Instruct",
            "Qwen/Qwen2.5-14B-Instruct",
            "Qwen/Qwen2.5-32B-Instruct",
            "Qwen/Qwen2.5-Coder-32B-Instruct",
            "mistralai/Mixtral-8x7B-Instruct-v0.1",
            "mistralai/Mistral-7B-Instruct-v0.3",
            "mistralai/Mistral-7B-Instruct-v0.2",
            "mistralai/Mistral-Small-24B-Instruct-2501",
            "google/gemma-3-1b-it",
        ),
        {"max_position_embeddings": 32768},
    ),
    **_each(
        (
            "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
            "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
            "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
            "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
            "meta-llama/Llama-3.1-8B-Instruct",
            "meta-llama/Llama-3.1-70B-Instruct",
            "meta-llama/Llama-3.1-405B-Instruct",
            "meta-llama/Llama-3.2-1B-Instruct",
            "meta-llama/Llama-3.2-3B-Instruct",
            "meta-llama/Llama-3.3-70B-Instruct",
            "google/gemma-3-4b-it",
            "google/gemma-3-12b-it",
            "google/gemma-3-27b-it",
        ),
        {"max_position_embeddings": 131072},
    ),
    "meta-llama/Meta-Llama-3-8B-Instruct": {"max_position_embeddings": 8192},
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0": {"max_position_embeddings": 2048},
    "mistralai/Mixtral-8x22B-Instruct-v0.1": {"max_position_embeddings": 65536},
    **_each(
        ("zai-org/GLM-4.5", "zai-org/GLM-4.5-Air"),
        {"max_position_embeddings": 131072, "partial_rotary_factor": 0.5},
    ),
    # GLM-4.6 took GLM-4.5's 128K context to 200K: its config.json says 202752
    # (tests/fixtures/catalogue_configs/oracles.json names the copies read).
    "zai-org/GLM-4.6": {"max_position_embeddings": 202752, "partial_rotary_factor": 0.5},
    "MiniMaxAI/MiniMax-M2": {"max_position_embeddings": 196608, "rotary_dim": 64},
    # Llama 4's text_config: SGLang's `llama4.py` sizes the rotary cache by it (10M for Scout).
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": {"max_position_embeddings": 10485760},
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": {"max_position_embeddings": 1048576},
}


def _with_rope(cfg: dict[str, Any], rope: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(cfg.get("text_config"), Mapping):
        return {**cfg, "text_config": {**cfg["text_config"], **rope}}
    return {**cfg, **rope}


for _repo, _rope in _ROPE.items():
    _CATALOGUE[_repo] = (_with_rope(_CATALOGUE[_repo][0], _rope), _CATALOGUE[_repo][1])

for _repo, (_base, _adds) in VARIANTS.items():
    _CATALOGUE[_repo] = (_m(_CATALOGUE[_base][0], **_adds), _CATALOGUE[_base][1])

CATALOGUE: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {k: MappingProxyType(v[0]) for k, v in _CATALOGUE.items()}
)
PUBLISHED: Mapping[str, Published] = MappingProxyType({k: v[1] for k, v in _CATALOGUE.items()})


def catalogue_config(repo_id: str) -> Mapping[str, Any]:
    """The embedded config facts of `repo_id` (case-insensitive); lists the known ids."""
    for key, cfg in CATALOGUE.items():
        if key.lower() == repo_id.lower():
            return cfg
    close = close_models(repo_id)
    hint = (
        f"did you mean {' or '.join(close)}?" if close else f"e.g. {', '.join(list(CATALOGUE)[:3])}"
    )
    raise InputError(
        f"unknown model {repo_id!r}: not a config.json path and not one of the "
        f"{len(CATALOGUE)} embedded models ({hint}; solver.memory.CATALOGUE has them all)"
    )


def close_models(name: str, n: int = 3) -> list[str]:
    """Embedded ids a mistyped `name` may mean, closest first: what people type is the
    repo id without its organisation (`Qwen3-32B`), in another case, or a name cut short
    (`gpt-oss-120`, `Kimi-K2` for Kimi-K2-Instruct), so the model's own name is compared as
    well as the whole id, and a name the typed one begins counts as close."""
    import difflib

    want = name.strip().lower()
    if not want:
        return []
    tail = want.rsplit("/", 1)[-1]
    scored = []
    for key in CATALOGUE:
        full, own = key.lower(), key.lower().rsplit("/", 1)[-1]
        ratio = max(
            difflib.SequenceMatcher(None, want, full).ratio(),
            difflib.SequenceMatcher(None, tail, own).ratio(),
        )
        if len(tail) >= 4 and own.startswith(tail):
            # Cut at a word boundary (`Kimi-K2` of `Kimi-K2-Instruct`) ranks before cut
            # inside a name (`Kimi-K2` of `Kimi-K2.5`, another release).
            ratio = max(ratio, 0.9 if own[len(tail) : len(tail) + 1] in ("-", "_") else 0.75)
        if ratio >= 0.75:
            scored.append((-ratio, key))
    return [key for _, key in sorted(scored)[:n]]


def catalogue_facts(repo_id: str) -> ModelFacts:
    return facts_from_config(catalogue_config(repo_id))


def model_config(model: str) -> Mapping[str, Any]:
    """A config.json path / model directory, or an embedded catalogue repo id."""
    p = Path(model)
    if p.is_dir():
        p = p / "config.json"
    if p.is_file():
        return read_checkpoint_config(p)
    return catalogue_config(model)


def checkpoint_bytes(model: str) -> int | None:
    """`metadata.total_size` of the `model.safetensors.index.json` beside a local config:
    the bytes of every tensor the checkpoint stores (MTP layers and towers included), to
    say how far the count is from it. None for a catalogue id or a directory without one."""
    p = Path(model)
    folder = p if p.is_dir() else p.parent
    if not (p.is_dir() or p.is_file()):
        return None
    index = folder / "model.safetensors.index.json"
    if not index.is_file():
        return None
    try:
        size = json.loads(index.read_text()).get("metadata", {}).get("total_size")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None
    return int(size) if isinstance(size, int | float) and size > 0 else None
