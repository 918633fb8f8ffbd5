"""Ring context parallelism: zigzag-balanced tokens, each rank keeping only its own K/V shard.

Where zigzag and interleave all-gather the forward's K/V so that every rank holds all of it,
ring attention passes K/V shards around the attention-CP group: at step t rank r attends its
queries to the shard of rank r - t while that shard travels on to r + 1 and the next one
arrives (`Comm.ring_pass_start`, `batch_isend_irecv` over a process group). The partial results
are merged with the online-softmax rule (running max, running sum, rescaled accumulator), which
is exact: the merged output is softmax attention over the union of the blocks. So a rank holds
its shard (total / cp rows) plus two shards in flight, never the whole forward's K/V.

The token layout is zigzag's (blocks r and 2·cp-1-r of every request on rank r), which balances
causal work across ranks; the policy is zigzag's too (every extend length >= 2·cp, at least one
request). Cached prefixes are read from the layer cache every rank already holds.

Not an SGLang strategy: `ContextParallelStrategyKind.from_string` never yields RING; bind it with
`bind_cp_strategy(..., cp_strategy="ring")` or `meshsat.cp.instantiate(..., strategy="ring")`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from meshsat.cp.attention import AttnFn
from meshsat.cp.base import CPStrategy, ForwardBatchLike, check_attention_backend, check_query
from meshsat.cp.batch import CPBatch, CPMetadata, segment_ids
from meshsat.cp.kinds import CPAttentionBackendKind, CPConfigError, CPShapeError, CPStrategyKind
from meshsat.cp.kvcache import LayerKV
from meshsat.cp.registry import register_strategy
from meshsat.cp.zigzag import ZigzagStrategy, zigzag_plan

_HALF = (torch.float16, torch.bfloat16)
# Query rows per tile: small enough that a tile's masked part stays near one block per request.
_ROW_BLOCK = 128


@dataclass(frozen=True)
class _RingLayout:
    """Per rank, for each physical row: its request (-1 for padding) and its position in the
    request counting the cached prefix (as a key: the row's position; as a query: the last key
    position it may see). Built once per forward."""

    request: tuple[Tensor, ...]
    position: tuple[Tensor, ...]
    prefix_rows: Tensor
    prefix_request: Tensor
    prefix_position: Tensor


@dataclass(frozen=True)
class _Tile:
    """Query rows [r0, r1) of this rank against keys [k0, k1) of one shard (or of the cached
    prefix): one request's, the keys a prefix of those the rows' last one may see; `full` when
    every row sees every key (no mask needed)."""

    r0: int
    r1: int
    k0: int
    k1: int
    full: bool


@dataclass(frozen=True)
class _RingSpans:
    """This rank's tiles against each source rank's shard (`steps[src]`) and against the
    prefix rows in `_RingLayout.prefix_rows` order. Host ints, built once per forward."""

    steps: tuple[tuple[_Tile, ...], ...]
    prefix: tuple[_Tile, ...]


@dataclass
class RingStats:
    """What the last ring pass held, for the memory claim (bytes of K/V, this rank)."""

    local_kv_bytes: int = 0
    peak_kv_bytes: int = 0
    steps: int = 0


class RingAttnFn:
    """The ring's attention for one layer, bound to this rank's K/V shard. `run_attention` calls
    it once with all local query rows; it is not a varlen `attn_fn` (it merges partial results
    across ranks, which a varlen kernel cannot)."""

    def __init__(
        self,
        strategy: RingStrategy,
        meta: CPMetadata,
        kv: LayerKV,
        k: Tensor,
        v: Tensor,
        softmax_scale: float | None,
    ) -> None:
        self.strategy, self.meta, self.kv, self.k, self.v = strategy, meta, kv, k, v
        self.softmax_scale = softmax_scale

    def __call__(self, q: Tensor) -> Tensor:
        return self.strategy._ring_attention(self, q)


class RingStrategy(CPStrategy):
    name = "ring"
    kind = CPStrategyKind.RING

    def __init__(self, cp_size: int, comm: Any = None) -> None:
        super().__init__(cp_size, comm=comm)
        self._shards: dict[int, tuple[Tensor, Tensor]] = {}
        self.stats = RingStats()

    def why_not(self, batch: CPBatch) -> str | None:
        reason = ZigzagStrategy.why_not(self, batch)  # type: ignore[arg-type]
        return None if reason is None else reason.replace("zigzag", "ring")

    def _plan(self, extend_lens: tuple[int, ...], prefix_lens: tuple[int, ...]) -> CPMetadata:
        meta = zigzag_plan(self.cp_size, extend_lens, prefix_lens)
        meta.kind = CPStrategyKind.RING
        return meta

    def materialize_full_kv(
        self,
        forward_batch: ForwardBatchLike,
        layer: LayerKV | None,
        k: Tensor,
        v: Tensor,
        swa_loc: Any | None = None,
    ) -> None:
        """Keeps this rank's K/V shard for the layer's ring pass; writes nothing into `layer`
        (whose extend rows stay unwritten: no rank ever holds the whole forward's K/V)."""
        if swa_loc is not None:
            raise CPConfigError(f"{self.name}: swa_loc (sliding-window KV) is not supported")
        meta = self.metadata(forward_batch)
        for name, t in (("k", k), ("v", v)):
            if t.dim() != 3 or t.shape[0] != meta.physical:
                raise CPShapeError(
                    f"{self.name}: {name} {tuple(t.shape)} must be rank {self.cp_rank}'s "
                    f"{meta.physical} physical rows of [rows, kv_heads, head_dim]"
                )
        self._shards[id(layer)] = (k, v)

    def default_attn_fn(
        self,
        batch: ForwardBatchLike,
        kv: LayerKV,
        *,
        softmax_scale: float | None = None,
        use_flash: bool | None = None,
    ) -> AttnFn:
        if softmax_scale is not None and not (
            isinstance(softmax_scale, (int, float)) and math.isfinite(softmax_scale)
        ):
            raise CPConfigError(
                f"softmax_scale must be a finite number or None; got {softmax_scale!r}"
            )
        shard = self._shards.pop(id(kv), None)
        if shard is None:
            raise CPConfigError(
                f"{self.name}: call materialize_full_kv(batch, layer, k, v) for this layer "
                "before binding its attention"
            )
        ring = RingAttnFn(self, self.metadata(batch), kv, shard[0], shard[1], softmax_scale)
        return ring  # type: ignore[return-value]

    def run_attention(
        self,
        q: Tensor,
        forward_batch: ForwardBatchLike,
        device: torch.device | str,
        attn_fn: AttnFn,
        attention_backend: CPAttentionBackendKind = CPAttentionBackendKind.FLASH_ATTENTION,
    ) -> Tensor:
        """The ring pass for this rank's query rows (padding rows zero)."""
        check_attention_backend(attention_backend, self.name)
        check_query(q, self.name)
        if not isinstance(attn_fn, RingAttnFn):
            raise CPConfigError(
                f"{self.name}: run_attention needs the strategy's own attention "
                "(default_attn_fn): a varlen attn_fn cannot merge partial results across ranks"
            )
        meta = self.metadata(forward_batch)
        if q.dim() != 3 or q.shape[0] != meta.physical:
            raise CPShapeError(
                f"{self.name}: q {tuple(q.shape)} must have rank {self.cp_rank}'s "
                f"{meta.physical} physical rows of [rows, heads, head_dim]"
            )
        return attn_fn(q)

    # ---- the ring pass ---------------------------------------------------------------------

    def _layout(self, meta: CPMetadata, device: torch.device) -> _RingLayout:
        def build() -> _RingLayout:
            ext = torch.tensor(meta.extend_lens, dtype=torch.long)
            pre = torch.tensor(meta.prefix_lens, dtype=torch.long)
            total = int(ext.sum())
            req = segment_ids(ext)
            pos = torch.arange(total) - (torch.cumsum(ext, 0) - ext)[req] + pre[req]
            requests, positions = [], []
            for r in range(meta.cp_size):
                toks = meta.rank_tokens[r]
                rq = torch.full((meta.physical,), -1, dtype=torch.long)
                ps = torch.zeros(meta.physical, dtype=torch.long)
                rq[: toks.numel()] = req[toks]
                ps[: toks.numel()] = pos[toks]
                requests.append(rq.to(device))
                positions.append(ps.to(device))
            seq = ext + pre
            n_pre = int(pre.sum())
            p_req = segment_ids(pre)
            p_pos = torch.arange(n_pre) - (torch.cumsum(pre, 0) - pre)[p_req]
            p_rows = (torch.cumsum(seq, 0) - seq)[p_req] + p_pos
            return _RingLayout(
                tuple(requests),
                tuple(positions),
                p_rows.to(device),
                p_req.to(device),
                p_pos.to(device),
            )

        layout: _RingLayout = meta.memo("ring-layout", 0, device, build)
        return layout

    def _spans(self, meta: CPMetadata) -> _RingSpans:
        """The tiles this rank computes against each shard (host ints, once per forward).
        Zigzag puts a request on a rank as runs of consecutive positions (two per request), so
        a block of query rows of one run sees a prefix of each key run of the same request: the
        ring multiplies only those tiles, and masks only the ones the causal edge crosses,
        instead of all rows against all keys of a shard."""

        def build() -> _RingSpans:
            ext = torch.tensor(meta.extend_lens, dtype=torch.long)
            pre = torch.tensor(meta.prefix_lens, dtype=torch.long)
            req = segment_ids(ext)
            pos = torch.arange(int(ext.sum())) - (torch.cumsum(ext, 0) - ext)[req] + pre[req]
            runs = [_runs(req[t].tolist(), pos[t].tolist()) for t in meta.rank_tokens]
            mine = runs[self.cp_rank]
            steps = []
            for theirs in runs:
                by_request: dict[int, list[tuple[int, int, int, int]]] = {}
                for run in theirs:
                    by_request.setdefault(run[0], []).append(run)
                tiles = []
                for u, q0, q1, q_first in mine:
                    for r0 in range(q0, q1, _ROW_BLOCK):
                        r1 = min(r0 + _ROW_BLOCK, q1)
                        low, high = q_first + r0 - q0, q_first + r1 - 1 - q0
                        for _, k0, k1, k_first in by_request.get(u, ()):
                            seen = min(k1 - k0, high - k_first + 1)
                            if seen > 0:
                                full = k_first + seen - 1 <= low
                                tiles.append(_Tile(r0, r1, k0, k0 + seen, full))
                steps.append(tuple(tiles))
            p_first = (torch.cumsum(pre, 0) - pre).tolist()
            prefix = tuple(
                _Tile(q0, q1, p_first[u], p_first[u] + int(pre[u]), True)
                for u, q0, q1, _ in mine
                if int(pre[u])
            )
            return _RingSpans(tuple(steps), prefix)

        spans: _RingSpans = meta.memo("ring-spans", self.cp_rank, torch.device("cpu"), build)
        return spans

    def _ring_attention(self, fn: RingAttnFn, q: Tensor) -> Tensor:
        meta, rank, cp = fn.meta, self.cp_rank, self.cp_size
        rows, heads, dim = q.shape
        k_local, v_local = fn.k, fn.v
        kv_heads = k_local.shape[1]
        if kv_heads == 0 or heads % kv_heads or k_local.shape[2] != dim:
            raise CPShapeError(
                f"{self.name}: q {tuple(q.shape)} and K {tuple(k_local.shape)}: query heads must "
                "be a multiple of kv heads (>= 1) with one head_dim"
            )
        group = heads // kv_heads
        layout = self._layout(meta, q.device)
        spans = self._spans(meta)
        compute = torch.float32 if q.dtype in _HALF else q.dtype
        scale = fn.softmax_scale if fn.softmax_scale is not None else 1.0 / math.sqrt(dim)
        # [kv_heads, group, rows, dim]: query heads of one kv head share its keys without a copy
        qh = q.to(compute).view(rows, kv_heads, group, dim).permute(1, 2, 0, 3)
        q_pos = layout.position[rank]
        m = torch.full((kv_heads, group, rows), -math.inf, dtype=compute, device=q.device)
        s = torch.zeros((kv_heads, group, rows), dtype=compute, device=q.device)
        acc = torch.zeros((kv_heads, group, rows, fn.v.shape[2]), dtype=compute, device=q.device)

        def merge(tiles: tuple[_Tile, ...], k: Tensor, v: Tensor, k_pos: Tensor | None) -> None:
            """Online softmax over each tile: rows [r0, r1) against keys [k0, k1) of `k`."""
            if not tiles:
                return
            kk = k.to(compute).permute(1, 0, 2).unsqueeze(1)  # [kvh, 1, keys, dim]
            vv = v.to(compute).permute(1, 0, 2).unsqueeze(1)
            for t in tiles:
                scores = torch.matmul(
                    qh[:, :, t.r0 : t.r1], kk[:, :, t.k0 : t.k1].transpose(-1, -2)
                )
                scores = scores * scale  # [kvh, group, tile rows, tile keys]
                if not t.full and k_pos is not None:
                    visible = k_pos[t.k0 : t.k1][None, :] <= q_pos[t.r0 : t.r1][:, None]
                    scores = scores.masked_fill(~visible, -math.inf)
                m_old = m[:, :, t.r0 : t.r1]
                m_new = torch.maximum(m_old, scores.amax(-1))
                safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                p = torch.exp(scores - safe[..., None])
                alpha = torch.exp(m_old - safe)
                s[:, :, t.r0 : t.r1] = s[:, :, t.r0 : t.r1] * alpha + p.sum(-1)
                acc[:, :, t.r0 : t.r1] = acc[:, :, t.r0 : t.r1] * alpha[..., None] + torch.matmul(
                    p, vv[:, :, t.k0 : t.k1]
                )
                m[:, :, t.r0 : t.r1] = m_new

        if spans.prefix:
            merge(
                spans.prefix,
                fn.kv.k.index_select(0, layout.prefix_rows),
                fn.kv.v.index_select(0, layout.prefix_rows),
                None,
            )
        block_bytes = k_local.nbytes + v_local.nbytes
        self.stats = RingStats(local_kv_bytes=block_bytes, peak_kv_bytes=block_bytes, steps=cp)
        k_cur, v_cur = k_local, v_local
        for step in range(cp):
            wait = None
            if step + 1 < cp:  # next shard in flight while this one is used
                wait = self.comm.ring_pass_start([k_cur, v_cur])
                held = block_bytes * (3 if step > 0 else 2)  # local + current + incoming
                self.stats.peak_kv_bytes = max(self.stats.peak_kv_bytes, held)
            src = (rank - step) % cp
            merge(spans.steps[src], k_cur, v_cur, layout.position[src])
            if wait is not None:
                k_cur, v_cur = wait()
        out = acc / torch.where(s == 0, torch.ones_like(s), s)[..., None]
        return out.permute(2, 0, 1, 3).reshape(rows, heads, fn.v.shape[2]).to(q.dtype)


def _runs(requests: list[int], positions: list[int]) -> list[tuple[int, int, int, int]]:
    """A rank's rows as maximal runs of consecutive positions of one request: (request, first
    row, end row, first position). Zigzag gives each request two runs per rank."""
    runs: list[tuple[int, int, int, int]] = []
    for i, (u, p) in enumerate(zip(requests, positions, strict=True)):
        if runs and runs[-1][0] == u and runs[-1][3] + (i - runs[-1][1]) == p:
            r = runs[-1]
            runs[-1] = (u, r[1], i + 1, r[3])
        else:
            runs.append((u, i, i + 1, p))
    return runs


register_strategy(CPStrategyKind.RING, RingStrategy)
