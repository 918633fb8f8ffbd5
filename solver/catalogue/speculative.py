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
Triton), as SGLang's handler reads the resolved `attention_backend`.

An unset `--attention-backend` is SGLang's default after R-ATTN-BACKEND wherever meshsat
knows it (a CUDA GPU of a known class, `attention_default`), so these checks read it as a
named one. Where it stays unset, `attention_backend_used` still reads the defaults that are
certain: torch-native (or Intel AMX, which falls back to it) on CPU, the DSA back-end on a
DeepSeek sparse-attention model, FA3 on Hopper unless the user's own top-k asks for a tree
(a model whose own override R-ATTN-BACKEND leaves alone). Elsewhere (ROCm, NPU, an unknown
`gpu_sm`) the checks assume the default passes, as every GPU-class rule does. The TRT-LLM MHA
top-k check reads the resolved pair (a split field included).
"""

from __future__ import annotations

from meshsat.solver.catalogue.attention_backend import DECODE, MLA_MODEL, PREFILL
from meshsat.solver.catalogue.attention_default import sinks_decide
from meshsat.solver.lang.derived import attn_dp
from meshsat.solver.lang.expr import TRUE, Expr, Field, Named, is_set, ite, named, one_of
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
#: SGLang's resolved `enable_multi_layer_eagle` as far as meshsat reads it: those overrides
#: set it for `--speculative-algorithm EAGLE` as typed (they run before the speculative
#: handler upper-cases the name and makes NEXTN EAGLE, so MiMo-V2 with NEXTN stays
#: single-layer: 0.5.23's oracle takes it under PP on a PD prefill server, refuses EAGLE).
#: `--enable-multi-layer-eagle` typed for another model is not a field: read as unset.
multi_layer_eagle: Named = named(
    "multi_layer_eagle",
    one_of(F.architecture, *MULTI_LAYER_EAGLE_ARCHITECTURES) & (_alg.as_raw == "EAGLE"),
)


# --- the attention back-end an unset --attention-backend resolves to -------------------
_dsa_gpu = F.is_deepseek_dsa & one_of(F.platform, "cuda", "hip")
_hopper = (F.platform == "cuda") & (F.gpu_sm == 90)
#: `is_no_spec_infer_or_topk_one`, asked before the speculative handler: the user's top-k.
_raw_topk, _raw_page = _topk.as_raw, _page.as_raw
_topk_one = ~is_set(_raw_topk) | ((_raw_topk == 1) & (~is_set(_raw_page) | (_raw_page <= 1)))
#: Hopper picks FA3 for MLA, and for MHA unless the user asked for a tree (then FlashInfer or
#: Triton, by what is installed: not known here).
_hopper_fa3 = _hopper & (MLA_MODEL | _topk_one)
#: Where meshsat knows the default (a Named, so that a report says so in one phrase).
_default_known = named(
    "default_attention_backend_known", (F.platform == "cpu") | _dsa_gpu | _hopper_fa3
)

#: The back-end SGLang runs with: the user's, else the default where it is certain.
attention_backend_used: Named = named(
    "attention_backend_used",
    ite(
        is_set(_backend),
        _backend,
        ite(F.platform == "cpu", "torch_native", ite(_dsa_gpu, "dsa", "fa3")),
    ),
)


def backend_in(*allowed: str) -> Expr:
    """The back-end SGLang runs with is one of `allowed`, or is a default not known here.
    The user's back-end is tested on the field itself, so that `fix` sees the literals."""
    default = ~_default_known | one_of(attention_backend_used, *allowed)
    return one_of(_backend, *allowed) | (~is_set(_backend) & default)


