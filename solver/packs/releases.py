"""The releases meshsat knows, each as a diff against the one it descends from.

The base is the catalogue of `meshsat.solver.catalogue` (the seed's release) with the corrections
measured against the real SGLang applied to every pack (docs/rules.md §6): handlers in
pipeline order, so the first violation is SGLang's first error, and the MoE-DP checks and
MoE runner asserts on the ep_size before the all-to-all rewrite. What each later release
changed is stated rule by rule, with the SGLang function that says so (`fidelity/` records
what the real releases answered).
"""

from __future__ import annotations

from typing import get_args

from meshsat.solver.catalogue import (
    RESOLUTIONS,
    RULES,
    a2a,
    attention_backend,
    decode_cp,
    deterministic,
    kv4,
    kv_cache,
    model,
    model_arch,
    moe_kernel,
    page_size,
    quantization,
    resolution,
    serving,
    speculative,
    speculative_dflash_uno,
    speculative_names,
    topology,
    weight_shapes,
)
from meshsat.solver.catalogue.disaggregation import (
    ENCODER_DISAGG_ARCHITECTURES,
    PD_DCP_CACHE_RULES,
    PD_DECODE_CACHE_RULES,
    PD_MOONCAKE_DP_0_4,
    PD_PREFILL_FAKE,
    PREFILL_COMPLETE_RULES,
    decode_radix_spec,
    language_model_only_rules,
    language_only_rule,
    pd_dcp_backend,
)
from meshsat.solver.lang.config import A2A_BACKENDS, GraphBackend, MoeRunnerBackend, Quantization
from meshsat.solver.lang.derived import attn_dp, attn_tp, elastic_scaling
from meshsat.solver.lang.expr import divides, is_set, ite, named, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.model_spec import MIMO_V2_ARCHITECTURES
from meshsat.solver.lang.rule import Resolution, Rule, assign
from meshsat.solver.packs.pack import Pack, PackDiff, apply, base_pack

#: The release the seed's sources come from (see fidelity/README.md).
SEED_VERSION = "0.5.19"

#: SGLang's resolution pipeline runs these handlers in this order; topology and model rules
#: are launch checks, after all of them.
PIPELINE_ORDER: tuple[str, ...] = (
    "argparse",
    "handle_mega_moe",
    "handle_pd_disaggregation",
    "handle_dcp_validation",
    # The model config, with its quantization check, is first built here.
    "apply_inkling_prefill_cuda_graph_default",
    "handle_dwdp",
    "handle_model_specific_adjustments",
    # Right before the attention handler (DET-*, R-DETERMINISTIC).
    "handle_deterministic_inference",
    "handle_nvfp4_prefill_kv_dequant_dtype",
    "handle_attention_backend_compatibility",
    "handle_kv4_compatibility",
    "handle_mxfp8_kv_cache_compatibility",
    # HiCache's host memory mode and its decode-CP checks (HICACHE-*).
    "handle_hicache",
    "handle_data_parallelism",
    "_dp_lm_head_validation",
    "handle_context_parallelism",
    "handle_load_balance_method",
    "handle_moe_kernel_config",
    "handle_a2a_moe",
    "handle_eplb_and_dispatch",
    "handle_expert_distribution_metrics",
    "handle_elastic_ep",
    "validate_experimental_sgl_marlin",
    # After the parallel handlers: NGRAM/STANDALONE with attention DP, draft trees over pages;
    # 0.5.23: a decode's radix cache with speculative decoding (PD-DECODE-RADIX-SPEC).
    speculative.SRC,
    # 0.5.23: FlashInfer all-to-all needs chunked prefill (A2A-FLASHINFER-CHUNKED).
    "validate_flashinfer_a2a_token_budget",
    "handle_encoder_disaggregation",
    # The decode host pool, HiCache without the radix cache, the decode offload, then
    # --swa-full-tokens-ratio's range (SWA-RATIO-RANGE); 0.5.23: LMCache last.
    "handle_cache_compatibility",
    # The DeepEP v2 validators run last, after the speculative and encoder handlers.
    "validate_deepep_v2_speculative_draft",
    "validate_deepep_v2_dispatch_token_budget",
    "check_server_args",
    "SGLang launch checks",
    "derive_parallel_widths",
    decode_cp.INIT_SRC,
    quantization.LOAD_SRC,
    "model weight sharding",
    *weight_shapes.SOURCES,
)

#: Checked when the server launches, never in `ServerArgs` resolution (every recorded
#: release): check_server_args(), the derived widths and the model's weight sharding.
LAUNCH_SOURCES = (
    "check_server_args",
    "SGLang launch checks",
    "derive_parallel_widths",
    decode_cp.INIT_SRC,
    quantization.LOAD_SRC,
    "model weight sharding",
    *weight_shapes.SOURCES,
)
_LAUNCH_RULES = frozenset(r.id for r in RULES if r.source in LAUNCH_SOURCES)

#: --moe-runner-backend's choices (fidelity/flags/<version>.json): 0.5.23 accepts every one
#: meshsat's field has; earlier releases lack the ones it added.
_ADDED_IN_0_5_23 = ("flashinfer_megamoe", "lora_cutedsl", "lora_triton", "lora_marlin")
_RUNNERS_0_5_18 = tuple(
    r for r in get_args(MoeRunnerBackend) if r not in (*_ADDED_IN_0_5_23, "intel_xpu")
)
_RUNNERS_0_5_19 = (*_RUNNERS_0_5_18, "intel_xpu")
#: --moe-a2a-backend, --quantization and --cuda-graph-backend-* choices per release
#: (fidelity/flags/<version>.json).
_A2A_0_5_19 = tuple(b for b in A2A_BACKENDS if b != "flashinfer_megamoe")
_A2A_0_5_18 = tuple(b for b in _A2A_0_5_19 if b != "deepep_v2")
_QUANT_0_5_19 = tuple(q for q in get_args(Quantization) if q != "qoq")
_QUANT_0_5_23 = tuple(q for q in _QUANT_0_5_19 if q != "marlin")
_QUANT_0_4 = (
    "awq",
    "fp8",
    "gptq",
    "marlin",
    "gptq_marlin",
    "awq_marlin",
    "bitsandbytes",
    "gguf",
    "modelopt",
    "modelopt_fp4",
    "w8a8_int8",
    "w8a8_fp8",
    "moe_wna16",
    "qoq",
)
_GRAPHS_0_5_23 = tuple(g for g in get_args(GraphBackend) if g != "tc_piecewise")
_BALANCE_0_5 = ("auto", "round_robin", "total_requests", "total_tokens", "follow_bootstrap_room")
#: --lora-backend: triton_v2 is new in 0.5.23 (0.4.6.post5 takes any string).
_LORA_0_5_19 = ("triton", "csgmv", "ascend", "torch_native")
#: --disaggregation-decode-retraction-backup before 0.5.23 added 'none'.
_RETRACTION_BACKUP_0_5_19 = ("disaggregation_decode_retraction_backup", ("cpu_tensor", "host_pool"))
_CHOICES_0_5_19 = (
    _RETRACTION_BACKUP_0_5_19,
    ("load_balance_method", _BALANCE_0_5),
    ("lora_backend", _LORA_0_5_19),
    ("moe_runner_backend", _RUNNERS_0_5_19),
    ("moe_a2a_backend", _A2A_0_5_19),
    ("quantization", _QUANT_0_5_19),
)

