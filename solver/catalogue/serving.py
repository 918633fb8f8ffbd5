"""Cache and scheduling flags SGLang refuses together: HiCache, the radix cache, a PD
decode's host-pool retraction backup, priority scheduling, PD-Multiplexing, pipeline
micro-batches, torch.compile.

Why here: these are no layout widths, but SGLang refuses their combinations before it
starts (0.5.18 to 0.5.23; 0.4.6.post5 has none of these checks), so a launch that
sets them would be "valid" in meshsat and refused by SGLang. HiCache is judged while the
arguments resolve (`handle_hicache`, `handle_cache_compatibility`); the rest in
`check_server_args()`, at launch (solver/catalogue/topology.py places them in its order).
"""

from __future__ import annotations

from meshsat.solver.lang.expr import FALSE, is_set, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

#: The HiCache handler (arg_groups/hicache_hook.py; `_handle_hicache` in 0.5.18).
HICACHE_SRC = "handle_hicache"
#: The cache handler, near the end of resolution (kv_cache_hook.py).
CACHE_SRC = "handle_cache_compatibility"
#: check_server_args() (arg_groups/validation_hook.py; ServerArgs' own method in 0.5.18).
CHECK = "check_server_args"

_backup = F.disaggregation_decode_retraction_backup
#: `handle_hicache` returns at once unless HiCache is on, a PD decode offloads its KV
#: (`--disaggregation-decode-enable-offload-kvcache`) or keeps its retracted KV in a HiCache
#: host pool (the backup unset or host_pool).
HICACHE_ACTIVE = (
    F.enable_hierarchical_cache
    | F.disaggregation_decode_enable_offload_kvcache
    | ((F.disaggregation_mode == "decode") & (~is_set(_backup) | (_backup == "host_pool")))
)
_buffer_only = F.hicache_host_memory_mode == "buffer_only"
_storage = is_set(F.hicache_storage_backend)
_hicache_dcp = F.enable_hierarchical_cache & (F.dcp_size > 1)

#: validate_hicache_host_memory_mode (0.5.19, 0.5.23; 0.5.18 has no such flag).
BUFFER_STORAGE = Rule(
    "HICACHE-BUFFER-STORAGE",
    HICACHE_ACTIVE & _buffer_only,
    _storage,
    "--hicache-host-memory-mode buffer_only requires a storage backend "
    "(--hicache-storage-backend): host memory is only a staging buffer and all cached data "
    "lives in storage.",
    HICACHE_SRC,
    hint="add --hicache-storage-backend (file, mooncake, ...), or use "
    "--hicache-host-memory-mode cache",
)
BUFFER_DECODE = Rule(
    "HICACHE-BUFFER-DECODE",
    HICACHE_ACTIVE & _buffer_only & _storage,
    F.disaggregation_mode != "decode",
    "--hicache-host-memory-mode buffer_only is not supported on decode instances: the "
    "decode-side prefetch and offload paths bypass the buffer-mode pipeline, fetching "
    "without its prefix context and never consuming its staged holds. Prefill instances "
    "share the standard scheduler path and are supported.",
    HICACHE_SRC,
    hint="use --hicache-host-memory-mode cache on the decode server",
)


def dcp_storage_rule(buffer_only_only: bool) -> Rule:
    """resolve_hicache_dcp_compatibility's storage check: 0.5.18 and 0.5.19 refuse any
    storage backend (L3) under decode CP; 0.5.23 only its buffer_only host memory."""
    if buffer_only_only:
        return Rule(
            "HICACHE-DCP-STORAGE",
            _hicache_dcp & _storage,
            ~_buffer_only,
            "HiCache L3 with DCP does not support buffer_only host memory.",
            HICACHE_SRC,
            hint="use --hicache-host-memory-mode cache with --dcp-size > 1",
        )
    return Rule(
        "HICACHE-DCP-STORAGE",
        _hicache_dcp,
        ~_storage,
        "--hicache-storage-backend (L3) with --dcp-size > 1 is not supported yet: under DCP "
        "each rank holds a distinct interleaved MLA KV shard, so the rank-0-only "
        "replicated-MLA backup and the storage keys must become dcp_rank-aware first. Run "
        "HiCache+DCP with L1/L2 only.",
        HICACHE_SRC,
        hint="drop --hicache-storage-backend under decode CP (or use SGLang 0.5.23)",
    )


