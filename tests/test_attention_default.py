"""The attention back-end an unset `--attention-backend` resolves to (R-ATTN-BACKEND's
default, `solver/catalogue/attention_default.py`), against SGLang.

Two independent oracles:
- SGLang 0.5.23's own resolution and `check_server_args()` (the shared oracle,
  `oracle.py --launch`, platform cuda) with its platform facts set per GPU class (H100:
  is_sm90, capability (9, 0); B200: is_sm100, (10, 0); RTX PRO 6000: is_sm120, (12, 0);
  A100: (8, 0); FlashInfer available, as a CUDA install has it). `RECORDED` keeps its
  resolved back-end for every GPU class x model x speculative setting with no back-end
  flag; `VERDICTS` its answers on configs meshsat judged otherwise before.
- `sglang_default` below: `get_default_attn_backend` and the model overrides of the
  releases' source (0.5.18 `ServerArgs._get_default_attn_backend`, 0.5.19/0.5.23
  `model_override_base.get_default_attn_backend`, `_deepseek_family_overrides`, 0.5.23's
  `_mimo_v2_overrides`), written out in plain Python, brute-forced over a grid.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.catalogue.attention_default import sinks_decide
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.validation.validate import Report, environment, validate

LLAMA = "LlamaForCausalLM"
QWEN3_MOE = "Qwen3MoeForCausalLM"
DSV3 = "DeepseekV3ForCausalLM"
DSV32 = "DeepseekV32ForCausalLM"
MIMO = "MiMoV2FlashForCausalLM"
GPT_OSS = "GptOssForCausalLM"
GRANITE_SWA = "GraniteSWAForCausalLM"
ORACLE_MODELS = {
    "llama": LLAMA,
    "qwen3_moe": QWEN3_MOE,
    "deepseek_v3": DSV3,
    "deepseek_v32": DSV32,
    "mimo_v2": MIMO,
}


def spec_of(architecture: str) -> ModelSpec:
    return ModelSpec(architecture=architecture, is_deepseek_dsa=architecture == DSV32)


SPECS: dict[str, dict[str, Any]] = {
    "none": {},
    "eagle": {"speculative_algorithm": "EAGLE"},
    "eagle_topk1": {
        "speculative_algorithm": "EAGLE",
        "speculative_eagle_topk": 1,
        "speculative_num_steps": 3,
        "speculative_num_draft_tokens": 4,
    },
    "eagle_topk4": {
        "speculative_algorithm": "EAGLE",
        "speculative_eagle_topk": 4,
        "speculative_num_steps": 3,
        "speculative_num_draft_tokens": 8,
    },
}

#: SGLang 0.5.23's resolved attention_backend, no back-end flag, tp 8, KV auto:
#: model -> GPU class -> one back-end per SPECS key (none, eagle, eagle_topk1, eagle_topk4).
RECORDED: dict[str, dict[int, tuple[str, str, str, str]]] = {
    "llama": {
        80: ("flashinfer",) * 4,
        90: ("fa3", "fa3", "fa3", "flashinfer"),
        100: ("trtllm_mha", "flashinfer", "trtllm_mha", "flashinfer"),
        120: ("flashinfer",) * 4,
    },
    "qwen3_moe": {
        80: ("flashinfer",) * 4,
        90: ("fa3", "fa3", "fa3", "flashinfer"),
        100: ("trtllm_mha", "flashinfer", "trtllm_mha", "flashinfer"),
        120: ("flashinfer",) * 4,
    },
    "deepseek_v3": {
        80: ("triton",) * 4,
        90: ("fa3",) * 4,
        100: ("trtllm_mla",) * 4,
        120: ("triton",) * 4,
    },
    "deepseek_v32": {sm: ("dsa",) * 4 for sm in (80, 90, 100, 120)},
    "mimo_v2": {
        80: ("flashinfer",) * 4,
        90: ("fa3", "fa3", "fa3", "flashinfer"),
        100: ("fa4",) * 4,
        120: ("flashinfer",) * 4,
    },
}


def _report(
    architecture: str, config: dict[str, Any], gpu_sm: int | None, version: str = "0.5.23"
) -> Report:
    gpu: dict[str, Any] = {"platform": "cuda"}
    if gpu_sm is not None:
        gpu["gpu_sm"] = gpu_sm
    return validate(
        {"tp_size": 8, **config, **gpu},
        spec_of(architecture),
        explain=False,
        sglang_version=version,
    )


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_the_default_is_sglang_0_5_23s_on_each_gpu_class(name: str) -> None:
    for sm, backends in RECORDED[name].items():
        for spec, expected in zip(SPECS, backends, strict=True):
            got = _report(ORACLE_MODELS[name], SPECS[spec], sm).resolved["attention_backend"]
            # MiMo V2's attention sinks are config flags meshsat does not read: where they
            # decide between FlashInfer and Triton the back-end stays unset.
            if name == "mimo_v2" and expected == "flashinfer":
                assert got is None, (sm, spec)
            else:
                assert got == expected, (name, sm, spec)


@pytest.mark.parametrize("sm", [80, 90, 100, 120])
def test_sinks_decide_is_where_the_mimo_default_stays_unset(sm: int) -> None:
    """`sinks_decide` (which UNO's FA3 check reads after the speculative handler, with the
    typed top-k) holds exactly where R-ATTN-BACKEND leaves MiMo V2's back-end unset, and
    never for a model without sinks to decide."""
    sinks = sinks_decide("0.5.23", raw=True)
    for name, spec in itertools.product(("mimo_v2", "llama"), SPECS):
        architecture = ORACLE_MODELS[name]
        report = _report(architecture, SPECS[spec], sm)
        typed = Config(tp_size=8, platform="cuda", gpu_sm=sm, **SPECS[spec])
        raw = environment(typed, spec_of(architecture))
        unset = report.resolved["attention_backend"] is None
        assert evaluate(sinks, {**raw, **report.resolved}, raw) is unset, (name, sm, spec)


#: (model, GPU class, config, SGLang 0.5.23's first error or None): configs meshsat judged
#: otherwise while it left the default unset.
VERDICTS: tuple[tuple[str, int, dict[str, Any], str | None], ...] = (
    # One split back-end beside an FP4 cache: the base is Hopper's FA3, the pair is equal.
    (
        "llama",
        90,
        {"kv_cache_dtype": "fp4_mx_block16", "prefill_attention_backend": "fa3"},
        "KV4 MHA expects attention_backend to be one of ['triton', 'torch_native', "
        "'flex_attention', 'trtllm_mha'], but got fa3",
    ),
    (
        "llama",
        90,
        {"kv_cache_dtype": "fp4_mx_block16", "decode_attention_backend": "fa3"},
        "KV4 MHA expects attention_backend to be one of",
    ),
    (
        "deepseek_v3",
        90,
        {"kv_cache_dtype": "fp4_mx_block16", "decode_attention_backend": "fa3"},
        "KV4 MLA expects attention_backend to be one of ['flashinfer', 'trtllm_mla'], but got fa3",
    ),
    # The pair differs from the default: a warning only.
    ("llama", 90, {"kv_cache_dtype": "fp4_mx_block16", "decode_attention_backend": "triton"}, None),
    # SM100: DeepSeek V3's trtllm_mla takes no fp8_e5m2 cache; MiMo V2's fa4 asks an FP4
    # cache's decode back-end of its list; with a draft tree fa4 keeps pages of 1.
    (
        "deepseek_v3",
        100,
        {"kv_cache_dtype": "fp8_e5m2"},
        "TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, bf16, or auto",
    ),
    (
        "deepseek_v3",
        100,
        SPECS["eagle_topk4"],
        "speculative_eagle_topk > 1 with page_size > 1 is only supported on",
    ),
    (
        "mimo_v2",
        100,
        {"kv_cache_dtype": "fp4_mx_block16"},
        "KV4 FA4 MHA expects decode_attention_backend to be one of",
    ),
    ("mimo_v2", 100, SPECS["eagle_topk4"], None),
    # The speculative handler's TRT-LLM MHA check reads the resolved pair.
    (
        "llama",
        90,
        {**SPECS["eagle"], "decode_attention_backend": "trtllm_mha"},
        "trtllm_mha backend only supports topk = 1 for speculative decoding.",
    ),
)


@pytest.mark.parametrize("name,sm,config,error", VERDICTS)
def test_checks_read_the_default_as_sglang_0_5_23_does(
    name: str, sm: int, config: dict[str, Any], error: str | None
) -> None:
    report = _report(ORACLE_MODELS[name], config, sm)
    if error is None:
        assert report.valid, [v.message for v in report.violations]
    else:
        assert not report.valid
        assert report.violations[0].message.startswith(error), report.violations[0].message


def test_no_gpu_class_leaves_it_unset() -> None:
    for architecture in (LLAMA, DSV3, MIMO):
        assert _report(architecture, {}, None).resolved["attention_backend"] is None
    # The DSA back-end needs no GPU class.
    assert _report(DSV32, {}, None).resolved["attention_backend"] == "dsa"
    # ROCm, NPU and CPU fall-backs are not modelled.
    for platform in ("hip", "npu", "cpu"):
        report = validate(
            {"tp_size": 8, "platform": platform, "gpu_sm": 90},
            spec_of(LLAMA),
            explain=False,
            sglang_version="0.5.23",
        )
        assert report.resolved["attention_backend"] is None
    # 0.4.6.post5 picks it in its model runner, after every argument check.
    assert _report(LLAMA, {}, 90, "0.4.6.post5").resolved["attention_backend"] is None


# --- the releases' source, written out --------------------------------------------------
_OVERRIDDEN = (GPT_OSS,)
_FAMILY_TRTLLM = (DSV3,)
_MLA = (DSV3, DSV32)


def sglang_default(
    release: str,
    arch: str,
    sm: int,
    algorithm: str | None,
    topk: int | None,
    page: int | None,
    split: dict[str, str],
) -> str | None:
    """The base back-end SGLang resolves (None: meshsat is to leave it unset)."""
    prefill = split.get("prefill_attention_backend")
    decode = split.get("decode_attention_backend")
    if prefill is not None and prefill == decode:
        return prefill
    none_named = prefill is None and decode is None
    hopper, sm100 = sm // 10 == 9, sm // 10 == 10
    if none_named:  # the model overrides
        if arch == DSV32:
            return "dsa"
        if arch in _FAMILY_TRTLLM and sm100:
            return "trtllm_mla"
        if release == "0.5.23" and arch == MIMO and sm100:
            return "fa4"
    if arch in _OVERRIDDEN:
        return None
    if arch in _MLA:
        return "fa3" if hopper else "flashinfer" if sm100 else "triton"
    topk_one = topk is None or (topk == 1 and page in (None, 1))
    if hopper and topk_one:
        return "fa3"
    typed = algorithm is None or topk is not None
    if release == "0.5.23":
        typed = typed or algorithm == "DFLASH"
    if sm100 and topk_one and typed:
        return "fa4" if arch == MIMO else "trtllm_mha"
    if arch == MIMO:
        return None  # its sinks decide, unknown here
    return "triton" if arch == GRANITE_SWA else "flashinfer"


_SPLITS: tuple[dict[str, str], ...] = (
    {},
    {"prefill_attention_backend": "triton"},
    {"decode_attention_backend": "triton"},
    {"prefill_attention_backend": "triton", "decode_attention_backend": "triton"},
)


@pytest.mark.parametrize("release", ["0.5.18", "0.5.19", "0.5.23"])
def test_the_default_is_the_releases_source(release: str) -> None:
    archs = (LLAMA, DSV3, DSV32, MIMO, GPT_OSS, GRANITE_SWA)
    grid = itertools.product(
        archs,
        (80, 89, 90, 100, 103, 110, 120),
        (None, "EAGLE", "DFLASH"),
        (None, 1, 4),
        (None, 1, 16),
        _SPLITS,
    )
    seen = 0
    for arch, sm, algorithm, topk, page, split in grid:
        config: dict[str, Any] = {**split}
        if algorithm is not None:
            config["speculative_algorithm"] = algorithm
        if topk is not None:
            config["speculative_eagle_topk"] = topk
        if page is not None:
            config["page_size"] = page
        got = _report(arch, config, sm, release).resolved["attention_backend"]
        expected = sglang_default(release, arch, sm, algorithm, topk, page, split)
        assert got == expected, (release, arch, sm, algorithm, topk, page, split)
        seen += 1
    assert seen == 6 * 7 * 3 * 3 * 3 * 4


# --- deterministic inference's fill, which leaves the model overrides' picks alone --------
DSV2 = "DeepseekV2ForCausalLM"
MISTRAL = "MistralLarge3ForCausalLM"
#: `_deterministic_is_deepseek_model` (0.5.18 to 0.5.23).
_DET_DEEPSEEK = (DSV2, DSV3, DSV32, MISTRAL)


def sglang_deterministic(release: str, arch: str, sm: int) -> str | None:
    """The base back-end with `--enable-deterministic-inference` and no back-end flag: the
    model overrides first (the same ones as `sglang_default`: DeepSeek V2 has none, MiMo V2
    picks fa4 on SM100 in 0.5.23 only), then `_deterministic_attention_backend`'s fill. None:
    an override meshsat does not model (gpt-oss) may pick it."""
    sm100 = sm // 10 == 10
    if arch == DSV32:
        return "dsa"
    if arch in (DSV3, MISTRAL) and sm100:
        return "trtllm_mla"
    if release == "0.5.23" and arch == MIMO and sm100:
        return "fa4"
    if arch == GPT_OSS:
        return None
    if sm // 10 in (10, 12):
        return "triton" if arch in _DET_DEEPSEEK else "flashinfer"
    return "fa3"


@pytest.mark.parametrize("release", ["0.5.18", "0.5.19", "0.5.23"])
def test_the_deterministic_fill_is_the_releases_source(release: str) -> None:
    """R-DETERMINISTIC reads the model overrides' picks from `attention_default` (one
    declaration): where one names the back-end, it is theirs, else the fill's."""
    archs = (LLAMA, DSV2, DSV3, DSV32, MISTRAL, MIMO, GPT_OSS)
    for arch, sm in itertools.product(archs, (80, 90, 100, 103, 120)):
        spec = ModelSpec(architecture=arch, is_deepseek_dsa=arch == DSV32)
        report = validate(
            {
                "tp_size": 8,
                "platform": "cuda",
                "gpu_sm": sm,
                "enable_deterministic_inference": True,
            },
            spec,
            explain=False,
            sglang_version=release,
        )
        got = report.resolved["attention_backend"]
        assert got == sglang_deterministic(release, arch, sm), (release, arch, sm, got)


