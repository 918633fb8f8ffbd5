"""meshsat's disaggregated estimate against AIConfigurator's measured disaggregated SGLang runs.

On every disaggregated SGLang row of `systems/silicon_sample.csv`: meshsat's TTFT and TPOT
(`meshsat.solver.perf.disagg`, the deployment the row ran: its prefill and decode widths,
worker counts and concurrency) against the measured ones, median and p90 |error| per model
and GPU; and within each group of measured configurations of one model, GPU, quantization
and ISL/OSL, the measured throughput per GPU of the configuration meshsat ranks first
against the best measured one (goal: within 10 %). Beside it, AIConfigurator's own
disaggregated rule from the same run: its static prefill pass as TTFT, its decode step as
TPOT, and its rate matching (min of 0.9 x prefill and 0.92 x decode requests/s) for the
throughput (aiconfigurator-core 0.12.0 ships no disaggregated session; the rule is the one
its `DisaggInferenceSession`/`picking.py` apply, re-stated here).

The schedule's constants are fitted on the *aggregated* rows (benchmarks/perf_accuracy.py's
grid search) and scored only leave-one-model-out and leave-one-GPU-out: each disaggregated
row is estimated with constants fitted on aggregated rows of other models (other GPUs).

    python benchmarks/perf_disagg_accuracy.py [--write-section benchmarks/RESULTS-perf.md]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from perf_accuracy import (
    QUANT_SOURCES,
    collect,
    family,
    fit,
    judge,
    legality_lines,
    nearest_pack,
    pct,
    perf_model,
)

from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import Parallel
from meshsat.solver.perf import PerfModel, Workload
from meshsat.solver.perf.aic import AicSteps, EngineUnavailable
from meshsat.solver.perf.disagg import (
    DecodeCost,
    PrefillCost,
    RoleCosts,
    at_concurrency,
    link_gbps,
    measured_role,
    occupancy_batches,
)
from meshsat.solver.perf.ep_comm import WithEpComm
from meshsat.solver.perf.measured import (
    MeasuredDisaggRun,
    checkpoint_config,
    distinct_disagg_runs,
    load_disagg_runs,
    load_runs,
    measurement_key,
)
from meshsat.solver.perf.schedule import Calibration, output_tokens_per_s

#: AIConfigurator's rate-matching factors (`picking.py`: prefill pipeline bubbles, decode
#: batch slots not saturated).
AIC_PREFILL_FACTOR, AIC_DECODE_FACTOR = 0.9, 0.92
#: The section this script owns in benchmarks/RESULTS-perf.md.
BEGIN, END = "<!-- disagg:begin -->", "<!-- disagg:end -->"
ZERO = Calibration(0.0, 0.0, 0.0)


@dataclass
class Row:
    run: MeasuredDisaggRun
    pc: PrefillCost
    dc: DecodeCost
    #: AIConfigurator's own rule: (TTFT, TPOT, tokens/s per GPU), None if it cannot.
    aic: tuple[float, float, float] | None
    source: str


#: Why the refused rows are counted rather than treated as rule bugs (read off the rows).
REFUSED_WHY = (
    "The refused servers are DeepSeek-R1 on GB200/GB300 recorded at tp 20, 24, 48 or 72 "
    "without attention DP (128 heads do not split over those widths: SGLang's attention "
    "asserts it, and AIConfigurator's engine refuses them too, see Sources), and "
    "DeepSeek-V3 decode recorded at tp 32, attention DP 32, EP 1: MoE TP 32 cuts each FP8 "
    "expert's 2,048 columns into 64, below the 128-column block, and the all-to-all backend "
    "that would avoid it makes SGLang set EP to 32, which is then not what the row records. "
    "The same deployment recorded with EP 32 is among the rows accepted with "
    "`--moe-dense-tp-size 1` and an all-to-all backend, the flags SGLang's large-EP "
    "recipes set."
)


def legality(runs: Sequence[MeasuredDisaggRun]) -> tuple[Counter[str], Counter[str]]:
    """Rows whose prefill or decode server meshsat's single-server rules refuse (the nearest
    pack, `--disaggregation-mode` set), by the first rule; and rows whose refused servers
    all run with flags the row does not record (`perf_accuracy.judge`), by those flags."""
    illegal: Counter[str] = Counter()
    unrecorded: Counter[str] = Counter()
    for r in runs:
        cfg = checkpoint_config(r)
        spec = ModelSpec.from_hf_config(cfg) if cfg else None
        needs: list[str] = []
        for role, mode in ((r.prefill, "prefill"), (r.decode, "decode")):
            v = judge(role.config(mode), spec, nearest_pack(r.sglang))
            where = f"{r.model} tp{role.tp_size} dp{role.dp_size} ep{role.ep_size}"
            if v.unrecorded is not None:
                needs.append(f"{mode} {where} with {v.unrecorded}")
            elif v.rule is not None:
                illegal[f"{mode} {v.rule}: {where}"] += 1
                break
        else:
            if needs:
                unrecorded["; ".join(needs)] += 1
    return illegal, unrecorded


def aic_rule(pm: PerfModel, run: MeasuredDisaggRun, pp: Parallel, dp: Parallel) -> Any:
    """AIConfigurator's disaggregated rule from its engine alone (no meshsat term)."""
    try:
        ps, p_aic = pm.steps(pp)
        ds, d_aic = pm.steps(dp)
        if not (p_aic and d_aic):
            return None
        pe = ps.engine if isinstance(ps, WithEpComm) else ps
        de = ds.engine if isinstance(ds, WithEpComm) else ds
        assert isinstance(pe, AicSteps) and isinstance(de, AicSteps)
        pbs = run.prefill.batch or 1
        bd = -(-run.concurrency // (run.decode_workers * run.decode.dp_size))
        ttft = pe.prefill_ms(pbs, run.isl)
        tpot = de.decode_ms(bd, run.isl, run.osl)
    except EngineUnavailable:
        return None
    p_rps = run.prefill_workers * run.prefill.dp_size * pbs * 1e3 / ttft * AIC_PREFILL_FACTOR
    d_rps = run.decode_workers * run.decode.dp_size * bd * 1e3 / (tpot * run.osl)
    rate = min(p_rps, d_rps * AIC_DECODE_FACTOR)
    return ttft, tpot, rate * run.osl / run.gpus


def estimate_rows(
    runs: Sequence[MeasuredDisaggRun], quant_modes: str = "checkpoint"
) -> tuple[list[Row], Counter[str]]:
    """Each run's step latencies, once (the calibration is applied afterwards)."""
    rows: list[Row] = []
    skipped: Counter[str] = Counter()
    models: dict[tuple[Any, ...], PerfModel] = {}
    for r in runs:
        cfg = checkpoint_config(r)
        if cfg is None:
            skipped["no config for the model"] += 1
            continue
        key = (r.model, r.quant, r.gemm_mode, r.moe_mode, r.gpu, r.isl, r.osl,
               nearest_pack(r.sglang))  # fmt: skip
        pm = models.get(key)
        if pm is None:
            w = Workload(r.isl, r.osl)
            pm = models[key] = perf_model(r, cfg, w, quant_modes, sglang_version=key[-1],
                                          calibration=ZERO)  # fmt: skip
        moe = pm.facts.is_moe
        pp, dp = r.prefill.parallel(moe), r.decode.parallel(moe)
        costs = RoleCosts(pm)
        bd = -(-r.concurrency // (r.decode_workers * r.decode.dp_size))
        pc = costs.prefill(measured_role(pm, "prefill", pp, r.prefill.config("prefill")),
                           link_gbps(pm, r.gpus), check_memory=False)  # fmt: skip
        dc = costs.decode(
            measured_role(pm, "decode", dp, r.decode.config("decode")), occupancy_batches(bd)
        )
        if pc is None or dc is None:
            skipped["no estimate (no GPU data, engine refused and no roofline)"] += 1
            continue
        src = pc.role.source if pc.role.source == dc.role.source else (
            f"prefill: {pc.role.source}; decode: {dc.role.source}")  # fmt: skip
        rows.append(Row(r, pc, dc, aic_rule(pm, r, pp, dp), src))
    return rows, skipped


Cals = Mapping[bool, Calibration]  # is_aic -> calibration


def predict(row: Row, cals: Cals) -> tuple[float, float, float]:
    """(TTFT, TPOT, tokens/s per GPU) of the row's deployment under `cals`."""
    r = row.run
    pc = replace(row.pc, calibration=cals[row.pc.is_aic])
    host = cals[row.dc.is_aic].decode_step_ms
    dc = replace(row.dc, tpot=tuple((b, t + host) for b, t in row.dc.tpot))
    pt = at_concurrency(pc, dc, r.prefill_workers, r.decode_workers, r.concurrency, r.isl, r.osl)
    return pt.ttft_ms, pt.tpot_ms, pt.tokens_per_s_gpu


def held_out(
    rows: Sequence[Row], agg: Sequence[Any], by_row: Callable[[Row], str],
    by_agg: Callable[[Any], str],
) -> dict[int, tuple[float, float, float]]:  # fmt: skip
    """Each row's estimate with constants fitted on the aggregated rows not sharing its key."""
    out: dict[int, tuple[float, float, float]] = {}
    fitted: dict[str, Cals] = {}
    for row in rows:
        k = by_row(row)
        if k not in fitted:
            train = [a for a in agg if by_agg(a) != k]
            fitted[k] = {True: fit(train, "aic"), False: fit(train, "roofline")}
        out[id(row)] = predict(row, fitted[k])
    return out


def measured_tput(r: MeasuredDisaggRun) -> float:
    return output_tokens_per_s(r.concurrency, r.osl, r.ttft_ms, r.tpot_ms) / r.gpus


def top1(rows: Sequence[Row], est: Callable[[Row], float]) -> list[tuple[Any, int, float]]:
    """Per group of >= 2 measured configurations: (group, configurations, measured
    throughput/GPU of the estimate's first over the best measured)."""
    groups: dict[Any, dict[Any, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        groups[(row.run.complete, *row.run.group_key)][row.run.config_key].append(row)
    out = []
    for g, configs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        if len(configs) < 2:
            continue
        meas = {k: statistics.mean(measured_tput(r.run) for r in rs) for k, rs in configs.items()}
        guess = {k: statistics.mean(est(r) for r in rs) for k, rs in configs.items()}
        first = max(guess, key=lambda k: guess[k])
        out.append((g, len(configs), meas[first] / max(meas.values())))
    return out


Preds = Mapping[int, tuple[float, float, float]]


def latencies(p: Preds) -> Callable[[Row], tuple[float, float]]:
    return lambda r: p[id(r)][:2]


def throughput(p: Preds) -> Callable[[Row], float]:
    return lambda r: p[id(r)][2]


def section(rows: Sequence[Row], runs: Sequence[MeasuredDisaggRun],
            dropped: Sequence[MeasuredDisaggRun], skipped: Counter[str], illegal: Counter[str],
            unrecorded: Counter[str], preds: Mapping[str, dict[int, tuple[float, float, float]]],
            seconds: float) -> list[str]:  # fmt: skip
    lomo = preds["leave-one-model-out"]
    complete = sum(r.complete for r in runs)
    done = {measurement_key(r) for r in runs if r.complete}
    copies = sum(measurement_key(r) in done for r in dropped)
    by_key = {measurement_key(r): r for r in runs if r.complete}
    garbled = sum(
        (o.prefill.key, o.decode.key) != (r.prefill.key, r.decode.key)
        for r in dropped
        if (o := by_key.get(measurement_key(r))) is not None
    )
    out = [
        "## Disaggregated serving (`plan --disagg`)",
        "",
        "Written by `python benchmarks/perf_disagg_accuracy.py --write-section "
        "benchmarks/RESULTS-perf.md` (part of `make bench`).",
        "",
        f"Measured runs: {len(runs) + len(dropped)} disaggregated SGLang rows of "
        "aiconfigurator-core 0.12.0's silicon_sample.csv, "
        f"{len(runs)} distinct measurements: {copies} widths-only rows are copies of a row "
        "with worker counts (the same GPU, quantization, ISL/OSL, concurrency, TTFT and TPOT "
        f"to two decimals of a millisecond) without its worker counts, {garbled} of them also "
        "without its attention-DP width or with other server widths, and "
        f"{len(dropped) - copies} repeat another widths-only row; each measurement counts "
        f"once (`measured.distinct_disagg_runs`). {complete} record both worker counts and "
        f"the batches (the db-dump rows); the other {len(runs) - complete} record each role's "
        "widths and the concurrency only (neither their `id`, whose `tpN_0_epN_0` is the "
        "prefill's widths printed as floats, nor `silicon_data_source` holds worker counts), "
        "and are read as one prefill and one decode server of those widths (an assumption). "
        f"Estimated: {len(rows)}; not estimable: {sum(skipped.values())}"
        + ("" if not skipped else " (" + "; ".join(f"{k}: {v}" for k, v in skipped.items()) + ")")
        + ".",
        "",
        "How each estimate is run. *meshsat*: `meshsat.solver.perf.disagg` on the row's "
        "deployment (prefill widths x workers, decode widths x workers, concurrency): TTFT = "
        "overhead + one-prompt prefill + cohort queue on the prefill ranks (each batching "
        "16,384 / attention-DP prompt tokens a pass, a longer prompt in chunks of that budget "
        "with the chunks before it as cached prefix) + KV transfer over "
        "the GPU's link (NVLink inside one scale-up domain, the NIC across), capped by the "
        "prefill pool's rate; TPOT = the decode step at the batch the decode ranks hold "
        "(Little's law for the decode stage: rate x (osl - 1) x TPOT requests, at most "
        "concurrency / decode ranks; engine "
        "steps plus meshsat's EP all-to-all with EP, `--engine auto`); constants fitted on "
        "the aggregated rows of the other models (GPUs). *AIConfigurator's rule*: its engine's "
        "static prefill pass at the row's prefill batch as TTFT, its decode step as TPOT, "
        "throughput min(0.9 x prefill, 0.92 x decode requests/s) x OSL / GPUs.",
        "",
        "| estimate | rows | TTFT med % | TTFT p90 % | TPOT med % | TPOT p90 % |",
        "|---|---|---|---|---|---|",
    ]

    def errs(sel: Sequence[Row], get: Callable[[Row], tuple[float, float] | None]) -> str:
        et, ep = [], []
        for row in sel:
            v = get(row)
            if v is None:
                continue
            et.append(abs(v[0] / row.run.ttft_ms - 1))
            ep.append(abs(v[1] / row.run.tpot_ms - 1))
        if not et:
            return "0 | | | | |"
        return (f"{len(et)} | {100 * statistics.median(et):.1f} | {100 * pct(et, 0.9):.1f} | "
                f"{100 * statistics.median(ep):.1f} | {100 * pct(ep, 0.9):.1f} |")  # fmt: skip

    for subset, sel in (("all rows", rows), ("complete rows", [r for r in rows if r.run.complete])):
        for name, pr in preds.items():
            out.append(f"| meshsat, {name}, {subset} | " + errs(sel, latencies(pr)))
        out.append(f"| AIConfigurator's rule, {subset} | "
                   + errs(sel, lambda r: None if r.aic is None else r.aic[:2]))  # fmt: skip
    out += [
        "",
        "Per model and GPU (meshsat leave-one-model-out | AIConfigurator's rule), median "
        "|error| % (p90 in brackets):",
        "",
        "| model | GPU | rows | TTFT meshsat | TTFT AIC | TPOT meshsat | TPOT AIC |",
        "|---|---|---|---|---|---|---|",
    ]
    cells: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        cells[(row.run.model, row.run.gpu)].append(row)
    for (m, g), rs in sorted(cells.items()):
        mt = [abs(lomo[id(r)][0] / r.run.ttft_ms - 1) for r in rs]
        mp = [abs(lomo[id(r)][1] / r.run.tpot_ms - 1) for r in rs]
        at = [abs(r.aic[0] / r.run.ttft_ms - 1) for r in rs if r.aic]
        ap = [abs(r.aic[1] / r.run.tpot_ms - 1) for r in rs if r.aic]

        def cell(xs: list[float]) -> str:
            return f"{100 * statistics.median(xs):.0f} ({100 * pct(xs, 0.9):.0f})" if xs else "-"

        out.append(f"| {m} | {g} | {len(rs)} | {cell(mt)} | {cell(at)} | {cell(mp)} | {cell(ap)} |")
    out += [
        "",
        "Ranking: within each group of measured configurations (one model, GPU, quantization, "
        "ISL/OSL; a configuration is both pools and the concurrency; complete and widths-only "
        "rows grouped apart), the measured throughput per GPU "
        "(`concurrency * osl / (TTFT + (osl - 1) * TPOT) / GPUs`) of the configuration each "
        "estimate ranks first, over the best measured one (goal: >= 90 %).",
        "",
        "| estimate | groups | median % of best | groups within 10 % | worst % |",
        "|---|---|---|---|---|",
    ]
    ranks = {f"meshsat, {k}": top1(rows, throughput(p)) for k, p in preds.items()}
    with_aic = [r for r in rows if r.aic is not None]
    ranks["AIConfigurator's rule"] = top1(with_aic, lambda r: r.aic[2] if r.aic else 0.0)
    subsets: dict[str, Callable[[Any], bool]] = {
        "all groups": lambda g: True,
        "complete rows": lambda g: bool(g[0]),
        "widths-only rows": lambda g: not g[0],
    }
    for name, res in ranks.items():
        for subset, keep in subsets.items():
            ratios = [x for g, _n, x in res if keep(g)]
            if not ratios:
                continue
            ok = sum(x >= 0.9 for x in ratios)
            share = f"{ok} ({100 * ok / len(ratios):.0f} %)"
            out.append(f"| {name}, {subset} | {len(ratios)} | "
                       f"{100 * statistics.median(ratios):.0f} | {share} | "
                       f"{100 * min(ratios):.0f} |")  # fmt: skip
    out += ["", "Per group (meshsat leave-one-model-out | AIConfigurator's rule), % of best:", "",
            "| rows | model | system | quant | ISL/OSL | configurations | meshsat | AIC |",
            "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    aic_by = {g: x for g, _n, x in ranks["AIConfigurator's rule"]}
    for g, n, x in ranks["meshsat, leave-one-model-out"]:
        kind = "complete" if g[0] else "widths only"
        a = aic_by.get(g)
        out.append(f"| {kind} | {g[1]} | {g[2]} | {g[3]} | {g[4]}/{g[5]} | {n} | {100 * x:.0f} | "
                   f"{'-' if a is None else f'{100 * a:.0f}'} |")  # fmt: skip
    out += [
        "",
        legality_lines(
            illegal, unrecorded, "Rows whose prefill or decode server meshsat's single-server "
            "rules refuse on the nearest pack",
        ),
        "",
        REFUSED_WHY,
        "",
        "Sources (rows): " + "; ".join(
            f"{k}: {v}" for k, v in Counter(r.source for r in rows).most_common()),
        "",
        f"({seconds:.0f} s on this machine)",
    ]  # fmt: skip
    return out


def write_section(path: Path, lines: Sequence[str]) -> None:
    """Replace this script's section of `path` (between its markers), or append it."""
    text = path.read_text() if path.exists() else ""
    block = "\n".join([BEGIN, *lines, END])
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write-section", type=Path, help="write the section into this markdown")
    ap.add_argument(
        "--quant-modes", choices=QUANT_SOURCES, default="checkpoint",
        help="the engine's GEMM/MoE modes: from the checkpoint (default) or as each row records",
    )  # fmt: skip
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    runs, dropped = distinct_disagg_runs(load_disagg_runs())
    illegal, unrecorded = legality(runs)
    rows, skipped = estimate_rows(runs, a.quant_modes)
    agg, _ = collect(load_runs(), False, a.quant_modes)
    preds = {
        "leave-one-model-out": held_out(
            rows, agg, lambda r: family(r.run.model), lambda a: family(a.run.model)
        ),
        "leave-one-GPU-out": held_out(rows, agg, lambda r: r.run.gpu, lambda a: a.run.gpu),
    }
    seconds = time.perf_counter() - t0
    lines = section(rows, runs, dropped, skipped, illegal, unrecorded, preds, seconds)
    print("\n".join(lines))
    if a.write_section:
        write_section(a.write_section, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
