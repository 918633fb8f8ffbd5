"""A model's context length as SGLang derives it (`get_context_length`, 0.4.6.post5 to
0.5.23 alike: utils/hf_transformers/common.py in 0.5.23, hf_transformers_utils.py before).

Here, in the rule language's package, because it is a model fact the layout rules read
(`ModelSpec.max_context_length`, rule MODEL-CONTEXT-LENGTH) as well as what `plan` and the
memory verdict hold a request to (`meshsat.solver.perf.context`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: `CONTEXT_LENGTH_KEYS`, in SGLang's order of preference.
CONTEXT_KEYS = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)
#: SGLang's default where a config names none of them.
DEFAULT_CONTEXT = 2048


def context_length(config: Mapping[str, Any]) -> tuple[int, str]:
    """The context length and the key it came from: the text model's (a wrapper's
    `text_config`), times a `rope_scaling` factor unless the scaling names its original
    length or is Llama 3's."""
    text = config.get("text_config")
    text = text if isinstance(text, Mapping) else config
    scaling = text.get("rope_scaling")
    factor: float = 1
    if isinstance(scaling, Mapping) and scaling:
        given = scaling.get("factor", 1)
        factor = given if isinstance(given, int | float) and math.isfinite(given) else 1
        if "original_max_position_embeddings" in scaling or scaling.get("rope_type") == "llama3":
            factor = 1
    for key in CONTEXT_KEYS:
        value = text.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(factor * value), key
    return DEFAULT_CONTEXT, "SGLang's default"
