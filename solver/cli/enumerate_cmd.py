"""`meshsat enumerate`: every legal layout for N GPUs."""

from __future__ import annotations

import heapq
import itertools
import math
import sys
from collections.abc import Callable, Iterable, Iterator
from enum import Enum
from typing import Annotated, Any

import typer

from meshsat.solver.cli.deadline import time_limit
from meshsat.solver.cli.enumerate_perf import (
    PERF_COLUMNS,
    PERF_NAMES,
    PerfColumns,
    split_perf_filters,
)
from meshsat.solver.cli.formats import OutputFormat, chosen
from meshsat.solver.cli.layout_options import layout_inputs, read_layout
from meshsat.solver.cli.layout_writers import Writer, column_width
from meshsat.solver.cli.loader_check import loader_refusal
from meshsat.solver.cli.memory_options import (
    ContextLengthOpt,
    FreeMemoryOpt,
    GpuMemoryOpt,
    GpuOpt,
    MemFractionOpt,
    fraction_flags,
    memory_model,
    sizing_options,
    with_gpu_class,
)
from meshsat.solver.cli.output import err, note, quant_note
from meshsat.solver.cli.perf_options import (
    EngineChoice,
    EngineOpt,
    IslOpt,
    NoSlaOpt,
    OslOpt,
    PerfOpt,
    TpotOpt,
    TtftOpt,
)
from meshsat.solver.cli.version_option import SglangVersionOpt
from meshsat.solver.enumeration.layouts import EnumerationQuery, Enumerator, Layout
from meshsat.solver.enumeration.memory_columns import MEMORY_COLUMNS, MemoryColumns, split_filters
from meshsat.solver.enumeration.space import (
    ALIASES,
    DEFAULT_VARY,
    accepted_fields,
    canonical,
    dims_of,
    varied_fields,
)
from meshsat.solver.errors import InputError
from meshsat.solver.inputs.layout_input import LayoutInput, LayoutSources
from meshsat.solver.lang.expr import Expr
from meshsat.solver.lang.limits import MAX_GPUS
from meshsat.solver.packs import get_pack


class Format(str, Enum):
    table = "table"
    jsonl = "jsonl"
    csv = "csv"
    json = "json"


_DEFAULT = ", ".join(varied_fields(dims_of(DEFAULT_VARY)))

#: Not the shared `JsonOpt` ("one JSON object"): the listing is an array of layouts.
ListJsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the layouts as one JSON array of objects on stdout (with --count, the number).",
    ),
]
GpusOpt = Annotated[
    int,
    typer.Option(
        "--gpus",
        "-n",
        min=1,
        max=MAX_GPUS,
        help="GPUs to fill exactly (at most, with --up-to).",
    ),
]
VaryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--vary",
        metavar="FIELD",
        help=f"Also enumerate this field (repeatable). Always varied: {_DEFAULT}. Accepted: "
        f"{', '.join(accepted_fields())}. Every other field comes from --config or the "
        "defaults.",
        show_default=False,
    ),
]
WhereOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--where",
        "-w",
        metavar="EXPR",
        help="Keep layouts where EXPR holds (repeatable; all must hold). Fields, derived "
        "widths (attn_tp, moe_tp, gpus_used, ...) and short names (tp, pp, dp, attn_cp, ep, "
        "moe_dp, dcp) with comparisons, and/or/not, + - * // % and `in (...)`, e.g. "
        '"attn_tp <= 8", "cp_strategy == \'zigzag\'".',
        show_default=False,
    ),
]
GpusPerNodeOpt = Annotated[
    int | None,
    typer.Option(
        "--gpus-per-node",
        min=1,
        help="GPUs per node for --intra-node [default: the base config's gpus_per_node, 8].",
        show_default=False,
    ),
]
IntraNodeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--intra-node",
        metavar="GROUP",
        help="Keep layouts whose GROUP groups (attn_tp, attn_cp, ep, moe_tp, dcp, tp, pp, "
        "attn_dp, moe_dp) each stay inside one node under SGLang's rank layout "
        "(repeatable).",
        show_default=False,
    ),
]
UpToOpt = Annotated[bool, typer.Option("--up-to", help="Use at most --gpus GPUs (1..N).")]
CountOpt = Annotated[
    bool, typer.Option("--count", help="Print only the number of layouts (fast: nothing listed).")
]
SortOpt = Annotated[
    str | None,
    typer.Option(
        "--sort",
        metavar="FIELD",
        help="Sort by a column (--sort=-FIELD: descending). Holds every layout in memory "
        "before printing, up to 200,000 (with --limit K only the first K).",
        show_default=False,
    ),
]
LimitOpt = Annotated[
    int | None,
    typer.Option("--limit", min=1, metavar="K", help="Stop after K layouts.", show_default=False),
]
TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        metavar="S",
        help="Stop with exit 2 after S seconds (default: no limit; output streams).",
        show_default=False,
    ),
]
CommandOpt = Annotated[
    bool,
    typer.Option(
        "--command",
        help="Add a column with the SGLang command line of each layout, in the chosen "
        "release's spelling, naming the --model as --model-path (slower: about 30 µs a "
        "layout).",
    ),
]
#: `--sort` without `--limit` holds every row; beyond this many it refuses (~70 MB, and
#: under a second even for 720720 GPUs, whose rows run to the hundred million).
MAX_SORTED = 200_000
#: `--up-to` runs the count or listing once per GPU count: beyond this it takes minutes.
MAX_UP_TO = 4096
FormatOpt = Annotated[
    Format | None,
    typer.Option(
        "--format",
        "-f",
        help="Output format (default table); jsonl, csv and table stream.",
        show_default=False,
    ),
]


