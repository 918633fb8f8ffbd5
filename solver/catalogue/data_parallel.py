"""Data parallelism and DP attention (seed: handle_data_parallelism)."""

from __future__ import annotations

from meshsat.solver.lang.expr import divides
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

SRC = "handle_data_parallelism"

RULES: tuple[Rule, ...] = (
    Rule(
        "DPATTN-TP-DIV",
        F.enable_dp_attention,
        divides(F.dp_size, F.tp_size),
        "AssertionError (a bare assert: tp_size % dp_size == 0): with --enable-dp-attention, "
        "tp_size must be divisible by dp_size (each DP-attention group gets tp_size / dp_size "
        "ranks)",
        SRC,
    ),
    Rule(
        "DP-LM-HEAD",
        F.enable_dp_lm_head,
        F.enable_dp_attention,
        "--enable-dp-lm-head requires --enable-dp-attention.",
        "_dp_lm_head_validation",
    ),
    Rule(
        "MM-DP-ENCODER",
        F.mm_enable_dp_encoder,
        F.tp_size > 1,
        "--mm-enable-dp-encoder is enabled with TP=1, so the encoder has no data-parallel "
        "work to distribute. Disable it unless you need to validate this configuration.",
        SRC,
        severity="warning",
    ),
)
