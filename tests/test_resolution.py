"""SGLang's silent changes: the worked examples of docs/rules.md §3 and §3b."""

from __future__ import annotations

from typing import Any

import pytest

from meshsat.solver import validate
from meshsat.solver.lang.expr import fields_of
from meshsat.solver.packs import get_pack


def resolved(config: dict[str, Any], model: dict[str, Any] | None = None) -> dict[str, Any]:
    return validate(config, model, explain=False).resolved


def test_mla_prefill_cp_widens_attn_cp_to_the_attention_tp_group() -> None:
    # docs/rules.md §3b: tp 8, attn_cp 2 given => attn_cp 8, DeepEP, ep = tp, dense TP 1.
    r = resolved(
        {"tp_size": 8, "attn_cp_size": 2, "enable_prefill_cp": True, "cp_strategy": "zigzag"},
        {"architecture": "DeepseekV3ForCausalLM"},
    )
    assert (r["attn_cp_size"], r["moe_a2a_backend"], r["ep_size"], r["moe_dense_tp_size"]) == (
        8,
        "deepep",
        8,
        1,
    )


def test_mla_with_dp_attention_divides_by_attn_dp() -> None:
    r = resolved(
        {
            "tp_size": 8,
            "dp_size": 2,
            "enable_dp_attention": True,
            "enable_prefill_cp": True,
            "cp_strategy": "interleave",
        },
        {"architecture": "DeepseekV2ForCausalLM"},
    )
    assert r["attn_cp_size"] == 4


def test_dsa_interleave_keeps_the_moe_backend() -> None:
    r = resolved(
        {"tp_size": 8, "enable_prefill_cp": True, "cp_strategy": "interleave"},
        {"architecture": "DeepseekV32ForCausalLM", "is_deepseek_dsa": True},
    )
    assert (r["attn_cp_size"], r["moe_a2a_backend"], r["ep_size"]) == (8, "none", 1)


@pytest.mark.parametrize(
    ("release", "cp_v2"), [("0.5.18", True), ("0.5.19", True), ("0.5.23", None)]
)
def test_cp_v2_is_switched_on_only_by_the_releases_that_read_it(
    release: str, cp_v2: bool | None
) -> None:
    """0.5.18 and 0.5.19 set SGLANG_ENABLE_CP_V2 for a CP-v2 default class (a DSA model
    only with prefill CP + interleave; `envs.SGLANG_ENABLE_CP_V2.set(True)` in their
    context-parallel handler). 0.5.23 lists it as "Removed without replacement" (environ.py,
    `_DeprecatedEnv`: a warning, nothing reads it); meshsat noted that it sets it there, and
    a 0.5.23 rule or step that still read it would judge by a switch SGLang ignores."""
    dsa = {"architecture": "DeepseekV32ForCausalLM", "is_deepseek_dsa": True}
    interleave = {"tp_size": 8, "enable_prefill_cp": True, "cp_strategy": "interleave"}
    for config, model in (
        (interleave, dsa),
        ({"tp_size": 8, "ep_size": 8}, {"architecture": "DeepseekV3ForCausalLM"}),
        ({"tp_size": 8, "ep_size": 8}, {"architecture": "Qwen3MoeForCausalLM"}),
    ):
        report = validate(config, model, explain=False, sglang_version=release)
        assert report.resolved["env_enable_cp_v2"] is cp_v2, (config, model)
        assert [n.field == "env_enable_cp_v2" for n in report.notes].count(True) == int(
            cp_v2 is True
        )
    pack = get_pack(release)
    readers = [r.id for r in pack.rules if "env_enable_cp_v2" in r.fields] + [
        s.id
        for s in pack.resolutions
        for a in s.steps
        if "env_enable_cp_v2" in fields_of(a.when) or "env_enable_cp_v2" in dict(a.sets)
    ]
    assert bool(readers) is (cp_v2 is True), readers


def test_dwdp_forces_dp_attention_ep_and_no_a2a() -> None:
    r = resolved({"tp_size": 4, "dwdp_size": 4, "moe_a2a_backend": "deepep", "moe_dp_size": 2})
    assert r["dp_size"] == 4 and r["ep_size"] == 4 and r["moe_dp_size"] == 1
    assert r["enable_dp_attention"] and r["enable_dp_lm_head"] and r["disable_cuda_graph"]
    assert (r["moe_a2a_backend"], r["moe_dense_tp_size"]) == ("none", 1)


