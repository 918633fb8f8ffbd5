"""fix is optimal: a brute-force search finds no valid layout with a smaller objective.

350 generated invalid layouts: 250 with the `changes` objective on GPU counts up to 64,
60 with `distance` on GPU counts up to 16 (where the brute force stays within seconds),
and 40 without `--gpus` (sizes among the divisors of the lcm of the user's sizes and GPUs).
Every fix is also re-validated by both back-ends.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from meshsat.solver import validate
from meshsat.solver.lang.config import Config
from meshsat.solver.repair.fix import fix
from tests.fix_oracle import CHOICES, PACK, SIZES, divisors, nearest, objective_between, z3_accepts

GPUS = (4, 6, 8, 12, 16, 24, 32, 48, 64)
SMALL = (4, 6, 8, 12, 16)


def invalid_layout(rng: random.Random, n: int) -> Config:
    """Random sizes (now and then one that does not divide n) and flags, until invalid or
    against meshsat's advice (fix repairs both)."""
    while True:
        values: dict[str, Any] = {"tp_size": rng.choice(divisors(n))}
        for name in SIZES[1:]:
            if rng.random() < 0.35:
                pool = [*divisors(n), 3, 5] if rng.random() < 0.1 else divisors(n)
                values[name] = rng.choice(pool)
        for name, choices in CHOICES.items():
            if rng.random() < 0.2:
                values[name] = rng.choice(choices)
        report = validate(values, explain=False, sglang_version=PACK)
        if not report.valid or any(w.rule in PACK.advice for w in report.warnings):
            return Config.model_validate(values)


def check_optimal(cfg: Config, gpus: int | None, objective: str) -> None:
    report = fix(cfg, gpus=gpus, objective=objective, sglang_version=PACK)
    assert not report.valid_input and report.fixes, cfg
    best = report.best
    assert best.optimal
    assert validate(best.config, explain=False, sglang_version=PACK).valid
    assert z3_accepts(best.config, None, PACK)
    if gpus is not None:
        assert best.gpus_used == gpus
    key = objective_between(cfg, best.config, objective, gpus)
    assert key == best.objective.key(objective)
    if gpus is None:
        given = [getattr(cfg, n) for n in cfg.user_set() if n in SIZES]
        bound = math.lcm(report.gpus_before, *given)
        assert report.size_bound == bound
    else:
        bound = gpus
    better = next(nearest(cfg, bound, gpus, objective, key), None)
    assert better is None, (cfg.model_dump(exclude_defaults=True), key, better)


@pytest.mark.parametrize("seed", range(10))
def test_changes_objective_is_optimal(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(25):
        n = rng.choice(GPUS)
        check_optimal(invalid_layout(rng, n), n, "changes")


@pytest.mark.parametrize("seed", range(3))
def test_distance_objective_is_optimal(seed: int) -> None:
    rng = random.Random(100 + seed)
    for _ in range(20):
        n = rng.choice(SMALL)
        check_optimal(invalid_layout(rng, n), n, "distance")


@pytest.mark.parametrize("seed", range(2))
def test_without_gpus_is_optimal(seed: int) -> None:
    rng = random.Random(200 + seed)
    for _ in range(20):
        check_optimal(invalid_layout(rng, rng.choice(SMALL)), None, "changes")


@pytest.mark.parametrize("seed", range(2))
def test_reference_prunes_only_invalid_branches(seed: int) -> None:
    """The reference's early rule checks drop no candidate that its complete-layout check
    keeps: both walks list the same layouts (those keeping every feature and changing at
    most one of the user's fields)."""
    rng = random.Random(300 + seed)
    found = 0
    for _ in range(4):
        n = rng.choice((4, 6))
        cfg = invalid_layout(rng, n)
        for gpus in (n, None):
            walks = [
                sorted(repr(c) for c in nearest(cfg, n, gpus, "changes", (0, 0, 2, 0, 0), early=e))
                for e in (True, False)
            ]
            assert walks[0] == walks[1], cfg
            found += len(walks[0])
    assert found
