"""The enumeration problem: the catalogue specialised to one base config and model.

Everything the generator checks is derived here from the declarations:
- SGLang's resolution is executed symbolically over the varied fields. A non-varied
  field becomes an expression of them (with `enable_prefill_cp` varied and a DeepSeek
  model, `moe_a2a_backend` becomes `ite(enable_prefill_cp, 'deepep', 'none')`).
- A step that would set a varied field yields a fixed-point condition instead:
  `when ⇒ field == new value`. Listing only fixed points is what makes the output
  free of duplicates: a layout SGLang rewrites (dp_size 1 with DP attention) is the
  same launch as the one it is rewritten to, which is listed on its own.
- Every error rule, the GPU count, the `--where` filters and the `--intra-node`
  conditions are then partially evaluated with the base's constants and split into
  conjuncts, each reading as few varied fields as possible.

The GPU count is the placeholder field `GPUS`, so one specialisation serves every N.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshsat.solver.backends.partial import conjuncts, is_const, specialise
from meshsat.solver.enumeration.node_locality import within_nodes
from meshsat.solver.enumeration.space import Dim, varied_fields
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.derived import DERIVED, gpus_used
from meshsat.solver.lang.expr import Cmp, Const, Expr, Field, Implies, Ite
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import Pack, get_pack
from meshsat.solver.validation.validate import environment

#: The GPU count, a parameter of the generated code rather than a constant in it.
GPUS = Field("__gpus", "int")


@dataclass(frozen=True)
class EnumerationProblem:
    """What a layout must satisfy, over the varied fields only.

    `constraints` are conjuncts over the varied fields and `GPUS`; a constant-false
    conjunct means no layout exists. `columns` name the values of a generated row:
    the varied fields, the non-varied fields whose resolved value depends on the
    layout, then the derived widths; `exprs` computes each column. `constant` holds
    the resolved value of every other config field.
    """

    dims: tuple[Dim, ...]
    constraints: tuple[Expr, ...]
    columns: tuple[str, ...]
    exprs: tuple[Expr, ...]
    constant: Mapping[str, Any]
    dependent: tuple[str, ...]
    #: Dependent fields that a non-quiet resolution step changes (what output shows).
    shown_dependent: tuple[str, ...]
    #: The model's facts (None where unknown), from the same environment as `constant`.
    facts: Mapping[str, Any]

    @property
    def varied(self) -> tuple[str, ...]:
        return varied_fields(self.dims)

    @property
    def infeasible(self) -> bool:
        return any(is_const(c, False) for c in self.constraints)


def _const(name: str, value: Any) -> Const:
    return Const(value, SPECS[name].kind)


def build_problem(
    base: Config,
    model: ModelSpec | None,
    dims: tuple[Dim, ...],
    where: tuple[Expr, ...] = (),
    intra_node: tuple[str, ...] = (),
    pack: Pack | None = None,
) -> EnumerationProblem:
    pack = get_pack(pack)
    varied = set(varied_fields(dims))
    raw_values = environment(base, model)
    env: dict[str, Expr] = {n: _const(n, v) for n, v in raw_values.items() if n not in varied}
    # Under the fixed-point condition a varied field's raw value is its resolved one.
    raw = {**env, **{n: SPECS[n].ref for n in varied}}
    constraints: list[Expr] = []
    loud: set[str] = set()
    for res in pack.resolutions:
        for step in res.steps:
            cond = specialise(step.when, env, raw)
            if is_const(cond, False):
                continue
            news = [(name, specialise(value, env, raw)) for name, value in step.sets]
            for name, new in news:
                if name in varied:
                    keep = Implies(cond, Cmp("==", SPECS[name].ref, new))
                    constraints.extend(conjuncts(specialise(keep)))
                else:
                    env[name] = specialise(Ite(cond, new, env[name]))
                    if not step.quiet:
                        loud.add(name)
    checks: list[Expr] = [r.constraint for r in pack.constraints]
    checks.append(Cmp("==", gpus_used, GPUS))
    checks.extend(where)
    checks.extend(within_nodes(kind) for kind in intra_node)
    for check in checks:
        constraints.extend(conjuncts(specialise(check, env, raw)))

    config_fields = [n for n in SPECS if not SPECS[n].model_fact]
    dependent = tuple(n for n in config_fields if n not in varied and not isinstance(env[n], Const))
    constant = {
        n: env[n].value  # type: ignore[attr-defined]
        for n in config_fields
        if n not in varied and isinstance(env[n], Const)
    }
    order = varied_fields(dims)
    columns = (*order, *dependent, *(d.name for d in DERIVED))
    exprs = (
        *(SPECS[n].ref for n in order),
        *(env[n] for n in dependent),
        *(specialise(d.body, env, raw) for d in DERIVED),
    )
    shown = tuple(n for n in dependent if n in loud and SPECS[n].kind != "float")
    return EnumerationProblem(
        dims=dims,
        constraints=tuple(constraints),
        columns=columns,
        exprs=exprs,
        constant=constant,
        dependent=dependent,
        shown_dependent=shown,
        facts={n: v for n, v in raw_values.items() if SPECS[n].model_fact},
    )
