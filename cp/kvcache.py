"""One layer's key/value cache for the requests of a forward.

The cached prefix of a request (a radix-cache hit) is already here before the forward; the forward
writes its own tokens' K and V after it (`materialize_full_kv`). Attention then reads keys
[0, kv_len) of a request. Rows not yet written are NaN, so reading them poisons the output
instead of silently using zeros.
"""

from __future__ import annotations

import torch
from torch import Tensor

from meshsat.cp.batch import CPBatch, CPMetadata, plan_starts, segment_aranges
from meshsat.cp.kinds import CPShapeError


class LayerKV:
    """K and V of shape [sum(seq_lens), kv_heads, head_dim]; request b owns rows
    [starts[b], starts[b] + seq_lens[b]): its prefix, then its extend tokens."""

    def __init__(self, batch: CPBatch, k: Tensor, v: Tensor) -> None:
        rows = sum(batch.seq_lens)
        if k.dim() != 3 or v.dim() != 3:
            raise CPShapeError(
                f"K and V must be [tokens, kv_heads, head_dim]; got {tuple(k.shape)} and "
                f"{tuple(v.shape)}"
            )
        if 0 in (k.shape[1], k.shape[2], v.shape[2]):
            raise CPShapeError(
                f"K {tuple(k.shape)} / V {tuple(v.shape)}: kv_heads and head_dim must be >= 1"
            )
        if k.shape[0] != rows or v.shape[0] != rows or k.shape[1] != v.shape[1]:
            raise CPShapeError(
                f"K {tuple(k.shape)} / V {tuple(v.shape)} do not cover the batch's "
                f"{rows} = sum(prefix + extend) rows with one kv-head count"
            )
        self.batch = batch
        self.k = k
        self.v = v
        self.starts = tuple(plan_starts(batch.seq_lens))
        self.seq_lens = batch.seq_lens
        first = torch.tensor(self.starts, dtype=torch.long) + torch.tensor(
            batch.prefix_lens, dtype=torch.long
        )
        sizes = torch.tensor(batch.extend_lens, dtype=torch.long)
        self._extend_rows = segment_aranges(first, sizes)

    @property
    def extend_rows(self) -> Tensor:
        """The cache rows of this forward's tokens, in flattened token order (host tensor)."""
        return self._extend_rows

    def extend_rows_on(self, device: torch.device, meta: CPMetadata) -> Tensor:
        """`extend_rows` on `device`, copied once per forward and shared by every layer's
        cache of the same lengths (kept in the plan's per-forward device state), so a layer's
        KV write moves nothing from the host."""
        if meta.extend_lens != self.batch.extend_lens or meta.prefix_lens != self.batch.prefix_lens:
            meta.check_lengths(self.batch.extend_lens, self.batch.prefix_lens)
        rows: Tensor = meta.memo("kv-extend-rows", 0, device, lambda: self._extend_rows.to(device))
        return rows

    @classmethod
    def from_prefix(cls, batch: CPBatch, prefix_k: Tensor, prefix_v: Tensor) -> LayerKV:
        """A cache holding the requests' cached prefixes (rows flattened request after request)
        with room, NaN-filled, for this forward's tokens."""
        n_prefix = sum(batch.prefix_lens)
        if prefix_k.shape[0] != n_prefix or prefix_v.shape[0] != n_prefix:
            raise CPShapeError(
                f"prefix K/V have {prefix_k.shape[0]}/{prefix_v.shape[0]} rows; the batch's "
                f"prefixes {list(batch.prefix_lens)} sum to {n_prefix}"
            )
        rows = sum(batch.seq_lens)
        k = _unwritten((rows, *prefix_k.shape[1:]), prefix_k)
        v = _unwritten((rows, *prefix_v.shape[1:]), prefix_v)
        src = 0
        for s, p in zip(plan_starts(batch.seq_lens), batch.prefix_lens, strict=True):
            k[s : s + p] = prefix_k[src : src + p]
            v[s : s + p] = prefix_v[src : src + p]
            src += p
        return cls(batch, k, v)

    def write_extend(self, k: Tensor, v: Tensor, rows: Tensor | None = None) -> None:
        """Store this forward's K and V, given in flattened token order; `rows` is
        `extend_rows` already on the cache's device (`extend_rows_on`), else it is copied."""
        n = self.batch.num_tokens
        if k.shape != (n, *self.k.shape[1:]) or v.shape != (n, *self.v.shape[1:]):
            raise CPShapeError(
                f"extend K/V are {tuple(k.shape)}/{tuple(v.shape)}; this cache takes "
                f"{(n, *self.k.shape[1:])}/{(n, *self.v.shape[1:])} for the batch's {n} tokens"
            )
        if rows is None:
            rows = self._extend_rows.to(self.k.device)
        self.k.index_copy_(0, rows, k.to(self.k.dtype))
        self.v.index_copy_(0, rows, v.to(self.v.dtype))


def _unwritten(shape: tuple[int, ...], like: Tensor) -> Tensor:
    if like.dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=like.dtype, device=like.device)
    return torch.zeros(shape, dtype=like.dtype, device=like.device)
