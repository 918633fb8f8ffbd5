"""MoE all-to-all backends (handle_a2a_moe): what each backend needs of DP attention and of
the MoE runner. Raised during argument resolution, after the context-parallel handler and
after the backend's ep_size = tp_size rewrite."""

from __future__ import annotations

from meshsat.solver.lang.expr import is_set, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

SRC = "handle_a2a_moe"
a2a, runner = F.moe_a2a_backend, F.moe_runner_backend

#: The runners FlashInfer's all-to-all dispatches to (0.5.19 to 0.5.23).
FLASHINFER_A2A_RUNNERS = (
    "flashinfer_cutlass",
    "flashinfer_cutedsl",
    "flashinfer_trtllm",
    "flashinfer_trtllm_routed",
    "deep_gemm",
)

RULES: tuple[Rule, ...] = (
    Rule(
        "A2A-DEEPEP-V2-RUNNER",
        a2a == "deepep_v2",
        one_of(runner, "auto", "deep_gemm"),
        "DeepEP v2 MoE currently supports only --moe-runner-backend deep_gemm. Got "
        "'{moe_runner_backend}'.",
        SRC,
        hint="use --moe-runner-backend deep_gemm (auto resolves to it)",
    ),
    Rule(
        "TOPO-A2A-FLASHINFER",
        a2a == "flashinfer",
        F.enable_dp_attention & (F.dp_size == F.tp_size),
        "Flashinfer MoE A2A is only supported with dp_size == tp_size and --enable-dp-attention",
        SRC,
    ),
    Rule(
        "A2A-FLASHINFER-RUNNER",
        a2a == "flashinfer",
        one_of(runner, *FLASHINFER_A2A_RUNNERS),
        "FlashInfer MoE A2A is supported with flashinfer_cutlass, flashinfer_cutedsl, "
        "flashinfer_trtllm, flashinfer_trtllm_routed, or deep_gemm.",
        SRC,
        hint="choose one of those with --moe-runner-backend (the default auto is refused)",
    ),
    Rule(
        "A2A-PPLX-DP-ATTN",
        a2a == "pplx",
        F.enable_dp_attention & (F.dp_size >= 2),
        "moe_a2a_backend='pplx' requires --enable-dp-attention with at least 2 DP groups "
        "(--dp-size >= 2).",
        SRC,
    ),
    Rule(
        "A2A-PPLX-RUNNER",
        a2a == "pplx",
        one_of(runner, "auto", "deep_gemm"),
        "moe_a2a_backend='pplx' is only supported with --moe-runner-backend deep_gemm (or auto).",
        SRC,
    ),
    # required_pplx_dispatch_tokens_per_rank(): the resolved chunked prefill (per DP group);
    # unset, it is the device's default, which is larger than the default budget on every
    # platform (2048 or more). Skipped on decode servers and with chunked prefill off.
    Rule(
        "A2A-PPLX-DISPATCH",
        (a2a == "pplx")
        & (F.disaggregation_mode != "decode")
        & ~(is_set(F.chunked_prefill_size) & (F.chunked_prefill_size <= 0)),
        is_set(F.chunked_prefill_size)
        & (F.chunked_prefill_size <= F.env_pplx_max_dispatch_tokens_per_rank),
        "SGLANG_PPLX_NUM_MAX_DISPATCH_TOKENS_PER_RANK (default 128) must be >= the per-rank "
        "pplx dispatch tokens (chunked_prefill_size, or the decode cuda-graph batch size)",
        SRC,
        hint="set --chunked-prefill-size within the budget (the device default exceeds it), "
        "or raise SGLANG_PPLX_NUM_MAX_DISPATCH_TOKENS_PER_RANK",
    ),
)
