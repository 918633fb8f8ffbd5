"""The memory model: accuracy against SGLang's start-up logs, and its cost per layout.

(a) Validation: every record in benchmarks/memory_logs.json (a public SGLang start-up log:
source URL, command, GPU, and the figures SGLang printed) is recomputed from the embedded
model facts, the layout and the GPU; the table shows the error of each figure, misses
included. Goals: weights per rank within ±2 %, KV tokens within ±5 % where the GPU memory
and `mem_fraction_static` are known (the record's `pre_load_gib` is the log's "Load weight
begin. avail mem"; where the log lacks it the default context allowance is used and the
row says so).

(b) Speed: `meshsat.solver.enumerate(N, model=...)` consumed plain (baseline) and with the memory
columns (weights_gib, kv_tokens, max_requests, fits) read through
`MemoryModel.row_reader` for every layout, median of --repeat runs in the same process;
the extra cost per layout is (with - plain) / layouts. Goal: ≤ 2 µs per layout.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_memory.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from timing import median_seconds

from meshsat import solver
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import GIB, MemoryModel, Parallel, load_facts
from meshsat.solver.memory.gpus import Gpu, gpu
from meshsat.solver.memory.kv import kv_bytes_per_token
from meshsat.solver.memory.models import catalogue_config
from meshsat.solver.memory.state import split_rest, state_bytes_per_request
from meshsat.solver.memory.weights import WeightModel

LOGS = Path(__file__).with_name("memory_logs.json")
# SGLang's "GB" in these logs is 2^30 bytes: `get_available_gpu_memory`
# (sglang/srt/utils/common.py) returns `free_gpu_memory / (1 << 30)`, and
# `ModelRunner.load_model` prints `mem usage` as the difference of two such readings.
GB_LOG = float(1 << 30)


def _parallel(rec: dict[str, Any], spec: ModelSpec) -> Parallel:
    cfg = {k: v for k, v in rec["layout"].items()}
    report = solver.validate(cfg, spec, explain=False)
    return Parallel.from_resolved(report.resolved, report.derived)


def validation() -> list[dict[str, Any]]:
    rows = []
    for rec in json.loads(LOGS.read_text())["records"]:
        config = {**catalogue_config(rec["model"]), **rec.get("config_overrides", {})}
        facts = load_facts(config)
        spec = ModelSpec.from_hf_config(config)
        p = _parallel(rec, spec)
        # A log that names no GPU still checks the weights and the KV cell.
        g: Gpu | None = gpu(rec["gpu"]) if rec.get("gpu") else None
        logged = rec["logged"]
        pack = rec.get("pack", "0.5.23")
        row: dict[str, Any] = {
            "held_out": bool(rec.get("held_out")),
            "added": rec.get("added"),
            "id": rec["id"],
            "model": rec["model"],
            "gpu": g.name if g is not None else "not named",
        }
        w = WeightModel(facts, g, pack).per_rank(p) / GIB
        row["weights_gib"] = w
        if "weights_gb" in logged:
            row["weights_err"] = w / logged["weights_gb"] - 1
        cell = kv_bytes_per_token(facts, p, 0, rec.get("kv_cache_dtype"))
        if "kv_gb" in logged and "tokens" in logged:
            row["cell_err"] = cell / (logged["kv_gb"] * GB_LOG / logged["tokens"]) - 1
        if "state_slots" in logged:
            _score_state(row, logged, facts, p, cell)
        pre = rec.get("pre_load_gib")
        known_pool = g is not None or pre is not None
        has_fraction = "mem_fraction_static" in rec or rec.get("default_fraction")
        if known_pool and "tokens" in logged and has_fraction:
            # Without a named GPU, the pool needs only the free memory before loading:
            # any device at least that large gives the same arithmetic.
            device = g if g is not None else Gpu("log", (pre + 1.0) * 1024, 1)
            ctx = 1.0 if pre is None else device.memory_gib - pre
            mm = MemoryModel(
                facts,
                device,
                kv_cache_dtype=rec.get("kv_cache_dtype"),
                mem_fraction_static=rec.get("mem_fraction_static"),
                context_gib=ctx,
                page_size=rec.get("page_size", 1),
                pack=pack,
            )
            m = mm.of(p)
            row["tokens"] = m.kv_tokens
            row["tokens_err"] = m.kv_tokens / logged["tokens"] - 1
            row["pre_load"] = "log" if pre is not None else "default"
        rows.append(row)
    return rows


def _score_state(
    row: dict[str, Any], logged: dict[str, Any], facts: Any, p: Parallel, cell: float
) -> None:
    """A GatedDeltaNet hybrid's state pool: the bytes of one slot against the logged pool
    over its `K + 1` slots, and the split of what the two pools took (state + KV) into
    slots and tokens against the logged K and #tokens (`state.split_rest`)."""
    slots = logged["state_slots"]
    per = state_bytes_per_request(facts, p.attn_tp, p.pp)
    row["state_err"] = per / (logged["state_gb"] * GB_LOG / (slots + 1)) - 1
    rest = (logged["state_gb"] + logged["kv_gb"]) * GB_LOG
    k, kv_bytes = split_rest(rest, per)
    row["slots"] = (k, slots)
    row["split_tokens_err"] = int(kv_bytes // cell) / logged["tokens"] - 1


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:+.2f} %"


