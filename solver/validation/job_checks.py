"""The disagreements between the nodes of one job (`JobIssue`s from the launch reader) as
report violations: errors, since the job would hang or shard wrongly though each node's
SGLang starts. Used by `validate` on a launch script and by each server of a deployment."""

from __future__ import annotations

from meshsat.solver.inputs.sglang_cmdline import JobIssue
from meshsat.solver.validation.report import Violation

_HINTS = {
    "JOB-ONE-LAYOUT": "give every node the same layout flags",
    "JOB-DIST-INIT": "give every node the first node's --dist-init-addr",
    "JOB-NODE-RANKS": "number the nodes --node-rank 0 .. nnodes-1, once each",
}


def job_violations(issues: tuple[JobIssue, ...] | list[JobIssue]) -> list[Violation]:
    return [
        Violation(
            issue.rule,
            issue.message,
            ("nnodes", "node_rank"),
            f"line {issue.line}",
            _HINTS[issue.rule],
            "meshsat: the nodes of one job",
        )
        for issue in issues
    ]
