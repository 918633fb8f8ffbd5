"""Context-parallel strategies (zigzag, interleave, ring) over torch.distributed.

The way in is SGLang's interface (`sglang.srt.layers.cp.base`): `init_cp_strategy(server_args)`,
`get_cp_strategy()`, and a `ContextParallelStrategy` per forward: `can_apply`, `build_metadata`
(stored on the batch as `attn_cp_metadata`), `split_before_forward`, `materialize_full_kv`,
`run_attention`, `gather_hidden_states`. The core behind it: `ZigzagStrategy(cp_size,
comm=ProcessGroupComm(group))` and friends over a `CPBatch`; `instantiate` builds every process
group of a meshsat layout and binds the strategy.
"""

from meshsat.cp.attention import AttnFn, causal_attention_fn
from meshsat.cp.base import CPStrategy
from meshsat.cp.batch import AttnChunk, CPBatch, CPMetadata
from meshsat.cp.comm import Comm, ProcessGroupComm, SoloComm
from meshsat.cp.instantiate import LayoutHandle, instantiate
from meshsat.cp.interface import (
    BaseContextParallelMetadata,
    ContextParallelStrategy,
    CPForwardBatch,
)
from meshsat.cp.interleave import InterleaveMetadata, InterleaveStrategy, interleave_plan
from meshsat.cp.kinds import (
    ContextParallelStrategyKind,
    CPAttentionBackend,
    CPAttentionBackendKind,
    CPBatchError,
    CPCommError,
    CPConfigError,
    CPError,
    CPNotApplicableError,
    CPShapeError,
    CPStrategyKind,
    UnknownStrategyError,
)
from meshsat.cp.kvcache import LayerKV
from meshsat.cp.registry import (
    bind_cp_strategy,
    get_cp_strategy,
    get_cp_strategy_kind,
    init_cp_strategy,
    is_cp_enabled,
    is_interleave,
    is_ring,
    is_zigzag,
    reset_cp_strategy,
)
from meshsat.cp.ring import RingAttnFn, RingStats, RingStrategy
from meshsat.cp.server_args import set_global_server_args
from meshsat.cp.zigzag import ZigzagMetadata, ZigzagStrategy, zigzag_blocks, zigzag_plan

ZigzagCPStrategy = ZigzagStrategy
"""SGLang's class name (layers/cp/zigzag.py)."""
InterleaveCPStrategy = InterleaveStrategy
"""SGLang's class name (layers/cp/interleave.py)."""

__all__ = [
    "AttnChunk",
    "AttnFn",
    "BaseContextParallelMetadata",
    "CPAttentionBackend",
    "CPAttentionBackendKind",
    "CPBatch",
    "CPBatchError",
    "CPCommError",
    "CPConfigError",
    "CPError",
    "CPForwardBatch",
    "CPMetadata",
    "CPNotApplicableError",
    "CPShapeError",
    "CPStrategy",
    "CPStrategyKind",
    "Comm",
    "ContextParallelStrategy",
    "ContextParallelStrategyKind",
    "InterleaveCPStrategy",
    "InterleaveMetadata",
    "InterleaveStrategy",
    "LayerKV",
    "LayoutHandle",
    "ProcessGroupComm",
    "RingAttnFn",
    "RingStats",
    "RingStrategy",
    "SoloComm",
    "UnknownStrategyError",
    "ZigzagCPStrategy",
    "ZigzagMetadata",
    "ZigzagStrategy",
    "bind_cp_strategy",
    "causal_attention_fn",
    "get_cp_strategy",
    "get_cp_strategy_kind",
    "init_cp_strategy",
    "instantiate",
    "interleave_plan",
    "is_cp_enabled",
    "is_interleave",
    "is_ring",
    "is_zigzag",
    "reset_cp_strategy",
    "set_global_server_args",
    "zigzag_blocks",
    "zigzag_plan",
]
