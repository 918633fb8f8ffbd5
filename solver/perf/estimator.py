"""`PerfModel`: the performance estimate of a validated layout, built once per model, GPU,
release and workload, cached per layout shape, safe to share between threads.

Why a model object: the engine's databases, the memory model and the compiled engines are
loaded once and every later layout costs a few dictionary lookups and engine calls
(`benchmarks/bench_perf.py` measures estimates per second).

Source policy (never mixed silently: each estimate's label names every part):
`engine="auto"` asks AIConfigurator (`engine_args` maps the layout, `aic` answers), adds
meshsat's EP all-to-all to a MoE layout with expert parallelism (`ep_comm`, labelled
`... + roofline EP all-to-all`), and falls back to the roofline when the layout or GPU is
outside the engine, labelling the row `roofline (aic: <why>)`; `"aic"` is the engine alone
and labels a layout it cannot estimate `unavailable`; `"roofline"` never asks the engine.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from meshsat.solver.errors import InputError
from meshsat.solver.memory import MemoryModel, Parallel
from meshsat.solver.memory.facts import ModelFacts, facts_from_config
from meshsat.solver.memory.gpus import Gpu, gpu
from meshsat.solver.memory.models import model_config
from meshsat.solver.memory.quantized_checkpoints import with_quantization_flag
from meshsat.solver.memory.weights import WeightModel
from meshsat.solver.perf.aic import (
    AicSteps,
    EngineUnavailable,
    database_versions,
    installed,
    model_location,
)
from meshsat.solver.perf.context import check_request_fits
from meshsat.solver.perf.engine_args import (
    EngineArgs,
    Unsupported,
    checkpoint_quant,
    engine_args,
)
from meshsat.solver.perf.ep_comm import WithEpComm
from meshsat.solver.perf.roofline import RooflineSteps
from meshsat.solver.perf.schedule import (
    AIC_CALIBRATION,
    ROOFLINE_CALIBRATION,
    Calibration,
    Steps,
    admission_capacity,
    output_tokens_per_s,
    point,
    rank_budget,
)
from meshsat.solver.perf.workload import Workload

Engine = Literal["auto", "aic", "roofline"]
ENGINES: tuple[str, ...] = ("auto", "aic", "roofline")

#: Per-rank batches the SLA search tries (and the KV limit itself when smaller than the top),
#: at most 1.5x apart: on powers of two a layout whose limit falls just short of the next
#: one was credited with the batch below, up to half its concurrency, and two layouts on
#: either side of a power of two were ranked by the grid, not by their speed.
BATCHES: tuple[int, ...] = (
    1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
)  # fmt: skip


@dataclass(frozen=True)
class Estimate:
    """One layout's operating point under a workload (plain values)."""

    #: Where the numbers come from: `aic <system> sglang-<db version>`, `roofline`, or
    #: `roofline (aic: <why not>)`.
    source: str
    #: Concurrent requests in the whole deployment (all attention-DP ranks and replicas).
    concurrency: int
    ttft_ms: float
    tpot_ms: float
    tokens_per_s: float
    tokens_per_s_gpu: float
    tokens_per_s_user: float
    gpus: int
    meets_sla: bool
    #: Concurrency the KV cache holds at isl + osl tokens per request.
    kv_concurrency: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Unavailable:
    """No source, and the label says why: `--engine aic` where the engine cannot (`aic:
    <why>`, as the roofline's `roofline (aic: <why>)` does under `auto`), or a GPU without
    speeds (`--gpu-memory`)."""

    def __init__(self, why: str) -> None:
        self.label = f"unavailable ({why})"


