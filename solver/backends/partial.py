"""Partial evaluation of rule trees: substitute what is known, fold what becomes constant.

Enumeration specialises every rule to one base config: most fields are then constants,
and a rule such as `moe_dp_size > 1 ⇒ pp_size == 1` shrinks to the few varied fields it
really reads, or to `true`. Folding evaluates constant subtrees with `solver.backends.interp`,
so partial evaluation shares its semantics (`x // 0 == 0`, ...) with every back-end
instead of restating them.

The result is again an ordinary tree: any back-end can compile it.
"""

from __future__ import annotations

from collections.abc import Mapping

from solver.backends.interp import Evaluator
from solver.lang.expr import (
    FALSE,
    TRUE,
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
from solver.lang.visitor import ExprVisitor

Subst = Mapping[str, Expr]
_EMPTY: dict[str, Expr] = {}
#: Folds constant subtrees (they read no field, so the environments stay empty).
_FOLD = Evaluator({}, {})


def specialise(e: Expr, resolved: Subst = _EMPTY, raw: Subst | None = None) -> Expr:
    """`e` with fields replaced (resolved reads from `resolved`, raw reads from `raw`),
    derived widths inlined, and every constant subtree folded.

    Fields absent from the maps stay symbolic. `raw=None` substitutes raw reads from
    `resolved` as well (for callers that do not distinguish them).
    """
    raw_map = resolved if raw is None else raw
    return _Specialiser(resolved, raw_map).run(e)


def fold(e: Expr) -> Expr:
    """Constant folding and boolean simplification only (no substitution)."""
    return specialise(e)


def conjuncts(e: Expr) -> list[Expr]:
    """Split a constraint into independent parts, so each can be checked on its own as
    soon as its own fields are known (`a ⇒ (b ∧ c)` becomes `a ⇒ b`, `a ⇒ c`)."""
    if isinstance(e, And):
        return [p for a in e.args for p in conjuncts(a)]
    if isinstance(e, Implies) and isinstance(e.b, And):
        return [p for b in e.b.args for p in conjuncts(Implies(e.a, b))]
    if isinstance(e, Const) and e.value is True:
        return []
    return [e]


def is_const(e: Expr, value: object) -> bool:
    return isinstance(e, Const) and e.value is value


class _Specialiser(ExprVisitor[Expr]):
    def __init__(self, resolved: Subst, raw: Subst) -> None:
        self.resolved = resolved
        self.raw = raw
        self.memo: dict[int, Expr] = {}

    def run(self, e: Expr) -> Expr:
        # Trees share subtrees (derived widths); memoising by identity keeps this linear.
        key = id(e)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self.visit(e)
        return hit

    def visit_const(self, e: Const) -> Expr:
        return e

    def visit_field(self, e: Field) -> Expr:
        source = self.raw if e.raw else self.resolved
        return source.get(e.name, e)

    def visit_named(self, e: Named) -> Expr:
        return self.run(e.body)

    def visit_arith(self, e: Arith) -> Expr:
        return _arith(e.op, self.run(e.a), self.run(e.b))

    def visit_cmp(self, e: Cmp) -> Expr:
        return _cmp(e.op, self.run(e.a), self.run(e.b))

    def visit_divides(self, e: Divides) -> Expr:
        d, n = self.run(e.d), self.run(e.n)
        if isinstance(d, Const) and d.value == 1:
            return TRUE
        return _eval_if_const(Divides(d, n))

    # Connectives short-circuit as the compiled back-end does: the right operand of
    # `is_set(x) and x > 0` is never folded when x is unset (None > 0 would raise).
    def visit_and(self, e: And) -> Expr:
        return _and(self._until(e.args, stop=False))

    def visit_or(self, e: Or) -> Expr:
        return _or(self._until(e.args, stop=True))

    def visit_not(self, e: Not) -> Expr:
        return _not(self.run(e.a))

    def visit_implies(self, e: Implies) -> Expr:
        a = self.run(e.a)
        return TRUE if is_const(a, False) else _implies(a, self.run(e.b))

    def visit_ite(self, e: Ite) -> Expr:
        cond = self.run(e.cond)
        if isinstance(cond, Const):
            return self.run(e.then if cond.value else e.other)
        return _ite(cond, self.run(e.then), self.run(e.other))

    def visit_in(self, e: In) -> Expr:
        return _in(self.run(e.x), e.values)

    def visit_is_set(self, e: IsSet) -> Expr:
        return _is_set(self.run(e.x))

    def _until(self, args: tuple[Expr, ...], stop: bool) -> list[Expr]:
        out: list[Expr] = []
        for a in args:
            done = self.run(a)
            out.append(done)
            if is_const(done, stop):
                break
        return out


def _all_const(*es: Expr) -> bool:
    return all(isinstance(x, Const) for x in es)


def _eval_if_const(e: Expr) -> Expr:
    if _all_const(*e.children()):
        try:
            return Const(_FOLD.visit(e), e.kind)
        except TypeError:
            # An unset optional in arithmetic: left for run time, where the guard that
            # the rule puts around it (and every back-end honours) keeps it unevaluated.
            return e
    return e


def _arith(op: str, a: Expr, b: Expr) -> Expr:
    node = Arith(op, a, b)  # type: ignore[arg-type]
    if _all_const(a, b):
        return _eval_if_const(node)
    same_int = a.kind == "int" and b.kind == "int"
    if same_int and op == "*":
        if isinstance(a, Const) and a.value == 1:
            return b
        if isinstance(b, Const) and b.value == 1:
            return a
    if same_int and op == "//" and isinstance(b, Const) and b.value == 1:
        return a
    return node


def _cmp(op: str, a: Expr, b: Expr) -> Expr:
    # Push a comparison into the branches of a conditional value, so that
    # `moe_a2a_backend == 'deepep'` over `ite(enable_prefill_cp, 'deepep', 'none')`
    # becomes `enable_prefill_cp` rather than an opaque term mixing flags and numbers.
    if isinstance(a, Ite):
        return _ite(a.cond, _cmp(op, a.then, b), _cmp(op, a.other, b))
    if isinstance(b, Ite):
        return _ite(b.cond, _cmp(op, a, b.then), _cmp(op, a, b.other))
    return _eval_if_const(Cmp(op, a, b))  # type: ignore[arg-type]


def _in(x: Expr, values: tuple[object, ...]) -> Expr:
    if isinstance(x, Ite):
        return _ite(x.cond, _in(x.then, values), _in(x.other, values))
    if isinstance(x, Const):
        return TRUE if x.value in values else FALSE
    return In(x, values)  # type: ignore[arg-type]


def _is_set(x: Expr) -> Expr:
    if isinstance(x, Const):
        return TRUE if x.value is not None else FALSE
    if isinstance(x, Ite):
        return _ite(x.cond, _is_set(x.then), _is_set(x.other))
    if isinstance(x, Field):
        return IsSet(x) if x.optional else TRUE
    if isinstance(x, Arith):
        return TRUE  # arithmetic never yields None
    return _not(Cmp("==", x, Const(None, x.kind)))


def _and(args: list[Expr]) -> Expr:
    kept: list[Expr] = []
    for a in args:
        if is_const(a, False):
            return FALSE
        if is_const(a, True):
            continue
        kept.extend(a.args if isinstance(a, And) else (a,))
    if not kept:
        return TRUE
    return kept[0] if len(kept) == 1 else And(*kept)


def _or(args: list[Expr]) -> Expr:
    kept: list[Expr] = []
    for a in args:
        if is_const(a, True):
            return TRUE
        if is_const(a, False):
            continue
        kept.extend(a.args if isinstance(a, Or) else (a,))
    if not kept:
        return FALSE
    return kept[0] if len(kept) == 1 else Or(*kept)


def _not(a: Expr) -> Expr:
    if isinstance(a, Const):
        return FALSE if a.value else TRUE
    if isinstance(a, Not):
        return a.a
    return Not(a)


def _implies(a: Expr, b: Expr) -> Expr:
    if is_const(a, False) or is_const(b, True):
        return TRUE
    if is_const(a, True):
        return b
    if is_const(b, False):
        return _not(a)
    if a.key() == b.key() or (isinstance(b, Or) and any(x.key() == a.key() for x in b.args)):
        return TRUE
    return Implies(a, b)


def _ite(cond: Expr, then: Expr, other: Expr) -> Expr:
    if isinstance(cond, Const):
        return then if cond.value else other
    if then.key() == other.key():
        return then
    if then.kind == "bool" and other.kind == "bool":
        if is_const(then, True) and is_const(other, False):
            return cond
        if is_const(then, False) and is_const(other, True):
            return _not(cond)
        if is_const(other, False):
            return _and([cond, then])
        if is_const(then, True):
            return _or([cond, other])
    return Ite(cond, then, other)


def replace_atoms(e: Expr, by_key: Mapping[tuple[object, ...], Expr]) -> Expr:
    """`e` with boolean atoms swapped for stand-ins, looking through connectives only.

    Used to hand the flag part of a constraint to a solver while its numeric atoms
    (`tp_size == 8`) become opaque booleans fixed per numeric signature.
    """
    hit = by_key.get(e.key())
    if hit is not None:
        return hit
    if isinstance(e, And):
        return And(*(replace_atoms(a, by_key) for a in e.args))
    if isinstance(e, Or):
        return Or(*(replace_atoms(a, by_key) for a in e.args))
    if isinstance(e, Not):
        return Not(replace_atoms(e.a, by_key))
    if isinstance(e, Implies):
        return Implies(replace_atoms(e.a, by_key), replace_atoms(e.b, by_key))
    if isinstance(e, Ite) and e.kind == "bool":
        return Ite(*(replace_atoms(c, by_key) for c in (e.cond, e.then, e.other)))
    return e


def atoms(e: Expr) -> list[Expr]:
    """The boolean atoms of a condition: what remains below and/or/not/implies/if."""
    if isinstance(e, And | Or | Not | Implies) or (isinstance(e, Ite) and e.kind == "bool"):
        return [a for c in e.children() for a in atoms(c)]
    if isinstance(e, Const):
        return []
    return [e]
