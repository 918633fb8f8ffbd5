"""The closed-form intra-node condition and node-crossing count equal the rank plan.

`meshsat.solver.enumeration.node_locality` replaces building the rank map with arithmetic; this
checks it against `groups.plan(...).within_nodes(kind)` on every distinct set of widths of
the brute-force space, for every group kind and several node sizes (including ones
that do not divide the GPU count, and odd ones); `spanning_gpus` (GPUs in groups that span
nodes, what `plan` ranks by) against counting the rank plan's groups, there and on random
widths far from any layout.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.enumeration.node_locality import spanning_gpus, within_nodes
from meshsat.solver.groups import GROUP_KINDS, RankMap, Widths, plan
from meshsat.solver.placement import LaunchFacts, PlacementError
from tests.enum_cases import oracle

CONDITIONS = {kind: within_nodes(kind) for kind in GROUP_KINDS}


@pytest.mark.parametrize("n", [4, 6, 8, 12, 16, 18, 24, 32, 36, 48])
@pytest.mark.parametrize("gpus_per_node", [1, 2, 3, 6, 8, 16])
def test_condition_equals_rank_plan(n: int, gpus_per_node: int) -> None:
    seen: set[Widths] = set()
    crossings = 0
    for found in oracle(n):
        widths = dataclasses.replace(Widths.of(found.resolved), gpus_per_node=gpus_per_node)
        if widths in seen:
            continue
        seen.add(widths)
        crossings += _agree(widths, plan(widths), {**found.env, "gpus_per_node": gpus_per_node})
    assert seen
    if gpus_per_node < n:
        assert crossings, "some group must cross a node for the test to mean something"


@pytest.mark.parametrize("n", [8, 16, 24])
@pytest.mark.parametrize("nnodes", [2, 4])
def test_condition_equals_sglang_placement_under_nnodes(n: int, nnodes: int) -> None:
    """With --nnodes the nodes are SGLang's (tp·pp/nnodes ranks each), not gpus_per_node:
    the closed forms agree with the rank plan built from `meshsat.solver.placement`."""
    seen: set[Widths] = set()
    crossings = 0
    for found in oracle(n):
        widths = Widths.of(found.resolved)
        widths = dataclasses.replace(widths, launch=LaunchFacts(nnodes=nnodes))
        if widths in seen or (widths.tp * widths.pp) % nnodes:
            continue
        seen.add(widths)
        try:
            rank_map = plan(widths)
        except PlacementError:
            continue  # SGLang would not start every rank once: no nodes to compare
        crossings += _agree(widths, rank_map, {**found.env, "nnodes": nnodes})
    assert crossings, "some group must cross one of SGLang's nodes for the test to mean something"


def _agree(widths: Widths, rank_map: RankMap, env: dict[str, object]) -> int:
    """Assert the closed forms equal the rank plan for every kind; the kinds that cross."""
    crossings = 0
    for kind, condition in CONDITIONS.items():
        expected = rank_map.within_nodes(kind)
        crossings += not expected
        assert evaluate(condition, env) is expected, (kind, widths)
        assert spanning_gpus(widths, kind) == _spanning(rank_map, kind), (kind, widths)
    return crossings


def _spanning(rank_map: RankMap, kind: str) -> int:
    """The oracle: GPUs of the rank plan's `kind` groups that hold ranks of two nodes."""
    node = {r.rank: r.node for r in rank_map.ranks}
    return sum(len(g) for g in rank_map.groups[kind] if len({node[x] for x in g}) > 1)


@st.composite
def widths(draw: st.DrawFn) -> Widths:
    """Widths that tile a stage, with strides and node sizes no enumerated layout reaches."""

    def factor(n: int) -> tuple[int, int]:
        d = draw(st.sampled_from([k for k in range(1, n + 1) if n % k == 0]))
        return d, n // d

    tp = draw(st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 24, 32]))
    attn_dp, rest = factor(tp)
    attn_cp, attn_tp = factor(rest)
    ep, rest = factor(tp)
    moe_dp, moe_tp = factor(rest)
    return Widths(
        tp=tp,
        pp=draw(st.integers(1, 4)),
        replicas=draw(st.integers(1, 5)),
        attn_dp=attn_dp,
        attn_cp=attn_cp,
        attn_tp=attn_tp,
        ep=ep,
        moe_dp=moe_dp,
        moe_tp=moe_tp,
        dcp=draw(st.sampled_from([k for k in range(1, tp + 1) if tp % k == 0])),
        gpus_per_node=draw(st.integers(1, 40)),
    )


@settings(max_examples=150, deadline=None)
@given(widths())
def test_spanning_gpus_equals_rank_plan_on_random_widths(w: Widths) -> None:
    rank_map = plan(w)
    for kind in GROUP_KINDS:
        assert spanning_gpus(w, kind) == _spanning(rank_map, kind), kind


def test_spanning_gpus_at_a_million_gpus_needs_no_rank_map() -> None:
    """2^20 GPUs, attention TP 2 over nodes of 3 (every third pair straddles a boundary):
    the count follows from the period of 3 pairs, checked by hand, not by `plan`."""
    w = Widths(
        tp=2, pp=1, replicas=1 << 19, attn_dp=1, attn_cp=1, attn_tp=2, ep=1, moe_dp=2,
        moe_tp=1, dcp=1, gpus_per_node=3,
    )  # fmt: skip
    # Pairs start at 0, 2, 4 (mod 6); the one at 2 holds ranks 2 and 3 of nodes 0 and 1.
    pairs = (1 << 20) // 2
    straddling = pairs // 3 + (1 if pairs % 3 > 1 else 0)
    assert spanning_gpus(w, "attn_tp") == 2 * straddling
    assert spanning_gpus(w, "ep") == 0


def test_unknown_kind_is_input_error() -> None:
    from meshsat.solver.errors import InputError

    with pytest.raises(InputError, match="unknown group kind 'tensor'"):
        within_nodes("tensor")
