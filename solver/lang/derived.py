"""Derived widths: what SGLang computes from the resolved sizes.

Each is a named expression, so rules read `attn_tp` by name in messages while every
back-end evaluates its body. The GPU count is shown both with and without DP
attention because that difference is the commonest confusion: without DP attention
`dp_size` launches independent replicas and multiplies the GPUs used.
"""

from __future__ import annotations

from meshsat.solver.lang.expr import Named, divides, is_set, ite, named
from meshsat.solver.lang.fields import F

attn_dp = named("attn_dp", ite(F.enable_dp_attention, F.dp_size, 1))
#: Independent engines: `dp_size` launches replicas only without DP attention.
replicas = named("replicas", ite(F.enable_dp_attention, 1, F.dp_size))
attn_tp = named("attn_tp", F.tp_size // (attn_dp * F.attn_cp_size))
#: The condition that makes `attn_tp` whole; rules state it unnamed so that a failure
#: shows its arithmetic ("tp_size = 8 is not divisible by ...").
attn_tp_whole = divides(attn_dp * F.attn_cp_size, F.tp_size)
moe_tp = named("moe_tp", F.tp_size // (F.ep_size * F.moe_dp_size))
engine_world = named("engine_world", F.tp_size * F.pp_size)
gpus_with_dp_attention = named("gpus_with_dp_attention", F.tp_size * F.pp_size)
gpus_without_dp_attention = named("gpus_without_dp_attention", F.dp_size * F.tp_size * F.pp_size)
gpus_used = named(
    "gpus_used", ite(F.enable_dp_attention, gpus_with_dp_attention, gpus_without_dp_attention)
)
cp_active = named(
    "cp_active",
    F.enable_prefill_cp & (F.attn_cp_size > 1) & is_set(F.cp_strategy),
)
elastic_scaling = named(
    "elastic_scaling",
    is_set(F.elastic_ep_backend) & is_set(F.max_ep_size) & (F.max_ep_size > F.tp_size),
)

#: What a report shows, in this order.
DERIVED: tuple[Named, ...] = (
    attn_dp,
    attn_tp,
    moe_tp,
    replicas,
    engine_world,
    gpus_used,
    gpus_with_dp_attention,
    gpus_without_dp_attention,
    cp_active,
    elastic_scaling,
)
