"""Decode context parallelism off CUDA: which releases refuse it at argument time.

The oracle is SGLang 0.5.23's own resolution on the recorder's models (2026-12-07): on CPU
and as an SM90 CUDA machine through the shared oracle (/work/shared/sglang_oracle,
`"platform"`), and told it runs on an Ascend NPU or a ROCm GPU through 0.5.23's
`runtime_context.override_platform` (fidelity/runner.py's Resolver with is_npu / is_hip
facts in place of its SM90 ones). Only the NPU refuses, and only non-DSA models
(handle_model_specific_adjustments: "NPU decode context parallelism is currently
implemented only for DeepSeek DSA models"). 0.5.18 and 0.5.19 have no platform check on
decode CP in their argument handling (read from their source), so they accept all.
"""

from __future__ import annotations

from typing import Any

import pytest

from fidelity.compare import model
from meshsat.solver.lang.config import Config
from meshsat.solver.packs import get_pack
from meshsat.solver.validation.validate import validate

#: (model, layout): dense, Qwen MoE, MLA, DSA.
LAYOUTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("llama", {"tp_size": 2, "dcp_size": 2}),
    ("qwen3_moe", {"tp_size": 4, "dcp_size": 2}),
    ("deepseek_v3", {"tp_size": 4, "dcp_size": 2}),
    ("deepseek_v32", {"tp_size": 4, "dcp_size": 2}),
)
#: 0.5.23's first error per platform and model (None: accepted), as measured.
MEASURED_0_5_23 = {
    "npu": {"llama": "DCP-NPU-DSA", "qwen3_moe": "DCP-NPU-DSA", "deepseek_v3": "DCP-NPU-DSA"},
    "hip": {},
    "cpu": {},
    "cuda": {},
}


def _first_error(name: str, cfg: dict[str, Any], platform: str, version: str) -> str | None:
    report = validate(
        Config(**cfg, platform=platform), model(name), explain=False, sglang_version=version
    )
    pack = get_pack(version)
    errors = [v.rule for v in report.violations if pack.stage(v.rule) == "resolution"]
    return errors[0] if errors else None


@pytest.mark.parametrize("platform", sorted(MEASURED_0_5_23))
@pytest.mark.parametrize(("name", "cfg"), LAYOUTS)
def test_0_5_23_refuses_decode_cp_on_npu_for_non_dsa_models(
    platform: str, name: str, cfg: dict[str, Any]
) -> None:
    assert _first_error(name, cfg, platform, "0.5.23") == MEASURED_0_5_23[platform].get(name)


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
@pytest.mark.parametrize(("name", "cfg"), LAYOUTS)
def test_earlier_releases_take_decode_cp_on_npu(
    version: str, name: str, cfg: dict[str, Any]
) -> None:
    assert _first_error(name, cfg, "npu", version) is None


def test_the_npu_refusal_needs_decode_cp() -> None:
    """--dcp-size 1 is the repair the message names."""
    assert _first_error("llama", {"tp_size": 2}, "npu", "0.5.23") is None
