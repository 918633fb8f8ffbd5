"""The quantization a release's model loader takes: `--quantization` (its registry), the
checkpoint's own method, and the two side by side (`ModelConfig._verify_quantization`).

Why one module: SGLang decides all three in one step, while the model config is built
(before any parallel handler), so a layout with a refused pair stops there. The tables
below are that function's in 0.5.18, 0.5.19 and 0.5.23 (the same in all three), proven
pair by pair against each release's own function on 127 checkpoints x every choice of
its `--quantization` (fidelity/quant_args.py -> tests/fixtures/quant_args/;
tests/test_quant_args.py replays them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import get_args

from meshsat.solver.lang.config import Quantization
from meshsat.solver.lang.expr import Expr, is_set, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

#: Raised while the model config is built, in the first step that reads it.
SRC = "apply_inkling_prefill_cuda_graph_default"

#: QUANTIZATION_METHODS of 0.5.23's loader (sglang/srt/layers/quantization): the base set,
#: mxfp4 on CUDA and ROCm, gptq on Ascend. The flag accepts more (mlx_q4/q8 on Apple only).
_BASE_QUANT = (
    "fp8",
    "mxfp8",
    "modelopt",
    "modelopt_fp8",
    "modelopt_fp4",
    "nvfp4_online",
    "modelopt_mixed",
    "w8a8_int8",
    "w8a8_fp8",
    "awq",
    "awq_marlin",
    "bitsandbytes",
    "gguf",
    "gptq_marlin",
    "moe_wna16",
    "compressed-tensors",
    "w4afp8",
    "petit_nvfp4",
    "quark",
    "quark_mxfp4",
    "auto-round",
    "auto-round-int8",
    "modelslim",
    "quark_int4fp8_moe",
    "humming",
    "mxfp_w4a8",
    "unquant",
)


#: REQUANTIZATION_METHODS: online requantization, which `_verify_quantization` takes over
#: any checkpoint; the loader then takes only some sources (QUANT_REQUANT_SOURCE).
REQUANTIZATION = ("quark_mxfp4",)
_CT = ("compressed-tensors", "compressed_tensors")
#: compatible_quantization_methods: a `--quantization` and the checkpoint methods it may
#: sit on (`minimax_m3_nvfp4`, 0.5.23's, is no choice of the flag).
COMPATIBLE: Mapping[str, tuple[str, ...]] = {
    "modelopt_fp8": ("modelopt",),
    "modelopt_fp4": ("modelopt", "fp8"),
    "modelopt_mixed": ("modelopt",),
    "nvfp4_online": ("fp8", "modelopt_fp8"),
    "petit_nvfp4": ("modelopt",),
    "w8a8_int8": _CT,
    "w8a8_fp8": _CT,
    "auto-round-int8": _CT,
}
#: Checkpoints the ModelOpt overrides claim whatever `--quantization` says (SGLang then
#: serves the checkpoint's own method); only an online method is left to the checks
#: (`_modelopt_override_quantization_method`; the mixed-precision override claims all).
MODELOPT_CLAIMED = ("modelopt_fp8", "modelopt_fp4", "modelopt_mixed")
#: The Marlin and MoE-WNA16 conversions of GPTQ and AWQ checkpoints (their
#: `override_quantization_method`, on a GPU Marlin supports; MoE-WNA16 also needs
#: `desc_act` off, a fact meshsat does not read).
CONVERSIONS: Mapping[str, tuple[str, ...]] = {
    "gptq": ("gptq_marlin", "marlin", "moe_wna16"),
    "awq": ("awq_marlin", "marlin", "moe_wna16"),
}
#: Checkpoint methods the releases load: the registry's, GPTQ through its Marlin
#: conversion (0.5.23 has no plain GPTQ on CUDA), mxfp4 on CUDA and ROCm. FBGEMM FP8
#: (Llama 4 Maverick's own FP8 checkpoint) is in none since 0.5.18.
CHECKPOINT_METHODS = (*(m for m in _BASE_QUANT if m != "unquant"), "gptq", "compressed_tensors")

_CHOICES: tuple[str, ...] = get_args(Quantization)


def accepted(method: str) -> tuple[str, ...]:
    """The `--quantization` choices `_verify_quantization` takes beside a checkpoint of
    `method`: its own name, those listed as compatible with it, online requantization,
    Humming's override (not on MXFP4: gpt-oss's loader is its own), and the conversions."""
    if method in MODELOPT_CLAIMED:
        # nvfp4_online is left to the compatibility table, which takes it on FP8 only.
        return tuple(q for q in _CHOICES if q != "nvfp4_online" or method != "modelopt_fp4")
    ok = {method, *REQUANTIZATION, *CONVERSIONS.get(method, ())}
    ok |= {q for q, on in COMPATIBLE.items() if method in on}
    if method != "mxfp4":
        ok.add("humming")
    return tuple(q for q in _CHOICES if q in ok)


def claimed() -> Expr:
    """The checkpoint's override replaces `--quantization` with its own method before the
    registry is asked: ModelOpt FP8 and FP4 exports claim any argument but an online one
    (`_modelopt_override_quantization_method`), mixed precision any but requantization
    (its override asks nothing), and GPTQ / AWQ turn `marlin` into their Marlin method."""
    online = one_of(F.quantization, *REQUANTIZATION)
    return (
        (one_of(F.quant_method, *MODELOPT_CLAIMED[:2]) & ~online
         & (F.quantization != "nvfp4_online"))
        | ((F.quant_method == "modelopt_mixed") & ~online)
        | (one_of(F.quant_method, *CONVERSIONS) & (F.quantization == "marlin"))
    )  # fmt: skip


def served(method: str | None, quantization: str | None) -> str | None:
    """The method SGLang's loader serves when a checkpoint's override replaces the typed
    `--quantization` (`claimed`): a ModelOpt export's own, or GPTQ / AWQ's Marlin method
    for `marlin`; None where it serves what was typed (or the pair is refused)."""
    if method is None or quantization in (None, "unquant", *REQUANTIZATION):
        return None
    if method in MODELOPT_CLAIMED and quantization != method:
        if quantization == "nvfp4_online" and method != "modelopt_mixed":
            return None
        return method
    if method in CONVERSIONS and quantization == "marlin":
        return f"{method}_marlin"
    return None


#: The checkpoint methods whose pairs are modelled: the registry's, MXFP4, and FBGEMM FP8
#: (it takes only Humming and online requantization); any other is not checked.
MODELLED: tuple[str, ...] = tuple(dict.fromkeys((*CHECKPOINT_METHODS, "mxfp4", "fbgemm_fp8")))


def _pair_ok() -> Expr:
    """Each modelled checkpoint method with the choices it takes, guard first: a refusal
    is worded by the one alternative whose guard holds (`render._Shower.why_false`)."""
    out = (F.quant_method == MODELLED[0]) & one_of(F.quantization, *accepted(MODELLED[0]))
    for m in MODELLED[1:]:
        out = out | ((F.quant_method == m) & one_of(F.quantization, *accepted(m)))
    return out


QUANT_CHECKPOINT = Rule(
    "QUANT-CHECKPOINT-MISMATCH",
    one_of(F.quant_method, *MODELLED) & is_set(F.quantization) & (F.quantization != "unquant"),
    _pair_ok(),
    "Quantization method specified in the model config ({quant_method}) does not match "
    "the quantization method specified in the `quantization` argument ({quantization}).",
    SRC,
    hint="drop --quantization: the checkpoint's own scheme is used",
)

QUANT_CHECKPOINT_METHOD = Rule(
    "QUANT-CHECKPOINT-METHOD",
    is_set(F.quant_method) & (~is_set(F.quantization) | (F.quantization == "unquant")),
    one_of(F.quant_method, *CHECKPOINT_METHODS)
    | ((F.quant_method == "mxfp4") & one_of(F.platform, "cuda", "hip")),
    "Unknown quantization method: {quant_method} (the checkpoint's; this release's loader "
    "does not know it).",
    SRC,
    hint="a checkpoint in a format this release loads (FP8, ModelOpt, compressed-tensors)",
)


#: Raised when the model loader builds the quantization config, after the arguments.
LOAD_SRC = "model_loader/weight_utils.py get_quant_config"

QUANT_REQUANT_SOURCE = Rule(
    "QUANT-REQUANT-SOURCE",
    one_of(F.quantization, *REQUANTIZATION) & is_set(F.quant_method),
    F.quant_mxfp4_requantizable,
    "Requantization into {quantization} is not supported, from the original "
    "quant_method={quant_method} (the loader requantizes NVFP4, FP8 with dynamic "
    "activations and ModelOpt NVFP4/FP8 mixes only).",
    LOAD_SRC,
    hint="drop --quantization: the checkpoint's own scheme is used",
)

#: The loader's rules, which read the quantization, the checkpoint's facts and the
#: platform, never a width (so a refusal holds for every layout alike).
QUANT_METHOD = "QUANT-METHOD"
LOADER_RULES = (
    QUANT_METHOD,
    QUANT_CHECKPOINT.id,
    QUANT_CHECKPOINT_METHOD.id,
    QUANT_REQUANT_SOURCE.id,
)


def quant_known(also: tuple[str, ...] = ()) -> Rule:
    """The loader's check of --quantization; `also`: methods a release's loader knows
    beyond 0.5.23's on every platform (0.5.19 still has GPTQ). It reads the method the
    checkpoint's overrides leave (`claimed`), not the argument as typed."""
    return Rule(
        QUANT_METHOD,
        is_set(F.quantization) & ~claimed(),
        one_of(F.quantization, *_BASE_QUANT, *also)
        | ((F.quantization == "mxfp4") & one_of(F.platform, "cuda", "hip"))
        | ((F.quantization == "gptq") & (F.platform == "npu")),
        "Unknown quantization method: {quantization} (this platform's SGLang loader does not "
        "know it).",
        SRC,
    )
