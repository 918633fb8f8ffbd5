"""What an estimate is for: request lengths and the latency limits of a service (SLA).

Why its own value: every estimate, the SLA search and `plan`'s ranking read the same four
numbers, and a frozen record keys the estimator's cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from meshsat.solver.errors import InputError

#: The SLA `meshsat plan` and `enumerate --perf` apply when none is given: AIConfigurator's
#: own CLI defaults (`aiconfigurator cli default --ttft 2000 --tpot 30`, ms). Without a
#: limit the best throughput is the largest batch the KV cache holds, which on a large
#: deployment means tens of seconds to the first token and a few tokens/s per user: not what
#: an operator means by "fastest". `--no-sla` (or 0 for one limit) lifts it.
DEFAULT_TTFT_MS = 2000.0
DEFAULT_TPOT_MS = 30.0
#: The decimals `plan` and `enumerate --perf` publish TTFT and TPOT with (ms).
TTFT_DIGITS = 1
TPOT_DIGITS = 2


@dataclass(frozen=True)
class Workload:
    """Input and output tokens per request, and optional limits in milliseconds: none
    unless given (measured runs are compared at their own concurrency), where `plan` and
    `enumerate --perf` apply `DEFAULT_TTFT_MS` and `DEFAULT_TPOT_MS`; `cli_workload` builds
    the command line's."""

    isl: int = 1024
    osl: int = 1024
    #: Time to first token limit (ms); None = no limit.
    ttft_ms: float | None = None
    #: Time per output token limit (ms); None = no limit.
    tpot_ms: float | None = None

    def __post_init__(self) -> None:
        if self.isl < 1 or self.osl < 1:
            raise InputError(f"--isl and --osl must be >= 1, got {self.isl} and {self.osl}")
        for name, v in (("--ttft", self.ttft_ms), ("--tpot", self.tpot_ms)):
            # Finite too: an infinite limit is no limit (None), and JSON has no infinity.
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise InputError(
                    f"{name} must be a positive, finite number of milliseconds, got {v}"
                )

    @property
    def limited(self) -> bool:
        """Whether any latency limit applies (else the SLA search takes the largest batch)."""
        return self.ttft_ms is not None or self.tpot_ms is not None

    def met_by(self, ttft_ms: float, tpot_ms: float) -> bool:
        # `ttft_met` and `tpot_met` written out: the disaggregated search asks 10^6 times.
        return (self.ttft_ms is None or ttft_ms <= self.ttft_ms) and (
            self.tpot_ms is None or tpot_ms <= self.tpot_ms
        )

    def ttft_met(self, ttft_ms: float) -> bool:
        """The TTFT limit alone (`plan --disagg`'s bound reads the two limits apart)."""
        return self.ttft_ms is None or ttft_ms <= self.ttft_ms

    def tpot_met(self, tpot_ms: float) -> bool:
        return self.tpot_ms is None or tpot_ms <= self.tpot_ms

    def published(self, ttft_ms: float, tpot_ms: float) -> tuple[float, float]:
        """TTFT and TPOT as a table, CSV or JSON row prints them (`TTFT_DIGITS`,
        `TPOT_DIGITS`), each on the same side of its limit as the figure judged: a reader
        who re-checks the SLA from the printed numbers must reach the row's `meets_sla`, and
        a TTFT of 500.004 ms against `--ttft 500` misses it yet rounds to 500.0."""
        return (
            _on_side(ttft_ms, self.ttft_ms, TTFT_DIGITS),
            _on_side(tpot_ms, self.tpot_ms, TPOT_DIGITS),
        )

    def describe(self) -> str:
        limits = []
        if self.ttft_ms is not None:
            limits.append(f"TTFT <= {self.ttft_ms:g} ms")
        if self.tpot_ms is not None:
            limits.append(f"TPOT <= {self.tpot_ms:g} ms")
        sla = ", ".join(limits) or "no latency limit"
        return f"ISL {self.isl}, OSL {self.osl}, {sla}"


def _on_side(value: float, limit: float | None, digits: int) -> float:
    """`value` rounded to `digits`, moved one last digit away from `limit` where the plain
    rounding would cross it (onto it from above, past it from below): within one last digit
    of the figure, whatever the limit's own digits. NaN (no estimate) stays NaN."""
    shown = round(value, digits)
    if limit is None or not math.isfinite(value) or (shown <= limit) == (value <= limit):
        return shown
    step = 10.0**-digits
    return round(shown + step if value > limit else shown - step, digits)


def cli_workload(
    isl: int, osl: int, ttft_ms: float | None, tpot_ms: float | None, *, no_sla: bool = False
) -> Workload:
    """The workload a command line asks for: a limit left out takes the default SLA, a limit
    of 0 (or infinity) is no limit, and `no_sla` lifts both (it contradicts an explicit
    positive limit)."""
    if no_sla:
        given = [n for n, v in (("--ttft", ttft_ms), ("--tpot", tpot_ms)) if v and math.isfinite(v)]
        if given:
            raise InputError(f"--no-sla lifts every latency limit; drop {' and '.join(given)}")
        return Workload(isl, osl)

    def limit(v: float | None, default: float) -> float | None:
        if v is None:
            return default
        # `--ttft inf` means what 0 means (the parser's `min=0` has refused NaN already).
        return None if v == 0 or math.isinf(v) else v

    return Workload(isl, osl, limit(ttft_ms, DEFAULT_TTFT_MS), limit(tpot_ms, DEFAULT_TPOT_MS))
