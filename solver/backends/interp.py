"""A node-by-node evaluator of rule trees.

Slower than `pyeval` by two orders of magnitude, and deliberately naive: it is the
reference the compiled back-end is tested against, and the renderer uses it to show
the values of sub-expressions in violation messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from meshsat.solver.lang import expr as ex
from meshsat.solver.lang.visitor import ExprVisitor

_CMP = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def evaluate(e: ex.Expr, resolved: Mapping[str, Any], raw: Mapping[str, Any] | None = None) -> Any:
    """Value of `e` with resolved fields from `resolved` and raw ones from `raw`."""
    return Evaluator(resolved, resolved if raw is None else raw).visit(e)


class Evaluator(ExprVisitor[Any]):
    """The evaluation of every node type, over one pair of environments."""

    def __init__(self, resolved: Mapping[str, Any], raw: Mapping[str, Any]) -> None:
        self.resolved = resolved
        self.raw = raw

    def visit_const(self, e: ex.Const) -> Any:
        return e.value

    def visit_field(self, e: ex.Field) -> Any:
        return (self.raw if e.raw else self.resolved)[e.name]

    def visit_named(self, e: ex.Named) -> Any:
        return self.visit(e.body)

    def visit_arith(self, e: ex.Arith) -> Any:
        a, b = self.visit(e.a), self.visit(e.b)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if b == 0:
            return 0
        return a // b if e.op == "//" else a % b

    def visit_cmp(self, e: ex.Cmp) -> Any:
        return _CMP[e.op](self.visit(e.a), self.visit(e.b))

    def visit_divides(self, e: ex.Divides) -> Any:
        d, n = self.visit(e.d), self.visit(e.n)
        return n == 0 if d == 0 else n % d == 0

    def visit_and(self, e: ex.And) -> Any:
        return all(self.visit(a) for a in e.args)

    def visit_or(self, e: ex.Or) -> Any:
        return any(self.visit(a) for a in e.args)

    def visit_not(self, e: ex.Not) -> Any:
        return not self.visit(e.a)

    def visit_implies(self, e: ex.Implies) -> Any:
        return (not self.visit(e.a)) or self.visit(e.b)

    def visit_ite(self, e: ex.Ite) -> Any:
        return self.visit(e.then if self.visit(e.cond) else e.other)

    def visit_in(self, e: ex.In) -> Any:
        return self.visit(e.x) in e.values

    def visit_is_set(self, e: ex.IsSet) -> Any:
        return self.visit(e.x) is not None
