"""Speculative decoding (`handle_speculative_decoding`, 0.5.18 to 0.5.23; inline in 0.4.6.post5's
`__post_init__`): the checks that read the layout, and the silent changes they read.

Why here: SGLang resolves the speculative parameters after the parallel handlers (after
elastic EP, before encoder disaggregation), and two of its checks read the layout: NGRAM and
STANDALONE refuse attention DP, and a draft tree (top-k above 1) over a paged KV cache needs an
attention back-end that implements the two-pass page-tree cascade. What those checks read is
resolved first, silently:

- the algorithm: upper-cased first (0.5.x), then NEXTN is EAGLE
  (`_resolve_speculative_algorithm_alias`; a Gemma 4 draft's
  FROZEN_KV_MTP needs the draft checkpoint, which meshsat does not read);
- EAGLE, EAGLE3 and STANDALONE without `--speculative-num-steps` take (steps, top-k, draft
  tokens) by architecture (`_auto_choose_speculative_params`: (5, 4, 8) for Llama and Grok,
  (3, 1, 4) for STANDALONE and every other class; 0.4.6.post5: (5, 4, 8) for all); with
  top-k 1 the draft tokens become steps + 1;
- NGRAM's top-k is `--speculative-ngram-max-bfs-breadth` (10 unless given) whatever the user
  said, and its draft tokens default to 12 (`_handle_ngram`).

The page size the page-tree checks read is the one the server runs: `R-PAGE-SIZE`
(`catalogue/page_size.py`, the one owner of that resolution) sets it from the model and the
attention back-end before this handler runs, so `--attention-backend flashmla` with no
`--page-size` is a tree over pages of 64. The back-end they read is `attention_backend` after
`R-ATTN-BACKEND` (equal split back-ends are the base one; FA3 with an fp8_e5m2 cache runs
Triton; an unset one is SGLang's default wherever `attention_default` knows it), as SGLang's
handler reads the resolved `attention_backend`: in every 0.5.x release the attention handler
fills it before this handler runs. Where it stays unset they read it through
`attention_default.resolved_in`: CPU's platform back-end fails them, any other unknown
default passes. The TRT-LLM MHA top-k check reads the resolved pair (a split field included).

The algorithm's name (R-SPEC-CASE, SPEC-UNKNOWN-ALGORITHM) is `speculative_names`'; 0.5.23's
DFLASH, DSPARK and UNO handlers are `speculative_dflash_uno`'s.
"""

from __future__ import annotations

from meshsat.solver.catalogue.attention_backend import DECODE, PREFILL
from meshsat.solver.catalogue.attention_default import resolved_in
from meshsat.solver.lang.expr import TRUE, Expr, Named, is_set, ite, named, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.model_spec import MIMO_V2_ARCHITECTURES
from meshsat.solver.lang.rule import Assign, Resolution, Rule, assign

SRC = "handle_speculative_decoding"

#: `_handle_eagle_family` runs these (NEXTN is EAGLE by then).
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
#: The back-ends that implement a draft tree over pages (`_PAGE_TREE_SPEC_BACKENDS`).
PAGE_TREE_BACKENDS = ("flashinfer", "fa3", "triton")

_alg = F.speculative_algorithm
_steps, _topk, _draft = (
    F.speculative_num_steps,
    F.speculative_eagle_topk,
    F.speculative_num_draft_tokens,
)
_page = F.page_size
_backend = F.attention_backend
eagle_family: Expr = one_of(_alg, *EAGLE_FAMILY)
ngram: Expr = _alg == "NGRAM"
#: A draft tree: top-k above 1 once resolved.
tree: Expr = is_set(_topk) & (_topk > 1)
#: A paged KV cache once resolved (SGLang's unset page size is 1).
paged: Expr = is_set(_page) & (_page > 1)

#: The model overrides that turn on multi-layer EAGLE (0.5.23, handle_model_specific_
#: adjustments: `_mimo_v2_overrides`, `_step3p_overrides` (an architecture name containing
#: Step3p5ForCausalLM or Step3p7ForConditionalGeneration), `_gigachat35_overrides`; 0.5.18
#: and 0.5.19 the MiMo-V2 and Step-3.5 ones).
MULTI_LAYER_EAGLE_ARCHITECTURES = (
    *MIMO_V2_ARCHITECTURES,
    "Step3p5ForCausalLM",
    "Step3p7ForConditionalGeneration",
    "GigaChat35ForCausalLM",
    "GigaChat35ForCausalLMNextN",
)
#: SGLang's resolved `enable_multi_layer_eagle`: `--enable-multi-layer-eagle` as typed (any
#: model, any algorithm: nothing turns it off), or those overrides, which set it for
#: `--speculative-algorithm EAGLE` as typed (they run before the speculative handler
#: upper-cases the name and makes NEXTN EAGLE, so MiMo-V2 with NEXTN stays single-layer:
#: 0.5.23's oracle takes it under PP on a PD prefill server, refuses EAGLE). Every reader
#: asks this one fact, never the field alone.
multi_layer_eagle: Named = named(
    "multi_layer_eagle",
    F.enable_multi_layer_eagle
    | (one_of(F.architecture, *MULTI_LAYER_EAGLE_ARCHITECTURES) & (_alg.as_raw == "EAGLE")),
)


