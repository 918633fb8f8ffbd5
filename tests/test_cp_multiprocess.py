"""Tier 3: real processes joined by torch.distributed (gloo on CPU; NCCL with
MESHSAT_CP_DEVICE=cuda), one spawn per world size running every check in its workers."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch.multiprocessing import ProcessRaisedException

from meshsat.cp import (
    CPBatch,
    CPCommError,
    CPConfigError,
    CPStrategy,
    InterleaveStrategy,
    LayerKV,
    ProcessGroupComm,
    RingStrategy,
    ZigzagStrategy,
    bind_cp_strategy,
    get_cp_strategy,
    reset_cp_strategy,
)
from tests.cp_helpers import (
    check_cp_attention,
    check_round_trip,
    cp_test_device,
    make_inputs,
    spawn_world,
)

pytestmark = pytest.mark.multiprocess

STRATEGIES: list[type[CPStrategy]] = [ZigzagStrategy, InterleaveStrategy, RingStrategy]


def round_trip_batches(world: int) -> list[CPBatch]:
    return [
        CPBatch((), ()),
        CPBatch((1,), (0,)),
        CPBatch((5, 0, 17), (3, 9, 0)),
        CPBatch((2 * world, 3, 40), (0, 1, 2)),
    ]


def exact_cases(world: int) -> list[tuple[CPBatch, int, int, int, torch.dtype]]:
    """(batch, heads, kv_heads, head_dim, dtype); all inside both strategies' can_apply."""
    return [
        (CPBatch((4 * world + 3, 2 * world, 37), (11, 0, 5)), 8, 2, 16, torch.float32),
        (CPBatch((61,), (0,)), 4, 4, 32, torch.float32),
        (CPBatch((50, 3 * world), (20, 7)), 4, 1, 64, torch.bfloat16),
    ]


def run_checks(strategy: CPStrategy, device: torch.device, salt: int) -> None:
    world = strategy.cp_size
    for i, batch in enumerate(round_trip_batches(world)):
        meta = strategy.build_metadata(batch.num_tokens, batch.seq_lens, batch.extend_lens)
        check_round_trip(strategy, batch.with_metadata(meta), seed=salt + i, device=device)
    for i, (batch, heads, kv_heads, dim, dtype) in enumerate(exact_cases(world)):
        x = make_inputs(
            batch,
            heads=heads,
            kv_heads=kv_heads,
            dim=dim,
            dtype=dtype,
            device=device,
            seed=salt + i,
        )
        check_cp_attention(strategy, strategy.prepare(batch), x)
    # outside can_apply (requests shorter than 2·cp) the plan stays exact
    short = CPBatch((3, 1, 2 * world + 1), (2, 0, 4))
    x = make_inputs(
        short, heads=2, kv_heads=1, dim=8, dtype=torch.float32, device=device, seed=salt
    )
    meta = strategy.build_metadata(short.num_tokens, short.seq_lens, short.extend_lens)
    check_cp_attention(strategy, short.with_metadata(meta), x)


def world_worker(rank: int, world: int, device: torch.device) -> None:
    comm = ProcessGroupComm()
    assert (comm.rank, comm.world_size) == (rank, world) == (dist.get_rank(), dist.get_world_size())
    counts = [r + 1 for r in range(world)]
    mine = torch.full((rank + 1, 2), float(rank), device=device)
    got = comm.all_gather_padded(mine, counts, physical=world)
    expected = torch.cat([torch.full((r + 1, 2), float(r)) for r in range(world)])
    assert torch.equal(got.cpu(), expected)

    for cls in STRATEGIES:
        run_checks(cls(world, comm=comm), device, salt=10)

    # the process-wide binding, on the default (world) group and on an explicit group
    reset_cp_strategy()
    bound = bind_cp_strategy(enable_prefill_cp=True, cp_size=world, cp_strategy="zigzag")
    assert isinstance(bound, ZigzagStrategy) and bound.cp_rank == rank
    check_round_trip(bound, bound.prepare(CPBatch((4 * world,), (1,))), seed=1, device=device)
    bind_cp_strategy(
        enable_prefill_cp=True,
        cp_size=world,
        cp_strategy="interleave",
        comm_or_group=dist.group.WORLD,
    )
    rebound = get_cp_strategy()
    assert isinstance(rebound, InterleaveStrategy) and rebound.cp_rank == rank
    check_round_trip(rebound, rebound.prepare(CPBatch((7, 5), (0, 2))), seed=2, device=device)
    reset_cp_strategy()

    if world == 4:
        subgroup_checks(rank, device)


