"""The strategy contract (SGLang's `ContextParallelStrategy`) and what every layout shares.

A strategy is a token permutation plus attention bookkeeping. The layouts differ only in their
plan (`_plan`, a pure function of cp size and lengths) and their policy (`why_not`); sharding,
gathering, attention dispatch and KV materialisation are the same code for both and live here.
The plan is exact for any lengths and any cp size; `can_apply` is the engine's policy on top of it
(when CP is worth it and the kernels' assumptions hold), and `prepare` enforces it.
"""

from __future__ import annotations

import contextlib
import operator
from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from meshsat.cp.attention import AttnFn, PlanCalls, causal_attention_fn
from meshsat.cp.batch import CPBatch, CPMetadata, as_lengths
from meshsat.cp.comm import Comm, SoloComm, plan_summary
from meshsat.cp.interface import ContextParallelStrategy
from meshsat.cp.kinds import (
    CPAttentionBackend,
    CPBatchError,
    CPConfigError,
    CPNotApplicableError,
    CPShapeError,
)
from meshsat.cp.kvcache import LayerKV
from meshsat.cp.limits import MAX_TOKENS, check_cp_size
from meshsat.cp.parallel_state import DeferredComm, attn_cp_comm, registered_attn_cp_comm

ForwardBatchLike = Any
"""A `CPBatch`, or an engine batch carrying the plan as `attn_cp_metadata` (see cp.interface)."""


