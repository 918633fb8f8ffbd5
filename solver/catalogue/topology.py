"""Launch-time topology checks and the derived widths that must be whole numbers."""

from __future__ import annotations

from meshsat.solver.catalogue.page_size import (
    CHUNK_DEFAULT_PAGE,
    CHUNK_DEFAULT_PAGE_CERTAIN,
    CHUNK_PAGE,
)
from meshsat.solver.catalogue.serving import CHECKS_AFTER_CHUNK, CHECKS_BEFORE_PP, CHECKS_LAST_PP
from meshsat.solver.lang.derived import attn_tp_whole, replicas
from meshsat.solver.lang.expr import TRUE, And, Expr, Named, Or, divides, is_set, ite, named
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

SRC = "SGLang launch checks"
#: The engine calls `ServerArgs.check_server_args()` at launch, after resolution and before
#: any process starts (sglang/srt/arg_groups/validation_hook.py, 0.5.18 to 0.5.23).
CHECK = "check_server_args"
POSITIVE_SIZES = (
    "tp_size",
    "pp_size",
    "dp_size",
    "attn_cp_size",
    "moe_dp_size",
    "ep_size",
    "nnodes",
    "gpus_per_node",
)

_ENGINE = F.tp_size * F.pp_size
#: tp·pp / nnodes, whole wherever TOPO-NNODES holds; the guard keeps the quotient exact for
#: the exponent encoding, which would otherwise demand it of every layout.
_SHARE = ite(divides(F.nnodes, _ENGINE), _ENGINE // F.nnodes, _ENGINE)
#: Schedulers one node starts. An elastic-EP scale joiner's node starts every TP rank of
#: its stages (`launch_tensor_parallel_group`, solver/placement.py), so at least tp_size.
ranks_per_node = named(
    "ranks_per_node",
    ite((F.ep_join_mode == "scale") & (F.tp_size >= _SHARE), F.tp_size, _SHARE),
)
#: TP ranks per node: SGLang's tp_size // max(nnodes // pp_size, 1), which on every split
#: that starts each rank once (solver/placement.py, EVEN_SPLIT) is min(tp_size, ranks_per_node).
tp_per_node = ite(ranks_per_node <= F.tp_size, ranks_per_node, F.tp_size)
#: Replica d's first GPU without DP attention is d·stride (`launch_dp_schedulers`).
REPLICA_STRIDE_0_5 = F.tp_size * F.pp_size * F.gpu_id_step
REPLICA_STRIDE_0_4 = F.tp_size * F.gpu_id_step


def gpu_id_last(replica_stride: Expr) -> Named:
    """The highest GPU id a node's schedulers get: SGLang's
    `base_gpu_id + (pp_rank % pp_per_node)·tp_per_node + (tp_rank % tp_per_node)·gpu_id_step`
    (solver/placement.py) at the last replica, stage and TP rank of the node."""
    return named(
        "gpu_id_last",
        F.base_gpu_id
        + (replicas - 1) * replica_stride
        + (ranks_per_node - tp_per_node)
        + (tp_per_node - 1) * F.gpu_id_step,
    )


def gpu_id_range(replica_stride: Expr) -> Rule:
    """TOPO-GPU-ID-RANGE for a release's replica stride. SGLang checks no range: the
    scheduler's `set_device(gpu_id)` raises at start-up. With the default base and step
    TOPO-NODE-GPUS says the same for several nodes, and one node is the planning view."""
    return Rule(
        "TOPO-GPU-ID-RANGE",
        (F.base_gpu_id != 0) | (F.gpu_id_step != 1),
        gpu_id_last(replica_stride) < F.gpus_per_node,
        "the last rank on a node runs on GPU {gpu_id_last} (base_gpu_id {base_gpu_id}, "
        "gpu_id_step {gpu_id_step}, {replicas} replica(s) of {ranks_per_node} ranks per "
        "node), past the node's {gpus_per_node} GPUs: the scheduler fails at start-up in "
        "torch.cuda.set_device (CUDA error: invalid device ordinal)",
        SRC,
        hint="lower --base-gpu-id, else use --gpu-id-step 1 (or give the node size with "
        "--set gpus_per_node=N)",
    )


#: Above this pipeline depth and GPU id step both, `replicas_share_gpus_0_4` stops testing
#: each stage distance: such a node has over 80 GPUs (the ids reach 3·step + 2·pp - 2).
_STAGE_DISTANCES = 16


def replicas_share_gpus_0_4() -> Rule:
    """0.4.6.post5's data-parallel controller (`launch_dp_schedulers`) starts replica d at
    `base_gpu_id + d·tp_size·gpu_id_step` whatever `pp_size` is, and its stage p's TP rank t
    at `p·tp_size + t·gpu_id_step` past that (one node: `launch_tensor_parallel_group`).
    Replica 1 lands on a GPU of replica 0 exactly when some stage distance j in 1..pp-1 has
    `j·tp_size` a multiple of `gpu_id_step` (then `j·tp + t·step == tp·step + t'·step` for
    some TP ranks t, t'), and replicas further apart only when replica 1 already does. That
    is every pp > 1 at the default step; j = step always works, so pp > step does too."""
    overlap = named(
        "replicas_overlap",
        Or(
            F.pp_size > F.gpu_id_step,
            *(
                (F.pp_size > j) & divides(F.gpu_id_step, F.tp_size * j)
                for j in range(1, _STAGE_DISTANCES + 1)
            ),
        ),
    )
    return Rule(
        "TOPO-DP-REPLICA-GPUS",
        (F.dp_size > 1) & ~F.enable_dp_attention & (F.pp_size > 1) & (F.nnodes == 1),
        ~overlap,
        "DP replicas share GPUs: SGLang's data-parallel controller starts replica d at GPU "
        "base_gpu_id + d·tp_size·gpu_id_step ({tp_size}·{gpu_id_step} apart), not counting "
        "the {pp_size} pipeline stages each replica places tp_size GPUs apart, so replica 1 "
        "runs on GPUs of replica 0 (two schedulers on one GPU)",
        SRC,
        hint="use --pp-size 1 with --dp-size, or launch each replica separately with its own "
        "--base-gpu-id (or use a 0.5 release, which offsets replicas by tp·pp)",
    )


#: Pipeline stages one node starts: SGLang's `max(pp_size // nnodes, 1)` on every even split
#: (nnodes dividing pp_size, or a multiple of it); guarded so the quotient stays exact.
_pp_per_node = ite(divides(F.nnodes, F.pp_size), F.pp_size // F.nnodes, 1)
#: Stages `j` apart on one node share a GPU exactly when `j·tp_per_node` is a multiple of
#: `gpu_id_step` and `j < gpu_id_step` (docstring of STAGE_GPUS).
stages_share_gpus = named(
    "stages_share_gpus",
    Or(
        *(
            (F.gpu_id_step > j) & (_pp_per_node > j) & divides(F.gpu_id_step, tp_per_node * j)
            for j in range(1, _STAGE_DISTANCES + 1)
        )
    ),
)
#: Two of one engine's schedulers on one GPU: every release starts stage p's TP rank t of a
#: node on `base_gpu_id + p·tp_per_node + t·gpu_id_step` (p, t counted on the node;
#: `Engine._launch_scheduler_processes`, `launch_tensor_parallel_group`), so stage p + j's
#: rank t meets stage p's rank `t + j·tp_per_node / gpu_id_step` when that is a whole TP
#: rank below tp_per_node: `gpu_id_step` divides `j·tp_per_node` and `j < gpu_id_step`.
#: With the default step 1 no j qualifies. SGLang checks none of it (its resolution and
#: check_server_args() accept --tp 4 --pp 2 --gpu-id-step 2 in 0.4.6.post5 to 0.5.23,
#: measured) and starts both schedulers on the GPU: meshsat's advice in every pack. Stage
#: distances above `_STAGE_DISTANCES` are not tested (such a node has over 16 stages).
STAGE_GPUS = Rule(
    "TOPO-STAGE-GPUS",
    F.pp_size > 1,
    ~stages_share_gpus,
    "pipeline stages share GPUs: SGLang starts stage p's TP rank t on GPU base_gpu_id + "
    "p·tp_per_node + t·gpu_id_step, so with --gpu-id-step {gpu_id_step} a rank of one stage "
    "lands on the GPU of a rank of another (two schedulers on one GPU); SGLang does not "
    "check it",
    SRC,
    hint="use --gpu-id-step 1 with --pp-size > 1 (or a step with no factor in common with "
    "the TP ranks per node)",
)


#: No release checks --node-rank against --nnodes (resolution and check_server_args()
#: accept --tp 4 --nnodes 2 --node-rank 2, 0.5.23 measured; 0.4.6.post5 to 0.5.19 read).
#: The launcher then gives node r the stages from max(pp/nnodes, 1)·(r //
#: max(nnodes/pp, 1)) on (`_calculate_rank_ranges`; 0.4.6.post5 inline), past pp_size for
#: every r >= nnodes on an even split: its schedulers ask torch.distributed for ranks past
#: the world size tp·pp, which it refuses (gloo: "rank < size"), or wait for ever for the
#: node that was meant. A scale joiner runs alone at --node-rank 1 (EEP-SCALE-NODE).
NODE_RANK = Rule(
    "TOPO-NODE-RANK",
    F.ep_join_mode != "scale",
    F.node_rank < F.nnodes,
    "--node-rank {node_rank} is not below --nnodes {nnodes}: SGLang does not check it, and "
    "that node starts schedulers for pipeline ranks past pp_size, global ranks past the "
    "world size tp_size * pp_size that torch.distributed does not take (the launch fails "
    "or waits for ever)",
    SRC,
    hint="number the nodes --node-rank 0 .. nnodes-1 (or raise --nnodes)",
)


RULES: tuple[Rule, ...] = (
    Rule(
        "TOPO-POSITIVE",
        TRUE,
        And(*(getattr(F, n) >= 1 for n in POSITIVE_SIZES)),
        "every parallel size must be a positive integer",
        SRC,
    ),
    Rule(
        "TOPO-NNODES",
        F.ep_join_mode != "scale",
        divides(F.nnodes, F.tp_size * F.pp_size),
        # SGLang's words (0.4.6.post5 to 0.5.23) name tp_size; its assert is on tp·pp.
        "tp_size must be divisible by number of nodes",
        CHECK,
        hint="every node runs the same number of ranks: choose --nnodes dividing tp_size·pp_size",
    ),
    # check_server_args() asserts these next (catalogue/serving.py).
    *CHECKS_BEFORE_PP,
    # Then, when pp_size > 1, its pipeline-parallel checks (every release: inline up to
    # 0.5.19, check_pipeline_parallel_compat in 0.5.23), before the multi-node DP, GPU id and
    # dense-TP asserts below: a layout breaking both meets these first (measured on 0.5.23).
    Rule(
        "TOPO-PP-SPEC",
        F.pp_size > 1,
        ~is_set(F.speculative_algorithm),
        "Pipeline parallelism is not compatible with overlap schedule, speculative decoding",
        CHECK,
        hint="drop --speculative-algorithm, or use --pp-size 1",
    ),
    # The last of its pipeline-parallel checks (catalogue/serving.py).
    *CHECKS_LAST_PP,
    # Each node starts tp·pp/nnodes ranks, one GPU each: a multi-node launch whose ranks do
    # not fit its nodes fails when a rank asks for a GPU the node does not have. With one
    # node meshsat does not know the machine (gpus_per_node is only a default there).
    Rule(
        "TOPO-NODE-GPUS",
        F.nnodes > 1,
        F.tp_size * F.pp_size <= F.nnodes * F.gpus_per_node,
        "tp_size * pp_size = {tp_size}·{pp_size} ranks over --nnodes {nnodes} is more than "
        "{gpus_per_node} GPUs per node: the ranks of one node must fit its GPUs",
        SRC,
        hint="raise --nnodes (or give the node size with --set gpus_per_node=N)",
    ),
    NODE_RANK,
    gpu_id_range(REPLICA_STRIDE_0_5),
    STAGE_GPUS,
    Rule(
        "TOPO-MULTINODE-DP",
        (F.dp_size > 1) & (F.nnodes > 1),
        F.enable_dp_attention,
        "multi-node data parallel is not supported unless dp attention!",
        CHECK,
        hint="add --enable-dp-attention, or launch the replicas separately",
    ),
    Rule("TOPO-BASE-GPU-ID", TRUE, F.base_gpu_id >= 0, "base_gpu_id must be non-negative", CHECK),
    Rule("TOPO-GPU-ID-STEP", TRUE, F.gpu_id_step >= 1, "gpu_id_step must be positive", CHECK),
    Rule(
        "TOPO-MOE-DENSE-TP",
        is_set(F.moe_dense_tp_size),
        (F.moe_dense_tp_size == 1) | (F.moe_dense_tp_size == F.tp_size),
        "moe_dense_tp_size only supports None, 1, or tp_size currently",
        CHECK,
    ),
    # check_server_args() checks the chunk against the page after the PP and LoRA checks
    # and before two-batch overlap.
    CHUNK_PAGE,
    # The same check on the chunk SGLang sizes itself: an error where it is certain,
    # meshsat's advice where it depends on the GPU's memory.
    CHUNK_DEFAULT_PAGE_CERTAIN,
    CHUNK_DEFAULT_PAGE,
    # Then PD-Multiplexing and priority scheduling (catalogue/serving.py).
    *CHECKS_AFTER_CHUNK,
    # check_two_batch_overlap(), from check_server_args(); ROCm's DSA round-robin prefill
    # CP is the one exception.
    Rule(
        "TOPO-TBO-DP-ATTN",
        F.enable_two_batch_overlap
        & (F.moe_a2a_backend == "none")
        & ~(
            (F.platform == "hip")
            & F.enable_dsa_prefill_context_parallel
            & (F.dsa_prefill_cp_mode == "round-robin-split")
        ),
        F.enable_dp_attention,
        "When enabling two batch overlap without an EP a2a backend (moe_a2a_backend='none'), "
        "--enable-dp-attention is required (DeepSeek-V4 non-EP DP TBO path).",
        CHECK,
        hint="add --enable-dp-attention, or choose an all-to-all MoE backend",
    ),
    Rule(
        "TOPO-ATTN-TP",
        TRUE,
        attn_tp_whole,
        "tp_size must be divisible by attn_dp_size * attn_cp_size: the attention TP width "
        "attn_tp = tp_size / (attn_dp * attn_cp) must be whole",
        "derive_parallel_widths",
    ),
    Rule(
        "TOPO-MOE-TP",
        TRUE,
        divides(F.ep_size * F.moe_dp_size, F.tp_size),
        "tp_size must be divisible by ep_size * moe_dp_size: the MoE TP width "
        "moe_tp = tp_size / (ep * moe_dp) must be whole",
        "derive_parallel_widths",
    ),
)