@layout_inputs("model", "config", "sets")
def enumerate_cmd(
    gpus: GpusOpt,
    sources: LayoutSources,
    vary: VaryOpt = None,
    where: WhereOpt = None,
    gpus_per_node: GpusPerNodeOpt = None,
    intra_node: IntraNodeOpt = None,
    up_to: UpToOpt = False,
    count: CountOpt = False,
    sort: SortOpt = None,
    limit: LimitOpt = None,
    fmt: FormatOpt = None,
    as_json: ListJsonOpt = False,
    timeout: TimeoutOpt = None,
    sglang_version: SglangVersionOpt = None,
    gpu: GpuOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    context_length: ContextLengthOpt = None,
    mem_fraction_static: MemFractionOpt = None,
    free_memory: FreeMemoryOpt = None,
    command: CommandOpt = False,
    perf: PerfOpt = False,
    isl: IslOpt = 1024,
    osl: OslOpt = 1024,
    ttft: TtftOpt = None,
    tpot: TpotOpt = None,
    no_sla: NoSlaOpt = False,
    engine: EngineOpt = EngineChoice.auto,
) -> None:
    """List every legal layout for N GPUs: no duplicates, streamed, filtered, model-aware.

    A layout is listed when every rule holds, the GPUs used (tp·pp with DP attention,
    dp·tp·pp without) equal N, and SGLang's silent resolution leaves the varied fields
    unchanged: that is what keeps the list free of duplicates (dp_size 1 with DP
    attention is never listed, since SGLang turns DP attention off; with a base
    moe_a2a_backend deepep only ep_size == tp_size is). Fields that are not varied may
    still be resolved; the output shows those that depend on the layout.

    Sizes range over the divisors of N; prefill CP is one dimension: off, zigzag or
    interleave.

    With --model and --gpu (or --gpu-memory), every layout also gets the memory columns
    weights_gib (the fullest rank), kv_tokens (KV-cache tokens per rank, as SGLang sizes its
    pool), max_requests (requests of --context-length that fit) and fits (the weights and
    SGLang's reserve leave room for a KV pool). They work in --where and --sort; layouts
    that do not fit are listed unless you ask --where fits.

    With --perf as well, each layout gets the estimate's columns (docs/perf.md): concurrency
    (the best under --ttft/--tpot for --isl/--osl that the KV cache holds; by default
    TTFT <= 2000 ms and TPOT <= 30 ms, --no-sla for none), ttft_ms, tpot_ms,
    tokens_per_s_gpu, tokens_per_s_user, meets_sla and perf_source (AIConfigurator or
    meshsat's roofline); they work in --where and --sort too (perf_source as text: ==, !=,
    in (...)).

    Exit status: 0 at least one layout, 1 none, 2 bad input.

    Examples:

    \b
      meshsat enumerate --gpus 16 --where "attn_tp <= 8" --format jsonl
      meshsat enumerate --gpus 64 --model ./DeepSeek-V3/config.json --intra-node ep --count
      meshsat enumerate --gpus 8 --vary moe_a2a_backend --sort=-ep --limit 20
      meshsat enumerate --gpus 16 --model deepseek-ai/DeepSeek-V3 --gpu H200 --where fits
        --where "kv_tokens >= 1e6" --sort=-kv_tokens --limit 10
      meshsat enumerate --gpus 8 --model deepseek-ai/DeepSeek-V3 --gpu H200 --where fits
        --perf --tpot 50 --sort=-tokens_per_s_gpu --limit 5
    """
    if up_to and gpus > MAX_UP_TO:
        raise InputError(
            f"--up-to sums every GPU count 1..N; it is limited to N <= {MAX_UP_TO} GPUs"
        )
    with time_limit(timeout, "enumerate"):
        # The GPU class the rules read, as `validate --gpu` sets it.
        layout = with_gpu_class(read_layout(sources, sglang_version, command="enumerate"), gpu)
        if layout.model is not None:
            quant_note(layout.model.quant_not_checked)
        names = [*DEFAULT_VARY, *(vary or [])]
        fields = varied_fields(dims_of(names))
        pinned = sorted(set(fields) & layout.config.user_set())
        for name in pinned:
            note(
                f"{name} = {getattr(layout.config, name)} in the base is varied; add --where "
                f'"{name} == {getattr(layout.config, name)!r}" to keep it'
            )
        # Filters a later stage reads name the release's own derived widths (`parse`).
        widths = get_pack(sglang_version).named_widths
        rest, perf_filters = split_perf_filters(where or (), widths)
        if perf_filters and not perf:  # not "unknown name 'ttft_ms'; did you mean fits?"
            raise InputError(
                f"a --where that reads {', '.join(PERF_NAMES)} needs --perf (with --model "
                "and --gpu)"
            )
        plain, memory_filters = split_filters(rest, widths)
        e = EnumerationQuery.of(
            layout.config,
            layout.model,
            names,
            plain,
            gpus_per_node,
            intra_node or (),
            sglang_version=sglang_version,
        ).enumerator()
        mem = _memory_columns(
            e, sources, gpu, gpu_memory, context_length, memory_filters,
            mem_fraction_static, free_memory,
        )  # fmt: skip
        if mem is None and sort is not None and sort.lstrip("-") in MEMORY_COLUMNS:
            raise InputError(f"--sort {sort} needs the memory columns: give --gpu and --model")
        if not perf and sort is not None and sort.lstrip("-") in PERF_COLUMNS:
            raise InputError(f"--sort {sort} needs the estimate: give --perf, --gpu and --model")
        columns = e.columns if mem is None else mem.columns
        rows: Iterator[tuple[Any, ...]] = e.rows(gpus, up_to)
        if mem is not None:
            rows = mem.rows(rows)
        est = _perf_columns(e, columns, sources, gpu, perf, (isl, osl, ttft, tpot, no_sla), engine,
                            gpus_per_node, perf_filters, mem_fraction_static,
                            free_memory)  # fmt: skip
        if est is not None:
            columns = est.columns
            rows = est.rows(rows)
        if count:
            if (mem is not None and mem.filters) or perf_filters:
                total = sum(1 for _ in itertools.islice(rows, limit))
            else:
                total = _count(e, gpus, up_to)
            if limit is not None:
                total = min(total, limit)
            sys.stdout.write(f"{total}\n")
            if not total:
                _why_none(layout, sglang_version)
            raise typer.Exit(0 if total else 1)

        chosen_fmt = chosen(None if fmt is None else OutputFormat(fmt.value), as_json)
        shown = (*e.output_columns, *(MEMORY_COLUMNS if mem is not None else ()))
        if est is not None:
            shown = (*shown, *PERF_COLUMNS)
        if command:
            columns, shown = (*columns, "command"), (*shown, "command")
            rows = _with_commands(e, rows, layout.model_path, _sizing(est, mem_fraction_static))
        picks = [columns.index(n) for n in shown]
        kinds: set[str] = set()
        if sort is not None:
            if est is not None and sort.lstrip("-") in ESTIMATE_SCALE:
                rows = _noting_sources(rows, columns.index("perf_source"), kinds)
            rows = iter(_sorted(columns, rows, sort, limit))
        elif limit is not None:
            rows = itertools.islice(rows, limit)
        progress = _Progress("listing layouts")
        writer = Writer(
            chosen_fmt.value,
            shown,
            picks,
            sys.stdout,
            on_flush=progress.update,
            widths=[column_width(n, gpus) for n in shown],
        )
        try:
            written = writer.write_all(rows)
        finally:
            progress.close()
        if len(kinds) > 1:
            note(MIXED_SOURCES)
        if not written and not _why_none(layout, sglang_version):
            note("no layout satisfies the rules and filters for these GPUs")
        raise typer.Exit(0 if written else 1)


