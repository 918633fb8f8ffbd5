"""The speed of performance estimates.

(a) Cold: `meshsat plan --model deepseek-ai/DeepSeek-V3 --gpu H200 --gpus 64` with estimates
(the default `--rank perf`), one fresh process per run, median of --repeat runs; the
baseline in the same run is the same plan ranked by KV capacity (`--rank kv`, no estimate).
Goal: under 10 s on a 2-core machine.

(b) Warm: estimates per second once the engine's databases and compiled engines are
loaded: a fresh `PerfModel` (empty layout cache) estimates every fitting layout shape of
DeepSeek-V3 on 64 H200 (the SLA search included), median of --repeat runs.

(c) `plan --disagg` cold (the P:D search and the aggregated comparison it prints), on 64
H200 and on 64 GB200 at ISL 8,192, median of --repeat runs; baseline in the same run: the
same `plan` without `--disagg`. Both as `python -m meshsat` from the repository root.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_perf.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import subprocess
import sys
from pathlib import Path

from timing import median_seconds, seconds

from meshsat import solver
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import Parallel
from meshsat.solver.memory.models import catalogue_config
from meshsat.solver.perf import PerfModel, Workload
from meshsat.solver.perf.workload import DEFAULT_TTFT_MS

MODEL = "deepseek-ai/DeepSeek-V3"
EXE = str(Path(sys.executable).with_name("meshsat"))


def cold(rank: str) -> None:
    subprocess.run(
        [EXE, "plan", "--model", MODEL, "--gpu", "H200", "--gpus", "64", "--rank", rank,
         "--tpot", "50", "-f", "json"],
        check=True, capture_output=True,
    )  # fmt: skip


ROOT = Path(__file__).resolve().parents[1]


def cold_module(gpu: str, isl: int, disagg: bool) -> None:
    subprocess.run(
        [sys.executable, "-m", "meshsat", "plan", "--model", MODEL, "--gpu", gpu, "--gpus", "64",
         "--isl", str(isl), "-f", "json", *(["--disagg"] if disagg else [])],
        check=True, capture_output=True, cwd=ROOT,
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    mp = median_seconds(lambda: cold("perf"), a.repeat)
    mk = median_seconds(lambda: cold("kv"), a.repeat)
    spec = ModelSpec.from_hf_config(catalogue_config(MODEL))
    w = Workload(1024, 1024, ttft_ms=DEFAULT_TTFT_MS, tpot_ms=50)  # what the plan runs use
    warm_pm = PerfModel(MODEL, "H200", w)
    shapes = {
        Parallel.from_resolved(lay.config, lay.derived) for lay in solver.enumerate(64, model=spec)
    }
    shapes = {p for p in shapes if warm_pm.memory.of(p).fits}
    for p in shapes:  # load the databases and compile every engine once
        warm_pm.estimate(p)

    def estimate_all(pm: PerfModel) -> None:
        for p in shapes:
            pm.estimate(p)

    # a fresh model per run (its caches cold), built outside the timer
    rates = [
        len(shapes) / seconds(functools.partial(estimate_all, PerfModel(MODEL, "H200", w)))
        for _ in range(a.repeat)
    ]
    aic = sum(warm_pm.estimate(p).source.startswith("aic") for p in shapes)
    print(f"DeepSeek-V3 on 64 x H200, ISL 1024, OSL 1024, TTFT <= {DEFAULT_TTFT_MS:g} ms (the "
          f"default), TPOT <= 50 ms; median of {a.repeat}")  # fmt: skip
    print("| measure | value | baseline (same run) | ratio | goal |")
    print("|---|---|---|---|---|")
    print(f"| plan, cold process (s) | {mp:.2f} | {mk:.2f} (--rank kv) | {mp / mk:.1f}x "
          f"| < 10 s: {'met' if mp < 10 else 'MISSED'} |")  # fmt: skip
    print(f"| estimates/s warm ({len(shapes)} layout shapes, {aic} by the engine) "
          f"| {statistics.median(rates):,.0f} | | | |")  # fmt: skip
    for gpu, isl in (("H200", 1024), ("GB200", 8192)):
        dis = median_seconds(functools.partial(cold_module, gpu, isl, True), a.repeat)
        agg = median_seconds(functools.partial(cold_module, gpu, isl, False), a.repeat)
        print(f"| plan --disagg, cold process, 64 x {gpu}, ISL {isl} (s) | {dis:.2f} "
              f"| {agg:.2f} (plan) | {dis / agg:.1f}x | |")  # fmt: skip


if __name__ == "__main__":
    main()
