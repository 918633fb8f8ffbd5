"""Ray Tune views of a `LayoutSpace` (ray itself is optional: imported only where needed).

- `grid_space(space)`: `{"layout": {"grid_search": [...keys]}}`, plain data, the very form
  `ray.tune.grid_search(keys)` returns: each legal layout is tried once. No ray import.
- `choice_space(space)`: `{"layout": tune.choice(keys)}`, for random search and the
  searchers that read Ray's sampling domains.
- `optuna_search(space, metric, mode)`: Ray's `OptunaSearch` over the define-by-run view
  (`optuna_space.define_by_run`), so TPE inside Ray never leaves the legal layouts.
In a trainable, `layout_of(config, space)` gives the chosen layout (its launch values and
command); a config Ray hands back always names one of the space's keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.tune.space import Candidate, LayoutSpace

_NO_RAY = "ray is not installed: pip install 'ray[tune]'"


def grid_space(space: LayoutSpace) -> dict[str, Any]:
    """Every layout once (Ray's grid-search form, built without importing ray)."""
    return {"layout": {"grid_search": list(space.keys)}}


def choice_space(space: LayoutSpace) -> dict[str, Any]:
    """One uniform categorical over the layouts, as a Ray sampling domain."""
    try:
        from ray import tune
    except ImportError as exc:
        raise ImportError(_NO_RAY) from exc
    return {"layout": tune.choice(list(space.keys))}


def optuna_search(
    space: LayoutSpace, metric: str, mode: str = "max", style: str = "categorical"
) -> Any:
    """Ray's `OptunaSearch` whose trials are the space's layouts (`style` as in
    `optuna_space.suggest_layout`)."""
    try:
        from ray.tune.search.optuna import OptunaSearch
    except ImportError as exc:
        raise ImportError(_NO_RAY) from exc
    from meshsat.solver.tune.optuna_space import define_by_run

    return OptunaSearch(space=define_by_run(space, style), metric=metric, mode=mode)


def layout_of(config: Mapping[str, Any], space: LayoutSpace) -> Candidate:
    """The layout a Ray trial's config stands for."""
    key = config.get("layout")
    hit = space.get(key) if isinstance(key, str) else None
    if hit is None:
        raise InputError(f"the trial's config names no layout of this space: {key!r}")
    return hit
