"""Z3 back-end: the same rule trees as Z3 terms.

`Z3Encoder` translates with plain integer arithmetic (encoding A, docs/encodings.md),
which is what explanations need: values are pinned, so nonlinear terms collapse to
constants and the solver answers in well under a millisecond. Subclasses change how
numbers are represented (the exponent-vector encoding used by `fix` overrides
`int_var` and the numeric nodes) and inherit booleans, enums, optionals and the
symbolic execution of SGLang's resolution steps.

Conventions shared with the Python back-ends: `x // 0 == x % 0 == 0`; `0 divides n`
only when `n == 0`; an unset optional int reads as 0 and `IsSet` is false.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import z3

from meshsat.solver.lang import expr as ex
from meshsat.solver.lang.fields import SPECS, FieldSpec
from meshsat.solver.lang.rule import Resolution, Rule
from meshsat.solver.lang.visitor import ExprVisitor


@dataclass(frozen=True)
class Sym:
    """A field's value in Z3: `val`, plus `is_set` for optional integers (else None)."""

    val: Any
    is_set: Any = None


class Codes:
    """Global integer codes for enum literals (strings, None, booleans).

    One table for all enum fields keeps `Ite` and equality between enum terms trivial;
    each field's own domain is a separate constraint. Unknown strings of open fields
    (e.g. an `eplb_algorithm` the rules never name) get fresh codes on first sight.
    """

    def __init__(self) -> None:
        self._code: dict[tuple[str, Any], int] = {}
        self._value: list[Any] = []

    def code(self, value: Any) -> int:
        key = (type(value).__name__, value)
        if key not in self._code:
            self._code[key] = len(self._value)
            self._value.append(value)
        return self._code[key]

    def value(self, code: int) -> Any:
        return self._value[code]


Env = dict[str, Sym]


