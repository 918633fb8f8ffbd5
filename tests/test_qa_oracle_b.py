"""Disagreements the 900-command QA run found against SGLang 0.5.23's own resolution, each
as the release's source decides it (`arg_groups/kv_cache_hook.py`, `moe_hook.py`,
`mega_moe_hook.py`; 0.5.18 and 0.5.19 alike where they have the check)."""

from __future__ import annotations

from typing import Any

import pytest

from fidelity.compare import model
from meshsat.solver.validation.validate import validate

H100: dict[str, Any] = {"platform": "cuda", "gpu_sm": 90}
B200: dict[str, Any] = {"platform": "cuda", "gpu_sm": 100}


def _rules(version: str, name: str, **config: Any) -> list[str]:
    report = validate(config, model(name), explain=False, sglang_version=version)
    return [v.rule for v in report.violations]


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
def test_fp4_mx_kv_cache_needs_a_kv4_attention_backend(version: str) -> None:
    kv = {"tp_size": 8, "kv_cache_dtype": "fp4_mx_block16"}
    # Hopper's default back-end is FA3, which no KV4 list takes (handle_kv4_compatibility).
    assert _rules(version, "llama", **kv, **H100)[:1] == ["KV4-MHA-BACKEND"]
    assert _rules(version, "llama", **kv, **H100, attention_backend="fa3")[:1] == [
        "KV4-MHA-BACKEND"
    ]
    assert _rules(version, "deepseek_v3", **kv, **H100)[:1] == ["KV4-MLA-BACKEND"]
    assert "KV4-MHA-BACKEND" not in _rules(
        version, "llama", **kv, **H100, attention_backend="triton"
    )
    assert "KV4-MLA-BACKEND" not in _rules(
        version, "deepseek_v3", **kv, **H100, attention_backend="flashinfer"
    )
    # SM100's defaults (trtllm_mha, FlashInfer MLA) are listed; an unknown GPU is assumed so.
    assert not {"KV4-MHA-BACKEND", "KV4-MLA-BACKEND"} & {
        *_rules(version, "llama", **kv, **B200),
        *_rules(version, "llama", **kv),
        *_rules(version, "deepseek_v3", **kv, **B200),
    }
    assert _rules(version, "llama", **kv, platform="cpu")[:1] == ["KV4-CUDA"]


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
def test_nvfp4_kv_cache_needs_blackwell(version: str) -> None:
    kv = {"tp_size": 8, "kv_cache_dtype": "nvfp4"}
    assert "KV4-NVFP4-BLACKWELL" in _rules(version, "llama", **kv, **H100)
    assert "KV4-NVFP4-BLACKWELL" not in _rules(version, "llama", **kv, **B200)
    assert "KV4-NVFP4-BLACKWELL" not in _rules(version, "llama", **kv)  # GPU unknown


def test_nvfp4_prefill_backend_0_5_23() -> None:
    kv = {"tp_size": 8, "kv_cache_dtype": "nvfp4", "attention_backend": "triton"}
    assert _rules("0.5.23", "llama", **kv, **H100)[:1] == ["KV4-NVFP4-PREFILL-BACKEND"]


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
def test_mori_dispatch_budget(version: str) -> None:
    moe = {"tp_size": 8, "ep_size": 8, "moe_a2a_backend": "mori"}
    assert "A2A-MORI-DISPATCH" in _rules(version, "qwen3_moe", **moe, chunked_prefill_size=8192)
    assert "A2A-MORI-DISPATCH" not in _rules(version, "qwen3_moe", **moe, chunked_prefill_size=4096)
    assert "A2A-MORI-DISPATCH" not in _rules(version, "qwen3_moe", **moe)  # the device's
    # 65,536 over 8 attention-DP groups is 8,192 per rank; the variable raises the budget.
    dp = {**moe, "enable_dp_attention": True, "dp_size": 8, "chunked_prefill_size": 65536}
    assert "A2A-MORI-DISPATCH" in _rules(version, "qwen3_moe", **dp)
    assert "A2A-MORI-DISPATCH" not in _rules(
        version, "qwen3_moe", **dp, env_mori_max_dispatch_tokens_per_rank=8192
    )
    assert "A2A-MORI-DISPATCH" not in _rules(
        version, "qwen3_moe", **moe, chunked_prefill_size=8192, disaggregation_mode="decode"
    )


@pytest.mark.parametrize(
    "spelling", [{"moe_a2a_backend": "megamoe"}, {"moe_runner_backend": "megamoe"}]
)
def test_megamoe_refuses_single_batch_overlap(spelling: dict[str, str]) -> None:
    rules = _rules("0.5.23", "qwen3_moe", tp_size=8, enable_single_batch_overlap=True, **spelling)
    assert rules[:1] == ["MEGAMOE-OVERLAP"]


def test_deepep_v2_refuses_single_batch_overlap() -> None:
    rules = _rules(
        "0.5.23",
        "qwen3_moe",
        tp_size=4,
        moe_a2a_backend="deepep_v2",
        enable_single_batch_overlap=True,
    )
    assert "A2A-DEEPEP-V2-OVERLAP" in rules


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
def test_dispatch_mode_resolutions(version: str) -> None:
    def resolved(**config: Any) -> Any:
        return validate(config, model("qwen3_moe"), explain=False, sglang_version=version).resolved

    assert resolved(tp_size=1, moe_a2a_backend="mori")["deepep_mode"] == "normal"
    pplx = resolved(
        tp_size=8,
        ep_size=8,
        enable_dp_attention=True,
        dp_size=8,
        moe_a2a_backend="pplx",
        chunked_prefill_size=1024,
    )
    assert (pplx["deepep_mode"], pplx["moe_runner_backend"]) == ("low_latency", "deep_gemm")
    cutedsl = resolved(
        tp_size=8,
        ep_size=8,
        moe_a2a_backend="deepep",
        moe_runner_backend="flashinfer_cutedsl",
        quantization="modelopt_fp4",
    )
    assert cutedsl["deepep_mode"] == "low_latency"
    normal = resolved(tp_size=8, ep_size=8, moe_a2a_backend="deepep", deepep_mode="normal")
    assert normal["disable_decode_cuda_graph"] and normal["disable_prefill_cuda_graph"]
    auto = resolved(tp_size=8, ep_size=8, moe_a2a_backend="deepep")
    assert auto["deepep_mode"] == "auto" and not auto["disable_decode_cuda_graph"]
