"""GatedDeltaNet hybrids (Qwen3-Next, Qwen3.5): KV only on full-attention layers, and the
per-request state pool SGLang splits off first.

The expected numbers are worked by hand from SGLang's source (0.5.18 to 0.5.23):
`configs/mamba_utils.py` (`Mamba2StateShape.create`, `mamba_cache_per_req`),
`configs/qwen3_next.py` (`mamba2_cache_params`) and `mem_cache/kv_cache_configurator.py`
(`_handle_max_mamba_cache`, `resolve_max_num_reqs`); `sglang_split` below restates the
last in SGLang's own units (GB floats) as the reference the byte arithmetic must match.
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import MemoryModel, Parallel, load_facts
from meshsat.solver.memory.kv import kv_bytes_per_token
from meshsat.solver.memory.sizing import sizing_flags
from meshsat.solver.memory.state import (
    SLOTS_PER_REQUEST,
    StateFlags,
    layer_state_bytes,
    slots_per_request,
    split_rest,
    state_bytes_per_request,
    state_flags,
)
from meshsat.solver.validation.validate import validate

QWEN35 = "Qwen/Qwen3.5-397B-A17B"
NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
NEXT_ARCH = "Qwen3NextForCausalLM"


def test_layer_types_and_interval_give_the_same_linear_layers() -> None:
    # Qwen3.5 lists `layer_types`; Qwen3-Next only has `full_attention_interval` 4.
    assert load_facts(QWEN35).linear_layer_ids == tuple(i for i in range(60) if i % 4 != 3)
    assert load_facts(NEXT).linear_layer_ids == tuple(i for i in range(48) if i % 4 != 3)


def test_state_bytes_per_request_worked_by_hand() -> None:
    f = load_facts(QWEN35)  # 16 key heads, 64 value heads, dims 128, kernel 4, 45 GDN layers
    # tp 8: conv (64·128 + 2·16·128) / 8 = 1536 channels × 3 × bf16 = 9216 B;
    # SSM 64 / 8 = 8 heads × 128 × 128 × fp32 = 524288 B.
    assert layer_state_bytes(f, 8) == 9216 + 524288
    assert state_bytes_per_request(f, 8) == 45 * 533504 == 24_007_680
    # Qwen3-Next at attention TP 32: 16 key groups do not divide 32, so they are raised to
    # 32 (`extra_groups_for_head_shards`): conv (32·128 + 2·32·128) / 32 = 384 channels.
    g = load_facts(NEXT)
    assert layer_state_bytes(g, 32) == 384 * 3 * 2 + 1 * 128 * 128 * 4
    # PP 5 over 60 layers (12 each): every stage has 9 GDN layers of the 45.
    assert state_bytes_per_request(f, 8, pp=5) == 9 * 533504


def sglang_split(rest_gb: float, per_req: int, ratio: float) -> tuple[int, float]:
    """`_handle_max_mamba_cache` without speculative decoding: GB in, GB out."""
    budget_bytes = rest_gb * ratio / (1 + ratio) * (1 << 30)
    slots = int((budget_bytes - per_req) // per_req)
    return slots, rest_gb - (slots + 1) * per_req / (1 << 30)


@given(
    rest_gb=st.floats(min_value=0.5, max_value=200.0),
    per_req=st.integers(min_value=1 << 16, max_value=1 << 28),
    ratio=st.sampled_from([0.1, 0.5, 0.9, 2.0]),
)
def test_split_matches_sglangs_arithmetic(rest_gb: float, per_req: int, ratio: float) -> None:
    slots, kv_bytes = split_rest(rest_gb * (1 << 30), per_req, StateFlags(ratio=ratio))
    want_slots, want_kv_gb = sglang_split(rest_gb, per_req, ratio)
    assert abs(slots - want_slots) <= 1  # GB against bytes: one float rounding apart
    if slots == want_slots:
        assert math.isclose(kv_bytes, want_kv_gb * (1 << 30), rel_tol=1e-9, abs_tol=64)
    # The state pool takes its share of the rest, never more (`ratio / (1 + ratio)`).
    assert (slots + 1) * per_req <= rest_gb * (1 << 30) * ratio / (1 + ratio) + per_req


def test_kv_is_kept_for_full_attention_layers_only() -> None:
    f = load_facts(QWEN35)
    # 15 full-attention layers × one KV head a rank (2 heads, tp 8) × (256 + 256) × bf16.
    assert kv_bytes_per_token(f, Parallel(tp=8, attn_tp=8), 0) == 15 * 1024


def test_qwen35_on_eight_h200_pool_worked_by_hand() -> None:
    mm = MemoryModel(QWEN35, "H200", context_length=32768)
    m = mm.of(Parallel(tp=8, attn_tp=8, moe_tp=8))
    # Qwen3.5 is multimodal: 0.5.23 keeps 100 MiB a rank back from the pool first.
    assert m.multimodal_reserve_gib == 100 / 1024
    rest = (m.pre_load_gib * m.mem_fraction_static - m.weights_gib - 100 / 1024) * (1 << 30)
    per = 24_007_680
    slots = int((rest * 0.9 / 1.9 - per) // per)
    assert m.state_bytes_per_request == per
    assert m.state_slots == slots
    assert m.kv_tokens == int((rest - (slots + 1) * per) // 15360)
    assert m.max_requests == min(m.kv_tokens // 32768, slots // SLOTS_PER_REQUEST)
    # The state pool takes 0.9/1.9 of the rest, to the slot below; the KV cell is a quarter
    # of the old one.
    budget = rest * 0.9 / 1.9
    assert budget - per < m.state_pool_gib * (1 << 30) <= budget


def test_a_larger_ratio_trades_kv_tokens_for_state_slots() -> None:
    p = Parallel(tp=8, attn_tp=8, moe_tp=8)
    low = MemoryModel(QWEN35, "H200", mamba_full_memory_ratio=0.5).of(p)
    high = MemoryModel(QWEN35, "H200", mamba_full_memory_ratio=2.0).of(p)
    assert high.state_slots > low.state_slots
    assert high.kv_tokens < low.kv_tokens


def test_a_model_without_gdn_layers_has_no_state_pool() -> None:
    m = MemoryModel("Qwen/Qwen3-235B-A22B", "H200").of(Parallel(tp=8, attn_tp=8, moe_tp=8))
    assert (m.state_bytes_per_request, m.state_slots, m.state_pool_gib) == (0, 0, 0.0)


def test_the_memory_line_names_the_state_pool_only_for_hybrids() -> None:
    from meshsat.solver.cli.memory_options import memory_line

    p = Parallel(tp=8, attn_tp=8, moe_tp=8)
    hybrid = MemoryModel(QWEN35, "H200").of(p)
    line = memory_line(hybrid)
    assert f"state pool {hybrid.state_pool_gib:.2f} GiB = {hybrid.state_slots} request" in line
    assert "22.9 MiB" in line  # 24,007,680 B
    assert "state pool" not in memory_line(MemoryModel("Qwen/Qwen3-235B-A22B", "H200").of(p))


def test_pp_turns_the_overlap_scheduler_off_and_a_request_takes_four_slots() -> None:
    """With pp > 1 SGLang resolves the overlap scheduler off (R-PP-OVERLAP) after the model
    overrides picked the `extra_buffer` strategy, so `_calculate_mamba_ratio` counts 3 + 1
    slots a request, not 3 + 2; the radix cache off, 1. The speculative split divides the
    draft tokens by the same number. Numbers: SGLang 0.5.23's own `_handle_max_mamba_cache`
    (run on a stand-in configurator, rest 37.25 GB, 24,007,680 B a slot, 4 draft tokens, 48
    running requests): 435 slots and 23.119179 GB of KV with the scheduler on, 392 and
    24.080611 GB with it off."""
    assert slots_per_request(overlap=True) == SLOTS_PER_REQUEST == 5
    assert slots_per_request(overlap=False) == 4
    assert slots_per_request(overlap=True, radix_cache=False) == 1
    rest, per = 37.25 * (1 << 30), 24_007_680
    for spr, want_slots, want_gb in ((5, 435, 23.119179), (4, 392, 24.080611)):
        flags = StateFlags(draft_tokens=4, max_running_requests=48, slots_per_request=spr)
        slots, kv = split_rest(rest, per, flags)
        assert slots == want_slots and round(kv / (1 << 30), 6) == want_gb
    # The flags come from the resolved layout: pp 2 resolves the scheduler off.
    report = validate({"tp_size": 4, "pp_size": 2}, ModelSpec(architecture=NEXT_ARCH))
    assert report.resolved["disable_overlap_schedule"] is True
    assert state_flags(sizing_flags(report.resolved), "0.5.23").slots_per_request == 4
    assert state_flags(sizing_flags({}), "0.5.23").slots_per_request == 5


def test_pp_caps_a_hybrids_requests_at_a_quarter_of_its_slots() -> None:
    """The request cap of one layout under its resolved flags: `slots // 4` with the overlap
    scheduler off (PP), `slots // 5` with it on. Qwen3-Next on 8 H200 (tp 4, pp 2, 4,096
    tokens of context): 5,601 state slots either way, so 1,400 requests against 1,120 (the
    KV pool would hold 2,389)."""
    mm = MemoryModel(NEXT, "H200", context_length=4096)
    p = Parallel(tp=4, attn_tp=4, moe_tp=4, pp=2)
    on = mm.with_flags({}).of(p)
    off = mm.with_flags({"disable_overlap_schedule": True}).of(p)
    assert on.state_slots == off.state_slots == 5601
    assert on.kv_tokens // 4096 > off.max_requests
    assert (on.max_requests, off.max_requests) == (5601 // 5, 5601 // 4) == (1120, 1400)
