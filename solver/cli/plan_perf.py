"""`meshsat plan --rank perf`: the fitting legal layouts ranked by their estimate.

Why its own module: `plan_cmd.py` keeps the KV ranking and the command's options; this
module turns `meshsat.solver.perf.rank_layouts`' answer into rows, tables, CSV, JSON and the
Pareto plot, so the estimate's presentation lives in one place.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from meshsat import solver
from meshsat.solver.cli.emit_options import NodeCommand, node_command
from meshsat.solver.cli.formats import write_csv
from meshsat.solver.cli.loader_check import loader_refusal
from meshsat.solver.cli.memory_options import checked_quantization, fraction_flags, report_pack
from meshsat.solver.cli.node_launch import LaunchCheck, node_size
from meshsat.solver.cli.output import emit_json, err, note, out
from meshsat.solver.errors import InputError
from meshsat.solver.inputs.command import launch_command, model_path_of
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import Memory
from meshsat.solver.memory.gpus import Gpu, typed_fields
from meshsat.solver.memory.models import model_config
from meshsat.solver.perf import PerfModel, Workload
from meshsat.solver.perf.accuracy import AGGREGATED
from meshsat.solver.perf.ranking import Ranked, rank_layouts
from meshsat.solver.perf.workload import DEFAULT_TPOT_MS, DEFAULT_TTFT_MS


@dataclass(frozen=True)
class Planned:
    """What a plan answers for: the top-level facts of its JSON document under either
    ranking, `--disagg` and the web API (README, "plan"), so a document read alone says
    what was planned: the model as given (a repository id or config path; None for a
    config pasted into the web page), the GPU type and count, and the release whose rules,
    spelling and memory defaults made it (`--sglang-version`, resolved to its pack)."""

    model: str | None
    gpu: str
    gpus: int
    sglang_version: str

    @classmethod
    def of(cls, model: str | None, g: Gpu, gpus: int, sglang_version: str | None) -> Planned:
        return cls(model, g.name, gpus, report_pack(sglang_version))


@dataclass(frozen=True)
class LayoutRow:
    """The columns every `plan` row opens with, under either ranking (`PerfRow`,
    `plan_cmd.PlanRow`): its rank and the layout's own widths (`layout_columns`)."""

    rank: int
    tp: int
    pp: int
    dp: int
    dp_attention: bool
    ep: int
    attn_tp: int
    moe_tp: int
    attn_cp: int
    dcp: int


@dataclass(frozen=True)
class PerfRow(LayoutRow):
    """One ranked layout (plain values, for tables, CSV and JSON)."""

    concurrency: int
    ttft_ms: float
    tpot_ms: float
    tokens_per_s_gpu: float
    tokens_per_s_user: float
    meets_sla: bool
    weights_gib: float
    total_kv_tokens: int
    kv_concurrency: int
    source: str
    same_widths: int
    command: str
    #: How `command` runs on nodes (`emit_options.NodeCommand`): `servers` servers of
    #: `nodes_per_server` nodes of `gpus_per_node` GPUs, each node running `node_command`
    #: (`command` itself on one node).
    servers: int
    nodes_per_server: int
    gpus_per_node: int
    node_command: str


def layout_command(
    values: Mapping[str, Any],
    memory: Memory,
    release: str | None,
    *,
    model_path: str | None,
    given: Mapping[str, Any],
    fraction: float | None,
) -> str:
    """What the user launches for a planned layout (a `plan` row of either ranking, a
    `--disagg` role): what plan set on every layout (`given`) and the enumerated `values`,
    not what SGLang resolves from them, rendered by the one renderer in `release`'s
    spelling (0.5.19 has no `--attn-dp-size`; flags at its default are not written), with
    the `--mem-fraction-static` its `memory` relies on (`fraction`: the one the user gave)."""
    config = Config.model_validate({**typed_fields(given), **values})
    return launch_command(
        config, release, model_path=model_path, extra=fraction_flags(memory, fraction)
    )


