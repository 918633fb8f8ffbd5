"""Autotuner search spaces: legality, coverage, and which view TPE searches best.

For DeepSeek-V3 on H200 at N = 16 and 64 GPUs (the space: every legal layout that fits):
1. 10,000 draws of optuna's RandomSampler through each view (categorical, ranked,
   coordinates): illegal layouts drawn (checked by `validate` + the memory fit, not by the
   space) and the share of the space's layouts reached. Goal: 0 illegal, >= 99 %.
2. TPE, 100 trials, several seeds, maximising each objective: KV-cache tokens (the space's
   own score) and the performance estimator's tokens/s per GPU (`with_estimates`, tpot
   50 ms, isl = osl = 1024): the best found over the best of the space, and how many seeds
   get within 5 %. The baseline is independent sizes judged by `set_constraint` (TPE with
   constraints), in the same run.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_tune.py [--draws 10000] [--seeds 5]
"""

from __future__ import annotations

import argparse
import statistics
import warnings
from typing import Any

import optuna
from timing import seconds

from meshsat.solver.memory import MemoryModel, Parallel, gpu
from meshsat.solver.memory.models import model_config
from meshsat.solver.tune import LayoutSpace, layout_space
from meshsat.solver.tune.optuna_space import (
    Style,
    set_constraint,
    suggest_layout,
    suggest_sizes,
)
from meshsat.solver.validation.validate import validate

MODEL = "deepseek-ai/DeepSeek-V3"
optuna.logging.set_verbosity(optuna.logging.ERROR)
warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)


def legal(space: LayoutSpace, values: dict[str, Any], mm: MemoryModel, spec: Any) -> bool:
    report = validate(values, spec, explain=False, sglang_version=space.sglang_version)
    if not report.valid or report.derived["gpus_used"] != space.gpus:
        return False
    return mm.of(Parallel.from_resolved(report.resolved, report.derived)).fits


def coverage(space: LayoutSpace, style: Style, draws: int) -> tuple[int, float, float]:
    from meshsat.solver.lang.model_spec import ModelSpec

    config = model_config(MODEL)
    mm, spec = MemoryModel(config, gpu("H200")), ModelSpec.from_hf_config(config)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen: dict[str, dict[str, Any]] = {}

    def draw_all() -> None:
        for _ in range(draws):
            trial = study.ask()
            c = suggest_layout(trial, space, style)
            seen.setdefault(c.key, dict(c.values))
            study.tell(trial, 0.0)

    took = seconds(draw_all)
    illegal = sum(not legal(space, v, mm, spec) for v in seen.values())  # each distinct once
    return illegal, len(seen) / len(space), took


def tpe_run(
    space: LayoutSpace, seed: int, route: str, trials: int = 100
) -> tuple[float, int | None]:
    """(best found / best of the space, first trial within 5 % or None)."""
    best = space.best.score
    if route == "constrained sizes":
        sampler = optuna.samplers.TPESampler(seed=seed)

        def objective(trial: optuna.Trial) -> float:
            values = suggest_sizes(trial, space)
            set_constraint(trial, space, values)
            hit = space.find(values)
            return 0.0 if hit is None else hit.score
    else:
        sampler = optuna.samplers.TPESampler(seed=seed)

        def objective(trial: optuna.Trial) -> float:
            return suggest_layout(trial, space, route).score

    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(objective, n_trials=trials)
    values = [t.value or 0.0 for t in study.get_trials(deepcopy=False)]
    reach = next((i + 1 for i, v in enumerate(values) if v >= 0.95 * best), None)
    return max(values) / best, reach


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=10_000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--gpus", type=int, nargs="+", default=[16, 64])
    args = ap.parse_args()
    spaces = {n: layout_space(n, MODEL, "H200", sglang_version="0.5.23") for n in args.gpus}
    print(f"bench_tune: {MODEL} on H200; {args.draws} RandomSampler draws per view")
    print(f"{'N':>3} {'view':<12} {'layouts':>7} {'illegal':>7} {'reached':>8} {'draws/s':>8}")
    for n, space in spaces.items():
        for style in Style:
            illegal, reached, took = coverage(space, style, args.draws)
            print(
                f"{n:>3} {style.value:<12} {len(space):>7} {illegal:>7} {100 * reached:7.2f}% "
                f"{args.draws / took:8.0f}"
            )
    from meshsat.solver.perf import PerfModel, Workload

    workload = Workload(isl=1024, osl=1024, tpot_ms=50.0)
    estimated = {
        n: s.with_estimates(PerfModel(MODEL, "H200", workload, sglang_version="0.5.23"))
        for n, s in spaces.items()
    }
    routes: list[str] = [s.value for s in Style] + ["constrained sizes"]
    print(f"\nTPE, 100 trials, seeds 0..{args.seeds - 1}: best found / best layout")
    print(
        f"{'N':>3} {'objective':<10} {'route':<18} {'median':>7} {'min':>7} {'within 5%':>9} "
        f"{'trial':>6}"
    )
    for (n, space), objective in [
        *((item, "KV tokens") for item in spaces.items()),
        *((item, "estimate") for item in estimated.items()),
    ]:
        for route in routes:
            runs = [tpe_run(space, seed, route) for seed in range(args.seeds)]
            ratios = [r for r, _ in runs]
            reach = [t for _, t in runs if t is not None]
            first = f"{statistics.median(reach):6.0f}" if reach else "     -"
            print(
                f"{n:>3} {objective:<10} {route:<18} {statistics.median(ratios):7.3f} "
                f"{min(ratios):7.3f} {len(reach):>4}/{args.seeds:<4} {first}"
            )


if __name__ == "__main__":
    main()
