"""The KV page size a server runs with, and the chunked prefill size it must divide.

Why a resolution step and not the typed flag: several attention back-ends and models run
only on their own page size, and SGLang rewrites `--page-size` for them with a warning
(`_mla_backend_page_constraints`, `_fa4_page_constraint`, the DeepSeek model overrides;
`_page_size_default` then turns an unset page into 1). What the KV pool, the chunk check and
the prefill/decode handshake (PD-PAGE-SIZE, `catalogue/pd_pairs.py`) read is that resolved
page, so `--attention-backend flashmla` with no `--page-size` runs pages of 64.

Release facts (each release's own source, and its own resolution on CPU; 0.5.23's also on
an H100 and with B200 platform facts through the shared oracle, tests/test_page_size.py):
- 0.5.18 to 0.5.23, in the order they apply: a DeepSeek sparse-attention model (V3.2, GLM-5)
  runs `64 * index_kpool` (its config's `index_kpool`, 1 unless given: 64 here) on CUDA and
  CPU, whatever was typed; not on NPU or XPU, and on ROCm 1 or 64 by its aiter kernels (not
  modelled: left as typed). DeepSeek V4 runs 256 (NPU 128).
  Then the back-end: flashmla 64; cutlass_mla 128 (0.5.18, 0.5.19; 0.5.23 has no such
  choice); trtllm_mla, cutedsl_mla and tokenspeed_mla (not 0.5.23) keep 32 or 64, else 64;
  trtllm_mha keeps 16, 32, 64 or 128, else 64; hpc_ops 64; fa4 (any of the three fields) on
  SM100 for a non-MLA model 128, unless the typed top-k asks for a draft tree.
  An unset back-end is the GPU's default (`get_default_attn_backend`), which R-ATTN-BACKEND
  (before this step) fills in where meshsat knows it (`attention_default`: speculative
  decoding included); the guesses below serve only where it does not (a model with its own
  override on SM100/SM103): trtllm_mha for MHA models (fa4 for MiMo V2, whose K and V widths
  differ) and, through the DeepSeek family override, trtllm_mla for DeepSeek V3 and its kin,
  without a speculative algorithm. FA3 on Hopper and FlashInfer/Triton elsewhere keep any
  page.
  The split back-ends count where the constraint reads them (flashmla, cutlass_mla,
  trtllm_mla, tokenspeed_mla: the decode one; cutedsl_mla, trtllm_mha, hpc_ops: either).
  Before them, intel_xpu as the effective decode back-end (0.5.23: or prefill) keeps 64 or
  128 (an MLA model also 16 or 32), else 128 (`_intel_xpu_page_constraint`). The model
  overrides of Qwen3.5, MiniMax M3 and Nemotron-H are not modelled.
- 0.4.6.post5 (`__post_init__`): `--page-size` defaults to 1; flashmla 64, cutlass_mla 128.

The chunk check (`chunked_prefill_size % page_size == 0`):
- 0.5.18 to 0.5.23, `check_server_args` (at launch): on the resolved values (the chunk after
  DP attention divides it, the resolved page), skipped when chunked prefill is off (<= 0) or
  on a PD decode server. An unset chunk is a GPU-memory default (2,048 to 16,384) that
  meshsat knows from `gpu_sm` alone on SM90 (8192) and SM100/SM103 (16384): there
  KV-CHUNK-DEFAULT-PAGE-CERTAIN (SGLang's error) checks that chunk, as DP attention divides
  it; on another or an unknown GPU it is the error where no default holds, and where only
  some fail KV-CHUNK-DEFAULT-PAGE (advice) asks every default to hold, so `fix` never
  leaves it to SGLang where it may not.
- 0.4.6.post5, a bare assert in `__post_init__`, before the back-end's page and DP
  attention's division: on the chunk and page as typed, a chunk of -1 included.
"""

from __future__ import annotations

