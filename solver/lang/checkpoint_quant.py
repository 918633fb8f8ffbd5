"""What a checkpoint's `quantization_config` says about the shape of each weight shard.

SGLang's quantization methods refuse, while the model is built, a weight whose per-rank
shard is not a whole number of quantization blocks (FP8 `weight_block_size`, NVFP4's
16-wide input groups). The layout rules need only a few numbers from the config: the
block (output rows `n`, input columns `k`), and which linear families the checkpoint
leaves unquantized. Everything else about the scheme is the memory model's business
(`meshsat.solver.memory.quant`); this module reads only what the shape rules need, so the
two can change independently. See docs/weight-shapes.md.

A scheme meshsat does not model is never a silent pass: `not_checked` says why, and a
warning rule shows it. A config that is malformed (a block that is not two positive
integers, a `quant_method` that is not a string) is an `InputError` naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.lang.limits import shown

#: Schemes whose per-rank shapes SGLang checks only through a block (FP8/INT8 block,
#: MXFP8's fixed [1, 32]): `quantization/fp8.py` Fp8LinearMethod / Fp8MoEMethod and
#: `quantization/blockwise_int8.py` raise on a shard that is not whole blocks.
_BLOCK_SCHEMES = ("fp8", "blockwise_int8", "mxfp8")
#: Schemes with no per-rank shape check of their own (per-tensor or per-channel scales, or
#: kernels that pad: `quantization/mxfp4.py` rounds the MoE intermediate size up).
_NO_SHAPE_CHECK = ("fbgemm_fp8", "mxfp4", "w8a8_fp8", "w8a8_int8", "modelopt_fp8", "fp8_e4m3")
#: Known schemes whose group-size alignment meshsat does not model yet: said, not passed.
_GROUP_SCHEMES = (
    "moe_wna16",
    "w4afp8",
    "auto-round",
    "quark",
)
#: Integer weight-only schemes whose row-parallel input shard must be whole groups:
#: `AWQLinearMethod` / `GPTQLinearMethod.create_weights` ("The input size is not aligned
#: with the quantized weight shape") and marlin's `verify_marlin_supports_shape`; AWQ's MoE
#: falls back to `MoeWNA16Method`, which halves the group down to 32 before it fails.
_INT_GROUP_SCHEMES = ("awq", "awq_marlin", "gptq", "gptq_marlin")
#: NVFP4's input group (ModelOptFp4LinearMethod.create_weights: "Unsupported model when in
#: features size is not multiple of 16").
NVFP4_GROUP = 16

_LAYER_INDEX = re.compile(r"\.\d+\.")
#: GatedDeltaNet's beta / alpha projections: separate in Qwen3.5 checkpoints, fused
#: (`in_proj_ba`) in Qwen3-Next ones and in SGLang (`packed_modules_mapping`).
_BA_NAMES = ("in_proj_ba", "in_proj_b", "in_proj_a")


@dataclass(frozen=True)
class CheckpointQuant:
    """The shape facts of one checkpoint's quantization (all None: unquantized)."""

    method: str | None = None
    block_n: int | None = None
    block_k: int | None = None
    #: Row-parallel input alignment that is not a block (NVFP4: 16).
    group_k: int | None = None
    #: AWQ / GPTQ `group_size` (None: per-channel, `-1`).
    group_size: int | None = None
    #: Why the shapes are not checked (a scheme meshsat does not model), else None.
    not_checked: str | None = None
    attention: bool = False
    linear_attention: bool = False
    linear_attn_ba: bool = False
    dense_mlp: bool = False
    experts: bool = False
    shared_experts: bool = False
    #: A compressed-tensors group of integer weights by group or channel with 16-bit
    #: activations (WNA16: Kimi-K2.5's INT4), the scheme whose MoE runs on SGLang's Marlin
    #: runner on CUDA before SM100.
    wna16: bool = False
    #: Those WNA16 weights are MXINT4 (4-bit symmetric static integer groups of 32,
    #: compressed-tensors' `_is_mxint4a16`): the FlashInfer TRT-LLM runner serves them.
    mxint4: bool = False
    #: Those WNA16 weights are ones the Triton WNA16 MoE takes (4-bit symmetric integer
    #: groups of 32 or 128, no activation order: `_is_wna16_triton_moe_supported`).
    wna16_triton: bool = False


