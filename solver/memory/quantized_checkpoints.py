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
