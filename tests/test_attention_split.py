"""Split attention back-ends (`--prefill-attention-backend`, `--decode-attention-backend`)
and the attention handler's own changes, against SGLang's answers.

The resolution corpus (tests/fixtures/fidelity/) predates the two fields, so SGLang 0.5.23's
own answers on an H100 (the shared oracle, `oracle.py --launch`, platform cuda: SM90) are
kept here; what only another GPU class or release decides is held to the releases' source
(`handle_attention_backend_compatibility`: overrides.py `_attention_backend_default`,
`_mla_kv_cache_dtype_checks`, `_cutedsl_prefill_backend_fill`,
`_attention_backend_fa3_fp8_fallback`; `handle_kv4_compatibility`;
`handle_nvfp4_prefill_kv_dequant_dtype`; 0.5.23's `_handle_deprecated_args`).
"""

from __future__ import annotations

from typing import Any

import pytest

from fidelity.compare import model
from meshsat.solver.inputs.sglang_cmdline import parse_sglang_command, release_flags
from meshsat.solver.validation.validate import Report, validate

H100: dict[str, Any] = {"platform": "cuda", "gpu_sm": 90}
B200: dict[str, Any] = {"platform": "cuda", "gpu_sm": 100}
RTX: dict[str, Any] = {"platform": "cuda", "gpu_sm": 120}
A100: dict[str, Any] = {"platform": "cuda", "gpu_sm": 80}
FP4 = {"kv_cache_dtype": "fp4_mx_block16"}
NVFP4 = {"kv_cache_dtype": "nvfp4"}


def _split(prefill: str | None = None, decode: str | None = None) -> dict[str, str]:
    out = {}
    if prefill:
        out["prefill_attention_backend"] = prefill
    if decode:
        out["decode_attention_backend"] = decode
    return out


