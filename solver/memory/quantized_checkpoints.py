"""Quantized releases of catalogued models: the same architecture, another checkpoint.

Why separate: a quantized checkpoint differs from its base model only in
`quantization_config` (which decides whether a layout's weight shards load at all:
docs/weight-shapes.md), so each entry names its base repository and the config it adds.
`quantization_config` values are the public `config.json` of each repository on
huggingface.co (https://huggingface.co/<repo id>/blob/main/config.json); the published
parameter counts are the base model's.
"""

from __future__ import annotations

from typing import Any

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
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "float", "strategy": "token"},
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
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8": (
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
        {"quantization_config": _FBGEMM_FP8},
    ),
}
