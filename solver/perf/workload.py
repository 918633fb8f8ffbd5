"""What an estimate is for: request lengths and the latency limits of a service (SLA).

Why its own value: every estimate, the SLA search and `plan`'s ranking read the same four
numbers, and a frozen record keys the estimator's cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshsat.solver.errors import InputError


@dataclass(frozen=True)
class Workload:
    """Input and output tokens per request, and optional limits in milliseconds."""

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
            if v is not None and not v > 0:
                raise InputError(f"{name} must be a positive number of milliseconds, got {v}")

    def met_by(self, ttft_ms: float, tpot_ms: float) -> bool:
        return (self.ttft_ms is None or ttft_ms <= self.ttft_ms) and (
            self.tpot_ms is None or tpot_ms <= self.tpot_ms
        )

    def describe(self) -> str:
        limits = []
        if self.ttft_ms is not None:
            limits.append(f"TTFT <= {self.ttft_ms:g} ms")
        if self.tpot_ms is not None:
            limits.append(f"TPOT <= {self.tpot_ms:g} ms")
        sla = ", ".join(limits) or "no latency limit"
        return f"ISL {self.isl}, OSL {self.osl}, {sla}"
