"""The attention back-end SGLang picks when `--attention-backend` is unset (0.5.18 to 0.5.23).

Why a resolution step: every check after the attention handler reads the resolved back-end
(`attention_backends_of`, the KV4 lists, the TRT-LLM MLA dtypes, the page size, the
speculative page-tree check), so a split `--prefill-attention-backend fa3` beside an unset
base on an H100 is the pair (fa3, fa3), not (fa3, None). SGLang fills it in two places:

0. DeepSeek V4's override (`_deepseek_v4_overrides`, every 0.5.x release) writes dsv4
   whatever the user named (`FORCED`, R-ATTN-MODEL, before the deterministic handler, which
   then refuses it; on NPU it writes the split fields too: not modelled).
1. The model overrides (`handle_model_specific_adjustments`), only when none of the three
   back-end flags is given (`is_attention_backend_not_set`): DeepSeek's sparse-attention
   models (V3.2, GLM-5) take `dsa` on any GPU; DeepSeek V3 and its MLA kin take
   `trtllm_mla` on SM100; MiMo V2 takes `fa4` on SM100 (0.5.23 only).
2. `_attention_backend_default` (the attention handler's first pass), when the base is still
   unset and the split back-ends differ (`get_default_attn_backend`):
   - MHA model: FA3 on Hopper (SM9x) unless the user asked for a draft tree
     (`is_no_spec_infer_or_topk_one`: a typed top-k above 1, or top-k 1 over pages); on
     SM100/SM103 trtllm_mha (fa4 where K and V widths differ: MiMo V2) under the same
     condition and, with a speculative algorithm, only with a typed top-k (0.5.23: or
     DFLASH, which forces top-k 1); otherwise FlashInfer, or Triton for a model with
     attention sinks (gpt-oss, Granite SWA, IQuest Q1).
   - MLA model (`use_mla_backend`): FA3 on Hopper, FlashInfer on SM100, Triton elsewhere.
   - Whisper: FlashInfer.

What meshsat needs for it, and where it leaves the back-end unset (as before, and every
check then assumes the unknown default passes, as GPU-class rules do):
- a CUDA machine of a known class (`gpu_sm`; `--gpu` sets it). No GPU named: unset. ROCm
  (aiter by KV heads), NPU, XPU and CPU defaults are platform fall-backs meshsat does not
  model: unset. The DSA back-end needs no GPU class (CUDA or ROCm).
- a known architecture (MLA or not). Architectures whose own model override picks a
  back-end (gpt-oss, Qwen3.5/Next, Llama 4, Gemma 4, MiniMax M3, Nemotron-H, DeepSeek V4, ...:
  `OVERRIDDEN_ARCHITECTURES`, from the three releases' override registries): unset.
- MiMo V2 where the choice is FlashInfer or Triton: its attention sinks are config flags
  (`add_*_attention_sink_bias`) meshsat does not read: unset (`sinks_decide`: a check that
  only asks whether the default is FA3, UNO's, reads it as neither).
- FlashInfer is taken to be installed (SGLang's CUDA wheels depend on it) and Hopper's CUDA to
  be 12.3 or later. A model whose config sets `learnable_sink` (sinks meshsat cannot see)
  would run Triton where this says FlashInfer.

0.4.6.post5 picks its default in the model runner, after every argument check: not here.
"""

from __future__ import annotations

from meshsat.solver.catalogue.attention_backend import USES_MLA
from meshsat.solver.catalogue.cpu_backends import AFTER_FALLBACK
from meshsat.solver.lang.expr import FALSE, Expr, Field, Named, is_set, ite, lift, named, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.model_spec import MIMO_V2_ARCHITECTURES
from meshsat.solver.lang.rule import Assign, assign

_base, _prefill, _decode = (
    F.attention_backend,
    F.prefill_attention_backend,
    F.decode_attention_backend,
)

