"""Which TP / MoE-TP / EP widths load, per model family and SGLang release pack.

Prints a Markdown table (README "Will it start"): for each checkpoint and pack, the TP
widths (EP 1) whose weight shards pass every launch-stage rule, the smallest EP (MoE TP =
TP / EP) that makes TP 8/16/32 load, whether SGLang's large-scale EP recipe on 32 GPUs
loads, the rules that refuse the rest, and what proves the row: the release's own model
class built on the meta device under the layouts of fidelity/weight_shapes/models.py
("model class: n/n agree", tests/fixtures/weight_shapes/models/), or, where the class
could not be built on CPU, the SGLang source each rule cites (docs/weight-shapes.md).
Also times the verdicts (median of 9 interleaved runs, against validate without a model).

    .venv/bin/python benchmarks/weight_shapes_table.py
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

from timing import interleaved_medians

from meshsat.solver import validate
from meshsat.solver.catalogue.weight_shapes import (
    RULES,
    RULES_0_4,
    RULES_0_5_23,
    VISION_TP_REDUCE,
)
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.models import model_config
from meshsat.solver.packs import PACKS, get_pack

ROOT = Path(__file__).parent.parent
#: The catalogue's Qwen3-Next FP8 entry written out, named as the oracle records name it.
QWEN3_NEXT = "tests/fixtures/weight_shapes/configs/Qwen3-Next-80B-A3B-Instruct-FP8.json"

SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
#: (row label, catalogue id or config path, drop the quantization_config: a BF16 row).
MODELS: tuple[tuple[str, str, bool], ...] = (
    ("deepseek-ai/DeepSeek-R1 (FP8)", "deepseek-ai/DeepSeek-R1", False),
    ("deepseek-ai/DeepSeek-V3 (BF16 cast)", "deepseek-ai/DeepSeek-V3", True),
    ("deepseek-ai/DeepSeek-V3.2 (FP8)", "deepseek-ai/DeepSeek-V3.2", False),
    ("moonshotai/Kimi-K2-Instruct (FP8)", "moonshotai/Kimi-K2-Instruct", False),
    ("Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-32B-FP8", False),
    ("Qwen/Qwen3-235B-A22B-FP8", "Qwen/Qwen3-235B-A22B-FP8", False),
    ("Qwen/Qwen3-30B-A3B-FP8", "Qwen/Qwen3-30B-A3B-FP8", False),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct-FP8", QWEN3_NEXT, False),
    ("Qwen/Qwen3.5-397B-A17B (BF16)", "Qwen/Qwen3.5-397B-A17B", False),
    ("Qwen/Qwen3.5-397B-A17B-FP8", "Qwen/Qwen3.5-397B-A17B-FP8", False),
    ("Qwen/Qwen3.5-35B-A3B-FP8", "Qwen/Qwen3.5-35B-A3B-FP8", False),
    ("nvidia/Qwen3.5-397B-A17B-NVFP4", "nvidia/Qwen3.5-397B-A17B-NVFP4", False),
    ("zai-org/GLM-4.5-FP8", "zai-org/GLM-4.5-FP8", False),
    ("zai-org/GLM-4.6-FP8", "zai-org/GLM-4.6-FP8", False),
    ("zai-org/GLM-5-FP8", "zai-org/GLM-5-FP8", False),
    ("nvidia/GLM-5-NVFP4", "nvidia/GLM-5-NVFP4", False),
    ("openai/gpt-oss-120b (MXFP4)", "openai/gpt-oss-120b", False),
    ("nvidia/Llama-3.1-70B-Instruct-FP8", "nvidia/Llama-3.1-70B-Instruct-FP8", False),
    ("nvidia/Llama-3.1-405B-Instruct-FP4", "nvidia/Llama-3.1-405B-Instruct-FP4", False),
    (SCOUT + " (BF16)", SCOUT, False),
    (
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
        False,
    ),
    ("stepfun-ai/Step-3.5-Flash-FP8", "stepfun-ai/Step-3.5-Flash-FP8", False),
    ("google/gemma-3-27b-it (BF16)", "google/gemma-3-27b-it", False),
    ("MiniMaxAI/MiniMax-M2 (FP8)", "MiniMaxAI/MiniMax-M2", False),
)  # fmt: skip
#: Model types whose model file a pack's release lacks (no row there).
ABSENT_BEFORE_0_5 = (
    *("qwen3_next", "qwen3_5_moe", "qwen3_5", "glm_moe_dsa", "step3p5", "deepseek_v32"),
    *("glm4_moe", "gpt_oss", "kimi_k2", "minimax_m2"),
)
TPS = (1, 2, 4, 8, 16, 32)
SHAPE_IDS = {r.id for r in (*RULES, *RULES_0_5_23, *RULES_0_4, *VISION_TP_REDUCE)} - {
    "QUANT-NOT-CHECKED"
}
ORACLE = ROOT / "tests" / "fixtures" / "weight_shapes" / "models"
#: SGLang's large-scale EP recipe on 32 GPUs (DP attention, DeepEP, dense MLP replicated).
LARGE_EP = {"tp_size": 32, "dp_size": 32, "enable_dp_attention": True, "ep_size": 32,
            "moe_a2a_backend": "deepep", "moe_dense_tp_size": 1, "nnodes": 4}  # fmt: skip


def config(model: str, bf16: bool) -> dict[str, Any]:
    local = ROOT / model
    hf = dict(model_config(str(local) if local.is_file() else model))
    if bf16:
        hf.pop("quantization_config", None)
    return hf


def launch_rules(hf: dict[str, Any], layout: dict[str, Any], version: str) -> list[str]:
    report = validate(layout, hf, explain=False, sglang_version=version)
    return [v.rule for v in report.violations if v.stage == "launch"]


def layout(tp: int, ep: int = 1) -> dict[str, Any]:
    return {"tp_size": tp, "ep_size": ep, "nnodes": max(1, tp // 8)}


def oracle(model: str, version: str) -> str:
    """How many of the release's model-class builds of this checkpoint meshsat agrees with."""
    path = ORACLE / f"{version}.json"
    if not path.is_file():
        return ""
    sys.path.insert(0, str(ROOT))
    from tests.test_weight_shapes_models import compared, disagreement

    records = [
        r for r in json.loads(path.read_text())["records"] if r["model"] == model and compared(r)
    ]
    if not records:
        return ""
    agree = sum(disagreement(r, version) is None for r in records)
    return f"model class: {agree}/{len(records)} agree"


