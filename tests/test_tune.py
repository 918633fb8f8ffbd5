"""Autotuner search spaces: only legal layouts that fit, every one reachable.

Oracles: `validate` (the compiled rule pack, not the enumeration's generated loops) and the
memory model judge each layout of the space; optuna's own samplers draw from it. The full
10,000-sample acceptance for N = 16 and 64 is `benchmarks/bench_tune.py`; here a slice.
"""

from __future__ import annotations

import logging
import math
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import optuna
import pytest

from meshsat.solver.memory import MemoryModel, Parallel, gpu
from meshsat.solver.memory.models import model_config
from meshsat.solver.tune import LayoutSpace, layout_space
from meshsat.solver.tune.optuna_space import (
    LAYOUT_ATTR,
    Style,
    constraints_func,
    define_by_run,
    set_constraint,
    suggest_layout,
    suggest_sizes,
)
from meshsat.solver.tune.ray_space import choice_space, grid_space, layout_of
from meshsat.solver.validation.validate import validate

MODEL = "deepseek-ai/DeepSeek-V3"
#: Draws per view here; benchmarks/bench_tune.py makes 10,000 for N = 16 and 64.
DRAWS = 200
optuna.logging.set_verbosity(optuna.logging.WARNING)


@cache
def _space(gpus: int = 16) -> LayoutSpace:
    return layout_space(gpus, MODEL, "H200", sglang_version="0.5.23")


def test_every_layout_of_the_space_is_valid_and_fits() -> None:
    space = _space()
    config = model_config(MODEL)
    mm = MemoryModel(config, gpu("H200"))
    assert len(space) > 100
    assert len(set(space.keys)) == len(space)
    for c in space.candidates:
        report = validate(c.values, config_model(), explain=False, sglang_version="0.5.23")
        assert report.valid, c.key
        assert report.derived["gpus_used"] == 16
        mem = mm.of(Parallel.from_resolved(report.resolved, report.derived))
        assert mem.fits and mem.max_total_num_tokens * mem.pools == c.kv_tokens


@cache
def config_model() -> Any:
    from meshsat.solver.lang.model_spec import ModelSpec

    return ModelSpec.from_hf_config(model_config(MODEL))


def test_where_filters_narrow_the_space() -> None:
    narrow = layout_space(16, MODEL, "H200", where=["ep_size >= 8"], sglang_version="0.5.23")
    expected = {
        tuple(sorted(c.values.items())) for c in _space().candidates if c.values["ep_size"] >= 8
    }
    assert 0 < len(narrow) < len(_space())
    assert {tuple(sorted(c.values.items())) for c in narrow.candidates} == expected


def _leaf_probability(space: LayoutSpace, style: Style, key: str) -> float:
    """The chance that uniform sampling of the style's parameters ends at `key`."""
    c = space.get(key)
    assert c is not None
    if style in (Style.categorical, Style.ranked):
        return 1 / len(space)
    p, path = 1.0, ()
    for name in space.order:
        choices = space.choices(path)
        value = c.values[name]
        assert value in choices
        p *= space.leaves_under((*path, value)) / space.leaves_under(path)
        path = (*path, value)
    return p


@pytest.mark.parametrize("style", list(Style))
def test_every_layout_is_reachable_and_probabilities_sum_to_one(style: Style) -> None:
    space = _space()
    probs = [_leaf_probability(space, style, k) for k in space.keys]
    assert min(probs) > 0
    assert math.isclose(sum(probs), 1.0, rel_tol=1e-9)
    assert max(probs) == pytest.approx(min(probs))  # every layout equally likely


@pytest.mark.parametrize("style", list(Style))
def test_sampled_layouts_are_legal_and_spread(style: Style) -> None:
    space = _space()
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen = set()
    for _ in range(DRAWS):
        trial = study.ask()
        c = suggest_layout(trial, space, style)
        assert trial.user_attrs[LAYOUT_ATTR] == c.key
        seen.add(c.key)
        study.tell(trial, c.score)
    assert all(space.get(k) is not None for k in seen)
    # The share of layouts the draws reach, expected from each layout's exact chance.
    expected = sum(1 - (1 - _leaf_probability(space, style, k)) ** DRAWS for k in space.keys)
    assert len(seen) >= 0.9 * expected


@pytest.mark.parametrize("style", [Style.categorical, Style.coordinates, Style.ranked])
def test_the_space_is_static_so_multivariate_tpe_never_falls_back(
    style: Style, caplog: pytest.LogCaptureFixture
) -> None:
    space = _space()
    optuna.logging.enable_propagation()
    try:
        sampler = optuna.samplers.TPESampler(seed=0, multivariate=True, n_startup_trials=5)
        study = optuna.create_study(direction="maximize", sampler=sampler)
        with caplog.at_level(logging.WARNING, logger="optuna"), warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.optimize(lambda t: suggest_layout(t, space, style).score, n_trials=15)
    finally:
        optuna.logging.disable_propagation()
    assert not [r for r in caplog.records if "sampled independently" in r.getMessage()]


