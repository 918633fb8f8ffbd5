"""Encoder disaggregation (handle_encoder_disaggregation): which models can be split, and
which can serve their text model alone (--language-model-only)."""

from __future__ import annotations

from meshsat.solver.lang.expr import Expr, is_set, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

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


#: The architectures 0.5.18 and 0.5.19 serve with --language-model-only
#: (`ServerArgs.LANGUAGE_MODEL_ONLY_ARCHITECTURES`); 0.5.23 lists others.
LANGUAGE_MODEL_ONLY_ARCHITECTURES: tuple[str, ...] = ("MuseGlimmerForConditionalGeneration",)


def language_model_only_rules(architectures: tuple[str, ...]) -> tuple[Rule, ...]:
    """handle_language_model_only, which the encoder-disaggregation handler runs first:
    the text model alone, without the encoder's flags, outside PD disaggregation, and only
    for the architectures the release lists (measured by fidelity/targets.py)."""
    only = F.language_model_only
    listed = ", ".join(f"'{a}'" for a in architectures)
    return (
        Rule(
            "LMO-NOT-LANGUAGE-ONLY",
            only,
            ~F.language_only,
            "--language-model-only cannot be combined with --language-only",
            SRC,
            hint="--language-only is the encoder-disaggregated half; choose one",
        ),
        Rule(
            "LMO-NO-DP-ENCODER",
            only,
            ~F.mm_enable_dp_encoder,
            "--language-model-only cannot be combined with --mm-enable-dp-encoder",
            SRC,
        ),
        Rule(
            "LMO-NO-PD",
            only,
            F.disaggregation_mode == "null",
            "--language-model-only is incompatible with --disaggregation-mode prefill/decode",
            SRC,
        ),
        Rule(
            "LMO-ARCH",
            only & is_set(F.architecture),
            one_of(F.architecture, *architectures),
            f"--language-model-only does not support ['{{architecture}}']. Supported: [{listed}].",
            SRC,
            hint="drop --language-model-only for this model",
        ),
    )


RULES: tuple[Rule, ...] = (
    *language_model_only_rules(LANGUAGE_MODEL_ONLY_ARCHITECTURES),
    language_only_rule(ENCODER_DISAGG_ARCHITECTURES),
)
