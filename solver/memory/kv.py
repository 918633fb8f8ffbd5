"""KV-cache bytes one token costs on one rank.

Why these shapes (SGLang's KV pools):
- GQA/MHA: K and V for each KV head a rank owns: `max(1, kv_heads // attn_tp)` heads, so
  heads are replicated once attention TP exceeds the KV heads;
- MLA: one latent of `kv_lora_rank + qk_rope_head_dim` per layer, whole on every
  attention-TP rank (the latent is not split by heads);
- DSA (DeepSeek V3.2): an FP8 latent stores one float32 scale per 128 values and keeps
  the rope part in bf16; plus the indexer's FP8 key with one float32 scale per 128 values;
- pipeline stages hold the KV of their own layers only;
- decode context parallelism (`dcp_size`) stores each token on one of the `dcp` ranks, so
  a rank's pool covers `dcp` times as many tokens; prefill CP (`attn_cp_size`) keeps the
  whole KV on every rank;
- sliding-window layers are charged in full (SGLang's hybrid SWA pool is not modelled).
"""

from __future__ import annotations

from meshsat.solver.memory.facts import ModelFacts
from meshsat.solver.memory.layout import Parallel
from meshsat.solver.memory.quant import kv_dtype_bytes
from meshsat.solver.memory.weights import stage_layers

INDEXER_SCALE_BLOCK = 128


def layer_kv_bytes(f: ModelFacts, attn_tp: int, kv_cache_dtype: str | None = None) -> float:
    """KV bytes of one token in one layer on one rank."""
    b = kv_dtype_bytes(kv_cache_dtype, f.quant.unquantized)
    if f.is_mla and f.index_head_dim and b == 1:
        # DSA's FP8 layout: FP8 latent, one float32 scale per 128 values, rope part in bf16.
        r = f.kv_lora_rank
        per = r + r // INDEXER_SCALE_BLOCK * 4 + f.qk_rope_head_dim * 2.0
    elif f.is_mla:
        per = (f.kv_lora_rank + f.qk_rope_head_dim) * b
    else:
        heads = max(1, f.num_kv_heads // attn_tp)
        per = heads * (f.head_dim + f.v_head_dim) * b
    if f.index_head_dim:
        per += f.index_head_dim + f.index_head_dim // INDEXER_SCALE_BLOCK * 4
    return per


def kv_bytes_per_token(
    f: ModelFacts, p: Parallel, stage: int, kv_cache_dtype: str | None = None
) -> float:
    """Bytes one token of the pool costs on a rank of `stage` (SGLang's cell size)."""
    start, end = stage_layers(f.num_layers, p.pp)[stage]
    return (end - start) * layer_kv_bytes(f, p.attn_tp, kv_cache_dtype)
