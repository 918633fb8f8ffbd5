"""A checkpoint folder's quantization as SGLang finds it (solver/lang/checkpoint_files.py).

The oracle is SGLang 0.5.23's own `ModelConfig._parse_quant_hf_config`, recorded on every
model folder aiconfigurator-core bundles and on written folders for the other branches
(`fidelity/quant_sources.py` -> tests/fixtures/quant_sources/0.5.23.json). A second oracle,
for the sizing: the embedded catalogue's entries for NVIDIA's ModelOpt checkpoints were
written from the same two files by hand, so a local folder of them must size the same.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver.errors import InputError
from meshsat.solver.lang.checkpoint_files import HF_QUANT_CONFIG, with_sglang_quantization
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import load_facts
from meshsat.solver.memory.facts import UNMODELLED_LAYERS, _text_config
from meshsat.solver.memory.models import model_config
from meshsat.solver.memory.modules import model_modules
from meshsat.solver.memory.precision import FP8_PER_TENSOR, NVFP4, scheme_of
from tests.cli_helpers import run_cli

aic = pytest.importorskip("aiconfigurator_core")
BUNDLE = Path(aic.__file__).parent / "model_configs"
RECORD = json.loads(
    (Path(__file__).parent / "fixtures" / "quant_sources" / "0.5.23.json").read_text()
)


def _folder(tmp: Path, case: str) -> Path:
    """The case's checkpoint folder, as the recorder built it."""
    kind, name = case.split(":", 1)
    d = tmp / name
    d.mkdir()
    if kind == "bundled":
        shutil.copy(BUNDLE / f"{name}_config.json", d / "config.json")
        hfq = BUNDLE / f"{name}_hf_quant_config.json"
        if hfq.is_file():
            shutil.copy(hfq, d / HF_QUANT_CONFIG)
        return d
    config, hfq_data = RECORD["written"][name]
    (d / "config.json").write_text(json.dumps(config))
    if hfq_data is not None:
        (d / HF_QUANT_CONFIG).write_text(json.dumps(hfq_data))
    return d


@pytest.mark.parametrize("case", sorted(RECORD["cases"]))
def test_the_scheme_is_the_one_sglang_finds(case: str, tmp_path: Path) -> None:
    sglang: dict[str, Any] = RECORD["cases"][case]
    assert "error" not in sglang, sglang
    folder = _folder(tmp_path, case)
    config = json.loads((folder / "config.json").read_text())
    qc = with_sglang_quantization(config, folder).get("quantization_config")
    got = (None, None) if qc is None else (qc.get("quant_method"), qc.get("quant_algo"))
    assert got == (sglang["quant_method"], sglang["quant_algo"])


def test_the_record_reaches_every_branch() -> None:
    """The fixture is not a sample of easy cases: each way SGLang finds a scheme is in it."""
    methods = {c["quant_method"] for c in RECORD["cases"].values()}
    assert {None, "fp8", "compressed-tensors", "modelopt_fp8", "modelopt_fp4",
            "modelopt_mixed", "w4afp8", "mxfp8"} <= methods  # fmt: skip
    from_file = [
        c for c in RECORD["cases"] if c.startswith("bundled:") and
        (BUNDLE / f"{c.split(':', 1)[1]}_hf_quant_config.json").is_file() and
        "quantization_config" not in json.loads(
            (BUNDLE / f"{c.split(':', 1)[1]}_config.json").read_text())
    ]  # fmt: skip
    assert len(from_file) >= 10


#: Catalogue entries written from a ModelOpt checkpoint's config.json and hf_quant_config.json.
MODELOPT_IN_CATALOGUE = (
    "nvidia/Llama-3.1-70B-Instruct-FP8",
    "nvidia/GLM-5-NVFP4",
    "nvidia/Qwen3.5-122B-A10B-NVFP4",
    "nvidia/Qwen3.5-397B-A17B-NVFP4",
)


@pytest.mark.parametrize("repo", MODELOPT_IN_CATALOGUE)
def test_a_local_modelopt_folder_sizes_as_the_catalogue(repo: str, tmp_path: Path) -> None:
    folder = _folder(tmp_path, "bundled:" + repo.replace("/", "--", 1))
    assert load_facts(str(folder)) == load_facts(repo)
    assert load_facts(str(folder / "config.json")) == load_facts(repo)
    spec, catalogue = ModelSpec.from_file(folder), ModelSpec.from_hf_config(model_config(repo))
    assert (spec.quant_method, spec.quant_group_k) == (
        catalogue.quant_method,
        catalogue.quant_group_k,
    )


