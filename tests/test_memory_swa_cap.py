"""0.5.23's request-capped SWA pool: `--max-running-requests` with the radix cache off.

SGLang 0.5.23 (`create_memory_pool_configurator`, model_executor/pool_configurator.py)
picks `SWARequestCapPoolConfigurator` for a hybrid SWA model (not DeepSeek-V4) when
`--max-running-requests` is given, the radix cache is off and chunked prefill is on (or
the engine is a PD decode one). Its SWA pool is `compute_swa_request_cap`:

    per_request = window + SGLANG_SWA_EVICTION_INTERVAL (128) · draft_tokens (1) + page
                  + page (one decode page)
    swa         = ceil_align(per_request · max(1, max_running_requests // attn_dp)
                             + chunks_in_flight (2; 1 without overlap) · chunk + page, page)

and the full pool takes the rest: `((available - swa · swa_cell) // full_cell) // page · page`
with `full_cell` the full layers' bytes only. No start-up check against the window. Earlier
releases (and the radix cache on) keep `swa_full_tokens_ratio`. The expected figures are
that formula on gpt-oss-20b's own shapes: 12 full and 12 sliding layers of 8 KV heads of
64, bf16: 12 · 8 · (64 + 64) · 2 = 24,576 bytes a token each side; window 127.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import Memory, MemoryModel, Parallel, flag_options
from meshsat.solver.memory.kv import SwaRequestCap, swa_request_cap
from meshsat.solver.memory.models import catalogue_config
from tests.cli_helpers import run_cli
from tests.memory_rows import column_rows

GPT_OSS = "openai/gpt-oss-20b"
CELL = 12 * 8 * (64 + 64) * 2
WINDOW = 127


def _swa(requests: int, chunk: int, page: int = 1, chunks: int = 2) -> int:
    per = WINDOW + 128 + page + page
    total = per * requests + chunks * chunk + page
    return -(-total // page) * page


def _rest(m: Memory) -> float:
    return (m.pre_load_gib * m.mem_fraction_static - m.weights_gib) * (1 << 30)


def _validate(capsys: pytest.CaptureFixture[str], flags: str, gpu: str = "H200") -> Any:
    run = run_cli(
        capsys, "validate", "--model", GPT_OSS, "--gpu", gpu, "--json",
        "--sglang", f"python -m sglang.launch_server {flags}",
    )  # fmt: skip
    return json.loads(run.out)


def test_the_swa_pool_is_sized_for_the_running_requests(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """H200 (chunk 8,192 by default), 8 requests: 257 · 8 + 2 · 8,192 + 1 = 18,441 SWA
    tokens, and the full pool 4,911,824 tokens, where the ratio gave 2,739,036 (and
    2,191,228 SWA tokens)."""
    ratio = _validate(capsys, "--max-running-requests 8")
    capped = _validate(capsys, "--max-running-requests 8 --disable-radix-cache")
    m, c = ratio["memory"], capped["memory"]
    assert (m["kv_tokens"], m["swa_tokens"]) == (2739036, 2191228)
    swa = _swa(8, 8192)
    assert swa == 18441 == c["swa_tokens"]
    rest = (c["pre_load_gib"] * c["mem_fraction_static"] - c["weights_gib"]) * (1 << 30)
    assert c["kv_tokens"] == int((rest - swa * CELL) // CELL) == 4911824
    assert (c["kv_bytes_per_token"], c["swa_window"], capped["valid"]) == (CELL, 0, True)


def test_only_0523_with_the_radix_cache_off() -> None:
    flags = {"max_running_requests": 8, "disable_radix_cache": True}
    assert swa_request_cap(flags, "0.5.23") == SwaRequestCap(8)
    assert swa_request_cap(flags, "0.5.19") is None
    assert swa_request_cap({**flags, "disable_radix_cache": False}, "0.5.23") is None
    assert swa_request_cap({"disable_radix_cache": True}, "0.5.23") is None
    spec = {**flags, "speculative_algorithm": "EAGLE"}  # not modelled: the ratio stays
    assert swa_request_cap(spec, "0.5.23") is None
    overlap_off = swa_request_cap({**flags, "disable_overlap_schedule": True}, "0.5.23")
    assert overlap_off == SwaRequestCap(8, overlap=False)


def test_one_chunk_without_overlap_and_pages_of_64_on_blackwell() -> None:
    """No overlap scheduler: one chunk in flight (257 · 8 + 8,192 + 1 = 10,249). B200
    (trtllm_mha, pages of 64; chunk 16,384): 383 · 8 + 2 · 16,384 + 64 = 35,896 -> 35,904."""
    p = Parallel(chunked_prefill_size=8192)
    one = MemoryModel(GPT_OSS, "H200", swa_cap=SwaRequestCap(8, overlap=False)).of(p)
    assert one.swa_tokens == _swa(8, 8192, chunks=1) == 10249
    paged = MemoryModel(GPT_OSS, "B200", swa_cap=SwaRequestCap(8)).of(Parallel())
    assert paged.page_size == 64
    assert paged.swa_tokens == _swa(8, 16384, 64) == 35904
    assert paged.kv_tokens == int((_rest(paged) - 35904 * CELL) // CELL) // 64 * 64


def test_a_decode_engine_reserves_its_transfer_slots() -> None:
    """A PD decode engine: no chunk, (window + page) · 2 · 8 extra slots for 8 requests."""
    m = MemoryModel(GPT_OSS, "H200", swa_cap=SwaRequestCap(8, decode=True)).of(Parallel())
    assert m.swa_tokens == 257 * 8 + (WINDOW + 1) * 16 == 4104


def test_the_token_cap_bounds_both_pools_and_too_many_requests_do_not_fit() -> None:
    """`--max-total-tokens 10000`: full 10,000 and SWA min(18,441, 10,000)
    (`calculate_pool_sizes_from_max_tokens`); a million requests leave no full pool."""
    p = Parallel(chunked_prefill_size=8192)
    capped = MemoryModel(GPT_OSS, "H200", max_total_tokens=10000, swa_cap=SwaRequestCap(8))
    assert (capped.of(p).kv_tokens, capped.of(p).swa_tokens, capped.of(p).fits) == (
        10000,
        10000,
        True,
    )
    huge = MemoryModel(GPT_OSS, "H200", swa_cap=SwaRequestCap(10**6)).of(p)
    assert (huge.kv_tokens, huge.fits) == (0, False)


def test_flag_options_carry_it() -> None:
    flags = {"max_running_requests": 8, "disable_radix_cache": True}
    assert flag_options(flags, "0.5.23")["swa_cap"] == SwaRequestCap(8)
    # A model without a hybrid SWA pool ignores it.
    assert MemoryModel("Qwen/Qwen3-8B", "H200", swa_cap=SwaRequestCap(8)).swa_cap is None


@pytest.mark.parametrize("decode", [False, True])
def test_enumerate_columns_agree_with_the_model(decode: bool) -> None:
    spec = ModelSpec.from_hf_config(catalogue_config(GPT_OSS))
    mm = MemoryModel(GPT_OSS, "H100", swa_cap=SwaRequestCap(8, decode=decode))
    rows = 0
    for (weights, tokens, _, fits), _, m in column_rows(mm, 4, spec):
        assert abs(tokens - m.kv_tokens) <= 1 and fits == m.fits
        assert abs(weights - m.weights_gib) < 1e-6
        rows += fits
    assert rows > 0
