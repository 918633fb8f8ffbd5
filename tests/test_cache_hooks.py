"""LMCache, a PD decode's KV offload, HiSparse (catalogue/serving.py's LMCACHE-*,
DECODE-OFFLOAD-*, HICACHE-DCP-LMCACHE/-HISPARSE, HISPARSE-*, disaggregation.py's
PD-DECODE-RADIX-HISPARSE) and a DeepSeek DSA model's KV cache dtype (R-DSA-KV-DTYPE) against
SGLang's own answers.

The resolution corpus predates these fields, so SGLang 0.5.23's answers (the shared oracle,
`oracle.py --launch`, platform cuda: H100-like, SM90; QA s2's probes) are kept here, and
the other releases are held to the conditions read from their sources (0.5.18's
server_args.py, 0.5.19's arg_groups/kv_cache_hook.py, hicache_hook.py, hisparse_hook.py,
pd_disaggregation_hook.py, validation_hook.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from fidelity.compare import model
from meshsat.solver import validate
from meshsat.solver.inputs.sglang_cmdline import parse_sglang_command
from meshsat.solver.lang.config import Config
from meshsat.solver.memory import MemoryModel
from meshsat.solver.memory.kv import dsa_kv_cache_dtype
from tests.sglang_answers import assert_sglang_answer, rule_ids

_LMC = "LMCacheUnifiedRadixCache"
_CACHE = "handle_cache_compatibility"
_DCP_LMCACHE = "--enable-lmcache with --dcp-size > 1 is not supported: LMCache has no DCP"
_OFFLOAD = "The argument disaggregation-decode-enable-offload-kvcache is only supported"
_HISPARSE_MODEL = "--enable-hisparse is only supported for DSA (DeepSeek Sparse Attention)"

#: (config, recorder model, the start of SGLang 0.5.23's first error or None, the step that
#: raised it), each answered by the oracle (QA s2 probes q01-q26, r01).
ORACLE_0_5_23: tuple[tuple[dict[str, Any], str, str | None, str | None], ...] = (
    (
        {"enable_lmcache": True, "enable_hierarchical_cache": True},
        "llama",
        "--enable-lmcache and --enable-hierarchical-cache are mutually exclusive",
        _CACHE,
    ),
    (
        {"enable_lmcache": True, "disable_radix_cache": True},
        "llama",
        "--enable-lmcache requires radix cache to be enabled",
        _CACHE,
    ),
    (
        {"enable_lmcache": True, "speculative_algorithm": "NGRAM"},
        "llama",
        f"{_LMC} does not yet support speculative decoding",
        _CACHE,
    ),
    (
        {"tp_size": 2, "enable_lmcache": True, "attn_dp_size": 2},
        "llama",
        f"{_LMC} does not yet support DP attention",
        _CACHE,
    ),
    ({"tp_size": 4, "dcp_size": 2, "enable_lmcache": True}, "deepseek_v3", _DCP_LMCACHE, _CACHE),
    (
        {
            "enable_lmcache": True,
            "hicache_host_memory_mode": "buffer_only",
            "hicache_storage_backend": "file",
        },
        "llama",
        "--hicache-host-memory-mode=buffer_only is a HiCache-only mode",
        _CACHE,
    ),
    (
        {"enable_lmcache": True, "disaggregation_mode": "prefill"},
        "llama",
        f"{_LMC} currently supports colocated prefill/decode scheduling only",
        _CACHE,
    ),
    # A decode server has turned the radix cache off (R-DECODE-RADIX) ...
    (
        {"enable_lmcache": True, "disaggregation_mode": "decode"},
        "llama",
        "--enable-lmcache requires radix cache to be enabled",
        _CACHE,
    ),
    # ... unless it keeps it: then the PD role.
    (
        {
            "enable_lmcache": True,
            "disaggregation_mode": "decode",
            "disaggregation_decode_enable_radix_cache": True,
        },
        "llama",
        f"{_LMC} currently supports colocated prefill/decode scheduling only",
        _CACHE,
    ),
    ({"enable_lmcache": True}, "llama", None, None),
    # HiCache's own decode-CP pass runs first.
    (
        {"tp_size": 4, "dcp_size": 2, "enable_hierarchical_cache": True, "enable_lmcache": True},
        "deepseek_v3",
        _DCP_LMCACHE,
        "handle_hicache",
    ),
    (
        {"tp_size": 4, "dcp_size": 2, "enable_hierarchical_cache": True, "enable_hisparse": True},
        "deepseek_v3",
        "--enable-hisparse with --dcp-size > 1 is not supported",
        "handle_hicache",
    ),
    (
        {"disaggregation_decode_enable_offload_kvcache": True},
        "llama",
        f"{_OFFLOAD} for decode side.",
        _CACHE,
    ),
    (
        {"disaggregation_mode": "decode", "disaggregation_decode_enable_offload_kvcache": True},
        "llama",
        f"{_OFFLOAD} when hicache-storage-backend is provided.",
        _CACHE,
    ),
    (
        {
            "disaggregation_mode": "decode",
            "disaggregation_decode_enable_offload_kvcache": True,
            "disaggregation_decode_retraction_backup": "cpu_tensor",
        },
        "llama",
        f"{_OFFLOAD} when hicache-storage-backend is provided.",
        _CACHE,
    ),
    (
        {
            "disaggregation_mode": "decode",
            "hicache_storage_backend": "file",
            "disaggregation_decode_enable_offload_kvcache": True,
            "disaggregation_decode_retraction_backup": "host_pool",
        },
        "llama",
        "The arguments disaggregation-decode-enable-offload-kvcache and "
        "disaggregation-decode-retraction-backup=host_pool are mutually exclusive",
        _CACHE,
    ),
    (
        {
            "disaggregation_mode": "decode",
            "hicache_storage_backend": "file",
            "disaggregation_decode_enable_offload_kvcache": True,
        },
        "llama",
        None,
        None,
    ),
    (
        {"tp_size": 8, "enable_hisparse": True},
        "deepseek_v32",
        "Hierarchical sparse attention currently requires --disable-radix-cache.",
        "check_server_args",
    ),
    (
        {"tp_size": 8, "enable_hisparse": True, "disable_radix_cache": True},
        "deepseek_v32",
        None,
        None,
    ),
    (
        {"enable_hisparse": True, "disable_radix_cache": True},
        "llama",
        _HISPARSE_MODEL,
        "check_server_args",
    ),
    (
        {"tp_size": 4, "enable_hisparse": True, "disable_radix_cache": True},
        "qwen3_moe",
        _HISPARSE_MODEL,
        "check_server_args",
    ),
    (
        {
            "tp_size": 8,
            "disaggregation_mode": "decode",
            "disaggregation_decode_enable_radix_cache": True,
            "enable_hisparse": True,
        },
        "deepseek_v32",
        "--disaggregation-decode-enable-radix-cache is incompatible with --enable-hisparse",
        "handle_pd_disaggregation",
    ),
    # DeepSeek's DSA decode-CP override refuses HiSparse as it does HiCache (DCP-DSA-HICACHE).
    (
        {"tp_size": 8, "dcp_size": 2, "enable_hisparse": True, "disable_radix_cache": True},
        "deepseek_v32",
        "DSA DCP does not support HiSparse or HiCache.",
        "handle_model_specific_adjustments",
    ),
    # A decode server's radix cache is off already.
    (
        {"tp_size": 8, "disaggregation_mode": "decode", "enable_hisparse": True},
        "deepseek_v32",
        None,
        None,
    ),
)


@pytest.mark.parametrize("config,name,error,step", ORACLE_0_5_23)
def test_0_5_23_refuses_what_it_refuses(
    config: dict[str, Any], name: str, error: str | None, step: str | None
) -> None:
    cfg = Config(**config, platform="cuda", gpu_sm=90)
    report = validate(cfg, model(name), explain=False, sglang_version="0.5.23")
    assert_sglang_answer(report, error, step)


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
def test_before_0_5_23_lmcache_is_checked_only_under_hicache_decode_cp(version: str) -> None:
    """0.5.18 and 0.5.19 have --enable-lmcache but check it only in
    resolve_hicache_dcp_compatibility; handle_cache_compatibility's LMCache block is new in
    0.5.23."""
    for alone in (
        {"enable_lmcache": True, "enable_hierarchical_cache": True},
        {"enable_lmcache": True, "disable_radix_cache": True},
        {"enable_lmcache": True, "disaggregation_mode": "prefill"},
    ):
        assert rule_ids(alone, "llama", version) == []
        assert rule_ids(alone, "llama", "0.5.23")[0].startswith("LMCACHE-")
    dcp = {"tp_size": 4, "dcp_size": 2, "enable_hierarchical_cache": True, "enable_lmcache": True}
    assert rule_ids(dcp, "deepseek_v3", version) == ["HICACHE-DCP-LMCACHE"]


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
def test_offload_and_hisparse_checks_in_every_0_5_release(version: str) -> None:
    offload = {"disaggregation_decode_enable_offload_kvcache": True}
    assert rule_ids(offload, "llama", version) == [
        "DECODE-OFFLOAD-DECODE",
        "DECODE-OFFLOAD-STORAGE",
    ]
    decode_radix = {
        "tp_size": 8,
        "disaggregation_mode": "decode",
        "disaggregation_decode_enable_radix_cache": True,
        "enable_hisparse": True,
    }
    assert rule_ids(decode_radix, "deepseek_v32", version)[0] == "PD-DECODE-RADIX-HISPARSE"
    # 0.5.18/0.5.19's model assert names no MiniMax M3 (0.5.23's does).
    llama = validate(
        Config(enable_hisparse=True, disable_radix_cache=True),
        model("llama"),
        explain=False,
        sglang_version=version,
    )
    assert [v.rule for v in llama.violations] == ["HISPARSE-MODEL"]
    assert llama.violations[0].message.endswith("and DeepSeek V4 now. ")


def test_0_4_6_has_none_of_the_flags() -> None:
    for field in ("enable_lmcache", "disaggregation_decode_enable_offload_kvcache"):
        flag = field.upper().replace("_", "-")
        assert rule_ids({field: True}, "llama", "0.4.6.post5") == [f"FLAG-ABSENT-{flag}"]


def test_a_pasted_command_reads_the_flags() -> None:
    line = (
        "python -m sglang.launch_server --tp 1 --enable-lmcache --enable-hisparse "
        "--disaggregation-decode-enable-offload-kvcache"
    )
    parsed = parse_sglang_command(line)
    assert parsed.values == {
        "tp_size": 1,
        "enable_lmcache": True,
        "enable_hisparse": True,
        "disaggregation_decode_enable_offload_kvcache": True,
    }


# --- R-DSA-KV-DTYPE: the report and the memory model read one step -------------------------


def _kv_dtype(config: dict[str, Any], version: str = "0.5.23") -> Any:
    report = validate(
        Config(tp_size=8, **config), model("deepseek_v32"), explain=False, sglang_version=version
    )
    assert report.valid, report.violations
    return report.resolved_env["kv_cache_dtype"]


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
def test_dsa_kv_cache_dtype_resolves(version: str) -> None:
    """The oracle (SM90): auto and bf16 become bfloat16, fp8_e4m3 stays (QA s2: 159 configs
    meshsat reported as given). SM100: auto is fp8_e4m3 (`major >= 10`, from the source). No
    GPU class: SGLang's choice is not known, auto stays. 0.4.6.post5 has no such step."""
    sm90 = {"platform": "cuda", "gpu_sm": 90}
    assert _kv_dtype(sm90, version) == "bfloat16"
    assert _kv_dtype({**sm90, "kv_cache_dtype": "bf16"}, version) == "bfloat16"
    assert _kv_dtype({**sm90, "kv_cache_dtype": "fp8_e4m3"}, version) == "fp8_e4m3"
    assert _kv_dtype({"platform": "cuda", "gpu_sm": 100}, version) == "fp8_e4m3"
    assert _kv_dtype({"platform": "hip"}, version) == "bfloat16"
    assert _kv_dtype({"platform": "cuda"}, version) == "auto"
    assert _kv_dtype({"platform": "npu"}, version) == "auto"
    llama = validate(Config(platform="cuda", gpu_sm=90), model("llama"), explain=False)
    assert llama.resolved_env["kv_cache_dtype"] == "auto"


