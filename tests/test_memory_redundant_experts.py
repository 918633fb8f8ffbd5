"""`--ep-num-redundant-experts` in the per-rank weights (and so the KV left).

SGLang's MoE classes that read the flag build `num_experts + ep_num_redundant_experts`
expert slots (`deepseek_v2.py`: `num_experts=num_experts_for_moe + num_redundant_experts`;
`qwen3_moe.py`, `qwen2_moe.py`, ... alike), and `FusedMoE` gives each EP rank
`num_local_experts = (num_experts + redundant) / moe_ep_size` of them
(`layers/moe/fused_moe_triton/layer.py`). Llama 4, Mixtral and GLM-4.5's
`Glm4MoeSparseMoeBlock` build `num_experts` slots whatever the flag says. The figures
below are worked by hand from the model configs.
"""

from __future__ import annotations

from typing import Any

import pytest

from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import MemoryModel, Parallel, memory_of
from meshsat.solver.memory.models import catalogue_config, model_config
from meshsat.solver.memory.weights import WeightModel
from meshsat.solver.validation.validate import validate
from tests.memory_rows import column_rows

GIB = 1 << 30
DSV3 = "deepseek-ai/DeepSeek-V3"


def _memory(model: str, gpu: str, args: dict[str, Any], pack: str = "0.5.23") -> Any:
    report = validate(args, model_config(model), sglang_version=pack, explain=False)
    assert report.valid, report.violations
    return memory_of(report, model, gpu, pack=pack)


def test_deepseek_v3_ranks_hold_their_share_of_the_redundant_experts() -> None:
    """DeepSeek-V3 at tp 8, ep 8 with 32 redundant experts: (256 + 32) / 8 = 36 experts a
    rank, not 32. Each of the 58 MoE layers gains 4 experts of 3 · 7168 · 2048 FP8 weights
    with their float32 128×128 block scales (w13: 32 · 56 blocks, w2: 56 · 16): 9.52 GiB
    more a rank, and that much less KV."""
    args = {"tp_size": 8, "ep_size": 8, "enable_eplb": True}
    plain = _memory(DSV3, "H200", args)
    more = _memory(DSV3, "H200", {**args, "ep_num_redundant_experts": 32})
    per_expert = 3 * 7168 * 2048 + 4 * (32 * 56 + 56 * 16)
    hand = 4 * 58 * per_expert / GIB
    assert hand == pytest.approx(9.518, abs=1e-3)
    # The allocator's rounding of the larger fused tensors adds at most a few MiB.
    assert more.weights_gib - plain.weights_gib == pytest.approx(hand, abs=0.01)
    assert more.mem_fraction_static == plain.mem_fraction_static
    lost = (plain.kv_tokens - more.kv_tokens) * plain.kv_bytes_per_token / GIB
    assert lost == pytest.approx(hand, abs=0.01)


@pytest.mark.parametrize(
    ("model", "pack", "counted"),
    [
        (DSV3, "0.4.6.post5", True),
        ("Qwen/Qwen3-30B-A3B", "0.4.6.post5", True),
        ("Qwen/Qwen3-30B-A3B", "0.5.23", True),
        ("openai/gpt-oss-120b", "0.5.18", True),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", "0.5.19", True),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "0.5.23", False),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "0.5.23", False),
        ("zai-org/GLM-4.5", "0.5.23", False),
    ],
)
def test_slots_a_rank_holds(model: str, pack: str, counted: bool) -> None:
    """Expert slots on one of 8 EP ranks with 8 redundant experts: the model's plus one
    where the release's class builds the redundant slots, the model's alone where not."""
    wm = WeightModel(MemoryModel(model, "H200").facts, pack=pack)
    n = wm.facts.num_experts
    assert wm.experts_per_rank(8, 0) == -(-n // 8)
    assert wm.experts_per_rank(8, 8) == -(-(n + (8 if counted else 0)) // 8)


def test_a_class_without_redundant_slots_keeps_its_weights() -> None:
    """Mixtral 8x7B at tp 8, ep 8: its class builds 8 slots with or without 8 redundant
    experts, so nothing moves."""
    model = "mistralai/Mixtral-8x7B-Instruct-v0.1"
    args = {"tp_size": 8, "ep_size": 8, "enable_eplb": True}
    plain = _memory(model, "H100", args)
    more = _memory(model, "H100", {**args, "ep_num_redundant_experts": 8})
    assert (more.weights_gib, more.kv_tokens) == (plain.weights_gib, plain.kv_tokens)


def test_enumerate_columns_count_the_redundant_experts() -> None:
    """The streamed columns read the base's `ep_num_redundant_experts` as `MemoryModel.of`
    does: every layout of Qwen3-30B-A3B on 8 GPUs with 8 redundant experts, the weights
    above the same layout's without them by (128 + 8) / ep - 128 / ep experts of
    3 · 2048 · 768 bf16 weights, split over MoE TP, on each of a stage's 48 / pp layers (and
    the caching allocator's rounding of its two fused tensors, under 2 MiB each)."""
    model = "Qwen/Qwen3-30B-A3B"
    mm = MemoryModel(model, "H100", context_length=8192)
    spec = ModelSpec.from_hf_config(catalogue_config(model))
    base = {"ep_num_redundant_experts": 8, "enable_eplb": True}
    seen = set()
    for (weights, tokens, _, fits), p, m in column_rows(mm, 8, spec, base):
        assert p.redundant_experts == 8
        assert weights == pytest.approx(m.weights_gib, abs=1e-9)
        assert abs(tokens - m.kv_tokens) <= 1 and fits == m.fits
        plain = mm.of(Parallel(**{**p.__dict__, "redundant_experts": 0}))
        extra = -(-136 // p.ep) - -(-128 // p.ep)
        layers = 48 // p.pp
        grown = extra * layers * 3 * 2048 * 768 * 2 / p.moe_tp / GIB
        assert 0 <= m.weights_gib - plain.weights_gib - grown < layers * 4 / 1024
        seen.add(p.ep)
    assert seen == {2, 4, 8}  # EPLB needs ep > 1 (EPLB-NEEDS-EP)
