"""What handle_moe_kernel_config reads: the ep_size and quantization resolution has left by
then, not the flags as typed. Each row is the verdict the real release gave on CPU
(fidelity/runner.py on 0.5.18, 0.5.19 and 0.5.23, 2026-12-07; the same in all three unless
a row says otherwise): accepted, or the first error it raised, as meshsat's rule id.

- `--dwdp-size` runs handle_dwdp before the MoE handler, which sets ep_size = dwdp_size
  (= tp_size), so `--ep-size 2` no longer fails the FlashInfer runners' EP assert (meshsat
  read the typed 2 and refused: fidelity/disagreements/0.5.19.json, record 7163).
- The DeepSeek model overrides set ep_size = tp_size for MLA and zigzag-DSA prefill CP.
- `--quantization unquant` is None from _handle_missing_default_values on, so the runners
  that take a bfloat16 model take it (0.5.18 record 6594); CuteDSL still refuses it.
- The FP8/MXFP8 Cutlass runner's `ep_size == 1` assert reads that ep_size too, not the
  all-to-all backend's ep = tp one step later (QA s3: meshsat refused `--moe-a2a-backend
  deepep --moe-runner-backend cutlass --quantization fp8`; rows measured 2026-12-08).
"""

from __future__ import annotations

from typing import Any

import pytest

from fidelity.compare import model
from meshsat.solver.lang.config import Config
from meshsat.solver.packs import get_pack
from meshsat.solver.validation.validate import validate

RELEASES = ("0.5.18", "0.5.19", "0.5.23")
FP4_DSL = {"moe_runner_backend": "flashinfer_cutedsl", "quantization": "modelopt_fp4"}
FP4_CUTLASS = {"moe_runner_backend": "flashinfer_cutlass", "quantization": "modelopt_fp4"}
FP8_CUTLASS = {"moe_runner_backend": "cutlass", "quantization": "fp8"}

#: (model, config, first error per release: one value for all three, or a dict).
ROWS: tuple[tuple[str, dict[str, Any], str | dict[str, str | None] | None], ...] = (
    ("deepseek_v32", {"tp_size": 4, "ep_size": 2, "dwdp_size": 4, **FP4_DSL}, None),
    ("deepseek_v32", {"tp_size": 4, "ep_size": 2, **FP4_DSL}, "MOE-CUTEDSL-EP"),
    (
        "qwen3_moe",
        {"tp_size": 4, "ep_size": 2, "dwdp_size": 4, "moe_runner_backend": "flashinfer_cutlass"},
        None,
    ),
    (
        "qwen3_moe",
        {"tp_size": 4, "ep_size": 2, "moe_runner_backend": "flashinfer_cutlass"},
        "MOE-CUTLASS-EP",
    ),
    # DWDP's own assert comes first where dwdp_size is not tp_size.
    (
        "qwen3_moe",
        {"tp_size": 4, "ep_size": 2, "dwdp_size": 2, "moe_runner_backend": "flashinfer_cutlass"},
        "DWDP-EQ-TP",
    ),
    (
        "deepseek_v3",
        {
            "tp_size": 4,
            "ep_size": 2,
            "enable_prefill_cp": True,
            "cp_strategy": "interleave",
            **FP4_CUTLASS,
        },
        None,
    ),
    (
        "deepseek_v32",
        {"tp_size": 4, "ep_size": 2, "enable_prefill_cp": True, "cp_strategy": "zigzag"}
        | FP4_CUTLASS,
        {"0.5.18": None, "0.5.19": None, "0.5.23": "CP-DSV32-INTERLEAVE"},
    ),
    (
        "deepseek_v32",
        {"tp_size": 4, "ep_size": 2, "enable_prefill_cp": True, "cp_strategy": "interleave"}
        | FP4_CUTLASS,
        "MOE-CUTLASS-EP",
    ),
    (
        "llama",
        {
            "tp_size": 1,
            "pp_size": 2,
            "moe_runner_backend": "flashinfer_cutlass",
            "quantization": "unquant",
        },
        None,
    ),
    *(
        ("qwen3_moe", {"tp_size": 4, "moe_runner_backend": r, "quantization": "unquant"}, None)
        for r in ("flashinfer_trtllm", "flashinfer_trtllm_routed", "experimental_sgl_trtllm")
    ),
    (
        "qwen3_moe",
        {"tp_size": 4, "moe_runner_backend": "flashinfer_cutedsl", "quantization": "unquant"},
        "MOE-CUTEDSL-QUANT",
    ),
    *(
        (
            "qwen3_moe",
            {"tp_size": 4, "moe_a2a_backend": a2a, **FP8_CUTLASS, "quantization": q},
            None,
        )
        for a2a, q in (("deepep", "fp8"), ("mooncake", "mxfp8"))
    ),
    (
        "qwen3_moe",
        {"tp_size": 4, "ep_size": 4, "moe_a2a_backend": "deepep", **FP8_CUTLASS},
        "MOE-CUTLASS-FP8-EP",
    ),
    ("qwen3_moe", {"tp_size": 4, "ep_size": 4, **FP8_CUTLASS}, "MOE-CUTLASS-FP8-EP"),
    (
        "qwen3_moe",
        {"tp_size": 4, "dwdp_size": 4, "disaggregation_mode": "prefill", **FP8_CUTLASS},
        "MOE-CUTLASS-FP8-EP",
    ),
    (
        "deepseek_v3",
        {"tp_size": 4, "enable_prefill_cp": True, "cp_strategy": "interleave", **FP8_CUTLASS},
        "MOE-CUTLASS-FP8-EP",
    ),
)


def _first_error(name: str, cfg: dict[str, Any], version: str) -> str | None:
    """meshsat's first error in the resolution stage (what the recorder's verdict is)."""
    report = validate(
        Config(**cfg, platform="cpu"), model(name), explain=False, sglang_version=version
    )
    pack = get_pack(version)
    errors = [v.rule for v in report.violations if pack.stage(v.rule) == "resolution"]
    return errors[0] if errors else None


@pytest.mark.parametrize("version", RELEASES)
@pytest.mark.parametrize(("name", "cfg", "sglang"), ROWS)
def test_moe_kernel_asserts_read_the_resolved_values(
    version: str, name: str, cfg: dict[str, Any], sglang: str | dict[str, str | None] | None
) -> None:
    expected = sglang[version] if isinstance(sglang, dict) else sglang
    assert _first_error(name, cfg, version) == expected
