"""Raw evaluation environments for back-end tests, including values `Config` rejects."""

from __future__ import annotations

from typing import Any

from meshsat.solver.lang.fields import SPECS


def raw_env(config: dict[str, Any], model: dict[str, Any] | None = None) -> dict[str, Any]:
    """Defaults for every field and fact, overridden by `config` and `model`."""
    env = {n: s.default for n, s in SPECS.items()}
    env.update(config)
    env.update(model or {})
    return env
