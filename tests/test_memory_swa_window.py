"""A hybrid SWA pool too small for one request's window does not fit.

0.5.18 to 0.5.23 size the hybrid pool's sliding-window part as
`int(full_tokens * swa_full_tokens_ratio)` in whole pages and refuse to start when it is
at most `sliding_window_size + page_size` (`HybridSWAPoolConfigurator._solve_pool_sizes`,
`validate_swa_pool_size` in 0.5.23): prefill admits a request only with that much SWA
room, so a smaller pool would hang at warm-up. The window is the class's
`get_attention_sliding_window_size` (gpt-oss, Gemma 4: `sliding_window - 1`), else
`ModelConfig.sliding_window_size`, else the `attention_chunk_size` (Llama 4:
`resolve_sliding_window_size`).
"""

from __future__ import annotations

from typing import Any

import pytest

from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import MemoryModel, Parallel, fit_violation, load_facts
from meshsat.solver.memory.kv import hybrid_swa_ratio, swa_window
from meshsat.solver.memory.models import catalogue_config
from tests.cli_helpers import run_cli
from tests.memory_rows import column_rows

GPT_OSS = "openai/gpt-oss-20b"
SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
#: 0.5.23's own refusal for a 128-token SWA pool, window 127, page 1
#: (`MemoryPoolConfigurator.validate_swa_pool_size(128, 127, 1)` run in the release).
SGLANG_SAYS = (
    "SWA pool (128 tokens) cannot hold even one request: the prefill admission floor is "
    "sliding_window_size (127) + page_size (1). Increase --swa-full-tokens-ratio or the "
    "total KV budget."
)


@pytest.mark.parametrize(
    ("config", "window"),
    [
        # gpt-oss: `get_attention_sliding_window_size` is `sliding_window - 1`
        (GPT_OSS, 127),
        # Llama 4 has no sliding window key: its attention_chunk_size
        (SCOUT, 8192),
        # MiMo-V2: `ModelConfig.sliding_window_size`, the first key present
        (
            {
                "architectures": ["MiMoV2FlashForCausalLM"],
                "hidden_size": 1024,
                "num_hidden_layers": 4,
                "num_attention_heads": 8,
                "num_key_value_heads": 4,
                "head_dim": 128,
                "intermediate_size": 4096,
                "vocab_size": 1000,
                "hybrid_layer_pattern": [0, 1, 1, 1],
                "sliding_window_size": 96,
                "sliding_window": 128,
            },
            96,
        ),
        # Gemma 4's multimodal class: its text config's `sliding_window - 1`
        (
            {
                "architectures": ["Gemma4ForConditionalGeneration"],
                "text_config": {
                    "hidden_size": 1024,
                    "num_hidden_layers": 4,
                    "num_attention_heads": 8,
                    "num_key_value_heads": 4,
                    "head_dim": 128,
                    "intermediate_size": 4096,
                    "vocab_size": 1000,
                    "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
                    "sliding_window": 1024,
                },
            },
            1023,
        ),
    ],
)
def test_the_window_sglang_checks(config: str | dict[str, Any], window: int) -> None:
    f = load_facts(config)
    assert swa_window(f, hybrid_swa_ratio(f, "0.5.23")) == window
    # 0.4.6.post5 builds no hybrid pool: nothing to check.
    assert swa_window(f, hybrid_swa_ratio(f, "0.4.6.post5")) == 0


def test_gpt_oss_boundary_as_sglang_refuses_it() -> None:
    """gpt-oss-20b capped at 160 full tokens: its SWA pool is int(160 · 0.8) = 128 tokens,
    not more than 127 + 1, so SGLang refuses; at 162 it is 129 and starts."""
    m = MemoryModel(GPT_OSS, "H200", max_total_tokens=160).of(Parallel())
    assert (m.kv_tokens, m.swa_tokens, m.swa_window, m.page_size) == (160, 128, 127, 1)
    assert not m.fits
    said = fit_violation(m)
    assert said is not None and said.startswith("does not fit: " + SGLANG_SAYS)
    assert MemoryModel(GPT_OSS, "H200", max_total_tokens=161).of(Parallel()).swa_tokens == 128
    ok = MemoryModel(GPT_OSS, "H200", max_total_tokens=162).of(Parallel())
    assert (ok.swa_tokens, ok.fits, fit_violation(ok)) == (129, True, None)


