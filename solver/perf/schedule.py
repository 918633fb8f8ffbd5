"""From step latencies to what a benchmark client measures: TTFT, TPOT and throughput at a
concurrency, under SGLang's continuous batching (docs/perf.md, "The schedule").

The model, per attention-DP rank holding `b` of the deployment's concurrent requests
(closed loop: a finished request is replaced at once, as `bench_serving --max-concurrency`
does):
- prefill runs ahead of decode and batches up to `PREFILL_TOKENS` of prompts, so a new
  request's prompt costs `Pb = prefill(n, isl) / n` with `n` prompts per pass;
- TTFT = overhead + prefill(1, isl) + queue · (b - 1)/2 · Pb: requests arrive in cohorts
  (equal lengths keep them in step), and a request waits for half of its cohort's prompts;
- TPOT = D + interrupt · (x·y / (x + y)) / osl, with D one decode step of `b` requests
  (plus `decode_step_ms` of host time where the step source leaves it out),
  x = b·Pb the prompt work of one cycle and y = osl·D its decode work: the prefills of
  other requests that land inside this request's decode phase, spread over its tokens;
- throughput by Little's law: `c·osl / (TTFT + (osl - 1)·TPOT)` tokens/s.

`overhead`, `queue`, `interrupt` (and the roofline's `decode_step_ms`) are the only fitted
numbers (`Calibration`); they are
fitted on AIConfigurator's measured runs and scored only on runs of models and GPUs they
were not fitted to (benchmarks/perf_accuracy.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

#: Prompt tokens one prefill pass batches (SGLang's chunked-prefill budget on large GPUs).
PREFILL_TOKENS = 16384


class Steps(Protocol):
    @property
    def label(self) -> str: ...

    def prefill_ms(self, requests: int, isl: int) -> float: ...

    def decode_ms(self, batch: int, isl: int, osl: int) -> float: ...


@dataclass(frozen=True)
class Calibration:
    """The schedule's fitted constants (see the module docstring)."""

    overhead_ms: float
    queue: float
    interrupt: float
    #: Host time per decode step the step latencies leave out (scheduling, sampling,
    #: launch). The engine's decode tables are measured whole steps, so its calibration
    #: keeps 0; the roofline's is fitted.
    decode_step_ms: float = 0.0


#: Fitted on all 933 measured runs the engine estimates (benchmarks/perf_accuracy.py
#: prints the fit; its figures are leave-one-model-out and leave-one-GPU-out refits).
AIC_CALIBRATION = Calibration(overhead_ms=160.0, queue=0.75, interrupt=2.0)
#: The same fit with the roofline's step latencies on the same runs.
ROOFLINE_CALIBRATION = Calibration(overhead_ms=200.0, queue=1.0, interrupt=1.0, decode_step_ms=4.0)


@dataclass(frozen=True)
class Point:
    """One operating point of one attention-DP rank."""

    batch: int
    ttft_ms: float
    tpot_ms: float


def prompt_cost_ms(steps: Steps, batch: int, isl: int) -> float:
    """Per-prompt cost when `batch` prompts share prefill passes. Between one prompt and a
    full prefill budget the pass time is interpolated linearly in the prompts (prefill at
    >= 1k tokens a prompt is close to linear in tokens): two engine calls per layout
    instead of one per batch size, which is what keeps a 64-GPU plan under 10 s."""
    full = max(1, PREFILL_TOKENS // isl)
    n = min(batch, full)
    if n == 1:
        return steps.prefill_ms(1, isl)
    one, top = steps.prefill_ms(1, isl), steps.prefill_ms(full, isl)
    return (one + (n - 1) * (top - one) / (full - 1)) / n


@dataclass(frozen=True)
class Pieces:
    """The step latencies one operating point needs (ms): the one-prompt prefill, the
    per-prompt cost in a batched prefill, and the decode step."""

    prefill_one: float
    prefill_per_prompt: float
    decode: float


def pieces(steps: Steps, batch: int, isl: int, osl: int) -> Pieces:
    return Pieces(
        steps.prefill_ms(1, isl),
        prompt_cost_ms(steps, batch, isl),
        steps.decode_ms(batch, isl, osl),
    )


def combine(pc: Pieces, batch: int, osl: int, cal: Calibration) -> Point:
    """TTFT and TPOT from the step latencies (the formulas of the module docstring)."""
    ttft = cal.overhead_ms + pc.prefill_one + cal.queue * (batch - 1) / 2 * pc.prefill_per_prompt
    d = pc.decode + cal.decode_step_ms
    x, y = batch * pc.prefill_per_prompt, osl * d
    tpot = d + cal.interrupt * (x * y / (x + y)) / osl if osl > 1 else d
    return Point(batch, ttft, tpot)


def point(steps: Steps, batch: int, isl: int, osl: int, cal: Calibration) -> Point:
    """TTFT and TPOT of `batch` concurrent requests on one attention-DP rank."""
    return combine(pieces(steps, batch, isl, osl), batch, osl, cal)


def output_tokens_per_s(concurrency: int, osl: int, ttft_ms: float, tpot_ms: float) -> float:
    latency_s = (ttft_ms + max(osl - 1, 0) * tpot_ms) / 1e3
    return concurrency * osl / latency_s if latency_s > 0 else math.inf