class CPStrategy(ContextParallelStrategy):
    """One context-parallel layout bound to one CP group (its `Comm`), speaking SGLang's
    `ContextParallelStrategy` contract."""

    def __init__(self, cp_size: int, comm: Comm | None = None) -> None:
        check_cp_size(cp_size)
        if comm is None:
            comm = _default_comm(cp_size, self.name)
        if not isinstance(comm, Comm):
            raise CPConfigError(
                f"{self.name}: comm must be a cp.Comm (e.g. ProcessGroupComm(group)); got "
                f"{type(comm).__name__}"
            )
        if comm.world_size != cp_size:
            raise CPConfigError(
                f"{self.name}: cp_size {cp_size} but the communicator's group has "
                f"{comm.world_size} ranks; bind the strategy to a group of cp_size ranks"
            )
        super().__init__(cp_size)
        self.comm = comm

    def __repr__(self) -> str:
        return f"{type(self).__name__}(cp_size={self.cp_size}, cp_rank={self.cp_rank})"

    @property
    def cp_rank(self) -> int:
        return self.comm.rank

    # ---- policy and plan -------------------------------------------------------------------

    @abstractmethod
    def why_not(self, batch: CPBatch) -> str | None:
        """Why `can_apply` is false for this batch (with the numbers), or None."""

    @abstractmethod
    def _plan(self, extend_lens: tuple[int, ...], prefix_lens: tuple[int, ...]) -> CPMetadata:
        """The layout of every rank; exact for any lengths."""

    def can_apply(self, num_tokens: int, forward_batch: ForwardBatchLike) -> bool:
        batch = _lengths_of(forward_batch)
        _check_num_tokens(num_tokens, batch.extend_lens)
        return self.why_not(batch) is None

    def build_metadata(
        self,
        num_tokens: int,
        seqs_len: Sequence[int] | None,
        extend_seqs_len: Sequence[int] | None = None,
    ) -> CPMetadata:
        """SGLang's reading of the optional arguments: no `seqs_len` means no cached prefix, and
        with no `extend_seqs_len` either, the forward is one request of `num_tokens` tokens."""
        if seqs_len is None:
            if extend_seqs_len is None:
                extend_seqs_len = [_token_count(num_tokens)]
            ext = as_lengths("extend_seqs_len", extend_seqs_len)
            lens = CPBatch(ext, (0,) * len(ext))
        else:
            lens = CPBatch.from_seq_lens(seqs_len, extend_seqs_len)
        _check_num_tokens(num_tokens, lens.extend_lens)
        return self._plan(lens.extend_lens, lens.prefix_lens)

    def prepare(self, batch: CPBatch) -> CPBatch:
        """The engine's entry: refuse batches outside `can_apply`, else attach the plan."""
        reason = self.why_not(batch)
        if reason is not None:
            raise CPNotApplicableError(reason)
        return batch.with_metadata(self._plan(batch.extend_lens, batch.prefix_lens))

    def metadata(self, batch: ForwardBatchLike) -> CPMetadata:
        """The batch's plan, checked to be this strategy's."""
        if isinstance(batch, CPBatch):
            meta = batch.metadata
        else:
            meta = getattr(batch, "attn_cp_metadata", None)
        if not isinstance(meta, CPMetadata):
            raise CPBatchError(
                f"{self.name}: the batch has no CP metadata; call strategy.prepare(batch), "
                "batch.with_metadata(strategy.build_metadata(...)) or set "
                "forward_batch.attn_cp_metadata = strategy.build_metadata(...) first"
            )
        if meta.kind != self.kind or meta.cp_size != self.cp_size:
            raise CPBatchError(
                f"{self.name} cp_size {self.cp_size} was given metadata built by "
                f"{meta.kind.cli_value} cp_size {meta.cp_size}"
            )
        return meta

    # ---- tokens ----------------------------------------------------------------------------

    def shard_hidden_states(self, x: Tensor, forward_batch: ForwardBatchLike) -> Tensor:
        """This rank's rows of `x` (dim 0 = tokens), zero-padded to the plan's physical rows."""
        inference_only(x, "x", self.name)
        meta = self.metadata(forward_batch)
        if x.dim() == 0 or x.shape[0] != meta.total_tokens:
            raise CPShapeError(
                f"{self.name}: tensor {tuple(x.shape)} must have the batch's "
                f"{meta.total_tokens} tokens along dim 0"
            )
        idx = meta.on_device("tokens", self.cp_rank, x.device)
        out = x.new_empty((meta.physical, *x.shape[1:]))
        torch.index_select(x, 0, idx, out=out.narrow(0, 0, idx.numel()))
        out[idx.numel() :].zero_()
        return out

    def shard_position_ids(self, positions: Tensor, forward_batch: ForwardBatchLike) -> Tensor:
        """Like `shard_hidden_states` along the last dim, so [T] and M-RoPE [3, T] both work."""
        inference_only(positions, "positions", self.name)
        meta = self.metadata(forward_batch)
        if positions.dim() == 0 or positions.shape[-1] != meta.total_tokens:
            raise CPShapeError(
                f"{self.name}: positions {tuple(positions.shape)} must have the batch's "
                f"{meta.total_tokens} tokens along the last dim"
            )
        idx = meta.on_device("tokens", self.cp_rank, positions.device)
        out = positions.new_zeros((*positions.shape[:-1], meta.physical))
        out[..., : idx.numel()] = positions.index_select(-1, idx)
        return out

    def gather_hidden_states(
        self, x: Tensor, forward_batch: ForwardBatchLike, stream: Any | None = None
    ) -> Tensor:
        """Every rank's rows back in token order: padded all-gather, then one index_select;
        on `stream` (CUDA) when given."""
        with _on_stream(stream, x):
            return self._gather(x, forward_batch)

    def _gather(self, x: Tensor, batch: ForwardBatchLike) -> Tensor:
        inference_only(x, "x", self.name)
        meta = self.metadata(batch)
        if x.dim() == 0 or x.shape[0] != meta.physical:
            raise CPShapeError(
                f"{self.name}: rank {self.cp_rank} must gather its {meta.physical} physical "
                f"rows (padding included); got {tuple(x.shape)}"
            )
        self.agree_on_plan(meta, x)
        gathered = self.comm.all_gather(x)
        return gathered.index_select(0, meta.on_device("gather", 0, x.device))

    def agree_on_plan(self, meta: CPMetadata, x: Tensor) -> None:
        """Before a forward's first collective on `x`'s device, the ranks compare their plans
        (`Comm.check_peers`): ranks that built their plans from other lengths can hold the
        same padded row count, and their gathers would then mix tokens without any error.
        Once per forward, not per layer: the plan is the same for every layer."""
        done: list[bool] = meta.memo("peers-agree", self.cp_rank, x.device, lambda: [False])
        if not done[0]:
            summary = plan_summary(meta.kind, meta.cp_size, meta.extend_lens, meta.prefix_lens)
            self.comm.check_peers([x], summary)
            done[0] = True

    def gather_kv_cache(
        self, x: Tensor, forward_batch: ForwardBatchLike, stream: Any | None = None
    ) -> Tensor:
        """K or V payloads follow the same layout as hidden states."""
        return self.gather_hidden_states(x, forward_batch, stream)

    def split_before_forward(
        self,
        forward_batch: ForwardBatchLike,
        input_ids: Tensor | None,
        positions: Tensor,
        input_embeds: Tensor | None = None,
    ) -> Tensor | None:
        """SGLang's contract: the shards are stored on the (mutable) engine batch, so a frozen
        `CPBatch` is refused; wrap it with `CPForwardBatch`."""
        if isinstance(forward_batch, CPBatch):
            raise CPBatchError(
                f"{self.name}: split_before_forward stores the shards on the forward batch; "
                "a CPBatch is immutable, pass a CPForwardBatch (or the engine's batch)"
            )
        out: Tensor | None = super().split_before_forward(
            forward_batch, input_ids, positions, input_embeds
        )
        return out

    def shard_per_request(
        self, extend_seqs_cpu: list[int], extend_seqs: Tensor
    ) -> tuple[list[int], Tensor, list[int], Tensor]:
        raise NotImplementedError(f"{self.name} strategy does not support per-request sharding")

    # ---- attention -------------------------------------------------------------------------

    def sequence_requests(self, batch: ForwardBatchLike) -> Tensor:
        """The request each `attn_fn` sequence reads its keys from; the same for every call of
        `run_attention` on this rank, so an attention function can be bound to it once."""
        return self.metadata(batch).seq_requests[self.cp_rank]

    def default_attn_fn(
        self,
        batch: ForwardBatchLike,
        kv: LayerKV,
        *,
        softmax_scale: float | None = None,
        use_flash: bool | None = None,
    ) -> AttnFn:
        """Exact causal attention over `kv`, bound to this rank's sequences and to the calls
        `run_attention` makes on `kv`'s device (run from a per-forward schedule, sync-free)."""
        meta, rank, device = self.metadata(batch), self.cp_rank, kv.k.device

        def memo(name: str, build: Callable[[], Any]) -> Any:
            return meta.memo(name, rank, device, build)

        return causal_attention_fn(
            kv,
            meta.seq_requests[rank],
            softmax_scale=softmax_scale,
            use_flash=use_flash,
            plan_calls=PlanCalls(meta.device_chunks(rank, device), memo),
        )

    def run_attention(
        self,
        q: Tensor,
        forward_batch: ForwardBatchLike,
        device: torch.device | str,
        attn_fn: AttnFn,
        attention_backend: CPAttentionBackend = CPAttentionBackend.FLASH_ATTENTION,
    ) -> Tensor:
        """Attention for this rank's query rows, one `attn_fn` call per chunk of the plan;
        padding rows of the output are zero."""
        check_attention_backend(attention_backend, self.name)
        check_query(q, self.name)
        meta = self.metadata(forward_batch)
        # checked here, on the caller's q: attn_fn only ever sees a chunk's slice of it
        if q.dim() != 3 or q.shape[0] != meta.physical or 0 in q.shape[1:]:
            raise CPShapeError(
                f"{self.name}: q {tuple(q.shape)} must be [rows, heads, head_dim] with rank "
                f"{self.cp_rank}'s {meta.physical} physical rows (heads, head_dim >= 1)"
            )
        device = _as_device(device, self.name)
        out: Tensor | None = None
        for call in meta.device_chunks(self.cp_rank, device):
            chunk = call.chunk
            rows = chunk.rows
            o = attn_fn(
                q.narrow(0, chunk.row_start, rows), call.cu_seqlens_q, call.kv_lens, chunk.max_q
            )
            if o.shape[0] != rows:
                raise CPShapeError(f"attn_fn returned {o.shape[0]} rows for a chunk of {rows}")
            if out is None:
                out = o.new_zeros((meta.physical, *o.shape[1:]))
            out[chunk.row_start : chunk.row_start + rows] = o
        if out is None:
            raise RuntimeError(f"internal: {self.name} plan has no attention chunk for a rank")
        return out

    def materialize_full_kv(
        self,
        forward_batch: ForwardBatchLike,
        layer: LayerKV | None,
        k: Tensor,
        v: Tensor,
        swa_loc: Any | None = None,
    ) -> None:
        """All-gather this layer's K and V and restore token order, so every rank holds the KV
        of the whole forward (CP saves no KV memory), and write them into `layer`."""
        if swa_loc is not None:
            raise CPConfigError(
                f"{self.name}: swa_loc (sliding-window KV slots) is not supported; got "
                f"{type(swa_loc).__name__}"
            )
        meta = self.metadata(forward_batch)
        check_kv_shard(self, meta, layer, k, v)
        full_k = self.gather_kv_cache(k, forward_batch)
        full_v = self.gather_kv_cache(v, forward_batch)
        if layer is not None:
            layer.write_extend(full_k, full_v, rows=layer.extend_rows_on(layer.k.device, meta))


