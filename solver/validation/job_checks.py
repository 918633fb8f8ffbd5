"""The disagreements between the nodes of one job (`JobIssue`s from the launch reader) as
report violations: errors, since the job would hang or shard wrongly though each node's
SGLang starts. Used by `validate` on a launch script and by each server of a deployment.

Also each node's own GPU ids (`NodePlacement`): SGLang lets the nodes of one job differ in
`--base-gpu-id` and `--gpu-id-step` (each node's schedulers read their own), so the rules
on them are checked for every node, not only the first whose layout is read."""

from __future__ import annotations

from dataclasses import replace

from meshsat.solver.inputs.sglang_cmdline import NODE_PLACEMENT, JobIssue, NodePlacement
from meshsat.solver.lang.config import Config
from meshsat.solver.validation.report import Report, Violation
from meshsat.solver.validation.validate import validate

_HINTS = {
    "JOB-ONE-LAYOUT": "give every node the same layout flags",
    "JOB-DIST-INIT": "give every node the first node's --dist-init-addr",
    "JOB-NODE-RANKS": "number the nodes --node-rank 0 .. nnodes-1, once each",
    "JOB-GROUP-SIZE": "write --nnodes $(LWS_GROUP_SIZE) in the leader's and the worker's "
    "command (LWS fills in the group's size), or set spec.leaderWorkerTemplate.size (a "
    "StatefulSet's spec.replicas) to the --nnodes the layout needs (`fix` on a one-server "
    "manifest prints its command with --nnodes set to the size; `fix --emit lws` writes a "
    "consistent LeaderWorkerSet)",
}
#: Where each rule's facts come from, where more than the nodes' own flags: a
#: LeaderWorkerSet's group is `size` pods (the leader and size-1 workers, each told its
#: place by LWS_WORKER_INDEX), and SGLang's rendezvous at --dist-init-addr waits for every
#: rank of --nnodes nodes (sglang/srt/entrypoints/engine.py: _calculate_rank_ranges gives
#: node r the ranks of r, unchecked against --nnodes).
_SOURCES = {
    "JOB-GROUP-SIZE": "LeaderWorkerSet: spec.leaderWorkerTemplate.size pods per group "
    "(a StatefulSet of multi-node pods: spec.replicas, ranked by pod ordinal); "
    "sglang/srt/entrypoints/engine.py: _calculate_rank_ranges (node ranks are not checked "
    "against --nnodes)",
}


def job_violations(issues: tuple[JobIssue, ...] | list[JobIssue]) -> list[Violation]:
    return [
        Violation(
            issue.rule,
            issue.message,
            ("nnodes", "node_rank"),
            f"line {issue.line}",
            _HINTS[issue.rule],
            _SOURCES.get(issue.rule, "meshsat: the nodes of one job"),
        )
        for issue in issues
    ]


def node_violations(
    report: Report, nodes: tuple[NodePlacement, ...] | list[NodePlacement]
) -> list[Violation]:
    """The violations of rules on a node's GPU ids (those naming a `NODE_PLACEMENT`
    field) for each node that gives its own, the job's layout otherwise: `report` is the
    first node's."""
    out: list[Violation] = []
    for node in nodes:
        own = {k: Config.model_fields[k].default for k in NODE_PLACEMENT} | dict(node.values)
        config = report.config.model_copy(update=own)
        checked = validate(
            config, report.model, explain=False, sglang_version=report.sglang_version
        )
        out += [
            replace(
                v,
                message=f"the node launched on line {node.line}: {v.message}",
                detail=f"line {node.line}",
            )
            for v in checked.violations
            if set(v.fields) & set(NODE_PLACEMENT)
        ]
    return out
