"""Catalogue entries whose `config.json` was read from a bundled copy, not retyped.

Why a module of its own: these families (Qwen3.5's GatedDeltaNet hybrids, GLM-5's DSA,
Step-3.5) arrived after the rest of the catalogue, and their facts were
copied from the Hugging Face `config.json` copies that aiconfigurator-core 0.12.0 ships
(`aiconfigurator_core/model_configs/<org>--<name>_config.json`, a project dependency),
except Step-3.5-Flash, whose widths are SGLang's own `Step3p5Config` defaults
(`sglang/srt/configs/step3p5.py`, 0.5.18 to 0.5.23). Each entry keeps the keys the memory
model and the layout rules read, in the config's own spelling; `SOURCES` names the file
each was read from. Quantized releases of these bases are in `quantized_checkpoints.py`.
"""

from __future__ import annotations

from typing import Any

#: Where each entry's config text was read (docs/weight-shapes.md, "Checkpoint configs").
BUNDLE = "aiconfigurator-core 0.12.0 model_configs/"
SOURCES: dict[str, str] = {
    "Qwen/Qwen3.5-397B-A17B": BUNDLE + "Qwen--Qwen3.5-397B-A17B_config.json",
    "Qwen/Qwen3.5-122B-A10B": BUNDLE + "Qwen--Qwen3.5-122B-A10B_config.json",
    "Qwen/Qwen3.5-35B-A3B": BUNDLE + "Qwen--Qwen3.5-35B-A3B_config.json",
    "Qwen/Qwen3.5-27B": BUNDLE + "Qwen--Qwen3.5-27B_config.json",
    "zai-org/GLM-5": BUNDLE + "zai-org--GLM-5_config.json",
    # DeepSeek-V3.2 is V3.2-Exp's architecture: a quantized-checkpoint variant of it.
    "deepseek-ai/DeepSeek-V3.2": BUNDLE + "deepseek-ai--DeepSeek-V3.2_config.json",
    "stepfun-ai/Step-3.5-Flash": "sglang 0.5.23 srt/configs/step3p5.py Step3p5Config defaults",
}


def hybrid_layer_types(layers: int, interval: int = 4) -> list[str]:
    """Qwen3.5's `layer_types`: three GatedDeltaNet layers, then one full-attention layer
    (`full_attention_interval` 4), as each published config lists them."""
    return [
        "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)
    ]


#: Qwen3.5's vision tower (the same `vision_config` in the three MoE releases, apart
#: from the projection to the text width).
def _qwen35_vision(out_hidden: int, model_type: str) -> dict[str, Any]:
    return {
        "model_type": model_type,
        "depth": 27,
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_heads": 16,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": out_hidden,
    }


def _qwen35(moe: bool, **text: Any) -> dict[str, Any]:
    layers = text["num_hidden_layers"]
    model_type = "qwen3_5_moe" if moe else "qwen3_5"
    return {
        "architectures": [
            "Qwen3_5MoeForConditionalGeneration" if moe else "Qwen3_5ForConditionalGeneration"
        ],
        "model_type": model_type,
        "tie_word_embeddings": False,
        "text_config": {
            "model_type": model_type + "_text",
            "attn_output_gate": True,
            "full_attention_interval": 4,
            "head_dim": 256,
            "linear_conv_kernel_dim": 4,
            "linear_key_head_dim": 128,
            "linear_num_key_heads": 16,
            "linear_value_head_dim": 128,
            "max_position_embeddings": 262144,
            "mlp_only_layers": [],
            "mtp_num_hidden_layers": 1,
            "vocab_size": 248320,
            "dtype": "bfloat16",
            "rope_parameters": {"rope_theta": 10000000, "partial_rotary_factor": 0.25},
            "layer_types": hybrid_layer_types(layers),
            **text,
        },
        "vision_config": _qwen35_vision(text["hidden_size"], model_type),
    }


#: repo id -> config facts.
CONFIGS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3.5-397B-A17B": _qwen35(
        True,
        hidden_size=4096,
        num_hidden_layers=60,
        num_attention_heads=32,
        num_key_value_heads=2,
        linear_num_value_heads=64,
        moe_intermediate_size=1024,
        shared_expert_intermediate_size=1024,
        num_experts=512,
        num_experts_per_tok=10,
    ),
    "Qwen/Qwen3.5-122B-A10B": _qwen35(
        True,
        hidden_size=3072,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=2,
        linear_num_value_heads=64,
        moe_intermediate_size=1024,
        shared_expert_intermediate_size=1024,
        num_experts=256,
        num_experts_per_tok=8,
    ),
    "Qwen/Qwen3.5-35B-A3B": _qwen35(
        True,
        hidden_size=2048,
        num_hidden_layers=40,
        num_attention_heads=16,
        num_key_value_heads=2,
        linear_num_value_heads=32,
        moe_intermediate_size=512,
        shared_expert_intermediate_size=512,
        num_experts=256,
        num_experts_per_tok=8,
    ),
    "Qwen/Qwen3.5-27B": _qwen35(
        False,
        hidden_size=5120,
        num_hidden_layers=64,
        num_attention_heads=24,
        num_key_value_heads=4,
        linear_num_value_heads=48,
        intermediate_size=17408,
    ),
    "zai-org/GLM-5": {
        "architectures": ["GlmMoeDsaForCausalLM"],
        "model_type": "glm_moe_dsa",
        "hidden_size": 6144,
        "num_hidden_layers": 78,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "head_dim": 64,
        "intermediate_size": 12288,
        "moe_intermediate_size": 2048,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 3,
        "moe_layer_freq": 1,
        "n_group": 1,
        "topk_group": 1,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "q_lora_rank": 2048,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 192,
        "qk_rope_head_dim": 64,
        "v_head_dim": 256,
        "index_head_dim": 128,
        "index_n_heads": 32,
        "index_topk": 2048,
        "vocab_size": 154880,
        "max_position_embeddings": 202752,
        "tie_word_embeddings": False,
        "num_nextn_predict_layers": 1,
        "dtype": "bfloat16",  # transformers 5's spelling, as GLM-5's config.json has it
    },
    "stepfun-ai/Step-3.5-Flash": {
        "architectures": ["Step3p5ForCausalLM"],
        "model_type": "step3p5",
        "hidden_size": 4096,
        "intermediate_size": 11264,
        "num_attention_heads": 64,
        "num_attention_groups": 8,
        "num_hidden_layers": 45,
        "head_dim": 128,
        "vocab_size": 128815,
        "moe_intermediate_size": 1280,
        "moe_num_experts": 288,
        "moe_top_k": 8,
        "share_expert_dim": 1280,
        "moe_layers_enum": ",".join(str(i) for i in range(3, 45)),
        "max_position_embeddings": 128000,
        "num_nextn_predict_layers": 3,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
}
