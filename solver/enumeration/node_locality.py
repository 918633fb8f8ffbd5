"""Whether every group of one kind stays inside a node, as a rule-language condition.

`meshsat.solver.groups.plan` builds the whole rank map, which costs a few microseconds per
rank: too slow to ask of a million candidate layouts. The same answer has a closed
form. Under SGLang's rank layout every group kind is an arithmetic progression
`{o, o + stride, ..., o + (size - 1)·stride}`, and the groups of one kind tile aligned
blocks of `size·stride` consecutive ranks. When size ≥ 2 the groups of a block
overlap in span, so they all sit in one node exactly when the whole block does; and
aligned blocks covering ranks `0 .. W-1` never straddle a node boundary exactly when
`W ≤ gpus_per_node` or the block length divides `gpus_per_node` (nnodes 1, the planning
view), or divides `tp·pp/nnodes`, the ranks SGLang's launcher gives each of --nnodes nodes.

Being a tree, the condition reaches every back-end like a rule; tests check it equals
`plan(...).within_nodes(kind)` on every layout of the brute-force space.
"""

from __future__ import annotations

from typing import TypeVar

from meshsat.solver.errors import InputError
from meshsat.solver.groups import GROUP_KINDS, Widths
from meshsat.solver.lang.derived import attn_dp, attn_tp, gpus_used, moe_tp
from meshsat.solver.lang.expr import Expr, divides, ite
from meshsat.solver.lang.fields import F

#: A width: a rule-language expression, or its value for one layout.
N = TypeVar("N", Expr, int)


def _progression_table(
    tp: N, pp: N, attn_tp: N, attn_cp: N, attn_dp: N, moe_tp: N, ep: N, moe_dp: N, dcp: N
) -> dict[str, tuple[N, N | int]]:
    """(size, stride) of each group kind, from docs/rules.md §5: one table, read both as rule
    trees (the condition below) and as numbers (`spanning_gpus`)."""
    return {
        "tp": (tp, 1),
        "pp": (pp, tp),
        "attn_tp": (attn_tp, 1),
        "attn_cp": (attn_cp, attn_tp),
        "attn_dp": (attn_dp, attn_tp * attn_cp),
        "moe_tp": (moe_tp, 1),
        "ep": (ep, moe_tp),
        "moe_dp": (moe_dp, ep * moe_tp),
        "dcp": (dcp, 1),
    }


def _progressions() -> dict[str, tuple[Expr, Expr | int]]:
    return _progression_table(
        F.tp_size, F.pp_size, attn_tp, F.attn_cp_size, attn_dp, moe_tp, F.ep_size,
        F.moe_dp_size, F.dcp_size,
    )  # fmt: skip


def _tiles_nodes(size: Expr, stride: Expr | int) -> Expr:
    # With --nnodes N SGLang's node n runs the engine ranks [n·P, (n+1)·P), P = tp·pp/N
    # (`meshsat.solver.placement`, wherever it starts every rank once): a block of
    # size·stride ranks stays inside one exactly when it divides P, i.e. block·N | tp·pp.
    sglang = divides(size * stride * F.nnodes, F.tp_size * F.pp_size)
    planning = (gpus_used <= F.gpus_per_node) | divides(size * stride, F.gpus_per_node)
    return (size == 1) | ite(F.nnodes > 1, sglang, planning)


def within_nodes(kind: str) -> Expr:
    """Condition: every `kind` group lies inside one node: one of SGLang's --nnodes nodes,
    or with nnodes 1 one of `gpus_per_node` GPUs (the planning view)."""
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


def _floor_sum(n: int, m: int, a: int, b: int) -> int:
    """sum(floor((a·i + b) / m) for i in range(n)) for a, b >= 0, in O(log m) steps (the
    Euclid-like reduction: take the whole quotients out, then swap the roles of a and m)."""
    total = 0
    while n > 0:
        if a >= m:
            total += (n - 1) * n // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        y_max = a * n + b
        if y_max < m:
            break
        n, b, m, a = y_max // m, y_max % m, a, m
    return total


def _floor_prefix(x: int, m: int) -> int:
    """sum(floor(y / m) for y in range(x)) in closed form."""
    q, r = divmod(x, m)
    return m * q * (q - 1) // 2 + r * q


def _node_index_sum(blocks: int, block: int, stride: int, shift: int, per_node: int) -> int:
    """sum over j < blocks, r < stride of floor((j·block + r + shift) / per_node), summed
    over whichever of j and r has fewer values (at most √(world) terms of O(log) each)."""
    if stride <= blocks:
        return sum(_floor_sum(blocks, per_node, block, r + shift) for r in range(stride))
    return sum(
        _floor_prefix(j * block + shift + stride, per_node)
        - _floor_prefix(j * block + shift, per_node)
        for j in range(blocks)
    )


def spanning_gpus(widths: Widths, kind: str) -> int:
    """GPUs in `kind` groups that span more than one node, from the widths alone.

    `plan(widths)` answers the same by building every rank (seconds and hundreds of MB at a
    million GPUs); this costs at most √(world) steps. The groups of a kind are the
    progressions `{o, o + stride, ..., o + D}` with `D = (size - 1)·stride`, their first
    ranks `o = j·size·stride + r` (`r < stride`, every aligned block of every stage and
    replica). With `D ≥ gpus_per_node` every group spans; otherwise a group spans exactly
    when a node boundary falls inside it, `floor((o + D)/P) - floor(o/P) = 1`, and the
    count is the difference of two sums of floors over all `o`. dcp groups are progressions
    only when dcp_size divides tp_size, which every valid layout has (DCP-IN-ATTN-TP)."""
    size, stride = _numeric_progression(widths, kind)
    world = widths.world
    # --nnodes N: every replica's tp·pp ranks fill the N nodes in blocks of tp·pp/N, so
    # global ranks cut every tp·pp/N fall on the same boundaries (see `_tiles_nodes`).
    per_node = widths.tp * widths.pp // widths.nnodes if widths.nnodes > 1 else widths.gpus_per_node
    span = (size - 1) * stride
    if size == 1:
        return 0
    if span >= per_node:
        return world
    block = size * stride
    blocks = world // block
    crossing = _node_index_sum(blocks, block, stride, span, per_node) - _node_index_sum(
        blocks, block, stride, 0, per_node
    )
    return crossing * size


def _numeric_progression(w: Widths, kind: str) -> tuple[int, int]:
    """(size, stride) of a kind's groups for these widths."""
    if kind == "moe_dp" and w.attn_cp > w.moe_dp:
        kind = "attn_cp"  # SGLang's MoE-DP communicator is then the attention-CP group
    table = _progression_table(
        w.tp, w.pp, w.attn_tp, w.attn_cp, w.attn_dp, w.moe_tp, w.ep, w.moe_dp, w.dcp
    )
    if kind not in table:
        raise InputError(f"unknown group kind {kind!r} (one of {', '.join(GROUP_KINDS)})")
    if kind == "dcp" and w.tp % w.dcp:
        raise ValueError(f"dcp_size {w.dcp} does not divide tp_size {w.tp}: no progression")
    return table[kind]
