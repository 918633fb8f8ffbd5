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

from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from typing import Any

import z3
from z3 import z3core

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


@dataclass(frozen=True)
class _Packed:
    """Every rule term and resolved field as one Z3 term, so that a model is read in one
    `eval` (shared subterms evaluated once) instead of some 500 wrapper calls: the same
    terms, read the same way, in 6 ms a case instead of 14 (Z3 was the agreement test's
    costliest back-end by far)."""

    enc: Z3Encoder
    ids: tuple[str, ...]
    #: One bit per rule, 1 where its term is false in the model.
    failed: Any
    #: A tuple datatype of (is_set, value) per field, in `SPECS` order.
    fields: Any


@cache
def _z3() -> _Packed:
    enc = Z3Encoder(RESOLUTIONS)
    bit = {False: z3.BitVecVal(0, 1), True: z3.BitVecVal(1, 1)}
    terms = [z3.If(enc.rule_term(r), bit[False], bit[True]) for r in RULES]
    parts: list[tuple[str, Any]] = []
    values: list[Any] = []
    for name in SPECS:
        sym = enc.resolved[name]
        parts += [(f"{name}__set", z3.BoolSort()), (name, sym.val.sort())]
        values += [sym.is_set if sym.is_set is not None else z3.BoolVal(True), sym.val]
    record = z3.Datatype("Resolved")
    record.declare("resolved", *parts)
    made = record.create()
    return _Packed(enc, tuple(r.id for r in RULES), z3.Concat(*terms), made.resolved(*values))


def z3_eval(raw: dict[str, Any]) -> Result:
    z = _z3()
    solver = z3.Solver()
    solver.add(*(z.enc.value_term(n, raw[n]) for n in SPECS))
    if solver.check() != z3.sat:
        raise AssertionError("pinning every field must be satisfiable before the rules")
    model = solver.model()
    bits = model.eval(z.failed, model_completion=True).as_long()
    last = len(z.ids) - 1  # Concat puts the first rule's bit highest
    failed = frozenset(rid for i, rid in enumerate(z.ids) if bits >> (last - i) & 1)
    record = model.eval(z.fields, model_completion=True)
    ctx = record.ctx.ref()
    app = z3core.Z3_to_app(ctx, record.as_ast())
    args = [z3core.Z3_get_app_arg(ctx, app, i) for i in range(2 * len(SPECS))]
    resolved = {n: _decode(ctx, n, args[2 * i], args[2 * i + 1]) for i, n in enumerate(SPECS)}
    return resolved, failed


def _decode(ctx: Any, name: str, is_set: Any, value: Any) -> Any:
    """A model value read through the C API: the Python wrappers cost some 30 µs a value,
    most of the test's time."""
    spec = SPECS[name]
    if z3core.Z3_get_bool_value(ctx, is_set) == z3.Z3_L_FALSE:
        return None
    if spec.kind == "bool":
        return z3core.Z3_get_bool_value(ctx, value) == z3.Z3_L_TRUE
    text = z3core.Z3_get_numeral_string(ctx, value)
    if spec.kind == "float":
        return float(Fraction(text))
    if spec.kind == "enum":
        return _z3().enc.codes.value(int(text))
    return int(text)


BACKENDS = {"py": py, "interp": interp, "z3": z3_eval}
