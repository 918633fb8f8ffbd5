"""The default `mem_fraction_static` of launches whose flags move SGLang's reserves.

`tests/fixtures/memory_reserves/launch-fractions-0.5.23.json` is 0.5.23's own argument
resolution (`fidelity/memory_launch_fractions.py`, its SM90 CUDA platform, the GPU's memory
given, prefill graphs on as `default_prefill_backend` answers on a CUDA machine): DeepEP's
all-to-all reserves, PD prefill and decode engines, chunked prefill off and the CUDA-graph
off switches and `--max-prefill-tokens` (read only with chunked prefill off), for
DeepSeek-V3 (MLA), Qwen3-30B-A3B (MoE) and Qwen3-8B at tp 8 on H200, H100 and B200.
meshsat reads each launch through `validate` and `flag_options` and must reach the same
fraction. `launch-fractions-sm100-0.5.23.json` is the same resolution on an SM100 platform
(B200, GB200), where the release picks `trtllm_mla` for DeepSeek-V3 and turns its default
prefill CUDA graph off only after `handle_gpu_memory_settings` sized the fraction. 0.5.18
and 0.5.19 run the same arithmetic (`ServerArgs._handle_gpu_memory_settings`,
`reserve_for_graph_mb`, `reserve_for_deepep_a2a_mb`; `arg_groups/memory_hook.py` in
0.5.19) and are checked against it by hand below.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver.memory import MemoryModel, Parallel, flag_options
from meshsat.solver.memory.models import model_config
from meshsat.solver.validation.validate import validate
from tests.memory_rows import column_rows

FIXTURES = Path(__file__).parent / "fixtures" / "memory_reserves"
H200_MIB = 143771


def _meshsat_config(args: dict[str, Any]) -> dict[str, Any]:
    """The launch as meshsat's config fields (attention DP as the deprecated pair)."""
    config = dict(args)
    dpa = config.pop("attn_dp_size", None)
    if dpa:
        config.update(enable_dp_attention=True, dp_size=dpa)
    return config


def _memory(model: str, gpu: str, args: dict[str, Any], pack: str = "0.5.23") -> Any:
    report = validate(
        _meshsat_config(args), model_config(model), sglang_version=pack, explain=False
    )
    assert report.valid, report.violations
    mm = MemoryModel(model, gpu, pack=pack, **flag_options(report.resolved, pack))
    return mm.of(Parallel.from_resolved(report.resolved, report.derived))


def test_the_releases_default_for_launch_flags() -> None:
    data = json.loads((FIXTURES / "launch-fractions-0.5.23.json").read_text())
    assert data["version"] == "0.5.23"
    checked = 0
    for rec in data["records"]:
        assert "error" not in rec, rec
        m = _memory(rec["model"], rec["gpu"], rec["args"])
        assert m.mem_fraction_static == rec["mem_fraction_static"], rec
        checked += 1
    assert checked == 168


def test_max_prefill_tokens_moves_the_default_only_with_chunked_prefill_off() -> None:
    """`--max-prefill-tokens 32768` as 0.5.23 resolved it: the activations of an unchunked
    prefill (DeepSeek-V3 at tp 8 on H200 0.801 -> 0.630), nothing with chunked prefill on
    (0.886). meshsat had sized every launch at SGLang's default 16,384."""
    data = json.loads((FIXTURES / "launch-fractions-0.5.23.json").read_text())
    recorded = {
        (rec["model"], rec["gpu"], json.dumps(rec["args"], sort_keys=True)): rec
        for rec in data["records"]
    }
    model = "deepseek-ai/DeepSeek-V3"
    for args, fraction in (
        ({"tp_size": 8, "chunked_prefill_size": -1}, 0.801),
        ({"tp_size": 8, "chunked_prefill_size": -1, "max_prefill_tokens": 32768}, 0.63),
        ({"tp_size": 8, "max_prefill_tokens": 32768}, 0.886),
    ):
        rec = recorded[(model, "H200", json.dumps(args, sort_keys=True))]
        assert rec["mem_fraction_static"] == fraction
        assert _memory(model, "H200", args).mem_fraction_static == fraction


