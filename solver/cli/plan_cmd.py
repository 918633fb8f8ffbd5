"""`meshsat plan`: the legal layouts that fit a model on N GPUs, best KV capacity first.

Why here and not in `enumerate`: planning joins three answers (legal, fits, how much KV cache)
and ranks them; `enumerate` lists. The ranking is stated in every output because it is a
choice: total KV-cache tokens of the deployment first (more concurrent context), then fewer
GPUs in attention-TP and EP groups that leave one NVLink domain (those groups talk every
layer; a GB200 NVL72 rack is one domain of 18 hosts, a PCIe L40S server has none). No
throughput or communication-time estimate is made.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

import meshsat.solver.cli.plan_disagg as plan_disagg
import meshsat.solver.cli.plan_perf as plan_perf
from meshsat import solver
from meshsat.solver.cli.deadline import time_limit
from meshsat.solver.cli.disagg_emit import disagg_manifest
from meshsat.solver.cli.emit_options import EmitOpt, ImageOpt, NameOpt, lws_for
from meshsat.solver.cli.enumerate_cmd import WhereOpt
from meshsat.solver.cli.formats import OutputFormat, chosen, write_csv
from meshsat.solver.cli.layout_options import JsonOpt
from meshsat.solver.cli.memory_options import (
    FreeMemoryOpt,
    MemFractionOpt,
    QuantizationOpt,
    checkpoint_line,
    report_pack,
    sizing_options,
)
from meshsat.solver.cli.node_launch import LaunchCheck, fabric_size, node_size
from meshsat.solver.cli.output import emit_json, note, out, quant_note
from meshsat.solver.cli.perf_options import (
    DisaggOpt,
    EngineChoice,
    EngineOpt,
    IslOpt,
    NoSlaOpt,
    OslOpt,
    PlotOpt,
    Rank,
    RankOpt,
    TpotOpt,
    TtftOpt,
)
from meshsat.solver.cli.plan_disagg import DisaggRow
from meshsat.solver.cli.plan_perf import PerfRow, Planned, plan_given
from meshsat.solver.cli.version_option import SglangVersionOpt
from meshsat.solver.enumeration.node_locality import spanning_gpus
from meshsat.solver.errors import InputError
from meshsat.solver.groups import Widths
from meshsat.solver.inputs.command import model_path_of
from meshsat.solver.lang.limits import MAX_GPUS, MAX_PLAN_TOP, shown
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import MemoryModel
from meshsat.solver.memory.gpus import Gpu, custom_gpu, gpu
from meshsat.solver.memory.models import model_config
from meshsat.solver.memory.quantized_checkpoints import with_quantization_flag
from meshsat.solver.perf import Workload
from meshsat.solver.perf.context import checked_context_length
from meshsat.solver.perf.disagg import DisaggSearch
from meshsat.solver.perf.ranking import memory_shape
from meshsat.solver.perf.workload import cli_workload

RANKING = (
    "ranked by total KV-cache tokens (all attention-DP pools and replicas), then by fewest GPUs "
    "in attention-TP and EP groups that leave one NVLink domain; throughput and communication "
    "time are not modelled"
)
#: The groups that talk every layer, whose node-spanning GPUs are the second ranking key.
CROSSING_KINDS = ("attn_tp", "ep")


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


@dataclass(frozen=True)
class PlanRow(plan_perf.LayoutRow):
    """One fitting layout with its memory and locality figures (plain values)."""

    weights_gib: float
    kv_tokens_per_pool: int
    pools: int
    total_kv_tokens: int
    max_requests: int
    node_crossing_gpus: int
    command: str
    #: How `command` runs on nodes (`plan_perf.PerfRow`'s same fields).
    servers: int
    nodes_per_server: int
    gpus_per_node: int
    node_command: str


def crossing_gpus(resolved: Mapping[str, Any], gpus_per_node: int) -> int:
    """GPUs that sit in an attention-TP or EP group spanning more than one scale-up domain
    of `gpus_per_node` (`fabric_size`; a GPU in both counts twice), from the widths alone
    (`spanning_gpus`): no rank map is built."""
    w = Widths.of({**resolved, "gpus_per_node": gpus_per_node})
    return sum(spanning_gpus(w, kind) for kind in CROSSING_KINDS)


def check_plan_args(gpus: int, top: int, gpus_per_node: int | None) -> None:
    """The documented bounds (`meshsat.solver.lang.limits`), refused before any work."""
    if gpus > MAX_GPUS:
        raise InputError(f"--gpus {shown(gpus)} is above the limit of {MAX_GPUS} GPUs")
    if gpus_per_node is not None and gpus_per_node > MAX_GPUS:
        raise InputError(f"--gpus-per-node {shown(gpus_per_node)} is above the limit of {MAX_GPUS}")
    if top > MAX_PLAN_TOP:
        raise InputError(f"--top {shown(top)} is above the limit of {MAX_PLAN_TOP} layouts")


#: Called after every enumerated layout with (layouts examined, layouts that fit); it may
#: raise to stop the work (the web app's Cancel button and deadline).
Progress = Callable[[int, int], None]


def _fitting(
    spec: ModelSpec,
    mm: MemoryModel,
    gpus: int,
    where: Iterable[str] = (),
    sglang_version: str | None = None,
    progress: Progress | None = None,
    given: Mapping[str, Any] | None = None,
) -> list[tuple[int, solver.Layout]]:
    """(total KV tokens, layout) of every legal layout that loads, from the memory model's
    streaming columns (`MemoryModel.row_reader`): a few multiplications a layout where a
    whole `Memory` costs tens of µs (876 DeepSeek-V3 layouts at 2^20 GPUs)."""
    fitting = []
    read = None
    layouts = solver.enumerate(
        gpus, base=given, model=spec, where=where, sglang_version=sglang_version
    )
    for seen, lay in enumerate(layouts, 1):
        if read is None:
            shape = lay.shape
            # Each layout sized by its own resolved flags, as validate sizes it.
            read = mm.row_reader(
                shape.config_index, shape.constant, shape.derived_index,
                typed=given or {}, vary=shape.vary,
            )  # fmt: skip
        _weights, kv_tokens, _requests, fits = read(lay.row)
        if fits:
            c, d = lay.config, lay.derived
            # The whole deployment: each attention-DP pool of each replica holds
            # max_total_num_tokens = kv_tokens · dcp (`MemoryModel.of`).
            fitting.append((kv_tokens * c["dcp_size"] * d["attn_dp"] * d["replicas"], lay))
        if progress is not None:
            progress(seen, len(fitting))
    return fitting


def _launchable_head(
    ranked: list[tuple[int, solver.Layout]],
    top: int,
    check: LaunchCheck,
    shape: Callable[[solver.Layout], Hashable],
) -> list[tuple[int, solver.Layout]]:
    """The layouts of `ranked` (by capacity, best first) whose launch on nodes SGLang
    accepts (`LaunchCheck`), down to the `top`-th one's capacity (its ties stay: crossing
    orders them): checking every layout of a large count would cost seconds, the head
    milliseconds. One layout per `shape`, the first that launches: layouts that differ
    only in flags the memory model does not read (`--enable-prefill-cp` at CP width 1, an
    expert width of a dense model) hold the same KV cache, and `perf.ranking` lists them
    once too."""
    head: list[tuple[int, solver.Layout]] = []
    seen: set[Hashable] = set()
    for cap, lay in ranked:
        if len(head) >= top and cap < head[top - 1][0]:
            break
        key = shape(lay)
        if key not in seen and check(lay):
            seen.add(key)
            head.append((cap, lay))
    return head


def plan_layouts(
    model: str | Mapping[str, Any],
    g: Gpu,
    gpus: int,
    *,
    context_length: int | None = None,
    gpus_per_node: int | None = None,
    top: int = 20,
    where: Iterable[str] = (),
    sglang_version: str | None = None,
    progress: Progress | None = None,
    model_path: str | None = None,
    quantization: str | None = None,
    **memory: Any,
) -> list[PlanRow]:
    """The `top` best legal layouts on `gpus` GPUs that load, ranked as `RANKING` says.

    `model`: a config.json path, an embedded repo id or a config already read (the web app
    takes pasted configs and never reads a path); `context_length`: the tokens of a request
    for `max_requests` (`checked_context_length`: refused beyond the model's, default 4096
    or the model's where shorter); `where`: `enumerate`'s filters; `memory`:
    further `MemoryModel` options, e.g. mem_fraction_static, context_gib; `model_path`: the
    `--model-path` the commands name (default: from `model`); `quantization`: SGLang's
    `--quantization`, set on every layout and priced as `validate` prices it."""
    check_plan_args(gpus, top, gpus_per_node)
    config = model if isinstance(model, Mapping) else model_config(model)
    named = (model_path or "the model") if isinstance(model, Mapping) else model
    context_length = checked_context_length(config, context_length, named)
    given = plan_given(quantization, g)
    spec = ModelSpec.from_hf_config(config)
    quant_note(spec.quant_not_checked)
    mm = MemoryModel(
        with_quantization_flag(config, given.get("quantization")),
        g,
        context_length=context_length,
        # The release's own memory defaults, as `validate --gpu` sizes its pool.
        **{"pack": report_pack(sglang_version), **memory},
    )
    per_node = node_size(g, gpus, gpus_per_node)
    fabric = fabric_size(g, gpus, gpus_per_node)
    fitting = _fitting(spec, mm, gpus, where, sglang_version, progress, given)
    fitting.sort(key=lambda t: -t[0])
    fitting = _launchable_head(
        fitting, top, LaunchCheck(gpus, per_node, spec, given, sglang_version),
        lambda lay: memory_shape(mm, lay.config, lay.derived),
    )  # fmt: skip
    if not fitting:
        return []
    # Crossing is the second key: compute it only where capacity ties could reach the top.
    cut = fitting[min(top, len(fitting)) - 1][0]
    scored = []
    for cap, lay in fitting:
        if cap < cut:
            break
        scored.append((-cap, crossing_gpus(lay.config, fabric), lay))
    scored.sort(key=lambda t: (t[0], t[1]))
    if model_path is None and not isinstance(model, Mapping):
        model_path = model_path_of(model)
    rows = []
    for i, (neg_cap, cross, lay) in enumerate(scored[:top], 1):
        c, d = lay.config, lay.derived
        m = mm.of_layout(c, d, {**given, **lay.values})
        rows.append(
            PlanRow(
                rank=i,
                **plan_perf.layout_columns(c, d),
                weights_gib=round(m.weights_gib, 2),
                kv_tokens_per_pool=m.max_total_num_tokens,
                pools=m.pools,
                total_kv_tokens=-neg_cap,
                max_requests=m.max_requests,
                node_crossing_gpus=cross,
                **plan_perf.node_fields(
                    plan_perf.layout_command(
                        lay.values,
                        m,
                        sglang_version,
                        model_path=model_path,
                        given=given,
                        fraction=mm.fraction,
                    ),
                    gpus,
                    per_node,
                    model_path,
                ),
            )
        )
    return rows


def plan_gpu(gpu_name: str | None, gpu_memory: str | None) -> Gpu:
    """The GPU of `--gpu NAME` or `--gpu-memory SIZE` (exactly one)."""
    if (gpu_name is None) == (gpu_memory is None):
        raise InputError("give exactly one of --gpu or --gpu-memory")
    return gpu(gpu_name) if gpu_name is not None else custom_gpu(str(gpu_memory))


def plan_document(rows: Iterable[PlanRow], planned: Planned, context_length: int) -> dict[str, Any]:
    """`meshsat plan --rank kv --format json`'s document (and the web API's `/api/plan`):
    what was planned, with the request length `max_requests` counts (`plan_layouts`)."""
    return {
        "ranking": RANKING,
        **asdict(planned),
        "context_length": context_length,
        "layouts": [asdict(r) for r in rows],
    }


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
    int | None,
    typer.Option(
        "--context-length",
        min=1,
        metavar="TOKENS",
        help="With --rank kv: tokens per request, for max_requests; at most the model's "
        "context length [default: 4096, or the model's context length where shorter].",
        show_default=False,
    ),
]
PerNodeArg = Annotated[
    int | None,
    typer.Option(
        "--gpus-per-node",
        min=1,
        help="GPUs per node, the host a launch's --nnodes counts [default: one host's, 4 for "
        "GB200/GB300 (a compute tray), else 8].",
    ),
]
TopArg = Annotated[
    int, typer.Option("--top", min=1, help=f"How many layouts to show (at most {MAX_PLAN_TOP}).")
]
TimeoutArg = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        metavar="S",
        help="Stop with exit 2 after S seconds (default: no limit).",
        show_default=False,
    ),
]
FormatArg = Annotated[
    Format | None,
    typer.Option(
        "--format", "-f", help="Output format: table (default), json or csv.", show_default=False
    ),
]
PickArg = Annotated[
    int, typer.Option("--pick", min=1, metavar="K", help="With --emit: the K-th ranked layout.")
]


def plan_cmd(
    model: ModelArg,
    gpus: GpusArg,
    gpu_name: GpuArg = None,
    gpu_memory: GpuMemArg = None,
    context_length: CtxArg = None,
    gpus_per_node: PerNodeArg = None,
    top: TopArg = 20,
    fmt: FormatArg = None,
    as_json: JsonOpt = False,
    mem_fraction_static: MemFractionOpt = None,
    free_memory: FreeMemoryOpt = None,
    timeout: TimeoutArg = None,
    rank: RankOpt = Rank.perf,
    isl: IslOpt = 1024,
    osl: OslOpt = 1024,
    ttft: TtftOpt = None,
    tpot: TpotOpt = None,
    no_sla: NoSlaOpt = False,
    engine: EngineOpt = EngineChoice.auto,
    plot: PlotOpt = None,
    where: WhereOpt = None,
    sglang_version: SglangVersionOpt = None,
    emit: EmitOpt = None,
    pick: PickArg = 1,
    image: ImageOpt = "lmsysorg/sglang:latest",
    name: NameOpt = "sglang",
    disagg: DisaggOpt = False,
    quantization: QuantizationOpt = None,
) -> None:
    """Legal layouts that fit MODEL on N GPUs, fastest first, with SGLang commands.

    Fastest: most output tokens/s per GPU at the highest-throughput concurrency that meets
    --ttft/--tpot (ms; by default TTFT <= 2000 and TPOT <= 30, AIConfigurator's own
    defaults; --no-sla for none) for --isl/--osl tokens, with TTFT, TPOT, tokens/s per user
    and the estimate's source (AIConfigurator's measured kernels, or meshsat's roofline where
    they do not reach); --rank kv ranks by KV-cache capacity instead.

    Exit status: 0 at least one layout fits, 1 none, 2 bad input.

    Examples:

    \b
      meshsat plan --model deepseek-ai/DeepSeek-V3 --gpu H200 --gpus 16 --tpot 50
      meshsat plan --model deepseek-ai/DeepSeek-V3 --gpu H200 --gpus 16 --emit lws > lws.yaml
      meshsat plan --model deepseek-ai/DeepSeek-V3 --gpu GB200 --gpus 32 --disagg --isl 8192
      meshsat plan --model Qwen/Qwen3-32B --gpu H100 --gpus 2 --quantization fp8
    """
    # `--json` is `--format json`, as in validate, fix, rules and enumerate
    # (`formats.chosen`, which also refuses `--json --format csv`).
    fmt = Format(chosen(None if fmt is None else OutputFormat(fmt.value), as_json).value)
    g = plan_gpu(gpu_name, gpu_memory)
    # Only --rank kv reads it, but a length no request can have is bad input under any.
    length = checked_context_length(model_config(model), context_length, model)
    if emit is not None:  # the manifest replaces the report: say so rather than drop them
        for given, flag in ((fmt is not Format.table, f"--format {fmt.value}"),
                            (plot is not None, "--plot")):  # fmt: skip
            if given:
                raise InputError(f"drop {flag}: --emit lws prints the manifests (YAML) "
                                 "instead of the report")  # fmt: skip
    if disagg:
        with time_limit(timeout, "plan"):
            rows_d, search, agg, workload = disagg_plan(
                model, g, gpus, top, gpus_per_node, rank, isl, osl, ttft, tpot, no_sla, engine,
                plot, where, sglang_version, None,
                sizing_options(g, mem_fraction_static, free_memory), quantization=quantization,
            )  # fmt: skip
        if emit is not None and rows_d:
            per_node = node_size(g, gpus, gpus_per_node)
            manifest = picked_disagg(rows_d, pick, per_node, model=model, name=name, image=image)
            sys.stdout.write(manifest)
            return
        plan_disagg.emit(
            rows_d, search, agg, fmt.value, workload, Planned.of(model, g, gpus, sglang_version)
        )
        if not rows_d:
            note(plan_disagg.none_note(model, gpus, g.name))
            raise typer.Exit(1)
        return
    # ---- performance ranking (estimates: meshsat.solver.cli.plan_perf) -----------------
    if rank is Rank.perf:
        check_plan_args(gpus, top, gpus_per_node)
        if plot is not None:
            plan_perf.plot_target(plot)  # before the work: nothing printed, then exit 2
        workload = cli_workload(isl, osl, ttft, tpot, no_sla=no_sla)
        with time_limit(timeout, "plan"):
            rows_p, ranked, shapes = plan_perf.perf_rows(
                model, g, gpus, workload, engine=engine.value, gpus_per_node=gpus_per_node,
                top=top, memory=sizing_options(g, mem_fraction_static, free_memory),
                where=where or (), sglang_version=sglang_version, quantization=quantization,
            )  # fmt: skip
        if emit is not None and rows_p:
            _print_pick(
                [r.command for r in rows_p], pick, g, gpus, gpus_per_node, model, name, image
            )
            return
        # A chart with no point is not drawn (the note below says why nothing is listed).
        drawn = plot is not None and any(r.tokens_per_s_gpu > 0 for r in rows_p)
        if plot is not None and drawn:  # before the table: an unwritable plot is exit 2 alone
            title = f"{model} on {gpus} x {g.name}: {workload.describe()}"
            plan_perf.plot(plot, ranked, rows_p, title)
        plan_perf.emit(
            rows_p, fmt.value, workload, Planned.of(model, g, gpus, sglang_version), shapes
        )
        if plot is not None:
            note(f"plot written to {plot}" if drawn else f"no plot written to {plot}: no "
                 "layout with an estimate to draw")  # fmt: skip
        none = (
            plan_perf.nothing_fits(rows_p, workload, model, gpus, g.name)
            if rows_p
            else plan_perf.no_layout(
                model, model, quantization, g, gpus, sglang_version, where or ()
            )
        )
        if none:
            note(none)
            raise typer.Exit(1)
        return
    if plot is not None:
        raise InputError("--plot draws estimates: use it with --rank perf")
    # ---- KV-capacity ranking ------------------------------------------------------------
    with time_limit(timeout, "plan"):
        rows = plan_layouts(
            model, g, gpus, context_length=length, gpus_per_node=gpus_per_node, top=top,
            where=where or (), sglang_version=sglang_version, quantization=quantization,
            **sizing_options(g, mem_fraction_static, free_memory),
        )  # fmt: skip
    if emit is not None and rows:
        _print_pick([r.command for r in rows], pick, g, gpus, gpus_per_node, model, name, image)
        return
    if fmt is Format.json:
        emit_json(plan_document(rows, Planned.of(model, g, gpus, sglang_version), length))
    elif fmt is Format.csv:
        note(RANKING)
        write_csv([asdict(r) for r in rows], list(PlanRow.__dataclass_fields__))
    else:
        note(RANKING)
        head = (
            "rank  tp  pp  dp  dpa  ep  attn_tp  cp  dcp  weights_gib  total_kv_tokens  max_req"
            "  cross"
        )
        out.print(head, markup=False)
        for r in rows:
            out.print(
                f"{r.rank:>4}  {r.tp:>2}  {r.pp:>2}  {r.dp:>2}  {'y' if r.dp_attention else 'n':>3}"
                f"  {r.ep:>2}  {r.attn_tp:>7}  {r.attn_cp:>2}  {r.dcp:>3}  {r.weights_gib:>11.2f}"
                f"  {r.total_kv_tokens:>15,}"
                f"  {r.max_requests:>7}  {r.node_crossing_gpus:>5}{plan_perf.command_lines(r)}",
                markup=False,
                soft_wrap=True,
            )
    if Path(model).exists():  # a local config may have its checkpoint's index beside it
        disk = checkpoint_line(model, MemoryModel(model_config(model), g).model_gib)
        if disk is not None:
            note(disk)
    if not rows:
        note(plan_perf.no_layout(
            model, model, quantization, g, gpus, sglang_version, where or ()
        ))  # fmt: skip
        raise typer.Exit(1)


def disagg_plan(
    model: str | Mapping[str, Any],
    g: Gpu,
    gpus: int,
    top: int,
    gpus_per_node: int | None,
    rank: Rank,
    isl: int,
    osl: int,
    ttft: float | None,
    tpot: float | None,
    no_sla: bool,
    engine: EngineChoice,
    plot: Path | None,
    where: list[str] | None,
    sglang_version: str | None,
    emit: object,
    memory: Mapping[str, Any],
    *,
    model_path: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    quantization: str | None = None,
) -> tuple[list[DisaggRow], DisaggSearch, PerfRow | None, Workload]:
    """`plan --disagg`'s deployments, search counts, aggregated baseline and workload, for
    the CLI and `meshsat serve`'s /api/plan alike (meshsat.solver.cli.plan_disagg): options
    it cannot honour are refused before any work."""
    for given, flag in ((rank is Rank.kv, "--rank kv"), (plot is not None, "--plot"),
                        (emit is not None, "--emit")):  # fmt: skip
        if given:
            raise InputError(f"drop {flag}: --disagg ranks by estimate and prints every "
                             "role's command")  # fmt: skip
    check_plan_args(gpus, top, gpus_per_node)
    if gpus < 2:  # not "none fits, or the GPU has no speeds": no split exists at all
        raise InputError(
            f"--disagg needs at least 2 GPUs (a prefill and a decode server), got --gpus {gpus}"
        )
    workload = cli_workload(isl, osl, ttft, tpot, no_sla=no_sla)
    rows, search, agg = plan_disagg.disagg_rows(
        model, g, gpus, workload, engine=engine.value, gpus_per_node=gpus_per_node, top=top,
        memory=memory, where=where or (), sglang_version=sglang_version, model_path=model_path,
        progress=progress, quantization=quantization,
    )  # fmt: skip
    return rows, search, agg, workload


def _print_pick(
    commands: list[str],
    pick: int,
    g: Gpu,
    gpus: int,
    gpus_per_node: int | None,
    model: str,
    name: str,
    image: str,
) -> None:
    """`--emit lws`: the `pick`-th ranked layout as a LeaderWorkerSet on stdout."""
    sys.stdout.write(picked_lws(commands, pick, g, gpus, gpus_per_node, model, name, image))


def picked_disagg(
    rows: list[DisaggRow], pick: int, per_node: int, *, model: str | None, name: str, image: str
) -> str:
    """`plan --disagg --emit lws`: the `pick`-th ranked deployment on nodes of `per_node`
    GPUs as a LeaderWorkerSet per role and the router's Deployment and Service
    (meshsat.solver.cli.disagg_emit)."""
    if pick > len(rows):
        raise InputError(f"--pick {pick}: only {len(rows)} deployment(s) ranked (raise --top)")
    return disagg_manifest(rows[pick - 1], per_node, model_path=model, name=name, image=image)


def picked_lws(
    commands: list[str],
    pick: int,
    g: Gpu,
    gpus: int,
    gpus_per_node: int | None,
    model: str | None,
    name: str,
    image: str,
) -> str:
    """The LeaderWorkerSet of the `pick`-th ranked layout: what `--emit lws` prints, and
    what `meshsat serve`'s download is (the API's `emit: "lws"`)."""
    if pick > len(commands):
        raise InputError(f"--pick {pick}: only {len(commands)} layout(s) ranked (raise --top)")
    per_node = node_size(g, gpus, gpus_per_node)
    return lws_for(commands[pick - 1], gpus, per_node, model_path=model, name=name, image=image)
