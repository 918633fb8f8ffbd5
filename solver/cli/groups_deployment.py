"""`meshsat groups` on a PD deployment: each server's rank groups, one entry per server.

Why per server: the servers of a deployment are separate jobs (docs/disaggregation.md), each
with its own ranks numbered from 0, so one rank map of the script would mix jobs that share
no group. Each server is planned as `groups` plans that server's command alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.markup import escape

from meshsat.solver.cli.deployment_view import server_heading
from meshsat.solver.cli.groups_view import groups_document, print_planned
from meshsat.solver.cli.layout_options import missing_flags_text
from meshsat.solver.cli.output import out
from meshsat.solver.cli.report_view import print_report
from meshsat.solver.deployment.model import Deployment, Server, per_role
from meshsat.solver.deployment.validate import DeploymentReport
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


@dataclass(frozen=True)
class DeploymentGroups:
    """Every server's groups, and the deployment's verdict as `validate` gives it: `groups`
    shows the groups of a deployment that would not start, and says so (exit 1), as it
    does for one job (`launch_checks.launch_violations`)."""

    servers: list[ServerGroups]
    verdict: DeploymentReport

    @property
    def status(self) -> int:
        """`groups`' exit status (the CLI's and the web API's): `validate`'s."""
        return 0 if self.verdict.valid else 1


def plan_deployment(deployment: Deployment, sglang_version: str | None) -> DeploymentGroups:
    """Every server planned on its own, as `groups` plans that server's command, and the
    deployment judged as `validate` judges it."""
    from meshsat.solver.cli.deployment_cmd import judged

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
    return DeploymentGroups(planned, judged(deployment, pack.version, strict=False))


def server_notes(deployment: Deployment) -> list[str]:
    """What `groups` notes for one job (reading notes, its nodes' disagreements, flags the
    release refuses), for every server, prefixed with the server."""
    said: list[str] = []
    for server in deployment.servers:
        layout = server.layout
        said += [f"{server.name}: {text}" for text in layout.notes]
        said += [f"{server.name}: {i.rule}: {i.message}" for i in layout.job]
        for everywhere in (True, False):
            refused = missing_flags_text(layout, everywhere=everywhere)
            said += [f"{server.name}: {refused}"] if refused is not None else []
    return said


def deployment_groups_document(deployment: Deployment, found: DeploymentGroups) -> dict[str, Any]:
    """`groups --json` on a deployment (and the web API's): the deployment's counts and
    verdict (`validate`'s `valid` and `findings`), then per server its `groups` document
    with what `validate` refuses beyond its layout (`violations`: its nodes, its pods, its
    visible devices), or the validator's report when its layout is invalid."""
    verdicts = {r.server: r.report for r in found.verdict.roles}
    roles = [
        s.head() | (_planned(s, verdicts[s.server.name]) if s.planned is not None else _report(s))
        for s in found.servers
    ]
    return {
        "deployment": {
            "valid": found.verdict.valid,
            "sglang_version": found.verdict.sglang_version,
            "servers": per_role((s.server.role, s.server.replicas) for s in found.servers),
            "routers": len(deployment.routers),
            "gpus": _gpus(found.servers),
            "findings": [f.to_dict() for f in found.verdict.findings],
        },
        "roles": roles,
    }


def _planned(s: ServerGroups, verdict: Report) -> dict[str, Any]:
    assert s.planned is not None
    document = groups_document(s.planned)
    wrong = [v for v in verdict.violations if v.severity == "error"]
    return document | ({"violations": [v.to_dict() for v in wrong]} if wrong else {})


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


def print_deployment_groups(found: DeploymentGroups) -> None:
    """Each server under a heading naming it and its role, then its grids (one copy's:
    every replica of a server has the same); then what the deployment's rules found, and
    why it would not start, where it would not."""
    from meshsat.solver.cli.deployment_cmd import print_findings

    for s in found.servers:
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
    print_findings(found.verdict)
    if not found.verdict.valid:
        rules = ", ".join(found.verdict.broken)
        out.print(
            f"[red]✗ the deployment would not start:[/red] {escape(rules)} "
            "(`meshsat validate` says why)"
        )
