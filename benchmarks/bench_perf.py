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

(d) `plan --disagg` against the code before its speed-up (`--disagg-only` runs this alone):
`git archive` of `--baseline-ref` unpacked in a temporary folder, run by the same
interpreter. Per GPU: the cold command (`python -m meshsat plan ... --disagg -f json`, one
fresh process per run: wall clock and its CPU seconds), and warm (`disagg_rows` again in
one process after a first call: the engines compiled, the files read), median of --repeat
each, baseline and current alternating; and whether the two print the same JSON
(the answers must not change). The load average is printed beside: on a shared machine
the wall clock is mostly the load, the CPU seconds are the comparable figure.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_perf.py [--repeat 3] [--disagg-only]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
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


#: The last commit before `plan --disagg`'s speed-up (pair rules judged per pair of sides,
#: engine answers and step sources shared): the baseline of (d).
BASELINE_REF = "e007afd"
#: (GPU, ISL) of (c) and (d): DeepSeek-V3 on 64 of them, OSL 1,024.
DISAGG_CASES = (("H200", 1024), ("GB200", 8192))

#: (d)'s warm run: `disagg_rows` once (cold, in-process), then --repeat times more.
_WARM = """
import json, statistics, sys, time
from meshsat.solver.cli.plan_disagg import disagg_rows
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.perf import Workload
def once():
    t = time.perf_counter()
    disagg_rows({model!r}, gpu({gpu!r}), 64, Workload(isl={isl}), engine="auto", gpus_per_node=None,
                top=5, progress=lambda done, total: None)
    return time.perf_counter() - t
first = once()
print(json.dumps({{"first": first, "warm": statistics.median(once() for _ in range({n}))}}))
"""


def _disagg_args(gpu: str, isl: int) -> list[str]:
    return ["-m", "meshsat", "plan", "--model", MODEL, "--gpu", gpu, "--gpus", "64", "--disagg",
            "--isl", str(isl), "-f", "json"]  # fmt: skip


def _cold_disagg(root: Path, gpu: str, isl: int) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, its JSON) of one cold `plan --disagg` run from `root`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *_disagg_args(gpu, isl)], check=True, capture_output=True, text=True,
        cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def _warm_disagg(root: Path, gpu: str, isl: int, repeat: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _WARM.format(model=MODEL, gpu=gpu, isl=isl, n=repeat)], check=True,
        capture_output=True, text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _baseline_tree(ref: str) -> Path:
    """`ref`'s files (no `.git`) in a temporary folder."""
    tmp = Path(tempfile.mkdtemp(prefix="meshsat-baseline-"))
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref], check=True, capture_output=True, cwd=ROOT
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    return tmp


def disagg_against_baseline(repeat: int, ref: str) -> None:
    """(d): the table of `plan --disagg` now against `ref` in the same run."""
    base = _baseline_tree(ref)
    try:
        load = os.getloadavg()[0]
        print(f"\nplan --disagg --model {MODEL} --gpus 64, now against {ref} (same run); "
              f"median of {repeat}; load average {load:.1f} at the start")  # fmt: skip
        print("| GPU, ISL | cold wall s (base) | cold CPU s now (base) | CPU ratio | warm s now "
              "(base) | warm ratio | same JSON | goal < 10 s |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        for gpu, isl in DISAGG_CASES:
            now, old = [], []
            for _ in range(repeat):  # alternate, so a load spike slows both alike
                old.append(_cold_disagg(base, gpu, isl))
                now.append(_cold_disagg(ROOT, gpu, isl))
            same = all(o[2] == n[2] for o, n in zip(old, now, strict=True))
            wall = statistics.median(r[0] for r in now)
            wall_old = statistics.median(r[0] for r in old)
            cpu = statistics.median(r[1] for r in now)
            cpu_old = statistics.median(r[1] for r in old)
            warm = _warm_disagg(ROOT, gpu, isl, repeat)
            warm_old = _warm_disagg(base, gpu, isl, repeat)
            print(
                f"| {gpu}, {isl} | {wall:.2f} ({wall_old:.2f}) | {cpu:.2f} ({cpu_old:.2f}) | "
                f"{cpu_old / cpu:.1f}x | {warm['warm']:.2f} ({warm_old['warm']:.2f}) | "
                f"{warm_old['warm'] / warm['warm']:.1f}x | {'yes' if same else 'NO'} | "
                f"{'met' if wall < 10 else 'MISSED'} |",
                flush=True,
            )
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--disagg-only", action="store_true", help="Only (d).")
    ap.add_argument("--baseline-ref", default=BASELINE_REF, help="(d)'s baseline commit.")
    a = ap.parse_args()
    if a.disagg_only:
        disagg_against_baseline(a.repeat, a.baseline_ref)
        return
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
    for gpu, isl in DISAGG_CASES:
        dis = median_seconds(functools.partial(cold_module, gpu, isl, True), a.repeat)
        agg = median_seconds(functools.partial(cold_module, gpu, isl, False), a.repeat)
        print(f"| plan --disagg, cold process, 64 x {gpu}, ISL {isl} (s) | {dis:.2f} "
              f"| {agg:.2f} (plan) | {dis / agg:.1f}x | |")  # fmt: skip
    disagg_against_baseline(a.repeat, a.baseline_ref)


if __name__ == "__main__":
    main()