from meshsat.solver.catalogue.attention_backend import USES_MLA
from meshsat.solver.catalogue.attention_default import TRTLLM_MLA_FAMILY
from meshsat.solver.lang.expr import And, Expr, Or, divides, is_set, ite, lift, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.model_spec import MIMO_V2_ARCHITECTURES
from meshsat.solver.lang.rule import Assign, Resolution, Rule, assign

#: SGLang's wording (every release; 0.4.6.post5 asserts it bare).
MESSAGE = "chunked_prefill_size must be divisible by page_size"
_HINT = (
    "a --chunked-prefill-size that is a multiple of the page size the server runs (with "
    "DP attention a multiple of dp_size times it: the chunk is divided by dp_size first), "
    "or a --page-size that divides the chunk where the attention back-end leaves it free"
)

_PAGE = F.page_size
_BACKEND = F.attention_backend
_SPLIT = {"decode": F.decode_attention_backend, "prefill": F.prefill_attention_backend}
_SM100 = (F.platform == "cuda") & is_set(F.gpu_sm) & one_of(F.gpu_sm, 100, 103)
#: The GPU picks the back-end; for an MHA model only without a speculative algorithm,
#: whose typed `--speculative-eagle-topk` decides it otherwise (not modelled here).
_DEFAULT = ~is_set(_BACKEND) & _SM100
_KNOWN_MHA = is_set(F.architecture) & ~USES_MLA & ~is_set(F.speculative_algorithm)
_ASYMMETRIC_KV = one_of(F.architecture, *MIMO_V2_ARCHITECTURES)
#: Where the DSA override sets 64 (off NPU and XPU; ROCm's depends on its kernels).
_DSA = F.is_deepseek_dsa & ~one_of(F.platform, "npu", "hip")
_DSV4 = F.architecture == "DeepseekV4ForCausalLM"


def _named(field: Expr, backend: str) -> Expr:
    return is_set(field) & one_of(field, backend)


def _runs(backend: str, default: Expr | None = None, split: tuple[str, ...] = ()) -> Expr:
    """The back-end is `backend`: named (as `--attention-backend`, or as one of the split
    back-ends in `split`, "decode"/"prefill", where SGLang's check reads them), or the GPU's
    default where `default` holds."""
    named = _named(_BACKEND, backend)
    for side in split:
        named = named | _named(_SPLIT[side], backend)
    return named if default is None else named | (_DEFAULT & default)


def _effective_is(side: str, backend: str) -> Expr:
    """`attention_backends_of`: a split back-end left out is `--attention-backend`."""
    field = _SPLIT[side]
    return ite(is_set(field), field == backend, _named(_BACKEND, backend))


def _intel_xpu(release: str) -> Assign:
    """`_intel_xpu_page_constraint`: pages of 64 or 128 (MLA also 16, 32), else 128; on
    the effective decode back-end (0.5.23: the prefill one too)."""
    sides = ("prefill", "decode") if release == "0.5.23" else ("decode",)
    runs = _effective_is(sides[0], "intel_xpu")
    for side in sides[1:]:
        runs = runs | _effective_is(side, "intel_xpu")
    fits = is_set(_PAGE) & ite(USES_MLA, one_of(_PAGE, 16, 32, 64, 128), one_of(_PAGE, 64, 128))
    return assign(runs & ~fits, page_size=128)


def _keeps(backend: Expr, *pages: int) -> Assign:
    """`backend` runs only these page sizes: any other (or none) becomes 64."""
    return assign(backend & ~(is_set(_PAGE) & one_of(_PAGE, *pages)), page_size=64)


