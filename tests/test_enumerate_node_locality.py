"""The closed-form intra-node condition equals the rank plan, layout by layout.

`meshsat.solver.enumeration.node_locality` replaces building the rank map with arithmetic; this
checks it against `groups.plan(...).within_nodes(kind)` on every distinct set of widths of
the brute-force space, for every group kind and several node sizes (including ones
that do not divide the GPU count, and odd ones).
"""

from __future__ import annotations

import dataclasses

import pytest

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.enumeration.node_locality import within_nodes
from meshsat.solver.groups import GROUP_KINDS, Widths, plan
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
        rank_map = plan(widths)
        env = {**found.env, "gpus_per_node": gpus_per_node}
        for kind, condition in CONDITIONS.items():
            expected = rank_map.within_nodes(kind)
            crossings += not expected
            assert evaluate(condition, env) is expected, (kind, widths)
    assert seen
    if gpus_per_node < n:
        assert crossings, "some group must cross a node for the test to mean something"


def test_unknown_kind_is_input_error() -> None:
    from meshsat.solver.errors import InputError

    with pytest.raises(InputError, match="unknown group kind 'tensor'"):
        within_nodes("tensor")
