"""0.5.23's newer speculative algorithms' handlers (`handle_speculative_decoding`): DFLASH and
its sibling DSPARK (`_handle_dflash`, `_handle_dspark`) and UNO (`_handle_uno`).

Why apart: each algorithm's handler checks only its own layout (one algorithm runs), reads
none of the EAGLE and NGRAM resolutions, and exists in 0.5.23 alone; releases.py packs them
after `_handle_ngram`'s checks. What they share with the rest of the handler (its name, the
algorithm as R-SPEC-CASE leaves it, a draft tree, attention DP as 0.5.23 asks it) is declared
in `speculative`.
"""

from __future__ import annotations

from meshsat.solver.catalogue.attention_backend import DECODE, PREFILL
from meshsat.solver.catalogue.attention_default import sinks_decide
from meshsat.solver.catalogue.speculative import SRC, dp_attention, tree
from meshsat.solver.lang.derived import attn_dp
from meshsat.solver.lang.expr import Expr, Field, is_set, ite, named, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

_alg = F.speculative_algorithm
_steps, _topk, _draft = (
    F.speculative_num_steps,
    F.speculative_eagle_topk,
    F.speculative_num_draft_tokens,
)
_backend = F.attention_backend

# --- 0.5.23's DFLASH and DSPARK handlers (`_handle_dflash`, `_handle_dspark`) -----------
# The checks that read the layout, in their order; each handler then asks for the draft
# checkpoint (--speculative-draft-model-path, or DSPARK's bundled draft), which meshsat
# does not read: it assumes one is given. The DP spec/prefill coordination and ragged
# verify variables are assumed at their defaults.
_dflash, _dspark = _alg == "DFLASH", _alg == "DSPARK"
#: `_handle_dflash` asks `attn_dp_enabled_of` (a scale joiner too), `_handle_dspark` the
#: width alone.
_dflash_dp = _dflash & dp_attention(True) & (F.platform != "npu")
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
        ~dp_attention(True) & (F.attn_cp_size == 1),
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
