"""MODEL-ARCH-SUPPORTED: each release's model registry (fidelity/model_archs.py) and the
rule that reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fidelity import model_archs
from meshsat.solver.catalogue.model_arch import RULE_ID, newer_with, registries
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.models import CATALOGUE
from meshsat.solver.packs import get_pack
from meshsat.solver.validation.validate import validate

ROOT = Path(__file__).resolve().parent.parent
RELEASES = model_archs.RELEASES
LAYOUT = {"tp_size": 4}


def test_shipped_table_is_the_record() -> None:
    """solver/packs/model_archs.json is fidelity/model_archs.json's architectures."""
    record = json.loads(model_archs.OUT.read_text())
    assert tuple(registries()) == RELEASES == tuple(record)
    for v, reg in registries().items():
        assert reg.architectures == frozenset(record[v]["architectures"])
        assert reg.transformers_fallback == record[v]["transformers_fallback"]
        # Only 0.4 lacks the Transformers backend's fallback.
        assert reg.transformers_fallback == (v != "0.4.6.post5")


@pytest.mark.parametrize("version", RELEASES)
def test_table_is_the_releases_source(version: str) -> None:
    """Read again from the release's installed models/*.py where its venv exists."""
    models = model_archs.models_dir(version)
    if models is None:
        pytest.skip(f"no venv for {version}")
    assert model_archs.record(models) == json.loads(model_archs.OUT.read_text())[version]
    assert model_archs.UNSUPPORTED in (models / "registry.py").read_text()


def test_registries_grow() -> None:
    counts = [len(r.architectures) for r in registries().values()]
    assert counts == sorted(counts)
    assert counts[0] > 50


def _spec(name: str) -> ModelSpec:
    return ModelSpec.from_hf_config(CATALOGUE[name])


@pytest.mark.parametrize(
    ("model", "arch"),
    [
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen3NextForCausalLM"),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "DeepseekV32ForCausalLM"),
    ],
)
def test_refused_on_0_4_accepted_on_0_5_23(model: str, arch: str) -> None:
    spec = _spec(model)
    assert spec.architecture == arch
    old = validate(LAYOUT, spec, explain=False, sglang_version="0.4.6.post5")
    hit = [v for v in old.violations if v.rule == RULE_ID]
    assert len(hit) == 1
    v = hit[0]
    assert v.severity == "error" and v.stage == "launch"
    assert v.message.startswith(f"Model architectures ['{arch}'] are not supported for now.")
    assert v.hint == "--sglang-version 0.5.18 or newer" and newer_with("0.4.6.post5", arch)
    new = validate(LAYOUT, spec, explain=False, sglang_version="0.5.23")
    assert RULE_ID not in {v.rule for v in new.violations}


def test_not_checked_without_model_facts() -> None:
    for v in RELEASES:
        report = validate(LAYOUT, None, explain=False, sglang_version=v)
        assert RULE_ID not in {x.rule for x in report.violations}


def test_is_a_launch_rule_in_every_pack() -> None:
    for v in RELEASES:
        pack = get_pack(v)
        assert pack.stage(RULE_ID) == "launch"
        expected = "warning" if registries()[v].transformers_fallback else "error"
        assert pack.by_id[RULE_ID].severity == expected


def test_unknown_architecture_warns_where_transformers_may_serve_it() -> None:
    """0.5.x hand an unknown architecture to the Transformers backend: a warning there."""
    spec = ModelSpec(architecture="NoSuchModelForCausalLM")
    report = validate(LAYOUT, spec, explain=False, sglang_version="0.5.23")
    (w,) = [v for v in report.warnings if v.rule == RULE_ID]
    assert w.severity == "warning" and report.valid
    assert w.message.startswith("NoSuchModelForCausalLM has no SGLang implementation")
    assert "no recorded release after 0.5.23" in w.hint


def _flagged(name: str, version: str) -> bool:
    """The rule fires on the model, as an error or a warning."""
    report = validate(LAYOUT, _spec(name), explain=False, sglang_version=version)
    return RULE_ID in {v.rule for v in (*report.violations, *report.warnings)}


@pytest.mark.parametrize("version", RELEASES)
def test_catalogue_models_refused(version: str) -> None:
    """No false refusals: every catalogue model 0.5.x serves keeps being served; 0.4
    refuses exactly the architectures its registry lacks."""
    refused = sorted(name for name in CATALOGUE if _flagged(name, version))
    if version == "0.4.6.post5":
        lacking = {
            a
            for a in (_spec(n).architecture for n in CATALOGUE)
            if a not in registries()[version].architectures
        }
        assert {_spec(n).architecture for n in refused} == lacking
        assert len(lacking) == 10
    else:
        assert refused == []
