"""The speed of performance estimates.

(a) Cold: `python -m meshsat plan --model deepseek-ai/DeepSeek-V3 --gpu H200 --gpus 64`
with estimates (the default `--rank perf`), one fresh process per run from this checkout,
median of --repeat runs; the baseline in the same run is the same plan ranked by KV capacity
(`--rank kv`, no estimate). Goal: under 10 s on a 2-core machine.

(b) Warm: estimates per second once the engine's databases and compiled engines are
loaded: a fresh `PerfModel` (empty layout cache) estimates every fitting layout shape of
DeepSeek-V3 on 64 H200 (the SLA search included), median of --repeat runs, two ways: with
the process-wide memo of engine answers emptied before each run (`aic.clear_answers`: every
engine call is made, what a new workload costs in a warm server), and, labelled apart, with
the memo full (the same workload again: every engine call is a memo hit). Baseline in the
same runs: the roofline (`engine="roofline"`, no engine call) on the same shapes. The three
are timed in turn within each repeat, in CPU seconds of this process (`time.process_time`:
the slices other jobs of a shared machine take are not counted).

(c) `plan --disagg` cold (the P:D search and the aggregated comparison it prints), on
each case of `DISAGG_CASES` (DeepSeek-V3 on 64, 96 and 256 H200, 64 GB200 at ISL 8,192,
96 H100; Qwen3-32B on 16 H100), median of --repeat runs; baseline in the same run: the
same `plan` without `--disagg`. Both as `python -m meshsat` from the repository root.

(d) `plan --disagg` against the code before its speed-up (`--disagg-only` runs this alone):
`git archive` of `--baseline-ref` unpacked in a temporary folder, run by the same
interpreter. Per case: the cold command (`python -m meshsat plan ... --disagg -f json`,
one fresh process per run: wall clock and its CPU seconds), and warm (`disagg_rows` again
in one process after a first call: the engines compiled, the files read; `--no-warm`
skips it), median of --repeat each, baseline and current alternating; and whether the
two print the same JSON (the answers must not change). The load average is printed
beside: on a shared machine the wall clock is mostly the load, the CPU seconds are the
comparable figure. `--phases` adds, per tree, the CPU seconds of each step of one
`disagg_rows` on 256 H200 (timers around the steps, in a fresh process).

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_perf.py [--repeat 3] [--disagg-only]
     [--no-warm] [--phases] [--warm-only] [--no-disagg-baseline]
     [--write benchmarks/RESULTS-perf-speed.md]
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
from dataclasses import dataclass
from pathlib import Path

from timing import median_seconds, seconds

from meshsat import solver
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import Parallel
from meshsat.solver.memory.models import catalogue_config
from meshsat.solver.perf import PerfModel, Workload
from meshsat.solver.perf.aic import clear_answers
from meshsat.solver.perf.workload import DEFAULT_TTFT_MS

MODEL = "deepseek-ai/DeepSeek-V3"
ROOT = Path(__file__).resolve().parents[1]


def cold(rank: str) -> None:
    """One `plan` in a fresh process, as `python -m meshsat` from this checkout (the console
    script would run whichever copy the interpreter installed)."""
    subprocess.run(
        [sys.executable, "-m", "meshsat", "plan", "--model", MODEL, "--gpu", "H200", "--gpus",
         "64", "--rank", rank, "--tpot", "50", "-f", "json"],
        check=True, capture_output=True, cwd=ROOT,
    )  # fmt: skip


@dataclass(frozen=True)
class DisaggCase:
    """One `plan --disagg` of (c) and (d), OSL 1,024."""

    model: str
    gpu: str
    gpus: int
    isl: int = 1024

    def args(self) -> list[str]:
        return ["--model", self.model, "--gpu", self.gpu, "--gpus", str(self.gpus), "--isl",
                str(self.isl), "-f", "json"]  # fmt: skip

    def label(self) -> str:
        name = self.model.rsplit("/", 1)[-1]
        return f"{name}, {self.gpus} x {self.gpu}, ISL {self.isl}"


def cold_module(case: DisaggCase, disagg: bool) -> None:
    subprocess.run(
        [sys.executable, "-m", "meshsat", "plan", *case.args(), *(["--disagg"] if disagg else [])],
        check=True, capture_output=True, cwd=ROOT,
    )  # fmt: skip


#: The last commit before `plan --disagg`'s second speed-up (the pair rules judged per
#: pair of the fields they read, the optimistic bound, the memoised weight stages and
#: roofline answers): the baseline of (d). The first speed-up's was e007afd.
BASELINE_REF = "498d83c"
#: The cases of (c) and (d): DeepSeek-V3 (MoE, MLA) where the search grows with the GPUs,
#: GB200 at a long prompt, H100, and a dense model.
DISAGG_CASES = (
    DisaggCase(MODEL, "H200", 64),
    DisaggCase(MODEL, "H200", 96),
    DisaggCase(MODEL, "H200", 256),
    DisaggCase(MODEL, "GB200", 64, 8192),
    DisaggCase(MODEL, "H100", 96),
    DisaggCase("Qwen/Qwen3-32B", "H100", 16),
)

#: (d)'s warm run: `disagg_rows` once (cold, in-process), then --repeat times more.
_WARM = """
import json, statistics, sys, time
from meshsat.solver.cli.plan_disagg import disagg_rows
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.perf import Workload
def once():
    t = time.perf_counter()
    disagg_rows({model!r}, gpu({gpu!r}), {gpus}, Workload(isl={isl}), engine="auto",
                gpus_per_node=None, top=5, progress=lambda done, total: None)
    return time.perf_counter() - t
