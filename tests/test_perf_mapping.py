"""The one mapping of meshsat's resolved layouts onto AIConfigurator's vocabulary
(`meshsat.solver.perf.engine_args`): a table of layouts and the engine arguments they must
produce, the engine's own consistency rule over every enumerated layout, and the measured
runs' own records of their layouts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat import solver
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import Parallel, load_facts
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.memory.models import catalogue_config
from meshsat.solver.perf.engine_args import (
    KV_MODES,
    EngineArgs,
    Unsupported,
    engine_args,
    nearest_version,
)

DBS: Mapping[str, tuple[str, ...]] = {
    "h200_sxm": ("0.5.14",),
    "h100_sxm": ("0.5.6.post2", "0.5.14"),
}
DSV3 = load_facts("deepseek-ai/DeepSeek-V3")
LLAMA = load_facts("meta-llama/Llama-3.1-8B-Instruct")


def _args(p: Parallel, facts=DSV3, g: str = "H200", **kw: object) -> EngineArgs | Unsupported:
    return engine_args(
        p, facts, gpu(g), model_path="deepseek-ai/DeepSeek-V3", pack_version="0.5.23",
        database_versions=DBS, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def _resolved(config: Mapping[str, object]) -> Parallel:
    spec = ModelSpec.from_hf_config(catalogue_config("deepseek-ai/DeepSeek-V3"))
    r = solver.validate(config, spec)
    assert r.valid, r.violations
    return Parallel.from_resolved(r.resolved, r.derived)


# SGLang flags -> (tp_size, attention_dp_size, moe_tp_size, moe_ep_size, pp_size) of the engine.
TABLE = [
    ({"tp_size": 8}, (8, 1, 8, 1, 1)),
    ({"tp_size": 8, "ep_size": 8}, (8, 1, 1, 8, 1)),
    ({"tp_size": 8, "ep_size": 4}, (8, 1, 2, 4, 1)),
    ({"tp_size": 8, "dp_size": 8, "enable_dp_attention": True, "ep_size": 8}, (1, 8, 1, 8, 1)),
    ({"tp_size": 16, "dp_size": 4, "enable_dp_attention": True, "ep_size": 16}, (4, 4, 1, 16, 1)),
    ({"tp_size": 8, "pp_size": 2}, (8, 1, 8, 1, 2)),
]


@pytest.mark.parametrize(("flags", "want"), TABLE)
def test_layout_table_maps_to_engine_widths(
    flags: dict[str, object], want: tuple[int, ...]
) -> None:
    a = _args(_resolved(flags))
    assert isinstance(a, EngineArgs)
    assert (a.tp_size, a.attention_dp_size, a.moe_tp_size, a.moe_ep_size, a.pp_size) == want
    assert (a.system, a.backend_version, a.gemm_quant_mode, a.moe_quant_mode) == (
        "h200_sxm", "0.5.14", "fp8_block", "fp8_block",
    )  # fmt: skip
    assert (a.kvcache_quant_mode, a.fmha_quant_mode) == ("bfloat16", "bfloat16")


def test_dense_models_fold_the_mlp_into_tensor_parallelism() -> None:
    a = _args(Parallel(tp=4, attn_tp=4, moe_tp=4), LLAMA)
    assert isinstance(a, EngineArgs)
    assert (a.tp_size, a.moe_tp_size, a.moe_ep_size, a.gemm_quant_mode) == (4, 4, 1, "bfloat16")
    # Under DP attention a dense MLP runs over all of TP, which the engine's dense model
    # does not price (it answers as for plain DP replicas): the roofline's, labelled.
    dpa = Parallel(tp=8, attn_tp=4, attn_dp=2, moe_tp=8, dp_attention=True)
    assert _args(dpa, LLAMA) == Unsupported("DP attention on a dense model")


@pytest.mark.parametrize(
    ("flags", "kw", "why"),
    [
        ({"tp_size": 8, "attn_cp_size": 2, "enable_prefill_cp": True, "cp_strategy": "zigzag"},
         {}, "attention (prefill) context parallelism"),
        ({"tp_size": 8, "dcp_size": 8}, {}, "decode context parallelism"),
        ({"tp_size": 8}, {"g": "MI300X"}, "no SGLang kernel data for MI300X"),
        ({"tp_size": 8}, {"quant": "int4-awq"}, "quantization 'int4-awq'"),
        ({"tp_size": 8}, {"kv_cache_dtype": "int8"}, "kv_cache_dtype 'int8'"),
        ({"tp_size": 8}, {"dwdp": True}, "DWDP"),
    ],
)  # fmt: skip
def test_what_the_engine_cannot_express_is_named(
    flags: dict[str, object], kw: dict[str, object], why: str
) -> None:
    assert _args(_resolved(flags), **kw) == Unsupported(why)


def test_fp8_kv_cache_and_database_versions() -> None:
    a = _args(_resolved({"tp_size": 8}), kv_cache_dtype="fp8_e4m3")
    assert isinstance(a, EngineArgs) and a.kvcache_quant_mode == "fp8"
    assert nearest_version("0.5.23", ["0.5.6.post2", "0.5.14"]) == "0.5.14"
    assert nearest_version("0.5.9", ["0.5.6.post2", "0.5.14"]) == "0.5.6.post2"
    assert nearest_version("0.4.6.post5", ["0.5.6.post2", "0.5.14"]) == "0.5.6.post2"
    h100 = _args(_resolved({"tp_size": 8}), g="H100")
    assert isinstance(h100, EngineArgs) and h100.backend_version == "0.5.14"


_LAYOUTS = [
    lay
    for lay in solver.enumerate(
        16, model=ModelSpec.from_hf_config(catalogue_config("deepseek-ai/DeepSeek-V3"))
    )
]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_LAYOUTS))
def test_every_layout_the_engine_takes_satisfies_its_width_rule(lay: solver.Layout) -> None:
    """The engine refuses tp·attention_dp != moe_tp·moe_ep; every legal layout that maps
    obeys it, and its GPUs are the layout's."""
    p = Parallel.from_resolved(lay.config, lay.derived)
    a = _args(p)
    if isinstance(a, Unsupported):
        assert p.attn_cp > 1 or p.dcp > 1 or (p.moe_dense_tp not in (None, p.tp))
        return
    assert a.tp_size * a.attention_dp_size == a.moe_tp_size * a.moe_ep_size
    assert a.tp_size * a.attention_dp_size == lay.config["tp_size"]
    assert a.pp_size == lay.config["pp_size"]