#: resolve_hicache_dcp_compatibility (0.5.18 to 0.5.23), after the storage check.
DCP_SPEC = Rule(
    "HICACHE-DCP-SPEC",
    _hicache_dcp & is_set(F.speculative_algorithm),
    F.speculative_algorithm == "DSPARK",
    "HiCache with --dcp-size > 1 only supports DSPARK speculative decoding; other "
    "draft-model host pools have no DCP index translation.",
    HICACHE_SRC,
    hint="drop --speculative-algorithm (or use DSPARK), HiCache, or decode CP",
)
#: The same function (0.5.18 to 0.5.23), next: LMCache and HiSparse host pools have no
#: DCP index translation either.
DCP_LMCACHE = Rule(
    "HICACHE-DCP-LMCACHE",
    _hicache_dcp,
    ~F.enable_lmcache,
    "--enable-lmcache with --dcp-size > 1 is not supported: LMCache has no DCP-aware index "
    "translation.",
    HICACHE_SRC,
    hint="drop --enable-lmcache (0.5.23 refuses it with HiCache anyway) or --dcp-size",
)
DCP_HISPARSE = Rule(
    "HICACHE-DCP-HISPARSE",
    _hicache_dcp,
    ~F.enable_hisparse,
    "--enable-hisparse with --dcp-size > 1 is not supported: the HiSparse host pool is "
    "constructed without DCP translation.",
    HICACHE_SRC,
    hint="drop --enable-hisparse, HiCache or --dcp-size",
)
#: The same function's last check, on SGLang's `use_mla_backend()` (the model's attention
#: architecture; meshsat's `mla_attention`, unknown without a model config).
DCP_MLA = Rule(
    "HICACHE-DCP-MLA",
    _hicache_dcp & (F.mla_attention == False),  # noqa: E712 - a rule node; None: unknown
    F.mla_attention == True,  # noqa: E712
    "HiCache with --dcp-size > 1 is only supported for MLA models: the index translation "
    "lives in MLATokenToKVPoolHost, and the MHA host pool has none.",
    HICACHE_SRC,
    hint="drop --enable-hierarchical-cache or --dcp-size (decode CP with HiCache needs an MLA "
    "model such as DeepSeek V3)",
)
#: handle_cache_compatibility (0.5.18 to 0.5.23) opens with the decode retraction backup
#: in a HiCache host pool.
_host_pool = _backup == "host_pool"
HOST_POOL_RULES: tuple[Rule, ...] = (
    Rule(
        "HOST-POOL-DECODE",
        _host_pool,
        F.disaggregation_mode == "decode",
        "--disaggregation-decode-retraction-backup=host_pool is only supported on a PD "
        "decode server.",
        CACHE_SRC,
        hint="drop --disaggregation-decode-retraction-backup (it is a PD decode setting)",
    ),
    Rule(
        "HOST-POOL-DCP",
        _host_pool,
        F.dcp_size <= 1,
        "--disaggregation-decode-retraction-backup=host_pool does not support --dcp-size > 1.",
        CACHE_SRC,
        hint="use --disaggregation-decode-retraction-backup cpu_tensor with decode CP",
    ),
    Rule(
        "HOST-POOL-PRIORITY",
        _host_pool & F.enable_priority_scheduling,
        F.disable_priority_preemption,
        "--disaggregation-decode-retraction-backup=host_pool requires "
        "--disable-priority-preemption when priority scheduling is enabled.",
        CACHE_SRC,
        hint="add --disable-priority-preemption",
    ),
)
#: handle_cache_compatibility (0.5.18 to 0.5.23), next, on the resolved radix flag: a PD decode
#: server has turned it off unless --disaggregation-decode-enable-radix-cache
#: (R-DECODE-RADIX).
HICACHE_RADIX = Rule(
    "HICACHE-RADIX",
    F.enable_hierarchical_cache,
    ~F.disable_radix_cache,
    "The arguments enable-hierarchical-cache and disable-radix-cache are mutually exclusive "
    "and cannot be used at the same time. Please use only one of them.",
    CACHE_SRC,
    hint="drop --disable-radix-cache or --enable-hierarchical-cache (a PD decode server keeps "
    "its radix cache with --disaggregation-decode-enable-radix-cache)",
)

