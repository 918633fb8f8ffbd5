"""The layout configuration: every field the rules read, with SGLang's names and defaults.

This model is the single declaration of the input vocabulary. The rule language's
field references (`meshsat.solver.lang.fields.F`), the `--set` parser, the SGLang flag table and
`meshsat fields` are all derived from it, so a field added here is usable everywhere.

Fields marked *tool-only* are not SGLang flags: hardware facts (`gpus_per_node`,
`platform`) and environment variables (`env_*`) that SGLang reads at start-up; the
tool takes them as inputs so that validation stays pure.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict
from pydantic import Field as PField

A2aBackend = Literal[
    "none",
    "deepep",
    "deepep_v2",
    "mooncake",
    "nixl",
    "mori",
    "flashinfer",
    "pplx",
    "megamoe",
    "ascend_fuseep",
    "ascend_tp",
    "flashinfer_megamoe",
]
A2A_BACKENDS: tuple[str, ...] = get_args(A2aBackend)
#: --moe-runner-backend: the union of every recorded release's choices (fidelity/flags/).
MoeRunnerBackend = Literal[
    "auto",
    "deep_gemm",
    "triton",
    "triton_kernel",
    "flashinfer_trtllm",
    "experimental_sgl_trtllm",
    "flashinfer_trtllm_routed",
    "flashinfer_cutlass",
    "flashinfer_mxfp4",
    "flashinfer_cutedsl",
    "flashinfer_megamoe",
    "cutlass",
    "aiter",
    "marlin",
    "humming",
    "experimental_sgl_marlin",
    "lora_cutedsl",
    "lora_triton",
    "lora_marlin",
    "hpc_ops",
    "megamoe",
    "intel_xpu",
]
#: --quantization: the union of every recorded release's choices (fidelity/flags/).
Quantization = Literal[
    "awq",
    "fp8",
    "mxfp8",
    "gptq",
    "gptq_marlin",
    "awq_marlin",
    "bitsandbytes",
    "gguf",
    "modelopt",
    "modelopt_fp8",
    "modelopt_fp4",
    "nvfp4_online",
    "modelopt_mixed",
    "petit_nvfp4",
    "w8a8_int8",
    "w8a8_fp8",
    "moe_wna16",
    "w4afp8",
    "mxfp4",
    "auto-round",
    "auto-round-int8",
    "compressed-tensors",
    "modelslim",
    "mxfp_w4a8",
    "quark",
    "quark_int4fp8_moe",
    "quark_mxfp4",
    "mlx_q4",
    "mlx_q8",
    "unquant",
    "humming",
    "marlin",
    "qoq",
]
#: --disaggregation-decode-retraction-backup ('none', keep no backup, from 0.5.23).
RetractionBackup = Literal["cpu_tensor", "host_pool", "none"]
#: --cuda-graph-backend-{decode,prefill} (tc_piecewise only up to 0.5.19).
GraphBackend = Literal["full", "breakable", "tc_piecewise", "disabled"]
#: Tool-only fields a GPU type sets (`memory.gpus.Gpu.layout_fields`): no SGLang flag says
#: them and `--gpu` says them again, so no command meshsat writes carries them.
IMPLIED_BY_GPU = ("gpu_sm", "platform")


def _f(
    default: Any,
    help: str,
    *,
    flags: tuple[str, ...] = (),
    size: bool = False,
    group: str = "layout",
    tool_only: bool = False,
    **kw: Any,
) -> Any:
    """Declare a field with the metadata the CLI and rule compiler read."""
    extra: dict[str, Any] = {
        "flags": list(flags),
        "size": size,
        "group": group,
        "tool_only": tool_only,
    }
    if size:
        kw.setdefault("ge", 1)
    return PField(default, description=help, json_schema_extra=extra, **kw)


class Config(BaseModel):
    """One SGLang launch's parallel layout, as the user wrote it (before resolution)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    # --- topology ---------------------------------------------------------------------
    tp_size: int = _f(
        1,
        "World size of one engine per pipeline stage (not the real TP "
        "degree: attention and MoE carve their widths out of it).",
        flags=("--tp-size", "--tensor-parallel-size", "--tp"),
        size=True,
        group="topology",
    )
    pp_size: int = _f(
        1,
        "Pipeline-parallel stages.",
        flags=("--pp-size", "--pipeline-parallel-size", "--pp"),
        size=True,
        group="topology",
    )
    dp_size: int = _f(
        1,
        "Data-parallel size: DP-attention groups inside the engine, or "
        "independent replicas without DP attention.",
        flags=("--dp-size", "--data-parallel-size", "--dp"),
        size=True,
        group="topology",
    )
    nnodes: int = _f(1, "Nodes the engine spans.", flags=("--nnodes",), size=True, group="topology")
    node_rank: int = _f(0, "This node's rank.", flags=("--node-rank",), ge=0, group="topology")
    gpus_per_node: int = _f(
        8,
        "GPUs per node, for rank groups, --intra-node and TOPO-NODE-GPUS. A launch "
        "gives it with ASCEND_RT_VISIBLE_DEVICES; with --device npu and no such list it is "
        "16 (an Atlas A3 node; solver/inputs/accelerator.py).",
        size=True,
        group="topology",
        tool_only=True,
    )
    # No `ge`: SGLang accepts any integer here and rejects a negative base or a step below 1
    # in check_server_args (TOPO-BASE-GPU-ID, TOPO-GPU-ID-STEP), which meshsat reports with
    # SGLang's words instead of refusing the input. The step is declared first: fix breaks
    # ties field by field in declaration order, so it keeps the step and lowers the base.
    gpu_id_step: int = _f(
        1,
        "Distance between the GPU ids of consecutive TP ranks on a node (2: GPUs 0,2,4,...).",
        flags=("--gpu-id-step",),
        group="topology",
    )
    base_gpu_id: int = _f(
        0,
        "First GPU id (CUDA ordinal) this server's ranks use on each node; the scheduler of "
        "a node's k-th rank runs on base_gpu_id + k·gpu_id_step (docs/placement.md).",
        flags=("--base-gpu-id",),
        group="topology",
    )
    platform: Literal["cuda", "hip", "npu", "cpu"] = _f(
        "cuda",
        "Accelerator platform SGLang runs on; a launch's --device npu sets npu.",
        group="topology",
        tool_only=True,
    )
    gpu_sm: int | None = _f(
        None,
        "CUDA compute capability x10 of the GPUs (90: H100/H200, 100: B200/GB200); None: "
        "not known, and rules that need a GPU class (FlashInfer MegaMOE, nvfp4_online) "
        "are not checked.",
        group="topology",
        tool_only=True,
        ge=1,
    )

    # --- attention: DP attention and context parallelism -----------------------------
    enable_dp_attention: bool = _f(
        False,
        "Data-parallel attention, tensor-parallel FFN.",
        flags=("--enable-dp-attention",),
        group="attention",
    )
    attn_dp_size: int = _f(
        1,
        "DP-attention width (SGLang >= 0.5.23, where --dp-size then counts replicas). Read "
        "as enable_dp_attention with dp_size = attn_dp_size; releases without the flag "
        "reject it.",
        flags=("--attn-dp-size", "--attention-data-parallel-size"),
        size=True,
        group="attention",
    )
    enable_dp_lm_head: bool = _f(
        False,
        "Vocabulary parallel across the attention-TP group.",
        flags=("--enable-dp-lm-head",),
        group="attention",
    )
    attn_cp_size: int = _f(
        1,
        "Attention context-parallel width.",
        flags=("--attn-cp-size", "--attention-context-parallel-size"),
        size=True,
        group="attention",
    )
    enable_prefill_cp: bool = _f(
        False, "Context parallelism for prefill.", flags=("--enable-prefill-cp",), group="attention"
    )
    cp_strategy: Literal["zigzag", "interleave"] | None = _f(
        None,
        "Prefill-CP sharding: zigzag (former in-seq-split) or interleave (former "
        "round-robin-split).",
        flags=("--cp-strategy",),
        group="attention",
    )
    enable_prefill_context_parallel: bool = _f(
        False,
        "Legacy alias of --enable-prefill-cp (MLA and MHA/GQA models).",
        flags=("--enable-prefill-context-parallel",),
        group="attention",
    )
    prefill_cp_mode: Literal["in-seq-split", "round-robin-split"] = _f(
        "in-seq-split",
        "Legacy CP mode for --enable-prefill-context-parallel.",
        flags=("--prefill-cp-mode",),
        group="attention",
    )
    enable_dsa_prefill_context_parallel: bool = _f(
        False,
        "Legacy alias of --enable-prefill-cp for DeepSeek sparse attention.",
        flags=("--enable-nsa-prefill-context-parallel", "--enable-dsa-prefill-context-parallel"),
        group="attention",
    )
    dsa_prefill_cp_mode: Literal["in-seq-split", "round-robin-split"] = _f(
        "round-robin-split",
        "Legacy CP mode for the DSA alias.",
        flags=("--nsa-prefill-cp-mode", "--dsa-prefill-cp-mode"),
        group="attention",
    )
    attention_backend: str | None = _f(
        None,
        "Attention backend (dsa/dsv4 select the DSA legacy aliases).",
        flags=("--attention-backend",),
        group="attention",
    )
    prefill_attention_backend: str | None = _f(
        None,
        "Prefill attention backend (None: --attention-backend's); equal to the decode one, "
        "it becomes --attention-backend (0.5.x).",
        flags=("--prefill-attention-backend",),
        group="attention",
    )
    decode_attention_backend: str | None = _f(
        None,
        "Decode attention backend (None: --attention-backend's).",
        flags=("--decode-attention-backend",),
        group="attention",
    )
    enable_aiter_allreduce_fusion: bool = _f(
        False,
        "AMD aiter all-reduce fusion.",
        flags=("--enable-aiter-allreduce-fusion",),
        group="attention",
    )
    enable_deterministic_inference: bool = _f(
        False,
        "Batch-invariant (deterministic) inference: the attention backend must be one of "
        "the deterministic ones (unset: fa3, or flashinfer/triton on SM100/SM120); off the "
        "radix-capable ones (fa3, fa4, triton, ascend) the radix cache is turned off "
        "(0.5.18 on).",
        flags=("--enable-deterministic-inference",),
        group="attention",
    )
    chunked_prefill_size: int | None = _f(
        None,
        "Chunked prefill size (divided by dp under DP attention).",
        flags=("--chunked-prefill-size",),
        group="attention",
    )
    max_prefill_tokens: int = _f(
        16384,
        "Most tokens in one prefill batch (DeepEP v2 sizes its prefill dispatch by it when "
        "chunked prefill is off).",
        flags=("--max-prefill-tokens",),
        group="attention",
        ge=0,
    )
    schedule_conservativeness: float = _f(
        1.0,
        "Scheduler conservativeness (x0.3 under DP attention).",
        flags=("--schedule-conservativeness",),
        group="attention",
    )
    mm_enable_dp_encoder: bool = _f(
        False,
        "Replicate the vision encoder across TP ranks.",
        flags=("--mm-enable-dp-encoder",),
        group="attention",
    )
    enable_multimodal: bool = _f(
        False,
        "Serve a model SGLang runs as text by default (Gemma 3, Llama 4, Step3-VL, ...) "
        "as multimodal.",
        flags=("--enable-multimodal",),
        group="attention",
    )
    language_only: bool = _f(
        False, "Serve the language model only.", flags=("--language-only",), group="attention"
    )
    language_model_only: bool = _f(
        False,
        "Serve the language model only (alias).",
        flags=("--language-model-only",),
        group="attention",
    )
    env_enable_cp_v2: bool | None = _f(
        None,
        "SGLANG_ENABLE_CP_V2 in the environment (None: unset).",
        group="attention",
        tool_only=True,
    )

    # --- KV cache and context: read by launch rules and by the memory model ----------
    context_length: int | None = _f(
        None,
        "The server's context length (None: the model's, SGLang's get_context_length); "
        "longer than the model's does not start (MODEL-CONTEXT-LENGTH) unless "
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN allows it. Also sizes the memory "
        "verdict's requests.",
        flags=("--context-length",),
        group="attention",
    )
    env_allow_overwrite_longer_context_len: bool | None = _f(
        None,
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN in the environment (None: unset; "
        "0.4.6.post5 reads unset as true, 0.5.x as false).",
        group="attention",
        tool_only=True,
    )
    kv_cache_dtype: str = _f(
        "auto",
        "KV cache data type (DeepSeek DSA takes auto, bf16/bfloat16 or fp8_e4m3: "
        "MODEL-DSA-KV-DTYPE; nvfp4 and fp4_mx_block16 need CUDA and an attention back-end "
        "that reads FP4: KV4-*); also what the memory model prices the KV pool in.",
        flags=("--kv-cache-dtype",),
        group="attention",
    )
    page_size: int | None = _f(
        None,
        "Tokens per KV page (None: SGLang's, 1). Some attention back-ends and models force "
        "their own (flashmla 64, DeepSeek DSA 64, ...: R-PAGE-SIZE); the resolved page must "
        "divide the chunked prefill size (KV-CHUNK-PAGE) and match between a prefill and "
        "its decode server (PD-PAGE-SIZE), and a draft tree (speculative top-k above 1) over "
        "pages needs a back-end that implements it (SPEC-EAGLE-PAGE-TREE, SPEC-NGRAM-PAGE). "
        "Also what the memory model rounds pools to.",
        flags=("--page-size",),
        group="attention",
        ge=1,
    )
    swa_full_tokens_ratio: float = _f(
        0.8,
        "Sliding-window layers' KV tokens over full-attention layers' (SGLang's default 0.8; "
        "where not given, a model may have its own, DeepSeek-V4 0.1). SGLang takes (0, 1] "
        "(SWA-RATIO-RANGE); the memory model sizes hybrid-SWA pools with the command's value.",
        flags=("--swa-full-tokens-ratio",),
        group="attention",
    )

    # --- decode context parallelism -------------------------------------------------
    dcp_size: int = _f(
        1,
        "Decode context-parallel width inside the attention-TP group.",
        flags=("--dcp-size", "--decode-context-parallel-size"),
        size=True,
        group="dcp",
    )
    dcp_comm_backend: Literal["ag_rs", "a2a", "fi_a2a"] | None = _f(
        None,
        "DCP attention reduction backend (unset: SGLang picks one; ag_rs up to 0.5.19, "
        "a2a on CUDA/ROCm with --dcp-size > 1 from 0.5.23).",
        flags=("--dcp-comm-backend",),
        group="dcp",
    )
    dcp_replicate_q_proj: bool | None = _f(
        None,
        "Replicate the Q projection on each DCP rank (unset: DeepSeek V3.2 turns it on with "
        "the a2a backends from 0.5.23).",
        flags=("--dcp-replicate-q-proj",),
        group="dcp",
    )

    # --- MoE and expert parallelism --------------------------------------------------
    ep_size: int = _f(
        1,
        "Expert-parallel width.",
        flags=("--ep-size", "--expert-parallel-size", "--ep"),
        size=True,
        group="moe",
    )
    moe_dp_size: int = _f(
        1,
        "MoE data-parallel width.",
        flags=("--moe-dp-size", "--moe-data-parallel-size"),
        size=True,
        group="moe",
    )
    moe_dense_tp_size: int | None = _f(
        None,
        "TP size for MoE dense MLP layers (None, 1 or tp_size).",
        flags=("--moe-dense-tp-size",),
        group="moe",
        ge=1,
    )
    moe_a2a_backend: A2aBackend = _f(
        "none",
        "MoE all-to-all backend (any but none forces ep_size = tp_size).",
        flags=("--moe-a2a-backend",),
        group="moe",
    )
    moe_runner_backend: MoeRunnerBackend = _f(
        "auto",
        "MoE expert kernels; the FlashInfer and pplx all-to-all backends accept only some.",
        flags=("--moe-runner-backend",),
        group="moe",
    )
    quantization: Quantization | None = _f(
        None,
        "Weight quantization: the MoE runners accept only some (FlashInfer, MegaMOE).",
        flags=("--quantization",),
        group="moe",
    )
    enable_lora: bool = _f(
        False,
        "LoRA adapters (the lora_* MoE runners need it; --lora-paths turns it on too).",
        flags=("--enable-lora",),
        group="moe",
    )
    # SGLang's --lora-paths takes a list of adapters; meshsat reads only whether it names
    # any (SGLang then turns --enable-lora on, R-LORA-PATHS). A fact of the launch, like
    # the GPUs: fix never adds or drops adapters, and no command meshsat writes spells it.
    lora_paths: bool = _f(
        False,
        "--lora-paths names at least one LoRA adapter (meshsat reads only that much of it).",
        group="moe",
        tool_only=True,
    )
    # What LoRA's buffers are shaped for when no adapter is named at launch (0.5.x: SGLang
    # then needs both, LORA-RANK-MODULES). Facts of the launch, as the adapters are: fix
    # keeps them. --lora-target-modules is a list of which meshsat reads only whether it
    # names a module (SGLang tests its truth).
    max_lora_rank: int | None = _f(
        None,
        "Largest LoRA adapter rank (None: inferred from --lora-paths' adapters; 0 is "
        "SGLang's 'not given' too).",
        flags=("--max-lora-rank",),
        group="moe",
    )
    lora_target_modules: bool = _f(
        False,
        "--lora-target-modules names at least one module (meshsat reads only that much of it).",
        group="moe",
        tool_only=True,
    )
    lora_backend: Literal["triton", "csgmv", "ascend", "torch_native", "triton_v2"] = _f(
        "csgmv",
        "LoRA kernel back-end: the lora_* MoE runners need triton_v2, which refuses DP "
        "attention and two-batch overlap (0.5.23).",
        flags=("--lora-backend",),
        group="moe",
    )
    ep_num_redundant_experts: int = _f(
        0,
        "Redundant expert replicas EPLB places beside the model's experts.",
        flags=("--ep-num-redundant-experts",),
        group="moe",
        ge=0,
    )
    deepep_v2_mode: Literal["direct", "hybrid"] = _f(
        "direct",
        "DeepEP v2 ElasticBuffer mode: direct is NVLink-only (one node).",
        flags=("--deepep-v2-mode",),
        group="moe",
    )
    deepep_mode: Literal["auto", "normal", "low_latency"] = _f(
        "auto",
        "DeepEP dispatch mode (0.4.x refuses auto under DP attention).",
        flags=("--deepep-mode",),
        group="moe",
    )
    env_pplx_max_dispatch_tokens_per_rank: int = _f(
        128,
        "SGLANG_PPLX_NUM_MAX_DISPATCH_TOKENS_PER_RANK in the environment (pplx's per-rank "
        "dispatch budget).",
        group="moe",
        tool_only=True,
    )
    env_mori_max_dispatch_tokens_per_rank: int = _f(
        4096,
        "SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK in the environment (MoRI's per-rank "
        "dispatch budget).",
        group="moe",
        tool_only=True,
    )
    enable_eplb: bool = _f(
        False, "Expert-parallel load balancer.", flags=("--enable-eplb",), group="moe"
    )
    eplb_algorithm: str = _f(
        "auto",
        "EPLB algorithm (auto, deepseek, elasticity_aware, ...).",
        flags=("--eplb-algorithm",),
        group="moe",
    )
    # "random": 0.4.6.post5's free-text flag took it (issue 6017's large-scale EP recipe);
    # later releases list choices without it, and their parser refuses it (CMD-UNKNOWN-FLAG).
    ep_dispatch_algorithm: Literal["static", "dynamic", "fake", "lp", "random"] | None = _f(
        None, "Expert replica dispatch algorithm.", flags=("--ep-dispatch-algorithm",), group="moe"
    )
    init_expert_location: str = _f(
        "trivial", "Initial expert placement.", flags=("--init-expert-location",), group="moe"
    )
    expert_distribution_recorder_mode: (
        Literal["stat", "stat_approx", "per_pass", "per_token"] | None
    ) = _f(
        None,
        "Expert distribution recorder mode.",
        flags=("--expert-distribution-recorder-mode",),
        group="moe",
    )
    expert_distribution_recorder_buffer_size: int | None = _f(
        None,
        "Recorder buffer size.",
        flags=("--expert-distribution-recorder-buffer-size",),
        group="moe",
    )
    # SGLang's default is 1000 (every release recorded, fidelity/flags/), not None: the
    # recorder buffer copies it, so every config resolves the buffer to 1000.
    eplb_rebalance_num_iterations: int | None = _f(
        1000, "EPLB rebalance period.", flags=("--eplb-rebalance-num-iterations",), group="moe"
    )
    expert_balancedness_report_mode: Literal["off", "server_log", "prometheus", "both"] = _f(
        "off",
        "Expert balancedness report.",
        flags=("--expert-balancedness-report-mode",),
        group="moe",
    )
    env_enable_eplb_balancedness_metric: bool = _f(
        False,
        "SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC is set (removed variable).",
        group="moe",
        tool_only=True,
    )

    # --- DWDP, disaggregation, speculative decoding, overlap ------------------------
    dwdp_size: int = _f(
        1,
        "Distributed weight data parallelism group size (> 1 enables).",
        flags=("--dwdp-size",),
        size=True,
        group="dwdp",
    )
    disaggregation_mode: Literal["null", "prefill", "decode"] = _f(
        "null",
        "Prefill/decode disaggregation role.",
        flags=("--disaggregation-mode",),
        group="dwdp",
    )
    disaggregation_transfer_backend: str = _f(
        "mooncake",
        "PD KV transfer backend (mooncake, nixl, ascend, mori, fake, mooncake_tcp; 0.4.6.post5: "
        "mooncake or nixl). Read by the single-server PD checks (a prefill refuses fake; "
        "0.4.6.post5's Mooncake manager refuses DP replicas).",
        flags=("--disaggregation-transfer-backend",),
        group="dwdp",
    )
    disaggregation_decode_allocation_policy: Literal["early", "prefill_complete"] = _f(
        "early",
        "When a PD decode reserves a request's KV (0.5.23): prefill_complete only with "
        "Mooncake and attention TP 1, and the same policy on both roles.",
        flags=("--disaggregation-decode-allocation-policy",),
        group="dwdp",
    )
    speculative_algorithm: str | None = _f(
        None,
        "Speculative decoding algorithm (EAGLE, EAGLE3, NEXTN, an alias of EAGLE, "
        "STANDALONE, NGRAM, ...; 0.4.6.post5: EAGLE, EAGLE3, NEXTN).",
        flags=("--speculative-algorithm",),
        group="dwdp",
    )
    # UNO's draft LoRA checkpoint (0.5.23): meshsat reads only whether one is given (SGLang
    # asks `is not None`). A fact of the launch: fix keeps it, no command meshsat writes
    # spells it.
    uno_lora_path: bool = _f(
        False,
        "--uno-lora-path is given (UNO's draft adapter, 0.5.23; meshsat reads only that).",
        group="dwdp",
        tool_only=True,
    )
    enable_multi_layer_eagle: bool = _f(
        False,
        "--enable-multi-layer-eagle (0.5.18 to 0.5.23): EAGLE drafts with several MTP layers; "
        "the MiMo-V2, Step-3.5/3.7 and GigaChat 3.5 overrides also turn it on for "
        "--speculative-algorithm EAGLE. Read by TOPO-PP-SPEC (PP takes single-layer EAGLE "
        "only).",
        flags=("--enable-multi-layer-eagle",),
        group="dwdp",
    )
    speculative_num_steps: int | None = _f(
        None,
        "Draft steps (None: with EAGLE, EAGLE3 and STANDALONE the release picks steps, "
        "top-k and draft tokens together by architecture, and then none of the three may "
        "be given).",
        flags=("--speculative-num-steps",),
        group="dwdp",
        ge=1,
    )
    speculative_eagle_topk: int | None = _f(
        None,
        "Tokens drafted per step (a tree above 1; NGRAM's is its BFS breadth, whatever is "
        "given here). A tree over KV pages needs a back-end that implements it.",
        flags=("--speculative-eagle-topk",),
        group="dwdp",
        ge=1,
    )
    speculative_ngram_max_bfs_breadth: int = _f(
        10,
        "NGRAM's BFS breadth, which SGLang makes its top-k (0.5.x).",
        flags=("--speculative-ngram-max-bfs-breadth",),
        group="dwdp",
        ge=1,
    )
    speculative_num_draft_tokens: int | None = _f(
        None,
        "Draft tokens verified per step (None: the release's default for the algorithm; "
        "with top-k 1 SGLang makes it steps + 1); read by the memory model, which sizes a "
        "hybrid's speculative state slots with it.",
        flags=("--speculative-num-draft-tokens",),
        group="dwdp",
        ge=1,
    )
    max_running_requests: int | None = _f(
        None,
        "Most requests running at once (None: the release's own; 48 with speculative "
        "decoding); read by the memory model for a hybrid's speculative state slots.",
        flags=("--max-running-requests",),
        group="dwdp",
        ge=1,
    )
    cuda_graph_max_bs_decode: int | None = _f(
        None,
        "Largest decode CUDA-graph batch (None: SGLang sizes it by the GPU's memory, 256 or "
        "512 on an H100/H200, 512 on a B200, capped by --max-running-requests); read by "
        "A2A-DEEPEP-V2-DECODE-BUDGET, and as typed by A2A-PPLX-DISPATCH.",
        flags=("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"),
        group="dwdp",
        ge=1,
    )
    max_mamba_cache_size: int | None = _f(
        None,
        "State slots of a linear-attention hybrid's pool, over all attention-DP ranks "
        "(None: sized from --mamba-full-memory-ratio); read by the memory model.",
        flags=("--max-mamba-cache-size",),
        group="dwdp",
        ge=1,
    )
    enable_two_batch_overlap: bool = _f(
        False, "Two-batch overlap.", flags=("--enable-two-batch-overlap",), group="dwdp"
    )
    enable_single_batch_overlap: bool = _f(
        False,
        "Single-batch overlap (0.5.x; MegaMOE and DeepEP v2 refuse it as they refuse "
        "two-batch overlap).",
        flags=("--enable-single-batch-overlap",),
        group="dwdp",
    )

    # --- caches and scheduling: read by argument and launch checks -------------------
    # Not layout widths, but SGLang refuses some of their combinations at argument time
    # (handle_hicache, handle_cache_compatibility) or in check_server_args(), so a launch
    # that sets them is judged with them (solver/catalogue/serving.py).
    enable_hierarchical_cache: bool = _f(
        False,
        "HiCache: the KV cache spills to host memory (and a storage backend). Refused with "
        "the radix cache off (a PD decode server turns it off unless "
        "--disaggregation-decode-enable-radix-cache) and, under decode CP, on non-MLA models.",
        flags=("--enable-hierarchical-cache", "--enable-hicache"),
        group="serving",
    )
    disable_radix_cache: bool = _f(
        False,
        "Turn the radix (prefix) cache off; SGLang refuses it with HiCache.",
        flags=("--disable-radix-cache",),
        group="serving",
    )
    hicache_host_memory_mode: Literal["cache", "buffer_only"] = _f(
        "cache",
        "HiCache host memory as a cache tier, or only a staging buffer in front of the "
        "storage backend (buffer_only needs --hicache-storage-backend; not on a PD decode).",
        flags=("--hicache-host-memory-mode",),
        group="serving",
    )
    hicache_storage_backend: str | None = _f(
        None,
        "HiCache's storage tier (file, mooncake, hf3fs, nixl, ...; unset: none).",
        flags=("--hicache-storage-backend",),
        group="serving",
    )
    disaggregation_decode_enable_radix_cache: bool = _f(
        False,
        "Keep the radix cache on a PD decode server (SGLang turns it off there otherwise).",
        flags=("--disaggregation-decode-enable-radix-cache",),
        group="serving",
    )
    disaggregation_decode_retraction_backup: RetractionBackup | None = _f(
        None,
        "Where a PD decode keeps a retracted request's KV (unset: inferred; host_pool "
        "and unset run the HiCache checks on a decode server; 'none' from 0.5.23).",
        flags=("--disaggregation-decode-retraction-backup",),
        group="serving",
    )
    schedule_policy: str = _f(
        "fcfs",
        "Request scheduling policy (lpm, random, fcfs, dfs-weight, lof, priority, ...); "
        "priority scheduling takes only fcfs or lof.",
        flags=("--schedule-policy",),
        group="serving",
    )
    enable_priority_scheduling: bool = _f(
        False,
        "Schedule requests by their priority (with --schedule-policy fcfs or lof).",
        flags=("--enable-priority-scheduling",),
        group="serving",
    )
    disable_priority_preemption: bool = _f(
        False,
        "Priority scheduling without preemption (a PD decode's host_pool retraction backup "
        "needs it with priority scheduling).",
        flags=("--disable-priority-preemption",),
        group="serving",
    )
    retraction_policy: Literal["length", "priority"] = _f(
        "length",
        "Which decode requests are retracted first when the KV cache is full (priority "
        "needs --enable-priority-scheduling).",
        flags=("--retraction-policy",),
        group="serving",
    )
    pp_max_micro_batch_size: int | None = _f(
        None,
        "Most requests in one pipeline micro-batch (None: computed); SGLang takes a "
        "positive integer.",
        flags=("--pp-max-micro-batch-size",),
        group="serving",
    )
    min_free_slots_delay: int | None = _f(
        None,
        "Hold new prefills until this many running-request slots are free (not with "
        "pipeline parallelism).",
        flags=("--min-free-slots-delay",),
        group="serving",
    )
    disable_overlap_schedule: bool = _f(
        False,
        "Turn off the overlap scheduler (PD-Multiplexing needs it off; pipeline "
        "parallelism turns it off).",
        flags=("--disable-overlap-schedule",),
        group="serving",
    )
    enable_pdmux: bool = _f(
        False,
        "PD-Multiplexing: prefill and decode on CUDA green-context streams (pp 1, chunked "
        "prefill off, no PD role, overlap scheduler off).",
        flags=("--enable-pdmux",),
        group="serving",
    )
    enable_torch_compile: bool = _f(
        False,
        "Compile the model with torch.compile (not with --disable-cuda-graph-padding).",
        flags=("--enable-torch-compile",),
        group="serving",
    )
    disable_cuda_graph_padding: bool = _f(
        False,
        "Run eagerly where a batch would need CUDA-graph padding (not with torch.compile).",
        flags=("--disable-cuda-graph-padding",),
        group="serving",
    )
    enable_lmcache: bool = _f(
        False,
        "LMCache as the KV cache's external tier (0.5.23 refuses it with HiCache, the radix "
        "cache off, speculative decoding, attention DP, decode CP, buffer_only host memory "
        "and any PD role; every 0.5 release refuses it with HiCache under decode CP).",
        flags=("--enable-lmcache",),
        group="serving",
    )
    enable_unified_memory: bool = _f(
        False,
        "One unified (CUDA managed) memory pool for the KV cache (0.5.18 to 0.5.23; 0.5.23 "
        "refuses it with an FP4 KV cache, KV4-UNIFIED-MEMORY).",
        flags=("--enable-unified-memory",),
        group="serving",
    )
    disaggregation_decode_enable_offload_kvcache: bool = _f(
        False,
        "A PD decode server offloads its KV to the HiCache storage backend (decode only, "
        "with --hicache-storage-backend, not with the host_pool retraction backup).",
        flags=("--disaggregation-decode-enable-offload-kvcache",),
        group="serving",
    )
    enable_hisparse: bool = _f(
        False,
        "Hierarchical sparse attention (DeepSeek DSA, V4, MiniMax M3 only; needs the radix "
        "cache off, so no --disaggregation-decode-enable-radix-cache; not under decode CP "
        "with HiCache).",
        flags=("--enable-hisparse",),
        group="serving",
    )
    enable_mixed_chunk: bool = _f(
        False,
        "Mix prefill chunks into decode batches (0.5.23: not with --enable-hisparse, "
        "HISPARSE-MIXED-CHUNK).",
        flags=("--enable-mixed-chunk",),
        group="serving",
    )

    # --- elastic expert parallelism -------------------------------------------------
    elastic_ep_backend: Literal["none", "mooncake", "nixl"] | None = _f(
        None,
        "Elastic EP backend. The string 'none' turns elastic EP ON: SGLang keeps it and "
        "tests `is not None` (every 0.5.x); leave the flag out for no elastic EP.",
        flags=("--elastic-ep-backend",),
        group="elastic",
    )
    elastic_ep_rejoin: bool = _f(
        False,
        "Deprecated: use --elastic-ep-join-mode recover.",
        flags=("--elastic-ep-rejoin",),
        group="elastic",
    )
    ep_join_mode: Literal["scale", "recover"] | None = _f(
        None, "Elastic EP join mode.", flags=("--elastic-ep-join-mode",), group="elastic"
    )
    ep_join_rank_offset: int = _f(
        0,
        "Global rank offset of a joining group.",
        flags=("--elastic-ep-join-rank-offset",),
        group="elastic",
    )
    max_ep_size: int | None = _f(
        None, "Largest EP size the server may scale to.", flags=("--max-ep-size",), group="elastic"
    )
    elastic_ep_initial_size: int | None = _f(
        None,
        "Launch-time EP size of the primary.",
        flags=("--elastic-ep-initial-size",),
        group="elastic",
    )
    elastic_ep_scale_timeout: int = _f(
        600, "Scale-up timeout in seconds.", flags=("--elastic-ep-scale-timeout",), group="elastic"
    )
    tokenizer_worker_num: int = _f(
        1, "Tokenizer workers.", flags=("--tokenizer-worker-num",), group="elastic"
    )
    use_ray: bool = _f(False, "Launch with Ray.", flags=("--use-ray",), group="elastic")
    enable_elastic_expert_backup: bool = _f(
        False, "Elastic expert backup.", flags=("--enable-elastic-expert-backup",), group="elastic"
    )
    load_balance_method: Literal[
        "auto",
        "round_robin",
        "total_requests",
        "total_tokens",
        "follow_bootstrap_room",
        "shortest_queue",
        "decode_round_robin",
    ] = _f(
        "auto",
        "DP load balancing (auto: round_robin, follow_bootstrap_room on a PD prefill server; "
        "shortest_queue only in 0.4; decode_round_robin only in 0.5 releases before "
        "follow_bootstrap_room replaced it, which no pack holds).",
        flags=("--load-balance-method",),
        group="elastic",
    )
    disable_cuda_graph: bool = _f(
        False,
        "Disable CUDA graphs for every phase.",
        flags=("--disable-cuda-graph",),
        group="elastic",
    )
    disable_decode_cuda_graph: bool = _f(
        False,
        "Disable decode CUDA graphs.",
        flags=("--disable-decode-cuda-graph",),
        group="elastic",
    )
    disable_prefill_cuda_graph: bool = _f(
        False,
        "Disable prefill CUDA graphs.",
        flags=("--disable-prefill-cuda-graph", "--disable-piecewise-cuda-graph"),
        group="elastic",
    )
    cuda_graph_backend_decode: GraphBackend | None = _f(
        None,
        "Decode CUDA-graph backend (disabled = --disable-decode-cuda-graph; elastic EP "
        "scale-up accepts full on CUDA from 0.5.23).",
        flags=("--cuda-graph-backend-decode",),
        group="elastic",
    )
    cuda_graph_backend_prefill: GraphBackend | None = _f(
        None,
        "Prefill CUDA-graph backend (disabled = --disable-prefill-cuda-graph).",
        flags=("--cuda-graph-backend-prefill",),
        group="elastic",
    )

    def user_set(self) -> frozenset[str]:
        """Fields the user gave explicitly: what `fix` tries to keep and cores range over."""
        return frozenset(self.model_fields_set)
