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

import contextlib
import importlib
import math
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

import meshsat.cp.attention as kernels
from meshsat.cp.attention import AttnFn
from meshsat.cp.base import (
    CPStrategy,
    ForwardBatchLike,
    check_attention_backend,
    check_kv_shard,
    check_query,
)
from meshsat.cp.batch import CPBatch, CPMetadata, segment_ids
from meshsat.cp.kinds import CPAttentionBackendKind, CPConfigError, CPShapeError, CPStrategyKind
from meshsat.cp.kvcache import LayerKV
from meshsat.cp.registry import register_strategy
from meshsat.cp.zigzag import ZigzagStrategy, zigzag_plan

_HALF = (torch.float16, torch.bfloat16)
# Query rows per tile: small enough that a tile's masked part stays near one block per request.
_ROW_BLOCK = 128


@dataclass(frozen=True)
class _Tile:
    """Query rows [r0, r1) of this rank against keys [k0, k1) of one shard (or of the cached
    prefix), all of one request and consecutive in position on both sides. Every row sees at
    least one of the keys. `causal`: the rows see keys bottom-right aligned (the i-th of q rows
    sees keys [k0, k1 - q + i]), FlashAttention's causal rule; otherwise every row sees every
    key (no mask)."""

    r0: int
    r1: int
    k0: int
    k1: int
    causal: bool


@dataclass(frozen=True)
class _RingSpans:
    """This rank's tiles against each source rank's shard (`steps[src]`) and against the
    cached prefix rows (`prefix`, keys indexing `prefix_rows`). Built once per forward."""

    steps: tuple[tuple[_Tile, ...], ...]
    prefix: tuple[_Tile, ...]
    prefix_rows: Tensor


@dataclass
class RingStats:
    """What the last ring pass held, for the memory claim (bytes of K/V, this rank)."""

    local_kv_bytes: int = 0
    peak_kv_bytes: int = 0
    steps: int = 0
    wait_seconds: float = 0.0
    """Host time spent waiting for a shard after computing on the previous one: near zero when
    the transfer hides behind the attention (on CUDA the wait only orders streams)."""


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
        use_flash: bool | None = None,
    ) -> None:
        self.strategy, self.meta, self.kv, self.k, self.v = strategy, meta, kv, k, v
        self.softmax_scale, self.use_flash = softmax_scale, use_flash

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
        check_kv_shard(self, meta, layer, k, v, attention=True)
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
        if use_flash and not kernels._flash_installed():
            raise CPConfigError("use_flash=True but flash_attn is not importable with CUDA here")
        ring = RingAttnFn(
            self, self.metadata(batch), kv, shard[0], shard[1], softmax_scale, use_flash
        )
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

    def _spans(self, meta: CPMetadata, device: torch.device) -> _RingSpans:
        """The tiles this rank computes against each shard (host ints, once per forward).
        Zigzag puts a request on a rank as runs of consecutive positions (two per request), so
        a block of query rows of one run sees a prefix of each key run of the same request: the
        ring multiplies only those tiles, each either unmasked or bottom-right causal."""

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
                tiles: list[_Tile] = []
                for u, q0, q1, q_first in mine:
                    for r0 in range(q0, q1, _ROW_BLOCK):
                        r1 = min(r0 + _ROW_BLOCK, q1)
                        low = q_first + r0 - q0
                        for _, k0, k1, k_first in by_request.get(u, ()):
                            tiles += _tiles(r0, r1, low, k0, k1, k_first)
                steps.append(tuple(tiles))
            seq = ext + pre
            p_req = segment_ids(pre)
            p_pos = torch.arange(int(pre.sum())) - (torch.cumsum(pre, 0) - pre)[p_req]
            prefix_rows = (torch.cumsum(seq, 0) - seq)[p_req] + p_pos
            p_first = (torch.cumsum(pre, 0) - pre).tolist()
            prefix = tuple(
                _Tile(q0, q1, p_first[u], p_first[u] + int(pre[u]), False)
                for u, q0, q1, _ in mine
                if int(pre[u])
            )
            return _RingSpans(tuple(steps), prefix, prefix_rows.to(device))

        spans: _RingSpans = meta.memo("ring-spans", self.cp_rank, device, build)
        return spans

    def _ring_attention(self, fn: RingAttnFn, q: Tensor) -> Tensor:
        meta, rank, cp = fn.meta, self.cp_rank, self.cp_size
        k_local, v_local = fn.k, fn.v
        self._check_ring_shapes(fn, q)
        spans = self._spans(meta, q.device)
        dim = q.shape[2]
        scale = fn.softmax_scale if fn.softmax_scale is not None else 1.0 / math.sqrt(dim)
        merge = _Merge(q, k_local.shape[1], v_local.shape[2], scale, fn.use_flash, meta)
        block_bytes = k_local.nbytes + v_local.nbytes
        # Two receive buffers, alternating: step s computes on the shard received at step s-1
        # while the next one arrives in the other buffer (kept per forward, not per layer).
        bufs = meta.memo(
            f"ring-buffers-{tuple(k_local.shape)}-{tuple(v_local.shape)}-{k_local.dtype}",
            rank,
            q.device,
            lambda: [[torch.empty_like(k_local), torch.empty_like(v_local)] for _ in range(2)],
        )
        held = 1 + min(2, cp - 1)  # the local shard, plus the buffers in use
        self.stats = RingStats(block_bytes, block_bytes * held, cp)
        self.agree_on_plan(meta, k_local)
        k_cur, v_cur = k_local, v_local
        wait = None
        try:
            for step in range(cp):
                if step + 1 < cp:  # next shard in flight while this one is used
                    wait = self.comm.ring_pass_start([k_cur, v_cur], out=bufs[step % 2])
                if step == 0 and spans.prefix:  # the cached prefix, while the first shard travels
                    merge.tiles(
                        spans.prefix,
                        fn.kv.k.index_select(0, spans.prefix_rows),
                        fn.kv.v.index_select(0, spans.prefix_rows),
                    )
                merge.tiles(spans.steps[(rank - step) % cp], k_cur, v_cur)
                if wait is not None:
                    t0 = time.perf_counter()
                    k_cur, v_cur = wait()
                    wait = None
                    self.stats.wait_seconds += time.perf_counter() - t0
        except BaseException:
            # A transfer left posted would pair with the group's next collective (a hang or a
            # gloo abort): complete it, as the peer does, before the error leaves.
            if wait is not None:
                with contextlib.suppress(Exception):
                    wait()
            raise
        return merge.result()

    def _check_ring_shapes(self, fn: RingAttnFn, q: Tensor) -> None:
        """Every shape the pass relies on, before the first transfer is posted: grouped-query
        heads, one Q/K head_dim (V's may differ), the shards' and the cache's kv heads and
        dims alike."""
        k, v, cache = fn.k, fn.v, fn.kv
        heads, kv_heads = q.shape[1], k.shape[1]
        if kv_heads == 0 or heads == 0 or heads % kv_heads or k.shape[2] != q.shape[2]:
            raise CPShapeError(
                f"{self.name}: q {tuple(q.shape)} and K {tuple(k.shape)}: query heads must "
                "be a multiple of kv heads (>= 1) with one Q/K head_dim"
            )
        if v.shape[:2] != k.shape[:2] or v.shape[2] == 0:
            raise CPShapeError(
                f"{self.name}: K {tuple(k.shape)} and V {tuple(v.shape)} must share rows and "
                "kv heads (V's head_dim may differ, >= 1)"
            )
        if cache.k.shape[1:] != k.shape[1:] or cache.v.shape[1:] != v.shape[1:]:
            raise CPShapeError(
                f"{self.name}: the layer cache's K {tuple(cache.k.shape)} / V "
                f"{tuple(cache.v.shape)} and the shards' K {tuple(k.shape)} / V "
                f"{tuple(v.shape)} differ in kv heads or head_dim"
            )


