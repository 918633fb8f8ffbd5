"""Deterministic inference (`--enable-deterministic-inference`; `handle_deterministic_inference`,
0.5.18 to 0.5.23; 0.4.6.post5 has no such flag).

Why here: the handler runs after the model overrides and before the attention handler, and
what it decides is read by every check after it. In its order:

- `--enable-aiter-allreduce-fusion` is turned off (the CP and MoE-DP checks read it);
- an unset `--attention-backend` is filled (`_deterministic_attention_backend`): fa3, or on
  SM100/SM120 triton for DeepSeek's MLA family and flashinfer for the rest. The model
  overrides run first and may name a back-end: their picks are declared once, in
  `attention_default.model_picks` (R-ATTN-BACKEND's default applies them), and where one
  fires, or an architecture's override is one meshsat does not model, nothing is filled
  here (`model_override_names`). meshsat fills it only on a CUDA GPU of a known class;
- a named back-end outside `DETERMINISTIC_ATTENTION_BACKEND_CHOICES` is refused
  (DET-ATTN-BACKEND), on CPU too, where `handle_cpu_backends` has already named intel_amx
  (or torch_native on Arm) for an unset one;
- an absorbed-MLA model takes only the radix-capable back-ends (DET-MLA-BACKEND), and fa4
  only on SM100/SM110 (DET-MLA-FA4-SM);
- off the radix-capable back-ends (`RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND`) the
  radix cache is turned off, silently (HiCache's radix check then reads it).

Not modelled: `--rl-on-policy-target` (turns the mode on; not a field), the sampling
back-end (forced to pytorch; not a field), ROCm's RCCL check (`--disable-custom-all-reduce`
is not a field) and the NCCL/all-reduce settings for TP > 1 (no rule reads them).
"""

from __future__ import annotations

from meshsat.solver.catalogue.attention_default import FORCED, model_override_names
from meshsat.solver.catalogue.cpu_backends import PLATFORM_PICK
from meshsat.solver.lang.expr import Expr, is_set, ite, named, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Resolution, Rule, assign

SRC = "handle_deterministic_inference"

#: `DETERMINISTIC_ATTENTION_BACKEND_CHOICES` (0.5.19, 0.5.23; 0.5.18 has no intel_xpu).
CHOICES = ("ascend", "fa3", "fa4", "flashinfer", "intel_xpu", "triton")
CHOICES_0_5_18 = ("ascend", "fa3", "fa4", "flashinfer", "triton")
#: `RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND` (0.5.18 to 0.5.23).
RADIX_BACKENDS = ("ascend", "fa3", "fa4", "triton")
#: `_deterministic_is_deepseek_model` (the Blackwell fill takes triton for these) and the
#: handler's absorbed-MLA list (0.5.18 to 0.5.23; 0.5.23's handler list adds GLM-5 Next).
DEEPSEEK_ARCHITECTURES = (
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration",
    "GlmMoeDsaForCausalLM",
    "Glm4MoeLiteForCausalLM",
)
ABSORBED_MLA_0_5_23 = (*DEEPSEEK_ARCHITECTURES, "Glm5NextForConditionalGeneration")

_det = F.enable_deterministic_inference
_base = F.attention_backend
_raw = _base.as_raw
_cuda_sm = (F.platform == "cuda") & is_set(F.gpu_sm)
#: `is_sm100` / `is_sm120`: the capability's major digit.
_sm10 = _cuda_sm & (F.gpu_sm >= 100) & (F.gpu_sm < 110)
_sm12 = _cuda_sm & (F.gpu_sm >= 120) & (F.gpu_sm < 130)


def _none_named(raw: bool) -> Expr:
    """`is_attention_backend_not_set`: none of the three back-end flags is given (`raw`:
    as the user typed them)."""
    fields = (_base, F.prefill_attention_backend, F.decode_attention_backend)
    named_one = [is_set(f.as_raw if raw else f) for f in fields]
    return ~(named_one[0] | named_one[1] | named_one[2])


_FILL = ite(
    _sm10 | _sm12,
    ite(one_of(F.architecture, *DEEPSEEK_ARCHITECTURES), "triton", "flashinfer"),
    "fa3",
)