def print_validation(rows: list[dict[str, Any]]) -> None:
    groups = (
        ("built against (the first 15 logs)", False, None),
        ("held out (issue 24, first set)", True, None),
        ("held out (second set, added 2026-12-05)", True, "2026-12-05"),
        ("held out (GatedDeltaNet hybrids, added 2026-12-05)", True, "2026-12-05-hybrid"),
    )
    for title, held, added in groups:
        print(f"\n{title}:\n")
        _table([r for r in rows if r["held_out"] == held and r["added"] == added])
    print("\nall held out:\n")
    _summary([r for r in rows if r["held_out"]])
    hybrid = [r for r in rows if "state_err" in r]
    if hybrid:
        print("\nGatedDeltaNet hybrids, state pool (held out, added 2026-12-05):\n")
        print("| id | KV cell err | state bytes/slot err | slots (model, log) | split tokens err |")
        print("|---|---:|---:|---|---:|")
        for r in hybrid:
            print(
                f"| {r['id']} | {_pct(r.get('cell_err'))} | {_pct(r['state_err'])} | "
                f"{r['slots'][0]}, {r['slots'][1]} | {_pct(r['split_tokens_err'])} |"
            )


def _table(rows: list[dict[str, Any]]) -> None:
    print("| id | model | GPU | weights/rank GiB | weights err | KV cell err | KV tokens err |")
    print("|---|---|---|---:|---:|---:|---:|")
    for r in rows:
        tok = _pct(r.get("tokens_err"))
        if tok and r.get("pre_load") == "default":
            tok += " (default pre-load)"
        print(
            f"| {r['id']} | {r['model']} | {r['gpu']} | {r['weights_gib']:.2f} | "
            f"{_pct(r.get('weights_err'))} | {_pct(r.get('cell_err'))} | {tok} |"
        )
    _summary(rows)


def _summary(rows: list[dict[str, Any]]) -> None:
    w = [abs(r["weights_err"]) for r in rows if "weights_err" in r]
    t = [abs(r["tokens_err"]) for r in rows if "tokens_err" in r]
    if w:
        ok = sum(e <= 0.02 for e in w)
        print(
            f"\nweights within ±2 %: {ok}/{len(w)}; median |err| {100 * statistics.median(w):.2f} %"
        )
    if t:
        ok = sum(e <= 0.05 for e in t)
        print(
            f"KV tokens within ±5 %: {ok}/{len(t)}; median |err| {100 * statistics.median(t):.2f} %"
        )


def plain(n: int, spec: ModelSpec) -> None:
    for lay in solver.enumerate(n, model=spec):
        _ = lay.row


def with_memory(n: int, spec: ModelSpec, mm: MemoryModel) -> None:
    read = None
    for lay in solver.enumerate(n, model=spec):
        if read is None:
            s = lay.shape
            read = mm.row_reader(s.config_index, s.constant, s.derived_index)
        _ = read(lay.row)