# --- silent changes ---------------------------------------------------------------------
def nextn(source: str = SRC) -> Resolution:
    return Resolution(
        "R-SPEC-NEXTN",
        source,
        "NEXTN is SGLang's alias of EAGLE (one implementation)",
        (assign(_alg == "NEXTN", speculative_algorithm="EAGLE"),),
    )


#: Architectures whose automatic speculative parameters are (5, 4, 8) (0.5.18 to 0.5.23).
WIDE_TREE_ARCHITECTURES = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")
_auto = ~is_set(_steps) & ~is_set(_topk) & ~is_set(_draft)


def auto_params(families: tuple[str, ...], wide: Expr, known: Expr, source: str) -> Resolution:
    """`_auto_choose_speculative_params`: no `--speculative-num-steps`, no top-k, no draft
    tokens; `wide` picks (5, 4, 8), otherwise (3, 1, 4); `known`: the choice is decidable
    (the architecture is known, or the algorithm alone decides)."""
    when = one_of(_alg, *families) & _auto & known
    return Resolution(
        "R-SPEC-AUTO",
        source,
        "without --speculative-num-steps SGLang picks the steps, top-k and draft tokens "
        "for the architecture ((5, 4, 8) for Llama and Grok, else (3, 1, 4))",
        (
            assign(
                when,
                speculative_num_steps=ite(wide, 5, 3),
                speculative_eagle_topk=ite(wide, 4, 1),
                speculative_num_draft_tokens=ite(wide, 8, 4),
            ),
        ),
    )


AUTO_PARAMS = auto_params(
    EAGLE_FAMILY,
    (_alg != "STANDALONE") & one_of(F.architecture, *WIDE_TREE_ARCHITECTURES),
    (_alg == "STANDALONE") | is_set(F.architecture),
    SRC,
)
#: 0.4.6.post5: (5, 4, 8) for every architecture (`auto_choose_speculative_params`).
AUTO_PARAMS_0_4 = auto_params(("EAGLE", "EAGLE3"), TRUE, TRUE, "__post_init__")

NGRAM_PARAMS = Resolution(
    "R-SPEC-NGRAM",
    SRC,
    "NGRAM drafts --speculative-ngram-max-bfs-breadth branches (its top-k) and 12 tokens "
    "unless --speculative-num-draft-tokens says otherwise, in draft tokens // top-k steps",
    (
        assign(ngram, speculative_eagle_topk=F.speculative_ngram_max_bfs_breadth),
        assign(ngram & ~is_set(_draft), speculative_num_draft_tokens=12),
        # What the two steps above made them, spelled so that it reads no unset value.
        assign(
            ngram & ~is_set(_steps),
            speculative_num_steps=ite(is_set(_draft), _draft, 12)
            // F.speculative_ngram_max_bfs_breadth,
        ),
    ),
)


def draft_chain(families: tuple[str, ...], source: str = SRC) -> Resolution:
    """With top-k 1 the draft tokens are steps + 1 (SGLang warns and adjusts them)."""
    return Resolution(
        "R-SPEC-DRAFT",
        source,
        "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
        "speculative_eagle_topk == 1",
        (_chain_tokens(families),),
    )


def _chain_tokens(families: tuple[str, ...]) -> Assign:
    return assign(
        one_of(_alg, *families)
        & is_set(_topk)
        & (_topk == 1)
        & is_set(_steps)
        & ~(is_set(_draft) & (_draft == _steps + 1)),
        speculative_num_draft_tokens=_steps + 1,
    )