def resolution(release: str) -> Resolution:
    """R-PAGE-SIZE for a 0.5.x release ("0.5.18", "0.5.19", "0.5.23"): the module
    docstring's steps, in SGLang's order (the model overrides, then the back-ends, then
    the default)."""
    old = release in ("0.5.18", "0.5.19")
    trtllm_mla = one_of(F.architecture, *TRTLLM_MLA_FAMILY) & ~F.is_deepseek_dsa
    d, both = ("decode",), ("decode", "prefill")
    steps: list[Assign] = [
        assign(_DSA, page_size=64),
        assign(_DSV4, page_size=ite(F.platform == "npu", 128, 256)),
        # The attention hook's own pass, before the MLA/TRT-LLM constraints.
        _intel_xpu(release),
        assign(_runs("flashmla", split=d), page_size=64),
    ]
    if old:
        steps.append(assign(_runs("cutlass_mla", split=d), page_size=128))
    steps.append(_keeps(_runs("trtllm_mla", trtllm_mla, split=d), 32, 64))
    if old:
        steps.append(_keeps(_runs("tokenspeed_mla", split=d), 32, 64))
    steps += [
        _keeps(_runs("cutedsl_mla", split=both), 32, 64),
        _keeps(_runs("trtllm_mha", _KNOWN_MHA & ~_ASYMMETRIC_KV, split=both), 16, 32, 64, 128),
        _keeps(_runs("hpc_ops", split=both), 64),
        # `_fa4_page_constraint`: any of the three fields; not for a typed draft tree
        # (top-k above 1: its page-tree cascade runs on pages of 1).
        assign(
            _runs("fa4", _KNOWN_MHA & _ASYMMETRIC_KV, split=both)
            & ~USES_MLA
            & _SM100
            & ~(is_set(F.speculative_eagle_topk) & (F.speculative_eagle_topk > 1)),
            page_size=128,
        ),
        assign(~is_set(_PAGE), quiet=True, page_size=1),
    ]
    return Resolution(
        "R-PAGE-SIZE",
        "_mla_backend_page_constraints",
        "the attention back-end (or the model) runs its own KV page size",
        tuple(steps),
    )


#: 0.4.6.post5's `__post_init__`: the page defaults to 1; flashmla and cutlass_mla force theirs.
RESOLUTION_0_4 = Resolution(
    "R-PAGE-SIZE",
    "__post_init__",
    "the attention back-end runs its own KV page size",
    (
        assign(_runs("flashmla"), page_size=64),
        assign(_runs("cutlass_mla"), page_size=128),
        assign(~is_set(_PAGE), quiet=True, page_size=1),
    ),
)

_CHUNK = F.chunked_prefill_size
#: check_server_args (validation_hook.py; server_args.py in 0.5.18), at launch, on the
#: resolved chunk and page.
CHUNK_PAGE = Rule(
    "KV-CHUNK-PAGE",
    is_set(_CHUNK) & (_CHUNK > 0) & (F.disaggregation_mode != "decode"),
    ~is_set(_PAGE) | divides(_PAGE, _CHUNK),
    MESSAGE,
    "check_server_args",
    hint=_HINT,
)
#: The chunk SGLang gives an unset --chunked-prefill-size (`_handle_gpu_memory_settings`,
#: by the GPU's memory: 2048 under 20 GB, 4096 under 60 GB or with no GPU known, 8192 under
#: 160 GB, 16384 above; 0.5.18 to 0.5.23), before DP attention divides it by dp_size.
MEMORY_DEFAULT_CHUNKS = (2048, 4096, 8192, 16384)
_DP_SHARE = ite(F.enable_dp_attention, F.dp_size, 1)


#: KV-CHUNK-PAGE on the chunk SGLang picks itself where the GPU's memory is not known: every
#: default above, divided as DP attention divides it (`_handle_data_parallelism`), must be a
#: multiple of the page. Not an error where some GPU passes (dp 64 with pages of 64:
#: 16384 // 64 = 256 does, 2048 // 64 = 32 does not); where none passes, or the GPU's own
#: default fails, it is KV-CHUNK-DEFAULT-PAGE-CERTAIN above. meshsat's advice, so `fix` and
#: `enumerate` never leave the chunk to SGLang where it may break the check: a fix that
#: unset --chunked-prefill-size was no repair there.
def _default_holds(chunk: int) -> Expr:
    """(chunk // dp) % page == 0 written without the quotient, which the exponent encoding
    would otherwise ask to be exact of every layout: chunk % (dp·page) < dp (chunk = dp·q + r,
    q = page·m + s: the remainder is dp·s + r, below dp exactly when s = 0)."""
    return (lift(chunk) % (_DP_SHARE * _PAGE)) < _DP_SHARE


