"""Zigzag (SGLang's former "in-seq-split"): each request cut into 2·cp blocks, rank r owning
blocks r and 2·cp - 1 - r, so that cheap early blocks pair with expensive late ones and causal
attention work is even across ranks."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor

from meshsat.cp.base import CPStrategy
from meshsat.cp.batch import AttnChunk, CPBatch, CPMetadata, segment_aranges
from meshsat.cp.kinds import CPStrategyKind


@dataclass(eq=False, kw_only=True)
class ZigzagMetadata(CPMetadata):
    """The plan plus each request's 2·cp block sizes ([requests, 2·cp])."""

    block_size_table: Tensor

    @functools.cached_property
    def block_sizes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(row) for row in self.block_size_table.tolist())


def zigzag_blocks(length: int, cp_size: int) -> list[int]:
    """Sizes of the 2·cp contiguous blocks of one request; the first `length % 2cp` get one
    more token."""
    n_blocks = 2 * cp_size
    base, rem = divmod(length, n_blocks)
    return [base + 1 if j < rem else base for j in range(n_blocks)]


def zigzag_plan(
    cp_size: int, extend_lens: tuple[int, ...], prefix_lens: tuple[int, ...]
) -> ZigzagMetadata:
    """Rank r's rows: block r of every request ("prev"), then block 2cp-1-r of every request
    ("next"); one attention call per half, one sequence per request in each. Tensor operations
    over all requests and ranks at once."""
    n_blocks = 2 * cp_size
    ext = torch.tensor(extend_lens, dtype=torch.long)
    prefix = torch.tensor(prefix_lens, dtype=torch.long)
    base, rem = ext // n_blocks, ext % n_blocks
    j = torch.arange(n_blocks)
    sizes = base[:, None] + (j[None, :] < rem[:, None]).long()  # [B, 2cp]
    first = j[None, :] * base[:, None] + torch.minimum(j[None, :], rem[:, None])
    start = (torch.cumsum(ext, 0) - ext)[:, None] + first  # global first token of each block
    requests = torch.arange(len(extend_lens))
    ranks = torch.arange(cp_size)
    halves = torch.stack([ranks, n_blocks - 1 - ranks], 1)  # [cp, 2]: prev, next block
    half_sizes = sizes[:, halves].permute(1, 2, 0)  # [cp, 2, B]
    half_starts = start[:, halves].permute(1, 2, 0)
    kv_ends = prefix + (first[:, halves] + sizes[:, halves]).permute(1, 2, 0)
    tokens = segment_aranges(half_starts.reshape(-1), half_sizes.reshape(-1))
    per_rank = half_sizes.sum((1, 2))
    all_tokens = torch.split(tokens, per_rank.tolist())
    prev_rows = half_sizes[:, 0].sum(1).tolist()
    all_chunks = [
        (
            AttnChunk(row_start=0, q_lens=half_sizes[r, 0], kv_lens=kv_ends[r, 0]),
            AttnChunk(row_start=prev_rows[r], q_lens=half_sizes[r, 1], kv_lens=kv_ends[r, 1]),
        )
        for r in range(cp_size)
    ]
    return ZigzagMetadata(
        kind=CPStrategyKind.ZIGZAG,
        cp_size=cp_size,
        extend_lens=extend_lens,
        prefix_lens=prefix_lens,
        align=n_blocks,
        rank_tokens=tuple(all_tokens),
        chunks=tuple(all_chunks),
        seq_requests=tuple(requests for _ in range(cp_size)),
        block_size_table=sizes,
    )


class ZigzagStrategy(CPStrategy):
    name = "zigzag"
    kind = CPStrategyKind.ZIGZAG

    def why_not(self, batch: CPBatch) -> str | None:
        """SGLang's rule is "every extend length >= 2·cp", which an empty batch meets vacuously.
        Decided here (and for ring): an empty batch is refused all the same, since there is
        nothing to shard and the engine should run it without CP; the plan itself stays exact
        for it (no rows in, no rows out, the collectives still line up), as the tests check."""
        minimum = 2 * self.cp_size
        if self.cp_size < 2:
            return f"zigzag needs cp_size > 1; it is {self.cp_size}"
        if batch.bs == 0:
            return "zigzag needs at least one request; the batch is empty"
        for b, n in enumerate(batch.extend_lens):
            if n < minimum:
                return f"zigzag needs every extend length >= 2·cp = {minimum}; request {b} has {n}"
        return None

    def _plan(self, extend_lens: tuple[int, ...], prefix_lens: tuple[int, ...]) -> CPMetadata:
        return zigzag_plan(self.cp_size, extend_lens, prefix_lens)
