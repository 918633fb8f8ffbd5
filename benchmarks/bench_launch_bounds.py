"""How long does `meshsat validate --sglang -` take on a pasted megabyte? Prints a table; the
README quotes it (issue 28, item 6: every input within the 1 MiB bound in about a second).

Each shape fills the 1 MiB bound (`launch.MAX_CHARS`) with one kind of word, from the issue's
69,900 unknown flags to half a million one-character values; text with shell syntax is read
by the shell parser only up to `MAX_SHELL_CHARS` and refused beyond. Two figures per shape:
the whole command in a fresh process (what a user waits for: start-up included), median of
`RUNS`, with its peak memory; and the baseline measured in the same run, the same command on
a one-line launch, so the ratio is what the megabyte itself costs.

The last rows are a script of many servers (`N` copies of one launch, each on its own port,
as QA pasted them): `validate` compares the servers with each other (HOST-GPU-*, HOST-PORT-*),
and `--rewrite` fixes them together; both were one finding or one comparison per pair of
servers.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_launch_bounds.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from meshsat.solver.inputs.launch import MAX_CHARS, MAX_SHELL_CHARS

RUNS = 5
HEAD = "python -m sglang.launch_server --tp 8 "
ROOT = Path(__file__).resolve().parent.parent


def _fill(unit: str, budget: int = MAX_CHARS - 64, head: str = HEAD) -> str:
    """`head`, then `unit` (with `{i}` numbered) until `budget` characters."""
    parts, size, i = [head], len(head), 0
    while True:
        piece = unit.format(i=i)
        if size + len(piece) > budget:
            return "".join(parts)
        parts.append(piece)
        size += len(piece)
        i += 1


SHAPES: dict[str, str] = {
    "69,900 unknown flags (the issue's)": _fill("--xflag-{i:06d} "),
    "one 1 MiB value": HEAD + "--model-path " + "a" * (MAX_CHARS - 100),
    "262,000 ambiguous flags (--a)": _fill("--a "),
    "150,000 layout flags (--tp 8)": _fill("--tp 8 "),
    "524,000 list values (--cuda-graph-bs 1 1 ...)": _fill("1 ", head=HEAD + "--cuda-graph-bs "),
    "14,500 launches (nodes of one job)": _fill(
        "python -m sglang.launch_server --tp 8 --nnodes 2 --node-rank {i} --xq{i}\n", head=""
    ),
    "shell syntax at its 128 KiB bound": _fill("--x 'a' ", budget=MAX_SHELL_CHARS - 64),
    "shell syntax, 1 MiB (refused)": _fill("--x 'a' "),
}
BASELINE = HEAD.strip()


def _servers(n: int) -> str:
    """`n` one-node servers of one launch, on ports 30000.. (QA's many-servers script)."""
    return "".join(
        f"python -m sglang.launch_server --tp 8 --port {30000 + i} &\n" for i in range(n)
    )


#: (name, text, extra `validate` arguments): a deployment of many servers.
SCRIPTS: list[tuple[str, str, tuple[str, ...]]] = [
    ("500 servers, one port each", _servers(500), ()),
    ("2,000 servers, one port each", _servers(2000), ()),
    ("2,000 servers, one port each, --rewrite", _servers(2000), ("--rewrite",)),
]


def _run(text: str, *extra: str) -> tuple[float, float, int, int]:
    """One fresh `meshsat validate --sglang -`: wall and CPU seconds, exit status, peak RSS
    (MiB). CPU time is the figure to compare on a shared machine: wall time also counts
    the wait for a core."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "meshsat", "validate", "--sglang", "-", *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdin is not None
    proc.stdin.write(text)
    proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak, not the maximum so far
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, proc.returncode, usage.ru_maxrss // 1024


def main() -> None:
    base = [_run(BASELINE) for _ in range(RUNS)]
    base_wall = statistics.median(r[0] for r in base)
    base_cpu = statistics.median(r[1] for r in base)
    print(f"bench_launch_bounds (meshsat validate --sglang -, fresh process, median of {RUNS})")
    print(
        f"{'input':<46} {'chars':>9} {'exit':>4} {'wall s':>7} {'CPU s':>6} "
        f"{'CPU × base':>10} {'peak MiB':>8}"
    )
    rows = [("baseline: " + BASELINE, BASELINE, base)]
    rows += [(name, text, [_run(text) for _ in range(RUNS)]) for name, text in SHAPES.items()]
    rows += [
        (name, text, [_run(text, *extra) for _ in range(RUNS)]) for name, text, extra in SCRIPTS
    ]
    for name, text, runs in rows:
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        code, peak = runs[-1][2], max(r[3] for r in runs)
        print(
            f"{name:<46} {len(text):>9} {code:>4} {wall:7.2f} {cpu:6.2f} "
            f"{cpu / base_cpu:10.1f} {peak:>8}"
        )
    print(f"(baseline wall {base_wall:.2f} s: start-up and one small validation)")


if __name__ == "__main__":
    main()
