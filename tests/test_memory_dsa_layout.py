"""DeepSeek-V3.2's (DSA) KV pool as each release lays it out, by hand from the releases'
source: the FP8 latent's raw row where the attention backend reads it so, the indexer key
replicated under decode CP (0.5.23), and the pool in pages of 64 tokens.

- `calculate_mla_kv_cache_dim` (`mem_cache/kv_cache_configurator.py`, 0.5.18 to 0.5.23):
  with `trtllm` as the DSA prefill or decode backend the latent is the raw
  `kv_lora_rank + qk_rope_head_dim` row (576 FP8 bytes), not the scaled one (512 + 512/128·4
  + 64·2 = 656 bytes). `--kv-cache-dtype auto` is FP8 on compute capability ≥ 10 and both
  backends default to `trtllm` there (`overrides.py`), `flashmla_kv` on Hopper.
- `pool_configurator.py` (0.5.23 only): "The index-K buffer is replicated under DCP while
  the latent KV shards": the indexer's 128 + 4 bytes a layer count `dcp_size` times.
- `model_overrides/deepseek_v2.py` (0.5.18 to 0.5.23): page size `64 · index_kpool` for DSA,
  and the pool is `max_total_num_tokens // page_size * page_size`.
"""

from __future__ import annotations

import pytest

from meshsat.solver.memory import MemoryModel, Parallel
from meshsat.solver.memory.models import model_config
from meshsat.solver.validation.validate import validate

V32 = "deepseek-ai/DeepSeek-V3.2"
LAYERS = 61
INDEXER = 128 + 128 // 128 * 4


def _memory(gpu: str, args: dict[str, object], pack: str = "0.5.23", **options: object):
    report = validate(args, model_config(V32), sglang_version=pack, explain=False)
    assert report.valid, report.violations
    mm = MemoryModel(V32, gpu, pack=pack, **options)  # type: ignore[arg-type]
    return mm, mm.of(Parallel.from_resolved(report.resolved, report.derived))


@pytest.mark.parametrize("pack", ["0.5.18", "0.5.19", "0.5.23"])
def test_blackwell_fp8_default_is_the_raw_trtllm_row(pack: str) -> None:
    mm, m = _memory("B200", {"tp_size": 8}, pack)
    assert mm.kv_cache_dtype == "fp8_e4m3"
    assert m.kv_bytes_per_token == (576 + INDEXER) * LAYERS == 43188


def test_hopper_fp8_keeps_the_scaled_row() -> None:
    """FP8 on H200 runs `flashmla_kv`: the scaled layout."""
    _, m = _memory("H200", {"tp_size": 8}, kv_cache_dtype="fp8_e4m3")
    assert m.kv_bytes_per_token == (512 + 16 + 128 + INDEXER) * LAYERS == 48068


def test_a_named_non_trtllm_backend_keeps_the_scaled_row_on_blackwell() -> None:
    _, m = _memory(
        "B200",
        {"tp_size": 8},
        dsa_prefill_backend="flashmla_kv",
        dsa_decode_backend="flashmla_kv",
    )
    assert m.kv_bytes_per_token == 48068


def test_pd_engines_read_their_own_phases_backend_in_0523() -> None:
    """0.5.23: a decode engine's layout follows its decode backend only."""
    _, m = _memory(
        "B200",
        {"tp_size": 8},
        dsa_prefill_backend="trtllm",
        dsa_decode_backend="flashmla_kv",
        disaggregation_mode="decode",
    )
    assert m.kv_bytes_per_token == 48068
    _, m = _memory(
        "B200",
        {"tp_size": 8},
        dsa_prefill_backend="trtllm",
        dsa_decode_backend="flashmla_kv",
    )
    assert m.kv_bytes_per_token == 43188


@pytest.mark.parametrize(("pack", "indexer_copies"), [("0.5.19", 1), ("0.5.23", 8)])
def test_dcp_replicates_the_indexer_key_in_0523(pack: str, indexer_copies: int) -> None:
    """bf16 on H200 at tp 8 with `--dcp-size 8`: 1152 latent bytes a layer, whole on every
    rank, and the indexer key once per DCP rank in 0.5.23 (134,688 bytes a row)."""
    _, m = _memory("H200", {"tp_size": 8, "dcp_size": 8}, pack)
    assert m.kv_bytes_per_token == (1152 + INDEXER * indexer_copies) * LAYERS


def test_the_pool_is_whole_pages_of_64() -> None:
    """H200 tp 8: 589,218 rows fit; SGLang keeps 589,184 (9,206 pages of 64), a typed
    `--page-size 1` too: the DeepSeek override sets 64 whatever was typed (R-PAGE-SIZE)."""
    mm, m = _memory("H200", {"tp_size": 8})
    assert mm.page_size == 64
    rest = (m.pre_load_gib * m.mem_fraction_static - m.weights_gib) * (1 << 30)
    rows = int(rest // m.kv_bytes_per_token)
    assert rows == 589218
    assert m.kv_tokens == rows // 64 * 64 == 589184
    typed, given = _memory("H200", {"tp_size": 8, "page_size": 1}, page_size=1)
    assert (typed.page_size, given.page_size, given.kv_tokens) == (64, 64, 589184)
