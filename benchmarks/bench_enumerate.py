"""How fast is `enumerate`? Prints a table; benchmarks/RESULTS-enumerate.md keeps it.

For N = 8, 64, 512, 4096, 6144 and 15360 (default space, no model):
- count: `meshsat.solver.count(N)` warm (median of --repeat runs), and cold: a fresh process
  importing meshsat, building the enumerator (Z3 import, code generation) and counting;
- stream: consuming `meshsat.solver.enumerate(N)`, every layout as a `Layout` object (median);
- JSONL: the command line's writer streaming every layout to a file (median);
- naive: the reference enumerator (`tests.reference.bruteforce`: product over divisors with the
  GPU-count cut, every candidate validated), one run in a child process, abandoned
  after --naive-limit seconds (it consumes its layouts the same way); speed-up =
  naive / stream.
Then peak memory of `meshsat enumerate --gpus 15360 --format jsonl > file` (max RSS of
the child process, end to end).

Run: .venv/bin/python benchmarks/bench_enumerate.py [--repeat 5] [--quick]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from timing import aligned, median_seconds

from meshsat import solver
from meshsat.solver.cli.layout_writers import Writer
from meshsat.solver.enumeration.layouts import EnumerationQuery

NS = (8, 64, 512, 4096, 6144, 15360)
GOALS = {
    "count N=4096 (cold, s)": 0.5,
    "count N=15360 (cold, s)": 2.0,
    "JSONL to file (layouts/s, min over N >= 4096)": 150_000,
    "speed-up vs naive at N=4096": 50,
    "peak RSS, N=15360 JSONL to file (MB)": 200,
}
COLD = (
    "import time; t = time.perf_counter(); import solver; n = solver.count({n}); "
    "print(n, time.perf_counter() - t)"
)


def _consume(layouts: Any) -> int:
    return sum(1 for _ in layouts)


def cold_count(n: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", COLD.format(n=n)], capture_output=True, text=True, check=True
        ).stdout.split()
        times.append(float(out[1]))
    return statistics.median(times)


def jsonl_to_file(n: int, path: Path) -> int:
    e = EnumerationQuery.of().enumerator()
    shown = e.output_columns
    picks = [e.columns.index(c) for c in shown]
    with path.open("w") as f:
        return Writer("jsonl", shown, picks, f).write_all(e.rows(n))


def _naive_child(n: int, queue: Any) -> None:
    from tests.reference.bruteforce import brute_force

    t = time.perf_counter()
    found = sum(1 for _ in brute_force(n))
    queue.put((found, time.perf_counter() - t))


def naive(n: int, limit: float) -> tuple[int, float] | None:
    """(layouts, seconds) of the reference enumerator, or None past `limit` seconds."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_naive_child, args=(n, queue))
    child.start()
    child.join(limit)
    if child.is_alive():
        child.terminate()
        child.join()
        return None
    if child.exitcode != 0:  # its traceback is on stderr; waiting on the queue would hang
        raise SystemExit(f"the reference enumerator failed (exit {child.exitcode})")
    result: tuple[int, float] = queue.get(timeout=10)
    return result


_RSS = (
    "import resource, subprocess, sys, time; t = time.perf_counter(); "
    "subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], 'w'), check=True); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.perf_counter() - t)"
)