class PerfModel:
    """Estimates for one model on one GPU type, release and workload."""

    def __init__(
        self,
        model: str | Path | Mapping[str, Any],
        gpu_type: str | Gpu,
        workload: Workload | None = None,
        *,
        sglang_version: str = "0.5.23",
        engine: Engine = "auto",
        gpus_per_node: int | None = None,
        kv_cache_dtype: str | None = None,
        quant: str | None = None,
        quantization: str | None = None,
        model_id: str | None = None,
        calibration: Calibration | None = None,
        memory_options: Mapping[str, Any] | None = None,
    ) -> None:
        if engine not in ENGINES:
            raise InputError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
        if isinstance(model, Mapping):
            self.config: Mapping[str, Any] = model
            self.model_id = model_id or "custom"
        else:
            self.config = model_config(str(model))
            self.model_id = model_id or str(model)
        # `--quantization` as validate prices it: a 16-bit checkpoint with fp8 is quantized
        # online (weights and KV from that), a quantized checkpoint keeps its own scheme.
        self.config = with_quantization_flag(self.config, quantization)
        if quant is None:  # the checkpoint's FP8 scaling picks the engine's kernels
            quant = checkpoint_quant(self.config)
        self.facts: ModelFacts = facts_from_config(self.config)
        self.gpu = gpu_type if isinstance(gpu_type, Gpu) else gpu(gpu_type)
        self.workload = workload or Workload()
        check_request_fits(self.config, self.workload.isl, self.workload.osl, self.model_id)
        self.sglang_version = sglang_version
        self.engine = engine
        self.gpus_per_node = gpus_per_node or self.gpu.fabric
        self.kv_cache_dtype = kv_cache_dtype
        self.quant = quant
        self.calibration = calibration
        w = self.workload
        self.memory = MemoryModel(
            self.facts,
            self.gpu,
            context_length=w.isl + w.osl,
            kv_cache_dtype=kv_cache_dtype,
            # Measured runs that load only above the default fraction were launched with
            # an explicit --mem-fraction-static (DeepSeek-R1 FP8, tp 4, B200). A `pack` in
            # `memory_options` (a pack's own sizing, as `validate --gpu` reads it) wins.
            **{
                "pack": memory_pack(sglang_version),
                "raise_default_fraction": True,
                **dict(memory_options or {}),
            },
        )
        #: The KV cache's dtype as SGLang resolves `auto` (the memory model's: an FP8 cache
        #: from the checkpoint's `kv_cache_quant_algo`, DSA's on Blackwell): the engine and
        #: the roofline price the cache the server runs, which the KV tokens already count.
        self.kv_cache_dtype = self.memory.kv_cache_dtype
        self._lock = threading.Lock()
        self._cache: dict[tuple[Parallel, bool, int | None], Estimate] = {}
        #: The roofline's weight sizes (the memory model's table at the newest pack, as
        #: `RooflineSteps.of` builds it), built once for every layout.
        self._weights = WeightModel(self.facts, self.gpu)

    # ---- sources ------------------------------------------------------------------------
    def engine_args(self, p: Parallel, *, dwdp: bool = False) -> EngineArgs | Unsupported:
        """The engine's arguments for `p` (what the mapping table tests pin)."""
        return engine_args(
            p,
            self.facts,
            self.gpu,
            model_path=self.model_id,
            pack_version=self.sglang_version,
            database_versions=database_versions(),
            kv_cache_dtype=self.kv_cache_dtype,
            quant=self.quant,
            dwdp=dwdp,
        )

    def steps(self, p: Parallel, *, dwdp: bool = False) -> tuple[Steps | _Unavailable, bool]:
        """The step-latency source for `p` and whether it is the engine."""
        why = ""
        if self.engine != "roofline":
            args = self.engine_args(p, dwdp=dwdp)
            if isinstance(args, Unsupported):
                why = args.reason
            elif not installed():
                why = "aiconfigurator-core is not installed (pip install 'meshsat[perf]')"
            else:
                loc = model_location(self.model_id, self.config)
                try:
                    aic = AicSteps(_with_model(args, loc))
                except EngineUnavailable as exc:
                    why = str(exc)
                else:
                    if self.engine == "auto" and self.facts.is_moe and p.ep > 1:
                        return WithEpComm(aic, self._roofline(p)), True
                    return aic, True
            if self.engine == "aic":
                return _Unavailable(f"aic: {why}"), False
        if not self.gpu.has_speeds:
            return _Unavailable(f"{self.gpu.name} has no speeds: name its type, --gpu"), False
        roof = self._roofline(p)
        if why:
            roof = replace(roof, label=f"roofline (aic: {why})")
        return roof, False

    def _roofline(self, p: Parallel) -> RooflineSteps:
        return RooflineSteps.of(
            self.facts, p, self.gpu, self.gpus_per_node, self.kv_cache_dtype, self._weights
        )

    # ---- estimates ----------------------------------------------------------------------
    def of(self, resolved: Mapping[str, Any], derived: Mapping[str, Any]) -> Estimate:
        """The estimate of a validated layout (`Report.resolved`/`.derived`, or an enumerated
        `Layout.config`/`.derived`), at the best concurrency under the workload's SLA."""
        dwdp = int(resolved.get("dwdp_size") or 1) > 1
        return self.estimate(Parallel.from_resolved(resolved, derived), dwdp=dwdp)

    def estimate(
        self, p: Parallel, *, dwdp: bool = False, concurrency: int | None = None
    ) -> Estimate:
        """`p` at `concurrency` (whole deployment, spread over its attention-DP ranks in
        whole requests: the estimate's own `concurrency` says what ran), or at the SLA
        search's choice."""
        if concurrency is not None and not (isinstance(concurrency, int) and concurrency >= 1):
            # 0 or -5 was estimated as 1 request, with nothing to say the question was wrong.
            raise InputError(f"concurrency must be a whole number >= 1, got {concurrency!r}")
        key = (p, dwdp, concurrency)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        est = self._estimate(p, dwdp, concurrency)
        with self._lock:
            self._cache[key] = est
        return est

    def _estimate(
        self,
        p: Parallel,
        dwdp: bool,
        concurrency: int | None,
        fallback: RooflineSteps | None = None,
    ) -> Estimate:
        w = self.workload
        mem = self.memory.of(p)
        ranks = p.attn_dp * p.replicas
        kv_tokens = mem.max_total_num_tokens if mem.fits else 0
        per_rank_kv = kv_tokens // (w.isl + w.osl)
        kv_conc = per_rank_kv * ranks
        found: tuple[Steps | _Unavailable, bool]
        found = (fallback, False) if fallback is not None else self.steps(p, dwdp=dwdp)
        steps, is_aic = found
        if isinstance(steps, _Unavailable) or per_rank_kv < 1:
            return self._empty(steps.label if per_rank_kv >= 1 else "does not fit", p, kv_conc)
        cal = self.calibration or (AIC_CALIBRATION if is_aic else ROOFLINE_CALIBRATION)
        if concurrency is not None:
            batches = [max(1, -(-concurrency // ranks))]
        else:
            batches = [b for b in BATCHES if b <= per_rank_kv]
            if per_rank_kv < BATCHES[-1] and per_rank_kv not in batches:
                batches.append(per_rank_kv)
        best: Estimate | None = None
        steps = _Memo(steps)
        try:
            for b in batches:
                e = self._at(steps, p, b, ranks, kv_tokens, cal)
                if concurrency is not None:
                    return e
                if not e.meets_sla:
                    # TTFT and TPOT grow with the batch: no larger batch meets it either. A
                    # looser SLA stops no earlier, so it never finds less throughput.
                    break
                if best is None or e.tokens_per_s_gpu >= best.tokens_per_s_gpu:
                    best = e
            if best is None:  # nothing meets the SLA: the lightest load, flagged
                best = self._at(steps, p, 1, ranks, kv_tokens, cal)
        except EngineUnavailable as exc:
            if self.engine == "aic":
                return self._empty(_Unavailable(f"aic: {exc}").label, p, kv_conc)
            roof = self._roofline(p)
            # The engine failed partway: the whole estimate comes from the roofline.
            roof = replace(roof, label=f"roofline (aic: {exc})")
            return self._estimate(p, dwdp, concurrency, fallback=roof)
        return best

    def _at(
        self, steps: Steps, p: Parallel, b: int, ranks: int, kv_tokens: int, cal: Calibration
    ) -> Estimate:
        w = self.workload
        kv_conc = kv_tokens // (w.isl + w.osl) * ranks
        # Beyond the requests the scheduler admits the rest queue (only an explicit
        # concurrency gets there: the SLA search stops at the whole-context KV limit, below).
        cap = admission_capacity(kv_tokens, w.isl, w.osl)
        pt = point(steps, b, w.isl, w.osl, cal, capacity=cap, budget=prefill_budget(p))
        conc = b * ranks
        tps = output_tokens_per_s(conc, w.osl, pt.ttft_ms, pt.tpot_ms)
        # The SLA is judged on the latencies the estimate carries, so that a check of them
        # against the limits agrees with `meets_sla` (`Workload.published` keeps it so
        # when the CLI rounds them further).
        ttft, tpot = round(pt.ttft_ms, 3), round(pt.tpot_ms, 4)
        return Estimate(
            source=steps.label,
            concurrency=conc,
            ttft_ms=ttft,
            tpot_ms=tpot,
            tokens_per_s=round(tps, 2),
            tokens_per_s_gpu=round(tps / p.gpus, 3),
            tokens_per_s_user=round(1e3 / pt.tpot_ms, 3),
            gpus=p.gpus,
            meets_sla=w.met_by(ttft, tpot) and b * ranks <= max(kv_conc, 1),
            kv_concurrency=kv_conc,
        )

    def _empty(self, source: str, p: Parallel, kv_conc: int) -> Estimate:
        nan = float("nan")
        return Estimate(source, 0, nan, nan, 0.0, 0.0, 0.0, p.gpus, False, kv_conc)


def prefill_budget(p: Parallel) -> int:
    """Prompt tokens one prefill pass of one of the layout's attention-DP ranks takes
    (`schedule.rank_budget` of its DP-attention width and typed chunk size)."""
    return rank_budget(p.attn_dp, p.chunked_prefill_size)


class _Memo:
    """One estimate's step latencies, each asked once (the SLA search repeats the one-prompt
    prefill at every batch, and the batched prefill once the prefill budget is full)."""

    def __init__(self, steps: Steps) -> None:
        self._steps = steps
        self.label = steps.label
        self._prefill: dict[tuple[int, int, int], float] = {}

    def prefill_ms(self, requests: int, isl: int, prefix: int = 0) -> float:
        key = (requests, isl, prefix)
        v = self._prefill.get(key)
        if v is None:
            v = self._prefill[key] = self._steps.prefill_ms(requests, isl, prefix)
        return v

    def decode_ms(self, batch: int, isl: int, osl: int) -> float:
        return self._steps.decode_ms(batch, isl, osl)


def memory_pack(sglang_version: str) -> str:
    """The memory model's sizing table for a release: the 0.5 line sizes its reserve as
    0.5.23 does, older releases by the legacy table (`memory.fraction`)."""
    return "legacy" if sglang_version.startswith("0.4") else "0.5.23"


def _with_model(args: EngineArgs, location: str) -> EngineArgs:
    return EngineArgs(**{**args.__dict__, "model_path": location})
