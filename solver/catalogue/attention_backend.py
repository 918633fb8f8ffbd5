"""Attention back-ends that run only on some GPU classes or KV-cache dtypes
(handle_attention_backend_compatibility, 0.5.18 to 0.5.23), and the quantization that needs
one (nvfp4_online).

Why here: these are checked in SGLang's argument resolution, before the parallel handlers,
so a layout with such a back-end on the wrong machine stops there, and its first error is
this one. The GPU class is `gpu_sm` (unknown: the rule assumes it holds) and `platform`.

Three fields name a back-end: `--attention-backend` and the split `--prefill-attention-backend`
/ `--decode-attention-backend`. Each check reads the ones SGLang reads: the MLA checks
(`_mla_kv_cache_dtype_checks`, `_cutedsl_prefill_backend_fill`) the base and decode fields as
given (after R-ATTN-BACKEND), the TRTLLM MHA checks the resolved pair (`attention_backends_of`:
a split field left out is the base back-end's), named `prefill_backend` / `decode_backend`
here. An unset base back-end is the GPU's and model's default, which R-ATTN-BACKEND fills in
where meshsat knows both (`attention_default`); where it does not (no `gpu_sm`, a model with
its own override) it stays unset and reads as None in the pair.
"""

from __future__ import annotations

from meshsat.solver.lang.expr import FALSE, Expr, is_set, ite, named, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.model_spec import DSA_ARCHITECTURES, MLA_ARCHITECTURES
from meshsat.solver.lang.rule import Rule

SRC = "handle_attention_backend_compatibility"

_base, _prefill, _decode = (
    F.attention_backend,
    F.prefill_attention_backend,
    F.decode_attention_backend,
)
#: attention_backends_of(): each phase's back-end, the base one where its own is unset.
PREFILL = named("prefill_backend", ite(is_set(_prefill), _prefill, _base))
DECODE = named("decode_backend", ite(is_set(_decode), _decode, _base))


def _on_sm(*sms: int) -> Expr:
    """A CUDA machine of one of these classes (or of a class meshsat was not told)."""
    return (F.platform == "cuda") & (~is_set(F.gpu_sm) | one_of(F.gpu_sm, *sms))


def _base_or_decode(backend: str) -> Expr:
    """`view.attention_backend == X or view.decode_attention_backend == X`."""
    return (_base == backend) | (_decode == backend)


#: An MLA model by its architecture, or one with DeepSeek's sparse attention: what the
#: rules that ask "an MLA model" without reading its config test.
MLA_MODEL = one_of(F.architecture, *MLA_ARCHITECTURES) | F.is_deepseek_dsa
#: use_mla_backend(): an MLA (or DeepSeek sparse-attention) model, a config that gives MLA
#: head widths included.
USES_MLA = (
    one_of(F.architecture, *MLA_ARCHITECTURES, *DSA_ARCHITECTURES)
    | F.is_deepseek_dsa
    | is_set(F.mla_q_head_dim)
)
_BLACKWELL = (100, 103, 120, 121)
_TRTLLM_MLA = _base_or_decode("trtllm_mla")
_CUTEDSL = _base_or_decode("cutedsl_mla")
_TOKENSPEED = _base_or_decode("tokenspeed_mla")
_TRTLLM_MHA_GPUS = (90, 100, 103, 120, 121)


def trtllm_mla_kv(dtypes: tuple[str, ...], words: str) -> Rule:
    """_mla_kv_cache_dtype_checks' dtype list (0.5.18/0.5.19 also take fp4_e2m1)."""
    return Rule(
        "ATTN-TRTLLM-MLA-KV",
        _TRTLLM_MLA,
        one_of(F.kv_cache_dtype, *dtypes),
        f"TensorRT-LLM MLA backend only supports kv-cache-dtype of {words}.",
        SRC,
        hint="--kv-cache-dtype fp8_e4m3 (or auto)",
    )


