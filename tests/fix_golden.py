"""Broken layouts and the fix an experienced SGLang operator would make, with why.

Written from how SGLang's documentation and its users describe each setting (server
arguments, the large-scale EP / DP-attention deployment guides, the CP and DCP notes), not
from what `fix` prints: each case lists every answer an operator would accept, as the
fields that change and their new values. `tests/test_fix_golden.py` asserts that `fix`'s
first answer is one of them. The model facts come from `tests/enum_cases.MODELS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Golden:
    """One broken layout, the operator's accepted fixes, and why."""

    name: str
    subsystem: str
    #: A key of `tests.enum_cases.MODELS`, or None for no model facts.
    model: str | None
    layout: dict[str, Any]
    #: Each accepted answer: the changed fields and their new values, nothing else.
    accepted: tuple[dict[str, Any], ...]
    why: str


def _each(field: str, *values: Any) -> tuple[dict[str, Any], ...]:
    return tuple({field: v} for v in values)


CASES: tuple[Golden, ...] = (
    # --- the five cases of the issue ----------------------------------------------------
    Golden(
        "dp-attention-dp3",
        "DP attention",
        "deepseek-v3",
        {"tp_size": 8, "dp_size": 3, "enable_dp_attention": True},
        _each("dp_size", 2, 4, 8),
        "DP attention splits the tp ranks of one engine into dp attention groups, so dp must "
        "divide tp. Turning DP attention off would launch 3 engines on 24 GPUs; on 8 GPUs the "
        "operator picks a dp that divides 8.",
    ),
    Golden(
        "ep-not-dividing-tp",
        "EP",
        "qwen3-moe",
        {"tp_size": 8, "ep_size": 3},
        _each("ep_size", 2, 4, 8),
        "Experts are sharded over ep ranks inside the tp world: ep must divide tp. A DeepEP "
        "all-to-all backend would silently force ep = tp; the operator picks an ep dividing tp.",
    ),
    Golden(
        "prefill-cp-without-strategy",
        "CP",
        "qwen3-moe",
        {"tp_size": 8, "attn_cp_size": 2, "enable_prefill_cp": True},
        _each("cp_strategy", "zigzag", "interleave"),
        "--enable-prefill-cp needs --cp-strategy to say how a sequence is sharded; the "
        "answer is to name a strategy, not to switch on a legacy DSA-only alias.",
    ),
    Golden(
        "moe-dp-not-dividing-tp",
        "EP/MoE-DP",
        "deepseek-v3",
        {"tp_size": 8, "moe_dp_size": 3},
        ({"moe_dp_size": 1}, {"moe_dp_size": 2, "attn_cp_size": 2}),
        "MoE data parallelism must divide tp and, with attention CP, match its width; "
        "without CP the plain answer is moe_dp 1 (or a dividing width with matching CP), not "
        "switching on DWDP.",
    ),
    Golden(
        "dp-times-cp-exceeds-tp",
        "CP + DP attention",
        "qwen3-moe",
        {
            "tp_size": 8,
            "dp_size": 4,
            "enable_dp_attention": True,
            "attn_cp_size": 4,
            "enable_prefill_cp": True,
            "cp_strategy": "zigzag",
        },
        ({"attn_cp_size": 2}, {"dp_size": 2}),
        "attention dp x attention CP must divide tp; the user asked for both DP attention and "
        "prefill CP, so one of the two widths shrinks. Attention CP 1 would drop the CP the "
        "user asked for.",
    ),
    # --- CP on model families -----------------------------------------------------------
    Golden(
        "dsv32-cp-zigzag",
        "CP (DSA)",
        "deepseek-v3.2",
        {"tp_size": 8, "attn_cp_size": 8, "enable_prefill_cp": True, "cp_strategy": "zigzag"},
        _each("cp_strategy", "interleave"),
        "DeepSeek V3.2's sparse-attention CP supports only the interleave (round-robin) "
        "split: switch the strategy, keep CP.",
    ),
    Golden(
        "dsv32-cp-width-unset",
        "CP (DSA)",
        "deepseek-v3.2",
        {"tp_size": 8, "enable_prefill_cp": True},
        _each("cp_strategy", "interleave"),
        "Without --attn-cp-size, SGLang runs DeepSeek V3.2's prefill CP over the whole "
        "attention-TP group (attention CP 8 here, `_deepseek_family_overrides`): naming the "
        "interleave strategy is the whole fix; typing --attn-cp-size 2 with it would shrink "
        "the CP SGLang runs from 8 to 2.",
    ),
    Golden(
        "mimo-cp-multimodal",
        "CP (MiMo)",
        "mimo-v2-flash",
        {"tp_size": 8, "attn_cp_size": 2, "enable_prefill_cp": True, "cp_strategy": "zigzag"},
        ({"enable_prefill_cp": False},),
        "MiMo V2's CP path serves text only, and SGLang offers MiMo-V2-Flash no text-only mode "
        "(--language-only lists MiMoV2ForCausalLM, --language-model-only other models, "
        "LMO-ARCH): prefill CP gives way.",
    ),
    # --- decode CP ----------------------------------------------------------------------
    Golden(
        "dcp-not-dividing-attn-tp",
        "decode CP",
        "deepseek-v3",
        {"tp_size": 8, "dcp_size": 3},
        _each("dcp_size", 2, 4, 8),
        "Decode-CP groups are runs of dcp ranks inside an attention-TP group: dcp must divide "
        "attn_tp (8 here). Keep decode CP with a dividing width.",
    ),
    Golden(
        "dcp-backend-without-dcp",
        "decode CP",
        "deepseek-v3",
        {"tp_size": 8, "dcp_comm_backend": "a2a"},
        ({"dcp_comm_backend": None},),
        "--dcp-comm-backend only picks decode CP's reduction; the user did not turn decode CP "
        "on, so the stray flag goes (unset: SGLang picks ag_rs without decode CP) rather "
        "than decode CP appearing. Typing `--dcp-comm-backend ag_rs` instead keeps a flag "
        "that does nothing without decode CP.",
    ),
    # --- EPLB, DWDP, elastic EP ---------------------------------------------------------
    Golden(
        "eplb-without-ep",
        "EPLB",
        "deepseek-v3",
        {"tp_size": 8, "enable_eplb": True},
        _each("ep_size", 2, 4, 8),
        "EPLB rebalances experts across EP ranks, so it needs ep > 1; give it an EP width "
        "that divides tp (ep = tp is the usual large-scale choice) and keep EPLB.",
    ),
    Golden(
        "dwdp-not-equal-tp",
        "DWDP",
        "deepseek-v3",
        {"tp_size": 8, "dwdp_size": 4},
        _each("dwdp_size", 8),
        "DWDP groups span the whole engine: dwdp must equal tp. Changing tp would change the "
        "GPU count; set dwdp to 8.",
    ),
    Golden(
        "dwdp-with-eplb",
        "DWDP + EPLB",
        "deepseek-v3",
        {"tp_size": 8, "dwdp_size": 8, "enable_eplb": True},
        ({"enable_eplb": False}, {"dwdp_size": 1}),
        "DWDP and EPLB are exclusive; both are the user's, so one has to go. Either is an "
        "operator's answer; dropping the EPLB flag is the smaller change.",
    ),
    Golden(
        "max-ep-size-without-elastic-backend",
        "elastic EP",
        "deepseek-v3",
        {"tp_size": 8, "ep_size": 8, "max_ep_size": 16},
        _each("max_ep_size", None),
        "--max-ep-size is an elastic-EP bound and needs --elastic-ep-backend; the user did "
        "not turn elastic EP on, so the stray bound goes rather than elastic EP appearing.",
    ),
    # --- PP, model facts, topology --------------------------------------------------------
    Golden(
        "pp-beyond-layers",
        "PP",
        "dense-40-heads",
        {"tp_size": 2, "pp_size": 4},
        ({"tp_size": 4, "pp_size": 2}, {"pp_size": 2, "dp_size": 2}),
        "A 3-layer model cannot have 4 pipeline stages. Keep the 8 GPUs and the pipeline: "
        "two stages, with the width moved into tp (40 heads and 8 KV heads split 4 ways) or "
        "into two replicas that keep the user's tp 2.",
    ),
    Golden(
        "tp-beyond-heads",
        "topology (model heads)",
        "dense-40-heads",
        {"tp_size": 16},
        ({"tp_size": 8, "dp_size": 2},),
        "40 attention heads do not split 16 ways. Keep the 16 GPUs with two tp-8 replicas "
        "(dp 2 without DP attention); pipeline parallelism would be a feature not asked for.",
    ),
    Golden(
        "nnodes-not-dividing-ranks",
        "topology",
        "qwen3-moe",
        {"tp_size": 16, "nnodes": 3},
        ({"nnodes": 2}, {"nnodes": 4}),
        "Every node runs the same number of ranks: 16 ranks over 3 nodes do not split. Two "
        "nodes of 8 (or four of 4) keep the 16 GPUs.",
    ),
    Golden(
        "dsv3-example-dp-cp",
        "DP attention + CP (example)",
        "deepseek-v3",
        {
            "tp_size": 8,
            "dp_size": 3,
            "attn_cp_size": 2,
            "enable_dp_attention": True,
            "enable_prefill_cp": True,
            "cp_strategy": "zigzag",
        },
        ({"dp_size": 4}, {"dp_size": 2}),
        "The shipped dp-cp-conflict example on DeepSeek V3: dp x attention CP must divide 8; "
        "keep CP 2 and DP attention, move dp to a width that fits.",
    ),
    # --- issue 23: nodes, roles and chosen backends are the user's ------------------------
    Golden(
        "ranks-beyond-node-gpus",
        "topology (nodes)",
        "qwen3-moe",
        {"tp_size": 32, "nnodes": 2},
        _each("nnodes", 4),
        "32 ranks on two 8-GPU nodes put 16 ranks on each node: the ranks must fit the "
        "nodes' GPUs. The operator asks for four nodes; one node would hold 32 ranks on 8 "
        "GPUs, and a smaller tp would not use the 32 GPUs asked for.",
    ),
    Golden(
        "dwdp-on-pd-decode",
        "DWDP + PD role",
        "deepseek-v3",
        {"tp_size": 8, "dwdp_size": 8, "disaggregation_mode": "decode"},
        _each("dwdp_size", 1),
        "DWDP runs on a PD prefill server (or without PD); this server is the deployment's "
        "decode server, a role it keeps: DWDP goes, the role stays.",
    ),
    Golden(
        "flashinfer-a2a-dp-below-tp",
        "EP (all-to-all backend)",
        "deepseek-v3",
        {
            "tp_size": 8,
            "dp_size": 4,
            "enable_dp_attention": True,
            "moe_a2a_backend": "flashinfer",
            "moe_runner_backend": "flashinfer_cutlass",
        },
        _each("dp_size", 8),
        "FlashInfer's all-to-all needs DP attention over every rank (dp = tp). The user chose "
        "FlashInfer: the answer is dp 8, not a runner alias (megamoe) that swaps the "
        "all-to-all backend for another.",
    ),
    Golden(
        "flashinfer-a2a-without-dp-attention",
        "EP (all-to-all backend)",
        "deepseek-v3",
        {"tp_size": 8, "moe_a2a_backend": "flashinfer", "moe_runner_backend": "flashinfer_cutlass"},
        ({"attn_dp_size": 8}, {"enable_dp_attention": True, "dp_size": 8}),
        "FlashInfer's all-to-all needs DP attention over all 8 ranks (--attn-dp-size 8). "
        "DWDP would also give dp = tp, but it resets the all-to-all backend to none: the "
        "chosen FlashInfer backend would stop running.",
    ),
    Golden(
        "cutlass-runner-ep-below-tp",
        "EP (MoE runner)",
        "qwen3-moe",
        {"tp_size": 8, "ep_size": 4, "moe_runner_backend": "flashinfer_cutlass"},
        _each("ep_size", 8),
        "FlashInfer's CUTLASS MoE runner needs ep 1 or ep = tp. The user chose the runner and "
        "the 16-bit weights: the answer is ep 8, not `--quantization mxfp8` (another "
        "quantization, whose MXFP8 runner then replaces the chosen one) nor dropping the "
        "runner.",
    ),
)
