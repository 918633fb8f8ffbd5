"""Shared pieces of the cp tests: the single-process oracle, input builders, the CP forward
every tier runs, and the multi-process harness.

Set MESHSAT_CP_DEVICE=cuda to run the device-aware tests on CUDA (NCCL for real process groups);
they skip when CUDA is absent. The default is the CPU with gloo.
"""

from __future__ import annotations

import datetime
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import hypothesis.strategies as st
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import Tensor

from meshsat.cp import (
    Comm,
    CPBatch,
    CPCommError,
    CPConfigError,
    CPForwardBatch,
    CPStrategy,
    LayerKV,
)

DEVICE_ENV = "MESHSAT_CP_DEVICE"


def device_name() -> str:
    return os.environ.get(DEVICE_ENV, "cpu")


def cp_test_device() -> torch.device:
    """The device the exactness tests run on; skips the test when it is CUDA and there is none."""
    name = device_name()
    if name.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip(f"{DEVICE_ENV}={name} but CUDA is not available")
    return torch.device(name)


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    if dtype == torch.float32:
        return {"atol": 2e-6, "rtol": 1e-5}
    return {"atol": 2e-2, "rtol": 2e-2}


# ---- simulated groups (every rank a thread of this process) -------------------------------------

T = TypeVar("T")


class _PeerFailed(CPCommError):
    """Raised in a simulated rank whose barrier another rank broke; never the root cause."""


class _SimHub:
    def __init__(self, world_size: int, timeout_s: float) -> None:
        self.world_size = world_size
        self.barrier = threading.Barrier(world_size, timeout=timeout_s)
        self.slots: list[Tensor | None] = [None] * world_size


class LocalSimComm(Comm):
    """One rank of a group whose ranks are threads of this process.

    Each all-gather is two barrier rounds (publish, then read), so a rank that fails or never
    arrives breaks the barrier and every peer raises `CPCommError` instead of hanging.
    """

    def __init__(self, hub: _SimHub, rank: int) -> None:
        self._hub = hub
        self._rank = rank

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._hub.world_size

    def _wait(self) -> None:
        try:
            self._hub.barrier.wait()
        except threading.BrokenBarrierError:
            raise _PeerFailed(
                f"simulated rank {self._rank}: a peer failed or timed out in all_gather"
            ) from None

    def all_gather(self, x: Tensor) -> Tensor:
        self._hub.slots[self._rank] = x
        self._wait()
        parts = [p for p in self._hub.slots if p is not None]
        self._wait()
        shapes = [(tuple(p.shape), p.dtype) for p in parts]
        if len(set(shapes)) != 1:
            listed = ", ".join(f"rank {r}: {s[0]} {s[1]}" for r, s in enumerate(shapes))
            raise CPCommError(f"all_gather needs one shape and dtype on every rank; got {listed}")
        return torch.cat([p if p.device == x.device else p.to(x.device) for p in parts])


def local_sim_comms(world_size: int, timeout_s: float = 60.0) -> list[LocalSimComm]:
    """The comms of one simulated group, one per rank, to be used from `world_size` threads."""
    if world_size < 1:
        raise CPConfigError(f"world_size must be >= 1, got {world_size}")
    hub = _SimHub(world_size, timeout_s)
    return [LocalSimComm(hub, r) for r in range(world_size)]


def run_local_ranks(
    world_size: int, fn: Callable[[LocalSimComm], T], timeout_s: float = 60.0
) -> list[T]:
    """Run `fn(comm)` for every rank of a simulated group, each in a thread; results by rank.

    The lowest rank's own error is re-raised, not the barrier errors it causes in its peers.
    """
    comms = local_sim_comms(world_size, timeout_s)
    results: list[T | None] = [None] * world_size
    errors: list[BaseException | None] = [None] * world_size

    def body(comm: LocalSimComm) -> None:
        try:
            results[comm.rank] = fn(comm)
        except BaseException as exc:
            errors[comm.rank] = exc
            comm._hub.barrier.abort()

    threads = [threading.Thread(target=body, args=(c,), daemon=True) for c in comms]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    raised = [e for e in errors if e is not None]
    if raised:
        primary = [e for e in raised if not isinstance(e, _PeerFailed)]
        raise (primary or raised)[0]
    return cast("list[T]", results)


