"""Exact causal attention in the varlen calling convention the strategies speak.

`run_attention` hands an `attn_fn(q, cu_seqlens_q, kv_lens, max_seqlen_q)` the rank's query rows
cut into sequences. The function reads keys from a `LayerKV`, and `seq_requests` tells it which
request each sequence belongs to: the identity for zigzag (one sequence per request and call),
one entry per query for interleave (every query is its own length-1 sequence). The default here
is plain torch and exact on CPU and GPU; FlashAttention's varlen kernel serves every call it can
serve exactly (CUDA, fp16/bf16, equal head dims up to 256) when it is installed, for both
strategies: keys are handed to it as a paged cache (`block_table`), so the many sequences of one
request under interleave share its pages instead of each copying its keys.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from meshsat.cp.batch import DeviceChunk, segment_aranges
from meshsat.cp.kinds import CPConfigError, CPShapeError
from meshsat.cp.kvcache import LayerKV

AttnFn = Callable[[Tensor, Tensor, Tensor, int], Tensor]
"""attn_fn(q [rows, heads, dim], cu_seqlens_q [seqs + 1], kv_lens [seqs], max_seqlen_q) -> out."""

# Query rows per torch attention call. SDPA computes the masked-out part of a block too, so
# small blocks keep that waste near one block per request (and bound the [rows, keys] mask).
_ROW_BLOCK = 128
# FlashAttention's paged-KV block size must be a multiple of 256 (flash-attn 2.5 and later).
FLASH_PAGE = 256
_HALF = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class _Seqs:
    """One call's sequences, validated, as CPU int64 tensors."""

    q_lens: Tensor
    kv_lens: Tensor
    requests: Tensor


@dataclass(frozen=True)
class _Block:
    """Up to `_ROW_BLOCK` query rows of one request: their local row indices and the last key
    each may see, on the device; `keys` = the largest of those plus one."""

    rows: Tensor
    last: Tensor
    keys: int


@dataclass(frozen=True)
class _Group:
    """One request's blocks in one call, reading keys from row `kv_start` of the cache."""

    kv_start: int
    keys: int
    blocks: tuple[_Block, ...]


@dataclass(frozen=True)
class _Schedule:
    """Everything one call needs that depends only on the plan, on the device: built once per
    forward (per rank and device) and reused by every layer, so a layer's call does no host
    work and no host-device synchronisation."""

    groups: tuple[_Group, ...]
    key_positions: Tensor
    flash: _FlashPages | None
    max_k: int


@dataclass(frozen=True)
class _FlashPages:
    """The keys of one call as FlashAttention's paged cache: `page_rows` lists, page by page,
    the cache rows to copy into [pages, FLASH_PAGE, heads, dim] (a request's last page is
    padded with its last row, which no query reads); row i of `block_table` names the pages of
    sequence i's request, so sequences of one request share them; `cu_k` their key lengths."""

    page_rows: Tensor
    block_table: Tensor
    cu_k: Tensor


class PlanCalls:
    """The calls `run_attention` will make (its device chunks), for an attention function to
    recognise them by their `cu_seqlens_q` tensor and run them from a prepared schedule."""

    def __init__(
        self, chunks: Sequence[DeviceChunk], memo: Callable[[str, Callable[[], Any]], Any]
    ):
        self.chunks = tuple(chunks)
        self.memo = memo


