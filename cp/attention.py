"""Exact causal attention in the varlen calling convention the strategies speak.

`run_attention` hands an `attn_fn(q, cu_seqlens_q, kv_lens, max_seqlen_q)` the rank's query rows
cut into sequences. The function reads keys from a `LayerKV`, and `seq_requests` tells it which
request each sequence belongs to: the identity for zigzag (one sequence per request and call),
one entry per query for interleave (every query is its own length-1 sequence). The default here
is plain torch and exact on CPU and GPU; FlashAttention's varlen kernel serves the calls it can
serve exactly (CUDA, fp16/bf16, each request at most once per call) when it is installed.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from cp.kinds import CPConfigError, CPShapeError
from cp.kvcache import LayerKV

AttnFn = Callable[[Tensor, Tensor, Tensor, int], Tensor]
"""attn_fn(q [rows, heads, dim], cu_seqlens_q [seqs + 1], kv_lens [seqs], max_seqlen_q) -> out."""

# Query rows per torch attention call. SDPA computes the masked-out part of a block too, so
# small blocks keep that waste near one block per request (and bound the [rows, keys] mask).
_ROW_BLOCK = 128
_HALF = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class _Seqs:
    """One call's sequences, validated, as CPU int64 tensors."""

    q_lens: Tensor
    kv_lens: Tensor
    requests: Tensor


def causal_attention_fn(
    kv: LayerKV,
    seq_requests: Tensor,
    *,
    softmax_scale: float | None = None,
    use_flash: bool | None = None,
) -> AttnFn:
    """Bind exact causal attention to a layer's KV cache.

    `use_flash`: None uses FlashAttention when it is importable and the tensors are on CUDA,
    True requires it to be installed (and still falls back to torch for calls it cannot serve
    exactly), False never uses it.
    """
    if softmax_scale is not None and not (
        isinstance(softmax_scale, (int, float)) and math.isfinite(softmax_scale)
    ):
        raise CPConfigError(f"softmax_scale must be a finite number or None; got {softmax_scale!r}")
    requests = seq_requests.to(device="cpu", dtype=torch.long)
    bad = torch.nonzero((requests < 0) | (requests >= kv.batch.bs)).flatten()
    if bad.numel():
        raise CPShapeError(
            f"seq_requests names request {int(requests[bad[0]])}; the batch has "
            f"{kv.batch.bs} requests"
        )
    if use_flash and not _flash_installed():
        raise CPConfigError("use_flash=True but flash_attn is not importable with CUDA here")
    flash_ok = use_flash is not False and kv.k.is_cuda and _flash_installed()
    repeats = torch.unique(requests).numel() != requests.numel()
    capacity = torch.tensor(kv.seq_lens, dtype=torch.long)[requests]

    def attn_fn(q: Tensor, cu_seqlens_q: Tensor, kv_lens: Tensor, max_seqlen_q: int) -> Tensor:
        seqs = _check_call(q, cu_seqlens_q, kv_lens, max_seqlen_q, requests, capacity, kv)
        scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
        if flash_ok and not repeats and _flash_fits(q, kv):
            return _flash_attention(q, kv, seqs, cu_seqlens_q, max_seqlen_q, scale)
        return _torch_attention(q, kv, seqs, scale)

    return attn_fn


def _check_call(
    q: Tensor,
    cu_seqlens_q: Tensor,
    kv_lens: Tensor,
    max_seqlen_q: int,
    requests: Tensor,
    capacity: Tensor,
    kv: LayerKV,
) -> _Seqs:
    if q.dim() != 3:
        raise CPShapeError(f"q must be [rows, heads, head_dim]; got {tuple(q.shape)}")
    heads, kv_heads = q.shape[1], kv.k.shape[1]
    if heads == 0 or q.shape[2] == 0:
        raise CPShapeError(f"q {tuple(q.shape)}: heads and head_dim must be >= 1")
    if heads % kv_heads:
        raise CPShapeError(f"{heads} query heads are not a multiple of {kv_heads} kv heads")
    if q.shape[2] != kv.k.shape[2]:
        raise CPShapeError(f"q head_dim {q.shape[2]} != key head_dim {kv.k.shape[2]}")
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


