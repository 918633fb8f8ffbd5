"""GPU-class defaults the s3 QA sweep found meshsat missing, each against SGLang 0.5.23's own
answer (the shared CPU oracle with H100 / B200 platform facts, /tmp/qa-s3 and orc2.py;
recorded in the comments): the SM100 MoE runner and DCP backend the model overrides pick,
and the DeepEP v2 decode CUDA-graph budget the GPU's memory decides."""

from __future__ import annotations

from typing import Any

import pytest

from meshsat.solver.validation.validate import validate

DSV3 = {"architecture": "DeepseekV3ForCausalLM"}
QWEN3 = {"architecture": "Qwen3MoeForCausalLM"}
_MODEL_KEYS = ("architecture",)


def _validate(config: dict[str, Any]) -> Any:
    """validate() with the model's facts (the architecture) apart from the layout's."""
    model = {k: v for k, v in config.items() if k in _MODEL_KEYS} or None
    layout = {k: v for k, v in config.items() if k not in _MODEL_KEYS}
    return validate(layout, model, explain=False, sglang_version="0.5.23")


def _resolved(config: dict[str, Any], field: str) -> Any:
    report = _validate(config)
    assert report.valid, report.violations
    return report.resolved_env[field]


@pytest.mark.parametrize(
    ("config", "runner"),
    [
        # Oracle 0.5.23: flashinfer_trtllm on SM100 and SM103 for both families.
        ({**DSV3, "gpu_sm": 100}, "flashinfer_trtllm"),
        ({**QWEN3, "gpu_sm": 100}, "flashinfer_trtllm"),
        ({**QWEN3, "gpu_sm": 103}, "flashinfer_trtllm"),
        ({**QWEN3, "gpu_sm": 100, "quantization": "fp8"}, "flashinfer_trtllm"),
        ({**DSV3, "gpu_sm": 100, "quantization": "modelopt_fp8"}, "flashinfer_trtllm"),
        # Qwen3's list has no modelopt_fp8; Hopper keeps auto; so does an all-to-all backend.
        ({**QWEN3, "gpu_sm": 100, "quantization": "modelopt_fp8"}, "auto"),
        ({**DSV3, "gpu_sm": 90}, "auto"),
        ({**DSV3, "gpu_sm": 100, "quantization": "mxfp4"}, "auto"),
        ({**DSV3, "gpu_sm": 100, "moe_a2a_backend": "deepep"}, "auto"),
    ],
)
def test_sm100_model_overrides_pick_the_trtllm_moe_runner(
    config: dict[str, Any], runner: str
) -> None:
    assert _resolved({"tp_size": 8, "platform": "cuda", **config}, "moe_runner_backend") == runner


@pytest.mark.parametrize(
    ("config", "backend"),
    [
        # Oracle 0.5.23 (B200 facts): tp per node 8 or 16 // 2 = 8, a multiple of dcp: fi_a2a.
        ({"tp_size": 8, "dcp_size": 2, "gpu_sm": 100}, "fi_a2a"),
        ({"tp_size": 8, "dcp_size": 4, "gpu_sm": 103}, "fi_a2a"),
        ({"tp_size": 16, "nnodes": 2, "dcp_size": 8, "gpu_sm": 100}, "fi_a2a"),
        # 8 TP ranks a node, dcp 16: a2a; Hopper: a2a.
        ({"tp_size": 16, "nnodes": 2, "dcp_size": 16, "gpu_sm": 100}, "a2a"),
        ({"tp_size": 8, "dcp_size": 2, "gpu_sm": 90}, "a2a"),
    ],
)
def test_sm100_dcp_backend_is_fi_a2a_where_a_node_holds_whole_dcp_groups(
    config: dict[str, Any], backend: str
) -> None:
    assert _resolved({"platform": "cuda", **config}, "dcp_comm_backend") == backend


_V2_DECODE = {
    **QWEN3,
    "tp_size": 4,
    "dp_size": 4,
    "enable_dp_attention": True,
    "moe_a2a_backend": "deepep_v2",
    "disaggregation_mode": "decode",
    "platform": "cuda",
}


@pytest.mark.parametrize(
    ("extra", "refused"),
    [
        # An H100's and a B200's default graph (512 at tp 4); no GPU class: not known.
        ({"gpu_sm": 90}, True),
        ({"gpu_sm": 100}, True),
        ({}, False),
        # Oracle 0.5.23: 128 and 129 typed; 515 // 4 = 128 and 516 // 4 = 129 requests a
        # DP rank; no CUDA graphs.
        ({"gpu_sm": 90, "cuda_graph_max_bs_decode": 128}, False),
        ({"cuda_graph_max_bs_decode": 129}, True),
        ({"gpu_sm": 90, "max_running_requests": 515}, False),
        ({"gpu_sm": 90, "max_running_requests": 516}, True),
        ({"gpu_sm": 90, "disable_cuda_graph": True}, False),
    ],
)
def test_deepep_v2_decode_graph_budget(extra: dict[str, Any], refused: bool) -> None:
    report = _validate({**_V2_DECODE, **extra})
    rules = [v.rule for v in report.violations]
    assert rules == (["A2A-DEEPEP-V2-DECODE-BUDGET"] if refused else []), rules


@pytest.mark.parametrize(
    ("gpu", "refused"),
    [
        # dp 4, pages of 4096: an H100's 8192 // 4 = 2048 fails; a B200's 16384 // 4 passes.
        ({"platform": "cuda", "gpu_sm": 90}, True),
        ({"platform": "cuda", "gpu_sm": 100}, False),
    ],
)
def test_the_gpus_own_default_chunk_decides_the_page_check(
    gpu: dict[str, Any], refused: bool
) -> None:
    config = {"tp_size": 4, "dp_size": 4, "enable_dp_attention": True, "page_size": 4096}
    report = _validate({**config, **gpu})
    assert [v.rule for v in report.violations] == (
        ["KV-CHUNK-DEFAULT-PAGE-CERTAIN"] if refused else []
    )
    assert not report.warnings
