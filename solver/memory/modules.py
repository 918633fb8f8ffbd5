"""The linear modules of each decoder layer, named as SGLang's model code names them.

Why names: a quantization config says which modules stay 16-bit (`ignored_layers`,
`modules_to_not_convert`, `exclude_modules`, compressed-tensors' `ignore` and `targets`) by
module name, and SGLang's loaders decide per module by matching those names against the
prefix each layer is built with (`model.layers.3.self_attn.qkv_proj`, the fused name, whose
checkpoint shards are `q_proj`, `k_proj`, `v_proj`). `precision.py` prices each module of
this list; the weight model then charges each component (`weights.py`) at the
parameter-weighted mean over its modules and layers, which is exact for the whole model and
for one pipeline stage whenever the layers agree (they do unless a config names single
layers).

The names follow SGLang's model files: GQA models fuse `qkv_proj` and `gate_up_proj`;
DeepSeek-style MLA keeps `q_a_proj`, `q_b_proj`, `kv_a_proj_with_mqa`, `kv_b_proj`,
`o_proj` and the DSA indexer's `wq_b`, `wk`, `weights_proj`; the MoE block is `mlp`
(`block_sparse_moe` for Mixtral and MiniMax, `feed_forward` for Llama 4), its routed experts
one `FusedMoE` named `<block>.experts` and its shared expert `shared_experts` (DeepSeek,
GLM) or `shared_expert` (Qwen2-MoE, Llama 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from meshsat.solver.memory.facts import ModelFacts

#: The components `weights.py` charges separately, in `Quant`'s field names.
COMPONENTS: tuple[str, ...] = (
    "attention",
    "attention_whole",
    "linear_attention",
    "dense_mlp",
    "shared",
    "experts",
)

#: Where the decoder layers sit when not at `model.layers`: Qwen3.5 is built as Qwen3-VL
#: is (`models/qwen3_vl.py`: the text model at `model.language_model`).
_ROOTS = {"qwen3_5": "model.language_model.layers", "qwen3_5_moe": "model.language_model.layers"}
_BLOCK = {m: "block_sparse_moe" for m in ("mixtral", "minimax_m2", "minimax")}
_SHARED = {
    m: "shared_expert"
    for m in ("qwen2_moe", "qwen3_next", "qwen3_5_moe_text", "llama4_text", "llama4")
}


@dataclass(frozen=True)
class LinearModule:
    """One linear layer (or one `FusedMoE`) of one decoder layer."""

    component: str
    #: The prefix SGLang builds the module with.
    name: str
    #: Checkpoint modules fused into it (`q_proj`, `k_proj`, `v_proj` for `qkv_proj`);
    #: the module's own last name when it is not fused.
    shards: tuple[str, ...]
    params: int

    @property
    def is_experts(self) -> bool:
        return self.component == "experts"

    def shard_names(self) -> tuple[str, ...]:
        """The full checkpoint names of the fused shards."""
        head = self.name.rsplit(".", 1)[0]
        return tuple(f"{head}.{s}" for s in self.shards)


def _linear(component: str, name: str, params: int, *shards: str) -> LinearModule:
    return LinearModule(component, name, shards or (name.rsplit(".", 1)[-1],), params)


def model_modules(f: ModelFacts, model_type: str) -> list[LinearModule]:
    """The linear modules of every decoder layer (MTP layers excluded, as in the totals)."""
    flags = moe_layer_flags(f)
    return [m for i in range(f.num_layers) for m in layer_modules(f, model_type, i, bool(flags[i]))]


def layer_modules(f: ModelFacts, model_type: str, layer: int, moe: bool) -> list[LinearModule]:
    """The linear modules of decoder layer `layer` (an MoE layer when `moe`)."""
    h = f.hidden_size
    root = _ROOTS.get(model_type.split("_text")[0], "model.layers")
    if model_type.startswith("llama4"):
        root = "language_model.model.layers"
    attn = f"{root}.{layer}.self_attn"
    out: list[LinearModule] = []
    o_params = f.num_heads * f.v_head_dim * h
    if layer in f.linear_layer_ids:
        out += gdn_modules(f, f"{root}.{layer}.linear_attn")
    elif f.is_mla:
        qk = f.qk_nope_head_dim + f.qk_rope_head_dim
        if f.q_lora_rank:
            out.append(_linear("attention_whole", f"{attn}.q_a_proj", h * f.q_lora_rank))
            q_params = f.q_lora_rank * f.num_heads * qk
            out.append(_linear("attention", f"{attn}.q_b_proj", q_params))
        else:
            out.append(_linear("attention", f"{attn}.q_proj", h * f.num_heads * qk))
        kv_a = h * (f.kv_lora_rank + f.qk_rope_head_dim)
        out.append(_linear("attention_whole", f"{attn}.kv_a_proj_with_mqa", kv_a))
        kv_b = f.kv_lora_rank * f.num_heads * (f.qk_nope_head_dim + f.v_head_dim)
        out.append(_linear("attention", f"{attn}.kv_b_proj", kv_b))
    else:
        qkv = f.attn_sharded_params() - o_params
        out.append(_linear("attention", f"{attn}.qkv_proj", qkv, "q_proj", "k_proj", "v_proj"))
    if layer not in f.linear_layer_ids:
        out.append(_linear("attention", f"{attn}.o_proj", o_params))
    if f.index_head_dim:
        d, heads, idx = f.index_head_dim, f.index_n_heads, f"{attn}.indexer"
        out.append(_linear("attention_whole", f"{idx}.wq_b", (f.q_lora_rank or h) * heads * d))
        out.append(_linear("attention_whole", f"{idx}.wk", h * d))
        out.append(_linear("attention_whole", f"{idx}.weights_proj", h * heads))
    block = _BLOCK.get(model_type, "feed_forward" if model_type.startswith("llama4") else "mlp")
    block = f"{root}.{layer}.{block}"
    if not moe:
        i = f.intermediate_size
        out.append(_linear("dense_mlp", f"{block}.gate_up_proj", 2 * h * i, "gate_proj", "up_proj"))
        out.append(_linear("dense_mlp", f"{block}.down_proj", h * i))
        return out
    out.append(_linear("experts", f"{block}.experts", f.num_experts * f.expert_params()))
    if f.num_shared_experts:
        shared = f"{block}.{_SHARED.get(model_type, 'shared_experts')}"
        i = f.shared_expert_intermediate_size * f.num_shared_experts
        out.append(_linear("shared", f"{shared}.gate_up_proj", 2 * h * i, "gate_proj", "up_proj"))
        out.append(_linear("shared", f"{shared}.down_proj", h * i))
    return out


def gdn_modules(f: ModelFacts, prefix: str) -> list[LinearModule]:
    """A GatedDeltaNet layer's linears as SGLang builds them (`Qwen3GatedDeltaNet`): the
    merged `in_proj_qkvz` (Qwen3.5 checkpoints store `in_proj_qkv` and `in_proj_z`) and
    `in_proj_ba`, and `out_proj`. `conv1d` is built with no quantization config, so it is
    priced with the norms (`ModelFacts.linear_conv_params`)."""
    h = f.hidden_size
    key = f.linear_num_key_heads * f.linear_key_head_dim
    value = f.linear_num_value_heads * f.linear_value_head_dim
    qkvz = h * (2 * key + 2 * value)
    return [
        _linear("linear_attention", f"{prefix}.in_proj_qkvz", qkvz, "in_proj_qkv", "in_proj_z"),
        _linear(
            "linear_attention",
            f"{prefix}.in_proj_ba",
            h * 2 * f.linear_num_value_heads,
            "in_proj_b",
            "in_proj_a",
        ),
        _linear("linear_attention", f"{prefix}.out_proj", value * h),
    ]


def moe_layer_flags(f: ModelFacts) -> list[int]:
    """1 for each MoE layer, in order. Leading layers are dense (DeepSeek's
    `first_k_dense_replace`); Llama 4's interleaving puts MoE on every k-th layer."""
    if f.num_moe_layers == f.num_layers:
        return [1] * f.num_layers
    if f.num_moe_layers == 0:
        return [0] * f.num_layers
    dense = f.num_layers - f.num_moe_layers
    if f.num_layers % f.num_moe_layers == 0 and f.num_layers // f.num_moe_layers > 1:
        step = f.num_layers // f.num_moe_layers
        return [1 if (i + 1) % step == 0 else 0 for i in range(f.num_layers)]
    return [0] * dense + [1] * f.num_moe_layers
