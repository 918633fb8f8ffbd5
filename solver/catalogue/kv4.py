"""FP4 KV caches (`--kv-cache-dtype nvfp4 / fp4_mx_block16`): the GPU and attention back-end
they need (`handle_kv4_compatibility`, 0.5.18 to 0.5.23; 0.5.23's
`handle_nvfp4_prefill_kv_dequant_dtype` before it).

Why here: SGLang refuses these while it resolves its arguments, after the attention back-end
is filled in and before the parallel handlers, so such a layout stops there whatever its
widths. The back-end SGLang checks is the resolved one: unset, it is the GPU's default
(`get_default_attn_backend`: FA3 on Hopper for MHA and MLA; on SM100/SM103 trtllm_mha for
MHA and FlashInfer for MLA; elsewhere FlashInfer for MHA and Triton for MLA; the DSA back-end
on DeepSeek's sparse-attention models), so an unset back-end passes only on SM100/SM103, or
where the GPU class is unknown (`gpu_sm` unset: as every GPU-class rule, assumed to hold).
With split back-ends (`--prefill-attention-backend`, `--decode-attention-backend`) SGLang
reads the resolved pair (`attention_backends_of`, `prefill_backend` / `decode_backend` here):
a pair that differs, FA4 prefill aside, only warns ("Compatibility issues are unlikely");
an FA4 prefill asks the decode back-end of its own list (KV4-FA4-*); an equal pair is the
attention backend (R-ATTN-BACKEND) and takes the lists above. R-ATTN-BACKEND fills an unset
base with the GPU's default where meshsat knows it (`attention_default`), so a split
`--prefill-attention-backend fa3` alone on Hopper is the pair (fa3, fa3) and takes the list,
as in SGLang; where the default is not known the checks above fall back to the guesses of
`_default_passes`.
"""

from __future__ import annotations

from meshsat.solver.catalogue.attention_backend import DECODE, MLA_MODEL, PREFILL
from meshsat.solver.catalogue.attention_default import model_pick
from meshsat.solver.catalogue.cpu_backends import PLATFORM_PICK
from meshsat.solver.lang.expr import Expr, is_set, ite, named, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Resolution, Rule, assign

SRC = "handle_kv4_compatibility"
NVFP4_SRC = "handle_nvfp4_prefill_kv_dequant_dtype"
ATTN_SRC = "handle_attention_backend_compatibility"

_FP4 = one_of(F.kv_cache_dtype, "nvfp4", "fp4_mx_block16")
_CUDA = F.platform == "cuda"
_MHA = is_set(F.architecture) & ~MLA_MODEL
_backend = F.attention_backend
_P, _D = F.prefill_attention_backend, F.decode_attention_backend


def _default_passes() -> Expr:
    """An unset back-end whose GPU default the list takes (module docstring)."""
    return ~is_set(_backend) & ~F.is_deepseek_dsa & (~is_set(F.gpu_sm) | one_of(F.gpu_sm, 100, 103))


#: The lists below are asked of an equal pair that is not FA4 (`attention_backend`), or of an
#: FA4 prefill's decode back-end (KV4-FA4-*); a differing pair only warns.
_SAME_PAIR = (PREFILL == DECODE) & (PREFILL != "fa4")
_FA4_PREFILL = PREFILL == "fa4"


def _listed(choices: tuple[str, ...]) -> str:
    return "[" + ", ".join(repr(c) for c in choices) + "]"


def _backend_rule(rule_id: str, kind: str, choices: tuple[str, ...], dtypes: Expr) -> Rule:
    listed = _listed(choices)
    return Rule(
        rule_id,
        dtypes & _CUDA & (MLA_MODEL if kind == "MLA" else _MHA) & _SAME_PAIR,
        (is_set(_backend) & one_of(_backend, *choices)) | _default_passes(),
        f"KV4 {kind} expects attention_backend to be one of {listed}, but got "
        "{attention_backend}",
        SRC,
        hint=f"--attention-backend {choices[0]} (an unset back-end is the GPU's default)",
    )