#: `_deepseek_family_overrides`' classes without sparse attention (every 0.5.x): on SM100,
#: with no back-end named, trtllm_mla.
TRTLLM_MLA_FAMILY = (
    "DeepseekV3ForCausalLM",
    "KimiK25ForConditionalGeneration",
    "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration",
    "LongcatFlashForCausalLM",
    "LongcatFlashForCausalLMNextN",
)
#: Architectures whose model override writes an attention back-end that is not modelled
#: here (0.5.18, 0.5.19 and 0.5.23's registries, read with the releases' own sources), and
#: the DeepSeek family's classes whose MLA-ness or sparse attention meshsat cannot tell.
OVERRIDDEN_ARCHITECTURES = (
    "BeamForCausalLM",
    "DeepseekV4ForCausalLM",
    "DiffusionGemmaForBlockDiffusion",
    "Dots3NoteForCausalLM",
    "EmbeddingGemma2Model",
    "Exaone4ForCausalLM",
    "ExaoneMoEForCausalLM",
    "ExaoneMoeForCausalLM",
    "FalconH1ForCausalLM",
    "Gemma4ForCausalLM",
    "Gemma4ForConditionalGeneration",
    "Gemma4UnifiedForConditionalGeneration",
    "Glm5NextForConditionalGeneration",
    "GptOssForCausalLM",
    "GraniteMoeHybridForCausalLM",
    "HYV4ForCausalLM",
    "HYV4ForCausalLMNextN",
    "IQuestQ1ForCausalLM",
    "IQuestQ1MTP",
    "InklingForConditionalGeneration",
    "InklingForConditionalGenerationMTP",
    "InternS2MobiusForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration",
    "JetNemotronForCausalLM",
    "JetVLMForConditionalGeneration",
    "KimiK3ForConditionalGeneration",
    "Lfm2ForCausalLM",
    "Lfm2MoeForCausalLM",
    "Llama4ForCausalLM",
    "Llama4ForConditionalGeneration",
    "LongcatFlashForCausalLM",
    "LongcatFlashForCausalLMNextN",
    "MiniCPMForCausalLM",
    "MiniCPMSALAForCausalLM",
    "MiniCPMV4_6ForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration",
    "MiniMaxM3SparseForCausalLM",
    "MiniMaxM3SparseForConditionalGeneration",
    "MistralLarge3ForCausalLM",
    "MossVLForConditionalGeneration",
    "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM",
    "Olmo2ForCausalLM",
    "PixtralForConditionalGeneration",
    "Qwen3NextForCausalLM",
    "Qwen3VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen4ExpForConditionalGeneration",
    "Step3p5ForCausalLM",
    "Step3p7ForConditionalGeneration",
)
#: The architectures whose override may name a back-end that is not modelled here: every
#: `OVERRIDDEN_ARCHITECTURES` class but the DeepSeek family's that `TRTLLM_MLA_FAMILY` covers
#: (listed there for their unknown MLA-ness only: their override's pick, `model_picks`, is
#: modelled).
UNMODELLED_PICKS = tuple(a for a in OVERRIDDEN_ARCHITECTURES if a not in TRTLLM_MLA_FAMILY)
#: `SWA_SINK_ARCHS` without an override of their own: FlashInfer takes no attention sinks.
_SINK_ARCHITECTURES = ("GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM")


#: On CPU a check after the attention handler reads the back-end after its AMX fall-back
#: (`cpu_backends`, which says why there are two names). Both are CPU back-ends outside every
#: list of GPU kernels a check asks for (`resolved_in`); a report names torch_native, as on
#: the oracle's host (no AMX).
CPU_BACKEND = AFTER_FALLBACK
#: The base back-end a check after the attention handler reads, in its words: R-ATTN-BACKEND's,
#: else CPU's (`CPU_BACKEND`). Anywhere else an unset one is a default not known here, which
#: `resolved_in` lets pass (so this value is never shown there).
backend_used: Named = named("attention_backend_used", ite(is_set(_base), _base, CPU_BACKEND))


