"""A solver-only enumerator: the cross-check that shares no code with the generator.

Every rule, the symbolic resolution and the fixed-point condition come from
`Z3Encoder` (resolved value == raw value on each varied field, which is the
definition itself rather than the per-step form the generator derives). The search
is a depth-first walk over the domains of `meshsat.solver.enumeration.space`, asking Z3 at every
node whether the partial layout still has a completion (`push`, assert, `check`, recurse,
`pop`), so no blocking clauses pile up. It costs about a millisecond per node: fine
for the small N the tests give it, hopeless as a product (see docs/encodings.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from meshsat.solver.enumeration.space import DEFAULT_VARY, dims_of, varied_fields
from meshsat.solver.enumeration.where import parse
from meshsat.solver.inputs import as_config, as_model
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.derived import gpus_used
from meshsat.solver.lang.expr import Cmp, Const, Expr
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import NEWEST
from meshsat.solver.validation.validate import environment


def solver_layouts(
    gpus: int,
    base: Config | Mapping[str, Any] | None = None,
    model: ModelSpec | Mapping[str, Any] | None = None,
    vary: Iterable[str] = DEFAULT_VARY,
    where: Iterable[str | Expr] = (),
) -> set[tuple[Any, ...]]:
    """The varied values of every legal layout on exactly `gpus` GPUs, found by Z3."""
    import z3

    from meshsat.solver.backends.z3enc import Z3Encoder

    cfg = as_config(base if base is not None else {})
    spec = as_model(model)
    dims = dims_of(vary)
    fields = varied_fields(dims)
    env = environment(cfg, spec)
    enc = Z3Encoder(NEWEST.resolutions)
    s = z3.Solver()
    s.add(*enc.domain)
    for name in SPECS:
        if name not in fields:
            s.add(enc.value_term(name, env[name]))
    for rule in NEWEST.constraints:  # SGLang's errors and meshsat's advice, as enumerate
        s.add(enc.rule_term(rule))
    for name in fields:
        resolved, raw = enc.resolved[name], enc.raw[name]
        s.add(resolved.val == raw.val)
        if raw.is_set is not None:
            s.add(resolved.is_set == raw.is_set)
    s.add(enc.formula(Cmp("==", gpus_used, Const(gpus, "int"))))
    for w in where:
        s.add(enc.formula(parse(w) if isinstance(w, str) else w))

    found: set[tuple[Any, ...]] = set()
    chosen: list[Any] = []

    def walk(depth: int) -> None:
        if depth == len(dims):
            found.add(tuple(chosen))
            return
        dim = dims[depth]
        for values in dim.domain(gpus):
            s.push()
            s.add(*(enc.value_term(f, v) for f, v in zip(dim.fields, values, strict=True)))
            if _decided(s.check(), z3):
                chosen.extend(values)
                walk(depth + 1)
                del chosen[len(chosen) - len(values) :]
            s.pop()

    if _decided(s.check(), z3):
        walk(0)
    return found


def _decided(result: Any, z3: Any) -> bool:
    if result == z3.unknown:
        raise RuntimeError("Z3 could not decide a partial layout; the cross-check is void")
    return bool(result == z3.sat)
