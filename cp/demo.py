"""A causal attention layer run under a meshsat layout, checked against one process.

    torchrun --nproc-per-node 4 -m meshsat.cp.demo --set tp_size=4 --set attn_cp_size=2 \\
        --set enable_prefill_cp=true --set cp_strategy=zigzag
    python -m meshsat.cp.demo --spawn 4 --set tp_size=4 ...      # the same without torchrun
    python -m meshsat.cp.demo --spawn 4 --sglang-version 0.5.19 ...  # that release's rules

Every rank builds the same random layer (8 query heads, 4 KV heads) and batch (requests
with cached prefixes). Heads are split over the attention-TP group (output projection
summed with an all-reduce), tokens over the attention-CP group by the bound strategy; the
gathered output is compared with plain float64 attention computed in one process. Prints
the largest error over all ranks; exits 1 above tolerance (or for an invalid layout),
2 for bad input.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass
from typing import Any, NoReturn, cast

import torch
import torch.distributed as dist
from torch import Tensor

from meshsat.cp.attention import causal_attention_fn
from meshsat.cp.batch import CPBatch
from meshsat.cp.instantiate import LayoutHandle, instantiate
from meshsat.cp.kinds import CPError, CPNotApplicableError
from meshsat.cp.kvcache import LayerKV
from meshsat.solver import Config, InvalidLayoutError, MeshsatError, ModelSpec
from meshsat.solver.errors import InputError
from meshsat.solver.examples import path_of
from meshsat.solver.groups import plan_layout
from meshsat.solver.inputs.convert import coerce, config_from_values
from meshsat.solver.inputs.files import load_config_file
from meshsat.solver.packs import get_pack, known_versions

HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 64, 8, 4, 16
#: The layer's shape as model facts, so validation rejects layouts that cannot split it.
MODEL = ModelSpec(num_attention_heads=HEADS, num_key_value_heads=KV_HEADS)
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 5e-2}
#: What each rank reports to rank 0: (rank, attention-CP group, attention-TP group, error).
RankReport = tuple[int, tuple[int, ...], tuple[int, ...], float]


@dataclass(frozen=True)
class Layer:
    wq: Tensor
    wk: Tensor
    wv: Tensor
    wo: Tensor

    @classmethod
    def random(cls, seed: int) -> Layer:
        gen = torch.Generator().manual_seed(seed)

        def w(rows: int, cols: int) -> Tensor:
            return torch.randn(rows, cols, generator=gen, dtype=torch.float64) / math.sqrt(rows)

        return cls(
            w(HIDDEN, HEADS * HEAD_DIM),
            w(HIDDEN, KV_HEADS * HEAD_DIM),
            w(HIDDEN, KV_HEADS * HEAD_DIM),
            w(HEADS * HEAD_DIM, HIDDEN),
        )


def reference(layer: Layer, batch: CPBatch, x: Tensor, xp: Tensor) -> Tensor:
    """Plain causal attention in float64, one request and one head at a time."""

    def heads(t: Tensor, w: Tensor) -> Tensor:
        # heads counted, not -1: a view cannot infer -1 for zero rows (no cached prefix)
        return (t @ w).view(t.shape[0], w.shape[1] // HEAD_DIM, HEAD_DIM)

    q = heads(x, layer.wq)
    kx, kp, vx, vp = (
        heads(x, layer.wk),
        heads(xp, layer.wk),
        heads(x, layer.wv),
        heads(xp, layer.wv),
    )
    out = torch.zeros(x.shape[0], HEADS, HEAD_DIM, dtype=torch.float64)
    tok = pre = 0
    group = HEADS // KV_HEADS
    for p, n in zip(batch.prefix_lens, batch.extend_lens, strict=True):
        keys = torch.cat([kp[pre : pre + p], kx[tok : tok + n]])
        vals = torch.cat([vp[pre : pre + p], vx[tok : tok + n]])
        visible = torch.ones(n, p + n, dtype=torch.bool).tril(diagonal=p)
        for h in range(HEADS):
            scores = q[tok : tok + n, h] @ keys[:, h // group].T / math.sqrt(HEAD_DIM)
            out[tok : tok + n, h] = (
                scores.masked_fill(~visible, -math.inf).softmax(-1) @ vals[:, h // group]
            )
        tok, pre = tok + n, pre + p
    return out.reshape(-1, HEADS * HEAD_DIM) @ layer.wo


def _head_slices(handle: LayoutHandle) -> tuple[slice, slice]:
    """This rank's query and KV columns: heads split over the attention-TP group, KV heads
    replicated when there are fewer of them than TP ranks (GQA groups stay together)."""
    tp, r = handle.plan.widths.attn_tp, handle.coords.attn_tp
    q_local = HEADS // tp
    if tp <= KV_HEADS:
        kv_first, kv_local = r * (KV_HEADS // tp), KV_HEADS // tp
    else:
        kv_first, kv_local = r // (tp // KV_HEADS), 1
    return (
        slice(r * q_local * HEAD_DIM, (r + 1) * q_local * HEAD_DIM),
        slice(kv_first * HEAD_DIM, (kv_first + kv_local) * HEAD_DIM),
    )


def run_layer(
    handle: LayoutHandle, batch: CPBatch, seed: int, dtype: torch.dtype
) -> tuple[float, bool]:
    """This rank's share of the layer; returns (max |error| against the reference, CP used)."""
    layer = Layer.random(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch.num_tokens, HIDDEN, generator=gen, dtype=torch.float64)
    xp = torch.randn(sum(batch.prefix_lens), HIDDEN, generator=gen, dtype=torch.float64)
    qs, kvs = _head_slices(handle)

    def proj(t: Tensor, w: Tensor, cols: slice) -> Tensor:
        # heads counted, not -1: a view cannot infer -1 for zero rows (no cached prefix)
        heads = (cols.stop - cols.start) // HEAD_DIM
        return (t.to(dtype) @ w[:, cols].to(dtype)).view(t.shape[0], heads, HEAD_DIM)

    strategy = handle.strategy
    try:
        batch = strategy.prepare(batch) if strategy is not None else batch
    except CPNotApplicableError:  # SGLang runs such a forward without CP
        strategy = None
    local_x = strategy.shard_hidden_states(x, batch) if strategy is not None else x
    q, k, v = (
        proj(local_x, layer.wq, qs),
        proj(local_x, layer.wk, kvs),
        proj(local_x, layer.wv, kvs),
    )
    cache = LayerKV.from_prefix(batch, proj(xp, layer.wk, kvs), proj(xp, layer.wv, kvs))
    if strategy is not None:
        strategy.materialize_full_kv(batch, cache, k, v)
        attn = strategy.run_attention(q, batch, q.device, strategy.default_attn_fn(batch, cache))
    else:
        cache.write_extend(k, v)
        attn = causal_attention_fn(cache, torch.arange(batch.bs))(
            q,
            _cumsum(batch.extend_lens),
            torch.tensor(batch.seq_lens, dtype=torch.int32),
            max(batch.extend_lens, default=0),
        )
    out = attn.reshape(attn.shape[0], -1) @ layer.wo[qs, :].to(dtype)
    if handle.plan.widths.attn_tp > 1:
        dist.all_reduce(out, group=handle.groups["attn_tp"])
    full = strategy.gather_hidden_states(out, batch) if strategy is not None else out
    error = (full.double() - reference(layer, batch, x, xp)).abs().max()
    return float(error), strategy is not None