def test_docs_worked_example_runs() -> None:
    """docs/integrations.md's Optuna example, run as written: TPE over the categorical view,
    100 trials, reaches the best layout's score within 5 %."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "integrations.md").read_text("utf-8")
    example = text.split("Worked example", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    printed: list[tuple[Any, ...]] = []
    scope: dict[str, Any] = {"print": lambda *a: printed.append(a)}
    exec(compile(example, "docs/integrations.md", "exec"), scope)
    ((command, ratio),) = printed
    assert ratio >= 0.95
    assert command == scope["best"].command and "sglang.launch_server" in command
    assert scope["best"].score == scope["study"].best_value


def test_a_prior_becomes_the_score_and_the_order() -> None:
    space = _space().with_prior(lambda c: 1.0 / c.derived["attn_tp"])
    assert all(c.prior == 1.0 / c.derived["attn_tp"] for c in space.candidates)
    assert space.best.score == max(1.0 / c.derived["attn_tp"] for c in space.candidates)
    scores = [c.score for c in space.candidates]
    assert scores == sorted(scores, reverse=True)
    assert all(space.get(c.key) is c for c in space.candidates)
    assert sorted(space.keys) == sorted(_space().keys)


def test_constraints_func_accepts_exactly_the_space() -> None:
    space = _space()
    judge = constraints_func(space)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=2))
    feasible = 0
    for _ in range(200):
        trial = study.ask()
        values = suggest_sizes(trial, space)
        study.tell(trial, 0.0)
        verdict = judge(study.get_trials(deepcopy=False)[-1])
        inside = space.find(values) is not None
        assert (verdict[0] <= 0) == inside
        feasible += inside
        if not inside and validate(values, explain=False, sglang_version="0.5.23").valid:
            assert verdict[0] == 1.0  # legal for SGLang, but not in the space (fit, N)
    assert feasible < 100  # independent sizes are mostly illegal: why the space exists
    # Optuna 5's route: the same value, recorded from inside the objective.
    trial = study.ask()
    values = suggest_sizes(trial, space)
    assert set_constraint(trial, space, values) == judge_values(space, values)
    study.tell(trial, 0.0)
    # A trial that went through suggest_layout is judged by its key.
    trial = study.ask()
    suggest_layout(trial, space, "ranked")
    study.tell(trial, 0.0)
    assert judge(study.get_trials(deepcopy=False)[-1]) == (0.0,)


def judge_values(space: LayoutSpace, values: dict[str, Any]) -> float:
    return (
        0.0
        if space.find(values) is not None
        else 1.0 + len(validate(values, explain=False, sglang_version="0.5.23").violations)
    )


def test_ray_views_without_ray() -> None:
    space = _space()
    grid = grid_space(space)
    assert grid == {"layout": {"grid_search": list(space.keys)}}
    assert layout_of({"layout": space.keys[3]}, space) is space.candidates[3]
    try:
        import ray  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="ray"):
            choice_space(space)


def test_define_by_run_returns_the_launch_values() -> None:
    space = _space()
    fn = define_by_run(space, "coordinates")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    trial = study.ask()
    out = fn(trial)
    c = space.get(out["layout"])
    assert c is not None and {k: out[k] for k in c.values} == dict(c.values)


def test_each_candidates_command_launches_that_layout() -> None:
    """A candidate's command, read back by meshsat's launch reader (as `validate --sglang`
    reads a paste), is the candidate: the same model, and SGLang resolves it to the same
    layout. It names the model and no flag at its release default (it printed SGLang's
    whole resolution before: `--expert-distribution-recorder-buffer-size 1000`, no
    `--model-path`)."""
    from meshsat.solver.inputs.sglang_cmdline import parse_sglang_command
    from meshsat.solver.inputs.spelling import DP_GROUP
    from meshsat.solver.lang.config import Config

    space = _space()
    for c in space.candidates[:: max(1, len(space) // 40)]:
        parsed = parse_sglang_command(c.command)
        assert parsed.unknown_flags == [] and f"--model-path {MODEL}" in c.command
        assert "--expert-distribution-recorder-buffer-size" not in c.command
        # The GPU's class, as `validate --gpu H200` sets it.
        config = Config.model_validate({**parsed.values, **gpu("H200").layout_fields})
        report = validate(config, config_model(), explain=False, sglang_version="0.5.23")
        assert report.valid, c.key
        assert dict(report.derived) == dict(c.derived), c.key
        # 0.5.23 spells DP attention `--attn-dp-size N`, which SGLang keeps as that field.
        assert {k: v for k, v in report.resolved.items() if k not in DP_GROUP} == {
            k: v for k, v in c.config.items() if k not in DP_GROUP
        }, c.key
