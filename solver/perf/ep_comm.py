"""AIConfigurator's step latencies plus meshsat's expert-parallel all-to-all: what
`engine="auto"` estimates a layout with expert parallelism by (docs/perf.md, "Sources").

Why: on the measured runs the engine prices SGLang's EP layouts almost like plain TP (its
TPOT for Qwen3.5-397B at `--tp 4 --ep 4` is within a few per cent of `--tp 4`), while
SGLang measured them 30-50 % slower at small batches: the engine's TPOT for the 251 EP rows
is 10 % too low (median), and among same-GPU-count layouts of one build it misses the
measured best in 16 of 34 groups (all of them TP against EP). meshsat's roofline prices the
all-to-all (dispatch and combine per MoE layer, with one collective's latency each) and
ranks those groups right. Adding that one term, with no fitted number, to the engine's prefill and
decode passes removes the bias (benchmarks/RESULTS-perf.md gives both). The label says so:
`aic <system> sglang-<version> + roofline EP all-to-all`; `engine="aic"` keeps the engine
alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshsat.solver.perf.roofline import RooflineSteps
from meshsat.solver.perf.schedule import Steps

#: What the label adds to the engine's.
EP_LABEL = "roofline EP all-to-all"


@dataclass(frozen=True)
class WithEpComm:
    """Step latencies (ms): `engine`'s plus `roofline`'s EP all-to-all of the same pass."""

    engine: Steps
    roofline: RooflineSteps

    @property
    def label(self) -> str:
        return f"{self.engine.label} + {EP_LABEL}"

    def prefill_ms(self, requests: int, isl: int, prefix: int = 0) -> float:
        a2a = self.roofline.ep_journey_s(requests * (isl - prefix))
        return self.engine.prefill_ms(requests, isl, prefix) + 1e3 * a2a

    def decode_ms(self, batch: int, isl: int, osl: int) -> float:
        return self.engine.decode_ms(batch, isl, osl) + 1e3 * self.roofline.ep_journey_s(batch)