# --- silent changes ---------------------------------------------------------------------
#: `SpeculativeAlgorithm`'s members (NONE is one: no speculative decoding) and its NEXTN alias
#: (0.5.18, 0.5.19; 0.5.23 adds UNO): the one list of names per release that R-SPEC-CASE
#: and SPEC-UNKNOWN-ALGORITHM both read. 0.4.6.post5's argparse takes EAGLE, EAGLE3 and
#: NEXTN (FLAG-CHOICE).
KNOWN_ALGORITHMS = (
    "DFLASH",
    "DSPARK",
    "EAGLE",
    "EAGLE3",
    "FROZEN_KV_MTP",
    "STANDALONE",
    "NGRAM",
    "NONE",
    "NEXTN",
)
KNOWN_ALGORITHMS_0_5_23 = (*KNOWN_ALGORITHMS, "UNO")
#: The mixed-case spellings SGLang's own docs and model cards use, by name.
_CAMEL = {"NEXTN": "NextN", "NGRAM": "NGram", "DFLASH": "DFlash", "DSPARK": "DSpark"}


def spellings(name: str) -> tuple[str, ...]:
    """The spellings of `name` other than its own that a user types (lower case,
    capitalised, title case, the docs' camel case): SGLang upper-cases any string, and
    meshsat's string fields hold only the literals its rules name (there is no upper-case
    operation), so a rarer mixing of cases stays unknown here though SGLang takes it."""
    typed = {name.lower(), name.capitalize(), name.title(), _CAMEL.get(name, name)}
    return tuple(sorted(typed - {name}))


def upper_case(names: tuple[str, ...]) -> Resolution:
    """`handle_speculative_decoding` opens with `speculative_algorithm.upper()` (0.5.18 to
    0.5.23), before the NEXTN alias and every check of the handler: `--speculative-algorithm
    ngram` is NGRAM, `NextN` is NEXTN (then EAGLE) to them all. NONE (no algorithm) is left
    as typed."""
    return Resolution(
        "R-SPEC-CASE",
        SRC,
        "SGLang upper-cases --speculative-algorithm (ngram is NGRAM)",
        tuple(
            assign(one_of(_alg, *spellings(name)), speculative_algorithm=name)
            for name in names
            if name != "NONE"
        ),
    )


UPPER_CASE = upper_case(KNOWN_ALGORITHMS)


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
#: page they and the page-tree checks read).
RESOLUTIONS: tuple[Resolution, ...] = (
    UPPER_CASE,
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
def _dp_attention(joiner: bool) -> Expr:
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
        ~_dp_attention(joiner),
        "Currently standalone speculative decoding does not support dp attention.",
        SRC,
        hint=_drop_dp_attention(joiner),
    )