# _moe_runner_backend_quant_constraints (0.5.23): an MXFP8 checkpoint runs on the MXFP8
# runners; auto (or any other runner, with a warning) becomes flashinfer_trtllm, or
# flashinfer_megamoe with that all-to-all backend.
_MXFP8_RUNNERS = (
    "cutlass",
    "deep_gemm",
    "flashinfer_megamoe",
    "flashinfer_trtllm",
    "flashinfer_trtllm_routed",
)
_MXFP8_RUNNER = Resolution(
    "R-MXFP8-RUNNER",
    "handle_moe_kernel_config",
    "--quantization mxfp8 runs its MoE on an MXFP8 runner (flashinfer_trtllm by default)",
    (
        assign(
            (F.quantization == "mxfp8")
            & (F.platform != "npu")
            & ~one_of(F.moe_runner_backend, *_MXFP8_RUNNERS),
            moe_runner_backend=ite(
                F.moe_a2a_backend == "flashinfer_megamoe", "flashinfer_megamoe", "flashinfer_trtllm"
            ),
        ),
    ),
)

_LOAD_BALANCE = Resolution(
    "R-LOAD-BALANCE",
    "handle_load_balance_method",
    "--load-balance-method auto resolves to round_robin (follow_bootstrap_room on a PD "
    "prefill server)",
    (
        assign(
            F.load_balance_method == "auto",
            quiet=True,
            load_balance_method=ite(
                F.disaggregation_mode == "prefill", "follow_bootstrap_room", "round_robin"
            ),
        ),
    ),
)

# Issue 23: what 0.5.19 and 0.5.23 both check and the seed's catalogue did not (measured on
# both releases with the flag sweep): the quantization each MoE runner and
# the model loader take, DeepEP v2, pplx's mode, the attention back-ends' GPU classes, the
# LoRA and Marlin runners; each placed where SGLang checks it inside its handler.
_MOE_BEFORE: tuple[tuple[str, Rule], ...] = (
    *(("A2A-DEEPEP-V2-RUNNER", r) for r in a2a.FI_MEGAMOE_RULES),
    ("A2A-DEEPEP-V2-RUNNER", a2a.DEEPEP_CUTEDSL_NORMAL),
    ("A2A-DEEPEP-V2-RUNNER", a2a.DEEPEP_V2_ARCH),
    ("A2A-PPLX-DP-ATTN", a2a.PPLX_NORMAL),
    *moe_kernel.QUANT_RULES,
    ("MOE-CUTLASS-QUANT", attention_backend.QUANT_NVFP4_ONLINE),
)
# check_server_args runs check_lora_server_args (and in it check_lora_moe_runner_args)
# before check_two_batch_overlap (0.5.23, measured: a lora_* runner with two-batch overlap
# and no attention DP stops at the LoRA check), and before its chunk/page, PD-Multiplexing
# and priority-scheduling asserts (validation_hook.py's order).
_LORA_BEFORE: tuple[tuple[str, Rule], ...] = tuple(
    ("KV-CHUNK-PAGE", r) for r in (moe_kernel.LORA_RANK_MODULES, *moe_kernel.LORA_RULES)
)
_MOE_AFTER: tuple[tuple[str, Rule], ...] = (
    ("A2A-DEEPEP-V2-RUNNER", a2a.DEEPEP_V2_OVERLAP),
    *(("MOE-CUTEDSL-A2A", r) for r in reversed(moe_kernel.QUANT_RULES_AFTER)),
)
_MOE_ADDED: tuple[Rule, ...] = (
    quantization.quant_known(("gptq",)),
    quantization.QUANT_CHECKPOINT_METHOD,
    quantization.QUANT_CHECKPOINT,
    quantization.QUANT_REQUANT_SOURCE,
    *attention_backend.RULES,
    moe_kernel.MARLIN_EP,
    a2a.DEEPEP_V2_SPEC,
    a2a.DEEPEP_V2_BUDGET,
    a2a.DEEPEP_V2_DECODE_BUDGET,
    # 0.5.18 and 0.5.19's PD handler: decode CP on a decode server takes no radix cache
    # or HiCache (0.5.23 removed it), and a decode's radix cache no fake backend and no
    # speculative decoding.
    *PD_DECODE_CACHE_RULES,
    # 0.5.18, 0.5.19 and 0.5.23 assert it in their PD handler (0.4.6.post5 has no fake).
    PD_PREFILL_FAKE,
)

_SEED_BASE = base_pack(
    SEED_VERSION,
    "2026-07",
    "The seed's snapshot: --enable-prefill-cp --cp-strategy beside the legacy CP flags; "
    "--enable-dp-attention with --dp-size as the DP-attention width.",
    RULES,
    RESOLUTIONS,
    handler_order=PIPELINE_ORDER,
    # No release asserts it (measured: 0.5.18 to 0.5.23 accept a dcp_size that divides tp_size
    # but not attn_tp, and their initialize_model_parallel forms the groups anyway; one that
    # does not divide tp_size is DCP-TP-DIV there); docs/rules.md §6.
    # Nor TOPO-STAGE-GPUS: every release starts two of one engine's schedulers on one GPU
    # (stages interleaved by --gpu-id-step) without a word.
    # Nor KV-CHUNK-DEFAULT-PAGE: the chunk SGLang sizes itself depends on the GPU's memory.
    advice=frozenset({"DCP-IN-ATTN-TP", "TOPO-STAGE-GPUS", page_size.CHUNK_DEFAULT_PAGE.id}),
    # --disaggregation-decode-allocation-policy is new in 0.5.23.
    absent_fields=("attn_dp_size", "disaggregation_decode_allocation_policy"),
    # Measured: 0.5.19's resolution accepts every layout these alone reject.
    launch_only=_LAUNCH_RULES,
    choices=_CHOICES_0_5_19,
)
SEED = apply(
    _SEED_BASE,
    PackDiff(
        SEED_VERSION,
        _SEED_BASE.released,
        _SEED_BASE.summary,
        add_rules_before=(*_MOE_BEFORE, *_LORA_BEFORE),
        add_rules_after=_MOE_AFTER,
        add_rules=_MOE_ADDED,
        add_resolutions=(_MXFP8_RUNNER, _LOAD_BALANCE),
        # handle_model_specific_adjustments' slot pass (`_deepseek_moe_quant_resolution`,
        # inside the DeepSeek branch after the registry overrides) and the Qwen3-MoE
        # override: after the DeepSeek prefill-CP overrides have set the all-to-all backend,
        # before the MoE handlers read the runner. 0.5.18 and 0.5.23 differ in their lists.
        add_resolutions_before=(("R-A2A-EP", moe_kernel.SM100_MOE_RUNNER_0_5_19),),
        handler_order=PIPELINE_ORDER,
        # check_lora_moe_runner_args runs in check_server_args(), at launch.
        launch_only=_LAUNCH_RULES
        | {r.id for r in (moe_kernel.LORA_RANK_MODULES, *moe_kernel.LORA_RULES)}
        | {quantization.QUANT_REQUANT_SOURCE.id},
    ),
)

_ATTN_DP_SIZE = Resolution(
    "R-ATTN-DP-SIZE",
    "handle_deprecated_dp_attention",
    "--attn-dp-size N is DP attention over N groups (meshsat reads it as "
    "--enable-dp-attention --dp-size N, its internal spelling)",
    (
        assign(
            (F.attn_dp_size > 1) & (F.dp_size == 1),
            quiet=True,
            enable_dp_attention=True,
            dp_size=F.attn_dp_size,
        ),
    ),
)

_RENAMED_0_5_23 = (("handle_dcp_validation", "handle_decode_context_parallelism"),)

