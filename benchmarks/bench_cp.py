"""Benchmarks for the `cp` package: causal work balance, shard + gather throughput, CP
attention over real process groups against single-process attention on the same tokens, plan
time, and what `ProcessGroupComm`'s peer check adds to a collective.

Every timing is the median of several runs, and every ratio is against a baseline measured in
the same run. Usage:

    python benchmarks/bench_cp.py                      # CPU, gloo at world 2 and 4
    python benchmarks/bench_cp.py --device cuda --worlds 1,2   # NCCL (world <= GPU count)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from timing import interleaved_medians, median_seconds
from torch import Tensor

from meshsat.cp import (
    CPBatch,
    CPMetadata,
    CPStrategy,
    InterleaveStrategy,
    LayerKV,
    ProcessGroupComm,
    RingStrategy,
    ZigzagStrategy,
    causal_attention_fn,
    interleave_plan,
    zigzag_plan,
)
from meshsat.cp.comm import Comm

STRATEGIES: list[type[CPStrategy]] = [ZigzagStrategy, InterleaveStrategy, RingStrategy]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def synced(fn: Callable[[], object], device: torch.device) -> Callable[[], object]:
    """`fn`, then a wait for the work it queued on the device: a timer then counts the
    kernels, not only their launch (a no-op on the CPU)."""

    def run() -> object:
        out = fn()
        sync(device)
        return out

    return run


def request_mix(seed: int = 0, n: int = 16) -> CPBatch:
    """A serving-like prefill mix: lengths log-uniform in [256, 16384], a third of the requests
    with a cached prefix log-uniform in [512, 8192] (radix-cache hits)."""
    rng = random.Random(seed)
    ext = [int(2 ** rng.uniform(8, 14)) for _ in range(n)]
    pre = [int(2 ** rng.uniform(9, 13)) if rng.random() < 1 / 3 else 0 for _ in range(n)]
    return CPBatch(tuple(ext), tuple(pre))


# ---- 1. causal work balance ----------------------------------------------------------------


def plan_work(meta: CPMetadata) -> list[int]:
    """Per rank, query-key pairs its attention computes (proportional to FLOPs: 4·heads·dim
    each): a sequence of q queries with kv length K computes sum_i (K - q + i + 1) pairs."""
    work = []
    for chunks in meta.chunks:
        pairs = 0
        for c in chunks:
            q, k = c.q_lens, c.kv_lens
            pairs += int((q * (k - q) + q * (q + 1) // 2).sum())
        work.append(pairs)
    return work


def contiguous_work(batch: CPBatch, cp: int) -> list[int]:
    """The plain split: each request cut into cp contiguous pieces, piece r on rank r."""
    work = [0] * cp
    for p, n in zip(batch.prefix_lens, batch.extend_lens, strict=True):
        base, rem = divmod(n, cp)
        start = 0
        for r in range(cp):
            size = base + (r < rem)
            first, last = p + start + 1, p + start + size  # kv counts of the piece's rows
            work[r] += (first + last) * size // 2
            start += size
    return work


def imbalance(work: Sequence[int]) -> float:
    return max(work) / (sum(work) / len(work))


def bench_balance() -> None:
    mix = request_mix()
    workloads = {
        "mix": mix,
        "mix, no prefix": CPBatch(mix.extend_lens, (0,) * mix.bs),
        "one 32k request": CPBatch((32768,), (0,)),
    }
    print(
        f"## 1. Causal work balance: max/mean attention FLOPs over ranks\n\n"
        f"mix = {mix.bs} requests, extend lengths {list(mix.extend_lens)}, "
        f"cached prefixes {list(mix.prefix_lens)} ({mix.num_tokens} tokens in the forward)\n"
    )
    print("| workload | cp | zigzag | interleave | contiguous | 2 - 1/cp |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, batch in workloads.items():
        for cp in (2, 4, 8):
            z = imbalance(plan_work(zigzag_plan(cp, batch.extend_lens, batch.prefix_lens)))
            i = imbalance(plan_work(interleave_plan(cp, batch.extend_lens, batch.prefix_lens)))
            c = imbalance(contiguous_work(batch, cp))
            print(f"| {name} | {cp} | {z:.4f} | {i:.4f} | {c:.4f} | {2 - 1 / cp:.4f} |")
    print()


# ---- 2. shard + gather throughput ----------------------------------------------------------


class ReplayComm(Comm):
    """Stands in for the network: its all-gather writes the padded shards of every rank into one
    buffer, the same local copy a real all-gather ends with."""

    def __init__(self, rank: int, world_size: int) -> None:
        self._rank = rank
        self._world_size = world_size
        self.shards: list[Tensor] = []

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._world_size

    def all_gather(self, x: Tensor) -> Tensor:
        return torch.cat(self.shards)


def bench_throughput(device: torch.device, repeats: int, tokens: int, hidden: int) -> None:
    # One thread: the copies are memory-bound, and on a shared small machine a multi-threaded
    # copy waits a scheduler tick for any thread whose core is taken, timing the neighbours.
    torch.set_num_threads(1)
    dtype = torch.bfloat16
    lens = request_mix(seed=1).extend_lens
    scale = tokens / sum(lens)
    ext = tuple(max(1, round(n * scale)) for n in lens)
    batch = CPBatch(ext, (0,) * len(ext))
    x = torch.randn(batch.num_tokens, hidden, device=device).to(dtype)
    gb = x.numel() * x.element_size() / 1e9
    print(
        f"## 2. Shard + gather throughput ({batch.num_tokens} tokens x {hidden} bf16 = "
        f"{gb * 1e3:.0f} MB, {device.type}, one torch thread, median of {repeats})\n\n"
        "shard: every rank's shard_hidden_states (index_select into a zero-padded buffer), "
        "the bytes of x in total; gather: one rank's gather_hidden_states (the all-gather's "
        "local copy of every padded shard, then one index_select); baseline: torch.cat of "
        "the same bytes split in cp pieces.\n"
    )
    print(
        "| strategy | cp | shard GB/s | gather GB/s | torch.cat GB/s | shard / cat | gather / cat |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for cp in (2, 4, 8):
        pieces = list(torch.chunk(x, cp))
        t_cat = median_seconds(
            synced(lambda pieces=pieces: torch.cat(pieces), device), repeats, warmup=1
        )
        for cls in STRATEGIES:
            comms = [ReplayComm(r, cp) for r in range(cp)]
            ranks = [cls(cp, comm=c) for c in comms]
            prepared = ranks[0].prepare(batch)
            shards = [s.shard_hidden_states(x, prepared) for s in ranks]
            for c in comms:
                c.shards = shards

            def shard_all(ranks: list[CPStrategy] = ranks, b: CPBatch = prepared) -> None:
                for s in ranks:
                    s.shard_hidden_states(x, b)

            def gather_one(
                s: CPStrategy = ranks[0], b: CPBatch = prepared, mine: Tensor = shards[0]
            ) -> Tensor:
                return s.gather_hidden_states(mine, b)

            assert torch.equal(gather_one(), x)
            t_shard = median_seconds(synced(shard_all, device), repeats, warmup=1)
            t_gather = median_seconds(synced(gather_one, device), repeats, warmup=1)
            print(
                f"| {cls.name} | {cp} | {gb / t_shard:.2f} | {gb / t_gather:.2f} | "
                f"{gb / t_cat:.2f} | {t_cat / t_shard:.2f} | {t_cat / t_gather:.2f} |"
            )
    print()


# ---- 3. CP attention over real process groups ----------------------------------------------

HEADS, KV_HEADS, DIM = 8, 2, 64
PHASES = ("total", "attention", "comm", "ring_wait")


def attention_batch(quick: bool) -> CPBatch:
    if quick:
        return CPBatch((768, 512, 384, 256), (256, 0, 128, 0))
    return CPBatch((1536, 1024, 768, 512), (512, 0, 256, 0))


def attention_inputs(batch: CPBatch, device: torch.device) -> dict[str, Tensor]:
    gen = torch.Generator().manual_seed(0)
    t, p = batch.num_tokens, sum(batch.prefix_lens)
    shapes = {"q": (t, HEADS), "k": (t, KV_HEADS), "v": (t, KV_HEADS)}
    shapes |= {"prefix_k": (p, KV_HEADS), "prefix_v": (p, KV_HEADS)}
    return {n: torch.randn(*s, DIM, generator=gen).to(device) for n, s in shapes.items()}


def single_process_attention(batch: CPBatch, x: dict[str, Tensor]) -> Tensor:
    """The same tokens without CP: one sequence per request over the full KV."""
    kv = LayerKV.from_prefix(batch, x["prefix_k"], x["prefix_v"])
    kv.write_extend(x["k"], x["v"])
    dev = x["q"].device
    cu = torch.tensor([0, *batch.extend_lens], device=dev).cumsum(0).to(torch.int32)
    kv_lens = torch.tensor(batch.seq_lens, dtype=torch.int32, device=dev)
    fn = causal_attention_fn(kv, torch.arange(batch.bs))
    return fn(x["q"], cu, kv_lens, max(batch.extend_lens))


def cp_forward(
    strategy: CPStrategy, batch: CPBatch, x: dict[str, Tensor]
) -> tuple[dict[str, float], Tensor]:
    """One CP attention layer as an engine runs it: phase times (seconds) and the output."""
    dev = x["q"].device
    sync(dev)
    t0 = time.perf_counter()
    q, k, v = (strategy.shard_hidden_states(x[n], batch) for n in ("q", "k", "v"))
    kv = LayerKV.from_prefix(batch, x["prefix_k"], x["prefix_v"])
    strategy.materialize_full_kv(batch, kv, k, v)
    sync(dev)
    t1 = time.perf_counter()
    local = strategy.run_attention(q, batch, dev, strategy.default_attn_fn(batch, kv))
    sync(dev)
    t2 = time.perf_counter()
    out = strategy.gather_hidden_states(local, batch)
    sync(dev)
    t3 = time.perf_counter()
    # K/V of this forward a rank held: the all-gathered whole, or ring's shard + two in flight
    kv_bytes = (
        strategy.stats.peak_kv_bytes
        if isinstance(strategy, RingStrategy)
        else x["k"].nbytes + x["v"].nbytes
    )
    wait = strategy.stats.wait_seconds if isinstance(strategy, RingStrategy) else 0.0
    phases = {
        "total": t3 - t0,
        "attention": t2 - t1,
        "comm": (t1 - t0) + (t3 - t2),
        "ring_wait": wait,
    }
    return phases | {"kv_bytes": float(kv_bytes)}, out


def attention_worker(
    rank: int,
    world: int,
    init_file: str,
    out_file: str,
    device_type: str,
    quick: bool,
    repeats: int,
) -> None:
    torch.set_num_threads(1)
    device = torch.device(device_type, rank) if device_type == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl" if device.type == "cuda" else "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=300),
    )
    try:
        batch = attention_batch(quick)
        x = attention_inputs(batch, device)
        reference = single_process_attention(batch, x)
        strategies = [cls(world, comm=ProcessGroupComm()) for cls in STRATEGIES]
        # world 1 (one GPU) is outside can_apply but still exact; it times the plumbing
        prepared = [
            s.prepare(batch)
            if s.can_apply(batch.num_tokens, batch)
            else batch.with_metadata(
                s.build_metadata(batch.num_tokens, batch.seq_lens, batch.extend_lens)
            )
            for s in strategies
        ]
        runs: dict[str, list[list[float]]] = {s.name: [] for s in strategies}
        errors: dict[str, float] = {}
        kv_held: dict[str, float] = {}
        single: list[float] = []
        # Round-robin over the strategies and the single-process baseline, so that a slow spell
        # of this shared machine lands on all of them rather than on one.
        for i in range(repeats + 1):
            for strategy, b in zip(strategies, prepared, strict=True):
                dist.barrier()
                phases, out = cp_forward(strategy, b, x)
                if i == 0:  # warm-up; its output is checked against the single-process answer
                    errors[strategy.name] = float((out - reference).abs().max())
                    continue
                kv_held[strategy.name] = phases["kv_bytes"]
                slowest = torch.tensor([phases[k] for k in PHASES])
                dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
                runs[strategy.name].append(slowest.tolist())
            dist.barrier()
            if rank == 0:  # the other ranks wait at the barrier below
                sync(device)
                t0 = time.perf_counter()
                single_process_attention(batch, x)
                sync(device)
                if i > 0:
                    single.append(time.perf_counter() - t0)
            dist.barrier()
        if rank == 0:
            results = {
                name: {k: statistics.median(r[j] for r in rs) for j, k in enumerate(PHASES)}
                | {"max_abs_err": errors[name], "kv_bytes": kv_held[name]}
                for name, rs in runs.items()
            }
            with open(out_file, "w") as f:
                json.dump({"single": statistics.median(single), "strategies": results}, f)
    finally:
        dist.destroy_process_group()


def bench_attention(device: torch.device, worlds: list[int], quick: bool, repeats: int) -> None:
    batch = attention_batch(quick)
    backend = "nccl" if device.type == "cuda" else "gloo"
    print(
        f"## 3. CP attention over {backend} vs single-process attention ({device.type})\n\n"
        f"{batch.bs} requests, extend {list(batch.extend_lens)}, prefix "
        f"{list(batch.prefix_lens)}; {HEADS} heads, {KV_HEADS} kv heads, head dim {DIM}, fp32; "
        f"one torch thread per process, {os.cpu_count()} cores on this machine. Time per "
        "layer: shard q/k/v + all-gather K/V (comm), run_attention (attention), gather output "
        f"(comm); slowest rank, median of {repeats}. Baseline (1 proc): the same attention "
        "without CP, run by rank 0 of the same spawn while the others wait, alternating with "
        "the CP runs. ring: no all-gather, K/V shards passed around inside run_attention "
        "(counted as attention). KV MB/rank: the forward's K/V a rank holds (all-gather: all of "
        "it; ring: its shard plus the two in flight, by the strategy's own accounting); goal = "
        "total / cp + 2 shards. ring wait: host time ring spent waiting for the next shard "
        "after computing on the current one (inside attention; near 0 when the transfer "
        "overlaps). × zigzag: total time over zigzag's at the same world, same spawn.\n"
    )
    print(
        "| strategy | world | 1 proc ms | total ms | attention ms | comm ms | "
        "speed-up vs 1 proc | attention speed-up | ring wait ms | × zigzag | KV MB/rank | "
        "goal MB | max abs err |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for world in worlds:
        if device.type == "cuda" and torch.cuda.device_count() < world:
            have = torch.cuda.device_count()
            print(f"| (skipped) | {world} | NCCL needs {world} GPUs, {have} here |")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out_file = os.path.join(tmp, "results.json")
            mp.spawn(
                attention_worker,
                args=(world, os.path.join(tmp, "init"), out_file, device.type, quick, repeats),
                nprocs=world,
                join=True,
            )
            with open(out_file) as f:
                results = json.load(f)
        single = results["single"]
        total_kv = 2 * batch.num_tokens * KV_HEADS * DIM * 4
        shard = total_kv / world
        goal = shard * 3 if world > 1 else shard
        zigzag_total = results["strategies"]["zigzag"]["total"]
        for name, r in results["strategies"].items():
            wait = f"{r['ring_wait'] * 1e3:.1f}" if name == "ring" else "-"
            print(
                f"| {name} | {world} | {single * 1e3:.1f} | {r['total'] * 1e3:.1f} | "
                f"{r['attention'] * 1e3:.1f} | {r['comm'] * 1e3:.1f} | "
                f"{single / r['total']:.2f} | {single / r['attention']:.2f} | {wait} | "
                f"{r['total'] / zigzag_total:.2f} | "
                f"{r['kv_bytes'] / 2**20:.2f} | {goal / 2**20:.2f} | "
                f"{r['max_abs_err']:.1e} |"
            )
    print()


# ---- 5. the peer check's cost -----------------------------------------------------------------


def peer_check_worker(
    rank: int, world: int, init_file: str, out_file: str, repeats: int, rows: int
) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=300),
    )
    try:
        on, off = ProcessGroupComm(check=True), ProcessGroupComm(check=False)
        shard = torch.randn(rows, KV_HEADS, DIM)
        small = torch.randn(1, KV_HEADS, DIM)
        # every rank calls them in the same order, so the collectives pair up
        medians = interleaved_medians(
            {
                "shard on": lambda: on.all_gather(shard),
                "shard off": lambda: off.all_gather(shard),
                "small on": lambda: on.all_gather(small),
                "small off": lambda: off.all_gather(small),
            },
            repeats,
            warmup=3,
        )
        if rank == 0:
            with open(out_file, "w") as f:
                json.dump(medians | {"shard_bytes": shard.nbytes, "small_bytes": small.nbytes}, f)
    finally:
        dist.destroy_process_group()


def bench_peer_check(worlds: list[int], quick: bool, repeats: int) -> None:
    """What `ProcessGroupComm`'s check (on by default for CPU tensors) adds to one
    collective: a small all-gather of every rank's header before it."""
    batch = attention_batch(quick)
    rows = batch.num_tokens // 2  # one rank's K shard of part 3's batch at world 2
    n = repeats * 10
    print(
        f"## 5. ProcessGroupComm's peer check (gloo, cpu)\n\nOne all_gather with check=True "
        "(a header of dtype, shape and plan summary all-gathered first, CPCommError on a "
        f"disagreement) and check=False, timed in turn, rank 0, median of {n}; a K shard of "
        "part 3 (world 2) and a 512-byte tensor.\n"
    )
    print("| world | shard MB | shard on ms | shard off ms | + ms | small on ms | small off ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for world in worlds:
        if world < 2:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out_file = os.path.join(tmp, "results.json")
            mp.spawn(
                peer_check_worker,
                args=(world, os.path.join(tmp, "init"), out_file, n, rows),
                nprocs=world,
                join=True,
            )
            with open(out_file) as f:
                m = json.load(f)
        print(
            f"| {world} | {m['shard_bytes'] / 1e6:.2f} | {m['shard on'] * 1e3:.2f} | "
            f"{m['shard off'] * 1e3:.2f} | {(m['shard on'] - m['shard off']) * 1e3:.2f} | "
            f"{m['small on'] * 1e3:.2f} | {m['small off'] * 1e3:.2f} |"
        )
    print()


# ---- 4. plan time ---------------------------------------------------------------------------


def reference_permutation(extend_lens: Sequence[int], cp: int) -> Tensor:
    """The baseline a plan is measured against: zigzag's token permutation alone, in a handful
    of tensor operations (owner rank of every token, then one stable sort)."""
    ext = torch.tensor(extend_lens, dtype=torch.long)
    total, nb = int(ext.sum()), 2 * cp
    req = torch.repeat_interleave(torch.arange(len(ext)), ext, output_size=total)
    pos = torch.arange(total) - (torch.cumsum(ext, 0) - ext)[req]
    base, rem = ext[req] // nb, ext[req] % nb
    big = rem * (base + 1)
    block = torch.where(pos < big, pos // (base + 1), rem + (pos - big) // torch.clamp(base, min=1))
    half = (block >= cp).long()
    rank = torch.where(half == 1, nb - 1 - block, block)
    key = (rank * 2 + half) * (total + 1) + torch.arange(total)
    return torch.argsort(key)


def reference_interleave_plan(
    extend_lens: Sequence[int], prefix_lens: Sequence[int], cp: int
) -> tuple[Tensor, ...]:
    """The baseline interleave's plan is measured against: the same content (every rank's
    tokens, kv lengths and query requests, the gather index, the [cp, B] request counts) in the
    fewest tensor operations, with torch's own repeat_interleave and bincount."""
    ext = torch.tensor(extend_lens, dtype=torch.long)
    pre = torch.tensor(prefix_lens, dtype=torch.long)
    total, bs = int(ext.sum()), len(extend_lens)
    req = torch.repeat_interleave(torch.arange(bs), ext, output_size=total)
    t = torch.arange(total)
    kv = (pre - (torch.cumsum(ext, 0) - ext) + 1)[req] + t
    most = -(-total // cp)
    physical = -(-most // cp) * cp
    rank = t % cp
    gather = rank * physical + t // cp
    counts = torch.bincount(rank * bs + req, minlength=cp * bs).view(cp, bs)
    per_rank = [x[r::cp] for r in range(cp) for x in (t, kv, req)]
    return (gather, counts, *per_rank)


def round_robin_permutation(total: int, cp: int) -> tuple[Tensor, Tensor]:
    """A plain round-robin permutation and its inverse: the least any interleave plan does."""
    t = torch.arange(total)
    perm = torch.cat([t[r::cp] for r in range(cp)])
    inverse = torch.empty_like(perm)
    inverse[perm] = t
    return perm, inverse


def bench_plans(repeats: int, tokens: int = 32768, cp: int = 8) -> None:
    print(
        f"## 4. Plan time per forward ({tokens} tokens, cp {cp}, CPU)\n\n"
        "build_metadata (the plan of every rank, its checks and gather index), same run: median "
        f"of {repeats} of the thread's CPU time (time.thread_time), the six timed in turn within "
        "each repeat, one torch thread; requests of equal length. zigzag and ring × a "
        "vectorised zigzag permutation alone (`reference_permutation`); interleave × "
        "`reference_interleave_plan` (the same content as its plan, vectorised) and × a plain "
        "round-robin permutation with its inverse.\n"
    )
    print(
        "| requests | zigzag perm ms | zigzag ms | × perm | ring ms | × perm | "
        "interleave ref ms | interleave ms | × ref | × round-robin |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # plan building is host work; one thread keeps a shared box steady
    by_name = {cls.name: cls(cp, comm=ReplayComm(0, cp)) for cls in STRATEGIES}
    for bs in (1, 8, 32, 128, 512):
        lens = [tokens // bs] * bs
        zeros = [0] * bs

        def plan(name: str, lens: list[int] = lens) -> Callable[[], object]:
            s = by_name[name]
            return lambda: s.build_metadata(sum(lens), lens)

        m = interleaved_medians(
            {
                "ref": lambda lens=lens: reference_permutation(lens, cp),
                "iref": lambda lens=lens, zeros=zeros: reference_interleave_plan(lens, zeros, cp),
                "rr": lambda lens=lens: round_robin_permutation(sum(lens), cp),
                "zz": plan("zigzag"),
                "ring": plan("ring"),
                "il": plan("interleave"),
            },
            repeats,
            warmup=1,
            # CPU time of this thread (torch at one thread): it does not count the slices
            # other processes of this shared machine take, which wall time on 2 cores at
            # load 10 is dominated by.
            clock=time.thread_time,
        )
        ref, iref, rr, zz, ring, il = (m[k] for k in ("ref", "iref", "rr", "zz", "ring", "il"))
        print(
            f"| {bs} | {ref * 1e3:.2f} | {zz * 1e3:.2f} | {zz / ref:.2f} | {ring * 1e3:.2f} | "
            f"{ring / ref:.2f} | {iref * 1e3:.2f} | {il * 1e3:.2f} | {il / iref:.2f} | "
            f"{il / rr:.2f} |"
        )
    torch.set_num_threads(threads)
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--worlds", default="2,4", help="world sizes for parts 3 and 5, e.g. 2,4")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="smaller tensors")
    # 16 MB: every buffer stays under glibc's 32 MB mmap threshold, so the copies are timed
    # rather than the page faults of a fresh mapping per call
    parser.add_argument("--tokens", type=int, default=8192, help="tokens for part 2")
    parser.add_argument("--hidden", type=int, default=1024, help="hidden size for part 2")
    parser.add_argument("--parts", default="1,2,3,4,5", help="which parts to run, e.g. 2,3")
    args = parser.parse_args()
    device = torch.device(args.device)
    print(
        f"# bench_cp: torch {torch.__version__}, python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start, "
        f"device {args.device}\n"
    )
    parts = {int(p) for p in args.parts.split(",")}
    if 1 in parts:
        bench_balance()
    if 2 in parts:
        bench_throughput(device, args.repeats, args.tokens, args.hidden)
    if 3 in parts:
        worlds = [int(w) for w in args.worlds.split(",")]
        bench_attention(device, worlds, args.quick, args.repeats)
    if 4 in parts:
        bench_plans(args.repeats)
    if 5 in parts and args.device == "cpu":
        bench_peer_check([int(w) for w in args.worlds.split(",")], args.quick, args.repeats)


if __name__ == "__main__":
    main()
