"""Which TP / MoE-TP / EP widths load, per model family and SGLang release pack.

Prints a Markdown table (README "Will it start"): for each checkpoint and pack, the TP
widths (EP 1) whose weight shards pass every weight-shape rule, the smallest EP that makes
TP 8/16/32 load, and the rule that refuses the rest. Each row is the rules' verdict; the
rules cite SGLang's source per release (docs/weight-shapes.md), and tests/test_weight_shapes.py
checks them against a second implementation and public launch reports. Also times the
verdicts (median of 9 interleaved runs, against validate without a model).

    .venv/bin/python benchmarks/weight_shapes_table.py
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from meshsat.solver import validate
from meshsat.solver.catalogue.weight_shapes import RULES, RULES_0_4, RULES_0_5_23
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.models import model_config
from meshsat.solver.packs import PACKS, get_pack

MODELS = (
    "deepseek-ai/DeepSeek-R1",
    "deepseek-ai/DeepSeek-V3.2-Exp",
    "moonshotai/Kimi-K2-Instruct",
    "Qwen/Qwen3-235B-A22B-FP8",
    "Qwen/Qwen3-30B-A3B-FP8",
    "Qwen/Qwen3-32B-FP8",
    "zai-org/GLM-4.5-FP8",
    "zai-org/GLM-4.6-FP8",
    "openai/gpt-oss-120b",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
    "nvidia/Llama-3.1-405B-Instruct-FP4",
    "MiniMaxAI/MiniMax-M2",
)
#: Checkpoints that are not embedded, read from the test fixtures (their provenance is in
#: docs/weight-shapes.md); their model files first appear in the 0.5.18 pack.
FIXTURES = tuple(
    str(Path(__file__).parent.parent / "tests" / "fixtures" / "weight_shapes" / "configs" / f)
    for f in (
        "Qwen3-Next-80B-A3B-Instruct-FP8.json",
        "GLM-5-FP8.json",
        "Step-3.5-Flash-FP8.json",
    )
)
TPS = (1, 2, 4, 8, 16, 32)
SHAPE_IDS = {r.id for r in (*RULES, *RULES_0_5_23, *RULES_0_4)} - {"QUANT-NOT-CHECKED"}


def refused(model: str, layout: dict[str, Any], version: str) -> list[str]:
    report = validate(layout, model_config(model), explain=False, sglang_version=version)
    return [v.rule for v in report.violations if v.rule in SHAPE_IDS]


def layout(tp: int, ep: int = 1) -> dict[str, Any]:
    return {"tp_size": tp, "ep_size": ep, "nnodes": max(1, tp // 8)}


def row(model: str, version: str) -> tuple[str, str, str, str]:
    loads = [tp for tp in TPS if not refused(model, layout(tp), version)]
    eps = []
    for tp in (8, 16, 32):
        ep = next((e for e in TPS if e <= tp and not refused(model, layout(tp, e), version)), None)
        eps.append(f"{tp}:{ep if ep is not None else '-'}")
    why = sorted({r for tp in TPS for r in refused(model, layout(tp), version)})
    pack = get_pack(version)
    sources = sorted({pack.by_id[r].source for r in why})
    return (
        ", ".join(map(str, loads)),
        " ".join(eps),
        ", ".join(why) or "-",
        "; ".join(sources) or "-",
    )


def main() -> None:
    print(
        "| checkpoint | pack | TP that loads (EP 1) | smallest EP at TP 8/16/32 | refused by "
        "| SGLang source |"
    )
    print("|---|---|---|---|---|---|")
    for model in (*MODELS, *FIXTURES):
        name = Path(model).stem if model in FIXTURES else model
        for pack in PACKS:
            if model in FIXTURES and pack.version == "0.4.6.post5":
                continue
            print(f"| {name} | {pack.version} | " + " | ".join(row(model, pack.version)) + " |")
    specs = [ModelSpec.from_hf_config(model_config(m)) for m in MODELS]
    n = len(MODELS) * len(TPS)
    runs, base = [], []
    for _ in range(9):  # interleaved, so that load on the machine hits both alike
        t = time.perf_counter()
        for _spec in specs:
            for tp in TPS:
                validate(layout(tp), explain=False)
        base.append((time.perf_counter() - t) / n)
        t = time.perf_counter()
        for spec in specs:
            for tp in TPS:
                validate(layout(tp), spec, explain=False)
        runs.append((time.perf_counter() - t) / n)
    med, bmed = statistics.median(runs), statistics.median(base)
    print()
    print("| validate | median µs per layout (9 runs) | ratio |")
    print("|---|---|---|")
    print(f"| without a model | {bmed * 1e6:.0f} | 1.00 |")
    label = "with the checkpoint's facts (weight-shape rules on)"
    print(f"| {label} | {med * 1e6:.0f} | {med / bmed:.2f} |")


if __name__ == "__main__":
    main()