def _fa4_rule(kind: str, choices: tuple[str, ...], dtypes: Expr) -> Rule:
    """An FA4 prefill's decode back-end. Unset (with the base back-end unset) it is the GPU's
    default: FlashInfer for MLA on SM100/SM103, never one of the MHA list on a known GPU."""
    default = ~is_set(F.decode_attention_backend) & ~is_set(_backend) & ~is_set(F.gpu_sm)
    if kind == "MLA":
        default = ~is_set(F.decode_attention_backend) & _default_passes()
    return Rule(
        f"KV4-FA4-{kind}-BACKEND",
        dtypes & _CUDA & (MLA_MODEL if kind == "MLA" else _MHA) & _FA4_PREFILL,
        one_of(DECODE, *choices) | default,
        f"KV4 FA4 {kind} expects decode_attention_backend to be one of {_listed(choices)}, "
        "but got {decode_backend}",
        SRC,
        hint=f"--decode-attention-backend {choices[0]}",
    )


_MHA_CHOICES = ("triton", "torch_native", "flex_attention", "trtllm_mha")
_FA4_MHA_CHOICES = ("triton", "torch_native", "flex_attention")
_MLA_CHOICES = ("cutlass_mla", "flashinfer", "trtllm_mla")

#: handle_mxfp8_kv_cache_compatibility (0.5.18 to 0.5.23, right after the KV4 checks).
MXFP8 = Rule(
    "KV-MXFP8-BLACKWELL",
    F.kv_cache_dtype == "mxfp8",
    _CUDA & (~is_set(F.gpu_sm) | (F.gpu_sm >= 100)),
    "--kv-cache-dtype mxfp8 requires an SM100+ (Blackwell) GPU for the block-scaled operands "
    "used by the FA4 MXFP8 attention path.",
    "handle_mxfp8_kv_cache_compatibility",
)

#: handle_kv4_compatibility, in its order (0.5.18, 0.5.19: MLA also takes cutlass_mla).
RULES: tuple[Rule, ...] = (
    Rule(
        "KV4-NVFP4-BLACKWELL",
        (F.kv_cache_dtype == "nvfp4") & _CUDA,
        ~is_set(F.gpu_sm) | one_of(F.gpu_sm, 100, 103, 120, 121),
        "--kv-cache-dtype=nvfp4 requires Blackwell SM100 or SM120. Use "
        "--kv-cache-dtype=fp4_mx_block16 for the block-size-16 FP4 recipe.",
        SRC,
        hint="--kv-cache-dtype fp4_mx_block16",
    ),
    _fa4_rule("MLA", _MLA_CHOICES, _FP4),
    _fa4_rule("MHA", _FA4_MHA_CHOICES, _FP4),
    _backend_rule("KV4-MLA-BACKEND", "MLA", _MLA_CHOICES, _FP4),
    _backend_rule("KV4-MHA-BACKEND", "MHA", _MHA_CHOICES, _FP4),
    Rule(
        "KV4-CUDA",
        _FP4,
        _CUDA,
        "KV4 is not tested on non-CUDA platforms.",
        SRC,
    ),
    MXFP8,
)

#: 0.5.23: MLA no longer takes cutlass_mla. nvfp4 takes the same lists, on the pair
#: R-NVFP4-BACKENDS wrote (FlashInfer or trtllm_mha prefill, trtllm_mha decode): an equal
#: trtllm_mha pair is the MHA list's, and an MLA model's, which its list refuses.
RULES_0_5_23: tuple[Rule, ...] = (
    _fa4_rule("MLA", ("flashinfer", "trtllm_mla"), _FP4),
    _fa4_rule("MHA", _FA4_MHA_CHOICES, _FP4),
    _backend_rule("KV4-MLA-BACKEND", "MLA", ("flashinfer", "trtllm_mla"), _FP4),
    _backend_rule("KV4-MHA-BACKEND", "MHA", _MHA_CHOICES, _FP4),
)
_NVFP4 = F.kv_cache_dtype == "nvfp4"
_NVFP4_BACKENDS = ("flashinfer", "trtllm_mha")
_IS_SM100 = _CUDA & one_of(F.gpu_sm, 100, 103)