first = once()
print(json.dumps({{"first": first, "warm": statistics.median(once() for _ in range({n}))}}))
"""

#: (d)'s `--phases`: CPU seconds of each step of one `disagg_rows` (the CLI's workload), by
#: timers wrapped around the functions both trees name alike.
_PHASES = """
import functools, json, time
import meshsat.solver.cli.plan_disagg as PD
import meshsat.solver.perf.disagg as D
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.perf.workload import cli_workload
spent = {{}}
def timed(owner, name, label):
    f = getattr(owner, name)
    @functools.wraps(f)
    def g(*a, **k):
        t = time.process_time()
        try:
            return f(*a, **k)
        finally:
            spent[label] = spent.get(label, 0.0) + time.process_time() - t
    setattr(owner, name, g)
for owner, name, label in ((D, "role_layouts", "role layouts"), (D.RoleCosts, "prefill", "prefill"),
                           (D.RoleCosts, "decode", "decode"), (D, "_undominated", "dominance"),
                           (PD, "plan_disagg", "search"), (PD, "ranked_rows", "aggregated")):
    timed(owner, name, label)
t = time.process_time()
PD.disagg_rows({model!r}, gpu({gpu!r}), {gpus}, cli_workload({isl}, 1024, None, None),
               engine="auto", gpus_per_node=None, top=20, progress=lambda done, total: None)
spent["disagg_rows"] = time.process_time() - t
spent["pairing"] = spent["search"] - sum(spent[k] for k in ("role layouts", "prefill", "decode",
                                                            "dominance"))
print(json.dumps(spent))
"""


def _cold_disagg(root: Path, case: DisaggCase) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, its JSON) of one cold `plan --disagg` run from `root`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "meshsat", "plan", *case.args(), "--disagg"], check=True,
        capture_output=True, text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def _child(root: Path, template: str, case: DisaggCase, repeat: int = 0) -> dict[str, float]:
    """`template` (`_WARM`, `_PHASES`) for `case`, run from `root`: its last line's JSON."""
    code = template.format(model=case.model, gpu=case.gpu, gpus=case.gpus, isl=case.isl, n=repeat)
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
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


