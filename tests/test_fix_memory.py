"""`fix` with a GPU proposes only layouts that load, and the best of those: checked against
the brute-force oracle of `tests/fix_oracle.py` with its candidates filtered by the memory
model."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver import validate
from meshsat.solver.memory import MemoryModel, Parallel
from meshsat.solver.repair.fix import fix
from tests.fix_oracle import PACK, nearest, objective_between
from tests.test_fix_optimal import invalid_layout

#: 70B in bf16 on 40 GiB cards: tp 1 and 2 never load, tp 4 only with help, tp 8 does.
MEMORY = MemoryModel("meta-llama/Llama-3.1-70B-Instruct", "A100-40")


def loads(values: object) -> bool:
    report = validate(values, explain=False, sglang_version=PACK)
    return bool(MEMORY.of(Parallel.from_resolved(report.resolved, report.derived)).fits)


@pytest.mark.parametrize("seed", range(3))
def test_fix_proposes_the_best_layout_that_loads(seed: int) -> None:
    rng = random.Random(300 + seed)
    rerouted = 0
    for _ in range(8):
        n = rng.choice((8, 16))
        cfg = invalid_layout(rng, n)
        plain = fix(cfg, gpus=n, sglang_version=PACK)
        report = fix(cfg, gpus=n, sglang_version=PACK, memory=MEMORY)
        best = report.best
        assert best.optimal and best.gpus_used == n
        assert loads(best.config)
        rerouted += not loads(plain.best.config)
        key = objective_between(cfg, best.config, "changes", n)
        assert key == best.objective.key("changes")
        better = next((c for c in nearest(cfg, n, n, "changes", key) if loads(c[1])), None)
        assert better is None, (cfg.model_dump(exclude_defaults=True), key, better)
    assert rerouted, "every plain fix already loaded: the memory search was not exercised"


def test_no_layout_that_loads_is_a_memory_conflict() -> None:
    # Proving that nothing loads walks the whole space: a loaded CI machine needs more than
    # the default 10 s of wall time.
    report = fix({"tp_size": 2, "dp_size": 3}, gpus=2, memory=MEMORY, timeout_s=120)
    assert not report.fixes and report.conflict is not None
    assert [r.id for r in report.conflict.rules] == ["MEM-FIT"]


def test_a_valid_layout_that_does_not_load_is_not_left_alone() -> None:
    report = fix({"tp_size": 4, "dp_size": 2}, gpus=8, memory=MEMORY)
    assert not report.valid_input
    assert loads(report.best.config) and report.best.gpus_used == 8


@pytest.mark.parametrize(
    ("model", "gpu_name", "gpus"),
    [("Qwen/Qwen3-235B-A22B", "H100", 8), ("deepseek-ai/DeepSeek-V3", "H200", 16),
     ("meta-llama/Llama-3.1-70B-Instruct", "A100-40", 8), ("Qwen/Qwen3-30B-A3B", "L40S", 8)],
)  # fmt: skip
def test_the_lightest_widths_bound_every_enumerated_layout(
    model: str, gpu_name: str, gpus: int
) -> None:
    """fix excludes (tp, pp, attn_tp) whose `_lightest` weights leave no pool before it
    searches: sound only if no legal layout of those widths is lighter (brute force over
    every enumerated layout)."""
    from meshsat import solver
    from meshsat.solver.lang.model_spec import ModelSpec
    from meshsat.solver.memory.models import catalogue_config
    from meshsat.solver.repair.fix import _lightest

    mm = MemoryModel(model, gpu_name)
    spec = ModelSpec.from_hf_config(catalogue_config(model))
    seen = 0
    for lay in solver.enumerate(gpus, model=spec, up_to=True):
        p = Parallel.from_resolved(lay.config, lay.derived)
        assert mm.of(p).weights_gib >= _lightest(mm, p.tp, p.pp, p.attn_tp) - 1e-9, p
        seen += 1
    assert seen > 50


def test_a_model_too_big_for_its_gpus_is_fixed_on_more_within_the_default_timeout() -> None:
    """Qwen3-235B in bf16 at `--tp 6` on H100: no layout on 6 GPUs loads (brute force over
    every enumerated one), so the fix changes the GPU count, to the tp 8 that loads. It
    used to search only divisors of 6 and time out."""
    from meshsat import solver
    from meshsat.solver.lang.model_spec import ModelSpec
    from meshsat.solver.memory.models import catalogue_config

    model = "Qwen/Qwen3-235B-A22B"
    mm = MemoryModel(model, "H100")
    spec = ModelSpec.from_hf_config(catalogue_config(model))
    six = list(solver.enumerate(6, model=spec))
    assert six and not any(mm.of(Parallel.from_resolved(x.config, x.derived)).fits for x in six)
    report = fix({"tp_size": 6}, spec, memory=mm)
    best = report.best
    assert best.optimal and not report.timed_out
    assert best.gpus_used == 8 and best.config.tp_size == 8
    assert mm.of(Parallel(tp=8, attn_tp=8, moe_tp=8)).fits


@pytest.mark.parametrize(
    ("model", "gpu_name", "gpus", "pack", "raise_default"),
    [("deepseek-ai/DeepSeek-V3", "L4", 64, "0.5.23", True),
     ("Qwen/Qwen3-235B-A22B", "H100", 16, "0.5.19", True),
     ("meta-llama/Llama-3.1-70B-Instruct", "A100-40", 8, "0.4.6.post5", False),
     ("Qwen/Qwen3-30B-A3B", "L4", 8, "0.4.6.post5", True),
     # Without the raise (`validate --gpu`, `fix --gpu`): the default's own ceiling.
     ("Qwen/Qwen3-235B-A22B", "H100", 16, "0.5.23", False),
     ("meta-llama/Llama-3.1-70B-Instruct", "L40S", 8, "0.5.19", False)],
)  # fmt: skip
def test_the_weight_ceiling_bounds_every_layout_that_loads(
    model: str, gpu_name: str, gpus: int, pack: str, raise_default: bool
) -> None:
    """fix excludes widths whose lightest weights pass `_ceiling_gib` before it searches:
    sound only if every layout that loads, at the release's default fraction or the raise
    the memory model applies, holds no more (brute force over every enumerated layout)."""
    from meshsat import solver
    from meshsat.solver.lang.model_spec import ModelSpec
    from meshsat.solver.memory.models import catalogue_config
    from meshsat.solver.repair.fix import _ceiling_gib

    mm = MemoryModel(model, gpu_name, pack=pack, raise_default_fraction=raise_default)
    spec = ModelSpec.from_hf_config(catalogue_config(model))
    loaded = 0
    for lay in solver.enumerate(gpus, model=spec, up_to=True, sglang_version=pack):
        p = Parallel.from_resolved(lay.config, lay.derived)
        m = mm.of(p)
        if m.fits:
            assert m.weights_gib < _ceiling_gib(mm, p.tp, p.pp), p
            loaded += 1
    assert loaded > 0 or model == "deepseek-ai/DeepSeek-V3"


def test_a_model_no_gpu_count_loads_is_a_memory_conflict_before_the_timeout() -> None:
    """DeepSeek-V3 on L4 (22 GiB): no layout of up to 64 GPUs loads (brute force), so fix
    says so, as a MEM-FIT conflict, well inside its default timeout. It used to propose
    tp 8 x pp 8 and the like one by one, each found too heavy, until the time ran out
    ("no fix found within the timeout")."""
    from meshsat import solver
    from meshsat.solver.lang.model_spec import ModelSpec
    from meshsat.solver.memory.models import catalogue_config

    model = "deepseek-ai/DeepSeek-V3"
    mm = MemoryModel(model, "L4", raise_default_fraction=True)
    spec = ModelSpec.from_hf_config(catalogue_config(model))
    every = list(solver.enumerate(64, model=spec, up_to=True))
    assert every and not any(mm.of(Parallel.from_resolved(x.config, x.derived)).fits for x in every)
    report = fix({"tp_size": 8}, spec, memory=mm)
    assert not report.timed_out and not report.fixes
    assert report.conflict is not None and [r.id for r in report.conflict.rules] == ["MEM-FIT"]


@settings(max_examples=300, deadline=None)
@given(
    gpu_gib=st.sampled_from((16, 24, 40, 48, 80, 94, 141, 180, 192, 288)),
    tp=st.sampled_from((1, 2, 4, 8, 16)),
    pp=st.sampled_from((1, 2, 4)),
    dp=st.sampled_from((1, 2, 8)),
    dp_attention=st.booleans(),
    mla=st.booleans(),
    chunked=st.sampled_from((None, -1, 1024, 2048, 8192, 16384)),
    max_bs=st.sampled_from((None, 1, 8, 160, 512)),
    prefill_graph=st.booleans(),
    deepep=st.booleans(),
    pack=st.sampled_from(("0.4.6.post5", "0.5.18", "0.5.19", "0.5.23")),
)
def test_the_default_fraction_ceiling_bounds_every_default(
    gpu_gib: int, tp: int, pp: int, dp: int, dp_attention: bool, mla: bool,
    chunked: int | None, max_bs: int | None, prefill_graph: bool, deepep: bool, pack: str,
) -> None:  # fmt: skip
    """`highest_default_fraction` is what `fix` holds the weights of widths under when the
    memory model does not raise the default: sound only if no default of those widths is
    higher, whatever the rest of the launch (chunk, graphs, DP attention, DeepEP)."""
    from meshsat.solver.memory.fraction import (
        default_mem_fraction_static,
        highest_default_fraction,
    )

    mib = gpu_gib * 1024
    default = default_mem_fraction_static(
        mib, tp=tp, pp=pp, dp_attention=dp_attention, dp=dp, mla=mla,
        chunked_prefill_size=chunked, cuda_graph_max_bs=max_bs,
        prefill_cuda_graph=prefill_graph, deepep=deepep, pack=pack,
    )  # fmt: skip
    # The default is rounded to 3 decimals; `_ceiling_gib` adds 1e-3 for it.
    assert default <= highest_default_fraction(mib, tp=tp, pp=pp, pack=pack) + 1e-3


def test_kimi_at_tp8_on_h100_is_moved_to_more_gpus_in_a_second() -> None:
    """Kimi-K2.5 (554 GiB of weights) does not load on 8 H100 at any layout: the weight
    ceiling at the raise (74.2 GiB a rank at tp 8) let every tp 8 layout (71.9 GiB) be
    proposed, found heavy and blocked one by one: 276 searches, 50 s, past the default
    10 s timeout. At the default's own ceiling the widths are excluded before the search."""
    from meshsat.solver.lang.model_spec import ModelSpec
    from meshsat.solver.memory.models import catalogue_config

    model = "moonshotai/Kimi-K2.5"
    mm = MemoryModel(model, "H100")
    report = fix({"tp_size": 8}, ModelSpec.from_hf_config(catalogue_config(model)), memory=mm)
    best = report.best
    assert not report.timed_out and best.optimal
    assert best.gpus_used == 16 and mm.of(Parallel(tp=16, attn_tp=16, moe_tp=16)).fits