def causal_attention_fn(
    kv: LayerKV,
    seq_requests: Tensor,
    *,
    softmax_scale: float | None = None,
    use_flash: bool | None = None,
    plan_calls: PlanCalls | None = None,
) -> AttnFn:
    """Bind exact causal attention to a layer's KV cache.

    `use_flash`: None uses FlashAttention when it is importable and the tensors are on CUDA,
    True requires it to be installed (and still falls back to torch for calls it cannot serve
    exactly), False never uses it. `plan_calls` (what `CPStrategy.default_attn_fn` passes):
    calls whose `cu_seqlens_q` is one of the plan's device tensors skip validation (the plan
    was checked when built) and run from a per-forward schedule, without host synchronisation;
    any other call is validated on the host first.
    """
    if softmax_scale is not None and not (
        isinstance(softmax_scale, (int, float)) and math.isfinite(softmax_scale)
    ):
        raise CPConfigError(f"softmax_scale must be a finite number or None; got {softmax_scale!r}")
    requests = seq_requests if seq_requests.device.type == "cpu" else seq_requests.cpu()
    if plan_calls is None:  # the plan's own sequences were checked when the plan was built
        _check_requests(requests, kv)
    if use_flash and not _flash_installed():
        raise CPConfigError("use_flash=True but flash_attn is not importable with CUDA here")
    flash_ok = use_flash is not False and _on_gpu(kv.k) and _flash_installed()
    known = {}
    if plan_calls is not None:
        known = {id(c.cu_seqlens_q): (i, c) for i, c in enumerate(plan_calls.chunks)}

    def attn_fn(q: Tensor, cu_seqlens_q: Tensor, kv_lens: Tensor, max_seqlen_q: int) -> Tensor:
        scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
        hit = known.get(id(cu_seqlens_q))
        if hit is not None and hit[1].cu_seqlens_q is cu_seqlens_q and plan_calls is not None:
            index, call = hit
            _check_shapes(q, kv)
            sched: _Schedule = plan_calls.memo(
                f"attn-schedule-{index}",
                lambda: _schedule(
                    call.chunk.q_lens, call.chunk.kv_lens, requests, kv.starts, q.device
                ),
            )
        else:
            _check_requests(requests, kv)
            capacity = torch.tensor(kv.seq_lens, dtype=torch.long)[requests]
            seqs = _check_call(q, cu_seqlens_q, kv_lens, max_seqlen_q, requests, capacity, kv)
            sched = _schedule(seqs.q_lens, seqs.kv_lens, requests, kv.starts, q.device)
        if flash_ok and sched.flash is not None and _flash_fits(q, kv):
            return _flash_attention(q, kv, sched.flash, cu_seqlens_q, max_seqlen_q, sched, scale)
        return _torch_attention(q, kv, sched, scale)

    return attn_fn


def _check_requests(requests: Tensor, kv: LayerKV) -> None:
    bad = torch.nonzero((requests < 0) | (requests >= kv.batch.bs)).flatten()
    if bad.numel():
        raise CPShapeError(
            f"seq_requests names request {int(requests[bad[0]])}; the batch has "
            f"{kv.batch.bs} requests"
        )


def _check_shapes(q: Tensor, kv: LayerKV) -> None:
    if q.dim() != 3:
        raise CPShapeError(f"q must be [rows, heads, head_dim]; got {tuple(q.shape)}")
    heads, kv_heads = q.shape[1], kv.k.shape[1]
    if heads == 0 or q.shape[2] == 0:
        raise CPShapeError(f"q {tuple(q.shape)}: heads and head_dim must be >= 1")
    if heads % kv_heads:
        raise CPShapeError(f"{heads} query heads are not a multiple of {kv_heads} kv heads")
    if q.shape[2] != kv.k.shape[2]:
        raise CPShapeError(f"q head_dim {q.shape[2]} != key head_dim {kv.k.shape[2]}")