def resolved_in(*allowed: str) -> Expr:
    """The base back-end a check after the attention handler reads is one of `allowed`. Where
    it stays unset: on CPU the platform's (`backend_used`); elsewhere (ROCm, NPU, no
    `gpu_sm`, no architecture or one whose own override picks it) a default meshsat does not
    know, assumed to pass as every GPU-class rule does. The back-end is tested on the field
    itself, so that `fix` sees the literals."""
    unset_passes = (F.platform != "cpu") | one_of(backend_used, *allowed)
    return one_of(_base, *allowed) | (~is_set(_base) & unset_passes)


_CUDA_GPU = (F.platform == "cuda") & is_set(F.gpu_sm)
#: `is_hopper_with_cuda_12_3` and `is_sm100`: the capability's major digit, 9 or 10.
HOPPER = _CUDA_GPU & (F.gpu_sm >= 90) & (F.gpu_sm < 100)
SM100 = _CUDA_GPU & (F.gpu_sm >= 100) & (F.gpu_sm < 110)


def _typed(field: Field, raw: bool) -> Field:
    """What the default reads of a field the speculative handlers resolve later: at its own
    step the field itself (still as typed), in a check after them the typed value."""
    return field.as_raw if raw else field


def _none_named(raw: bool = False) -> Expr:
    """`is_attention_backend_not_set`: none of the three back-end flags is given."""
    return (
        ~is_set(_typed(_base, raw)) & ~is_set(_typed(_prefill, raw)) & ~is_set(_typed(_decode, raw))
    )


def _topk_one(raw: bool = False) -> Expr:
    """`is_no_spec_infer_or_topk_one`, asked before the speculative handler: the typed top-k
    and page (read at this step, before R-PAGE-SIZE and R-SPEC-*, they are still as typed; a
    DSA model's page override never matters here: its back-end is dsa)."""
    topk, page = _typed(F.speculative_eagle_topk, raw), _typed(F.page_size, raw)
    return ~is_set(topk) | ((topk == 1) & (~is_set(page) | (page == 1)))


TOPK_ONE = _topk_one()
_MIMO = one_of(F.architecture, *MIMO_V2_ARCHITECTURES)
_DSA = F.is_deepseek_dsa & one_of(F.platform, "cuda", "hip")


def _sm100_trtllm(release: str, raw: bool = False) -> Expr:
    """SM100's trtllm_mha (or fa4) branch: no draft tree, and with a speculative algorithm
    a typed top-k (0.5.23: or DFLASH, whose top-k is 1)."""
    alg = _typed(F.speculative_algorithm, raw)
    typed = ~is_set(alg) | is_set(_typed(F.speculative_eagle_topk, raw))
    if release == "0.5.23":
        typed = typed | (alg == "DFLASH") | (alg == "dflash")
    return SM100 & _topk_one(raw) & typed


def sinks_decide(release: str, *, raw: bool = False) -> Expr:
    """MiMo V2 on a CUDA GPU of a known class where `get_default_attn_backend` picks
    FlashInfer, or Triton for a model with attention sinks (config flags meshsat does not
    read): R-ATTN-BACKEND leaves the base unset there, but the default is one of the two,
    never FA3 nor any other; not where its own override picks fa4 first (`model_picks`). A
    check after the speculative handler (UNO's) reads it with `raw`: the typed top-k, page,
    algorithm and back-end flags, as the default read them."""
    generic = _CUDA_GPU & _MIMO & ~(HOPPER & _topk_one(raw)) & ~_sm100_trtllm(release, raw)
    for when, _ in model_picks(release, raw=raw):
        generic = generic & ~when
    return generic


