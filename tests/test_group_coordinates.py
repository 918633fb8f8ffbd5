"""Every rank coordinate is the rank's index in its group, for every group kind (issue 13).

The property is SGLang's own definition of a group rank (`GroupCoordinator.rank_in_group`
is the position of the global rank in the group's rank list), so it is checked on
generated widths rather than against a table. It caught the MoE-DP coordinate: where the
attention-CP width exceeds `moe_dp_size`, the MoE-DP group is the attention-CP group and
the coordinate must follow it.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from meshsat.solver.groups import GROUP_KINDS, Widths, plan

#: The RankInfo field that holds each group kind's coordinate.
_COORDINATE = {kind: ("local" if kind == "tp" else kind) for kind in GROUP_KINDS}

_small = st.sampled_from([1, 2, 3, 4])


@st.composite
def widths(draw: st.DrawFn) -> Widths:
    attn_dp, attn_cp, dcp = draw(_small), draw(_small), draw(_small)
    attn_tp = dcp * draw(st.sampled_from([1, 2]))
    tp = attn_dp * attn_cp * attn_tp
    divisors = [d for d in range(1, tp + 1) if tp % d == 0]
    ep = draw(st.sampled_from(divisors))
    moe_dp = draw(st.sampled_from([d for d in divisors if (tp // ep) % d == 0]))
    dp_attention = attn_dp > 1
    replicas = 1 if dp_attention else draw(st.sampled_from([1, 2]))
    return Widths.of(
        {
            "tp_size": tp,
            "pp_size": draw(st.sampled_from([1, 2])),
            "enable_dp_attention": dp_attention,
            "dp_size": attn_dp if dp_attention else replicas,
            "attn_cp_size": attn_cp,
            "ep_size": ep,
            "moe_dp_size": moe_dp,
            "dcp_size": dcp,
            "gpus_per_node": draw(st.sampled_from([1, 4, 8])),
        }
    )


@given(widths())
def test_every_coordinate_is_the_index_in_its_group(w: Widths) -> None:
    m = plan(w)
    for kind in GROUP_KINDS:
        members = {r for g in m.groups[kind] for r in g}
        assert members == set(range(w.world)), kind  # every rank in exactly one group
        assert sum(len(g) for g in m.groups[kind]) == w.world, kind
        for info in m.ranks:
            group = m.group_of(kind, info.rank)
            assert getattr(info, _COORDINATE[kind]) == group.index(info.rank), (kind, info)


def test_moe_dp_follows_the_attention_cp_group() -> None:
    """The issue's example: tp 2, attn_cp 2, moe_dp 1: rank 1 is second in its group."""
    m = plan(Widths.of({"tp_size": 2, "attn_cp_size": 2}))
    assert m.moe_dp_is_attn_cp
    assert m.groups["moe_dp"] == ((0, 1),)
    assert [r.moe_dp for r in m.ranks] == [0, 1]
