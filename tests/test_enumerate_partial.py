"""Partial evaluation keeps the meaning of every tree of the catalogue.

For each rule, resolution guard and value, and derived width: substituting any subset
of the fields by their values and folding, then evaluating the rest, gives what
evaluating the whole tree gives (`meshsat.solver.backends.interp` is the reference).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.backends.partial import atoms, conjuncts, fold, replace_atoms, specialise
from meshsat.solver.catalogue import RESOLUTIONS, RULES
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.derived import DERIVED
from meshsat.solver.lang.expr import And, Const, Expr, Field, fields_of
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.validation.validate import environment

TREES: list[tuple[str, Expr]] = [
    *((r.id, r.constraint) for r in RULES),
    *((f"{res.id}/{i}/when", s.when) for res in RESOLUTIONS for i, s in enumerate(res.steps)),
    *(
        (f"{res.id}/{i}/{name}", value)
        for res in RESOLUTIONS
        for i, s in enumerate(res.steps)
        for name, value in s.sets
    ),
    *((d.name, d.body) for d in DERIVED),
]

_SIZES = (1, 2, 3, 4, 6, 8, 16)
_MODELS = [
    None,
    ModelSpec(
        architecture="DeepseekV3ForCausalLM",
        num_attention_heads=128,
        num_key_value_heads=128,
        num_experts=256,
        num_hidden_layers=61,
    ),
    ModelSpec(
        architecture="DeepseekV32ForCausalLM",
        is_deepseek_dsa=True,
        num_attention_heads=64,
        num_key_value_heads=4,
        num_experts=64,
        num_hidden_layers=4,
    ),
    ModelSpec(architecture="MiMoV2ForCausalLM", is_multimodal=True, num_attention_heads=6),
]


def _random_env(rng: random.Random) -> dict[str, Any]:
    env = environment(Config(), rng.choice(_MODELS))
    for name, spec in SPECS.items():
        if spec.model_fact or rng.random() < 0.5:
            continue
        if spec.size:
            env[name] = rng.choice(_SIZES)
        elif spec.kind == "bool":
            env[name] = rng.random() < 0.5
        elif spec.choices:
            env[name] = rng.choice(spec.choices)
        elif spec.kind == "int":
            env[name] = rng.choice([None, 0, 1, 2, 8]) if spec.optional else rng.choice([0, 1, 2])
    return env


def _value(e: Expr, env: dict[str, Any]) -> Any:
    try:
        return ("ok", evaluate(e, env))
    except TypeError:  # unset optional in arithmetic outside any guard
        return ("type-error", None)


@pytest.mark.parametrize(("name", "tree"), TREES, ids=[n for n, _ in TREES])
def test_specialise_agrees_with_interp(name: str, tree: Expr) -> None:
    rng = random.Random(name)
    reads = fields_of(tree)
    checked = 0
    for _ in range(100):  # enough draws that 20 evaluate, whatever the field count
        env = _random_env(rng)
        expected = _value(tree, env)
        if expected[0] != "ok":
            continue
        known = {n for n in reads if rng.random() < 0.5}
        consts = {n: Const(env[n], SPECS[n].kind) for n in known}
        partial = specialise(tree, consts, consts)
        assert not set(fields_of(partial)) & known
        assert _value(partial, env) == expected, (name, sorted(known))
        checked += 1
        whole = specialise(tree, {n: Const(env[n], SPECS[n].kind) for n in SPECS})
        assert isinstance(whole, Const), name
        assert whole.value == expected[1]
    assert checked >= 20


@pytest.mark.parametrize(("name", "tree"), TREES[: len(RULES)], ids=[r.id for r in RULES])
def test_conjuncts_and_atoms_keep_meaning(name: str, tree: Expr) -> None:
    rng = random.Random(name + "/conj")
    folded = fold(tree)
    parts = conjuncts(folded)
    joined = And(*parts) if parts else Const(True, "bool")
    stand_ins = {a.key(): Field(f"__a{i}", "bool") for i, a in enumerate(atoms(folded))}
    opaque = replace_atoms(folded, stand_ins)
    for _ in range(40):
        env = _random_env(rng)
        expected = _value(tree, env)
        if expected[0] != "ok":
            continue
        assert _value(joined, env) == expected
        values = [_value(a, env) for a in atoms(folded)]
        if all(v[0] == "ok" for v in values):  # an atom may be meaningless unguarded
            truth = {f"__a{i}": v[1] for i, v in enumerate(values)}
            assert bool(evaluate(opaque, {**env, **truth})) == bool(expected[1])


def test_folding_examples() -> None:
    from meshsat.solver.backends.render import text
    from meshsat.solver.lang.fields import F

    tp = Const(8, "int")
    cases = [
        (F.tp_size % F.dp_size == 0, {"tp_size": tp}, "8 % dp_size == 0"),
        ((F.dp_size > 1) & F.enable_dp_attention, {"dp_size": Const(1, "int")}, "false"),
        (F.moe_a2a_backend == "deepep", {}, "moe_a2a_backend == 'deepep'"),
    ]
    for tree, sub, expected in cases:
        assert text(specialise(tree, sub)) == expected