#: The estimate columns whose order depends on the estimate's source.
ESTIMATE_SCALE = frozenset(PERF_COLUMNS) - {"perf_source", "meets_sla"}
#: Said when a sort by one of them ranked rows of both sources (`plan` lists the engine's
#: before the roofline's for the reason it gives).
MIXED_SOURCES = (
    "the order mixes two estimate sources that are not on one scale: AIConfigurator's "
    "measured kernels and meshsat's roofline, which is optimistic at large batches "
    "(benchmarks/RESULTS-perf.md); each row's perf_source names its own; `plan` ranks "
    "the engine's first"
)


def _noting_sources(
    rows: Iterable[tuple[Any, ...]], at: int, seen: set[str]
) -> Iterator[tuple[Any, ...]]:
    """`rows` unchanged, the estimate source of each that has one added to `seen` by kind
    (`aic`, `roofline`): the rows a sort compares."""
    for row in rows:
        source = row[at]
        if isinstance(source, str) and source.startswith(("aic", "roofline")):
            seen.add(source.split(maxsplit=1)[0])
        yield row


def _why_none(layout: LayoutInput, sglang_version: str | None) -> bool:
    """Say, when it is so, that no layout lists because the release's loader refuses the
    checkpoint itself (whatever the widths); whether it was said."""
    given = {n: getattr(layout.config, n) for n in layout.config.user_set()}
    refusal = loader_refusal(given, layout.model, sglang_version)
    if refusal is not None:
        note(f"no layout starts, on any GPUs: {refusal}")
    return refusal is not None


