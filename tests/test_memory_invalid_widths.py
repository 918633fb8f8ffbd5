"""The memory model on layouts whose widths are not whole (QA r23: `--tp 8 --ep 16 --gpu
H100` was a ZeroDivisionError traceback): the rules refuse the layout, and the memory model
is not run on it (there is no such engine to size), whatever the widths."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshsat import solver
from meshsat.solver.cli.memory_options import with_memory
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import Parallel, memory_of
from meshsat.solver.memory.models import model_config
from tests.cli_helpers import run_cli

QWEN_MOE = "Qwen/Qwen3-30B-A3B"
MODELS = (QWEN_MOE, "deepseek-ai/DeepSeek-V3", "meta-llama/Llama-3.1-8B-Instruct")
WIDTHS = st.sampled_from((1, 2, 3, 4, 5, 8, 16, 32))


@pytest.mark.parametrize(
    "args",
    [
        ("--set", "tp_size=8", "--set", "ep_size=16"),
        ("--set", "tp_size=8", "--set", "ep_size=4", "--set", "moe_dp_size=4"),
        ("--set", "tp_size=8", "--set", "enable_dp_attention=true", "--set", "dp_size=16"),
    ],
)
def test_a_layout_of_broken_widths_is_refused_without_a_memory_figure(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    r = run_cli(capsys, "validate", "-V", "0.5.23", "--model", QWEN_MOE, "--gpu", "H100",
                *args, "--json")  # fmt: skip
    data = json.loads(r.out)
    assert r.code == 1 and data["valid"] is False and data.get("memory") is None
    assert "Traceback" not in r.err


def test_the_api_says_why_it_does_not_size_such_a_layout() -> None:
    spec = ModelSpec.from_hf_config(model_config(QWEN_MOE))
    report = solver.validate({"tp_size": 8, "ep_size": 16}, spec, sglang_version="0.5.23")
    assert not Parallel.from_resolved(report.resolved, report.derived).whole
    with pytest.raises(ValueError, match="not whole"):
        memory_of(report, QWEN_MOE, "H100")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(MODELS),
    tp=WIDTHS,
    pp=st.sampled_from((1, 1, 2, 3, 64, 128)),
    ep=WIDTHS,
    moe_dp=WIDTHS,
    attn_dp=st.sampled_from((1, 2, 3, 16)),
    attn_cp=st.sampled_from((1, 1, 2, 3)),
    dcp=st.sampled_from((1, 1, 2, 3, 16)),
    dense_tp=st.sampled_from((None, 1, 3, 16)),
)
def test_invalid_widths_with_a_gpu_never_raise(
    model: str, tp: int, pp: int, ep: int, moe_dp: int, attn_dp: int, attn_cp: int,
    dcp: int, dense_tp: int | None,
) -> None:  # fmt: skip
    cfg: dict[str, Any] = {
        "tp_size": tp, "pp_size": pp, "ep_size": ep, "moe_dp_size": moe_dp,
        "attn_cp_size": attn_cp, "dcp_size": dcp, "moe_dense_tp_size": dense_tp,
    }  # fmt: skip
    if attn_dp > 1:
        cfg |= {"enable_dp_attention": True, "dp_size": attn_dp}
    spec = ModelSpec.from_hf_config(model_config(model))
    report = solver.validate(cfg, spec, sglang_version="0.5.23")
    out, mem = with_memory(report, model, "H100", None, None, "0.5.23")
    if not Parallel.from_resolved(report.resolved, report.derived).whole:
        assert mem is None and out == report and not report.valid
