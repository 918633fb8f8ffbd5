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

from meshsat.solver.catalogue.quantization import MODELLED, accepted
from meshsat.solver.errors import InputError
from meshsat.solver.lang.checkpoint_quant import read_checkpoint_quant

_FP8_BLOCK = {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [128, 128],
}


def _glm4_moe_fp8(layers: int, first_dense: int) -> dict[str, Any]:
    """zai-org's GLM-4.5 FP8 release: compressed-tensors' FP8-dynamic scheme, per channel.

    Read from the checkpoint's own config (zai-org/GLM-4.5-FP8 as loaded by transformers
    5.7.0, dumped in gogongxt/python@cbff706dc959707a9944e38e8164783122dfa32a
    scripts/models/glm_4.5_fp8.md): `quant_method: compressed-tensors`, `format:
    float-quantized`, one group targeting `Linear` with `strategy: channel` FP8 weights
    (`dynamic: false`, `block_structure: null`; the same dump lists every `weight_scale` as
    `[rows, 1]`) and dynamic per-token FP8 activations. So no block: no TP width is refused
    for its shards. Its `ignore` spells out, per layer, the norms, the attention biases, the
    routers (`mlp.gate`, layers `first_k_dense_replace` to the MTP layer) and the MTP layer's
    `eh_proj` and `embed_tokens`, plus `model.embed_tokens` and `lm_head`; the linear
    entries are kept here (norms and biases are not linears). The MTP layer's
    `shared_head.head` is quantized there (an FP8 weight with a per-row scale).
    """
    mtp = layers  # the nextn layer's index: `num_hidden_layers`
    return {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {
                    "num_bits": 8,
                    "type": "float",
                    "strategy": "channel",
                    "dynamic": False,
                    "symmetric": True,
                    "group_size": None,
                    "block_structure": None,
                    "observer": "minmax",
                },
                "input_activations": {
                    "num_bits": 8,
                    "type": "float",
                    "strategy": "token",
                    "dynamic": True,
                    "symmetric": True,
                },
            }
        },
        "ignore": [
            "lm_head",
            "model.embed_tokens",
            *(f"model.layers.{i}.mlp.gate" for i in range(first_dense, mtp + 1)),
            f"model.layers.{mtp}.eh_proj",
            f"model.layers.{mtp}.embed_tokens",
        ],
    }


