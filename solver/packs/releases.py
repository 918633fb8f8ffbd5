"""The releases meshsat knows, each as a diff against the one it descends from.

The base is the catalogue of `solver.catalogue` (the seed's release) with the corrections
measured against the real SGLang applied to every pack (docs/rules.md §6): handlers in
pipeline order, so the first violation is SGLang's first error, and the MoE-DP checks on the
user's ep_size. What each later release changed is stated rule by rule, with the
SGLang function that says so (`fidelity/` records what the real releases answered).
"""

from __future__ import annotations

import dataclasses

from solver.catalogue import RESOLUTIONS, RULES
from solver.lang.derived import attn_dp
from solver.lang.expr import TRUE, divides
from solver.lang.fields import F
from solver.lang.rule import Resolution, Rule, assign
from solver.packs.pack import Pack, PackDiff, apply, base_pack

#: The release the seed's sources come from (see fidelity/README.md).
SEED_VERSION = "0.5.19"

#: SGLang's resolution pipeline runs these handlers in this order; topology and model rules
#: are launch checks, after all of them.
PIPELINE_ORDER: tuple[str, ...] = (
    "argparse",
    "handle_dcp_validation",
    "handle_dwdp",
    "handle_data_parallelism",
    "_dp_lm_head_validation",
    "DSA context-parallel model overrides",
    "DSA context-parallel model support (outside the seed)",
    "handle_context_parallelism",
    "handle_a2a_moe",
    "handle_eplb_and_dispatch",
    "handle_expert_distribution_metrics",
    "handle_elastic_ep",
    "SGLang launch checks",
    "derive_parallel_widths",
    "model weight sharding",
)

_LAUNCH_RULES = frozenset(
    r.id for r in RULES if r.source in ("SGLang launch checks", "derive_parallel_widths")
) | frozenset(r.id for r in RULES if r.source == "model weight sharding")

#: 0.5.19's parser offers one legacy mode (`choices=["in-seq-split"]`); the DSA alias keeps
#: both. Measured: 0.5.19 and 0.5.18 refuse `--prefill-cp-mode round-robin-split`.
_PREFILL_CP_MODE_CHOICE = Rule(
    "ARGPARSE-PREFILL-CP-MODE",
    TRUE,
    F.prefill_cp_mode.as_raw == "in-seq-split",
    "argument --prefill-cp-mode: invalid choice: {prefill_cp_mode!r} (choose from 'in-seq-split')",
    "argparse",
    hint="use --cp-strategy interleave with --enable-prefill-cp for round-robin splitting",
)

SEED = base_pack(
    SEED_VERSION,
    "2026-07",
    "The seed's snapshot: --enable-prefill-cp --cp-strategy beside the legacy CP flags; "
    "--enable-dp-attention with --dp-size as the DP-attention width.",
    (*RULES, _PREFILL_CP_MODE_CHOICE),
    RESOLUTIONS,
    handler_order=PIPELINE_ORDER,
    # DCP-IN-ATTN-TP stays an error for now: the rank plan cannot form decode-CP groups
    # that do not divide attn_tp, although SGLang's argument resolution accepts them
    # (docs/rules.md §6; a listed fidelity disagreement).
    advice=frozenset(),
    absent_fields=("attn_dp_size",),
)

_ATTN_DP_SIZE = Resolution(
    "R-ATTN-DP-SIZE",
    "handle_deprecated_dp_attention",
    "--attn-dp-size N is DP attention over N groups (meshsat reads it as "
    "--enable-dp-attention --dp-size N, its internal spelling)",
    (
        assign(
            (F.attn_dp_size > 1) & (F.dp_size == 1),
            quiet=True,
            enable_dp_attention=True,
            dp_size=F.attn_dp_size,
        ),
    ),
)

#: 0.5.23's pipeline (sglang/srt/arg_groups/pipeline.py): the decode-CP handler is renamed.
_ORDER_0_5_23: tuple[str, ...] = tuple(
    "handle_decode_context_parallelism" if h == "handle_dcp_validation" else h
    for h in PIPELINE_ORDER
)
_DCP_RULES = tuple(
    dataclasses.replace(r, source="handle_decode_context_parallelism")
    for r in RULES
    if r.source == "handle_dcp_validation"
)
#: 0.5.23 words the flashinfer all-to-all width with its new flag.
_A2A_FLASHINFER = dataclasses.replace(
    next(r for r in RULES if r.id == "TOPO-A2A-FLASHINFER"),
    message="Flashinfer MoE A2A requires --attn-dp-size equal to --tp-size",
)

V0_5_23 = apply(
    SEED,
    PackDiff(
        "0.5.23",
        "2026-11",
        "--attn-dp-size replaces --enable-dp-attention + --dp-size (dp_size counts "
        "replicas again); the legacy CP flags are gone; decode CP excludes prefill CP; "
        "topology and model checks happen at launch.",
        add_rules=(
            Rule(
                "DP-REPLICAS-ATTN-DP",
                (F.attn_dp_size.as_raw > 1) & (F.dp_size.as_raw > 1),
                F.dp_size.as_raw == 1,
                "--dp-size {dp_size} with --attn-dp-size {attn_dp_size}: data-parallel "
                "replicas combined with attention data parallelism are not supported.",
                "handle_data_parallelism",
                hint="keep --attn-dp-size and drop --dp-size, or launch replicas separately",
            ),
            Rule(
                "DCP-NO-PREFILL-CP",
                F.dcp_size > 1,
                ~F.enable_prefill_cp,
                "--dcp-size > 1 does not support --enable-prefill-cp.",
                "handle_decode_context_parallelism",
                hint="use decode CP or prefill CP, not both",
            ),
        ),
        replace_rules=(
            Rule(
                "CP-DPCP-DIV",
                F.attn_cp_size > 1,
                divides(attn_dp * F.attn_cp_size, F.tp_size),
                "tp_size must be divisible by attn_dp_size * attn_cp_size",
                "handle_context_parallelism",
            ),
            *_DCP_RULES,
            _A2A_FLASHINFER,
        ),
        remove_rules=("ARGPARSE-PREFILL-CP-MODE",),  # the legacy flag itself is gone
        add_resolutions=(_ATTN_DP_SIZE,),
        handler_order=_ORDER_0_5_23,
        launch_only=_LAUNCH_RULES,
        present_fields=("attn_dp_size",),
    ),
)

#: Every known pack, oldest first; the last is the default.
PACKS: tuple[Pack, ...] = (SEED, V0_5_23)