def _count(e: Enumerator, gpus: int, up_to: bool) -> int:
    if not up_to:
        return e.count(gpus)
    progress = _Progress("counting layouts", total=gpus)
    total = 0
    try:
        for n in range(1, gpus + 1):
            total += e.count(n)
            if n % 64 == 0:
                progress.update(n)
    finally:
        progress.close()
    return total


def _sizing(est: PerfColumns | None, given: float | None) -> Callable[[Layout], tuple[str, ...]]:
    """The flags a row's command needs beside its layout for the memory its columns read:
    `--mem-fraction-static` given, or raised by the estimate (`fraction_flags`)."""
    if est is not None:
        from meshsat.solver.memory import Parallel

        mm = est.pm.memory
        return lambda lay: fraction_flags(
            mm.of(Parallel.from_resolved(lay.config, lay.derived)), mm.fraction
        )
    words = () if given is None else (f"--mem-fraction-static {given:g}",)
    return lambda lay: words


def _with_commands(
    e: Enumerator,
    rows: Iterable[tuple[Any, ...]],
    model_path: str | None,
    sizing: Callable[[Layout], tuple[str, ...]],
) -> Iterator[tuple[Any, ...]]:
    """Each row with the SGLang command that launches it, in the release's spelling (a
    pydantic config per row: tens of µs, so only on request), with the `sizing` flags its
    memory needs."""
    from meshsat.solver.inputs.command import launch_command
    from meshsat.solver.lang.config import Config
    from meshsat.solver.memory.gpus import typed_fields

    pack = e.query.pack
    # What the user launches: the base's own settings and the varied values; the fields
    # SGLang resolves (Layout.config) are its business, not flags to pass.
    given = typed_fields({n: getattr(e.base, n) for n in e.base.user_set()})
    for row in rows:
        lay = Layout(row, e.shape)
        config = Config.model_validate({**given, **lay.values})
        yield (*row, launch_command(config, pack, model_path=model_path, extra=sizing(lay)))


def _memory_columns(
    e: Enumerator,
    sources: LayoutSources,
    gpu_name: str | None,
    gpu_memory: str | None,
    context_length: int | None,
    filters: tuple[Expr, ...],
    mem_fraction_static: float | None = None,
    free_memory: str | None = None,
) -> MemoryColumns | None:
    """The memory stage when a GPU is given; a memory filter without one is refused. The
    stage sizes each layout by its own resolved flags (`MemoryColumns`), not the base's."""
    mm = memory_model(
        sources.model, gpu_name, gpu_memory, context_length, e.query.pack.version,
        mem_fraction_static, free_memory, quantization=getattr(e.base, "quantization", None),
    )  # fmt: skip
    if mm is None:
        if filters:
            raise InputError(
                "a --where that reads weights_gib, kv_tokens, max_requests or fits needs "
                "--gpu (or --gpu-memory) and --model"
            )
        return None
    return MemoryColumns(e, mm, filters)


