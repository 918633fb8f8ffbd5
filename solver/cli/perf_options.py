"""The options that ask for performance estimates (`plan`, `enumerate --perf`), declared once."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from meshsat.solver.perf.workload import DEFAULT_TPOT_MS, DEFAULT_TTFT_MS


class Rank(str, Enum):
    perf = "perf"
    kv = "kv"


class EngineChoice(str, Enum):
    auto = "auto"
    aic = "aic"
    roofline = "roofline"


PerfOpt = Annotated[
    bool,
    typer.Option(
        "--perf",
        help="Add the performance estimate's columns (needs --model and --gpu; the perf extra "
        "for AIConfigurator's kernels).",
    ),
]
RankOpt = Annotated[
    Rank,
    typer.Option(
        "--rank",
        help="perf: most output tokens/s per GPU under the SLA, requests of --isl + --osl "
        "tokens (AIConfigurator's kernels with the perf extra, meshsat's roofline without); "
        "kv: most KV-cache tokens, requests of --context-length.",
    ),
]
IslOpt = Annotated[int, typer.Option("--isl", min=1, help="Input tokens per request.")]
OslOpt = Annotated[int, typer.Option("--osl", min=1, help="Output tokens per request.")]
TtftOpt = Annotated[
    float | None,
    typer.Option(
        "--ttft",
        min=0,
        help=f"Time-to-first-token limit, ms; 0 = no limit [default: {DEFAULT_TTFT_MS:g}, "
        "AIConfigurator's CLI default].",
        show_default=False,
    ),
]
TpotOpt = Annotated[
    float | None,
    typer.Option(
        "--tpot",
        min=0,
        help=f"Time-per-output-token limit, ms; 0 = no limit [default: {DEFAULT_TPOT_MS:g}, "
        "AIConfigurator's CLI default].",
        show_default=False,
    ),
]
NoSlaOpt = Annotated[
    bool,
    typer.Option(
        "--no-sla",
        help="No latency limits: the highest-throughput concurrency the KV cache holds "
        "(often tens of seconds to the first token).",
    ),
]
EngineOpt = Annotated[
    EngineChoice,
    typer.Option(
        "--engine",
        help="auto: AIConfigurator's measured kernels where they cover the layout (plus "
        "meshsat's EP all-to-all for layouts with expert parallelism), meshsat's roofline "
        "elsewhere (each row says which); aic: the engine only; roofline: never the engine.",
    ),
]
PlotOpt = Annotated[
    Path | None,
    typer.Option(
        "--plot",
        metavar="FILE",
        help="Draw tokens/s/GPU against tokens/s/user (the Pareto front, shown layouts "
        "labelled) to FILE, a .png, .svg or .pdf by its suffix.",
        dir_okay=False,
    ),
]
DisaggOpt = Annotated[
    bool,
    typer.Option(
        "--disagg",
        help="Plan prefill/decode disaggregation instead: the prefill layout, the decode layout "
        "and the number of each (x*a + y*b <= --gpus) with the most output tokens/s per GPU "
        "under the SLA, against the best aggregated layout; commands for every role and the "
        "router.",
    ),
]
