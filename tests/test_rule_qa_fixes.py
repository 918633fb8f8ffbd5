"""Rules QA found disagreeing with the real SGLang, each pinned to the SGLang source
condition it now follows (cited per test) or to the 0.5.23 oracle's recorded answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli_helpers import run_cli

DSV3 = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3"
RELEASES = ("0.4.6.post5", "0.5.18", "0.5.19", "0.5.23")


def _validate(capsys: pytest.CaptureFixture[str], version: str, cmd: str) -> tuple[int, Any]:
    run = run_cli(capsys, "validate", "--sglang-version", version, "--sglang", cmd, "--json")
    return run.code, json.loads(run.out)


def _rules(report: Any) -> list[str]:
    return [v["rule"] for v in report["violations"]]


# --- MODEL-EXPERTS: redundant experts count ----------------------------------------------


def test_redundant_experts_make_the_lmsys_72_gpu_recipe_split(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`ExpertLocationMetadata._init_common` (eplb/expert_location.py, 0.5.18 to 0.5.23;
    managers/expert_location.py in 0.4.6.post5), run at model load for every MoE model
    class with expert-location config whatever --enable-eplb says, asserts
    `(num_logical_experts + ep_num_redundant_experts) % ep_size == 0`. The LMSYS 72-GPU
    decode recipe: 256 + 32 = 288 = 4 · 72. meshsat refused it (256 % 72)."""
    cmd = (
        f"{DSV3} --disaggregation-mode decode --tp 72 --dp-size 72 --enable-dp-attention "
        "--moe-a2a-backend deepep --nnodes 9 --node-rank 0 --dist-init-addr 10.0.0.1:5757 "
        "--ep-num-redundant-experts 32 --enable-dp-lm-head --moe-dense-tp-size 1"
    )
    code, report = _validate(capsys, "0.5.23", cmd)
    assert code == 0 and report["valid"], report["violations"]
    code, report = _validate(capsys, "0.5.23", cmd.replace("experts 32", "experts 0"))
    assert code == 1 and _rules(report) == ["MODEL-EXPERTS"]


@pytest.mark.parametrize("version", RELEASES)
def test_redundant_experts_that_break_the_split_are_refused(
    capsys: pytest.CaptureFixture[str], version: str
) -> None:
    """256 + 4 = 260 experts over EP 8: the same assert fails in every release (meshsat
    called it valid). The repair drops the redundant replicas."""
    ep = "--enable-ep-moe" if version == "0.4.6.post5" else "--ep 8"
    eplb = "" if version == "0.4.6.post5" else " --enable-eplb"
    code, report = _validate(
        capsys, version, f"{DSV3} --tp 8 {ep}{eplb} --ep-num-redundant-experts 4"
    )
    assert code == 1 and _rules(report) == ["MODEL-EXPERTS"], report["violations"]
    (v,) = report["violations"]
    assert v["detail"] == "physical_experts = 256 + 4 = 260, not a multiple of 8 (ep_size)"
    code, report = _validate(
        capsys, version, f"{DSV3} --tp 8 {ep}{eplb} --ep-num-redundant-experts 8"
    )
    assert code == 0, report["violations"]


# --- A2A-DEEPEP-V2-BUDGET: chunked prefill off falls back to --max-prefill-tokens ---------

_V2 = (
    f"{DSV3} --tp 16 --nnodes 2 --dist-init-addr 10.0.0.1:5000 --node-rank 0 "
    "--moe-a2a-backend deepep_v2 --deepep-v2-mode hybrid"
)


@pytest.mark.parametrize("chunked", ["0", "-1"])
def test_deepep_v2_budget_reads_max_prefill_tokens_with_chunked_prefill_off(
    capsys: pytest.CaptureFixture[str], chunked: str
) -> None:
    """0.5.23 `required_deepep_v2_prefill_tokens_per_rank` (arg_groups/moe_hook.py): the
    buffer is `max_prefill_buffer_tokens(...) or max_prefill_tokens`, and the former is 0
    when chunked prefill is <= 0. The oracle (SGLang 0.5.23's own resolution) refuses both
    with "DeepEP v2 per-rank prefill budget exceeds ...: required=1024, capacity=128"
    (16384 / 16 ranks); meshsat exempted them. With --max-prefill-tokens 2048 (128 a rank)
    the oracle passes the prefill budget (its next refusal is the decode CUDA graph's, a
    GPU-memory default meshsat does not check)."""
    code, report = _validate(capsys, "0.5.23", f"{_V2} --chunked-prefill-size {chunked}")
    assert code == 1 and _rules(report) == ["A2A-DEEPEP-V2-BUDGET"], report["violations"]
    assert "16384 > 128·(tp_size/attn_dp) = 128·(16/1) = 2048" in report["violations"][0]["detail"]
    code, report = _validate(
        capsys, "0.5.23", f"{_V2} --chunked-prefill-size {chunked} --max-prefill-tokens 2048"
    )
    assert code == 0, report["violations"]
    # A positive chunk is the buffer whatever --max-prefill-tokens says (oracle: 4096 refused
    # with required=256, 2048 past the prefill budget).
    code, report = _validate(
        capsys, "0.5.23", f"{_V2} --chunked-prefill-size 2048 --max-prefill-tokens 65536"
    )
    assert code == 0, report["violations"]
    code, report = _validate(capsys, "0.5.23", f"{_V2} --chunked-prefill-size 4096")
    assert _rules(report) == ["A2A-DEEPEP-V2-BUDGET"]


