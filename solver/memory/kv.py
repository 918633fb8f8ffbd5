"""KV-cache bytes one token costs on one rank.

Why these shapes (SGLang's KV pools):
- GQA/MHA: K and V for each KV head a rank owns: `max(1, kv_heads // attn_tp)` heads, so
  heads are replicated once attention TP exceeds the KV heads;
- MLA: one latent of `kv_lora_rank + qk_rope_head_dim` per layer, whole on every
  attention-TP rank (the latent is not split by heads);
- DSA (DeepSeek V3.2): an FP8 latent stores one float32 scale per 128 values and keeps
  the rope part in bf16, except where the attention backend reads the raw row (`trtllm`,
  Blackwell's FP8 default: 576 bytes, not 656); plus the indexer's FP8 key with one float32
  scale per 128 values, which 0.5.23 replicates on every decode-CP rank; its pool is
  rounded to pages of 64 tokens on CUDA (R-PAGE-SIZE, `page.py`);
- pipeline stages hold the KV of their own layers only;
- GatedDeltaNet hybrids (Qwen3-Next, Qwen3.5): only the full-attention layers hold KV; the
  linear-attention layers keep a per-request state in a pool of its own (`state.py`);
- decode context parallelism (`dcp_size`) stores each token on one of the `dcp` ranks, so
  a rank's pool covers `dcp` times as many tokens; the `dcp` ranks of a group hold the
  same KV heads, so GQA/MHA heads shard over `attn_tp // dcp` groups, not `attn_tp`
  (`ModelConfig.get_num_kv_heads(tp, dcp)`, 0.5.18 to 0.5.23): DCP widens a pool only
  where attention TP replicated heads (an MLA latent is whole on every rank anyway); the
  hybrid SWA pool (below) never widens under DCP (`HybridSWAPoolConfigurator` counts
  heads at attention TP, `logical_token_capacity`: "SWA allocators never widen under
  DCP"); prefill CP (`attn_cp_size`) keeps the whole KV on every rank;
- SGLang's hybrid SWA pool (from 0.5.18, for the architectures its `is_hybrid_swa_model`
  lists: gpt-oss, MiMo-V2, Llama 4, DeepSeek-V4, Step 3.5, Gemma 4, ...): the sliding-window
  layers get a pool of `swa_full_tokens_ratio` (default 0.8; DeepSeek-V4 0.1) times the full
  layers' tokens, so one token of `max_total_num_tokens` costs
  `full_layers·full_cell + ratio·swa_layers·swa_cell` (`HybridSWAPoolConfigurator`);
  0.5.23 with `--max-running-requests` and the radix cache off sizes the SWA pool for
  those requests instead and gives the full pool the rest (`SwaRequestCap`);
  Gemma 2/3 turn the hybrid pool off (`disable_hybrid_swa_memory`) and 0.4.6.post5 has
  none: their sliding layers are charged in full;
- `--kv-cache-dtype auto` is the model's dtype, except where the release picks for the
  model and device: for DeepSeek DSA models from 0.5.18 on, the pack's own step
  (`R-DSA-KV-DTYPE`, `_dsa_kv_cache_dtype_default`: FP8 `fp8_e4m3` on compute capability
  ≥ 10, else bfloat16, and `bf16` spelled bfloat16), so the pool and `validate`'s report
  read one answer; FP8 for DeepSeek-V4 everywhere but NPUs, and from 0.5.18 for a
  checkpoint whose quantization config says `kv_cache_quant_algo: FP8` (ModelOpt releases).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.memory.facts import ModelFacts
from meshsat.solver.memory.gpus import Gpu
from meshsat.solver.memory.layout import Parallel
from meshsat.solver.memory.quant import kv_dtype_bytes
from meshsat.solver.memory.weights import stage_layers
from meshsat.solver.packs.registry import get_pack

INDEXER_SCALE_BLOCK = 128


def resolved_kv_cache_dtype(
    f: ModelFacts, kv_cache_dtype: str | None, gpu: Gpu | None, pack: str = "0.5.23"
) -> str | None:
    """What `--kv-cache-dtype` (None or `auto` when not given) becomes in `pack` on `gpu`:
    the server-argument defaults first (DeepSeek-V4, DSA), then the model runner's
    (`kv_cache_quant_algo: FP8` in the quantization config)."""
    if pack in ("0.4.6.post5", "legacy"):
        return kv_cache_dtype
    if f.index_head_dim:
        return dsa_kv_cache_dtype(kv_cache_dtype or "auto", gpu, pack)
    if kv_cache_dtype not in (None, "auto"):
        return kv_cache_dtype
    if f.architecture == "DeepseekV4ForCausalLM":
        return "fp8_e4m3"
    if f.kv_cache_quant_algo.upper() == "FP8":
        return "fp8_e4m3"
    return kv_cache_dtype


@lru_cache(maxsize=64)
def dsa_kv_cache_dtype(kv_cache_dtype: str, gpu: Gpu | None, pack: str) -> str:
    """A DeepSeek DSA model's KV cache dtype as `pack` resolves it on `gpu`: the pack's
    `R-DSA-KV-DTYPE` step, evaluated on what the memory model knows (the GPU's platform and
    compute capability; an NVIDIA GPU given by its memory only is the default class the
    memory model assumes for it). A pack without the step keeps the dtype given."""
    steps = [r for r in get_pack(pack).resolutions if r.id == "R-DSA-KV-DTYPE"]
    amd = gpu is not None and gpu.vendor == "amd"
    env: dict[str, Any] = {
        "is_deepseek_dsa": True,
        "platform": "hip" if amd else "cuda",
        "gpu_sm": None if gpu is None or amd else gpu.compute_capability,
        "kv_cache_dtype": kv_cache_dtype,
    }
    for step in (s for r in steps for s in r.steps):
        if evaluate(step.when, env):
            env.update({name: evaluate(value, env) for name, value in step.sets})
    return str(env["kv_cache_dtype"])


#: Architectures SGLang (0.5.18 to 0.5.23, `configs/model_config.py`) gives the hybrid pool.
HYBRID_SWA_ARCHS = frozenset(
    {
        "Llama4ForConditionalGeneration",
        "DeepseekV4ForCausalLM",
        "GptOssForCausalLM",
        "MiMoV2ForCausalLM",
        "MiMoV2FlashForCausalLM",
        "Step3p5ForCausalLM",
        "Step3p7ForConditionalGeneration",
        "Gemma4ForCausalLM",
        "Gemma4ForConditionalGeneration",
    }
)
DEFAULT_SWA_FULL_TOKENS_RATIO = 0.8


def dcp_widening(swa_ratio: float | None, dcp: int) -> int:
    """How many request tokens one row of a rank's pool stands for under decode CP: `dcp`,
    except in the hybrid SWA pool, which never widens (`logical_token_capacity`)."""
    return 1 if swa_ratio is not None else dcp


def hybrid_swa_ratio(
    f: ModelFacts, pack: str = "0.5.23", ratio: float | None = None
) -> float | None:
    """`swa_full_tokens_ratio` when `pack` sizes a hybrid SWA pool for this model, else None
    (the sliding layers are charged in full)."""
    if pack in ("0.4.6.post5", "legacy") or not f.swa_layer_ids:
        return None
    if f.architecture not in HYBRID_SWA_ARCHS:
        return None
    if ratio is not None:
        return ratio
    return 0.1 if f.architecture == "DeepseekV4ForCausalLM" else DEFAULT_SWA_FULL_TOKENS_RATIO


#: Classes whose `get_attention_sliding_window_size` is the config's `sliding_window - 1`
#: (0.5.18 to 0.5.23); the others' window is `ModelConfig.sliding_window_size`, else the
#: `attention_chunk_size` (Llama 4), as `resolve_sliding_window_size` reads them.
_WINDOW_LESS_ONE = frozenset(
    {"GptOssForCausalLM", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"}
)


def swa_window(f: ModelFacts, swa_ratio: float | None) -> int:
    """The sliding window SGLang checks its hybrid SWA pool against at start-up, or 0 where
    it checks none. `HybridSWAPoolConfigurator` (0.5.18 to 0.5.23) refuses a pool of
    `swa_tokens <= window + page_size` ("SWA pool (N tokens) cannot hold even one
    request"): prefill admits a request only with that much SWA room. None without a
    hybrid pool (`swa_ratio` None), for an all-SWA model (no full pool: its one pool is
    the budget) and for DeepSeek-V4, whose pool `DSV4PoolConfigurator` sizes its own way
    (checked in 0.5.23 only, against its compressed and ring pools)."""
    if swa_ratio is None or f.architecture == "DeepseekV4ForCausalLM":
        return 0
    if len(f.swa_layer_ids) >= f.num_layers:
        return 0
    if f.architecture in _WINDOW_LESS_ONE:
        return max(f.sliding_window - 1, 0)
    return f.sliding_window_size or f.attention_chunk_size


def swa_holds_a_request(swa_tokens: int, window: int, page_size: int) -> bool:
    """SGLang's start-up check of a hybrid SWA pool (`HybridSWAPoolConfigurator`, 0.5.18
    to 0.5.23): more tokens than the window plus a page, the SWA room prefill needs to
    admit one request (`window` 0: no check)."""
    return not window or swa_tokens > window + page_size


#: `SGLANG_SWA_EVICTION_INTERVAL`'s default (0.5.23): tokens a request's SWA tail may run
#: past its window before the scheduler evicts.
SWA_EVICTION_INTERVAL = 128


@dataclass(frozen=True)
class SwaRequestCap:
    """0.5.23's `SWARequestCapPoolConfigurator`: with `--max-running-requests` given and the
    radix cache off (a PD decode engine's default), a hybrid SWA pool is sized to the worst
    case of that many running requests, not `swa_full_tokens_ratio` times the full pool,
    and the full pool gets the rest of the budget (`compute_swa_request_cap`). Without
    speculative decoding only (its per-request decode allocation is not modelled)."""

    #: `--max-running-requests`, over all attention-DP ranks.
    max_running_requests: int
    #: Two prefill chunks in flight with the overlap scheduler, one without.
    overlap: bool = True
    #: A PD decode engine: no prefill chunk, but its extra transfer slots.
    decode: bool = False

    def tokens(self, window: int, page: int, attn_dp: int, dp_ranks: int, chunk: int) -> int:
        """The SGLang SWA pool of one rank: `window` the sliding window, `chunk` the
        resolved `--chunked-prefill-size` (per attention-DP rank), `dp_ranks` replicas
        times attention DP (`num_dp_ranks_of`, what the decode slots divide by); 0 where
        SGLang keeps the ratio (chunked prefill off on an engine that prefills)."""
        if not self.decode and chunk <= 0:
            return 0
        draft_tokens = 1  # `speculative_num_draft_tokens or 1`
        per_request = window + SWA_EVICTION_INTERVAL * draft_tokens + page + page
        requests = max(1, self.max_running_requests // attn_dp)
        if self.decode:
            # `--disaggregation-decode-extra-slots` unset: twice a small batch, else none.
            per_worker = max(1, self.max_running_requests // dp_ranks)
            extra = 2 * per_worker if per_worker <= 32 else 0
            total = per_request * requests + (window + page) * extra
        else:
            total = per_request * requests + (2 if self.overlap else 1) * chunk + page
        return -(-total // page) * page  # `ceil_align`


def swa_request_cap(resolved: Mapping[str, Any], pack: str) -> SwaRequestCap | None:
    """The `SwaRequestCap` a resolved layout's flags ask for, or None where the release
    sizes the SWA pool by the ratio (before 0.5.23; no `--max-running-requests`; the
    radix cache on; speculative decoding, not modelled)."""
    running = resolved.get("max_running_requests")
    if pack != "0.5.23" or running is None or not resolved.get("disable_radix_cache"):
        return None
    if resolved.get("speculative_algorithm") is not None:
        return None
    return SwaRequestCap(
        int(running),
        overlap=not resolved.get("disable_overlap_schedule"),
        decode=resolved.get("disaggregation_mode") == "decode",
    )


def swa_pool_tokens(full_tokens: int, swa_ratio: float, page_size: int) -> int:
    """The hybrid pool's SWA tokens for `full_tokens` full-pool tokens, as
    `HybridSWAPoolConfigurator._solve_pool_sizes` sizes them: the ratio's share, rounded
    down to whole pages."""
    return int(full_tokens * swa_ratio) // page_size * page_size


def dsa_backends(
    f: ModelFacts,
    kv_cache_dtype: str | None,
    gpu: Gpu | None,
    prefill: str | None = None,
    decode: str | None = None,
) -> tuple[str | None, str | None]:
    """The DSA prefill and decode attention backends a DeepSeek DSA model runs with
    (`--dsa-prefill-backend`/`--dsa-decode-backend` when given), as 0.5.18 to 0.5.23 pick
    them (`overrides.py`): on CUDA, FP8 `trtllm` on compute capability ≥ 10 and `flashmla_kv`
    below; bf16 `flashmla_sparse` prefill and `trtllm` (≥ 10) or `fa3` decode; None for a
    model without DSA or a GPU that is not NVIDIA's."""
    if not f.index_head_dim or gpu is None or gpu.vendor != "nvidia":
        return prefill, decode
    if kv_cache_dtype == "fp8_e4m3":
        default = "trtllm" if gpu.sm >= 10 else "flashmla_kv"
        return prefill or default, decode or default
    return prefill or "flashmla_sparse", decode or ("trtllm" if gpu.sm >= 10 else "fa3")


def dsa_raw_layout(
    pack: str,
    prefill: str | None,
    decode: str | None,
    disaggregation_mode: str = "null",
) -> bool:
    """Whether a DSA model's FP8 latent is the raw row (`kv_lora_rank + qk_rope_head_dim`
    bytes, no scales: `calculate_mla_kv_cache_dim`) rather than the scaled layout: with
    `trtllm` on either phase (0.5.23: on the engine's own phase under PD disaggregation), or
    `tilelang` on both (0.5.23)."""
    if pack in ("0.4.6.post5", "legacy"):
        return False
    if pack == "0.5.23" and disaggregation_mode == "decode":
        trtllm = decode == "trtllm"
    elif pack == "0.5.23" and disaggregation_mode == "prefill":
        trtllm = prefill == "trtllm"
    else:
        trtllm = "trtllm" in (prefill, decode)
    return trtllm or (pack == "0.5.23" and prefill == decode == "tilelang")


def layer_kv_bytes(
    f: ModelFacts,
    attn_tp: int,
    kv_cache_dtype: str | None = None,
    *,
    swa: bool = False,
    dcp: int = 1,
    dsa_raw: bool = False,
    indexer_dcp: bool = False,
) -> float:
    """KV bytes of one token in one layer on one rank (a sliding-window layer of the hybrid
    pool with `swa`; `dcp`: decode CP, whose ranks repeat each other's heads). A DSA model's
    FP8 latent in the raw layout with `dsa_raw` (`dsa_raw_layout`), and its indexer key
    charged `dcp` times with `indexer_dcp` (0.5.23: the index-K buffer is replicated on
    every DCP rank while the latent shards, `pool_configurator.py`)."""
    b = kv_dtype_bytes(kv_cache_dtype, f.quant.unquantized)
    if f.is_mla and f.index_head_dim and b == 1 and not dsa_raw:
        # DSA's FP8 layout: FP8 latent, one float32 scale per 128 values, rope part in bf16.
        r = f.kv_lora_rank
        per = r + r // INDEXER_SCALE_BLOCK * 4 + f.qk_rope_head_dim * 2.0
    elif f.is_mla:
        per = (f.kv_lora_rank + f.qk_rope_head_dim) * b
    elif swa and (f.swa_num_kv_heads or f.swa_head_dim):
        heads = max(1, (f.swa_num_kv_heads or f.num_kv_heads) // attn_tp)
        per = heads * ((f.swa_head_dim or f.head_dim) + (f.swa_v_head_dim or f.v_head_dim)) * b
    else:
        heads = max(1, f.num_kv_heads // max(1, attn_tp // dcp))
        per = heads * (f.head_dim + f.v_head_dim) * b
    if f.index_head_dim:
        indexer = f.index_head_dim + f.index_head_dim // INDEXER_SCALE_BLOCK * 4
        per += indexer * (dcp if indexer_dcp else 1)
    return per


def kv_bytes_per_token(
    f: ModelFacts,
    p: Parallel,
    stage: int,
    kv_cache_dtype: str | None = None,
    swa_ratio: float | None = None,
    *,
    dsa_raw: bool = False,
    indexer_dcp: bool = False,
) -> float:
    """Bytes one token of the pool costs on a rank of `stage` (SGLang's cell size); with
    `swa_ratio` (`hybrid_swa_ratio`), the hybrid pool's; `dsa_raw`, `indexer_dcp`: a DSA
    model's layout (`layer_kv_bytes`)."""
    start, end = stage_layers(f.num_layers, p.pp)[stage]
    linear = sum(1 for i in f.linear_layer_ids if start <= i < end)
    if swa_ratio is None:
        full = layer_kv_bytes(
            f, p.attn_tp, kv_cache_dtype, dcp=p.dcp, dsa_raw=dsa_raw, indexer_dcp=indexer_dcp
        )
        return (end - start - linear) * full
    full = layer_kv_bytes(f, p.attn_tp, kv_cache_dtype)  # the hybrid pool ignores DCP
    swa = sum(1 for i in f.swa_layer_ids if start <= i < end)
    sliding = layer_kv_bytes(f, p.attn_tp, kv_cache_dtype, swa=True)
    return (end - start - swa) * full + swa_ratio * swa * sliding
