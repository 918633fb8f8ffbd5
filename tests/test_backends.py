"""The back-ends agree: compiled Python, the tree-walking interpreter and Z3.

Generated environments include values `Config` rejects (sizes of 0), so the agreement
holds for the rule language's own semantics, not only for well-typed inputs.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from tests.backends import interp, py, z3_eval
from tests.strategies import raw_envs

N_EXAMPLES = 2000


@settings(
    max_examples=N_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(raw_envs())
def test_three_backends_agree(env: dict[str, Any]) -> None:
    resolved_py, failed_py = py(env)
    resolved_in, failed_in = interp(env)
    resolved_z3, failed_z3 = z3_eval(env)
    assert failed_py == failed_in == failed_z3
    assert resolved_py == resolved_in
    for name, value in resolved_py.items():
        other = resolved_z3[name]
        if isinstance(value, float):
            assert abs(value - other) < 1e-9, name
        else:
            assert other == value and type(other) is type(value), name


def test_generated_space_covers_both_verdicts() -> None:
    """The strategy reaches valid and invalid layouts and most rules (guards the test)."""
    from hypothesis import find

    from meshsat.solver.catalogue import ERRORS

    seen: set[str] = set()
    valid = [0]

    @settings(max_examples=N_EXAMPLES, deadline=None, derandomize=True, database=None)
    @given(raw_envs())
    def collect(env: dict[str, Any]) -> None:
        _, failed = py(env)
        errors = failed & {r.id for r in ERRORS}
        seen.update(errors)
        valid[0] += not errors

    collect()
    assert valid[0] > 100
    assert len(seen) >= 0.8 * len(ERRORS), sorted({r.id for r in ERRORS} - seen)
    assert find(raw_envs(), lambda e: py(e)[1] == frozenset())
