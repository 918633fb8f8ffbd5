"""A pin is the value SGLang runs with: the typed value kept, and its resolution equal to it.

The oracle is meshsat's own resolution in Python (`validate`'s compiled back-end), run on
each answer apart from the Z3 search that found it; the brute force of tests/fix_oracle.py
confirms optimality and conflicts on small spaces.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import z3
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from meshsat import solver
from meshsat.solver.backends.pyeval import compiled
from meshsat.solver.cli import main
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.fields import CONFIG_SPECS
from meshsat.solver.repair.fix import fix
from meshsat.solver.repair.pins import pin_holds, pins_broken
from tests.fix_oracle import CHOICES, PACK, SIZES, _plain_encoder, divisors, nearest
from tests.fix_oracle import objective_between as between
from tests.strategies import raw_envs

#: Ways SGLang rewrites a typed value: DWDP (dp, moe_dp, the all-to-all backend), the megamoe
#: alias (the all-to-all backend, ep), DP attention (schedule_conservativeness).
ESCAPES: dict[str, tuple[Any, ...]] = {
    "dwdp_size": (1, 2, 4),
    "moe_runner_backend": ("auto", "megamoe"),
    "schedule_conservativeness": (1.0, 0.3),
}


@st.composite
def pinned_layouts(draw: st.DrawFn) -> tuple[Config, tuple[str, ...], int | None]:
    """A small layout (sizes among the divisors of 4, 6 or 8, or 3), pins among the fields
    it sets, those it leaves unset and those SGLang may rewrite, and maybe a GPU count."""
    n = draw(st.sampled_from((4, 6, 8)))
    values: dict[str, Any] = {"tp_size": draw(st.sampled_from(divisors(n)))}
    for name in SIZES[1:]:
        if draw(st.integers(0, 2)) == 0:
            values[name] = draw(st.sampled_from([*divisors(n), 3]))
    for name, choices in {**CHOICES, **ESCAPES}.items():
        if draw(st.integers(0, 4)) == 0:
            values[name] = draw(st.sampled_from(choices))
    cfg = Config.model_validate(values)
    candidates = sorted({*cfg.user_set(), *ESCAPES, "dcp_comm_backend", "enable_dp_attention"})
    pins = tuple(draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=3, unique=True)))
    return cfg, pins, draw(st.sampled_from((None, n)))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pinned_layouts())
def test_every_answer_runs_with_its_pins(case: tuple[Config, tuple[str, ...], int | None]) -> None:
    cfg, pins, gpus = case
    report = fix(cfg, pins=pins, gpus=gpus, top=2, sglang_version=PACK, timeout_s=30)
    assume(not report.timed_out)
    if report.conflict is not None:
        assert report.fixes == () and report.conflict.rules
        assert {f for f, _ in report.conflict.pins} <= set(pins)
        return
    for result in report.fixes:
        ran = solver.validate(result.config, explain=False, sglang_version=PACK)
        assert ran.valid
        for name in pins:
            typed = getattr(cfg, name)
            assert getattr(result.config, name) == typed, name
            if typed is not None:  # an unset pin stays unset; SGLang's choice is free
                assert ran.resolved_env[name] == typed, (name, ran.resolved_env[name])


@settings(max_examples=60, deadline=None)
@given(raw_envs(zero_sizes=False), st.sampled_from(sorted(CONFIG_SPECS)))
def test_the_search_and_the_check_read_one_pin(raw: dict[str, Any], name: str) -> None:
    """Z3 (the search's reading of `pin_holds`) and the plain evaluator (the check of every
    answer) agree on whether a layout holds a pin at its own typed value, and both agree
    with the compiled resolution's value."""
    resolved, _ = compiled(PACK).resolve(raw)
    held = not pins_broken({name: raw[name]}, resolved, raw)
    enc = _plain_encoder(PACK)
    s = z3.Solver()
    s.add(*enc.domain, *(enc.value_term(n, v) for n, v in raw.items()))
    s.add(z3.Not(enc.formula(pin_holds(name, raw[name]))))
    assert (s.check() == z3.unsat) == held
    assert held == (raw[name] is None or resolved[name] == raw[name])


