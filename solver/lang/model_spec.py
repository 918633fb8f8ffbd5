"""Model facts that prune layouts, read from a Hugging Face `config.json`.

Only the handful of facts the rules read are kept. Key names vary between model
families (`n_routed_experts` for DeepSeek, `num_local_experts` for Mixtral, ...), so the
reader tries the usual spellings and looks inside `text_config` for multimodal wrappers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from meshsat.solver.errors import InputError
from meshsat.solver.lang.checkpoint_files import read_checkpoint_config
from meshsat.solver.lang.checkpoint_quant import read_checkpoint_quant
from meshsat.solver.lang.context import context_length
from meshsat.solver.lang.limits import check_model_sizes, shown
from meshsat.solver.lang.requant_source import mxfp4_requantizable

#: When SGLang fuses a model's shared expert into its routed MoE (`shared_experts_fusion`).
Fusion = Literal["when_ep_1", "any_ep"]

MLA_ARCHITECTURES = (
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "KimiK25ForConditionalGeneration",
)
DSA_ARCHITECTURES = ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM")
MIMO_V2_ARCHITECTURES = ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM")
CP_V2_DEFAULT_ARCHITECTURES = (
    "DeepseekV32ForCausalLM",
    "GlmMoeDsaForCausalLM",
    "MiMoV2FlashForCausalLM",
    "MiMoV2ForCausalLM",
    "Qwen3MoeForCausalLM",
    "DeepseekV3ForCausalLM",
)

#: Model classes whose dense-layer MLPs follow `--moe-dense-tp-size 1` (the layout rules'
#: `dense_mlp_fully_dp`, the memory model's dense MLP width): SGLang 0.5.23's classes that
#: ask `is_dense_ffn_fully_dp()` (models/deepseek_v2.py, glm4_moe.py, glm4_moe_lite.py,
#: glm5_next.py, bailing_moe.py, bailing_moe_v3.py, ernie4.py, mimo_v2.py, minimax_m3.py,
#: sarvam_moe.py, xllm.py, llada2.py), their subclasses and the wrappers that build one
#: (Kimi-K2.5, MiniMax-M3's VL class, Mistral Large 3). Every other class builds them over
#: all of TP whatever the flag says: SGLang's own builds of Qwen3-32B, Step-3.5, Qwen3.5,
#: Llama 3.1 and Llama 4 under DP attention with `--moe-dense-tp-size 1` split them over TP
#: (fidelity/weight_shapes/models.py; tests/test_weight_bytes.py).
DENSE_FULLY_DP_ARCHITECTURES = frozenset({
    "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
    "DeepseekV3ForCausalLMNextN", "MistralLarge3ForCausalLM", "KimiK25ForConditionalGeneration",
    "Glm4MoeForCausalLM", "GlmMoeDsaForCausalLM", "Glm4MoeLiteForCausalLM",
    "Glm5NextForConditionalGeneration", "BailingMoEForCausalLM", "BailingMoeForCausalLM",
    "BailingMoeV2ForCausalLM", "BailingMoeV3ForCausalLM", "Ernie4_5_MoeForCausalLM",
    "Ernie4_5_ForCausalLM", "MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM",
    "MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration",
    "SarvamMLAForCausalLM", "SarvamMoEForCausalLM", "XllmForCausalLM", "K2HorizonForCausalLM",
    "LLaDA2MoeModelLM",
})  # fmt: skip
#: Model classes that build attention over all of TP under DP attention (the layout rules'
#: `attention_over_tp`, the memory model's attention width): their model files never read
#: the attention-TP group (SGLang 0.5.23's llama.py, mistral.py, mixtral.py,
#: qwen2.py, gemma2.py, gemma3_causal.py; its build of Llama-3.1-70B at tp 8 with DP
#: attention 2 and 4: tests/test_weight_bytes.py).
ATTENTION_OVER_TP_ARCHITECTURES = frozenset({
    "LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "Qwen2ForCausalLM",
    "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration",
})  # fmt: skip

#: Vision towers built from SGLang's `VisionAttention` (layers/attention/vision.py), which
#: splits the tower's heads over the attention TP group (all of TP in 0.4.6.post5), that
#: the model file builds replicated under `--mm-enable-dp-encoder` (`qwen3_vl.py` and
#: `kimi_k25.py` pass `use_data_parallel`; Kimi-K2.5's MoonViT refuses TP 32, "16 is not
#: divisible by 32", in 0.5.18 to 0.5.23's builds).
VISION_DP_ENCODER_ARCHITECTURES = frozenset({
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
    "KimiK25ForConditionalGeneration",
})  # fmt: skip
#: Towers whose heads split the same way but whose MLP splits over all of TP and whose
#: attention all-reduces over all of TP, whatever the attention TP group, and which are never
#: built data-parallel: Gemma 3's SigLIP (`siglip.py` `SiglipMLP`, `parallel_group="tp"`)
#: and Llama 4's (`mllama4.py` `Llama4VisionMLP`). SGLang 0.5.23's build of
#: gemma-3-27b-it: "4304 is not divisible by 32" at tp 32 with DP attention 32, and
#: `reject_attn_tp_shard_with_tp_reduce` at attention TP 2 of TP 8
#: (tests/fixtures/weight_shapes/models/).
VISION_OVER_TP_ARCHITECTURES = frozenset({
    "Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
})  # fmt: skip
#: Of those, the classes that build the tower only when the model is served as multimodal
#: (`--enable-multimodal`, from 0.5.18: `mllama4.py` `has_vision = has_vision_weights and
#: enable_multimodal`, and the release serves Llama 4 as text by default); `gemma3_mm.py`
#: builds SigLIP either way. The memory model reads the same list (`facts.VisionTower`).
VISION_NEEDS_MULTIMODAL_ARCHITECTURES = frozenset({"Llama4ForConditionalGeneration"})
VISION_ATTENTION_ARCHITECTURES = VISION_DP_ENCODER_ARCHITECTURES | VISION_OVER_TP_ARCHITECTURES
_HEADS = ("num_attention_heads", "n_head", "num_heads")
_KV_HEADS = (
    "num_key_value_heads",
    "n_head_kv",
    "num_kv_heads",
    "multi_query_group_num",
    "num_attention_groups",  # Step-3.5 (step3p5.py: num_key_value_heads = this)
)
_EXPERTS = ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")
_LAYERS = ("num_hidden_layers", "n_layer", "num_layers")
_MULTIMODAL_KEYS = ("vision_config", "vision_tower", "audio_config", "vision_encoder")


class ModelSpec(BaseModel):
    """The model facts the layout rules read; every one is optional."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    architecture: str | None = Field(None, description="First entry of `architectures`.")
    is_multimodal: bool = Field(False, description="Has a vision or audio tower.")
    is_deepseek_dsa: bool = Field(False, description="DeepSeek sparse attention (V3.2, GLM-5).")
    mla_attention: bool | None = Field(
        None,
        description="SGLang runs the model's attention as MLA (`ModelConfig.attention_arch`: "
        "the config has a kv_lora_rank, DeepSeek V2/V3/V3.2, Kimi, GLM-5, ...; not "
        "DeepSeek-V4); None: no model config given. HiCache under decode CP needs it.",
    )
    num_attention_heads: int | None = Field(None, ge=1)
    num_key_value_heads: int | None = Field(None, ge=1)
    num_experts: int | None = Field(None, ge=1, description="Routed experts (MoE models).")
    num_hidden_layers: int | None = Field(None, ge=1)
    max_context_length: int | None = Field(
        None,
        ge=1,
        description="The context length SGLang derives from the config (get_context_length: "
        "max_position_embeddings or its kin, times a rope_scaling factor); a longer "
        "--context-length does not start (MODEL-CONTEXT-LENGTH).",
    )
    # --- weight shapes (docs/weight-shapes.md): what each rank's shard of a linear holds
    dense_intermediate_size: int | None = Field(
        None, ge=1, description="Intermediate size of the dense (non-MoE) MLP layers, if any."
    )
    moe_intermediate_size: int | None = Field(
        None, ge=1, description="Intermediate size of one routed expert."
    )
    shared_expert_intermediate_size: int | None = Field(
        None, ge=1, description="Intermediate size of the shared expert(s), all together."
    )
    shared_experts_fusion: Fusion | None = Field(
        None,
        description="When SGLang fuses the shared expert into the routed MoE (then it is split "
        "like a routed expert): only with EP 1, with any EP, or never (None).",
    )
    dense_mlp_fully_dp: bool = Field(
        False,
        description="The model file replicates its dense MLP under --moe-dense-tp-size 1 "
        "(DeepSeek, GLM, MiMo-V2, ...); other models split it over TP whatever that says.",
    )
    attention_over_tp: bool = Field(
        False,
        description="The model file splits attention over all of TP even under DP attention "
        "(Llama, Mistral, Qwen2, ...), so its heads must divide tp_size, not attn_tp.",
    )
    vision_num_heads: int | None = Field(
        None, ge=1, description="Heads of a vision tower SGLang splits over attention TP."
    )
    vision_dp_encoder: bool = Field(
        False,
        description="The model file builds its vision tower replicated under "
        "--mm-enable-dp-encoder (Qwen3-VL, Qwen3.5, Kimi-K2.5); other towers split whatever "
        "it says.",
    )
    vision_intermediate_size: int | None = Field(
        None,
        ge=1,
        description="Intermediate size of a vision MLP split over all of TP (Gemma 3's "
        "SigLIP, Llama 4), whose attention also all-reduces over all of TP.",
    )
    vision_needs_multimodal: bool = Field(
        False,
        description="The model file builds its vision tower only with --enable-multimodal "
        "(Llama 4, from 0.5.18).",
    )
    mla_q_head_dim: int | None = Field(
        None, ge=1, description="MLA query head width (qk_nope_head_dim + qk_rope_head_dim)."
    )
    linear_attn_key_dim: int | None = Field(
        None,
        ge=1,
        description="GatedDeltaNet key width (linear_num_key_heads x linear_key_head_dim): "
        "Qwen3-Next / Qwen3.5 hybrids.",
    )
    linear_attn_value_dim: int | None = Field(
        None,
        ge=1,
        description="GatedDeltaNet value width (linear_num_value_heads x linear_value_head_dim).",
    )
    linear_attn_value_heads: int | None = Field(
        None, ge=1, description="GatedDeltaNet value heads (the rows of in_proj_b and in_proj_a)."
    )
    quant_method: str | None = Field(None, description="quantization_config.quant_method.")
    quant_block_n: int | None = Field(None, ge=1, description="Quantization block: output rows.")
    quant_block_k: int | None = Field(None, ge=1, description="Quantization block: input columns.")
    quant_group_k: int | None = Field(
        None, ge=1, description="Input-group width a row-parallel shard must align to (NVFP4)."
    )
    quant_group_size: int | None = Field(
        None, ge=1, description="AWQ / GPTQ group_size a row-parallel input shard must align to."
    )
    quant_not_checked: str | None = Field(
        None, description="Why the quantized shapes are not checked (an unmodelled scheme)."
    )
    quant_attention: bool = Field(False, description="Attention projections are quantized.")
    quant_linear_attention: bool = Field(
        False, description="GatedDeltaNet (linear-attention) projections are quantized."
    )
    quant_linear_attn_ba: bool = Field(
        False, description="GatedDeltaNet's in_proj_b / in_proj_a (fused in_proj_ba) are quantized."
    )
    quant_dense_mlp: bool = Field(False, description="Dense MLP layers are quantized.")
    quant_experts: bool = Field(False, description="Routed experts are quantized.")
    quant_shared_experts: bool = Field(False, description="Shared experts are quantized.")
    quant_wna16_experts: bool = Field(
        False,
        description="Routed experts in compressed-tensors WNA16 (integer weights, 16-bit "
        "activations), which SGLang's Marlin MoE runner serves on CUDA before SM100.",
    )
    quant_mxint4_experts: bool = Field(
        False,
        description="Those WNA16 experts are MXINT4 (4-bit symmetric integer groups of 32), "
        "which the FlashInfer TRT-LLM MoE runner serves instead of Marlin.",
    )
    quant_wna16_triton_experts: bool = Field(
        False,
        description="Those WNA16 experts are ones SGLang's Triton WNA16 MoE takes (4-bit "
        "symmetric integer groups of 32 or 128, no activation order).",
    )
    quant_mxfp4_requantizable: bool = Field(
        True,
        description="`--quantization quark_mxfp4` can requantize the checkpoint when it loads "
        "(NVFP4, FP8 with dynamic activations, a ModelOpt NVFP4/FP8 mix, or no stated "
        "quantization; lang/requant_source.py).",
    )

    @classmethod
    def from_hf_config(cls, hf: Mapping[str, Any]) -> ModelSpec:
        """The facts of a Hugging Face config; a malformed one raises `InputError`
        (a fact that is present but not a positive integer is refused, not dropped:
        dropping it would validate layouts the model cannot run), and so is a size beyond
        the documented bounds (`check_model_sizes`)."""
        check_model_sizes(hf)
        archs = hf.get("architectures")
        if archs is None:
            archs = []
        if not isinstance(archs, list | tuple) or not all(isinstance(a, str) for a in archs):
            raise InputError(
                f"model config: architectures must be a list of strings, got {shown(archs)}"
            )
        arch = archs[0] if archs else None
        text = hf.get("text_config")
        if text is None:
            text = hf.get("language_config")
        if text is None:
            text = {}
        if not isinstance(text, Mapping):
            raise InputError(f"model config: text_config must be a mapping, got {shown(text)}")

        def first(keys: tuple[str, ...], *, zero_is_none: bool = False) -> int | None:
            for source in (hf, text):
                for k in keys:
                    v = source.get(k)
                    if v is None or (zero_is_none and v == 0 and not isinstance(v, bool)):
                        continue
                    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                        raise InputError(
                            f"model config: {k} must be a positive integer, got {shown(v)}"
                        )
                    return v
            return None

        heads = first(_HEADS)
        shapes = {**_weight_shapes(hf, text, first), **_linear_attention(first)}
        quant = read_checkpoint_quant(hf)
        kv = first(_KV_HEADS) or heads
        dsa = arch in DSA_ARCHITECTURES or "index_topk" in hf or "index_topk" in text
        multimodal = any(k in hf for k in _MULTIMODAL_KEYS)
        return cls(
            architecture=arch,
            is_multimodal=multimodal,
            is_deepseek_dsa=dsa,
            mla_attention=_fact(hf, text, "kv_lora_rank") is not None
            and not str(arch).startswith("DeepseekV4"),
            num_attention_heads=heads,
            num_key_value_heads=kv,
            # Dense models sometimes say `num_experts: 0`: no routed experts.
            num_experts=first(_EXPERTS, zero_is_none=True),
            num_hidden_layers=first(_LAYERS),
            max_context_length=max(1, context_length(hf)[0]),
            **shapes,
            shared_experts_fusion=shared_experts_fusion(
                arch,
                _fact(hf, text, "n_routed_experts"),
                _fact(hf, text, "n_shared_experts"),
                shapes["shared_expert_intermediate_size"],
                shapes["moe_intermediate_size"],
            ),
            dense_mlp_fully_dp=arch in DENSE_FULLY_DP_ARCHITECTURES,
            attention_over_tp=arch in ATTENTION_OVER_TP_ARCHITECTURES,
            vision_num_heads=_vision_fact(
                arch in VISION_ATTENTION_ARCHITECTURES,
                hf,
                ("num_heads", "num_attention_heads", "vt_num_attention_heads"),
            ),
            vision_dp_encoder=arch in VISION_DP_ENCODER_ARCHITECTURES,
            vision_intermediate_size=_vision_fact(
                arch in VISION_OVER_TP_ARCHITECTURES, hf, ("intermediate_size",)
            ),
            vision_needs_multimodal=arch in VISION_NEEDS_MULTIMODAL_ARCHITECTURES,
            quant_method=quant.method,
            quant_block_n=quant.block_n,
            quant_block_k=quant.block_k,
            quant_group_k=quant.group_k,
            quant_group_size=quant.group_size,
            quant_not_checked=quant.not_checked,
            quant_attention=quant.attention,
            quant_linear_attention=quant.linear_attention,
            quant_linear_attn_ba=quant.linear_attn_ba,
            quant_dense_mlp=quant.dense_mlp,
            quant_experts=quant.experts,
            quant_shared_experts=quant.shared_experts,
            quant_wna16_experts=quant.wna16 and quant.experts,
            quant_mxint4_experts=quant.mxint4 and quant.experts,
            quant_wna16_triton_experts=quant.wna16_triton and quant.experts,
            quant_mxfp4_requantizable=mxfp4_requantizable(hf),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> ModelSpec:
        return cls.from_hf_config(read_checkpoint_config(path))


def _fact(hf: Mapping[str, Any], text: Mapping[str, Any], key: str) -> Any:
    return hf[key] if key in hf else text.get(key)


def _weight_shapes(
    hf: Mapping[str, Any], text: Mapping[str, Any], first: Any
) -> dict[str, int | None]:
    """The linear widths SGLang shards, by family (key spellings of each model file).

    Routed experts use `moe_intermediate_size`, or `intermediate_size` where a model has no
    separate one (Mixtral, gpt-oss, MiniMax, Llama 4's experts). The dense MLP exists in a
    MoE model only in its leading dense layers (DeepSeek/GLM/Kimi `first_k_dense_replace`),
    Qwen's `mlp_only_layers` / `decoder_sparse_step`, or Llama 4's interleaved layers.
    """
    experts = first(_EXPERTS, zero_is_none=True)
    inter = first(("intermediate_size", "ffn_hidden_size"))
    moe = first(("moe_intermediate_size",))
    # Step-3.5 spells the shared expert's width `share_expert_dim` (step3p5.py).
    shared = first(("shared_expert_intermediate_size", "share_expert_dim"), zero_is_none=True)
    n_shared = first(("n_shared_experts", "num_shared_experts"), zero_is_none=True)
    if experts is None:
        return {
            "dense_intermediate_size": inter,
            "moe_intermediate_size": None,
            "shared_expert_intermediate_size": None,
            "mla_q_head_dim": _mla_q(hf, text, first),
        }
    if moe is None:
        moe = inter
    dense: int | None = None
    leading_dense = (_fact(hf, text, "first_k_dense_replace") or 0) > 0
    qwen_dense = bool(_fact(hf, text, "mlp_only_layers")) or (
        (_fact(hf, text, "decoder_sparse_step") or 1) > 1
    )
    # Step-3.5 lists its MoE layers (`moe_layers_enum`); the others are dense.
    listed_dense = _fact(hf, text, "moe_layers_enum") is not None
    if leading_dense or qwen_dense or listed_dense:
        dense = inter
    elif (_fact(hf, text, "interleave_moe_layer_step") or 1) > 1:
        dense = first(("intermediate_size_mlp",)) or inter
    if shared is None and n_shared is not None and moe is not None:
        shared = moe * n_shared
    if shared is None and _fact(hf, text, "model_type") in ("llama4_text", "llama4"):
        shared = moe  # Llama 4: one shared expert as wide as a routed one (llama4.py)
    return {
        "dense_intermediate_size": dense,
        "moe_intermediate_size": moe,
        "shared_expert_intermediate_size": shared,
        "mla_q_head_dim": _mla_q(hf, text, first),
    }


def _linear_attention(first: Any) -> dict[str, int | None]:
    """GatedDeltaNet widths (qwen3_next.py / qwen3_5.py `Qwen3GatedDeltaNet`): the merged
    `in_proj_qkvz` holds [key, key, value, value] rows, `out_proj` takes value columns."""
    kh, kd = first(("linear_num_key_heads",)), first(("linear_key_head_dim",))
    vh, vd = first(("linear_num_value_heads",)), first(("linear_value_head_dim",))
    return {
        "linear_attn_key_dim": kh * kd if kh and kd else None,
        "linear_attn_value_dim": vh * vd if vh and vd else None,
        "linear_attn_value_heads": vh,
    }


def _mla_q(hf: Mapping[str, Any], text: Mapping[str, Any], first: Any) -> int | None:
    if _fact(hf, text, "kv_lora_rank") is None:
        return None
    nope, rope = first(("qk_nope_head_dim",)), first(("qk_rope_head_dim",))
    return None if nope is None or rope is None else nope + rope


def _vision_fact(applies: bool, hf: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    """The first of `keys` in `vision_config`, for a class the fact applies to."""
    vision = hf.get("vision_config")
    if not applies or not isinstance(vision, Mapping):
        return None
    key = next((k for k in keys if vision.get(k) is not None), None)
    if key is None:
        return None
    value = vision[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(
            f"model config: vision_config.{key} must be a positive integer, got {shown(value)}"
        )
    return value


def shared_experts_fusion(
    arch: str | None,
    routed: object,
    shared: object,
    shared_intermediate: object,
    moe_intermediate: object,
) -> Fusion | None:
    """When SGLang fuses the shared expert into the routed MoE. DeepSeek V3/R1
    (`DeepseekV3ForCausalLM`, 256 routed, 1 shared: deepseek_v2.py
    `shared_experts_fusion_disable_reason`) and GLM-4.5 (glm4_moe.py) only with EP 1 on CUDA;
    Qwen3-Next whenever the shared expert is as wide as a routed one (qwen2_moe.py
    `can_fuse_shared_expert`, 0.5.18+). One function for the layout rules (`ModelSpec`) and
    the memory model (`ModelFacts`), which read the counts from the config apart."""
    if arch == "DeepseekV3ForCausalLM":
        return "when_ep_1" if routed == 256 and shared == 1 else None
    if arch == "Glm4MoeForCausalLM":
        return "when_ep_1"
    if arch == "Qwen3NextForCausalLM" and shared_intermediate == moe_intermediate:
        return "any_ep"
    return None


MODEL_FACT_NAMES: tuple[str, ...] = tuple(ModelSpec.model_fields)
