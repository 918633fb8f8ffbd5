"""Hypothesis strategies over raw environments, biased towards the interesting regions:
most fields at their defaults, sizes drawn from divisor-rich small numbers."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from meshsat.solver.lang.fields import SPECS
from meshsat.solver.lang.model_spec import (
    CP_V2_DEFAULT_ARCHITECTURES,
    DSA_ARCHITECTURES,
    MIMO_V2_ARCHITECTURES,
    MLA_ARCHITECTURES,
)

SIZES = (1, 1, 1, 2, 2, 3, 4, 4, 6, 8, 8, 12, 16)
#: A theme that names DeepSeek V3.2 (a DSA model).
DSV32_ARCH: dict[str, Any] = {"architecture": "DeepseekV32ForCausalLM", "is_deepseek_dsa": True}
ARCHITECTURES = (
    None,
    None,
    "LlamaForCausalLM",
    *MLA_ARCHITECTURES,
    *DSA_ARCHITECTURES,
    *MIMO_V2_ARCHITECTURES,
    *CP_V2_DEFAULT_ARCHITECTURES,
)
OPEN_STRINGS: dict[str, tuple[Any, ...]] = {
    "eplb_algorithm": (
        "auto",
        "auto",
        "elasticity_aware",
        "elasticity_aware_hierarchical",
        "deepseek",
    ),
    "init_expert_location": ("trivial", "trivial", "/path/to/placement.json"),
    # flashmla, trtllm_mha and cutlass_mla force their own KV page (R-PAGE-SIZE), fa4 on SM100
    # too; flashinfer, fa3 and triton take a draft tree over pages (SPEC-EAGLE-PAGE-TREE).
    "attention_backend": (
        None,
        None,
        "fa3",
        "dsa",
        "dsv4",
        "flashinfer",
        "triton",
        "torch_native",
        "flashmla",
        "trtllm_mha",
        "cutlass_mla",
        "fa4",
    ),
    # Split back-ends: mostly unset, equal to each other now and then, and the GPU- and
    # phase-bound ones (TRTLLM, CuteDSL, FA4) the attention and KV4 rules read.
    "prefill_attention_backend": (None, None, None, "fa3", "fa4", "triton", "trtllm_mha"),
    "decode_attention_backend": (
        None,
        None,
        None,
        "fa3",
        "triton",
        "trtllm_mha",
        "trtllm_mla",
        "cutedsl_mla",
    ),
    # NEXTN is EAGLE's alias; NGRAM and STANDALONE refuse attention DP; SGLang upper-cases
    # the name (0.5.x: R-SPEC-CASE); DFLASH and DSPARK check the device, DP and PP, UNO its
    # adapter, tree, TP/PP 1 and FA3 (0.5.23).
    "speculative_algorithm": (
        *(None, None, None, "EAGLE", "NEXTN", "EAGLE3", "STANDALONE", "NGRAM"),
        *("ngram", "nextn", "DFLASH", "DSPARK", "UNO"),
    ),
    "architecture": ARCHITECTURES,
    "quant_method": (None, None, "fp8", "modelopt_fp4", "awq"),
    "quant_not_checked": (None, None, "unknown quantization scheme gguf"),
    "kv_cache_dtype": (
        "auto",
        "auto",
        "fp8_e4m3",
        "fp8_e5m2",
        "bf16",
        "bfloat16",
        "nvfp4",
        "fp4_mx_block16",
    ),
    # PD transfer backends: fake (a prefill refuses it), mooncake_tcp (0.5.x's Mooncake
    # over TCP), nixl (0.4.6.post5's Mooncake-only DP check skips it).
    "disaggregation_transfer_backend": ("mooncake", "mooncake", "nixl", "fake", "mooncake_tcp"),
    # Priority scheduling takes fcfs and lof only (PRIORITY-SCHEDULE-POLICY).
    "schedule_policy": ("fcfs", "fcfs", "lof", "lpm", "priority"),
    # HiCache's storage tier: set or not is what the HICACHE-* rules read.
    "hicache_storage_backend": (None, None, "file", "mooncake"),
}
# A name SGLang does not know (SPEC-UNKNOWN-ALGORITHM), and flex attention, which takes no
# speculative decoding (ATTN-FLEX-SPEC); --enable-deterministic-inference (a plain flag,
# drawn like every flag) reads the same back-ends.
OPEN_STRINGS["speculative_algorithm"] += ("MTP",)
OPEN_STRINGS["attention_backend"] += ("flex_attention",)
SPECIAL_INTS: dict[str, tuple[Any, ...]] = {
    "node_rank": (0, 0, 1, 2),
    # SGLang's own bounds (>= 0, >= 1) and ids that run past a node of 8 or 4 GPUs.
    "base_gpu_id": (0, 0, 1, 2, 4, 6, -1),
    "gpu_id_step": (1, 1, 2, 3, 0),
    # SGLang tests the rank's truth: 0 is as good as none (LORA-RANK-MODULES).
    "max_lora_rank": (None, None, 0, 8, 64),
    "ep_join_rank_offset": (0, 0, 0, 2, 4, 8, -1),
    "elastic_ep_scale_timeout": (600, 600, 0),
    "tokenizer_worker_num": (1, 1, 2),
    "max_ep_size": (None, None, 1, 4, 8, 16, 0),
    "elastic_ep_initial_size": (None, None, 2, 4),
    # 1000: no power of two past 8 divides it (KV-CHUNK-PAGE); -1: chunked prefill off.
    "chunked_prefill_size": (None, 8192, 4096, 65536, 1000, -1),
    # Typed pages on both sides of what the back-ends force (R-PAGE-SIZE).
    "page_size": (None, None, 1, 16, 64),
    # GPU classes the rules tell apart (Hopper; Blackwell, whose default back-ends force a
    # KV page), mostly unknown.
    "gpu_sm": (None, None, None, 90, 100),
    "moe_dense_tp_size": (None, None, 1, 2, 4),
    "expert_distribution_recorder_buffer_size": (None, None, 500),
    "eplb_rebalance_num_iterations": (None, None, 200),
    "num_attention_heads": (None, 6, 8, 32, 64, 128),
    "num_key_value_heads": (None, 1, 4, 6, 8, 128),
    "num_experts": (None, 6, 8, 64, 256),
    "num_hidden_layers": (None, 2, 61),
    "gpus_per_node": (8, 8, 4, 0),
    # Weight shapes: real widths (DeepSeek, Qwen3-MoE, Qwen3-Next, gpt-oss) and blocks.
    "dense_intermediate_size": (None, 18432, 12288, 1536, 6),
    "moe_intermediate_size": (None, 2048, 1536, 512, 2880),
    "shared_expert_intermediate_size": (None, 2048, 512),
    "mla_q_head_dim": (None, 192),
    "quant_block_n": (None, 128, 128, 64),
    "quant_block_k": (None, 128, 128, 64),
    "quant_group_k": (None, 16),
    "linear_attn_key_dim": (None, 2048, 512),
    "linear_attn_value_dim": (None, 4096, 1024),
    "linear_attn_value_heads": (None, 32, 256),
    "quant_group_size": (None, 128, 64),
    "vision_num_heads": (None, 16, 12),
    "vision_intermediate_size": (None, 4304, 4096),
    # Speculative parameters on both sides of SGLang's: all three unset (it picks them),
    # a chain (top-k 1) or a tree, over pages or not (page_size above).
    "speculative_num_steps": (None, None, 3, 5),
    "speculative_eagle_topk": (None, None, 1, 4),
    "speculative_num_draft_tokens": (None, None, 4, 8, 130),
    "speculative_ngram_max_bfs_breadth": (10, 10, 1, 4),
    # A launch's --context-length on both sides of the model's (MODEL-CONTEXT-LENGTH).
    "context_length": (None, None, 4096, 131072, 1000000),
    "max_context_length": (None, 2048, 131072),
    # SGLang's bounds: a micro-batch of at least 1 (PP-MICRO-BATCH), no slot delay with PP.
    "pp_max_micro_batch_size": (None, None, 4, 1, 0, -1),
    "min_free_slots_delay": (None, None, 4),
}
#: Ratios on both sides of SWA-RATIO-RANGE's (0, 1] and on its edges.
SPECIAL_FLOATS: dict[str, tuple[Any, ...]] = {
    "swa_full_tokens_ratio": (0.8, 0.8, 1.0, 1.5, 0.0, -0.5),
}


#: Model facts of the weight-shape rules: drawn as a group, so that adding them does not
#: thin out how often every other field moves.
WEIGHT_FACTS = (
    "dense_intermediate_size",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "shared_experts_fusion",
    "dense_mlp_fully_dp",
    "vision_num_heads",
    "vision_dp_encoder",
    "vision_intermediate_size",
    "vision_needs_multimodal",
    "quant_wna16_experts",
    "mla_q_head_dim",
    "linear_attn_key_dim",
    "linear_attn_value_dim",
    "linear_attn_value_heads",
    "quant_method",
    "quant_block_n",
    "quant_block_k",
    "quant_group_k",
    "quant_group_size",
    "quant_not_checked",
    "quant_attention",
    "quant_linear_attention",
    "quant_linear_attn_ba",
    "quant_dense_mlp",
    "quant_experts",
    "quant_shared_experts",
)
#: LoRA's adapters, back-end and start-up shapes: set by the LoRA theme (`_themes`) or drawn
#: as a group, for the same reason (the LoRA checks read them together: the lora_* MoE
#: runners with the back-end, LORA-RANK-MODULES the adapters with the rank and modules).
LORA_FIELDS = ("lora_paths", "lora_backend", "max_lora_rank", "lora_target_modules")
#: Speculative decoding's parameters and the page size its checks read: drawn as a group
#: too (a tree needs several at once: the algorithm, steps, top-k, pages).
SPECULATIVE = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_ngram_max_bfs_breadth",
    "page_size",
    "uno_lora_path",
    "enable_multi_layer_eagle",
)
#: The cache and scheduling fields (catalogue/serving.py), drawn as a group too: they
#: would otherwise thin out the draws of every layout field.
SERVING_FIELDS = (
    "enable_hierarchical_cache",
    "disable_radix_cache",
    "hicache_host_memory_mode",
    "hicache_storage_backend",
    "disaggregation_decode_enable_radix_cache",
    "disaggregation_decode_retraction_backup",
    "schedule_policy",
    "enable_priority_scheduling",
    "disable_priority_preemption",
    "retraction_policy",
    "pp_max_micro_batch_size",
    "min_free_slots_delay",
    "disable_overlap_schedule",
    "enable_pdmux",
    "enable_torch_compile",
    "disable_cuda_graph_padding",
    "enable_lmcache",
    "enable_unified_memory",
    "disaggregation_decode_enable_offload_kvcache",
    "enable_hisparse",
    "enable_mixed_chunk",
    "mla_attention",
)
_UNIFORM = sorted(
    set(SPECS) - set(WEIGHT_FACTS) - set(SPECULATIVE) - set(LORA_FIELDS) - set(SERVING_FIELDS)
)
#: Combinations the serving rules need at once (a PD decode with buffer_only HiCache and
#: storage; HiCache under decode CP on a non-MLA model with a draft, on ROCm with FlashInfer's
#: DCP backend; a decode's host-pool backup under decode CP with priority scheduling;
#: PD-Multiplexing with PP, a draft and a slot delay, torch.compile without graph padding),
#: drawn inside the serving group so that the layout themes keep their share of the draws.
SERVING_THEMES: tuple[dict[str, Any], ...] = (
    {
        "enable_hierarchical_cache": True,
        "hicache_host_memory_mode": "buffer_only",
        "hicache_storage_backend": "file",
        "disaggregation_mode": "decode",
    },
    {
        "enable_hierarchical_cache": True,
        "dcp_size": 2,
        "hicache_storage_backend": "file",
        "speculative_algorithm": "EAGLE",
        "mla_attention": False,
        "dcp_comm_backend": "fi_a2a",
        "platform": "hip",
    },
    {
        "disaggregation_mode": "decode",
        "disaggregation_decode_retraction_backup": "host_pool",
        "dcp_size": 2,
        "enable_priority_scheduling": True,
    },
    # LMCache beside HiCache under decode CP, on a PD server with a draft and attention DP;
    # a decode's KV offload with the host-pool backup and no storage; HiSparse with the
    # decode radix cache (QA s2: catalogue/serving.py's LMCACHE-*, DECODE-OFFLOAD-*,
    # HISPARSE-* and PD-DECODE-RADIX-HISPARSE).
    {
        "enable_lmcache": True,
        "enable_hierarchical_cache": True,
        "dcp_size": 2,
        "disaggregation_mode": "prefill",
        "speculative_algorithm": "EAGLE",
        "enable_dp_attention": True,
    },
    {
        "disaggregation_mode": "decode",
        "disaggregation_decode_enable_offload_kvcache": True,
        "disaggregation_decode_retraction_backup": "host_pool",
        "enable_hisparse": True,
        "disaggregation_decode_enable_radix_cache": True,
        "enable_mixed_chunk": True,
    },
    {
        "enable_pdmux": True,
        "pp_size": 2,
        "speculative_algorithm": "EAGLE",
        "min_free_slots_delay": 4,
        "enable_torch_compile": True,
        "disable_cuda_graph_padding": True,
    },
)


def _field(name: str, zero_sizes: bool) -> st.SearchStrategy[Any]:
    spec = SPECS[name]
    if name in OPEN_STRINGS:
        return st.sampled_from(OPEN_STRINGS[name])
    if name in SPECIAL_INTS:
        return st.sampled_from(SPECIAL_INTS[name])
    if name in SPECIAL_FLOATS:
        return st.sampled_from(SPECIAL_FLOATS[name])
    if spec.kind == "bool":
        return st.sampled_from((spec.default, spec.default, spec.default, not spec.default))
    if spec.choices:
        return st.sampled_from((spec.default, spec.default, *spec.choices))
    if spec.kind == "float":
        return st.sampled_from((1.0, 0.5))
    if spec.kind == "int":
        return st.sampled_from(SIZES + ((0,) if zero_sizes else ()))
    raise AssertionError(f"no strategy for {name}")


def _themes() -> tuple[dict[str, Any], ...]:
    from tests.rule_cases import DWDP, EEP_JOINER, EEP_PRIMARY

    prefill_cp = {
        "enable_prefill_cp": True,
        "cp_strategy": "zigzag",
        "attn_cp_size": 2,
        "tp_size": 8,
    }
    legacy = {"enable_prefill_context_parallel": True, "tp_size": 4, "attn_cp_size": 2}
    dcp = {"tp_size": 4, "dcp_size": 2, "dcp_comm_backend": "a2a"}
    # Checkpoints whose shape rules need several facts at once: a block-FP8 hybrid
    # (GatedDeltaNet widths of Qwen3-Next, in_proj_ba quantized) and an AWQ MoE.
    hybrid = {
        "tp_size": 8,
        "quant_method": "fp8",
        "quant_block_n": 128,
        "quant_block_k": 128,
        "linear_attn_key_dim": 512,
        "linear_attn_value_dim": 1024,
        "linear_attn_value_heads": 32,
        "quant_linear_attention": True,
        "quant_linear_attn_ba": True,
    }
    awq = {
        "tp_size": 8,
        "quant_method": "awq",
        "quant_group_size": 128,
        "dense_intermediate_size": 768,
        "moe_intermediate_size": 192,
        "quant_dense_mlp": True,
        "quant_experts": True,
    }
    # Rules that need two uncommon values at once: an all-to-all backend with its runner
    # drawn apart, and DSA's own prefill-CP checks (the theme names the architecture).
    a2a = [{"tp_size": 8, "ep_size": 8, "moe_a2a_backend": b} for b in ("pplx", "deepep_v2")]
    mori = {"tp_size": 8, "ep_size": 8, "moe_a2a_backend": "mori", "chunked_prefill_size": 8192}
    dsa_cp = {**prefill_cp, **DSV32_ARCH}
    # FP4/MXFP8 KV caches with a Hopper GPU or a back-end that does not read them.
    kv = [
        {"kv_cache_dtype": "fp4_mx_block16", "attention_backend": "fa3"},
        {"kv_cache_dtype": "nvfp4", "gpu_sm": 90},
        {"kv_cache_dtype": "mxfp8", "gpu_sm": 90},
    ]
    # Pairs the draws seldom meet: FlashInfer's all-to-all (its DP-attention width and
    # runner), PP with speculative decoding, decode CP's FlashInfer all-to-all off CUDA, a
    # language-model-only server's flags, the CuteDSL runner under another all-to-all.
    pairs = [
        {"tp_size": 8, "ep_size": 8, "moe_a2a_backend": "flashinfer"},
        {"pp_size": 2, "speculative_algorithm": "EAGLE"},
        # QA s3: MiMo-V2's override makes that EAGLE multi-layer, which PP refuses even on a
        # PD prefill server (TOPO-PP-SPEC); a draft tree under DSA decode CP (DCP-DSA-TOPK);
        # the FP8 Cutlass runner under an all-to-all backend (MOE-CUTLASS-FP8-EP reads the
        # ep_size before the backend's ep = tp).
        {
            "pp_size": 2,
            "speculative_algorithm": "EAGLE",
            "disaggregation_mode": "prefill",
            "architecture": "MiMoV2FlashForCausalLM",
        },
        {**dcp, **DSV32_ARCH, "speculative_eagle_topk": 4},
        {"tp_size": 8, "moe_a2a_backend": "deepep", "moe_runner_backend": "cutlass"}
        | {"quantization": "fp8"},
        {**dcp, "dcp_comm_backend": "fi_a2a", "platform": "hip"},
        {"language_model_only": True, "language_only": True, "mm_enable_dp_encoder": True},
        {**mori, "moe_runner_backend": "flashinfer_cutedsl"},
        {**EEP_PRIMARY, "enable_eplb": True, "eplb_algorithm": "deepseek"},
        {
            "tp_size": 8,
            "dp_size": 2,
            "enable_dp_attention": True,
            "attention_over_tp": True,
            "num_attention_heads": 12,
            "num_key_value_heads": 4,
        },
    ]
    # A chunk that a forced page (flashmla's 64) does not divide.
    page = {"attention_backend": "flashmla", "chunked_prefill_size": 1000}
    # LoRA adapters (--lora-paths turns LoRA on) on a lora_* MoE runner and its triton_v2
    # back-end, whose modes and weights the runner checks ask for.
    lora = {"lora_paths": True, "lora_backend": "triton_v2", "moe_runner_backend": "lora_triton"}
    return (
        *({}, {}, {}, EEP_PRIMARY, EEP_JOINER, DWDP, prefill_cp, legacy, dcp, hybrid, awq, lora),
        # DWDP and prefill CP drawn twice: their many rules keep their share of the draws.
        *(*a2a, mori, dsa_cp, *kv, page, *pairs, DWDP, prefill_cp),
    )


@st.composite
def raw_envs(draw: st.DrawFn, zero_sizes: bool = True) -> dict[str, Any]:
    """A layout: defaults or a themed base (elastic EP, DWDP, prefill CP, ...), then a
    random subset of fields moved away from it."""
    env = {n: s.default for n, s in SPECS.items()}
    theme = draw(st.sampled_from(_themes()))
    arch = draw(st.sampled_from(ARCHITECTURES))
    env["architecture"] = arch
    env["is_deepseek_dsa"] = arch in DSA_ARCHITECTURES
    env.update(theme)  # a theme may name the architecture
    names = draw(st.lists(st.sampled_from(_UNIFORM), min_size=1, max_size=14, unique=True))
    if draw(st.booleans()):  # a checkpoint's weight shapes, drawn together
        names += [n for n in WEIGHT_FACTS if draw(st.booleans())]
    if draw(st.integers(0, 3)) == 0:  # speculative decoding, drawn together
        names += [n for n in SPECULATIVE if draw(st.booleans())]
    if draw(st.integers(0, 3)) == 0:  # LoRA, drawn together (LoRA on: its start-up shapes)
        names += [n for n in ("enable_lora", *LORA_FIELDS) if draw(st.booleans())]
    if draw(st.booleans()):  # cache and scheduling flags, drawn together
        env.update(draw(st.sampled_from(({}, {}, {}, {}, *SERVING_THEMES))))
        names += [n for n in SERVING_FIELDS if draw(st.booleans())]
    for core in ("tp_size", "dp_size", "attn_cp_size", "ep_size", "moe_dp_size"):
        if core not in names and draw(st.booleans()):
            names.append(core)
    for name in names:
        env[name] = draw(_field(name, zero_sizes))
    return env