def row(model: str, hf: dict[str, Any], version: str) -> tuple[str, ...]:
    loads = [tp for tp in TPS if not launch_rules(hf, layout(tp), version)]
    eps = []
    for tp in (8, 16, 32):
        ep = next(
            (e for e in TPS if e <= tp and not launch_rules(hf, layout(tp, e), version)), None
        )
        eps.append(f"{tp}:{ep if ep is not None else '-'}")
    large = launch_rules(hf, LARGE_EP, version)
    why = sorted({r for tp in TPS for r in launch_rules(hf, layout(tp), version)})
    pack = get_pack(version)
    sources = "; ".join(sorted({pack.by_id[r].source for r in why}))
    return (
        ", ".join(map(str, loads)),
        " ".join(eps),
        "loads" if not large else "refused: " + ", ".join(sorted(set(large))),
        ", ".join(why) or "-",
        oracle(model, version) or ("source: " + sources if sources else "source: no rule fires"),
    )


def main() -> None:
    print(
        "| checkpoint | pack | TP that loads (EP 1) | smallest EP at TP 8/16/32 "
        "| TP 32 large-scale EP | refused by | proven by |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, model, bf16 in MODELS:
        hf = config(model, bf16)
        text = hf.get("text_config") if isinstance(hf.get("text_config"), dict) else hf
        for pack in PACKS:
            types = {text.get("model_type"), hf.get("model_type")}
            if pack.version.startswith("0.4") and types & set(ABSENT_BEFORE_0_5):
                continue
            cells = " | ".join(row(model, hf, pack.version))
            print(f"| {label} | {pack.version} | {cells} |")
    specs = [ModelSpec.from_hf_config(config(m, bf16)) for _, m, bf16 in MODELS]
    n = len(specs) * len(TPS)

    def validate_all(with_model: bool) -> None:
        for spec in specs:
            for tp in TPS:
                validate(layout(tp), spec if with_model else None, explain=False)

    m = interleaved_medians(
        {
            "base": functools.partial(validate_all, False),
            "ours": functools.partial(validate_all, True),
        },
        9,
    )
    med, bmed = m["ours"] / n, m["base"] / n
    print()
    print("| validate | median µs per layout (9 runs) | ratio |")
    print("|---|---|---|")
    print(f"| without a model | {bmed * 1e6:.0f} | 1.00 |")
    label = "with the checkpoint's facts (weight-shape rules on)"
    print(f"| {label} | {med * 1e6:.0f} | {med / bmed:.2f} |")


if __name__ == "__main__":
    main()