def nvfp4_backends(release: str) -> Resolution:
    """R-NVFP4-BACKENDS (0.5.23, `handle_nvfp4_prefill_kv_dequant_dtype`, right before the
    attention handler): an nvfp4 cache prefills on FlashInfer's FP8 workspace or natively on
    trtllm_mha and decodes on trtllm_mha, whatever split back-ends were unset.

    The back-end it reads is the one the user named for prefill (`--prefill-attention-backend`,
    else `--attention-backend`, after R-ATTN-ALIAS and the deterministic fill) or the model
    overrides' pick (`attention_default.model_pick`, which meshsat applies in R-ATTN-BACKEND
    but SGLang before this handler); none named, SM100 prefills natively and every other GPU
    on the FP8 workspace (no `gpu_sm`: not known, only the decode back-end is set). Where a
    check of the handler fails (KV4-NVFP4-*) nothing is set but an override's pick, which
    KV4-NVFP4-PREFILL-BACKEND then names as SGLang does."""
    picks, pick = model_pick(release)
    named_one = is_set(_P) | is_set(_backend) | picks
    explicit = ite(is_set(_P), _P, ite(is_set(_backend), _backend, pick))
    target = ite(named_one, explicit, ite(_IS_SM100, "trtllm_mha", "flashinfer"))
    known = named_one | ((F.platform == "cuda") & is_set(F.gpu_sm)) | (F.platform != "cuda")
    passes = (
        _NVFP4
        & (F.platform != "cpu")
        & (~named_one | one_of(explicit, *_NVFP4_BACKENDS))
        & ((target != "trtllm_mha") | _IS_SM100 | ((F.platform == "cuda") & ~is_set(F.gpu_sm)))
        & (~is_set(_D) | (_D == "trtllm_mha"))
    )
    return Resolution(
        "R-NVFP4-BACKENDS",
        NVFP4_SRC,
        "an nvfp4 KV cache prefills on FlashInfer (FP8 workspace) or trtllm_mha (native, "
        "SM100) and decodes on trtllm_mha",
        (
            assign(
                passes & known,
                prefill_attention_backend=target,
                decode_attention_backend="trtllm_mha",
            ),
            assign(passes & ~known, decode_attention_backend="trtllm_mha"),
            assign(
                _NVFP4 & ~passes & ~is_set(_P) & ~is_set(_backend) & picks,
                attention_backend=pick,
            ),
        ),
    )