def read_checkpoint_quant(hf: Mapping[str, Any]) -> CheckpointQuant:
    """The shape facts of `hf["quantization_config"]` (or the `text_config`'s)."""
    qc = hf.get("quantization_config")
    if qc is None and isinstance(hf.get("text_config"), Mapping):
        qc = hf["text_config"].get("quantization_config")
    if qc is None:
        return CheckpointQuant()
    if not isinstance(qc, Mapping):
        raise InputError(f"model config: quantization_config must be a mapping, got {shown(qc)}")
    method = qc.get("quant_method")
    if not isinstance(method, str) or not method:
        raise InputError(
            f"model config: quantization_config.quant_method must be a string, got {shown(method)}"
        )
    method = method.lower()
    # SGLang's FP8 / INT8-block / AWQ / GPTQ / ModelOpt readers match dotted module paths
    # (quantization/utils.py `_module_path_match`); only compressed-tensors reads `re:`
    # regular expressions, so elsewhere such a pattern exempts nothing.
    skipped = _skipped_families(qc, regex=method == "compressed-tensors")
    families = {
        f: f not in skipped
        for f in (
            "attention",
            "linear_attention",
            "linear_attn_ba",
            "dense_mlp",
            "experts",
            "shared",
        )
    }

    def facts(**kw: Any) -> CheckpointQuant:
        kw.setdefault("method", method)
        return CheckpointQuant(
            attention=families["attention"],
            linear_attention=families["linear_attention"],
            linear_attn_ba=families["linear_attn_ba"],
            dense_mlp=families["dense_mlp"],
            experts=families["experts"],
            shared_experts=families["shared"],
            **kw,
        )

    if method in _BLOCK_SCHEMES:
        if method == "mxfp8":
            return facts(block_n=1, block_k=32)
        block = qc.get("weight_block_size")
        if block is None:
            return facts()  # per-tensor FP8: no block to align
        n, k = _block(block, "quantization_config.weight_block_size")
        return facts(block_n=n, block_k=k)
    if method == "compressed-tensors":
        return _compressed_tensors(qc, facts)
    if method in ("modelopt", "modelopt_fp4", "modelopt_mixed"):
        algo = qc.get("quant_algo")
        inner = qc.get("quantization")
        if algo is None and isinstance(inner, Mapping):
            algo = inner.get("quant_algo")
        if algo is not None and not isinstance(algo, str):
            raise InputError(
                f"model config: quantization_config.quant_algo must be a string, got {shown(algo)}"
            )
        if method == "modelopt_fp4" or (algo or "").upper() == "NVFP4":
            return facts(method="modelopt_fp4", group_k=NVFP4_GROUP)
        if (algo or "").upper() in ("FP8", ""):
            return facts(method="modelopt_fp8")
        return facts(not_checked=f"unknown ModelOpt quant_algo {algo}")
    if method in _NO_SHAPE_CHECK:
        return facts()
    if method in _INT_GROUP_SCHEMES:
        return facts(group_size=_group_size(qc))
    if method in _GROUP_SCHEMES:
        return facts(
            not_checked=f"the group-size alignment of {method} checkpoints is not modelled"
        )
    return facts(not_checked=f"unknown quantization scheme {method}")


def _group_size(qc: Mapping[str, Any]) -> int | None:
    """AWQ spells it `q_group_size` in some exports (`AWQConfig.from_config` reads both);
    `-1` is one group per input row: nothing to align."""
    key = "q_group_size" if "q_group_size" in qc and "group_size" not in qc else "group_size"
    value = qc.get(key)
    if value == -1 and not isinstance(value, bool):
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InputError(
            f"model config: quantization_config.{key} must be a positive integer or -1, "
            f"got {shown(value)}"
        )
    return value


def _block(value: Any, key: str) -> tuple[int, int]:
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
    ):
        raise InputError(f"model config: {key} must be two positive integers, got {shown(value)}")
    return int(value[0]), int(value[1])


def is_wna16_group(group: Mapping[str, Any]) -> bool:
    """compressed-tensors' `_is_wNa16_group_channel`: integer weights by group or channel,
    activations left unquantized (`group["weights"]` a mapping)."""
    w = group["weights"]
    return (
        not group.get("input_activations")
        and str(w.get("type", "int")) == "int"
        and str(w.get("strategy", "tensor")) in ("group", "channel")
    )


