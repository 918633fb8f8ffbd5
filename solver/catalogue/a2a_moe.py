"""The MoE all-to-all backend (SGLang: handle_a2a_moe, after handle_context_parallelism).

Measured against the real releases (fidelity/): SGLang raises this during argument
resolution, not at launch, so it precedes the launch checks in a report. The id keeps its
`TOPO-` prefix from when meshsat read it as a topology check.
"""

from __future__ import annotations

from solver.lang.fields import F
from solver.lang.rule import Rule

SRC = "handle_a2a_moe"

RULES: tuple[Rule, ...] = (
    Rule(
        "TOPO-A2A-FLASHINFER",
        F.moe_a2a_backend == "flashinfer",
        F.enable_dp_attention & (F.dp_size == F.tp_size),
        "Flashinfer MoE A2A is only supported with dp_size == tp_size and --enable-dp-attention",
        SRC,
    ),
)