#: SGLang 0.5.23's verdict and resolved back-end (oracle --launch, deterministic inference,
#: no back-end flag, per GPU class): a model override's pick outside the deterministic
#: back-ends is refused (DeepSeek V3.2's dsa, V3's trtllm_mla on SM100).
DETERMINISTIC_RECORDED: dict[str, dict[int, tuple[bool, str]]] = {
    "llama": {
        80: (True, "fa3"),
        90: (True, "fa3"),
        100: (True, "flashinfer"),
        120: (True, "flashinfer"),
    },
    "deepseek_v3": {
        80: (True, "fa3"),
        90: (True, "fa3"),
        100: (False, "trtllm_mla"),
        120: (True, "triton"),
    },
    "deepseek_v32": {
        80: (False, "dsa"),
        90: (False, "dsa"),
        100: (False, "dsa"),
        120: (False, "dsa"),
    },
    "mimo_v2": {
        80: (True, "fa3"),
        90: (True, "fa3"),
        100: (True, "fa4"),
        120: (True, "flashinfer"),
    },
}


@pytest.mark.parametrize("name", sorted(DETERMINISTIC_RECORDED))
def test_deterministic_inference_answers_as_sglang_0_5_23(name: str) -> None:
    for sm, (accepted, backend) in DETERMINISTIC_RECORDED[name].items():
        report = _report(ORACLE_MODELS[name], {"enable_deterministic_inference": True}, sm)
        assert (report.valid, report.resolved["attention_backend"]) == (accepted, backend), sm