def _token_count(num_tokens: object) -> int:
    """`num_tokens` as an int in [0, MAX_TOKENS] (numpy integers included)."""
    if isinstance(num_tokens, bool) or not hasattr(type(num_tokens), "__index__"):
        raise CPBatchError(f"num_tokens is {num_tokens!r:.60}; expected an int")
    n = operator.index(num_tokens)  # type: ignore[arg-type]
    if not 0 <= n <= MAX_TOKENS:
        raise CPBatchError(
            f"num_tokens is {n}; expected >= 0, and the limit is {MAX_TOKENS} (cp.limits)"
        )
    return int(n)


def _check_num_tokens(num_tokens: int, extend_lens: tuple[int, ...]) -> None:
    """SGLang folds `num_tokens - sum(extend)` padding rows into the last request; the core
    refuses any mismatch (see docs/cp.md, differences from the seed)."""
    if _token_count(num_tokens) != sum(extend_lens):
        raise CPBatchError(
            f"num_tokens {num_tokens} != sum of extend lengths {list(extend_lens)} = "
            f"{sum(extend_lens)}"
        )


def _as_device(device: torch.device | str, who: str) -> torch.device:
    """`device` as a torch.device this build can use, or a `CPConfigError` saying why not."""
    try:
        out = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise CPConfigError(f"{who}: device {device!r} is not a torch device ({exc})") from None
    if out.type == "cuda" and not torch.cuda.is_available():
        raise CPConfigError(
            f"{who}: device {device!r} asked for, but this torch build "
            f"({torch.__version__}) sees no CUDA device"
        )
    return out