def test_sm100_defaults_keep_the_prefill_graph_reserve() -> None:
    """0.5.23 on SM100 (`fidelity/memory_launch_fractions.py`'s SM100 platform): DeepSeek-V3
    gets `trtllm_mla` and `disable_prefill_cuda_graph_for_deepseek_trtllm_mla` turns its
    breakable prefill graph off, but after `handle_gpu_memory_settings` sized the default
    with the graph's 1.5 GiB MLA reserve: the default is the fraction of an explicit
    breakable prefill graph (B200: 0.844), not of one turned off (0.852). meshsat's default
    (prefill graph reserved) reaches every recorded fraction."""
    data = json.loads((FIXTURES / "launch-fractions-sm100-0.5.23.json").read_text())
    assert data["version"] == "0.5.23"
    by_args: dict[tuple[str, str, str], float] = {}
    for rec in data["records"]:
        assert "error" not in rec, rec
        m = _memory(rec["model"], rec["gpu"], rec["args"])
        assert m.mem_fraction_static == rec["mem_fraction_static"], rec
        by_args[(rec["model"], rec["gpu"], json.dumps(rec["args"], sort_keys=True))] = rec[
            "mem_fraction_static"
        ]
        if rec["model"] == "deepseek-ai/DeepSeek-V3":
            assert rec["attention_backend"] == "trtllm_mla"
    assert len(by_args) == 34

    def recorded(args: dict[str, Any]) -> float:
        key = json.dumps({"tp_size": 8, **args}, sort_keys=True)
        return by_args[("deepseek-ai/DeepSeek-V3", "B200", key)]

    assert recorded({}) == recorded({"cuda_graph_backend_prefill": "breakable"}) == 0.844
    assert recorded({"disable_prefill_cuda_graph": True}) == 0.852


@pytest.mark.parametrize("pack", ["0.5.18", "0.5.19", "0.5.23"])
@pytest.mark.parametrize(
    ("flags", "reserved"),
    [
        # 512 + 1.5·8192 + 1024 + 2·512 (decode graphs) + 1536 (MLA prefill graphs)
        ({}, 512 + 12288 + 1024 + 1024 + 1536),
        # + 1 GiB DeepEP on breakable prefill graphs, then + 2 GiB above the floor
        (
            {"ep_size": 8, "moe_a2a_backend": "deepep"},
            512 + 12288 + 1024 + 1024 + 1536 + 1024 + 2048,
        ),
        # decode: activations max(512 running · 1, 2048), no prefill graphs, 10 GiB floor
        ({"disaggregation_mode": "decode"}, 10240),
        # prefill: no decode graphs
        ({"disaggregation_mode": "prefill"}, 512 + 12288 + 1024 + 1536),
        # chunked prefill off: activations max(max_prefill_tokens 16384, 2048)
        ({"chunked_prefill_size": -1}, 512 + 24576 + 1024 + 1024 + 1536),
        # ... and the launch's own --max-prefill-tokens: 1.5 · 32768
        (
            {"chunked_prefill_size": -1, "max_prefill_tokens": 32768},
            512 + 49152 + 1024 + 1024 + 1536,
        ),
        # chunked prefill on: --max-prefill-tokens sizes nothing
        ({"max_prefill_tokens": 32768}, 512 + 12288 + 1024 + 1024 + 1536),
        # no graphs at all
        ({"disable_cuda_graph": True}, 512 + 12288 + 1024),
    ],
)
def test_each_release_reserves_as_its_source(
    pack: str, flags: dict[str, Any], reserved: float
) -> None:
    """DeepSeek-V3 at tp 8 on H200 (143,771 MiB): the releases' own arithmetic by hand."""
    m = _memory("deepseek-ai/DeepSeek-V3", "H200", {"tp_size": 8, **flags}, pack)
    assert m.mem_fraction_static == round((H200_MIB - reserved) / H200_MIB, 3)


def test_deepep_kv_tokens() -> None:
    """The QA figures: DeepEP at tp 8 ep 8 pools 592,399 tokens (0.865), with DP
    attention 137,186 (0.736)."""
    m = _memory(
        "deepseek-ai/DeepSeek-V3", "H200", {"tp_size": 8, "ep_size": 8, "moe_a2a_backend": "deepep"}
    )
    assert (m.mem_fraction_static, m.kv_tokens) == (0.865, 592399)
    args = {"tp_size": 8, "ep_size": 8, "moe_a2a_backend": "deepep", "attn_dp_size": 8}
    m = _memory("deepseek-ai/DeepSeek-V3", "H200", args)
    assert (m.mem_fraction_static, m.kv_tokens) == (0.736, 137186)


def test_streaming_columns_carry_deepeps_reserve() -> None:
    """Enumerate's columns key the default fraction by the all-to-all backend too: its
    DeepEP layouts pool what `MemoryModel.of` does, fewer tokens than the same widths
    without DeepEP."""
    from meshsat.solver.lang.model_spec import ModelSpec
    from meshsat.solver.memory.models import catalogue_config

    model = "deepseek-ai/DeepSeek-V3"
    mm = MemoryModel(model, "H200", context_length=8192)
    spec = ModelSpec.from_hf_config(catalogue_config(model))
    deepep = 0
    for (_, tokens, _, _), p, m in column_rows(mm, 16, spec):
        assert abs(tokens - m.kv_tokens) <= 1
        if p.moe_a2a_backend == "deepep":
            deepep += 1
            plain = MemoryModel(model, "H200", context_length=8192).default_fraction(
                p.tp, p.pp, p.dp_attention, p.attn_dp, p.chunked_prefill_size, p.dcp, p.attn_cp
            )
            assert m.mem_fraction_static < plain
    assert deepep > 10