def ngram_dp(joiner: bool = False) -> Rule:
    return Rule(
        "SPEC-NGRAM-DP-ATTN",
        ngram,
        ~_dp_attention(joiner),
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
    backend_in(*PAGE_TREE_BACKENDS),
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
    backend_in("flashinfer"),
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
#: through `attn_dp_enabled_of`): `_handle_eagle_family`, then `_handle_ngram`.
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

# --- 0.5.23's DFLASH and DSPARK handlers (`_handle_dflash`, `_handle_dspark`) -----------
# The checks that read the layout, in their order; each handler then asks for the draft
# checkpoint (--speculative-draft-model-path, or DSPARK's bundled draft), which meshsat
# does not read: it assumes one is given. The DP spec/prefill coordination and ragged
# verify variables are assumed at their defaults.
_dflash, _dspark = _alg == "DFLASH", _alg == "DSPARK"
#: `_handle_dflash` asks `attn_dp_enabled_of` (a scale joiner too), `_handle_dspark` the
#: width alone.
_dflash_dp = _dflash & _dp_attention(True) & (F.platform != "npu")
_dspark_dp = _dspark & (attn_dp > 1)
DFLASH_DSPARK_0_5_23: tuple[Rule, ...] = (
    Rule(
        "SPEC-DFLASH-DEVICE",
        _dflash,
        F.platform != "cpu",
        "DFLASH speculative decoding is not supported by SRTPlatform on device 'cpu'.",
        SRC,
        hint="run DFLASH on CUDA, ROCm or NPU",
    ),
    Rule(
        "SPEC-DFLASH-DP-LM-HEAD",
        _dflash_dp,
        F.enable_dp_lm_head,
        "DFLASH with dp attention requires --enable-dp-lm-head.",
        SRC,
        hint="--enable-dp-lm-head",
    ),
    Rule(
        "SPEC-DFLASH-DP-CP",
        _dflash_dp,
        F.attn_cp_size == 1,
        "DFLASH with dp attention does not support context parallel.",
        SRC,
        hint="--attn-cp-size 1, or drop attention DP",
    ),
    Rule(
        "SPEC-DFLASH-PP",
        _dflash,
        F.pp_size == 1,
        "Currently DFLASH speculative decoding only supports pp_size == 1.",
        SRC,
        hint="--pp-size 1",
    ),
    Rule(
        "SPEC-DSPARK-DEVICE",
        _dspark,
        F.platform != "cpu",
        "DSpark speculative decoding only supports CUDA, NPU or XPU device.",
        SRC,
        hint="run DSPARK on CUDA, ROCm or NPU",
    ),
    Rule(
        "SPEC-DSPARK-DP-LM-HEAD",
        _dspark_dp,
        F.enable_dp_lm_head,
        "DSpark with dp attention requires --enable-dp-lm-head.",
        SRC,
        hint="--enable-dp-lm-head",
    ),
    Rule(
        "SPEC-DSPARK-DP-A2A",
        _dspark_dp & (F.platform != "npu"),
        one_of(F.moe_a2a_backend, "none", "megamoe", "mori"),
        "DSpark with dp attention supports moe_a2a_backend 'none' (built-in TP MoE), "
        "'megamoe', or 'mori', got '{moe_a2a_backend}'.",
        SRC,
        hint="--moe-a2a-backend none, megamoe or mori",
    ),
    Rule(
        "SPEC-DSPARK-DP-CP",
        _dspark_dp,
        F.attn_cp_size <= 1,
        "DSpark with dp attention does not support context parallel (attn_cp_size={attn_cp_size}).",
        SRC,
        hint="--attn-cp-size 1, or drop attention DP",
    ),
    Rule(
        "SPEC-DSPARK-PP",
        _dspark & (F.pp_size != 1),
        F.disaggregation_mode == "prefill",
        "DSpark pipeline parallelism requires PD prefill; decode and non-disaggregated "
        "serving require pp_size == 1.",
        SRC,
        hint="--pp-size 1, or run PP on a PD prefill server",
    ),
)
#: 0.4.6.post5's `__post_init__`: EAGLE and EAGLE3 only (NGRAM and STANDALONE are no choice).
RULES_0_4: tuple[Rule, ...] = (
    auto_params_assert("__post_init__", ("EAGLE", "EAGLE3")),
    topk_set("__post_init__", ("EAGLE", "EAGLE3"), only_paged=True),
)


# --- the algorithm's name ----------------------------------------------------------------
def unknown_algorithm(names: tuple[str, ...]) -> Rule:
    """`SpeculativeAlgorithm.from_string`, called by `handle_speculative_decoding` before any
    algorithm's own handler (the CLI takes any string): an unknown name is refused. It reads
    the name R-SPEC-CASE has upper-cased from the same `names` (NEXTN is EAGLE by then), and
    NONE as typed. SGLang has upper-cased every name by then, so it quotes an unknown one
    upper-cased ("mtp" is "MTP"); meshsat keeps an unknown name as typed (no resolution
    names every string) and upper-cases it in the message (`{...:upper}`)."""
    return Rule(
        "SPEC-UNKNOWN-ALGORITHM",
        is_set(_alg),
        one_of(_alg, *names, *spellings("NONE")),
        "Unknown speculative algorithm name: {speculative_algorithm:upper}",
        SRC,
        hint="one of " + ", ".join(n for n in names if n != "NONE"),
    )


UNKNOWN_ALGORITHM = unknown_algorithm(KNOWN_ALGORITHMS)
RULES = (*RULES, UNKNOWN_ALGORITHM)
# --- 0.5.23's UNO handler (`_handle_uno`) ------------------------------------------------
# UNO drafts with a LoRA adapter on the target model itself: its checks, in their order.
# Not read: --speculative-draft-model-path (UNO refuses one; assumed not given), the
# deterministic / strict-thinking / rejection-sampling switches and the accept thresholds
# (assumed at their defaults), and the tree-capacity check, whose every failure also fails
# the parent-list check after it (SPEC-UNO-TREE-PARENT: the verdict is the same, the words
# are not). The steps and top-k UNO then takes (1 and 1 outside tree mode) are not resolved.
_uno = _alg == "UNO"
#: Tree mode: top-k above 1 (`--speculative-eagle-topk` unset is 1; UNO resolves no default
#: before its checks, so the value is the user's).
_uno_tree = _uno & tree
_uno_q = is_set(_draft)
#: F, Q*K and Q-1 against K*(F-2)+1, as `_handle_uno` words them.
_uno_width = named("uno_draft_width", _steps + 1)
_uno_slots = named("uno_frontier_slots", _draft * _topk)
_uno_parent = named("uno_parent_width", _topk * (_steps - 1) + 1)
_uno_q_1 = named("uno_verify_width_minus_1", _draft - 1)
#: `attention_backends_of(resolved_view(...))`: `_handle_uno` runs in the speculative handler,
#: after the attention handler has filled an unset back-end, so it reads the resolved pair
#: (PREFILL, DECODE: each phase's own back-end, else the base one after R-ATTN-BACKEND and
#: R-NVFP4-BACKENDS). Where R-ATTN-BACKEND leaves the base unset only because MiMo V2's
#: attention sinks decide between FlashInfer and Triton (`attention_default.sinks_decide`,
#: read with the typed top-k) the default is not FA3 either way: named FlashInfer, SGLang's
#: pick without sinks. Any other unset phase is a default meshsat does not know (ROCm, no
#: `gpu_sm`, a model whose override picks it): assumed FA3, as every GPU-class rule assumes
#: it passes.
_sinks_decide = sinks_decide("0.5.23", raw=True)


def _phase_unset(phase: Field) -> Expr:
    """The phase's resolved back-end is unset: its own and the base one."""
    return ~is_set(phase) & ~is_set(_backend)


_uno_prefill = named(
    "uno_prefill_backend",
    ite(_phase_unset(F.prefill_attention_backend) & _sinks_decide, "flashinfer", PREFILL),
)
_uno_decode = named(
    "uno_decode_backend",
    ite(_phase_unset(F.decode_attention_backend) & _sinks_decide, "flashinfer", DECODE),
)


def _phase_fa3(phase: Field, used: Expr) -> Expr:
    """One phase's resolved back-end (`used`, which the message names) is FA3, or it is
    unset and the default is neither known here nor MiMo's FlashInfer-or-Triton. The
    back-ends are tested on the fields too, so that `fix` sees the literals."""
    given = (phase == "fa3") | (~is_set(phase) & (_backend == "fa3"))
    return ((used == "fa3") & given) | (_phase_unset(phase) & ~_sinks_decide)


UNO_0_5_23: tuple[Rule, ...] = (
    Rule(
        "SPEC-UNO-DEVICE",
        _uno,
        one_of(F.platform, "cuda", "hip"),
        "UNO only supports CUDA.",
        SRC,
        hint="run UNO on CUDA",
    ),
    Rule(
        "SPEC-UNO-LORA-PATH",
        _uno,
        F.uno_lora_path,
        "UNO requires --uno-lora-path.",
        SRC,
        hint="--uno-lora-path (UNO's draft LoRA checkpoint)",
    ),
    Rule(
        "SPEC-UNO-DRAFT-TOKENS",
        _uno,
        _uno_q,
        "UNO requires --speculative-num-draft-tokens to be a positive integer denoting the "
        "linear width or tree verify width Q.",
        SRC,
        hint="--speculative-num-draft-tokens Q",
    ),
    Rule(
        "SPEC-UNO-TREE-STEPS",
        _uno_tree,
        is_set(_steps),
        "UNO tree mode requires --speculative-num-steps so its draft width F can be derived "
        "as speculative_num_steps + 1.",
        SRC,
        hint="--speculative-num-steps, or --speculative-eagle-topk 1",
    ),
    Rule(
        "SPEC-UNO-TREE-WIDTH",
        _uno_tree & _uno_q & is_set(_steps),
        _draft >= _uno_width,
        "UNO tree mode requires Q >= F; got Q={speculative_num_draft_tokens}, F={uno_draft_width}.",
        SRC,
        hint="--speculative-num-draft-tokens at least --speculative-num-steps + 1",
    ),
    Rule(
        "SPEC-UNO-TREE-Q",
        _uno_tree & _uno_q,
        _draft <= 128,
        "UNO tree mode currently supports at most Q=128 verify nodes, "
        "got Q={speculative_num_draft_tokens}.",
        SRC,
        hint="--speculative-num-draft-tokens 128 or fewer",
    ),
    Rule(
        "SPEC-UNO-TREE-SLOTS",
        _uno_tree & _uno_q,
        _uno_slots <= 2048,
        "UNO tree mode currently supports Q*K <= 2048; got "
        "Q*K={speculative_num_draft_tokens}*{speculative_eagle_topk}={uno_frontier_slots}.",
        SRC,
        hint="fewer draft tokens or a smaller --speculative-eagle-topk",
    ),
    Rule(
        "SPEC-UNO-TREE-PARENT",
        _uno_tree & _uno_q & is_set(_steps) & (_uno_width > 1),
        _uno_q_1 <= _uno_parent,
        "UNO tree mode cannot represent the requested Q in EAGLE's parent-list ABI: "
        "Q-1={uno_verify_width_minus_1} exceeds K*(F-2)+1={uno_parent_width} for "
        "F={uno_draft_width}, K={speculative_eagle_topk}.",
        SRC,
        hint="fewer draft tokens, more steps or a larger --speculative-eagle-topk",
    ),
    Rule(
        "SPEC-UNO-TREE-PDMUX",
        _uno_tree,
        ~F.enable_pdmux,
        "UNO tree mode does not yet support PDMux.",
        SRC,
        hint="drop --enable-pdmux, or --speculative-eagle-topk 1",
    ),
    Rule(
        "SPEC-UNO-TREE-TBO",
        _uno_tree,
        ~F.enable_two_batch_overlap,
        "UNO tree mode does not yet support two-batch overlap.",
        SRC,
        hint="drop --enable-two-batch-overlap, or --speculative-eagle-topk 1",
    ),
    Rule(
        "SPEC-UNO-TP-PP",
        _uno,
        (F.tp_size == 1) & (F.pp_size == 1),
        "UNO requires TP=PP=1.",
        SRC,
        hint="--tp-size 1 --pp-size 1",
    ),
    Rule(
        "SPEC-UNO-DP-CP",
        _uno,
        ~_dp_attention(True) & (F.attn_cp_size == 1),
        "UNO does not support DP attention or context parallelism.",
        SRC,
        hint="drop attention DP (--attn-dp-size) and --attn-cp-size",
    ),
    Rule(
        "SPEC-UNO-LORA",
        _uno,
        ~F.enable_lora & ~F.lora_paths,
        "UNO does not support public Multi-LoRA serving.",
        SRC,
        hint="drop --enable-lora and --lora-paths",
    ),
    Rule(
        "SPEC-UNO-FA3",
        _uno,
        _phase_fa3(F.prefill_attention_backend, _uno_prefill)
        & _phase_fa3(F.decode_attention_backend, _uno_decode),
        "UNO requires FA3 for both prefill and decode attention; got "
        "prefill='{uno_prefill_backend}', decode='{uno_decode_backend}'.",
        SRC,
        hint="--attention-backend fa3 (and no other prefill or decode back-end)",
    ),
)
