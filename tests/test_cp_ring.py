"""Ring CP: exact against the float64 single-process oracle, and no rank ever holds the whole
forward's K/V (its layer cache keeps only the prefixes; it holds its shard plus at most two
shards in flight). Real process groups (gloo, world 2-4) run in test_cp_multiprocess."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

import meshsat.cp.ring as ring_module
from meshsat.cp import (
    Comm,
    CPBatch,
    CPConfigError,
    CPNotApplicableError,
    CPShapeError,
    CPStrategyKind,
    LayerKV,
    RingStrategy,
    bind_cp_strategy,
    get_cp_strategy,
    reset_cp_strategy,
)
from tests.cp_helpers import (
    LocalSimComm,
    check_cp_attention,
    cp_batches,
    local_sim_comms,
    make_inputs,
    run_local_ranks,
)


@settings(max_examples=15, deadline=None)
@given(cp_batches(max_extend=40), st.sampled_from([(4, 4), (4, 2), (6, 3)]), st.integers(0, 999))
def test_ring_attention_equals_full_causal_attention_fp32(
    case: tuple[int, CPBatch], heads: tuple[int, int], seed: int
) -> None:
    """Any lengths (also outside can_apply, the empty batch included), prefixes, GQA."""
    cp, batch = case
    x = make_inputs(
        batch,
        heads=heads[0],
        kv_heads=heads[1],
        dim=8,
        dtype=torch.float32,
        device=torch.device("cpu"),
        seed=seed,
    )
    expected = x.oracle(batch)

    def rank(comm: LocalSimComm) -> None:
        strategy = RingStrategy(cp, comm=comm)
        meta = strategy.build_metadata(batch.num_tokens, batch.seq_lens, batch.extend_lens)
        check_cp_attention(strategy, batch.with_metadata(meta), x, expected)

    run_local_ranks(cp, rank)


@pytest.mark.parametrize(("cp", "dtype"), [(2, torch.bfloat16), (3, torch.float16)])
def test_ring_attention_half_precision(cp: int, dtype: torch.dtype) -> None:
    batch = CPBatch((70, 2 * cp, 45), (30, 0, 12))
    x = make_inputs(
        batch, heads=8, kv_heads=2, dim=32, dtype=dtype, device=torch.device("cpu"), seed=cp
    )
    expected = x.oracle(batch)

    def rank(comm: LocalSimComm) -> None:
        strategy = RingStrategy(cp, comm=comm)
        check_cp_attention(strategy, strategy.prepare(batch), x, expected)

    run_local_ranks(cp, rank)


def test_ring_keeps_only_its_shard_of_the_forwards_kv() -> None:
    """After a layer the cache's extend rows are still unwritten (NaN) on every rank, the
    output is exact, and the K/V a rank held peaked at its own shard plus two in flight."""
    cp = 4
    batch = CPBatch((64, 40, 24), (8, 0, 3))
    x = make_inputs(
        batch, heads=4, kv_heads=2, dim=8, dtype=torch.float32, device=torch.device("cpu"), seed=7
    )
    expected = x.oracle(batch)
    full_kv_bytes = x.k.nbytes + x.v.nbytes

    def rank(comm: LocalSimComm) -> tuple[int, int, int]:
        strategy = RingStrategy(cp, comm=comm)
        prepared = strategy.prepare(batch)
        q, k, v = (strategy.shard_hidden_states(t, prepared) for t in (x.q, x.k, x.v))
        kv = LayerKV.from_prefix(batch, x.prefix_k, x.prefix_v)
        strategy.materialize_full_kv(prepared, kv, k, v)
        out = strategy.run_attention(q, prepared, q.device, strategy.default_attn_fn(prepared, kv))
        full = strategy.gather_hidden_states(out, prepared)
        torch.testing.assert_close(full.double(), expected, atol=2e-6, rtol=1e-5)
        extend_rows = kv.k[kv._extend_rows]
        assert torch.isnan(extend_rows).all(), "ring wrote the forward's K/V into the cache"
        return strategy.stats.local_kv_bytes, strategy.stats.peak_kv_bytes, k.nbytes + v.nbytes

    for local, peak, shard in run_local_ranks(cp, rank):
        assert local == shard
        assert peak <= 3 * shard  # own shard + the one in use + the one arriving
        assert peak < full_kv_bytes


def test_empty_batch_is_outside_the_policy_but_flows_exactly() -> None:
    """The seed's rule (every extend length >= 2·cp) holds vacuously for no requests; like
    zigzag, ring still says no (nothing to shard: run without CP), and the plan stays exact."""
    batch = CPBatch((), ())
    x = make_inputs(
        batch, heads=2, kv_heads=1, dim=8, dtype=torch.float32, device=torch.device("cpu"), seed=0
    )

    def rank(comm: LocalSimComm) -> None:
        strategy = RingStrategy(2, comm=comm)
        assert not strategy.can_apply(0, batch)
        with pytest.raises(CPNotApplicableError, match="ring needs at least one request"):
            strategy.prepare(batch)
        check_cp_attention(strategy, batch.with_metadata(strategy.build_metadata(0, [])), x)

    run_local_ranks(2, rank)


def test_ring_refuses_a_varlen_attn_fn_and_a_missing_shard() -> None:
    strategy = RingStrategy(2, comm=local_sim_comms(2)[0])
    batch = strategy.prepare(CPBatch((8,), (0,)))
    kv = LayerKV.from_prefix(batch, torch.zeros(0, 1, 4), torch.zeros(0, 1, 4))
    with pytest.raises(CPConfigError, match="call materialize_full_kv"):
        strategy.default_attn_fn(batch, kv)
    q = torch.zeros(strategy.metadata(batch).physical, 2, 4)
    with pytest.raises(CPConfigError, match="cannot merge partial results"):
        strategy.run_attention(q, batch, "cpu", lambda q, cu, kl, m: q)


def test_ring_binds_by_name_but_is_not_an_sglang_value() -> None:
    reset_cp_strategy()
    try:
        comm = local_sim_comms(2)[1]
        bound = bind_cp_strategy(
            enable_prefill_cp=True, cp_size=2, cp_strategy="ring", comm_or_group=comm
        )
        assert isinstance(bound, RingStrategy) and get_cp_strategy() is bound
        assert bound.kind is CPStrategyKind.RING and bound.cp_rank == 1
        with pytest.raises(ValueError, match="Unknown cp_strategy='ring'"):
            CPStrategyKind.from_string("ring")
    finally:
        reset_cp_strategy()


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 40),
    st.integers(1, 40),
    st.integers(0, 60),
    st.integers(0, 30),
    st.integers(0, 40),
    st.integers(0, 60),
)
def test_tiles_cover_exactly_the_causal_pairs(
    r0: int, rows: int, low: int, k0: int, keys: int, k_first: int
) -> None:
    """Brute force: the (row, key) pairs the tiles let through are exactly those whose key
    position is at most the row's, each once, and every row of a tile sees a key."""
    from meshsat.cp.ring import _tiles

    r1, k1 = r0 + rows, k0 + keys
    expected = {
        (r, k) for r in range(r0, r1) for k in range(k0, k1) if k_first + (k - k0) <= low + (r - r0)
    }
    got: list[tuple[int, int]] = []
    for t in _tiles(r0, r1, low, k0, k1, k_first):
        q = t.r1 - t.r0
        assert t.r0 < t.r1 and t.k0 < t.k1 and (not t.causal or t.k1 - t.k0 >= q)
        for i in range(q):
            last = t.k1 - q + i if t.causal else t.k1 - 1  # bottom-right causal rule
            assert last >= t.k0  # the row sees at least one key
            got += [(t.r0 + i, k) for k in range(t.k0, last + 1)]
    assert len(got) == len(set(got)) and set(got) == expected


