"""Model facts the memory model needs, read from a Hugging Face `config.json`.

Why one reader: key spellings differ between families (`n_routed_experts` for DeepSeek,
`num_local_experts` for Mixtral, `text_config` wrappers for multimodal models), and the
layout rules' `ModelSpec` reads a subset of the same facts. `ModelSpec` keeps its own
small reader for the rule facts; this module reads everything memory needs and reuses
`ModelSpec`'s key tuples so the spellings live in one place.

Parameter counts are exact sums over the modules a checkpoint stores (weights, biases,
norms), per component, so the per-rank split in `weights.py` can divide each component
by the width SGLang shards it over. Multi-token-prediction layers (`num_nextn_predict_layers`)
are not in the totals or the weights: SGLang loads them only for speculative decoding, and
most published totals (671 B for DeepSeek-V3) exclude them; `mtp_params` counts them for
the figures that include them (GLM-4.5's 355 B). A vision tower (Llama 4's `vision_config`)
is in the total, since SGLang loads it with the language model, but not in the active
count, which is per text token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.lang.limits import MAX_MODEL_POSITIONS, check_model_sizes, shown
from meshsat.solver.lang.model_spec import (
    _EXPERTS,
    _HEADS,
    _KV_HEADS,
    _LAYERS,
    VISION_NEEDS_MULTIMODAL_ARCHITECTURES,
    Fusion,
    shared_experts_fusion,
)
from meshsat.solver.memory.multimodal import (
    text_by_default,
    vision_fraction_factor,
    wraps_language_model,
)
from meshsat.solver.memory.quant import BF16, Quant, quant_from_config

#: Vocabulary rows are padded to a multiple of this (SGLang's `VocabParallelEmbedding`).
VOCAB_PAD = 64


@dataclass(frozen=True)
class VisionTower:
    """Llama 4's vision encoder, adapter and projector, from `vision_config` (zero when the
    config has none). Split by how SGLang's `sglang/srt/models/mllama4.py` shards it:
    `VisionAttention` over attention TP, the encoder and adapter MLPs and the patch
    embedding (`ColumnParallelLinear`/`RowParallelLinear`) over TP, the rest replicated
    (norms, class and position embeddings, row-parallel biases, and the
    `multi_modal_projector`, a plain `nn.Linear`). Kimi-K2.5's MoonViT
    (`sglang/srt/models/kimi_k25.py`) shards only its `VisionAttention`; its MLPs and the
    patch-merger projector are `ReplicatedLinear` (`mlp_replicated`)."""

    hidden: int = 0
    layers: int = 0
    intermediate: int = 0
    patch_inputs: int = 0  # channels × patch_size²
    positions: int = 0  # (image_size / patch_size)² + 1 (the class token)
    adapter_in: int = 0  # projector_input_dim
    adapter_out: int = 0  # projector_output_dim
    projector: int = 0  # vision_output_dim × the text hidden size
    #: The encoder MLPs and patch embedding are whole on every rank (MoonViT).
    mlp_replicated: bool = False
    #: A patch merger's linears split over TP (Qwen3.5's `Qwen3VLMoeVisionPatchMerger`:
    #: column- then row-parallel, with biases); 0 for the other towers.
    merger: int = 0
    #: The MLPs, patch embedding and merger split over attention TP, not TP (0.5.23's
    #: `qwen3_vl.py`: `_resolve_vision_parallel_group` gives "attn_tp"), so whole on every
    #: rank under DP attention at attention TP 1, as SGLang's own build shows
    #: (tests/test_weight_bytes.py). Read from pack 0.5.23 on (`WeightModel`).
    mlp_over_attn_tp: bool = False
    #: Built only with `--enable-multimodal` (`model_spec.VISION_NEEDS_MULTIMODAL_ARCHITECTURES`:
    #: Llama 4, from 0.5.18). Read by `WeightModel`.
    needs_multimodal: bool = False

    def attn_sharded_params(self) -> int:
        d = self.hidden
        return self.layers * (4 * d * d + 3 * d)  # q, k, v, o and the q, k, v biases

    def _mlp_params(self) -> int:
        d, i = self.hidden, self.intermediate
        encoder = self.layers * (2 * d * i + i)  # fc1 (with bias), fc2
        adapter = i * self.adapter_in + self.adapter_in * self.adapter_out
        return encoder + adapter + self.patch_inputs * d + self.merger

    def mlp_sharded_params(self) -> int:
        return 0 if self.mlp_replicated else self._mlp_params()

    def replicated_params(self) -> int:
        d = self.hidden
        per_layer = d + d + 4 * d  # o_proj and fc2 biases, two LayerNorms
        whole = self._mlp_params() if self.mlp_replicated else 0
        return self.layers * per_layer + d + self.positions * d + 4 * d + self.projector + whole

    def params(self) -> int:
        return self.attn_sharded_params() + self.mlp_sharded_params() + self.replicated_params()


@dataclass(frozen=True)
class ModelFacts:
    """What the memory model reads from a config; sizes in elements, never bytes."""

    architecture: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    #: Dense MLP width (dense layers and dense models); 0 when every layer is MoE.
    intermediate_size: int
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    #: When SGLang fuses the shared expert into the routed MoE (`weights.shared_width`).
    shared_experts_fusion: Fusion | None = None
    #: Layers that are MoE (the rest use the dense MLP).
    num_moe_layers: int = 0
    #: MLA: 0 when the model uses GQA/MHA.
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    #: DeepSeek sparse attention indexer (V3.2): 0 when absent.
    index_head_dim: int = 0
    index_n_heads: int = 0
    #: Layers with a sliding window (their KV is still counted in full; see kv.py).
    num_sliding_layers: int = 0
    sliding_window: int = 0
    #: SGLang's `ModelConfig.sliding_window_size`: the first of `sliding_window_size`,
    #: `sliding_window`, `window_size` the text config has; and Llama 4's
    #: `attention_chunk_size`. `kv.swa_window` reads the window a request needs from them.
    sliding_window_size: int = 0
    attention_chunk_size: int = 0
    #: The layers SGLang's hybrid SWA pool keeps in its sliding-window pool when the
    #: release uses one for this architecture (`get_hybrid_layer_ids`): `layer_types`'
    #: sliding layers, MiMo-V2's `hybrid_layer_pattern` ones, Llama 4's chunked layers.
    swa_layer_ids: tuple[int, ...] = ()
    #: SWA-layer KV shapes where they differ from the full layers' (MiMo-V2); 0: as full.
    swa_num_kv_heads: int = 0
    swa_head_dim: int = 0
    swa_v_head_dim: int = 0
    #: GatedDeltaNet (linear-attention) layers of a Qwen3-Next / Qwen3.5 hybrid (`layer_types`'
    #: `linear_attention`, or every layer but each `full_attention_interval`-th): they hold
    #: no KV, but a per-request state (`state.py`), and their own projections.
    linear_layer_ids: tuple[int, ...] = ()
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    #: Bytes of one SSM (temporal) state element: `mamba_ssm_dtype`, float32 by default.
    linear_state_bytes: int = 4
    #: Qwen3-Next's gated full attention: `qkv_proj` outputs a gate as wide as q.
    attn_output_gate: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: str = ""  # "", "head" (per head dim) or "full" (whole projection)
    expert_bias: bool = False
    router_bias: bool = False
    attention_sinks: bool = False
    quant: Quant = field(default=BF16)
    #: Multi-token-prediction (nextn) layers the checkpoint has (`num_nextn_predict_layers`).
    num_nextn_layers: int = 0
    vision: VisionTower = field(default=VisionTower())
    #: What decides SGLang's `ModelConfig.is_multimodal` beside the architecture: the
    #: language model sits in a sub-config, the release serves the config as text by
    #: default; and what it multiplies its default `mem_fraction_static` by for a
    #: multimodal model (`multimodal.py`).
    multimodal_wrapper: bool = False
    multimodal_text_by_default: bool = False
    #: The config's own `language_model_only` key (no flag turns it off).
    language_model_only: bool = False
    vision_fraction_factor: float = 1.0
    #: Elements of the rotary cos/sin caches (`RotaryEmbedding.cos_sin_cache`, kept in
    #: float32 on CUDA and ROCm and whole on every rank): positions × rotary dim per distinct
    #: rope; 0 when the config gives no `max_position_embeddings`.
    rope_cache_elements: int = 0
    #: `quantization_config.kv_cache_quant_algo` ("FP8" makes `--kv-cache-dtype auto` FP8
    #: from 0.5.18, `mem_cache/kv_cache_dtype.py`); "" when absent.
    kv_cache_quant_algo: str = ""

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    @property
    def num_linear_layers(self) -> int:
        return len(self.linear_layer_ids)

    @property
    def linear_conv_dim(self) -> int:
        """Channels of the GatedDeltaNet causal conv: q, k and v (`conv_dim`)."""
        return (
            2 * self.linear_num_key_heads * self.linear_key_head_dim
            + self.linear_num_value_heads * self.linear_value_head_dim
        )

    @property
    def padded_vocab(self) -> int:
        return -(-self.vocab_size // VOCAB_PAD) * VOCAB_PAD

    # ---- per-layer parameter counts, by how SGLang shards them -------------------------

    def attn_sharded_params(self) -> int:
        """Attention weights split over attention TP (column/row-parallel projections)."""
        h = self.hidden_size
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q_in = self.q_lora_rank or h
            q = q_in * self.num_heads * qk
            kv_b = self.kv_lora_rank * self.num_heads * (self.qk_nope_head_dim + self.v_head_dim)
            o = self.num_heads * self.v_head_dim * h
            return q + kv_b + o
        q = h * self.num_heads * self.head_dim * (2 if self.attn_output_gate else 1)
        kv = h * self.num_kv_heads * (self.head_dim + self.v_head_dim)
        o = self.num_heads * self.v_head_dim * h
        bias = (self.num_heads + 2 * self.num_kv_heads) * self.head_dim if self.qkv_bias else 0
        if self.qk_norm == "full":
            bias += (self.num_heads + self.num_kv_heads) * self.head_dim
        sinks = self.num_heads if self.attention_sinks else 0
        return q + kv + o + bias + sinks

    def attn_replicated_params(self) -> int:
        """Attention linears every attention-TP rank holds whole: MLA's down-projections
        and the DSA indexer (replicated linears in SGLang's DeepSeek model)."""
        h = self.hidden_size
        n = 0
        if self.is_mla:
            n += h * (self.kv_lora_rank + self.qk_rope_head_dim)
            if self.q_lora_rank:
                n += h * self.q_lora_rank
        if self.index_head_dim:
            d, heads = self.index_head_dim, self.index_n_heads
            n += (self.q_lora_rank or h) * heads * d + h * d + h * heads
        return n

    def norm_params(self) -> int:
        """Per-layer norms and the o_proj bias: small, replicated, never quantized."""
        h = self.hidden_size
        n = 2 * h
        if self.o_bias:
            n += h
        if self.qk_norm == "head":
            n += 2 * self.head_dim
        if self.is_mla:
            n += self.kv_lora_rank + self.q_lora_rank
        if self.index_head_dim:
            n += 2 * self.index_head_dim
        return n

    def linear_attn_sharded_params(self) -> int:
        """One GatedDeltaNet layer's linears, split over attention TP (`Qwen3GatedDeltaNet`):
        `in_proj_qkvz` (h -> q, k, v, z), `in_proj_ba` (h -> b, a per value head) and
        `out_proj` (`modules.gdn_modules`)."""
        if not self.linear_layer_ids:
            return 0
        h = self.hidden_size
        key = self.linear_num_key_heads * self.linear_key_head_dim
        value = self.linear_num_value_heads * self.linear_value_head_dim
        return h * (2 * key + 2 * value) + h * 2 * self.linear_num_value_heads + value * h

    def linear_conv_params(self) -> int:
        """A GatedDeltaNet layer's unquantized tensors split over attention TP: `conv1d`
        (`conv_dim × kernel`, built without a quantization config), `dt_bias` and `A_log`
        (one per value head; `A_log` is float32, counted at the model's width)."""
        if not self.linear_layer_ids:
            return 0
        return self.linear_conv_dim * self.linear_conv_kernel + 2 * self.linear_num_value_heads

    def linear_norm_params(self) -> int:
        """A GatedDeltaNet layer's replicated norms: the two decoder norms and the gated
        RMSNorm over one value head (`RMSNormGated(head_v_dim)`)."""
        return 2 * self.hidden_size + self.linear_value_head_dim

    def dense_mlp_params(self) -> int:
        return 3 * self.hidden_size * self.intermediate_size

    def expert_params(self) -> int:
        """One routed expert (gate, up, down; biases for gpt-oss)."""
        p = 3 * self.hidden_size * self.moe_intermediate_size
        if self.expert_bias:
            p += 2 * self.moe_intermediate_size + self.hidden_size
        return p

    def shared_expert_params(self) -> int:
        return 3 * self.hidden_size * self.shared_expert_intermediate_size * self.num_shared_experts

    def router_params(self) -> int:
        return self.num_experts * self.hidden_size + (self.num_experts if self.router_bias else 0)

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    def lm_head_params(self) -> int:
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    def mtp_params(self) -> int:
        """The nextn layers: each one decoder layer like the last (MoE when the model's
        last layer is), `eh_proj` (2h → h) and three norms (`enorm`, `hnorm`, the shared
        head's norm). Its embedding and LM head are the main model's (SGLang's
        `*NextN` models share them), so they are not counted again."""
        if not self.num_nextn_layers:
            return 0
        h = self.hidden_size
        layer = self.attn_sharded_params() + self.attn_replicated_params() + self.norm_params()
        if self.num_moe_layers:
            layer += (
                self.num_experts * self.expert_params()
                + self.shared_expert_params()
                + self.router_params()
            )
        else:
            layer += self.dense_mlp_params()
        return self.num_nextn_layers * (layer + 2 * h * h + 3 * h)

    # ---- totals --------------------------------------------------------------------------

    def total_params(self) -> int:
        """Every parameter SGLang loads by default: MTP layers excluded, a vision tower
        included."""
        return self._params(self.num_experts) + self.vision.params()

    def active_params(self) -> int:
        """Parameters one token touches: routed experts counted `experts_per_token` times."""
        return self._params(self.experts_per_token)

    def _params(self, experts: int) -> int:
        L = self.num_layers - self.num_linear_layers
        attn = L * (self.attn_sharded_params() + self.attn_replicated_params() + self.norm_params())
        attn += self.num_linear_layers * (
            self.linear_attn_sharded_params()
            + self.linear_conv_params()
            + self.linear_norm_params()
        )
        dense = self.num_dense_layers * self.dense_mlp_params()
        moe = self.num_moe_layers * (
            experts * self.expert_params() + self.shared_expert_params() + self.router_params()
        )
        return (
            attn + dense + moe + self.embedding_params() + self.lm_head_params() + self.hidden_size
        )


def _int(src: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for k in keys:
        v = src.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _first_int(src: Mapping[str, Any], keys: tuple[str, ...]) -> int:
    """The first of `keys` that is present (not None), as SGLang's `getattr` loop reads
    them, when it is an integer; 0 otherwise."""
    v = next((src[k] for k in keys if src.get(k) is not None), None)
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _require(src: Mapping[str, Any], keys: tuple[str, ...], fact: str) -> int:
    v = _int(src, keys)
    if v is None or v < 1:
        raise InputError(
            f"model config lacks {fact}, which the memory model needs "
            f"(config.json field {' / '.join(repr(k) for k in keys)})"
        )
    return v


def _text_config(hf: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten multimodal wrappers: the language model's keys win, top-level keys fill in."""
    merged = dict(hf)
    for key in ("text_config", "language_config", "llm_config"):
        sub = hf.get(key)
        if isinstance(sub, Mapping):
            merged.update(sub)
    return merged


def _encoder(v: Mapping[str, Any]) -> VisionTower:
    """The ViT encoder fields Llama 4's and Gemma 3's `vision_config` share (no class token,
    adapter or projector)."""
    keys = ("hidden_size", "num_hidden_layers", "intermediate_size", "image_size", "patch_size")
    d, layers, inter, image, patch = (_require(v, (k,), f"vision_config.{k}") for k in keys)
    return VisionTower(
        hidden=d,
        layers=layers,
        intermediate=inter,
        patch_inputs=(_int(v, ("num_channels",)) or 3) * patch * patch,
        positions=(image // patch) ** 2,
    )


def _vision(hf: Mapping[str, Any], text_hidden: int) -> VisionTower:
    """Llama 4's vision tower and Gemma 3's SigLIP from `vision_config`; other towers are
    not modelled (zero). SigLIP has no adapter, and its projector maps the vision hidden
    size to the text one; it is counted as sharded like Llama 4's tower."""
    v = hf.get("vision_config")
    model_type = str(hf.get("model_type", ""))
    if isinstance(v, Mapping) and model_type == "kimi_k25":
        return _moonvit(v, text_hidden)
    if isinstance(v, Mapping) and model_type in ("qwen3_5", "qwen3_5_moe"):
        return _qwen35_vision(v, text_hidden)
    if isinstance(v, Mapping) and model_type == "gemma3":
        tower = _encoder(v)
        return replace(tower, projector=tower.hidden * text_hidden)
    if not isinstance(v, Mapping) or not model_type.startswith("llama4"):
        return VisionTower()
    tower = _encoder(v)
    archs = hf.get("architectures") or [""]
    return replace(
        tower,
        needs_multimodal=archs[0] in VISION_NEEDS_MULTIMODAL_ARCHITECTURES,
        positions=tower.positions + 1,  # the class token
        adapter_in=_require(v, ("projector_input_dim",), "vision_config.projector_input_dim"),
        adapter_out=_require(v, ("projector_output_dim",), "vision_config.projector_output_dim"),
        projector=_require(v, ("vision_output_dim",), "vision_config.vision_output_dim")
        * text_hidden,
    )


def _qwen35_vision(v: Mapping[str, Any], text_hidden: int) -> VisionTower:
    """Qwen3.5's vision tower (SGLang's `Qwen3VLMoeVisionModel`, `models/qwen3_vl.py`): a
    Conv3d patch embedding (`in_channels × temporal_patch_size × patch_size²` inputs, with
    bias), a learned `num_position_embeddings × d` table, `depth` ViT blocks, and a patch
    merger over `spatial_merge_size²` patches (LayerNorm, then `4d -> 4d -> out_hidden_size`
    linears with biases, split over TP). No deepstack mergers: every published Qwen3.5
    config lists no `deepstack_visual_indexes`."""
    keys = ("hidden_size", "depth", "intermediate_size", "patch_size")
    d, layers, inter, patch = (_require(v, (k,), f"vision_config.{k}") for k in keys)
    merge = (_int(v, ("spatial_merge_size",)) or 2) ** 2 * d
    out = _int(v, ("out_hidden_size",)) or text_hidden
    inputs = (_int(v, ("in_channels",)) or 3) * (_int(v, ("temporal_patch_size",)) or 2)
    return VisionTower(
        hidden=d,
        layers=layers,
        intermediate=inter,
        patch_inputs=inputs * patch * patch,
        positions=_int(v, ("num_position_embeddings",)) or 2304,
        merger=merge * merge + merge + merge * out + out,
        mlp_over_attn_tp=True,
    )


def _linear_layers(c: Mapping[str, Any], layers: int) -> tuple[int, ...]:
    """The GatedDeltaNet layers: `layer_types`' `linear_attention` entries (Qwen3.5), or,
    for a config with `linear_*` widths and a `full_attention_interval` (Qwen3-Next), every
    layer but each interval-th, as SGLang's `Qwen3NextConfig.layers_block_type` lists them."""
    if not _int(c, ("linear_num_value_heads",)):
        return ()
    types = c.get("layer_types")
    if isinstance(types, list):
        return tuple(i for i, t in enumerate(types[:layers]) if t == "linear_attention")
    interval = _int(c, ("full_attention_interval",)) or 0
    if not interval:
        return ()
    return tuple(i for i in range(layers) if (i + 1) % interval)


_SSM_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def _moonvit(v: Mapping[str, Any], text_hidden: int) -> VisionTower:
    """Kimi-K2.5's MoonViT from `vision_config` (`KimiK25VisionConfig`'s names and
    defaults): a learnable `init_pos_emb_height × width` position table, and a patch-merger
    projector (LayerNorm, then `merge·d → merge·d → text` linears with biases)."""
    d = _int(v, ("hidden_size", "vt_hidden_size")) or 1152
    layers = _int(v, ("num_hidden_layers", "vt_num_hidden_layers")) or 27
    inter = _int(v, ("intermediate_size", "vt_intermediate_size")) or 4304
    patch = _int(v, ("patch_size",)) or 14
    kernel = v.get("merge_kernel_size") or (2, 2)
    merged = d * int(kernel[0]) * int(kernel[1])
    height = _int(v, ("init_pos_emb_height",)) or 64
    width = _int(v, ("init_pos_emb_width",)) or 64
    return VisionTower(
        hidden=d,
        layers=layers,
        intermediate=inter,
        patch_inputs=3 * patch * patch,
        positions=height * width,
        projector=2 * d + merged * merged + merged + merged * text_hidden + text_hidden,
        mlp_replicated=True,
    )


def _kv_cache_quant_algo(c: Mapping[str, Any]) -> str:
    qc = c.get("quantization_config")
    if not isinstance(qc, Mapping):
        return ""
    inner = qc.get("quantization")  # ModelOpt's hf_quant_config layout
    algo = qc.get("kv_cache_quant_algo") or (
        inner.get("kv_cache_quant_algo") if isinstance(inner, Mapping) else None
    )
    # ModelOpt's newer config.json layout states the KV cache as a scheme; SGLang's ModelOpt
    # configs (`from_config`) read 8-bit floats there as FP8.
    scheme = qc.get("kv_cache_scheme")
    if isinstance(scheme, Mapping) and (scheme.get("type"), scheme.get("num_bits")) == ("float", 8):
        algo = "FP8"
    return str(algo) if isinstance(algo, str) else ""


def _rope_cache_elements(c: Mapping[str, Any], model_type: str, head_dim: int, rope: int) -> int:
    """The float32 cos/sin cache SGLang's `get_rope` builds once per distinct rope (shared
    by the layers): `max_position_embeddings` rows (YaRN: the original length times the
    factor, `DeepseekScalingRotaryEmbedding`/`YaRNScalingRotaryEmbedding`) of the rotary
    dim (MLA: `qk_rope_head_dim`; else `head_dim × partial_rotary_factor`). Gemma 3 builds
    two, a local and a global one."""
    positions = _int(c, ("max_position_embeddings",)) or 0
    # transformers 5 moved the rope keys into `rope_parameters` (Qwen3.5, GLM-5).
    params = c.get("rope_parameters")
    params = params if isinstance(params, Mapping) else {}
    scaling = c.get("rope_scaling") or params
    if isinstance(scaling, Mapping) and str(scaling.get("type", scaling.get("rope_type"))) in (
        "yarn",
        "deepseek_yarn",
    ):
        original = scaling.get("original_max_position_embeddings")
        factor = scaling.get("factor")
        if isinstance(original, int) and isinstance(factor, int | float):
            scaled = original * factor
            if not 0 <= scaled <= MAX_MODEL_POSITIONS:  # NaN, infinity and 1e300 too
                raise InputError(
                    f"model config: rope_scaling's original_max_position_embeddings x factor "
                    f"is {shown(scaled)} positions; at most {MAX_MODEL_POSITIONS:,}"
                )
            positions = int(scaled)
    partial = c.get("partial_rotary_factor", params.get("partial_rotary_factor", 1.0))
    dim = rope or _int(c, ("rotary_dim",)) or 0
    dim = dim or int(head_dim * (partial if isinstance(partial, int | float) else 1.0))
    ropes = 2 if model_type in ("gemma3", "gemma3_text") else 1
    return ropes * positions * dim


#: Config fields that lay out layers of kinds the memory model has no price for. Read as
#: an ordinary decoder, such a config is mis-sized by a wide margin (NemotronH's 88 layers
#: of nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8 priced as 88 attention + 512-expert MoE
#: layers: 349 GiB a rank on four H100 for a 120B FP8 checkpoint), so it is refused.
UNMODELLED_LAYERS = {
    "hybrid_override_pattern": "NemotronH's Mamba2, MLP and latent-MoE layers",
    "layers_block_type": "NemotronH's Mamba2, MLP and latent-MoE layers",
    "block_configs": "DeciLM's per-layer block configs (Llama-Nemotron NAS models)",
    "linear_attn_config": "Kimi's linear-attention (KDA) layers",
    "hidden_size_per_layer_input": "Gemma's per-layer input embeddings",
}


def facts_from_config(hf: Mapping[str, Any], dtype: str | None = None) -> ModelFacts:
    """Read `ModelFacts` from a parsed Hugging Face `config.json`, served in SGLang's
    `--dtype` (`quant.served_bytes`; None: `auto`).

    Raises `InputError` naming the fact and its config field when one is missing, and
    for a `quantization_config` whose method is not modelled, and for a size beyond the
    documented bounds (`check_model_sizes`: the loops below are per layer).
    """
    check_model_sizes(hf)
    c = _text_config(hf)
    archs = hf.get("architectures") or c.get("architectures") or []
    arch = archs[0] if archs and isinstance(archs[0], str) else str(c.get("model_type", "?"))
    for key, layers_of in UNMODELLED_LAYERS.items():
        if key in c:
            raise InputError(
                f"{arch}: {layers_of} (config.json field {key!r}) are not modelled by meshsat's "
                "memory model; its rules still check the layout without --gpu"
            )
    hidden = _require(c, ("hidden_size", "n_embd", "d_model"), "the hidden size")
    layers = _require(c, _LAYERS, "the layer count")
    heads = _require(c, _HEADS, "the attention head count")
    kv_heads = _int(c, _KV_HEADS) or heads
    vocab = _require(c, ("vocab_size", "padded_vocab_size"), "the vocabulary size")
    tie = bool(c.get("tie_word_embeddings", hf.get("tie_word_embeddings", False)))

    kv_lora = _int(c, ("kv_lora_rank",)) or 0
    q_lora = _int(c, ("q_lora_rank",)) or 0
    nope = _int(c, ("qk_nope_head_dim",)) or 0
    rope = _int(c, ("qk_rope_head_dim",)) or 0
    if kv_lora:
        if not (nope and rope):
            raise InputError(
                "model config has kv_lora_rank (MLA) but lacks the query/key head dims "
                "(config.json fields 'qk_nope_head_dim' and 'qk_rope_head_dim')"
            )
        head_dim = nope + rope
        v_head = _require(c, ("v_head_dim",), "the MLA value head dim")
    else:
        head_dim = _int(c, ("head_dim", "kv_channels")) or 0
        if not head_dim:
            if hidden % heads:
                raise InputError(
                    "model config lacks the head dim (config.json field 'head_dim') and "
                    f"hidden_size {hidden} is not a multiple of {heads} heads"
                )
            head_dim = hidden // heads
        v_head = _int(c, ("v_head_dim",)) or head_dim

    experts = _int(c, _EXPERTS) or 0
    dense_inter = _int(c, ("intermediate_size_mlp", "intermediate_size", "ffn_hidden_size")) or 0
    topk = moe_inter = shared = shared_inter = moe_layers = 0
    expert_bias = router_bias = False
    if experts:
        topk = _require(
            c,
            ("num_experts_per_tok", "experts_per_token", "moe_topk", "moe_top_k"),
            "the experts per token",
        )
        moe_inter = _int(c, ("moe_intermediate_size",)) or 0
        if not moe_inter:
            # Mixtral, gpt-oss, MiniMax and Llama 4 name the expert width intermediate_size.
            moe_inter = _require(c, ("intermediate_size",), "the expert width")
        shared = _int(c, ("n_shared_experts", "num_shared_experts")) or 0
        # Step-3.5 spells the shared expert's width `share_expert_dim` (step3p5.py).
        shared_inter = _int(c, ("shared_expert_intermediate_size", "share_expert_dim")) or 0
        if shared_inter and not shared:
            shared = 1  # Qwen2-MoE style: one shared expert of its own width
        if shared and not shared_inter:
            shared_inter = moe_inter
        if "interleave_moe_layer_step" in c and c.get("model_type", "").startswith("llama4"):
            step = int(c["interleave_moe_layer_step"]) or 1
            moe_layers = layers // step
            shared, shared_inter = 1, moe_inter  # Llama 4: one shared expert per MoE layer
        else:
            first_dense = _int(c, ("first_k_dense_replace",)) or 0
            sparse_step = _int(c, ("decoder_sparse_step", "moe_layer_freq")) or 1
            mlp_only = c.get("mlp_only_layers") or []
            moe_layers = sum(
                1
                for i in range(layers)
                if i >= first_dense and i % sparse_step == 0 and i not in mlp_only
            )
            freq = c.get("moe_layer_freq")
            if isinstance(freq, list):  # MiMo-V2: one 0/1 flag per layer
                moe_layers = sum(1 for flag in freq[:layers] if flag)
            listed = c.get("moe_layers_enum")
            if isinstance(listed, str):  # Step-3.5: the MoE layers, comma-separated
                moe_layers = sum(1 for i in listed.split(",") if i.strip().isdigit())
        if moe_layers < layers and not dense_inter:
            raise InputError(
                "model config has dense layers but lacks their MLP width "
                "(config.json field 'intermediate_size')"
            )
        if c.get("model_type") in ("gpt_oss",):
            expert_bias = router_bias = True
        router_bias = router_bias or c.get("topk_method") == "noaux_tc"
        if c.get("model_type") in ("glm4_moe", "minimax_m2", "minimax"):
            router_bias = True  # e_score_correction_bias
        if dense_inter == moe_inter and moe_layers == layers:
            dense_inter = 0
    elif not dense_inter:
        raise InputError("model config lacks the MLP width (config.json field 'intermediate_size')")

    layer_types = c.get("layer_types")
    sliding_layers = 0
    swa_ids: tuple[int, ...] = ()
    if isinstance(layer_types, list):
        sliding_layers = sum(1 for t in layer_types if t == "sliding_attention")
        swa_ids = tuple(i for i, t in enumerate(layer_types[:layers]) if t == "sliding_attention")
    pattern = c.get("hybrid_layer_pattern")
    if isinstance(pattern, list):
        swa_ids = tuple(i for i in range(min(layers, len(pattern))) if pattern[i] == 1)
    if arch == "Llama4ForConditionalGeneration":
        swa_ids = tuple(i for i in range(layers) if (i + 1) % 4 != 0)
    model_type = str(c.get("model_type", ""))
    linear_ids = _linear_layers(c, layers)
    qk_norm = ""
    if linear_ids:
        qk_norm = "head"  # Qwen3-Next's full attention: q_norm and k_norm per head
    if model_type in ("qwen3", "qwen3_moe", "glm4_moe") and c.get("use_qk_norm", True):
        qk_norm = "head" if model_type != "glm4_moe" or c.get("use_qk_norm") else ""
    if model_type in ("minimax_m2", "minimax") and c.get("use_qk_norm", True):
        qk_norm = "full"
    qkv_bias = bool(
        c.get("attention_bias", False)
        or c.get("qkv_bias", False)
        or model_type in ("qwen2", "qwen2_moe")
    )
    facts = ModelFacts(
        rope_cache_elements=_rope_cache_elements(c, model_type, head_dim, rope),
        kv_cache_quant_algo=_kv_cache_quant_algo(c),
        architecture=arch,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=v_head,
        vocab_size=vocab,
        tie_word_embeddings=tie,
        intermediate_size=dense_inter,
        num_experts=experts,
        experts_per_token=topk,
        moe_intermediate_size=moe_inter,
        num_shared_experts=shared,
        shared_expert_intermediate_size=shared_inter,
        shared_experts_fusion=shared_experts_fusion(arch, experts, shared, shared_inter, moe_inter),
        num_moe_layers=moe_layers,
        kv_lora_rank=kv_lora,
        q_lora_rank=q_lora,
        qk_nope_head_dim=nope,
        qk_rope_head_dim=rope,
        index_head_dim=_int(c, ("index_head_dim",)) or 0,
        index_n_heads=_int(c, ("index_n_heads",)) or 0,
        num_sliding_layers=sliding_layers,
        swa_layer_ids=swa_ids,
        swa_num_kv_heads=_int(c, ("swa_num_key_value_heads",)) or 0,
        swa_head_dim=_int(c, ("swa_head_dim",)) or 0,
        swa_v_head_dim=_int(c, ("swa_v_head_dim",)) or _int(c, ("swa_head_dim",)) or 0,
        sliding_window=_int(c, ("sliding_window",)) or 0,
        sliding_window_size=_first_int(c, ("sliding_window_size", "sliding_window", "window_size")),
        attention_chunk_size=_int(c, ("attention_chunk_size",)) or 0,
        linear_layer_ids=linear_ids,
        linear_num_key_heads=_int(c, ("linear_num_key_heads",)) or 0,
        linear_num_value_heads=_int(c, ("linear_num_value_heads",)) or 0,
        linear_key_head_dim=_int(c, ("linear_key_head_dim",)) or 0,
        linear_value_head_dim=_int(c, ("linear_value_head_dim",)) or 0,
        linear_conv_kernel=_int(c, ("linear_conv_kernel_dim",)) or 0,
        linear_state_bytes=_SSM_BYTES.get(str(c.get("mamba_ssm_dtype", "float32")), 4),
        attn_output_gate=bool(linear_ids) and bool(c.get("attn_output_gate", True)),
        qkv_bias=qkv_bias,
        o_bias=model_type == "gpt_oss",
        qk_norm=qk_norm,
        expert_bias=expert_bias,
        router_bias=router_bias,
        attention_sinks=model_type == "gpt_oss",
        num_nextn_layers=_int(c, ("num_nextn_predict_layers",)) or 0,
        vision=_vision(hf, hidden),
        multimodal_wrapper=wraps_language_model(hf),
        multimodal_text_by_default=text_by_default(hf),
        language_model_only=bool(hf.get("language_model_only")),
        vision_fraction_factor=vision_fraction_factor(hf),
    )
    return replace(facts, quant=quant_from_config(c, facts, dtype))
