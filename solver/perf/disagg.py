"""Prefill/decode disaggregation: the prefill layout, the decode layout and the P:D worker
ratio that serve a workload fastest per GPU under its SLA (`meshsat plan --disagg`).

Why a model of its own: a disaggregated deployment has no prefill interrupting decode
(TPOT is the decode step alone) and no decode slowing prefill, but every request's KV
cache crosses the network once, and the two pools must keep pace with each other. The
estimate reads the same step latencies as the aggregated one (`PerfModel.steps`: the
engine's measured kernels or the roofline), each role layout once, and the same fitted
constants (`Calibration`: overhead, cohort queue, prompt-length power); it fits nothing
of its own (docs/perf.md, "Disaggregated serving").

For `x` prefill servers of `pr` attention-DP ranks and `y` decode servers of `dr` ranks at
`C` requests in flight (a closed loop, as `bench_serving --max-concurrency` runs it), with
`bd` requests on each decode rank (`C = bd · y · dr`):
- TPOT = decode step of `bd` requests (+ the roofline's host time per step);
- each prefill rank takes `r = ceil(C / (x · pr))` prompts of a cohort; TTFT = overhead +
  prefill(1 prompt) + queue · (r - 1)/2 · per-prompt cost · min(1, 1024/isl)^isl_power + KV
  transfer (the prefill rank's KV bytes of `isl` tokens over the per-GPU link: NVLink when
  the whole deployment sits in one scale-up domain, the NIC otherwise);
- the request rate is Little's law, `C / (TTFT + (osl - 1) · TPOT)`, but never above what
  the prefill pool serves (`x · pr` ranks, one prompt per per-prompt cost): when the
  prefill is the bottleneck the queue grows until the rates match, and TTFT with it
  (Little's law again; no fitted number);
- the decode pool holds `bd` requests of `isl + osl` tokens per rank in its KV cache (the
  memory model), and each prefill rank one prompt of `isl`.

The search (`plan_disagg`): every pair of role layouts the pair rules accept
(`pair_check`, the deployment rules between the roles), every `x, y` with `x·a + y·b <= N`, and
per-rank decode batches 1, 2, 4, ... up to the KV limit, stopping at the first that misses
the SLA (TTFT and TPOT grow with the batch, so a looser SLA never stops earlier and never
yields less throughput). Role layouts another one dominates (no more GPUs, no fewer ranks,
no slower on any term the estimate reads) are dropped before the pairing: exact, since a
dominated layout can only tie (tests/test_perf_disagg.py checks it against a brute force).
An upper bound per pair (every decode batch at the least TTFT) skips the `x, y` that cannot
beat the pair's best and, when only the `top` plans are asked for, pairs that cannot
reach them.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar, runtime_checkable

from meshsat.solver.memory import SIZING_FIELDS, Memory, MemoryModel, Parallel, sizing_flags
from meshsat.solver.perf.aic import EngineUnavailable
from meshsat.solver.perf.estimator import BATCHES, PerfModel, prefill_budget
from meshsat.solver.perf.ranking import Keep
from meshsat.solver.perf.roofline import RooflineSteps
from meshsat.solver.perf.schedule import (
    AIC_CALIBRATION,
    ROOFLINE_CALIBRATION,
    Calibration,
    isl_factor,
    prompt_ms,
)
from meshsat.solver.perf.workload import Workload

#: One network transfer's fixed cost (ms): connection bookkeeping and the first-byte latency
#: of an RDMA write, the order of one collective's latency, not fitted.
TRANSFER_LATENCY_MS = 0.05

_T = TypeVar("_T")


@dataclass(frozen=True)
class PairVerdict:
    """What the deployment's pair rules say of one prefill layout with one decode layout."""

    ok: bool
    #: One line per violated rule (its id first), empty when `ok`.
    violations: tuple[str, ...] = ()


#: The pair rules' signature: the prefill server's layout and the decode server's (their
#: resolved `config` and `derived` widths) -> a verdict. The deployment subsystem supplies
#: the real rules (`meshsat.solver.deployment.rules.pair_errors`, which `plan --disagg`
#: passes); this floor cannot import it, so the caller always says which rules apply.
PairCheck = Callable[["RoleLayout", "RoleLayout"], PairVerdict]


@runtime_checkable
class SidedPairCheck(Protocol):
    """Pair rules whose acceptance reads only part of each layout, its "side" (what
    `side(layout, role)` returns, hashable): two layouts of one role with equal sides are
    both accepted or both refused beside any layout of the other role (the violations'
    wording may name other fields). `plan_disagg` then judges one pair of layouts per pair of sides
    and counts the pairs of layouts behind it, instead of asking every pair (DeepSeek-V3
    on 256 GPUs: 2.2 million pairs of layouts, 10^5 pairs of sides). A plain `PairCheck`
    is asked per pair of layouts."""

    def __call__(self, prefill: RoleLayout, decode: RoleLayout) -> PairVerdict: ...

    def side(self, layout: RoleLayout, role: str) -> Hashable: ...

    def accepts(self, prefill: RoleLayout, decode: RoleLayout) -> bool:
        """`self(prefill, decode).ok`, without the violations' wording (the search reads
        only whether a pair is refused; most pairs it asks are)."""
        ...


def every_pair(prefill: RoleLayout, decode: RoleLayout) -> PairVerdict:
    """No pair rule at all: for callers that check pairs themselves afterwards, and for
    the brute-force comparisons of the search."""
    del prefill, decode
    return PairVerdict(True)