# 0.5.23's resolved CUDA-graph backends (arg_groups/cuda_graph_hook.py
# parse_cuda_graph_config: --cuda-graph-backend-{decode,prefill} win over the disable flags,
# which win over the defaults; R-GRAPH-BACKEND has turned `disabled` into the flags).
_graphs_off = F.disable_cuda_graph
_decode_set = is_set(F.cuda_graph_backend_decode)
_decode_graph_off = (F.cuda_graph_backend_decode == "disabled") | (
    ~_decode_set & (_graphs_off | F.disable_decode_cuda_graph)
)
_decode_graph_full = (F.cuda_graph_backend_decode == "full") | (
    ~_decode_set & ~_graphs_off & ~F.disable_decode_cuda_graph
)
#: `apply_cuda_graph_compatibility` turns the default prefill graph (breakable on CUDA,
#: disabled elsewhere: `default_prefill_backend`) off under PP, decode CP, two-batch overlap
#: and an all-to-all backend other than none/deepep/megamoe/flashinfer. Not modelled: the
#: model checks (KDA, DeepSeek V4, multimodal, DeepSeek V3 with trtllm_mla prefill) and
#: prefill CP without breakable-graph support, each of which turns it off too.
_prefill_default_off = (
    (F.platform != "cuda")
    | (F.pp_size > 1)
    | (F.dcp_size > 1)
    | F.enable_two_batch_overlap
    | ~one_of(F.moe_a2a_backend, "none", "deepep", "megamoe", "flashinfer")
)
_prefill_graph_off = (F.cuda_graph_backend_prefill == "disabled") | (
    ~is_set(F.cuda_graph_backend_prefill)
    & (_graphs_off | F.disable_prefill_cuda_graph | _prefill_default_off)
)

# 0.5.23's handle_elastic_ep (sglang/srt/arg_groups/parallel_hook.py), in its order:
# scale-up now allows attention TP inside each attention-DP replica, so the EP sizes must
# split into whole replicas, and it asserts the decode-CP advice itself.
_replica = attn_tp * F.attn_cp_size
_initial = ite(is_set(F.elastic_ep_initial_size), F.elastic_ep_initial_size, F.tp_size)
_ADDED_AFTER_0_5_23: tuple[tuple[str, Rule], ...] = (
    (
        "EEP-INIT-ONLY-SCALING",
        Rule(
            "EEP-ATTN-REPLICA",
            elastic_scaling,
            divides(_replica, F.max_ep_size)
            & divides(_replica, _initial)
            & ((F.ep_join_mode != "scale") | divides(_replica, F.ep_join_rank_offset)),
            "EP size must be divisible by attention replica size (attn_tp · attn_cp_size): "
            "--max-ep-size {max_ep_size}, the initial EP size and a joiner's "
            "--elastic-ep-join-rank-offset {ep_join_rank_offset}.",
            "handle_elastic_ep",
        ),
    ),
    (
        "EEP-ATTN-REPLICA",
        Rule(
            "EEP-DENSE-TP-ATTN-TP",
            elastic_scaling & (attn_tp > 1),
            F.moe_dense_tp_size == 1,
            "Elastic EP scale-up with attention TP greater than one requires "
            "--moe-dense-tp-size 1 (got moe_dense_tp_size={moe_dense_tp_size}).",
            "handle_elastic_ep",
        ),
    ),
    (
        "EEP-SCALE-PP1",
        Rule(
            "EEP-DCP-ATTN-TP",
            elastic_scaling,
            divides(F.dcp_size, attn_tp),
            "Elastic EP scale-up requires --dcp-size to divide the fixed attention TP width "
            "(got dcp_size={dcp_size}).",
            "handle_elastic_ep",
        ),
    ),
)

# 0.5.23's handle_context_parallelism opens with its model checks: HIP runs prefill CP only
# for DeepSeek V4, DeepSeek V3.2 refuses zigzag, and MiMo V2's checks no longer wait for
# SGLANG_ENABLE_CP_V2.
_mimo = one_of(F.architecture, *MIMO_V2_ARCHITECTURES) & F.enable_prefill_cp
_CP_MODEL_CHECKS_0_5_23: tuple[tuple[str, Rule], ...] = (
    (
        "CP-MIMO-ZIGZAG",
        Rule(
            "CP-HIP-DSV4",
            F.enable_prefill_cp & (F.platform == "hip") & is_set(F.architecture),
            F.architecture == "DeepseekV4ForCausalLM",
            "Prefill CP on HIP is only supported for DeepseekV4ForCausalLM, got '{architecture}'.",
            "handle_context_parallelism",
        ),
    ),
    (
        "CP-MIMO-ZIGZAG",
        Rule(
            "CP-DSV32-INTERLEAVE",
            (F.architecture == "DeepseekV32ForCausalLM") & F.enable_prefill_cp,
            F.cp_strategy != "zigzag",
            "DeepSeek V3.2 prefill CP does not support --cp-strategy zigzag; use interleave.",
            "handle_context_parallelism",
            hint="--cp-strategy interleave",
        ),
    ),
)

# Where 0.5.23 words (or asks) the same check differently from 0.5.19: attention DP has its
# own flag now, so its messages name --attn-dp-size.
_DP_ATTN_WORDS_0_5_23: tuple[Rule, ...] = (
    # handle_data_parallelism (arg_groups/parallel_hook.py): a bare assert on the width.
    Rule(
        "DPATTN-TP-DIV",
        F.enable_dp_attention,
        divides(attn_dp, F.tp_size),
        "AssertionError (a bare assert: tp_size % attn_dp_size == 0): with --attn-dp-size, "
        "tp_size must be divisible by attn_dp_size (each attention-DP group gets "
        "tp_size / attn_dp_size ranks)",
        "handle_data_parallelism",
    ),
    # check_two_batch_overlap asks attn_dp_enabled_of() (attention DP, or a scale joiner of
    # an attention-DP deployment) and has no ROCm exception any more (validation_hook.py).
    Rule(
        "TOPO-TBO-DP-ATTN",
        F.enable_two_batch_overlap & (F.moe_a2a_backend == "none"),
        (attn_dp > 1) | (F.ep_join_mode == "scale"),
        "When enabling two batch overlap without an EP a2a backend (moe_a2a_backend='none'), "
        "attention DP (--attn-dp-size) is required (DeepSeek-V4 non-EP DP TBO path).",
        topology.CHECK,
        hint="add --attn-dp-size N (N > 1 dividing --tp-size), or choose an all-to-all MoE backend",
    ),
    # handle_elastic_ep asks attn_dp_enabled_of() too.
    Rule(
        "EEP-DPATTN",
        elastic_scaling,
        F.enable_dp_attention | (F.ep_join_mode == "scale"),
        "Elastic EP scale-up requires attention DP (--attn-dp-size); without it the TP group "
        "is not equivalent to WORLD and the post-scale collective path is invalid.",
        "handle_elastic_ep",
    ),
)

# Rules 0.5.23 added inside handlers 0.5.19 already had, placed where SGLang checks them.
_A2A_0_5_23_BEFORE: tuple[tuple[str, Rule], ...] = (
    # context_parallel_attn_dp_size(): DeepSeek's prefill-CP override (the declarative
    # override collection, arg_groups/model_overrides/deepseek_v2.py) asks first, in
    # handle_model_specific_adjustments, before the DSA override's tp <= 8 assertion and
    # model_hook.py's decode-role assertion (QA r23: --dp-size 4 --attn-dp-size 8
    # --enable-prefill-cp --disaggregation-mode decode on V3.2 raised this one first).
    (
        "CP-DSA-TP8",
        Rule(
            "DP-REPLICAS-ATTN-DP-CP",
            attention_backend.MLA_MODEL
            & F.enable_prefill_cp
            & (F.attn_dp_size.as_raw > 1)
            & (F.dp_size.as_raw > 1),
            F.dp_size.as_raw == 1,
            "--dp-size {dp_size} with --attn-dp-size {attn_dp_size}: data-parallel "
            "replicas combined with attention data parallelism are not supported.",
            "handle_model_specific_adjustments",
            hint="keep --attn-dp-size and drop --dp-size",
        ),
    ),
    # handle_data_parallelism asks for replicas before its DP-attention divisibility.
    (
        "DPATTN-TP-DIV",
        Rule(
            "DP-REPLICAS-ATTN-DP",
            (F.attn_dp_size.as_raw > 1) & (F.dp_size.as_raw > 1),
            F.dp_size.as_raw == 1,
            "--dp-size {dp_size} with --attn-dp-size {attn_dp_size}: data-parallel "
            "replicas combined with attention data parallelism are not supported.",
            "handle_data_parallelism",
            hint="keep --attn-dp-size and drop --dp-size, or launch replicas separately",
        ),
    ),
)
_A2A_0_5_23_AFTER: tuple[tuple[str, Rule], ...] = (
    ("A2A-DEEPEP-V2-OVERLAP", a2a.DEEPEP_V2_DIRECT_NODES),
    # handle_decode_context_parallelism: right after the size check.
    (
        "DCP-MIN",
        Rule(
            "DCP-NO-PREFILL-CP",
            F.dcp_size > 1,
            ~F.enable_prefill_cp,
            "--dcp-size > 1 does not support --enable-prefill-cp.",
            "handle_decode_context_parallelism",
            hint="use decode CP or prefill CP, not both",
        ),
    ),
)

