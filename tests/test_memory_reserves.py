"""What SGLang keeps back beside the KV pool, replayed from the releases' own code.

`tests/fixtures/memory_reserves/<version>.json` is recorded by `fidelity/memory_reserves.py`
inside each release venv: `ModelConfig(...).is_multimodal` on the catalogue's configs,
`mm_runtime_reservation_gb`, and `KVCacheConfigurator._handle_max_mamba_cache` over a grid of
rests, slot sizes and flags (`--max-mamba-cache-size`, speculative draft tokens,
`--max-running-requests`, attention DP). `fractions-0.5.23.json` (`fidelity/memory_fractions.py`)
is 0.5.23's whole default `mem_fraction_static` for multimodal and text models. meshsat's
`multimodal.py`, `state.split_rest` and `MemoryModel.default_fraction` must give the same
answers.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver.memory import MemoryModel, Parallel, flag_options, load_facts
from meshsat.solver.memory.fraction import default_mem_fraction_static, prefill_graph_default
from meshsat.solver.memory.kv import kv_bytes_per_token
from meshsat.solver.memory.models import model_config
from meshsat.solver.memory.multimodal import (
    default_fraction_factor,
    is_multimodal,
    runtime_reserve_mib,
)
from meshsat.solver.memory.multimodal_archs import (
    BREAKABLE_GRAPH_ARCHITECTURES,
    MULTIMODAL_ARCHITECTURES,
    PIECEWISE_GRAPH_ARCHITECTURES,
)
from meshsat.solver.memory.state import (
    StateFlags,
    split_rest,
    state_bytes_per_request,
    state_flags,
)
from meshsat.solver.validation.validate import validate

FIXTURES = Path(__file__).parent / "fixtures" / "memory_reserves"
RELEASES = ("0.5.18", "0.5.19", "0.5.23")
QWEN35 = "Qwen/Qwen3.5-397B-A17B"


@cache
def recorded(version: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{version}.json").read_text())
    assert data["version"] == version
    return data


config_facts = cache(load_facts)


@pytest.mark.parametrize("version", RELEASES)
def test_multimodal_models_are_the_releases(version: str) -> None:
    checked = multimodal = 0
    for rec in recorded(version)["multimodal"]:
        if "error" in rec:  # a quantization this release's ModelConfig refuses on CPU
            continue
        facts = config_facts(rec["model"])
        ours = is_multimodal(
            facts, version, rec["language_model_only"], enable_multimodal=rec["enable_multimodal"]
        )
        # `adjust_mem_fraction_for_vlm` on the release's own config object.
        assert math.isclose(facts.vision_fraction_factor, rec["vlm_factor"], rel_tol=1e-12)
        assert ours == rec["is_multimodal"], rec
        for transport, gb in rec["reserve_gb"].items():
            t = None if transport == "None" else transport
            assert runtime_reserve_mib(version, ours, t) == gb * 1024, (rec["model"], t)
        checked += 1
        multimodal += ours
    # Not vacuous: most of the catalogue loads, and Qwen3.5's four sizes (and their
    # quantized checkpoints) are multimodal; Llama 4 and Gemma 3 are text by default.
    assert checked > 140 and multimodal >= 8


@pytest.mark.parametrize("version", RELEASES)
def test_the_multimodal_architectures_are_the_releases(version: str) -> None:
    data = recorded(version)
    assert MULTIMODAL_ARCHITECTURES[version] == set(data["multimodal_model_archs"])
    assert BREAKABLE_GRAPH_ARCHITECTURES[version] == set(data["multimodal_breakable_graph_archs"])
    assert PIECEWISE_GRAPH_ARCHITECTURES[version] == set(data["multimodal_piecewise_graph_archs"])


@pytest.mark.parametrize(
    ("pack", "vendor", "architecture", "multimodal", "graphs"),
    [
        # A multimodal model captures no prefill graph unless the release lists it
        # (`_disable_breakable_cudagraph_if_incompatible` / `_apply_cuda_graph_compatibility`).
        ("0.5.23", "nvidia", "Qwen3_5MoeForConditionalGeneration", True, True),
        ("0.5.23", "nvidia", "Qwen2VLForConditionalGeneration", True, False),
        # Llama 4 and Gemma 3 are served as text by default: their graphs stay.
        ("0.5.23", "nvidia", "Llama4ForConditionalGeneration", False, True),
        # 0.5.18 moves a piecewise-only multimodal model to tc_piecewise on CUDA.
        ("0.5.18", "nvidia", "Cohere2VisionForConditionalGeneration", True, True),
        ("0.5.19", "nvidia", "MiniMaxM3SparseForCausalLM", True, True),
        ("0.5.23", "nvidia", "MiniMaxM3SparseForCausalLM", True, True),
        # Elsewhere 0.5.18/0.5.19 default to tc_piecewise: only its list keeps graphs.
        ("0.5.19", "amd", "Qwen3_5MoeForConditionalGeneration", True, False),
        ("0.5.19", "amd", "KimiK25ForConditionalGeneration", True, True),
        ("0.5.23", "amd", "KimiK25ForConditionalGeneration", True, False),
    ],
)
def test_prefill_graphs_of_multimodal_models(
    pack: str, vendor: str, architecture: str, multimodal: bool, graphs: bool
) -> None:
    assert (
        prefill_graph_default(pack, vendor, multimodal=multimodal, architecture=architecture)
        == graphs
    )


def test_language_model_only_turns_multimodality_off_from_0523() -> None:
    rows = {
        (v, r["language_model_only"]): r["is_multimodal"]
        for v in RELEASES
        for r in recorded(v)["multimodal"]
        if r["model"] == QWEN35 and not r["enable_multimodal"]
    }
    assert rows == {
        ("0.5.18", False): True,
        ("0.5.18", True): True,
        ("0.5.19", False): True,
        ("0.5.19", True): True,
        ("0.5.23", False): True,
        ("0.5.23", True): False,
    }


@pytest.mark.parametrize(
    ("pack", "flags", "applied"),
    [
        # `_handle_gpu_memory_settings` (0.5.18 server_args.py; 0.5.19 and 0.5.23
        # arg_groups/memory_hook.py): is_multimodal, not --language-only, not
        # --language-model-only, not a PD decode engine.
        ("0.5.23", {}, True),
        ("0.5.18", {}, True),
        ("0.5.19", {"language_model_only": True}, False),
        ("0.5.23", {"language_only": True}, False),
        ("0.5.23", {"disaggregation_mode": "decode"}, False),
        ("0.5.23", {"disaggregation_mode": "prefill"}, True),
        ("0.4.6.post5", {}, False),
    ],
)
def test_the_vision_factor_applies_as_the_release_reads_its_flags(
    pack: str, flags: dict[str, Any], applied: bool
) -> None:
    factor = 0.924765625  # Qwen3.5's (recorded above)
    assert default_fraction_factor(factor, True, pack, **flags) == (factor if applied else 1.0)
    assert default_fraction_factor(factor, False, pack, **flags) == 1.0


def test_the_default_fraction_carries_the_vision_factor_and_a_given_one_does_not() -> None:
    p = Parallel(tp=8, attn_tp=8, moe_tp=8)
    plain = MemoryModel(QWEN35, "H200", language_model_only=True)
    vlm = MemoryModel(QWEN35, "H200")
    assert vlm.fraction_factor == load_facts(QWEN35).vision_fraction_factor
    assert math.isclose(vlm.fraction_factor, 0.924765625, rel_tol=1e-12)
    assert vlm.of(p).mem_fraction_static == plain.of(p).mem_fraction_static * vlm.fraction_factor
    given = MemoryModel(QWEN35, "H200", mem_fraction_static=0.85)
    assert given.of(p).mem_fraction_static == 0.85


def test_0_4_reserves_nothing() -> None:
    assert "absent" in recorded("0.4.6.post5")
    assert runtime_reserve_mib("0.4.6.post5", True, "cuda_ipc") == 0.0


@pytest.mark.parametrize("version", RELEASES)
def test_state_split_is_the_releases(version: str) -> None:
    refused = 0
    cases = recorded(version)["state_split"]
    for rec in cases:
        flags = StateFlags(
            ratio=rec["ratio"],
            max_mamba_cache_size=rec["max_mamba_cache_size"],
            draft_tokens=rec["draft_tokens"],
            max_running_requests=rec["max_running_requests"],
            at_least_one_request=version == "0.5.23",
        )
        slots, kv_bytes = split_rest(
            rec["rest_gb"] * (1 << 30), rec["per_req"], flags, rec["attn_dp"]
        )
        assert slots == rec["slots"], rec
        if "error" in rec:  # SGLang refuses: no state slot left
            assert slots <= 0
            refused += 1
            continue
        assert math.isclose(kv_bytes, rec["kv_gb"] * (1 << 30), rel_tol=1e-9, abs_tol=64), rec
    assert len(cases) == 960 and 0 < refused < len(cases) // 4


def test_state_flags_are_read_from_the_resolved_layout() -> None:
    r = validate({"tp_size": 8, "speculative_algorithm": "EAGLE", "max_mamba_cache_size": 256})
    flags = state_flags(r.resolved, "0.5.23")
    assert (flags.draft_tokens, flags.max_mamba_cache_size) == (4, 256)
    assert flags.max_running_requests is None  # SGLang's 48, in split_rest
    assert state_flags(validate({"tp_size": 8}).resolved, "0.5.19") == StateFlags(
        at_least_one_request=False
    )


def test_explicit_state_pool_on_qwen35_tp8() -> None:
    """`--max-mamba-cache-size 256` on 8 H200s: 256 slots (+1 padding), the rest KV."""
    p = Parallel(tp=8, attn_tp=8, moe_tp=8)
    auto = MemoryModel(QWEN35, "H200").of(p)
    mm = MemoryModel(QWEN35, "H200", state=StateFlags(max_mamba_cache_size=256))
    assert math.isclose(mm.fraction_factor, 0.924765625, rel_tol=1e-12)
    m = mm.of(p)
    per = state_bytes_per_request(mm.facts, 8)
    cell = kv_bytes_per_token(mm.facts, p, 0)
    rest = (m.pre_load_gib * m.mem_fraction_static - m.weights_gib - 100 / 1024) * (1 << 30)
    assert m.state_slots == 256
    assert m.kv_tokens == int((rest - 257 * per) // cell)
    assert m.kv_tokens > auto.kv_tokens and m.state_slots < auto.state_slots
    assert m.max_requests == min(m.kv_tokens // m.context_length, 256 // 5)


def test_the_releases_whole_default_carries_the_vision_factor() -> None:
    """0.5.23's whole argument resolution on an SM90 CUDA platform, the GPU's memory given
    (`fidelity/memory_fractions.py`), for multimodal and text models on five GPUs at tp 1 to
    8: its default fraction is meshsat's, vision factor included (Qwen3.5 × 0.9248 unless
    `--language-only`; Llama 4 and Gemma 3 are served as text, so no factor). The prefill
    backend's default asks `torch.cuda.is_available()` itself, which the recorder's CUDA
    platform does not answer on CPU, so it resolves prefill CUDA graphs off for every model
    (a text model's default there is meshsat's without the prefill-graph reserve): that
    reserve is left out on both sides here."""
    data = json.loads((FIXTURES / "fractions-0.5.23.json").read_text())
    models: dict[tuple[str, str, bool], MemoryModel] = {}
    checked = factored = 0
    for rec in data["records"]:
        if "error" in rec:  # --language-only on a model without encoder disaggregation
            assert rec["args"].get("language_only") and "encoder disaggregation" in rec["error"]
            continue
        key = (rec["model"], rec["gpu"], bool(rec["args"].get("language_only")))
        mm = models.get(key)
        if mm is None:
            mm = models[key] = MemoryModel(key[0], key[1], pack="0.5.23", language_only=key[2])
        tp = rec["args"]["tp_size"]
        ours = mm.fraction_factor * default_mem_fraction_static(
            mm.gpu.memory_mib, tp=tp, mla=mm.facts.is_mla, pack="0.5.23"
        )
        assert ours == rec["mem_fraction_static"], (key, tp, ours)
        checked += 1
        factored += mm.fraction_factor != 1.0
    assert checked == 160 and factored == 40  # Qwen3.5's two sizes on 5 GPUs at 4 widths


SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"


@pytest.mark.parametrize(
    ("pack", "flag", "built"),
    [("0.4.6.post5", False, True), ("0.5.18", False, False), ("0.5.23", True, True)],
)
def test_llama4_builds_its_vision_tower_only_when_served_multimodal(
    pack: str, flag: bool, built: bool
) -> None:
    """`mllama4.py` from 0.5.18: `has_vision = has_vision_weights and enable_multimodal`, and
    Llama 4 is text by default (0.4.6.post5 builds the tower always); Gemma 3's SigLIP is
    built either way."""
    p = Parallel(tp=8, pp=1, attn_tp=8, attn_dp=1, ep=1, moe_tp=8)
    scout = MemoryModel(SCOUT, "H200", pack=pack, enable_multimodal=flag)
    tower = load_facts(SCOUT).vision.params()
    assert tower > 500e6  # not vacuous: a tower of its own size
    assert scout.weights.vision_tower.params() == (tower if built else 0)
    assert (scout.weights.stage(p, 0).vision > 0) == built
    gemma = MemoryModel("google/gemma-3-27b-it", "H200", pack=pack, enable_multimodal=flag)
    assert (
        gemma.weights.vision_tower.params() == load_facts("google/gemma-3-27b-it").vision.params()
    )


def test_enable_multimodal_is_read_from_the_command() -> None:
    """The flag turns the model multimodal as the release's `ModelConfig` does (the replay
    above): its reserve and vision factor come off the KV pool, its tower is loaded."""
    config = dict(model_config(SCOUT))
    plain = validate({"tp_size": 8}, config, sglang_version="0.5.23", explain=False).resolved
    flagged = validate(
        {"tp_size": 8, "enable_multimodal": True}, config, sglang_version="0.5.23", explain=False
    ).resolved
    assert flagged["enable_multimodal"] and not plain["enable_multimodal"]
    off = MemoryModel(SCOUT, "H200", pack="0.5.23", **flag_options(plain, "0.5.23"))
    on = MemoryModel(SCOUT, "H200", pack="0.5.23", **flag_options(flagged, "0.5.23"))
    assert (off.multimodal, on.multimodal) == (False, True)
    p = Parallel(tp=8, pp=1, attn_tp=8, attn_dp=1, ep=1, moe_tp=8)
    assert on.of(p).max_total_num_tokens < off.of(p).max_total_num_tokens
    assert on.fraction_factor < 1.0 == off.fraction_factor
