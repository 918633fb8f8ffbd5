"""`plan --quantization`: the same pricing, rules, estimate modes and refusals as the other
commands give the same flag (validate is the second path: each planned command is checked
there and its memory compared)."""

from __future__ import annotations

import json

import pytest

from meshsat.solver.inputs import parse_sglang_command
from meshsat.solver.memory import Parallel
from meshsat.solver.perf import PerfModel
from meshsat.solver.perf.aic import installed
from meshsat.solver.perf.engine_args import ONLINE_FP8_QUANT, QUANT_MODES, SUBSTITUTES
from tests.cli_helpers import run_cli

MOE = "Qwen/Qwen3-30B-A3B"  # a 16-bit checkpoint with experts: every component is priced


def _validate(capsys: pytest.CaptureFixture[str], command: str, *args: str) -> dict[str, object]:
    res = run_cli(capsys, "validate", "--model", MOE, "--gpu", "H200", "--sglang", command,
                  "--json", *args)  # fmt: skip
    assert res.code == 0, res.err
    report: dict[str, object] = json.loads(res.out)
    return report


def test_plan_memory_is_validates_for_each_planned_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    res = run_cli(capsys, "plan", "-m", MOE, "--gpu", "H200", "-n", "4", "--rank", "kv",
                  "--quantization", "fp8", "-f", "json", "--top", "6")  # fmt: skip
    assert res.code == 0, res.err
    rows = json.loads(res.out)["layouts"]
    assert rows
    for r in rows:
        assert parse_sglang_command(r["command"]).values["quantization"] == "fp8"
        mem = _validate(capsys, r["command"])["memory"]
        assert isinstance(mem, dict)
        assert r["weights_gib"] == round(mem["weights_gib"], 2), r["command"]
        assert r["kv_tokens_per_pool"] == mem["max_total_num_tokens"], r["command"]
        assert r["max_requests"] == mem["max_requests"], r["command"]
    plain = run_cli(capsys, "plan", "-m", MOE, "--gpu", "H200", "-n", "4", "--rank", "kv",
                    "-f", "json", "--top", "6")  # fmt: skip
    bf16 = {r["command"]: r["weights_gib"] for r in json.loads(plain.out)["layouts"]}
    fp8 = {r["command"].replace(" --quantization fp8", ""): r["weights_gib"] for r in rows}
    shared = bf16.keys() & fp8.keys()
    assert shared and all(fp8[c] < bf16[c] for c in shared)


def test_perf_and_disagg_commands_carry_the_flag_and_price_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    res = run_cli(capsys, "plan", "-m", MOE, "--gpu", "H200", "-n", "2", "--quantization",
                  "fp8", "-f", "json", "--top", "3", "--engine", "roofline")  # fmt: skip
    assert res.code == 0, res.err
    for r in json.loads(res.out)["layouts"]:
        assert parse_sglang_command(r["command"]).values["quantization"] == "fp8"
        mem = _validate(capsys, r["command"])["memory"]
        assert isinstance(mem, dict) and r["weights_gib"] == round(mem["weights_gib"], 2)
    res = run_cli(capsys, "plan", "-m", MOE, "--gpu", "H200", "-n", "2", "--disagg",
                  "--quantization", "fp8", "-f", "json", "--top", "2",
                  "--engine", "roofline")  # fmt: skip
    assert res.code == 0, res.err
    deployments = json.loads(res.out)["deployments"]
    assert deployments
    for d in deployments:
        for role in ("prefill_command", "decode_command"):
            values = parse_sglang_command(d[role]).values
            assert values["quantization"] == "fp8", d[role]


@pytest.mark.parametrize(
    ("model", "value"),
    [
        (MOE, "bogus"),  # not a --quantization choice
        (MOE, "awq"),  # online quantization meshsat does not price
        ("zai-org/GLM-4.5-FP8", "fp8"),  # the checkpoint's compressed-tensors refuses it
        ("Qwen/Qwen3-32B-FP8", "awq"),
    ],
)
def test_bad_values_exit_2_with_validates_line(
    capsys: pytest.CaptureFixture[str], model: str, value: str
) -> None:
    for extra in ((), ("--disagg",), ("--rank", "kv")):
        res = run_cli(capsys, "plan", "-m", model, "--gpu", "H200", "-n", "8",
                      "--quantization", value, *extra)  # fmt: skip
        assert res.code == 2 and res.out == "" and "Traceback" not in res.err
        assert len(res.err.strip().splitlines()) == 1, res.err
        same = run_cli(capsys, "validate", "--model", model, "--gpu", "H200",
                       "--set", "tp_size=8", "--set", f"quantization={value}")  # fmt: skip
        assert same.code == 2 and same.err == res.err


def test_online_fp8_maps_to_the_per_tensor_gemm_a_checkpoint_keeps_its_blocks() -> None:
    assert QUANT_MODES[ONLINE_FP8_QUANT] == ("fp8", "fp8_block")
    p = Parallel(tp=2, attn_tp=2, ep=2, moe_tp=1)
    online = PerfModel(MOE, "H200", quantization="fp8").engine_args(p)
    block = PerfModel("Qwen/Qwen3-30B-A3B-FP8", "H200", quantization="fp8").engine_args(p)
    plain = PerfModel(MOE, "H200").engine_args(p)
    modes = [
        (getattr(a, "gemm_quant_mode", a), getattr(a, "moe_quant_mode", a))
        for a in (online, block, plain)
    ]
    assert modes == [("fp8", "fp8_block"), ("fp8_block", "fp8_block"), ("bfloat16", "bfloat16")]


@pytest.mark.parametrize("engine", ["roofline", "auto"])
@pytest.mark.parametrize(
    ("model", "p"),
    [
        ("Qwen/Qwen3-32B", Parallel(tp=2, attn_tp=2, moe_tp=2)),
        (MOE, Parallel(tp=2, attn_tp=2, ep=2, moe_tp=1)),
        (MOE, Parallel(tp=1)),
    ],
)
def test_online_fp8_decodes_no_slower_than_bf16_at_one_request(
    engine: str, model: str, p: Parallel
) -> None:
    """One request's decode reads every weight once a token: memory-bound, so halving the
    weight bytes must not make the step slower, whichever source estimates it."""
    kw = {"engine": engine}
    bf16 = PerfModel(model, "H200", **kw).estimate(p, concurrency=1)  # type: ignore[arg-type]
    fp8 = PerfModel(model, "H200", quantization="fp8", **kw).estimate(p, concurrency=1)  # type: ignore[arg-type]
    # The engine has no per-tensor FP8 MoE table: a MoE's source names the stand-in.
    said = f" (substitute: {SUBSTITUTES[ONLINE_FP8_QUANT][1]})"
    assert fp8.source.replace(said, "") == bf16.source
    if engine == "auto" and installed():  # the online mode is one the engine has tables for
        assert fp8.source.startswith("aic"), fp8.source
        assert (said in fp8.source) == (model == MOE), fp8.source
    assert fp8.tpot_ms <= bf16.tpot_ms