#: (model, config, SGLang 0.5.23's first error on an H100 or None, its resolved
#: attention_backend where it accepts and meshsat resolves one: None = not compared, an
#: unset back-end being the GPU's default, which meshsat leaves unset).
ORACLE_0_5_23: tuple[tuple[str, dict[str, Any], str | None, str | None], ...] = (
    (
        "deepseek_v3",
        {"tp_size": 8, **_split("fa3", "trtllm_mla")},
        "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x). Please use a "
        "different backend.",
        None,
    ),
    (
        "llama",
        {"tp_size": 2, **_split("cutedsl_mla")},
        "CuteDSL MLA only supports decoding for now",
        None,
    ),
    (
        "llama",
        {"tp_size": 2, **_split("triton", "cutedsl_mla")},
        "CuteDSL MLA backend is only supported on Blackwell GPUs (SM100). Please use a "
        "different backend.",
        None,
    ),
    # tokenspeed_mla is an alias of cutedsl_mla (decode), of trtllm_mla (prefill).
    (
        "llama",
        {"tp_size": 2, **_split(decode="tokenspeed_mla")},
        "CuteDSL MLA backend is only supported on Blackwell GPUs (SM100). Please use a "
        "different backend.",
        None,
    ),
    (
        "llama",
        {"tp_size": 2, "attention_backend": "tokenspeed_mla"},
        "CuteDSL MLA backend is only supported on Blackwell GPUs (SM100). Please use a "
        "different backend.",
        None,
    ),
    ("llama", {"tp_size": 2, **_split("tokenspeed_mla")}, None, None),
    # Equal split back-ends are the attention back-end, over --attention-backend.
    ("llama", {"tp_size": 2, **_split("fa3", "fa3")}, None, "fa3"),
    ("llama", {"tp_size": 2, "attention_backend": "triton", **_split("fa3", "fa3")}, None, "fa3"),
    ("llama", {"tp_size": 2, **_split("trtllm_mha", "trtllm_mha")}, None, "trtllm_mha"),
    # FA3 takes FP8 only as e4m3.
    (
        "llama",
        {"tp_size": 2, "attention_backend": "fa3", "kv_cache_dtype": "fp8_e5m2"},
        None,
        "triton",
    ),
    ("llama", {"tp_size": 2, "kv_cache_dtype": "fp8_e5m2", **_split("fa3", "fa3")}, None, "triton"),
    (
        "llama",
        {
            "tp_size": 2,
            "attention_backend": "fa3",
            "kv_cache_dtype": "fp8_e5m2",
            **_split("triton"),
        },
        None,
        "triton",
    ),
    # TRTLLM MHA: the prefill side of the resolved pair carries the prefill-CP check.
    ("llama", {"tp_size": 2, **_split("trtllm_mha", "triton")}, None, None),
    ("llama", {"tp_size": 2, **_split(decode="trtllm_mha")}, None, None),
    (
        "llama",
        {
            "tp_size": 4,
            "attn_cp_size": 2,
            "enable_prefill_cp": True,
            "cp_strategy": "zigzag",
            **_split("trtllm_mha"),
        },
        "Prefill context parallelism with the TRTLLM MHA prefill backend requires SM100",
        None,
    ),
    (
        "llama",
        {
            "tp_size": 4,
            "attn_cp_size": 2,
            "enable_prefill_cp": True,
            "cp_strategy": "zigzag",
            **_split(decode="trtllm_mha"),
        },
        None,
        None,
    ),
    # KV4: a pair that differs only warns; an FA4 prefill asks its decode back-end.
    ("llama", {"tp_size": 2, **FP4, **_split("triton", "fa3")}, None, None),
    ("deepseek_v3", {"tp_size": 8, **FP4, **_split("triton", "fa3")}, None, None),
    (
        "llama",
        {"tp_size": 2, **FP4, **_split("fa4", "fa3")},
        "KV4 FA4 MHA expects decode_attention_backend to be one of ['triton', 'torch_native', "
        "'flex_attention'], but got fa3",
        None,
    ),
    ("llama", {"tp_size": 2, **FP4, **_split("fa4", "triton")}, None, None),
    (
        "llama",
        {"tp_size": 2, **FP4, "attention_backend": "fa4"},
        "KV4 FA4 MHA expects decode_attention_backend to be one of ['triton', 'torch_native', "
        "'flex_attention'], but got fa4",
        None,
    ),
    (
        "deepseek_v3",
        {"tp_size": 8, **FP4, **_split("fa4", "fa3")},
        "KV4 FA4 MLA expects decode_attention_backend to be one of ['flashinfer', "
        "'trtllm_mla'], but got fa3",
        None,
    ),
    ("deepseek_v3", {"tp_size": 8, **FP4, **_split("fa4", "flashinfer")}, None, None),
    (
        "llama",
        {"tp_size": 2, **FP4, **_split("triton", "triton")},
        None,
        "triton",
    ),
    # nvfp4: the decode back-end named must be trtllm_mha; trtllm_mha prefill is SM100's.
    (
        "llama",
        {"tp_size": 2, **NVFP4, **_split("flashinfer", "triton")},
        "NVFP4 decode requires --decode-attention-backend=trtllm_mha; got 'triton'.",
        None,
    ),
    (
        "llama",
        {"tp_size": 2, **NVFP4, **_split(decode="cutedsl_mla")},
        "NVFP4 decode requires --decode-attention-backend=trtllm_mha; got 'cutedsl_mla'.",
        None,
    ),
    (
        "llama",
        {"tp_size": 2, **NVFP4, "attention_backend": "trtllm_mha"},
        "Native NVFP4 prefill currently requires SM100; use "
        "--prefill-kv-cache-dequant-dtype=fp8_e4m3 on this platform.",
        None,
    ),
)


def _report(version: str, name: str, config: dict[str, Any], gpu: dict[str, Any]) -> Report:
    return validate({**config, **gpu}, model(name), explain=False, sglang_version=version)


