"""The architectures each release counts as multimodal by name (`multimodal_model_archs`,
configs/model_config.py), for `multimodal.config_is_multimodal`.

Why a table: a multimodal config need not wrap its language model in a sub-config
(Qwen2-VL, MiMo-V2, DeepSeek-VL2), and SGLang then knows it by its architecture alone. The
lists only grow from 0.5.18 to 0.5.23; `tests/test_memory_reserves.py` checks each against
the list `fidelity/memory_reserves.py` recorded from the release.
"""

from __future__ import annotations

#: 0.5.18's list.
_0518: frozenset[str] = frozenset(
    (
        "CLIPModel",
        "Cohere2VisionForConditionalGeneration",
        "DeepseekOCRForCausalLM",
        "DeepseekVL2ForCausalLM",
        "DotsOCRForCausalLM",
        "DotsVLMForCausalLM",
        "Ernie4_5_VLMoeForConditionalGeneration",
        "Gemma3ForConditionalGeneration",
        "Gemma3nForConditionalGeneration",
        "Gemma4ForConditionalGeneration",
        "Gemma4UnifiedForConditionalGeneration",
        "Glm4vForConditionalGeneration",
        "Glm4vMoeForConditionalGeneration",
        "GlmAsrForConditionalGeneration",
        "GlmImageForConditionalGeneration",
        "GlmOcrForConditionalGeneration",
        "Grok1AForCausalLM",
        "Grok1VForCausalLM",
        "InternS1ForConditionalGeneration",
        "InternS1ProForConditionalGeneration",
        "InternS2MobiusForConditionalGeneration",
        "InternS2PreviewForConditionalGeneration",
        "InternVLChatModel",
        "JetVLMForConditionalGeneration",
        "KimiK25ForConditionalGeneration",
        "KimiVLForConditionalGeneration",
        "Lfm2VlForConditionalGeneration",
        "LightOnOCRForConditionalGeneration",
        "Llama4ForConditionalGeneration",
        "LlavaForConditionalGeneration",
        "LlavaLlamaForCausalLM",
        "LlavaMistralForCausalLM",
        "LlavaQwenForCausalLM",
        "LlavaVidForCausalLM",
        "LocateAnythingForConditionalGeneration",
        "MiDashengLMModel",
        "MiMoV2ASRForCausalLM",
        "MiMoV2ForCausalLM",
        "MiniCPMO",
        "MiniCPMV",
        "MiniMaxM3SparseForConditionalGeneration",
        "Mistral3ForConditionalGeneration",
        "MllamaForConditionalGeneration",
        "MossVLForConditionalGeneration",
        "MultiModalityCausalLM",
        "MuseGlimmerForConditionalGeneration",
        "NVILAForConditionalGeneration",
        "NVILALiteForConditionalGeneration",
        "NemotronH_Nano_Omni_Reasoning_V3",
        "NemotronH_Nano_VL_V2",
        "POINTSV15ChatModel",
        "PaddleOCRVLForConditionalGeneration",
        "Phi4MMForCausalLM",
        "PixtralForConditionalGeneration",
        "Qwen2AudioForConditionalGeneration",
        "Qwen2VLForConditionalGeneration",
        "Qwen2_5_VLForConditionalGeneration",
        "Qwen3ASRForConditionalGeneration",
        "Qwen3OmniMoeForConditionalGeneration",
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Sarashina2VisionForCausalLM",
        "Step3VLForConditionalGeneration",
        "Step3p7ForConditionalGeneration",
        "StepVLForConditionalGeneration",
        "UnlimitedOCRForCausalLM",
        "VoxtralForConditionalGeneration",
        "WhisperForConditionalGeneration",
    )
)
#: What 0.5.19 adds.
_0519 = _0518 | frozenset(("Dots3NoteForCausalLM",))
#: What 0.5.23 adds.
_0523 = _0519 | frozenset(
    (
        "BailingMM2NativeForConditionalGeneration",
        "BailingMMNativeForConditionalGeneration",
        "BailingMoeV3VLForConditionalGeneration",
        "Cosmos3EdgeForConditionalGeneration",
        "DiffusionGemmaForBlockDiffusion",
        "EmbeddingGemma2Model",
        "Glm5NextForConditionalGeneration",
        "MuseSparkForConditionalGeneration",
        "NemotronH_Omni_Reasoning_V3",
        "Qwen4ExpForConditionalGeneration",
    )
)
#: Per pack; 0.4.6.post5 and `legacy` have no multimodal reserve, so they need none.
MULTIMODAL_ARCHITECTURES: dict[str, frozenset[str]] = {
    "0.5.18": _0518,
    "0.5.19": _0519,
    "0.5.23": _0523,
}

#: Multimodal architectures whose prefill CUDA graph the release keeps (otherwise a
#: multimodal model captures none, and the default fraction reserves none for it):
#: `multimodal_breakable_cuda_graph_supported_model_archs` (the CUDA default, breakable)
#: and `multimodal_piecewise_cuda_graph_supported_model_archs` (`tc_piecewise`, 0.5.18 and
#: 0.5.19's default elsewhere; on CUDA they move a piecewise-only one to it).
BREAKABLE_GRAPH_ARCHITECTURES: dict[str, frozenset[str]] = {
    "0.5.18": frozenset(
        (
            "InternS2MobiusForConditionalGeneration",
            "Qwen3_5ForConditionalGeneration",
            "Qwen3_5MoeForConditionalGeneration",
            "MuseGlimmerForConditionalGeneration",
            "KimiK3ForConditionalGeneration",
            "KimiK25ForConditionalGeneration",
        )
    ),
    "0.5.19": frozenset(
        (
            "Cohere2VisionForConditionalGeneration",
            "InternS2MobiusForConditionalGeneration",
            "PaddleOCRVLForConditionalGeneration",
            "Qwen3_5ForConditionalGeneration",
            "Qwen3_5MoeForConditionalGeneration",
            "MuseGlimmerForConditionalGeneration",
            "KimiK3ForConditionalGeneration",
            "KimiK25ForConditionalGeneration",
        )
    ),
    "0.5.23": frozenset(
        (
            "MiniMaxM3SparseForConditionalGeneration",
            "Cohere2VisionForConditionalGeneration",
            "Glm5NextForConditionalGeneration",
            "InternS2MobiusForConditionalGeneration",
            "PaddleOCRVLForConditionalGeneration",
            "Qwen3_5ForConditionalGeneration",
            "Qwen3_5MoeForConditionalGeneration",
            "Qwen4ExpForConditionalGeneration",
            "MuseGlimmerForConditionalGeneration",
            "MuseSparkForConditionalGeneration",
            "KimiK3ForConditionalGeneration",
            "KimiK25ForConditionalGeneration",
            "MiniMaxM3SparseForCausalLM",
        )
    ),
}
PIECEWISE_GRAPH_ARCHITECTURES: dict[str, frozenset[str]] = {
    "0.5.18": frozenset(
        (
            "Cohere2VisionForConditionalGeneration",
            "KimiK25ForConditionalGeneration",
            "MiniMaxM3SparseForCausalLM",
            "MiniMaxM3SparseForConditionalGeneration",
        )
    ),
    "0.5.19": frozenset(
        (
            "KimiK25ForConditionalGeneration",
            "MiniMaxM3SparseForCausalLM",
            "MiniMaxM3SparseForConditionalGeneration",
        )
    ),
    "0.5.23": frozenset(
        (
            "KimiK25ForConditionalGeneration",
            "MiniMaxM3SparseForCausalLM",
            "MiniMaxM3SparseForConditionalGeneration",
        )
    ),
}
