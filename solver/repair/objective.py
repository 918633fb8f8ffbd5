"""The objective `fix` minimises, defined once (see `meshsat.solver.repair.fix` for its words).

Kept apart from the search so that the Z3 search (`meshsat.solver.repair.search`) and the result
values both read it without importing each other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshsat.solver.lang.config import Config
from meshsat.solver.lang.fields import CONFIG_SPECS, SPECS
from meshsat.solver.repair.features import toggled

#: The tiers, most important first, as `Objective` names them.
TIERS = ("gpus", "features", "user_fields", "other_fields", "size")
#: What each tier keeps, in words.
TIER_WORDS = {
    "gpus": "the GPU count",
    "features": "the feature set",
    "user_fields": "the fields you set",
    "other_fields": "the other fields",
    "size": "the sizes",
}
#: The order of the tiers under each `--objective` (the first two always lead).
ORDERS = {
    "changes": TIERS,
    "distance": ("gpus", "features", "size", "user_fields", "other_fields"),
}


def prime_mbits(p: int) -> int:
    return round(1000 * math.log2(p))


def size_mbits(value: int) -> int:
    from meshsat.solver.backends.z3exp import factorize

    return sum(k * prime_mbits(p) for p, k in factorize(value).items())


@dataclass(frozen=True)
class Objective:
    """A fix's cost per tier (see the `meshsat.solver.repair.fix` docstring)."""

    #: 1 when the GPU count differs from the input's.
    gpus: int
    #: Features turned on that were off, or on ones that no longer work.
    features: int
    #: Changed fields the user set, and changed other fields.
    user_fields: int
    other_fields: int
    #: The size change in milli-bits.
    size: int

    @property
    def fields_changed(self) -> int:
        return self.user_fields + self.other_fields

    @property
    def distance(self) -> float:
        """Total size change in bits (sum of |log2(new/old)|)."""
        return self.size / 1000

    def key(self, objective: str) -> tuple[int, ...]:
        """What `objective` minimises, in order."""
        return tuple(getattr(self, tier) for tier in ORDERS[objective])

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus_changed": bool(self.gpus),
            "features_toggled": self.features,
            "user_fields_changed": self.user_fields,
            "other_fields_changed": self.other_fields,
            "distance": self.distance,
            "distance_mbits": self.size,
        }


ZERO = Objective(0, 0, 0, 0, 0)


def objective_of(
    old: Config,
    new: Config,
    gpus_target: int,
    gpus_after: int,
    unchanged: frozenset[str] = frozenset(),
    resolved: Mapping[str, Any] | None = None,
) -> Objective:
    """The tiers of going from `old` to `new`; `gpus_target`: the count tier 1 keeps;
    `unchanged`: fields that differ as written but that SGLang resolves to the same value;
    `resolved`: `new` as SGLang runs it, whose widths say whether a feature works
    (`meshsat.solver.repair.features.toggled`)."""
    user = old.user_set()
    mine = others = mbits = 0
    for name in CONFIG_SPECS:
        a, b = getattr(old, name), getattr(new, name)
        if same_value(a, b) or name in unchanged:
            continue
        if name in user:
            mine += 1
        else:
            others += 1
        if SPECS[name].size:
            mbits += abs(size_mbits(b) - size_mbits(a))
    features = len(toggled(old.model_dump(), new.model_dump(), resolved))
    return Objective(int(gpus_target != gpus_after), features, mine, others, mbits)


def same_value(a: Any, b: Any) -> bool:
    """Equal and of one type: `True == 1` must count as a change of field type."""
    return type(a) is type(b) and a == b
