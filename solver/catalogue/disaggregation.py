"""Encoder disaggregation (handle_encoder_disaggregation): which models can be split."""

from __future__ import annotations

from solver.lang.expr import Expr, is_set, one_of
from solver.lang.fields import F
from solver.lang.rule import Rule

SRC = "handle_encoder_disaggregation"

#: The architectures 0.5.19's handle_encoder_disaggregation accepts with --language-only
#: (sglang/srt/arg_groups/pd_disaggregation_hook.py); later releases extend the list.
ENCODER_DISAGG_ARCHITECTURES: tuple[str, ...] = (
    "Qwen2VLForConditionalGeneration",
    "Qwen3VLForConditionalGeneration",
    "Qwen2_5_VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration",
    "Qwen3OmniMoeForConditionalGeneration",
    "Qwen2AudioForConditionalGeneration",
    "Qwen2_5OmniForConditionalGeneration",
    "Dots3NoteForCausalLM",
    "KimiVLForConditionalGeneration",
    "KimiK25ForConditionalGeneration",
    "KimiK3ForConditionalGeneration",
    "MiMoV2ForCausalLM",
)


def language_only_rule(architectures: tuple[str, ...]) -> Rule:
    """--language-only serves the language half of an encoder-disaggregated model; SGLang
    reads the model's architecture and refuses any it cannot split. Without a model
    meshsat does not know the architecture, so the rule waits for one."""
    supported: Expr = one_of(F.architecture, *architectures)
    return Rule(
        "EPD-LANGUAGE-ONLY-ARCH",
        F.language_only & is_set(F.architecture),
        supported,
        "Model type {architecture} is not supported for encoder disaggregation.",
        SRC,
        hint="drop --language-only (--language-model-only serves the text model alone)",
    )


RULES: tuple[Rule, ...] = (language_only_rule(ENCODER_DISAGG_ARCHITECTURES),)