def _check_call(
    q: Tensor,
    cu_seqlens_q: Tensor,
    kv_lens: Tensor,
    max_seqlen_q: int,
    requests: Tensor,
    capacity: Tensor,
    kv: LayerKV,
) -> _Seqs:
    _check_shapes(q, kv)
    cu = cu_seqlens_q.to(device="cpu", dtype=torch.long)
    kl = kv_lens.to(device="cpu", dtype=torch.long)
    if cu.numel() != kl.numel() + 1 or kl.numel() != requests.numel():
        raise CPShapeError(
            f"{cu.numel()} cu_seqlens_q entries and {kl.numel()} kv_lens for "
            f"{requests.numel()} bound sequences; need seqs + 1, seqs and seqs"
        )
    if int(cu[0]) != 0 or int(cu[-1]) != q.shape[0]:
        raise CPShapeError(
            f"cu_seqlens_q must run from 0 to the {q.shape[0]} query rows; got {cu.tolist()}"
        )
    q_lens = cu.diff()
    if bool((q_lens < 0).any()):
        raise CPShapeError(f"cu_seqlens_q must not decrease; got {cu.tolist()}")
    longest = int(q_lens.max()) if q_lens.numel() else 0
    if longest > max_seqlen_q:
        raise CPShapeError(f"max_seqlen_q {max_seqlen_q} < longest sequence {longest}")
    bad = torch.nonzero((kl < q_lens) | (kl > capacity)).flatten()
    if bad.numel():
        i = int(bad[0])
        raise CPShapeError(
            f"sequence {i} (request {int(requests[i])}): kv length {int(kl[i])} must lie in "
            f"[q length {int(q_lens[i])}, sequence length {int(capacity[i])}]"
        )
    return _Seqs(q_lens, kl, requests)


def _schedule(
    q_lens: Tensor, kv_lens: Tensor, requests: Tensor, starts: Sequence[int], device: torch.device
) -> _Schedule:
    """Group one call's query rows by request and cut them into row blocks (host work, once
    per forward); the index tensors go to `device` once."""
    rows = int(q_lens.sum())
    seq_of_row = torch.repeat_interleave(torch.arange(q_lens.numel()), q_lens, output_size=rows)
    first_row = torch.cumsum(q_lens, 0) - q_lens
    offset = torch.arange(rows) - first_row[seq_of_row]
    # Row i of a sequence of q queries with kv length K sees keys [0, K - q + i].
    last_key = kv_lens[seq_of_row] - q_lens[seq_of_row] + offset
    row_request = requests[seq_of_row]
    order = torch.argsort(row_request, stable=True)
    present, per_request = torch.unique_consecutive(row_request[order], return_counts=True)
    groups, max_keys = [], 0
    for request, rows_of in zip(
        present.tolist(), torch.split(order, per_request.tolist()), strict=True
    ):
        blocks = []
        for block in torch.split(rows_of, _ROW_BLOCK):
            last = last_key[block]
            keys = int(last.max()) + 1
            blocks.append(_Block(block.to(device), last.to(device), keys))
        top = max(b.keys for b in blocks)
        max_keys = max(max_keys, top)
        groups.append(_Group(starts[request], top, tuple(blocks)))
    max_k = int(kv_lens.max()) if kv_lens.numel() else 0
    flash = _flash_pages(kv_lens, requests, starts, device) if rows else None
    return _Schedule(tuple(groups), torch.arange(max_keys, device=device), flash, max_k)