def _rules(version: str, name: str, config: dict[str, Any], gpu: dict[str, Any]) -> list[str]:
    return [v.rule for v in _report(version, name, config, gpu).violations]


@pytest.mark.parametrize("name,config,error,backend", ORACLE_0_5_23)
def test_0_5_23_answers_as_its_resolution_on_an_h100(
    name: str, config: dict[str, Any], error: str | None, backend: str | None
) -> None:
    report = _report("0.5.23", name, config, H100)
    if error is None:
        assert report.valid, [v.message for v in report.violations]
    else:
        assert not report.valid
        assert report.violations[0].message.startswith(error), report.violations[0].message
    if backend is not None:
        assert report.resolved["attention_backend"] == backend


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
def test_every_0_5_release_reads_the_split_fields(version: str) -> None:
    trtllm_mla = {"tp_size": 8, **_split("fa3", "trtllm_mla")}
    assert _rules(version, "deepseek_v3", trtllm_mla, H100)[:1] == ["ATTN-TRTLLM-MLA-BLACKWELL"]
    assert not _rules(version, "deepseek_v3", trtllm_mla, B200)
    assert _rules(version, "llama", _split("cutedsl_mla"), B200) == ["ATTN-CUTEDSL-MLA-PREFILL"]
    # A CuteDSL decode on SM100 prefills with trtllm_mla; with an FP8 e5m2 cache it fails.
    cutedsl = _report(version, "deepseek_v3", {"tp_size": 8, **_split(decode="cutedsl_mla")}, B200)
    assert cutedsl.valid and cutedsl.resolved["prefill_attention_backend"] == "trtllm_mla"
    e5m2 = {"tp_size": 8, "kv_cache_dtype": "fp8_e5m2", **_split(decode="cutedsl_mla")}
    assert _rules(version, "deepseek_v3", e5m2, B200) == ["ATTN-CUTEDSL-MLA-KV"]
    # TRTLLM MLA takes fp8_e4m3, bf16 or auto (fp4_e2m1 up to 0.5.19).
    trtllm_e5m2 = {"tp_size": 8, "kv_cache_dtype": "fp8_e5m2", **_split(decode="trtllm_mla")}
    assert _rules(version, "deepseek_v3", trtllm_e5m2, B200) == ["ATTN-TRTLLM-MLA-KV"]
    # The decode side of TRTLLM MHA: Hopper, SM100 and SM120.
    decode = _split(decode="trtllm_mha")
    assert _rules(version, "llama", decode, A100) == ["ATTN-TRTLLM-MHA-DECODE-GPU"]
    assert not _rules(version, "llama", decode, H100)
    assert (
        _report(version, "llama", _split("fa3", "fa3"), H100).resolved["attention_backend"] == "fa3"
    )


def test_0_5_18_runs_trtllm_mha_prefill_on_sm100_only() -> None:
    prefill = _split("trtllm_mha", "triton")
    assert _rules("0.5.18", "llama", prefill, H100) == ["ATTN-TRTLLM-MHA-GPU"]
    assert (
        _report("0.5.18", "llama", prefill, H100)
        .violations[0]
        .message.startswith(
            "TRTLLM MHA backend for prefill is only supported on Blackwell GPUs (SM100)."
        )
    )
    assert not _rules("0.5.19", "llama", prefill, H100)
    # No prefill-CP check in 0.5.18 (0.5.19 and 0.5.23 refuse it off SM100).
    cp = {"tp_size": 4, "attn_cp_size": 2, "enable_prefill_cp": True, "cp_strategy": "zigzag"}
    assert not _rules("0.5.18", "llama", {**cp, **prefill}, B200)
    assert _rules("0.5.19", "llama", {**cp, **prefill}, RTX) == ["ATTN-TRTLLM-MHA-CP-SM100"]


