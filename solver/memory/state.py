"""The per-request state pool of GatedDeltaNet hybrids (Qwen3-Next, Qwen3.5).

Why a second pool: SGLang keeps KV only for the full-attention layers of these models
(`DefaultPoolConfigurator` counts `full_attention_layer_ids` into the cell size) and gives
each GatedDeltaNet layer a fixed-size recurrent state per request slot instead (`MambaPool`,
sized by `Mamba2CacheParams.mamba_cache_per_req`, `configs/mamba_utils.py`). Per layer and
attention-TP rank (`Mamba2StateShape.create` with `linear_attn_tp_size()`, attention TP):

- conv state: `conv_dim / tp × (kernel - 1)` in bf16 (`SGLANG_MAMBA_CONV_DTYPE`), where
  `conv_dim = value heads·value dim + 2·groups·key dim` and the key groups are raised to
  `tp` when they do not divide it (`extra_groups_for_head_shards`);
- temporal (SSM) state: `value heads / tp × value dim × key dim` in `mamba_ssm_dtype`
  (float32 unless the config says otherwise).

The split (`KVCacheConfigurator._handle_max_mamba_cache`, mem_cache/kv_cache_configurator.py;
the same in 0.5.18 and 0.5.19, 0.5.23 as noted): of the bytes a rank has after its weights,
the `mem_fraction_static` slack and a multimodal model's reserve (`multimodal.py`), the state
pool takes `K + 1` slots (`K`, SGLang's `max_mamba_cache_size` per attention-DP rank, plus one
padding slot) and the KV pool gets the rest. `K` is
- `--max-mamba-cache-size // attn_dp` when given (no ratio then);
- else sized from `--mamba-full-memory-ratio` (0.9): the state budget is
  `ratio / (1 + ratio)` of the rest and `K = (budget - per_request) // per_request`;
- with speculative decoding (`D` = `--speculative-num-draft-tokens`), the budget also holds
  the intermediate states a verify step writes: `K` solves
  `(K + 1)·per + (K / 5 + 1)·D·per = budget`, i.e. `(budget - per·(1 + D)) // (per·(1 + D/5))`,
  and the rest loses `per·(capped + 1)·D`, `capped = min(max_running_requests // attn_dp,
  K // 5)` (0.5.23: the first term at least 1). With an explicit `--max-mamba-cache-size`
  the intermediate states are charged the same way on top. SGLang sets
  `--max-running-requests 48` for speculative decoding when none is given.
Under PP a rank charges the most GatedDeltaNet layers any stage has. The scheduler then caps
`max_running_requests` at `K // slots_per_request` (`resolve_max_num_reqs`), and the
speculative split above divides `D` by the same number (`_calculate_mamba_ratio`,
`slots_per_request` here): 3 slots a request plus the `extra_buffer` radix-cache strategy's
ping-pong slots, 2 with the overlap scheduler on and 1 without (`get_mamba_tracking_slots`),
so 5, or 4 where the resolved flags turn the scheduler off (PP, R-PP-OVERLAP, after the
strategy was picked); 1 with the radix cache off. `auto` picks `extra_buffer` for these
architectures in the model overrides, with the overlap scheduler on or a page above 1; a
`--disable-overlap-schedule` typed with page 1 picks `no_buffer` (3 slots), which meshsat
does not tell from PP's (it reads the resolved flag): 4 there. SGLang 0.4.6.post5 has no
model class for them. `tests/test_memory_reserves.py` replays
the release's own `_handle_max_mamba_cache` (`fidelity/memory_reserves.py`).

Not modelled: `--max-running-requests` with the radix cache off (it then sizes the pool),
ReplaySSM speculative state, 0.5.23's PD prefill engines (which skip the speculative
states), and 0.5.23's CP-TP group sharing (the state then splits over TP, not attention TP).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.memory.facts import ModelFacts
from meshsat.solver.memory.weights import stage_layers

#: `--mamba-full-memory-ratio`'s default (0.5.18 to 0.5.23).
DEFAULT_STATE_RATIO = 0.9
#: State slots one running request takes: `MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO` (3)
#: plus the `extra_buffer` strategy's tracking slots (`slots_per_request`).
BASE_SLOTS = 3
#: ... with the overlap scheduler on (2 tracking slots): the default.
SLOTS_PER_REQUEST = BASE_SLOTS + 2


def slots_per_request(overlap: bool, radix_cache: bool = True) -> int:
    """`_calculate_mamba_ratio` (0.5.18 to 0.5.23): 1 with the radix cache off, else 3 plus
    the `extra_buffer` strategy's tracking slots (`get_mamba_tracking_slots`: 2 with the
    overlap scheduler on, 1 without; not lazy, the decode lock not skipped)."""
    if not radix_cache:
        return 1
    return BASE_SLOTS + (2 if overlap else 1)


#: `--max-running-requests` SGLang sets for speculative decoding when none is given
#: (`_handle_eagle_family`, `_handle_ngram`).
SPECULATIVE_RUNNING_REQUESTS = 48
#: The conv state's bytes per element (bf16).
CONV_BYTES = 2


def layer_state_bytes(f: ModelFacts, attn_tp: int) -> int:
    """One GatedDeltaNet layer's state of one request on one attention-TP rank."""
    groups = f.linear_num_key_heads
    if groups % attn_tp:
        groups += attn_tp - groups  # extra_groups_for_head_shards
    conv_dim = (
        f.linear_num_value_heads * f.linear_value_head_dim + 2 * groups * f.linear_key_head_dim
    )
    conv = conv_dim // attn_tp * (f.linear_conv_kernel - 1) * CONV_BYTES
    heads = f.linear_num_value_heads // attn_tp
    temporal = heads * f.linear_value_head_dim * f.linear_key_head_dim * f.linear_state_bytes
    return conv + temporal