#: handle_cache_compatibility (0.5.18 to 0.5.23), right after HICACHE-RADIX: a PD decode's KV
#: offload to the HiCache storage backend.
_offload = F.disaggregation_decode_enable_offload_kvcache
OFFLOAD_RULES: tuple[Rule, ...] = (
    Rule(
        "DECODE-OFFLOAD-DECODE",
        _offload,
        F.disaggregation_mode == "decode",
        "The argument disaggregation-decode-enable-offload-kvcache is only supported for "
        "decode side.",
        CACHE_SRC,
        hint="drop --disaggregation-decode-enable-offload-kvcache (a PD decode setting)",
    ),
    Rule(
        "DECODE-OFFLOAD-STORAGE",
        _offload,
        _storage,
        "The argument disaggregation-decode-enable-offload-kvcache is only supported when "
        "hicache-storage-backend is provided.",
        CACHE_SRC,
        hint="add --hicache-storage-backend (file, mooncake, ...)",
    ),
    Rule(
        "DECODE-OFFLOAD-HOST-POOL",
        _offload,
        ~_host_pool,
        "The arguments disaggregation-decode-enable-offload-kvcache and "
        "disaggregation-decode-retraction-backup=host_pool are mutually exclusive: both "
        "build a decode host pool.",
        CACHE_SRC,
        hint="use --disaggregation-decode-retraction-backup cpu_tensor with the offload",
    ),
)

#: handle_cache_compatibility's LMCache checks, last in it (0.5.23 only: 0.5.18 and 0.5.19
#: check LMCache only under decode CP, HICACHE-DCP-LMCACHE). The unified-cache linker and
#: streaming sessions it also refuses are no fields (off). "Is speculative" is any
#: algorithm; DP attention is `attn_dp_enabled_of()` (a scale joiner too).
_lmcache = F.enable_lmcache
_LMC = "LMCacheUnifiedRadixCache"
LMCACHE_RULES: tuple[Rule, ...] = (
    Rule(
        "LMCACHE-HICACHE",
        _lmcache,
        ~F.enable_hierarchical_cache,
        "--enable-lmcache and --enable-hierarchical-cache are mutually exclusive",
        CACHE_SRC,
        hint="use one of --enable-lmcache and --enable-hierarchical-cache",
    ),
    # On the resolved radix flag: a PD decode server has turned it off (R-DECODE-RADIX).
    Rule(
        "LMCACHE-RADIX",
        _lmcache,
        ~F.disable_radix_cache,
        "--enable-lmcache requires radix cache to be enabled",
        CACHE_SRC,
        hint="drop --disable-radix-cache (LMCache extends the radix cache)",
    ),
    Rule(
        "LMCACHE-SPEC",
        _lmcache,
        ~is_set(F.speculative_algorithm),
        f"{_LMC} does not yet support speculative decoding",
        CACHE_SRC,
        hint="drop --speculative-algorithm or --enable-lmcache",
    ),
    Rule(
        "LMCACHE-DP-ATTN",
        _lmcache,
        ~F.enable_dp_attention & (F.ep_join_mode != "scale"),
        f"{_LMC} does not yet support DP attention",
        CACHE_SRC,
        hint="drop --attn-dp-size (DP attention) or --enable-lmcache",
    ),
    Rule(
        "LMCACHE-DCP",
        _lmcache,
        F.dcp_size <= 1,
        "--enable-lmcache with --dcp-size > 1 is not supported: LMCache has no DCP-aware "
        "index translation",
        CACHE_SRC,
        hint="drop --dcp-size or --enable-lmcache",
    ),
    Rule(
        "LMCACHE-BUFFER-ONLY",
        _lmcache,
        ~_buffer_only,
        "--hicache-host-memory-mode=buffer_only is a HiCache-only mode",
        CACHE_SRC,
        hint="drop --hicache-host-memory-mode buffer_only with --enable-lmcache",
    ),
    Rule(
        "LMCACHE-PD",
        _lmcache,
        F.disaggregation_mode == "null",
        f"{_LMC} currently supports colocated prefill/decode scheduling only",
        CACHE_SRC,
        hint="drop --disaggregation-mode or --enable-lmcache",
    ),
)

