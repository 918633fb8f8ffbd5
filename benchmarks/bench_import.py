"""What importing meshsat costs a fresh process, with `meshsat.solver`'s names loaded on first
use (PEP 562) against the same imports with every public name loaded (what the eager
package did: the baseline, measured in the same run). Prints a table; the README quotes it.

Rows: the package alone; the SGLang plugin's check (`launch_guard`, the reader and
`validate`, issue 22); `meshsat validate` as a whole process against a bare `python -c pass`.

Run: .venv/bin/python benchmarks/bench_import.py [--runs 11]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from timing import interleaved_medians

EVERY_NAME = "import meshsat.solver as s; [getattr(s, n) for n in s.__all__]"
CASES = [
    ("import meshsat.solver", "import meshsat.solver"),
    ("the plugin's check (launch_guard)", "import meshsat.solver.integrations.launch_guard"),
]


def _run(cmd: list[str]) -> Callable[[], object]:
    return lambda: subprocess.run(cmd, check=True, capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=11)
    args = ap.parse_args()
    py = sys.executable
    exe = str(Path(py).with_name("meshsat"))
    rows = []
    for label, code in CASES:
        m = interleaved_medians(
            {"lazy": _run([py, "-c", code]), "eager": _run([py, "-c", f"{code}; {EVERY_NAME}"])},
            args.runs,
        )
        rows.append((label, m["lazy"], m["eager"]))
    m = interleaved_medians(
        {
            "cli": _run([exe, "validate", "--set", "tp_size=8", "--set", "attn_cp_size=2"]),
            "bare": _run([py, "-c", "pass"]),
        },
        args.runs,
    )
    print(f"bench_import (fresh processes, median of {args.runs}; wall time incl. interpreter)")
    print(f"{'what':<36} {'lazy':>9} {'all names':>10} {'saved':>9}")
    for label, lazy_s, eager_s in rows:
        print(
            f"{label:<36} {lazy_s * 1e3:>6.0f} ms {eager_s * 1e3:>7.0f} ms"
            f" {(eager_s - lazy_s) * 1e3:>6.0f} ms"
        )
    c, b = m["cli"], m["bare"]
    print(f"`meshsat validate` whole process {c * 1e3:.0f} ms; `python -c pass` {b * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
