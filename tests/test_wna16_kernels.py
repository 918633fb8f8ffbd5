"""Which MoE kernel a compressed-tensors WNA16 checkpoint's experts get, and the rules that
follow (`MOE-MARLIN-A2A`, `MOE-TRITON-WNA16`).

The oracle is each release's own `CompressedTensorsConfig` predicates on 28 weight schemes
(`fidelity/wna16_kernels.py` -> tests/fixtures/wna16_kernels/<version>.json): the scheme
choice in `get_moe_scheme` reads them in the order the rules encode (MXINT4 under
flashinfer_trtllm, then Triton where asked or, from 0.5.19, by the auto runner on SM100
where the weights allow, else Marlin).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver import validate
from meshsat.solver.lang.checkpoint_quant import read_checkpoint_quant
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.models import model_config

FIXTURES = Path(__file__).parent / "fixtures"
VERSIONS = ("0.5.18", "0.5.19", "0.5.23")
KIMI_K25 = "tests/fixtures/weight_shapes/configs/Kimi-K2.5.json"


def _config(weights: dict[str, Any]) -> dict[str, Any]:
    group = {"targets": ["Linear"], "weights": weights, "input_activations": None}
    return {"quantization_config": {"quant_method": "compressed-tensors",
                                    "config_groups": {"group_0": group}}}  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
def test_the_kernels_are_the_ones_the_release_finds(version: str) -> None:
    record = json.loads((FIXTURES / "wna16_kernels" / f"{version}.json").read_text())
    assert record["sglang"] == version and len(record["schemes"]) == 28
    for case in record["schemes"]:
        q = read_checkpoint_quant(_config(case["weights"]))
        assert q.wna16 == case["wna16"], case
        assert q.mxint4 == case["mxint4"], case
        if case["wna16_triton"] is not None:  # 0.5.18 has no such check
            assert q.wna16_triton == case["wna16_triton"], case


def _kimi(group_size: int) -> ModelSpec:
    """Kimi-K2.5 with its INT4 experts in groups of `group_size` (32: as published)."""
    hf = copy.deepcopy(dict(model_config(KIMI_K25)))
    text = hf.get("text_config", hf)
    text["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = group_size
    return ModelSpec.from_hf_config(hf)


DEEPEP_8 = {"tp_size": 8, "ep_size": 8, "dp_size": 8, "enable_dp_attention": True,
            "moe_dense_tp_size": 1, "moe_a2a_backend": "deepep"}  # fmt: skip


@pytest.mark.parametrize(
    ("group_size", "runner", "sm", "marlin"),
    [
        (32, "flashinfer_trtllm", 90, False),  # MXINT4: the TRT-LLM kernel
        (128, "flashinfer_trtllm", 90, True),  # not MXINT4: Marlin, no a2a function
        (128, "auto", 100, False),  # 0.5.19+: Triton by default on SM100
        (64, "auto", 100, True),  # weights Triton refuses: Marlin on SM100 too
        (64, "auto", 90, True),
    ],
)  # fmt: skip
def test_the_runner_follows_the_weights(
    group_size: int, runner: str, sm: int, marlin: bool
) -> None:
    spec = _kimi(group_size)
    layout = {**DEEPEP_8, "moe_runner_backend": runner, "gpu_sm": sm}
    for version in ("0.5.19", "0.5.23"):
        report = validate(layout, spec, explain=False, sglang_version=version)
        assert ("MOE-MARLIN-A2A" in {v.rule for v in report.violations}) == marlin, version


@pytest.mark.parametrize(("group_size", "refused"), [(32, False), (128, False), (64, True)])
def test_the_triton_runner_refuses_weights_it_has_no_kernel_for(
    group_size: int, refused: bool
) -> None:
    """From 0.5.19 (0.5.18 takes Triton whatever the weights)."""
    spec = _kimi(group_size)
    layout = {"tp_size": 8, "moe_runner_backend": "triton"}
    for version in VERSIONS:
        report = validate(layout, spec, explain=False, sglang_version=version)
        got = "MOE-TRITON-WNA16" in {v.rule for v in report.violations}
        assert got == (refused and version != "0.5.18"), version
