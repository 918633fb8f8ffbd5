"""Set equality with the brute-force reference for every N of the issue.

For each N in 1..64, 96, 128 and 384, without and with a model, the generator must
list exactly the layouts the reference finds by validating every candidate, once
each, with the same resolved config and derived widths; `count` must agree. The same
cached reference, filtered with `meshsat.solver.backends.interp` and `meshsat.solver.groups.plan`,
checks `where` and `intra_node`.
"""

from __future__ import annotations

from typing import Any

import pytest

from meshsat.solver.enumeration.layouts import EnumerationQuery
from meshsat.solver.groups import GROUP_KINDS
from tests.enum_cases import (
    NS,
    SWEEP_MODEL,
    WHERE,
    WHERE_MODEL,
    intra_filter,
    model,
    oracle,
    where_filter,
)

MODEL_CASES = (None, SWEEP_MODEL)


def _listed(n: int, model_name: str | None, **kw: Any) -> list[tuple[Any, ...]]:
    e = EnumerationQuery.of(model=model(model_name), **kw).enumerator()
    k = len(e.vary)
    rows = [r[:k] for r in e.rows(n)]
    assert e.count(n) == len(rows)
    assert len(set(rows)) == len(rows), "duplicate layouts"
    return rows


@pytest.mark.parametrize("model_name", MODEL_CASES)
@pytest.mark.parametrize("n", NS)
def test_same_layouts_as_brute_force(n: int, model_name: str | None) -> None:
    e = EnumerationQuery.of(model=model(model_name)).enumerator()
    expected = {f.values: f for f in oracle(n, model_name)}
    listed = [e.layout(r) for r in e.rows(n)]
    assert {tuple(lay.values.values()) for lay in listed} == set(expected)
    assert len(listed) == len(expected) == e.count(n)
    for lay in listed:
        found = expected[tuple(lay.values.values())]
        assert dict(lay.config) == dict(found.resolved)
        assert dict(lay.derived) == dict(found.derived)


@pytest.mark.parametrize("model_name", MODEL_CASES)
@pytest.mark.parametrize("n", NS)
def test_where_as_brute_force(n: int, model_name: str | None) -> None:
    where = WHERE if model_name is None else WHERE_MODEL
    expected = where_filter(oracle(n, model_name), where)
    assert set(_listed(n, model_name, where=where)) == expected


@pytest.mark.parametrize(
    ("n", "model_name"),
    [(n, None) for n in NS if n <= 128] + [(n, SWEEP_MODEL) for n in NS if n <= 64],
)
def test_intra_node_as_brute_force(n: int, model_name: str | None) -> None:
    # Nodes of 4 GPUs, so that groups cross node boundaries from N = 5 on.
    found = oracle(n, model_name)
    for kind in GROUP_KINDS:
        expected = intra_filter(found, (kind,), gpus_per_node=4)
        got = _listed(n, model_name, intra_node=(kind,), gpus_per_node=4)
        assert set(got) == expected, kind


@pytest.mark.parametrize("n", [12, 16, 24, 32, 48, 64])
def test_intra_node_default_node_size(n: int) -> None:
    found = oracle(n)
    pair = ("attn_tp", "ep")
    expected = intra_filter(found, pair, gpus_per_node=8)
    assert set(_listed(n, None, intra_node=pair)) == expected
    assert expected != {f.values for f in found}, "the filter must remove something"


@pytest.mark.parametrize("model_name", MODEL_CASES)
def test_intra_node_384(model_name: str | None) -> None:
    # A rank plan of 384 GPUs takes milliseconds; a filter keeps the distinct plans few.
    where = ("dcp == 1 and moe_dp == 1 and tp in (12, 24, 48, 96)",)
    if model_name is None:
        where = (*where, "attn_cp <= 4")
    kinds = ("attn_tp", "attn_cp", "ep", "moe_tp")
    subset = [f for f in oracle(384, model_name) if f.values in where_filter([f], where)]
    sizes = []
    for kind in kinds:
        expected = intra_filter(subset, (kind,), gpus_per_node=8)
        got = _listed(384, model_name, where=where, intra_node=(kind,))
        assert set(got) == expected, kind
        sizes.append(len(expected))
    assert max(sizes) > 0 and min(sizes) < len(subset), "the comparison must mean something"