# --- TOPO-PP-SPEC: 0.5.23 takes PP with EAGLE on a PD prefill server ---------------------

_SPEC = "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
#: The 0.5.23 oracle's launch verdicts (check_server_args, `check_pipeline_parallel_compat`
#: in arg_groups/validation_hook.py), recorded for these commands.
_PP_SPEC_0_5_23 = {
    f"--speculative-algorithm EAGLE {_SPEC} --disaggregation-mode prefill": True,
    f"--speculative-algorithm NEXTN {_SPEC} --disaggregation-mode prefill": True,
    f"--speculative-algorithm EAGLE {_SPEC}": False,  # "... only supported on prefill nodes"
    f"--speculative-algorithm EAGLE {_SPEC} --disaggregation-mode decode": False,
    # "Pipeline parallelism currently only supports EAGLE (non-multi-layer) ..."
    "--speculative-algorithm NGRAM --disaggregation-mode prefill": False,
}


@pytest.mark.parametrize("args", sorted(_PP_SPEC_0_5_23))
def test_pp_with_speculative_decoding_follows_0_5_23(
    capsys: pytest.CaptureFixture[str], args: str
) -> None:
    code, report = _validate(capsys, "0.5.23", f"{DSV3} --tp 8 --pp-size 2 {args}")
    if _PP_SPEC_0_5_23[args]:
        assert code == 0, report["violations"]
    else:
        assert code == 1 and _rules(report) == ["TOPO-PP-SPEC"], report["violations"]


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
def test_pp_with_speculative_decoding_is_refused_before_0_5_23(
    capsys: pytest.CaptureFixture[str], version: str
) -> None:
    """0.5.18 (`ServerArgs.check_server_args`) and 0.5.19 (validation_hook.py) assert
    `speculative_algorithm is None` under PP whatever the PD role."""
    cmd = f"{DSV3} --tp 8 --pp-size 2 --speculative-algorithm EAGLE {_SPEC} "
    code, report = _validate(capsys, version, cmd + "--disaggregation-mode prefill")
    assert code == 1 and _rules(report) == ["TOPO-PP-SPEC"], report["violations"]


# --- EEP-NO-GRAPHS on 0.5.23: the resolved graph backends, not the flags --------------------

_EEP = (
    f"{DSV3} --trust-remote-code --tp 16 --nnodes 2 --dist-init-addr 10.0.0.1:5000 "
    "--node-rank 0 --elastic-ep-backend mooncake --max-ep-size 32 --attn-dp-size 16 --ep 16 "
    "--enable-dp-lm-head --moe-a2a-backend nixl"
)


def test_elastic_scale_up_needs_no_graph_flag_on_0_5_23(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """0.5.23 handle_elastic_ep (parallel_hook.py) asserts the resolved decode backend is
    full or disabled and the prefill one disabled. Unset, decode is `full` and the prefill
    graph is off under nixl (`apply_cuda_graph_compatibility`: an all-to-all backend
    breakable graphs are not validated for). The oracle accepts the launch; meshsat
    refused it and its fix dropped --max-ep-size."""
    code, report = _validate(capsys, "0.5.23", _EEP)
    assert code == 0, report["violations"]
    run = run_cli(capsys, "fix", "--sglang-version", "0.5.23", "--sglang", _EEP, "--json")
    fixed = json.loads(run.out)
    assert run.code == 0 and fixed["valid_input"] and not fixed["violations"], fixed


@pytest.mark.parametrize(
    ("extra", "ok"),
    [
        # The oracle's launch verdicts for these (recorded): explicit breakable graphs are
        # kept (the user's backend is locked) and refused; EAGLE cannot recapture `full`.
        ("--cuda-graph-backend-prefill breakable", False),
        ("--cuda-graph-backend-decode breakable", False),
        (
            "--speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 4",
            False,
        ),
        ("--cuda-graph-backend-decode disabled", True),
        ("--disable-cuda-graph", True),
    ],
)
def test_elastic_scale_up_graph_backends_follow_0_5_23(
    capsys: pytest.CaptureFixture[str], extra: str, ok: bool
) -> None:
    code, report = _validate(capsys, "0.5.23", f"{_EEP} {extra}")
    if ok:
        assert code == 0, report["violations"]
    else:
        assert code == 1 and _rules(report) == ["EEP-NO-GRAPHS"], report["violations"]


def test_elastic_scale_up_keeps_refusing_the_default_graphs_before_0_5_23(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """0.5.19's handle_elastic_ep asserts --disable-cuda-graph (or both per-phase flags)."""
    cmd = _EEP.replace("--attn-dp-size 16", "--dp-size 16 --enable-dp-attention")
    code, report = _validate(capsys, "0.5.19", cmd)
    assert code == 1 and "EEP-NO-GRAPHS" in _rules(report), report["violations"]
