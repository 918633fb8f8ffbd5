"""`meshsat plan` at large GPU counts: time and peak memory, against the first version.

Issue 28 found `plan --model deepseek-ai/DeepSeek-V3 --gpu H200 --gpus 1000000` running past
120 s with memory growing, because the node-crossing key built the full rank map of every
candidate tied for the top ranks, and every legal layout got a whole `Memory`. The baseline
here is that first version, kept below as it was (`_first_plan`); the current one is
`plan_layouts`. Each run is a fresh process (`python -c`), timed inside it (model catalogue
and enumeration included, interpreter start-up not) and watched from outside for its peak
resident memory (`VmHWM`); a baseline run past `--limit` seconds is stopped and shown as
"> limit". Median of `--runs` runs (the baseline at the largest count once: it is stopped).

The second table is the default ranking by estimates (`--rank perf`, `perf_rows`) against
`--rank kv` (`plan_layouts`) in the same run, with CPU seconds beside the wall clock (on a
shared machine the wall clock is mostly the load) and how many layout shapes were estimated.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_plan.py [--runs 5] [--limit 120] [--perf-only]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODEL, GPU = "deepseek-ai/DeepSeek-V3", "H200"
COUNTS = (4096, 65536, 1 << 20)

_CURRENT = """
from meshsat.solver.cli.plan_cmd import plan_layouts
from meshsat.solver.memory.gpus import gpu
rows = plan_layouts({model!r}, gpu({gpu!r}), {n}, top=20)
"""

#: The first `plan_layouts` (before issue 28), its ranking only: a whole Memory per legal
#: layout, and the crossing of each candidate tied for the top from the full rank map.
_FIRST = """
from meshsat import solver
from meshsat.solver.groups import Widths, plan as rank_plan
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import MemoryModel, Parallel
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.memory.models import model_config

def crossing_gpus(resolved, gpus_per_node):
    rm = rank_plan(Widths.of({{**resolved, "gpus_per_node": gpus_per_node}}))
    node = {{r.rank: r.node for r in rm.ranks}}
    return sum(len(g) for kind in ("attn_tp", "ep") for g in rm.groups.get(kind, ())
               if len({{node[x] for x in g}}) > 1)

g, gpus, top = gpu({gpu!r}), {n}, 20
config = model_config({model!r})
spec = ModelSpec.from_hf_config(config)
mm = MemoryModel(config, g)
per_node = min(g.fabric, gpus) or 1
fitting = []
for lay in solver.enumerate(gpus, model=spec):
    m = mm.of(Parallel.from_resolved(lay.config, lay.derived))
    if m.fits:
        fitting.append((m.max_total_num_tokens * m.pools, lay, m))
fitting.sort(key=lambda t: -t[0])
cut = fitting[min(top, len(fitting)) - 1][0]
scored = [(-cap, crossing_gpus(lay.config, per_node), lay) for cap, lay, m in fitting
          if cap >= cut]
scored.sort(key=lambda t: (t[0], t[1]))
rows = scored[:top]
"""

#: The default ranking, by estimates (`plan --rank perf`).
_PERF = """
from meshsat.solver.cli.plan_perf import perf_rows
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.perf import Workload
rows, ranked, shapes = perf_rows(
    {model!r}, gpu({gpu!r}), {n}, Workload(), engine="auto", gpus_per_node=None, top=20
)
"""

_TIMED = """
import json, time
t0, c0 = time.perf_counter(), time.process_time()
{body}
print(json.dumps({{"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "rows": len(rows), "shapes": globals().get("shapes")}}))
"""


@dataclass
class Run:
    seconds: float | None  # None: stopped at the limit
    peak_mib: float
    cpu: float | None = None
    shapes: int | None = None


def _peak_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _run(body: str, limit: float) -> Run:
    code = _TIMED.format(body=body)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    peak, start = 0.0, time.monotonic()
    while proc.poll() is None:
        peak = max(peak, _peak_mib(proc.pid))
        if time.monotonic() - start > limit:
            proc.kill()
            proc.wait()
            return Run(None, peak)
        time.sleep(0.05)
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark run failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return Run(float(result["seconds"]), peak, float(result["cpu"]), result["shapes"])


def _median(runs: list[Run], limit: float) -> tuple[str, float]:
    done = [r.seconds for r in runs if r.seconds is not None]
    peak = statistics.median(r.peak_mib for r in runs)
    if len(done) < len(runs):
        return f"> {limit:.0f} (stopped)", peak
    return f"{statistics.median(done):.2f}", peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--limit", type=float, default=120.0, help="Stop a baseline run after S s.")
    ap.add_argument("--perf-only", action="store_true", help="Only the second table.")
    a = ap.parse_args()
    if not a.perf_only:
        _first_against_now(a.runs, a.limit)
    _perf_against_kv(a.runs, a.limit)


def _perf_against_kv(runs: int, limit: float) -> None:
    print(f"\nplan --model {MODEL} --gpu {GPU} --top 20: --rank perf against --rank kv; "
          f"median of {runs} runs")  # fmt: skip
    print(f"{'GPUs':>9}  {'shapes':>6}  {'perf s':>6}  {'perf cpu s':>10}  {'kv s':>5}  "
          f"{'kv cpu s':>8}  {'perf MiB':>8}  cpu ratio")  # fmt: skip
    for n in COUNTS:
        perf = [_run(_PERF.format(model=MODEL, gpu=GPU, n=n), limit) for _ in range(runs)]
        kv = [_run(_CURRENT.format(model=MODEL, gpu=GPU, n=n), limit) for _ in range(runs)]
        p_cpu = statistics.median(r.cpu or 0.0 for r in perf)
        k_cpu = statistics.median(r.cpu or 0.0 for r in kv)
        p_s, p_mib = _median(perf, limit)
        k_s, _ = _median(kv, limit)
        print(
            f"{n:>9,}  {perf[0].shapes or 0:>6}  {p_s:>6}  {p_cpu:>10.2f}  {k_s:>5}  "
            f"{k_cpu:>8.2f}  {p_mib:>8.0f}  {p_cpu / k_cpu:.1f}x",
            flush=True,
        )


def _first_against_now(runs: int, limit: float) -> None:
    print(f"plan --model {MODEL} --gpu {GPU} --top 20; median of {runs} runs")
    head = f"{'GPUs':>9}  {'first s':>16}  {'first MiB':>9}  {'now s':>6}  {'now MiB':>7}  ratio"
    print(head)
    for n in COUNTS:
        now = [_run(_CURRENT.format(model=MODEL, gpu=GPU, n=n), limit) for _ in range(runs)]
        first_runs = 1 if n == COUNTS[-1] else runs
        first = [_run(_FIRST.format(model=MODEL, gpu=GPU, n=n), limit) for _ in range(first_runs)]
        now_s, now_mib = _median(now, limit)
        first_s, first_mib = _median(first, limit)
        ratio = (
            f"{float(first_s) / float(now_s):.0f}x"
            if not first_s.startswith(">")
            else f"> {limit / float(now_s):.0f}x"
        )
        print(
            f"{n:>9,}  {first_s:>16}  {first_mib:>9.0f}  {now_s:>6}  {now_mib:>7.0f}  {ratio}",
            flush=True,
        )


if __name__ == "__main__":
    main()
