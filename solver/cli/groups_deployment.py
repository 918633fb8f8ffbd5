"""`meshsat groups` on a PD deployment: each server's rank groups, one entry per server.

Why per server: the servers of a deployment are separate jobs (docs/disaggregation.md), each
with its own ranks numbered from 0, so one rank map of the script would mix jobs that share
no group. Each server is planned as `groups` plans that server's command alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshsat.solver.cli.deployment_view import deployment_head, server_heading
from meshsat.solver.cli.groups_view import groups_document, print_planned
from meshsat.solver.cli.layout_options import missing_flags_text
from meshsat.solver.cli.output import out
from meshsat.solver.cli.report_view import print_report
from meshsat.solver.deployment.model import Deployment, Server, per_role
from meshsat.solver.groups import PlannedLayout, plan_layout
from meshsat.solver.packs import get_pack
from meshsat.solver.validation.report import InvalidLayoutError, Report


@dataclass(frozen=True)
class ServerGroups:
    """One server's plan, or the report that says why its layout has none."""

    server: Server
    planned: PlannedLayout | None
    invalid: Report | None

    @property
    def gpus(self) -> int:
        if self.planned is not None:
            return self.planned.widths.world
        assert self.invalid is not None
        return int(self.invalid.derived.get("gpus_used", 0))

    def head(self) -> dict[str, Any]:
        lines = [c.line for c in self.server.commands]
        return {
            "server": self.server.name,
            "role": self.server.role,
            "lines": lines,
            "nodes": len(lines),
            "replicas": self.server.replicas,
            "gpus": self.gpus,
            "valid": self.planned is not None,
        }


def plan_servers(deployment: Deployment, sglang_version: str | None) -> list[ServerGroups]:
    """Every server planned on its own, as `groups` plans that server's command."""
    pack = get_pack(sglang_version)
    planned: list[ServerGroups] = []
    for server in deployment.servers:
        layout = server.layout
        try:
            plan = plan_layout(layout.config, layout.model, explain=None, sglang_version=pack)
        except InvalidLayoutError as bad:
            planned.append(ServerGroups(server, None, bad.report))
        else:
            planned.append(ServerGroups(server, plan, None))
    return planned


def server_notes(deployment: Deployment) -> list[str]:
    """What `groups` notes for one job (reading notes, its nodes' disagreements, flags the
    release refuses), for every server, prefixed with the server."""
    said: list[str] = []
    for server in deployment.servers:
        layout = server.layout
        said += [f"{server.name}: {text}" for text in layout.notes]
        said += [f"{server.name}: {i.rule}: {i.message}" for i in layout.job]
        if layout.missing_flags:
            said.append(f"{server.name}: {missing_flags_text(layout)}")
    return said


def deployment_groups_document(
    deployment: Deployment, servers: list[ServerGroups], sglang_version: str | None
) -> dict[str, Any]:
    """`groups --json` on a deployment (and the web API's): the deployment's counts, then
    per server its `groups` document, or the validator's report when its layout is
    invalid."""
    roles = [
        s.head() | (groups_document(s.planned) if s.planned is not None else _report(s))
        for s in servers
    ]
    return {
        "deployment": {
            "valid": all(s.planned is not None for s in servers),
            "sglang_version": get_pack(sglang_version).version,
            "servers": per_role((s.server.role, s.server.replicas) for s in servers),
            "routers": len(deployment.routers),
            "gpus": _gpus(servers),
        },
        "roles": roles,
    }


def _report(s: ServerGroups) -> dict[str, Any]:
    assert s.invalid is not None
    return {"report": s.invalid.to_dict()}


def deployment_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The CSV/JSONL rows: every listed rank, with its server."""
    return [
        {"server": role["server"], **rank}
        for role in document["roles"]
        for rank in role.get("ranks", ())
    ]


def _gpus(servers: list[ServerGroups]) -> int:
    """Every server's GPUs, every replica counted."""
    return sum(s.server.replicas * s.gpus for s in servers)


def print_deployment_groups(servers: list[ServerGroups], routers: int) -> None:
    """Each server under a heading naming it and its role, then its grids (one copy's:
    every replica of a server has the same)."""
    for s in servers:
        lines = [c.line for c in s.server.commands]
        kind = f"{s.server.role} server"
        out.print(
            server_heading(s.server.name, kind, lines, s.gpus, s.server.replicas),
            highlight=False,
        )
        if s.invalid is not None:
            print_report(s.invalid)
        else:
            assert s.planned is not None
            print_planned(s.planned)
    counted = per_role((s.server.role, s.server.replicas) for s in servers)
    out.print(deployment_head(counted, routers, _gpus(servers)), highlight=False)


def groups_status(servers: list[ServerGroups]) -> int:
    """`groups`' exit status on a deployment (the CLI's and the web API's): 1 when a
    server's layout is invalid or its nodes disagree (JOB-*, noted by `server_notes`), as
    `validate` exits; else 0."""
    jobs_hold = not any(s.server.layout.job for s in servers)
    return 0 if jobs_hold and all(s.planned is not None for s in servers) else 1
