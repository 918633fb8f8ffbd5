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


# --- One PD server's own checks (prefill/decode disaggregation) --------------------------
#: 0.5.18+ pipeline step (`_handle_pd_disaggregation` in 0.5.18's __post_init__,
#: arg_groups/pd_disaggregation_hook.py from 0.5.19), after handle_mega_moe and before
#: the decode-CP validation in every 0.5 release (fidelity/flags/<v>.json "steps").
PD_SRC = "handle_pd_disaggregation"

#: 0.5.18, 0.5.19, 0.5.23: the fake backend only answers a decode's pulls with nothing, so
#: a prefill server refuses it in its argument resolution (a bare assert with this text).
PD_PREFILL_FAKE = Rule(
    "PD-PREFILL-FAKE-BACKEND",
    F.disaggregation_mode == "prefill",
    F.disaggregation_transfer_backend != "fake",
    "Prefill server does not support 'fake' as the transfer backend",
    PD_SRC,
    hint="give the prefill server a real --disaggregation-transfer-backend (mooncake, nixl, "
    "...); fake is for a decode server benchmarked alone",
)

_decode_dcp = (F.disaggregation_mode == "decode") & (F.dcp_size > 1)


def pd_dcp_backend(fake: bool) -> Rule:
    """0.5.18 and 0.5.19's PD handler (not 0.5.23): decode CP on a decode server needs a
    transfer backend that relayouts DCP KV; 0.5.19 also takes the fake one (`fake`).
    mooncake_tcp is mooncake by then (the same handler rewrites it first)."""
    allowed = ("mooncake", "mooncake_tcp", "nixl", *(("fake",) if fake else ()))
    said = "mooncake, nixl, or fake for synthetic benchmarking" if fake else "mooncake or nixl"
    return Rule(
        "PD-DCP-BACKEND",
        _decode_dcp,
        one_of(F.disaggregation_transfer_backend, *allowed),
        f"PD decode DCP requires --disaggregation-transfer-backend {said}, got "
        "'{disaggregation_transfer_backend}'.",
        PD_SRC,
        hint="--disaggregation-transfer-backend mooncake or nixl with --dcp-size > 1",
    )


#: 0.5.18 and 0.5.19 (not 0.5.23): next, a PD decode server with decode CP runs a chunk
#: cache, so its handler refuses the decode radix cache and HiCache.
PD_DCP_CACHE_RULES: tuple[Rule, ...] = tuple(
    Rule(
        rule_id,
        _decode_dcp,
        ~flag,
        f"PD decode DCP currently requires chunk cache; {spelled} is not supported.",
        PD_SRC,
        hint=f"drop {spelled} on a decode server with --dcp-size > 1 (or use SGLang 0.5.23)",
    )
    for rule_id, flag, spelled in (
        (
            "PD-DCP-RADIX",
            F.disaggregation_decode_enable_radix_cache,
            "--disaggregation-decode-enable-radix-cache",
        ),
        ("PD-DCP-HICACHE", F.enable_hierarchical_cache, "--enable-hierarchical-cache"),
    )
)

_decode_radix = (F.disaggregation_mode == "decode") & F.disaggregation_decode_enable_radix_cache
#: The PD handler's checks of a decode's radix cache (0.5.18 to 0.5.23), in its order: not
#: with HiSparse, not on the fake transfer backend.
PD_DECODE_RADIX_HISPARSE = Rule(
    "PD-DECODE-RADIX-HISPARSE",
    _decode_radix,
    ~F.enable_hisparse,
    "--disaggregation-decode-enable-radix-cache is incompatible with --enable-hisparse",
    PD_SRC,
    hint="drop --disaggregation-decode-enable-radix-cache (HiSparse runs without the radix cache)",
)
PD_DECODE_RADIX_FAKE = Rule(
    "PD-DECODE-RADIX-FAKE",
    _decode_radix,
    F.disaggregation_transfer_backend != "fake",
    "--disaggregation-decode-enable-radix-cache is incompatible with "
    "--disaggregation-transfer-backend fake",
    PD_SRC,
    hint="drop --disaggregation-decode-enable-radix-cache with the fake backend",
)


def decode_radix_spec(allowed: tuple[str, ...], source: str) -> Rule:
    """A decode's radix cache with speculative decoding: 0.5.18 and 0.5.19 refuse any
    algorithm in the PD handler; 0.5.23 checks in its speculative handler, after NEXTN
    became EAGLE, and takes EAGLE, EAGLE3 and DSPARK (`allowed`)."""
    spec = F.speculative_algorithm
    return Rule(
        "PD-DECODE-RADIX-SPEC",
        _decode_radix & is_set(spec),
        one_of(spec, *allowed) if allowed else ~is_set(spec),
        "--disaggregation-decode-enable-radix-cache is incompatible with speculative decoding "
        "(--speculative-algorithm {speculative_algorithm})",
        source,
        hint="drop --disaggregation-decode-enable-radix-cache or --speculative-algorithm",
    )