# --- check_server_args(), in its order (0.5.18 to 0.5.23: the same asserts) ---------------
PP_MICRO_BATCH = Rule(
    "PP-MICRO-BATCH",
    is_set(F.pp_max_micro_batch_size),
    F.pp_max_micro_batch_size >= 1,
    "pp_max_micro_batch_size must be a positive integer or None (for auto-compute). "
    "Got: {pp_max_micro_batch_size}",
    CHECK,
    hint="a --pp-max-micro-batch-size of 1 or more, or leave it out",
)
COMPILE_PADDING = Rule(
    "GRAPH-PADDING-COMPILE",
    F.disable_cuda_graph_padding,
    ~F.enable_torch_compile,
    "--disable-cuda-graph-padding is incompatible with --enable-torch-compile. With padding "
    "disabled, every distinct batch size gets its own torch.compile + Triton autotune cycle "
    "(O(max_batch_size) compilations) instead of the small fixed set of padded bucket sizes, "
    "causing engine initialisation to stall for many minutes. Remove "
    "--disable-cuda-graph-padding or --enable-torch-compile.",
    CHECK,
    hint="remove --disable-cuda-graph-padding or --enable-torch-compile",
)
#: In the pipeline-parallel checks (check_pipeline_parallel_compat in 0.5.23), after the
#: speculative ones (TOPO-PP-SPEC).
PP_MIN_FREE_SLOTS = Rule(
    "PP-MIN-FREE-SLOTS",
    F.pp_size > 1,
    ~is_set(F.min_free_slots_delay),
    "--min-free-slots-delay is not supported with pipeline parallelism: allocatable slots "
    "per microbatch are bounded by pp-max-micro-batch-size, so the threshold may never be "
    "reached",
    CHECK,
    hint="drop --min-free-slots-delay, or use --pp-size 1",
)
_pdmux = F.enable_pdmux
PDMUX_RULES: tuple[Rule, ...] = (
    Rule(
        "PDMUX-PP",
        _pdmux,
        F.pp_size == 1,
        "PD-Multiplexing is only supported with pipeline parallelism disabled (pp_size=1).",
        CHECK,
        hint="drop --enable-pdmux, or use --pp-size 1",
    ),
    # The resolved size: unset is the default SGLang sizes from the GPU, never -1.
    Rule(
        "PDMUX-CHUNKED",
        _pdmux & (F.pp_size == 1),
        is_set(F.chunked_prefill_size) & (F.chunked_prefill_size == -1),
        "PD-Multiplexing is not compatible with chunked prefill.",
        CHECK,
        hint="add --chunked-prefill-size -1 with --enable-pdmux",
    ),
    Rule(
        "PDMUX-DISAGG",
        _pdmux & (F.pp_size == 1),
        F.disaggregation_mode == "null",
        "PD-Multiplexing is not compatible with disaggregation mode.",
        CHECK,
        hint="drop --enable-pdmux or --disaggregation-mode",
    ),
    # The resolved flag: speculative decoding on CPU turns the scheduler off
    # (R-SPEC-OVERLAP), PP too (R-PP-OVERLAP, but PDMUX-PP refuses PP first). Diffusion
    # LLMs and MPS are no fields.
    Rule(
        "PDMUX-OVERLAP",
        _pdmux & (F.pp_size == 1),
        F.disable_overlap_schedule,
        "PD-Multiplexing is not compatible with overlap schedule.",
        CHECK,
        hint="add --disable-overlap-schedule with --enable-pdmux",
    ),
)
PRIORITY_POLICY = Rule(
    "PRIORITY-SCHEDULE-POLICY",
    F.enable_priority_scheduling,
    (F.schedule_policy == "fcfs") | (F.schedule_policy == "lof"),
    "To use priority scheduling, schedule_policy must be 'fcfs' or 'lof'. "
    "'{schedule_policy}' is not supported.",
    CHECK,
    hint="--schedule-policy fcfs (the default) or lof",
)
PRIORITY_RETRACTION = Rule(
    "PRIORITY-RETRACTION",
    F.retraction_policy == "priority",
    F.enable_priority_scheduling,
    "--retraction-policy priority requires --enable-priority-scheduling",
    CHECK,
    hint="add --enable-priority-scheduling, or use --retraction-policy length",
)