#: The GPU classes whose memory band, and so whose default chunk, `gpu_sm` tells: every SM90
#: GPU has 60 to 160 GB (H100/H800 80, H20/H100 NVL/GH200 96, H200 141: 8192), every
#: SM100/SM103 one 160 GB or more (B200, GB200, B300, GB300: 16384).
_GPU_CHUNK = {90: 8192, 100: 16384, 103: 16384}
_GPU_KNOWN = (F.platform == "cuda") & is_set(F.gpu_sm) & one_of(F.gpu_sm, *_GPU_CHUNK)
_GPU_DEFAULT_HOLDS = Or(
    *((F.gpu_sm == sm) & _default_holds(chunk) for sm, chunk in _GPU_CHUNK.items())
)
_DEFAULT_CHUNK = ~is_set(_CHUNK) & (F.disaggregation_mode != "decode") & is_set(_PAGE)
#: KV-CHUNK-PAGE where it is certain on the chunk SGLang picks itself: the default of the GPU
#: `gpu_sm` names, or, with the GPU's memory unknown, every default (dp 3 with pages above 1:
#: 682, 1365, 2730, 5461 are odd). SGLang's error and wording (check_server_args, at launch;
#: 0.5.23 measured: --tp 3 --attn-dp-size 3 --page-size 16 refused with chunk 1365).
CHUNK_DEFAULT_PAGE_CERTAIN = Rule(
    "KV-CHUNK-DEFAULT-PAGE-CERTAIN",
    _DEFAULT_CHUNK,
    ite(_GPU_KNOWN, _GPU_DEFAULT_HOLDS, Or(*(_default_holds(d) for d in MEMORY_DEFAULT_CHUNKS))),
    MESSAGE + " (no --chunked-prefill-size: SGLang's default chunk for the GPU's memory, "
    "2048 to 16384, 8192 on SM90, 16384 on SM100, over DP attention's dp_size {dp_size}, "
    "is not a multiple of the page size {page_size})",
    "check_server_args",
    hint="give a --chunked-prefill-size that is a multiple of dp_size times the page size "
    "(with DP attention) or of the page size",
)
CHUNK_DEFAULT_PAGE = Rule(
    "KV-CHUNK-DEFAULT-PAGE",
    # Where the GPU names the default, KV-CHUNK-DEFAULT-PAGE-CERTAIN decides alone; where
    # no default holds, it is that error, not this advice.
    _DEFAULT_CHUNK & ~_GPU_KNOWN & Or(*(_default_holds(d) for d in MEMORY_DEFAULT_CHUNKS)),
    And(*(_default_holds(d) for d in MEMORY_DEFAULT_CHUNKS)),
    "with no --chunked-prefill-size SGLang sizes the chunk by the GPU's memory (2048, 4096, "
    "8192 or 16384) and DP attention divides it by dp_size {dp_size}: on some GPUs that "
    "chunk is not a multiple of the page size {page_size}, and check_server_args refuses "
    "it: " + MESSAGE,
    "check_server_args",
    hint="give a --chunked-prefill-size that is a multiple of dp_size times the page size "
    "(with DP attention) or of the page size",
)
#: 0.4.6.post5's bare assert in `__post_init__`, on the typed values (before the back-end's
#: page and DP attention's division), a chunk of -1 included.
_RAW_CHUNK, _RAW_PAGE = _CHUNK.as_raw, _PAGE.as_raw
CHUNK_PAGE_0_4 = Rule(
    "KV-CHUNK-PAGE",
    is_set(_RAW_CHUNK) & is_set(_RAW_PAGE),
    divides(_RAW_PAGE, _RAW_CHUNK),
    "AssertionError (a bare assert: chunked_prefill_size % page_size == 0): " + MESSAGE,
    "__post_init__",
    hint="a --chunked-prefill-size that is a multiple of --page-size (-1, chunked prefill "
    "off, only with --page-size 1)",
)
