"""MoE runner kernels (handle_moe_kernel_config): which EP width and all-to-all backend each
FlashInfer runner takes. SGLang runs this handler before handle_a2a_moe, so it reads the
user's ep_size, not the all-to-all backend's ep_size = tp_size rewrite.

The quantization each runner needs is not modelled: meshsat has no quantization field
(docs/packs.md lists what that leaves out)."""

from __future__ import annotations

from meshsat.solver.lang.expr import one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

SRC = "handle_moe_kernel_config"
runner = F.moe_runner_backend
user_ep = F.ep_size.as_raw
_EP_ONE_OR_TP = "The expert parallel size must be 1 or the same as the tensor parallel size"

#: Runners that take an EP width of 1 or tp_size only: (rule id, runner).
_EP_ONE_OR_TP_RUNNERS = (
    ("MOE-CUTLASS-EP", "flashinfer_cutlass"),
    ("MOE-CUTEDSL-EP", "flashinfer_cutedsl"),
)

RULES: tuple[Rule, ...] = (
    *(
        Rule(
            rule_id,
            runner == backend,
            (user_ep == 1) | (user_ep == F.tp_size),
            _EP_ONE_OR_TP,
            SRC,
            hint="use --ep-size 1 or the TP size",
        )
        for rule_id, backend in _EP_ONE_OR_TP_RUNNERS
    ),
    Rule(
        "MOE-CUTEDSL-A2A",
        runner == "flashinfer_cutedsl",
        one_of(F.moe_a2a_backend, "none", "deepep", "flashinfer"),
        "flashinfer_cutedsl supports moe_a2a_backend='none', 'deepep', or 'flashinfer', got "
        "'{moe_a2a_backend}'.",
        SRC,
    ),
)
