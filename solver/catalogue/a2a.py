"""MoE all-to-all backends (handle_a2a_moe): what each backend needs of DP attention and of
the MoE runner. Raised during argument resolution, after the context-parallel handler and
after the backend's ep_size = tp_size rewrite."""

from __future__ import annotations

from dataclasses import replace

from meshsat.solver.lang.derived import attn_dp
from meshsat.solver.lang.expr import is_set, ite, one_of
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

#: FlashInfer's all-to-all needs one attention-DP group per TP rank (0.5.18 to 0.5.19's
#: words; 0.5.23 says it its own way, `FLASHINFER_TOPOLOGY_0_5_23`).
FLASHINFER_TOPOLOGY = Rule(
    "TOPO-A2A-FLASHINFER",
    a2a == "flashinfer",
    F.enable_dp_attention & (F.dp_size == F.tp_size),
    "Flashinfer MoE A2A is only supported with dp_size == tp_size and --enable-dp-attention",
    SRC,
)
#: The same condition in 0.5.23's words (`arg_groups/moe_hook.py`, handle_a2a_moe). Its Muse
#: Spark exception (TP4/EP4 or TP8/EP8 with layernorm sequence parallelism, no attention DP)
#: reads `enable_layernorm_sp`, which is not a layout field here.
FLASHINFER_TOPOLOGY_0_5_23 = replace(
    FLASHINFER_TOPOLOGY,
    message="Flashinfer MoE A2A requires --attn-dp-size equal to --tp-size, except for Muse "
    "Spark TP4/EP4 or TP8/EP8 prefill sequence parallelism.",
)
#: 0.5.23's validate_flashinfer_a2a_token_budget (arg_groups/moe_hook.py, after the MoE
#: handlers): a server that prefills needs chunked prefill on, read as resolved (divided by
#: the attention-DP width). Unset is SGLang's default chunk, positive. Its budget check
#: after this one reads the CUDA-graph batch sizes, which are no fields.
FLASHINFER_CHUNKED = Rule(
    "A2A-FLASHINFER-CHUNKED",
    (a2a == "flashinfer") & (F.disaggregation_mode != "decode"),
    ~is_set(F.chunked_prefill_size) | (F.chunked_prefill_size > 0),
    "FlashInfer MoE A2A requires chunked prefill: eager prefill dispatches the whole per-rank "
    "extend batch through a fixed-size workspace, so --chunked-prefill-size must be > 0.",
    "validate_flashinfer_a2a_token_budget",
    hint="a positive --chunked-prefill-size (or leave it out) with --moe-a2a-backend flashinfer",
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
    FLASHINFER_TOPOLOGY,
    Rule(
        "A2A-FLASHINFER-RUNNER",
        a2a == "flashinfer",
        one_of(runner, *FLASHINFER_A2A_RUNNERS),
        "FlashInfer MoE A2A is supported with flashinfer_cutlass, flashinfer_cutedsl, "
        "flashinfer_trtllm, flashinfer_trtllm_routed, or deep_gemm.",
        SRC,
        hint="choose one of those with --moe-runner-backend (the default auto is refused)",
    ),
    # required_mori_dispatch_tokens_per_rank(): the resolved chunked prefill (per DP group),
    # checked between FlashInfer's and pplx's blocks (0.5.18 to 0.5.23). Unset, it is the
    # device's default (2048 to 16384 by GPU memory, 4096 on the recorder's machines), which
    # meshsat does not know: assumed within the budget. Skipped on decode servers and with
    # chunked prefill off.
    Rule(
        "A2A-MORI-DISPATCH",
        (a2a == "mori")
        & (F.disaggregation_mode != "decode")
        & is_set(F.chunked_prefill_size)
        & (F.chunked_prefill_size > 0),
        F.chunked_prefill_size <= F.env_mori_max_dispatch_tokens_per_rank,
        "SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK (default 4096) must be >= the per-rank "
        "MoRI dispatch tokens (chunked_prefill_size by default)",
        SRC,
        hint="set --chunked-prefill-size within the budget (per DP group), or raise "
        "SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK",
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
    # platform (2048 or more); and --cuda-graph-max-bs-decode as typed (0.5.18 to 0.5.23).
    # Not the decode graph's batch A2A-DEEPEP-V2-DECODE-BUDGET reads (`_graph_bs`): pplx asks
    # the field only, so an unset one (the GPU's default graph) costs nothing, and a typed one
    # counts whole, with decode graphs off or --max-running-requests below it (0.5.23's
    # oracle, H100 facts: chunk 64 with a typed 256 refused, also with 8 running requests and
    # --disable-cuda-graph; chunk 64 alone and with 128 taken). Skipped on decode servers
    # and with chunked prefill off.
    Rule(
        "A2A-PPLX-DISPATCH",
        (a2a == "pplx")
        & (F.disaggregation_mode != "decode")
        & ~(is_set(F.chunked_prefill_size) & (F.chunked_prefill_size <= 0)),
        is_set(F.chunked_prefill_size)
        & (F.chunked_prefill_size <= F.env_pplx_max_dispatch_tokens_per_rank)
        & (
            ~is_set(F.cuda_graph_max_bs_decode)
            | (F.cuda_graph_max_bs_decode <= F.env_pplx_max_dispatch_tokens_per_rank)
        ),
        "SGLANG_PPLX_NUM_MAX_DISPATCH_TOKENS_PER_RANK (default 128) must be >= the per-rank "
        "pplx dispatch tokens (chunked_prefill_size, or the decode cuda-graph batch size)",
        SRC,
        hint="set --chunked-prefill-size and --cuda-graph-max-bs-decode within the budget "
        "(the chunk's device default exceeds it), or raise "
        "SGLANG_PPLX_NUM_MAX_DISPATCH_TOKENS_PER_RANK",
    ),
)


# --- rules 0.5.23 checks that the seed's release did not (packs/releases.py adds them) ------
#: check_mega_moe_compat (handle_mega_moe, first in the pipeline): the fused MegaMOE kernel.
MEGAMOE_SRC = "handle_mega_moe"
#: It runs before the model overrides and DWDP rewrite the backend: the user's value, or
#: the runner alias `--moe-runner-backend megamoe`.
_megamoe = (a2a.as_raw == "megamoe") | (runner.as_raw == "megamoe")
MEGAMOE_RULES: tuple[Rule, ...] = (
    Rule(
        "MEGAMOE-OVERLAP",
        _megamoe,
        ~F.enable_two_batch_overlap & ~F.enable_single_batch_overlap,
        "--moe-a2a-backend megamoe has no two-batch / single-batch overlap decomposition; "
        "disable --enable-two-batch-overlap and --enable-single-batch-overlap.",
        MEGAMOE_SRC,
    ),
    Rule(
        "MEGAMOE-GPU",
        _megamoe,
        (F.platform == "hip")
        | ((F.platform == "cuda") & (~is_set(F.gpu_sm) | one_of(F.gpu_sm, 90, 100, 103))),
        "--moe-a2a-backend megamoe needs a CUDA SM90 GPU (block-FP8 experts) or an "
        "SM100-class GPU (MXFP4 / NVFP4 experts), or ROCm.",
        MEGAMOE_SRC,
    ),
)

#: validate_flashinfer_megamoe_model(): the architectures FlashInfer MegaMOE is validated on.
FI_MEGAMOE_ARCHITECTURES = (
    "BeamForCausalLM",
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "DeepseekV4ForCausalLM",
    "Glm4MoeForCausalLM",
    "GlmMoeDsaForCausalLM",
    "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM",
    "Qwen2MoeForCausalLM",
    "Qwen3MoeForCausalLM",
    "KimiK3ForConditionalGeneration",
    "KimiK3LinearForCausalLM",
)
_fi_mega = a2a == "flashinfer_megamoe"
#: handle_a2a_moe's flashinfer_megamoe block, in its order (0.5.23).
FI_MEGAMOE_RULES: tuple[Rule, ...] = (
    Rule(
        "A2A-FI-MEGAMOE-ARCH",
        _fi_mega & is_set(F.architecture),
        one_of(F.architecture, *FI_MEGAMOE_ARCHITECTURES),
        "FlashInfer MegaMOE is not validated for model architecture {architecture}.",
        SRC,
    ),
    Rule(
        "A2A-FI-MEGAMOE-QUANT",
        _fi_mega,
        one_of(F.quantization, "mxfp8", "modelopt_fp4"),
        "FlashInfer MegaMOE currently supports only MXFP8, ModelOpt NVFP4, FP4-expert or "
        "hybrid NVFP4 MoE checkpoints; got quantization={quantization}.",
        SRC,
        hint="--quantization mxfp8 or modelopt_fp4 (an FP4-expert checkpoint also works)",
    ),
    Rule(
        "A2A-FI-MEGAMOE-ATTN-DP",
        _fi_mega,
        F.enable_dp_attention & (F.dp_size == F.tp_size),
        "FlashInfer MegaMOE is only supported with --attn-dp-size equal to --tp-size",
        SRC,
    ),
    Rule(
        "A2A-FI-MEGAMOE-RUNNER",
        _fi_mega,
        one_of(runner, "auto", "flashinfer_megamoe"),
        "FlashInfer MegaMOE a2a backend requires --moe-runner-backend flashinfer_megamoe",
        SRC,
    ),
    Rule(
        "A2A-FI-MEGAMOE-SM100",
        _fi_mega,
        (F.platform == "cuda") & (~is_set(F.gpu_sm) | one_of(F.gpu_sm, 100, 103)),
        "FlashInfer MegaMOE currently requires an SM100-family CUDA device for all supported "
        "quantization formats.",
        SRC,
    ),
)

#: DeepSeek V3.2 is not among them (measured in the registry of 0.5.23).
DEEPEP_V2_ARCHITECTURES = (
    "DeepseekV3ForCausalLM",
    "DeepseekV4ForCausalLM",
    "Qwen3MoeForCausalLM",
    "Glm5NextForConditionalGeneration",
    "GlmMoeDsaForCausalLM",
    "MiMoV2ForCausalLM",
    "MiMoV2FlashForCausalLM",
)
_v2 = a2a == "deepep_v2"
#: handle_a2a_moe's deepep_v2 block around its runner check (0.5.23): (before, after).
DEEPEP_V2_ARCH = Rule(
    "A2A-DEEPEP-V2-ARCH",
    _v2 & is_set(F.architecture),
    one_of(F.architecture, *DEEPEP_V2_ARCHITECTURES),
    "DeepEP v2 MoE is not validated for {architecture}: the model package must register "
    "its architecture with register_deepep_v2_model.",
    SRC,
    hint="--moe-a2a-backend deepep",
)
DEEPEP_V2_OVERLAP = Rule(
    "A2A-DEEPEP-V2-OVERLAP",
    _v2,
    ~F.enable_two_batch_overlap & ~F.enable_single_batch_overlap,
    "DeepEP v2 MoE has not implemented the TBO/SBO overlap hooks yet. Disable "
    "--enable-two-batch-overlap and --enable-single-batch-overlap when using "
    "--moe-a2a-backend deepep_v2.",
    SRC,
)
#: 0.5.23 only (0.5.19 accepts it, measured).
DEEPEP_V2_DIRECT_NODES = Rule(
    "A2A-DEEPEP-V2-DIRECT-NODES",
    _v2 & (F.deepep_v2_mode == "direct"),
    F.nnodes == 1,
    "--deepep-v2-mode direct is NVLink-only and cannot run across nodes "
    "(nnodes={nnodes}); pass --deepep-v2-mode hybrid.",
    SRC,
    hint="--deepep-v2-mode hybrid",
)

#: handle_a2a_moe's deepep block: CuteDSL FP4 has no DeepEP normal-dispatch handler.
DEEPEP_CUTEDSL_NORMAL = Rule(
    "A2A-DEEPEP-CUTEDSL-NORMAL",
    (a2a == "deepep") & (runner == "flashinfer_cutedsl"),
    F.deepep_mode != "normal",
    "flashinfer_cutedsl FP4 MoE only supports DeepEP low_latency dispatch (masked layout). "
    "Pass --deepep-mode low_latency or auto.",
    SRC,
)

#: handle_a2a_moe's pplx block opens with the dispatch mode.
PPLX_NORMAL = Rule(
    "A2A-PPLX-NORMAL",
    a2a == "pplx",
    F.deepep_mode != "normal",
    "moe_a2a_backend='pplx' only supports low-latency mode; set --deepep-mode to "
    "'low_latency' or 'auto'.",
    SRC,
    hint="--deepep-mode low_latency",
)


#: validate_deepep_v2_dispatch_token_budget (after the MoE handlers, 0.5.23): the prefill
#: buffer of one DP group, scattered over its tp/attn_dp ranks before dispatch, must fit
#: SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK (128). The buffer is the chunked prefill
#: size, or --max-prefill-tokens (16384) when chunked prefill is off (<= 0:
#: `required_deepep_v2_prefill_tokens_per_rank`'s `max_prefill_buffer_tokens(...) or
#: max_prefill_tokens`). Unset, chunked prefill is the device's default (4096 on the
#: recorder's machines), which meshsat cannot see: refused as pplx's budget is. Skipped on
#: decode servers. PP dynamic chunking (--enable-dynamic-chunking, not a field) can grow the
#: buffer further; the decode CUDA-graph half is DEEPEP_V2_DECODE_BUDGET below.
_v2_prefill_buffer = ite(F.chunked_prefill_size > 0, F.chunked_prefill_size, F.max_prefill_tokens)
DEEPEP_V2_BUDGET = Rule(
    "A2A-DEEPEP-V2-BUDGET",
    _v2 & (F.disaggregation_mode != "decode"),
    is_set(F.chunked_prefill_size) & (_v2_prefill_buffer <= 128 * (F.tp_size // attn_dp)),
    "DeepEP v2 per-rank prefill budget exceeds SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK "
    "(128): the per-DP chunked prefill size (--max-prefill-tokens when chunked prefill is "
    "off) over tp/attn_dp ranks must fit it.",
    "validate_deepep_v2_dispatch_token_budget",
    hint="set --chunked-prefill-size within 128 tokens per rank, or raise "
    "SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK",
)


#: validate_deepep_v2_dispatch_token_budget's decode half (0.5.19, 0.5.23): the largest
#: decode CUDA graph of one DP rank (its batch, at most --max-running-requests over the
#: attention-DP groups, times the draft tokens a request verifies: 1 without speculative
#: decoding, which DeepEP v2 allows only as NGRAM) must fit the same 128 tokens. Skipped on a
#: PD prefill server and without decode graphs. The batch is --cuda-graph-max-bs-decode, or
#: the GPU-memory default of `_handle_gpu_memory_settings` (capped by --max-running-requests):
#: 256 (tp < 4) or 512 on every SM90 GPU (H100/H800 80 GB, H20/H100 NVL/GH200 96 GB, H200
#: 141 GB: 60 to 160 GB), 512 on SM100/SM103 (B200, GB200, B300: 160 GB and up). On another
#: GPU, or with no gpu_sm, the default is not known: not checked (the recorder's CPU
#: fallback is 160, which refuses every such decode server there too).
_GRAPH_MEMORY_CLASS = (F.platform == "cuda") & is_set(F.gpu_sm) & one_of(F.gpu_sm, 90, 100, 103)
_GRAPH_DEFAULT = ite((F.gpu_sm == 90) & (F.tp_size < 4), 256, 512)
_MRR = F.max_running_requests
_graph_bs = ite(
    is_set(F.cuda_graph_max_bs_decode),
    F.cuda_graph_max_bs_decode,
    ite(is_set(_MRR) & (_MRR < _GRAPH_DEFAULT), _MRR, _GRAPH_DEFAULT),
)
_spec = is_set(F.speculative_algorithm)
_tokens_per_request = ite(
    _spec & is_set(F.speculative_num_draft_tokens), F.speculative_num_draft_tokens, 1
)
DEEPEP_V2_DECODE_BUDGET = Rule(
    "A2A-DEEPEP-V2-DECODE-BUDGET",
    _v2
    & (F.disaggregation_mode != "prefill")
    & ~F.disable_cuda_graph
    & ~F.disable_decode_cuda_graph
    & (is_set(F.cuda_graph_max_bs_decode) | _GRAPH_MEMORY_CLASS),
    (_graph_bs * _tokens_per_request <= 128)
    # min(graph, max(1, requests // attn_dp)) · tokens <= 128, the quotient written as
    # (requests - requests % attn_dp) so the exponent encoding needs no exact division.
    | (
        is_set(_MRR)
        & (_tokens_per_request <= 128)
        & ((_MRR - _MRR % attn_dp) * _tokens_per_request <= 128 * attn_dp)
    ),
    "DeepEP v2 per-rank decode CUDA graph exceeds "
    "SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK: required > capacity=128 (requests: "
    "the decode CUDA graph's largest batch, --cuda-graph-max-bs-decode {cuda_graph_max_bs_decode} "
    "or the GPU's default; tokens/request: the draft tokens verified). Raise the "
    "environment value or lower --cuda-graph-max-bs-decode.",
    "validate_deepep_v2_dispatch_token_budget",
    hint="--cuda-graph-max-bs-decode 128 (or --max-running-requests within 128 per DP "
    "group), or raise SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK",
)


#: validate_deepep_v2_speculative_draft: a draft model inherits the target's backend (an
#: NGRAM draft has no MoE). --speculative-moe-a2a-backend, which could name another, is not
#: a meshsat field: a draft with its own backend is refused here too.
DEEPEP_V2_SPEC = Rule(
    "A2A-DEEPEP-V2-SPEC",
    _v2 & is_set(F.speculative_algorithm),
    F.speculative_algorithm == "NGRAM",
    "DeepEP v2 MoE is not validated as a speculative draft backend. Select another "
    "--speculative-moe-a2a-backend.",
    "validate_deepep_v2_speculative_draft",
)
