"""Rules QA found disagreeing with the real SGLang, each pinned to the SGLang source
condition it now follows (cited per test) or to the 0.5.23 oracle's recorded answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fidelity.compare import model
from meshsat.solver.catalogue import speculative
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import get_pack
from meshsat.solver.validation.validate import validate
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


# --- QA s3: model overrides the checks after them read --------------------------------------


def _stage_rules(cfg: dict[str, Any], spec: ModelSpec, version: str = "0.5.23") -> list[str]:
    """meshsat's errors among the checks the oracle runs (resolution and launch), in order."""
    report = validate(Config(**cfg), spec, explain=False, sglang_version=version)
    pack = get_pack(version)
    return [
        v.rule
        for v in report.violations
        if pack.stage(v.rule) == "resolution" or v.source == "check_server_args"
    ]


_H100 = {"platform": "cuda", "gpu_sm": 90}
_PP_PREFILL = {"tp_size": 4, "pp_size": 2, "disaggregation_mode": "prefill", **_H100}
#: SGLang 0.5.23's oracle (`oracle.py --launch`, H100 facts) on MiMo-V2-Flash and, as the
#: control, DeepSeek V3: (extra fields, MiMo's first error, DeepSeek V3's). The MiMo-V2 model
#: override sets enable_multi_layer_eagle for `--speculative-algorithm EAGLE` as typed, and
#: check_pipeline_parallel_compat then asserts "Pipeline parallelism currently only supports
#: EAGLE (non-multi-layer) ..."; NEXTN (EAGLE only later) and a lower-case `eagle` stay
#: single-layer. meshsat took MiMo's EAGLE on a PD prefill server.
_PP_MULTI_LAYER: tuple[tuple[dict[str, Any], str | None, str | None], ...] = (
    ({"speculative_algorithm": "EAGLE"}, "TOPO-PP-SPEC", None),
    ({"speculative_algorithm": "NEXTN"}, None, None),
    ({"speculative_algorithm": "eagle"}, None, None),
    ({"speculative_algorithm": "EAGLE", "gpu_sm": 100}, "TOPO-PP-SPEC", None),
    ({"speculative_algorithm": "EAGLE3"}, "TOPO-PP-SPEC", "TOPO-PP-SPEC"),
    (
        {"speculative_algorithm": "EAGLE", "disaggregation_mode": "null"},
        "TOPO-PP-SPEC",
        "TOPO-PP-SPEC",
    ),
    (
        {"speculative_algorithm": "NEXTN", "disaggregation_mode": "null"},
        "TOPO-PP-SPEC",
        "TOPO-PP-SPEC",
    ),
    ({}, None, None),
    # Without PP the flag is read by nothing meshsat models.
    ({"speculative_algorithm": "EAGLE", "pp_size": 1, "tp_size": 8}, None, None),
)


@pytest.mark.parametrize(("extra", "mimo", "dsv3"), _PP_MULTI_LAYER)
def test_pp_refuses_the_multi_layer_eagle_a_model_override_turns_on(
    extra: dict[str, Any], mimo: str | None, dsv3: str | None
) -> None:
    cfg = {**_PP_PREFILL, **extra}
    mimo_spec = ModelSpec(architecture="MiMoV2FlashForCausalLM")
    assert _stage_rules(cfg, mimo_spec)[:1] == ([mimo] if mimo else [])
    assert _stage_rules(cfg, model("deepseek_v3"))[:1] == ([dsv3] if dsv3 else [])


@pytest.mark.parametrize("architecture", speculative.MULTI_LAYER_EAGLE_ARCHITECTURES)
def test_every_multi_layer_eagle_override_is_read(architecture: str) -> None:
    """The other overrides of 0.5.23's source that set enable_multi_layer_eagle for EAGLE
    (`_step3p_overrides`, `_gigachat35_overrides`; no oracle model): the same refusal."""
    spec = ModelSpec(architecture=architecture)
    assert _stage_rules({**_PP_PREFILL, "speculative_algorithm": "EAGLE"}, spec) == ["TOPO-PP-SPEC"]
    assert _stage_rules({**_PP_PREFILL, "speculative_algorithm": "DSPARK"}, spec) == []


