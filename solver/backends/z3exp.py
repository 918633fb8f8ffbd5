"""Exponent vectors: the layout sizes as linear integer terms for Z3 (docs/encodings.md, C).

Every size of a layout that uses N GPUs divides N, so a size is a vector of exponents over
N's primes and SGLang's arithmetic on sizes turns linear: `a | b` is e(a,p) <= e(b,p) for
every prime, a product is a sum of vectors, an exact quotient a difference. Measured on a
model of these rules, plain nonlinear `*` and `%` cost 11-670 ms per optimisation and
varied from query to query; exponents stay linear and keep the optimiser near 30 ms.

Ordering is the one operation that is not linear in exponents (`ep * moe_dp <= tp`). With
integer weights W_p ~ S*log2(p), `a <= b` becomes sum W_p (e(a,p) - e(b,p)) <= 0; the weights
are checked exactly (prime powers compared as integers) on every exponent difference the
comparison can meet, so the translation is exact, not an approximation.

Integers that need not divide anything (join offsets, timeouts, max_ep_size) stay plain Z3
integers. Where one meets a size, the size's value is an If-chain over its divisors, which is
linear as well.

Quotients (`tp // (attn_dp * attn_cp)`) are differences only when the division is exact.
Every quotient that is read leaves its exactness condition in `side`, which `fix` asserts as
the tracked constraint FIX-EXACT-DIV. In the catalogue each quotient sits next to a rule that
demands the same exactness (TOPO-ATTN-TP, DPATTN-TP-DIV), so no valid layout is lost; the
brute-force tests check that.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import z3

from meshsat.solver.backends.z3enc import Sym, Z3Encoder
from meshsat.solver.lang.expr import Cmp, Const, In
from meshsat.solver.lang.fields import FieldSpec
from meshsat.solver.lang.rule import Resolution

#: Trial division stops here; a cofactor left above it is kept as one (pseudo-)prime.
_TRIAL_LIMIT = 1 << 20
#: Largest exponent-difference box whose ordering weights are checked point by point.
_MAX_BOX = 250_000


def factorize(n: int) -> dict[int, int]:
    """Prime exponents of a positive integer, smallest prime first."""
    if n < 1:
        raise ValueError(f"cannot factorize {n}")
    out: dict[int, int] = {}
    p = 2
    while p * p <= n and p <= _TRIAL_LIMIT:
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
        p += 1 if p == 2 else 2
    if n > 1:
        out[n] = out.get(n, 0) + 1
    return out


@dataclass(frozen=True)
class Universe:
    """The sizes a search may give: the divisors of `bound`, as exponent vectors."""

    primes: tuple[int, ...]
    hi: tuple[int, ...]

    @classmethod
    def dividing(cls, bound: int) -> Universe:
        f = factorize(bound)
        return cls(tuple(f), tuple(f.values()))

    @property
    def bound(self) -> int:
        return math.prod(p**h for p, h in zip(self.primes, self.hi, strict=True))

    def exponents(self, value: int) -> tuple[int, ...] | None:
        """The exponents of `value` when it is a product of the universe's primes."""
        if value < 1:
            return None
        f = factorize(value)
        if any(p not in self.primes for p in f):
            return None
        return tuple(f.get(p, 0) for p in self.primes)

    def divides_bound(self, value: int) -> bool:
        e = self.exponents(value)
        return e is not None and all(x <= h for x, h in zip(e, self.hi, strict=True))

    def divisors(self) -> list[int]:
        return sorted(_value(self.primes, e) for e in _box(self.hi))


def _box(hi: Iterable[int]) -> Iterable[tuple[int, ...]]:
    return itertools.product(*(range(h + 1) for h in hi))


def _value(primes: tuple[int, ...], exps: Iterable[int]) -> int:
    return math.prod(p**e for p, e in zip(primes, exps, strict=True))


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