def node_fields(
    command: str, gpus: int, gpus_per_node: int, model_path: str | None
) -> dict[str, Any]:
    """A row's `command` and how it runs on nodes (`PerfRow`'s last fields, `PlanRow`'s)."""
    launch = node_command(command, gpus, gpus_per_node, model_path=model_path)
    return {
        "command": command,
        "servers": launch.servers,
        "nodes_per_server": launch.nodes,
        "gpus_per_node": launch.gpus_per_node,
        "node_command": launch.command,
    }


class _Launched(Protocol):
    @property
    def command(self) -> str: ...
    @property
    def servers(self) -> int: ...
    @property
    def nodes_per_server(self) -> int: ...
    @property
    def gpus_per_node(self) -> int: ...
    @property
    def node_command(self) -> str: ...


def command_lines(row: _Launched) -> str:
    """The table's command lines of a row: the command on one node; on several, what runs
    on each node and the line that says where."""
    launch = NodeCommand(row.servers, row.nodes_per_server, row.gpus_per_node, row.node_command)
    if launch.single_node:
        return f"\n      {row.command}"
    return f"\n      {launch.how()}\n      {launch.command}"


def layout_columns(config: Mapping[str, Any], derived: Mapping[str, Any]) -> dict[str, Any]:
    """The layout's own columns of a `LayoutRow` (both plan rankings' rows; `plan --disagg`
    writes the same per role, `prefill_dcp`, ...): its widths, attention and decode CP
    included, which tell apart layouts of the same KV capacity."""
    return {
        "tp": config["tp_size"],
        "pp": config["pp_size"],
        "dp": config["dp_size"],
        "dp_attention": bool(config["enable_dp_attention"]),
        "ep": config["ep_size"],
        "attn_tp": derived["attn_tp"],
        "moe_tp": derived["moe_tp"],
        "attn_cp": int(config.get("attn_cp_size") or 1),
        "dcp": int(config.get("dcp_size") or 1),
    }


def plan_given(quantization: str | None, g: Gpu) -> dict[str, Any]:
    """The fields `plan` sets on every layout it enumerates, so the rules that read them
    judge it: `--quantization`, checked as `--set` checks the field (one readable line on
    a bad value), which its commands carry; and the GPU's class (`Gpu.layout_fields`, as
    `validate --gpu` sets it), so no layout the GPU refuses is planned (Marlin MoE under
    an all-to-all on Hopper, MegaMOE below SM90)."""
    q = checked_quantization(quantization)
    return {**({} if q is None else {"quantization": q}), **g.layout_fields}


def ranking_note(w: Workload) -> str:
    if not w.limited:
        return (
            "ranked by output tokens/s per GPU at the highest-throughput concurrency the KV "
            f"cache holds ({sla_terms(w)}); layouts estimated with AIConfigurator's measured "
            "kernels before those only meshsat's roofline could estimate; each row names its "
            "source"
        )
    return (
        f"ranked by output tokens/s per GPU at the best concurrency meeting the SLA "
        f"({sla_terms(w)}); layouts meeting it first, then those estimated with "
        "AIConfigurator's measured kernels before those only meshsat's roofline could "
        "estimate; each row names its source"
    )


def sla_terms(w: Workload) -> str:
    """The workload as a ranking note states it (`plan` and `plan --disagg`): its limits,
    which of them are AIConfigurator's defaults and that --no-sla lifts them, each said only
    where it applies (the note said "limits not given are TTFT <= 2000 ms and TPOT <= 30 ms"
    after `--ttft 500 --tpot 20`, and after `--ttft inf`)."""
    limits = [(name, v) for name, v in (("TTFT", w.ttft_ms), ("TPOT", w.tpot_ms)) if v is not None]
    if not limits:
        return w.describe()
    default = {"TTFT": DEFAULT_TTFT_MS, "TPOT": DEFAULT_TPOT_MS}
    defaults = [name for name, v in limits if v == default[name]]
    words = [w.describe()]
    if len(defaults) == 2:
        words.append("both limits are AIConfigurator's defaults")
    elif defaults:
        words.append(f"the {defaults[0]} limit is AIConfigurator's default")
    words.append("--no-sla lifts " + ("them" if len(limits) == 2 else "it"))
    return "; ".join(words)


