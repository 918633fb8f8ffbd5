"""The per-layer path is free of host-device synchronisation: once a forward's plan is on the
device, a layer (`materialize_full_kv` with its KV write, `default_attn_fn`, `run_attention`)
reads nothing back to the host, creates no host tensor and moves none to the device. Counted on
the CPU by wrapping every torch entry point that would synchronise on a GPU (`.item()`,
`.tolist()`, `.cpu()`, `.numpy()`, `int()/float()/bool()` of a tensor, host tensor creation,
data-dependent shapes, `.to(<device>)`) while the second layer of a forward runs; the output is
checked against the oracle so that the counted calls are the real ones. benchmarks/gpu_check.sh
checks the same on CUDA under `torch.cuda.set_sync_debug_mode("error")`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch

from meshsat.cp import (
    CPBatch,
    CPStrategy,
    InterleaveStrategy,
    LayerKV,
    RingStrategy,
    ZigzagStrategy,
)
from tests.cp_helpers import LocalSimComm, make_inputs, run_local_ranks, tolerance

TENSOR_METHODS = ("item", "tolist", "cpu", "numpy", "nonzero", "__int__", "__float__", "__bool__")
TORCH_FUNCTIONS = ("tensor", "as_tensor", "from_numpy", "nonzero", "unique")


def counting(monkeypatch: pytest.MonkeyPatch, counts: Counter[str]) -> None:
    def wrap(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return original(*args, **kwargs)

        return counted

    for name in TENSOR_METHODS:
        monkeypatch.setattr(torch.Tensor, name, wrap(f"Tensor.{name}", getattr(torch.Tensor, name)))
    to = torch.Tensor.to

    def counted_to(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        """A `.to` that names a device is a host-to-device copy on a GPU (dtype-only is not)."""
        if "device" in kwargs or any(isinstance(a, (torch.device, str, int)) for a in args):
            counts["Tensor.to(device)"] += 1
        return to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", counted_to)
    for name in TORCH_FUNCTIONS:
        monkeypatch.setattr(torch, name, wrap(f"torch.{name}", getattr(torch, name)))


@pytest.mark.parametrize("cls", [ZigzagStrategy, InterleaveStrategy, RingStrategy])
def test_one_layer_does_no_host_sync(
    cls: type[CPStrategy], monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = CPBatch((300, 17, 40), (21, 0, 5))  # 300 > one row block; prefixes; GQA below
    x = make_inputs(
        batch, heads=4, kv_heads=2, dim=8, dtype=torch.float32, device=torch.device("cpu"), seed=1
    )
    expected = x.oracle(batch)
    counts: Counter[str] = Counter()
    layers: dict[int, list[torch.Tensor]] = {}

    def rank(comm: LocalSimComm) -> None:
        strategy = cls(2, comm=comm)
        prepared = strategy.prepare(batch)
        q, k, v = (strategy.shard_hidden_states(t, prepared) for t in (x.q, x.k, x.v))
        outs = layers.setdefault(comm.rank, [])
        # layer 1 builds the forward's device state; layer 2 is what every later layer costs
        caches = [LayerKV.from_prefix(batch, x.prefix_k, x.prefix_v) for _ in range(2)]
        for layer, kv in enumerate(caches):  # each layer has its own cache, as in an engine
            comm.all_gather(torch.zeros(1))  # every rank at the same layer
            if layer == 1 and comm.rank == 0:
                counting(monkeypatch, counts)
            comm.all_gather(torch.zeros(1))
            strategy.materialize_full_kv(prepared, kv, k, v)
            fn = strategy.default_attn_fn(prepared, kv)
            outs.append(strategy.run_attention(q, prepared, q.device, fn))
        comm.all_gather(torch.zeros(1))
        if comm.rank == 0:
            monkeypatch.undo()
        # no rank may run the checks below (assert_close reads tensors back) while rank 0's
        # counters are still installed: they would count the other rank's checks
        comm.all_gather(torch.zeros(1))
        meta = strategy.metadata(prepared)
        mine = meta.rank_tokens[comm.rank]
        for out in outs:
            torch.testing.assert_close(
                out[: mine.numel()].double(), expected[mine], **tolerance(torch.float32)
            )

    run_local_ranks(2, rank)
    assert counts == Counter(), f"host synchronisations in one layer: {dict(counts)}"


def test_the_counter_sees_a_host_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    """The instrument itself: a foreign call (validated on the host) is counted."""
    batch = CPBatch((5,), (0,))
    kv = LayerKV(batch, torch.zeros(5, 1, 4), torch.zeros(5, 1, 4))
    strategy = ZigzagStrategy(1)
    fn = strategy.default_attn_fn(batch.with_metadata(strategy.build_metadata(5, [5])), kv)
    counts: Counter[str] = Counter()
    counting(monkeypatch, counts)
    fn(torch.zeros(5, 2, 4), torch.tensor([0, 5], dtype=torch.int32), torch.tensor([5]), 5)
    monkeypatch.undo()
    assert counts["Tensor.tolist"] + counts["Tensor.__int__"] + counts["Tensor.item"] > 0


def test_the_counter_sees_a_kv_write_that_moves_its_rows() -> None:
    """The instrument again: a KV write not handed the per-forward device rows copies its host
    index to the device, and is counted; the strategies' write is handed them."""
    batch = CPBatch((5, 3), (2, 0))
    kv = LayerKV(batch, torch.zeros(10, 1, 4), torch.zeros(10, 1, 4))
    k = torch.ones(8, 1, 4)
    counts: Counter[str] = Counter()
    with pytest.MonkeyPatch.context() as mp:
        counting(mp, counts)
        kv.write_extend(k, k)
    assert counts["Tensor.to(device)"] == 1
    assert torch.equal(kv.k[kv.extend_rows], k) and kv.k[:2].eq(0).all()
