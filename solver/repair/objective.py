"""The objective `fix` minimises, defined once (see `solver.repair.fix` for its words).

Kept apart from the search so that the Z3 search (`solver.repair.search`) and the result
values both read it without importing each other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from solver.lang.config import Config
from solver.lang.fields import CONFIG_SPECS, SPECS


def change_weight(name: str, user_set: Iterable[str]) -> int:
    return (2 if SPECS[name].size else 1) * (2 if name in user_set else 1)


def prime_mbits(p: int) -> int:
    return round(1000 * math.log2(p))


def size_mbits(value: int) -> int:
    from solver.backends.z3exp import factorize

    return sum(k * prime_mbits(p) for p, k in factorize(value).items())


@dataclass(frozen=True)
class Objective:
    """The objective values of a fix (see the module docstring)."""

    changes: int
    fields_changed: int
    distance_mbits: int

    @property
    def distance(self) -> float:
        """Total size change in bits (sum of |log2(new/old)|)."""
        return self.distance_mbits / 1000

    def key(self, objective: str) -> tuple[int, int]:
        """What `objective` minimises, in order."""
        if objective == "changes":
            return (self.changes, self.distance_mbits)
        return (self.distance_mbits, self.changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "changes": self.changes,
            "fields_changed": self.fields_changed,
            "distance": self.distance,
            "distance_mbits": self.distance_mbits,
        }


def objective_of(old: Config, new: Config) -> Objective:
    user = old.user_set()
    changes = weight = mbits = 0
    for name in CONFIG_SPECS:
        a, b = getattr(old, name), getattr(new, name)
        if same_value(a, b):
            continue
        changes += 1
        weight += change_weight(name, user)
        if SPECS[name].size:
            mbits += abs(size_mbits(b) - size_mbits(a))
    return Objective(weight, changes, mbits)


def same_value(a: Any, b: Any) -> bool:
    """Equal and of one type: `True == 1` must count as a change of field type."""
    return type(a) is type(b) and a == b