@pytest.mark.parametrize(("qk_dim", "v_dim"), [(16, 8), (8, 24)])
def test_ring_is_exact_when_v_has_another_head_size(qk_dim: int, v_dim: int) -> None:
    """MLA-style heads: torch's CPU kernel takes one head size, so the ring pads the smaller
    side; zigzag and interleave always handled this."""
    batch = CPBatch((30, 17), (4, 0))
    dev = torch.device("cpu")
    x = make_inputs(batch, heads=4, kv_heads=2, dim=qk_dim, dtype=torch.float32, device=dev, seed=3)
    vs = make_inputs(batch, heads=1, kv_heads=2, dim=v_dim, dtype=torch.float32, device=dev, seed=4)
    x.v, x.prefix_v = vs.v, vs.prefix_v
    expected = x.oracle(batch)
    assert expected.shape[-1] == v_dim

    def rank(comm: LocalSimComm) -> None:
        strategy = RingStrategy(2, comm=comm)
        check_cp_attention(strategy, strategy.prepare(batch), x, expected)

    run_local_ranks(2, rank)


class RecordingComm(Comm):
    """A simulated rank that counts the ring transfers it started and waited for."""

    def __init__(self, inner: LocalSimComm) -> None:
        self.inner, self.started, self.waited = inner, 0, 0

    @property
    def rank(self) -> int:
        return self.inner.rank

    @property
    def world_size(self) -> int:
        return self.inner.world_size

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner.all_gather(x)

    def ring_pass_start(
        self, tensors: Sequence[torch.Tensor], out: Sequence[torch.Tensor] | None = None
    ) -> Callable[[], list[torch.Tensor]]:
        self.started += 1
        wait = self.inner.ring_pass_start(tensors, out)

        def counted() -> list[torch.Tensor]:
            self.waited += 1
            return wait()

        return counted


def ring_layer(comm: Comm, batch: CPBatch, v_cache_dim: int = 8) -> None:
    strategy = RingStrategy(2, comm=comm)
    prepared = strategy.prepare(batch)
    rows = strategy.metadata(prepared).physical
    kv = LayerKV.from_prefix(batch, torch.zeros(3, 1, 8), torch.zeros(3, 1, v_cache_dim))
    strategy.materialize_full_kv(prepared, kv, torch.zeros(rows, 1, 8), torch.zeros(rows, 1, 8))
    fn = strategy.default_attn_fn(prepared, kv)
    strategy.run_attention(torch.zeros(rows, 2, 8), prepared, "cpu", fn)


def test_an_error_inside_the_ring_pass_waits_for_the_posted_transfers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A transfer left posted pairs with the group's next collective over a real group (a hang
    or a gloo abort): the pass completes it before the error leaves."""

    def broken(self: object, *args: object) -> None:
        raise RuntimeError("tile failed")

    monkeypatch.setattr(ring_module._Merge, "tiles", broken)
    comms = [RecordingComm(c) for c in local_sim_comms(2)]
    with pytest.raises(RuntimeError, match="tile failed"):
        run_local_ranks(2, lambda c: ring_layer(comms[c.rank], CPBatch((12,), (3,))))
    assert [(c.started, c.waited) for c in comms] == [(1, 1), (1, 1)]


def test_ring_refuses_shards_that_do_not_fit_the_cache_before_any_transfer() -> None:
    comms = [RecordingComm(c) for c in local_sim_comms(2)]
    with pytest.raises(CPShapeError, match=r"v \(8, 1, 8\) do not fit the layer cache's"):
        run_local_ranks(2, lambda c: ring_layer(comms[c.rank], CPBatch((12,), (3,)), 4))
    assert [c.started for c in comms] == [0, 0]
