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