def wna16_kernels(group: Mapping[str, Any]) -> dict[str, bool]:
    """Which MoE kernels besides Marlin take a WNA16 group's weights (0.5.18 to 0.5.23's
    `_is_mxint4a16` and `_is_wna16_triton_moe_supported`)."""
    w = group["weights"]
    int4_groups = (
        w.get("num_bits") == 4
        and str(w.get("type", "int")) == "int"
        and str(w.get("strategy")) == "group"
        and w.get("symmetric") is True
    )
    return {
        "mxint4": int4_groups and w.get("group_size") == 32 and not w.get("dynamic"),
        "wna16_triton": int4_groups and w.get("group_size") in (32, 128) and not w.get("actorder"),
    }


def _compressed_tensors(
    qc: Mapping[str, Any], facts: Callable[..., CheckpointQuant]
) -> CheckpointQuant:
    """compressed-tensors: the first config group's weight strategy decides (SGLang picks a
    scheme per layer from its group; the catalogue's checkpoints use one group)."""
    groups = qc.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise InputError(
            "model config: quantization_config.config_groups must be a non-empty mapping, "
            f"got {shown(groups)}"
        )
    for name, group in groups.items():
        key = f"quantization_config.config_groups.{name}.weights"
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if not isinstance(weights, Mapping):
            raise InputError(f"model config: {key} must be a mapping, got {shown(weights)}")
    wna16_groups = [g for g in groups.values() if is_wna16_group(g)]
    wna16 = bool(wna16_groups)
    kernels = wna16_kernels(wna16_groups[0]) if wna16_groups else {}
    for name, group in groups.items():
        weights = group["weights"]
        strategy = weights.get("strategy")
        if strategy == "block":
            key = f"quantization_config.config_groups.{name}.weights.block_structure"
            n, k = _block(weights.get("block_structure"), key)
            return facts(block_n=n, block_k=k, wna16=wna16, **kernels)
        if strategy in ("tensor", "channel", "token"):
            continue
        return facts(
            not_checked=f"the {strategy} strategy of compressed-tensors is not modelled",
            wna16=wna16,
            **kernels,
        )
    return facts(wna16=wna16, **kernels)


def _skipped_families(qc: Mapping[str, Any], *, regex: bool) -> set[str]:
    """The linear families the checkpoint leaves unquantized in every layer.

    Patterns naming one layer (`model.layers.3.mlp`) exempt that layer only, so the family
    is still quantized elsewhere and SGLang still checks it: only layer-generic patterns
    (no index, or a wildcard) exempt a family.
    """
    skipped: set[str] = set()
    for key in ("modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules"):
        patterns = qc.get(key)
        if patterns is None:
            continue
        if not isinstance(patterns, list | tuple) or not all(isinstance(p, str) for p in patterns):
            raise InputError(
                f"model config: quantization_config.{key} must be a list of strings, "
                f"got {shown(patterns)}"
            )
        for raw in patterns:
            if raw.startswith("re:") and not regex:
                continue
            p = raw.removeprefix("re:").rstrip("$").removesuffix(".*")
            if p.rsplit(".", 1)[-1] in _BA_NAMES:
                # Published hybrids list in_proj_b / in_proj_a once per linear-attention
                # layer; the fused in_proj_ba cannot be whole blocks at any width, so a
                # checkpoint naming it anywhere is read as leaving it unquantized.
                skipped.add("linear_attn_ba")
                continue
            if _LAYER_INDEX.search(p) and "*" not in p:
                continue
            tail = p.rsplit(".", 1)[-1].lstrip("*")
            if tail in ("self_attn", "attn", "attention", "q_b_proj", "q_proj"):
                skipped.add("attention")
            elif tail == "linear_attn":
                skipped.update(("linear_attention", "linear_attn_ba"))
            elif tail in ("in_proj_qkvz", "in_proj_qkv"):
                skipped.add("linear_attention")
            elif tail in ("mlp", "feed_forward"):
                skipped.update(("dense_mlp", "experts", "shared"))
            elif tail in ("shared_experts", "shared_expert"):
                skipped.add("shared")
            elif tail == "experts":
                skipped.add("experts")
    return skipped
