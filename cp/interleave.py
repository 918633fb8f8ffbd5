"""Interleave (SGLang's former "round-robin-split"): global token t of the flattened batch goes
to rank t % cp. Every rank sees every part of every request, so causal work is even without any
per-request cutting; the price is that each query is its own attention sequence."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor

from meshsat.cp.base import CPStrategy
from meshsat.cp.batch import (
    AttnChunk,
    CPBatch,
    CPMetadata,
    as_lengths,
    plan_starts,
    round_up,
    segment_ids,
)
from meshsat.cp.kinds import CPShapeError, CPStrategyKind


@dataclass(eq=False, kw_only=True)
class InterleaveMetadata(CPMetadata):
    """The plan plus, per rank, how many of its queries fall in each request ([cp, B])."""

    request_count_table: Tensor

    @functools.cached_property
    def request_counts(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(row) for row in self.request_count_table.tolist())


def interleave_plan(
    cp_size: int, extend_lens: tuple[int, ...], prefix_lens: tuple[int, ...]
) -> InterleaveMetadata:
    """Rank r's rows: tokens r, r + cp, r + 2cp, ...; the query of token t in request b is a
    length-1 sequence with kv length prefix[b] + (t - start[b]) + 1. Arithmetic on the lengths:
    one request id per token (a scatter and a cumsum), strided views per rank, the gather index
    (t % cp) * physical + t // cp as one broadcast sum, and the per-rank request counts in closed
    form; no per-request loop and no sort."""
    total = sum(extend_lens)
    ext = torch.tensor(extend_lens, dtype=torch.long)
    start = torch.cumsum(ext, 0) - ext
    request = segment_ids(ext)
    tokens_all = torch.arange(total)
    # kv length = t + 1 + (prefix - start) of the token's request
    kv_len = (torch.tensor(prefix_lens, dtype=torch.long) - start + 1)[request] + tokens_all
    most = -(-total // cp_size)
    physical = round_up(most, cp_size)  # CPMetadata's rule: the most rows, aligned
    # token t = i * cp + r sits in row i of rank r: (r, i) laid out row-major, no division
    grid = torch.arange(cp_size)[None, :] * physical + torch.arange(most)[:, None]
    gather = grid.reshape(-1)[:total]
    tokens, chunks, seq_requests = [], [], []
    for r in range(cp_size):
        mine = tokens_all[r::cp_size]
        tokens.append(mine)
        chunks.append(
            (AttnChunk(row_start=0, q_lens=torch.ones_like(mine), kv_lens=kv_len[r::cp_size]),)
        )
        seq_requests.append(request[r::cp_size])
    return InterleaveMetadata(
        kind=CPStrategyKind.INTERLEAVE,
        cp_size=cp_size,
        extend_lens=extend_lens,
        prefix_lens=prefix_lens,
        align=cp_size,
        rank_tokens=tuple(tokens),
        chunks=tuple(chunks),
        seq_requests=tuple(seq_requests),
        known_gather=gather,
        request_count_table=request_count_table(start, ext, cp_size),
    )


def request_count_table(start: Tensor, ext: Tensor, cp_size: int) -> Tensor:
    """[cp, B]: how many of request b's tokens land on rank r, the count of t = r (mod cp) in
    [start, start + len), in closed form over all ranks and requests at once."""
    ranks = torch.arange(cp_size)[:, None]

    def below(x: Tensor) -> Tensor:  # tokens t < x with t = rank (mod cp)
        return torch.div(x[None, :] - ranks + cp_size - 1, cp_size, rounding_mode="floor")

    return below(start + ext) - below(start)


def rank_request_counts(extend_lens: tuple[int, ...], cp_size: int, rank: int) -> list[int]:
    """Per request, how many of its tokens land on `rank` under the global t % cp rule: the
    count of t ≡ rank in [start, start + len), carried across requests through `start`."""

    def below(x: int) -> int:  # tokens t < x with t ≡ rank (mod cp)
        return (x - rank + cp_size - 1) // cp_size

    starts = plan_starts(extend_lens)
    return [below(s + n) - below(s) for s, n in zip(starts, extend_lens, strict=True)]


class InterleaveStrategy(CPStrategy):
    name = "interleave"
    kind = CPStrategyKind.INTERLEAVE

    def why_not(self, batch: CPBatch) -> str | None:
        if self.cp_size < 2:
            return f"interleave needs cp_size > 1; it is {self.cp_size}"
        if batch.num_tokens < self.cp_size:
            return (
                f"interleave needs at least cp = {self.cp_size} tokens so that every rank has "
                f"one; the batch has {batch.num_tokens}"
            )
        return None

    def _plan(self, extend_lens: tuple[int, ...], prefix_lens: tuple[int, ...]) -> CPMetadata:
        return interleave_plan(self.cp_size, extend_lens, prefix_lens)

    def shard_per_request(
        self, extend_seqs_cpu: list[int], extend_seqs: Tensor
    ) -> tuple[list[int], Tensor, list[int], Tensor]:
        """This rank's query count per request, dropping requests that get none; returns
        (counts, counts on `extend_seqs`' device, kept request indices, the same on device)."""
        lens = as_lengths("extend_seqs_cpu", extend_seqs_cpu)
        if not isinstance(extend_seqs, Tensor):
            raise CPShapeError(
                f"extend_seqs must be a tensor (the lengths on the device); got "
                f"{type(extend_seqs).__name__}"
            )
        if extend_seqs.dim() != 1 or extend_seqs.numel() != len(lens):
            raise CPShapeError(
                f"extend_seqs {tuple(extend_seqs.shape)} must be 1-D with one entry per request "
                f"({len(lens)})"
            )
        if not torch.equal(extend_seqs.cpu().long(), torch.tensor(lens, dtype=torch.long)):
            raise CPShapeError(
                f"extend_seqs {extend_seqs.tolist()} disagrees with extend_seqs_cpu {list(lens)}"
            )
        per_request = rank_request_counts(lens, self.cp_size, self.cp_rank)
        kept = [b for b, n in enumerate(per_request) if n > 0]
        counts = [per_request[b] for b in kept]
        device = extend_seqs.device
        return (
            counts,
            torch.tensor(counts, dtype=extend_seqs.dtype, device=device),
            kept,
            torch.tensor(kept, dtype=torch.long, device=device),
        )