@pytest.mark.parametrize("backend", ["deepep", "mooncake", "nixl", "flashinfer", "ascend_fuseep"])
def test_a2a_backend_forces_ep_equal_tp(backend: str) -> None:
    assert resolved({"tp_size": 8, "ep_size": 2, "moe_a2a_backend": backend})["ep_size"] == 8


def test_dp_one_turns_dp_attention_off() -> None:
    r = resolved({"enable_dp_attention": True, "enable_dp_lm_head": True})
    assert not r["enable_dp_attention"] and not r["enable_dp_lm_head"]


def test_dp_attention_scales_scheduler_and_chunked_prefill() -> None:
    r = resolved(
        {"tp_size": 8, "dp_size": 4, "enable_dp_attention": True, "chunked_prefill_size": 8192}
    )
    assert r["chunked_prefill_size"] == 2048
    assert r["schedule_conservativeness"] == pytest.approx(0.3)


@pytest.mark.parametrize(
    "mode,strategy", [("in-seq-split", "zigzag"), ("round-robin-split", "interleave")]
)
def test_legacy_cp_flag_maps_to_strategy(mode: str, strategy: str) -> None:
    r = resolved(
        {
            "tp_size": 2,
            "attn_cp_size": 2,
            "enable_prefill_context_parallel": True,
            "prefill_cp_mode": mode,
        }
    )
    assert r["enable_prefill_cp"] and r["cp_strategy"] == strategy
    assert r["enable_prefill_context_parallel"] and not r["enable_dsa_prefill_context_parallel"]


def test_legacy_cp_mirrors_dsa_alias_for_dsa_backend() -> None:
    r = resolved({"enable_prefill_cp": True, "cp_strategy": "zigzag", "attention_backend": "dsa"})
    assert r["enable_dsa_prefill_context_parallel"]
    assert not r["enable_prefill_context_parallel"]
    assert r["dsa_prefill_cp_mode"] == r["prefill_cp_mode"] == "in-seq-split"


def test_explicit_strategy_wins_over_legacy_mode() -> None:
    r = resolved(
        {
            "enable_prefill_context_parallel": True,
            "prefill_cp_mode": "in-seq-split",
            "cp_strategy": "interleave",
        }
    )
    assert r["cp_strategy"] == "interleave"
    assert r["prefill_cp_mode"] == "round-robin-split"  # mirrored back from the strategy


@pytest.mark.parametrize("a2a,expected", [("none", "dynamic"), ("deepep", "static")])
def test_eplb_sets_recorder_and_dispatch(a2a: str, expected: str) -> None:
    r = resolved({"tp_size": 4, "ep_size": 4, "enable_eplb": True, "moe_a2a_backend": a2a})
    assert r["expert_distribution_recorder_mode"] == "stat"
    assert r["ep_dispatch_algorithm"] == expected
    assert r["expert_distribution_recorder_buffer_size"] == 1000


def test_recorder_buffer_follows_rebalance_period() -> None:
    r = resolved(
        {"expert_balancedness_report_mode": "server_log", "eplb_rebalance_num_iterations": 200}
    )
    assert r["expert_distribution_recorder_mode"] == "stat"
    assert r["expert_distribution_recorder_buffer_size"] == 200


def test_elastic_resolutions() -> None:
    r = resolved(
        {
            "tp_size": 4,
            "elastic_ep_backend": "mooncake",
            "elastic_ep_rejoin": True,
            "enable_eplb": True,
            "ep_size": 4,
            "max_ep_size": 8,
        }
    )
    assert r["ep_join_mode"] == "recover"
    assert r["eplb_algorithm"] == "elasticity_aware"
    assert r["elastic_ep_initial_size"] == 4


def test_notes_name_the_resolution_and_hide_alias_mirroring() -> None:
    report = validate(
        {
            "tp_size": 8,
            "moe_a2a_backend": "deepep",
            "enable_prefill_cp": True,
            "attn_cp_size": 2,
            "cp_strategy": "zigzag",
        },
        explain=False,
    )
    fields = [(n.resolution, n.field, n.old, n.new) for n in report.notes]
    assert fields == [("R-A2A-EP", "ep_size", 1, 8)]
    assert report.notes[0].text.startswith("SGLang will set ep_size = 8 (given 1) because")
