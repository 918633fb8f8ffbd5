"""What a model's shape allows (active only when a model config is given)."""

from __future__ import annotations

from meshsat.solver.lang.derived import attn_tp, attn_tp_whole
from meshsat.solver.lang.expr import divides, is_set
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

SRC = "model weight sharding"

#: Where the model class builds attention over all of TP whatever DP attention says
#: (`attention_over_tp`: llama.py asserts `total_num_heads % tp_size == 0`) and that is
#: wider than attention TP: its heads split over TP.
_OVER_TP = F.attention_over_tp & (attn_tp != F.tp_size)

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
        "MODEL-HEADS-TP",
        is_set(F.num_attention_heads) & is_set(F.num_key_value_heads) & _OVER_TP,
        divides(F.tp_size, F.num_attention_heads)
        & (divides(F.tp_size, F.num_key_value_heads) | divides(F.num_key_value_heads, F.tp_size)),
        "this model class splits attention over all of TP even under DP attention: "
        "num_attention_heads ({num_attention_heads}) must be divisible by tp_size ({tp_size}), "
        "and num_key_value_heads ({num_key_value_heads}) must divide or be divisible by it",
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
