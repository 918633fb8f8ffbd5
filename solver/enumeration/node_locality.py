"""Whether every group of one kind stays inside a node, as a rule-language condition.

`meshsat.solver.groups.plan` builds the whole rank map, which costs a few microseconds per
rank: too slow to ask of a million candidate layouts. The same answer has a closed
form. Under SGLang's rank layout every group kind is an arithmetic progression
`{o, o + stride, ..., o + (size - 1)·stride}`, and the groups of one kind tile aligned
blocks of `size·stride` consecutive ranks. When size ≥ 2 the groups of a block
overlap in span, so they all sit in one node exactly when the whole block does; and
aligned blocks covering ranks `0 .. W-1` never straddle a node boundary exactly when
`W ≤ gpus_per_node` or the block length divides `gpus_per_node`.

Being a tree, the condition reaches every back-end like a rule; tests check it equals
`plan(...).within_nodes(kind)` on every layout of the brute-force space.
"""

from __future__ import annotations

from meshsat.solver.errors import InputError
from meshsat.solver.groups import GROUP_KINDS
from meshsat.solver.lang.derived import attn_dp, attn_tp, gpus_used, moe_tp
from meshsat.solver.lang.expr import Expr, divides, ite
from meshsat.solver.lang.fields import F


def _progressions() -> dict[str, tuple[Expr, Expr | int]]:
    """(size, stride) of each group kind, from docs/rules.md §5."""
    return {
        "tp": (F.tp_size, 1),
        "pp": (F.pp_size, F.tp_size),
        "attn_tp": (attn_tp, 1),
        "attn_cp": (F.attn_cp_size, attn_tp),
        "attn_dp": (attn_dp, attn_tp * F.attn_cp_size),
        "moe_tp": (moe_tp, 1),
        "ep": (F.ep_size, moe_tp),
        "moe_dp": (F.moe_dp_size, F.ep_size * moe_tp),
        "dcp": (F.dcp_size, 1),
    }


def _tiles_nodes(size: Expr, stride: Expr | int) -> Expr:
    return (size == 1) | (gpus_used <= F.gpus_per_node) | divides(size * stride, F.gpus_per_node)


def within_nodes(kind: str) -> Expr:
    """Condition: every `kind` group lies inside one node of `gpus_per_node` GPUs."""
    prog = _progressions()
    if kind not in prog:
        raise InputError(
            f"unknown group kind {kind!r} for --intra-node (one of {', '.join(GROUP_KINDS)})"
        )
    cond = _tiles_nodes(*prog[kind])
    if kind == "moe_dp":
        # When attn_cp > moe_dp, SGLang's MoE-DP communicator is the attention-CP group.
        return ite(F.attn_cp_size > F.moe_dp_size, within_nodes("attn_cp"), cond)
    return cond
