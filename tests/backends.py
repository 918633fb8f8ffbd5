"""The three ways tests evaluate the catalogue on a raw environment.

- `py`: the compiled back-end the product uses (`meshsat.solver.backends.pyeval`);
- `interp`: resolution and rules walked node by node with `meshsat.solver.backends.interp` (no
codegen);
- `z3`: every field pinned in a Z3 solver, each rule read off the model.
Each returns (resolved environment, ids of violated rules, warnings included).
They evaluate the seed's pack, whose rules are the catalogue's as declared (other packs add
their differences to it and are checked by tests/test_packs.py).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import z3

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.backends.pyeval import compiled
from meshsat.solver.backends.z3enc import Z3Encoder
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.packs import SEED

Result = tuple[dict[str, Any], frozenset[str]]


RULES, RESOLUTIONS = SEED.rules, SEED.resolutions


def py(raw: dict[str, Any]) -> Result:
    c = compiled(SEED)
    resolved, _ = c.resolve(raw)
    return resolved, frozenset(RULES[i].id for i in c.violations(resolved, raw))


def interp(raw: dict[str, Any]) -> Result:
    env = dict(raw)
    for res in RESOLUTIONS:
        for step in res.steps:
            if evaluate(step.when, env, raw):
                new = {name: evaluate(value, env, raw) for name, value in step.sets}
                env.update(new)
    failed = frozenset(
        r.id for r in RULES if evaluate(r.when, env, raw) and not evaluate(r.holds, env, raw)
    )
    return env, failed


@cache
def _z3() -> tuple[Z3Encoder, dict[str, Any]]:
    enc = Z3Encoder(RESOLUTIONS)
    return enc, {r.id: enc.rule_term(r) for r in RULES}


def z3_eval(raw: dict[str, Any]) -> Result:
    enc, terms = _z3()
    solver = z3.Solver()
    solver.add(*(enc.value_term(n, raw[n]) for n in SPECS))
    if solver.check() != z3.sat:
        raise AssertionError("pinning every field must be satisfiable before the rules")
    model = solver.model()
    resolved = {n: _decode(enc, model, n) for n in SPECS}
    failed = frozenset(
        rid for rid, t in terms.items() if z3.is_false(model.eval(t, model_completion=True))
    )
    return resolved, failed


def _decode(enc: Z3Encoder, model: z3.ModelRef, name: str) -> Any:
    spec, sym = SPECS[name], enc.resolved[name]
    if sym.is_set is not None and z3.is_false(model.eval(sym.is_set, model_completion=True)):
        return None
    v = model.eval(sym.val, model_completion=True)
    if spec.kind == "bool":
        return z3.is_true(v)
    if spec.kind == "enum":
        return enc.codes.value(v.as_long())
    if spec.kind == "float":
        return float(v.as_fraction())
    return v.as_long()


BACKENDS = {"py": py, "interp": interp, "z3": z3_eval}