def deterministic(release: str) -> Resolution:
    """R-DETERMINISTIC of a 0.5.x release ("0.5.18", "0.5.19", "0.5.23": the model overrides
    it leaves alone differ, `attention_default.model_override_names`)."""
    model_pick = model_override_names(release)
    return Resolution(
        "R-DETERMINISTIC",
        SRC,
        "deterministic inference turns aiter all-reduce fusion off, fills an unset attention "
        "backend (fa3; flashinfer, or triton for DeepSeek, on SM100/SM120) and turns the radix "
        "cache off on a backend without deterministic radix support",
        (
            assign(_det & F.enable_aiter_allreduce_fusion, enable_aiter_allreduce_fusion=False),
            assign(_det & ~is_set(_base) & _cuda_sm & ~model_pick, attention_backend=_FILL),
            assign(
                _det & is_set(_base) & ~one_of(_base, *RADIX_BACKENDS) & ~F.disable_radix_cache,
                disable_radix_cache=True,
            ),
        ),
    )


#: The seed's release (0.5.19; 0.5.18 the same); 0.5.23's: releases.py.
DETERMINISTIC = deterministic("0.5.19")

# --- rules -------------------------------------------------------------------------------
_cpu = F.platform == "cpu"
#: The back-end the handler's checks read: the one the user named; on CPU an unset one is
#: `handle_cpu_backends`' (`PLATFORM_PICK`: this handler runs before the AMX
#: fall-back); with none named, the model override's pick or this
#: handler's fill (the resolved back-end). With only split back-ends named the checks read
#: the fill, which passes them all: not checked.
#: A model override that names its back-end whatever was typed (DeepSeek V4's dsv4,
#: `attention_default.FORCED`, R-ATTN-MODEL) is what the checks read.
_FORCED = one_of(F.architecture, *(arch for arch, _ in FORCED))
SEEN = named(
    "deterministic_attention_backend",
    ite(_FORCED, _base, ite(is_set(_raw), _raw, ite(_cpu, PLATFORM_PICK, _base))),
)
_CHECKED = _det & (_FORCED | is_set(_raw) | _cpu | (_none_named(raw=True) & is_set(_base)))


def _words(backends: tuple[str, ...]) -> str:
    """SGLang prints the Python list."""
    return repr(list(backends))


def attention_backend_rule(choices: tuple[str, ...]) -> Rule:
    return Rule(
        "DET-ATTN-BACKEND",
        _CHECKED,
        one_of(SEEN, *choices),
        f"Currently only {_words(choices)} attention backends are supported for deterministic "
        "inference, but you explicitly specified '{deterministic_attention_backend}'.",
        SRC,
        hint="--attention-backend fa3 (or triton, fa4, flashinfer), or drop "
        "--enable-deterministic-inference",
    )


def mla_backend_rule(choices: tuple[str, ...], architectures: tuple[str, ...]) -> Rule:
    """Asked once DET-ATTN-BACKEND has passed."""
    return Rule(
        "DET-MLA-BACKEND",
        _CHECKED & one_of(F.architecture, *architectures) & one_of(SEEN, *choices),
        one_of(SEEN, *RADIX_BACKENDS),
        f"Currently only {_words(RADIX_BACKENDS)} attention backends are supported for "
        "deterministic inference with absorbed-MLA models. But you're using "
        "{deterministic_attention_backend}.",
        SRC,
        hint="--attention-backend fa3 (or triton), or drop --enable-deterministic-inference",
    )


def mla_fa4_rule(architectures: tuple[str, ...]) -> Rule:
    """`is_sm100_or_sm110`: capability major 10 or 11 (an unknown class is assumed to hold)."""
    return Rule(
        "DET-MLA-FA4-SM",
        _CHECKED & one_of(F.architecture, *architectures) & (SEEN == "fa4"),
        (F.platform == "cuda") & (~is_set(F.gpu_sm) | ((F.gpu_sm >= 100) & (F.gpu_sm < 120))),
        "Deterministic inference with absorbed-MLA models on the fa4 attention backend "
        "requires SM100/SM110: it runs absorbed MLA, whose qv argument flash_attn.cute only "
        "implements on those archs.",
        SRC,
        hint="--attention-backend fa3 (or triton) off SM100/SM110",
    )


#: The seed's release (0.5.19); 0.5.18 and 0.5.23: releases.py.
RULES: tuple[Rule, ...] = (
    attention_backend_rule(CHOICES),
    mla_backend_rule(CHOICES, DEEPSEEK_ARCHITECTURES),
    mla_fa4_rule(DEEPSEEK_ARCHITECTURES),
)
#: 0.5.18's choices lack intel_xpu.
RULES_0_5_18: tuple[Rule, ...] = (
    attention_backend_rule(CHOICES_0_5_18),
    mla_backend_rule(CHOICES_0_5_18, DEEPSEEK_ARCHITECTURES),
)
#: 0.5.23's absorbed-MLA list adds GLM-5 Next.
RULES_0_5_23: tuple[Rule, ...] = (
    mla_backend_rule(CHOICES, ABSORBED_MLA_0_5_23),
    mla_fa4_rule(ABSORBED_MLA_0_5_23),
)