@dataclass(frozen=True)
class PlanSetup:
    """What every `plan` ranking reads before it enumerates, built once per request: the
    fields set on every layout (`--quantization`), the estimator, the `--model-path` the
    commands name, and the rules' model facts. `plan --disagg` ranks its roles and its
    aggregated comparison from the same one."""

    given: Mapping[str, Any]
    pm: PerfModel
    model_path: str | None
    spec: ModelSpec


def plan_setup(
    model: str | Mapping[str, Any],
    g: Gpu,
    w: Workload,
    *,
    engine: str,
    gpus_per_node: int | None,
    sglang_version: str | None,
    memory: Mapping[str, Any] | None,
    model_path: str | None,
    quantization: str | None = None,
) -> PlanSetup:
    """`plan`'s options read once: the estimator they ask for, and the `--model-path` its
    commands name (default: from `model`; none for a config already read without one)."""
    given = plan_given(quantization, g)
    pm = PerfModel(
        model,
        g,
        w,
        engine=engine,  # type: ignore[arg-type]
        gpus_per_node=gpus_per_node,
        sglang_version=sglang_version or "0.5.23",
        # The release's own memory defaults, as `validate --gpu` sizes its pool (0.5.19 has
        # its own band for 20-35 GiB GPUs, 0.4.6.post5 the old table).
        memory_options={"pack": report_pack(sglang_version), **(memory or {})},
        model_id=model_path if isinstance(model, Mapping) else None,
        quantization=given.get("quantization"),
    )
    if model_path is None and not isinstance(model, Mapping):
        model_path = model_path_of(model)
    return PlanSetup(given, pm, model_path, checkpoint_spec(model))


def checkpoint_spec(model: str | Mapping[str, Any]) -> ModelSpec:
    """The rules' model facts from the checkpoint's own config, as `validate` reads them
    (`--quantization` is a layout field beside it, not a change to the checkpoint)."""
    return ModelSpec.from_hf_config(model if isinstance(model, Mapping) else model_config(model))


def terminal_progress(what: str) -> Callable[[int, int], None]:
    """`estimating done/total <what>` on a terminal's stderr, every 50 and at the end;
    a call that repeats the counts (a search's heartbeat) or has none yet (`0, 0`) draws
    nothing."""
    show = sys.stderr.isatty()
    last = (0, 0)

    def shown(done: int, total: int) -> None:
        nonlocal last
        if not show or not total or (done, total) == last:
            return
        last = (done, total)
        if done == total or done % 50 == 0:
            err.print(f"estimating {done}/{total} {what}", end="\r", markup=False)

    return shown


def clear_progress() -> None:
    if sys.stderr.isatty():
        err.print(" " * 40, end="\r", markup=False)


def perf_rows(
    model: str | Mapping[str, Any],
    g: Gpu,
    gpus: int,
    w: Workload,
    *,
    engine: str,
    gpus_per_node: int | None,
    top: int,
    sglang_version: str | None = None,
    memory: Mapping[str, Any] | None = None,
    where: Iterable[str] = (),
    progress: Callable[[int, int], None] | None = None,
    model_path: str | None = None,
    quantization: str | None = None,
) -> tuple[list[PerfRow], list[Ranked], int]:
    """The `top` best rows, every ranked layout (for the plot) and how many were estimated
    (`model`: a path, a repo id or a config already read; `memory`: further `MemoryModel`
    options, e.g. mem_fraction_static, context_gib; `where`: `enumerate`'s filters;
    `progress(done, total)` after each layout shape estimated, which may raise to stop;
    `model_path`: the `--model-path` the commands name, default from `model`;
    `quantization`: SGLang's `--quantization`, on every layout and in the estimate)."""
    setup = plan_setup(
        model, g, w, engine=engine, gpus_per_node=gpus_per_node, sglang_version=sglang_version,
        memory=memory, model_path=model_path, quantization=quantization,
    )  # fmt: skip
    return ranked_rows(setup, g, gpus, top, gpus_per_node=gpus_per_node, where=where,
                       sglang_version=sglang_version, progress=progress)  # fmt: skip


