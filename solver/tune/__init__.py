"""Search spaces for autotuners: only legal layouts that fit, in shapes Optuna and Ray Tune
sample from. `layout_space` builds the space (no optional dependency); `optuna_space` and
`ray_space` adapt it (each imports its tuner only when called). Nothing under
`meshsat.solver` imports this package, so `validate` and `check` never load a tuner."""

from __future__ import annotations

from meshsat.solver.tune.space import Candidate, LayoutSpace, layout_key, layout_space

__all__ = ["Candidate", "LayoutSpace", "layout_key", "layout_space"]
