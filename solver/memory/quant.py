"""Bytes per weight for each quantization scheme a `quantization_config` can name.

Why per component: quantized checkpoints leave some modules in 16 bit (embeddings, the
LM head, routers, norms always; attention too in gpt-oss's MXFP4 release and in many FP4
releases). The memory model therefore asks, per component, "how many bytes does one
weight of a linear layer here cost, scales included". Scales are charged at the density
the scheme stores them: one float32 per 128×128 block for DeepSeek-style FP8, one FP8 per
16 values for NVFP4, one E8M0 byte per 32 values for MXFP4, one fp16 scale and a 4-bit
zero per group for AWQ/GPTQ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from meshsat.solver.errors import InputError

#: Bytes of one element for `--kv-cache-dtype` and for unquantized weights.
DTYPE_BYTES: Mapping[str, float] = {
    "bfloat16": 2.0,
    "bf16": 2.0,
    "float16": 2.0,
    "fp16": 2.0,
    "half": 2.0,
    "float32": 4.0,
    "fp32": 4.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "fp8": 1.0,
    "fp4_e2m1": 0.5,
}

#: The `quant_method` values modelled, for the error message on any other.
MODELLED_METHODS: tuple[str, ...] = (
    "fp8",
    "modelopt",
    "modelopt_fp4",
    "modelopt_fp8",
    "mxfp4",
    "awq",
    "gptq",
    "fbgemm_fp8",
)


@dataclass(frozen=True)
class Quant:
    """Bytes per weight of a linear layer in each component, scales included."""

    name: str
    attention: float = 2.0
    dense_mlp: float = 2.0
    experts: float = 2.0
    #: Embeddings, LM head, routers and norms: never quantized by the modelled schemes.
    unquantized: float = 2.0


BF16 = Quant("bf16")


def _ignored(qc: Mapping[str, Any]) -> tuple[bool, bool]:
    """(attention kept in 16 bit, dense/shared MLP kept in 16 bit) from the skip lists."""
    names: list[str] = []
    for key in ("modules_to_not_convert", "ignore", "exclude_modules", "ignored_layers"):
        v = qc.get(key)
        if isinstance(v, Sequence) and not isinstance(v, str):
            names.extend(str(x) for x in v)
    attn = any("attn" in n or "attention" in n for n in names)
    mlp = any(
        ("mlp" in n and "experts" not in n) or "shared_expert" in n
        for n in names
        if "gate" not in n.split(".")[-1:]
    )
    return attn, mlp


def _int4(qc: Mapping[str, Any], method: str) -> float:
    bits = qc.get("bits", qc.get("w_bit", 4))
    if bits != 4:
        raise InputError(f"quantization {method} with {bits} bits is not modelled (only 4-bit)")
    group = qc.get("group_size", qc.get("q_group_size", 128))
    if not isinstance(group, int) or group == 0:
        raise InputError(f"quantization_config.group_size must be an integer, got {group!r}")
    if group < 0:  # per-channel: one scale per output row, negligible per weight
        return 0.5
    # 4-bit weight + fp16 scale + 4-bit zero point per group.
    return 0.5 + (2.0 + 0.5) / group


def quant_from_config(hf: Mapping[str, Any]) -> Quant:
    """The `Quant` of a Hugging Face config, from `quantization_config` and `torch_dtype`.

    A `quant_method` that is not modelled raises `InputError` rather than guessing.
    """
    dtype = hf.get("torch_dtype") or hf.get("dtype") or "bfloat16"
    base = DTYPE_BYTES.get(str(dtype), 2.0)
    if base > 2.0:  # float32 checkpoints are served in bf16 by SGLang's default dtype
        base = 2.0
    qc = hf.get("quantization_config")
    if not qc:
        return Quant(str(dtype), base, base, base, base)
    if not isinstance(qc, Mapping):
        raise InputError("quantization_config must be a JSON object")
    method = str(qc.get("quant_method", "")).lower()
    attn16, mlp16 = _ignored(qc)
    algo = str(qc.get("quant_algo", "")).upper()
    if method == "modelopt" and algo:
        method = "modelopt_fp4" if "FP4" in algo else "modelopt_fp8" if "FP8" in algo else method
    per_weight: float
    if method in ("fp8", "fbgemm_fp8", "modelopt_fp8"):
        block = qc.get("weight_block_size")
        if isinstance(block, Sequence) and len(block) == 2:
            per_weight = 1.0 + 4.0 / (int(block[0]) * int(block[1]))
        else:  # per-tensor or per-channel scales: negligible per weight
            per_weight = 1.0
        name = "fp8"
    elif method == "modelopt_fp4":
        per_weight = 0.5 + 1.0 / 16  # FP4 values + one FP8 scale per 16
        name = "nvfp4"
    elif method == "mxfp4":
        per_weight = 0.5 + 1.0 / 32  # FP4 values + one E8M0 scale per 32
        name = "mxfp4"
    elif method in ("awq", "gptq"):
        per_weight = _int4(qc, method)
        name = f"int4-{method}"
    else:
        known = ", ".join(MODELLED_METHODS)
        raise InputError(
            f"quantization_config.quant_method {method or '(missing)'!r} is not modelled "
            f"(modelled: {known})"
        )
    if method == "mxfp4" and not (attn16 or mlp16):
        # gpt-oss's MXFP4 release quantizes only the experts; its skip list names the rest.
        attn16 = mlp16 = True
    return Quant(
        name,
        attention=base if attn16 else per_weight,
        dense_mlp=base if mlp16 else per_weight,
        experts=per_weight,
        unquantized=base,
    )


def kv_dtype_bytes(kv_cache_dtype: str | None, model_dtype_bytes: float = 2.0) -> float:
    """Bytes per KV element for SGLang's `--kv-cache-dtype` (`auto` follows the model)."""
    if kv_cache_dtype in (None, "auto"):
        return model_dtype_bytes
    try:
        return DTYPE_BYTES[kv_cache_dtype]
    except KeyError:
        raise InputError(
            f"unknown kv_cache_dtype {kv_cache_dtype!r}; known: auto, " + ", ".join(DTYPE_BYTES)
        ) from None
