"""`meshsat plan`: legal, fitting layouts, ranked as its output says."""

from __future__ import annotations

import json

import pytest

from meshsat import solver
from meshsat.solver.cli.plan_cmd import plan_layouts
from meshsat.solver.inputs import parse_sglang_command
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.memory.models import catalogue_config
from tests.cli_helpers import run_cli


def test_plan_rows_are_legal_fit_and_are_ranked() -> None:
    spec = ModelSpec.from_hf_config(catalogue_config("deepseek-ai/DeepSeek-V3"))
    rows = plan_layouts("deepseek-ai/DeepSeek-V3", gpu("H200"), 16, context_length=8192, top=8)
    assert rows
    keys = [(-r.total_kv_tokens, r.node_crossing_gpus) for r in rows]
    assert keys == sorted(keys)
    for r in rows:
        assert r.weights_gib < gpu("H200").memory_gib and r.total_kv_tokens > 0
        cmd = r.command.split("  #")[0]
        report = solver.validate(parse_sglang_command(cmd).values, spec)
        assert report.valid, cmd
        assert r.max_requests == r.pools * (r.kv_tokens_per_pool // 8192)


def test_plan_cli_json_states_the_ranking_and_exit_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    res = run_cli(
        capsys,
        "plan",
        "-m",
        "Qwen/Qwen3-8B",
        "--gpu",
        "H100",
        "-n",
        "2",
        "-f",
        "json",
        "--rank",
        "kv",
    )
    assert res.code == 0
    data = json.loads(res.out)
    assert "not modelled" in data["ranking"] and data["layouts"]
    none = run_cli(capsys, "plan", "-m", "deepseek-ai/DeepSeek-V3", "--gpu", "A100-40", "-n", "8")
    assert none.code == 1 and "fits" in none.err
    bad = run_cli(capsys, "plan", "-m", "Qwen/Qwen3-8B", "--gpu", "V100", "-n", "2")
    assert bad.code == 2 and "known: H100" in bad.err and "Traceback" not in bad.err
