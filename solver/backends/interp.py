"""A node-by-node evaluator of rule trees.

Slower than `pyeval` by two orders of magnitude, and deliberately naive: it is the
reference the compiled back-end is tested against, and the renderer uses it to show
the values of sub-expressions in violation messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from solver.lang.expr import (
    And,
    Arith,
    Cmp,
    Const,
    Divides,
    Expr,
    Field,
    Implies,
    In,
    IsSet,
    Ite,
    Named,
    Not,
    Or,
)

_CMP = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def evaluate(e: Expr, resolved: Mapping[str, Any], raw: Mapping[str, Any] | None = None) -> Any:
    """Value of `e` with resolved fields from `resolved` and raw ones from `raw`."""
    raw = resolved if raw is None else raw
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Field):
        return (raw if e.raw else resolved)[e.name]
    if isinstance(e, Named):
        return evaluate(e.body, resolved, raw)
    if isinstance(e, Arith):
        a, b = evaluate(e.a, resolved, raw), evaluate(e.b, resolved, raw)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if b == 0:
            return 0
        return a // b if e.op == "//" else a % b
    if isinstance(e, Cmp):
        return _CMP[e.op](evaluate(e.a, resolved, raw), evaluate(e.b, resolved, raw))
    if isinstance(e, Divides):
        d, n = evaluate(e.d, resolved, raw), evaluate(e.n, resolved, raw)
        return n == 0 if d == 0 else n % d == 0
    if isinstance(e, And):
        return all(evaluate(a, resolved, raw) for a in e.args)
    if isinstance(e, Or):
        return any(evaluate(a, resolved, raw) for a in e.args)
    if isinstance(e, Not):
        return not evaluate(e.a, resolved, raw)
    if isinstance(e, Implies):
        return (not evaluate(e.a, resolved, raw)) or evaluate(e.b, resolved, raw)
    if isinstance(e, Ite):
        branch = e.then if evaluate(e.cond, resolved, raw) else e.other
        return evaluate(branch, resolved, raw)
    if isinstance(e, In):
        return evaluate(e.x, resolved, raw) in e.values
    if isinstance(e, IsSet):
        return evaluate(e.x, resolved, raw) is not None
    raise TypeError(f"cannot evaluate {type(e).__name__}")
