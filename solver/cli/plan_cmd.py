"""`meshsat plan`: the legal layouts that fit a model on N GPUs, best KV capacity first.

Why here and not in `enumerate`: planning joins three answers (legal, fits, how much KV cache)
and ranks them; `enumerate` lists. The ranking is stated in every output because it is a
choice: total KV-cache tokens of the deployment first (more concurrent context), then fewer
GPUs in attention-TP and EP groups that span nodes (those groups talk every layer). No
throughput or communication-time estimate is made.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Annotated, Any

import typer

from meshsat import solver
from meshsat.solver.cli.emit_options import EmitOpt, ImageOpt, NameOpt, print_lws
from meshsat.solver.cli.output import emit_json, note, out
from meshsat.solver.errors import InputError
from meshsat.solver.groups import Widths
from meshsat.solver.groups import plan as rank_plan
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import MemoryModel, Parallel
from meshsat.solver.memory.gpus import Gpu, custom_gpu, gpu
from meshsat.solver.memory.models import model_config
from meshsat.solver.repair.fix import command_line

RANKING = (
    "ranked by total KV-cache tokens (all attention-DP pools and replicas), then by fewest GPUs "
    "in attention-TP and EP groups that span nodes; throughput and communication time are not "
    "modelled"
)


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


@dataclass(frozen=True)
class PlanRow:
    """One fitting layout with its memory and locality figures (plain values)."""

    rank: int
    tp: int
    pp: int
    dp: int
    dp_attention: bool
    ep: int
    attn_tp: int
    moe_tp: int
    weights_gib: float
    kv_tokens_per_pool: int
    pools: int
    total_kv_tokens: int
    max_requests: int
    node_crossing_gpus: int
    command: str


def crossing_gpus(resolved: Mapping[str, Any], gpus_per_node: int) -> int:
    """GPUs that sit in an attention-TP or EP group spanning more than one node."""
    w = Widths.of({**resolved, "gpus_per_node": gpus_per_node})
    rm = rank_plan(w)
    node = {r.rank: r.node for r in rm.ranks}
    total = 0
    for kind in ("attn_tp", "ep"):
        for g in rm.groups.get(kind, ()):
            if len({node[x] for x in g}) > 1:
                total += len(g)
    return total


def plan_layouts(
    model: str,
    g: Gpu,
    gpus: int,
    *,
    context_length: int = 4096,
    gpus_per_node: int | None = None,
    top: int = 20,
) -> list[PlanRow]:
    """The `top` best legal layouts on `gpus` GPUs that load, ranked as `RANKING` says."""
    config = model_config(model)
    spec = ModelSpec.from_hf_config(config)
    mm = MemoryModel(config, g, context_length=context_length)
    per_node = gpus_per_node or min(g.fabric, gpus) or 1
    fitting = []
    for lay in solver.enumerate(gpus, model=spec):
        m = mm.of(Parallel.from_resolved(lay.config, lay.derived))
        if m.fits:
            fitting.append((m.max_total_num_tokens * m.pools, lay, m))
    fitting.sort(key=lambda t: -t[0])
    if not fitting:
        return []
    # Crossing is the second key: compute it only where capacity ties could reach the top.
    cut = fitting[min(top, len(fitting)) - 1][0]
    scored = []
    for cap, lay, m in fitting:
        if cap < cut:
            break
        cfg = lay.config
        scored.append((-cap, crossing_gpus(cfg, per_node), lay, m))
    scored.sort(key=lambda t: (t[0], t[1]))
    rows = []
    for i, (neg_cap, cross, lay, m) in enumerate(scored[:top], 1):
        c, d = lay.config, lay.derived
        rows.append(
            PlanRow(
                rank=i,
                tp=c["tp_size"],
                pp=c["pp_size"],
                dp=c["dp_size"],
                dp_attention=bool(c["enable_dp_attention"]),
                ep=c["ep_size"],
                attn_tp=d["attn_tp"],
                moe_tp=d["moe_tp"],
                weights_gib=round(m.weights_gib, 2),
                kv_tokens_per_pool=m.max_total_num_tokens,
                pools=m.pools,
                total_kv_tokens=-neg_cap,
                max_requests=m.max_requests,
                node_crossing_gpus=cross,
                command=command_line(lay.as_config()),
            )
        )
    return rows


ModelArg = Annotated[
    str,
    typer.Option(
        "--model", "-m", help="A config.json path or an embedded repo id (deepseek-ai/DeepSeek-V3)."
    ),
]
GpuArg = Annotated[
    str | None, typer.Option("--gpu", help="GPU type (H100, H200, B200, MI300X, ...).")
]
GpuMemArg = Annotated[
    str | None, typer.Option("--gpu-memory", help="GPU memory instead of --gpu, e.g. 80GiB.")
]
GpusArg = Annotated[int, typer.Option("--gpus", "-n", min=1, help="GPUs to fill exactly.")]
CtxArg = Annotated[
    int, typer.Option("--context-length", min=1, help="Tokens per request, for max_requests.")
]
PerNodeArg = Annotated[
    int | None,
    typer.Option("--gpus-per-node", min=1, help="GPUs per node [default: the GPU's fabric size]."),
]
TopArg = Annotated[int, typer.Option("--top", min=1, help="How many layouts to show.")]
FormatArg = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]
PickArg = Annotated[
    int, typer.Option("--pick", min=1, metavar="K", help="With --emit: the K-th ranked layout.")
]


def plan_cmd(
    model: ModelArg,
    gpus: GpusArg,
    gpu_name: GpuArg = None,
    gpu_memory: GpuMemArg = None,
    context_length: CtxArg = 4096,
    gpus_per_node: PerNodeArg = None,
    top: TopArg = 20,
    fmt: FormatArg = Format.table,
    emit: EmitOpt = None,
    pick: PickArg = 1,
    image: ImageOpt = "lmsysorg/sglang:latest",
    name: NameOpt = "sglang",
) -> None:
    """Legal layouts that fit MODEL on N GPUs, most KV cache first, with SGLang commands.

    Exit status: 0 at least one layout fits, 1 none, 2 bad input.

    Examples:

    \b
      meshsat plan --model deepseek-ai/DeepSeek-V3 --gpu H200 --gpus 16
      meshsat plan --model deepseek-ai/DeepSeek-V3 --gpu H200 --gpus 16 --emit lws > lws.yaml
    """
    if (gpu_name is None) == (gpu_memory is None):
        raise InputError("give exactly one of --gpu or --gpu-memory")
    g = gpu(gpu_name) if gpu_name is not None else custom_gpu(str(gpu_memory))
    rows = plan_layouts(
        model, g, gpus, context_length=context_length, gpus_per_node=gpus_per_node, top=top
    )
    if emit is not None and rows:
        if pick > len(rows):
            raise InputError(f"--pick {pick}: only {len(rows)} layout(s) ranked (raise --top)")
        per_node = gpus_per_node or min(g.fabric, gpus) or 1
        print_lws(rows[pick - 1].command, gpus, per_node, model_path=model, name=name, image=image)
        return
    if fmt is Format.json:
        emit_json({"ranking": RANKING, "gpu": g.name, "layouts": [asdict(r) for r in rows]})
    elif fmt is Format.csv:
        note(RANKING)
        fields = list(PlanRow.__dataclass_fields__)
        w = csv.writer(sys.stdout)
        w.writerow(fields)
        for r in rows:
            w.writerow([getattr(r, f) for f in fields])
    else:
        note(RANKING)
        head = "rank  tp  pp  dp  dpa  ep  attn_tp  weights_gib  total_kv_tokens  max_req  cross"
        out.print(head, markup=False)
        for r in rows:
            out.print(
                f"{r.rank:>4}  {r.tp:>2}  {r.pp:>2}  {r.dp:>2}  {'y' if r.dp_attention else 'n':>3}"
                f"  {r.ep:>2}  {r.attn_tp:>7}  {r.weights_gib:>11.2f}  {r.total_kv_tokens:>15,}"
                f"  {r.max_requests:>7}  {r.node_crossing_gpus:>5}\n      {r.command}",
                markup=False,
            )
    if not rows:
        note(f"no legal layout of {model} fits {gpus} x {g.name}")
        raise typer.Exit(1)