def state_bytes_per_request(f: ModelFacts, attn_tp: int, pp: int = 1) -> int:
    """What one state slot costs a rank (`stage_per_req`): every GatedDeltaNet layer, or
    under PP the most any stage holds; 0 for a model without them."""
    ids = f.linear_layer_ids
    if not ids:
        return 0
    per_req = layer_state_bytes(f, attn_tp) * len(ids)
    most = max(sum(1 for i in ids if lo <= i < hi) for lo, hi in stage_layers(f.num_layers, pp))
    return int(per_req * (most / len(ids)))


@dataclass(frozen=True)
class StateFlags:
    """The launch flags `_handle_max_mamba_cache` reads besides the bytes."""

    #: `--mamba-full-memory-ratio`.
    ratio: float = DEFAULT_STATE_RATIO
    #: `--max-mamba-cache-size` (all attention-DP ranks together); None: from the ratio.
    max_mamba_cache_size: int | None = None
    #: `--speculative-num-draft-tokens`; None without speculative decoding.
    draft_tokens: int | None = None
    #: `--max-running-requests` (read with speculative decoding; None: SGLang's 48).
    max_running_requests: int | None = None
    #: 0.5.23 reads at least one request per attention-DP rank (`max(1, ...)`).
    at_least_one_request: bool = True
    #: State slots a running request takes (`slots_per_request` of the resolved flags).
    slots_per_request: int = SLOTS_PER_REQUEST


def split_rest(
    rest_bytes: float, per_request: int, flags: StateFlags = StateFlags(), attn_dp: int = 1
) -> tuple[int, float]:
    """(state slots `K` per attention-DP rank, bytes left for the KV pool) from the bytes a
    rank has after its weights and reserves; K ≤ 0 means SGLang refuses to start."""
    if rest_bytes <= 0:
        return 0, rest_bytes
    draft = flags.draft_tokens
    if flags.max_mamba_cache_size is not None:
        slots = flags.max_mamba_cache_size // attn_dp
    elif draft is not None:
        budget = rest_bytes * flags.ratio / (1 + flags.ratio)
        step = per_request * (1 + draft / flags.slots_per_request)
        slots = int((budget - per_request * (1 + draft)) // step)
    else:
        budget = rest_bytes * flags.ratio / (1 + flags.ratio)
        slots = int((budget - per_request) // per_request)
    if draft is not None:
        running = flags.max_running_requests or SPECULATIVE_RUNNING_REQUESTS
        running //= attn_dp
        if flags.at_least_one_request:
            running = max(1, running)
        capped = min(running, slots // flags.slots_per_request)
        rest_bytes -= per_request * (capped + 1) * draft
    return slots, rest_bytes - (slots + 1) * per_request


#: `--speculative-num-draft-tokens` the release picks for these architectures when none is
#: given: the EAGLE family's automatic (3 steps, top-k 1, 4 tokens;
#: `_auto_choose_speculative_params`; NEXTN is read as EAGLE), NGRAM's 12 (`_handle_ngram`).
DEFAULT_DRAFT_TOKENS: dict[str, int] = {
    "EAGLE": 4,
    "EAGLE3": 4,
    "NEXTN": 4,
    "STANDALONE": 4,
    "NGRAM": 12,
}


def state_flags(
    resolved: Mapping[str, Any], pack: str, ratio: float = DEFAULT_STATE_RATIO
) -> StateFlags:
    """The `StateFlags` of a resolved layout (a `Report`'s `.resolved`), as `pack` reads
    them: the slots a request takes from the resolved overlap scheduler and radix cache
    (PP turns the scheduler off, R-PP-OVERLAP; a PD decode server the radix cache)."""
    algorithm = resolved.get("speculative_algorithm")
    draft = resolved.get("speculative_num_draft_tokens")
    if algorithm is None:
        draft = None
    elif draft is None:
        draft = DEFAULT_DRAFT_TOKENS.get(str(algorithm).upper())
        if draft is None:
            raise InputError(
                f"speculative algorithm {algorithm!r}: give --speculative-num-draft-tokens, "
                "which sizes a hybrid's speculative state slots"
            )
    return StateFlags(
        ratio=ratio,
        max_mamba_cache_size=resolved.get("max_mamba_cache_size"),
        draft_tokens=draft,
        max_running_requests=resolved.get("max_running_requests"),
        at_least_one_request=pack not in ("0.5.18", "0.5.19"),
        slots_per_request=slots_per_request(
            overlap=not resolved.get("disable_overlap_schedule"),
            radix_cache=not resolved.get("disable_radix_cache"),
        ),
    )
