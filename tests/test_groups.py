"""The rank plan (docs/rules.md §5): SGLang's examples, then properties over every legal
layout up to 16 GPUs, found by brute force."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from meshsat.solver import InvalidLayoutError, validate
from meshsat.solver.groups import GROUP_KINDS, Widths, groups, plan


def test_sglang_attention_cp_example() -> None:
    m = groups({"tp_size": 8, "attn_cp_size": 2})
    assert m.groups["attn_cp"] == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert m.groups["attn_tp"] == ((0, 1, 2, 3), (4, 5, 6, 7))


def test_sglang_moe_example() -> None:
    m = groups({"tp_size": 8, "ep_size": 4, "moe_dp_size": 2, "attn_cp_size": 2})
    assert m.groups["ep"] == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert m.groups["moe_dp"] == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert not m.moe_dp_is_attn_cp


def test_moe_dp_uses_the_attention_cp_group_when_wider() -> None:
    m = groups({"tp_size": 8, "attn_cp_size": 4, "ep_size": 2})
    assert m.moe_dp_is_attn_cp
    assert m.groups["moe_dp"] == m.groups["attn_cp"] == ((0, 2, 4, 6), (1, 3, 5, 7))


def test_pipeline_stages_and_replicas() -> None:
    m = groups({"tp_size": 2, "pp_size": 2, "dp_size": 2, "gpus_per_node": 4})
    assert m.widths.world == 8
    assert m.groups["pp"] == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert m.groups["tp"] == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert [r.node for r in m.ranks] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [r.replica for r in m.ranks] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_dcp_groups_are_runs_inside_attention_tp() -> None:
    m = groups({"tp_size": 8, "attn_cp_size": 2, "dcp_size": 2})
    assert m.groups["dcp"] == ((0, 1), (2, 3), (4, 5), (6, 7))


def sglang_dcp_groups(tp_groups: tuple[tuple[int, ...], ...], dcp: int) -> list[tuple[int, ...]]:
    """SGLang's own construction (initialize_model_parallel, 0.5.18 to 0.5.23), transcribed."""
    out = []
    for tp_group in tp_groups:
        for start in range(0, len(tp_group), dcp):
            out.append(tuple(tp_group[start : start + dcp]))
    return out


@pytest.mark.parametrize(
    "config",
    [
        {"tp_size": 8, "dcp_size": 8, "dp_size": 2, "enable_dp_attention": True},
        {"tp_size": 8, "dcp_size": 4, "dp_size": 4, "enable_dp_attention": True},
        {"tp_size": 4, "dcp_size": 4, "pp_size": 2, "dp_size": 2, "enable_dp_attention": True},
    ],
)
def test_dcp_groups_that_cross_attention_tp_follow_sglang(config: dict[str, Any]) -> None:
    # Only meshsat's advice: where dcp_size divides tp_size but not the attention-TP width,
    # SGLang accepts the layout and forms the groups anyway (tests/test_dcp_groups.py
    # replays its own; where dcp_size does not divide tp_size it raises: DCP-TP-DIV).
    report = validate(config)
    assert report.valid
    assert [w.rule for w in report.warnings] == ["DCP-IN-ATTN-TP"]
    m = groups(config)
    assert sorted(m.groups["dcp"]) == sorted(sglang_dcp_groups(m.groups["tp"], config["dcp_size"]))
    for r in m.ranks:
        assert m.group_of("dcp", r.rank)[r.dcp] == r.rank


def test_groups_takes_the_release() -> None:
    # Decode CP with prefill CP: 0.5.19 forms the groups, 0.5.23 refuses the layout.
    config = {
        "tp_size": 8,
        "dcp_size": 2,
        "enable_prefill_cp": True,
        "attn_cp_size": 2,
        "cp_strategy": "zigzag",
    }
    m = groups(config, sglang_version="0.5.19")
    assert m.groups["dcp"] == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert m.groups["attn_cp"] == ((0, 4), (1, 5), (2, 6), (3, 7))
    with pytest.raises(InvalidLayoutError, match=r"\[DCP-NO-PREFILL-CP\]"):
        groups(config, sglang_version="0.5.23")


