"""pplx's dispatch budget, a typed --enable-multi-layer-eagle, and the SM100 MoE-runner
override in 0.5.18/0.5.19, each against SGLang's own answer: 0.5.23's CPU oracle
(`oracle.py --launch` with H100 platform facts) where it runs, the release's source where it
does not (recorded in the comments)."""

from __future__ import annotations

from typing import Any

import pytest

from meshsat.solver.validation.report import Report
from meshsat.solver.validation.validate import validate

DSV3 = {"architecture": "DeepseekV3ForCausalLM"}
_MODEL_KEYS = ("architecture",)


def _report(config: dict[str, Any], version: str) -> Report:
    """`config`'s model facts and layout, split apart, validated on `version`."""
    model = {k: v for k, v in config.items() if k in _MODEL_KEYS} or None
    layout = {k: v for k, v in config.items() if k not in _MODEL_KEYS}
    return validate(layout, model, explain=False, sglang_version=version)


def _errors(config: dict[str, Any], version: str = "0.5.23") -> list[str]:
    return [v.rule for v in _report(config, version).violations]


_PPLX = {
    **DSV3,
    "platform": "cuda",
    "gpu_sm": 90,
    "tp_size": 8,
    "dp_size": 8,
    "enable_dp_attention": True,
    "ep_size": 8,
    "moe_a2a_backend": "pplx",
    "chunked_prefill_size": 64,
}


@pytest.mark.parametrize(
    ("extra", "refused"),
    [
        # Oracle 0.5.23 (H100 facts): required_pplx_dispatch_tokens_per_rank is
        # max(chunk, --cuda-graph-max-bs-decode as typed); the GPU's default graph (256/512
        # on an H100) is not read, nor --max-running-requests, nor whether graphs are off.
        ({}, False),
        ({"cuda_graph_max_bs_decode": 128}, False),
        ({"cuda_graph_max_bs_decode": 256}, True),
        ({"cuda_graph_max_bs_decode": 256, "max_running_requests": 8}, True),
        ({"cuda_graph_max_bs_decode": 256, "disable_cuda_graph": True}, True),
        # Skipped on a decode server and with chunked prefill off.
        ({"cuda_graph_max_bs_decode": 256, "disaggregation_mode": "decode"}, False),
        ({"cuda_graph_max_bs_decode": 256, "chunked_prefill_size": -1}, False),
    ],
)
def test_pplx_dispatch_budget_reads_the_typed_decode_graph_batch(
    extra: dict[str, Any], refused: bool
) -> None:
    rules = _errors({**_PPLX, **extra})
    assert rules == (["A2A-PPLX-DISPATCH"] if refused else []), rules


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
def test_pplx_dispatch_budget_reads_the_typed_batch_in_earlier_releases(version: str) -> None:
    """0.5.18's `_required_pplx_dispatch_tokens_per_rank` and 0.5.19's function take the
    same max (source read)."""
    cfg = {**_PPLX, "cuda_graph_max_bs_decode": 256}
    assert "A2A-PPLX-DISPATCH" in _errors(cfg, version)
    assert "A2A-PPLX-DISPATCH" not in _errors({**cfg, "cuda_graph_max_bs_decode": 128}, version)


_PP_PREFILL = {
    **DSV3,
    "platform": "cuda",
    "gpu_sm": 90,
    "tp_size": 4,
    "pp_size": 2,
    "disaggregation_mode": "prefill",
}


