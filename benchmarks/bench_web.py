"""Time to first answer of `meshsat serve` beside the CLI's. Prints a table; the README quotes it.

Two questions a planner asks first: the plan view (DeepSeek-V3 on 64 H200, ranked by the
estimates, the default, and by KV capacity) and a pasted
command (the README's rejected example: validate, and the whole Check view, which also asks
for the nearest fix and the rewritten command). For each:

- CLI: `meshsat plan|validate ... --format json` as a new process, wall time (every run is
  cold: a command line starts from nothing each time);
- web, cold: the first request to a freshly started `meshsat serve` (its imports and the
  rule packs are loaded on that request), and from starting the server to that answer;
- web, warm: the same request again on the running server.

Median of RUNS runs each (a fresh server per cold run). Ratios are web / CLI in this run.

Run: .venv/bin/python benchmarks/bench_web.py [RUNS]
"""

from __future__ import annotations

import functools
import http.client
import json
import re
import statistics
import subprocess
import sys
from typing import Any

from timing import median_seconds, seconds, timed

REJECTED = "python -m sglang.launch_server --tp 8 --dp 3 --enable-dp-attention"
PLAN = {"model": "deepseek-ai/DeepSeek-V3", "gpu": "H200", "gpus": 64}
PLAN_ARGS = ["plan", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--gpus", "64"]
CHECK = [
    ("validate", {"sglang": REJECTED}),
    ("fix", {"sglang": REJECTED, "top": 3}),
    ("rewrite", {"sglang": REJECTED}),
]


def post(port: int, endpoint: str, body: dict[str, Any]) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", f"/api/{endpoint}", json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = json.loads(r.read())
    conn.close()
    if r.status != 200:
        raise SystemExit(f"bench_web: {endpoint} answered {r.status}: {data}")
    return data


def cli_s(args: list[str]) -> float:
    return seconds(
        lambda: subprocess.run(
            [sys.executable, "-m", "meshsat", *args, "--format", "json"],
            capture_output=True,
            check=False,
        )
    )


def fresh_server() -> tuple[subprocess.Popen[str], int, float]:
    """A new `meshsat serve --port 0`; its port and the seconds until it listened."""

    def start() -> tuple[subprocess.Popen[str], str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "meshsat", "serve", "--port", "0"],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        return proc, proc.stderr.readline()  # the line naming its address: it listens

    started = timed(start, 1)
    proc, line = started.result
    m = re.search(r":(\d+)/", line)
    if m is None:
        proc.kill()
        raise SystemExit(f"bench_web: the server did not start: {line!r}")
    return proc, int(m.group(1)), started.median


def measure(
    name: str, cli_args: list[list[str]], calls: list[tuple[str, dict[str, Any]]], runs: int
) -> list[tuple[str, float]]:
    def ask(port: int) -> None:
        for endpoint, body in calls:
            post(port, endpoint, body)

    cli = [sum(cli_s(a) for a in cli_args) for _ in range(runs)]
    cold, start_to_answer, warm = [], [], []
    for _ in range(runs):
        proc, port, started = fresh_server()
        try:
            first = seconds(functools.partial(ask, port))
            cold.append(first)
            start_to_answer.append(started + first)
            warm.append(median_seconds(functools.partial(ask, port), 3))
        finally:
            proc.terminate()
            proc.wait()
    return [
        (f"{name}: CLI (new process)", statistics.median(cli)),
        (f"{name}: web, first request to a fresh server", statistics.median(cold)),
        (f"{name}: web, server start to first answer", statistics.median(start_to_answer)),
        (f"{name}: web, warm", statistics.median(warm)),
    ]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    rows = measure("plan DeepSeek-V3 on 64 H200 (estimates)", [PLAN_ARGS], [("plan", PLAN)], runs)
    rows += measure(
        "plan DeepSeek-V3 on 64 H200 (--rank kv)",
        [[*PLAN_ARGS, "--rank", "kv"]],
        [("plan", {**PLAN, "rank": "kv"})],
        runs,
    )
    rows += measure(
        "pasted command, validate", [["validate", "--sglang", REJECTED]], CHECK[:1], runs
    )
    rows += measure(
        "pasted command, Check view (validate + fix + rewrite)",
        [["validate", "--sglang", REJECTED], ["fix", "--sglang", REJECTED, "--top", "3"],
         ["validate", "--sglang", REJECTED, "--rewrite"]],
        CHECK,
        runs,
    )  # fmt: skip
    print(f"bench_web (median of {runs} runs; ratio: against the CLI in this run)")
    print(f"{'what':<88} {'seconds':>8} {'ratio':>7}")
    base = 0.0
    for what, s in rows:
        if what.endswith("CLI (new process)"):
            base = s
        print(f"{what:<88} {s:8.3f} {s / base:7.2f}")


if __name__ == "__main__":
    main()