def test_the_ratio_and_the_page_size_move_the_floor() -> None:
    """The same check over `--swa-full-tokens-ratio` and `--page-size`: 1,000 full tokens
    at ratio 0.128 leave 128 SWA tokens (refused), at 0.13 130 (starts); with pages of 16,
    1,008 full tokens at 0.15 leave int(151.2) = 151 -> 144 tokens, at most 127 + 16
    (refused) only when it is 143 or fewer: it starts."""

    def mem(ratio: float, cap: int, page: int = 1) -> Any:
        mm = MemoryModel(
            GPT_OSS, "H200", max_total_tokens=cap, swa_full_tokens_ratio=ratio, page_size=page
        )
        return mm.of(Parallel())

    assert not mem(0.128, 1000).fits
    assert mem(0.13, 1000).fits
    paged = mem(0.15, 1008, 16)
    assert (paged.kv_tokens, paged.swa_tokens, paged.fits) == (1008, 144, True)
    tight = mem(0.14, 1008, 16)  # int(141.12) = 141 -> 128 <= 143
    assert (tight.swa_tokens, tight.fits) == (128, False)


def test_llama4_window_is_its_attention_chunk() -> None:
    """Llama 4 Scout's chunked layers: window 8192, so a pool capped at 10,242 full tokens
    (int(8193.6) = 8193 SWA tokens) is refused and one of 10,243 (8194) starts."""
    assert (
        not MemoryModel(SCOUT, "H200", max_total_tokens=10242)
        .of(Parallel(tp=8, attn_tp=8, moe_tp=8))
        .fits
    )
    assert (
        MemoryModel(SCOUT, "H200", max_total_tokens=10243)
        .of(Parallel(tp=8, attn_tp=8, moe_tp=8))
        .fits
    )


def test_validate_reports_it_as_mem_fit(capsys: pytest.CaptureFixture[str]) -> None:
    """The pasted launch's `--max-total-tokens 160` sizes the pool: MEM-FIT with SGLang's
    wording and a hint at the ratio; 162 passes."""
    run = run_cli(
        capsys, "validate", "--model", GPT_OSS, "--gpu", "H200", "--json",
        "--sglang", "python -m sglang.launch_server --max-total-tokens 160",
    )  # fmt: skip
    assert run.code == 1, run.err
    assert "MEM-FIT" in run.out and "cannot hold even one request" in run.out
    assert "--swa-full-tokens-ratio" in run.out
    run = run_cli(
        capsys, "validate", "--model", GPT_OSS, "--gpu", "H200", "--json",
        "--sglang", "python -m sglang.launch_server --max-total-tokens 162",
    )  # fmt: skip
    assert "MEM-FIT" not in run.out


def test_enumerate_columns_agree_on_the_swa_check() -> None:
    """The streamed `fits` column applies the same check as `MemoryModel.of`: gpt-oss-20b
    on 4 GPUs capped at 160 full tokens fits nowhere (SWA 128), at 162 everywhere its
    weights load."""
    spec = ModelSpec.from_hf_config(catalogue_config(GPT_OSS))
    for cap, expect in ((160, False), (162, True)):
        mm = MemoryModel(GPT_OSS, "H100", max_total_tokens=cap)
        rows = 0
        for (_, tokens, _, fits), _, m in column_rows(mm, 4, spec):
            assert (tokens, fits) == (m.kv_tokens, m.fits)
            assert fits == (expect and m.kv_tokens > 0)
            rows += 1
        assert rows > 5
