"""From step latencies to what a benchmark client measures: TTFT, TPOT and throughput at a
concurrency, under SGLang's continuous batching (docs/perf.md, "The schedule").

The model, per attention-DP rank holding `b` of the deployment's concurrent requests
(closed loop: a finished request is replaced at once, as `bench_serving --max-concurrency`
does), of which `r = min(b, capacity)` run at once (`capacity`: the requests the scheduler
admits from the KV cache, `admission_capacity`; the rest wait in the server's queue):
- prefill runs ahead of decode and batches up to the rank's pass budget of prompts
  (`rank_budget`), so a new request's prompt costs `Pb = prefill(n, isl) / n` with `n`
  prompts per pass; a prompt longer than the budget is prefilled in chunks of it, each
  pass reading the chunks before it as cached prefix (`prompt_ms`);
- TTFT = overhead + prefill(1, isl) + queue · (r - 1)/2 · Pb · min(1, 1024 / isl)^isl_power
  + wait: requests arrive in cohorts (equal lengths keep them in step) and a request waits
  for part of its cohort's prompts; measured queueing grows with the prompts ahead but
  less than in proportion to their length (long prompts leave the cohort spread out), hence
  the fitted power of the prompt length;
- wait = (b - r) / r · L when more requests are sent than the scheduler admits at once: by
  Little's law a queued request waits that long for a slot, L being a running request's
  latency (TTFT + (osl - 1) · TPOT); no fitted number. SGLang counts a running request's
  remaining output at `new_token_ratio` (0.7 at the start) and clips it at 4,096 tokens
  (`PrefillAdder`; `SGLANG_INIT_NEW_TOKEN_RATIO`, `SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION`),
  so it runs more requests than whole isl + osl contexts fit (`admission_capacity`);
- TPOT = D + interrupt · (x·y / (x + y)) / osl, with D one decode step of `b` requests
  (plus `decode_step_ms` of host time where the step source leaves it out),
  x = b·Pb the prompt work of one cycle and y = osl·D its decode work: the prefills of
  other requests that land inside this request's decode phase, spread over its tokens;
- throughput by Little's law: `c·osl / (TTFT + (osl - 1)·TPOT)` tokens/s.

`overhead`, `queue`, `isl_power`, `interrupt` (and the roofline's `decode_step_ms`) are the
only fitted numbers (`Calibration`); they are fitted on AIConfigurator's measured runs and
scored only on runs of models and GPUs they were not fitted to
(benchmarks/perf_accuracy.py).
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

    def prefill_ms(self, requests: int, isl: int, prefix: int = 0) -> float:
        """One pass over `requests` prompts of `isl` tokens each, the first `prefix` of
        them already cached (computed: `isl - prefix` a prompt)."""
        ...

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
    #: How the cohort queue scales with the prompt length: per-prompt cost times
    #: (1024 / isl) ** isl_power (0: in proportion to the prompt's prefill time).
    isl_power: float = 0.0


#: Fitted on all 933 measured runs the engine estimates, least mean |log error|
#: (benchmarks/perf_accuracy.py `fit` prints it; its figures are leave-one-model-out and
#: leave-one-GPU-out refits).
AIC_CALIBRATION = Calibration(overhead_ms=200.0, queue=1.0, interrupt=2.0, isl_power=0.5)
#: The same fit with the roofline's step latencies on the same runs (its overhead sits at
#: the grid's top, 260 ms: the roofline's prefill is the faster of the two).
ROOFLINE_CALIBRATION = Calibration(
    overhead_ms=260.0, queue=1.0, interrupt=2.0, decode_step_ms=4.0, isl_power=0.25
)
#: Prompt length at which the cohort queue is the plain per-prompt cost (`isl_power`).
ISL_REF = 1024
#: What SGLang's scheduler reserves for a running request's output:
#: `SGLANG_INIT_NEW_TOKEN_RATIO` (the ratio it starts from) times `max_new_tokens` clipped
#: at `SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION` (the same defaults in 0.4.6.post5, 0.5.18,
#: 0.5.19 and 0.5.23, read from the installed releases).
INIT_NEW_TOKEN_RATIO = 0.7
CLIP_MAX_NEW_TOKENS = 4096


@dataclass(frozen=True)
class Point:
    """One operating point of one attention-DP rank."""

    batch: int
    ttft_ms: float
    tpot_ms: float


def rank_budget(attn_dp: int = 1, chunked_prefill_size: int | None = None) -> int:
    """Prompt tokens one prefill pass of one attention-DP rank takes: the typed
    `--chunked-prefill-size` (else `PREFILL_TOKENS`), divided by the DP-attention width
    as SGLang divides it (`handle_data_parallelism`: "DP attention is enabled. chunked
    prefill size is adjusted from X to X // dp_size"). Chunked prefill typed off (<= 0)
    leaves nothing to divide: a pass takes `PREFILL_TOKENS` (SGLang's
    `max_prefill_tokens` default)."""
    if chunked_prefill_size is not None and chunked_prefill_size <= 0:
        return PREFILL_TOKENS
    return max(1, (chunked_prefill_size or PREFILL_TOKENS) // max(1, attn_dp))


def prompt_ms(steps: Steps, isl: int, budget: int = PREFILL_TOKENS) -> float:
    """One prompt of `isl` tokens on a rank whose passes take `budget` tokens: one pass,
    or, for a longer prompt, one pass per chunk of `budget` tokens with the chunks before
    it as cached prefix (SGLang's chunked prefill). Why it matters: under DP attention the
    budget is divided by the DP width (`rank_budget`), so an 8,192-token prompt on a
    DP-8 DeepSeek rank takes four passes of 2,048 tokens, each with the whole pass's
    fixed costs (the MoE's all-gather or all-to-all, small-GEMM efficiency). On the
    measured disaggregated runs with worker counts, whose DeepSeek-V3 prefill servers
    mostly run DP attention, the TTFT median error went 40.3 -> 39.6 % held out by model
    (DeepSeek-V3 on B200 37 -> 32 %; benchmarks/RESULTS-perf.md)."""
    if isl <= budget:
        return steps.prefill_ms(1, isl)
    total, done = 0.0, 0
    while done < isl:
        end = min(isl, done + budget)
        total += steps.prefill_ms(1, end, done)
        done = end
    return total


def prompt_cost_ms(steps: Steps, batch: int, isl: int, budget: int = PREFILL_TOKENS) -> float:
    """Per-prompt cost when `batch` prompts share prefill passes of `budget` tokens.
    Between one prompt and a full prefill budget the pass time is interpolated linearly in
    the prompts (prefill at >= 1k tokens a prompt is close to linear in tokens): two
    engine calls per layout instead of one per batch size, which is what keeps a 64-GPU
    plan under 10 s."""
    full = max(1, budget // isl)
    n = min(batch, full)
    one = prompt_ms(steps, isl, budget)
    if n == 1:
        return one
    top = steps.prefill_ms(full, isl)
    return (one + (n - 1) * (top - one) / (full - 1)) / n


@dataclass(frozen=True)
class Pieces:
    """The step latencies one operating point needs (ms): the one-prompt prefill, the
    per-prompt cost in a batched prefill, and the decode step."""

    prefill_one: float
    prefill_per_prompt: float
    decode: float


def running(batch: int, capacity: int | None) -> int:
    """Requests of one rank that run at once: all of them, or as many as the KV cache holds
    (`capacity` None or < 1: unknown, all run)."""
    return batch if capacity is None or capacity < 1 else min(batch, capacity)


def admission_capacity(kv_tokens: int, isl: int, osl: int) -> int:
    """Requests of `isl` prompt and `osl` output tokens one rank's scheduler keeps running
    from a cache of `kv_tokens`. SGLang's `PrefillAdder` (0.4.6.post5 to 0.5.23) admits a
    request when its prompt plus its output budget clipped at `CLIP_MAX_NEW_TOKENS` fits
    what the running requests leave, and counts a running request's remaining output at
    `new_token_ratio` only (0.7 at start, decaying while decode never has to retract one;
    0.5.23 counts `ignore_eos` requests whole). Prompts arrive over several prefill rounds
    (each capped by the chunk budget), so all but the newest count at the ratio: the
    capacity is `kv_tokens // (isl + 0.7 · min(osl, 4096))`, more than the
    `kv_tokens // (isl + osl)` that hold every whole context. A request decode later
    pushes out of the cache is retracted and re-queued, which the client sees in TPOT,
    not TTFT: the measured runs at 128 requests of 1,024 + 8,192 tokens on four B200 (room
    for 101 whole contexts) show no queue (0.74 s TTFT)."""
    if kv_tokens < 1:
        return 0
    reserve = isl + math.ceil(INIT_NEW_TOKEN_RATIO * min(osl, CLIP_MAX_NEW_TOKENS))
    return kv_tokens // max(reserve, 1)


def pieces(steps: Steps, batch: int, isl: int, osl: int, budget: int = PREFILL_TOKENS) -> Pieces:
    """The step latencies at `batch` requests on a rank whose prefill passes take `budget`
    tokens: the decode step and the prefill passes are those of the client's concurrency
    even beyond the admission `capacity`, which is an estimate (on the measured runs
    SGLang's TPOT beyond it is that of the full batch)."""
    return Pieces(
        prompt_ms(steps, isl, budget),
        prompt_cost_ms(steps, batch, isl, budget),
        steps.decode_ms(batch, isl, osl),
    )


def isl_factor(isl: int, power: float) -> float:
    """How the cohort queue per prompt scales with the prompt length: `(ISL_REF / isl) **
    power` for prompts of `ISL_REF` tokens and longer, where it was fitted (the measured
    prompts are 1,000 to 8,192 tokens), 1 below. Why not below: it would make a shorter
    prompt queue longer than a longer one where a pass costs about the same whatever its
    prompts (a pipeline's fill), and TTFT fall as the prompt grows."""
    return (ISL_REF / isl) ** power if isl > ISL_REF else 1.0


def combine(
    pc: Pieces, batch: int, isl: int, osl: int, cal: Calibration, capacity: int | None = None
) -> Point:
    """TTFT and TPOT from the step latencies (the formulas of the module docstring)."""
    r = running(batch, capacity)
    queue = cal.queue * (r - 1) / 2 * pc.prefill_per_prompt * isl_factor(isl, cal.isl_power)
    ttft = cal.overhead_ms + pc.prefill_one + queue
    d = pc.decode + cal.decode_step_ms
    x, y = batch * pc.prefill_per_prompt, osl * d
    tpot = d + cal.interrupt * (x * y / (x + y)) / osl if osl > 1 else d
    if batch > r:  # the rest wait for a slot (Little's law)
        ttft += (batch - r) / r * (ttft + (osl - 1) * tpot)
    return Point(batch, ttft, tpot)


def point(
    steps: Steps,
    batch: int,
    isl: int,
    osl: int,
    cal: Calibration,
    capacity: int | None = None,
    budget: int = PREFILL_TOKENS,
) -> Point:
    """TTFT and TPOT of `batch` concurrent requests on one attention-DP rank whose KV cache
    holds `capacity` of them at once and whose prefill passes take `budget` tokens."""
    return combine(pieces(steps, batch, isl, osl, budget), batch, isl, osl, cal, capacity)


def output_tokens_per_s(concurrency: int, osl: int, ttft_ms: float, tpot_ms: float) -> float:
    latency_s = (ttft_ms + max(osl - 1, 0) * tpot_ms) / 1e3
    return concurrency * osl / latency_s if latency_s > 0 else math.inf