# _dcp_comm_backend_default (0.5.23): unset, with decode CP on, the backend is fi_a2a where
# `is_fi_a2a_supported` holds (SM100/SM103, and an MNNVL fabric or the TP ranks on one node,
# `tp_size // max(nnodes // pp_size, 1)`, a multiple of dcp_size), else a2a on CUDA/ROCm,
# else ag_rs. The MNNVL branch meshsat cannot see (it says a2a there); the node branch it
# reads from gpu_sm and the topology (oracle 0.5.23 with B200 facts: 17 configs of the s3
# sweep that meshsat called a2a). DeepSeek's DSA DCP override then replicates the Q
# projection for the a2a backends.
_A2A_DCP = (F.dcp_size > 1) & one_of(F.platform, "cuda", "hip")
_FI_A2A_DCP = (
    (F.dcp_size > 1)
    & (F.platform == "cuda")
    & is_set(F.gpu_sm)
    & one_of(F.gpu_sm, 100, 103)
    & divides(F.dcp_size, topology.tp_per_node)
)
_DCP_COMM_0_5_23 = Resolution(
    "R-DCP-COMM",
    "handle_decode_context_parallelism",
    "decode CP without --dcp-comm-backend uses fi_a2a on SM100 where the TP ranks on one "
    "node are a multiple of dcp_size, else a2a on CUDA/ROCm",
    (
        assign(~is_set(F.dcp_comm_backend) & _FI_A2A_DCP, dcp_comm_backend="fi_a2a"),
        assign(~is_set(F.dcp_comm_backend) & _A2A_DCP, dcp_comm_backend="a2a"),
        assign(~is_set(F.dcp_comm_backend), quiet=True, dcp_comm_backend="ag_rs"),
        assign(
            F.is_deepseek_dsa
            & (F.dcp_size > 1)
            & ~is_set(F.dcp_replicate_q_proj)
            & one_of(F.dcp_comm_backend, "a2a", "fi_a2a"),
            dcp_replicate_q_proj=True,
        ),
    ),
)
# DeepSeek V3.2 (DSA) prefill CP: interleave keeps an explicit CP width (attention TP inside
# each CP rank); zigzag and an unset width take the whole attention-TP group.
_CP_DSA_0_5_23 = Resolution(
    "R-CP-DSA",
    "DeepSeek sparse-attention model overrides",
    "DSA models (DeepSeek V3.2, GLM-5) run prefill CP over the whole attention-TP group "
    "(interleave keeps an explicit --attn-cp-size)",
    (
        assign(
            F.is_deepseek_dsa
            & F.enable_prefill_cp
            & ~((F.cp_strategy == "interleave") & (F.attn_cp_size > 1)),
            attn_cp_size=F.tp_size // attn_dp,
        ),
        assign(
            F.is_deepseek_dsa & F.enable_prefill_cp & (F.cp_strategy == "zigzag"),
            moe_a2a_backend="deepep",
            ep_size=F.tp_size,
            moe_dense_tp_size=1,
        ),
    ),
)

# 0.5.23's LoRA checks (arg_groups/lora_hook.py, from check_server_args, at launch), each
# where SGLang asks it: check_lora_server_args refuses the triton_v2 back-end's unsupported
# modes (before it asks for the rank and modules), then check_lora_moe_runner_args asks for
# the back-end, its modes and the weights between MOE-LORA-ENABLE and MOE-LORA-A2A, and for
# elastic EP before the placement.
_LORA_0_5_23: tuple[tuple[str, Rule], ...] = (
    *(("LORA-RANK-MODULES", r) for r in moe_kernel.LORA_V2_RULES),
    *(("MOE-LORA-A2A", r) for r in moe_kernel.LORA_RUNNER_RULES),
    ("MOE-LORA-PLACEMENT", moe_kernel.LORA_EEP),
)

# 0.5.23's DFLASH, DSPARK and UNO handlers (speculative_hook.py), after _handle_ngram's checks
# (one algorithm runs: their place among the algorithms' is moot), each after the last.
_SPEC_0_5_23 = (*speculative_dflash_uno.DFLASH_DSPARK_0_5_23, *speculative_dflash_uno.UNO_0_5_23)
_SPEC_0_5_23_AFTER: tuple[tuple[str, Rule], ...] = tuple(
    zip(
        ("SPEC-NGRAM-DP-ATTN", *(r.id for r in _SPEC_0_5_23[:-1])),
        _SPEC_0_5_23,
        strict=True,
    )
)

# _handle_deprecated_args (0.5.23, serving_hook.py): tokenspeed_mla is a deprecated alias of
# cutedsl_mla (decode-only: as the prefill back-end it becomes trtllm_mla) and keeps the FP8
# KV cache it implied.
_TOKENSPEED = (F.attention_backend == "tokenspeed_mla") | (
    F.decode_attention_backend == "tokenspeed_mla"
)
_ATTN_ALIAS_0_5_23 = Resolution(
    "R-ATTN-ALIAS",
    "_handle_deprecated_args",
    "--attention-backend tokenspeed_mla is a deprecated alias of cutedsl_mla (a prefill "
    "back-end: trtllm_mla) with an fp8_e4m3 KV cache",
    (
        assign(_TOKENSPEED & (F.kv_cache_dtype != "fp8_e4m3"), kv_cache_dtype="fp8_e4m3"),
        assign(F.attention_backend == "tokenspeed_mla", attention_backend="cutedsl_mla"),
        assign(
            F.decode_attention_backend == "tokenspeed_mla",
            decode_attention_backend="cutedsl_mla",
        ),
        assign(
            F.prefill_attention_backend == "tokenspeed_mla",
            prefill_attention_backend="trtllm_mla",
        ),
    ),
)

#: check_pipeline_parallel_compat's verdict on a speculative algorithm under PP (0.5.23), in
#: its words per branch ("" where it passes; SGLANG_ENABLE_PP_SPEC, an environment variable,
#: unset): DSPARK needs a PD prefill server (never reached: `_handle_dspark` refuses the same
#: layouts first, SPEC-DSPARK-PP, in its own words); any algorithm but EAGLE (NEXTN is its
#: alias by then, a typed NONE is a name) or a multi-layer EAGLE is refused outright; EAGLE
#: then needs a PD prefill server (the prefill-only assert).
_PP_PREFILL = F.disaggregation_mode == "prefill"
_PP_SPEC_REFUSAL = named(
    "pp_spec_refusal",
    ite(
        F.speculative_algorithm == "DSPARK",
        ite(_PP_PREFILL, "", "Pipeline parallel DSPARK requires disaggregation-mode=prefill"),
        ite(
            one_of(F.speculative_algorithm, "EAGLE", "NEXTN") & ~speculative.multi_layer_eagle,
            ite(
                _PP_PREFILL,
                "",
                "PP + speculative decoding (MTP) is only supported on prefill nodes "
                "(disaggregation-mode=prefill)",
            ),
            "Pipeline parallelism currently only supports EAGLE (non-multi-layer) speculative "
            "decoding",
        ),
    ),
)


