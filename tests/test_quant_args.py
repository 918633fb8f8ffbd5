"""`--quantization` beside a checkpoint's own method, as each release's loader decides it
(solver/catalogue/quantization.py).

The oracle is each release's own `ModelConfig._verify_quantization`, recorded on every
checkpoint folder aiconfigurator-core bundles, the written ones of
`fidelity/quant_sources.py`, the quantized checkpoints of meshsat's catalogue and a few
more (GPTQ, AWQ, native MXFP8, the sources online MXFP4 requantization reads), with every
choice of the release's `--quantization` and none (`fidelity/quant_args.py` ->
tests/fixtures/quant_args/<version>.json); for `quark_mxfp4`, also the loader's
`get_quant_config`, which refuses the sources it cannot requantize.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from fidelity.checkpoint_resolution import checkpoint_folder
from meshsat.solver import validate
from meshsat.solver.catalogue.quantization import LOADER_RULES, served
from meshsat.solver.errors import InputError
from meshsat.solver.lang.checkpoint_files import HF_QUANT_CONFIG
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.models import catalogue_config
from meshsat.solver.memory.quantized_checkpoints import with_quantization_flag
from tests.cli_helpers import run_cli

aic = pytest.importorskip("aiconfigurator_core")
BUNDLE = Path(aic.__file__).parent / "model_configs"
FIXTURES = Path(__file__).parent / "fixtures"
SOURCES = json.loads((FIXTURES / "quant_sources" / "0.5.23.json").read_text())
VERSIONS = ("0.5.18", "0.5.19", "0.5.23")
RECORDS = {v: json.loads((FIXTURES / "quant_args" / f"{v}.json").read_text()) for v in VERSIONS}
RULES = LOADER_RULES

#: Pairs meshsat judges otherwise, for want of a fact it does not read: MoE-WNA16 takes a
#: GPTQ checkpoint only with `desc_act` off; `--quantization modelopt` takes an MXFP8
#: checkpoint only where ModelOpt's `hf_quant_config.json` names the algorithm.
KNOWN = {
    ("args:gptq-8bit-desc-act", "moe_wna16"): "meshsat accepts",
    ("written:hfq-mxfp8", "modelopt"): "meshsat refuses",
}


#: Folders meshsat refuses to read (one line naming the key): a compressed-tensors config
#: without `config_groups` (SGLang reads that key when it builds the layers, after this
#: check), and a `quantization_config` without `quant_method` that no reader claims
#: (each release refuses it here too).
UNREAD = ["written:compression-config", "written:qc-without-algo"]


#: Folders an older release reads otherwise than 0.5.23, as meshsat does
#: (`checkpoint_files`), and what it makes of them with no `--quantization`: a flat
#: `hf_quant_config.json` is a KeyError ('quantization'), one nested twice is no
#: quantization at all.
_OLDER = {"written:hfq-flat": "error", "written:hfq-nested": "None"}
OLDER_PARSER = {"0.5.18": _OLDER, "0.5.19": _OLDER}


def _folder(tmp: Path, case: str, record: dict[str, Any]) -> Path:
    """The case's checkpoint folder, as the recorder built it."""
    kind, name = case.split(":", 1)
    if kind == "bundled":
        return checkpoint_folder(BUNDLE, name, tmp / "bundled")
    d = tmp / case.replace("/", "--").replace(":", "-")
    d.mkdir()
    hfq = None
    if kind == "written":
        config, hfq = SOURCES["written"][name]
    elif kind == "catalogue":
        config = {"quantization_config": catalogue_config(name)["quantization_config"]}
    else:
        config = record["written"][name]
    (d / "config.json").write_text(json.dumps(config))
    if hfq is not None:
        (d / HF_QUANT_CONFIG).write_text(json.dumps(hfq))
    return d


@functools.cache
def _refused(
    version: str, method: str | None, quantization: str | None, requantizable: bool = True
) -> bool:
    """Whether meshsat's loader rules refuse the pair (they read only the two methods,
    whether online requantization takes the checkpoint, and the platform: one verdict
    a pair)."""
    spec = ModelSpec(quant_method=method, quant_mxfp4_requantizable=requantizable)
    layout: dict[str, Any] = {} if quantization is None else {"quantization": quantization}
    report = validate(layout, spec, explain=False, sglang_version=version)
    return any(v.rule in RULES for v in report.violations)