def test_measured_runs_record_the_mapped_widths() -> None:
    """Each measured row stores its layout in the engine's vocabulary; meshsat's reading of
    the same layout (SGLang flags -> validate -> engine_args) gives those widths back."""
    pytest.importorskip("aiconfigurator_core")
    import csv

    from meshsat.solver.perf.measured import checkpoint_config, load_runs, sample_path

    path = sample_path()
    assert path is not None
    stored = {}
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            stored[r["id"]] = r
    checked = 0
    models: dict[tuple[str, str], tuple[Any, ModelSpec]] = {}
    for run in load_runs()[::7]:
        if run.normalised or run.gpu not in ("H200", "B200", "H100"):
            continue
        key = (run.model, run.quant)
        if key not in models:
            cfg = checkpoint_config(run)
            assert cfg is not None
            models[key] = (load_facts(cfg), ModelSpec.from_hf_config(cfg))
        facts, spec = models[key]
        rep = solver.validate(run.config(), spec, sglang_version="0.5.18")
        assert rep.valid, (run.id, rep.violations)
        p = Parallel.from_resolved(rep.resolved, rep.derived)
        a = engine_args(p, facts, gpu(run.gpu), model_path=run.model, pack_version="0.5.18",
                        database_versions={"h200_sxm": ("0.5.14",), "b200_sxm": ("0.5.14",),
                                           "h100_sxm": ("0.5.14",)}, quant=run.quant)  # fmt: skip
        assert isinstance(a, EngineArgs), a
        row = stored[run.id]
        want_moe = (int(row["moe_tp_size"] or 1), int(row["moe_ep_size"] or 1))
        assert a.tp_size == int(row["tp_size"])
        assert a.attention_dp_size == int(row["attention_dp_size"] or 1)
        if facts.is_moe:
            assert (a.moe_tp_size, a.moe_ep_size) == want_moe
        checked += 1
    assert checked > 50


# --- quantization: the checkpoint's FP8 scaling picks the engine's GEMM/MoE modes ----------
def _ct(strategy: str, bits: int = 8, kind: str = "float") -> dict[str, object]:
    """A compressed-tensors config with one group of `strategy` weights."""
    weights = {"num_bits": bits, "type": kind, "strategy": strategy,
               "block_structure": [128, 128] if strategy == "block" else None}  # fmt: skip
    return {"quant_method": "compressed-tensors",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}}}  # fmt: skip


_PER_TENSOR_MOE = "fp8_block MoE for per-tensor FP8"
_PER_CHANNEL = ("per-tensor fp8 GEMM for per-channel FP8", "fp8_block MoE for per-channel FP8")

