"""Elastic expert parallelism (seed: handle_elastic_ep).

Scaling is active when a backend is set and max_ep_size exceeds tp_size; a *scale
joiner* is a group joining a running deployment, the *primary* is the one it joins.
"""

from __future__ import annotations

from meshsat.solver.lang.derived import elastic_scaling
from meshsat.solver.lang.expr import FALSE, is_set, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

SRC = "handle_elastic_ep"
backend, join, offset = F.elastic_ep_backend, F.ep_join_mode, F.ep_join_rank_offset
joiner = elastic_scaling & (join == "scale")
primary = elastic_scaling & (join != "scale")


def _scale(rule_id: str, holds: object, message: str, hint: str = "") -> Rule:
    """A requirement of runtime scale-up, which applies to primaries and joiners alike."""
    from meshsat.solver.lang.expr import lift

    return Rule(rule_id, elastic_scaling, lift(holds), message, SRC, hint=hint)


RULES: tuple[Rule, ...] = (
    Rule(
        "EEP-REJOIN-DEPRECATED",
        F.elastic_ep_rejoin.as_raw & ~is_set(join.as_raw),
        FALSE,
        "--elastic-ep-rejoin is deprecated, use --elastic-ep-join-mode recover instead.",
        SRC,
        severity="warning",
    ),
    Rule(
        "EEP-REJOIN-CONFLICT",
        F.elastic_ep_rejoin & is_set(join.as_raw),
        join.as_raw == "recover",
        "--elastic-ep-rejoin (deprecated) conflicts with --elastic-ep-join-mode {ep_join_mode}.",
        SRC,
    ),
    Rule(
        "EEP-EPLB-ALGO",
        is_set(backend) & F.enable_eplb,
        one_of(F.eplb_algorithm, "elasticity_aware", "elasticity_aware_hierarchical"),
        "Elastic EP requires eplb_algorithm to be set to 'auto' or "
        "'elasticity_aware(_hierarchical)'.",
        SRC,
    ),
    Rule(
        "EEP-PP1",
        is_set(backend),
        F.pp_size == 1,
        "PP size should be set to 1 under elastic EP",
        SRC,
    ),
    Rule(
        "EEP-JOIN-NEEDS-BACKEND",
        is_set(join),
        is_set(backend),
        "--elastic-ep-join-mode requires --elastic-ep-backend to be set.",
        SRC,
    ),
    Rule(
        "EEP-SCALE-NODE",
        join == "scale",
        (F.node_rank == 1) & (offset > 0),
        "Elastic EP scale-up requires one joining TP group at --node-rank 1 (got "
        "{node_rank}), and scale joiners require --elastic-ep-join-rank-offset set to the "
        "current effective EP size.",
        SRC,
    ),
    Rule(
        "EEP-OFFSET",
        offset != 0,
        (join == "scale") & (offset >= 0),
        "--elastic-ep-join-rank-offset is only valid with --elastic-ep-join-mode scale, "
        "and the offset must be >= 0.",
        SRC,
    ),
    Rule(
        "EEP-MAX",
        is_set(F.max_ep_size),
        is_set(backend) & (F.max_ep_size > 0),
        "--max-ep-size requires --elastic-ep-backend to be set and must be a positive integer.",
        SRC,
    ),
    Rule(
        "EEP-INIT-ONLY-SCALING",
        is_set(F.elastic_ep_initial_size.as_raw),
        elastic_scaling,
        "--elastic-ep-initial-size is only valid for an Elastic EP deployment with "
        "--max-ep-size larger than its local TP size.",
        SRC,
    ),
    _scale(
        "EEP-TIMEOUT",
        F.elastic_ep_scale_timeout > 0,
        "--elastic-ep-scale-timeout must be greater than zero.",
    ),
    _scale(
        "EEP-TOKENIZER",
        F.tokenizer_worker_num == 1,
        "Elastic EP runtime scale-up currently requires --tokenizer-worker-num 1.",
    ),
    _scale("EEP-NO-RAY", ~F.use_ray, "Elastic EP runtime scale-up does not support --use-ray."),
    _scale(
        "EEP-NO-BACKUP",
        ~F.enable_elastic_expert_backup,
        "Elastic EP runtime scale-up does not support --enable-elastic-expert-backup.",
    ),
    Rule(
        "EEP-JOIN-INIT",
        joiner,
        is_set(F.elastic_ep_initial_size) & (F.elastic_ep_initial_size <= offset),
        "Elastic EP scale joiners require --elastic-ep-initial-size set to the primary "
        "deployment's launch-time EP size, which cannot exceed the current EP size "
        "(initial={elastic_ep_initial_size}, current={ep_join_rank_offset}).",
        SRC,
    ),
    Rule(
        "EEP-JOIN-TARGET",
        joiner,
        offset + F.tp_size <= F.max_ep_size,
        "Elastic EP joining group exceeds --max-ep-size (join_target = "
        "ep_join_rank_offset + tp_size, max_ep_size={max_ep_size}).",
        SRC,
    ),
    Rule(
        "EEP-JOIN-TP1",
        joiner & (F.tp_size == 1),
        is_set(F.moe_dense_tp_size) & (F.moe_dense_tp_size == 1),
        "A single-rank Elastic EP joining group requires --moe-dense-tp-size 1.",
        SRC,
    ),
    Rule(
        "EEP-PRIMARY-INIT",
        primary,
        is_set(F.elastic_ep_initial_size) & (F.elastic_ep_initial_size == F.tp_size),
        "The primary --elastic-ep-initial-size must equal its launch-time TP size ({tp_size}).",
        SRC,
    ),
    _scale(
        "EEP-LB",
        # handle_load_balance_method (before this handler) resolves auto to round_robin,
        # or to follow_bootstrap_room on a PD prefill server.
        (F.load_balance_method == "round_robin")
        | ((F.load_balance_method == "auto") & (F.disaggregation_mode != "prefill")),
        "Elastic EP scale-up requires --load-balance-method round_robin; load-aware methods "
        "require global-rank load snapshots after scale (got {load_balance_method}).",
    ),
    _scale(
        "EEP-MOONCAKE",
        backend == "mooncake",
        "Elastic EP runtime scale-up requires --elastic-ep-backend mooncake (got "
        "elastic_ep_backend={elastic_ep_backend}).",
    ),
    _scale(
        "EEP-SCALE-PP1",
        F.pp_size == 1,
        "Elastic EP scale-up requires --pp-size 1 (got pp_size={pp_size}); WORLD must not "
        "span PP stages.",
    ),
    _scale(
        "EEP-NO-GRAPHS",
        (F.disable_cuda_graph | F.disable_decode_cuda_graph)
        & (F.disable_cuda_graph | F.disable_prefill_cuda_graph),
        "Elastic EP runtime scale-up requires decode and prefill CUDA graphs to be disabled.",
        hint="add --disable-cuda-graph",
    ),
    _scale(
        "EEP-DPATTN",
        F.enable_dp_attention,
        "Elastic EP scale-up requires --enable-dp-attention; without it the TP group is not "
        "equivalent to WORLD and the post-scale collective path is invalid.",
    ),
    _scale(
        "EEP-DP-LM-HEAD",
        F.enable_dp_lm_head,
        "Elastic EP scale-up requires --enable-dp-lm-head so output projection does not "
        "depend on the joining group's TP size.",
    ),
    _scale(
        "EEP-CP1",
        F.attn_cp_size == 1,
        "Elastic EP scale-up requires --attn-cp-size 1 (got attn_cp_size={attn_cp_size}).",
    ),
    _scale(
        "EEP-MOEDP1",
        F.moe_dp_size == 1,
        "Elastic EP scale-up requires --moe-dp-size 1 (got moe_dp_size={moe_dp_size}).",
    ),
    _scale(
        "EEP-EP-EQ-TP",
        F.ep_size == F.tp_size,
        "Elastic EP scale-up requires ep_size == tp_size (got ep_size={ep_size}, "
        "tp_size={tp_size}); EP, TP and the attention DP group must all coincide with "
        "WORLD.",
    ),
    _scale(
        "EEP-DP-EQ-TP",
        F.dp_size == F.tp_size,
        "Elastic EP scale-up requires dp_size == tp_size (got dp_size={dp_size}, "
        "tp_size={tp_size}).",
    ),
    _scale(
        "EEP-A2A-NIXL",
        F.moe_a2a_backend == "nixl",
        "Elastic EP scale-up requires --moe-a2a-backend nixl (got "
        "moe_a2a_backend={moe_a2a_backend}).",
    ),
)
