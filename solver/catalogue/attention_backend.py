"""Attention back-ends that run only on some GPU classes (handle_attention_backend_compatibility,
0.5.23), and the quantization that needs one (nvfp4_online).

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

#: _moe_runner_backend_quant_constraints (handle_moe_kernel_config): NVIDIA Blackwell only.
QUANT_NVFP4_ONLINE = Rule(
    "QUANT-NVFP4-ONLINE-SM100",
    F.quantization == "nvfp4_online",
    _on_sm(100, 103),
    "--quantization nvfp4_online is supported only on NVIDIA Blackwell SM100/SM103 GPUs.",
    "handle_moe_kernel_config",
)
