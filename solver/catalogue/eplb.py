"""EPLB, expert dispatch and expert-distribution metrics
(seed: handle_eplb_and_dispatch, handle_expert_distribution_metrics)."""

from __future__ import annotations

from meshsat.solver.lang.expr import FALSE, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

RULES: tuple[Rule, ...] = (
    Rule(
        "DISPATCH-RANK-INVARIANT",
        F.moe_a2a_backend == "none",
        ~one_of(F.ep_dispatch_algorithm, "static", "lp"),
        "--ep-dispatch-algorithm {ep_dispatch_algorithm} picks a different physical replica "
        "per rank, which only holds up when an a2a backend routes each token to a single "
        "rank. Use --ep-dispatch-algorithm dynamic with --moe-a2a-backend none.",
        "handle_eplb_and_dispatch",
    ),
    Rule(
        "EPLB-NEEDS-EP",
        F.enable_eplb & (F.ep_join_mode != "scale"),
        F.ep_size > 1,
        "EPLB balances experts across EP ranks: ep_size must be > 1 after resolution "
        "(SGLang: bare assert ep_size > 1).",
        "handle_eplb_and_dispatch",
    ),
    Rule(
        "METRICS-ENV",
        F.env_enable_eplb_balancedness_metric,
        FALSE,
        "SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC is no longer supported. Use "
        "--expert-balancedness-report-mode with one of: off, server_log, prometheus, both.",
        "handle_expert_distribution_metrics",
    ),
)