def disagg_against_baseline(
    repeat: int, ref: str, *, warm: bool = True, phases: bool = False
) -> None:
    """(d): the table of `plan --disagg` now against `ref` in the same run."""
    base = _baseline_tree(ref)
    try:
        load = os.getloadavg()[0]
        print(f"\nplan --disagg, now against {ref} (same run); median of {repeat}; load "
              f"average {load:.1f} at the start")  # fmt: skip
        print("| case | cold wall s (base) | wall ratio | cold CPU s now (base) | CPU ratio | "
              "warm s now (base) | warm ratio | same JSON | goal < 10 s |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|")
        for case in DISAGG_CASES:
            now, old = [], []
            for _ in range(repeat):  # alternate, so a load spike slows both alike
                old.append(_cold_disagg(base, case))
                now.append(_cold_disagg(ROOT, case))
            same = all(o[2] == n[2] for o, n in zip(old, now, strict=True))
            wall = statistics.median(r[0] for r in now)
            wall_old = statistics.median(r[0] for r in old)
            cpu = statistics.median(r[1] for r in now)
            cpu_old = statistics.median(r[1] for r in old)
            warm_txt = "| not run | |"
            if warm:
                w_now = _child(ROOT, _WARM, case, repeat)["warm"]
                w_old = _child(base, _WARM, case, repeat)["warm"]
                warm_txt = f"| {w_now:.2f} ({w_old:.2f}) | {w_old / w_now:.1f}x |"
            print(
                f"| {case.label()} | {wall:.2f} ({wall_old:.2f}) | {wall_old / wall:.1f}x | "
                f"{cpu:.2f} ({cpu_old:.2f}) | {cpu_old / cpu:.1f}x {warm_txt} "
                f"{'yes' if same else 'NO'} | {'met' if wall < 10 else 'MISSED'} |",
                flush=True,
            )
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
        if phases:
            case = DisaggCase(MODEL, "H200", 256)
            spent = {"now": _child(ROOT, _PHASES, case), "base": _child(base, _PHASES, case)}
            print(f"\nCPU s of each step of one disagg_rows, {case.label()}; now (base {ref})")
            print("| step | now | base |\n|---|---|---|")
            for step in spent["now"]:
                print(f"| {step} | {spent['now'][step]:.2f} | {spent['base'][step]:.2f} |")
    finally:
        shutil.rmtree(base, ignore_errors=True)


@dataclass(frozen=True)
class Warm:
    """(b)'s medians, estimates per CPU second: memo emptied / memo hits / roofline."""

    shapes: int
    by_engine: int
    engine_calls: int
    emptied: float
    hits: float
    roofline: float


def warm(repeat: int) -> Warm:
    """(b): every fitting layout shape of DeepSeek-V3 on 64 H200, a fresh `PerfModel` (its
    layout cache empty) per timed run, built outside the timer."""
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

    times: dict[str, list[float]] = {"emptied": [], "hits": [], "roofline": []}
    for _ in range(repeat):
        fresh = {
            "emptied": PerfModel(MODEL, "H200", w),
            "hits": PerfModel(MODEL, "H200", w),  # after "emptied": its answers are all kept
            "roofline": PerfModel(MODEL, "H200", w, engine="roofline"),
        }
        clear_answers()  # outside the timer: the engine answers every call of "emptied"
        for name, pm in fresh.items():  # CPU seconds: other jobs on a shared machine
            times[name].append(seconds(functools.partial(estimate_all, pm), time.process_time))
    calls = clear_answers()  # what the last "emptied" run asked the engine
    rate = {k: len(shapes) / statistics.median(v) for k, v in times.items()}
    aic = sum(warm_pm.estimate(p).source.startswith("aic") for p in shapes)
    return Warm(len(shapes), aic, calls, rate["emptied"], rate["hits"], rate["roofline"])


def warm_rows(b: Warm) -> list[str]:
    base = f"{b.roofline:,.0f} (roofline)"
    return [
        f"| estimates per CPU s warm, engine memo emptied before each run ({b.shapes} layout "
        f"shapes, {b.by_engine} by the engine, {b.engine_calls:,} engine calls) | {b.emptied:,.0f} "
        f"| {base} | {b.emptied / b.roofline:.2f}x | |",
        f"| estimates per CPU s warm, every engine call a memo hit (the same workload again) "
        f"| {b.hits:,.0f} | {base} | {b.hits / b.roofline:.2f}x | |",
    ]