@lru_cache(maxsize=128)
def order_weights(primes: tuple[int, ...], box: tuple[int, ...]) -> tuple[int, ...] | None:
    """Integer weights whose signs agree with sum a_p*log(p) on every a with |a_p| <= box_p.

    They exist because the logarithms of primes are linearly independent over the
    rationals; None when the box is too large to check point by point.
    """
    if len(primes) == 1:
        return (1,)
    if math.prod(2 * b + 1 for b in box) > _MAX_BOX:
        return None
    vectors = []
    for a in itertools.product(*(range(-b, b + 1) for b in box)):
        if a <= tuple(0 for _ in a):
            continue  # the other half follows by symmetry; a == 0 is excluded
        pos = math.prod(p**x for p, x in zip(primes, a, strict=True) if x > 0)
        neg = math.prod(p**-x for p, x in zip(primes, a, strict=True) if x < 0)
        vectors.append((a, _sign(pos - neg)))
    scale = 16
    while scale <= 1 << 48:
        w = tuple(round(scale * math.log2(p)) for p in primes)
        if all(_sign(sum(x * y for x, y in zip(a, w, strict=True))) == s for a, s in vectors):
            return w
        scale *= 2
    return None  # pragma: no cover - unreachable for boxes small enough to check


@dataclass(frozen=True, eq=False)
class Num:
    """An integer in Z3: an exponent vector over the universe's primes, or a plain term.

    `exps` is None for integers that are not sizes. `hi` bounds each exponent (given
    `exact`, the condition under which a quotient's difference is its true value); `val`
    is the plain term when one is at hand; `const` the Python value of constants.
    """

    exps: tuple[Any, ...] | None
    hi: tuple[int, ...] = ()
    val: Any = None
    exact: Any = None
    const: int | None = None


def _and(*conds: Any) -> Any:
    parts = [c for c in conds if c is not None]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else z3.And(parts)


