"""A strategy written against the seed's base class (`layers/cp/base.py`), verbatim in its
signatures and with no `cp_rank` of its own, runs on meshsat's `ContextParallelStrategy`: it
can be instantiated, reads its rank from the process's attention-CP group as the seed reads
`get_parallel().attn_cp_rank`, and serves a forward whose output equals the float64 oracle of
tests/cp_helpers.py."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, List, Optional  # noqa: UP035  # the seed's spelling

import pytest
import torch

from meshsat import cp
from meshsat.cp import (
    BaseContextParallelMetadata,
    ContextParallelStrategy,
    ContextParallelStrategyKind,
    CPAttentionBackendKind,
    CPBatch,
    CPForwardBatch,
    LayerKV,
    causal_attention_fn,
)
from meshsat.cp.parallel_state import set_attn_cp_comm
from tests.cp_helpers import local_sim_comms, make_inputs, tolerance


@pytest.fixture(autouse=True)
def unbound() -> Iterator[None]:
    cp.reset_cp_strategy()
    yield
    cp.reset_cp_strategy()


class SeedWrittenStrategy(ContextParallelStrategy):
    """Every abstract method with the seed's exact signature; a plain layout in which the
    forward is not split (cp 1), so every call path of the contract runs in one process."""

    name = "seed-written"
    kind = ContextParallelStrategyKind.ZIGZAG

    def can_apply(self, num_tokens: int, forward_batch: Any) -> bool:
        return self.cp_size > 1 and num_tokens >= self.cp_size

    def build_metadata(
        self,
        num_tokens: int,
        seqs_len: Optional[List[int]],  # noqa: UP006, UP045
        extend_seqs_len: Optional[List[int]] = None,  # noqa: UP006, UP045
    ) -> BaseContextParallelMetadata:
        lens = extend_seqs_len if extend_seqs_len is not None else (seqs_len or [num_tokens])
        total = sum(seqs_len) if seqs_len is not None else num_tokens
        return BaseContextParallelMetadata(total_seq_lens=total, bs=len(lens))

    def shard_hidden_states(self, x: Any, forward_batch: Any) -> Any:
        return x.chunk(self.cp_size, 0)[self.cp_rank]

    def shard_position_ids(self, positions: Any, forward_batch: Any) -> Any:
        return positions.chunk(self.cp_size, -1)[self.cp_rank]

    def gather_hidden_states(
        self,
        x: Any,
        forward_batch: Any,
        stream: Optional[Any] = None,  # noqa: UP045
    ) -> Any:
        return x

    def gather_kv_cache(
        self,
        x: Any,
        forward_batch: Any,
        stream: Optional[Any] = None,  # noqa: UP045
    ) -> Any:
        return x

    def run_attention(
        self,
        q: Any,
        forward_batch: Any,
        device: Any,
        attn_fn: Callable[[Any, Any, Any, int], Any],
        attention_backend: CPAttentionBackendKind = CPAttentionBackendKind.FLASH_ATTENTION,
    ) -> Any:
        assert attention_backend == CPAttentionBackendKind.FLASH_ATTENTION
        ext = forward_batch.extend_seq_lens_cpu
        seq = [p + e for p, e in zip(forward_batch.extend_prefix_lens_cpu, ext, strict=True)]
        cu = torch.tensor([0, *ext], device=device).cumsum(0).to(torch.int32)
        return attn_fn(q, cu, torch.tensor(seq, dtype=torch.int32, device=device), max(ext))

    def materialize_full_kv(
        self,
        forward_batch: Any,
        layer: Any,
        k: Any,
        v: Any,
        swa_loc: Optional[Any] = None,  # noqa: UP045
    ) -> None:
        layer.write_extend(self.gather_kv_cache(k, forward_batch), v)


def test_a_seed_written_strategy_instantiates_and_reads_the_parallel_state() -> None:
    strategy = SeedWrittenStrategy(cp_size=2)  # TypeError here while cp_rank was abstract
    assert strategy.cp_rank == 0  # no torch.distributed: the process is rank 0 of its own
    comms = local_sim_comms(2)
    set_attn_cp_comm(comms[1])  # what init_cp_strategy / instantiate register
    assert strategy.cp_rank == 1
    x = torch.arange(6.0)
    assert torch.equal(strategy.shard_hidden_states(x, None), x[3:])
    cp.reset_cp_strategy()
    assert strategy.cp_rank == 0
    with pytest.raises(NotImplementedError, match="seed-written strategy does not support"):
        strategy.shard_per_request([3], torch.tensor([3]))
    assert strategy.reindex_attn_metadata(core_attn_metadata=object()) is None
    assert not strategy.per_layer_attn_cp_comm
    cp.set_global_server_args(SimpleNamespace(enable_prefill_cp=True, _is_dsa_model_arch=True))
    assert strategy.per_layer_attn_cp_comm


def test_the_contracts_signatures_are_the_seeds() -> None:
    """The seed-written class overrides nothing the base defines concretely, and its
    signatures match the base's parameter for parameter (names, kinds, defaults)."""
    assert not inspect.isabstract(SeedWrittenStrategy)
    assert "cp_rank" not in ContextParallelStrategy.__abstractmethods__
    for name in sorted(ContextParallelStrategy.__abstractmethods__):
        ours = inspect.signature(getattr(ContextParallelStrategy, name)).parameters
        theirs = inspect.signature(getattr(SeedWrittenStrategy, name)).parameters
        assert [(p.name, p.kind, p.default) for p in ours.values()] == [
            (p.name, p.kind, p.default) for p in theirs.values()
        ], name


