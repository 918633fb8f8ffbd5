"""The conflict core: minimal sets of user-set fields that cannot all hold.

Each core is re-checked with a plain Z3 solver that shares nothing with the explainer
but the rule encoding: pinning the core (with unset fields at their defaults) is unsat,
and freeing any one core field is sat.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshsat.solver import Config, fix, validate
from meshsat.solver.backends.z3enc import Z3Encoder
from meshsat.solver.lang.fields import CONFIG_SPECS, SPECS
from meshsat.solver.packs import NEWEST
from meshsat.solver.validation.validate import environment


@cache
def _plain() -> tuple[Z3Encoder, z3.BoolRef]:
    enc = Z3Encoder(NEWEST.resolutions)
    return enc, z3.And(*enc.domain, *(enc.rule_term(r) for r in NEWEST.errors))


def pinned_check(config: Config, pinned: set[str]) -> z3.CheckSatResult:
    """Rules + pins (the core's fields, and every field the user left unset), decided by a
    fresh solver with a resource limit: the same question always gets the same answer,
    unlike a long-lived solver whose learnt state depends on the questions before."""
    enc, rules = _plain()
    raw = environment(config, None)
    user = config.user_set()
    pairs = [
        p
        for n in SPECS
        if SPECS[n].model_fact or n in pinned or n not in user
        for p in enc.constants(n, raw[n])
    ]
    solver = z3.Then("simplify", "propagate-values", "solve-eqs", "smt").solver()
    solver.set("rlimit", 50_000_000)
    solver.add(z3.simplify(z3.substitute(rules, *pairs)))
    return solver.check()


def witness_by_fix(config: Config, pinned: set[str]) -> Config | None:
    """A valid layout keeping the pinned fields and every field the user left unset, found
    by `fix` (another module: MaxSMT over the exponent encoding). Z3's nonlinear search is
    erratic on these satisfiable questions (4 ms or 3 s for the same one); a witness,
    re-validated here, proves satisfiability on its own. The question is over typed values,
    while a fix pin also holds the value SGLang runs with (a pinned default
    schedule_conservativeness forbids DP attention): so an unset field SGLang's resolution
    sets that a conflict names is unpinned and the question asked again, and a fix that
    still keeps it as typed is the witness."""
    # An unset attn_dp_size is the release's spelling of the DP-attention width, which
    # dp_size holds inside: a fix pin holds the width SGLang runs, so pinning it at 1 would
    # forbid the attention DP the config asks for (dp_size, enable_dp_attention).
    keep = [
        n
        for n in CONFIG_SPECS
        if n in pinned or (n not in config.user_set() and n != "attn_dp_size")
    ]
    rewritten = {t for res in NEWEST.resolutions for t in res.targets}
    # fix searches the divisors of one GPU count; a witness on any count will do, so try
    # multiples of the pinned sizes first, then every small count.
    sizes = [config.__dict__[n] for n in pinned if SPECS[n].size]
    base = math.lcm(*sizes) if sizes else 1
    for gpus in dict.fromkeys([base * k for k in range(1, 33)] + list(range(1, 49))):
        pins = set(keep)
        while True:
            report = fix(config, pins=sorted(pins), gpus=gpus, timeout_s=30)
            if report.conflict is None:
                break
            named = {f for f, _ in report.conflict.pins} & rewritten - pinned
            if not named:
                break
            pins -= named
        found = report.fixes[0].config if report.fixes else None
        if found is not None and all(found.__dict__[n] == config.__dict__[n] for n in keep):
            assert validate(found, explain=False).valid
            return found
    return None


def assert_minimal_core(config: Config, core: tuple[str, ...]) -> None:
    assert set(core) <= config.user_set()
    assert pinned_check(config, set(core)) == z3.unsat
    for name in core:
        assert witness_by_fix(config, set(core) - {name}) is not None, name


@pytest.mark.parametrize(
    "config,core",
    [
        (
            {"tp_size": 8, "dp_size": 3, "attn_cp_size": 2, "enable_dp_attention": True},
            # From 0.5.23 the CP check reads the attention-DP width: DP attention off (three
            # replicas) satisfies it, so attn_cp_size is no longer needed in the core.
            ("tp_size", "dp_size", "enable_dp_attention"),
        ),
        ({"tp_size": 16, "dwdp_size": 8, "enable_eplb": True}, ("tp_size", "dwdp_size")),
        (
            {"tp_size": 8, "ep_size": 4, "moe_dp_size": 4, "attn_cp_size": 4, "pp_size": 2},
            ("pp_size", "moe_dp_size"),
        ),
        (
            {
                "tp_size": 32,
                # A width that divides tp_size (5 would add DCP-TP-DIV's conflict).
                "dcp_size": 4,
                "dcp_comm_backend": "a2a",
                "enable_prefill_cp": True,
                "cp_strategy": "zigzag",
                "attn_cp_size": 2,
            },
            ("enable_prefill_cp", "dcp_size"),
        ),
        # Two independent conflicts with the defaults (ep_size 1; a2a none): the first
        # candidate in declaration order that completes a conflict is named.
        ({"enable_eplb": True, "ep_dispatch_algorithm": "static"}, ("enable_eplb",)),
    ],
)
def test_documented_cores(config: dict[str, Any], core: tuple[str, ...]) -> None:
    report = validate(config)
    assert report.conflict == core
    assert_minimal_core(report.config, core)


def test_valid_layout_has_no_conflict_and_explain_false_skips_it() -> None:
    assert validate({"tp_size": 8}).conflict is None
    assert validate({"tp_size": 8}, explain=True).conflict == ()
    assert validate({"tp_size": 8, "attn_cp_size": 3}, explain=False).conflict is None


_SIZES = st.sampled_from((1, 2, 3, 4, 6, 8))


@st.composite
def invalid_configs(draw: st.DrawFn) -> Config:
    values: dict[str, Any] = {
        "tp_size": draw(_SIZES),
        "dp_size": draw(_SIZES),
        "attn_cp_size": draw(_SIZES),
        "ep_size": draw(_SIZES),
        "moe_dp_size": draw(st.sampled_from((1, 2, 4))),
    }
    for flag in ("enable_dp_attention", "enable_prefill_cp", "enable_eplb"):
        if draw(st.booleans()):
            values[flag] = True
    if draw(st.booleans()):
        values["cp_strategy"] = draw(st.sampled_from(("zigzag", "interleave")))
    if draw(st.booleans()):
        values["pp_size"] = draw(st.sampled_from((1, 2)))
    config = Config(**values)
    from hypothesis import assume

    assume(not validate(config, explain=False).valid)
    return config


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(invalid_configs())
def test_cores_are_minimal_unsat_sets(config: Config) -> None:
    report = validate(config)
    assert report.conflict  # an invalid layout always has a conflict among its fields
    assert_minimal_core(config, report.conflict)
