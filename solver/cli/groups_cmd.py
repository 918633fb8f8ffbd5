"""`meshsat groups`: which GPU belongs to which group, per pipeline stage and node."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

import meshsat.solver.cli.groups_deployment as gd
from meshsat.solver.cli.formats import FormatOpt, OutputFormat, chosen, emit
from meshsat.solver.cli.groups_view import (
    MAX_LISTED_RANKS,
    groups_document,
    print_planned,
    with_violations,
)
from meshsat.solver.cli.launch_checks import launch_violations
from meshsat.solver.cli.layout_options import JsonOpt, layout_inputs, read_layout
from meshsat.solver.cli.output import note, out
from meshsat.solver.cli.report_view import VIOLATION_COLUMNS, print_report, violation_rows
from meshsat.solver.cli.version_option import SglangVersionOpt, chosen_pack
from meshsat.solver.deployment.model import Deployment
from meshsat.solver.errors import InputError
from meshsat.solver.groups import GROUP_KINDS, PlannedLayout, RankMap, plan_layout
from meshsat.solver.inputs.layout_input import LayoutInput, LayoutSources
from meshsat.solver.validation.report import InvalidLayoutError, Violation

RankOpt = Annotated[
    int | None,
    typer.Option(
        "--rank",
        "-r",
        help="Show one global rank: its coordinates and the members of every group it belongs to.",
        show_default=False,
    ),
]


def print_rank(m: RankMap, rank: int) -> None:
    r = m.ranks[rank]
    out.print(
        f"rank {rank}: node {r.node} gpu {r.local_gpu}; replica {r.replica}, pp {r.pp}; "
        f"attention dp {r.attn_dp} cp {r.attn_cp} tp {r.attn_tp}; "
        f"MoE dp {r.moe_dp} ep {r.ep} tp {r.moe_tp}; dcp {r.dcp}"
    )
    table = Table(show_header=True)
    table.add_column("group")
    table.add_column("members")
    for kind in GROUP_KINDS:
        label = kind + (" (= attn_cp)" if kind == "moe_dp" and m.moe_dp_is_attn_cp else "")
        table.add_row(label, " ".join(map(str, m.group_of(kind, rank))))
    out.print(table)


@layout_inputs()
def groups_cmd(
    sources: LayoutSources,
    rank: RankOpt = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    sglang_version: SglangVersionOpt = None,
) -> None:
    """Show the rank groups of a valid layout: which GPU is in which attention-TP,
    attention-CP and expert-parallel group, per pipeline stage, with node boundaries.

    Follows SGLang's rank layout: inside a stage, attention splits ranks as
    (dp, cp, tp) and MoE as (moe_dp, ep, moe_tp), the last coordinate fastest.
    An invalid layout exits 1 with the validator's messages; a valid layout's warnings
    (`validate`'s, such as two pipeline stages on one GPU) go to stderr after its groups
    are computed, and the groups are shown. A launch script that
    `validate` refuses for its launch alone (nodes of one job that disagree, a
    LeaderWorkerSet whose --nnodes is not its group size, a visible-devices list too short:
    the JOB-* rules) also exits 1, after the groups of its first node's layout, each reason
    noted on stderr (--json: under "violations"): the groups are what SGLang would build,
    the job still would not start.

    A PD deployment (a script with a router, or prefill and decode servers) shows each
    server's groups under its name and role, as for that server's command alone (--json:
    one entry per server under "roles"); --rank then needs one server's command.

    Examples:

    \b
      meshsat groups --set tp_size=8 --set attn_cp_size=2
      meshsat groups --set tp_size=16 --set ep_size=16 --set nnodes=2 --rank 9
      meshsat groups --example qwen3-moe-dp-attention --json
      meshsat groups --sglang-file pd.sh   # a PD deployment: every server's groups
    """
    chosen_fmt = chosen(fmt, as_json)
    import meshsat.solver.cli.deployment_cmd as deployment_cmd

    job = None  # with --rank (a rank is one server's), read_layout refuses a deployment
    if rank is None:
        found, sources = deployment_cmd.deployment_input(sources, sglang_version)
        if isinstance(found, Deployment):
            raise typer.Exit(_deployment_groups(found, sglang_version, chosen_fmt))
        job = found
    command = "groups" if rank is None else "groups --rank"
    layout = read_layout(sources, sglang_version, command=command, job=job)
    need_widths(layout)
    try:
        # The option's default is the newest pack, as for every other command (`check`
        # alone defaults to the installed release, for servers at start-up).
        planned = plan_layout(
            layout.config, layout.model, explain=None, sglang_version=chosen_pack(sglang_version)
        )
    except InvalidLayoutError as invalid:
        if chosen_fmt is OutputFormat.table:
            print_report(invalid.report)
        else:
            rows = violation_rows(invalid.report)
            emit(chosen_fmt, invalid.report.to_dict(), rows, columns=VIOLATION_COLUMNS)
        raise typer.Exit(1) from None
    wrong = launch_violations(planned.report, layout)
    _warn(planned.report.warnings)
    _groups(planned, rank, chosen_fmt, wrong)
    if wrong:
        if chosen_fmt is OutputFormat.table:
            rules = ", ".join(dict.fromkeys(v.rule for v in wrong))
            out.print(
                f"[red]✗ the launch would not start:[/red] {rules} (`meshsat validate` says why)"
            )
        raise typer.Exit(1)


def _warn(warnings: tuple[Violation, ...] | list[Violation]) -> None:
    """The layout's warnings, as `validate` words them, on stderr: a valid layout's groups
    are shown whatever it warns of (two stages on one GPU, TOPO-STAGE-GPUS: SGLang starts
    both schedulers there, and the groups show it), and the warning says what to mind."""
    for w in warnings:
        note(f"warning [{w.rule}] {w.message}")


def _groups(
    planned: PlannedLayout, rank: int | None, chosen_fmt: OutputFormat, wrong: list[Violation]
) -> None:
    """The groups of a valid layout (of one rank with `rank`), as the format asks; the
    document carries `wrong`, what the launch breaks beyond the layout."""
    w = planned.widths
    if w.world > MAX_LISTED_RANKS:
        if rank is not None:
            raise InputError(
                f"the layout has {w.world} ranks; --rank works up to {MAX_LISTED_RANKS} ranks"
            )
        if chosen_fmt is OutputFormat.table:
            print_planned(planned)
        else:
            emit(chosen_fmt, with_violations(groups_document(planned), wrong), [])
        return
    m = planned.rank_map
    if rank is not None and not 0 <= rank < m.widths.world:
        raise InputError(f"--rank must be in 0..{m.widths.world - 1}, got {rank}")
    if chosen_fmt is OutputFormat.table:
        if rank is not None:
            print_rank(m, rank)
        else:
            print_planned(planned)
        return
    data = groups_document(planned)
    rows = data["ranks"]
    if rank is not None:
        data = {
            "rank": data["ranks"][rank],
            "groups": {k: list(m.group_of(k, rank)) for k in GROUP_KINDS},
        }
        rows = [data["rank"]]
    emit(chosen_fmt, with_violations(data, wrong), rows)


def need_widths(layout: LayoutInput, where: str = "") -> None:
    """Groups are the ranks of known widths: a launch value unknown here (`--tp $TP`)
    would show SGLang's default as the launch's groups, so it is asked for instead (a node's
    rank or address is not a width). The CLI and `/api/groups` both ask."""
    if layout.unknown_widths:
        listed, give = layout.unknown_text()
        raise InputError(
            f"{where}groups need the layout's widths, and {listed} is unknown here ({give})"
        )


def _deployment_groups(
    deployment: Deployment, sglang_version: str | None, fmt: OutputFormat
) -> int:
    """`groups` on a PD deployment: each server's groups (an invalid layout's report in its
    place); exit 1 where `validate` exits 1 (a server's layout, its nodes, its pods, its
    devices, or the rules between the servers), saying so."""
    for text in gd.server_notes(deployment):
        note(text)
    for server in deployment.servers:
        need_widths(server.layout, f"{server.name}: ")
    found = gd.plan_deployment(deployment, sglang_version)
    if fmt is OutputFormat.table:
        gd.print_deployment_groups(found)
    else:
        data = gd.deployment_groups_document(deployment, found)
        emit(fmt, data, gd.deployment_rows(data))
    return found.status