class _Merge:
    """The online-softmax merge of one layer's ring pass: per tile a fused attention call that
    also returns the log-sum-exp of each row (FlashAttention on CUDA half tensors when it is
    installed, torch's CPU flash kernel on the CPU, plain torch elsewhere), folded into a running
    output and log-sum-exp: out = out * e^(lse - new) + o * e^(lse_t - new), new = logaddexp.
    Exact: the result is softmax attention over the union of the tiles.

    V's head_dim may differ from Q/K's (MLA-style heads): FlashAttention is then not used, and
    torch's CPU kernel, which takes one head size, gets Q/K or V zero-padded to the larger one
    (zero columns add nothing to a score, and V's padding columns are cut from the output)."""

    def __init__(
        self,
        q: Tensor,
        kv_heads: int,
        v_dim: int,
        scale: float,
        use_flash: bool | None,
        meta: CPMetadata,
    ) -> None:
        rows, heads, dim = q.shape
        self.q, self.kv_heads, self.group, self.scale = q, kv_heads, heads // kv_heads, scale
        self.meta = meta
        self.compute = torch.float32 if q.dtype in _HALF else q.dtype
        self.flash = (
            use_flash is not False
            and kernels._on_gpu(q)
            and q.dtype in _HALF
            and dim == v_dim <= 256
            and kernels._flash_installed()
        )
        self.fused_cpu = q.device.type == "cpu" and self.compute in (torch.float32, torch.float64)
        width = max(dim, v_dim) if self.fused_cpu else dim
        self.qk_pad, self.v_pad, self.v_dim = (
            width - dim,
            width - v_dim if self.fused_cpu else 0,
            v_dim,
        )
        # [kv_heads, group, rows, dim]: query heads of one kv head share its keys without a copy
        qc = _pad_last(q.to(self.compute), self.qk_pad)
        self.qh = qc.view(rows, kv_heads, self.group, width).permute(1, 2, 0, 3)
        self.out = q.new_zeros((kv_heads, self.group, rows, v_dim), dtype=self.compute)
        self.lse = torch.full(
            (kv_heads, self.group, rows), -math.inf, dtype=self.compute, device=q.device
        )

    def tiles(self, tiles: tuple[_Tile, ...], k: Tensor, v: Tensor) -> None:
        if not tiles:
            return
        if self.flash:
            k, v = k.to(self.q.dtype), v.to(self.q.dtype)  # a cache may hold another dtype
            for t in tiles:
                self._fold(t, *self._flash_tile(t, k, v))
            return
        # [kvh, 1, keys, dim]
        kk = _pad_last(k.to(self.compute), self.qk_pad).permute(1, 0, 2).unsqueeze(1)
        vv = _pad_last(v.to(self.compute), self.v_pad).permute(1, 0, 2).unsqueeze(1)
        for t in tiles:
            self._fold(t, *self._torch_tile(t, kk, vv))

    def _torch_tile(self, t: _Tile, kk: Tensor, vv: Tensor) -> tuple[Tensor, Tensor]:
        q = self.qh[:, :, t.r0 : t.r1]
        keys = t.k1 - t.k0
        k = kk[:, :, t.k0 : t.k1].expand(self.kv_heads, self.group, keys, kk.shape[-1])
        v = vv[:, :, t.k0 : t.k1].expand(self.kv_heads, self.group, keys, vv.shape[-1])
        mask = self._mask(t.r1 - t.r0, keys, q.device) if t.causal else None
        if self.fused_cpu:
            o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                q, k, v, 0.0, False, attn_mask=mask, scale=self.scale
            )
            return (o[..., : self.v_dim] if self.v_pad else o), lse
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        if mask is not None:
            scores = scores + mask
        lse = torch.logsumexp(scores, -1)
        return torch.matmul(torch.exp(scores - lse[..., None]), v), lse

    def _flash_tile(self, t: _Tile, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """FlashAttention (CUDA, fp16/bf16): bottom-right causal masking is the tile's rule;
        grouped-query heads are native. Returns the [kvh, group, rows, ...] layout."""
        flash: Any = importlib.import_module("flash_attn")
        n = t.r1 - t.r0
        q = self.q[t.r0 : t.r1].unsqueeze(0)
        o, lse, _ = flash.flash_attn_func(
            q,
            k[t.k0 : t.k1].unsqueeze(0),
            v[t.k0 : t.k1].unsqueeze(0),
            softmax_scale=self.scale,
            causal=t.causal,
            return_attn_probs=True,
        )
        o = o[0].view(n, self.kv_heads, self.group, -1).permute(1, 2, 0, 3)
        return o.to(self.compute), lse[0, :, :n].view(self.kv_heads, self.group, n)

    def _mask(self, rows: int, keys: int, device: torch.device) -> Tensor:
        """Additive bottom-right causal mask of a tile shape, built once per forward."""

        def build() -> Tensor:
            seen = torch.ones(rows, keys, dtype=torch.bool, device=device).tril(keys - rows)
            zeros = torch.zeros(rows, keys, dtype=self.compute, device=device)
            return zeros.masked_fill(~seen, -math.inf)

        mask: Tensor = self.meta.memo(f"ring-mask-{rows}-{keys}-{self.compute}", 0, device, build)
        return mask

    def _fold(self, t: _Tile, o: Tensor, lse: Tensor) -> None:
        old = self.lse[:, :, t.r0 : t.r1]
        new = torch.logaddexp(old, lse)
        out = self.out[:, :, t.r0 : t.r1]
        out.mul_(torch.exp(old - new)[..., None]).add_(o * torch.exp(lse - new)[..., None])
        old.copy_(new)

    def result(self) -> Tensor:
        rows, heads = self.q.shape[0], self.q.shape[1]
        out = self.out.permute(2, 0, 1, 3).reshape(rows, heads, self.out.shape[-1])
        return out.to(self.q.dtype)


def _pad_last(t: Tensor, n: int) -> Tensor:
    """`t` with `n` zero columns appended to its last dim (itself when n is 0)."""
    return torch.nn.functional.pad(t, (0, n)) if n else t


def _tiles(r0: int, r1: int, low: int, k0: int, k1: int, k_first: int) -> list[_Tile]:
    """Rows [r0, r1) at positions low.. against a key run [k0, k1) at positions k_first..:
    rows before the run see none of it (skipped); rows before its last key see a growing
    prefix of it (one bottom-right causal tile); the rest see all of it (one unmasked tile)."""
    high = low + (r1 - r0) - 1
    k_last = k_first + (k1 - k0) - 1
    if high < k_first or k1 == k0:
        return []
    first = max(low, k_first)  # the first row position that sees a key of the run
    a = r0 + (first - low)
    out = []
    if first < k_last:  # rows at positions first .. min(high, k_last - 1): causal
        m = min(high, k_last - 1)
        b = a + (m - first + 1)
        out.append(_Tile(a, b, k0, k0 + (m - k_first + 1), True))
        a = b
    if a < r1:
        out.append(_Tile(a, r1, k0, k1, False))
    return out


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
