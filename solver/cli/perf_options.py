"""The options that ask for performance estimates (`plan`, `enumerate --perf`), declared once."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer


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
    typer.Option("--ttft", min=0.001, help="Time-to-first-token limit, ms [default: none]."),
]
TpotOpt = Annotated[
    float | None,
    typer.Option("--tpot", min=0.001, help="Time-per-output-token limit, ms [default: none]."),
]
EngineOpt = Annotated[
    EngineChoice,
    typer.Option(
        "--engine",
        help="auto: AIConfigurator's measured kernels where they cover the layout, meshsat's "
        "roofline elsewhere (each row says which); aic: the engine only; roofline: never "
        "the engine.",
    ),
]
PlotOpt = Annotated[
    Path | None,
    typer.Option(
        "--plot",
        metavar="FILE.png",
        help="Draw tokens/s/GPU against tokens/s/user (the Pareto front, shown layouts "
        "labelled) to FILE.png.",
        dir_okay=False,
    ),
]
