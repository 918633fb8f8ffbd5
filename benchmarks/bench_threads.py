"""What does thread safety cost? Prints a table (median of several runs).

1. The process-wide Z3 lock uncontended: acquire + release, against a bare function call.
2. A mixed batch (validate with explanation, fix, enumerate, count) run sequentially and
   from 16 threads: the lock serialises Z3, so the ratio shows what is lost or gained.
3. The price of the rejected alternative, one Z3 context per thread: every thread would
   rebuild fix's cached problem and the explainer, so a cold first call against a warm one.

Run: .venv/bin/python benchmarks/bench_threads.py
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from timing import median_seconds, seconds

from meshsat import solver
from meshsat.solver.backends.z3lock import Z3_LOCK

BAD = {"tp_size": 8, "dp_size": 3, "enable_dp_attention": True, "attn_cp_size": 3}


def _job(i: int) -> object:
    k = i % 4
    if k == 0:
        return solver.validate(BAD).conflict
    if k == 1:
        return solver.fix(BAD, gpus=8 * (1 + i % 2), timeout_s=60).to_dict()
    if k == 2:
        return sum(1 for _ in solver.enumerate(8 * (1 + i % 3)))
    return solver.count(12 + i % 5)


def main() -> None:
    n = 200_000

    def bare() -> None:
        for _ in range(n):
            pass

    def locked() -> None:
        for _ in range(n):
            with Z3_LOCK:
                pass

    lock_ns = (median_seconds(locked, 5) - median_seconds(bare, 5)) / n * 1e9
    cold_fix = seconds(lambda: solver.fix(BAD, gpus=8))
    cold_explain = seconds(lambda: solver.validate(BAD))
    warm_fix = median_seconds(lambda: solver.fix(BAD, gpus=8), 5)
    warm_explain = median_seconds(lambda: solver.validate(BAD), 5)
    batch = range(64)
    seq = median_seconds(lambda: [_job(i) for i in batch], 3)

    def threaded() -> None:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(_job, batch))

    par = median_seconds(threaded, 3)
    print("| measure | value |")
    print("|---|---|")
    print(f"| Z3 lock acquire+release, uncontended | {lock_ns:.0f} ns |")
    print(f"| 64 mixed calls, sequential | {seq * 1e3:.0f} ms |")
    print(f"| 64 mixed calls, 16 threads (locked) | {par * 1e3:.0f} ms ({par / seq:.2f}x) |")
    fix_ms = f"{cold_fix * 1e3:.0f} / {warm_fix * 1e3:.1f} ms"
    explain_ms = f"{cold_explain * 1e3:.0f} / {warm_explain * 1e3:.1f} ms"
    print(f"| fix, first call (cold problem) / warm | {fix_ms} |")
    print(f"| explain, first call (cold) / warm | {explain_ms} |")


if __name__ == "__main__":
    main()
