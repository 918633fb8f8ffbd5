"""What a `--gpu` type says about the platform: an AMD Instinct runs SGLang's ROCm build.

Oracle: the same rules with the platform given by hand (`--set platform=hip`), which the
fidelity corpus holds to SGLang's own checks on a simulated HIP device; `--gpu MI300X` once
judged the layout as CUDA (prefill CP on DeepSeek-V3 passed, where SGLang's ROCm build
refuses it: CP-HIP-DSV4).
"""

from __future__ import annotations

import json

import pytest

from meshsat.solver.memory.gpus import gpu
from tests.cli_helpers import run_cli

PREFILL_CP = (
    "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 "
    "--attn-cp-size 2 --enable-prefill-cp --cp-strategy zigzag"
)


def _rules(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, set[str]]:
    run = run_cli(capsys, "validate", "--sglang", PREFILL_CP, "--json", *args)
    doc = json.loads(run.out)
    return run.code, {v["rule"] for v in doc["violations"]}


@pytest.mark.parametrize("name", ["MI300X", "MI325X", "MI355X"])
def test_an_amd_gpu_is_judged_as_the_hip_platform(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    assert gpu(name).layout_fields == {"platform": "hip"}
    by_gpu = _rules(capsys, "--gpu", name)
    by_hand = _rules(capsys, "--set", "platform=hip")
    assert by_gpu == by_hand and "CP-HIP-DSV4" in by_gpu[1]
    assert _rules(capsys, "--gpu", "H200") == (0, set())


def test_a_platform_the_user_gives_is_kept(capsys: pytest.CaptureFixture[str]) -> None:
    assert _rules(capsys, "--gpu", "MI300X", "--set", "platform=cuda") == (0, set())


def test_enumerate_on_an_amd_gpu_lists_what_the_rocm_build_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ("enumerate", "--gpus", "8", "--model", "deepseek-ai/DeepSeek-V3", "--count")
    by_gpu = run_cli(capsys, *base, "--gpu", "MI300X", "--where", "enable_prefill_cp")
    by_hand = run_cli(capsys, *base, "--set", "platform=hip", "--where", "enable_prefill_cp")
    assert by_gpu.out == by_hand.out == "0\n"
    assert run_cli(capsys, *base, "--gpu", "H200", "--where", "enable_prefill_cp").out != "0\n"