def _cumsum(lens: tuple[int, ...]) -> Tensor:
    return torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)


def _version(text: str) -> str:
    """`--sglang-version`'s value, refused at parse time (exit 2, before any process
    starts) with the CLI's line when no pack has it."""
    if text != "installed":
        try:
            get_pack(text)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return text


class _Parser(argparse.ArgumentParser):
    """Bad input is one line on stderr and exit 2, as meshsat's CLI says it (argparse
    prints its usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = _Parser(
        prog="python -m meshsat.cp.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    ap.add_argument("--config", help="layout file (JSON, YAML or TOML)")
    ap.add_argument("--example", help="an embedded example layout")
    ap.add_argument("--lens", default="96,61,40", help="extend lengths per request")
    ap.add_argument("--prefixes", default="0,17,9", help="cached prefix length per request")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--sglang-version",
        "-V",
        type=_version,
        metavar="VERSION",
        help=f"SGLang release whose rules validate the layout before CP runs: "
        f"{', '.join(known_versions())}, or 'installed'. Default: the installed SGLang's "
        "(the newest pack, said in a note, when none is installed).",
    )
    ap.add_argument(
        "--spawn",
        type=int,
        metavar="N",
        help="start N local processes (gloo) instead of running under torchrun",
    )
    return ap.parse_args(argv)


def _batch(args: argparse.Namespace) -> CPBatch:
    try:
        lens = tuple(int(t) for t in args.lens.split(","))
        prefixes = tuple(int(t) for t in args.prefixes.split(","))
    except ValueError:
        raise MeshsatError("--lens and --prefixes take comma-separated integers") from None
    if len(lens) != len(prefixes) or min((*lens, *prefixes), default=0) < 0:
        raise MeshsatError("--lens and --prefixes need the same count of non-negative integers")
    return CPBatch(lens, prefixes)


def load_config(args: argparse.Namespace) -> Config:
    """The layout from --example, then --config, then --set, through `meshsat.solver.inputs` (the
    CLI
    is a floor above `cp`). A layout file's `model:` entry is dropped: the demo's layer has
    its own shape (MODEL)."""
    values: dict[str, Any] = {}
    if args.example is not None:
        values.update(load_config_file(path_of(args.example)))
    if args.config is not None:
        values.update(load_config_file(args.config))
    values.pop("model", None)
    for item in args.set or []:
        name, eq, text = item.partition("=")
        if not eq or not name.strip():
            raise InputError(f"--set expects FIELD=VALUE, got {item!r}")
        key = name.strip().replace("-", "_")
        values[key] = coerce(key, text)
    return config_from_values(values)


def worker(args: argparse.Namespace) -> int:
    """One rank: instantiate the layout, run the layer, report; returns the exit status."""
    rank = dist.get_rank()
    dtype = getattr(torch, args.dtype)
    caught: list[warnings.WarningMessage] = []
    try:
        # Every rank validates the layout and would warn alike (e.g. no SGLang installed, so
        # the newest pack's rules): rank 0 says it once, as a note line, not N tracebacks;
        # a rejected layout too, since the note names the rules that rejected it.
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                handle = instantiate(
                    load_config(args), model=MODEL, sglang_version=args.sglang_version
                )
        finally:
            if rank == 0:
                for text in dict.fromkeys(str(w.message) for w in caught):
                    print(f"note: {text}", file=sys.stderr)
        error, used_cp = run_layer(handle, _batch(args), args.seed, dtype)
    except (MeshsatError, CPError) as exc:
        if rank == 0:
            _say(exc)
        return _status(exc)
    mine: RankReport = (rank, handle.members["attn_cp"], handle.members["attn_tp"], error)
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine)
    reports = [cast(RankReport, r) for r in gathered]
    worst = max(r[3] for r in reports)
    if rank == 0:
        w = handle.plan.widths
        kind = handle.strategy.name if used_cp and handle.strategy is not None else "none"
        print(
            f"layout: {w.world} ranks; attention dp {w.attn_dp} · cp {w.attn_cp} · tp "
            f"{w.attn_tp}; CP strategy {kind}; batch {args.lens} (prefixes {args.prefixes}), "
            f"{args.dtype}"
        )
        for r, cp_group, tp_group, err in reports:
            print(
                f"  rank {r}: attention-CP group {list(cp_group)}, attention-TP group "
                f"{list(tp_group)}, max |error| {err:.2e}"
            )
        tol = TOLERANCE[dtype]
        verdict = "OK" if worst <= tol else "ABOVE TOLERANCE"
        print(f"max |error| over all ranks: {worst:.3e} (tolerance {tol:.0e}): {verdict}")
    return 0 if worst <= TOLERANCE[dtype] else 1


def _spawned(rank: int, world: int, init_file: str, args: argparse.Namespace) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        code = worker(args)
    finally:
        dist.destroy_process_group()
    if code:
        sys.exit(code)


def _say(exc: BaseException) -> None:
    """The error as one line: the validator's message lists its rules on lines of their own."""
    parts = [p.strip() for p in str(exc).splitlines() if p.strip()]
    last = len(parts) - 1
    text = " ".join(p if p.endswith(":") or i == last else p + ";" for i, p in enumerate(parts))
    print(f"meshsat.cp.demo: error: {text}", file=sys.stderr)