def subgroup_checks(rank: int, device: torch.device) -> None:
    """Two attention-CP groups {0, 2} and {1, 3} side by side with different batches: the rank
    comes from the bound group, and no group sees the other's tokens."""
    groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    mine, other = groups[rank % 2], groups[1 - rank % 2]
    comm = ProcessGroupComm(mine)
    assert (comm.rank, comm.world_size) == (rank // 2, 2)
    with pytest.raises(CPConfigError, match=f"global rank {rank} is not a member"):
        ProcessGroupComm(other)
    for cls in STRATEGIES:
        run_checks(cls(2, comm=comm), device, salt=100 * (rank % 2 + 1))
    bound = bind_cp_strategy(
        enable_prefill_cp=True, cp_size=2, cp_strategy="interleave", comm_or_group=mine
    )
    assert bound is not None and bound.cp_rank == rank // 2
    reset_cp_strategy()


@pytest.mark.parametrize("world", [2, 3, 4])
def test_strategies_over_real_process_groups(world: int, tmp_path: object) -> None:
    spawn_world(world, world_worker, str(tmp_path), cp_test_device())


def wrong_oracle_worker(rank: int, world: int, device: torch.device) -> None:
    """Compares CP attention with an oracle that ignores the prefix: must fail on every rank."""
    strategy = ZigzagStrategy(world, comm=ProcessGroupComm())
    batch = strategy.prepare(CPBatch((12,), (5,)))
    x = make_inputs(batch, heads=2, kv_heads=2, dim=8, dtype=torch.float32, device=device, seed=0)
    no_prefix = CPBatch((12,), (0,))
    wrong = make_inputs(
        no_prefix, heads=2, kv_heads=2, dim=8, dtype=torch.float32, device=device, seed=0
    )
    wrong.q, wrong.k, wrong.v = x.q, x.k, x.v
    check_cp_attention(strategy, batch, x, expected=wrong.oracle(no_prefix))


def test_a_failing_worker_fails_the_test_with_its_error(tmp_path: object) -> None:
    with pytest.raises(ProcessRaisedException, match="Tensor-likes are not close"):
        spawn_world(2, wrong_oracle_worker, str(tmp_path), torch.device("cpu"))


def disagreeing_ranks_worker(rank: int, world: int, device: torch.device) -> None:
    """Ranks that disagree on a collective's shape, dtype or the forward's lengths raise
    `CPCommError` on every rank, naming ranks and values, and the group stays usable: gloo
    used to abort one process (uncatchable) while the other read misplaced bytes."""
    comm = ProcessGroupComm()
    zigzag = ZigzagStrategy(world, comm=comm)
    batch = zigzag.prepare(CPBatch((10,), (0,)))
    physical = zigzag.metadata(batch).physical
    with pytest.raises(CPCommError, match=r"shape: \(8, 4\) on rank\(s\) \[0\]; \(8, 5\)"):
        zigzag.gather_hidden_states(torch.zeros(physical, 4 + rank), batch)
    dtype = (torch.float32, torch.bfloat16)[rank]
    with pytest.raises(CPCommError, match=r"dtype: torch.float32 on rank\(s\) \[0\]; torch.bf"):
        zigzag.gather_hidden_states(torch.zeros(physical, 4, dtype=dtype), batch)
    # 10 and 9 tokens pad to the same 8 rows per rank: only the plans tell them apart
    other = zigzag.prepare(CPBatch((10 - rank,), (0,)))
    assert zigzag.metadata(other).physical == physical
    with pytest.raises(CPCommError, match=r"batch: zigzag cp 2, 1 request\(s\), 10 tokens"):
        zigzag.gather_hidden_states(torch.zeros(physical, 4), other)
    # ring: shards of another V head size on each rank, refused before any transfer
    ring = RingStrategy(world, comm=comm)
    rb = ring.prepare(CPBatch((12,), (0,)))
    rows = ring.metadata(rb).physical
    kv = LayerKV.from_prefix(rb, torch.zeros(0, 1, 8), torch.zeros(0, 1, 8 + rank))
    ring.materialize_full_kv(rb, kv, torch.zeros(rows, 1, 8), torch.zeros(rows, 1, 8 + rank))
    with pytest.raises(CPCommError, match=r"ring_pass_start: .* tensor 1's shape"):
        ring.run_attention(torch.zeros(rows, 2, 8), rb, "cpu", ring.default_attn_fn(rb, kv))
    x = torch.arange(40.0).view(10, 4)
    assert torch.equal(zigzag.gather_hidden_states(zigzag.shard_hidden_states(x, batch), batch), x)
    with pytest.raises(CPConfigError, match="check must be True, False or None"):
        ProcessGroupComm(check="yes")  # type: ignore[arg-type]


def test_ranks_that_disagree_raise_a_comm_error_on_every_rank(tmp_path: object) -> None:
    spawn_world(2, disagreeing_ranks_worker, str(tmp_path), torch.device("cpu"), timeout_s=20)