#: 0.5.23's handler checks, on the back-ends R-NVFP4-BACKENDS leaves: where the handler passes
#: they are its own picks (which hold), else what it read (prefill first, as SGLang's
#: `prefill or attention_backend`; R-ATTN-BACKEND fills no default after a failed handler).
#: On CPU the platform has named the back-end already (`PLATFORM_PICK`: this
#: handler runs before the AMX fall-back; measured), so an unset one is refused too, quoted
#: as SGLang does. A typed tokenspeed_mla prefill is trtllm_mla by then (R-ATTN-ALIAS).
_NVFP4_SEEN = named(
    "nvfp4_prefill_backend",
    ite(
        (F.platform == "cpu") & ~is_set(_P) & ~is_set(_backend),
        PLATFORM_PICK,
        PREFILL,
    ),
)
NVFP4_PREFILL = Rule(
    "KV4-NVFP4-PREFILL-BACKEND",
    _NVFP4 & (is_set(_P) | is_set(_backend) | (F.platform == "cpu")),
    one_of(_NVFP4_SEEN, *_NVFP4_BACKENDS),
    "NVFP4 prefill supports an FP8 E4M3 workspace or native NVFP4, but backend "
    "'{nvfp4_prefill_backend}' provides neither.",
    NVFP4_SRC,
    hint="--attention-backend flashinfer (or leave it out)",
)
NVFP4_NATIVE = Rule(
    "KV4-NVFP4-NATIVE-SM100",
    _NVFP4 & (PREFILL == "trtllm_mha"),
    _CUDA & (~is_set(F.gpu_sm) | one_of(F.gpu_sm, 100, 103)),
    "Native NVFP4 prefill currently requires SM100; use "
    "--prefill-kv-cache-dequant-dtype=fp8_e4m3 on this platform.",
    NVFP4_SRC,
    hint="--attention-backend flashinfer (FP8 prefill workspace)",
)
NVFP4_DECODE_BACKEND = Rule(
    "KV4-NVFP4-DECODE-BACKEND",
    _NVFP4 & is_set(F.decode_attention_backend),
    F.decode_attention_backend == "trtllm_mha",
    "NVFP4 decode requires --decode-attention-backend=trtllm_mha; got "
    "'{decode_attention_backend}'. Remove the backend option; NVFP4 selects the supported "
    "decode implementation automatically.",
    NVFP4_SRC,
    hint="leave --decode-attention-backend out",
)
NVFP4_DECODE = Rule(
    "KV4-NVFP4-DECODE-GPU",
    _NVFP4,
    _CUDA & (~is_set(F.gpu_sm) | one_of(F.gpu_sm, 90, 100, 103, 120, 121)),
    "TRTLLM MHA backend for decode is only supported on Hopper (SM90), Blackwell (SM100) and "
    "(SM120) GPUs. Please use a different decode backend.",
    ATTN_SRC,
)

#: `uses_sm100_trtllm_nvfp4` (0.5.23's `handle_kv4_compatibility`): an nvfp4 cache on SM100
#: (SM100/SM103) whose resolved pair (`attention_backends_of`, after R-NVFP4-BACKENDS, which
#: decodes every nvfp4 cache on trtllm_mha) runs trtllm_mha in either phase keeps SGLang's
#: kernel-native block scales, which neither the PD transfer path nor the host pools of
#: HiCache and LMCache preserve. No `gpu_sm`: not known, assumed to pass, as every GPU-class
#: rule.
_SM100_TRTLLM_NVFP4 = _NVFP4 & _IS_SM100 & ((PREFILL == "trtllm_mha") | (DECODE == "trtllm_mha"))
NVFP4_NATIVE_PD = Rule(
    "KV4-NVFP4-NATIVE-PD",
    _SM100_TRTLLM_NVFP4,
    F.disaggregation_mode == "null",
    "SM100 native NVFP4 with trtllm_mha does not yet support PD disaggregation because its "
    "physical block-scale layout is not implemented by the KV transfer path.",
    SRC,
    hint="--kv-cache-dtype fp8_e4m3 (or another cache dtype) for PD disaggregation",
)
NVFP4_NATIVE_HICACHE = Rule(
    "KV4-NVFP4-NATIVE-HICACHE",
    _SM100_TRTLLM_NVFP4,
    ~F.enable_hierarchical_cache & ~F.enable_lmcache,
    "SM100 native NVFP4 with trtllm_mha does not yet support hierarchical KV cache or LMCache "
    "because their host pools do not preserve the physical block-scale layout.",
    SRC,
    hint="drop --enable-hierarchical-cache and --enable-lmcache, or another --kv-cache-dtype",
)

#: `handle_kv4_compatibility` (0.5.23), right after its Blackwell check, on any CUDA GPU and
#: either FP4 dtype: the unified MHA pool allocates neither FP4 block scales nor the prefill
#: dequant workspace. 0.5.18 and 0.5.19 take the flag without this check (measured).
UNIFIED_MEMORY = Rule(
    "KV4-UNIFIED-MEMORY",
    _FP4 & _CUDA,
    ~F.enable_unified_memory,
    "FP4 KV cache does not yet support --enable-unified-memory: the unified MHA pool does "
    "not allocate FP4 block scales or the prefill dequant workspace.",
    SRC,
    hint="drop --enable-unified-memory (or another --kv-cache-dtype)",
)

