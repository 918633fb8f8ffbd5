"""How close the estimates came to measured SGLang runs: what `plan` says beside its
ranking, so that a reader weighs a 5 % lead against a typical TTFT error of a third.

Why quoted constants, not a computation: the comparison needs aiconfigurator-core's
measured set and some 20 s (`benchmarks/perf_accuracy.py`, `perf_disagg_accuracy.py`);
`plan` only quotes its result. `tests/test_perf_accuracy_quote.py` reads
benchmarks/RESULTS-perf.md and fails when a figure here no longer matches it, so a
re-run that moves the figures moves these with it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Where the figures come from (relative to the repository).
SOURCE = "benchmarks/RESULTS-perf.md"


@dataclass(frozen=True)
class AggregatedQuote:
    """`plan`'s figures: the default engine, constants fitted without the scored model."""

    #: Measured aggregated SGLang runs the engine estimates.
    runs: int
    #: Median |estimate / measured - 1| of TTFT and TPOT, in per cent.
    ttft_median_pct: float
    tpot_median_pct: float
    #: Layouts of one GPU count measured on one SGLang build: the share of groups whose
    #: measured best the estimate ranks first, and the groups.
    same_build_top1_pct: int
    same_build_groups: int
    #: The same across builds (the order then mixes releases as well as layouts).
    across_builds_top1_pct: int
    across_builds_groups: int

    def text(self) -> str:
        return (
            f"accuracy: against {self.runs} measured SGLang runs, each model held out of the "
            f"fit, TTFT median |error| {self.ttft_median_pct} %, TPOT {self.tpot_median_pct} %; "
            "among layouts of one GPU count measured on one SGLang build the measured best "
            f"ranked first in {self.same_build_top1_pct} % of {self.same_build_groups} groups "
            f"({self.across_builds_top1_pct} % of {self.across_builds_groups} when builds "
            f"mix) ({SOURCE})"
        )


@dataclass(frozen=True)
class DisaggQuote:
    """`plan --disagg`'s figures, on the measured disaggregated runs."""

    #: Measured runs that record both worker counts.
    runs: int
    ttft_median_pct: float
    tpot_median_pct: float
    #: Groups (one model, GPU, quantization, ISL/OSL) whose first-ranked configuration
    #: measured within 10 % of the best, and all groups.
    groups_within_10pct: int
    groups: int

    def text(self) -> str:
        return (
            f"accuracy: against {self.runs} measured disaggregated SGLang runs with worker "
            f"counts, each model held out of the fit, TTFT median |error| "
            f"{self.ttft_median_pct} %, TPOT {self.tpot_median_pct} %; the first-ranked "
            f"configuration measured within 10 % of the best in {self.groups_within_10pct} of "
            f"{self.groups} groups ({SOURCE})"
        )


AGGREGATED = AggregatedQuote(
    runs=933,
    ttft_median_pct=34.4,
    tpot_median_pct=15.0,
    same_build_top1_pct=97,
    same_build_groups=34,
    across_builds_top1_pct=47,
    across_builds_groups=126,
)
DISAGG = DisaggQuote(
    runs=101, ttft_median_pct=39.6, tpot_median_pct=19.5, groups_within_10pct=20, groups=29
)