@pytest.mark.parametrize("version", VERSIONS)
def test_each_pair_is_judged_as_the_release_does(version: str, tmp_path: Path) -> None:
    record = RECORDS[version]
    assert record["sglang"] == version
    seen, unread, known = 0, [], []
    for case, answers in sorted(record["cases"].items()):
        if case in OLDER_PARSER.get(version, {}):
            assert answers["None"].split()[0] == OLDER_PARSER[version][case], case
            continue
        try:
            spec = ModelSpec.from_file(_folder(tmp_path, case, record))
        except InputError:
            unread.append(case)
            continue
        for arg, answer in answers.items():
            quantization = None if arg == "None" else arg
            refused = answer.startswith("error")
            got = _refused(version, spec.quant_method, quantization,
                           spec.quant_mxfp4_requantizable)  # fmt: skip
            if (case, arg) in KNOWN:
                assert got != refused and got == (KNOWN[case, arg] == "meshsat refuses")
                known.append((case, arg))
                continue
            assert got == refused, (case, arg, answer, spec.quant_method)
            seen += 1
    assert sorted(known) == sorted(KNOWN)
    assert seen > 3500, seen
    assert unread == UNREAD, unread


def test_the_record_is_what_fixes_rest_on() -> None:
    """The catalogue's checkpoints, as 0.5.23 takes them: DeepSeek-V3's FP8 refuses MXFP8
    and takes ModelOpt FP4 (requantized online), NVIDIA's NVFP4 export takes any method
    (ModelOpt serves its own), gpt-oss's MXFP4 only itself, and Llama 4 Maverick's
    FBGEMM FP8 loads in no release from 0.5.18. Online MXFP4 requantization passes the
    config check on all of them, and the loader then takes FP8 with dynamic activations
    (DeepSeek) but refuses MXFP4, FBGEMM FP8 and a stated ModelOpt FP8 config."""
    cases = RECORDS["0.5.23"]["cases"]
    assert cases["catalogue:deepseek-ai/DeepSeek-V3.2"]["mxfp8"].startswith("error")
    assert cases["catalogue:deepseek-ai/DeepSeek-V3.2"]["modelopt_fp4"] == "modelopt_fp4"
    assert cases["catalogue:nvidia/GLM-5-NVFP4"]["fp8"] == "modelopt_fp4"
    assert [a for a, v in cases["catalogue:openai/gpt-oss-120b"].items() if "error" not in v] == [
        "None", "mxfp4", "unquant"
    ]  # fmt: skip
    assert cases["catalogue:deepseek-ai/DeepSeek-V3.2"]["quark_mxfp4"] == "quark_mxfp4"
    for version in VERSIONS:
        maverick = RECORDS[version]["cases"][
            "catalogue:meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8"
        ]
        message = RECORDS[version]["errors"][int(maverick["None"].split()[1])]
        assert message.startswith("Unknown quantization method: fbgemm_fp8")
        for repo, method in (
            ("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8", "fbgemm_fp8"),
            ("openai/gpt-oss-120b", "mxfp4"),
            ("nvidia/Llama-3.1-70B-Instruct-FP8", "modelopt"),
        ):
            answer = RECORDS[version]["cases"][f"catalogue:{repo}"]["quark_mxfp4"]
            message = RECORDS[version]["errors"][int(answer.split()[1])]
            assert message.startswith(
                "NotImplementedError: Requantization into quark_mxfp4 is not supported, "
                f"from the original quant_method={method}"
            ), (version, repo, message)


