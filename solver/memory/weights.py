"""Weight bytes on each rank of a layout.

How SGLang shards each component (the reason for every divisor below):
- attention projections: column/row-parallel over attention TP, so replicated over
  attention DP and attention CP; MLA's down-projections and the DSA indexer are replicated
  linears (whole on every rank); norms are whole on every rank. The classes that predate DP
  attention (`ATTENTION_OVER_TP_ARCHITECTURES`: Llama, Mistral, Mixtral, Qwen2, Gemma) build it
  over all of TP whatever DP attention says (`attention_width`);
- routed experts: `num_experts / ep` experts per rank, each split over MoE TP, so replicated
  over MoE DP; `(num_experts + redundant) / ep` with `--ep-num-redundant-experts` in the
  classes that build that many slots (`REDUNDANT_SLOT_ARCHITECTURES`);
- dense-layer MLPs: split over `moe_dense_tp_size` (all of `tp` when unset) in the model
  classes that read it (`DENSE_FULLY_DP_ARCHITECTURES`), over all of `tp` in every other;
- shared experts: the pack's `shared_tp` rule (`catalogue/weight_shapes.py`, the width its
  block-quantization rules check), evaluated on the layout (`shared_width`): whole on every
  rank under an all-to-all backend, split like a routed expert where SGLang fuses them into
  the MoE, over all of `tp` otherwise, whatever `--moe-dense-tp-size` says (deepseek_v2.py
  `_shared_expert_use_tp1`; tests/test_weight_bytes.py holds it to SGLang's own builds);
- embeddings: vocabulary-parallel over `tp`; under DP attention as the class builds it
  (`embedding_rows`): over TP in the classes of `ATTENTION_OVER_TP_ARCHITECTURES` but Qwen2,
  whole in those that say `enable_tp=not is_dp_attention_enabled()` (Qwen3.5, Step-3.5,
  ...: `EMBEDDING_WHOLE_CLASSES`), over attention TP in every other class from 0.5.18
  (`get_embedding_tp_kwargs`, `use_attn_tp_group`), whole in 0.4.6.post5; a plain
  `nn.Embedding` whole in every layout (Gemma 3: `EMBEDDING_NEVER_SPLIT`);
- LM head: vocabulary-parallel over `tp`, or over attention TP with `enable_dp_lm_head`;
- pipeline stages: layers split as SGLang's `get_pp_indices` does (the remainder goes to the
  stages before the last); the first stage holds the embeddings, the last the LM head;
- MXFP4 experts (gpt-oss): allocated at the padded shapes of the MoE kernel the GPU gets,
  with the release's alignment and float32 biases under FlashInfer (`mxfp4.py`), so the
  per-rank figure needs the GPU and the pack; without a GPU the shapes are as stored;
- MLA (DeepSeek V2/V3/R1, Kimi-K2, GLM-5): `post_load_weights` keeps `w_kc` and `w_vc`, a
  second copy of each rank's `kv_b_proj` shard, beside it (`mla.py`), charged with the
  allocator's rounding in `overhead` (they are not parameters of the checkpoint);
- a vision tower (Llama 4, Gemma 3, Qwen3.5, Kimi-K2.5): built on every rank, its attention
  split over attention TP and its MLPs over TP (`facts.VisionTower`; Qwen3.5's MLPs over
  attention TP from 0.5.23, `VISION_ATTN_TP_PACKS`); Llama 4's only with
  `--enable-multimodal` from 0.5.18 (`VISION_NEEDS_MULTIMODAL_PACKS`);
- the rotary cos/sin caches (`rope_cache_bytes`): float32 on CUDA and ROCm
  (`RotaryEmbedding.__init__` keeps the cache in FP32 there), one per distinct rope, whole
  on every rank (`facts.ModelFacts.rope_cache_elements`);
- WNA16 routed experts (compressed-tensors integer weights, e.g. Kimi-K2.5's INT4):
  `CompressedTensorsWNA16MoE.create_weights` allocates, per expert, int32 `g_idx` and
  `g_idx_sort_indices` tensors over the hidden size (w13) and the rank's intermediate
  size (w2), plus two float32 `(E, 2)` shape tensors. The Marlin method replaces the four
  index tensors with empty ones after loading; `CompressedTensorsWNA16TritonMoE` (the
  method on ROCm, and on SM100 by default from 0.5.19) keeps them, so they are weights of
  the rank there (`wna16_index_bytes`);
- what the caching allocator holds beyond the tensors (`allocator.py`): SGLang's `mem usage` is
  the drop in free device memory across loading, after `empty_cache()`, so each tensor's
  rounding to its segment stays in it. Each layer's share is the mean over a run of
  `STEADY_LAYERS` identical layers (so the 20 MiB segments that mid-sized tensors share are
  spread over the layers that fill them; against the exact sequence of whole stages this is
  within 10 MiB on 36 model × TP cases, `tests/test_memory_allocator.py` checks one), the
  embedding and LM head are simulated on their own. This is what grows with TP: at tp 4 most
  shards stop being multiples of 2 MiB (Qwen3-32B: 0.22 GiB a rank, as logged);
- nothing else: after the allocator's rounding, what `mem usage` shows beyond the tensors is
  0.00 ± 0.02 GiB on the Qwen3 logs of 2025-26 and up to 0.09 GiB on some of 2025's first
  half (Llama 3.1 8B, Qwen2.5 7B); after the MLA copies and the MXFP4 padding, +0.01 GiB
  on DeepSeek-R1 NVFP4 tp 4, +0.39 on Kimi-K2.5 INT4 tp 8 (MI355X) and +0.18 on gpt-oss-20b
  (2025-10, B200); no term is fitted for it (benchmarks/RESULTS-memory.md
  has the residual of every log). An earlier fitted allowance (0.08 GiB + 0.055 GiB per
  further TP rank) is what the allocator term replaces: its TP growth is the shards'
  rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache, lru_cache
from typing import Any

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.lang.expr import Expr
from meshsat.solver.lang.model_spec import (
    ATTENTION_OVER_TP_ARCHITECTURES,
    DENSE_FULLY_DP_ARCHITECTURES,
)
from meshsat.solver.memory.allocator import STEADY_LAYERS, rounding_bytes, run_rounding
from meshsat.solver.memory.facts import ModelFacts, VisionTower
from meshsat.solver.memory.gpus import Gpu
from meshsat.solver.memory.layout import Parallel
from meshsat.solver.memory.mla import copies_per_layer, copy_width
from meshsat.solver.memory.modules import layer_modules, moe_layer_flags
from meshsat.solver.memory.mxfp4 import mxfp4_experts
from meshsat.solver.packs.registry import get_pack

#: A memo key of widths (`stage_widths`, with a stage's layer counts before it).
Widths = tuple[int | bool | str | None, ...]


@lru_cache(maxsize=1024)
def stage_layers(num_layers: int, pp: int) -> tuple[tuple[int, int], ...]:
    """[start, end) layer range of each pipeline stage, as SGLang partitions them. Cached:
    the memory model asks it once per stage of every layout (O(pp) each time, so O(pp²)
    per layout: most of `plan --disagg`'s memory model at 256 GPUs)."""
    base = num_layers // pp
    parts = [base] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    out, start = [], 0
    for n in parts:
        out.append((start, start + n))
        start += n
    return tuple(out)


def rope_cache_bytes(facts: ModelFacts) -> float:
    """The float32 rotary cos/sin caches, whole on every rank."""
    return facts.rope_cache_elements * 4.0


#: Packs whose CPU offloader keeps MLA's `kv_b_proj` on the device (`WeightModel.offloaded`).
_KV_B_RESIDENT_PACKS = ("0.5.23",)

#: Classes that build their MoE layer with `--ep-num-redundant-experts` more expert slots
#: (`num_experts + ep_num_redundant_experts` passed to the MoE class), read per release from
#: its model files: 0.4.6.post5's `deepseek_v2.py` and `qwen3_moe.py`; from 0.5.18 also the
#: classes over `DeepseekV2MoE` (V3.2, V4, GLM-5's `GlmMoeDsa`, Kimi-K2.5's language
#: model), `Qwen2MoeSparseMoeBlock` (Qwen2-MoE, Qwen3-Next, Qwen3.5), gpt-oss, MiniMax-M2,
#: Step 3.5, MiMo-V2 and Gemma 4. Llama 4, Mixtral and GLM-4.5/4.6 (`Glm4MoeSparseMoeBlock`)
#: build `num_experts` slots whatever the flag says.
_REDUNDANT_SLOTS_0_4 = frozenset(
    {"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "Qwen3MoeForCausalLM"}
)
_REDUNDANT_SLOTS_0_5 = _REDUNDANT_SLOTS_0_4 | {
    "DeepseekV32ForCausalLM",
    "DeepseekV4ForCausalLM",
    "GlmMoeDsaForCausalLM",
    "KimiK25ForConditionalGeneration",
    "Qwen2MoeForCausalLM",
    "Qwen3NextForCausalLM",
    "Qwen3_5MoeForConditionalGeneration",
    "GptOssForCausalLM",
    "MiniMaxM2ForCausalLM",
    "Step3p5ForCausalLM",
    "MiMoV2ForCausalLM",
    "MiMoV2FlashForCausalLM",
    "Gemma4ForCausalLM",
    "Gemma4ForConditionalGeneration",
}
REDUNDANT_SLOT_ARCHITECTURES: dict[str, frozenset[str]] = {
    "0.4.6.post5": _REDUNDANT_SLOTS_0_4,
    "legacy": _REDUNDANT_SLOTS_0_4,
    "0.5.18": _REDUNDANT_SLOTS_0_5,
    "0.5.19": _REDUNDANT_SLOTS_0_5,
    "0.5.23": _REDUNDANT_SLOTS_0_5,
}

#: Packs whose compressed-tensors WNA16 MoE picks the Triton method on SM100 by default.
_SM100_TRITON_PACKS = ("0.5.19", "0.5.23")


def keeps_wna16_index(gpu: Gpu | None, pack: str) -> bool:
    """Whether the WNA16 MoE method SGLang picks on `gpu` keeps the `g_idx` buffers
    (`compressed_tensors.py`'s MoE scheme choice: Triton on ROCm, and on SM100 with the
    auto runner from 0.5.19; Marlin otherwise)."""
    if gpu is None:
        return False
    return gpu.vendor == "amd" or (gpu.sm >= 10 and pack in _SM100_TRITON_PACKS)


def wna16_index_bytes(hidden: int, intermediate_per_rank: int) -> float:
    """Per expert on one rank: `w13_weight_g_idx` and `w13_g_idx_sort_indices` (hidden,
    int32), `w2_weight_g_idx` and `w2_g_idx_sort_indices` (intermediate, int32), and the
    two float32 `(E, 2)` weight-shape tensors."""
    return 2 * 4.0 * (hidden + intermediate_per_rank) + 2 * 2 * 4.0


def _weight_and_scales(params: float, bytes_per_weight: float) -> list[int]:
    """A quantized weight's allocations: the values at their storage width (2, 1 or 0.5
    bytes) and, apart, whatever the scheme adds per weight (its scales)."""
    width = next((w for w in (2.0, 1.0, 0.5) if bytes_per_weight >= w), bytes_per_weight)
    return [int(params * width), int(params * (bytes_per_weight - width))]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class StageWeights:
    """Bytes on one rank of a stage, by component."""

    attention: float
    dense_mlp: float
    experts: float
    shared: float
    embedding: float
    lm_head: float
    vision: float = 0.0
    #: What `mem usage` holds beyond the parameters: the rotary caches and the
    #: allocator's rounding of every tensor.
    overhead: float = 0.0

    @property
    def total(self) -> float:
        return (
            self.attention
            + self.dense_mlp
            + self.experts
            + self.shared
            + self.embedding
            + self.lm_head
            + self.vision
            + self.overhead
        )


@cache
def shared_tp_rule(pack: str) -> Expr:
    """The width `pack`'s rules give the shared experts (the `shared_tp` their
    block-quantization rules name): read from the pack, so the memory model splits them
    as the rules that check them do, release by release ("legacy", the memory model's
    name for the releases before 0.5, reads the oldest pack's)."""
    return get_pack("0.4.6.post5" if pack == "legacy" else pack).named_widths["shared_tp"].body


#: Of `ATTENTION_OVER_TP_ARCHITECTURES`, the classes whose embedding follows DP attention
#: (qwen2.py `use_attn_tp_group=is_dp_attention_enabled()`).
EMBEDDING_ATTN_TP_OF_THOSE = frozenset({"Qwen2ForCausalLM"})
#: Classes whose input embedding is a plain `nn.Embedding`, whole on every rank in every
#: layout (gemma3_causal.py `Gemma3TextScaledWordEmbedding`; SGLang's build of gemma-3-1b-it
#: at tp 4: tests/test_weight_bytes.py).
EMBEDDING_NEVER_SPLIT = frozenset({"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"})
#: Classes that build the input embedding whole under DP attention in 0.5.23
#: (`enable_tp=not is_dp_attention_enabled()`: qwen3_5.py, step3p5.py, bailing_moe_v3.py,
#: sarvam_moe.py, exaone_moe.py, grok.py; Qwen3.5-397B's build at tp 8, DP attention 4).
EMBEDDING_WHOLE_CLASSES = frozenset({
    "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
    "Step3p5ForCausalLM", "BailingMoeV3ForCausalLM", "SarvamMoEForCausalLM",
    "ExaoneMoEForCausalLM", "Grok1ForCausalLM",
})  # fmt: skip
#: Packs whose other classes split the embedding over attention TP under DP attention
#: (`get_embedding_tp_kwargs`, recorded for 0.5.18 to 0.5.23); 0.4.6.post5's DeepSeek-style
#: classes keep it whole (`enable_tp=not enable_dp_attention`).
EMBEDDING_ATTN_TP_PACKS = frozenset({"0.5.18", "0.5.19", "0.5.23"})


def _embedding_split(arch: str, pack: str) -> str:
    """How `arch` splits its input embedding in `pack` (see the module docstring)."""
    if arch in EMBEDDING_NEVER_SPLIT:
        return "never"
    if arch in EMBEDDING_ATTN_TP_OF_THOSE:
        return "attn_tp"
    if arch in ATTENTION_OVER_TP_ARCHITECTURES:
        return "tp"
    if arch in EMBEDDING_WHOLE_CLASSES or pack not in EMBEDDING_ATTN_TP_PACKS:
        return "whole"
    return "attn_tp"


#: Packs whose Qwen3-VL-style vision towers split their MLPs over attention TP
#: (`VisionTower.mlp_over_attn_tp`; SGLang's own builds of Qwen3.5-397B under DP attention,
#: tests/test_weight_bytes.py); 0.4.6.post5 has no such tower.
VISION_ATTN_TP_PACKS = frozenset({"0.5.18", "0.5.19", "0.5.23"})
#: Packs that build a `VisionTower.needs_multimodal` tower (Llama 4's) only with
#: `--enable-multimodal`; 0.4.6.post5's `mllama4.py` builds it always.
VISION_NEEDS_MULTIMODAL_PACKS = frozenset({"0.5.18", "0.5.19", "0.5.23"})


class WeightModel:
    """Per-layer byte constants of one model, computed once so each layout costs a few
    multiplications."""

    def __init__(
        self,
        facts: ModelFacts,
        gpu: Gpu | None = None,
        pack: str = "0.5.23",
        *,
        enable_multimodal: bool = False,
    ) -> None:
        q = facts.quant
        self.facts = facts
        self.gpu = gpu
        arch = facts.architecture
        #: Whether `--moe-dense-tp-size` reaches this model's dense-layer MLPs.
        self.dense_tp_honoured = arch in DENSE_FULLY_DP_ARCHITECTURES
        #: Whether this class builds attention over all of TP under DP attention.
        self._attention_over_tp = arch in ATTENTION_OVER_TP_ARCHITECTURES
        #: The input embedding: "never" split, or, under DP attention, over "tp",
        #: "attn_tp", or "whole" (`embedding_rows`).
        self._embedding = _embedding_split(arch, pack)
        self._wna16_index = q.wna16_experts and keeps_wna16_index(gpu, pack)
        #: MXFP4 experts are padded per MoE-TP width (`mxfp4.py`); other schemes are not.
        self._padded = gpu is not None and q.name == "mxfp4"
        self.pack = pack
        self._expert_cache: dict[int, float] = {}
        kv_b = q.attention if q.kv_b is None else q.kv_b
        self._mla_width = copy_width(kv_b, q.unquantized, q.kv_b_dequantized, gpu)
        self._mla_cache: dict[int, float] = {}
        self._rounding_cache: dict[tuple[int, ...], float] = {}
        self._stage_cache: dict[Widths, StageWeights] = {}
        self._per_rank_cache: dict[Widths, float] = {}
        self._shared_rule = shared_tp_rule(pack)
        #: Whether this class gives its MoE layer `--ep-num-redundant-experts` more slots.
        self._redundant_slots = arch in REDUNDANT_SLOT_ARCHITECTURES.get(
            pack, REDUNDANT_SLOT_ARCHITECTURES["0.5.23"]
        )
        self._shared_cache: dict[tuple[str, int, int, int], int] = {}
        v = facts.vision
        if v.needs_multimodal and not enable_multimodal and pack in VISION_NEEDS_MULTIMODAL_PACKS:
            v = VisionTower()  # served as text: the release never builds the tower
        #: The vision tower the release builds for this launch (none: a zero tower).
        self.vision_tower = v
        #: Vision parameters split over attention TP, and over TP.
        mlp_attn_tp = v.mlp_over_attn_tp and pack in VISION_ATTN_TP_PACKS
        mlp = v.mlp_sharded_params()
        self.vision_attn = (v.attn_sharded_params() + (mlp if mlp_attn_tp else 0)) * q.unquantized
        self.vision_mlp = (0 if mlp_attn_tp else mlp) * q.unquantized
        self.vision_whole = v.replicated_params() * q.unquantized
        self.attn_sharded = facts.attn_sharded_params() * q.attention
        self.attn_whole = facts.attn_replicated_params() * q.attention_whole_bytes + (
            facts.norm_params() * q.unquantized
        )
        #: A GatedDeltaNet layer's attention: its linears and conv over attention TP, its
        #: gated norm whole (`ModelFacts.linear_attn_sharded_params`).
        self.linear_sharded = (
            facts.linear_attn_sharded_params() * q.linear_attention_bytes
            + facts.linear_conv_params() * q.unquantized
        )
        self.linear_whole = facts.linear_norm_params() * q.unquantized
        self.dense = facts.dense_mlp_params() * q.dense_mlp
        self.expert = facts.expert_params() * q.experts
        self.shared = facts.shared_expert_params() * q.shared_bytes
        self.router = facts.router_params() * q.unquantized
        self.row = facts.hidden_size * q.unquantized  # one vocabulary row
        moe_first = moe_layer_flags(facts)
        #: Whether each layer is an MoE layer, in order (`offloaded` walks them).
        self._moe_layers = tuple(moe_first)
        self._offload_cache: dict[tuple[Any, ...], float] = {}
        linear = set(facts.linear_layer_ids)
        # Prefix counts of MoE, GatedDeltaNet and MoE GatedDeltaNet layers, so a stage's
        # count is one subtraction.
        self._moe_prefix = [0]
        self._linear_prefix = [0]
        self._linear_moe_prefix = [0]
        for i, is_moe in enumerate(moe_first):
            self._moe_prefix.append(self._moe_prefix[-1] + is_moe)
            self._linear_prefix.append(self._linear_prefix[-1] + (i in linear))
            self._linear_moe_prefix.append(self._linear_moe_prefix[-1] + (is_moe and i in linear))

    def counts(self, start: int, end: int) -> tuple[int, int, int]:
        """(MoE, GatedDeltaNet, MoE GatedDeltaNet) layers in [start, end)."""
        return (
            self._moe_prefix[end] - self._moe_prefix[start],
            self._linear_prefix[end] - self._linear_prefix[start],
            self._linear_moe_prefix[end] - self._linear_moe_prefix[start],
        )

    def linear_delta(self, attn_tp: int) -> float:
        """What a GatedDeltaNet layer's attention costs a rank beyond a full-attention
        layer's (negative when it is smaller)."""
        full = self.attn_sharded / attn_tp + self.attn_whole + self.mla_copies(attn_tp)
        return self.linear_sharded / attn_tp + self.linear_whole - full

    def model_bytes(self) -> float:
        """The whole model once: every component unsharded, unpadded."""
        f = self.facts
        L, M, G = f.num_layers, f.num_moe_layers, f.num_linear_layers
        head_rows = 0 if f.tie_word_embeddings else f.vocab_size
        return (
            (L - G) * (self.attn_sharded + self.attn_whole)
            + G * (self.linear_sharded + self.linear_whole)
            + (L - M) * self.dense
            + M * (f.num_experts * self.expert + self.shared + self.router)
            + (f.vocab_size + head_rows) * self.row
            + self.row  # final norm
            + self.vision_attn
            + self.vision_mlp
            + self.vision_whole
        )

    def expert_per_rank(self, moe_tp: int) -> float:
        """Bytes of one routed expert on one rank of MoE TP."""
        if not self._padded:
            extra = 0.0
            if self._wna16_index:
                f = self.facts
                extra = wna16_index_bytes(f.hidden_size, f.moe_intermediate_size // moe_tp)
            return self.expert / moe_tp + extra
        hit = self._expert_cache.get(moe_tp)
        if hit is None:
            f = self.facts
            assert self.gpu is not None
            shapes = mxfp4_experts(
                f.hidden_size, f.moe_intermediate_size, moe_tp, self.gpu, self.pack
            )
            hit = self._expert_cache[moe_tp] = shapes.bytes_per_expert(f.expert_bias)
        return hit

    def mla_copies(self, attn_tp: int) -> float:
        """One layer's absorbed-MLA copies of `kv_b_proj` on a rank (`mla.py`); 0 without
        MLA."""
        hit = self._mla_cache.get(attn_tp)
        if hit is None:
            hit = self._mla_cache[attn_tp] = copies_per_layer(self.facts, self._mla_width, attn_tp)
        return hit

    def layer_tensors(
        self,
        moe: bool,
        attn_tp: int,
        dense_tp: int,
        shared_tp: int,
        moe_tp: int,
        experts_here: int,
        linear: bool = False,
        resident_kv_b: bool = False,
    ) -> list[int]:
        """Bytes of each tensor one decoder layer allocates on a rank, in build order:
        its linears (fused as SGLang fuses them), the two norms (and per-head q/k norms),
        and for an MoE layer the router, the experts' `w13`/`w2` and the shared expert.
        With `linear`, a GatedDeltaNet layer's (its conv, `dt_bias`, `A_log` and gated norm
        after its linears). With `resident_kv_b`, MLA's `kv_b_proj` is left out (`offloaded`)."""
        f, q = self.facts, self.facts.quant
        u, h = q.unquantized, f.hidden_size
        out: list[int] = []
        ids = f.linear_layer_ids
        layer = ids[0] if linear else next((i for i in range(f.num_layers) if i not in ids), 0)
        for m in layer_modules(f, "", layer, moe):
            if resident_kv_b and m.name.endswith(".kv_b_proj"):
                continue
            if m.component == "linear_attention":
                out += _weight_and_scales(m.params / attn_tp, q.linear_attention_bytes)
                if m.name.endswith("out_proj"):
                    heads = f.linear_num_value_heads // attn_tp
                    conv = f.linear_conv_dim // attn_tp * f.linear_conv_kernel
                    out += [
                        int(conv * u),
                        int(heads * u),
                        int(heads * 4),
                        int(f.linear_value_head_dim * u),
                    ]
            elif m.component == "attention":
                out += _weight_and_scales(m.params / attn_tp, q.attention)
            elif m.component == "attention_whole":
                out += _weight_and_scales(m.params, q.attention_whole_bytes)
            elif m.component == "dense_mlp":
                out += _weight_and_scales(m.params / dense_tp, q.dense_mlp)
            elif m.component == "shared":
                out += _weight_and_scales(m.params / shared_tp, q.shared_bytes)
            else:
                out.append(int(self.router))
                params = experts_here * f.expert_params() / moe_tp
                for part in (2 / 3, 1 / 3):  # w13, then w2
                    out += _weight_and_scales(params * part, q.experts)
        out += [int(h * u), int(h * u)]
        if f.qk_norm == "head" and not linear:
            out += [int(f.head_dim * u)] * 2
        return out

    def layer_rounding(
        self,
        moe: bool,
        attn_tp: int,
        dense_tp: int,
        shared_tp: int,
        moe_tp: int,
        experts_here: int,
        linear: bool = False,
    ) -> float:
        """One layer's share of the allocator's rounding (`allocator.py`), in the steady
        state of a run of identical layers (GatedDeltaNet ones with `linear`)."""
        key = (int(moe), attn_tp, dense_tp, shared_tp, moe_tp, experts_here, int(linear))
        hit = self._rounding_cache.get(key)
        if hit is None:
            tensors = self.layer_tensors(
                moe, attn_tp, dense_tp, shared_tp, moe_tp, experts_here, linear
            )
            hit = run_rounding(tuple(tensors), STEADY_LAYERS) / STEADY_LAYERS
            self._rounding_cache[key] = hit
        return hit

    def vocab_rounding(self, rows: int) -> float:
        """The rounding of an embedding or LM head shard of `rows` rows."""
        return float(rounding_bytes([int(rows * self.row)])) if rows else 0.0

    def attention_width(self, tp: int, attn_tp: int) -> int:
        """The TP width this class splits its attention projections over: attention TP,
        or all of TP in the classes that ignore DP attention (`ATTENTION_OVER_TP_ARCHITECTURES`).
        The KV pool is sized per attention TP either way (`kv.py`)."""
        return tp if self._attention_over_tp else attn_tp

    def embedding_rows(self, tp: int, attn_tp: int, dp_attention: bool) -> int:
        """The input embedding's vocabulary rows on one rank (see the module docstring)."""
        if self._embedding == "never":
            return self.facts.vocab_size
        vocab = self.facts.padded_vocab
        if not dp_attention or self._embedding == "tp":
            return _ceil(vocab, tp)
        return vocab if self._embedding == "whole" else _ceil(vocab, attn_tp)

    def dense_width(self, moe_dense_tp: int | None, tp: int) -> int:
        """The TP width this model's dense-layer MLPs are split over, from
        `--moe-dense-tp-size` and `--tp-size`: the one rule for `stage` and the streaming
        columns (`columns.py`)."""
        return (moe_dense_tp if self.dense_tp_honoured else None) or tp

    def dense_tp(self, p: Parallel) -> int:
        return self.dense_width(p.moe_dense_tp, p.tp)

    def shared_width(self, a2a: str, tp: int, ep: int, moe_tp: int) -> int:
        """The width this model's shared experts are split over: the pack's `shared_tp`
        rule on the layout (`shared_tp_rule`), for `stage` and the streaming columns."""
        key = (a2a, tp, ep, moe_tp)
        hit = self._shared_cache.get(key)
        if hit is None:
            env = {
                "moe_a2a_backend": a2a,
                "tp_size": tp,
                "ep_size": ep,
                "moe_dp_size": tp // (ep * moe_tp),
                "architecture": self.facts.architecture,
                "shared_experts_fusion": self.facts.shared_experts_fusion,
            }
            hit = self._shared_cache[key] = max(1, int(evaluate(self._shared_rule, env)))
        return hit

    def experts_per_rank(self, ep: int, redundant: int = 0) -> int:
        """Routed-expert slots one EP rank holds (the busiest, when they do not divide):
        the model's experts, plus `--ep-num-redundant-experts` where this release's class
        builds its MoE layer with them (`FusedMoE(num_experts=n + redundant)`, whose
        `num_local_experts` is that over EP)."""
        n = self.facts.num_experts
        extra = redundant if self._redundant_slots and n else 0
        return _ceil(n + extra, ep)

    def shared_tp(self, p: Parallel) -> int:
        return self.shared_width(p.moe_a2a_backend, p.tp, p.ep, p.moe_tp)

    def canonical(self, p: Parallel) -> Parallel:
        """`p` without what this model cannot tell apart: the expert widths of a dense
        model, and the all-to-all backend where it leaves the shared experts as they are
        (no shared experts, one rank, Llama 4). Why: a planner estimates each distinct
        layout once (`perf.ranking`, `perf.disagg`), and a backend SGLang sets by itself
        (DeepSeek's prefill CP) would otherwise list the same widths twice."""
        if not self.facts.is_moe:
            p = replace(p, ep=1, moe_tp=p.tp, moe_dp=1, redundant_experts=0)
        if p.moe_a2a_backend != "none":
            plain = replace(p, moe_a2a_backend="none")
            if not self.facts.num_shared_experts or self.shared_tp(plain) == self.shared_tp(p):
                return plain
        return p

    def stage(self, p: Parallel, stage: int) -> StageWeights:
        """Bytes on one rank of pipeline stage `stage` (the busiest rank when experts do
        not divide evenly over EP). Memoised on what the bytes depend on: the stage's
        layer counts, whether it is the first or the last, and the widths `stage_widths`
        names. Why: a planner asks every stage of thousands of layouts (`plan --disagg`
        on 256 GPUs: 450,000 stages), most of them a middle stage of the same counts on
        the same widths, and each costs some thirty tensors' allocator rounding."""
        f = self.facts
        start, end = stage_layers(f.num_layers, p.pp)[stage]
        first, last = stage == 0, stage == p.pp - 1
        key = (end - start, *self.counts(start, end), first, last, *stage_widths(p))
        hit = self._stage_cache.get(key)
        if hit is None:
            hit = self._stage_cache[key] = self._stage(p, start, end, first, last)
        return hit

    def _stage(self, p: Parallel, start: int, end: int, first: bool, last: bool) -> StageWeights:
        f = self.facts
        n = end - start
        moe, lin, lin_moe = self.counts(start, end)
        experts_here = self.experts_per_rank(p.ep, p.redundant_experts)
        vocab = f.padded_vocab
        atp = self.attention_width(p.tp, p.attn_tp)
        emb = 0.0
        rounding = 0.0
        if first:
            rows = self.embedding_rows(p.tp, p.attn_tp, p.dp_attention)
            emb = rows * self.row
            rounding += self.vocab_rounding(rows)
        head = 0.0
        if last:
            if not f.tie_word_embeddings or p.pp > 1:
                rows = _ceil(vocab, p.attn_tp if p.dp_lm_head else p.tp)
                head = rows * self.row
                rounding += self.vocab_rounding(rows)
            head += self.row  # final norm
        # Layers by kind: (dense, MoE) × (full attention, GatedDeltaNet).
        dense_full, dense_lin = n - moe - (lin - lin_moe), lin - lin_moe
        for count, is_moe, linear in (
            (dense_full, False, False),
            (dense_lin, False, True),
            (moe - lin_moe, True, False),
            (lin_moe, True, True),
        ):
            if count:  # a dense layer's tensors do not depend on the expert widths
                widths = (self.shared_tp(p), p.moe_tp, experts_here) if is_moe else (1, 1, 0)
                rounding += count * self.layer_rounding(
                    is_moe, atp, self.dense_tp(p), *widths, linear=linear
                )
        full = n - lin
        return StageWeights(
            attention=full * (self.attn_sharded / atp + self.attn_whole)
            + lin * (self.linear_sharded / atp + self.linear_whole),
            dense_mlp=(n - moe) * self.dense / self.dense_tp(p),
            experts=moe * (experts_here * self.expert_per_rank(p.moe_tp) + self.router),
            shared=moe * self.shared / self.shared_tp(p),
            embedding=emb,
            lm_head=head,
            vision=self.vision_attn / p.attn_tp + self.vision_mlp / p.tp + self.vision_whole,
            overhead=rounding + rope_cache_bytes(f) + full * self.mla_copies(atp),
        )

    def offloaded(self, p: Parallel, stage: int, limit: float) -> float:
        """Bytes of one rank of `stage` that `--cpu-offload-gb` keeps in host memory, for
        `limit` bytes (the flag's GB are GiB: `cpu_offload_gb * 1024**3`). SGLang's
        `OffloaderV1` (0.4.6.post5 to 0.5.23, one per rank's process, so per rank) walks the
        stage's decoder layers in order (`make_layers`; embeddings, LM head and vision tower
        stay) and moves whole parameters to the host while what it moved is under the
        limit, so the last one may overshoot it, by up to an MoE layer's fused `w13`. From
        0.5.23 MLA's `kv_b_proj` stays on the device (`_get_resident_parameter_ids`:
        `w_kc`/`w_vc` are derived from it there). The allocator's rounding of the moved
        tensors is not taken back (`overhead` keeps it)."""
        f = self.facts
        start, end = stage_layers(f.num_layers, p.pp)[stage]
        here = self.experts_per_rank(p.ep, p.redundant_experts)
        dense_tp, shared_tp = self.dense_tp(p), self.shared_tp(p)
        atp = self.attention_width(p.tp, p.attn_tp)
        key = (start, end, atp, dense_tp, shared_tp, p.moe_tp, here, limit)
        hit = self._offload_cache.get(key)
        if hit is not None:
            return hit
        linear = set(f.linear_layer_ids)
        resident = self.pack in _KV_B_RESIDENT_PACKS
        moved = 0.0
        for i in range(start, end):
            if moved >= limit:
                break
            moe = bool(self._moe_layers[i])
            widths = (shared_tp, p.moe_tp, here) if moe else (1, 1, 0)
            for size in self.layer_tensors(
                moe,
                atp,
                dense_tp,
                *widths,
                linear=i in linear,
                resident_kv_b=resident,
            ):
                if moved >= limit:
                    break
                moved += size
        self._offload_cache[key] = moved
        return moved

    def per_rank(self, p: Parallel) -> float:
        """Weight bytes on the fullest rank (the one that decides whether it loads),
        memoised as `stage` is (a roofline asks it of every layout)."""
        key = (p.pp, *stage_widths(p))
        hit = self._per_rank_cache.get(key)
        if hit is None:
            hit = self._per_rank_cache[key] = max(self.stage(p, s).total for s in range(p.pp))
        return hit


def stage_widths(p: Parallel) -> Widths:
    """The widths a stage's bytes read beyond its layers (`WeightModel.stage`'s memo key;
    tests/test_disagg_pairing.py holds the memo to a fresh model). `pp > 1`: a tied LM
    head is its own tensor on the last stage of a pipeline."""
    return (
        p.pp > 1,
        p.tp,
        p.attn_tp,
        p.ep,
        p.moe_tp,
        p.moe_dense_tp,
        p.dp_attention,
        p.dp_lm_head,
        p.moe_a2a_backend,
        p.redundant_experts,
    )