def _lengths_of(forward_batch: ForwardBatchLike) -> CPBatch:
    """The lengths of a `CPBatch` or of an engine batch (SGLang's attribute names)."""
    if isinstance(forward_batch, CPBatch):
        return forward_batch
    ext = getattr(forward_batch, "extend_seq_lens_cpu", None)
    pre = getattr(forward_batch, "extend_prefix_lens_cpu", None)
    if ext is None or pre is None:
        raise CPBatchError(
            "forward_batch needs extend_seq_lens_cpu and extend_prefix_lens_cpu (got "
            f"{ext!r} and {pre!r}) for can_apply"
        )
    return CPBatch(tuple(ext), tuple(pre))


@contextlib.contextmanager
def _on_stream(stream: Any | None, x: Tensor) -> Iterator[None]:
    """Run the enclosed collective on `stream` (a CUDA stream); None keeps the current one."""
    if stream is None:
        yield
        return
    if not x.is_cuda:
        raise CPConfigError(
            f"stream {stream!r} was given for a tensor on {x.device}; streams are CUDA only"
        )
    with torch.cuda.stream(stream):
        yield


def check_attention_backend(attention_backend: object, who: str) -> None:
    """SGLang asserts the backend is one its strategy supports; the one convention here is
    FLASH_ATTENTION (the varlen `attn_fn`)."""
    if attention_backend != CPAttentionBackend.FLASH_ATTENTION:
        raise CPConfigError(
            f"{who}: attention_backend must be CPAttentionBackendKind.FLASH_ATTENTION (the "
            f"varlen attn_fn convention); got {attention_backend!r:.60}"
        )