def _status(exc: BaseException) -> int:
    return 1 if isinstance(exc, InvalidLayoutError) else 2


def _checked(args: argparse.Namespace) -> int:
    """The layout and batch checked before any process starts (an invalid layout or a
    process count other than its GPU count fails at once, not after N interpreters load
    torch); 0 when they hold. The ranks check them again, as torchrun's must."""
    try:
        with warnings.catch_warnings():  # the ranks say them, once
            warnings.simplefilter("ignore")
            planned = plan_layout(load_config(args), MODEL, sglang_version=args.sglang_version)
        _batch(args)
    except MeshsatError as exc:
        _say(exc)
        return _status(exc)
    needed = planned.rank_map.widths.world
    if needed != args.spawn:
        print(
            f"meshsat.cp.demo: error: the layout uses {needed} GPU(s) (gpus_used); --spawn "
            f"starts {args.spawn} process(es)",
            file=sys.stderr,
        )
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    torch.set_num_threads(1)
    if args.spawn is not None:
        if args.spawn < 1:
            print("meshsat.cp.demo: error: --spawn needs a positive process count", file=sys.stderr)
            return 2
        if code := _checked(args):
            return code
        # Plain processes, not torch.multiprocessing.spawn: its join kills the other ranks
        # at the first non-zero exit, and every rank must finish its collectives.
        context = torch.multiprocessing.get_context("spawn")
        with tempfile.TemporaryDirectory() as tmp:
            init_file = os.path.join(tmp, "rendezvous")
            procs = [
                context.Process(target=_spawned, args=(r, args.spawn, init_file, args))
                for r in range(args.spawn)
            ]
            for proc in procs:
                proc.start()
            for proc in procs:
                proc.join()
        return max(proc.exitcode or 0 for proc in procs)
    if "RANK" not in os.environ:
        print("meshsat.cp.demo: error: run under torchrun, or pass --spawn N", file=sys.stderr)
        return 2
    dist.init_process_group("gloo")
    try:
        return worker(args)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