def _torch_attention(q: Tensor, kv: LayerKV, seqs: _Seqs, scale: float) -> Tensor:
    """Per request, one masked SDPA per block of rows; computes in fp32 for half inputs."""
    rows, heads, _ = q.shape
    group = heads // kv.k.shape[1]
    compute = torch.float32 if q.dtype in _HALF else q.dtype
    out = q.new_zeros((rows, heads, kv.v.shape[2]))
    if rows == 0:
        return out
    q_lens = seqs.q_lens
    seq_of_row = torch.repeat_interleave(torch.arange(q_lens.numel()), q_lens)
    first_row = torch.cumsum(q_lens, 0) - q_lens
    offset = torch.arange(rows) - first_row[seq_of_row]
    # Row i of a sequence of q queries with kv length K sees keys [0, K - q + i].
    last_key = seqs.kv_lens[seq_of_row] - q_lens[seq_of_row] + offset
    row_request = seqs.requests[seq_of_row]
    for request in torch.unique(row_request).tolist():
        start = kv.starts[request]
        for block in torch.split(torch.nonzero(row_request == request).flatten(), _ROW_BLOCK):
            last = last_key[block]
            keys = int(last.max()) + 1
            k = kv.k[start : start + keys].transpose(0, 1).repeat_interleave(group, 0)
            v = kv.v[start : start + keys].transpose(0, 1).repeat_interleave(group, 0)
            idx = block.to(q.device)
            qq = q.index_select(0, idx).transpose(0, 1)
            mask = torch.arange(keys, device=q.device)[None, :] <= last.to(q.device)[:, None]
            o = F.scaled_dot_product_attention(
                qq.to(compute), k.to(compute), v.to(compute), attn_mask=mask, scale=scale
            )
            out.index_copy_(0, idx, o.transpose(0, 1).to(out.dtype))
    return out


@functools.cache
def _flash_installed() -> bool:
    return torch.cuda.is_available() and importlib.util.find_spec("flash_attn") is not None


def _flash_fits(q: Tensor, kv: LayerKV) -> bool:
    dims = {q.shape[2], kv.k.shape[2], kv.v.shape[2]}
    return (
        q.is_cuda
        and q.dtype in _HALF
        and kv.k.dtype == q.dtype
        and kv.v.dtype == q.dtype
        and len(dims) == 1
        and q.shape[2] <= 256
        and q.shape[0] > 0
    )


def _flash_attention(
    q: Tensor, kv: LayerKV, seqs: _Seqs, cu_seqlens_q: Tensor, max_seqlen_q: int, scale: float
) -> Tensor:
    """FlashAttention varlen with causal masking aligned bottom-right (flash-attn >= 2.1), which
    is exactly 'the i-th of q queries sees keys [0, K - q + i]'."""
    flash: Any = importlib.import_module("flash_attn")
    kv_lens = seqs.kv_lens.tolist()
    key_rows = torch.cat(
        [
            torch.arange(kv.starts[r], kv.starts[r] + n)
            for r, n in zip(seqs.requests.tolist(), kv_lens, strict=True)
        ]
    ).to(q.device)
    cu_k = torch.tensor([0, *kv_lens], device=q.device).cumsum(0).to(torch.int32)
    out: Tensor = flash.flash_attn_varlen_func(
        q,
        kv.k.index_select(0, key_rows),
        kv.v.index_select(0, key_rows),
        cu_seqlens_q.to(device=q.device, dtype=torch.int32),
        cu_k,
        max_seqlen_q,
        max(kv_lens),
        softmax_scale=scale,
        causal=True,
    )
    return out