V0_5_23 = apply(
    SEED,
    PackDiff(
        "0.5.23",
        "2026-11",
        "--attn-dp-size replaces --enable-dp-attention + --dp-size (dp_size counts "
        "replicas again); the legacy CP flags and --elastic-ep-rejoin are gone; decode CP "
        "excludes prefill CP; elastic EP scale-up allows attention TP.",
        add_rules_after=(
            *_ADDED_AFTER_0_5_23,
            *_A2A_0_5_23_AFTER,
            *_SPEC_0_5_23_AFTER,
            # validate_hisparse's feature checks (hisparse_hook.py), new in 0.5.23.
            ("HISPARSE-RADIX", serving.HISPARSE_0_5_23[0]),
            ("HISPARSE-MIXED-CHUNK", serving.HISPARSE_0_5_23[1]),
        ),
        launch_only=SEED.launch_only
        | {r.id for r in weight_shapes.VISION_TP_REDUCE}
        | {r.id for _, r in _LORA_0_5_23}
        | {r.id for r in serving.HISPARSE_0_5_23},
        add_rules_before=(
            *_CP_MODEL_CHECKS_0_5_23,
            *_A2A_0_5_23_BEFORE,
            *_LORA_0_5_23,
            # The first check of handle_model_specific_adjustments in 0.5.23.
            ("MODEL-DSA-KV-DTYPE", decode_cp.NPU_DCP_DSA),
            # --disaggregation-decode-allocation-policy is new in 0.5.23: the PD hook
            # validates it first, before the decode radix and prefill fake-backend checks.
            *(("PD-DECODE-RADIX-HISPARSE", r) for r in PREFILL_COMPLETE_RULES),
            # handle_kv4_compatibility's SM100 native-NVFP4 refusals (new in 0.5.23): after
            # its Blackwell check, before its back-end lists.
            *(("KV4-FA4-MLA-BACKEND", r) for r in kv4.NVFP4_NATIVE_RULES),
        ),
        add_rules=(
            # check_mega_moe_compat is new in 0.5.23 (0.5.19 accepts these, measured).
            *a2a.MEGAMOE_RULES,
            kv4.NVFP4_PREFILL,
            kv4.NVFP4_NATIVE,
            kv4.NVFP4_DECODE_BACKEND,
            kv4.NVFP4_DECODE,
            # validate_flashinfer_a2a_token_budget is new in 0.5.23.
            a2a.FLASHINFER_CHUNKED,
            # New in 0.5.23 (its build of gemma-3-27b-it at attention TP 2 of TP 8).
            *weight_shapes.VISION_TP_REDUCE,
            # _dsa_dcp_overrides: HiCache first, then PD, then the top-k.
            decode_cp.DSA_DCP_HICACHE,
            decode_cp.DSA_DCP_PD,
            decode_cp.DSA_DCP_TOPK,
            # handle_cache_compatibility's LMCache checks are new in 0.5.23 (last in it).
            *serving.LMCACHE_RULES,
        ),
        replace_rules=(
            *kv4.RULES_0_5_23,
            # _mla_kv_cache_dtype_checks no longer lists fp4_e2m1; nvfp4's own decode
            # back-end is KV4-NVFP4-DECODE-GPU's; no legacy CP flag to read.
            attention_backend.trtllm_mla_kv(
                ("fp8_e4m3", "bf16", "auto"), "fp8_e4m3, bf16, or auto"
            ),
            attention_backend.trtllm_mha_decode_gpu(nvfp4_own=True),
            # handle_deterministic_inference's absorbed-MLA list adds GLM-5 Next.
            *deterministic.RULES_0_5_23,
            # SpeculativeAlgorithm gains UNO.
            speculative_names.unknown_algorithm(speculative_names.KNOWN_ALGORITHMS_0_5_23),
            attention_backend.trtllm_mha_cp(legacy=False),
            *weight_shapes.RULES_0_5_23,
            # resolve_hicache_dcp_compatibility takes a storage backend under decode CP,
            # only not with buffer_only host memory.
            serving.dcp_storage_rule(buffer_only_only=True),
            # validate_hisparse takes MiniMax M3 too.
            serving.hisparse_model_rule(minimax_m3=True),
            # handle_speculative_decoding asks, after NEXTN became EAGLE.
            decode_radix_spec(
                ("EAGLE", "EAGLE3", "NEXTN", "DSPARK"), "handle_speculative_decoding"
            ),
            # 0.5.23's loader no longer knows GPTQ outside Ascend (measured).
            quantization.quant_known(),
            # The same condition, 0.5.23's own words (arg_groups/moe_hook.py).
            a2a.FLASHINFER_TOPOLOGY_0_5_23,
            *_DP_ATTN_WORDS_0_5_23,
            # The same condition (dp_size counts replicas again), 0.5.23's own words
            # (arg_groups/validation_hook.py, check_server_args).
            Rule(
                "TOPO-MULTINODE-DP",
                (F.dp_size > 1) & (F.nnodes > 1),
                F.enable_dp_attention,
                "multi-node data-parallel replicas are not supported; use attention DP "
                "(--attn-dp-size) across nodes",
                "check_server_args",
                hint="give the width as --attn-dp-size instead of --dp-size, or launch the "
                "replicas separately",
            ),
            # check_pipeline_parallel_compat (arg_groups/validation_hook.py, from
            # check_server_args when pp_size > 1): PP takes speculative decoding on a PD
            # prefill server, EAGLE (NEXTN is its alias) or DSPARK, but not multi-layer
            # EAGLE, which the MiMo-V2, Step-3.5 and GigaChat 3.5 model overrides turn on
            # for EAGLE, or --enable-multi-layer-eagle as typed (`speculative.multi_layer_
            # eagle`); DSPARK's branch does not ask it. Up to 0.5.19 PP refuses any.
            # SGLANG_ENABLE_PP_SPEC (the aggregated path, not a field) is not read: unset.
            # SGLang words each branch apart: the rule passes where `_PP_SPEC_REFUSAL`, SGLang's
            # message for the layout, is empty, and quotes it where not.
            Rule(
                "TOPO-PP-SPEC",
                F.pp_size > 1,
                ~is_set(F.speculative_algorithm) | (_PP_SPEC_REFUSAL == ""),
                "{pp_spec_refusal}",
                topology.CHECK,
                hint="drop --speculative-algorithm, use --pp-size 1, or run PP with EAGLE on a "
                "PD prefill server (--disaggregation-mode prefill; MiMo-V2, Step-3.5 and "
                "GigaChat 3.5 make EAGLE multi-layer there)",
            ),
            # handle_elastic_ep reads the resolved graph config: decode `disabled`, or `full`
            # recaptured on CUDA (no speculative decoding); prefill `disabled`. Unset, decode
            # is `full` and prefill is `breakable` on CUDA but resolved to disabled off CUDA,
            # under PP, decode CP, two-batch overlap or an all-to-all backend breakable
            # graphs are not validated for (`apply_cuda_graph_compatibility`; scale-up's
            # nixl is one), so a scale-up launch needs no graph flag on CUDA.
            Rule(
                "EEP-NO-GRAPHS",
                elastic_scaling,
                (
                    _decode_graph_off
                    | (
                        _decode_graph_full
                        & (F.platform == "cuda")
                        & ~is_set(F.speculative_algorithm)
                    )
                )
                & _prefill_graph_off,
                "Elastic EP runtime scale-up supports decode CUDA graph backend 'full' (on "
                "CUDA, without speculative decoding) or 'disabled', and requires prefill CUDA "
                "graph to be disabled.",
                "handle_elastic_ep",
                hint="add --disable-cuda-graph",
            ),
            Rule(
                "CP-MIMO-ZIGZAG",
                _mimo,
                F.cp_strategy == "zigzag",
                "MiMo V2 prefill CP only supports --cp-strategy zigzag.",
                "handle_context_parallelism",
            ),
            Rule(
                "CP-MIMO-TEXT",
                _mimo & F.is_multimodal,
                F.language_only | F.language_model_only,
                "MiMo V2 prefill CP only supports text inference; add --language-only.",
                "handle_context_parallelism",
            ),
            Rule(
                "CP-DPCP-DIV",
                F.attn_cp_size > 1,
                divides(attn_dp * F.attn_cp_size, F.tp_size),
                "tp_size must be divisible by attn_dp_size * attn_cp_size",
                "handle_context_parallelism",
            ),
            # _dp_lm_head_validation asks attn_dp_enabled_of(): attention DP, or a scale
            # joiner (it joins an attention-DP deployment).
            Rule(
                "DP-LM-HEAD",
                F.enable_dp_lm_head,
                F.enable_dp_attention | (F.ep_join_mode == "scale"),
                "--enable-dp-lm-head requires attention DP (--attn-dp-size).",
                "_dp_lm_head_validation",
            ),
            Rule(
                "A2A-PPLX-DP-ATTN",
                F.moe_a2a_backend == "pplx",
                attn_dp >= 2,
                "moe_a2a_backend='pplx' requires attention DP with at least 2 groups "
                "(--attn-dp-size >= 2).",
                "handle_a2a_moe",
            ),
            *language_model_only_rules(
                (
                    "DeepseekV4ForCausalLM",
                    "MuseGlimmerForConditionalGeneration",
                    "Cosmos3ForConditionalGeneration",
                    "Cosmos3EdgeForConditionalGeneration",
                )
            ),
            # handle_speculative_decoding asks attn_dp_enabled_of() (a scale joiner too).
            speculative.NGRAM_DEVICE_0_5_23,
            speculative.standalone_dp(joiner=True),
            speculative.ngram_dp(joiner=True),
            language_only_rule(
                (
                    *ENCODER_DISAGG_ARCHITECTURES,
                    "Glm5NextForConditionalGeneration",
                    "MiniMaxM3SparseForConditionalGeneration",
                    "MuseSparkForConditionalGeneration",
                )
            ),
        ),
        # The env variable is accepted again: no step rejects it (measured, 25 layouts).
        # The flags of the legacy CP and rejoin rules are gone (absent_fields below), and
        # scale-up no longer asks dp_size == tp_size (measured, fidelity/targets.py).
        remove_rules=(
            *(r.id for r in PD_DCP_CACHE_RULES),
            "PD-DCP-BACKEND",
            "METRICS-ENV",
            "CP-LEGACY-MODE-CHOICE",
            "CP-LEGACY-XOR",
            "EEP-REJOIN-DEPRECATED",
            "EEP-REJOIN-CONFLICT",
            "EEP-DP-EQ-TP",
            "CP-DSA-INTERLEAVE-DP",
            # tokenspeed_mla is an alias of cutedsl_mla now (R-ATTN-ALIAS).
            *(r.id for r in attention_backend.TOKENSPEED_RULES),
            # intel_xpu prefills MLA models in 0.5.23.
            attention_backend.XPU_MLA_PREFILL.id,
        ),
        absent_fields=(
            "enable_prefill_context_parallel",
            "prefill_cp_mode",
            "enable_dsa_prefill_context_parallel",
            "dsa_prefill_cp_mode",
            "elastic_ep_rejoin",
        ),
        add_resolutions=(_ATTN_DP_SIZE, _ATTN_ALIAS_0_5_23),
        # handle_nvfp4_prefill_kv_dequant_dtype, right before the attention handler.
        add_resolutions_before=(("R-ATTN-BACKEND", kv4.nvfp4_backends("0.5.23")),),
        # SGLANG_ENABLE_CP_V2 is "Removed without replacement" (environ.py's deprecated
        # table, which only warns): no step sets it and nothing reads it.
        remove_resolutions=("R-CPV2",),
        replace_resolutions=(
            # The same SM100 MoE-runner overrides (oracle 0.5.23: prefill CP's DeepEP keeps
            # auto); its lists add GLM-5 Next, HunYuan V4 and Qwen4Exp.
            moe_kernel.SM100_MOE_RUNNER,
            _DCP_COMM_0_5_23,
            _CP_DSA_0_5_23,
            # The default back-end: DFLASH counts as top-k 1 on SM100, MiMo V2's override.
            resolution.attn_backend("0.5.23"),
            # The deterministic fill leaves MiMo V2's SM100 pick (fa4) to its override.
            deterministic.deterministic("0.5.23"),
            # UNO is a name too: its spellings are upper-cased like the rest.
            speculative_names.upper_case(speculative_names.KNOWN_ALGORITHMS_0_5_23),
            # No cutlass_mla or tokenspeed_mla back-end any more.
            page_size.resolution("0.5.23"),
            # attn_dp_enabled_of(): a scale joiner schedules like an attention-DP rank.
            Resolution(
                "R-DPATTN",
                "handle_data_parallelism",
                "DP attention is on (or this is a scale joiner of an attention-DP "
                "deployment): each DP group schedules its own share",
                (
                    assign(
                        F.enable_dp_attention | (F.ep_join_mode == "scale"),
                        schedule_conservativeness=F.schedule_conservativeness * 0.3,
                    ),
                    assign(
                        F.enable_dp_attention & is_set(F.chunked_prefill_size),
                        chunked_prefill_size=F.chunked_prefill_size // F.dp_size,
                    ),
                ),
            ),
        ),
        rename_handlers=_RENAMED_0_5_23,
        handler_order=tuple(dict(_RENAMED_0_5_23).get(h, h) for h in PIPELINE_ORDER),
        present_fields=("attn_dp_size",),
        choices=(
            ("load_balance_method", _BALANCE_0_5),
            ("quantization", _QUANT_0_5_23),
            ("cuda_graph_backend_decode", _GRAPHS_0_5_23),
            ("cuda_graph_backend_prefill", _GRAPHS_0_5_23),
        ),
    ),
)

