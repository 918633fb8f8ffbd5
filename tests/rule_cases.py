"""One row per rule: a layout that breaks it, the exact rules that then fail, and a
neighbour that repairs exactly that rule.

Most rules can be broken alone. Where the catalogue makes that impossible (a rule
implied by another, e.g. `CP-TP-DIV` implies `CP-DPCP-DIV` fails too), the row lists
every rule that fails. The neighbour is valid unless `remaining` says otherwise (three
rows, each with the reason).
Adding a rule to the catalogue means adding a row here: a test checks the coverage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DSV3 = {"architecture": "DeepseekV3ForCausalLM"}
DSV32 = {"architecture": "DeepseekV32ForCausalLM", "is_deepseek_dsa": True}
GLM5 = {"architecture": "GlmMoeDsaForCausalLM", "is_deepseek_dsa": True}
MIMO = {"architecture": "MiMoV2FlashForCausalLM"}

#: A valid elastic-EP scale-up primary (scaling active: max_ep_size > tp_size).
EEP_PRIMARY: dict[str, Any] = {
    "tp_size": 4,
    "dp_size": 4,
    "enable_dp_attention": True,
    "enable_dp_lm_head": True,
    "moe_a2a_backend": "nixl",
    "elastic_ep_backend": "mooncake",
    "max_ep_size": 8,
    "load_balance_method": "round_robin",
    "disable_cuda_graph": True,
}
#: A valid scale joiner for that primary.
EEP_JOINER: dict[str, Any] = {
    **EEP_PRIMARY,
    "ep_join_mode": "scale",
    "node_rank": 1,
    "ep_join_rank_offset": 4,
    "elastic_ep_initial_size": 4,
}
DWDP: dict[str, Any] = {"tp_size": 4, "dwdp_size": 4, "disaggregation_mode": "prefill"}
#: DP attention over two groups, and an explicit EAGLE tree (3 steps, top-k 4, 8 tokens).
SPEC_DP: dict[str, Any] = {"tp_size": 2, "dp_size": 2, "enable_dp_attention": True}
SPEC_TREE: dict[str, Any] = {
    "speculative_algorithm": "EAGLE",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 4,
    "speculative_num_draft_tokens": 8,
}
SCALE_JOIN = {
    "elastic_ep_backend": "mooncake",
    "ep_join_mode": "scale",
    "node_rank": 1,
    "ep_join_rank_offset": 2,
}


@dataclass(frozen=True)
class Case:
    rule: str
    config: dict[str, Any]
    #: Every rule the broken layout violates (errors only), the row's rule included.
    fails: frozenset[str]
    #: Changes that repair `rule`: the neighbour violates exactly `remaining`.
    repair: dict[str, Any]
    model: dict[str, Any] = field(default_factory=dict)
    #: What the neighbour still violates: empty (a valid neighbour) unless the catalogue
    #: makes a valid neighbour one change away impossible.
    remaining: frozenset[str] = frozenset()
    #: Only representable as a raw environment (a size the Config type rejects).
    raw_only: bool = False


#: An FP8 checkpoint with DeepSeek's 128 x 128 weight blocks.
FP8_BLOCK: dict[str, Any] = {"quant_method": "fp8", "quant_block_n": 128, "quant_block_k": 128}


def case(
    rule: str,
    config: dict[str, Any],
    repair: dict[str, Any],
    *also: str,
    model: dict[str, Any] | None = None,
    raw_only: bool = False,
    remaining: tuple[str, ...] = (),
) -> Case:
    return Case(
        rule, config, frozenset((rule, *also)), repair, model or {}, frozenset(remaining), raw_only
    )


CASES: tuple[Case, ...] = (
    # --- context parallelism ---------------------------------------------------------
    case("CP-STRATEGY-REQUIRED", {"enable_prefill_cp": True}, {"cp_strategy": "zigzag"}),
    case(
        "CP-LEGACY-MODE-CHOICE",
        {"prefill_cp_mode": "round-robin-split"},
        {"prefill_cp_mode": "in-seq-split"},
    ),
    case(
        "CP-LEGACY-XOR",
        {"enable_prefill_context_parallel": True, "enable_dsa_prefill_context_parallel": True},
        {"enable_dsa_prefill_context_parallel": False},
    ),
    case(
        "CP-TP-DIV",
        {"tp_size": 6, "attn_cp_size": 4},
        {"tp_size": 8},
        "CP-DPCP-DIV",
        "TOPO-ATTN-TP",
    ),
    case("CP-DPCP-DIV", {"tp_size": 8, "dp_size": 3, "attn_cp_size": 2}, {"dp_size": 2}),
    case(
        "CP-NO-AITER",
        {"tp_size": 2, "attn_cp_size": 2, "enable_aiter_allreduce_fusion": True},
        {"attn_cp_size": 1},
    ),
    case(
        "MOEDP-TP-DIV",
        {"tp_size": 6, "moe_dp_size": 4},
        {"moe_dp_size": 1},
        "TOPO-MOE-TP",
        "CP-MOEDP-MATCH",
    ),
    case(
        "MOEDP-EP-LE",
        {"tp_size": 8, "attn_cp_size": 2, "moe_dp_size": 2, "ep_size": 8},
        {"ep_size": 4},
        "MOEDP-EP-EQ",
        "TOPO-MOE-TP",
    ),
    case(
        "MOEDP-NO-PP",
        {"tp_size": 4, "attn_cp_size": 2, "moe_dp_size": 2, "pp_size": 2},
        {"pp_size": 1},
    ),
    case(
        "MOEDP-EP-EQ",
        {"tp_size": 8, "attn_cp_size": 2, "moe_dp_size": 2, "ep_size": 2},
        {"ep_size": 4},
    ),
    case(
        "MOEDP-NO-AITER",
        {"tp_size": 4, "attn_cp_size": 2, "moe_dp_size": 2, "enable_aiter_allreduce_fusion": True},
        {"moe_dp_size": 1},
        "CP-NO-AITER",
        remaining=("CP-NO-AITER",),
    ),
    case("CP-MOEDP-MATCH", {"tp_size": 4, "moe_dp_size": 2}, {"attn_cp_size": 2}),
    case(
        "CP-MIMO-ZIGZAG",
        {"tp_size": 2, "attn_cp_size": 2, "enable_prefill_cp": True, "cp_strategy": "interleave"},
        {"cp_strategy": "zigzag"},
        model=MIMO,
    ),
    case(
        "CP-MIMO-TEXT",
        {"tp_size": 2, "attn_cp_size": 2, "enable_prefill_cp": True, "cp_strategy": "zigzag"},
        # --language-model-only is for other architectures (LMO-ARCH); MiMo V2 splits.
        {"language_only": True},
        model={"architecture": "MiMoV2ForCausalLM", "is_multimodal": True},
    ),
    case(
        "CP-DSA-INTERLEAVE-DP",
        {"tp_size": 8, "dp_size": 2, "enable_prefill_cp": True, "cp_strategy": "interleave"},
        {"dp_size": 1},
        model=DSV32,
    ),
    case(
        "CP-DSA-NOT-DECODE",
        {
            "tp_size": 8,
            "enable_prefill_cp": True,
            "cp_strategy": "interleave",
            "disaggregation_mode": "decode",
        },
        {"disaggregation_mode": "prefill"},
        model=DSV32,
    ),
    case(
        "CP-DSA-TP8",
        {"tp_size": 16, "enable_prefill_cp": True, "cp_strategy": "interleave"},
        {"tp_size": 8},
        model=GLM5,
    ),
    # --- decode context parallelism -------------------------------------------------
    case("DCP-MIN", {"dcp_size": 0}, {"dcp_size": 1}, raw_only=True),
    case("DCP-BACKEND-NEEDS-DCP", {"dcp_comm_backend": "a2a"}, {"dcp_comm_backend": "ag_rs"}),
    case(
        "DCP-FI-A2A-CUDA",
        {"tp_size": 2, "dcp_size": 2, "dcp_comm_backend": "fi_a2a", "platform": "hip"},
        {"platform": "cuda"},
    ),
    case("DCP-REPLICATE-Q", {"dcp_replicate_q_proj": True}, {"dcp_replicate_q_proj": False}),
    case("DCP-TP-DIV", {"tp_size": 4, "dcp_size": 3}, {"dcp_size": 2}),
    case(
        "DCP-IN-ATTN-TP",
        {"tp_size": 4, "dp_size": 2, "enable_dp_attention": True, "dcp_size": 4},
        {"dcp_size": 2},
    ),
    # --- data parallelism -------------------------------------------------------------
    case(
        "DPATTN-TP-DIV",
        {"tp_size": 4, "dp_size": 3, "enable_dp_attention": True},
        {"enable_dp_attention": False},
        "TOPO-ATTN-TP",
    ),
    case(
        "DP-LM-HEAD",
        {"tp_size": 2, "dp_size": 2, "enable_dp_lm_head": True},
        {"enable_dp_attention": True},
    ),
    # --- DWDP -----------------------------------------------------------------------------
    case("DWDP-MIN", {"dwdp_size": 0}, {"dwdp_size": 1}, raw_only=True),
    case("DWDP-EQ-TP", {**DWDP, "tp_size": 8}, {"tp_size": 4}),
    case(
        "DWDP-MODE", {**DWDP, "disaggregation_mode": "decode"}, {"disaggregation_mode": "prefill"}
    ),
    case("DWDP-NO-EPLB", {**DWDP, "enable_eplb": True}, {"enable_eplb": False}),
    case(
        "DWDP-NO-SPEC", {**DWDP, "speculative_algorithm": "EAGLE"}, {"speculative_algorithm": None}
    ),
    case("DWDP-PP1", {**DWDP, "pp_size": 2}, {"pp_size": 1}),
    case(
        "DWDP-NO-TBO",
        {**DWDP, "enable_two_batch_overlap": True},
        {"enable_two_batch_overlap": False},
    ),
    # --- speculative decoding (handle_speculative_decoding) --------------------------------
    case(
        "SPEC-STANDALONE-DP-ATTN",
        {**SPEC_DP, "speculative_algorithm": "STANDALONE"},
        {"speculative_algorithm": "EAGLE"},
    ),
    case(
        "SPEC-EAGLE-AUTO-PARAMS",
        {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 2},
        {"speculative_num_steps": 3},
    ),
    case(
        "SPEC-EAGLE-TOPK-SET",
        {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3},
        {"speculative_eagle_topk": 1},
    ),
    # TRT-LLM MHA also pages by 64 (R-PAGE-SIZE), which a tree cannot use on it.
    case(
        "SPEC-TRTLLM-MHA-TOPK",
        {**SPEC_TREE, "attention_backend": "trtllm_mha"},
        {"speculative_eagle_topk": 1},
        "SPEC-EAGLE-PAGE-TREE",
    ),
    case(
        "SPEC-EAGLE-PAGE-TREE",
        {**SPEC_TREE, "page_size": 16, "attention_backend": "torch_native"},
        {"attention_backend": "flashinfer"},
    ),
    case(
        "SPEC-NGRAM-PAGE",
        {"speculative_algorithm": "NGRAM", "page_size": 16, "attention_backend": "triton"},
        {"attention_backend": "flashinfer"},
    ),
    case(
        "SPEC-NGRAM-DP-ATTN",
        {**SPEC_DP, "speculative_algorithm": "NGRAM"},
        {"enable_dp_attention": False},
    ),
    case(
        "SPEC-NGRAM-DEVICE",
        {"speculative_algorithm": "NGRAM", "platform": "npu"},
        {"speculative_algorithm": "EAGLE"},
    ),
    case(
        "SPEC-UNKNOWN-ALGORITHM",
        {"speculative_algorithm": "MTP"},
        {"speculative_algorithm": "NGRAM"},
    ),
    # --- deterministic inference -----------------------------------------------------------
    case(
        "DET-ATTN-BACKEND",
        {"enable_deterministic_inference": True, "attention_backend": "torch_native"},
        {"attention_backend": "triton"},
    ),
    case(
        "DET-MLA-BACKEND",
        {"enable_deterministic_inference": True, "attention_backend": "flashinfer"},
        {"attention_backend": "fa3"},
        model=DSV3,
    ),
    case(
        "DET-MLA-FA4-SM",
        {
            "enable_deterministic_inference": True,
            "attention_backend": "fa4",
            "platform": "cuda",
            "gpu_sm": 90,
        },
        {"gpu_sm": 100},
        model=DSV3,
    ),
    # --- elastic EP ------------------------------------------------------------------------
    case(
        "EEP-REJOIN-CONFLICT",
        {**SCALE_JOIN, "elastic_ep_rejoin": True},
        {"elastic_ep_rejoin": False},
    ),
    case(
        "EEP-EPLB-ALGO",
        {
            "tp_size": 2,
            "ep_size": 2,
            "elastic_ep_backend": "mooncake",
            "enable_eplb": True,
            "eplb_algorithm": "deepseek",
        },
        {"eplb_algorithm": "auto"},
    ),
    case("EEP-PP1", {"elastic_ep_backend": "nixl", "pp_size": 2}, {"pp_size": 1}),
    case("EEP-JOIN-NEEDS-BACKEND", {"ep_join_mode": "recover"}, {"elastic_ep_backend": "mooncake"}),
    case("EEP-SCALE-NODE", {**SCALE_JOIN, "node_rank": 0}, {"node_rank": 1}),
    case("EEP-OFFSET", {"ep_join_rank_offset": 2}, {"ep_join_rank_offset": 0}),
    case("EEP-MAX", {"max_ep_size": 1}, {"elastic_ep_backend": "mooncake"}),
    case(
        "EEP-INIT-ONLY-SCALING", {"elastic_ep_initial_size": 4}, {"elastic_ep_initial_size": None}
    ),
    case(
        "EEP-TIMEOUT",
        {**EEP_PRIMARY, "elastic_ep_scale_timeout": 0},
        {"elastic_ep_scale_timeout": 600},
    ),
    case("EEP-TOKENIZER", {**EEP_PRIMARY, "tokenizer_worker_num": 2}, {"tokenizer_worker_num": 1}),
    case("EEP-NO-RAY", {**EEP_PRIMARY, "use_ray": True}, {"use_ray": False}),
    case(
        "EEP-NO-BACKUP",
        {**EEP_PRIMARY, "enable_elastic_expert_backup": True},
        {"enable_elastic_expert_backup": False},
    ),
    case(
        "EEP-JOIN-INIT",
        {**EEP_JOINER, "elastic_ep_initial_size": 6},
        {"elastic_ep_initial_size": 4},
    ),
    case("EEP-JOIN-TARGET", {**EEP_JOINER, "ep_join_rank_offset": 8}, {"max_ep_size": 12}),
    # With tp_size 1, EEP-DP-EQ-TP forces dp_size 1; a scale joiner keeps DP attention on
    # all the same (SGLang's dp_size == 1 reset skips joiners: _data_parallelism_defaults).
    case(
        "EEP-JOIN-TP1",
        {**EEP_JOINER, "tp_size": 1, "dp_size": 1, "ep_join_rank_offset": 4, "max_ep_size": 8},
        {"moe_dense_tp_size": 1},
    ),
    case(
        "EEP-PRIMARY-INIT",
        {**EEP_PRIMARY, "elastic_ep_initial_size": 2},
        {"elastic_ep_initial_size": 4},
    ),
    case(
        "EEP-LB",
        {**EEP_PRIMARY, "load_balance_method": "total_requests"},
        {"load_balance_method": "round_robin"},
    ),
    case(
        "EEP-MOONCAKE",
        {**EEP_PRIMARY, "elastic_ep_backend": "nixl"},
        {"elastic_ep_backend": "mooncake"},
    ),
    case(
        "EEP-SCALE-PP1",
        {**EEP_PRIMARY, "pp_size": 2},
        {"elastic_ep_backend": None, "max_ep_size": None},
        "EEP-PP1",
    ),
    case(
        "EEP-NO-GRAPHS", {**EEP_PRIMARY, "disable_cuda_graph": False}, {"disable_cuda_graph": True}
    ),
    case(
        "EEP-DPATTN",
        {**EEP_PRIMARY, "enable_dp_attention": False},
        {"enable_dp_attention": True},
        "DP-LM-HEAD",
    ),
    case(
        "EEP-DP-LM-HEAD", {**EEP_PRIMARY, "enable_dp_lm_head": False}, {"enable_dp_lm_head": True}
    ),
    case(
        "EEP-CP1",
        {**EEP_PRIMARY, "attn_cp_size": 2},
        {"attn_cp_size": 1},
        "CP-DPCP-DIV",
        "TOPO-ATTN-TP",
    ),
    case(
        "EEP-MOEDP1",
        {**EEP_PRIMARY, "moe_dp_size": 2},
        {"moe_dp_size": 1},
        # The MoE-DP checks read the user's ep_size (1), not the all-to-all's tp_size.
        "TOPO-MOE-TP",
        "CP-MOEDP-MATCH",
    ),
    case(
        "EEP-EP-EQ-TP",
        {**EEP_PRIMARY, "moe_a2a_backend": "none", "ep_size": 2},
        {"ep_size": 4},
        "EEP-A2A-NIXL",
        remaining=("EEP-A2A-NIXL",),
    ),
    case("EEP-DP-EQ-TP", {**EEP_PRIMARY, "dp_size": 2}, {"dp_size": 4}),
    case("EEP-A2A-NIXL", {**EEP_PRIMARY, "moe_a2a_backend": "deepep"}, {"moe_a2a_backend": "nixl"}),
    # --- EPLB and dispatch --------------------------------------------------------------
    case(
        "DISPATCH-RANK-INVARIANT",
        {"ep_dispatch_algorithm": "static"},
        {"ep_dispatch_algorithm": "dynamic"},
    ),
    case("EPLB-NEEDS-EP", {"enable_eplb": True}, {"enable_eplb": False}),
    case(
        "METRICS-ENV",
        {"env_enable_eplb_balancedness_metric": True},
        {"env_enable_eplb_balancedness_metric": False},
    ),
    # --- topology -----------------------------------------------------------------------
    case("TOPO-POSITIVE", {"gpus_per_node": 0}, {"gpus_per_node": 8}, raw_only=True),
    case("TOPO-NNODES", {"tp_size": 4, "nnodes": 3}, {"nnodes": 2}),
    case("TOPO-NODE-GPUS", {"tp_size": 32, "nnodes": 2}, {"nnodes": 4}),
    # Node 2 of 2 would start pipeline rank 1 of an engine of one stage (ranks 4 and 5 of 4).
    case("TOPO-NODE-RANK", {"tp_size": 4, "nnodes": 2, "node_rank": 2}, {"node_rank": 1}),
    case(
        "TOPO-MULTINODE-DP",
        {"tp_size": 2, "dp_size": 2, "nnodes": 2},
        {"enable_dp_attention": True},
    ),
    case("TOPO-BASE-GPU-ID", {"base_gpu_id": -1}, {"base_gpu_id": 0}),
    case("TOPO-GPU-ID-STEP", {"gpu_id_step": 0}, {"gpu_id_step": 1}),
    case("TOPO-GPU-ID-RANGE", {"tp_size": 8, "base_gpu_id": 4}, {"base_gpu_id": 0}),
    # Stage 0 on GPUs 0 and 2, stage 1 on GPUs 2 and 4 (meshsat's advice: SGLang starts both).
    case("TOPO-STAGE-GPUS", {"tp_size": 2, "pp_size": 2, "gpu_id_step": 2}, {"gpu_id_step": 1}),
    case("TOPO-MOE-DENSE-TP", {"tp_size": 4, "moe_dense_tp_size": 2}, {"moe_dense_tp_size": 4}),
    case(
        "TOPO-ATTN-TP",
        {"tp_size": 8, "attn_cp_size": 4, "dp_size": 4, "enable_dp_attention": True},
        {"dp_size": 2},
        "CP-DPCP-DIV",
    ),
    case("TOPO-MOE-TP", {"tp_size": 4, "ep_size": 3}, {"ep_size": 2}),
    case(
        "TOPO-PP-SPEC",
        {"tp_size": 2, "pp_size": 2, "speculative_algorithm": "EAGLE"},
        {"pp_size": 1},
    ),
    case(
        "TOPO-TBO-DP-ATTN",
        {"tp_size": 4, "enable_two_batch_overlap": True},
        {"moe_a2a_backend": "deepep"},
    ),
    case(
        "TOPO-A2A-FLASHINFER",
        {"tp_size": 4, "moe_a2a_backend": "flashinfer", "moe_runner_backend": "flashinfer_cutlass"},
        {"dp_size": 4, "enable_dp_attention": True},
    ),
    # --- all-to-all backends and their MoE runners ---------------------------------------
    case(
        "A2A-DEEPEP-V2-RUNNER",
        {
            "tp_size": 4,
            "moe_a2a_backend": "deepep_v2",
            "moe_runner_backend": "triton",
            "chunked_prefill_size": 256,
        },
        {"moe_runner_backend": "deep_gemm"},
    ),
    case(
        "A2A-FLASHINFER-RUNNER",
        {"tp_size": 4, "dp_size": 4, "enable_dp_attention": True, "moe_a2a_backend": "flashinfer"},
        {"moe_runner_backend": "flashinfer_trtllm"},
    ),
    case(
        "A2A-PPLX-DP-ATTN",
        {"tp_size": 4, "moe_a2a_backend": "pplx", "chunked_prefill_size": 128},
        {"dp_size": 2, "enable_dp_attention": True},
    ),
    case(
        "A2A-PPLX-DISPATCH",
        {"tp_size": 4, "dp_size": 2, "enable_dp_attention": True, "moe_a2a_backend": "pplx"},
        {"chunked_prefill_size": 256},
    ),
    case(
        "A2A-PPLX-RUNNER",
        {
            "tp_size": 4,
            "dp_size": 2,
            "enable_dp_attention": True,
            "moe_a2a_backend": "pplx",
            "moe_runner_backend": "triton",
            "chunked_prefill_size": 128,
        },
        {"moe_runner_backend": "auto"},
    ),
    # --- MoE runner kernels -------------------------------------------------------------
    case(
        "MOE-CUTLASS-EP",
        {"tp_size": 4, "ep_size": 2, "moe_runner_backend": "flashinfer_cutlass"},
        {"ep_size": 4},
    ),
    case(
        "MOE-CUTEDSL-EP",
        {
            "tp_size": 4,
            "ep_size": 2,
            "moe_runner_backend": "flashinfer_cutedsl",
            "quantization": "modelopt_fp4",
        },
        {"ep_size": 1},
    ),
    case(
        "MOE-CUTEDSL-A2A",
        {
            "tp_size": 4,
            "moe_a2a_backend": "mooncake",
            "moe_runner_backend": "flashinfer_cutedsl",
            "quantization": "modelopt_fp4",
        },
        {"moe_a2a_backend": "none"},
    ),
    # --- encoder disaggregation ----------------------------------------------------------
    case(
        "LMO-NOT-LANGUAGE-ONLY",
        {"language_model_only": True, "language_only": True},
        {"language_only": False},
    ),
    case(
        "LMO-NO-DP-ENCODER",
        {"language_model_only": True, "mm_enable_dp_encoder": True},
        {"mm_enable_dp_encoder": False},
    ),
    case(
        "LMO-NO-PD",
        {"language_model_only": True, "disaggregation_mode": "decode"},
        {"disaggregation_mode": "null"},
    ),
    case(
        "LMO-ARCH",
        {"language_model_only": True},
        {"language_model_only": False},
        model={"architecture": "LlamaForCausalLM"},
    ),
    case(
        "EPD-LANGUAGE-ONLY-ARCH",
        {"language_only": True},
        {"language_only": False},
        model={"architecture": "LlamaForCausalLM"},
    ),
    # --- model facts ----------------------------------------------------------------------
    case("MODEL-HEADS", {"tp_size": 4}, {"tp_size": 2}, model={"num_attention_heads": 6}),
    case(
        "MODEL-KV-HEADS",
        {"tp_size": 4},
        {"tp_size": 2},
        model={"num_attention_heads": 32, "num_key_value_heads": 6},
    ),
    case(
        "MODEL-HEADS-TP",
        {"tp_size": 8, "dp_size": 2, "enable_dp_attention": True},
        {"tp_size": 4},
        model={"num_attention_heads": 12, "num_key_value_heads": 4, "attention_over_tp": True},
    ),
    case("MODEL-EXPERTS", {"tp_size": 4, "ep_size": 4}, {"ep_size": 2}, model={"num_experts": 6}),
    case("MODEL-PP-LAYERS", {"pp_size": 4}, {"pp_size": 2}, model={"num_hidden_layers": 2}),
    # --- context length and KV cache (catalogue/kv_cache.py) ------------------------------
    case(
        "MODEL-CONTEXT-LENGTH",
        {"context_length": 1000000},
        {"context_length": 131072},
        model={"max_context_length": 131072},
    ),
    case(
        "MODEL-DSA-KV-DTYPE",
        {"tp_size": 8, "kv_cache_dtype": "fp8_e5m2"},
        {"kv_cache_dtype": "fp8_e4m3"},
        model={"architecture": "DeepseekV32ForCausalLM", "is_deepseek_dsa": True},
    ),
    case("SWA-RATIO-RANGE", {"swa_full_tokens_ratio": 1.5}, {"swa_full_tokens_ratio": 1.0}),
    # --- KV page size (catalogue/page_size.py): the resolved page divides the chunk -------
    case("KV-CHUNK-PAGE", {"page_size": 16, "chunked_prefill_size": 1000}, {"page_size": 8}),
    # SGLang's own chunk (2048 to 16384 by GPU memory) over DP attention 3: 682, 1365, 2730,
    # 5461, none a multiple of 64 (0.5.23 measured: 1365): SGLang's error; 576 // 3 = 192 is.
    case(
        "KV-CHUNK-DEFAULT-PAGE-CERTAIN",
        {"tp_size": 3, "dp_size": 3, "enable_dp_attention": True, "page_size": 64},
        {"chunked_prefill_size": 576},
    ),
    # Pages of 4096 with the GPU's memory unknown: 2048 fails, 4096 to 16384 pass (advice).
    case("KV-CHUNK-DEFAULT-PAGE", {"page_size": 4096}, {"chunked_prefill_size": 4096}),
    # --- FP4/MXFP8 KV caches (handle_kv4_compatibility, handle_mxfp8_kv_cache_compatibility)
    case(
        "KV4-NVFP4-BLACKWELL",
        {"kv_cache_dtype": "nvfp4", "platform": "cuda", "gpu_sm": 90},
        {"gpu_sm": 100},
    ),
    # A split FA3 prefill beside an unset base on Hopper: the base resolves to Hopper's FA3
    # (R-ATTN-BACKEND), so the pair is equal and takes the list; a Triton prefill makes the
    # pair differ (a warning only).
    case(
        "KV4-MHA-BACKEND",
        {
            "kv_cache_dtype": "fp4_mx_block16",
            "platform": "cuda",
            "gpu_sm": 90,
            "prefill_attention_backend": "fa3",
        },
        {"prefill_attention_backend": "triton"},
        model={"architecture": "LlamaForCausalLM"},
    ),
    case(
        "KV4-MLA-BACKEND",
        {"kv_cache_dtype": "fp4_mx_block16", "platform": "cuda", "attention_backend": "fa3"},
        {"attention_backend": "flashinfer"},
        model={"architecture": "DeepseekV3ForCausalLM"},
    ),
    # An FA4 prefill asks the decode back-end of its own list (a pair that differs otherwise
    # only warns).
    case(
        "KV4-FA4-MHA-BACKEND",
        {
            "kv_cache_dtype": "fp4_mx_block16",
            "platform": "cuda",
            "prefill_attention_backend": "fa4",
            "decode_attention_backend": "fa3",
        },
        {"decode_attention_backend": "triton"},
        model={"architecture": "LlamaForCausalLM"},
    ),
    case(
        "KV4-FA4-MLA-BACKEND",
        {
            "kv_cache_dtype": "fp4_mx_block16",
            "platform": "cuda",
            "prefill_attention_backend": "fa4",
            "decode_attention_backend": "fa3",
        },
        {"decode_attention_backend": "flashinfer"},
        model={"architecture": "DeepseekV3ForCausalLM"},
    ),
    case("KV4-CUDA", {"kv_cache_dtype": "fp4_mx_block16", "platform": "hip"}, {"platform": "cuda"}),
    case(
        "KV-MXFP8-BLACKWELL",
        {"kv_cache_dtype": "mxfp8", "platform": "cuda", "gpu_sm": 90},
        {"gpu_sm": 100},
    ),
    case(
        "A2A-MORI-DISPATCH",
        {"tp_size": 8, "ep_size": 8, "moe_a2a_backend": "mori", "chunked_prefill_size": 8192},
        {"chunked_prefill_size": 4096},
    ),
    # --- caches and scheduling (catalogue/serving.py) ----------------------------------------
    case(
        "HICACHE-BUFFER-STORAGE",
        {"enable_hierarchical_cache": True, "hicache_host_memory_mode": "buffer_only"},
        {"hicache_storage_backend": "file"},
    ),
    case(
        "HICACHE-BUFFER-DECODE",
        {
            "disaggregation_mode": "decode",
            "hicache_host_memory_mode": "buffer_only",
            "hicache_storage_backend": "file",
        },
        {"hicache_host_memory_mode": "cache"},
    ),
    # DeepSeek V3 without its facts: whether it is MLA is not known (HICACHE-DCP-MLA quiet).
    case(
        "HICACHE-DCP-STORAGE",
        {
            "tp_size": 4,
            "dcp_size": 2,
            "enable_hierarchical_cache": True,
            "hicache_storage_backend": "file",
        },
        {"hicache_storage_backend": None},
        model=DSV3,
    ),
    case(
        "HICACHE-DCP-SPEC",
        {
            "tp_size": 4,
            "dcp_size": 2,
            "enable_hierarchical_cache": True,
            "speculative_algorithm": "EAGLE",
        },
        {"speculative_algorithm": "DSPARK"},
        model=DSV3,
    ),
    case(
        "HICACHE-DCP-MLA",
        {"tp_size": 4, "dcp_size": 2, "enable_hierarchical_cache": True},
        {"dcp_size": 1},
        model={"architecture": "LlamaForCausalLM", "mla_attention": False},
    ),
    case(
        "HICACHE-DCP-LMCACHE",
        {
            "tp_size": 4,
            "dcp_size": 2,
            "enable_hierarchical_cache": True,
            "enable_lmcache": True,
        },
        {"enable_lmcache": False},
        model=DSV3,
    ),
    # HiSparse needs the radix cache off, HiCache on: they never hold together.
    case(
        "HICACHE-DCP-HISPARSE",
        {
            "tp_size": 4,
            "dcp_size": 2,
            "enable_hierarchical_cache": True,
            "enable_hisparse": True,
        },
        {"enable_hisparse": False},
        "HISPARSE-RADIX",
        model=DSV32,
    ),
    case(
        "HOST-POOL-DECODE",
        {"disaggregation_decode_retraction_backup": "host_pool"},
        {"disaggregation_decode_retraction_backup": "cpu_tensor"},
    ),
    case(
        "HOST-POOL-DCP",
        {
            "tp_size": 4,
            "dcp_size": 2,
            "disaggregation_mode": "decode",
            "disaggregation_decode_retraction_backup": "host_pool",
        },
        {"disaggregation_decode_retraction_backup": "cpu_tensor"},
    ),
    case(
        "HOST-POOL-PRIORITY",
        {
            "disaggregation_mode": "decode",
            "disaggregation_decode_retraction_backup": "host_pool",
            "enable_priority_scheduling": True,
        },
        {"disable_priority_preemption": True},
    ),
    case(
        "HICACHE-RADIX",
        {"enable_hierarchical_cache": True, "disable_radix_cache": True},
        {"disable_radix_cache": False},
    ),
    case(
        "DECODE-OFFLOAD-DECODE",
        {"disaggregation_decode_enable_offload_kvcache": True, "hicache_storage_backend": "file"},
        {"disaggregation_mode": "decode"},
    ),
    case(
        "DECODE-OFFLOAD-STORAGE",
        {"disaggregation_mode": "decode", "disaggregation_decode_enable_offload_kvcache": True},
        {"hicache_storage_backend": "file"},
    ),
    case(
        "DECODE-OFFLOAD-HOST-POOL",
        {
            "disaggregation_mode": "decode",
            "disaggregation_decode_enable_offload_kvcache": True,
            "hicache_storage_backend": "file",
            "disaggregation_decode_retraction_backup": "host_pool",
        },
        {"disaggregation_decode_retraction_backup": "cpu_tensor"},
    ),
    case(
        "HISPARSE-MODEL",
        {"enable_hisparse": True, "disable_radix_cache": True},
        {"enable_hisparse": False},
        model={"architecture": "LlamaForCausalLM"},
    ),
    case("HISPARSE-RADIX", {"enable_hisparse": True}, {"disable_radix_cache": True}, model=DSV32),
    case("PP-MICRO-BATCH", {"pp_max_micro_batch_size": 0}, {"pp_max_micro_batch_size": 4}),
    case(
        "GRAPH-PADDING-COMPILE",
        {"disable_cuda_graph_padding": True, "enable_torch_compile": True},
        {"enable_torch_compile": False},
    ),
    case(
        "PP-MIN-FREE-SLOTS",
        {"tp_size": 2, "pp_size": 2, "min_free_slots_delay": 4},
        {"min_free_slots_delay": None},
    ),
    case(
        "PDMUX-PP",
        {
            "pp_size": 2,
            "enable_pdmux": True,
            "chunked_prefill_size": -1,
            "disable_overlap_schedule": True,
        },
        {"pp_size": 1},
    ),
    case(
        "PDMUX-CHUNKED",
        {"enable_pdmux": True, "disable_overlap_schedule": True},
        {"chunked_prefill_size": -1},
    ),
    case(
        "PDMUX-DISAGG",
        {
            "enable_pdmux": True,
            "chunked_prefill_size": -1,
            "disable_overlap_schedule": True,
            "disaggregation_mode": "prefill",
        },
        {"disaggregation_mode": "null"},
    ),
    case(
        "PDMUX-OVERLAP",
        {"enable_pdmux": True, "chunked_prefill_size": -1},
        {"disable_overlap_schedule": True},
    ),
    case(
        "PRIORITY-SCHEDULE-POLICY",
        {"enable_priority_scheduling": True, "schedule_policy": "lpm"},
        {"schedule_policy": "lof"},
    ),
    case(
        "PRIORITY-RETRACTION",
        {"retraction_policy": "priority"},
        {"enable_priority_scheduling": True},
    ),
    # --- weight shapes (catalogue/weight_shapes.py) ------------------------------------------
    case(
        "WEIGHT-DENSE-MLP-SPLIT",
        {"tp_size": 4},
        {"tp_size": 2},
        model={"dense_intermediate_size": 6},
    ),
    case(
        "WEIGHT-SHARED-EXPERT-SPLIT",
        {"tp_size": 4},
        {"moe_a2a_backend": "deepep", "ep_size": 4},
        model={"shared_expert_intermediate_size": 6},
    ),
    case(
        "WEIGHT-EXPERTS-SPLIT", {"tp_size": 4}, {"ep_size": 4}, model={"moe_intermediate_size": 6}
    ),
    case(
        "QUANT-BLOCK-DENSE-MLP",
        {"tp_size": 4},
        {"moe_dense_tp_size": 1},
        # A model file that replicates its dense MLP under --moe-dense-tp-size 1 (DeepSeek's).
        model={
            **FP8_BLOCK,
            "dense_intermediate_size": 256,
            "quant_dense_mlp": True,
            "dense_mlp_fully_dp": True,
        },
    ),
    case(
        "QUANT-BLOCK-SHARED-EXPERT",
        {"tp_size": 4},
        {"tp_size": 2},
        model={**FP8_BLOCK, "shared_expert_intermediate_size": 256, "quant_shared_experts": True},
    ),
    case(
        "QUANT-BLOCK-EXPERTS",
        {"tp_size": 4},
        {"ep_size": 4},
        model={**FP8_BLOCK, "moe_intermediate_size": 256, "quant_experts": True},
    ),
    case(
        "QUANT-BLOCK-MLA-Q",
        {"tp_size": 4},
        {"tp_size": 2},
        model={
            **FP8_BLOCK,
            "num_attention_heads": 4,
            "mla_q_head_dim": 192,
            "quant_attention": True,
        },
    ),
    case(
        "QUANT-BLOCK-LINEAR-ATTN",
        {"tp_size": 8},
        {"tp_size": 4},
        model={
            **FP8_BLOCK,
            "linear_attn_key_dim": 512,
            "linear_attn_value_dim": 1024,
            "quant_linear_attention": True,
        },
    ),
    case(
        "WEIGHT-VISION-HEADS",
        {"tp_size": 8},
        {"tp_size": 4},
        model={"vision_num_heads": 12},
    ),
    case(
        "MOE-MARLIN-A2A",
        {"tp_size": 8, "ep_size": 8, "moe_a2a_backend": "deepep", "gpu_sm": 90},
        {"moe_a2a_backend": "none"},
        model={"quant_wna16_experts": True},
    ),
    case(
        "MOE-TRITON-WNA16",
        {"tp_size": 8, "moe_runner_backend": "triton"},
        {"moe_runner_backend": "auto"},
        model={"quant_wna16_experts": True},
    ),
    case(
        "WEIGHT-VISION-MLP",
        {"tp_size": 32, "nnodes": 4, "enable_dp_attention": True, "dp_size": 32},
        {"tp_size": 16, "nnodes": 2, "dp_size": 16},
        model={"vision_intermediate_size": 4304},
    ),
    case(
        "QUANT-BLOCK-LINEAR-ATTN-BA",
        {"tp_size": 4},
        {"tp_size": 2},
        model={**FP8_BLOCK, "linear_attn_value_heads": 768, "quant_linear_attn_ba": True},
    ),
    case(
        "QUANT-BLOCK-LINEAR-ATTN-OUT",
        {"tp_size": 8},
        {"tp_size": 4},
        model={
            **FP8_BLOCK,
            "quant_block_n": 64,
            "linear_attn_key_dim": 512,
            "linear_attn_value_dim": 512,
            "quant_linear_attention": True,
        },
    ),
    case(
        "QUANT-GROUP-DENSE-MLP",
        {"tp_size": 8},
        {"tp_size": 2},
        model={
            "quant_method": "gptq",
            "quant_group_size": 128,
            "dense_intermediate_size": 768,
            "quant_dense_mlp": True,
        },
    ),
    case(
        "QUANT-GROUP-EXPERTS",
        {"tp_size": 4},
        {"tp_size": 2},
        model={
            "quant_method": "awq",
            "quant_group_size": 128,
            "moe_intermediate_size": 192,
            "quant_experts": True,
        },
    ),
    case(
        "QUANT-NVFP4-DENSE-MLP",
        {"tp_size": 4},
        {"tp_size": 2},
        model={"quant_group_k": 16, "dense_intermediate_size": 96, "quant_dense_mlp": True},
    ),
)

#: Warnings: a layout that triggers each, which stays valid.
WARNING_CASES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("MM-DP-ENCODER", {"mm_enable_dp_encoder": True}),
    ("DWDP-DISAGG-NULL", {"tp_size": 4, "dwdp_size": 4}),
    ("EEP-REJOIN-DEPRECATED", {"elastic_ep_rejoin": True, "elastic_ep_backend": "mooncake"}),
    ("QUANT-NOT-CHECKED", {}),
    (
        "MODEL-CONTEXT-LENGTH-OVERRIDE",
        {"context_length": 1000000, "env_allow_overwrite_longer_context_len": True},
    ),
)
#: The model facts a warning case needs (the others need none).
WARNING_MODELS: dict[str, dict[str, Any]] = {
    "QUANT-NOT-CHECKED": {"quant_not_checked": "unknown quantization scheme gguf"},
    "MODEL-CONTEXT-LENGTH-OVERRIDE": {"max_context_length": 131072},
}