_TOPK = {"speculative_num_steps": 1, "speculative_num_draft_tokens": 8}
_DCP_FA3 = {"tp_size": 8, "attention_backend": "fa3", **_H100}
#: SGLang 0.5.23's oracle (H100 facts; 0.5.23's CPU recorder, fidelity/runner.py, also
#: refuses dcp 2 with top-k 2, EAGLE on fa3 or no algorithm, which 0.5.18 and 0.5.19 take):
#: `_dsa_dcp_overrides`
#: (model_overrides/deepseek_v2.py) raises "DSA DCP requires --speculative-eagle-topk 1."
#: for a typed top-k other than 1 under DSA decode CP, after its HiCache and PD checks and
#: before the speculative handler's page-tree check. meshsat had no such rule.
_REFUSED = "DCP-DSA-TOPK"
_DSA_DCP_TOPK: tuple[tuple[dict[str, Any], str | None], ...] = (
    (
        {"dcp_size": 8, "speculative_algorithm": "EAGLE", "speculative_eagle_topk": 4},
        "DCP-DSA-TOPK",
    ),
    (
        {"dcp_size": 2, "speculative_algorithm": "NEXTN", "speculative_eagle_topk": 2},
        "DCP-DSA-TOPK",
    ),
    ({"dcp_size": 2, "speculative_eagle_topk": 2}, "DCP-DSA-TOPK"),
    ({"dcp_size": 2, "speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1}, None),
    ({"dcp_size": 8, "speculative_algorithm": "EAGLE"}, None),
    ({"dcp_size": 1, "speculative_algorithm": "EAGLE", "speculative_eagle_topk": 4}, None),
    (
        {"dcp_size": 8, "speculative_algorithm": "EAGLE", "speculative_eagle_topk": 4}
        | {"disaggregation_mode": "decode"},
        "DCP-DSA-PD",
    ),
    (
        {"dcp_size": 8, "speculative_algorithm": "EAGLE", "speculative_eagle_topk": 4}
        | {"enable_hierarchical_cache": True},
        "DCP-DSA-HICACHE",
    ),
    # The default back-end (page 64): the page-tree check comes later.
    (
        {"dcp_size": 2, "speculative_algorithm": "EAGLE", "speculative_eagle_topk": 2}
        | {"attention_backend": None},
        "DCP-DSA-TOPK",
    ),
)


@pytest.mark.parametrize(("extra", "first"), _DSA_DCP_TOPK)
def test_dsa_decode_cp_requires_top_k_one(extra: dict[str, Any], first: str | None) -> None:
    # Steps and draft tokens go with a typed top-k under an algorithm (SGLang picks all
    # three or none).
    both = "speculative_algorithm" in extra and "speculative_eagle_topk" in extra
    cfg = {**_DCP_FA3, **(_TOPK if both else {}), **extra}
    assert _stage_rules(cfg, model("deepseek_v32"))[:1] == ([first] if first else [])
    # DeepSeek V3 is no DSA model: the override never asks.
    assert "DCP-DSA-TOPK" not in _stage_rules(cfg, model("deepseek_v3"))


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
def test_dsa_decode_cp_top_k_is_0_5_23s_check(version: str) -> None:
    """0.5.18 and 0.5.19 have no `_dsa_dcp_overrides` (their CPU recorders take the fa3 row)."""
    cfg = {**_DCP_FA3, **_TOPK, "dcp_size": 2, "speculative_algorithm": "EAGLE"}
    cfg["speculative_eagle_topk"] = 2
    assert "DCP-DSA-TOPK" not in _stage_rules(cfg, model("deepseek_v32"), version)
