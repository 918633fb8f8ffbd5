"""Distributed weight data parallelism (seed: handle_dwdp), active when dwdp_size > 1."""

from __future__ import annotations

from meshsat.solver.lang.expr import TRUE, is_set, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

SRC = "handle_dwdp"
on = F.dwdp_size > 1

RULES: tuple[Rule, ...] = (
    # SGLang's own `dwdp_size >= 2` sits under `dwdp_size > 1` and cannot fail for an
    # integer; the bound that can fail is the lower one, which SGLang leaves unchecked.
    Rule(
        "DWDP-MIN",
        TRUE,
        F.dwdp_size >= 1,
        "dwdp_size must be >= 1 (1 disables DWDP, >= 2 enables it), got {dwdp_size}",
        SRC,
    ),
    Rule(
        "DWDP-EQ-TP",
        on,
        F.dwdp_size == F.tp_size,
        "dwdp_size ({dwdp_size}) must equal tp_size ({tp_size})",
        SRC,
    ),
    Rule(
        "DWDP-MODE",
        on,
        one_of(F.disaggregation_mode, "null", "prefill"),
        "DWDP requires --disaggregation-mode null or prefill",
        SRC,
    ),
    Rule(
        "DWDP-NO-EPLB",
        on,
        ~F.enable_eplb,
        "EPLB dynamic migration conflicts with static DWDP partitioning",
        SRC,
    ),
    Rule(
        "DWDP-NO-SPEC",
        on,
        ~is_set(F.speculative_algorithm),
        "DWDP does not support speculative decoding (MTP/draft workers)",
        SRC,
    ),
    Rule("DWDP-PP1", on, F.pp_size == 1, "DWDP requires pp_size == 1", SRC),
    Rule(
        "DWDP-NO-TBO",
        on,
        ~F.enable_two_batch_overlap,
        "DWDP's prefetch event protocol does not support two-batch overlap",
        SRC,
    ),
    Rule(
        "DWDP-DISAGG-NULL",
        on,
        F.disaggregation_mode != "null",
        "DWDP with --disaggregation-mode null: decode steps re-fetch all remote expert "
        "weights every step, which is slow. DWDP is recommended only with "
        "--disaggregation-mode prefill.",
        SRC,
        severity="warning",
    ),
)