@pytest.mark.parametrize(
    "repo",
    ["deepseek-ai/DeepSeek-V3", "nvidia/Llama-3.1-8B-Instruct-FP4", "openai/gpt-oss-120b",
     "zai-org/GLM-4.5-FP8", "nvidia/Llama-3.1-70B-Instruct-FP8"],
)  # fmt: skip
def test_the_memory_model_refuses_what_the_rule_refuses(repo: str) -> None:
    """Every command that prices memory reads `--quantization` beside the checkpoint
    (`with_quantization_flag`) from the rule's one table: it refuses exactly the pairs
    `QUANT-CHECKPOINT-MISMATCH` refuses, and prices the rest as the checkpoint stores them
    (a ModelOpt export serves its own method whatever the flag)."""
    config = catalogue_config(repo)
    spec = ModelSpec.from_hf_config(config)
    for q in sorted(RECORDS["0.5.23"]["choices"]):
        rule = _refused("0.5.23", spec.quant_method, q)
        try:
            priced = with_quantization_flag(config, q)
        except InputError:
            assert rule, (repo, q)
            continue
        assert priced is config
        known = not _refused("0.5.23", None, q)  # the flag alone passes QUANT-METHOD
        assert not rule or not known, (repo, q)


@pytest.mark.parametrize("version", VERSIONS)
def test_what_the_loader_serves_is_what_meshsat_says(version: str, tmp_path: Path) -> None:
    """Where a checkpoint's override replaces the typed `--quantization` (a ModelOpt
    export's own method, GPTQ/AWQ's Marlin for `marlin`), `served` names what the release
    settled on; where the release keeps the typed method, it says nothing."""
    record = RECORDS[version]
    replaced = 0
    for case, answers in sorted(record["cases"].items()):
        if case in OLDER_PARSER.get(version, {}) or case in UNREAD:
            continue
        spec = ModelSpec.from_file(_folder(tmp_path, case, record))
        for arg, answer in answers.items():
            if arg in ("None", "unquant") or answer.startswith("error") or (case, arg) in KNOWN:
                continue
            got = served(spec.quant_method, arg)
            assert got == (None if answer == arg else answer), (case, arg, answer)
            replaced += got is not None
    assert replaced > 500, replaced


def test_validate_reports_what_the_loader_serves() -> None:
    """In the report's notes (JSON included), not a resolved field: SGLang's arguments keep
    the typed value."""
    spec = ModelSpec.from_hf_config(catalogue_config("nvidia/Llama-3.1-8B-Instruct-FP4"))
    report = validate({"quantization": "fp8"}, spec, explain=False, sglang_version="0.5.23")
    assert report.valid and report.resolved_env["quantization"] == "fp8"
    (n,) = [n for n in report.notes if n.resolution == "R-LOADER-QUANT"]
    assert (n.field, n.old, n.new) == ("quantization", "fp8", "modelopt_fp4")
    plain = validate({"quantization": "modelopt_fp4"}, spec, explain=False)
    assert not [n for n in plain.notes if n.resolution == "R-LOADER-QUANT"]


MAVERICK_FP8 = "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8"


@pytest.mark.parametrize(
    "args",
    [
        ("plan", "--model", MAVERICK_FP8, "--gpu", "H200", "--gpus", "8", "--rank", "kv"),
        ("plan", "--model", MAVERICK_FP8, "--gpu", "H200", "--gpus", "8"),
        ("enumerate", "--model", MAVERICK_FP8, "--gpus", "8", "--count"),
        ("enumerate", "--model", MAVERICK_FP8, "--gpus", "8"),
    ],
)
def test_an_empty_listing_names_the_loader_s_refusal(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    """No layout of a checkpoint the release cannot load is listed; the line says so, not
    "nothing fits" (FBGEMM FP8 is in no loader from 0.5.18)."""
    res = run_cli(capsys, *args)
    assert res.code == 1
    assert "no layout" in res.err and "starts, on any GPUs" in res.err
    assert "[QUANT-CHECKPOINT-METHOD] Unknown quantization method: fbgemm_fp8" in res.err
    assert "fits" not in res.err


def test_a_layout_that_does_not_fit_still_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_cli(capsys, "plan", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200",
                  "--gpus", "2", "--rank", "kv")  # fmt: skip
    assert res.code == 1 and "no legal layout of deepseek-ai/DeepSeek-V3 fits 2 x H200" in res.err
