"""The declaration types: a rule, and a silent resolution step.

A rule is `when ⇒ holds` plus SGLang's wording and the handler it comes from. A
resolution step is a sequence of guarded assignments that SGLang applies silently.
Nothing here knows about a back-end: `pyeval` and the Z3 encoders walk these.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from meshsat.solver.lang.expr import TRUE, And, Expr, Implies, Not, fields_of, lift
from meshsat.solver.lang.fields import SPECS

Severity = Literal["error", "warning"]


@dataclass(frozen=True, eq=False)
class Rule:
    """One named constraint of the catalogue.

    `message` is SGLang's own wording (or, where SGLang has a bare assert, ours);
    `hint` says what would make the rule hold.
    """

    id: str
    when: Expr
    holds: Expr
    message: str
    source: str
    hint: str = ""
    severity: Severity = "error"

    @property
    def violated(self) -> Expr:
        return And(self.when, Not(self.holds))

    @property
    def constraint(self) -> Expr:
        """The formula a solver must satisfy: the rule's `when ⇒ holds`."""
        if self.when is TRUE:
            return self.holds
        return Implies(self.when, self.holds)

    @cached_property
    def fields(self) -> tuple[str, ...]:
        """Input fields the rule reads (through derived widths); walked once, then cached."""
        return fields_of(And(self.when, self.holds))


@dataclass(frozen=True, eq=False)
class Assign:
    """When `when` holds, set every field of `sets` at once (values read before).

    `quiet` marks bookkeeping (mirroring legacy aliases) that a report does not list.
    """

    when: Expr
    sets: tuple[tuple[str, Expr], ...]
    quiet: bool = False


@dataclass(frozen=True, eq=False)
class Resolution:
    """One silent change SGLang makes, as an ordered list of guarded assignments."""

    id: str
    source: str
    because: str
    steps: tuple[Assign, ...]

    @property
    def targets(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for step in self.steps:
            for name, _ in step.sets:
                seen.setdefault(name, None)
        return tuple(seen)


def assign(when: Expr, *, quiet: bool = False, **sets: object) -> Assign:
    """Build an assignment, lifting literals against each target field's type."""

    pairs = []
    for name, value in sets.items():
        target = SPECS[name].ref
        expr = lift(value, like=target)
        if expr.kind != target.kind and not (target.kind == "float" and expr.kind == "int"):
            raise TypeError(f"resolution sets {name} ({target.kind}) to a {expr.kind}")
        pairs.append((name, expr))
    return Assign(when, tuple(pairs), quiet)