@dataclass(frozen=True)
class RoleLayout:
    """One server layout for one role, estimated once (the first of the layouts with the
    same widths stands for the rest)."""

    mode: str
    #: What the user launches (enumerated values plus `disaggregation_mode`).
    values: Mapping[str, Any]
    config: Mapping[str, Any]
    derived: Mapping[str, Any]
    parallel: Parallel
    memory: Memory
    source: str
    #: Other layouts with the same widths (not estimated again).
    same_widths: int

    @property
    def gpus(self) -> int:
        return self.parallel.gpus

    @property
    def ranks(self) -> int:
        """Attention-DP ranks (each its own batch and KV pool) of all replicas."""
        return self.parallel.attn_dp * self.parallel.replicas


@dataclass(frozen=True)
class PrefillCost:
    """What a prefill layout contributes: per attention-DP rank, ms."""

    role: RoleLayout
    one_ms: float
    #: One pass over the rank's full prefill budget (`pass_prompts(role.parallel, isl)`).
    full_ms: float
    transfer_ms: float
    calibration: Calibration
    is_aic: bool
    #: `at(isl)` per ISL asked (derived: neither compared nor printed).
    _at: dict[int, PrefillRates] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def at(self, isl: int) -> PrefillRates:
        """This layout's TTFT and per-prompt cost at `isl`, built once per ISL."""
        hit = self._at.get(isl)
        if hit is None:
            hit = self._at[isl] = PrefillRates.of(self, isl)
        return hit

    def per_prompt_ms(self, r: int, isl: int) -> float:
        """Per-prompt cost when `r` prompts share passes (`schedule.prompt_cost_ms`'s rule,
        on the rank's own budget)."""
        return self.at(isl).per_prompt_ms(r)

    def ttft_ms(self, r: int, isl: int) -> float:
        """TTFT of a cohort of `r` prompts on one rank, before any rate limit."""
        return self.at(isl).ttft_ms(r)


