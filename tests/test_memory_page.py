"""The KV pool is rounded to the page the server runs (R-PAGE-SIZE), not the typed one.

SGLang 0.5.23 (`DefaultPoolConfigurator.calculate_pool_sizes`, pool_configurator.py):
`max_total_num_tokens = available_bytes // cell_size`, then `// page_size * page_size`
with `get_schedule().page_size`, the page after `_mla_backend_page_constraints` and the
model overrides rewrote `--page-size` (flashmla 64, cutlass_mla 128 in 0.5.19, trtllm_mha
on SM100 64, ...). The expected figures below are that formula on the memory model's own
bytes (`rows`), the page from SGLang's rule as solver/catalogue/page_size.py cites it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import Memory, MemoryModel, Parallel, fit_violation
from meshsat.solver.memory.models import catalogue_config
from meshsat.solver.validation.validate import validate
from tests.cli_helpers import run_cli
from tests.memory_rows import column_rows

V3 = "deepseek-ai/DeepSeek-V3"
GPT_OSS = "openai/gpt-oss-20b"


def _memory(
    model: str, gpu: str, args: dict[str, Any], pack: str = "0.5.23", **options: Any
) -> Memory:
    report = validate(args, catalogue_config(model), sglang_version=pack, explain=False)
    mm = MemoryModel(model, gpu, pack=pack, **options)
    return mm.of(Parallel.from_resolved(report.resolved, report.derived))


def _rows(m: Memory) -> int:
    """SGLang's `available_bytes // cell_size` before any page rounding."""
    rest = (m.pre_load_gib * m.mem_fraction_static - m.weights_gib) * (1 << 30)
    return int(rest // m.kv_bytes_per_token)


def test_flashmla_rounds_deepseek_v3_to_pages_of_64() -> None:
    """DeepSeek-V3 at tp 8 on an H200: 668,881 rows; with `--attention-backend flashmla`
    and `--page-size 1` typed SGLang runs pages of 64 and keeps 668,864 (10,451 pages),
    the pool the typed page gave before."""
    free = _memory(V3, "H200", {"tp_size": 8}, page_size=1)
    assert (free.page_size, free.kv_tokens) == (1, _rows(free)) == (1, 668881)
    flashmla = {"tp_size": 8, "attention_backend": "flashmla", "page_size": 1}
    m = _memory(V3, "H200", flashmla, page_size=1)
    assert _rows(m) == 668881
    assert (m.page_size, m.kv_tokens) == (64, 668881 // 64 * 64) == (64, 668864)
    assert m.max_total_num_tokens == 668864


def test_cutlass_mla_pages_of_128_in_0519() -> None:
    """0.5.19 forces 128 for cutlass_mla (0.5.23 has no such choice)."""
    m = _memory(V3, "B200", {"tp_size": 8, "attention_backend": "cutlass_mla"}, "0.5.19")
    assert m.page_size == 128
    assert m.kv_tokens == _rows(m) // 128 * 128 != _rows(m)


def test_the_cap_is_rounded_to_the_resolved_page() -> None:
    """`--max-total-tokens 100001` with flashmla: min(profiled, 100,001) // 64 · 64."""
    flashmla = {"tp_size": 8, "attention_backend": "flashmla"}
    m = _memory(V3, "H200", flashmla, max_total_tokens=100001)
    assert m.kv_tokens == 100001 // 64 * 64 == 99968


def test_a_hand_built_layout_takes_the_release_page_for_the_model_and_gpu() -> None:
    """`Parallel()` carries no page: the model's own is resolved (gpt-oss on a B200 runs
    trtllm_mha, pages of 64; on an H200 fa3, any page), a page on the layout wins."""
    assert MemoryModel(GPT_OSS, "B200").page_size == 64
    assert MemoryModel(GPT_OSS, "B200", page_size=16).page_size == 16  # trtllm_mha keeps 16
    assert MemoryModel(GPT_OSS, "B200", page_size=8).page_size == 64  # ... not 8
    assert MemoryModel(GPT_OSS, "H200").page_size == 1
    capped = MemoryModel(GPT_OSS, "H200", max_total_tokens=1000)
    assert capped.of(Parallel(page_size=64)).kv_tokens == 960


def test_gpt_oss_swa_floor_on_blackwell_pages() -> None:
    """gpt-oss-20b on a B200 (page 64, window 127): a cap of 255 keeps 192 full tokens and
    int(192 · 0.8) = 153 -> 128 SWA tokens, at most 127 + 64: SGLang refuses it; 256 keeps
    256 and int(204.8) -> 192 SWA tokens, more than 191: it starts."""
    low = MemoryModel(GPT_OSS, "B200", max_total_tokens=255).of(Parallel())
    assert (low.kv_tokens, low.swa_tokens, low.page_size, low.fits) == (192, 128, 64, False)
    said = fit_violation(low)
    assert said is not None and "sliding_window_size (127) + page_size (64)" in said
    ok = MemoryModel(GPT_OSS, "B200", max_total_tokens=256).of(Parallel())
    assert (ok.kv_tokens, ok.swa_tokens, ok.fits) == (256, 192, True)


def test_validate_sizes_the_pasted_command_at_its_resolved_page(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--attention-backend flashmla --page-size 1` pasted: the memory is the resolved
    page's (64), the same figures as a layout that types no page."""
    base = "python -m sglang.launch_server --tp 8 --attention-backend flashmla"
    args = ("validate", "--model", V3, "--gpu", "H200", "--json", "--sglang")
    typed = run_cli(capsys, *args, base + " --page-size 1")
    plain = run_cli(capsys, *args, base)
    mem = json.loads(typed.out)["memory"]
    assert (mem["page_size"], mem["kv_tokens"]) == (64, 668864)
    assert json.loads(plain.out)["memory"] == mem


def test_enumerate_columns_round_to_the_resolved_page() -> None:
    """The streamed columns read the layout's resolved page as `MemoryModel.of` does."""
    spec = ModelSpec.from_hf_config(catalogue_config(V3))
    mm = MemoryModel(V3, "H200")
    rows = 0
    for (_, tokens, _, fits), p, m in column_rows(mm, 8, spec, {"attention_backend": "flashmla"}):
        assert p.page_size == m.page_size == 64
        assert tokens % 64 == 0 and abs(tokens - m.kv_tokens) <= 64
        assert fits == m.fits
        rows += tokens > 0
    assert rows > 0
