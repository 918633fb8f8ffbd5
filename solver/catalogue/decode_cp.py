"""Decode context parallelism (seed: handle_dcp_validation)."""

from __future__ import annotations

from meshsat.solver.lang.derived import attn_tp, attn_tp_whole
from meshsat.solver.lang.expr import TRUE, divides, is_set, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

SRC = "handle_dcp_validation"
#: The model runner's group set-up (sglang/srt/distributed/parallel_state.py), at launch.
INIT_SRC = "initialize_model_parallel"
dcp, backend = F.dcp_size, F.dcp_comm_backend

RULES: tuple[Rule, ...] = (
    Rule(
        "DCP-MIN",
        TRUE,
        dcp >= 1,
        "Decode context parallel size (--dcp-size / --decode-context-parallel-size) must be "
        ">= 1, but got dcp_size={dcp_size}.",
        SRC,
    ),
    Rule(
        "DCP-BACKEND-NEEDS-DCP",
        one_of(backend, "a2a", "fi_a2a"),
        dcp > 1,
        "--dcp-comm-backend {dcp_comm_backend} only affects the decode context-parallel "
        "attention reduction and therefore requires --dcp-size / "
        "--decode-context-parallel-size > 1, but got dcp_size={dcp_size}.",
        SRC,
        hint="use --dcp-comm-backend ag_rs, or raise --dcp-size",
    ),
    Rule(
        "DCP-FI-A2A-CUDA",
        backend == "fi_a2a",
        F.platform == "cuda",
        "--dcp-comm-backend fi_a2a delegates the exchange to FlashInfer's MNNVL All-to-All "
        "kernel, which requires an NVIDIA CUDA platform with SM90+ and MNNVL fabric memory "
        "(e.g. GB200 NVL72). Use 'a2a' or 'ag_rs' on clusters without MNNVL.",
        SRC,
    ),
    Rule(
        "DCP-REPLICATE-Q",
        F.dcp_replicate_q_proj == True,  # noqa: E712 (unset is None: SGLang's default)
        (dcp > 1) & one_of(backend, "a2a", "fi_a2a"),
        "--dcp-replicate-q-proj requires --dcp-size > 1 and only applies to the a2a/fi_a2a "
        "DCP communication backend (it removes the head-dim Q all-gather); got "
        "--dcp-size {dcp_size} --dcp-comm-backend {dcp_comm_backend}.",
        SRC,
    ),
    # initialize_model_parallel (0.5.18 to 0.5.23) raises this when the model runner builds
    # the groups, after every ServerArgs check: a launch error (docs/rules.md §6).
    Rule(
        "DCP-TP-DIV",
        dcp > 1,
        divides(dcp, F.tp_size),
        "tensor_model_parallel_size ({tp_size}) must be divisible by "
        "decode_context_parallel_size ({dcp_size})",
        INIT_SRC,
        hint="choose a dcp_size that divides tp_size / (attention DP · attention CP)",
    ),
    # meshsat's advice in every pack (a warning; `enumerate` and `fix` still keep it):
    # SGLang's initialize_model_parallel cuts each TP group into runs of dcp_size ranks
    # and asserts only DCP-TP-DIV (the runs are whole), so a run crosses attention-TP groups, while
    # the KV stays sharded by position modulo dcp_size (docs/rules.md §5).
    Rule(
        "DCP-IN-ATTN-TP",
        # Where dcp_size does not divide tp_size, DCP-TP-DIV is SGLang's own error.
        (dcp > 1) & attn_tp_whole & divides(dcp, F.tp_size),
        divides(dcp, attn_tp),
        "dcp_size {dcp_size} does not divide the attention-TP width: SGLang cuts each TP "
        "group into runs of dcp_size ranks, so a decode-CP group spans attention-TP "
        "groups that serve different requests.",
        "dcp_size field documentation (SGLang does not assert it)",
        hint="choose a dcp_size that divides tp_size / (attention DP · attention CP)",
    ),
)


#: DeepSeek's DSA decode-CP override (handle_model_specific_adjustments, 0.5.23,
#: `_dsa_dcp_overrides`): DSA decode CP takes no HiCache nor HiSparse,
#: then serves no PD deployment, then drafts no EAGLE tree (DCP-DSA-TOPK).
DSA_DCP_HICACHE = Rule(
    "DCP-DSA-HICACHE",
    F.is_deepseek_dsa & (dcp > 1),
    ~F.enable_hierarchical_cache & ~F.enable_hisparse,
    "DSA DCP does not support HiSparse or HiCache.",
    "handle_model_specific_adjustments",
    hint="drop --enable-hierarchical-cache / --enable-hisparse, or --dcp-size",
)
DSA_DCP_PD = Rule(
    "DCP-DSA-PD",
    F.is_deepseek_dsa & (dcp > 1),
    F.disaggregation_mode == "null",
    "DSA DCP does not support PD disaggregation.",
    "handle_model_specific_adjustments",
    hint="drop --dcp-size, or serve this model without PD disaggregation",
)
#: The override's third check reads --speculative-eagle-topk as typed: it runs in the model
#: overrides, before the speculative handler picks or adjusts a top-k (R-SPEC-AUTO,
#: R-SPEC-DRAFT), so an unset top-k passes whatever the algorithm, and a typed one is asked
#: even without one (0.5.23's oracle: EAGLE or NEXTN with top-k 2 or 4 refused at dcp 2 and
#: 8, top-k 1 or unset taken; never on DeepSeek V3, not DSA).
DSA_DCP_TOPK = Rule(
    "DCP-DSA-TOPK",
    F.is_deepseek_dsa & (dcp > 1),
    ~is_set(F.speculative_eagle_topk.as_raw) | (F.speculative_eagle_topk.as_raw == 1),
    "DSA DCP requires --speculative-eagle-topk 1.",
    "handle_model_specific_adjustments",
    hint="--speculative-eagle-topk 1 (a draft chain, not a tree), or drop --dcp-size",
)

#: handle_model_specific_adjustments (0.5.23, its first check once the model config is
#: built): on an Ascend NPU only DeepSeek's sparse-attention models (V3.2, GLM-5) have a
#: decode-CP implementation. CUDA, ROCm and CPU take decode CP for any model at argument
#: time (0.5.23's resolution told it runs on each, measured: tests/test_dcp_platforms.py);
#: 0.5.18 and 0.5.19 have no platform check on decode CP.
NPU_DCP_DSA = Rule(
    "DCP-NPU-DSA",
    (F.platform == "npu") & (dcp > 1),
    F.is_deepseek_dsa,
    "NPU decode context parallelism is currently implemented only for DeepSeek DSA models; "
    "got {architecture}. Set --decode-context-parallel-size=1 or use a DSA model.",
    "handle_model_specific_adjustments",
    hint="--dcp-size 1 (on an NPU only DeepSeek V3.2 / GLM-5 run decode CP)",
)