#: 0.4.6.post5's `__post_init__`: a draft tree over pages silently becomes a chain (top-k
#: 1), and a chain drafts steps + 1 tokens (it warns about both).
DRAFT_CHAIN_0_4 = Resolution(
    "R-SPEC-DRAFT",
    "__post_init__",
    "speculative_eagle_topk is adjusted to 1 when page_size > 1, and "
    "speculative_num_draft_tokens to speculative_num_steps + 1 when speculative_eagle_topk == 1",
    (
        assign(one_of(_alg, "EAGLE", "EAGLE3") & paged & tree, speculative_eagle_topk=1),
        _chain_tokens(("EAGLE", "EAGLE3")),
    ),
)


def overlap_off(when: Expr, source: str, why: str) -> Resolution:
    """The speculative handler turns the overlap scheduler off where `when` holds: the one
    place meshsat says so (PDMUX-OVERLAP and the memory model read the resolved flag)."""
    return Resolution(
        "R-SPEC-OVERLAP",
        source,
        why,
        (assign(when & ~F.disable_overlap_schedule, disable_overlap_schedule=True),),
    )


#: `_disable_overlap_schedule_for_cpu` (0.5.18 to 0.5.23): the EAGLE family's and NGRAM's
#: handlers turn it off on CPU ("Overlap schedule is not implemented for speculative decoding
#: on CPU"); DFLASH and DSPARK refuse CPU first, FROZEN_KV_MTP and UNO (0.5.23) keep it.
SPEC_OVERLAP = overlap_off(
    (F.platform == "cpu") & (eagle_family | ngram),
    SRC,
    "speculative decoding on CPU runs without the overlap scheduler (turned off)",
)
#: 0.4.6.post5's `__post_init__`: EAGLE and EAGLE3 turn it off on every platform ("Overlap
#: scheduler is disabled because of using eagle speculative decoding").
SPEC_OVERLAP_0_4 = overlap_off(
    one_of(_alg, "EAGLE", "EAGLE3"),
    "__post_init__",
    "EAGLE speculative decoding runs without the overlap scheduler (turned off)",
)


#: The speculative handler's own, in SGLang's order (after R-PAGE-SIZE, which resolves the
#: page they and the page-tree checks read), after R-SPEC-CASE (`speculative_names`).
RESOLUTIONS: tuple[Resolution, ...] = (
    nextn(),
    SPEC_OVERLAP,
    AUTO_PARAMS,
    NGRAM_PARAMS,
    draft_chain(EAGLE_FAMILY),
)
#: 0.4.6.post5's, each replacing the step of the same id (no NGRAM there).
RESOLUTIONS_0_4: tuple[Resolution, ...] = (
    nextn("__post_init__"),
    SPEC_OVERLAP_0_4,
    AUTO_PARAMS_0_4,
    DRAFT_CHAIN_0_4,
)


# --- rules ---------------------------------------------------------------------------
def dp_attention(joiner: bool) -> Expr:
    """Attention DP as the release asks it: `enable_dp_attention` (0.5.18, 0.5.19), or
    `attn_dp_enabled_of` (0.5.23: a scale joiner of an attention-DP deployment too)."""
    if joiner:
        return F.enable_dp_attention | (F.ep_join_mode == "scale")
    return F.enable_dp_attention


def _drop_dp_attention(joiner: bool) -> str:
    """The hint in the release's spelling (0.5.23 deprecates --enable-dp-attention)."""
    flag = "--attn-dp-size" if joiner else "--enable-dp-attention"
    return f"drop attention DP ({flag}), or use EAGLE"


def standalone_dp(joiner: bool = False) -> Rule:
    return Rule(
        "SPEC-STANDALONE-DP-ATTN",
        _alg == "STANDALONE",
        ~dp_attention(joiner),
        "Currently standalone speculative decoding does not support dp attention.",
        SRC,
        hint=_drop_dp_attention(joiner),
    )


def ngram_dp(joiner: bool = False) -> Rule:
    return Rule(
        "SPEC-NGRAM-DP-ATTN",
        ngram,
        ~dp_attention(joiner),
        "Currently ngram speculative decoding does not support dp attention.",
        SRC,
        hint=_drop_dp_attention(joiner),
    )


def auto_params_assert(source: str, families: tuple[str, ...]) -> Rule:
    """The assert before `_auto_choose_speculative_params`: SGLang picks all three or none."""
    return Rule(
        "SPEC-EAGLE-AUTO-PARAMS",
        one_of(_alg, *families) & ~is_set(_steps.as_raw),
        ~is_set(_topk.as_raw) & ~is_set(_draft.as_raw),
        "AssertionError (a bare assert: speculative_eagle_topk and "
        "speculative_num_draft_tokens are None when speculative_num_steps is): without "
        "--speculative-num-steps SGLang picks the steps, top-k and draft tokens itself",
        source,
        hint="give --speculative-num-steps too, or leave out --speculative-eagle-topk and "
        "--speculative-num-draft-tokens",
    )


