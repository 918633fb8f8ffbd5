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

The split (`KVCacheConfigurator._handle_max_mamba_cache`, the same arithmetic in 0.5.18,
0.5.19 and 0.5.23 without speculative decoding or an explicit `--max-mamba-cache-size`):
of the bytes left after the weights and the reserve, `ratio / (1 + ratio)` is the state
budget (`--mamba-full-memory-ratio`, default 0.9); it holds
`K = (budget - per_request) // per_request` slots (`max_mamba_cache_size`) plus one padding
slot, and the KV pool gets what the `K + 1` slots leave. Under PP a rank charges the most
GatedDeltaNet layers any stage has. The scheduler then caps `max_running_requests` at
`K // slots_per_request` (`resolve_max_num_reqs`): 3 slots a request plus 2 for the
`extra_buffer` radix-cache strategy, which `auto` picks for these architectures with the
overlap scheduler on (the default), so 5. SGLang 0.4.6.post5 has no model class for them.

Not modelled: speculative decoding's intermediate states, an explicit `--max-mamba-cache-size`
or `--max-running-requests` with the radix cache off (both size the pool from the request
count), and 0.5.23's CP-TP group sharing (the state then splits over TP, not attention TP).
"""

from __future__ import annotations

from meshsat.solver.memory.facts import ModelFacts
from meshsat.solver.memory.weights import stage_layers

#: `--mamba-full-memory-ratio`'s default (0.5.18 to 0.5.23).
DEFAULT_STATE_RATIO = 0.9
#: State slots one running request takes: `MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO` (3)
#: plus `MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP` (2) for the `extra_buffer` strategy.
SLOTS_PER_REQUEST = 5
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


def split_rest(
    rest_bytes: float, per_request: int, ratio: float = DEFAULT_STATE_RATIO
) -> tuple[int, float]:
    """(state slots `K`, bytes left for the KV pool) from the bytes a rank has after its
    weights and reserve; K ≤ 0 means SGLang refuses to start."""
    if rest_bytes <= 0:
        return 0, rest_bytes
    budget = rest_bytes * ratio / (1 + ratio)
    slots = int((budget - per_request) // per_request)
    return slots, rest_bytes - (slots + 1) * per_request
