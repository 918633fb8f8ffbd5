"""The communicator interface: padded all-gather semantics, the simulated group's failure modes,
and the binding checks between a strategy and its group."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from meshsat.cp import (
    CPCommError,
    CPConfigError,
    CPShapeError,
    InterleaveStrategy,
    ProcessGroupComm,
    SoloComm,
    ZigzagStrategy,
)
from tests.cp_helpers import LocalSimComm, local_sim_comms, run_local_ranks


def test_all_gather_padded_cuts_each_rank_to_its_real_rows() -> None:
    counts = [2, 0, 3]

    def rank(comm: LocalSimComm) -> torch.Tensor:
        real = torch.full((counts[comm.rank], 2), float(comm.rank + 1))
        if comm.rank == 2:  # a rank may hand over rows already padded to `physical`
            real = torch.cat([real, torch.zeros(1, 2)])
        return comm.all_gather_padded(real, counts, physical=4)

    expected = torch.tensor([[1.0, 1], [1, 1], [3, 3], [3, 3], [3, 3]])
    for got in run_local_ranks(3, rank):
        assert torch.equal(got, expected)


def test_all_gather_padded_refuses_inconsistent_counts() -> None:
    comm = SoloComm()
    with pytest.raises(CPShapeError, match="2 row counts for a group of 1 ranks"):
        comm.all_gather_padded(torch.zeros(1), [1, 1], physical=1)
    with pytest.raises(CPShapeError, match="physical rows 2 < largest real count 3"):
        comm.all_gather_padded(torch.zeros(3), [3], physical=2)
    with pytest.raises(CPShapeError, match="rank 0 holds 2 rows; expected its 1 real rows or 4"):
        comm.all_gather_padded(torch.zeros(2), [1], physical=4)


def test_simulated_gather_with_mismatched_shapes_fails_on_every_rank() -> None:
    def rank(comm: LocalSimComm) -> torch.Tensor:
        return comm.all_gather(torch.zeros(comm.rank + 1))

    with pytest.raises(CPCommError, match=r"rank 0: \(1,\) torch.float32, rank 1: \(2,\)"):
        run_local_ranks(2, rank)


def test_a_failing_simulated_rank_raises_its_own_error_and_frees_its_peers() -> None:
    def rank(comm: LocalSimComm) -> torch.Tensor:
        if comm.rank == 1:
            raise KeyError("rank 1 broke")
        return comm.all_gather(torch.zeros(1))  # would wait forever without the abort

    with pytest.raises(KeyError, match="rank 1 broke"):
        run_local_ranks(3, rank, timeout_s=30)


def test_strategy_and_group_sizes_must_agree() -> None:
    with pytest.raises(CPConfigError, match="cp_size 4 but the communicator's group has 2 ranks"):
        ZigzagStrategy(4, comm=local_sim_comms(2)[0])
    with pytest.raises(CPConfigError, match="cp_size must be an int >= 1, got 0"):
        InterleaveStrategy(0)
    assert ZigzagStrategy(1).cp_rank == 0  # cp 1 needs no group


@pytest.mark.skipif(dist.is_initialized(), reason="needs a process without a default group")
def test_without_a_process_group_a_real_group_is_an_error() -> None:
    with pytest.raises(CPConfigError, match=r"torch\.distributed to be initialised"):
        ProcessGroupComm()
    strategy = ZigzagStrategy(2)  # constructed as SGLang constructs it, with no group
    with pytest.raises(CPConfigError, match="found at first use has 1 rank"):
        strategy.cp_rank  # noqa: B018  # the first use that needs the group