class ExpEncoder(Z3Encoder):
    """`Z3Encoder` with sizes as exponent vectors over `universe`.

    Fields in `fixed` become constants (model facts, hardware): the rules read them in
    products and divisibility, and only constants keep those linear.
    """

    def __init__(
        self,
        universe: Universe,
        resolutions: tuple[Resolution, ...],
        fixed: Mapping[str, Any],
    ) -> None:
        self.universe = universe
        self.fixed = dict(fixed)
        self.side: list[Any] = []
        self.bounds: list[Any] = []
        self._values: dict[tuple[int, ...], tuple[Num, Any]] = {}
        super().__init__(resolutions)

    # --- variables ---------------------------------------------------------------------
    def make_var(self, spec: FieldSpec) -> Sym:
        if spec.name in self.fixed:
            value = self.fixed[spec.name]
            sym = self.const(Const(value, spec.kind))
            if spec.kind == "int" and spec.optional:
                return Sym(sym.val, z3.BoolVal(value is not None))
            return sym
        return super().make_var(spec)

    def int_var(self, spec: FieldSpec) -> Sym:
        if not spec.size:
            sym = super().int_var(spec)
            return Sym(Num(None, val=sym.val), sym.is_set)
        exps = tuple(z3.Int(f"{spec.name}__e{p}") for p in self.universe.primes)
        for e, h in zip(exps, self.universe.hi, strict=True):
            self.domain.append(e >= 0)
            self.bounds.append(e <= h)
        return Sym(Num(exps, self.universe.hi))

    def int_equals(self, sym: Sym, value: int) -> Any:
        return self.num_eq(sym.val, self.num(value))

    def decode_int(self, model: z3.ModelRef, sym: Sym) -> int:
        if not isinstance(sym.val, Num):
            return super().decode_int(model, sym)
        n: Num = sym.val
        if n.exps is None:
            return int(model.eval(n.val, model_completion=True).as_long())
        exps = [model.eval(e, model_completion=True).as_long() for e in n.exps]
        return _value(self.universe.primes, exps)

    def exponents(self, name: str) -> tuple[Any, ...] | None:
        """A field's exponent variables (None for plain integers and constants)."""
        val = self.raw[name].val
        return val.exps if isinstance(val, Num) and val.const is None else None

    def take_side(self) -> list[Any]:
        """Exactness conditions met since the last call."""
        out, self.side = self.side, []
        return out

    # --- the hooks of Z3Encoder ------------------------------------------------------------
    def const(self, e: Const) -> Sym:
        if e.kind != "int":
            return super().const(e)
        if e.value is None:
            return Sym(self.num(0), z3.BoolVal(False))
        return Sym(self.num(int(e.value)))

    def member(self, e: In, env: Mapping[str, Sym]) -> Any:
        if e.x.kind != "int":
            return super().member(e, env)
        x = self.term(e.x, env).val
        values = [int(v) for v in e.values if isinstance(v, int)]
        return z3.Or([self.num_eq(x, self.num(v)) for v in values])

    def arith(self, op: str, a: Any, b: Any) -> Any:
        if not (isinstance(a, Num) and isinstance(b, Num)):
            return super().arith(op, self._plain(a), self._plain(b))
        if op == "*":
            return self.num_mul(a, b)
        if op == "//":
            return self.num_div(a, b)
        va, vb = self.value(a), self.value(b)
        if op == "+":
            return Num(None, val=va + vb)
        if op == "-":
            return Num(None, val=va - vb)
        return Num(None, val=z3.If(vb == 0, 0, va % vb))

    def compare(self, e: Cmp, env: Mapping[str, Sym]) -> Any:
        if "int" not in (e.a.kind, e.b.kind):
            return super().compare(e, env)
        a, b = self.term(e.a, env), self.term(e.b, env)
        if isinstance(e.b, Const) and e.b.value is None and a.is_set is not None:
            return z3.Not(a.is_set) if e.op == "==" else a.is_set
        x, y = a.val, b.val
        if not (isinstance(x, Num) and isinstance(y, Num)):
            x, y = z3.ToReal(self._plain(x)), z3.ToReal(self._plain(y))
            return _order(e.op, x, y)
        if e.op == "==":
            return self.num_eq(x, y)
        if e.op == "!=":
            return z3.Not(self.num_eq(x, y))
        return self.num_order(e.op, x, y)

    def divides(self, d: Any, n: Any) -> Any:
        if d.const is not None and d.const < 0:
            d = self.num(-d.const)  # -d divides n exactly when d does
        if d.exps is not None and n.exps is not None:
            self._read(d, n)
            return z3.And([x <= y for x, y in zip(d.exps, n.exps, strict=True)])
        if d.exps is not None and n.const is not None:
            # n is 0, or a constant with primes no size has: they cannot matter.
            self._read(d)
            if n.const == 0:
                return z3.BoolVal(True)
            f = factorize(abs(n.const))
            return z3.And(
                [x <= f.get(p, 0) for x, p in zip(d.exps, self.universe.primes, strict=True)]
            )
        if d.const is not None and n.exps is not None:
            return z3.BoolVal(False)  # d is 0 or has a prime no size has
        return super().divides(self.value(d), self.value(n))

    def ite(self, cond: Any, a: Sym, b: Sym) -> Sym:
        if not isinstance(a.val, Num):
            return super().ite(cond, a, b)
        is_set = None
        if a.is_set is not None or b.is_set is not None:
            is_set = z3.If(cond, _set_of(a), _set_of(b))
        x, y = a.val, b.val
        if x.exps is not None and y.exps is not None:
            exact = None
            if x.exact is not None or y.exact is not None:
                exact = z3.If(cond, _true_if_none(x.exact), _true_if_none(y.exact))
            exps = tuple(z3.If(cond, s, t) for s, t in zip(x.exps, y.exps, strict=True))
            hi = tuple(max(s, t) for s, t in zip(x.hi, y.hi, strict=True))
            return Sym(Num(exps, hi, exact=exact), is_set)
        return Sym(Num(None, val=z3.If(cond, self.value(x), self.value(y))), is_set)

    # --- arithmetic on Num -------------------------------------------------------------------
    def num(self, c: int) -> Num:
        """A constant, with exponents when it is a product of the universe's primes."""
        e = self.universe.exponents(c)
        exps = None if e is None else tuple(z3.IntVal(x) for x in e)
        return Num(exps, e or (), val=z3.IntVal(c), const=c)

    def num_mul(self, a: Num, b: Num) -> Num:
        if a.const == 1:
            return b
        if b.const == 1:
            return a
        if a.exps is not None and b.exps is not None:
            exps = tuple(x + y for x, y in zip(a.exps, b.exps, strict=True))
            hi = tuple(x + y for x, y in zip(a.hi, b.hi, strict=True))
            return Num(exps, hi, exact=_and(a.exact, b.exact))
        return Num(None, val=self.value(a) * self.value(b))

    def num_div(self, a: Num, b: Num) -> Num:
        if b.const == 1:
            return a
        if a.exps is not None and b.exps is not None:
            whole = [y <= x for x, y in zip(a.exps, b.exps, strict=True)]
            exps = tuple(x - y for x, y in zip(a.exps, b.exps, strict=True))
            return Num(exps, a.hi, exact=_and(a.exact, b.exact, z3.And(whole)))
        va, vb = self.value(a), self.value(b)
        return Num(None, val=z3.If(vb == 0, 0, va / vb))

    def num_eq(self, a: Num, b: Num) -> Any:
        if a.exps is not None and b.exps is not None:
            self._read(a, b)
            return z3.And([x == y for x, y in zip(a.exps, b.exps, strict=True)])
        if (a.exps is not None and b.const is not None) or (
            b.exps is not None and a.const is not None
        ):
            return z3.BoolVal(False)  # a constant that no size can equal
        return self.value(a) == self.value(b)

    def num_order(self, op: str, a: Num, b: Num) -> Any:
        if a.exps is not None and b.exps is not None:
            box = tuple(x + y for x, y in zip(a.hi, b.hi, strict=True))
            w = order_weights(self.universe.primes, box)
            if w is not None:
                self._read(a, b)
                diff = z3.Sum([c * (x - y) for c, x, y in zip(w, a.exps, b.exps, strict=True)])
                return _order(op, diff, z3.IntVal(0))
        return _order(op, self.value(a), self.value(b))

    def value(self, n: Num) -> Any:
        """The plain integer term: for a size, an If-chain over the divisors it may take."""
        if n.val is not None:
            return n.val
        assert n.exps is not None
        key = tuple(e.get_id() for e in n.exps)
        if key not in self._values:
            self._read(n)
            points = list(_box(n.hi))
            term: Any = z3.IntVal(_value(self.universe.primes, points[-1]))
            for pt in reversed(points[:-1]):
                hit = z3.And([e == x for e, x in zip(n.exps, pt, strict=True)])
                term = z3.If(hit, _value(self.universe.primes, pt), term)
            self._values[key] = (n, term)
        return self._values[key][1]

    def _plain(self, x: Any) -> Any:
        return self.value(x) if isinstance(x, Num) else x

    def _read(self, *nums: Num) -> None:
        for n in nums:
            if n.exact is not None:
                self.side.append(n.exact)


def _order(op: str, x: Any, y: Any) -> Any:
    return {
        "==": lambda: x == y,
        "!=": lambda: x != y,
        "<": lambda: x < y,
        "<=": lambda: x <= y,
        ">": lambda: x > y,
        ">=": lambda: x >= y,
    }[op]()


def _set_of(sym: Sym) -> Any:
    return sym.is_set if sym.is_set is not None else z3.BoolVal(True)


def _true_if_none(cond: Any) -> Any:
    return z3.BoolVal(True) if cond is None else cond