#: GLM-4.5 (92 layers, 3 dense) as read. GLM-4.6-FP8 shares its architecture and
#: GLM-4.5-Air-FP8 (46 layers, 1 dense) the family's recipe; neither repository's own
#: config text was found (searched the code, docs, pages and issues corpora by repository
#: name and by `ignore` entries only they would hold), so both assume GLM-4.5-FP8's scheme.
_GLM45_FP8 = _glm4_moe_fp8(92, 3)
_GLM46_FP8 = _glm4_moe_fp8(92, 3)
_GLM45_AIR_FP8 = _glm4_moe_fp8(46, 1)

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
#: Qwen3-Next-80B-A3B-Instruct-FP8's `quantization_config`, read from the checkpoint's own
#: config, as transformers 5.7.0 loads it (dumped in gogongxt/python@
#: d881ab7320b88d41b6239eaaab141d3a4e56dd5b scripts/qwen3_next_80b_a3b_instruct_fp8.md;
#: huggingface.co itself cannot be reached from here): fine-grained FP8, block 128 x 128, dynamic
#: activations, e4m3. Its `modules_to_not_convert` spells out, per layer, the norms, the
#: GatedDeltaNet's `A_log`, `conv1d`, `dt_bias`, `norm` and fused `in_proj_ba` (the 36
#: linear-attention layers only), every layer's router `mlp.gate` and `mlp.shared_expert_gate`,
#: the full-attention layers' `q_norm` / `k_norm`, and the MTP module's `fc`, router, shared
#: expert gate and norms, plus `lm_head`; the embedding is not listed. The linear entries are
#: kept here. Everything else is FP8: `in_proj_qkvz`, `out_proj`, the attention projections,
#: the experts and the shared expert (512 wide). The Thinking-FP8 repository's text was not
#: found; its model card describes the same quantization, so it is assumed equal.
_QWEN3_NEXT_LAYERS = 48
_QWEN3_NEXT_FP8 = {
    **_FP8_BLOCK,
    "modules_to_not_convert": [
        "lm_head",
        *(
            f"model.layers.{i}.linear_attn.in_proj_ba"
            for i in range(_QWEN3_NEXT_LAYERS)
            if i % 4 != 3  # `full_attention_interval` 4: layers 3, 7, ... are full attention
        ),
        *(
            f"model.layers.{i}.mlp.{m}"
            for i in range(_QWEN3_NEXT_LAYERS)
            for m in ("gate", "shared_expert_gate")
        ),
        "mtp.fc",
        "mtp.layers.0.mlp.gate",
        "mtp.layers.0.mlp.shared_expert_gate",
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
#: as the ModelOpt config): NVFP4 group 16, every attention linear of every layer excluded,
#: and an FP8 KV cache (`kv_cache_quant_algo`: what `--kv-cache-dtype auto` becomes).
_GLM5_NVFP4 = {
    "quant_method": "modelopt",
    "quant_algo": "NVFP4",
    "kv_cache_quant_algo": "FP8",
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
#: tower and the head excluded (listed per layer there; by family here); an FP8 KV cache
#: (the `kv_cache_scheme` of 8-bit floats its config.json states, which SGLang reads as
#: `kv_cache_quant_algo` FP8, the value its `hf_quant_config.json` spells).
_QWEN35_NVFP4 = {
    "quant_method": "modelopt",
    "quant_algo": "NVFP4",
    "kv_cache_quant_algo": "FP8",
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
#: _config.json): ModelOpt per-tensor FP8, the head excluded, an FP8 KV cache.
_MODELOPT_FP8 = {
    "quant_method": "modelopt",
    "quant_algo": "FP8",
    "kv_cache_quant_algo": "FP8",
    "exclude_modules": ["lm_head"],
}
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
    "zai-org/GLM-4.5-FP8": ("zai-org/GLM-4.5", {"quantization_config": _GLM45_FP8}),
    "zai-org/GLM-4.6-FP8": ("zai-org/GLM-4.6", {"quantization_config": _GLM46_FP8}),
    "zai-org/GLM-4.5-Air-FP8": ("zai-org/GLM-4.5-Air", {"quantization_config": _GLM45_AIR_FP8}),
    "nvidia/Llama-3.1-405B-Instruct-FP4": (
        "meta-llama/Llama-3.1-405B-Instruct",
        {"quantization_config": _NVFP4},
    ),
    "nvidia/Llama-3.1-8B-Instruct-FP4": (
        "meta-llama/Llama-3.1-8B-Instruct",
        {"quantization_config": _NVFP4},
    ),
    "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8": (
        "Qwen/Qwen3-Next-80B-A3B-Instruct",
        {"quantization_config": _QWEN3_NEXT_FP8},
    ),
    "Qwen/Qwen3-Next-80B-A3B-Thinking-FP8": (
        "Qwen/Qwen3-Next-80B-A3B-Thinking",
        {"quantization_config": _QWEN3_NEXT_FP8},
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


def online_quantized(hf: Mapping[str, Any]) -> bool:
    """Whether `hf` is a 16-bit checkpoint that `with_quantization_flag` marked as quantized
    while it loads (per-tensor FP8 scales, not a checkpoint's blocks: the estimator's kernels
    differ, the memory price does not)."""
    qc = hf.get("quantization_config")
    return isinstance(qc, Mapping) and qc.get("online") is True


def with_quantization_flag(hf: Mapping[str, Any], quantization: str | None) -> Mapping[str, Any]:
    """The config the weights are priced from when `--quantization` is given.

    A checkpoint with its own `quantization_config` keeps it: SGLang loads what the
    checkpoint stores (a ModelOpt export serves its own method whatever the flag), and
    `ModelConfig._verify_quantization` refuses a flag it cannot reconcile with it (the
    rules' table, `catalogue.quantization.accepted`): that is an `InputError` here too, so
    every command that prices memory refuses it alike. A 16-bit checkpoint with `--quantization
    fp8` is quantized online, so its linears are priced as per-tensor FP8. Other online
    methods are not modelled.
    """
    if not quantization or quantization == "unquant":  # SGLang resolves unquant to none
        return hf
    own = hf.get("quantization_config")
    if own:
        # The method as SGLang reads it (a ModelOpt `quant_algo` names FP8, NVFP4, ...).
        method = read_checkpoint_quant(hf).method or ""
        ok = accepted(method) if method in MODELLED else (method, quantization)
        if method and quantization not in ok:
            raise InputError(
                f"--quantization {quantization} conflicts with the checkpoint's quant_method "
                f"{method}: SGLang refuses to load it (ModelConfig._verify_quantization); drop "
                f"the flag or give one it accepts there: {', '.join(ok)}"
            )
        return hf
    if quantization in ONLINE_FP8:
        return {**hf, "quantization_config": {"quant_method": "fp8", "online": True}}
    raise InputError(
        f"--quantization {quantization} on a 16-bit checkpoint is not modelled by the memory "
        f"model (online: {', '.join(ONLINE_FP8)}; give a quantized checkpoint's config)"
    )
