"""The timers and table layout the benchmark scripts share, so that every figure they print
is taken the same way: each call timed on its own (warm-up calls untimed), the median of
the runs kept, and a baseline timed in the same run.

The scripts run as `python benchmarks/bench_x.py`, so this folder is first on their path and
they import it as `timing`. Standard library only: bench_plugin's child, in an SGLang
virtualenv, imports it too.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

#: What a timer reads: wall time (`time.perf_counter`) unless a bench says otherwise, e.g.
#: `time.thread_time`, which does not count the slices other processes of a shared machine
#: take.
Clock = Callable[[], float]


@dataclass(frozen=True)
class Runs(Generic[T]):
    """The seconds of every timed call, and what the last call returned (a bench that also
    checks the answer, or prints it, times and uses the same calls)."""

    seconds: list[float]
    result: T

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def timed(
    fn: Callable[[], T], repeat: int, *, warmup: int = 0, clock: Clock = time.perf_counter
) -> Runs[T]:
    """`fn` called `warmup` times untimed (caches, imports, code paths warmed), then
    `repeat` times, each call timed on its own."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    for _ in range(warmup):
        fn()
    seconds: list[float] = []
    for _ in range(repeat):
        start = clock()
        result = fn()
        seconds.append(clock() - start)
    return Runs(seconds, result)


def median_seconds(
    fn: Callable[[], object], repeat: int, *, warmup: int = 0, clock: Clock = time.perf_counter
) -> float:
    """The median seconds of `repeat` timed calls (`timed`)."""
    return timed(fn, repeat, warmup=warmup, clock=clock).median


def seconds(fn: Callable[[], object], clock: Clock = time.perf_counter) -> float:
    """The seconds of one call: a fresh process, a cold first call."""
    start = clock()
    fn()
    return clock() - start


def interleaved_medians(
    fns: Mapping[str, Callable[[], object]],
    repeat: int,
    *,
    warmup: int = 0,
    clock: Clock = time.perf_counter,
) -> dict[str, float]:
    """The median seconds of each function, timed in turn within every repeat: a load that
    drifts on this shared machine then hits each of them alike, the baseline included."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            times[name].append(seconds(fn, clock))
    return {name: statistics.median(ts) for name, ts in times.items()}


def percentile(values: Sequence[float], q: float) -> float:
    """The value at quantile `q` of `values` (nearest rank): p50, p95, p99 of timed runs."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def aligned(rows: Sequence[Sequence[str]], *, right: bool = False, rule: bool = False) -> str:
    """Text cells in columns as wide as their widest cell, two spaces apart, each line's
    trailing blanks cut; `right` justifies to the right, `rule` puts a line of dashes under
    the first row (the header)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [rows[0], *([["-" * w for w in widths]] if rule else []), *rows[1:]]
    justify = str.rjust if right else str.ljust
    return "\n".join(
        "  ".join(justify(cell, w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in lines
    )