def speed(repeat: int) -> None:
    print("\n| N | model | GPU | layouts | plain layouts/s | with memory layouts/s | µs/layout |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for n, model, g in (
        (512, "deepseek-ai/DeepSeek-V3", "H200"),
        (4096, "deepseek-ai/DeepSeek-V3", "H200"),
        (4096, "Qwen/Qwen3-235B-A22B", "H100"),
        # a GatedDeltaNet hybrid: the state pool's split on each miss
        (4096, "Qwen/Qwen3.5-397B-A17B", "H200"),
    ):
        spec = ModelSpec.from_hf_config(catalogue_config(model))
        mm = MemoryModel(model, g, context_length=8192)
        count = sum(1 for _ in solver.enumerate(n, model=spec))

        tp = median_seconds(functools.partial(plain, n, spec), repeat)
        tm = median_seconds(functools.partial(with_memory, n, spec, mm), repeat)
        extra = (tm - tp) / count * 1e6
        print(
            f"| {n} | {model} | {g} | {count} | {count / tp:,.0f} | {count / tm:,.0f} | "
            f"{extra:.2f} |"
        )


def _stream(path: Path, n: int, spec: ModelSpec, mm: MemoryModel | None) -> int:
    """JSONL of every layout on `n` GPUs to `path` as `meshsat enumerate -f jsonl` writes it
    (the enumerator is built before the clock starts, as the command builds it once)."""
    from meshsat.solver.cli.layout_writers import Writer
    from meshsat.solver.enumeration.layouts import EnumerationQuery
    from meshsat.solver.enumeration.memory_columns import MEMORY_COLUMNS, MemoryColumns

    e = EnumerationQuery.of(model=spec).enumerator()
    columns, rows = e.columns, e.rows(n)
    shown: tuple[str, ...] = e.output_columns
    if mm is not None:
        stage = MemoryColumns(e, mm)
        columns, rows, shown = stage.columns, stage.rows(rows), (*shown, *MEMORY_COLUMNS)
    picks = [columns.index(c) for c in shown]
    with path.open("w") as f:
        return Writer("jsonl", shown, picks, f).write_all(rows)


def stream_to_file(repeat: int) -> None:
    """The issue's figure: 4096-GPU layouts of DeepSeek-V3 streamed to a JSONL file with the
    memory columns (H200), against the same listing without them, same run."""
    print("\n| JSONL to a file, N = 4096, DeepSeek-V3 | layouts | median s | layouts/s | × plain |")
    print("|---|---:|---:|---:|---:|")
    spec = ModelSpec.from_hf_config(catalogue_config("deepseek-ai/DeepSeek-V3"))
    mm = MemoryModel("deepseek-ai/DeepSeek-V3", "H200", context_length=8192)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "layouts.jsonl"
        plain_s = 0.0
        for label, model in (("plain", None), ("with memory columns (H200)", mm)):
            lines = _stream(path, 4096, spec, model)
            seconds = median_seconds(functools.partial(_stream, path, 4096, spec, model), repeat)
            plain_s = plain_s or seconds
            print(
                f"| {label} | {lines:,} | {seconds:.3f} | {lines / seconds:,.0f} | "
                f"{seconds / plain_s:.2f} |"
            )

        def cold() -> int:
            # What one `meshsat enumerate` process pays: a fresh model, no width key cached.
            fresh = MemoryModel("deepseek-ai/DeepSeek-V3", "H200", context_length=8192)
            return _stream(path, 4096, spec, fresh)

        seconds = median_seconds(cold, repeat)
        print(
            f"| with memory columns (H200), cold model | {lines:,} | {seconds:.3f} | "
            f"{lines / seconds:,.0f} | {seconds / plain_s:.2f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-speed", action="store_true")
    a = ap.parse_args()
    print_validation(validation())
    if not a.skip_speed:
        speed(a.repeat)
        stream_to_file(a.repeat)


if __name__ == "__main__":
    main()
