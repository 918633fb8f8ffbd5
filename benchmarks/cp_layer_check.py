"""Per-layer check of all three CP strategies on one device: exactness against the float64
oracle, no host synchronisation in a layer after the first, and which attention kernel served.

The ranks of a CP group run as threads of this process (`tests.cp_helpers.run_local_ranks`), so
cp 2 and 4 run on a single GPU. On CUDA the second layer of each forward (materialize_full_kv
with its KV write, default_attn_fn, run_attention) runs under
`torch.cuda.set_sync_debug_mode("error")`, which raises on any synchronising call; on the CPU
the same calls are counted by wrapping torch's synchronising entry points instead
(tests/test_cp_hot_path.py's instrument). FlashAttention calls (`flash_attn_varlen_func` for
zigzag and interleave, `flash_attn_func` for ring's tiles) are counted by wrapping the module's
functions, so the table says whether the kernel served each strategy.

    PYTHONPATH=. python benchmarks/cp_layer_check.py --device cuda
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import sys
import threading
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
from tests.cp_helpers import AttnInputs, LocalSimComm, make_inputs, run_local_ranks, tolerance
from tests.test_cp_hot_path import counting

STRATEGIES: list[type[CPStrategy]] = [ZigzagStrategy, InterleaveStrategy, RingStrategy]
BATCH = CPBatch((3000, 170, 400), (210, 0, 50))  # prefixes, uneven lengths, > one row block


def flash_counter() -> tuple[Counter[str], Callable[[], None]]:
    """Count calls of flash_attn's entry points; returns the counter and an undo."""
    calls: Counter[str] = Counter()
    if importlib.util.find_spec("flash_attn") is None:
        return calls, lambda: None
    flash: Any = importlib.import_module("flash_attn")
    saved = {n: getattr(flash, n) for n in ("flash_attn_varlen_func", "flash_attn_func")}
    lock = threading.Lock()

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*a: Any, **k: Any) -> Any:
            with lock:
                calls[name] += 1
            return fn(*a, **k)

        return counted

    for name, fn in saved.items():
        setattr(flash, name, wrap(name, fn))

    def undo() -> None:
        for name, fn in saved.items():
            setattr(flash, name, fn)

    return calls, undo


@functools.cache
def inputs(dtype: torch.dtype, device: torch.device) -> tuple[AttnInputs, torch.Tensor]:
    """The layer's inputs in `dtype` and their float64 oracle, computed once per dtype."""
    x = make_inputs(BATCH, heads=8, kv_heads=2, dim=64, dtype=dtype, device=device, seed=0)
    return x, x.oracle(BATCH)


def check(cls: type[CPStrategy], cp: int, dtype: torch.dtype, device: torch.device) -> str:
    x, expected = inputs(dtype, device)
    host_calls: Counter[str] = Counter()
    flash_calls, undo_flash = flash_counter()
    gate = threading.Barrier(cp)
    errors: list[float] = []

    def rank(comm: LocalSimComm) -> None:
        s = cls(cp, comm=comm)
        b = BATCH.with_metadata(
            s.build_metadata(BATCH.num_tokens, BATCH.seq_lens, BATCH.extend_lens)
        )
        q, k, v = (s.shard_hidden_states(t, b) for t in (x.q, x.k, x.v))
        caches = [LayerKV.from_prefix(BATCH, x.prefix_k, x.prefix_v) for _ in range(2)]
        outs = []
        for layer, kv in enumerate(caches):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            gate.wait()
            if layer == 1 and comm.rank == 0:  # layer 0 builds the forward's device state
                if device.type == "cuda":
                    torch.cuda.set_sync_debug_mode("error")
                else:
                    mp = pytest.MonkeyPatch()
                    counting(mp, host_calls)
            gate.wait()
            s.materialize_full_kv(b, kv, k, v)
            outs.append(s.run_attention(q, b, device, s.default_attn_fn(b, kv)))
        gate.wait()
        if comm.rank == 0:
            if device.type == "cuda":
                torch.cuda.set_sync_debug_mode("default")
            else:
                mp.undo()
        gate.wait()
        got = s.gather_hidden_states(outs[1], b).double().cpu()
        torch.testing.assert_close(got, expected, **tolerance(dtype))
        errors.append(float((got - expected).abs().max()))

    try:
        run_local_ranks(cp, rank, timeout_s=120)
    finally:
        undo_flash()
    if host_calls:
        raise AssertionError(f"{cls.name} cp {cp}: host synchronisations in layer 2: {host_calls}")
    flash = ", ".join(f"{n} x{c}" for n, c in sorted(flash_calls.items())) or "none"
    return (
        f"| {cls.name} | {cp} | {str(dtype).removeprefix('torch.')} | exact ({max(errors):.1e}) "
        f"| 0 | {flash} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--cp", default="1,2,4")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit(f"cp_layer_check: torch {torch.__version__} sees no CUDA device")
    dtypes = [torch.float32, torch.bfloat16]
    if device.type == "cpu":
        torch.set_num_threads(1)
    print(
        f"## CP layer check on {device.type}: {BATCH.bs} requests, extend "
        f"{list(BATCH.extend_lens)}, prefix {list(BATCH.prefix_lens)}; 8 heads, 2 kv heads, "
        "head dim 64\n"
    )
    print(
        "| strategy | cp | dtype | second layer vs oracle | host syncs in layer 2 | "
        "FlashAttention calls (both layers) |"
    )
    print("|---|---:|---|---|---:|---|")
    for cls in STRATEGIES:
        for cp in (int(c) for c in args.cp.split(",")):
            for dtype in dtypes:
                print(check(cls, cp, dtype, device), flush=True)


if __name__ == "__main__":
    main()