#: 0.5.18 runs the same handlers as `ServerArgs._handle_*` methods from `__post_init__`.
#: `handle_speculative_decoding` is a function of arg_groups/speculative_hook.py there too.
_RENAMED_0_5_18 = tuple(
    (h, "_" + h) for h in PIPELINE_ORDER if h.startswith("handle_") and h != speculative.SRC
)

#: 0.5.18's _handle_a2a_moe reads the FlashInfer all-to-all from the object: as typed,
#: unless the megamoe alias (run first) or DWDP wrote it.
_FLASHINFER_AS_TYPED_0_5_18 = (
    (F.moe_a2a_backend.as_raw == "flashinfer")
    & (F.moe_runner_backend.as_raw != "megamoe")
    & (F.dwdp_size <= 1)
)

V0_5_18 = apply(
    SEED,
    PackDiff(
        "0.5.18",
        "2026-06",
        "The last release before the arg-groups refactor: the same rules as 0.5.19, run "
        "from ServerArgs.__post_init__; the FlashInfer all-to-all checks read the backend "
        "the user gave (before the model overrides), with fewer runners; no DeepEP v2.",
        replace_rules=(
            # Its compressed-tensors WNA16 MoE takes Marlin on SM100 too.
            model.marlin_a2a_rule(sm100_triton=False),
            # _handle_a2a_moe tests `self.moe_a2a_backend`, the user's value: an MLA prefill-CP
            # override to deepep does not save a FlashInfer request (measured, 3 layouts);
            # _handle_dwdp, before it, does (it writes none on the object; measured, 3); so
            # does `--moe-runner-backend megamoe`, whose alias writes megamoe on the object
            # first (_handle_moe_runner_backend_alias; recorded, 1 layout).
            Rule(
                "TOPO-A2A-FLASHINFER",
                _FLASHINFER_AS_TYPED_0_5_18,
                F.enable_dp_attention & (F.dp_size == F.tp_size),
                "Flashinfer MoE A2A is only supported with dp_size == tp_size and "
                "--enable-dp-attention",
                "handle_a2a_moe",
            ),
            Rule(
                "A2A-FLASHINFER-RUNNER",
                _FLASHINFER_AS_TYPED_0_5_18,
                one_of(
                    F.moe_runner_backend,
                    "flashinfer_cutlass",
                    "flashinfer_cutedsl",
                    "flashinfer_trtllm_routed",
                ),
                "Flashinfer MoE A2A is only supported with flashinfer_cutlass, "
                "flashinfer_cutedsl or flashinfer_trtllm_routed moe runner backend",
                "handle_a2a_moe",
            ),
            language_only_rule(
                tuple(a for a in ENCODER_DISAGG_ARCHITECTURES if a != "Dots3NoteForCausalLM")
            ),
            attention_backend.TRTLLM_MHA_GPU_0_5_18,
            # DETERMINISTIC_ATTENTION_BACKEND_CHOICES has no intel_xpu yet.
            *deterministic.RULES_0_5_18,
            # Its PD handler's decode CP takes mooncake or nixl only (0.5.19 adds fake).
            pd_dcp_backend(fake=False),
        ),
        # deepep_v2 is not a --moe-a2a-backend choice yet (the choice rule refuses it);
        # its WNA16 MoE takes Triton whatever the weights.
        # Its TRTLLM MHA prefill runs on SM100 only, with no SM120 or prefill-CP check.
        # It has no --hicache-host-memory-mode (nor its checks).
        remove_rules=(
            "A2A-DEEPEP-V2-RUNNER",
            "MOE-TRITON-WNA16",
            attention_backend.TRTLLM_MHA_SM120_FP8.id,
            "ATTN-TRTLLM-MHA-CP-SM100",
            serving.BUFFER_STORAGE.id,
            serving.BUFFER_DECODE.id,
        ),
        # Its __post_init__ mirrors the legacy CP flags before the DeepSeek-family override
        # sets a DSA model's attention backend (measured on GLM-5: the non-DSA spelling).
        replace_resolutions=(
            resolution.legacy_cp(dsa_default=False),
            # Its DeepSeek-family list has no Dots3Note (arg_groups/overrides.py).
            moe_kernel.SM100_MOE_RUNNER_0_5_18,
        ),
        rename_handlers=_RENAMED_0_5_18,
        handler_order=tuple(dict(_RENAMED_0_5_18).get(h, h) for h in PIPELINE_ORDER),
        absent_fields=(*SEED.absent_fields, "deepep_v2_mode", "hicache_host_memory_mode"),
        choices=(
            _RETRACTION_BACKUP_0_5_19,
            ("load_balance_method", _BALANCE_0_5),
            ("moe_a2a_backend", _A2A_0_5_18),
            ("moe_runner_backend", _RUNNERS_0_5_18),
            ("quantization", _QUANT_0_5_19),
            ("lora_backend", _LORA_0_5_19),
        ),
    ),
)

