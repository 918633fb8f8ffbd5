"""Each rule, broken and repaired, through every back-end and through `validate`."""

from __future__ import annotations

from typing import Any

import pytest

from meshsat.solver import fix, validate
from meshsat.solver.backends.render import failure_detail, format_message
from meshsat.solver.catalogue import ERRORS, RULES, WARNINGS
from meshsat.solver.packs import SEED
from tests.backends import BACKENDS
from tests.envs import raw_env
from tests.rule_cases import CASES, WARNING_CASES, WARNING_MODELS, Case

ERROR_IDS = frozenset(r.id for r in ERRORS)


def errors_of(failed: frozenset[str]) -> frozenset[str]:
    return failed & ERROR_IDS


def test_every_rule_has_a_case() -> None:
    covered = {c.rule for c in CASES} | {w for w, _ in WARNING_CASES}
    assert covered == {r.id for r in RULES}
    assert len({c.rule for c in CASES}) == len(CASES), "one row per rule"


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.rule)
def test_rule_breaks_and_repairs(case: Case, backend: str) -> None:
    evaluate = BACKENDS[backend]
    _, failed = evaluate(raw_env(case.config, case.model))
    assert errors_of(failed) == case.fails
    _, after = evaluate(raw_env({**case.config, **case.repair}, case.model))
    assert errors_of(after) == case.remaining


@pytest.mark.parametrize(
    "case", [c for c in CASES if not c.raw_only and c.rule not in SEED.advice], ids=lambda c: c.rule
)
def test_validate_reports_the_rule(case: Case) -> None:
    report = validate(case.config, case.model or None, explain=False, sglang_version=SEED)
    assert not report.valid
    assert {v.rule for v in report.violations} == case.fails
    repaired = validate(
        {**case.config, **case.repair}, case.model or None, explain=False, sglang_version=SEED
    )
    assert {v.rule for v in repaired.violations} == case.remaining
    assert repaired.valid == (not case.remaining)


@pytest.mark.parametrize("case", [c for c in CASES if c.rule in SEED.advice], ids=lambda c: c.rule)
def test_advice_is_a_warning_that_fix_still_keeps(case: Case) -> None:
    # SGLang accepts the layout: the verdict is its own, the advice a warning ...
    report = validate(case.config, case.model or None, explain=False, sglang_version=SEED)
    assert report.valid and not report.violations
    assert case.rule in {w.rule for w in report.warnings}
    assert SEED.kind(case.rule).startswith("advice")
    # ... but meshsat never proposes such a layout: fix repairs it like an error.
    assert case.rule in {r.id for r in SEED.constraints}
    assert case.rule not in {r.id for r in SEED.errors}
    repaired = fix(case.config, case.model or None, sglang_version=SEED)
    assert not repaired.valid_input and repaired.advice == (case.rule,)
    assert not repaired.violations
    after = validate(repaired.best.config, case.model or None, sglang_version=SEED)
    assert after.valid and case.rule not in {w.rule for w in after.warnings}


@pytest.mark.parametrize("rule_id,config", WARNING_CASES, ids=[w for w, _ in WARNING_CASES])
def test_warning_keeps_layout_valid(rule_id: str, config: dict[str, Any]) -> None:
    # The seed's release: later ones drop some warnings with their flags.
    model = WARNING_MODELS.get(rule_id)
    report = validate(config, model, explain=False, sglang_version=SEED)
    assert report.valid
    assert rule_id in {w.rule for w in report.warnings}
    empty = validate({}, explain=False, sglang_version=SEED)
    assert rule_id not in {w.rule for w in empty.warnings}


def test_warning_rules_are_not_errors() -> None:
    assert {r.id for r in WARNINGS} == {w for w, _ in WARNING_CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.rule)
def test_messages_render_with_numbers(case: Case) -> None:
    from tests.backends import py

    raw = raw_env(case.config, case.model)
    resolved, _ = py(raw)
    rule = next(r for r in RULES if r.id == case.rule)
    message = format_message(rule, resolved)
    assert "{" not in message and message
    detail = failure_detail(rule, resolved, raw)
    # A rule whose `holds` is a constant (always-failing when active) has nothing to show.
    if rule.holds.kind == "bool" and type(rule.holds).__name__ != "Const":
        assert detail


def test_arithmetic_detail_matches_the_style_guide() -> None:
    report = validate(
        {"tp_size": 8, "dp_size": 3, "attn_cp_size": 2}, explain=False, sglang_version=SEED
    )
    (v,) = report.violations
    assert v.rule == "CP-DPCP-DIV"
    assert v.detail == "tp_size = 8 is not divisible by dp_size·attn_cp_size = 3·2 = 6"
    assert v.fields == ("attn_cp_size", "dp_size", "tp_size")


def test_detail_stops_at_a_guarding_conjunct() -> None:
    """`is_set(x) and x <= y` with x unset: the reason is the guard, and rendering the
    second conjunct (which would compare None) must not crash."""
    report = validate(
        {
            "tp_size": 4,
            "elastic_ep_backend": "mooncake",
            "max_ep_size": 8,
            "ep_join_mode": "scale",
            "node_rank": 1,
            "ep_join_rank_offset": 4,
        },
        explain=False,
    )
    join_init = next(v for v in report.violations if v.rule == "EEP-JOIN-INIT")
    assert join_init.detail == "elastic_ep_initial_size is unset"


def test_detail_lists_every_false_conjunct() -> None:
    from tests.backends import py

    raw = raw_env({"tp_size": 0, "pp_size": 0})
    resolved, _ = py(raw)
    rule = next(r for r in RULES if r.id == "TOPO-POSITIVE")
    assert failure_detail(rule, resolved, raw) == "tp_size = 0 < 1; pp_size = 0 < 1"
