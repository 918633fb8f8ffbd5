"""`fix` with a GPU proposes only layouts that load, and the best of those: checked against
the brute-force oracle of `tests/fix_oracle.py` with its candidates filtered by the memory
model."""

from __future__ import annotations

import random

import pytest

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
