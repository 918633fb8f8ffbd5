"""How `meshsat groups` shows a planned layout: the grids per pipeline stage, the summary
line, and the JSON document; shared by one server's answer and a deployment's."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from meshsat.solver.cli.output import out
from meshsat.solver.groups import GROUP_KINDS, PlannedLayout, RankMap, Widths

#: What each grid cell shows, as (label, group kind).
CELL = (("A", "attn_tp"), ("C", "attn_cp"), ("E", "ep"))


def _index(m: RankMap) -> dict[str, dict[int, int]]:
    """Group number of every rank, per kind (groups numbered in rank order)."""
    return {kind: {r: i for i, g in enumerate(m.groups[kind]) for r in g} for kind in GROUP_KINDS}


#: Above this many ranks the map is summarised (widths only): listing a million ranks
#: takes minutes and gigabytes and is read by nobody.
MAX_LISTED_RANKS = 4096


def _summary_line(w: Widths) -> str:
    return (
        f"{w.world} GPU(s) on {-(-w.world // w.gpus_per_node)} node(s) of {w.gpus_per_node}: "
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
            "widths": _widths_dict(w),
            "ranks_listed": False,
        }
    return planned.rank_map.to_dict()


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
            cols = min(w.gpus_per_node, len(ranks))
            table = Table(title=title, title_justify="left", show_lines=True)
            table.add_column("node", no_wrap=True)
            for c in range(cols):
                table.add_column(f"gpu {c}" if cols == w.gpus_per_node else "", no_wrap=True)
            rows: dict[int, list[str]] = {}
            for r in ranks:
                cell = f"[bold]{r.rank}[/bold]\n" + " ".join(
                    f"{label}{idx[kind][r.rank]}" for label, kind in CELL
                )
                rows.setdefault(r.node, [""] * cols)[r.local_gpu % cols] = cell
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
