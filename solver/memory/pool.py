"""The KV pool SGLang allocates after loading weights, and how many requests it holds.

SGLang (`kv_cache_configurator`): with `pre` the free GiB measured before loading weights
and `avail` the free GiB after, `rest = avail - pre·(1 - mem_fraction_static)` and
`max_total_num_tokens = int(rest·2^30 // cell_size)`, then rounded down to a multiple of
`page_size`. Since `avail = pre - weights - load overhead`, the pool is what is left of
`pre·fraction` after the weights. Each attention-DP rank owns its own pool, so the engine
holds `attn_dp` pools; decode CP stores every token on one of `dcp` ranks.

`--max-total-tokens N` caps that pool (`KVCacheConfigurator._apply_token_constraints`,
0.5.18 to 0.5.23; `ModelRunner.init_memory_pool` in 0.4.6.post5): `min(profiled, N)`,
rounded down to `page_size` again, on every rank for itself: N is per attention-DP rank,
not divided by `dp_size`, and it caps the rank's own rows, before decode CP widens them.
Under pipeline parallelism the stages then agree on the smallest (an all-reduce MIN).
"""

from __future__ import annotations

GIB = float(1 << 30)


def pool_tokens(
    pre_load_gib: float,
    weights_gib: float,
    fraction: float,
    cell_bytes: float,
    *,
    page_size: int = 1,
    reserve_gib: float = 0.0,
    fixed_bytes: float = 0.0,
) -> int:
    """Tokens in one rank's KV pool (0 when the weights leave nothing); `reserve_gib` is
    what the release keeps back beside the fraction (`multimodal.runtime_reserve_mib`);
    `fixed_bytes` a pool sized before the tokens (0.5.23's request-capped SWA pool,
    `kv.SwaRequestCap`), taken from the rest first."""
    avail = pre_load_gib - weights_gib - reserve_gib
    rest = (avail - pre_load_gib * (1 - fraction)) * GIB - fixed_bytes
    if rest <= 0 or cell_bytes <= 0:
        return 0
    tokens = int(rest // cell_bytes)
    return tokens // page_size * page_size


def capped_tokens(tokens: int, max_total_tokens: int | None, page_size: int = 1) -> int:
    """A rank's pool under `--max-total-tokens` (None: not given): the smaller, in whole
    pages; a cap above the profiled size changes nothing (SGLang logs "Use the profiled
    value instead")."""
    if max_total_tokens is None:
        return tokens
    return min(tokens, max_total_tokens) // page_size * page_size


def requests_that_fit(tokens: int, context_length: int, pools: int = 1) -> int:
    """Requests of `context_length` tokens the engine holds at once (`pools` DP ranks)."""
    if context_length <= 0:
        return 0
    return pools * (tokens // context_length)
