"""Zigzag (SGLang's former "in-seq-split"): each request cut into 2·cp blocks, rank r owning
blocks r and 2·cp - 1 - r, so that cheap early blocks pair with expensive late ones and causal
attention work is even across ranks."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from cp.base import CPStrategy
from cp.batch import AttnChunk, CPBatch, CPMetadata, plan_starts
from cp.kinds import CPStrategyKind


@dataclass(eq=False, kw_only=True)
class ZigzagMetadata(CPMetadata):
    """The plan plus each request's 2·cp block sizes."""

    block_sizes: tuple[tuple[int, ...], ...]


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
    ("next"); one attention call per half, one sequence per request in each."""
    blocks = [zigzag_blocks(n, cp_size) for n in extend_lens]
    starts = plan_starts(extend_lens)
    # bounds[b][j] = (first token of block j within request b, one past its last)
    bounds = [[(f, f + n) for f, n in zip(plan_starts(bs), bs, strict=True)] for bs in blocks]
    all_tokens, all_chunks = [], []
    requests = torch.arange(len(extend_lens))
    for r in range(cp_size):
        halves = (r, 2 * cp_size - 1 - r)
        pieces = [
            torch.arange(starts[b] + bounds[b][j][0], starts[b] + bounds[b][j][1])
            for j in halves
            for b in range(len(extend_lens))
        ]
        all_tokens.append(torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.long))
        chunks, row = [], 0
        for j in halves:
            q_lens = torch.tensor([blocks[b][j] for b in range(len(extend_lens))], dtype=torch.long)
            kv_lens = torch.tensor(
                [prefix_lens[b] + bounds[b][j][1] for b in range(len(extend_lens))],
                dtype=torch.long,
            )
            chunks.append(AttnChunk(row_start=row, q_lens=q_lens, kv_lens=kv_lens))
            row += int(q_lens.sum())
        all_chunks.append(tuple(chunks))
    return ZigzagMetadata(
        kind=CPStrategyKind.ZIGZAG,
        cp_size=cp_size,
        extend_lens=extend_lens,
        prefix_lens=prefix_lens,
        align=2 * cp_size,
        rank_tokens=tuple(all_tokens),
        chunks=tuple(all_chunks),
        seq_requests=tuple(requests for _ in range(cp_size)),
        block_sizes=tuple(tuple(bs) for bs in blocks),
    )


class ZigzagStrategy(CPStrategy):
    name = "zigzag"
    kind = CPStrategyKind.ZIGZAG

    def why_not(self, batch: CPBatch) -> str | None:
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
