"""Z3's two roles: the completion tables, and a solver-only enumeration to agree with.

`solver_layouts` shares nothing with the generator (its fixed point is "resolved ==
raw" in Z3 rather than the per-step conditions), so agreement on every small N is an
independent check of both.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from meshsat.solver.enumeration.completions import PyCompletions, Z3Completions
from meshsat.solver.enumeration.layouts import EnumerationQuery
from meshsat.solver.enumeration.space import DEFAULT_VARY
from tests.enum_cases import MODELS, model
from tests.reference.solver_enum import solver_layouts


def _rows(n: int, model_name: str | None = None, **kw: Any) -> set[tuple[Any, ...]]:
    e = EnumerationQuery.of(model=model(model_name), **kw).enumerator()
    return {r[: len(e.vary)] for r in e.rows(n)}


@pytest.mark.parametrize("n", range(1, 13))
def test_solver_only_enumeration_agrees(n: int) -> None:
    assert solver_layouts(n) == _rows(n)


@pytest.mark.parametrize("model_name", list(MODELS))
@pytest.mark.parametrize("n", [4, 6, 8])
def test_solver_only_enumeration_agrees_with_models(n: int, model_name: str) -> None:
    assert solver_layouts(n, model=model(model_name)) == _rows(n, model_name)


@pytest.mark.parametrize(
    ("base", "vary", "where"),
    [
        ({}, (*DEFAULT_VARY, "moe_a2a_backend"), ()),
        ({"moe_a2a_backend": "deepep"}, DEFAULT_VARY, ("attn_tp <= 2",)),
        ({}, DEFAULT_VARY, ("cp_strategy == 'zigzag' or dp >= 2", "moe_tp in (1, 2)")),
    ],
)
def test_solver_only_enumeration_agrees_on_variants(
    base: dict[str, Any], vary: tuple[str, ...], where: tuple[str, ...]
) -> None:
    for n in (4, 6, 8):
        z = solver_layouts(n, base, None, vary, where)
        assert z == _rows(n, base=base, vary=vary, where=where)
        assert z or n < 8


CASES = [
    (None, DEFAULT_VARY),
    (None, (*DEFAULT_VARY, "moe_a2a_backend", "enable_dp_lm_head", "dcp_comm_backend")),
    ("deepseek-v3", (*DEFAULT_VARY, "moe_a2a_backend")),
    ("deepseek-v3.2", (*DEFAULT_VARY, "moe_a2a_backend", "enable_eplb")),
    ("mimo-v2-flash", (*DEFAULT_VARY, "language_only")),
]


@pytest.mark.parametrize(("model_name", "vary"), CASES)
def test_z3_completion_table_equals_brute_force(
    model_name: str | None, vary: tuple[str, ...]
) -> None:
    """Every signature, met or not, has the same completions from Z3 and from the
    Python product over the finite flag domain."""
    e = EnumerationQuery.of(model=model(model_name), vary=vary).enumerator()
    compared = 0
    for combo in e.combos:
        z3_table = combo.table.completions
        assert isinstance(z3_table, Z3Completions)
        n_atoms = len(combo.spec.atoms)
        py_table = PyCompletions(combo.spec.inner, combo.flag_constraints, n_atoms)
        for sig in itertools.product((False, True), repeat=n_atoms):
            assert z3_table(sig) == py_table(sig), sig
            compared += 1
    assert compared >= len(e.combos)
