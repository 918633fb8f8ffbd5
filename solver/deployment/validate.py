"""`validate_deployment`: every server of a PD deployment checked with its own rules (its
role's layout, the JOB-* rules of its nodes), and the deployment rules between them."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from meshsat.solver.deployment.model import Deployment, Role, Server, per_role
from meshsat.solver.deployment.reader import read_deployment
from meshsat.solver.deployment.rules import Finding, check
from meshsat.solver.deployment.visible import visible_violations
from meshsat.solver.inputs.layout_input import LayoutInput, LayoutSources, load_layout
from meshsat.solver.inputs.sglang_cmdline import standing
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import Pack, get_pack
from meshsat.solver.validation.job_checks import job_violations, node_violations
from meshsat.solver.validation.report import Report
from meshsat.solver.validation.undecided import undecided
from meshsat.solver.validation.validate import validate


@dataclass(frozen=True)
class RoleReport:
    """One server's verdict: its own rules and its nodes' agreement; `replicas` copies of
    it run (each the same verdict, so one entry stands for them all)."""

    server: str
    role: Role
    lines: tuple[int, ...]
    report: Report
    replicas: int = 1

    @property
    def gpus(self) -> int:
        """One copy's GPUs, as its layout says; the deployment's count every copy."""
        return int(self.report.derived.get("gpus_used", 0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "role": self.role,
            "lines": list(self.lines),
            "nodes": len(self.lines),
            "replicas": self.replicas,
            "gpus": self.gpus,
            **self.report.to_dict(),
        }


@dataclass(frozen=True)
class DeploymentReport:
    """The deployment's verdict: valid when every server is and no deployment rule of
    this release is broken as an error."""

    valid: bool
    sglang_version: str
    roles: tuple[RoleReport, ...]
    findings: tuple[Finding, ...]
    #: Pair rules that could not be decided here (`RULE prefill@L/decode@L`): a fact was a
    #: shell expansion, or the model's architecture is unknown.
    undecided: tuple[str, ...]
    routers: int

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def servers(self) -> dict[Role, int]:
        """Servers of each role, every replica counted."""
        return per_role((r.role, r.replicas) for r in self.roles)

    @property
    def gpus(self) -> int:
        """GPUs of every server, every replica counted."""
        return sum(r.replicas * r.gpus for r in self.roles)

    @property
    def broken(self) -> tuple[str, ...]:
        """Every rule id broken as an error, the servers' own and the deployment's."""
        own = [v.rule for r in self.roles for v in r.report.violations]
        return tuple(dict.fromkeys([*own, *(f.rule for f in self.errors)]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "deployment": {
                "valid": self.valid,
                "sglang_version": self.sglang_version,
                "servers": self.servers,
                "routers": self.routers,
                "gpus": self.gpus,
                "findings": [f.to_dict() for f in self.findings],
                "undecided": list(self.undecided),
            },
            "roles": [r.to_dict() for r in self.roles],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def load_server(
    model: ModelSpec | None, release: str
) -> Any:  # the reader's LoadServer: (sources, launch=...) -> LayoutInput
    """How the API reads each server: the embedded model catalogue for repository ids, the
    release's flag table; `model` (when given) for every server."""
    from meshsat.solver.memory.models import model_config

    def load(sources: LayoutSources, **kw: Any) -> LayoutInput:
        layout = load_layout(sources, catalogue=model_config, release=release, **kw)
        return layout if model is None else replace(layout, model=model)

    return load


def validate_deployment(
    script: str | Deployment,
    *,
    sglang_version: str | Pack | None = None,
    model: ModelSpec | None = None,
) -> DeploymentReport:
    """Check a PD deployment: the launch script of its servers and routers (or a
    `Deployment` already read). Each server is validated with its own release rules and
    its nodes' JOB-* rules, one entry per server; the deployment rules
    (`meshsat.solver.catalogue.pd_pairs`) between every prefill and decode server and on
    the routers. A script of one job is a deployment of one server."""
    pack = get_pack(sglang_version)
    if isinstance(script, Deployment):
        deployment = script
    else:
        deployment = read(script, load_server(model, pack.version))
    return judge(deployment, pack)


def read(text: str, load: Any, sources: LayoutSources | None = None) -> Deployment:
    """`read_deployment`, with a script of one job read as a deployment of one server."""
    found = read_deployment(text, load, sources, always=True)
    assert found is not None
    return found


def judge(
    deployment: Deployment,
    pack: Pack,
    reports: dict[str, Report] | None = None,
) -> DeploymentReport:
    """The verdict on a deployment read already; `reports` gives servers' reports made by
    the caller (the CLI adds its launch checks), the rest are made here."""
    made = dict(reports or {})
    for server in deployment.servers:
        if server.name not in made:
            made[server.name] = server_report(server, pack)
    findings, undecided = check(deployment, made, pack.version)
    roles = tuple(
        RoleReport(s.name, s.role, tuple(c.line for c in s.commands), made[s.name], s.replicas)
        for s in deployment.servers
    )
    valid = all(r.report.valid for r in roles) and not any(f.severity == "error" for f in findings)
    return DeploymentReport(
        valid, pack.version, roles, tuple(findings), tuple(undecided), len(deployment.routers)
    )


def server_report(server: Server, pack: Pack) -> Report:
    """One server's report: its release rules (those that read a value the launch leaves
    unknown undecided, `undecided`), and its nodes' disagreements and own GPU ids as
    errors."""
    config = server.layout.config
    report = validate(config, server.layout.model, sglang_version=pack)
    report = undecided(report, server.layout.unknown)
    issues = standing(server.layout.job, config.nnodes, server.commands[0].group_size)
    job = job_violations(issues) + node_violations(report, server.layout.nodes)
    job += visible_violations(server.commands, report.resolved, pack.version)
    if not job:
        return report
    return replace(report, valid=False, violations=(*report.violations, *job))
