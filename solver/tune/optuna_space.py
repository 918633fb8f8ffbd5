"""Optuna views of a `LayoutSpace`: every trial is a legal layout that fits.

Three ways to suggest a layout, all legal by construction (each ends at a layout of the
space), all with distributions that never change, so TPE never falls back to independent
sampling (Optuna warns when a parameter's choices differ between trials):

- `categorical`: one `suggest_categorical("layout", keys)` over whole layouts. TPE models
  it as one unordered choice: it learns which layouts were good, nothing about their sizes.
- `ranked`: one `suggest_int("layout_rank", 0, len - 1)` over the layouts in score order
  (the estimator's prior once attached, else KV tokens): TPE sees an ordered axis along
  which the estimate falls, so the objective (a real benchmark, say) is searched near the
  estimate's best first, without being bound to it.
- `coordinates`: define-by-run with one `suggest_float(field, 0, 1)` per level (the same
  distribution in every trial: a static space, so multivariate TPE applies); the level's
  value is picked through the cumulative share of layouts under each choice of that prefix,
  in value order. Every layout is equally likely under random sampling, and TPE sees
  ordered coordinates (nearby values, nearby sizes).

Not offered: a `tree` view (one categorical per field, named after its prefix). Random
sampling is uniform per level there, not per layout, so layouts under crowded prefixes are
rare: it reached 98.53 % of the DeepSeek-V3 space on 16 H200 and 83.68 % on 64 in 10,000
draws, under the 99 % every view must reach (docs/integrations.md). Weighting each choice by
the layouts under it is what `coordinates` does.

`set_constraint` (Optuna 5) and `constraints_func` (older samplers) serve the other route:
constrained or multi-objective samplers (NSGA-II, TPE) over independent sizes
(`suggest_sizes`), judged afterwards, <= 0 meaning feasible. `benchmarks/bench_tune.py`
measures which route samples better with TPE.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from enum import Enum
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from meshsat.solver.enumeration.space import divisors
from meshsat.solver.tune.space import Candidate, LayoutSpace

if TYPE_CHECKING:
    import optuna

#: The user attribute each suggestion leaves on its trial: the layout's key.
LAYOUT_ATTR = "meshsat_layout"


class Style(str, Enum):
    categorical = "categorical"
    coordinates = "coordinates"
    ranked = "ranked"


def suggest_layout(
    trial: optuna.trial.BaseTrial, space: LayoutSpace, style: Style | str = Style.coordinates
) -> Candidate:
    """One legal, fitting layout for this trial (its key also set as the trial's user
    attribute `meshsat_layout`)."""
    chosen = _SUGGEST[Style(style)](trial, space)
    if hasattr(trial, "set_user_attr"):
        trial.set_user_attr(LAYOUT_ATTR, chosen.key)
    return chosen


def _categorical(trial: optuna.trial.BaseTrial, space: LayoutSpace) -> Candidate:
    key = trial.suggest_categorical("layout", space.keys)
    hit = space.get(str(key))
    assert hit is not None  # the choices are the space's keys
    return hit


def _ranked(trial: optuna.trial.BaseTrial, space: LayoutSpace) -> Candidate:
    return space.candidates[trial.suggest_int("layout_rank", 0, len(space) - 1)]


def _coordinates(trial: optuna.trial.BaseTrial, space: LayoutSpace) -> Candidate:
    path: tuple[Any, ...] = ()
    for name in space.order:
        u = trial.suggest_float(name, 0.0, 1.0)
        choices, cumulative = _shares(space, path)
        i = min(bisect_right(cumulative, u * cumulative[-1]), len(choices) - 1)
        path += (choices[i],)
    return space.leaf(path)


def _shares(space: LayoutSpace, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[int]]:
    """The choices after `path` and the running count of layouts under them."""
    choices = space.choices(path)
    return choices, list(accumulate(space.leaves_under((*path, c)) for c in choices))


_SUGGEST: dict[Style, Callable[[optuna.trial.BaseTrial, LayoutSpace], Candidate]] = {
    Style.categorical: _categorical,
    Style.coordinates: _coordinates,
    Style.ranked: _ranked,
}


def define_by_run(
    space: LayoutSpace, style: Style | str = Style.coordinates
) -> Callable[[optuna.trial.Trial], dict[str, Any]]:
    """A define-by-run space function (trial -> constants), the form Ray Tune's
    `OptunaSearch(space=...)` takes; the layout's launch values come back as constants."""

    def space_fn(trial: optuna.trial.Trial) -> dict[str, Any]:
        chosen = suggest_layout(trial, space, style)
        return {"layout": chosen.key, **dict(chosen.values)}

    return space_fn


# --- independent sizes, judged afterwards --------------------------------------------------


def suggest_sizes(trial: optuna.trial.BaseTrial, space: LayoutSpace) -> dict[str, Any]:
    """Every varied field from its own fixed range (sizes: divisors of N; flags and
    strategies: the values the space uses), independently: most draws are illegal. For
    samplers that take `constraints_func`."""
    values: dict[str, Any] = {}
    for name in space.order:
        used = sorted({c.values[name] for c in space.candidates}, key=str)
        if name.endswith("_size"):
            values[name] = trial.suggest_categorical(name, divisors(space.gpus))
        else:
            values[name] = trial.suggest_categorical(name, used)
    return values


def constraint_value(space: LayoutSpace, values: dict[str, Any] | None) -> float:
    """0 when the layout is in the space (legal, fits, passes the filters), else 1 + the
    number of SGLang rules it breaks (a near miss ranks above a far one); <= 0 is feasible,
    as Optuna reads constraints."""
    if values is None:
        return float(len(space.order)) + 1.0
    if space.find(values) is not None:
        return 0.0
    from meshsat.solver.validation.validate import validate

    report = validate(values, explain=False, sglang_version=space.sglang_version)
    return 1.0 + len(report.violations)


def set_constraint(trial: optuna.Trial, space: LayoutSpace, values: dict[str, Any]) -> float:
    """Optuna 5's way (`Trial.set_constraint`, which replaces the samplers'
    `constraints_func`): record the trial's constraint from inside the objective."""
    value = constraint_value(space, values)
    trial.set_constraint(LAYOUT_ATTR, value)
    return value


def constraints_func(space: LayoutSpace) -> Callable[[optuna.trial.FrozenTrial], Sequence[float]]:
    """For `NSGAIISampler(constraints_func=...)` / `TPESampler(constraints_func=...)`
    (deprecated in Optuna 5 in favour of `set_constraint`): one value per finished trial,
    judged from its parameters (`suggest_sizes`) or its layout attribute."""

    def judge(trial: optuna.trial.FrozenTrial) -> Sequence[float]:
        return (constraint_value(space, _values_of(trial, space)),)

    return judge


def _values_of(trial: optuna.trial.FrozenTrial, space: LayoutSpace) -> dict[str, Any] | None:
    """The launch values a trial stands for, however it was suggested."""
    key = trial.user_attrs.get(LAYOUT_ATTR)
    if isinstance(key, str):
        hit = space.get(key)
        return None if hit is None else dict(hit.values)
    if all(name in trial.params for name in space.order):
        return {name: trial.params[name] for name in space.order}
    return None