def test_a_forward_of_the_seed_written_strategy_equals_the_oracle() -> None:
    batch = CPBatch((9, 4), (3, 0))
    x = make_inputs(
        batch, heads=4, kv_heads=2, dim=8, dtype=torch.float32, device=torch.device("cpu"), seed=5
    )
    strategy = SeedWrittenStrategy(cp_size=1)
    fb = CPForwardBatch(
        extend_seq_lens_cpu=list(batch.extend_lens), extend_prefix_lens_cpu=list(batch.prefix_lens)
    )
    assert not strategy.can_apply(num_tokens=batch.num_tokens, forward_batch=fb)
    meta = strategy.build_metadata(num_tokens=batch.num_tokens, seqs_len=list(batch.seq_lens))
    assert (meta.total_seq_lens, meta.bs) == (sum(batch.seq_lens), 2)
    positions = torch.arange(batch.num_tokens)
    assert strategy.split_before_forward(fb, positions, positions) is None
    assert fb.positions is not None and torch.equal(fb.positions, positions)
    kv = LayerKV.from_prefix(batch, x.prefix_k, x.prefix_v)
    strategy.materialize_full_kv(forward_batch=fb, layer=kv, k=x.k, v=x.v)
    out = strategy.run_attention(
        q=x.q,
        forward_batch=fb,
        device=x.q.device,
        attn_fn=causal_attention_fn(kv, torch.arange(batch.bs)),
    )
    got = strategy.gather_hidden_states(out, fb)
    torch.testing.assert_close(got.double(), x.oracle(batch), **tolerance(torch.float32))


def test_build_metadata_reads_missing_lengths_as_the_seed_does() -> None:
    """No seqs_len: no cached prefix; no extend lengths either: one request of num_tokens."""
    strategy = cp.ZigzagStrategy(1)
    meta = strategy.build_metadata(12, None)
    assert (meta.extend_lens, meta.prefix_lens) == ((12,), (0,))
    meta = strategy.build_metadata(12, None, [5, 7])
    assert (meta.extend_lens, meta.prefix_lens) == ((5, 7), (0, 0))
    meta = strategy.build_metadata(17, [8, 9], None)  # seqs_len only: all of it is extend
    assert (meta.extend_lens, meta.prefix_lens) == ((8, 9), (0, 0))
    # the plans agree with the explicit spelling
    explicit = strategy.build_metadata(12, [12], [12])
    assert torch.equal(strategy.build_metadata(12, None).gather_index, explicit.gather_index)


def test_ring_run_attention_defaults_to_and_checks_the_seeds_backend() -> None:
    param = inspect.signature(cp.RingStrategy.run_attention).parameters["attention_backend"]
    assert param.default is CPAttentionBackendKind.FLASH_ATTENTION
    ring = cp.RingStrategy(1)
    batch = CPBatch((4,), (0,))
    prepared = batch.with_metadata(ring.build_metadata(4, [4]))
    kv = LayerKV(batch, torch.zeros(4, 1, 8), torch.zeros(4, 1, 8))
    q = torch.zeros(ring.metadata(prepared).physical, 1, 8)
    ring.materialize_full_kv(prepared, kv, q, q)
    fn = ring.default_attn_fn(prepared, kv)
    with pytest.raises(cp.CPConfigError, match=r"attention_backend must be .*FLASH_ATTENTION"):
        ring.run_attention(q, prepared, "cpu", fn, attention_backend=None)  # type: ignore[arg-type]
