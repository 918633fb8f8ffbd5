"""The KV page size each server resolves (R-PAGE-SIZE), the chunk it must divide
(KV-CHUNK-PAGE) and the prefill/decode pair that must agree on it (PD-PAGE-SIZE), against
SGLang's own answers.

The resolution corpus (tests/fixtures/fidelity/) predates `--page-size` as a field, so the
answers of SGLang 0.5.23's own resolution and `check_server_args()` (the shared oracle,
`oracle.py --launch`, with `"platform": "cuda"`: an H100; the SM100 rows ran the same
oracle with its platform facts set to a B200's, `is_sm100`, capability (10, 0)) are kept
here, with the page size it resolved. The other releases are held to the conditions read
from their sources (solver/catalogue/page_size.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from meshsat.solver import validate
from meshsat.solver.deployment.fix import fix_deployment
from meshsat.solver.deployment.validate import validate_deployment
from meshsat.solver.inputs.sglang_cmdline import parse_sglang_command

LLAMA = {"architecture": "LlamaForCausalLM"}
DEEPSEEK_V3 = {"architecture": "DeepseekV3ForCausalLM", "mla_q_head_dim": 192}
DEEPSEEK_V32 = {"architecture": "DeepseekV32ForCausalLM", "is_deepseek_dsa": True}
#: K rows 192 wide, V rows 128: SM100's default back-end is fa4 (`has_asymmetric_kv`).
MIMO_V2 = {"architecture": "MiMoV2FlashForCausalLM"}

#: (config, model, GPU class, the page SGLang 0.5.23 resolved, whether it starts: its
#: resolution and check_server_args() accept it). Every refusal is check_server_args'
#: "chunked_prefill_size must be divisible by page_size".
ORACLE_0_5_23: tuple[tuple[dict[str, Any], dict[str, Any], int, int, bool], ...] = (
    ({}, LLAMA, 90, 1, True),
    ({"page_size": 16, "chunked_prefill_size": 100}, LLAMA, 90, 16, False),
    ({"page_size": 16, "chunked_prefill_size": -1}, LLAMA, 90, 16, True),
    ({}, DEEPSEEK_V3, 90, 1, True),
    ({"page_size": 16, "chunked_prefill_size": 100}, DEEPSEEK_V3, 90, 16, False),
    ({"attention_backend": "flashmla", "chunked_prefill_size": 1000}, LLAMA, 90, 64, False),
    ({"attention_backend": "flashmla", "chunked_prefill_size": 4096}, LLAMA, 90, 64, True),
    ({"attention_backend": "trtllm_mha", "chunked_prefill_size": 1000}, LLAMA, 90, 64, False),
    ({"attention_backend": "trtllm_mha", "chunked_prefill_size": 4096}, LLAMA, 90, 64, True),
    ({"attention_backend": "fa4", "chunked_prefill_size": 1000}, LLAMA, 90, 1, True),
    (
        {"attention_backend": "fa4", "page_size": 16, "chunked_prefill_size": 1000},
        LLAMA,
        90,
        16,
        False,
    ),
    ({"attention_backend": "triton", "chunked_prefill_size": 1000}, LLAMA, 90, 1, True),
    ({"attention_backend": "flashmla", "chunked_prefill_size": 1000}, DEEPSEEK_V3, 90, 64, False),
    ({"attention_backend": "flashmla", "chunked_prefill_size": 4096}, DEEPSEEK_V3, 90, 64, True),
    (
        {"attention_backend": "flashmla", "page_size": 16, "chunked_prefill_size": 1000},
        DEEPSEEK_V3,
        90,
        64,
        False,
    ),
    ({"chunked_prefill_size": 100}, DEEPSEEK_V32, 90, 64, False),
    ({"page_size": 16, "chunked_prefill_size": 4096}, DEEPSEEK_V32, 90, 64, True),
    # DP attention divides the chunk first: 192 / 2 = 96 is no multiple of 64, 256 / 2 is.
    (
        {
            "tp_size": 2,
            "attn_dp_size": 2,
            "attention_backend": "flashmla",
            "chunked_prefill_size": 192,
        },
        DEEPSEEK_V3,
        90,
        64,
        False,
    ),
    (
        {
            "tp_size": 2,
            "attn_dp_size": 2,
            "attention_backend": "flashmla",
            "chunked_prefill_size": 256,
        },
        DEEPSEEK_V3,
        90,
        64,
        True,
    ),
    # A PD decode server is not checked (it still runs flashmla's 64).
    (
        {
            "attention_backend": "flashmla",
            "chunked_prefill_size": 100,
            "disaggregation_mode": "decode",
        },
        DEEPSEEK_V3,
        90,
        64,
        True,
    ),
    # SM100: the default back-ends force a page (trtllm_mha, trtllm_mla, fa4).
    ({"chunked_prefill_size": 100}, LLAMA, 100, 64, False),
    ({"chunked_prefill_size": 4096}, LLAMA, 100, 64, True),
    ({"page_size": 16, "chunked_prefill_size": 100}, LLAMA, 100, 16, False),
    ({"chunked_prefill_size": 100}, DEEPSEEK_V3, 100, 64, False),
    ({"page_size": 16, "chunked_prefill_size": 4096}, DEEPSEEK_V3, 100, 64, True),
    ({"chunked_prefill_size": 100}, MIMO_V2, 100, 128, False),
    ({"page_size": 16, "chunked_prefill_size": 4096}, MIMO_V2, 100, 128, True),
    (
        {"attention_backend": "cutedsl_mla", "page_size": 16, "chunked_prefill_size": 1000},
        DEEPSEEK_V3,
        100,
        64,
        False,
    ),
)


def _report(config: dict[str, Any], model: dict[str, Any], sm: int, version: str) -> Any:
    env = {**config, "platform": "cuda", "gpu_sm": sm}
    return validate(env, model, explain=False, sglang_version=version)


@pytest.mark.parametrize("config,model,sm,page,starts", ORACLE_0_5_23)
def test_0_5_23_resolves_the_page_and_checks_the_chunk_as_sglang_does(
    config: dict[str, Any], model: dict[str, Any], sm: int, page: int, starts: bool
) -> None:
    report = _report(config, model, sm, "0.5.23")
    assert report.resolved["page_size"] == page
    assert report.valid == starts, report.violations
    if not starts:
        (violation,) = report.violations
        assert violation.rule == "KV-CHUNK-PAGE" and violation.stage == "launch"
        assert violation.message == "chunked_prefill_size must be divisible by page_size"


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
def test_0_5_18_and_0_5_19_also_force_cutlass_mla_and_tokenspeed_mla(version: str) -> None:
    """`_mla_backend_page_constraints` of 0.5.18 and 0.5.19: cutlass_mla runs 128,
    tokenspeed_mla 32 or 64; 0.5.23 has neither back-end (nor their page)."""
    cutlass = _report({"attention_backend": "cutlass_mla"}, DEEPSEEK_V3, 90, version)
    assert cutlass.resolved["page_size"] == 128
    for typed, runs in ((16, 64), (32, 32), (None, 64)):
        cfg = {"attention_backend": "tokenspeed_mla", "page_size": typed}
        assert _report(cfg, DEEPSEEK_V3, 90, version).resolved["page_size"] == runs
    newer = _report({"attention_backend": "cutlass_mla"}, DEEPSEEK_V3, 90, "0.5.23")
    assert newer.resolved["page_size"] == 1


def test_dsa_page_is_64_off_npu_and_hip_and_v4_runs_256() -> None:
    """`_deepseek_family_overrides`: DSA sets 64 on CUDA and CPU, whatever was typed, not
    on NPU (nor on ROCm, whose page depends on its kernels: left as typed);
    `_deepseek_v4_overrides`: 256, 128 on NPU."""
    for platform, page in (("cuda", 64), ("cpu", 64), ("npu", 16), ("hip", 16)):
        env = {"page_size": 16, "platform": platform}
        report = validate(env, DEEPSEEK_V32, explain=False, sglang_version="0.5.19")
        assert report.resolved["page_size"] == page, platform
    v4 = {"architecture": "DeepseekV4ForCausalLM"}
    for platform, page in (("cuda", 256), ("npu", 128)):
        report = validate({"platform": platform}, v4, explain=False, sglang_version="0.5.23")
        assert report.resolved["page_size"] == page


def test_0_4_6_asserts_on_the_typed_values_in_post_init() -> None:
    """0.4.6.post5 asserts `chunked_prefill_size % page_size == 0` in `__post_init__` before
    it sets flashmla's 64 and before DP attention divides the chunk: -1 with a page of 16
    fails (-1 % 16 is 15), a decode server is not exempt, and flashmla with an unset page
    (1) passes the assert, then runs 64."""
    old = "0.4.6.post5"
    off = _report({"page_size": 16, "chunked_prefill_size": -1}, LLAMA, 90, old)
    assert [(v.rule, v.stage) for v in off.violations] == [("KV-CHUNK-PAGE", "resolution")]
    assert off.violations[0].message.startswith("AssertionError")
    assert _report({"page_size": 16, "chunked_prefill_size": -1}, LLAMA, 90, "0.5.23").valid
    decode = {"page_size": 16, "chunked_prefill_size": 100, "disaggregation_mode": "decode"}
    assert not _report(decode, LLAMA, 90, old).valid
    assert _report(decode, LLAMA, 90, "0.5.19").valid
    flashmla = _report({"attention_backend": "flashmla", "chunked_prefill_size": 1000}, {}, 90, old)
    assert flashmla.valid and flashmla.resolved["page_size"] == 64


def test_unset_chunk_and_unknown_gpu_force_nothing() -> None:
    """The chunk's default is a GPU-memory one (not known here: not checked), and an unknown
    GPU class keeps the typed page (FA3-like), as every GPU-class rule assumes it holds."""
    report = validate({"page_size": 16}, LLAMA, explain=False, sglang_version="0.5.23")
    assert report.valid and report.resolved["page_size"] == 16
    spec = validate({"chunked_prefill_size": 100, "platform": "cuda", "gpu_sm": 100,
                     "speculative_algorithm": "EAGLE"}, LLAMA, sglang_version="0.5.23")  # fmt: skip
    assert spec.resolved["page_size"] == 1  # the default back-end then depends on the top-k


def test_a_pasted_page_size_is_a_field_and_sizes_memory() -> None:
    parsed = parse_sglang_command("python -m sglang.launch_server --tp 1 --page-size 32")
    assert parsed.values["page_size"] == parsed.memory["page_size"] == 32


_ROUTER = (
    "python -m sglang_router.launch_router --pd-disaggregation "
    "--prefill http://10.0.0.1:30000 --decode http://10.0.0.2:30000\n"
)


def _pd(prefill: str, decode: str) -> str:
    model = "--model-path deepseek-ai/DeepSeek-V3 --tp 8"
    return (
        f"python -m sglang.launch_server {model} --disaggregation-mode prefill "
        f"--host 10.0.0.1 --port 30000{prefill}\n"
        f"python -m sglang.launch_server {model} --disaggregation-mode decode "
        f"--host 10.0.0.2 --port 30000{decode}\n" + _ROUTER
    )


@pytest.mark.parametrize("version", ["0.4.6.post5", "0.5.18", "0.5.19", "0.5.23"])
def test_pd_page_size_compares_the_pages_the_servers_resolve(version: str) -> None:
    """The handshake compares each side's KV pool page (`kv_args.page_size`, the resolved
    `page_size`): a decode on flashmla runs 64 with no --page-size typed, so a prefill that
    runs 1 is refused (0.5.x's RuntimeError; 0.4.6.post5 transfers mismatched pages,
    meshsat's error), and one that types 64 pairs with it."""
    flashmla = " --attention-backend flashmla"
    report = validate_deployment(_pd("", flashmla), sglang_version=version)
    (finding,) = [f for f in report.errors if f.rule == "PD-PAGE-SIZE"]
    assert finding.message == (
        "Page size mismatch: prefill server has page_size=1, but decode server has "
        "page_size=64. Both servers must use the same --page-size value."
    )
    both = validate_deployment(_pd(" --page-size 64", flashmla), sglang_version=version)
    assert "PD-PAGE-SIZE" not in {f.rule for f in both.findings}
    # Unset on both sides is 1 on both; typed 1 and unset is the same page.
    assert validate_deployment(_pd("", " --page-size 1"), sglang_version=version).valid


def test_pd_page_size_is_undecided_for_a_shell_expansion() -> None:
    report = validate_deployment(_pd(" --page-size $PAGE", ""), sglang_version="0.5.23")
    assert "PD-PAGE-SIZE" not in {f.rule for f in report.findings}
    assert report.undecided == ("PD-PAGE-SIZE prefill@1/decode@2",)


def test_fix_gives_the_decode_the_prefill_s_page() -> None:
    fixed = fix_deployment(_pd(" --page-size 16", ""), sglang_version="0.5.23")
    assert fixed.after is not None and fixed.after.valid
    assert fixed.servers[1].flags == (("--page-size", "16"),)