HEAD = [
    "| measure | value | baseline (same run) | ratio | goal |",
    "|---|---|---|---|---|",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--disagg-only", action="store_true", help="Only (d).")
    ap.add_argument("--warm-only", action="store_true", help="Only (b).")
    ap.add_argument("--write", type=Path, help="also write (a)-(c)'s table to this markdown file")
    ap.add_argument("--baseline-ref", default=BASELINE_REF, help="(d)'s baseline commit.")
    ap.add_argument("--no-disagg-baseline", action="store_true", help="Skip (d).")
    ap.add_argument("--no-warm", action="store_true", help="(d) without its warm runs.")
    ap.add_argument("--phases", action="store_true", help="(d) with each step's CPU seconds.")
    a = ap.parse_args()
    if a.disagg_only:
        disagg_against_baseline(a.repeat, a.baseline_ref, warm=not a.no_warm, phases=a.phases)
        return
    title = (
        f"DeepSeek-V3 on 64 x H200, ISL 1024, OSL 1024, TTFT <= {DEFAULT_TTFT_MS:g} ms (the "
        f"default), TPOT <= 50 ms; median of {a.repeat}; load average {os.getloadavg()[0]:.1f} "
        "at the start"
    )
    print(title, flush=True)
    rows = list(HEAD)
    if not a.warm_only:
        mp = median_seconds(lambda: cold("perf"), a.repeat)
        mk = median_seconds(lambda: cold("kv"), a.repeat)
        rows.append(
            f"| plan, cold process (s) | {mp:.2f} | {mk:.2f} (--rank kv) | {mp / mk:.1f}x "
            f"| < 10 s: {'met' if mp < 10 else 'MISSED'} |"
        )
    rows += warm_rows(warm(a.repeat))
    if not a.warm_only:
        for case in DISAGG_CASES:
            dis = median_seconds(functools.partial(cold_module, case, True), a.repeat)
            agg = median_seconds(functools.partial(cold_module, case, False), a.repeat)
            rows.append(
                f"| plan --disagg, cold process, {case.label()} (s) | {dis:.2f} "
                f"| {agg:.2f} (plan) | {dis / agg:.1f}x | |"
            )
    tail = f"load average at the end {os.getloadavg()[0]:.1f}"
    print("\n".join([*rows, tail]), flush=True)
    if a.write:
        write(a.write, [title, "", *rows, "", tail])
    if not (a.warm_only or a.no_disagg_baseline):
        disagg_against_baseline(a.repeat, a.baseline_ref, warm=not a.no_warm, phases=a.phases)


#: How (a)-(c) are taken, for the written file.
HOW = (
    "(a) `plan --rank perf` in a fresh process, against `--rank kv` (no estimate). (b) A fresh "
    "`PerfModel` estimates every fitting layout shape once the engine's databases and "
    "compiled engines are loaded; *memo emptied*: `aic.clear_answers()` before each run, so "
    "the engine answers every call (a new workload in a warm server); *memo hits*: the same "
    "run again with the answers kept (the same workload asked twice); baseline: the roofline "
    '(`engine="roofline"`) on the same shapes, timed in turn with them in CPU seconds of the '
    "process. Before, (b) timed memo hits only and called them estimates/s warm. (c) "
    "`plan --disagg` in a fresh process against the same `plan` without it."
)


def write(path: Path, lines: list[str]) -> None:
    """The table as markdown, with how it was taken (the file is this script's output)."""
    text = "\n".join(
        [
            "# Performance-estimate speed",
            "",
            "Written by `PYTHONPATH=. .venv/bin/python benchmarks/bench_perf.py "
            f"{' '.join(sys.argv[1:])}` on {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} "
            "UTC; `plan --disagg` against its baseline commit: "
            "`benchmarks/RESULTS-plan-disagg.md`.",
            "",
            HOW,
            "",
            *lines,
            "",
        ]
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


if __name__ == "__main__":
    main()