def model_picks(release: str, *, raw: bool = False) -> tuple[tuple[Expr, str], ...]:
    """The model overrides' picks (`handle_model_specific_adjustments`), in their order, each
    (when, back-end), none of the three back-end flags named: the one declaration of them,
    which R-ATTN-BACKEND's default and R-DETERMINISTIC's fill (which leaves them alone) read.
    DSA's dsa on a GPU (CUDA or ROCm), the DeepSeek family's trtllm_mla on SM100, and
    (0.5.23) MiMo V2's fa4 on SM100. `raw`: the flags as typed, for a check after them."""
    none = _none_named(raw)
    cases: list[tuple[Expr, str]] = [
        (none & _DSA, "dsa"),
        (
            none & ~F.is_deepseek_dsa & one_of(F.architecture, *TRTLLM_MLA_FAMILY) & SM100,
            "trtllm_mla",
        ),
    ]
    if release == "0.5.23":
        cases.append((none & _MIMO & SM100, "fa4"))
    return tuple(cases)


def model_pick(release: str) -> tuple[Expr, Expr]:
    """(picks, back-end) of the none-named model overrides: 0.5.23's NVFP4 handler runs after
    them and reads their pick as the user's (`kv4.nvfp4_backends`)."""
    cases = model_picks(release)
    picks: Expr = FALSE
    for when, _ in cases:
        picks = picks | when
    backend = lift(cases[-1][1])
    for when, name in reversed(cases[:-1]):
        backend = ite(when, name, backend)
    return picks, backend


#: Model overrides that write the base back-end whatever the user named, (architecture,
#: back-end): `_deepseek_v4_overrides` (0.5.18 to 0.5.23).
FORCED: tuple[tuple[str, str], ...] = (("DeepseekV4ForCausalLM", "dsv4"),)


def forced_backend() -> Assign:
    """R-ATTN-MODEL: `FORCED`'s back-end, in the model handler (before the deterministic and
    attention handlers, which read it)."""
    backend = lift(FORCED[-1][1])
    for arch, name in reversed(FORCED[:-1]):
        backend = ite(F.architecture == arch, name, backend)
    return assign(one_of(F.architecture, *(a for a, _ in FORCED)), attention_backend=backend)


def model_override_names(release: str) -> Expr:
    """A model override names the back-end before the deterministic and attention handlers
    fill an unset one: one of `model_picks`, or an architecture whose override may name one
    that meshsat does not model (`UNMODELLED_PICKS`: taken to name it, so that no fill
    claims a back-end the server may not run)."""
    named_by = one_of(F.architecture, *UNMODELLED_PICKS)
    for when, _ in model_picks(release):
        named_by = named_by | when
    return named_by


def _generic(release: str) -> tuple[Expr, Expr]:
    """(known, back-end) of `get_default_attn_backend` on a CUDA GPU of a known class."""
    trtllm = _sm100_trtllm(release)
    mha = ite(
        HOPPER & TOPK_ONE,
        "fa3",
        ite(
            trtllm,
            ite(_MIMO, "fa4", "trtllm_mha"),
            ite(one_of(F.architecture, *_SINK_ARCHITECTURES), "triton", "flashinfer"),
        ),
    )
    mla = ite(HOPPER, "fa3", ite(SM100, "flashinfer", "triton"))
    whisper = F.architecture == "WhisperForConditionalGeneration"
    backend = ite(whisper, "flashinfer", ite(USES_MLA, mla, mha))
    architecture_known = is_set(F.architecture) & ~one_of(F.architecture, *OVERRIDDEN_ARCHITECTURES)
    return _CUDA_GPU & architecture_known & ~sinks_decide(release), backend


def default_backend(release: str) -> Assign:
    """R-ATTN-BACKEND's fill of an unset base back-end, where meshsat knows it (module
    docstring); after the equal-split step, as `_attention_backend_default` returns there."""
    known, backend = _generic(release)
    for when, name in reversed(model_picks(release)):
        known = when | known
        backend = ite(when, name, backend)
    return assign(~is_set(_base) & known, attention_backend=backend)