def ranked_rows(
    setup: PlanSetup,
    g: Gpu,
    gpus: int,
    top: int,
    *,
    gpus_per_node: int | None,
    where: Iterable[str],
    sglang_version: str | None,
    progress: Callable[[int, int], None] | None,
) -> tuple[list[PerfRow], list[Ranked], int]:
    """`perf_rows` from a setup already built (`plan --disagg`'s comparison reuses its own)."""
    given, model_path = setup.given, setup.model_path
    layouts = solver.enumerate(
        gpus, base=dict(given), model=setup.spec, where=where, sglang_version=sglang_version
    )
    # As launched: `--emit lws` writes what SGLang accepts (meshsat.solver.cli.node_launch).
    per_node = node_size(g, gpus, gpus_per_node)
    launches = LaunchCheck(gpus, per_node, setup.spec, given, sglang_version)
    ranked = rank_layouts(
        layouts, setup.pm, progress=progress or terminal_progress("layout shapes"),
        keep=launches.ok,
    )  # fmt: skip
    clear_progress()
    rows = []
    for i, r in enumerate(ranked[:top], 1):
        c, d, e, m = r.config, r.derived, r.estimate, r.memory
        ttft, tpot = setup.pm.workload.published(e.ttft_ms, e.tpot_ms)
        command = layout_command(
            r.values, m, sglang_version, model_path=model_path, given=given,
            fraction=setup.pm.memory.fraction,
        )  # fmt: skip
        rows.append(
            PerfRow(
                rank=i,
                **layout_columns(c, d),
                concurrency=e.concurrency,
                ttft_ms=ttft,
                tpot_ms=tpot,
                tokens_per_s_gpu=round(e.tokens_per_s_gpu, 1),
                tokens_per_s_user=round(e.tokens_per_s_user, 1),
                meets_sla=e.meets_sla,
                weights_gib=round(m.weights_gib, 2),
                total_kv_tokens=m.max_total_num_tokens * m.pools,
                kv_concurrency=e.kv_concurrency,
                source=e.source,
                same_widths=r.same_widths,
                **node_fields(command, gpus, per_node, model_path),
            )
        )
    return rows, ranked, len(ranked)


def no_layout(
    model: str | Mapping[str, Any],
    name: object,
    quantization: str | None,
    g: Gpu,
    gpus: int,
    sglang_version: str | None,
    where: Sequence[str] = (),
) -> str:
    """Why `plan` found no layout (`name`: the model as the line names it): the release's
    loader refuses the checkpoint itself, whatever the layout (`loader_refusal`); the
    `where` filters leave no legal layout (counted, not listed: `plan --where "tp == 3"` on
    one GPU said no layout "fits", as if memory had refused them); or none that is legal
    (and that `where` keeps) loads on these GPUs."""
    given, spec = plan_given(quantization, g), checkpoint_spec(model)
    refusal = loader_refusal(given, spec, sglang_version)
    if refusal is not None:
        return f"no layout of {name} starts, on any GPUs: {refusal}"
    if not where:
        return f"no legal layout of {name} fits {gpus} x {g.name}"

    def legal(filters: Sequence[str]) -> int:
        return solver.count(gpus, base=given, model=spec, where=filters,
                            sglang_version=sglang_version)  # fmt: skip

    if legal(where) == 0 and (unfiltered := legal(())) > 0:
        return (
            f"the --where filters leave no layout of {name} on {gpus} GPU{'s' * (gpus != 1)} "
            f"(of {unfiltered:,} legal layout{'s' * (unfiltered != 1)})"
        )
    return f"no legal layout of {name} that the --where filters keep fits {gpus} x {g.name}"