def test_a_local_fp8_70b_fits_two_h100s(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Read as 16-bit weights, this folder "did not fit" (65.77 GiB of weights a rank)."""
    folder = _folder(tmp_path, "bundled:nvidia--Llama-3.1-70B-Instruct-FP8")
    args = ("validate", "--gpu", "H100", "--set", "tp_size=2", "--json")
    local = json.loads(run_cli(capsys, *args, "--model", str(folder)).out)
    embedded = json.loads(
        run_cli(capsys, *args, "--model", "nvidia/Llama-3.1-70B-Instruct-FP8").out
    )
    assert local["valid"] is True and local["memory"]["fits"] is True
    assert local["memory"] == embedded["memory"]
    launch = f"python -m sglang.launch_server --model-path {folder} --tp 2"
    pasted = json.loads(
        run_cli(capsys, "validate", "--sglang", launch, "--gpu", "H100", "--json").out
    )
    assert pasted["memory"] == embedded["memory"]


def test_a_config_past_the_file_limit_still_loads(tmp_path: Path) -> None:
    """MiniMax-M3-NVFP4 lists every quantized layer: 3.1 MB for each of its two files."""
    folder = _folder(tmp_path, "bundled:nvidia--MiniMax-M3-NVFP4")
    assert (folder / "config.json").stat().st_size > 1 << 20
    assert model_config(str(folder))["quantization_config"]["quant_method"] == "modelopt_mixed"
    assert ModelSpec.from_file(folder).quant_method == "modelopt_mixed"


def test_a_broken_hf_quant_config_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(BUNDLE / "meta-llama--Meta-Llama-3.1-8B_config.json", tmp_path / "config.json")
    (tmp_path / HF_QUANT_CONFIG).write_text('{"quantization": {"quant_algo": ')
    with pytest.raises(InputError, match=r"hf_quant_config\.json is not valid JSON"):
        model_config(str(tmp_path))
    r = run_cli(capsys, "validate", "--model", str(tmp_path), "--set", "tp_size=2")
    assert r.code == 2 and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1 and "hf_quant_config.json" in r.err


def test_a_pasted_config_takes_the_in_config_fallbacks_only() -> None:
    pasted = {"compression_config": {"quant_method": "compressed-tensors"}}
    assert with_sglang_quantization(pasted, None)["quantization_config"] == {
        "quant_method": "compressed-tensors"
    }
    assert with_sglang_quantization({"num_hidden_layers": 2}, None) == {"num_hidden_layers": 2}


@pytest.mark.parametrize(
    "stem",
    [
        "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8",
        "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8",
        "nvidia--Llama-3_3-Nemotron-Super-49B-v1",
        "moonshotai--Kimi-K3",
        "google--gemma-4-26B-A4B",
    ],
)
def test_layers_the_memory_model_cannot_price_are_refused_not_guessed(
    stem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read as an ordinary decoder, the 120B FP8 NemotronH weighed 349 GiB a rank on 4 H100."""
    folder = _folder(tmp_path, "bundled:" + stem)
    config = json.loads((folder / "config.json").read_text())
    text = config.get("text_config") or config
    key = next(k for k in UNMODELLED_LAYERS if k in text)
    with pytest.raises(InputError, match=f"'{key}'"):
        load_facts(str(folder))
    r = run_cli(capsys, "validate", "--model", str(folder), "--gpu", "H100", "--set", "tp_size=8")
    assert r.code == 2 and "not modelled by meshsat's memory model" in r.err
    assert run_cli(capsys, "validate", "--model", str(folder), "--set", "tp_size=8").code in (0, 1)


MIXED = sorted(c for c, r in RECORD["cases"].items() if "module_algos" in r)


@pytest.mark.parametrize("case", MIXED)
def test_a_mixed_precision_module_is_priced_as_sglang_resolves_it(
    case: str, tmp_path: Path
) -> None:
    """SGLang 0.5.23's `_resolve_quant_algo` per module (after the model class's name mapper
    and with its fused modules) against meshsat's price of the same module."""
    folder = _folder(tmp_path, case)
    text = _text_config(model_config(str(folder)))
    modules = model_modules(load_facts(str(folder)), str(text.get("model_type", "")))
    price = scheme_of(text, 2.0).price
    recorded = RECORD["cases"][case]["module_algos"]
    assert {m.name for m in modules} == set(recorded)
    by_algo = {None: 2.0, "NVFP4": NVFP4, "W4A16_NVFP4": NVFP4, "FP8": FP8_PER_TENSOR,
               "MXFP8": FP8_PER_TENSOR}  # fmt: skip
    wrong = {m.name: (price(m), recorded[m.name]) for m in modules
             if price(m) != by_algo[recorded[m.name]]}  # fmt: skip
    assert not wrong, f"{len(wrong)} of {len(modules)}: {sorted(wrong.items())[:4]}"


SKIPS = sorted(c for c, r in RECORD["cases"].items() if "unquantized_modules" in r)


@pytest.mark.parametrize("case", SKIPS)
def test_the_modules_left_unquantized_are_the_ones_sglang_leaves(case: str, tmp_path: Path) -> None:
    """SGLang 0.5.23's `is_layer_skipped` (FP8) or `is_layer_excluded` (ModelOpt) per
    module against the modules meshsat prices at the unquantized width."""
    folder = _folder(tmp_path, case)
    text = _text_config(model_config(str(folder)))
    modules = model_modules(load_facts(str(folder)), str(text.get("model_type", "")))
    price = scheme_of(text, 2.0).price
    ours = sorted(m.name for m in modules if price(m) == 2.0)
    theirs = RECORD["cases"][case]["unquantized_modules"]
    assert set(ours) == set(theirs), (
        f"meshsat only: {sorted(set(ours) - set(theirs))[:4]}; "
        f"SGLang only: {sorted(set(theirs) - set(ours))[:4]}"
    )