def test_an_unset_pin_stays_unset_and_leaves_sglangs_choice_free() -> None:
    """dcp_comm_backend left unset resolves to ag_rs: the pin keeps the flag off the
    command, it does not ask SGLang to run "no backend" (which nothing could)."""
    cfg = {"tp_size": 4, "dcp_size": 3}
    report = fix(cfg, pins=["dcp_comm_backend"], sglang_version=PACK)
    (best,) = report.fixes
    assert best.config.dcp_comm_backend is None
    ran = solver.validate(best.config, explain=False, sglang_version=PACK)
    assert ran.valid and ran.resolved_env["dcp_comm_backend"] == "ag_rs"
    assert best.config == fix(cfg, sglang_version=PACK).best.config  # the pin costs nothing


def test_a_valid_input_that_does_not_run_its_pin_is_repaired(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """DP attention scales schedule_conservativeness by 0.3: with it pinned, a valid layout
    does not run the pin, and the nearest one that does drops DP attention (dp 2 -> 1)."""
    cfg = {"tp_size": 8, "dp_size": 2, "enable_dp_attention": True}
    pins = ("schedule_conservativeness",)
    start = Config.model_validate(cfg)
    assert solver.validate(start, explain=False, sglang_version=PACK).valid
    report = fix(cfg, pins=pins, sglang_version=PACK)
    assert not report.valid_input and report.unpinned == pins
    best = report.best
    ran = solver.validate(best.config, explain=False, sglang_version=PACK)
    assert ran.resolved_env["schedule_conservativeness"] == 1.0 and best.gpus_used == 8
    key = between(start, best.config, "changes", None)
    assert next(nearest(start, 8, None, "changes", key, pins), None) is None
    # Pinned beside DP attention, nothing holds both: the conflict names the silent change.
    both = fix(cfg, pins=[*pins, "enable_dp_attention"], sglang_version=PACK)
    assert both.conflict is not None and both.fixes == ()
    assert [r.id for r in both.conflict.rules] == ["R-DPATTN"]
    assert both.conflict.rules[0].condition == (
        "SGLang runs schedule_conservativeness 0.3, not 1.0"
    )
    sets = [f"--set={k}={str(v).lower()}" for k, v in cfg.items()]
    with pytest.raises(SystemExit) as exc:
        main(["fix", *sets, "--pin", "schedule_conservativeness", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0 and data["unpinned"] == ["schedule_conservativeness"]
    ran = solver.validate(data["fixes"][0]["config"], explain=False)  # the newest release
    assert ran.valid and ran.resolved_env["schedule_conservativeness"] == 1.0


def test_a_pinned_attn_dp_size_holds_as_sglang_runs_it(capsys: pytest.CaptureFixture[str]) -> None:
    """0.5.23's `--attn-dp-size 3` on tp 8: DWDP on 8 GPUs repairs the division but SGLang's
    handle_dwdp then runs attn_dp_size 8, so it does not keep the pin; the fix is tp 6 (the
    GPU count changes), as `--enable-dp-attention --dp 3 --pin dp_size` already fixed it,
    and with tp pinned too nothing holds (DPATTN-TP-DIV)."""
    cmd = "python -m sglang.launch_server --tp 8 --attn-dp-size 3"
    cfg = {"tp_size": 8, "attn_dp_size": 3}
    report = fix(cfg, pins=["attn_dp_size"], sglang_version="0.5.23")
    best = report.best
    assert best.config.dwdp_size == 1 and best.config.tp_size == 6
    assert best.config.attn_dp_size == 3 and best.gpus_used == 6
    ran = solver.validate(best.config, explain=False, sglang_version="0.5.23")
    assert ran.valid and not any(n.field == "attn_dp_size" for n in ran.notes)
    legacy = {"tp_size": 8, "dp_size": 3, "enable_dp_attention": True}
    assert fix(legacy, pins=["dp_size"], sglang_version="0.5.23").best.config.tp_size == 6
    both = fix(cfg, pins=["attn_dp_size", "tp_size"], sglang_version="0.5.23")
    assert both.fixes == () and both.conflict is not None
    assert "DPATTN-TP-DIV" in [r.id for r in both.conflict.rules]
    with pytest.raises(SystemExit) as exc:
        main(["fix", "--sglang", cmd, "--pin", "attn_dp_size", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0
    assert "--dwdp-size" not in data["fixes"][0]["command_line"]
    assert "--tp 6 --attn-dp-size 3" in data["fixes"][0]["command_line"]
    with pytest.raises(SystemExit) as exc:
        main(["fix", "--sglang", cmd, "--pin", "attn_dp_size", "--pin", "tp_size"])
    assert exc.value.code == 1 and "DPATTN-TP-DIV" in capsys.readouterr().out
