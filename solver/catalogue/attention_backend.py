"""Attention back-ends that run only on some GPU classes (handle_attention_backend_compatibility,
0.5.23), and the quantization methods the model loader knows.

Why here: these are checked in SGLang's argument resolution, before the parallel handlers,
so a layout with such a back-end on the wrong machine stops there, and its first error is
this one. The GPU class is `gpu_sm` (unknown: the rule assumes it holds) and `platform`.
"""

from __future__ import annotations

from meshsat.solver.lang.expr import Expr, is_set, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

SRC = "handle_attention_backend_compatibility"


def _on_sm(*sms: int) -> Expr:
    """A CUDA machine of one of these classes (or of a class meshsat was not told)."""
    return (F.platform == "cuda") & (~is_set(F.gpu_sm) | one_of(F.gpu_sm, *sms))


RULES: tuple[Rule, ...] = (
    # tokenspeed_mla decodes with CuteDSL MLA (its prefill back-end fill), so the same check.
    Rule(
        "ATTN-CUTEDSL-MLA-SM100",
        one_of(F.attention_backend, "cutedsl_mla", "tokenspeed_mla"),
        _on_sm(100, 103),
        "CuteDSL MLA backend is only supported on Blackwell GPUs (SM100). Please use a "
        "different backend.",
        SRC,
    ),
    Rule(
        "ATTN-TRTLLM-MLA-BLACKWELL",
        F.attention_backend == "trtllm_mla",
        _on_sm(100, 103, 120, 121),
        "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x). Please use a "
        "different backend.",
        SRC,
    ),
    Rule(
        "ATTN-TRTLLM-MHA-GPU",
        F.attention_backend == "trtllm_mha",
        _on_sm(90, 100, 103, 120, 121),
        "TRTLLM MHA backend for prefill requires Hopper (SM90), Blackwell (SM100), or SM120 "
        "GPUs. Please use a different prefill backend.",
        SRC,
    ),
    Rule(
        "ATTN-TRTLLM-MHA-CP-SM100",
        (F.attention_backend == "trtllm_mha") & (F.attn_cp_size > 1),
        _on_sm(100, 103),
        "Prefill context parallelism with the TRTLLM MHA prefill backend requires SM100 "
        "(trtllm-gen context kernel): the SM90/SM120 fmha_v2 prefill path does not implement "
        "CP shard masking.",
        SRC,
    ),
)

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


def quant_known(also: tuple[str, ...] = ()) -> Rule:
    """The loader's check of --quantization; `also`: methods a release's loader knows
    beyond 0.5.23's on every platform (0.5.19 still has GPTQ)."""
    return Rule(
        "QUANT-METHOD",
        is_set(F.quantization),
        one_of(F.quantization, *_BASE_QUANT, *also)
        | ((F.quantization == "mxfp4") & one_of(F.platform, "cuda", "hip"))
        | ((F.quantization == "gptq") & (F.platform == "npu")),
        "Unknown quantization method: {quantization} (this platform's SGLang loader does not "
        "know it).",
        # Raised while the model config is built, in the first step that reads it.
        "apply_inkling_prefill_cuda_graph_default",
    )


#: The `--quantization` values `ModelConfig._verify_quantization` takes for a
#: compressed-tensors checkpoint (0.5.18 to 0.5.23): its own name, the methods it lists as
#: compatible (`w8a8_int8`, `w8a8_fp8`, `auto-round-int8`), online requantization
#: (`quark_mxfp4`) and Humming's override; any other is refused while the arguments are
#: resolved (each release's build of Kimi-K2.5 INT4 with --quantization mxfp8 or fp8).
COMPRESSED_TENSORS_ARGS = (
    "compressed-tensors", "w8a8_int8", "w8a8_fp8", "auto-round-int8", "quark_mxfp4", "humming",
)  # fmt: skip
QUANT_CHECKPOINT = Rule(
    "QUANT-CHECKPOINT-MISMATCH",
    (F.quant_method == "compressed-tensors") & is_set(F.quantization),
    one_of(F.quantization, *COMPRESSED_TENSORS_ARGS),
    "Quantization method specified in the model config (compressed-tensors) does not match "
    "the quantization method specified in the `quantization` argument ({quantization}).",
    # Raised while the model config is built, in the first step that reads it.
    "apply_inkling_prefill_cuda_graph_default",
    hint="drop --quantization: the checkpoint's own scheme is used",
)


#: _moe_runner_backend_quant_constraints (handle_moe_kernel_config): NVIDIA Blackwell only.
QUANT_NVFP4_ONLINE = Rule(
    "QUANT-NVFP4-ONLINE-SM100",
    F.quantization == "nvfp4_online",
    _on_sm(100, 103),
    "--quantization nvfp4_online is supported only on NVIDIA Blackwell SM100/SM103 GPUs.",
    "handle_moe_kernel_config",
)