#: 0.4.x checks everything inline in `ServerArgs.__post_init__`: no step functions, so every
#: resolution rule names that one function (the fidelity replay tells them apart by message).
_POST_INIT = "__post_init__"
_V0_4_KEPT = frozenset(
    {
        "TOPO-NNODES",
        "TOPO-MULTINODE-DP",
        "TOPO-PP-SPEC",
        "TOPO-POSITIVE",
        "TOPO-ATTN-TP",
        "TOPO-MOE-TP",
        "TOPO-BASE-GPU-ID",
        "TOPO-GPU-ID-STEP",
        "TOPO-GPU-ID-RANGE",
        # Its launcher splits nodes by --node-rank with the same arithmetic, unchecked.
        "TOPO-NODE-RANK",
        # Its launcher interleaves stages by --gpu-id-step as the 0.5 releases' do.
        "TOPO-STAGE-GPUS",
        "MODEL-HEADS",
        "MODEL-KV-HEADS",
        "MODEL-HEADS-TP",
        "MODEL-EXPERTS",
        "MODEL-PP-LAYERS",
        *(r.id for r in weight_shapes.RULES),
    }
)
#: The fields 0.4.6.post5 has no flag for (fidelity/flags/0.4.6.post5.json). Its all-to-all
#: backend is spelled --enable-deepep-moe (meshsat: moe_a2a_backend deepep, the only choice).
_ABSENT_0_4 = (
    "attn_cp_size",
    "cp_strategy",
    "dcp_comm_backend",
    "dcp_replicate_q_proj",
    "dcp_size",
    "disable_decode_cuda_graph",
    "disable_prefill_cuda_graph",
    "dsa_prefill_cp_mode",
    "dwdp_size",
    "elastic_ep_backend",
    "elastic_ep_initial_size",
    "elastic_ep_rejoin",
    "elastic_ep_scale_timeout",
    "enable_aiter_allreduce_fusion",
    "enable_deterministic_inference",
    "enable_dsa_prefill_context_parallel",
    "enable_elastic_expert_backup",
    "enable_prefill_context_parallel",
    "enable_prefill_cp",
    "enable_single_batch_overlap",
    "enable_two_batch_overlap",
    "ep_join_mode",
    "ep_join_rank_offset",
    "eplb_algorithm",
    "expert_balancedness_report_mode",
    "language_model_only",
    "language_only",
    "max_ep_size",
    "mm_enable_dp_encoder",
    "moe_dp_size",
    "moe_runner_backend",
    "prefill_cp_mode",
    "tokenizer_worker_num",
    "use_ray",
    "attn_dp_size",
    "cuda_graph_backend_decode",
    "cuda_graph_backend_prefill",
    "deepep_v2_mode",
    "enable_multi_layer_eagle",
    "enable_lora",
    # (--lora-target-modules too, a tool fact with no flag of its own: a pasted command
    # with it is refused as a flag this release lacks, CMD-UNKNOWN-FLAG.)
    "max_lora_rank",
    "disaggregation_decode_allocation_policy",
    "swa_full_tokens_ratio",
    "prefill_attention_backend",
    "decode_attention_backend",
    # Cache and scheduling flags 0.4.6.post5 lacks (it has --enable-hierarchical-cache,
    # --disable-radix-cache, --schedule-policy, --disable-overlap-schedule,
    # --enable-torch-compile and --disable-cuda-graph-padding, and checks none of them).
    "hicache_host_memory_mode",
    "hicache_storage_backend",
    "disaggregation_decode_enable_radix_cache",
    "disaggregation_decode_retraction_backup",
    "enable_priority_scheduling",
    "disable_priority_preemption",
    "retraction_policy",
    "pp_max_micro_batch_size",
    "min_free_slots_delay",
    "enable_pdmux",
    "speculative_ngram_max_bfs_breadth",
    "enable_lmcache",
    "enable_unified_memory",
    "disaggregation_decode_enable_offload_kvcache",
    "enable_hisparse",
)