def _perf_columns(
    e: Enumerator,
    columns: tuple[str, ...],
    sources: LayoutSources,
    gpu_name: str | None,
    perf: bool,
    workload: tuple[int, int, float | None, float | None, bool],
    engine: EngineChoice,
    gpus_per_node: int | None,
    filters: tuple[Expr, ...],
    mem_fraction_static: float | None = None,
    free_memory: str | None = None,
) -> PerfColumns | None:
    """The estimate stage with --perf (after the memory stage, which it needs), sized as
    the memory columns are (--mem-fraction-static, --free-memory, the pool flags of the
    base layout): the estimate's KV limit is the kv_tokens column's."""
    if not perf:
        return None
    if sources.model is None or gpu_name is None:
        raise InputError(
            "--perf needs --model and --gpu (a GPU type: the estimate reads its speeds)"
        )
    from meshsat.solver.memory import flag_options, sizing_flags
    from meshsat.solver.memory.gpus import gpu as gpu_type
    from meshsat.solver.perf import PerfModel
    from meshsat.solver.perf.workload import cli_workload

    isl, osl, ttft, tpot, no_sla = workload
    pm = PerfModel(
        str(sources.model),
        gpu_name,
        cli_workload(isl, osl, ttft, tpot, no_sla=no_sla),
        sglang_version=e.query.pack.version,
        engine=engine.value,
        gpus_per_node=gpus_per_node,
        quantization=getattr(e.base, "quantization", None),
        memory_options={
            "pack": e.query.pack.version,  # the memory columns' sizing
            **sizing_options(gpu_type(gpu_name), mem_fraction_static, free_memory),
            # The sizing flags every layout shares, as resolved (`sizing_flags`): the
            # estimate's KV limit is then the memory columns' (flags a row holds itself,
            # varied or resolved per layout, are the base's here).
            **flag_options(
                sizing_flags(e.shape.constant, e.base.model_dump()), e.query.pack.version
            ),
        },
    )
    return PerfColumns(e, columns, pm, filters)


def _sorted(
    columns: tuple[str, ...], rows: Iterable[tuple[Any, ...]], spec: str, limit: int | None
) -> list[tuple[Any, ...]]:
    descending = spec.startswith("-")
    name = canonical(spec.lstrip("-"))
    if name not in columns:
        import difflib

        close = difflib.get_close_matches(name, [*columns, *ALIASES], n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise InputError(f"cannot sort by {spec!r}{hint} (a field or derived width)")
    i = columns.index(name)

    def key(row: tuple[Any, ...]) -> tuple[bool, Any]:
        # A missing value (None, or an estimate's NaN) sorts last either way: `--sort
        # ttft_ms --limit 3` listed three layouts that do not fit (NaN compares false).
        value = row[i]
        missing = value is None or (isinstance(value, float) and math.isnan(value))
        return (missing != descending, 0 if missing else value)

    if limit is not None:
        pick: Callable[..., list[tuple[Any, ...]]] = (
            heapq.nlargest if descending else (heapq.nsmallest)
        )
        return pick(limit, rows, key=key)
    held = list(itertools.islice(rows, MAX_SORTED + 1))
    if len(held) > MAX_SORTED:
        raise InputError(
            f"--sort holds every layout in memory and stops at {MAX_SORTED:,} layouts; "
            "add --limit K (keeps only the first K) or narrow with --where"
        )
    return sorted(held, key=key, reverse=descending)


class _Progress:
    """A counter on stderr, only for a terminal and only once a run has taken a while.

    It never appears in pipes or tests (stderr is not a terminal there), nor when the
    rows themselves go to the same terminal.
    """

    DELAY_S = 0.5

    def __init__(self, what: str, total: int | None = None) -> None:
        import time

        self.what, self.total = what, total
        self.enabled = err.is_terminal and (total is not None or not sys.stdout.isatty())
        self.start = time.monotonic()
        self.bar: Any = None
        self.task: Any = None

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        import time

        if self.bar is None:
            if time.monotonic() - self.start < self.DELAY_S:
                return
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            columns: list[Any] = [SpinnerColumn(), TextColumn(self.what)]
            if self.total is not None:
                columns += [BarColumn(), TextColumn("GPU count"), MofNCompleteColumn()]
            else:
                columns.append(TextColumn("{task.completed:,}"))
            columns.append(TimeElapsedColumn())
            self.bar = Progress(*columns, console=err, transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.what, total=self.total)
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
