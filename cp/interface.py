"""SGLang's context-parallel contract (`sglang.srt.layers.cp.base`): names, signatures, keywords,
defaults.

`ContextParallelStrategy` is the ABC an engine codes against; the core `CPStrategy` implements it,
so an engine written for SGLang can bind this package's strategies unchanged. A `forward_batch`
is either the core's `CPBatch` (prepared with a plan) or any engine batch object carrying the
plan as `forward_batch.attn_cp_metadata` and, for `can_apply`, its lengths as
`extend_seq_lens_cpu` / `extend_prefix_lens_cpu` (SGLang's `ForwardBatch` attribute names);
`CPForwardBatch` is a minimal such object.

Differences from SGLang, each deliberate, are listed in one table in docs/cp.md ("Differences
from the seed").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torch import Tensor

from meshsat.cp.kinds import ContextParallelStrategyKind, CPAttentionBackendKind

if TYPE_CHECKING:
    from meshsat.cp.batch import CPMetadata


@dataclass
class BaseContextParallelMetadata:
    """SGLang's per-forward metadata base: the summed sequence lengths (cached prefixes
    included) and the batch size. The core's plan, `CPMetadata`, extends it."""

    total_seq_lens: int = 0
    bs: int = 1


@dataclass
class CPForwardBatch:
    """The attributes of SGLang's `ForwardBatch` the strategies read and write."""

    extend_seq_lens_cpu: list[int]
    extend_prefix_lens_cpu: list[int]
    attn_cp_metadata: CPMetadata | None = None
    positions: Tensor | None = None
    cp_v2_input_ids: Tensor | None = None


class ContextParallelStrategy(ABC):
    """Owns process-wide policy for one context parallel layout (SGLang's ABC)."""

    name: str
    kind: ContextParallelStrategyKind

    def __init__(self, cp_size: int):
        self.cp_size = cp_size

    @property
    def cp_rank(self) -> int:
        """This process's attention-CP rank, read from the process-wide parallel state as the
        seed reads `get_parallel().attn_cp_rank` (`meshsat.cp.parallel_state`); the core
        strategies override it with the rank in the group they are bound to."""
        from meshsat.cp.parallel_state import attn_cp_rank

        return attn_cp_rank()

    @property
    def per_layer_attn_cp_comm(self) -> bool:
        """SGLang's rule: per-layer CP communication only for DSA models with prefill CP on,
        read from the server arguments `init_cp_strategy` registered."""
        from meshsat.cp.server_args import global_server_args, server_arg

        sa = global_server_args()
        return bool(
            server_arg(sa, "enable_prefill_cp", False)
            and server_arg(sa, "_is_dsa_model_arch", False)
        )

    @abstractmethod
    def can_apply(self, num_tokens: int, forward_batch: Any) -> bool:
        """Return True if this strategy can shard the current forward."""

    @abstractmethod
    def build_metadata(
        self,
        num_tokens: int,
        seqs_len: list[int] | None,
        extend_seqs_len: list[int] | None = None,
    ) -> BaseContextParallelMetadata:
        """Build per-forward metadata for this strategy."""

    @abstractmethod
    def shard_hidden_states(self, x: Any, forward_batch: Any) -> Any:
        """Shard hidden states to the current CP rank, usually at the first layer."""

    @abstractmethod
    def shard_position_ids(self, positions: Any, forward_batch: Any) -> Any:
        """Shard KV-cache slot position IDs for each token to the current CP rank."""

    @abstractmethod
    def gather_hidden_states(self, x: Any, forward_batch: Any, stream: Any | None = None) -> Any:
        """Gather rank-local hidden states, usually at the last layer."""

    @abstractmethod
    def gather_kv_cache(self, x: Any, forward_batch: Any, stream: Any | None = None) -> Any:
        """Gather rank-local KV payloads back to full token order."""

    def shard_per_request(
        self, extend_seqs_cpu: list[int], extend_seqs: Any
    ) -> tuple[list[int], Any, list[int], Any]:
        raise NotImplementedError(f"{self.name} strategy does not support per-request sharding")

    def split_before_forward(
        self,
        forward_batch: Any,
        input_ids: Any | None,
        positions: Any,
        input_embeds: Any | None = None,
    ) -> Any | None:
        """Shard the model inputs onto the batch (`cp_v2_input_ids`, `positions`); returns the
        sharded embeddings when given, else None."""
        if input_ids is not None:
            forward_batch.cp_v2_input_ids = self.shard_hidden_states(input_ids, forward_batch)
        forward_batch.positions = self.shard_position_ids(positions, forward_batch)
        if input_embeds is not None:
            return self.shard_hidden_states(input_embeds, forward_batch)
        return None

    @abstractmethod
    def run_attention(
        self,
        q: Any,
        forward_batch: Any,
        device: Any,
        attn_fn: Callable[[Any, Any, Any, int], Any],
        attention_backend: CPAttentionBackendKind = CPAttentionBackendKind.FLASH_ATTENTION,
    ) -> Any:
        """Dispatch CP attention using the selected backend convention."""

    @abstractmethod
    def materialize_full_kv(
        self, forward_batch: Any, layer: Any, k: Any, v: Any, swa_loc: Any | None = None
    ) -> None:
        """Write full-layout K/V to the backend cache if needed."""

    def reindex_attn_metadata(self, core_attn_metadata: Any) -> None:
        """Optional attention metadata rewrite; the core's plans need none."""
        return None