# (model, quantization_config replacing the checkpoint's (None: its own), --quantization)
#   -> (GEMM mode, MoE mode, substitutes named in the source) or the engine's refusal.
QUANT_TABLE = [
    # block FP8: fp8_block, no substitute (the mapping before per-tensor checkpoints)
    (("deepseek-ai/DeepSeek-V3", None, None), ("fp8_block", "fp8_block", ())),
    (("Qwen/Qwen3-32B-FP8", None, None), ("fp8_block", "fp8_block", ())),
    (("Qwen/Qwen3-30B-A3B-FP8", None, None), ("fp8_block", "fp8_block", ())),
    (("Qwen/Qwen3-30B-A3B", _ct("block"), None), ("fp8_block", "fp8_block", ())),
    # per-tensor FP8: the per-tensor GEMM; a MoE's experts from fp8_block, said
    (("nvidia/Llama-3.1-70B-Instruct-FP8", None, None), ("fp8", "fp8_block", ())),
    (("Qwen/Qwen3-30B-A3B", {"quant_method": "fp8"}, None),
     ("fp8", "fp8_block", (_PER_TENSOR_MOE,))),
    (("Qwen/Qwen3-30B-A3B", {"quant_method": "modelopt", "quant_algo": "FP8"}, None),
     ("fp8", "fp8_block", (_PER_TENSOR_MOE,))),
    (("Qwen/Qwen3-30B-A3B", _ct("tensor"), None), ("fp8", "fp8_block", (_PER_TENSOR_MOE,))),
    (("Qwen/Qwen3-30B-A3B", None, "fp8"), ("fp8", "fp8_block", (_PER_TENSOR_MOE,))),
    (("Qwen/Qwen3-8B", None, "fp8"), ("fp8", "fp8_block", ())),
    # per-channel FP8: the per-tensor GEMM stands in, said (dense: the GEMM only)
    (("zai-org/GLM-4.5-FP8", None, None), ("fp8", "fp8_block", _PER_CHANNEL)),
    (("Qwen/Qwen3-8B", _ct("channel"), None), ("fp8", "fp8_block", _PER_CHANNEL[:1])),
    # not FP8: as before
    (("Qwen/Qwen3-8B", None, None), ("bfloat16", "bfloat16", ())),
    (("Qwen/Qwen3-8B", _ct("channel", kind="int"), None), "quantization 'compressed-tensors'"),
]  # fmt: skip


@pytest.mark.parametrize(("given", "want"), QUANT_TABLE)
def test_checkpoint_fp8_scaling_maps_to_the_engines_modes(
    given: tuple[str, dict[str, object] | None, str | None],
    want: tuple[str, str, tuple[str, ...]] | str,
) -> None:
    from meshsat.solver.memory.quantized_checkpoints import with_quantization_flag
    from meshsat.solver.perf.engine_args import checkpoint_quant

    model, qc, flag = given
    config = dict(catalogue_config(model))
    if qc is not None:
        config["quantization_config"] = qc
    config = dict(with_quantization_flag(config, flag))
    facts = load_facts(config)
    p = Parallel(tp=2, attn_tp=2, ep=2, moe_tp=1) if facts.is_moe else Parallel(tp=2, attn_tp=2)
    a = engine_args(p, facts, gpu("H200"), model_path=model, pack_version="0.5.23",
                    database_versions=DBS, quant=checkpoint_quant(config))  # fmt: skip
    if isinstance(want, str):
        assert a == Unsupported(want)
        return
    assert isinstance(a, EngineArgs)
    assert (a.gemm_quant_mode, a.moe_quant_mode, a.substitutes) == want
    said = f" (substitute: {'; '.join(want[2])})" if want[2] else ""
    assert a.label == f"aic h200_sxm sglang-0.5.14{said}"