class Z3Encoder:
    """Translate fields, resolution steps and rules into Z3 terms."""

    def __init__(self, resolutions: tuple[Resolution, ...], fields: Iterable[str] = ()) -> None:
        self.codes = Codes()
        self.codes.code(None)
        self.raw: Env = {}
        self.domain: list[Any] = []
        for name in fields or SPECS:
            self.raw[name] = self.make_var(SPECS[name])
        self.resolved = self.resolve(resolutions)

    # --- variables ---------------------------------------------------------------
    def make_var(self, spec: FieldSpec) -> Sym:
        if spec.kind == "bool":
            return Sym(z3.Bool(spec.name))
        if spec.kind == "float":
            return Sym(z3.Real(spec.name))
        if spec.kind == "enum":
            var = z3.Int(spec.name)
            if spec.choices:
                self.domain.append(z3.Or([var == self.codes.code(c) for c in spec.choices]))
            else:
                self.domain.append(var >= 0)
                if spec.optional:
                    self.codes.code(None)
            return Sym(var)
        return self.int_var(spec)

    def int_var(self, spec: FieldSpec) -> Sym:
        var = z3.Int(spec.name)
        is_set = z3.Bool(f"{spec.name}__set") if spec.optional else None
        if spec.minimum is not None and not spec.size:
            low = var >= spec.minimum
            self.domain.append(z3.Implies(is_set, low) if is_set is not None else low)
        if is_set is not None:
            self.domain.append(z3.Implies(z3.Not(is_set), var == 0))
        return Sym(var, is_set)

    def value_term(self, name: str, value: Any) -> Any:
        """`field == value` over the raw variable, for pins and assumptions."""
        spec, sym = SPECS[name], self.raw[name]
        if spec.kind == "enum":
            return sym.val == self.codes.code(value)
        if sym.is_set is not None:
            if value is None:
                return z3.Not(sym.is_set)
            return z3.And(sym.is_set, self.int_equals(sym, value))
        if spec.kind == "int":
            return self.int_equals(sym, value)
        if spec.kind == "float":
            return sym.val == z3.RealVal(value)
        return sym.val == z3.BoolVal(bool(value))

    def constants(self, name: str, value: Any) -> list[tuple[Any, Any]]:
        """Substitution pairs that pin a raw field to `value` (for `z3.substitute`): the
        same pin as `value_term`, but folded into a formula instead of asserted beside it."""
        spec, sym = SPECS[name], self.raw[name]
        if spec.kind == "enum":
            return [(sym.val, z3.IntVal(self.codes.code(value)))]
        if spec.kind == "bool":
            return [(sym.val, z3.BoolVal(bool(value)))]
        if spec.kind == "float":
            return [(sym.val, z3.RealVal(value))]
        pairs = [(sym.val, z3.IntVal(0 if value is None else value))]
        if sym.is_set is not None:
            pairs.append((sym.is_set, z3.BoolVal(value is not None)))
        return pairs

    def int_equals(self, sym: Sym, value: int) -> Any:
        return sym.val == value

    def decode(self, model: z3.ModelRef, name: str) -> Any:
        """The raw value of a field in a Z3 model."""
        spec, sym = SPECS[name], self.raw[name]
        if sym.is_set is not None and not z3.is_true(model.eval(sym.is_set, True)):
            return None
        if spec.kind == "int":  # a subclass may represent integers otherwise (exponents)
            return self.decode_int(model, sym)
        v = model.eval(sym.val, model_completion=True)
        if spec.kind == "bool":
            return z3.is_true(v)
        if spec.kind == "enum":
            return self.codes.value(v.as_long())
        return float(v.as_fraction())

    def decode_int(self, model: z3.ModelRef, sym: Sym) -> int:
        return int(model.eval(sym.val, model_completion=True).as_long())

    # --- resolution ----------------------------------------------------------------
    def resolve(self, resolutions: tuple[Resolution, ...]) -> Env:
        """Symbolic execution of SGLang's silent changes over the raw variables."""
        env = dict(self.raw)
        for res in resolutions:
            for step in res.steps:
                cond = self.term(step.when, env).val
                new = {name: self.term(value, env) for name, value in step.sets}
                for name, sym in new.items():
                    old = env[name]
                    sym = self.coerce(sym, old)
                    env[name] = self.ite(cond, sym, old)
        return env

    def coerce(self, sym: Sym, like: Sym) -> Sym:
        """Give an assigned value the representation of the field it replaces."""
        if like.is_set is not None and sym.is_set is None:
            return Sym(sym.val, z3.BoolVal(True))
        if z3.is_real(like.val) and z3.is_int(sym.val):
            return Sym(z3.ToReal(sym.val))
        return sym

    def ite(self, cond: Any, a: Sym, b: Sym) -> Sym:
        is_set = None
        if a.is_set is not None or b.is_set is not None:
            is_set = z3.If(cond, _set_of(a), _set_of(b))
        return Sym(z3.If(cond, a.val, b.val), is_set)

    # --- rules -----------------------------------------------------------------------
    def rule_term(self, rule: Rule) -> Any:
        return self.term(rule.constraint, self.resolved).val

    def formula(self, e: ex.Expr) -> Any:
        """A boolean expression over the resolved fields as a Z3 term."""
        return self.term(e, self.resolved).val

    # --- expressions ---------------------------------------------------------------
    def term(self, e: ex.Expr, env: Mapping[str, Sym]) -> Sym:
        """`e` over the fields in `env` (raw reads from the raw variables)."""
        return Z3Terms(self, env).visit(e)

    def member(self, e: ex.In, env: Mapping[str, Sym]) -> Any:
        x = self.term(e.x, env).val
        return z3.Or([x == self.const(ex.Const(v, e.x.kind)).val for v in e.values])

    def const(self, e: ex.Const) -> Sym:
        if e.kind == "enum":
            return Sym(z3.IntVal(self.codes.code(e.value)))
        if e.kind == "bool":
            return Sym(z3.BoolVal(bool(e.value)))
        if e.kind == "float":
            return Sym(z3.RealVal(e.value))
        if e.value is None:
            return Sym(z3.IntVal(0), z3.BoolVal(False))
        return Sym(z3.IntVal(e.value))

    def compare(self, e: ex.Cmp, env: Mapping[str, Sym]) -> Any:
        a, b = self.term(e.a, env), self.term(e.b, env)
        if isinstance(e.b, ex.Const) and e.b.value is None and a.is_set is not None:
            return z3.Not(a.is_set) if e.op == "==" else a.is_set
        x, y = a.val, b.val
        if z3.is_real(x) != z3.is_real(y):
            x, y = _real(x), _real(y)
        ops = {"==": x == y, "!=": x != y}
        if e.op in ops:
            return ops[e.op]
        return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[e.op]

    def arith(self, op: str, a: Any, b: Any) -> Any:
        if z3.is_real(a) != z3.is_real(b):
            a, b = _real(a), _real(b)
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        q = a / b if op == "//" else a % b
        return z3.If(b == 0, 0, q)

    def divides(self, d: Any, n: Any) -> Any:
        return z3.If(d == 0, n == 0, n % d == 0)