def peak_rss_cli(n: int, path: Path) -> tuple[float, float, int]:
    """(max RSS in MB, wall seconds, lines) of the CLI streaming N's layouts to a file.

    A wrapper process runs the CLI, so that its children's peak RSS is the CLI's alone.
    """
    exe = Path(sys.executable).with_name("meshsat")
    cmd = [str(exe), "enumerate", "--gpus", str(n), "--format", "jsonl"]
    out = subprocess.run(
        [sys.executable, "-c", _RSS, str(path), *cmd], capture_output=True, text=True, check=True
    ).stdout.split()
    rss_kb, wall = int(out[0]), float(out[1])
    with path.open("rb") as f:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    return rss_kb / 1024, wall, lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--naive-limit", type=float, default=60.0)
    ap.add_argument("--quick", action="store_true", help="N up to 4096, 3 repeats")
    args = ap.parse_args()
    ns = tuple(n for n in NS if n <= 4096) if args.quick else NS
    repeat = 3 if args.quick else args.repeat
    tmp = Path(tempfile.mkdtemp(prefix="bench-enumerate-"))
    out_file = tmp / "layouts.jsonl"

    header = [
        "N",
        "layouts",
        "count warm",
        "count cold",
        "stream",
        "stream/s",
        "JSONL file",
        "JSONL/s",
        "naive",
        "speed-up",
    ]
    rows: list[list[str]] = []
    measured: dict[str, float] = {}
    jsonl_rates = []
    for n in ns:
        total = solver.count(n)
        warm = median_seconds(lambda n=n: solver.count(n), repeat)
        cold = cold_count(n, repeat)
        listed = median_seconds(lambda n=n: _consume(solver.enumerate(n)), max(1, repeat // 2 + 1))
        jsonl = median_seconds(lambda n=n: jsonl_to_file(n, out_file), max(1, repeat // 2 + 1))
        out_file.unlink()
        base = naive(n, args.naive_limit)
        if base is None:
            naive_cell, ratio = (
                f"> {args.naive_limit:.0f} s",
                f"> {args.naive_limit / listed:,.0f}x",
            )
            speedup = args.naive_limit / listed
        else:
            if base[0] != total:
                raise SystemExit(f"naive found {base[0]} layouts for N={n}, enumerate {total}")
            naive_cell, ratio = f"{base[1]:.2f} s", f"{base[1] / listed:,.0f}x"
            speedup = base[1] / listed
        rows.append(
            [
                f"{n}",
                f"{total:,}",
                f"{warm * 1e3:.1f} ms",
                f"{cold * 1e3:.0f} ms",
                f"{listed:.3f} s",
                f"{total / listed:,.0f}",
                f"{jsonl:.3f} s",
                f"{total / jsonl:,.0f}",
                naive_cell,
                ratio,
            ]
        )
        if n >= 4096:
            jsonl_rates.append(total / jsonl)
        if n == 4096:
            measured["count N=4096 (cold, s)"] = cold
            measured["speed-up vs naive at N=4096"] = speedup
        if n == 15360:
            measured["count N=15360 (cold, s)"] = cold
    if jsonl_rates:
        measured["JSONL to file (layouts/s, min over N >= 4096)"] = min(jsonl_rates)

    extra = []
    if 15360 in ns:
        rss, wall, lines = peak_rss_cli(15360, out_file)
        measured["peak RSS, N=15360 JSONL to file (MB)"] = rss
        extra.append(
            f"meshsat enumerate --gpus 15360 --format jsonl > file: {lines:,} lines, "
            f"{wall:.2f} s wall ({lines / wall:,.0f} layouts/s end to end), "
            f"peak RSS {rss:.0f} MB, file {out_file.stat().st_size / 1e6:,.0f} MB"
        )
        out_file.unlink()
    os.rmdir(tmp)

    print(
        f"bench_enumerate (default space, no model; median of {repeat} for counts, "
        f"{max(1, repeat // 2 + 1)} for stream and JSONL; naive: one run, "
        f"limit {args.naive_limit:.0f} s)"
    )
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print()
    print(aligned([header, *rows], right=True, rule=True))
    print()
    for line in extra:
        print(line)
    print()
    print("goals:")
    for name, goal in GOALS.items():
        if name not in measured:
            continue
        value = measured[name]
        upper = "s)" in name or "MB" in name
        ok = value <= goal if upper else value >= goal
        sign = "<=" if upper else ">="
        print(f"  {name}: {value:,.2f} (goal {sign} {goal:,}) {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