def nothing_fits(rows: Sequence[PerfRow], w: Workload, model: object, gpus: int, gpu: str) -> str:
    """Why `plan` (CLI and /api/plan) exits 1 with rows: none whose weights load holds one
    request of ISL + OSL tokens in its KV cache (every row `does not fit`: the worst sort
    last, so the first row tells), as `plan --disagg` exits 1 for the same question; ""
    when the first row has an estimate. Without rows, `no_layout` says why. A plan whose
    rows all miss the latency limits exits 1 too (rows meeting them sort first): a script
    that reads the exit status must not take "nothing meets your SLA" for an answer."""
    if rows and rows[0].source == "does not fit":
        return (
            f"no layout of {model} on {gpus} x {gpu} holds one request of ISL + OSL = "
            f"{w.isl + w.osl:,} tokens in its KV cache"
        )
    if rows and rows[0].source.startswith("unavailable"):  # no row has a figure to rank by
        why = rows[0].source.removeprefix("unavailable").strip(" ()")
        return (
            f"no layout of {model} on {gpus} x {gpu} could be estimated ({why}); "
            "--rank kv ranks them by KV-cache capacity without an estimate"
        )
    if rows and not rows[0].meets_sla:
        return (
            f"no layout of {model} on {gpus} x {gpu} meets the SLA ({w.describe()}); the "
            "rows are the fastest that miss it"
        )
    return ""


def emit(rows: Sequence[PerfRow], fmt: str, w: Workload, planned: Planned, estimated: int) -> None:
    head = ranking_note(w)
    if fmt == "json":
        emit_json(perf_document(rows, w, planned, estimated))
        return
    note(head)
    if fmt == "csv":
        write_csv([asdict(r) for r in rows], list(PerfRow.__dataclass_fields__))
        note(AGGREGATED.text())
        return
    out.print(
        "rank  tp  pp  dp dpa  ep attn_tp cp dcp   conc  ttft_ms tpot_ms tok/s/gpu tok/s/user"
        " sla weights_gib   total_kv",
        markup=False,
    )
    for r in rows:
        out.print(
            f"{r.rank:>4} {r.tp:>3} {r.pp:>3} {r.dp:>3} {'y' if r.dp_attention else 'n':>3}"
            f" {r.ep:>3} {r.attn_tp:>7} {r.attn_cp:>2} {r.dcp:>3} {r.concurrency:>6}"
            f" {_ms(r.ttft_ms, 8, 1)} {_ms(r.tpot_ms, 7, 2)} {r.tokens_per_s_gpu:>9.1f}"
            f" {r.tokens_per_s_user:>10.1f} {'y' if r.meets_sla else 'n':>3}"
            f" {r.weights_gib:>11.2f} {r.total_kv_tokens:>10,}\n      source: {r.source}"
            f"{command_lines(r)}",
            markup=False,
            soft_wrap=True,
        )
    note(f"{estimated} layout shapes estimated (layouts that differ only in flags the estimate "
         "does not read share one)")  # fmt: skip
    note(AGGREGATED.text())


def perf_document(
    rows: Sequence[PerfRow], w: Workload, planned: Planned, estimated: int
) -> dict[str, Any]:
    """`meshsat plan --format json`'s document (and the web API's `/api/plan`)."""
    return {
        "ranking": ranking_note(w),
        **asdict(planned),
        "workload": asdict(w),
        "layouts_estimated": estimated,
        "accuracy": asdict(AGGREGATED),
        "layouts": [_json_row(r) for r in rows],
    }


def _ms(x: float, width: int, digits: int) -> str:
    """A latency cell; `-` where there is no estimate (JSON says null, CSV leaves it empty)."""
    return f"{x:>{width}.{digits}f}" if math.isfinite(x) else "-".rjust(width)


def _json_row(r: PerfRow) -> dict[str, Any]:
    d = asdict(r)
    for k in ("ttft_ms", "tpot_ms"):
        if isinstance(d[k], float) and not math.isfinite(d[k]):
            d[k] = None
    return d