@dataclass(frozen=True)
class PrefillRates:
    """A prefill layout's TTFT and per-prompt cost at one ISL as functions of the prompts
    `r` one rank takes, every term that does not depend on `r` computed once.

    Why: the SLA search reads them for each decode batch of each (layout pair, x, y) it
    runs (1.5 million times for DeepSeek-V3 on 256 GPUs), and each read had recomputed
    the pass budget, the ISL scale and the interpolation. `PrefillCost`'s methods read
    them here too: the arithmetic is written once."""

    #: Attention-DP ranks of one prefill server.
    ranks: int
    #: Prompts one pass of a rank batches (`pass_prompts`).
    full: int
    #: Per-prompt cost when `n` prompts share passes, by `n` = 0 .. `full` (linear in the
    #: prompts between one and the full budget, as `schedule.prompt_cost_ms`).
    per_prompt: tuple[float, ...]
    #: The calibration's overhead plus one prompt's pass.
    head_ms: float
    queue: float
    #: `schedule.isl_factor`: the cohort queue's prompt-length factor.
    scale: float
    transfer_ms: float

    @classmethod
    def of(cls, pc: PrefillCost, isl: int) -> PrefillRates:
        full = pass_prompts(pc.role.parallel, isl)
        one, c = pc.one_ms, pc.calibration

        def per_prompt(n: int) -> float:
            if n <= 1:
                return one
            return (one + (n - 1) * (pc.full_ms - one) / (full - 1)) / n

        costs = tuple(per_prompt(n) for n in range(full + 1))
        scale = isl_factor(isl, c.isl_power)
        return cls(pc.role.ranks, full, costs, c.overhead_ms + one, c.queue, scale, pc.transfer_ms)

    def per_prompt_ms(self, r: int) -> float:
        return self.per_prompt[min(max(r, 0), self.full)]

    def ttft_ms(self, r: int) -> float:
        return self._ttft(r, self.per_prompt_ms(r))

    def _ttft(self, r: int, per_prompt: float) -> float:
        """Overhead, one prompt's pass, the cohort queue ahead of the last prompt (half
        the others, at their per-prompt cost) and the KV transfer."""
        queue = self.queue * (r - 1) / 2 * per_prompt * self.scale
        return self.head_ms + queue + self.transfer_ms

    def rates(self, x: int, conc: int, tpot: float, osl: int) -> tuple[float, float, float]:
        """(TTFT, requests/s, prefill pool's requests/s) of `conc` requests in flight on
        `x` servers of this layout at `tpot` ms per output token."""
        return next(self.each(x, 1, ((conc, tpot),), osl))

    def each(
        self, x: int, ranks: int, loads: Iterable[tuple[int, float]], osl: int
    ) -> Iterator[tuple[float, float, float]]:
        """`rates` at each (per-rank batch, TPOT) of `loads` on `ranks` decode ranks in
        all, lazily: the SLA search stops at the first batch that misses the SLA, and a
        generator resumed per batch costs less than a call per batch (1.5 million)."""
        p_ranks = x * self.ranks
        table, full = self.per_prompt, self.full
        for bd, tpot in loads:
            conc = bd * ranks
            r = -(-conc // p_ranks)
            per_prompt = table[min(max(r, 0), full)]
            ttft = self._ttft(r, per_prompt)
            decode_ms = (osl - 1) * tpot
            # Rates (requests/s): Little's law, and what the prefill pool can serve.
            prefill_rps = p_ranks * 1e3 / per_prompt
            rate = conc * 1e3 / (ttft + decode_ms)
            if rate > prefill_rps:  # prefill-bound: the queue grows until the rates match
                rate = prefill_rps
                ttft = conc * 1e3 / rate - decode_ms
            yield ttft, rate, prefill_rps


@dataclass(frozen=True)
class DecodeCost:
    """What a decode layout contributes: TPOT (ms) per per-rank batch, up to the KV limit."""

    role: RoleLayout
    #: (per-rank batch, TPOT ms), batches increasing.
    tpot: tuple[tuple[int, float], ...]
    #: Requests of isl + osl tokens one rank's KV cache holds.
    capacity: int
    is_aic: bool

    def tpot_at(self, batch: int) -> float:
        """TPOT at `batch` requests a rank: the table's, or read on the line between the two
        batches around it (`occupancy_batches` spaces them at most 1.5x apart)."""
        table = dict(self.tpot)
        if batch in table:
            return table[batch]
        bs = [b for b, _t in self.tpot]
        i = bisect.bisect_left(bs, batch)
        if i == 0 or i == len(bs):
            raise KeyError(f"no TPOT around batch {batch} (table: {bs})")
        (b0, t0), (b1, t1) = self.tpot[i - 1], self.tpot[i]
        return t0 + (t1 - t0) * (batch - b0) / (b1 - b0)


@dataclass(frozen=True)
class DisaggPlan:
    """One disaggregated deployment at its best concurrency under the SLA."""

    prefill: RoleLayout
    decode: RoleLayout
    prefill_workers: int
    decode_workers: int
    gpus: int
    #: Requests in flight in the whole deployment.
    concurrency: int
    ttft_ms: float
    tpot_ms: float
    #: The KV transfer's part of TTFT.
    transfer_ms: float
    tokens_per_s: float
    tokens_per_s_gpu: float
    tokens_per_s_user: float
    #: What each pool can serve at this point (requests/s): the prefill pool at its
    #: per-prompt cost, the decode pool at its batch and TPOT; the ratio balances them.
    prefill_requests_per_s: float
    decode_requests_per_s: float
    meets_sla: bool
    source: str

    @property
    def engine_estimated(self) -> bool:
        return self.source.startswith("aic") and "roofline" not in self.source


def sort_key(p: DisaggPlan) -> tuple[bool, bool, float, float, int]:
    """The same order as `ranking.sort_key`: SLA met, engine before roofline, tokens/s/GPU,
    lower TTFT, fewer GPUs."""
    return (not p.meets_sla, not p.engine_estimated, -p.tokens_per_s_gpu, p.ttft_ms, p.gpus)


@dataclass(frozen=True)
class DisaggSearch:
    """The answer of `plan_disagg`: the ranked plans and what the search did."""

    plans: list[DisaggPlan]
    prefill_layouts: int
    decode_layouts: int
    #: Role layouts left after dropping the dominated ones.
    prefill_kept: int
    decode_kept: int
    #: (prefill layout, decode layout) pairs the pair rule refused.
    pairs_refused: int
    #: (layout pair, x, y) deployments whose SLA search ran.
    deployments: int


class RoleCosts:
    """What each role asks of a layout's step latencies (the engine's, or the roofline's):
    `plan_disagg` asks each distinct role layout once, and the two roles of one width
    share one step source (`pm.steps` builds a roofline's weight sizes or looks up an
    engine: half of the role costs when each role built its own)."""

    def __init__(self, pm: PerfModel) -> None:
        self.pm = pm
        self._steps: dict[tuple[Parallel, bool], tuple[Any, bool]] = {}
        #: Roofline answers by (the source's `layout_inputs`, the question).
        self._roofline: dict[tuple[Any, ...], Any] = {}

    def _source(self, p: Parallel, dwdp: bool) -> tuple[Any, bool]:
        key = (p, dwdp)
        hit = self._steps.get(key)
        if hit is None:
            hit = self._steps[key] = self.pm.steps(p, dwdp=dwdp)
        return hit

    def _shared(self, steps: Any, question: tuple[Any, ...], answer: Callable[[], _T]) -> _T:
        """`answer()`, shared by the roofline sources with the same `layout_inputs` (of one
        model and GPU: this `pm`'s). Why: a planner's role layouts differ mostly in what
        the roofline does not read (replicas), and each asks some 17 decode steps."""
        if not isinstance(steps, RooflineSteps):
            return answer()
        key = (steps.layout_inputs(), question)
        hit: _T | None = self._roofline.get(key)
        if hit is None:
            hit = self._roofline[key] = answer()
        return hit

    def _cal(self, is_aic: bool) -> Calibration:
        return self.pm.calibration or (AIC_CALIBRATION if is_aic else ROOFLINE_CALIBRATION)

    def _ask(self, role: RoleLayout, ask: Callable[[Any], _T]) -> tuple[_T, str, bool] | None:
        """`ask(steps)` of the layout's source; the roofline, labelled, when the engine
        fails partway (as `PerfModel` does); None when nothing can estimate it."""
        pm = self.pm
        steps, is_aic = self._source(role.parallel, _dwdp(role.config))
        if steps.label.startswith("unavailable"):
            return None
        try:
            return ask(steps), steps.label, is_aic
        except EngineUnavailable as exc:
            if pm.engine == "aic" or not pm.gpu.has_speeds:
                return None
            return ask(pm._roofline(role.parallel)), f"roofline (aic: {exc})", False

    def prefill(
        self, role: RoleLayout, gbps: float, *, check_memory: bool = True
    ) -> PrefillCost | None:
        """The prefill passes and the KV transfer (None: a prompt does not fit the pool,
        unless `check_memory` is off, as for a measured run that served)."""
        isl = self.pm.workload.isl
        if check_memory and role.memory.max_total_num_tokens < isl:
            return None  # one prompt does not fit the prefill server's pool
        full_n = pass_prompts(role.parallel, isl)
        budget = prefill_budget(role.parallel)

        def ask(steps: Any) -> tuple[float, float]:
            def answer() -> tuple[float, float]:
                one = float(prompt_ms(steps, isl, budget))
                return one, float(steps.prefill_ms(full_n, isl)) if full_n > 1 else one

            return self._shared(steps, ("prefill", isl, full_n, budget), answer)

        got = self._ask(role, ask)
        if got is None:
            return None
        (one, full), label, is_aic = got
        return PrefillCost(
            replace(role, source=label), one, full, transfer_ms(role, isl, gbps),
            self._cal(is_aic), is_aic,
        )  # fmt: skip

    def decode(self, role: RoleLayout, batches: Sequence[int] | None = None) -> DecodeCost | None:
        """TPOT at the SLA search's per-rank batches up to the KV limit (or at `batches`,
        whether the KV cache holds them or not: a measured run's)."""
        w = self.pm.workload
        cap = role.memory.max_total_num_tokens // (w.isl + w.osl) if role.memory.fits else 0
        if batches is None:
            if cap < 1:
                return None
            batches = [b for b in BATCHES if b <= cap]
            if cap < BATCHES[-1] and cap not in batches:
                batches.append(cap)

        def ask(steps: Any) -> list[float]:
            def answer() -> list[float]:
                return [float(steps.decode_ms(b, w.isl, w.osl)) for b in batches]

            return self._shared(steps, ("decode", w.isl, w.osl, tuple(batches)), answer)

        got = self._ask(role, ask)
        if got is None:
            return None
        steps_ms, label, is_aic = got
        host = self._cal(is_aic).decode_step_ms
        tpot = tuple((b, t + host) for b, t in zip(batches, steps_ms, strict=True))
        return DecodeCost(replace(role, source=label), tpot, cap, is_aic)


def pass_prompts(p: Parallel, isl: int) -> int:
    """Prompts of `isl` tokens one prefill pass of one attention-DP rank batches: its
    budget (`estimator.prefill_budget`; SGLang divides `chunked_prefill_size` by `dp_size`
    under DP attention, so each rank of a DP-attention prefill server batches
    `PREFILL_TOKENS / attn_dp` tokens, not the server's budget); a longer prompt is
    chunked, one prompt a pass (`schedule.prompt_ms`)."""
    return max(1, prefill_budget(p) // isl)


def _dwdp(config: Mapping[str, Any]) -> bool:
    return int(config.get("dwdp_size") or 1) > 1


def transfer_ms(role: RoleLayout, isl: int, gbps: float) -> float:
    """One prompt's KV cache from a prefill rank to the decode side: the rank's KV bytes of
    `isl` tokens (the memory model's cell size, its layers and heads) over `gbps` GB/s;
    every rank sends its own share at once."""
    if gbps <= 0:
        return 0.0
    return TRANSFER_LATENCY_MS + role.memory.kv_bytes_per_token * isl / (gbps * 1e9) * 1e3


def link_gbps(pm: PerfModel, gpus: int) -> float:
    """The per-GPU link the KV cache crosses: the scale-up fabric (NVLink) when the whole
    deployment sits in one domain of `gpus_per_node` GPUs, the NIC otherwise."""
    g = pm.gpu
    if gpus <= max(1, min(pm.gpus_per_node, g.fabric)) and g.scale_up_gbps > 0:
        return g.scale_up_gbps
    return g.scale_out_gbps


#: Layouts read between two `beat()`s of `role_layouts` (some 10 ms on 512 GPUs).
BEAT = 64


def role_layouts(
    layouts: Iterable[Any],
    pm: PerfModel,
    mode: str,
    keep: Keep | None = None,
    beat: Callable[[], None] | None = None,
) -> list[RoleLayout]:
    """The distinct (by the widths the estimate reads) layouts that load, for one role:
    anything with `.config`, `.derived` and optionally `.values` (`solver.enumerate`'s).
    `keep(values, config, derived)`: a further test (`rank_layouts`'), asked only until a
    shape has a layout that passes it; `beat()` every `BEAT` layouts read (it may raise
    to stop: reading 10^5 layouts takes seconds)."""
    #: widths -> (the first layout's config, derived and values; how many share them).
    #: The mappings are kept as given, not copied: the enumeration's are read-only views
    #: of one row each (some hundred fields), and on 256 GPUs most layouts are the first
    #: of their widths (19,850 of 25,080), of which the search reads a few fields.
    shapes: dict[tuple[Parallel, bool, MemoryModel], tuple[Mapping[str, Any], ...]] = {}
    count: dict[tuple[Parallel, bool, MemoryModel], int] = {}
    models = _RoleModels(pm.memory, mode)
    for i, lay in enumerate(layouts):
        if beat is not None and i % BEAT == 0:
            beat()
        cfg, der = lay.config, lay.derived
        mm = models.of(lay)
        p = mm.weights.canonical(Parallel.from_resolved(cfg, der))
        if not mm.of(p).fits:
            continue
        key = (p, _dwdp(cfg), mm)
        if key in count:
            count[key] += 1
            continue
        values = {**dict(getattr(lay, "values", cfg)), "disaggregation_mode": mode}
        if keep is not None and not keep(values, cfg, der):
            continue
        count[key] = 1
        shapes[key] = (cfg, der, values)
    return [
        RoleLayout(mode, values, cfg, der, p, mm.of(p), "", count[(p, dw, mm)] - 1)
        for (p, dw, mm), (cfg, der, values) in shapes.items()
    ]


class _RoleModels:
    """The memory model of each role layout: `memory` under the layout's own resolved
    sizing flags (`MemoryModel.with_flags`, as validate sizes the server), so a decode
    role is sized as the PD decode engine it runs (its default fraction without prefill
    graphs, its radix cache off: R-DECODE-RADIX). An enumeration's layouts share the flags
    unless a row holds one of them (`Layout.shape.config_index`): those are read once per
    shape, the others per layout."""

    def __init__(self, memory: MemoryModel, mode: str) -> None:
        self.memory, self.mode = memory, mode
        self._by_shape: dict[int, tuple[Any, MemoryModel]] = {}

    def of(self, lay: Any) -> MemoryModel:
        shape = getattr(lay, "shape", None)
        hit = self._by_shape.get(id(shape)) if shape is not None else None
        if hit is not None and hit[0] is shape:
            return hit[1]
        typed = {**dict(getattr(lay, "values", lay.config)), "disaggregation_mode": self.mode}
        mm = self.memory.with_flags(sizing_flags(lay.config, typed))
        if shape is not None and not set(SIZING_FIELDS) & set(shape.config_index):
            self._by_shape[id(shape)] = (shape, mm)
        return mm


def measured_role(pm: PerfModel, mode: str, p: Parallel, values: Mapping[str, Any]) -> RoleLayout:
    """A role layout given by its widths (a measured run's), whether the memory model
    judges that it loads or not."""
    return RoleLayout(mode, values, values, {}, p, pm.memory.of(p), "", 0)


def _prefill_order(c: PrefillCost) -> tuple[Any, ...]:
    """Dominance needs the same source kind (the engine's and the roofline's calibrations
    differ) and every other term no worse; sorted by these, a layout comes after every
    layout that dominates it (or ties with it). `full_ms` is a pass of the rank's budget,
    so only layouts with the same budget (attention-DP width) compare."""
    kind = (not c.is_aic, c.role.parallel.attn_dp)
    return (kind, c.role.gpus, -c.role.ranks, c.one_ms, c.full_ms, c.transfer_ms)


def _prefill_dominates(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    # Written out, not a loop over the terms: 1.7 million calls on 256 GPUs.
    return bool(
        a[0] == b[0]
        and a[1] <= b[1]
        and a[2] <= b[2]
        and a[3] <= b[3]
        and a[4] <= b[4]
        and a[5] <= b[5]
    )


def _decode_order(c: DecodeCost) -> tuple[Any, ...]:
    return (c.role.ranks, c.role.gpus, not c.is_aic, c.tpot[0][1], dict(c.tpot))


def _decode_dominates(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    if not (a[0] == b[0] and a[1] <= b[1] and a[2] <= b[2]):
        return False
    mine = a[4]
    return all(bd in mine and mine[bd] <= t for bd, t in b[4].items())


def _undominated(
    items: list[_T],
    order: Callable[[_T], tuple[Any, ...]],
    dominates: Callable[[tuple[Any, ...], tuple[Any, ...]], bool],
) -> list[_T]:
    """Drop each item a kept one dominates. In `order` (a linear extension of dominance)
    an item's dominators come first, and one dominated by a dropped item is dominated by
    that item's dominator too, so comparing with the kept items alone is exact. Only
    items with the same first term (`order(...)[0]`) can dominate one another (both
    `dominates` require it), so each is compared with the kept items of its own, the
    last one found dominating first (neighbours in `order` tend to share a dominator;
    the order of the comparisons changes no answer)."""
    keys = sorted(((order(it), i) for i, it in enumerate(items)), key=lambda t: t[0][:4])
    kept: dict[Any, list[tuple[Any, ...]]] = {}
    out: list[int] = []
    for k, i in keys:
        group = kept.setdefault(k[0], [])
        for j, kk in enumerate(group):
            if dominates(kk, k):
                if j:
                    group.insert(0, group.pop(j))
                break
        else:
            group.append(k)
            out.append(i)
    return [items[i] for i in sorted(out)]


def _rates(
    pc: PrefillCost, dc: DecodeCost, x: int, y: int, conc: int, tpot: float, isl: int, osl: int
) -> tuple[float, float, float]:
    """(TTFT, requests/s, prefill pool's requests/s) of `conc` requests in flight."""
    return pc.at(isl).rates(x, conc, tpot, osl)


def _best_batch(
    pc: PrefillCost,
    dc: DecodeCost,
    x: int,
    y: int,
    isl: int,
    osl: int,
    sla: Callable[[float, float], bool],
) -> tuple[tuple[bool, float, float], int, float]:
    """The SLA search of one deployment: (order key, per-rank batch, TPOT) of the best
    batch meeting `sla`, or of the lightest load when none does."""
    gpus = x * pc.role.gpus + y * dc.role.gpus
    return _batch_search(pc.at(isl), dc.tpot, x, gpus, y * dc.role.ranks, osl, sla)


def _batch_search(
    pr: PrefillRates,
    tpots: Sequence[tuple[int, float]],
    x: int,
    gpus: int,
    ranks: int,
    osl: int,
    sla: Callable[[float, float], bool],
) -> tuple[tuple[bool, float, float], int, float]:
    """`_best_batch` of `x` prefill servers (`pr`) and decode servers of `ranks` ranks in
    all with the TPOT table `tpots`, on `gpus` GPUs in all (what the pairing has at
    hand)."""
    best: tuple[tuple[bool, float, float], int, float] | None = None
    for (bd, tpot), (ttft, rate, _p) in zip(tpots, pr.each(x, ranks, tpots, osl), strict=True):
        if not sla(ttft, tpot):
            # TTFT and TPOT grow with the batch: no larger one meets it either.
            break
        tps_gpu = rate * osl / gpus
        if best is None or tps_gpu >= -best[0][1]:
            best = ((False, -tps_gpu, ttft), bd, tpot)
    if best is None:
        bd, tpot = tpots[0]
        ttft, rate, _p = pr.rates(x, bd * ranks, tpot, osl)
        best = ((True, -rate * osl / gpus, ttft), bd, tpot)
    return best


def _bound(base: float, terms: Sequence[tuple[int, float]], factor: float) -> float:
    """An upper bound of tokens/s per GPU times `y / (x·a + y·b)` over every deployment of
    a pair meeting the SLA: each decode batch whose TPOT meets it, at the least TTFT
    (no queue; a prefill-bound pool only lowers the rate). `base`: the prefill's least
    TTFT (overhead + one prompt + transfer), which must meet the TTFT limit (else no
    deployment of the pair does: the bound is 0); `terms`: the decode's (batch,
    (osl - 1) · TPOT) of the batches whose TPOT meets the limit; `factor`: its ranks ·
    osl · 1e3 (`_DecodeTerms`)."""
    best = 0.0
    for bd, decode_ms in terms:
        v = bd / (base + decode_ms)
        if v > best:  # `max`, without its call: 8 million terms on 256 GPUs
            best = v
    return factor * best


def _least_ttft(pc: PrefillCost) -> float:
    c = pc.calibration
    return c.overhead_ms + pc.one_ms + pc.transfer_ms


@dataclass(frozen=True)
class _DecodeTerms:
    """What the pairing reads of one decode layout, read once per layout rather than once
    per pair (the pairs are 10^6: DeepSeek-V3 on 256 GPUs)."""

    #: The layout's place among the decode layouts: the pairing keeps their order.
    index: int
    cost: DecodeCost
    gpus: int
    ranks: int
    #: `_bound`'s factor and terms.
    factor: float
    terms: tuple[tuple[int, float], ...]
    #: The largest batch and the least decode time among `terms` (0 when there are
    #: none): `factor · most / (base + least_ms)` is no less than `_bound` (each term's
    #: quotient has a batch no larger over a sum no smaller, and rounding is monotone),
    #: three operations against one per term.
    most: int
    least_ms: float

    @classmethod
    def of(cls, index: int, dc: DecodeCost, w: Workload) -> _DecodeTerms:
        ranks = dc.role.ranks
        terms = tuple((bd, (w.osl - 1) * tpot) for bd, tpot in dc.tpot if w.tpot_met(tpot))
        most = max((bd for bd, _ms in terms), default=0)
        least = min((ms for _bd, ms in terms), default=0.0)
        return cls(index, dc, dc.role.gpus, ranks, ranks * w.osl * 1e3, terms, most, least)

    def optimistic(self, base: float) -> float:
        """An upper bound of `_bound(base, terms, factor)`, cheaper."""
        return self.factor * (self.most / (base + self.least_ms)) if self.terms else 0.0


def _pairs(
    pair_check: PairCheck, pcs: Sequence[PrefillCost], decodes: Sequence[_DecodeTerms], gpus: int
) -> Iterator[tuple[PrefillCost, list[_DecodeTerms], int]]:
    """Each prefill layout with the decode layouts it pairs with (the two fit in `gpus`
    and the pair rules accept them), in their order, and how many decode layouts that
    fit beside it the rules refuse.

    With a `SidedPairCheck` each pair of sides is judged once and its verdict holds for
    every pair of layouts behind it: each prefill side's accepted decode layouts and the
    sizes of its refused ones are listed once, and each prefill layout takes those that
    fit beside it. Otherwise each layout is a side of its own (every pair that fits is
    judged, as before)."""
    sided = pair_check if isinstance(pair_check, SidedPairCheck) else None

    def side(role: RoleLayout, mode: str) -> Hashable:
        return id(role) if sided is None else sided.side(role, mode)

    def ok(prefill: RoleLayout, decode: RoleLayout) -> bool:
        return pair_check(prefill, decode).ok if sided is None else sided.accepts(prefill, decode)

    groups: dict[Hashable, list[_DecodeTerms]] = {}
    for d in decodes:
        groups.setdefault(side(d.cost.role, "decode"), []).append(d)
    d_least = {k: min(d.gpus for d in group) for k, group in groups.items()}
    p_sides = [side(pc.role, "prefill") for pc in pcs]
    p_least: dict[Hashable, int] = {}
    for pc, k in zip(pcs, p_sides, strict=True):
        p_least[k] = min(p_least.get(k, gpus), pc.role.gpus)
    #: Per prefill side: (accepted decode layouts in order, refused ones' GPUs sorted).
    listed: dict[Hashable, tuple[list[_DecodeTerms], list[int]]] = {}
    for pc, k in zip(pcs, p_sides, strict=True):
        hit = listed.get(k)
        if hit is None:
            room = gpus - p_least[k]
            accepted: list[_DecodeTerms] = []
            refused: list[int] = []
            for dk, group in groups.items():
                if d_least[dk] > room:
                    continue  # no layout of this side fits beside any of the prefill side
                if ok(pc.role, group[0].cost.role):
                    accepted += group
                else:
                    refused += (d.gpus for d in group)
            accepted.sort(key=lambda d: d.index)
            refused.sort()
            hit = listed[k] = (accepted, refused)
        room = gpus - pc.role.gpus
        yield pc, [d for d in hit[0] if d.gpus <= room], bisect.bisect_right(hit[1], room)


def deployment(
    pc: PrefillCost,
    dc: DecodeCost,
    x: int,
    y: int,
    isl: int,
    osl: int,
    sla: Callable[[float, float], bool],
) -> DisaggPlan:
    """`x` servers of `pc` and `y` of `dc` at the best decode batch meeting `sla` (or the
    lightest load, flagged, when none does)."""
    _key, bd, tpot = _best_batch(pc, dc, x, y, isl, osl, sla)
    return _point(pc, dc, x, y, bd, tpot, isl, osl, sla)


def _point(
    pc: PrefillCost,
    dc: DecodeCost,
    x: int,
    y: int,
    bd: int,
    tpot: float,
    isl: int,
    osl: int,
    sla: Callable[[float, float], bool],
    concurrency: int | None = None,
) -> DisaggPlan:
    conc = bd * y * dc.role.ranks if concurrency is None else concurrency
    ttft, rate, prefill_rps = _rates(pc, dc, x, y, conc, tpot, isl, osl)
    decode_rps = y * dc.role.ranks * bd * 1e3 / max(osl * tpot, 1e-9)
    gpus = x * pc.role.gpus + y * dc.role.gpus
    tps = rate * osl
    src = pc.role.source
    if dc.role.source != src:
        src = f"prefill: {src}; decode: {dc.role.source}"
    # Judged on the latencies the plan carries, as `PerfModel` judges its estimates.
    ttft_ms, tpot_ms = round(ttft, 3), round(tpot, 4)
    return DisaggPlan(
        prefill=pc.role,
        decode=dc.role,
        prefill_workers=x,
        decode_workers=y,
        gpus=gpus,
        concurrency=conc,
        ttft_ms=ttft_ms,
        tpot_ms=tpot_ms,
        transfer_ms=round(pc.transfer_ms, 3),
        tokens_per_s=round(tps, 2),
        tokens_per_s_gpu=round(tps / gpus, 3),
        tokens_per_s_user=round(1e3 / tpot, 3),
        prefill_requests_per_s=round(prefill_rps, 3),
        decode_requests_per_s=round(decode_rps, 3),
        meets_sla=sla(ttft_ms, tpot_ms),
        source=src,
    )


def occupancy_batches(top: int) -> list[int]:
    """The per-rank decode batches `at_concurrency` may read TPOT at for a deployment with
    at most `top` requests a decode rank: 1, 2, 3, 4, 6, 8, 12, ... (at most 1.5x apart)
    and `top` itself."""
    out = {top}
    b = 1
    while b < top:
        out.update(x for x in (b, b + b // 2) if x < top)
        b *= 2
    return sorted(out)


def at_concurrency(
    pc: PrefillCost, dc: DecodeCost, x: int, y: int, concurrency: int, isl: int, osl: int
) -> DisaggPlan:
    """`x` servers of `pc` and `y` of `dc` at `concurrency` requests in flight (what a
    measured run set), in the closed loop's steady state.

    Not every request in flight is on a decode rank: the ones waiting for or in prefill
    are not. Little's law for the decode stage alone says the decode ranks hold
    `rate · (osl - 1) · TPOT` requests, so the per-rank batch `bd` solves
    `bd = ceil(rate(TPOT(bd)) · (osl - 1) · TPOT(bd) / decode ranks)`, at most
    `ceil(C / decode ranks)`. Both sides grow with `bd`, so iterating down from that
    bound reaches the largest solution in finitely many steps. A prefill-bound deployment
    thus decodes small batches (the measured wide-EP decode servers at a minute's TTFT
    step at the speed of a few dozen requests a rank, not `C / ranks`). `dc.tpot` must
    hold the batches asked (`RoleCosts.decode(role, occupancy_batches(top))`)."""
    ranks = y * dc.role.ranks
    bd = -(-concurrency // ranks)
    while True:
        tpot = dc.tpot_at(bd)
        _ttft, rate, _p = _rates(pc, dc, x, y, concurrency, tpot, isl, osl)
        decoding = rate * (osl - 1) * tpot / 1e3
        held = min(bd, max(1, math.ceil(decoding / ranks - 1e-9)))
        if held >= bd:
            break
        bd = held
    return _point(pc, dc, x, y, bd, tpot, isl, osl, lambda t, p: True, concurrency)


def plan_disagg(
    pm: PerfModel,
    gpus: int,
    prefill_layouts: Iterable[Any],
    decode_layouts: Iterable[Any],
    *,
    pair_check: PairCheck,
    top: int | None = None,
    prune: bool = True,
    progress: Callable[[int, int], None] | None = None,
    keep: Keep | None = None,
) -> DisaggSearch:
    """The disaggregated deployments on at most `gpus` GPUs, best first (`sort_key`).

    `prefill_layouts`/`decode_layouts`: legal single-server layouts of each role (e.g.
    `solver.enumerate(n, base={"disaggregation_mode": "prefill"}, model=spec, up_to=True)`;
    anything with `.config`, `.derived` and `.values`); `pair_check`: the deployment rules
    between a prefill and a decode layout (`every_pair` for none); `prune=False` keeps
    dominated role layouts (the brute force the tests compare with); `progress(done,
    total)` after each role layout estimated, which may raise to stop, and again with the
    same counts while the layouts are read (`0, 0`: their number is not known yet) and
    after each prefill layout's pairs are searched: on 512 GPUs each of those two phases
    takes seconds, and a stop (the web page's Cancel, a deadline) waits for the next call;
    `keep`: a further test of a role layout (`role_layouts`; `plan`'s launch check across
    nodes). Thread-safe: `pm` is."""
    w = pm.workload
    costs = RoleCosts(pm)
    done = total = 0

    def beat() -> None:
        if progress is not None:
            progress(done, total)

    pre = role_layouts(prefill_layouts, pm, "prefill", keep, beat)
    dec = role_layouts(decode_layouts, pm, "decode", keep, beat)
    total = len(pre) + len(dec)
    gbps = link_gbps(pm, gpus)
    pcs: list[PrefillCost] = []
    for role in pre:
        if role.gpus <= gpus:
            c = costs.prefill(role, gbps)
            if c is not None:
                pcs.append(c)
        done += 1
        if progress is not None:
            progress(done, total)
    dcs: list[DecodeCost] = []
    for role in dec:
        if role.gpus <= gpus:
            d = costs.decode(role)
            if d is not None:
                dcs.append(d)
        done += 1
        if progress is not None:
            progress(done, total)
    if prune:
        pcs = _undominated(pcs, _prefill_order, _prefill_dominates)
        dcs = _undominated(dcs, _decode_order, _decode_dominates)
    plans: list[DisaggPlan] = []
    #: The sort keys of the `top` best plans so far: a pair whose bound cannot beat the
    #: last of them is not searched (only with `top`: without it every pair is listed).
    leaders: list[tuple[Any, ...]] = []
    refused = runs = 0
    decodes = [_DecodeTerms.of(i, dc, w) for i, dc in enumerate(dcs)]
    for pc, paired, n_refused in _pairs(pair_check, pcs, decodes, gpus):
        beat()
        refused += n_refused
        a, base, pr = pc.role.gpus, _least_ttft(pc), pc.at(w.isl)
        fast = w.ttft_met(base)  # else no decode batch meets the SLA beside it
        for dt in paired:
            b, dc = dt.gpus, dt.cost
            engine = pc.is_aic and dc.is_aic
            full = top is not None and len(leaders) >= top
            if full and fast and leaders[-1] < (False, not engine, -dt.optimistic(base) / b):
                continue  # the exact bound below is no higher: it would skip the pair too
            per_gpu = _bound(base, dt.terms, dt.factor) if fast else 0.0  # x tokens/s/GPU bound
            reach = (False, not engine, -per_gpu / b)  # the best key the pair could have
            if full and leaders[-1] < reach:
                continue
            best: tuple[tuple[bool, float, float, int], int, int, int, float] | None = None
            for x in range(1, (gpus - b) // a + 1):
                for y in range(1, (gpus - x * a) // b + 1):
                    met = None if best is None or best[0][0] else -best[0][1]
                    if met is not None and per_gpu * y / (x * a + y * b) < met:
                        continue  # cannot beat the pair's best meeting the SLA
                    runs += 1
                    (miss, neg_tps, ttft), bd, tpot = _batch_search(
                        pr, dc.tpot, x, x * a + y * b, y * dt.ranks, w.osl, w.met_by
                    )
                    key = (miss, neg_tps, ttft, x * a + y * b)
                    if best is None or key < best[0]:
                        best = (key, x, y, bd, tpot)
            if best is not None:
                _k, x, y, bd, tpot = best
                plan = _point(pc, dc, x, y, bd, tpot, w.isl, w.osl, w.met_by)
                plans.append(plan)
                if top is not None:
                    bisect.insort(leaders, sort_key(plan))
                    del leaders[top:]
    plans.sort(key=sort_key)
    return DisaggSearch(
        plans if top is None else plans[:top],
        len(pre),
        len(dec),
        len(pcs),
        len(dcs),
        refused,
        runs,
    )


__all__ = [
    "DecodeCost",
    "DisaggPlan",
    "DisaggSearch",
    "PairCheck",
    "PairVerdict",
    "PrefillCost",
    "PrefillRates",
    "RoleLayout",
    "SidedPairCheck",
    "at_concurrency",
    "deployment",
    "every_pair",
    "link_gbps",
    "measured_role",
    "occupancy_batches",
    "pass_prompts",
    "plan_disagg",
    "role_layouts",
    "sort_key",
    "transfer_ms",
]