def _flash_pages(
    kv_lens: Tensor, requests: Tensor, starts: Sequence[int], device: torch.device
) -> _FlashPages:
    """Page each request present in the call once, to the longest key prefix any of its
    sequences reads, in tensor operations (interleave has one sequence per query)."""
    present, inverse = torch.unique(requests, return_inverse=True)
    need = torch.zeros(present.numel(), dtype=torch.long)
    need.scatter_reduce_(0, inverse, kv_lens, reduce="amax", include_self=True)
    pages = torch.clamp((need + FLASH_PAGE - 1) // FLASH_PAGE, min=1)
    first_page = torch.cumsum(pages, 0) - pages
    offsets = segment_aranges(torch.zeros_like(pages), pages * FLASH_PAGE)
    owner = torch.repeat_interleave(torch.arange(present.numel()), pages * FLASH_PAGE)
    first_row = torch.tensor(starts, dtype=torch.long)[present]
    last = torch.clamp(need - 1, min=0)
    page_rows = first_row[owner] + torch.minimum(offsets, last[owner])
    width = int(pages.max())
    slots = torch.arange(width)
    table = first_page[inverse][:, None] + slots[None, :]
    table = torch.where(slots[None, :] < pages[inverse][:, None], table, 0)
    cu_k = torch.zeros(kv_lens.numel() + 1, dtype=torch.int32)
    torch.cumsum(kv_lens, 0, out=cu_k[1:])
    return _FlashPages(
        page_rows.to(device), table.to(device=device, dtype=torch.int32), cu_k.to(device)
    )


def _torch_attention(q: Tensor, kv: LayerKV, sched: _Schedule, scale: float) -> Tensor:
    """Per request, one masked SDPA per block of rows, with K/V of the request read (and, for
    half inputs, upcast to fp32) once and shared by the query heads of a group without a copy."""
    rows, heads, dim = q.shape
    kv_heads = kv.k.shape[1]
    group = heads // kv_heads
    compute = torch.float32 if q.dtype in _HALF else q.dtype
    out = q.new_zeros((rows, heads, kv.v.shape[2]))
    for g in sched.groups:
        k_all = kv.k[g.kv_start : g.kv_start + g.keys].to(compute).transpose(0, 1).unsqueeze(1)
        v_all = kv.v[g.kv_start : g.kv_start + g.keys].to(compute).transpose(0, 1).unsqueeze(1)
        for b in g.blocks:
            n = b.rows.shape[0]
            qq = q.index_select(0, b.rows).to(compute)
            qq = qq.view(n, kv_heads, group, dim).permute(1, 2, 0, 3)
            k = k_all[:, :, : b.keys].expand(kv_heads, group, b.keys, dim)
            v = v_all[:, :, : b.keys].expand(kv_heads, group, b.keys, v_all.shape[-1])
            mask = sched.key_positions[: b.keys][None, :] <= b.last[:, None]
            o = F.scaled_dot_product_attention(qq, k, v, attn_mask=mask, scale=scale)
            out.index_copy_(0, b.rows, o.permute(2, 0, 1, 3).reshape(n, heads, -1).to(out.dtype))
    return out


@functools.cache
def _flash_installed() -> bool:
    return torch.cuda.is_available() and importlib.util.find_spec("flash_attn") is not None


def _on_gpu(t: Tensor) -> bool:
    """Where FlashAttention can run; one function so a test can stand a CPU tensor in."""
    return t.is_cuda


def _flash_fits(q: Tensor, kv: LayerKV) -> bool:
    dims = {q.shape[2], kv.k.shape[2], kv.v.shape[2]}
    return (
        _on_gpu(q)
        and q.dtype in _HALF
        and kv.k.dtype == q.dtype
        and kv.v.dtype == q.dtype
        and len(dims) == 1
        and q.shape[2] <= 256
        and q.shape[0] > 0
    )


def _flash_attention(
    q: Tensor,
    kv: LayerKV,
    pages: _FlashPages,
    cu_seqlens_q: Tensor,
    max_seqlen_q: int,
    sched: _Schedule,
    scale: float,
) -> Tensor:
    """FlashAttention varlen over a paged cache (`block_table`, flash-attn >= 2.5), causal
    masking aligned bottom-right (>= 2.1): exactly 'the i-th of q queries sees keys
    [0, K - q + i]', whether a request has one sequence (zigzag) or one per query
    (interleave). Page rows, block table and key lengths come from the per-forward schedule:
    no host work here."""
    flash: Any = importlib.import_module("flash_attn")
    heads_k = kv.k.shape[1]
    k = kv.k.index_select(0, pages.page_rows).view(-1, FLASH_PAGE, heads_k, kv.k.shape[2])
    v = kv.v.index_select(0, pages.page_rows).view(-1, FLASH_PAGE, heads_k, kv.v.shape[2])
    out: Tensor = flash.flash_attn_varlen_func(
        q,
        k,
        v,
        cu_seqlens_q.to(dtype=torch.int32),
        pages.cu_k,
        max_seqlen_q,
        sched.max_k,
        softmax_scale=scale,
        causal=True,
        block_table=pages.block_table,
    )
    return out