def test_a_fix_no_catalogued_gpu_loads_is_said_without_gpu(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without --gpu, fix does not weigh memory: DeepSeek-V3 at tp 2 (ep 3 fixed to 2)
    puts about 330 GiB of weights on each GPU, more than the largest catalogued GPU holds,
    and nothing said so. The note names the weights, the largest GPU and --gpu; with
    --gpu the search itself keeps to layouts that load, and a layout that fits some GPU
    (tp 8) gets no note."""
    from meshsat.solver.cli import main
    from meshsat.solver.memory.gpus import GPUS

    largest = max((g for g in GPUS.values() if g.catalogued), key=lambda g: g.memory_mib)
    model = ["--model", "deepseek-ai/DeepSeek-V3"]
    with pytest.raises(SystemExit) as exc:
        main(["fix", *model, "--set", "tp_size=2", "--set", "ep_size=3"])
    captured = capsys.readouterr()
    assert exc.value.code == 0 and "--ep-size 2" in captured.out
    said = " ".join(captured.err.split())
    assert "more than any catalogued GPU holds" in said and largest.name in said, said
    assert "--gpu" in said
    weights = MemoryModel("deepseek-ai/DeepSeek-V3", largest).of(
        Parallel(tp=2, attn_tp=2, moe_tp=1, ep=2)
    )
    assert weights.weights_gib > largest.memory_gib  # the oracle: it does not fit
    with pytest.raises(SystemExit) as exc:
        main(["fix", *model, "--set", "tp_size=8", "--set", "ep_size=3"])
    assert "catalogued GPU" not in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["fix", *model, "--set", "tp_size=2", "--set", "ep_size=3", "--gpu", "H200"])
    assert "catalogued GPU" not in capsys.readouterr().err
