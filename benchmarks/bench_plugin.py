"""What meshsat's SGLang plugin costs a launch. Prints a table; the README quotes it.

Measured inside the real SGLang 0.5.23 (the plugin venv of `make plugin-venv`, CPU), in
fresh processes, for a valid layout (DeepSeek-V3 shape, `--tp 8 --attn-dp-size 2`):
- `load_plugins()`: SGLang loading its plugins; meshsat's registration and the import of
  meshsat it brings, against `SGLANG_PLUGINS=none` (no plugin loaded) in the same run;
- `prepare_server_args(argv)`: SGLang's parse with meshsat's hook in front (the judgement
  of the layout, the first in the process), against `MESHSAT_SGLANG=off` (no hook);
- warm: the hook alone, repeated in one process (what a second launch in one process, or
  the judgement without the one-time costs, takes), against SGLang's own parse of the same
  arguments.
Goal: a valid layout costs under 5 ms.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_plugin.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("MESHSAT_PLUGIN_CACHE", Path.home() / ".cache/meshsat-plugin"))
ARGV = [
    "--model-path", "fidelity/models/deepseek_v3", "--tp", "8", "--attn-dp-size", "2",
    "--device", "cpu",
]  # fmt: skip

#: Run by the plugin venv's interpreter: standard library, SGLang and benchmarks/timing.py.
CHILD = r"""
import json, sys, time
argv = json.loads(sys.argv[1])
warm = int(sys.argv[2])
import sglang.srt.server_args as sa
from sglang.srt.plugins import load_plugins
original = sa.prepare_server_args
t0 = time.perf_counter()
load_plugins()
t1 = time.perf_counter()
sa.prepare_server_args(argv)
t2 = time.perf_counter()
out = {"load_plugins_ms": (t1 - t0) * 1e3, "prepare_ms": (t2 - t1) * 1e3}
if warm:
    from meshsat import sglang_plugin
    sys.path.insert(0, "benchmarks")  # the child runs at the repository's root
    from timing import median_seconds
    def median(fn):
        return median_seconds(fn, warm, warmup=1) * 1e3
    import io, contextlib
    with contextlib.redirect_stderr(io.StringIO()):
        out["hook_ms"] = median(lambda: sglang_plugin.before_prepare_server_args(argv))
    out["parse_ms"] = median(lambda: original(argv))
print(json.dumps(out))
"""


def child(python: Path, env: dict[str, str], warm: int = 0) -> dict[str, float]:
    proc = subprocess.run(
        [str(python), "-c", CHILD, json.dumps(ARGV), str(warm)],
        cwd=ROOT,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT / "fidelity" / "cpu_site")},
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--release", default="0.5.23")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    python = VENV / args.release / "bin" / "python"
    if not python.exists():
        sys.exit(f"no plugin venv at {python.parent.parent}: run `make plugin-venv`")
    settings = {
        "no plugin (SGLANG_PLUGINS=none)": {"SGLANG_PLUGINS": "none", "MESHSAT_SGLANG": "off"},
        "meshsat, MESHSAT_SGLANG=off": {"MESHSAT_SGLANG": "off"},
        "meshsat, enforce (default)": {"MESHSAT_SGLANG": "enforce"},
    }
    rows: dict[str, list[dict[str, float]]] = {k: [] for k in settings}
    for _ in range(args.runs):  # interleaved, so that load drifts hit every setting alike
        for name, env in settings.items():
            rows[name].append(child(python, env))
    warm = child(python, {"MESHSAT_SGLANG": "enforce"}, warm=200)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[name])

    base = "no plugin (SGLANG_PLUGINS=none)"
    print(f"bench_plugin (SGLang {args.release}, CPU, fresh process, median of {args.runs})")
    print(f"{'setting':<34} {'load_plugins':>13} {'prepare_args':>13} {'added':>10}")
    for name in settings:
        lp, pa = med(name, "load_plugins_ms"), med(name, "prepare_ms")
        added = lp + pa - med(base, "load_plugins_ms") - med(base, "prepare_ms")
        print(f"{name:<34} {lp:10.1f} ms {pa:10.1f} ms {added:7.1f} ms")
    print(
        f"warm, median of 200: hook {warm['hook_ms']:.2f} ms, SGLang's own parse "
        f"{warm['parse_ms']:.2f} ms (ratio {warm['hook_ms'] / warm['parse_ms']:.2f}); "
        "goal: valid layout < 5 ms"
    )


if __name__ == "__main__":
    main()