def test_0_4_6_keeps_the_dsa_kv_cache_dtype() -> None:
    """0.4.6.post5 has no DSA class (its loader refuses the architecture) and no step."""
    report = validate(
        Config(tp_size=8, gpu_sm=100), model("deepseek_v32"), sglang_version="0.4.6.post5"
    )
    assert report.resolved_env["kv_cache_dtype"] == "auto"
    assert dsa_kv_cache_dtype("auto", None, "0.4.6.post5") == "auto"


@pytest.mark.parametrize("gpu", ["H100", "B200", "MI300X"])
@pytest.mark.parametrize("typed", [None, "auto", "bf16", "fp8_e4m3"])
def test_memory_sizes_the_pool_in_the_reported_dtype(gpu: str, typed: str | None) -> None:
    """The memory model's dtype is the step `validate` reports, for the GPU's fields."""
    mm = MemoryModel("deepseek-ai/DeepSeek-V3.2-Exp", gpu, kv_cache_dtype=typed)
    fields = mm.gpu.layout_fields
    config = Config(tp_size=8, kv_cache_dtype=typed or "auto", **fields)
    report = validate(config, model("deepseek_v32"), explain=False, sglang_version="0.5.23")
    assert mm.kv_cache_dtype == report.resolved_env["kv_cache_dtype"]