# ---- random batches ----------------------------------------------------------------------------

CP_SIZES = (1, 2, 3, 4, 6, 8)


@st.composite
def cp_batches(
    draw: st.DrawFn, max_bs: int = 5, max_extend: int = 50, max_prefix: int = 20
) -> tuple[int, CPBatch]:
    """(cp size, batch): any lengths from 0 (also outside can_apply), 0..max_bs requests."""
    cp = draw(st.sampled_from(CP_SIZES))
    bs = draw(st.integers(0, max_bs))
    ext = draw(st.lists(st.integers(0, max_extend), min_size=bs, max_size=bs))
    pre = draw(st.lists(st.integers(0, max_prefix), min_size=bs, max_size=bs))
    return cp, CPBatch(tuple(ext), tuple(pre))


# ---- oracle ------------------------------------------------------------------------------------


def full_causal_attention(
    batch: CPBatch, q: Tensor, k: Tensor, v: Tensor, prefix_k: Tensor, prefix_v: Tensor
) -> Tensor:
    """Plain causal attention of every extend token over its request's prefix and earlier
    tokens, one request at a time, in float64 on the CPU: the answer CP must reproduce."""
    heads, kv_heads = q.shape[1], k.shape[1]
    group = heads // kv_heads
    out = torch.zeros(q.shape[0], heads, v.shape[2], dtype=torch.float64)
    tok = pre = 0
    for p, n in zip(batch.prefix_lens, batch.extend_lens, strict=True):
        keys = torch.cat([prefix_k[pre : pre + p], k[tok : tok + n]]).double().cpu()
        vals = torch.cat([prefix_v[pre : pre + p], v[tok : tok + n]]).double().cpu()
        qs = q[tok : tok + n].double().cpu()
        for h in range(heads):
            scores = qs[:, h] @ keys[:, h // group].T / math.sqrt(q.shape[2])
            visible = torch.ones(n, p + n, dtype=torch.bool).tril(diagonal=p)
            weights = scores.masked_fill(~visible, float("-inf")).softmax(-1)
            out[tok : tok + n, h] = weights @ vals[:, h // group]
        tok += n
        pre += p
    return out


# ---- inputs ------------------------------------------------------------------------------------


@dataclass
class AttnInputs:
    q: Tensor
    k: Tensor
    v: Tensor
    prefix_k: Tensor
    prefix_v: Tensor

    def oracle(self, batch: CPBatch) -> Tensor:
        return full_causal_attention(batch, self.q, self.k, self.v, self.prefix_k, self.prefix_v)


def make_inputs(
    batch: CPBatch,
    *,
    heads: int,
    kv_heads: int,
    dim: int,
    dtype: torch.dtype,
    device: torch.device,
    seed: int,
) -> AttnInputs:
    """The same tensors on every rank for the same seed (generated on the CPU, then moved)."""
    gen = torch.Generator().manual_seed(seed)
    t, p = batch.num_tokens, sum(batch.prefix_lens)

    def rnd(rows: int, h: int) -> Tensor:
        return torch.randn(rows, h, dim, generator=gen).to(device=device, dtype=dtype)

    return AttnInputs(
        rnd(t, heads), rnd(t, kv_heads), rnd(t, kv_heads), rnd(p, kv_heads), rnd(p, kv_heads)
    )


# ---- the CP forward ----------------------------------------------------------------------------


def cp_attention(strategy: CPStrategy, batch: CPBatch, x: AttnInputs) -> tuple[Tensor, Tensor]:
    """One rank's part of a CP attention layer, the way an engine runs it: shard q, k, v;
    all-gather K/V into the cache; attend over the local rows; gather. (local out, gathered)."""
    q = strategy.shard_hidden_states(x.q, batch)
    k = strategy.shard_hidden_states(x.k, batch)
    v = strategy.shard_hidden_states(x.v, batch)
    kv = LayerKV.from_prefix(batch, x.prefix_k, x.prefix_v)
    strategy.materialize_full_kv(batch, kv, k, v)
    local = strategy.run_attention(q, batch, q.device, strategy.default_attn_fn(batch, kv))
    return local, strategy.gather_hidden_states(local, batch)


def check_cp_attention(
    strategy: CPStrategy, batch: CPBatch, x: AttnInputs, expected: Tensor | None = None
) -> None:
    """Assert this rank's rows and the gathered output equal the oracle; padding rows are zero."""
    expected = x.oracle(batch) if expected is None else expected
    local, full = cp_attention(strategy, batch, x)
    tol = tolerance(x.q.dtype)
    torch.testing.assert_close(full.double().cpu(), expected, **tol)
    meta = strategy.metadata(batch)
    mine = meta.rank_tokens[strategy.cp_rank]
    torch.testing.assert_close(local[: mine.numel()].double().cpu(), expected[mine], **tol)
    assert torch.count_nonzero(local[mine.numel() :]) == 0, "padding rows must be zero"


def check_round_trip(strategy: CPStrategy, batch: CPBatch, seed: int, device: torch.device) -> None:
    """gather(shard(x)) == x exactly, for hidden states (any trailing shape) and positions."""
    gen = torch.Generator().manual_seed(seed)
    t = batch.num_tokens
    hidden = torch.randn(t, 3, 2, generator=gen).to(device)
    ids = torch.randint(0, 50_000, (t,), generator=gen).to(device)
    positions = torch.randint(0, 1 << 20, (3, t), generator=gen).to(device)
    back = strategy.gather_hidden_states(strategy.shard_hidden_states(hidden, batch), batch)
    assert torch.equal(back, hidden)
    # SGLang's contract: the shards land on the engine's batch, the embeddings are returned
    fb = CPForwardBatch(
        list(batch.extend_lens), list(batch.prefix_lens), attn_cp_metadata=batch.metadata
    )
    embeds = strategy.split_before_forward(fb, ids, positions, hidden)
    assert fb.cp_v2_input_ids is not None and fb.positions is not None and embeds is not None
    assert torch.equal(strategy.gather_hidden_states(fb.cp_v2_input_ids, fb), ids)
    assert torch.equal(strategy.gather_hidden_states(embeds, fb), hidden)
    # positions are sharded along their last dim; gathering a [T, 3] view checks it
    pos_back = strategy.gather_hidden_states(fb.positions.T.contiguous(), fb)
    assert torch.equal(pos_back.T, positions)


# ---- processes ---------------------------------------------------------------------------------


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def _entry(
    rank: int,
    world: int,
    init_file: str,
    device_type: str,
    fn: Callable[..., None],
    args: tuple[Any, ...],
    timeout_s: float = 120.0,
) -> None:
    torch.set_num_threads(1)
    device = torch.device(device_type, rank) if device_type == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend_for(device),
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    try:
        fn(rank, world, device, *args)
    finally:
        dist.destroy_process_group()


def spawn_world(
    world: int,
    fn: Callable[..., None],
    tmp_dir: str,
    device: torch.device,
    *args: Any,
    timeout_s: float = 120.0,
) -> None:
    """Run `fn(rank, world, device, *args)` in `world` fresh processes joined by a real process
    group (file:// rendezvous in tmp_dir; `timeout_s` for its collectives). A worker's
    exception fails the caller with its traceback (torch.multiprocessing.ProcessRaisedException)."""
    if device.type == "cuda" and torch.cuda.device_count() < world:
        pytest.skip(
            f"NCCL at world size {world} needs {world} GPUs; {torch.cuda.device_count()} here"
        )
    init_file = os.path.join(tmp_dir, f"rendezvous-{world}")
    mp.spawn(
        _entry,
        args=(world, init_file, device.type, fn, args, timeout_s),
        nprocs=world,
        join=True,
    )
