"""Context-parallel strategies (zigzag, interleave) over torch.distributed.

Entry points: bind a strategy for the process with `init_cp_strategy`, or build one for a
specific attention-CP group with `ZigzagStrategy(cp_size, comm=ProcessGroupComm(group))`; then per
forward `prepare` the batch, shard inputs, `materialize_full_kv`, `run_attention`, and gather.
"""

from cp.attention import AttnFn, causal_attention_fn
from cp.base import CPStrategy, SplitInputs
from cp.batch import AttnChunk, CPBatch, CPMetadata
from cp.comm import (
    Comm,
    LocalSimComm,
    ProcessGroupComm,
    SoloComm,
    local_sim_comms,
    run_local_ranks,
)
from cp.interleave import InterleaveMetadata, InterleaveStrategy, interleave_plan
from cp.kinds import (
    CPAttentionBackend,
    CPBatchError,
    CPCommError,
    CPConfigError,
    CPError,
    CPNotApplicableError,
    CPShapeError,
    CPStrategyKind,
    UnknownStrategyError,
)
from cp.kvcache import LayerKV
from cp.registry import (
    get_cp_strategy,
    get_cp_strategy_kind,
    init_cp_strategy,
    is_cp_enabled,
    is_interleave,
    is_zigzag,
    reset_cp_strategy,
)
from cp.zigzag import ZigzagMetadata, ZigzagStrategy, zigzag_blocks, zigzag_plan

__all__ = [
    "AttnChunk",
    "AttnFn",
    "CPAttentionBackend",
    "CPBatch",
    "CPBatchError",
    "CPCommError",
    "CPConfigError",
    "CPError",
    "CPMetadata",
    "CPNotApplicableError",
    "CPShapeError",
    "CPStrategy",
    "CPStrategyKind",
    "Comm",
    "InterleaveMetadata",
    "InterleaveStrategy",
    "LayerKV",
    "LocalSimComm",
    "ProcessGroupComm",
    "SoloComm",
    "SplitInputs",
    "UnknownStrategyError",
    "ZigzagMetadata",
    "ZigzagStrategy",
    "causal_attention_fn",
    "get_cp_strategy",
    "get_cp_strategy_kind",
    "init_cp_strategy",
    "interleave_plan",
    "is_cp_enabled",
    "is_interleave",
    "is_zigzag",
    "local_sim_comms",
    "reset_cp_strategy",
    "run_local_ranks",
    "zigzag_blocks",
    "zigzag_plan",
]
