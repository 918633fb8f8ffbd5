"""Quantized releases of catalogued models: the same architecture, another checkpoint.

Why separate: a quantized checkpoint differs from its base model only in
`quantization_config` (which decides whether a layout's weight shards load at all:
docs/weight-shapes.md), so each entry names its base repository and the config it adds.
`quantization_config` values are the public `config.json` of each repository on
huggingface.co (https://huggingface.co/<repo id>/blob/main/config.json); the published
parameter counts are the base model's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from meshsat.solver.errors import InputError

_FP8_BLOCK = {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [128, 128],
}
#: llm-compressor's FP8-dynamic scheme: per-channel weight scales, no block.
_FP8_CHANNEL = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {
                "num_bits": 8,
                "type": "float",
                "strategy": "channel",
                "dynamic": False,
                "symmetric": True,
            },
            # Dynamic per-token scales: compressed-tensors refuses a static token scheme
            # (SGLang 0.5.23 reading this config, fidelity/weight_shapes/models.py).
            "input_activations": {
                "num_bits": 8,
                "type": "float",
                "strategy": "token",
                "dynamic": True,
                "symmetric": True,
            },
        }
    },
    "ignore": ["lm_head", "re:.*mlp.gate$"],
}
_NVFP4 = {
    "quant_method": "modelopt",
    "quant_algo": "NVFP4",
    "group_size": 16,
    "exclude_modules": ["lm_head"],
}
_FBGEMM_FP8 = {
    "quant_method": "fbgemm_fp8",
    "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"],
}

#: Qwen3.5 FP8 (Qwen/Qwen3.5-*-FP8): fine-grained FP8, block 128, with the GatedDeltaNet
#: beta / alpha projections (`in_proj_b`, `in_proj_a`; SGLang's merged `in_proj_ba`), the
#: routers, embeddings and norms left in BF16. The shape facts as the maxtext Qwen3.5 FP8
#: configs state them, "matching official Hugging Face quantization configs"
#: (AI-Hypercomputer/maxtext src/maxtext/configs/models/qwen3.5-397b-a17b-fp8.yml:
#: `weight_block_size: 128`, `unquantized_modules` naming `in_proj_ba`); the repository's
#: own `config.json` text was not read (docs/weight-shapes.md).
_QWEN35_FP8 = {
    **_FP8_BLOCK,
    # Dotted module paths, as SGLang's FP8 reader matches them (quantization/utils.py
    # `_module_path_match`: no regular expressions); the published configs spell each
    # layer out, which matches the same modules.
    "modules_to_not_convert": [
        "lm_head",
        "model.language_model.embed_tokens",
        "mlp.gate",
        "mlp.shared_expert_gate",
        "linear_attn.in_proj_a",
        "linear_attn.in_proj_b",
        "model.visual",
    ],
}
#: zai-org/GLM-5-FP8 (aiconfigurator-core 0.12.0 model_configs/zai-org--GLM-5-FP8_config.json):
#: block 128; its `modules_to_not_convert` lists, per layer, the norms, the routers
#: (`mlp.gate`, layers 3 to 78) and the DSA indexer's `indexers_proj`, and the embedding
#: and head. The linear entries are kept here (norms are not linears).
_GLM5_FP8 = {
    **_FP8_BLOCK,
    "modules_to_not_convert": [
        "lm_head",
        "model.embed_tokens",
        *(f"model.layers.{i}.self_attn.indexers_proj" for i in range(79)),
        *(f"model.layers.{i}.mlp.gate" for i in range(3, 79)),
    ],
}
#: nvidia/GLM-5-NVFP4 (model_configs/nvidia--GLM-5-NVFP4_hf_quant_config.json, read by SGLang
#: as the ModelOpt config): NVFP4 group 16, every attention linear of every layer excluded.
_GLM5_NVFP4 = {
    "quant_method": "modelopt",
    "quant_algo": "NVFP4",
    "group_size": 16,
    "exclude_modules": [
        "lm_head",
        *(
            f"model.layers.{i}.self_attn.{m}"
            for i in range(78)
            for m in ("indexer*", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj", "q_a_proj",
                      "q_b_proj")
        ),
    ],
}  # fmt: skip
#: nvidia/Qwen3.5-*-NVFP4 (model_configs/nvidia--Qwen3.5-397B-A17B-NVFP4_config.json): NVFP4
#: group 16; every GatedDeltaNet and full-attention layer, the shared experts, the vision
#: tower and the head excluded (listed per layer there; by family here).
_QWEN35_NVFP4 = {
    "quant_method": "modelopt",
    "quant_algo": "NVFP4",
    "group_size": 16,
    "exclude_modules": [
        "lm_head",
        "*.mlp.shared_expert.*",
        "model.language_model.layers.*.linear_attn*",
        "model.language_model.layers.*.self_attn*",
        "model.visual*",
    ],
}
#: nvidia/Llama-3.1-70B-Instruct-FP8 (model_configs/nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant
#: _config.json): ModelOpt per-tensor FP8, the head excluded.
_MODELOPT_FP8 = {"quant_method": "modelopt", "quant_algo": "FP8", "exclude_modules": ["lm_head"]}
#: stepfun-ai/Step-3.5-Flash-FP8: block 128, nothing but the head excluded; as the same
#: org's Step-3.7-Flash-FP8 publishes it for the same widths (model_configs/stepfun-ai--
#: Step-3.7-Flash-FP8_config.json), and as sgl-project/sglang#26107's TP 4 failure on the
#: shared expert (1280 / 4 = 320) requires. The Step-3.5 repository's text was not read.
_STEP35_FP8 = {
    "quant_method": "fp8",
    "weight_block_size": [128, 128],
    "activation_scheme": "dynamic",
}

#: deepseek-ai/DeepSeek-V3.2 (model_configs/deepseek-ai--DeepSeek-V3.2_config.json): V3.2-Exp's
#: architecture; block 128 with UE8M0 scales.
_V32_FP8 = {**_FP8_BLOCK, "scale_fmt": "ue8m0"}

#: repo id -> (base repo id in the catalogue, keys the checkpoint's config adds or changes).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "Qwen/Qwen3-235B-A22B-FP8": ("Qwen/Qwen3-235B-A22B", {"quantization_config": _FP8_BLOCK}),
    "Qwen/Qwen3-30B-A3B-FP8": ("Qwen/Qwen3-30B-A3B", {"quantization_config": _FP8_BLOCK}),
    "Qwen/Qwen3-32B-FP8": ("Qwen/Qwen3-32B", {"quantization_config": _FP8_BLOCK}),
    "Qwen/Qwen3-8B-FP8": ("Qwen/Qwen3-8B", {"quantization_config": _FP8_BLOCK}),
    "zai-org/GLM-4.5-FP8": ("zai-org/GLM-4.5", {"quantization_config": _FP8_CHANNEL}),
    "zai-org/GLM-4.6-FP8": ("zai-org/GLM-4.6", {"quantization_config": _FP8_CHANNEL}),
    "zai-org/GLM-4.5-Air-FP8": ("zai-org/GLM-4.5-Air", {"quantization_config": _FP8_CHANNEL}),
    "nvidia/Llama-3.1-405B-Instruct-FP4": (
        "meta-llama/Llama-3.1-405B-Instruct",
        {"quantization_config": _NVFP4},
    ),
    "nvidia/Llama-3.1-8B-Instruct-FP4": (
        "meta-llama/Llama-3.1-8B-Instruct",
        {"quantization_config": _NVFP4},
    ),
    "Qwen/Qwen3.5-397B-A17B-FP8": ("Qwen/Qwen3.5-397B-A17B", {"quantization_config": _QWEN35_FP8}),
    "Qwen/Qwen3.5-35B-A3B-FP8": ("Qwen/Qwen3.5-35B-A3B", {"quantization_config": _QWEN35_FP8}),
    "nvidia/Qwen3.5-397B-A17B-NVFP4": (
        "Qwen/Qwen3.5-397B-A17B",
        {"quantization_config": _QWEN35_NVFP4},
    ),
    "nvidia/Qwen3.5-122B-A10B-NVFP4": (
        "Qwen/Qwen3.5-122B-A10B",
        {"quantization_config": _QWEN35_NVFP4},
    ),
    "zai-org/GLM-5-FP8": ("zai-org/GLM-5", {"quantization_config": _GLM5_FP8}),
    "deepseek-ai/DeepSeek-V3.2": (
        "deepseek-ai/DeepSeek-V3.2-Exp",
        {"quantization_config": _V32_FP8},
    ),
    "nvidia/GLM-5-NVFP4": ("zai-org/GLM-5", {"quantization_config": _GLM5_NVFP4}),
    "stepfun-ai/Step-3.5-Flash-FP8": (
        "stepfun-ai/Step-3.5-Flash",
        {"quantization_config": _STEP35_FP8},
    ),
    "nvidia/Llama-3.1-70B-Instruct-FP8": (
        "meta-llama/Llama-3.1-70B-Instruct",
        {"quantization_config": _MODELOPT_FP8},
    ),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8": (
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
        {"quantization_config": _FBGEMM_FP8},
    ),
}


#: `--quantization` values that quantize a 16-bit checkpoint while it loads (SGLang's
#: `Fp8Config` with `is_checkpoint_fp8_serialized` False: every linear and the MoE experts
#: become FP8 with per-tensor scales after loading; embeddings, LM head and norms stay
#: 16-bit), as the memory model prices them.
ONLINE_FP8 = ("fp8", "w8a8_fp8")


def with_quantization_flag(hf: Mapping[str, Any], quantization: str | None) -> Mapping[str, Any]:
    """The config the weights are priced from when `--quantization` is given.

    A checkpoint with its own `quantization_config` keeps it: SGLang loads what the
    checkpoint stores (`ModelConfig._verify_quantization` only accepts a flag compatible
    with it). A 16-bit checkpoint with `--quantization fp8` is quantized online, so its
    linears are priced as per-tensor FP8. Other online methods are not modelled.
    """
    if not quantization or hf.get("quantization_config"):
        return hf
    if quantization in ONLINE_FP8:
        return {**hf, "quantization_config": {"quant_method": "fp8", "online": True}}
    raise InputError(
        f"--quantization {quantization} on a 16-bit checkpoint is not modelled by the memory "
        f"model (online: {', '.join(ONLINE_FP8)}; give a quantized checkpoint's config)"
    )
