"""How `meshsat groups` shows a planned layout: the grids per pipeline stage, the summary
line, and the JSON document; shared by one server's answer and a deployment's."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from meshsat.solver.cli.output import out
from meshsat.solver.groups import (
    GROUP_KINDS,
    PlannedLayout,
    RankInfo,
    RankMap,
    Widths,
    placement_kind,
)
from meshsat.solver.validation.report import Violation

#: What each grid cell shows, as (label, group kind).
CELL = (("A", "attn_tp"), ("C", "attn_cp"), ("E", "ep"))


def _index(m: RankMap) -> dict[str, dict[int, int]]:
    """Group number of every rank, per kind (groups numbered in rank order)."""
    return {kind: {r: i for i, g in enumerate(m.groups[kind]) for r in g} for kind in GROUP_KINDS}


#: Above this many ranks the map is summarised (widths only): listing a million ranks
#: takes minutes and gigabytes and is read by nobody.
MAX_LISTED_RANKS = 4096


def _where(w: Widths) -> str:
    """The header's node clause: which placement the grids show."""
    if placement_kind(w) == "planning":
        return (
            f"{w.world} GPU(s) on {w.nodes} node(s) of {w.gpus_per_node} "
            "(planning view: nnodes 1, nodes cut every gpus_per_node ranks)"
        )
    f = w.launch
    ids = (
        ""
        if (f.base_gpu_id, f.gpu_id_step) == (0, 1)
        else f", GPU ids from --base-gpu-id {f.base_gpu_id} --gpu-id-step {f.gpu_id_step}"
    )
    return (
        f"{w.world} GPU(s) on --nnodes {w.nnodes}, {w.world // w.nnodes} rank(s) per node{ids} "
        "as SGLang's launcher places them"
    )


def _summary_line(w: Widths) -> str:
    return (
        f"{_where(w)}: "
        f"{w.replicas} replica(s) × pp {w.pp} × tp {w.tp}; attention dp {w.attn_dp} · cp "
        f"{w.attn_cp} · tp {w.attn_tp}; MoE dp {w.moe_dp} · ep {w.ep} · tp {w.moe_tp}"
        + (f"; dcp {w.dcp}" if w.dcp > 1 else "")
    )


def _widths_dict(w: Widths) -> dict[str, int]:
    names = ("tp", "pp", "replicas", "attn_dp", "attn_cp", "attn_tp", "ep", "moe_dp", "moe_tp")
    return {n: getattr(w, n) for n in (*names, "dcp")}


def groups_document(planned: PlannedLayout) -> dict[str, Any]:
    """`meshsat groups --format json`'s document (and the web API's `/api/groups`): the rank
    map, or only the widths above `MAX_LISTED_RANKS` ranks."""
    w = planned.widths
    if w.world > MAX_LISTED_RANKS:
        return {
            "world": w.world,
            "gpus_per_node": w.gpus_per_node,
            "nnodes": w.nnodes,
            "placement": placement_kind(w),
            "summary": _summary_line(w),
            "widths": _widths_dict(w),
            "ranks_listed": False,
        }
    # The header line travels too, so the web page shows the CLI's words, not a copy.
    return {**planned.rank_map.to_dict(), "summary": _summary_line(w)}


def _gpu_columns(w: Widths, ranks: list[RankInfo]) -> tuple[dict[int, int], list[str]]:
    """Column of each local GPU id in one stage's grid, and the column labels. Planning
    view: GPUs 0..gpus_per_node-1 (unlabelled when the stage is smaller than a node);
    SGLang's placement: one column per GPU id the stage's ranks get (base_gpu_id and
    gpu_id_step included)."""
    if placement_kind(w) == "planning":
        cols = min(w.gpus_per_node, len(ranks))
        labels = [f"gpu {c}" if cols == w.gpus_per_node else "" for c in range(cols)]
        return {r.local_gpu: r.local_gpu % cols for r in ranks}, labels
    ids = sorted({r.local_gpu for r in ranks})
    return {g: i for i, g in enumerate(ids)}, [f"gpu {g}" for g in ids]


def print_grids(m: RankMap) -> None:
    w = m.widths
    idx = _index(m)
    out.print(_summary_line(w))
    out.print(
        "[dim]cell: global rank, then A = attention-TP group, C = attention-CP group, "
        "E = expert-parallel group (numbered in rank order)[/dim]"
    )
    for replica in range(w.replicas):
        for stage in range(w.pp):
            ranks = [r for r in m.ranks if r.replica == replica and r.pp == stage]
            title = f"pipeline stage {stage}" + (f", replica {replica}" if w.replicas > 1 else "")
            table = Table(title=title, title_justify="left", show_lines=True)
            table.add_column("node", no_wrap=True)
            column, labels = _gpu_columns(w, ranks)
            for label in labels:
                table.add_column(label, no_wrap=True)
            rows: dict[int, list[str]] = {}
            for r in ranks:
                cell = f"[bold]{r.rank}[/bold]\n" + " ".join(
                    f"{label}{idx[kind][r.rank]}" for label, kind in CELL
                )
                rows.setdefault(r.node, [""] * len(labels))[column[r.local_gpu]] = cell
            for node, cells in rows.items():
                table.add_row(str(node), *cells)
            out.print(table)


def print_planned(planned: PlannedLayout) -> None:
    """The grids of a planned layout, or its widths alone above `MAX_LISTED_RANKS` ranks."""
    w = planned.widths
    if w.world > MAX_LISTED_RANKS:
        out.print(_summary_line(w))
        out.print(f"[dim]{w.world} ranks: above {MAX_LISTED_RANKS}, groups are not listed[/dim]")
    else:
        print_grids(planned.rank_map)


def with_violations(data: dict[str, Any], wrong: list[Violation]) -> dict[str, Any]:
    """A groups document with what the launch breaks beyond its layout (`validate`'s
    entries, `launch_violations`), when any."""
    return data | {"violations": [v.to_dict() for v in wrong]} if wrong else data