#: The PD handler's decode checks of 0.5.18 and 0.5.19, in their order.
PD_DECODE_CACHE_RULES: tuple[Rule, ...] = (
    pd_dcp_backend(fake=True),
    *PD_DCP_CACHE_RULES,
    PD_DECODE_RADIX_HISPARSE,
    PD_DECODE_RADIX_FAKE,
    decode_radix_spec((), PD_SRC),
)

#: 0.4.6.post5 (`disaggregation/mooncake/conn.py`, `MooncakeKVManager.__init__`): the
#: Mooncake manager every PD rank builds at start-up refuses DP replicas; DP attention is
#: the only data parallelism PD supports there. NIXL's manager has no such check; no 0.5
#: release has it (their managers take `attn_dp_size`). A launch check: the
#: release's ServerArgs accepts the layout, its scheduler then raises.
PD_MOONCAKE_DP_0_4 = Rule(
    "PD-MOONCAKE-DP-REPLICAS",
    (F.disaggregation_mode != "null") & (F.disaggregation_transfer_backend == "mooncake"),
    F.enable_dp_attention | (F.dp_size == 1),
    "If dp_attention is not enabled, dp size must be 1 in disaggregation mode.",
    "SGLang launch checks",
    hint="enable DP attention (--enable-dp-attention) or drop --dp-size (start replicas as "
    "servers of their own behind the router)",
)


def _prefill_complete(rule_id: str, unsupported: str, holds: Expr, hint: str) -> Rule:
    """One item of 0.5.23's `_validate_prefill_complete` list, in its own words: it raises
    one ValueError naming every unsupported item, so each item is a rule whose message is
    SGLang's when that item alone is broken."""
    return Rule(
        rule_id,
        F.disaggregation_decode_allocation_policy == "prefill_complete",
        holds,
        "--disaggregation-decode-allocation-policy prefill_complete does not yet support "
        + unsupported,
        PD_SRC,
        hint=hint,
    )


#: 0.5.23 only (the flag is new there): `_validate_prefill_complete`, the items meshsat's
#: fields reach, in its order (decoupled speculation, role switching, encoder
#: disaggregation, HiSparse, host KV buffering, prefill HiCache's write policy, staging
#: buffers and the Rust registry are flags or variables meshsat does not read).
PREFILL_COMPLETE_RULES: tuple[Rule, ...] = (
    _prefill_complete(
        "PD-PREFILL-COMPLETE-ROLE",
        "aggregated serving",
        F.disaggregation_mode != "null",
        "prefill_complete is a PD policy: give the server --disaggregation-mode, or drop it",
    ),
    _prefill_complete(
        "PD-PREFILL-COMPLETE-BACKEND",
        "transfer backends other than Mooncake",
        # mooncake_tcp is rewritten to mooncake first in the same handler.
        one_of(F.disaggregation_transfer_backend, "mooncake", "mooncake_tcp"),
        "use --disaggregation-transfer-backend mooncake, or the early policy",
    ),
    _prefill_complete(
        "PD-PREFILL-COMPLETE-PP-CP",
        "pipeline or attention context parallelism",
        (F.pp_size == 1) & (F.attn_cp_size == 1) & (F.dcp_size == 1),
        "drop --pp-size, --attn-cp-size and --dcp-size, or use the early policy",
    ),
    _prefill_complete(
        "PD-PREFILL-COMPLETE-ATTN-TP",
        "attention tensor parallelism greater than one",
        # SGLang compares tp_size with `dp_size if enable_dp_attention else 1`, read after
        # handle_deprecated_dp_attention has moved DP attention to attn_dp_size (and reset
        # enable_dp_attention): any --tp above 1 is refused, --attn-dp-size or not
        # (measured with 0.5.23's own resolution, tests/test_pd_server_rules.py).
        F.tp_size == 1,
        "launch the server with --tp 1 (replicas behind the router), or use the early policy",
    ),
    _prefill_complete(
        "PD-PREFILL-COMPLETE-PDMUX",
        "PD multiplexing or decoupled speculation",
        ~F.enable_pdmux,
        "drop --enable-pdmux, or use the early policy",
    ),
    # The user's flags (the PD handler asks before it turns the decode's radix cache off).
    _prefill_complete(
        "PD-PREFILL-COMPLETE-DECODE-CACHE",
        "decode radix cache or decode HiCache",
        (F.disaggregation_mode != "decode")
        | ~(F.disaggregation_decode_enable_radix_cache | F.enable_hierarchical_cache),
        "drop --disaggregation-decode-enable-radix-cache and --enable-hierarchical-cache on the "
        "decode server, or use the early policy",
    ),
)
