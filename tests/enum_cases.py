"""Shared inputs and cached reference answers for the enumeration tests.

The brute-force reference is the expensive part of the suite (millions of validated
candidates over every N), so each (N, model) is computed once per session and every
filter test (`where`, `intra_node`) filters the same cached answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from functools import cache
from typing import Any

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.enumeration.where import parse
from meshsat.solver.groups import Widths
from meshsat.solver.lang.expr import Expr
from meshsat.solver.lang.model_spec import ModelSpec
from tests.reference.bruteforce import Found, brute_force, locality

#: Every N of the issue: 1..64, then 96, 128 and 384.
NS: tuple[int, ...] = (*range(1, 65), 96, 128, 384)

MODELS: dict[str, ModelSpec] = {
    # MLA, CP-v2 by default, prefill CP forces DeepEP with ep = tp (R-CP-MLA).
    "deepseek-v3": ModelSpec(
        architecture="DeepseekV3ForCausalLM",
        num_attention_heads=128,
        num_key_value_heads=128,
        num_experts=256,
        num_hidden_layers=61,
    ),
    # GQA with 4 KV heads (split or replicated), 128 experts.
    "qwen3-moe": ModelSpec(
        architecture="Qwen3MoeForCausalLM",
        num_attention_heads=64,
        num_key_value_heads=4,
        num_experts=128,
        num_hidden_layers=94,
    ),
    # Sparse attention: CP only on one machine, interleave only (R-CP-DSA, CP-DSA-TP8).
    "deepseek-v3.2": ModelSpec(
        architecture="DeepseekV32ForCausalLM",
        is_deepseek_dsa=True,
        num_attention_heads=128,
        num_key_value_heads=128,
        num_experts=256,
        num_hidden_layers=61,
    ),
    # MiMo V2 with a vision tower: CP-v2 needs zigzag and text-only serving.
    "mimo-v2-flash": ModelSpec(
        architecture="MiMoV2FlashForCausalLM",
        is_multimodal=True,
        num_attention_heads=64,
        num_key_value_heads=8,
        num_experts=256,
        num_hidden_layers=48,
    ),
    # Dense, odd head count, three layers: pp is capped.
    "dense-40-heads": ModelSpec(
        architecture="LlamaForCausalLM",
        num_attention_heads=40,
        num_key_value_heads=8,
        num_hidden_layers=3,
    ),
}

#: The model of the full N sweep.
SWEEP_MODEL = "deepseek-v3"

WHERE: tuple[str, ...] = ("attn_tp <= 8 and pp in (1, 2)", "ep >= 2 or cp_strategy == 'interleave'")
WHERE_MODEL: tuple[str, ...] = ("attn_tp >= 2", "moe_a2a_backend == 'deepep' or pp <= 2")


def model(name: str | None) -> ModelSpec | None:
    return None if name is None else MODELS[name]


@cache
def oracle(n: int, model_name: str | None = None, up_to: bool = False) -> tuple[Found, ...]:
    return tuple(brute_force(n, model=model(model_name), up_to=up_to))


@cache
def oracle_for(
    n: int, model_name: str | None, base: tuple[tuple[str, Any], ...], vary: tuple[str, ...]
) -> tuple[Found, ...]:
    return tuple(brute_force(n, dict(base), model(model_name), vary))


def where_filter(found: Iterable[Found], texts: Iterable[str | Expr]) -> set[tuple[Any, ...]]:
    exprs = [parse(t) if isinstance(t, str) else t for t in texts]
    return {f.values for f in found if all(evaluate(e, f.env) for e in exprs)}


def intra_filter(
    found: Iterable[Found], kinds: Iterable[str], gpus_per_node: int
) -> set[tuple[Any, ...]]:
    """Keep layouts whose groups stay in a node, per `groups.plan` (gpus_per_node is
    read by no rule, so the valid set is the same for every node size)."""
    kinds = tuple(kinds)
    keep = set()
    for f in found:
        widths = dataclasses.replace(Widths.of(f.resolved), gpus_per_node=gpus_per_node)
        local = locality(widths)
        if all(local[k] for k in kinds):
            keep.add(f.values)
    return keep
