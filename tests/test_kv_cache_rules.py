"""The launch refusals of a command's context length and KV-cache flags
(solver/catalogue/kv_cache.py), against SGLang's own answers.

The resolution corpus (tests/fixtures/fidelity/) predates these fields, so the answers of
SGLang 0.5.23's own resolution (the shared oracle, `oracle.py --launch`, on its `llama`
(4,096 positions) and `deepseek_v32` configs) are kept here, and the other releases are
held to the conditions read from their sources (model_config.py `_derive_context_length`,
overrides.py `_dsa_kv_cache_dtype_default`, `handle_cache_compatibility`).
"""

from __future__ import annotations

from typing import Any

import pytest

from meshsat.solver import validate
from meshsat.solver.inputs.sglang_cmdline import parse_sglang_command
from meshsat.solver.packs import get_pack
from tests.sglang_answers import assert_sglang_answer

LLAMA = {"architecture": "LlamaForCausalLM", "max_context_length": 4096}
DSA = {"architecture": "DeepseekV32ForCausalLM", "is_deepseek_dsa": True}
V3 = {"architecture": "DeepseekV3ForCausalLM"}

#: (config, model, SGLang 0.5.23's first error or None, the step that raised it)
ORACLE_0_5_23: tuple[tuple[dict[str, Any], dict[str, Any], str | None, str | None], ...] = (
    (
        {"context_length": 1000000},
        LLAMA,
        "Warning: User-specified context_length (1000000) is greater than the derived "
        "context_length (4096).",
        "apply_inkling_prefill_cuda_graph_default",
    ),
    ({"context_length": 4096}, LLAMA, None, None),
    (
        {"tp_size": 8, "kv_cache_dtype": "fp8_e5m2"},
        DSA,
        "DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype",
        "handle_model_specific_adjustments",
    ),
    ({"tp_size": 8, "kv_cache_dtype": "fp8_e4m3"}, DSA, None, None),
    ({"tp_size": 8, "kv_cache_dtype": "bf16"}, DSA, None, None),
    ({"tp_size": 8}, DSA, None, None),
    ({"tp_size": 8, "kv_cache_dtype": "fp8_e5m2"}, V3, None, None),
    *(
        (
            {"swa_full_tokens_ratio": r},
            LLAMA,
            "--swa-full-tokens-ratio should be in range (0, 1.0].",
            "handle_cache_compatibility",
        )
        for r in (1.5, 0.0, -0.5)
    ),
    ({"swa_full_tokens_ratio": 1.0}, LLAMA, None, None),
)


@pytest.mark.parametrize("config,model,error,step", ORACLE_0_5_23)
def test_0_5_23_refuses_what_its_resolution_refuses(
    config: dict[str, Any], model: dict[str, Any], error: str | None, step: str | None
) -> None:
    pack = get_pack("0.5.23")
    report = validate(config, model, explain=False, sglang_version=pack)
    assert_sglang_answer(report, error, step)


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
def test_0_5_releases_refuse_a_longer_context_unless_the_variable_allows_it(version: str) -> None:
    longer = {"context_length": 8192}
    refused = validate(longer, LLAMA, explain=False, sglang_version=version)
    assert [v.rule for v in refused.violations] == ["MODEL-CONTEXT-LENGTH"]
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in refused.violations[0].message
    for said, valid in ((True, True), (False, False)):
        env = {**longer, "env_allow_overwrite_longer_context_len": said}
        report = validate(env, LLAMA, explain=False, sglang_version=version)
        assert report.valid == valid
        # SGLang logs the override and serves the longer context.
        assert ("MODEL-CONTEXT-LENGTH-OVERRIDE" in {w.rule for w in report.warnings}) == valid


def test_0_4_6_allows_a_longer_context_unless_the_variable_is_false() -> None:
    """0.4.6.post5 reads the variable with `get_bool_env_var(..., default="True")`."""
    longer = {"context_length": 8192}
    allowed = validate(longer, LLAMA, explain=False, sglang_version="0.4.6.post5")
    assert allowed.valid and "MODEL-CONTEXT-LENGTH-OVERRIDE" in {w.rule for w in allowed.warnings}
    env = {**longer, "env_allow_overwrite_longer_context_len": False}
    refused = validate(env, LLAMA, explain=False, sglang_version="0.4.6.post5")
    assert [(v.rule, v.stage) for v in refused.violations] == [("MODEL-CONTEXT-LENGTH", "launch")]


def test_dsa_and_swa_rules_per_release() -> None:
    """0.5.18 and 0.5.19 have the same DSA assert and ratio range; 0.4.6.post5 has neither
    DSA nor the flag (FLAG-ABSENT)."""
    for version in ("0.5.18", "0.5.19"):
        dsa = validate({"tp_size": 8, "kv_cache_dtype": "fp8_e5m2"}, DSA, sglang_version=version)
        assert [v.rule for v in dsa.violations] == ["MODEL-DSA-KV-DTYPE"]
        swa = validate({"swa_full_tokens_ratio": 1.5}, sglang_version=version)
        assert [v.rule for v in swa.violations] == ["SWA-RATIO-RANGE"]
    old = validate({"swa_full_tokens_ratio": 0.5}, sglang_version="0.4.6.post5")
    assert [v.rule for v in old.violations] == ["FLAG-ABSENT-SWA-FULL-TOKENS-RATIO"]
    npu = validate(
        {"tp_size": 8, "kv_cache_dtype": "fp8_e5m2", "platform": "npu"},
        DSA,
        sglang_version="0.5.23",
    )
    assert "MODEL-DSA-KV-DTYPE" not in {v.rule for v in npu.violations}


def test_a_pasted_command_reads_the_flags_and_the_variable() -> None:
    """QA's repro: the command's --context-length (meshsat's own option was refused, the
    command's slipped through), and the variable as a leading VAR=value word."""
    line = "python -m sglang.launch_server --tp 1 --context-length 1000000"
    parsed = parse_sglang_command(line)
    assert parsed.values["context_length"] == parsed.memory["context_length"] == 1000000
    allowed = parse_sglang_command("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 " + line)
    assert allowed.values["env_allow_overwrite_longer_context_len"] is True
    swa = parse_sglang_command("python -m sglang.launch_server --swa-full-tokens-ratio 0.5")
    assert swa.values["swa_full_tokens_ratio"] == swa.memory["swa_full_tokens_ratio"] == 0.5
