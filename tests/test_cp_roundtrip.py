"""Tier 2 (one process, every rank a thread): gather of all ranks' shards is the input, exactly,
for random batches; and the token-path methods refuse what they cannot do correctly."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from meshsat.cp import (
    CPBatch,
    CPBatchError,
    CPShapeError,
    CPStrategy,
    InterleaveStrategy,
    ZigzagStrategy,
)
from tests.cp_helpers import (
    LocalSimComm,
    check_round_trip,
    cp_batches,
    local_sim_comms,
    run_local_ranks,
)

STRATEGIES: list[type[CPStrategy]] = [ZigzagStrategy, InterleaveStrategy]


@settings(max_examples=60, deadline=None)
@given(cp_batches(), st.sampled_from(STRATEGIES), st.integers(0, 2**31 - 1))
def test_gather_of_shards_is_the_input(
    case: tuple[int, CPBatch], cls: type[CPStrategy], seed: int
) -> None:
    cp, batch = case

    def rank(comm: LocalSimComm) -> None:
        strategy = cls(cp, comm=comm)
        prepared = batch.with_metadata(
            strategy.build_metadata(batch.num_tokens, batch.seq_lens, batch.extend_lens)
        )
        check_round_trip(strategy, prepared, seed, torch.device("cpu"))

    run_local_ranks(cp, rank)


def test_shards_of_all_ranks_hold_every_token_once_and_pad_with_zeros() -> None:
    batch = CPBatch((9, 14, 6), (0, 3, 1))
    x = torch.arange(1, batch.num_tokens + 1, dtype=torch.float64)
    for cls in STRATEGIES:

        def shard(comm: LocalSimComm, cls: type[CPStrategy] = cls) -> torch.Tensor:
            strategy = cls(3, comm=comm)
            return strategy.shard_hidden_states(x, strategy.prepare(batch))

        shards = run_local_ranks(3, shard)
        assert len({s.numel() for s in shards}) == 1  # same physical rows everywhere
        values = torch.cat(shards)
        assert sorted(values[values != 0].tolist()) == x.tolist()


def rank0(cls: type[CPStrategy], cp: int = 2) -> CPStrategy:
    """Rank 0 of a simulated group, for calls that fail before any collective."""
    return cls(cp, comm=local_sim_comms(cp)[0])


@pytest.mark.parametrize("cls", STRATEGIES)
def test_shape_errors_name_the_numbers(cls: type[CPStrategy]) -> None:
    strategy = rank0(cls)
    batch = strategy.prepare(CPBatch((10,), (0,)))
    with pytest.raises(CPShapeError, match="10 tokens along dim 0"):
        strategy.shard_hidden_states(torch.zeros(11, 4), batch)
    with pytest.raises(CPShapeError, match="10 tokens along the last dim"):
        strategy.shard_position_ids(torch.zeros(3, 9), batch)
    physical = strategy.metadata(batch).physical
    with pytest.raises(CPShapeError, match=f"{physical} physical rows"):
        strategy.gather_hidden_states(torch.zeros(physical - 1, 4), batch)
    with pytest.raises(CPShapeError, match=f"{physical} physical rows"):
        strategy.run_attention(torch.zeros(physical + 1, 2, 4), batch, "cpu", lambda *a: a[0])


@pytest.mark.parametrize("cls", STRATEGIES)
def test_metadata_must_exist_and_belong_to_the_strategy(cls: type[CPStrategy]) -> None:
    strategy = rank0(cls)
    bare = CPBatch((10,), (0,))
    with pytest.raises(CPBatchError, match="no CP metadata"):
        strategy.shard_hidden_states(torch.zeros(10), bare)
    other_kind = rank0(InterleaveStrategy if cls is ZigzagStrategy else ZigzagStrategy)
    with pytest.raises(CPBatchError, match="was given metadata built by"):
        strategy.shard_hidden_states(torch.zeros(10), other_kind.prepare(bare))
    other_size = rank0(cls, cp=4).build_metadata(10, [10])
    with pytest.raises(CPBatchError, match=r"cp_size 2 was given metadata built by .* cp_size 4"):
        strategy.shard_hidden_states(torch.zeros(10), bare.with_metadata(other_size))
    with pytest.raises(CPBatchError, match=r"not for extend \[9\]"):
        CPBatch((9,), (0,), metadata=strategy.build_metadata(10, [10]))
