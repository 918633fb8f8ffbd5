"""What a model's shape allows (active only when a model config is given)."""

from __future__ import annotations

from meshsat.solver.lang.derived import attn_tp, attn_tp_whole
from meshsat.solver.lang.expr import divides, is_set
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

SRC = "model weight sharding"

RULES: tuple[Rule, ...] = (
    Rule(
        "MODEL-HEADS",
        is_set(F.num_attention_heads) & attn_tp_whole,
        divides(attn_tp, F.num_attention_heads),
        "num_attention_heads ({num_attention_heads}) must be divisible by the attention TP "
        "width attn_tp",
        SRC,
    ),
    Rule(
        "MODEL-KV-HEADS",
        is_set(F.num_key_value_heads) & attn_tp_whole,
        divides(attn_tp, F.num_key_value_heads) | divides(F.num_key_value_heads, attn_tp),
        "num_key_value_heads ({num_key_value_heads}) must divide or be divisible by the "
        "attention TP width attn_tp (KV heads are split or replicated)",
        SRC,
    ),
    Rule(
        "MODEL-EXPERTS",
        is_set(F.num_experts),
        divides(F.ep_size, F.num_experts),
        "num_experts ({num_experts}) must be divisible by ep_size ({ep_size})",
        SRC,
    ),
    Rule(
        "MODEL-PP-LAYERS",
        is_set(F.num_hidden_layers),
        F.pp_size <= F.num_hidden_layers,
        "pp_size ({pp_size}) cannot exceed num_hidden_layers ({num_hidden_layers})",
        SRC,
    ),
)