@pytest.mark.parametrize(
    ("extra", "refused"),
    [
        # Oracle 0.5.23 --launch on DeepSeek V3 (no model override turns multi-layer on):
        # check_pipeline_parallel_compat refuses EAGLE (NEXTN becomes it) once the flag is
        # typed, on a PD prefill server or not; EAGLE alone and the flag alone are taken.
        ({"speculative_algorithm": "EAGLE"}, False),
        ({"speculative_algorithm": "EAGLE", "enable_multi_layer_eagle": True}, True),
        ({"speculative_algorithm": "NEXTN", "enable_multi_layer_eagle": True}, True),
        ({"speculative_algorithm": "EAGLE3", "enable_multi_layer_eagle": True}, True),
        (
            {
                "speculative_algorithm": "EAGLE",
                "enable_multi_layer_eagle": True,
                "disaggregation_mode": "null",
            },
            True,
        ),
        ({"enable_multi_layer_eagle": True}, False),
        # DSPARK's branch does not ask the flag (source read; the oracle cannot import it).
        ({"speculative_algorithm": "DSPARK", "enable_multi_layer_eagle": True}, False),
        # Without PP nothing meshsat models reads it (oracle: Llama, tp 8, EAGLE, taken).
        (
            {
                "speculative_algorithm": "EAGLE",
                "enable_multi_layer_eagle": True,
                "pp_size": 1,
                "tp_size": 8,
            },
            False,
        ),
    ],
)
def test_pp_reads_a_typed_multi_layer_eagle(extra: dict[str, Any], refused: bool) -> None:
    rules = _errors({**_PP_PREFILL, **extra})
    assert rules == (["TOPO-PP-SPEC"] if refused else []), rules


def test_typed_multi_layer_eagle_with_mimo_nextn() -> None:
    """Oracle 0.5.23: MiMo-V2 with NEXTN stays single-layer by its override, but a typed
    flag makes it multi-layer: PP refuses it."""
    cfg = {
        **_PP_PREFILL,
        "architecture": "MiMoV2FlashForCausalLM",
        "speculative_algorithm": "NEXTN",
    }
    assert _errors(cfg) == []
    assert _errors({**cfg, "enable_multi_layer_eagle": True}) == ["TOPO-PP-SPEC"]


def test_multi_layer_eagle_is_no_flag_of_0_4() -> None:
    """0.4.6.post5's argparse has no --enable-multi-layer-eagle (its server_args.py)."""
    assert _errors({"enable_multi_layer_eagle": True}, "0.4.6.post5") == [
        "FLAG-ABSENT-ENABLE-MULTI-LAYER-EAGLE"
    ]


def _runner(config: dict[str, Any], version: str) -> Any:
    report = _report(config, version)
    assert report.valid, report.violations
    return report.resolved_env["moe_runner_backend"]


_SM100 = {"tp_size": 8, "platform": "cuda", "gpu_sm": 100}


@pytest.mark.parametrize(
    ("architecture", "versions"),
    [
        # In every list (0.5.18, 0.5.19 and 0.5.23's source).
        ("DeepseekV3ForCausalLM", ("0.5.18", "0.5.19", "0.5.23")),
        ("Qwen3MoeForCausalLM", ("0.5.18", "0.5.19", "0.5.23")),
        # _DEEPSEEK_FAMILY_ARCHS gains Dots3Note in 0.5.19, GLM-5 Next and HunYuan V4 in
        # 0.5.23; the Qwen3-MoE override registers Qwen4Exp in 0.5.23.
        ("Dots3NoteForCausalLM", ("0.5.19", "0.5.23")),
        ("Glm5NextForConditionalGeneration", ("0.5.23",)),
        ("HYV4ForCausalLM", ("0.5.23",)),
        ("Qwen4ExpForConditionalGeneration", ("0.5.23",)),
    ],
)
def test_sm100_moe_runner_per_release(architecture: str, versions: tuple[str, ...]) -> None:
    for version in ("0.5.18", "0.5.19", "0.5.23"):
        want = "flashinfer_trtllm" if version in versions else "auto"
        assert _runner({**_SM100, "architecture": architecture}, version) == want, version


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
@pytest.mark.parametrize(
    ("extra", "runner"),
    [
        # The same conditions as 0.5.23's (source read): Hopper, an all-to-all backend, a
        # typed runner, and a quantization outside the lists keep the user's.
        ({"gpu_sm": 90}, "auto"),
        ({"gpu_sm": 103}, "flashinfer_trtllm"),
        ({"moe_a2a_backend": "deepep"}, "auto"),
        ({"quantization": "mxfp4"}, "auto"),
        ({"quantization": "modelopt_fp8"}, "flashinfer_trtllm"),
    ],
)
def test_sm100_moe_runner_conditions_in_earlier_releases(
    version: str, extra: dict[str, Any], runner: str
) -> None:
    assert _runner({**_SM100, **DSV3, **extra}, version) == runner