class Z3Terms(ExprVisitor[Sym]):
    """The structural walk of `Z3Encoder.term` over one environment.

    Numbers go through the encoder's hooks (`const`, `arith`, `compare`, `divides`, `ite`,
    `member`), which is where a subclass (the exponent encoding) changes representation;
    booleans, fields and optionals are translated here once for every encoding.
    """

    def __init__(self, enc: Z3Encoder, env: Mapping[str, Sym]) -> None:
        self.enc = enc
        self.env = env

    def visit_const(self, e: ex.Const) -> Sym:
        return self.enc.const(e)

    def visit_field(self, e: ex.Field) -> Sym:
        return (self.enc.raw if e.raw else self.env)[e.name]

    def visit_named(self, e: ex.Named) -> Sym:
        return self.visit(e.body)

    def visit_arith(self, e: ex.Arith) -> Sym:
        return Sym(self.enc.arith(e.op, self.visit(e.a).val, self.visit(e.b).val))

    def visit_cmp(self, e: ex.Cmp) -> Sym:
        return Sym(self.enc.compare(e, self.env))

    def visit_divides(self, e: ex.Divides) -> Sym:
        return Sym(self.enc.divides(self.visit(e.d).val, self.visit(e.n).val))

    def visit_and(self, e: ex.And) -> Sym:
        return Sym(z3.And([self.visit(a).val for a in e.args]))

    def visit_or(self, e: ex.Or) -> Sym:
        return Sym(z3.Or([self.visit(a).val for a in e.args]))

    def visit_not(self, e: ex.Not) -> Sym:
        return Sym(z3.Not(self.visit(e.a).val))

    def visit_implies(self, e: ex.Implies) -> Sym:
        return Sym(z3.Implies(self.visit(e.a).val, self.visit(e.b).val))

    def visit_ite(self, e: ex.Ite) -> Sym:
        a, b = self.visit(e.then), self.visit(e.other)
        if z3.is_real(a.val) != z3.is_real(b.val):
            a, b = Sym(_real(a.val)), Sym(_real(b.val))
        return self.enc.ite(self.visit(e.cond).val, a, b)

    def visit_in(self, e: ex.In) -> Sym:
        return Sym(self.enc.member(e, self.env))

    def visit_is_set(self, e: ex.IsSet) -> Sym:
        sym = self.visit(e.x)
        if sym.is_set is not None:
            return Sym(sym.is_set)
        return Sym(sym.val != self.enc.codes.code(None))


def _set_of(sym: Sym) -> Any:
    return sym.is_set if sym.is_set is not None else z3.BoolVal(True)


def _real(x: Any) -> Any:
    return z3.ToReal(x) if z3.is_int(x) else x