def test_invalid_layout_is_refused_with_the_validators_messages() -> None:
    with pytest.raises(InvalidLayoutError, match=r"\[CP-DPCP-DIV\]"):
        groups({"tp_size": 8, "dp_size": 6, "attn_cp_size": 2, "enable_dp_attention": True})


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def legal_layouts(max_gpus: int) -> Iterator[dict[str, Any]]:
    """Brute force: every combination of sizes up to `max_gpus`, kept if valid."""
    for tp in range(1, max_gpus + 1):
        for pp, dp in itertools.product(range(1, max_gpus // tp + 1), repeat=2):
            for cp, moe_dp, ep, dcp, dp_attn in itertools.product(
                _divisors(tp), _divisors(tp), _divisors(tp), _divisors(tp), (False, True)
            ):
                used = tp * pp * (1 if dp_attn else dp)
                if used > max_gpus or (dp_attn and dp == 1):
                    continue
                config = {
                    "tp_size": tp,
                    "pp_size": pp,
                    "dp_size": dp,
                    "attn_cp_size": cp,
                    "moe_dp_size": moe_dp,
                    "ep_size": ep,
                    "dcp_size": dcp,
                    "enable_dp_attention": dp_attn,
                    "gpus_per_node": 4,
                }
                if validate(config, explain=False).valid:
                    yield config


LEGAL = list(legal_layouts(16))


def test_brute_force_found_a_rich_space() -> None:
    assert len(LEGAL) > 500
    assert any(c["moe_dp_size"] > 1 for c in LEGAL) and any(c["dcp_size"] > 1 for c in LEGAL)


@pytest.mark.parametrize("chunk", range(8))
def test_groups_partition_ranks_with_the_right_widths(chunk: int) -> None:
    for config in LEGAL[chunk::8]:
        m = groups(config)
        w = m.widths
        sizes = {
            "tp": w.tp,
            "pp": w.pp,
            "attn_tp": w.attn_tp,
            "attn_cp": w.attn_cp,
            "attn_dp": w.attn_dp,
            "ep": w.ep,
            "moe_tp": w.moe_tp,
            "moe_dp": w.attn_cp if m.moe_dp_is_attn_cp else w.moe_dp,
            "dcp": w.dcp,
        }
        assert w.world == validate(config, explain=False).derived["gpus_used"]
        assert sorted(m.groups["dcp"]) == sorted(sglang_dcp_groups(m.groups["tp"], w.dcp))
        for kind in GROUP_KINDS:
            flat = sorted(r for g in m.groups[kind] for r in g)
            assert flat == list(range(w.world)), (config, kind)
            assert {len(g) for g in m.groups[kind]} == {sizes[kind]}, (config, kind)
        for r in m.ranks:
            local = (r.attn_dp * w.attn_cp + r.attn_cp) * w.attn_tp + r.attn_tp
            split_moe_dp = r.local // (w.ep * w.moe_tp)
            assert local == (split_moe_dp * w.ep + r.ep) * w.moe_tp + r.moe_tp == r.local
            # With a shared communicator the MoE-DP coordinate is the attention-CP one.
            assert r.moe_dp == (r.attn_cp if m.moe_dp_is_attn_cp else split_moe_dp)
            assert r.rank == (r.replica * w.pp + r.pp) * w.tp + local
            assert r.rank == r.node * w.gpus_per_node + r.local_gpu
            assert m.group_of("dcp", r.rank)[r.dcp] == r.rank
            assert r.rank in m.group_of("attn_cp", r.rank)


def test_plan_rejects_widths_that_do_not_tile() -> None:
    with pytest.raises(ValueError, match="does not divide tp"):
        plan(Widths.of({"tp_size": 8, "attn_cp_size": 3}))


def test_groups_cli_json_matches_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tests.cli_helpers import run_cli

    run = run_cli(capsys, "groups", "--set", "tp_size=8", "--set", "attn_cp_size=2", "--json")
    assert run.code == 0
    data = json.loads(run.out)
    assert data["groups"]["attn_cp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert data["widths"]["attn_tp"] == 4 and len(data["ranks"]) == 8
    one = json.loads(
        run_cli(
            capsys,
            "groups",
            "--set",
            "tp_size=8",
            "--set",
            "attn_cp_size=2",
            "--rank",
            "5",
            "--json",
        ).out
    )
    assert one["rank"]["attn_cp"] == 1 and one["groups"]["attn_cp"] == [1, 5]


def test_groups_cli_grid_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.cli_helpers import run_cli

    run = run_cli(
        capsys, "groups", "--set", "tp_size=4", "--set", "pp_size=2", "--set", "gpus_per_node=4"
    )
    assert run.code == 0
    assert "pipeline stage 0" in run.out and "pipeline stage 1" in run.out
    bad = run_cli(capsys, "groups", "--set", "tp_size=8", "--set", "attn_cp_size=3")
    assert bad.code == 1 and "CP-TP-DIV" in bad.out and "conflict:" in bad.out
    out_of_range = run_cli(capsys, "groups", "--set", "tp_size=2", "--rank", "2")
    assert out_of_range.code == 2 and "--rank must be in 0..1" in out_of_range.err