def trtllm_mha_cp(legacy: bool) -> Rule:
    """0.5.19 also asks the legacy --enable-prefill-context-parallel (0.5.18: no check)."""
    cp = F.attn_cp_size > 1
    return Rule(
        "ATTN-TRTLLM-MHA-CP-SM100",
        (PREFILL == "trtllm_mha") & ((cp | F.enable_prefill_context_parallel) if legacy else cp),
        _on_sm(100, 103),
        "Prefill context parallelism with the TRTLLM MHA prefill backend requires SM100 "
        "(trtllm-gen context kernel): the SM90/SM120 fmha_v2 prefill path does not implement "
        "CP shard masking.",
        SRC,
    )


#: The handler's first check, once the base back-end is resolved (equal split back-ends are
#: it, R-ATTN-BACKEND): flex attention runs no draft model (0.5.18 to 0.5.23; 0.4.6.post5
#: has no flex_attention).
FLEX_SPEC = Rule(
    "ATTN-FLEX-SPEC",
    _base == "flex_attention",
    ~is_set(F.speculative_algorithm),
    "Speculative decoding is currently not supported with Flex Attention backend",
    SRC,
    hint="drop --speculative-algorithm, or use another --attention-backend",
)
#: In SGLang's order; the seed's release (0.5.19). 0.5.18 and 0.5.23: releases.py.
TRTLLM_MLA_BLACKWELL = Rule(
    "ATTN-TRTLLM-MLA-BLACKWELL",
    _TRTLLM_MLA,
    _on_sm(*_BLACKWELL),
    "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x). Please use a "
    "different backend.",
    SRC,
)
TRTLLM_MLA_KV = trtllm_mla_kv(
    ("fp8_e4m3", "fp4_e2m1", "bf16", "auto"), "fp8_e4m3, fp4_e2m1, bf16, or auto"
)
#: 0.5.18 and 0.5.19: tokenspeed_mla is its own back-end (0.5.23: an alias of cutedsl_mla).
TOKENSPEED_RULES: tuple[Rule, ...] = (
    Rule(
        "ATTN-TOKENSPEED-MLA-BLACKWELL",
        _TOKENSPEED,
        _on_sm(*_BLACKWELL),
        "tokenspeed_mla backend is only supported on Blackwell GPUs (SM100/SM12x).",
        SRC,
    ),
    Rule(
        "ATTN-TOKENSPEED-MLA-KV",
        _TOKENSPEED,
        F.kv_cache_dtype == "fp8_e4m3",
        "tokenspeed_mla backend requires kv-cache-dtype=fp8_e4m3, got {kv_cache_dtype}.",
        SRC,
        hint="--kv-cache-dtype fp8_e4m3",
    ),
)
#: _cutedsl_prefill_backend_fill: an assert on the prefill field, then the GPU and the dtype.
CUTEDSL_RULES: tuple[Rule, ...] = (
    Rule(
        "ATTN-CUTEDSL-MLA-PREFILL",
        _prefill == "cutedsl_mla",
        FALSE,
        "CuteDSL MLA only supports decoding for now",
        SRC,
        hint="--decode-attention-backend cutedsl_mla with another (or no) prefill backend",
    ),
    Rule(
        "ATTN-CUTEDSL-MLA-SM100",
        _CUTEDSL,
        _on_sm(100, 103),
        "CuteDSL MLA backend is only supported on Blackwell GPUs (SM100). Please use a "
        "different backend.",
        SRC,
    ),
    Rule(
        "ATTN-CUTEDSL-MLA-KV",
        _CUTEDSL,
        one_of(F.kv_cache_dtype, "fp8_e4m3", "bf16", "bfloat16", "auto"),
        "CuteDSL MLA backend only supports kv-cache-dtype of fp8_e4m3, bf16, or auto.",
        SRC,
        hint="--kv-cache-dtype fp8_e4m3 (or auto)",
    ),
)
#: The TRTLLM MHA checks read the resolved pair: prefill, (0.5.19 on) SM120's FP8 prefill,
#: decode, then prefill CP.
TRTLLM_MHA_GPU = Rule(
    "ATTN-TRTLLM-MHA-GPU",
    PREFILL == "trtllm_mha",
    _on_sm(*_TRTLLM_MHA_GPUS),
    "TRTLLM MHA backend for prefill requires Hopper (SM90), Blackwell (SM100), or SM120 "
    "GPUs. Please use a different prefill backend.",
    SRC,
)
#: 0.5.18's prefill check: SM100 only, its own words.
TRTLLM_MHA_GPU_0_5_18 = Rule(
    "ATTN-TRTLLM-MHA-GPU",
    PREFILL == "trtllm_mha",
    _on_sm(100, 103),
    "TRTLLM MHA backend for prefill is only supported on Blackwell GPUs (SM100). Please use a "
    "different prefill backend.",
    SRC,
)
TRTLLM_MHA_SM120_FP8 = Rule(
    "ATTN-TRTLLM-MHA-SM120-FP8",
    (PREFILL == "trtllm_mha")
    & (F.platform == "cuda")
    & is_set(F.gpu_sm)
    & one_of(F.gpu_sm, 120, 121),
    F.kv_cache_dtype != "fp8_e4m3",
    "TRTLLM FMHAv2 prefill on SM120 does not support fp8_e4m3 KV cache or skip-softmax.",
    SRC,
    hint="another --kv-cache-dtype, or another prefill backend",
)