def test_sm120_trtllm_mha_prefill_takes_no_fp8_e4m3_cache() -> None:
    config = {"kv_cache_dtype": "fp8_e4m3", **_split("trtllm_mha")}
    assert _rules("0.5.23", "llama", config, RTX) == ["ATTN-TRTLLM-MHA-SM120-FP8"]
    assert not _rules("0.5.23", "llama", config, B200)
    assert not _rules("0.5.18", "llama", config, B200)


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
def test_tokenspeed_mla_is_its_own_backend_up_to_0_5_19(version: str) -> None:
    # Blackwell (SM12x too) with an fp8_e4m3 cache, on the base or decode field.
    for fields in ({"attention_backend": "tokenspeed_mla"}, _split(decode="tokenspeed_mla")):
        config = {"tp_size": 8, **fields}
        assert _rules(version, "deepseek_v3", config, H100)[:1] == ["ATTN-TOKENSPEED-MLA-BLACKWELL"]
        assert _rules(version, "deepseek_v3", config, RTX) == ["ATTN-TOKENSPEED-MLA-KV"]
        assert not _rules(version, "deepseek_v3", {**config, "kv_cache_dtype": "fp8_e4m3"}, RTX)


def test_tokenspeed_mla_is_cutedsl_mla_in_0_5_23() -> None:
    config = {"tp_size": 8, "attention_backend": "tokenspeed_mla"}
    assert _rules("0.5.23", "deepseek_v3", config, RTX) == ["ATTN-CUTEDSL-MLA-SM100"]
    report = _report("0.5.23", "deepseek_v3", config, B200)
    assert report.valid
    assert {k: report.resolved[k] for k in ("attention_backend", "kv_cache_dtype")} == {
        "attention_backend": "cutedsl_mla",
        "kv_cache_dtype": "fp8_e4m3",
    }
    prefill = _report("0.5.23", "llama", _split("tokenspeed_mla"), H100)
    assert prefill.resolved["prefill_attention_backend"] == "trtllm_mla"


def test_0_4_6_post5_has_no_split_flags() -> None:
    for flag in ("--prefill-attention-backend", "--decode-attention-backend"):
        assert flag not in (release_flags("0.4.6.post5") or {})
        assert flag in (release_flags("0.5.18") or {})
    assert _rules("0.4.6.post5", "llama", _split("fa3"), H100) == [
        "FLAG-ABSENT-PREFILL-ATTENTION-BACKEND"
    ]
    # Nor the FA3 fallback for fp8_e5m2.
    report = _report(
        "0.4.6.post5", "llama", {"attention_backend": "fa3", "kv_cache_dtype": "fp8_e5m2"}, H100
    )
    assert report.resolved["attention_backend"] == "fa3"


def test_a_launch_command_sets_the_split_fields() -> None:
    parsed = parse_sglang_command(
        "python -m sglang.launch_server --model-path m --tp 8 "
        "--prefill-attention-backend fa3 --decode-attention-backend trtllm_mla"
    )
    assert parsed.values["prefill_attention_backend"] == "fa3"
    assert parsed.values["decode_attention_backend"] == "trtllm_mla"
    assert not parsed.ignored


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
def test_intel_xpu_prefills_mla_models_from_0_5_23(version: str) -> None:
    """0.5.18/0.5.19 refuse an MLA model whose resolved prefill back-end is intel_xpu
    (recorded: fidelity records 6739/6778, deepseek_v3 with --prefill-attention-backend
    intel_xpu); 0.5.23 dropped the check. The page then resolves to 128
    (`_intel_xpu_page_constraint`), which also reads the decode side."""
    xpu = {"tp_size": 4, **_split(prefill="intel_xpu")}
    expected = [] if version == "0.5.23" else ["ATTN-XPU-MLA-PREFILL"]
    assert _rules(version, "deepseek_v3", xpu, {"platform": "cuda"}) == expected
    assert _rules(version, "llama", xpu, {"platform": "cuda"}) == []
    decode = _report(version, "llama", {"tp_size": 2, **_split(decode="intel_xpu")}, H100)
    assert decode.resolved["page_size"] == 128
