"""Bytes per weight of each component of a model, from its checkpoint's quantization.

Why per component: `weights.py` divides each component by the width SGLang shards it over,
so it asks "how many bytes does one weight of this component cost, scales included". The
answer follows the checkpoint, not the family: `precision.py` prices every linear module by
the name SGLang's loader matches against the config's skip lists and schemes, and the
component's figure is the parameter-weighted mean over its modules and layers. Embeddings,
the LM head, routers and norms stay in the model's 16-bit dtype under every modelled scheme.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from meshsat.solver.errors import InputError
from meshsat.solver.memory.modules import COMPONENTS, LinearModule, model_modules
from meshsat.solver.memory.precision import MODELLED_METHODS, scheme_of

__all__ = [
    "BF16",
    "DTYPE_BYTES",
    "MODELLED_METHODS",
    "SERVED_DTYPE_BYTES",
    "Quant",
    "kv_dtype_bytes",
    "quant_from_config",
]

if TYPE_CHECKING:
    from meshsat.solver.memory.facts import ModelFacts

#: Bytes of one element for `--kv-cache-dtype` and for unquantized weights.
DTYPE_BYTES: Mapping[str, float] = {
    "bfloat16": 2.0,
    "bf16": 2.0,
    "float16": 2.0,
    "fp16": 2.0,
    "half": 2.0,
    "float32": 4.0,
    "fp32": 4.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "fp8": 1.0,
    "fp4_e2m1": 0.5,
}


@dataclass(frozen=True)
class Quant:
    """Bytes per weight of a linear layer in each component, scales included."""

    name: str
    attention: float = 2.0
    dense_mlp: float = 2.0
    experts: float = 2.0
    #: Embeddings, LM head, routers and norms: never quantized by the modelled schemes.
    unquantized: float = 2.0
    #: Attention linears every attention-TP rank holds whole (MLA down-projections, the DSA
    #: indexer); None: as `attention`.
    attention_whole: float | None = None
    #: Shared experts; None: as `dense_mlp`.
    shared: float | None = None
    #: GatedDeltaNet linears (`modules.gdn_modules`); None: as `attention`.
    linear_attention: float | None = None
    #: The routed experts are WNA16 (compressed-tensors integer weights, 16-bit
    #: activations): the MoE method allocates per-expert `g_idx` buffers (`weights.py`).
    wna16_experts: bool = False
    #: MLA's `kv_b_proj`, bytes per weight (None: no such module, or priced without facts),
    #: and whether the scheme dequantizes it before splitting (AWQ/GPTQ): the width of the
    #: absorbed copies SGLang keeps beside it (`mla.py`).
    kv_b: float | None = None
    kv_b_dequantized: bool = False

    @property
    def attention_whole_bytes(self) -> float:
        return self.attention if self.attention_whole is None else self.attention_whole

    @property
    def linear_attention_bytes(self) -> float:
        return self.attention if self.linear_attention is None else self.linear_attention

    @property
    def shared_bytes(self) -> float:
        return self.dense_mlp if self.shared is None else self.shared


BF16 = Quant("bf16")


#: SGLang's `--dtype` choices other than `auto` (`_STR_DTYPE_TO_TORCH_DTYPE`), as bytes.
SERVED_DTYPE_BYTES: Mapping[str, float] = {
    "half": 2.0,
    "float16": 2.0,
    "bfloat16": 2.0,
    "float": 4.0,
    "float32": 4.0,
}


def served_bytes(hf: Mapping[str, Any], dtype: str | None = None) -> float:
    """Bytes of an unquantized weight as SGLang serves the checkpoint
    (`_get_and_verify_dtype`, 0.4.6.post5 to 0.5.23): `--dtype auto` (None) keeps the
    config's dtype but serves a float32 (or unnamed) one in float16 (bfloat16 for Gemma),
    2 bytes either way; any other choice is that dtype, an upcast to float32 included (the
    KV cache's `auto` follows it: `kv_dtype_bytes`)."""
    if dtype not in (None, "auto"):
        try:
            return SERVED_DTYPE_BYTES[str(dtype)]
        except KeyError:
            choices = ", ".join(("auto", *SERVED_DTYPE_BYTES))
            raise InputError(f"unknown dtype {dtype!r}; SGLang's --dtype takes {choices}") from None
    config = hf.get("torch_dtype") or hf.get("dtype") or "bfloat16"
    return min(DTYPE_BYTES.get(str(config), 2.0), 2.0)


def quant_from_config(
    hf: Mapping[str, Any], facts: ModelFacts | None = None, dtype: str | None = None
) -> Quant:
    """The `Quant` of a Hugging Face config, from `quantization_config`, `expert_dtype` and
    `torch_dtype`: each component's bytes per weight is the parameter-weighted mean of its
    modules' prices (`precision.py`) over the model's layers (`modules.py`). Without
    `facts`, one generic layer of each kind stands in (equal weights).

    A `quant_method` that is not modelled raises `InputError` rather than guessing.
    `dtype`: SGLang's `--dtype` (`served_bytes`), what unquantized weights are served in.
    """
    base = served_bytes(hf, dtype)
    scheme = scheme_of(hf, base)
    modules = _GENERIC if facts is None else model_modules(facts, str(hf.get("model_type", "")))
    num = dict.fromkeys(COMPONENTS, 0.0)
    den = dict.fromkeys(COMPONENTS, 0.0)
    for m in modules:
        num[m.component] += m.params * scheme.price(m)
        den[m.component] += m.params
    per = {c: num[c] / den[c] if den[c] else base for c in COMPONENTS}
    if not den["attention_whole"]:
        per["attention_whole"] = per["attention"]
    if not den["shared"]:
        per["shared"] = per["dense_mlp"]
    if not den["linear_attention"]:
        per["linear_attention"] = per["attention"]
    wna16 = any(scheme.wna16(m) for m in modules if m.is_experts)
    kv_b = next((scheme.price(m) for m in modules if m.name.endswith(".kv_b_proj")), None)
    return Quant(
        scheme.name,
        unquantized=base,
        wna16_experts=wna16,
        kv_b=kv_b,
        kv_b_dequantized=scheme.name.startswith("int") and kv_b is not None and kv_b < base,
        **per,
    )


#: One layer of each kind, for `quant_from_config` without facts.
_GENERIC = [
    LinearModule(
        "attention", "model.layers.0.self_attn.qkv_proj", ("q_proj", "k_proj", "v_proj"), 3
    ),
    LinearModule("attention", "model.layers.0.self_attn.o_proj", ("o_proj",), 1),
    LinearModule("dense_mlp", "model.layers.0.mlp.gate_up_proj", ("gate_proj", "up_proj"), 2),
    LinearModule("dense_mlp", "model.layers.0.mlp.down_proj", ("down_proj",), 1),
    LinearModule("experts", "model.layers.1.mlp.experts", ("experts",), 1),
    LinearModule(
        "shared", "model.layers.1.mlp.shared_experts.gate_up_proj", ("gate_proj", "up_proj"), 2
    ),
    LinearModule("shared", "model.layers.1.mlp.shared_experts.down_proj", ("down_proj",), 1),
]


def kv_dtype_bytes(kv_cache_dtype: str | None, model_dtype_bytes: float = 2.0) -> float:
    """Bytes per KV element for SGLang's `--kv-cache-dtype` (`auto` follows the model)."""
    if kv_cache_dtype in (None, "auto"):
        return model_dtype_bytes
    try:
        return DTYPE_BYTES[kv_cache_dtype]
    except KeyError:
        raise InputError(
            f"unknown kv_cache_dtype {kv_cache_dtype!r}; known: auto, " + ", ".join(DTYPE_BYTES)
        ) from None