def check_query(q: object, who: str) -> None:
    """A query is a floating-point tensor of inference (see `_inference_only`)."""
    if not isinstance(q, Tensor):
        raise CPShapeError(f"{who}: q must be a tensor; got {type(q).__name__}")
    if not q.dtype.is_floating_point:
        raise CPShapeError(
            f"{who}: q is a {q.dtype} tensor; attention needs a floating-point q "
            "(float32, bfloat16, float16, float64)"
        )
    inference_only(q, "q", who)


def check_kv_shard(
    strategy: CPStrategy,
    meta: CPMetadata,
    layer: LayerKV | None,
    k: Tensor,
    v: Tensor,
    *,
    attention: bool = False,
) -> None:
    """`materialize_full_kv`'s K and V as the caller passed them, before any collective (checked
    after the gather, an error would show gathered shapes): this rank's physical rows; and,
    when they go into a layer cache or straight into attention (`attention`), of
    [rows, kv_heads, head_dim] with one kv_heads count, and the cache's kv_heads and head
    dims."""
    who, rank = strategy.name, strategy.cp_rank
    shaped = attention or layer is not None
    for name, t in (("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise CPShapeError(f"{who}: {name} must be a tensor; got {type(t).__name__}")
        inference_only(t, name, who)
        if t.dim() == 0 or t.shape[0] != meta.physical or (shaped and t.dim() != 3):
            layout = "[rows, kv_heads, head_dim]" if shaped else "[rows, ...]"
            raise CPShapeError(
                f"{who}: {name} {tuple(t.shape)} must be rank {rank}'s {meta.physical} "
                f"physical rows of {layout}"
            )
    if not shaped:
        return
    if k.shape[1] != v.shape[1]:
        raise CPShapeError(
            f"{who}: k {tuple(k.shape)} and v {tuple(v.shape)} must have one kv_heads count"
        )
    if layer is not None and (k.shape[1:] != layer.k.shape[1:] or v.shape[1:] != layer.v.shape[1:]):
        raise CPShapeError(
            f"{who}: k {tuple(k.shape)} / v {tuple(v.shape)} do not fit the layer cache's K "
            f"[rows, {', '.join(map(str, layer.k.shape[1:]))}] / V "
            f"[rows, {', '.join(map(str, layer.v.shape[1:]))}] (kv_heads, head_dim)"
        )


def inference_only(t: Tensor, name: str, who: str) -> None:
    """The strategies serve prefill, which runs without autograd: their index writes into
    preallocated buffers, collectives and cache writes are not differentiable, so a tensor
    that requires grad is refused here with the way out, rather than failing inside torch."""
    if isinstance(t, Tensor) and t.requires_grad and torch.is_grad_enabled():
        raise CPConfigError(
            f"{who}: {name} requires grad, but cp is inference-only (prefill, no autograd); "
            "run it under torch.no_grad() or torch.inference_mode(), or pass a detached tensor"
        )


def _default_comm(cp_size: int, who: str) -> Comm:
    """A group of one needs no communicator; otherwise the process's attention-CP group now
    when there is one (registered, or the initialised default group), else a `DeferredComm`
    that finds it at first use (SGLang constructs strategies before any group exists)."""
    if cp_size == 1:
        return SoloComm()
    if registered_attn_cp_comm() is not None or (dist.is_available() and dist.is_initialized()):
        return attn_cp_comm()
    return DeferredComm(cp_size, who)
