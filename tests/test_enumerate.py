"""The enumerate API: properties, varied spaces, bases, models, errors."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from meshsat import solver
from meshsat.solver.enumeration.layouts import EnumerationQuery, Layout, count
from meshsat.solver.enumeration.space import DEFAULT_VARY, accepted_fields, dims_of, divisors
from meshsat.solver.errors import InputError
from meshsat.solver.lang.config import Config
from meshsat.solver.validation.validate import validate
from tests.enum_cases import MODELS, model, oracle, oracle_for


def _values(layouts: list[Layout]) -> list[tuple[Any, ...]]:
    return [tuple(lay.values.values()) for lay in layouts]


@pytest.mark.parametrize("model_name", [None, *MODELS])
@pytest.mark.parametrize("n", [6, 16, 24])
def test_every_listed_layout_validates(n: int, model_name: str | None) -> None:
    spec = model(model_name)
    listed = list(solver.enumerate(n, model=spec))
    assert listed
    for lay in listed:
        report = validate(Config().model_copy(update=lay.values), spec, explain=False)
        assert report.valid, lay.values
        assert report.resolved == dict(lay.config)
        assert report.derived == dict(lay.derived)
        assert lay.derived["gpus_used"] == n
    values = _values(listed)
    assert len(set(values)) == len(values)
    assert solver.count(n, model=spec) == len(listed)


@pytest.mark.parametrize("model_name", [None, *MODELS])
def test_every_model_matches_brute_force(model_name: str | None) -> None:
    for n in (8, 12, 32):
        listed = set(_values(list(solver.enumerate(n, model=model(model_name)))))
        assert listed == {f.values for f in oracle(n, model_name)}


# Spaces and bases beyond the default, each against the brute-force reference.
VARIANTS: list[tuple[dict[str, Any], tuple[str, ...]]] = [
    ({}, (*DEFAULT_VARY, "moe_a2a_backend")),
    ({"moe_a2a_backend": "deepep"}, DEFAULT_VARY),
    ({"chunked_prefill_size": 8192, "enable_eplb": True}, DEFAULT_VARY),
    ({}, ("tp", "pp", "dp", "enable_dp_attention", "nnodes", "dwdp_size", "enable_dp_lm_head")),
    (
        {},
        (
            "tp",
            "dp",
            "ep",
            "enable_dp_attention",
            "dcp_comm_backend",
            "dcp",
            "dcp_replicate_q_proj",
        ),
    ),
    ({"dwdp_size": 4, "tp_size": 4}, ("dp", "ep", "moe_dp", "enable_dp_attention")),
    ({"tp_size": 8}, ("pp", "dp", "attn_cp", "cp_strategy", "enable_dp_attention")),
    ({"nnodes": 2, "elastic_ep_backend": "mooncake"}, (*DEFAULT_VARY, "moe_a2a_backend")),
    ({}, ("tp", "pp", "dp")),  # sizes only: no completion table at all
    ({"tp_size": 4}, ("enable_prefill_cp", "moe_a2a_backend", "enable_dp_attention")),
]


@pytest.mark.parametrize("model_name", [None, "deepseek-v3", "qwen3-moe"])
@pytest.mark.parametrize(("base", "vary"), VARIANTS)
def test_variants_match_brute_force(
    base: dict[str, Any], vary: tuple[str, ...], model_name: str | None
) -> None:
    nonempty = 0
    for n in (4, 8, 12):
        e = EnumerationQuery.of(base, model(model_name), vary).enumerator()
        k = len(e.vary)
        rows = [r[:k] for r in e.rows(n)]
        expected = {f.values for f in oracle_for(n, model_name, tuple(base.items()), vary)}
        assert set(rows) == expected
        assert len(rows) == len(set(rows)) == e.count(n)
        nonempty += bool(rows)
    assert nonempty or base.get("dwdp_size")


def test_python_and_z3_completions_list_the_same() -> None:
    for model_name, n in itertools.product([None, "deepseek-v3", "deepseek-v3.2"], [16, 48]):
        vary = (*DEFAULT_VARY, "moe_a2a_backend")
        z3_rows = list(EnumerationQuery.of(model=model(model_name), vary=vary).enumerator().rows(n))
        py_rows = list(
            EnumerationQuery.of(model=model(model_name), vary=vary, completions="python")
            .enumerator()
            .rows(n)
        )
        assert z3_rows == py_rows


def test_no_resolution_duplicates() -> None:
    # dp_size 1 with DP attention is the same launch as without: never listed.
    for lay in solver.enumerate(16):
        assert not (lay.config["dp_size"] == 1 and lay.config["enable_dp_attention"])
    # A base all-to-all backend pins ep to tp: only the fixed point is listed.
    listed = list(solver.enumerate(16, base={"moe_a2a_backend": "deepep"}))
    assert listed and all(lay.config["ep_size"] == lay.config["tp_size"] for lay in listed)
    # A DeepSeek-V3 model with prefill CP: attn_cp is the whole attention-TP group, and
    # the non-varied backend is resolved to DeepEP in the output.
    for lay in solver.enumerate(16, model=MODELS["deepseek-v3"]):
        if lay.config["enable_prefill_cp"]:
            attn_dp = lay.derived["attn_dp"]
            assert lay.config["attn_cp_size"] * attn_dp == lay.config["tp_size"]
            assert lay.config["moe_a2a_backend"] == "deepep"


def test_up_to_is_the_union_of_exact_counts() -> None:
    for n in (1, 7, 12, 24):
        listed = list(solver.enumerate(n, up_to=True))
        exact = [v for m in range(1, n + 1) for v in _values(list(solver.enumerate(m)))]
        assert _values(listed) == exact
        assert count(n, up_to=True) == len(listed)
        assert {lay.derived["gpus_used"] for lay in listed} <= set(range(1, n + 1))
    expected = {f.values for f in oracle(10, None, up_to=True)}
    assert set(_values(list(solver.enumerate(10, up_to=True)))) == expected


def test_gpus_per_node_from_base_or_argument() -> None:
    by_base = count(32, base={"gpus_per_node": 4}, intra_node=("attn_tp",))
    by_arg = count(32, gpus_per_node=4, intra_node=("attn_tp",))
    default = count(32, intra_node=("attn_tp",))
    assert by_base == by_arg < default < count(32)
    lay = next(solver.enumerate(32, gpus_per_node=4))
    assert lay.config["gpus_per_node"] == 4


def test_layout_object() -> None:
    lay = next(solver.enumerate(8, where=["tp == 8 and ep == 8 and dp == 2"]))
    assert lay.values["tp_size"] == 8 and lay.values["ep_size"] == 8
    assert set(lay.vary) == {*DEFAULT_VARY, "cp_strategy"}
    cfg = lay.as_config()
    assert isinstance(cfg, Config) and cfg.tp_size == 8
    assert lay.derived["attn_tp"] == lay.config["tp_size"] // lay.derived["attn_dp"]
    with pytest.raises(AttributeError):
        lay.config = {}  # type: ignore[misc]


def test_every_listed_layout_validates_as_it_is_handed_back() -> None:
    """`as_config()` is what a caller passes back to `validate` and `groups`: every layout
    enumerate lists must pass there (200 of 377 on 8 GPUs failed FLAG-ABSENT-* when it was
    the resolved config, whose legacy fields read as typed)."""
    layouts = list(solver.enumerate(8))
    assert len(layouts) > 100
    for lay in layouts:
        report = solver.validate(lay.as_config())
        assert report.valid, (lay.values, [v.rule_id for v in report.violations])


def test_infeasible_base_lists_nothing() -> None:
    base = {"dwdp_size": 3}  # DWDP needs dwdp_size == tp_size: no divisor of 8 is 3
    assert list(solver.enumerate(8, base=base)) == []
    assert count(8, base=base) == 0
    assert not list(oracle_for(8, None, tuple(base.items()), DEFAULT_VARY))


def test_where_and_intra_node_accept_trees_and_strings() -> None:
    from meshsat.solver.enumeration.where import parse

    assert count(24, where=["attn_tp <= 2"]) == count(24, where=[parse("attn_tp <= 2")])


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"vary": ["node_rank"]}, "cannot vary 'node_rank'"),
        ({"vary": ["tp_szie"]}, "did you mean tp_size?"),
        ({"vary": ["schedule_conservativeness"]}, "--vary accepts size fields"),
        ({"intra_node": ["tensor"]}, "unknown group kind"),
        ({"where": ["tp +"]}, "bad --where expression at column"),
        ({"gpus_per_node": 0}, "gpus_per_node must be a positive integer"),
        ({"base": {"tp_sise": 2}}, "unknown field 'tp_sise'"),
    ],
)
def test_bad_input_is_input_error(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InputError, match=fragment.replace("?", r"\?").replace("+", r"\+")):
        count(8, **kwargs)


@pytest.mark.parametrize("gpus", [0, -4, True, 2.0])
def test_bad_gpu_count(gpus: Any) -> None:
    with pytest.raises(InputError, match="GPU count"):
        list(solver.enumerate(gpus))


def test_vary_error_summarises_accepted_fields() -> None:
    """The error names how many fields --vary accepts and where to see them, in one
    short line (the full list made 1,000-character lines)."""
    with pytest.raises(InputError) as exc:
        dims_of(["platform_x"])
    message = str(exc.value)
    assert f"{len(accepted_fields())} fields" in message and "meshsat fields" in message
    assert len(message) < 300
    assert "moe_a2a_backend" in accepted_fields() and "node_rank" not in accepted_fields()


def test_space_domains() -> None:
    dims = {d.name: d for d in dims_of(DEFAULT_VARY)}
    assert dims["enable_prefill_cp"].fields == ("enable_prefill_cp", "cp_strategy")
    assert dims["enable_prefill_cp"].domain(8) == (
        (False, None),
        (True, "zigzag"),
        (True, "interleave"),
    )
    assert [v for (v,) in dims["tp_size"].domain(12)] == [1, 2, 3, 4, 6, 12]
    assert dims_of(["cp_strategy"]) == dims_of(["enable_prefill_cp"])
    assert divisors(15360)[-3:] == (5120, 7680, 15360) and len(divisors(15360)) == 44


def test_prepare_is_cached() -> None:
    assert (
        EnumerationQuery.of(model=MODELS["qwen3-moe"]).enumerator()
        is EnumerationQuery.of(model=MODELS["qwen3-moe"]).enumerator()
    )
