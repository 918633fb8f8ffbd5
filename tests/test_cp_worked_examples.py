"""The worked examples of shared/spec/cp.md, digit for digit."""

from __future__ import annotations

import torch

from meshsat.cp import (
    CPBatch,
    CPMetadata,
    InterleaveStrategy,
    ZigzagStrategy,
    interleave_plan,
    zigzag_blocks,
    zigzag_plan,
)
from tests.cp_helpers import LocalSimComm, check_round_trip, run_local_ranks


def tokens(meta: CPMetadata, rank: int) -> list[int]:
    return [int(t) for t in meta.rank_tokens[rank]]


def test_zigzag_one_request_cp2_len10() -> None:
    assert zigzag_blocks(10, 2) == [3, 3, 2, 2]
    meta = zigzag_plan(2, (10,), (0,))
    assert meta.block_sizes == ((3, 3, 2, 2),)
    assert tokens(meta, 0) == [0, 1, 2, 8, 9]
    assert tokens(meta, 1) == [3, 4, 5, 6, 7]
    assert meta.kv_lens(0) == [[3], [10]]  # prev, next
    assert meta.kv_lens(1) == [[6], [8]]
    assert meta.perm.tolist() == [0, 1, 2, 8, 9, 3, 4, 5, 6, 7]  # rank-major gather stream
    stream = meta.perm
    assert stream[torch.argsort(stream)].tolist() == list(range(10))
    assert meta.physical == 8
    assert meta.counts == (5, 5)


def test_zigzag_two_requests_cp2() -> None:
    meta = zigzag_plan(2, (10, 7), (0, 0))
    assert tokens(meta, 0) == [0, 1, 2, 10, 11, 8, 9, 16]


def test_interleave_one_request_cp2_len10() -> None:
    meta = interleave_plan(2, (10,), (0,))
    assert tokens(meta, 0) == [0, 2, 4, 6, 8]
    assert meta.kv_lens(0) == [[1, 3, 5, 7, 9]]
    assert tokens(meta, 1) == [1, 3, 5, 7, 9]
    assert meta.kv_lens(1) == [[2, 4, 6, 8, 10]]
    assert meta.physical == 6


def test_interleave_two_requests_cp2() -> None:
    meta = interleave_plan(2, (5, 3), (0, 0))
    assert tokens(meta, 0) == [0, 2, 4, 6]
    assert meta.request_counts[0] == (3, 1)
    assert meta.kv_lens(0) == [[1, 3, 5, 2]]
    assert tokens(meta, 1) == [1, 3, 5, 7]
    assert meta.request_counts[1] == (2, 2)

    def per_request(comm: LocalSimComm) -> tuple[list[int], list[int], list[int], list[int]]:
        counts, counts_t, kept, kept_t = InterleaveStrategy(2, comm=comm).shard_per_request(
            [5, 3], torch.tensor([5, 3], dtype=torch.int32)
        )
        assert counts_t.dtype == torch.int32
        return counts, counts_t.tolist(), kept, kept_t.tolist()

    assert run_local_ranks(2, per_request) == [
        ([3, 1], [3, 1], [0, 1], [0, 1]),
        ([2, 2], [2, 2], [0, 1], [0, 1]),
    ]


def test_worked_examples_round_trip_and_padding_through_strategies() -> None:
    """The shards the strategies produce are docs/cp.md's rows followed by zero padding."""

    def shards(comm: LocalSimComm) -> list[list[float]]:
        out = []
        for strategy in (ZigzagStrategy(2, comm=comm), InterleaveStrategy(2, comm=comm)):
            batch = strategy.prepare(CPBatch((10,), (0,)))
            x = torch.arange(10, dtype=torch.float32) + 100
            out.append(strategy.shard_hidden_states(x, batch).tolist())
            check_round_trip(strategy, batch, seed=0, device=torch.device("cpu"))
        return out

    rank0, rank1 = run_local_ranks(2, shards)
    assert rank0 == [[100, 101, 102, 108, 109, 0, 0, 0], [100, 102, 104, 106, 108, 0]]
    assert rank1 == [[103, 104, 105, 106, 107, 0, 0, 0], [101, 103, 105, 107, 109, 0]]
