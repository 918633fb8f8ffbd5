"""The exponent encoding agrees with the Python back-end, rule by rule, on random layouts."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import pytest
import z3

from meshsat.solver.backends.pyeval import compiled
from meshsat.solver.backends.z3exp import Universe, factorize, order_weights
from meshsat.solver.catalogue.literals import open_literals
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.lang.model_spec import MODEL_FACT_NAMES, ModelSpec
from meshsat.solver.packs import NEWEST
from meshsat.solver.repair.problem import (
    EXACT_RULE,
    FIXED_FACTS,
    GPUS_RULE,
    Key,
    changeable,
    live_fields,
    problem,
)
from meshsat.solver.validation.validate import environment

MODELS = (
    None,
    ModelSpec.model_validate(
        {
            "architecture": "DeepseekV3ForCausalLM",
            "num_attention_heads": 128,
            "num_key_value_heads": 128,
            "num_experts": 256,
            "num_hidden_layers": 61,
        }
    ),
    ModelSpec.model_validate(
        {
            "architecture": "DeepseekV32ForCausalLM",
            "is_deepseek_dsa": True,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "num_experts": 96,
            "num_hidden_layers": 3,
        }
    ),
    ModelSpec.model_validate(
        {"architecture": "MiMoV2FlashForCausalLM", "is_multimodal": True, "num_attention_heads": 12}
    ),
)


ERRORS_INDEX = {i: rule.id for i, rule in enumerate(NEWEST.rules) if rule.severity == "error"}


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def test_factorize_and_universe() -> None:
    for n in range(1, 400):
        f = factorize(n)
        assert math.prod(p**k for p, k in f.items()) == n
        assert all(all(p % q for q in range(2, p)) for p in f)
        assert Universe.dividing(n).divisors() == divisors(n)
    u = Universe.dividing(48)
    assert u.exponents(6) == (1, 1) and u.exponents(10) is None and u.exponents(0) is None
    assert u.divides_bound(24) and not u.divides_bound(32) and not u.divides_bound(5)


@pytest.mark.parametrize("primes", [(2, 3), (2, 5), (2, 3, 5), (3, 7), (2, 3, 7)])
def test_order_weights_keep_every_sign(primes: tuple[int, ...]) -> None:
    box = tuple(6 if p == 2 else 3 for p in primes)
    w = order_weights(primes, box)
    assert w is not None
    for a in itertools.product(*(range(-b, b + 1) for b in box)):
        lhs = math.prod(p**x for p, x in zip(primes, a, strict=True) if x > 0)
        rhs = math.prod(p**-x for p, x in zip(primes, a, strict=True) if x < 0)
        weighted = sum(x * y for x, y in zip(a, w, strict=True))
        assert (lhs > rhs) == (weighted > 0) and (lhs == rhs) == (weighted == 0)


def test_live_fields_exclude_what_no_rule_reads() -> None:
    live = live_fields(NEWEST)
    assert {"tp_size", "enable_dp_attention", "max_ep_size", "architecture"} <= live
    # pplx's dispatch budget (A2A-PPLX-DISPATCH) reads the chunked prefill size.
    assert "chunked_prefill_size" in live
    for name in ("schedule_conservativeness", "expert_distribution_recorder_buffer_size"):
        assert name not in live
    assert not set(FIXED_FACTS) & set(changeable(NEWEST))
    assert not set(MODEL_FACT_NAMES) & set(changeable(NEWEST))
    assert (
        "eplb_algorithm" in open_literals()
        and "elasticity_aware" in open_literals()["eplb_algorithm"]
    )


def random_layout(rng: random.Random, n: int) -> Config:
    values: dict[str, Any] = {}
    for name in changeable(NEWEST):
        spec = SPECS[name]
        if spec.size:
            values[name] = rng.choice(divisors(n))
        elif spec.kind == "bool":
            values[name] = rng.random() < 0.3
        elif spec.kind == "enum":
            pool = list(spec.choices) or [spec.default, *open_literals()[name]]
            values[name] = rng.choice(pool)
        elif spec.optional and rng.random() < 0.5:
            values[name] = None
        else:
            low = spec.minimum if spec.minimum is not None else -1
            values[name] = rng.choice([v for v in (-1, 0, 1, 2, 3, 4, 8, 12, 16) if v >= low])
    if rng.random() < 0.5:  # most layouts keep most fields at their defaults
        keep = rng.sample(sorted(values), 8)
        values = {k: values[k] for k in keep}
        values.setdefault("tp_size", rng.choice(divisors(n)))
    return Config.model_validate(values)


@pytest.mark.parametrize("n", [8, 12, 16, 48, 64])
def test_every_rule_agrees_with_python(n: int) -> None:
    """Pin every field in Z3 and compare each rule's truth with the compiled Python back-end.

    Where a size quotient is inexact the exponent form is not its value, so there fix
    asserts FIX-EXACT-DIV; that must only ever exclude layouts Python rejects anyway.
    """
    rng = random.Random(n)
    checker = compiled()
    for i in range(60):
        model = MODELS[i % len(MODELS)]
        cfg = random_layout(rng, n)
        env = environment(cfg, model)
        resolved, _ = checker.resolve(env)
        failed = {ERRORS_INDEX[k] for k in checker.violations(resolved, env) if k in ERRORS_INDEX}
        fixed = tuple((f, env[f]) for f in (*FIXED_FACTS, *MODEL_FACT_NAMES))
        prob = problem(Key(Universe.dividing(n), n, fixed, NEWEST))
        s = prob.solver
        s.push()
        try:
            s.add(*(prob.is_value(f, env[f]) for f in changeable(NEWEST)))
            assert s.check() == z3.sat
            m = s.model()
            truth = {rid: z3.is_true(m.eval(f, True)) for rid, f in prob.formulas.items()}
        finally:
            s.pop()
        assert truth[GPUS_RULE] == (checker.derived(resolved)["gpus_used"] == n)
        if truth[EXACT_RULE]:
            z3_failed = {r.id for r in NEWEST.errors if not truth[r.id]}
            assert z3_failed == failed, cfg.model_dump()
        else:
            assert failed, cfg.model_dump()
