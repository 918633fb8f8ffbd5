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

from meshsat.solver.lang.expr import is_set
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

#: The HiCache handler (arg_groups/hicache_hook.py; `_handle_hicache` in 0.5.18).
HICACHE_SRC = "handle_hicache"
#: The cache handler, near the end of resolution (kv_cache_hook.py).
CACHE_SRC = "handle_cache_compatibility"
#: check_server_args() (arg_groups/validation_hook.py; ServerArgs' own method in 0.5.18).
CHECK = "check_server_args"

_backup = F.disaggregation_decode_retraction_backup
#: `handle_hicache` returns at once unless HiCache is on or a PD decode keeps its retracted
#: KV in a HiCache host pool (the backup unset or host_pool). Its third way in,
#: `--disaggregation-decode-enable-offload-kvcache`, is not a field (off).
HICACHE_ACTIVE = F.enable_hierarchical_cache | (
    (F.disaggregation_mode == "decode") & (~is_set(_backup) | (_backup == "host_pool"))
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
    # The flag, or what turns the scheduler off for it at pp 1: speculative decoding on
    # CPU (the EAGLE family and NGRAM, `_disable_overlap_schedule_for_cpu`; 0.5.18 to 0.5.23).
    # PP does too, and is refused above; diffusion LLMs and MPS are no fields.
    Rule(
        "PDMUX-OVERLAP",
        _pdmux & (F.pp_size == 1),
        F.disable_overlap_schedule | ((F.platform == "cpu") & is_set(F.speculative_algorithm)),
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

#: The resolution-time rules of the base catalogue (0.5.19), in handler order; the
#: check_server_args() ones are placed by topology.RULES.
HICACHE_RULES: tuple[Rule, ...] = (
    BUFFER_STORAGE,
    BUFFER_DECODE,
    dcp_storage_rule(buffer_only_only=False),
    DCP_SPEC,
    DCP_MLA,
    *HOST_POOL_RULES,
    HICACHE_RADIX,
)
#: check_server_args() before its pipeline-parallel checks, last among them, and after its
#: chunk/page check (KV-CHUNK-PAGE).
CHECKS_BEFORE_PP: tuple[Rule, ...] = (PP_MICRO_BATCH, COMPILE_PADDING)
CHECKS_LAST_PP: tuple[Rule, ...] = (PP_MIN_FREE_SLOTS,)
CHECKS_AFTER_CHUNK: tuple[Rule, ...] = (*PDMUX_RULES, PRIORITY_POLICY, PRIORITY_RETRACTION)
