"""Prefill context parallelism and MoE-DP (seed: handle_context_parallelism)."""

from __future__ import annotations

from meshsat.solver.lang.expr import TRUE, divides, is_set, ite, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.model_spec import MIMO_V2_ARCHITECTURES, MLA_ARCHITECTURES
from meshsat.solver.lang.rule import Rule

SRC = "handle_context_parallelism"
cp, tp, dp, moe_dp, ep = F.attn_cp_size, F.tp_size, F.dp_size, F.moe_dp_size, F.ep_size
#: The ep_size the MoE-DP checks and the MoE runner asserts (handle_moe_kernel_config) see:
#: they run after DWDP (which sets it to dwdp_size) and the model overrides (docs/rules.md
#: §3b, which set it to tp_size for MLA and zigzag-DSA prefill CP; the last writer wins),
#: and before the all-to-all handler rewrites it (docs/rules.md §6); otherwise the user's.
#: Measured on 0.5.18, 0.5.19 and 0.5.23: tp 4, --ep-size 2, --dwdp-size 4 passes the
#: flashinfer_cutlass and flashinfer_cutedsl EP asserts, the same without DWDP does not.
_model_sets_ep = F.enable_prefill_cp & (
    one_of(F.architecture, *MLA_ARCHITECTURES) | (F.is_deepseek_dsa & (F.cp_strategy == "zigzag"))
)
ep_before_a2a = ite(_model_sets_ep, tp, ite(F.dwdp_size > 1, F.dwdp_size, ep.as_raw))
_mimo_cp_v2 = (
    one_of(F.architecture, *MIMO_V2_ARCHITECTURES)
    & F.enable_prefill_cp
    & (F.env_enable_cp_v2 == True)  # noqa: E712 - builds a rule node, not a comparison
)

RULES: tuple[Rule, ...] = (
    # The deprecated --prefill-cp-mode flag keeps one choice in the seed's release (its
    # flag table, fidelity/flags/0.5.19.json): argparse refuses the other before any step.
    # Read raw: the legacy step mirrors --cp-strategy interleave back as round-robin-split.
    Rule(
        "CP-LEGACY-MODE-CHOICE",
        TRUE,
        F.prefill_cp_mode.as_raw == "in-seq-split",
        "argument --prefill-cp-mode: invalid choice: 'round-robin-split' (choose from "
        "'in-seq-split')",
        "argparse",
        hint="use --cp-strategy interleave (the former round-robin-split), or drop "
        "--prefill-cp-mode",
    ),
    # The model checks open handle_context_parallelism (0.5.18 to 0.5.23).
    Rule(
        "CP-MIMO-ZIGZAG",
        _mimo_cp_v2,
        F.cp_strategy == "zigzag",
        "MiMo V2 CP-v2 only supports --cp-strategy zigzag.",
        SRC,
    ),
    Rule(
        "CP-MIMO-TEXT",
        _mimo_cp_v2 & F.is_multimodal,
        F.language_only | F.language_model_only,
        "MiMo V2 CP-v2 only supports text inference; add --language-only.",
        SRC,
    ),
    Rule(
        "CP-STRATEGY-REQUIRED",
        F.enable_prefill_cp,
        is_set(F.cp_strategy),
        "--cp-strategy must be set when --enable-prefill-cp is enabled.",
        SRC,
        hint="add --cp-strategy zigzag or --cp-strategy interleave",
    ),
    Rule(
        "CP-LEGACY-XOR",
        TRUE,
        ~(F.enable_prefill_context_parallel & F.enable_dsa_prefill_context_parallel),
        "--enable-prefill-context-parallel and --enable-nsa-prefill-context-parallel are "
        "mutually exclusive. Use --enable-nsa-prefill-context-parallel for DeepSeek V3.2 (NSA) "
        "models and --enable-prefill-context-parallel for MLA-based models (DeepSeek V3/R1, "
        "Kimi K2.5) or MHA/GQA-based models.",
        SRC,
        hint="keep one legacy flag, or use --enable-prefill-cp --cp-strategy instead",
    ),
    Rule("CP-TP-DIV", cp > 1, divides(cp, tp), "tp_size must be divisible by attn_cp_size", SRC),
    Rule(
        "CP-DPCP-DIV",
        cp > 1,
        divides(dp * cp, tp),
        "tp_size must be divisible by dp_size * attn_cp_size",
        SRC,
        hint="SGLang uses dp_size here even without DP attention",
    ),
    Rule(
        "CP-NO-AITER",
        cp > 1,
        ~F.enable_aiter_allreduce_fusion,
        "Aiter allreduce fusion is not supported with context parallelism",
        SRC,
    ),
    Rule(
        "MOEDP-TP-DIV",
        moe_dp > 1,
        divides(moe_dp, tp),
        "tp_size must be divisible by moe_dp_size",
        SRC,
    ),
    Rule(
        "MOEDP-EP-LE",
        moe_dp > 1,
        ep_before_a2a * moe_dp <= tp,
        "ep_size * moe_dp_size must be less than or equal to tp_size",
        SRC,
    ),
    Rule(
        "MOEDP-NO-PP",
        moe_dp > 1,
        F.pp_size == 1,
        "PP is not supported with context parallelism",
        SRC,
        hint="moe_dp_size > 1 needs pp_size 1",
    ),
    Rule(
        "MOEDP-EP-EQ",
        (moe_dp > 1) & (ep_before_a2a > 1),
        ep_before_a2a * moe_dp == tp,
        "ep_size * moe_dp_size must be equal to tp_size",
        SRC,
    ),
    Rule(
        "MOEDP-NO-AITER",
        moe_dp > 1,
        ~F.enable_aiter_allreduce_fusion,
        "Aiter allreduce fusion is not supported with context parallelism",
        SRC,
    ),
    Rule(
        "CP-MOEDP-MATCH",
        cp != moe_dp,
        moe_dp == 1,
        "attn_cp_size != moe_dp_size is only supported when moe_dp_size == 1",
        SRC,
        hint="set moe_dp_size to attn_cp_size or to 1",
    ),
    # _deepseek_family_overrides (handle_model_specific_adjustments), 0.5.18 and 0.5.19:
    # interleave (or no strategy) DSA CP gives every rank one request.
    Rule(
        "CP-DSA-INTERLEAVE-DP",
        F.is_deepseek_dsa & F.enable_prefill_cp & (F.cp_strategy != "zigzag"),
        F.dp_size == 1,
        "interleave DSA CP does not support DP attention.",
        "handle_model_specific_adjustments",
        hint="drop --dp-size, or use --cp-strategy zigzag",
    ),
    Rule(
        "CP-DSA-TP8",
        F.is_deepseek_dsa & F.enable_prefill_cp,
        tp <= 8,
        "Context parallel only supports single machine (tp_size <= 8). Cross-machine CP has "
        "precision issues.",
        "handle_model_specific_adjustments",
    ),
    Rule(
        "CP-DSA-NOT-DECODE",
        F.is_deepseek_dsa & F.enable_prefill_cp,
        F.disaggregation_mode != "decode",
        "CP is only supported for prefill when PD disaggregation, please remove "
        "--enable-prefill-cp.",
        "handle_model_specific_adjustments",
    ),
)