def pareto(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (higher is better)."""
    order = sorted(range(len(points)), key=lambda i: (-points[i][1], -points[i][0]))
    front, best_x = [], -math.inf
    for i in order:
        if points[i][0] > best_x:
            front.append(i)
            best_x = points[i][0]
    return front


#: What `--plot` writes, named by the file's suffix: the formats matplotlib's Agg canvas
#: writes without a further package.
PLOT_FORMATS = ("png", "svg", "pdf")


def plot_format(path: Path) -> str:
    """The format the suffix of `path` names (`PLOT_FORMATS`), refused otherwise: `--plot
    x.txt` wrote a PNG under a .txt name."""
    fmt = path.suffix.lower().removeprefix(".")
    if fmt not in PLOT_FORMATS:
        raise InputError(
            f"cannot write {path}: --plot writes the format the file's suffix names, one of "
            f"{', '.join('.' + f for f in PLOT_FORMATS)} (got {path.suffix or 'no suffix'})"
        )
    return fmt


def plot_target(path: Path) -> Path:
    """Where `--plot` writes, refused before any work when it cannot: a suffix that names
    no format it writes (`plot_format`), no such directory, or something there that is not
    a regular file (the atomic rename would replace a device node or a FIFO with the
    chart: `--plot /dev/null` run as root)."""
    path = path.expanduser()
    fmt = plot_format(path)
    if not path.parent.is_dir():
        raise InputError(f"cannot write {path}: no directory {path.parent}")
    if os.path.lexists(path) and not path.is_file():
        raise InputError(f"cannot write {path}: it exists and is not a regular file")
    # Where the chart is written first: a directory that refuses it (read-only, /proc) is
    # refused here, before the table is printed (permission bits alone do not tell root).
    try:
        fd, probe = tempfile.mkstemp(prefix=".meshsat-plot-", suffix=f".{fmt}", dir=path.parent)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(probe)
    return path


def plot(path: Path, ranked: Sequence[Ranked], rows: Sequence[PerfRow], title: str) -> None:
    """tokens/s/GPU against tokens/s/user, the Pareto front drawn, the shown rows labelled,
    in the format the suffix names (`plot_format`); written atomically (a half-written
    chart never replaces a good one)."""
    path = plot_target(path)  # again: the command ran meanwhile
    fmt = plot_format(path)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install 'meshsat[perf]'") from None
    fig, ax = plt.subplots(figsize=(9, 6))
    for kind, colour in (("aic", "C0"), ("roofline", "C2")):
        pts = [
            (r.estimate.tokens_per_s_user, r.estimate.tokens_per_s_gpu)
            for r in ranked
            if r.estimate.tokens_per_s_gpu > 0 and r.estimate.source.startswith(kind)
        ]
        if not pts:
            continue
        name = "AIConfigurator" if kind == "aic" else "roofline"
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=9, c=colour, alpha=0.3,
                   label=f"layouts ({name})")  # fmt: skip
        front = sorted((pts[i] for i in pareto(pts)), key=lambda p: p[0])
        ax.plot([p[0] for p in front], [p[1] for p in front], "-o", c=colour, ms=4,
                label=f"Pareto front ({name})")  # fmt: skip
    for r in rows:
        if r.tokens_per_s_gpu > 0:
            ax.scatter([r.tokens_per_s_user], [r.tokens_per_s_gpu], c="C3", s=18)
            label = f"#{r.rank} tp{r.tp} dp{r.dp} ep{r.ep}" + (f" dcp{r.dcp}" if r.dcp > 1 else "")
            ax.annotate(label, (r.tokens_per_s_user, r.tokens_per_s_gpu), fontsize=7,
                        xytext=(4, 4 + 9 * ((r.rank - 1) % 4)), textcoords="offset points",
                        arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "0.5"})  # fmt: skip
    ax.set_xlabel("output tokens/s per user (1000 / TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".meshsat-plot-", suffix=f".{fmt}", dir=path.parent)
    except OSError as exc:
        plt.close(fig)
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        fig.savefig(tmp, format=fmt, dpi=120, bbox_inches="tight")
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp's 0600 is not what a plain write gives
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)