#: validate_hisparse (hisparse_hook.py), from check_server_args() after the priority checks
#: (0.5.18 to 0.5.23): the model class (an unknown model: not asked), then the resolved
#: radix flag (a PD decode server has turned it off: R-DECODE-RADIX). 0.5.23 adds MiniMax M3.
_V4_ARCHS = ("DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", "DeepseekV4ForCausalLMDSpark")
_M3_ARCHS = ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration")


def hisparse_model_rule(minimax_m3: bool) -> Rule:
    """The model-class assert: DSA and DeepSeek V4 (0.5.18, 0.5.19), MiniMax M3 too (0.5.23)."""
    archs = (*_V4_ARCHS, *(_M3_ARCHS if minimax_m3 else ()))
    said = ", DeepSeek V4, and MiniMax M3 now. " if minimax_m3 else " and DeepSeek V4 now. "
    return Rule(
        "HISPARSE-MODEL",
        F.enable_hisparse & is_set(F.architecture),
        F.is_deepseek_dsa | one_of(F.architecture, *archs),
        "--enable-hisparse is only supported for DSA (DeepSeek Sparse Attention) models "
        f"(e.g., DeepSeek V3.2, GLM-5){said}",
        CHECK,
        hint="drop --enable-hisparse (it needs a DeepSeek V3.2/GLM-5 class model)",
    )


HISPARSE_RADIX = Rule(
    "HISPARSE-RADIX",
    F.enable_hisparse,
    F.disable_radix_cache,
    "Hierarchical sparse attention currently requires --disable-radix-cache.",
    CHECK,
    hint="add --disable-radix-cache with --enable-hisparse",
)

#: validate_hisparse's feature checks, right after HISPARSE-RADIX (0.5.23 only): a mixed
#: batch, a draft tree (the resolved top-k, `or 1`: unset and 0 pass) with any speculative
#: algorithm. Not modelled: `--speculative-adaptive` and `--dsa-{prefill,decode}-backend`
#: (no fields); its KV dtype check, which a DSA model's MODEL-DSA-KV-DTYPE (same dtypes,
#: asked first) leaves unreachable, and DeepSeek V4's KV dtype, which meshsat does not resolve.
HISPARSE_0_5_23: tuple[Rule, ...] = (
    Rule(
        "HISPARSE-MIXED-CHUNK",
        F.enable_hisparse & F.enable_mixed_chunk,
        FALSE,
        "--enable-hisparse does not support --enable-mixed-chunk yet.",
        CHECK,
        hint="drop --enable-mixed-chunk with --enable-hisparse",
    ),
    Rule(
        "HISPARSE-SPEC-TOPK",
        F.enable_hisparse
        & is_set(F.speculative_algorithm)
        & ~one_of(F.speculative_algorithm, "NONE", "none")
        & is_set(F.speculative_eagle_topk),
        one_of(F.speculative_eagle_topk, 0, 1),
        "The minimal HiSparse spec integration supports linear speculation only; use "
        "--speculative-eagle-topk 1.",
        CHECK,
        hint="--speculative-eagle-topk 1",
    ),
)

#: The resolution-time rules of the base catalogue (0.5.19), in handler order; the
#: check_server_args() ones are placed by topology.RULES.
HICACHE_RULES: tuple[Rule, ...] = (
    BUFFER_STORAGE,
    BUFFER_DECODE,
    dcp_storage_rule(buffer_only_only=False),
    DCP_SPEC,
    DCP_LMCACHE,
    DCP_HISPARSE,
    DCP_MLA,
    *HOST_POOL_RULES,
    HICACHE_RADIX,
    *OFFLOAD_RULES,
)
#: check_server_args() before its pipeline-parallel checks, last among them, and after its
#: chunk/page check (KV-CHUNK-PAGE).
CHECKS_BEFORE_PP: tuple[Rule, ...] = (PP_MICRO_BATCH, COMPILE_PADDING)
CHECKS_LAST_PP: tuple[Rule, ...] = (PP_MIN_FREE_SLOTS,)
CHECKS_AFTER_CHUNK: tuple[Rule, ...] = (
    *PDMUX_RULES,
    PRIORITY_POLICY,
    PRIORITY_RETRACTION,
    hisparse_model_rule(minimax_m3=False),
    HISPARSE_RADIX,
)
