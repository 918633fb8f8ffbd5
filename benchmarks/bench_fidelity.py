"""Agreement of meshsat with the real SGLang, per recorded release (a table, not a test).

    PYTHONPATH=. python benchmarks/bench_fidelity.py

For each fixture in tests/fixtures/fidelity/ (recorded by `make fidelity`): how many
configs SGLang accepts, how often meshsat's verdict agrees, how often the resolved layout
fields agree where both accept, and how often meshsat's first violation is the error SGLang
stopped at where both reject. "w/o buf" is the resolved agreement ignoring
expert_distribution_recorder_buffer_size, the one field meshsat resolves differently.
Each release is judged on its own pack where meshsat has one (0.5.19, 0.5.23), else on the
seed's: those rows show how far the nearest pack is from a release it does not model.
Also the replay speed (median of 3 runs).
"""

from __future__ import annotations

import statistics
import time

from fidelity.compare import recorded_versions, replay


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:6.2f} %" if b else "    n/a"


def main() -> None:
    print(
        f"{'release':<13}{'configs':>8}{'SGLang ok':>11}{'verdict':>10}"
        f"{'resolved':>10}{'w/o buf':>9}{'1st viol.':>10}{'classes':>9}{'replay ms':>11}"
    )
    for v in recorded_versions():
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            t, _ = replay(v)
            times.append(time.perf_counter() - t0)
        print(
            f"{v:<13}{t.n:>8}{pct(t.sglang_valid, t.n):>11}{pct(t.verdict_agree, t.n):>10}"
            f"{pct(t.resolved_agree, t.both_accept):>10}"
            f"{pct(t.resolved_agree_but_buffer, t.both_accept):>9}"
            f"{pct(t.first_agree, t.both_reject):>10}"
            f"{len(t.classes):>9}{1000 * statistics.median(times):>11.0f}"
        )


if __name__ == "__main__":
    main()
