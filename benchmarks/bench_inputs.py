"""How fast is a pasted launch script read? Prints a table; the README quotes it.

A 40-line script (two nodes' launches with continuations, comments, env prefixes and
redirections, padded with shell around them) read by `parse_sglang_command`, warm, against
`shlex.split` of the same text (which reads no shell structure) in the same run.

Run: .venv/bin/python benchmarks/bench_inputs.py
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from timing import median_seconds

from meshsat.solver.inputs import parse_sglang_command

NODE = """\
# node {rank}: prefill server
export NCCL_IB_DISABLE=0
export SGLANG_ENABLE_CP_V2=1
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 python3 -m sglang.launch_server \\
  --model-path deepseek-ai/DeepSeek-V3 \\
  --trust-remote-code \\
  --tp 16 \\
  --attn-dp-size 16 \\
  --ep-size 16 \\
  --moe-a2a-backend deepep \\
  --enable-eplb \\
  --nnodes 2 \\
  --node-rank {rank} \\
  --dist-init-addr 10.0.0.1:5000 \\
  --cuda-graph-bs 1 2 4 8 16 \\
  --mem-fraction-static 0.85 \\
  --host 0.0.0.0 --port 30000 \\
  > node{rank}.log 2>&1 &
echo "started node {rank}"
sleep 1
"""
SCRIPT = NODE.format(rank=0) + NODE.format(rank=1)


def median_us(fn: Callable[[], object]) -> float:
    return 1e6 * median_seconds(fn, 300, warmup=20)


def main() -> None:
    lines = SCRIPT.count("\n")
    ours = median_us(lambda: parse_sglang_command(SCRIPT))
    base = median_us(lambda: shlex.split(SCRIPT, comments=True))
    print(f"bench_inputs ({lines}-line launch script, median of 300 warm reads)")
    print(f"{'parse_sglang_command (bashlex)':<40} {ours / 1e3:8.2f} ms   goal ≤ 5 ms")
    print(
        f"{'  baseline: shlex.split (no structure)':<40} {base / 1e3:8.2f} ms   ×{ours / base:.1f}"
    )


if __name__ == "__main__":
    main()
