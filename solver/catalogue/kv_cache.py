"""What a launch's context length and KV-cache flags must be for the server to start.

Why here and not in the memory verdict: SGLang refuses these while it resolves its
arguments (or builds the model config), whatever the GPU, so `validate` says so without
`--gpu`; the memory model reads the same flags only to size the pools.
"""

from __future__ import annotations

from meshsat.solver.lang.expr import TRUE, Expr, is_set, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

#: `ModelConfig._derive_context_length`: the model config is first built in this step (the
#: same step as its quantization check, `quantization.SRC`), 0.5.18 to 0.5.23.
CONTEXT_SRC = "apply_inkling_prefill_cuda_graph_default"
#: 0.4.6.post5 builds the model config only when the server starts (the tokenizer manager
#: and the scheduler), after `__post_init__`.
CONTEXT_SRC_0_4 = "SGLang launch checks"

_LONGER = (
    is_set(F.context_length)
    & is_set(F.max_context_length)
    & (F.context_length > F.max_context_length)
)
_ALLOWED = F.env_allow_overwrite_longer_context_len == True  # noqa: E712 - a rule node
_DENIED = F.env_allow_overwrite_longer_context_len == False  # noqa: E712 - a rule node
_TEXT = (
    "User-specified context_length ({context_length}) is greater than the derived "
    "context_length ({max_context_length}). This may lead to incorrect model outputs or CUDA "
    "errors."
)
_NOTE = (
    " Note that the derived context_length may differ from max_position_embeddings in the "
    "model's config."
)
_ENV = (
    " To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
)
_HINT = (
    "a --context-length at most the model's, or SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 "
    "(SGLang then warns and serves the longer context, which the model was not trained for)"
)


def context_length_rules(allowed_unset: bool) -> tuple[Rule, Rule]:
    """A `--context-length` above the model's derived one (`get_context_length`): a
    ValueError unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is true, and then a warning
    (SGLang logs it and serves that length). 0.5.18 to 0.5.23 read the variable as
    `EnvBool(False)` (unset: refused), 0.4.6.post5 as `get_bool_env_var(...,
    default="True")` (unset: allowed, only "0"/"false" refuse): `allowed_unset`."""
    allowed: Expr = ~_DENIED if allowed_unset else _ALLOWED
    source = CONTEXT_SRC_0_4 if allowed_unset else CONTEXT_SRC
    prefix = "" if allowed_unset else "Warning: "
    note = "" if allowed_unset else _NOTE
    # 0.4.6.post5's error carries the note, its warning does not; 0.5.x's both do.
    error = Rule(
        "MODEL-CONTEXT-LENGTH",
        _LONGER & ~allowed,
        F.context_length <= F.max_context_length,
        prefix + _TEXT + _NOTE + _ENV,
        source,
        hint=_HINT,
    )
    warning = Rule(
        "MODEL-CONTEXT-LENGTH-OVERRIDE",
        _LONGER & allowed,
        F.context_length <= F.max_context_length,
        prefix + _TEXT + note,
        source,
        hint="SGLang serves the longer context as asked; the model was not trained for it",
        severity="warning",
    )
    return error, warning


CONTEXT_LENGTH, CONTEXT_LENGTH_OVERRIDE = context_length_rules(allowed_unset=False)
CONTEXT_LENGTH_0_4, CONTEXT_LENGTH_OVERRIDE_0_4 = context_length_rules(allowed_unset=True)

#: `_dsa_kv_cache_dtype_default` (overrides.py, a post-process pass of
#: handle_model_specific_adjustments, 0.5.18 to 0.5.23): a DeepSeek-family class with
#: sparse attention, off NPU (and XPU), takes auto, bf16/bfloat16 or fp8_e4m3; SGLang
#: 0.5.23's resolution refuses --kv-cache-dtype fp8_e5m2 on DeepSeek V3.2 (CPU and SM90
#: alike; tests/test_kv_cache_rules.py).
DSA_KV_DTYPE = Rule(
    "MODEL-DSA-KV-DTYPE",
    F.is_deepseek_dsa & (F.platform != "npu"),
    one_of(F.kv_cache_dtype, "auto", "bf16", "bfloat16", "fp8_e4m3"),
    "DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype",
    "handle_model_specific_adjustments",
    hint="--kv-cache-dtype fp8_e4m3 or bfloat16 (auto: fp8_e4m3 on SM100+, else bfloat16)",
)

#: `handle_cache_compatibility` (kv_cache_hook.py; `_handle_cache_compatibility` in 0.5.18's
#: server_args.py): the effective ratio must be in (0, 1]. 0.4.6.post5 has no such flag.
#: SGLang asks it after the handler's host-pool, HiCache-radix and decode-offload checks
#: (0.5.18 to 0.5.23; 0.5.23's LMCache checks follow it), so the catalogue lists it after
#: `serving.HICACHE_RULES`, not among these.
SWA_RATIO = Rule(
    "SWA-RATIO-RANGE",
    TRUE,
    (F.swa_full_tokens_ratio > 0.0) & (F.swa_full_tokens_ratio <= 1.0),
    "--swa-full-tokens-ratio should be in range (0, 1.0].",
    "handle_cache_compatibility",
    hint="a --swa-full-tokens-ratio above 0 and at most 1 (the default is 0.8)",
)

#: Seed catalogue order: the model config (context) is built before the model-specific
#: handler runs (SWA_RATIO: see above).
RULES: tuple[Rule, ...] = (CONTEXT_LENGTH, CONTEXT_LENGTH_OVERRIDE, DSA_KV_DTYPE)
#: 0.4.6.post5: the context check only (no DSA class, no --swa-full-tokens-ratio), at launch.
RULES_0_4: tuple[Rule, ...] = (CONTEXT_LENGTH_0_4, CONTEXT_LENGTH_OVERRIDE_0_4)