V0_4_6_POST5 = apply(
    SEED,
    PackDiff(
        "0.4.6.post5",
        "2025-05",
        "The DeepSeek large-EP era: --enable-dp-attention requires --dp-size > 1 (no silent "
        "reset), --enable-deepep-moe is the only all-to-all backend and refuses deepep_mode "
        "auto with DP attention, --moe-dense-tp-size only 1; no CP, decode CP, DWDP, elastic "
        "EP or EPLB checks; everything inline in __post_init__.",
        # Its model classes' build, not its arguments, raises this one.
        # KV-CHUNK-PAGE is asserted in __post_init__ (on the typed values), not at launch.
        launch_only=(SEED.launch_only - {page_size.CHUNK_PAGE_0_4.id})
        | {
            model.EP_MOE_0_4.id,
            "TOPO-DP-REPLICA-GPUS",
            PD_MOONCAKE_DP_0_4.id,
            moe_kernel.LORA_RADIX_0_4.id,
            *(r.id for r in kv_cache.RULES_0_4),
        },
        add_rules=(
            # __post_init__'s first check, right after the chunk's default.
            page_size.CHUNK_PAGE_0_4,
            # data_parallel_controller.py:133 and 218-222 (its replica offset ignores pp).
            topology.replicas_share_gpus_0_4(),
            Rule(
                "MOE-DENSE-TP1",
                is_set(F.moe_dense_tp_size),
                F.moe_dense_tp_size == 1,
                "moe_dense_tp_size only support 1 and None currently",
                _POST_INIT,
            ),
            Rule(
                "DPATTN-DP-GT1",
                F.enable_dp_attention,
                F.dp_size > 1,
                "Please set a dp-size > 1. You can use 1 < dp-size <= tp-size ",
                _POST_INIT,
                hint="raise --dp-size (the DP-attention width), or drop --enable-dp-attention",
            ),
            Rule(
                "DPATTN-TP-DIV",
                F.enable_dp_attention,
                divides(F.dp_size, F.tp_size),
                "AssertionError (a bare assert: tp_size % dp_size == 0): with "
                "--enable-dp-attention, tp_size must be divisible by dp_size",
                _POST_INIT,
            ),
            Rule(
                "DP-LM-HEAD",
                F.enable_dp_lm_head,
                F.enable_dp_attention,
                "Please enable dp attention when setting enable_dp_attention. ",
                _POST_INIT,
            ),
            Rule(
                "DEEPEP-AUTO-DPATTN",
                (F.moe_a2a_backend == "deepep") & (F.deepep_mode == "auto"),
                ~F.enable_dp_attention,
                "DeepEP MoE `auto` mode is not supported with DP Attention.",
                _POST_INIT,
                hint="set --deepep-mode normal or low_latency",
            ),
            model.EP_MOE_0_4,
            PD_MOONCAKE_DP_0_4,
            *kv_cache.RULES_0_4,
            *speculative.RULES_0_4,
        ),
        add_rules_before=(("TOPO-BASE-GPU-ID", moe_kernel.LORA_RADIX_0_4),),
        # 0.4's data-parallel controller starts replica d at GPU d·tp_size·gpu_id_step.
        replace_rules=(
            *weight_shapes.RULES_0_4,
            topology.gpu_id_range(topology.REPLICA_STRIDE_0_4),
        ),
        remove_rules=tuple(
            r.id
            for r in SEED.rules
            if r.id not in _V0_4_KEPT and not r.id.startswith(("FLAG-ABSENT-", "FLAG-CHOICE-"))
        ),
        add_resolutions=(
            Resolution(
                "R-NO-GRAPHS",
                _POST_INIT,
                "a PD prefill server, DeepEP's normal mode and the torch-native attention "
                "backend run without CUDA graphs",
                (
                    assign(
                        (F.disaggregation_mode == "prefill")
                        | ((F.moe_a2a_backend == "deepep") & (F.deepep_mode == "normal"))
                        | (F.attention_backend == "torch_native"),
                        disable_cuda_graph=True,
                    ),
                ),
            ),
        ),
        replace_resolutions=(
            page_size.RESOLUTION_0_4,
            # __post_init__: "Pipeline parallelism is incompatible with overlap schedule."
            resolution.pp_overlap(_POST_INIT),
            # __post_init__: "KV cache is forced as chunk cache for decode server" (no flag
            # keeps it).
            Resolution(
                "R-DECODE-RADIX",
                _POST_INIT,
                "a PD decode server runs without the radix cache",
                (assign(F.disaggregation_mode == "decode", quiet=True, disable_radix_cache=True),),
            ),
            # meshsat's "auto" is 0.4's unset value, its round_robin default.
            Resolution(
                "R-LOAD-BALANCE",
                _POST_INIT,
                "the load balancing default is round_robin",
                (
                    assign(
                        F.load_balance_method == "auto",
                        quiet=True,
                        load_balance_method="round_robin",
                    ),
                ),
            ),
            # Speculative decoding inline: FlashMLA's and Cutlass MLA's page sizes, NEXTN,
            # (5, 4, 8) for every model, a tree over pages made a chain (top-k 1).
            *speculative.RESOLUTIONS_0_4,
            # The copy of eplb_rebalance_num_iterations is commented out ("TODO pr-chain").
            Resolution(
                "R-METRICS",
                _POST_INIT,
                "the recorder needs a buffer size",
                (
                    assign(
                        ~is_set(F.expert_distribution_recorder_buffer_size)
                        & is_set(F.expert_distribution_recorder_mode),
                        expert_distribution_recorder_buffer_size=1000,
                    ),
                ),
            ),
        ),
        remove_resolutions=(
            # 0.4's DeepEP modes and graphs: R-NO-GRAPHS (no MoRI, pplx or MoE runners).
            "R-A2A-DISPATCH-MODE",
            # No split back-ends and no FA3 fallback for fp8_e5m2 in its __post_init__.
            "R-ATTN-BACKEND",
            "R-MXFP8-RUNNER",
            # No SM100 model overrides of the MoE runner (0.4 has no --moe-runner-backend).
            "R-SM100-MOE-RUNNER",
            "R-LEGACY-CP",
            "R-DWDP",
            "R-CP-MODEL-DPATTN",
            "R-DP1",
            "R-CP-MLA",
            "R-CP-DSA",
            "R-CPV2",
            "R-EPLB-RECORDER",
            "R-DISPATCH",
            "R-ELASTIC-REJOIN",
            "R-ELASTIC-EPLB",
            "R-ELASTIC-INIT",
            # No --enable-lora yet (its __post_init__ reads --lora-paths alone).
            "R-LORA-PATHS",
            # No --enable-deterministic-inference.
            "R-DETERMINISTIC",
            # No NGRAM.
            "R-SPEC-NGRAM",
            # Its argparse takes the upper-case names only (FLAG-CHOICE refuses the rest).
            speculative_names.UPPER_CASE.id,
            # No DSA model class: its KV cache dtype stays as given.
            "R-DSA-KV-DTYPE",
            # No DeepSeek V4 (nor its dsv4 back-end).
            "R-ATTN-MODEL",
        ),
        handler_order=(
            "argparse",
            _POST_INIT,
            "check_server_args",
            "SGLang launch checks",
            "derive_parallel_widths",
            "model weight sharding",
            *weight_shapes.SOURCES,
        ),
        absent_fields=_ABSENT_0_4,
        choices=(
            ("moe_a2a_backend", ("none", "deepep")),
            # meshsat's "auto" is its unset value: 0.4's own default is round_robin.
            ("load_balance_method", ("auto", "round_robin", "shortest_queue")),
            ("quantization", _QUANT_0_4),
            (
                "attention_backend",
                ("aiter", "flashinfer", "triton", "torch_native", "fa3", "flashmla", "cutlass_mla"),
            ),
            # No NGRAM or STANDALONE yet.
            ("speculative_algorithm", ("EAGLE", "EAGLE3", "NEXTN")),
        ),
    ),
)


def _with_model_arch(pack: Pack) -> Pack:
    """The release's MODEL-ARCH-SUPPORTED (its own recorded model registry), checked
    when the model loads: a launch rule, last, since SGLang resolves the architecture only
    in the model loader."""
    arch = model_arch.rule(pack.version)
    return apply(
        pack,
        PackDiff(
            pack.version,
            pack.released,
            pack.summary,
            add_rules=(arch,),
            launch_only=pack.launch_only | {arch.id},
        ),
    )


V0_4_6_POST5 = _with_model_arch(V0_4_6_POST5)
V0_5_18 = _with_model_arch(V0_5_18)
SEED = _with_model_arch(SEED)
V0_5_23 = _with_model_arch(V0_5_23)

#: Every known pack, oldest first; the last is the default.
PACKS: tuple[Pack, ...] = (V0_4_6_POST5, V0_5_18, SEED, V0_5_23)