#: The speculative algorithms SGLang lets the native layout verify (`supported_native_spec_
#: algorithms`). SGLang reads the upper-cased name R-SPEC-CASE leaves (NEXTN, an alias, is
#: EAGLE by then in meshsat; listed all the same, as SGLang does). An unset algorithm passes;
#: a typed NONE is a name outside the set, which SGLang refuses ("got NONE", measured).
_NATIVE_SPEC = ("EAGLE", "EAGLE3", "NEXTN", "NGRAM")
_alg = F.speculative_algorithm

#: DFlash and DSpark commit a prefix of a dense candidate block through a writer that does not
#: produce the native layout's scales (checked first, with its own message).
NVFP4_NATIVE_SPEC_PREFIX = Rule(
    "KV4-NVFP4-NATIVE-SPEC-PREFIX",
    _SM100_TRTLLM_NVFP4 & is_set(_alg),
    ~one_of(_alg, "DFLASH", "DSPARK"),
    "SM100 native NVFP4 speculative decoding does not yet support {speculative_algorithm}; "
    "use EAGLE/NEXTN or NGRAM.",
    SRC,
    hint="--speculative-algorithm EAGLE (or another --kv-cache-dtype)",
)
#: Any other algorithm (STANDALONE, FROZEN_KV_MTP, UNO, a typed NONE): SGLang does not treat
#: them as EAGLE, their draft and commit contracts having no native-layout coverage.
NVFP4_NATIVE_SPEC_ALGORITHM = Rule(
    "KV4-NVFP4-NATIVE-SPEC-ALGORITHM",
    _SM100_TRTLLM_NVFP4 & is_set(_alg),
    one_of(_alg, *_NATIVE_SPEC),
    "SM100 native NVFP4 speculative decoding supports EAGLE, EAGLE3, NEXTN, and breadth-1 "
    "NGRAM; got {speculative_algorithm}.",
    SRC,
    hint="--speculative-algorithm EAGLE (or another --kv-cache-dtype)",
)
#: trtllm_mha verifies a linear chain only; NGRAM's default BFS breadth is a tree of 10.
NVFP4_NATIVE_NGRAM = Rule(
    "KV4-NVFP4-NATIVE-NGRAM-BREADTH",
    _SM100_TRTLLM_NVFP4 & (_alg == "NGRAM"),
    F.speculative_ngram_max_bfs_breadth == 1,
    "SM100 native NVFP4 NGRAM speculative decoding requires "
    "--speculative-ngram-max-bfs-breadth=1 because trtllm_mha supports linear target "
    "verification only; got {speculative_ngram_max_bfs_breadth}.",
    SRC,
    hint="--speculative-ngram-max-bfs-breadth 1",
)
#: Not modelled: the handler then gives a draft model's worker trtllm_mha
#: (`--speculative-draft-attention-backend`, filled when unset, refused when another back-end
#: is named). meshsat has no field for the draft back-end, so the fill changes nothing it
#: reads and the refusal is not argument-decidable here; nor the mixed pair's
#: `--speculative-attention-mode prefill` to decode override, which only warns.

#: In `handle_kv4_compatibility`'s order (0.5.23): after the Blackwell check, before the lists.
NVFP4_NATIVE_RULES: tuple[Rule, ...] = (
    UNIFIED_MEMORY,
    NVFP4_NATIVE_SPEC_PREFIX,
    NVFP4_NATIVE_SPEC_ALGORITHM,
    NVFP4_NATIVE_NGRAM,
    NVFP4_NATIVE_PD,
    NVFP4_NATIVE_HICACHE,
)