def test_the_fp8_modes_are_where_the_engines_sglang_data_is() -> None:
    """The oracle is the engine's own kernel tables: every system and database version that
    has block-FP8 GEMM data has the per-tensor `fp8` GEMM too (so a per-tensor checkpoint
    never loses the engine), and no SGLang MoE table has a per-tensor `fp8` kernel (so the
    experts' substitute is still needed: when one appears, map to it)."""
    pytest.importorskip("aiconfigurator_core")
    import pyarrow.parquet as pq

    from meshsat.solver.perf.aic import _package_dir, database_versions
    from meshsat.solver.perf.engine_args import QUANT_MODES, SUBSTITUTES

    root = _package_dir()
    assert root is not None
    data = root / "systems" / "data"
    checked = 0
    for system, versions in database_versions().items():
        for v in versions:
            gemm = set(pq.read_table(data / system / "gemm" / "sglang" / v / "gemm_perf.parquet",
                                     columns=["gemm_dtype"]).column(0).to_pylist())  # fmt: skip
            if "fp8_block" in gemm:
                assert "fp8" in gemm, (system, v, gemm)
                checked += 1
    moe_tables = list(data.glob("*/moe/sglang/*/moe_perf.parquet"))
    moe = {
        m for t in moe_tables for m in pq.read_table(t, columns=["moe_dtype"]).column(0).to_pylist()
    }
    assert moe_tables and checked >= 5
    assert "fp8" not in moe and "fp8_block" in moe
    for name, (_, moe_for) in SUBSTITUTES.items():
        assert QUANT_MODES[name][1] == "fp8_block" and moe_for is not None, name


def test_measured_fp8_checkpoints_map_as_the_engine_reads_them() -> None:
    """The sample labels the GEMMs of block-FP8 checkpoints (DeepSeek-R1/V3, GLM-5-FP8,
    Qwen3.5 FP8) per-tensor `fp8` beside `fp8_block` experts; SGLang runs a checkpoint with
    `weight_block_size` through its block GEMM. Oracle: AIConfigurator's own reading of each
    measured checkpoint's config (`_infer_quantization_fields`) gives the GEMM mode meshsat
    maps to; `perf_accuracy --quant-modes recorded` runs the row's labels instead."""
    pytest.importorskip("aiconfigurator_core")
    from aiconfigurator_core.sdk.utils import _infer_quantization_fields

    from benchmarks.perf_accuracy import perf_model
    from meshsat.solver.perf.engine_args import QUANT_MODES, checkpoint_quant
    from meshsat.solver.perf.measured import checkpoint_config, load_runs
    from meshsat.solver.perf.workload import Workload

    seen: dict[tuple[str, str, str, str], Any] = {}
    for run in load_runs():
        key = (run.model, run.quant, run.gemm_mode, run.moe_mode)
        if run.quant == "fp8" and run.gpu == "H200" and key not in seen:
            seen[key] = run
    relabelled = 0
    for run in seen.values():
        cfg = checkpoint_config(run)
        assert cfg is not None
        ours = QUANT_MODES[checkpoint_quant(cfg) or run.quant]
        assert ours[0] == _infer_quantization_fields(dict(cfg))["quant_algo"], run.model
        p = Parallel(tp=8, attn_tp=8, ep=8, moe_tp=1)
        got = {}
        for modes in ("checkpoint", "recorded"):
            pm = perf_model(run, cfg, Workload(), modes, sglang_version="0.5.9")
            a = pm.engine_args(p if pm.facts.is_moe else Parallel(tp=8, attn_tp=8))
            assert isinstance(a, EngineArgs), a
            got[modes] = (a.gemm_quant_mode, a.moe_quant_mode if pm.facts.is_moe else None)
        assert got["checkpoint"] == (ours[0], ours[1] if pm.facts.is_moe else None)
        assert got["recorded"][0] == run.gemm_mode
        relabelled += got["recorded"] != got["checkpoint"]
    assert len(seen) >= 4 and relabelled >= 3, seen


@pytest.mark.parametrize(
    ("model", "gpu_name", "kv_bytes"),
    [
        ("nvidia/Llama-3.1-70B-Instruct-FP8", "H200", 1),  # kv_cache_quant_algo: FP8
        ("deepseek-ai/DeepSeek-V3", "H200", 2),
        ("zai-org/GLM-5", "B200", 1),  # DSA on Blackwell: an FP8 cache
        ("zai-org/GLM-5", "H200", 2),
    ],
)
def test_the_estimate_prices_the_kv_cache_the_memory_model_sizes(
    model: str, gpu_name: str, kv_bytes: int
) -> None:
    """`--kv-cache-dtype auto` is what SGLang resolves it to (the checkpoint's FP8 cache):
    the engine's KV mode and the memory model's bytes per cached element agree. The engine
    was passed the unresolved `auto` (bf16) while the KV tokens counted an FP8 cache."""
    from meshsat.solver.memory.quant import kv_dtype_bytes
    from meshsat.solver.perf.estimator import PerfModel

    pm = PerfModel(model, gpu_name)
    sized = kv_dtype_bytes(pm.memory.kv_cache_dtype, pm.facts.quant.unquantized)
    assert sized == kv_bytes
    mode = KV_MODES[pm.kv_cache_dtype or "auto"][0]
    assert {"fp8": 1, "bfloat16": 2}[mode] == kv_bytes