def topk_set(source: str, families: tuple[str, ...], only_paged: bool) -> Rule:
    """`--speculative-num-steps` without `--speculative-eagle-topk`: SGLang compares the
    unset top-k with 1 and fails (0.5.x always, in its page-tree check; 0.4.6.post5 only
    with pages, in its `page_size > 1 and topk > 1`)."""
    when = one_of(_alg, *families) & is_set(_steps.as_raw)
    return Rule(
        "SPEC-EAGLE-TOPK-SET",
        when & paged if only_paged else when,
        is_set(_topk),
        "'>' not supported between instances of 'NoneType' and 'int' (a TypeError: "
        "--speculative-num-steps without --speculative-eagle-topk, which SGLang compares "
        "with 1)",
        source,
        hint="give --speculative-eagle-topk (1 for a chain), or leave out "
        "--speculative-num-steps so that SGLang picks all three",
    )


#: `"trtllm_mha" in attention_backends_of(...)`: the resolved (prefill, decode) pair, a split
#: back-end left out being the base one's, so trtllm_mha as the prefill or decode back-end
#: alone counts too.
TRTLLM_MHA_TOPK = Rule(
    "SPEC-TRTLLM-MHA-TOPK",
    eagle_family & ((PREFILL == "trtllm_mha") | (DECODE == "trtllm_mha")) & is_set(_topk),
    _topk <= 1,
    "trtllm_mha backend only supports topk = 1 for speculative decoding.",
    SRC,
    hint="--speculative-eagle-topk 1, or another attention back-end (prefill and decode)",
)

EAGLE_PAGE_TREE = Rule(
    "SPEC-EAGLE-PAGE-TREE",
    eagle_family & tree & paged,
    resolved_in(*PAGE_TREE_BACKENDS),
    "speculative_eagle_topk > 1 with page_size > 1 is only supported on ('flashinfer', "
    "'fa3', 'triton'); got attention_backend='{attention_backend_used}'. Use page_size == 1 "
    "or one of those backends.",
    SRC,
    hint="--speculative-eagle-topk 1, --page-size 1, or --attention-backend flashinfer, fa3 "
    "or triton",
)

NGRAM_PAGE = Rule(
    "SPEC-NGRAM-PAGE",
    ngram & tree & paged,
    resolved_in("flashinfer"),
    "speculative_eagle_topk({speculative_eagle_topk}) > 1 with page_size({page_size}) > 1 "
    "is unstable and produces incorrect results for paged attention backends. This "
    "combination is only supported for the 'flashinfer' backend.",
    SRC,
    hint="--speculative-ngram-max-bfs-breadth 1, --page-size 1, or --attention-backend flashinfer",
)


def ngram_device(devices: str) -> Rule:
    """`_handle_ngram` opens with the device: no NGRAM on Ascend (`devices`: the release's
    list, 0.5.23 adds XPU). ROCm's device is `cuda`."""
    return Rule(
        "SPEC-NGRAM-DEVICE",
        ngram,
        F.platform != "npu",
        f"Ngram speculative decoding only supports {devices} devices.",
        SRC,
        hint="use EAGLE (or no speculative decoding) on NPU",
    )


#: `handle_speculative_decoding` in its order (0.5.18, 0.5.19; 0.5.23 asks attention DP
#: through `attn_dp_enabled_of`): `_handle_eagle_family`, then `_handle_ngram`; the catalogue
#: lists SPEC-UNKNOWN-ALGORITHM (`speculative_names`) after them.
RULES: tuple[Rule, ...] = (
    standalone_dp(),
    auto_params_assert(SRC, EAGLE_FAMILY),
    topk_set(SRC, EAGLE_FAMILY, only_paged=False),
    TRTLLM_MHA_TOPK,
    EAGLE_PAGE_TREE,
    ngram_device("CUDA or CPU"),
    NGRAM_PAGE,
    ngram_dp(),
)
#: 0.5.23's wording (it runs NGRAM on XPU too).
NGRAM_DEVICE_0_5_23 = ngram_device("CUDA, CPU, or XPU")
#: 0.4.6.post5's `__post_init__`: EAGLE and EAGLE3 only (NGRAM and STANDALONE are no choice).
RULES_0_4: tuple[Rule, ...] = (
    auto_params_assert("__post_init__", ("EAGLE", "EAGLE3")),
    topk_set("__post_init__", ("EAGLE", "EAGLE3"), only_paged=True),
)
