"""Tier 2 (one process, every rank a thread): CP attention equals single-process full causal
attention over the same tokens, and the policy (`can_apply` / `prepare`) says no clearly."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from meshsat.cp import (
    CPBatch,
    CPBatchError,
    CPNotApplicableError,
    CPStrategy,
    InterleaveStrategy,
    ZigzagStrategy,
)
from tests.cp_helpers import (
    LocalSimComm,
    check_cp_attention,
    cp_batches,
    cp_test_device,
    make_inputs,
    run_local_ranks,
)

STRATEGIES: list[type[CPStrategy]] = [ZigzagStrategy, InterleaveStrategy]
HEADS = [(4, 4), (4, 2), (6, 3), (2, 1)]


@settings(max_examples=40, deadline=None)
@given(
    cp_batches(max_extend=40),
    st.sampled_from(STRATEGIES),
    st.sampled_from(HEADS),
    st.sampled_from([8, 16]),
    st.integers(0, 2**31 - 1),
)
def test_cp_attention_equals_full_causal_attention_fp32(
    case: tuple[int, CPBatch],
    cls: type[CPStrategy],
    heads: tuple[int, int],
    dim: int,
    seed: int,
) -> None:
    """Any lengths (also outside can_apply), prefixes, GQA, several requests, any cp size."""
    cp, batch = case
    device = cp_test_device()
    x = make_inputs(
        batch,
        heads=heads[0],
        kv_heads=heads[1],
        dim=dim,
        dtype=torch.float32,
        device=device,
        seed=seed,
    )
    expected = x.oracle(batch)

    def rank(comm: LocalSimComm) -> None:
        strategy = cls(cp, comm=comm)
        meta = strategy.build_metadata(batch.num_tokens, batch.seq_lens, batch.extend_lens)
        check_cp_attention(strategy, batch.with_metadata(meta), x, expected)

    run_local_ranks(cp, rank)


@pytest.mark.parametrize("cls", STRATEGIES)
@pytest.mark.parametrize(
    ("cp", "dtype"), [(2, torch.bfloat16), (3, torch.bfloat16), (6, torch.float16)]
)
def test_cp_attention_half_precision(cls: type[CPStrategy], cp: int, dtype: torch.dtype) -> None:
    device = cp_test_device()
    batch = CPBatch((70, 2 * cp, 45), (30, 0, 12))
    x = make_inputs(batch, heads=8, kv_heads=2, dim=64, dtype=dtype, device=device, seed=cp)
    expected = x.oracle(batch)

    def rank(comm: LocalSimComm) -> None:
        strategy = cls(cp, comm=comm)
        check_cp_attention(strategy, strategy.prepare(batch), x, expected)

    run_local_ranks(cp, rank)


def test_run_attention_calls_attn_fn_with_the_spec_chunks() -> None:
    """Zigzag cp 2, L 10: rank 0 attends prev (3 rows, kv 3) then next (2 rows, kv 10); rank 1
    prev (3, kv 6) then next (2, kv 8). Interleave: one call of length-1 sequences."""
    calls: dict[tuple[str, int], list[tuple[list[int], list[int], int, torch.dtype]]] = {}

    def rank(comm: LocalSimComm) -> None:
        for strategy in (ZigzagStrategy(2, comm=comm), InterleaveStrategy(2, comm=comm)):
            batch = strategy.prepare(CPBatch((10,), (0,)))
            log = calls.setdefault((strategy.name, comm.rank), [])

            def attn_fn(
                q: torch.Tensor,
                cu: torch.Tensor,
                kv_lens: torch.Tensor,
                max_q: int,
                log: list[tuple[list[int], list[int], int, torch.dtype]] = log,
            ) -> torch.Tensor:
                log.append((cu.tolist(), kv_lens.tolist(), max_q, cu.dtype))
                return q + 1

            q = torch.zeros(strategy.metadata(batch).physical, 1, 1)
            out = strategy.run_attention(q, batch, "cpu", attn_fn)
            real = strategy.metadata(batch).counts[comm.rank]
            assert out[:real].eq(1).all() and out[real:].eq(0).all()

    run_local_ranks(2, rank)
    i32 = torch.int32
    assert calls[("zigzag", 0)] == [([0, 3], [3], 3, i32), ([0, 2], [10], 2, i32)]
    assert calls[("zigzag", 1)] == [([0, 3], [6], 3, i32), ([0, 2], [8], 2, i32)]
    assert calls[("interleave", 0)] == [([0, 1, 2, 3, 4, 5], [1, 3, 5, 7, 9], 1, i32)]
    assert calls[("interleave", 1)] == [([0, 1, 2, 3, 4, 5], [2, 4, 6, 8, 10], 1, i32)]


def test_policy_refuses_with_the_numbers() -> None:
    def rank(comm: LocalSimComm) -> None:
        zig, inter = ZigzagStrategy(4, comm=comm), InterleaveStrategy(4, comm=comm)
        short = CPBatch((9, 12, 5), (0, 0, 3))
        assert not zig.can_apply(26, short)
        with pytest.raises(
            CPNotApplicableError,
            match="zigzag needs every extend length >= 2·cp = 8; request 2 has 5",
        ):
            zig.prepare(short)
        assert inter.can_apply(26, short)
        tiny = CPBatch((1, 2), (4, 0))
        assert not inter.can_apply(3, tiny)
        with pytest.raises(
            CPNotApplicableError, match=r"at least cp = 4 tokens .* the batch has 3"
        ):
            inter.prepare(tiny)
        empty = CPBatch((), ())
        for s in (zig, inter):
            assert not s.can_apply(0, empty)
            with pytest.raises(CPNotApplicableError):
                s.prepare(empty)
        with pytest.raises(
            CPBatchError, match=r"num_tokens 25 != sum of extend lengths \[9, 12, 5\] = 26"
        ):
            zig.can_apply(25, short)

    run_local_ranks(4, rank)
    solo = ZigzagStrategy(1)
    assert not solo.can_apply(10, CPBatch((10,), (0,)))
    with pytest.raises(CPNotApplicableError, match="zigzag needs cp_size > 1; it is 1"):
        solo.prepare(CPBatch((10,), (0,)))


@pytest.mark.parametrize("cls", STRATEGIES)
def test_empty_batch_flows_through_every_step(cls: type[CPStrategy]) -> None:
    """Outside can_apply but exact: no rows in, no rows out, and the collectives still line up."""
    batch = CPBatch((), ())
    x = make_inputs(
        batch, heads=2, kv_heads=1, dim=8, dtype=torch.float32, device=torch.device("cpu"), seed=0
    )

    def rank(comm: LocalSimComm) -> None:
        strategy = cls(3, comm=comm)
        check_cp_attention(strategy, batch.with_metadata(strategy.build_metadata(0, [])), x)

    run_local_ranks(3, rank)