def trtllm_mha_decode_gpu(nvfp4_own: bool) -> Rule:
    """`nvfp4_own`: 0.5.23 sets an nvfp4 cache's decode back-end to trtllm_mha, and that
    case of the same check is KV4-NVFP4-DECODE-GPU's."""
    decode = DECODE == "trtllm_mha"
    return Rule(
        "ATTN-TRTLLM-MHA-DECODE-GPU",
        decode & (F.kv_cache_dtype != "nvfp4") if nvfp4_own else decode,
        _on_sm(*_TRTLLM_MHA_GPUS),
        "TRTLLM MHA backend for decode is only supported on Hopper (SM90), Blackwell (SM100) "
        "and (SM120) GPUs. Please use a different decode backend.",
        SRC,
    )


#: 0.5.18 and 0.5.19 (gone in 0.5.23): after the platform fallbacks, an MLA model's resolved
#: prefill back-end may not be intel_xpu (its MLA kernel decodes only).
XPU_MLA_PREFILL = Rule(
    "ATTN-XPU-MLA-PREFILL",
    USES_MLA & (PREFILL == "intel_xpu"),
    FALSE,
    "intel_xpu backend is only supported on decode for MLA models, please set "
    "--decode-attention-backend to intel_xpu and do not set --attention-backend or "
    "--prefill-attention-backend to intel_xpu for prefill instead use triton.",
    SRC,
    hint="--decode-attention-backend intel_xpu --prefill-attention-backend triton",
)

RULES: tuple[Rule, ...] = (
    FLEX_SPEC,
    TRTLLM_MLA_BLACKWELL,
    TRTLLM_MLA_KV,
    *TOKENSPEED_RULES,
    *CUTEDSL_RULES,
    TRTLLM_MHA_GPU,
    TRTLLM_MHA_SM120_FP8,
    trtllm_mha_decode_gpu(nvfp4_own=False),
    trtllm_mha_cp(legacy=True),
    XPU_MLA_PREFILL,
)

#: _moe_runner_backend_quant_constraints (handle_moe_kernel_config): NVIDIA Blackwell only.
QUANT_NVFP4_ONLINE = Rule(
    "QUANT-NVFP4-ONLINE-SM100",
    F.quantization == "nvfp4_online",
    _on_sm(100, 103),
    "--quantization nvfp4_online is supported only on NVIDIA Blackwell SM100/SM103 GPUs.",
    "handle_moe_kernel_config",
)
