"""Partial evaluation of rule trees: substitute what is known, fold what becomes constant.

Enumeration specialises every rule to one base config: most fields are then constants,
and a rule such as `moe_dp_size > 1 ⇒ pp_size == 1` shrinks to the few varied fields it
really reads, or to `true`. Folding evaluates constant subtrees with
`meshsat.solver.backends.interp`,
so partial evaluation shares its semantics (`x // 0 == 0`, ...) with every back-end
instead of restating them.

The result is again an ordinary tree: any back-end can compile it.
"""

from __future__ import annotations

from collections.abc import Mapping

from meshsat.solver.backends.interp import Evaluator
from meshsat.solver.lang import expr as ex
from meshsat.solver.lang.expr import FALSE, TRUE
from meshsat.solver.lang.visitor import ExprVisitor

Subst = Mapping[str, ex.Expr]
_EMPTY: dict[str, ex.Expr] = {}
#: Folds constant subtrees (they read no field, so the environments stay empty).
_FOLD = Evaluator({}, {})


def specialise(e: ex.Expr, resolved: Subst = _EMPTY, raw: Subst | None = None) -> ex.Expr:
    """`e` with fields replaced (resolved reads from `resolved`, raw reads from `raw`),
    derived widths inlined, and every constant subtree folded.

    Fields absent from the maps stay symbolic. `raw=None` substitutes raw reads from
    `resolved` as well (for callers that do not distinguish them).
    """
    raw_map = resolved if raw is None else raw
    return _Specialiser(resolved, raw_map).run(e)


def fold(e: ex.Expr) -> ex.Expr:
    """Constant folding and boolean simplification only (no substitution)."""
    return specialise(e)


def conjuncts(e: ex.Expr) -> list[ex.Expr]:
    """Split a constraint into independent parts, so each can be checked on its own as
    soon as its own fields are known (`a ⇒ (b ∧ c)` becomes `a ⇒ b`, `a ⇒ c`)."""
    if isinstance(e, ex.And):
        return [p for a in e.args for p in conjuncts(a)]
    if isinstance(e, ex.Implies) and isinstance(e.b, ex.And):
        return [p for b in e.b.args for p in conjuncts(ex.Implies(e.a, b))]
    if isinstance(e, ex.Const) and e.value is True:
        return []
    return [e]


def is_const(e: ex.Expr, value: object) -> bool:
    return isinstance(e, ex.Const) and e.value is value


class _Specialiser(ExprVisitor[ex.Expr]):
    def __init__(self, resolved: Subst, raw: Subst) -> None:
        self.resolved = resolved
        self.raw = raw
        self.memo: dict[int, ex.Expr] = {}

    def run(self, e: ex.Expr) -> ex.Expr:
        # Trees share subtrees (derived widths); memoising by identity keeps this linear.
        key = id(e)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self.visit(e)
        return hit

    def visit_const(self, e: ex.Const) -> ex.Expr:
        return e

    def visit_field(self, e: ex.Field) -> ex.Expr:
        source = self.raw if e.raw else self.resolved
        return source.get(e.name, e)

    def visit_named(self, e: ex.Named) -> ex.Expr:
        return self.run(e.body)

    def visit_arith(self, e: ex.Arith) -> ex.Expr:
        return _arith(e.op, self.run(e.a), self.run(e.b))

    def visit_cmp(self, e: ex.Cmp) -> ex.Expr:
        return _cmp(e.op, self.run(e.a), self.run(e.b))

    def visit_divides(self, e: ex.Divides) -> ex.Expr:
        d, n = self.run(e.d), self.run(e.n)
        if isinstance(d, ex.Const) and d.value == 1:
            return TRUE
        return _eval_if_const(ex.Divides(d, n))

    # Connectives short-circuit as the compiled back-end does: the right operand of
    # `is_set(x) and x > 0` is never folded when x is unset (None > 0 would raise).
    def visit_and(self, e: ex.And) -> ex.Expr:
        return _and(self._until(e.args, stop=False))

    def visit_or(self, e: ex.Or) -> ex.Expr:
        return _or(self._until(e.args, stop=True))

    def visit_not(self, e: ex.Not) -> ex.Expr:
        return _not(self.run(e.a))

    def visit_implies(self, e: ex.Implies) -> ex.Expr:
        a = self.run(e.a)
        return TRUE if is_const(a, False) else _implies(a, self.run(e.b))

    def visit_ite(self, e: ex.Ite) -> ex.Expr:
        cond = self.run(e.cond)
        if isinstance(cond, ex.Const):
            return self.run(e.then if cond.value else e.other)
        return _ite(cond, self.run(e.then), self.run(e.other))

    def visit_in(self, e: ex.In) -> ex.Expr:
        return _in(self.run(e.x), e.values)

    def visit_is_set(self, e: ex.IsSet) -> ex.Expr:
        return _is_set(self.run(e.x))

    def _until(self, args: tuple[ex.Expr, ...], stop: bool) -> list[ex.Expr]:
        out: list[ex.Expr] = []
        for a in args:
            done = self.run(a)
            out.append(done)
            if is_const(done, stop):
                break
        return out


def _all_const(*es: ex.Expr) -> bool:
    return all(isinstance(x, ex.Const) for x in es)


def _eval_if_const(e: ex.Expr) -> ex.Expr:
    if _all_const(*e.children()):
        try:
            return ex.Const(_FOLD.visit(e), e.kind)
        except TypeError:
            # An unset optional in arithmetic: left for run time, where the guard that
            # the rule puts around it (and every back-end honours) keeps it unevaluated.
            return e
    return e


def _arith(op: str, a: ex.Expr, b: ex.Expr) -> ex.Expr:
    node = ex.Arith(op, a, b)  # type: ignore[arg-type]
    if _all_const(a, b):
        return _eval_if_const(node)
    same_int = a.kind == "int" and b.kind == "int"
    if same_int and op == "*":
        if isinstance(a, ex.Const) and a.value == 1:
            return b
        if isinstance(b, ex.Const) and b.value == 1:
            return a
    if same_int and op == "//" and isinstance(b, ex.Const) and b.value == 1:
        return a
    return node


def _cmp(op: str, a: ex.Expr, b: ex.Expr) -> ex.Expr:
    # Push a comparison into the branches of a conditional value, so that
    # `moe_a2a_backend == 'deepep'` over `ite(enable_prefill_cp, 'deepep', 'none')`
    # becomes `enable_prefill_cp` rather than an opaque term mixing flags and numbers.
    if isinstance(a, ex.Ite):
        return _ite(a.cond, _cmp(op, a.then, b), _cmp(op, a.other, b))
    if isinstance(b, ex.Ite):
        return _ite(b.cond, _cmp(op, a, b.then), _cmp(op, a, b.other))
    return _eval_if_const(ex.Cmp(op, a, b))  # type: ignore[arg-type]


def _in(x: ex.Expr, values: tuple[object, ...]) -> ex.Expr:
    if isinstance(x, ex.Ite):
        return _ite(x.cond, _in(x.then, values), _in(x.other, values))
    if isinstance(x, ex.Const):
        return TRUE if x.value in values else FALSE
    return ex.In(x, values)  # type: ignore[arg-type]


def _is_set(x: ex.Expr) -> ex.Expr:
    if isinstance(x, ex.Const):
        return TRUE if x.value is not None else FALSE
    if isinstance(x, ex.Ite):
        return _ite(x.cond, _is_set(x.then), _is_set(x.other))
    if isinstance(x, ex.Field):
        return ex.IsSet(x) if x.optional else TRUE
    if isinstance(x, ex.Arith):
        return TRUE  # arithmetic never yields None
    return _not(ex.Cmp("==", x, ex.Const(None, x.kind)))


def _and(args: list[ex.Expr]) -> ex.Expr:
    kept: list[ex.Expr] = []
    for a in args:
        if is_const(a, False):
            return FALSE
        if is_const(a, True):
            continue
        kept.extend(a.args if isinstance(a, ex.And) else (a,))
    if not kept:
        return TRUE
    return kept[0] if len(kept) == 1 else ex.And(*kept)


def _or(args: list[ex.Expr]) -> ex.Expr:
    kept: list[ex.Expr] = []
    for a in args:
        if is_const(a, True):
            return TRUE
        if is_const(a, False):
            continue
        kept.extend(a.args if isinstance(a, ex.Or) else (a,))
    if not kept:
        return FALSE
    return kept[0] if len(kept) == 1 else ex.Or(*kept)


def _not(a: ex.Expr) -> ex.Expr:
    if isinstance(a, ex.Const):
        return FALSE if a.value else TRUE
    if isinstance(a, ex.Not):
        return a.a
    return ex.Not(a)


def _implies(a: ex.Expr, b: ex.Expr) -> ex.Expr:
    if is_const(a, False) or is_const(b, True):
        return TRUE
    if is_const(a, True):
        return b
    if is_const(b, False):
        return _not(a)
    if a.key() == b.key() or (isinstance(b, ex.Or) and any(x.key() == a.key() for x in b.args)):
        return TRUE
    return ex.Implies(a, b)


def _ite(cond: ex.Expr, then: ex.Expr, other: ex.Expr) -> ex.Expr:
    if isinstance(cond, ex.Const):
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
    return ex.Ite(cond, then, other)


def replace_atoms(e: ex.Expr, by_key: Mapping[tuple[object, ...], ex.Expr]) -> ex.Expr:
    """`e` with boolean atoms swapped for stand-ins, looking through connectives only.

    Used to hand the flag part of a constraint to a solver while its numeric atoms
    (`tp_size == 8`) become opaque booleans fixed per numeric signature.
    """
    hit = by_key.get(e.key())
    if hit is not None:
        return hit
    if isinstance(e, ex.And):
        return ex.And(*(replace_atoms(a, by_key) for a in e.args))
    if isinstance(e, ex.Or):
        return ex.Or(*(replace_atoms(a, by_key) for a in e.args))
    if isinstance(e, ex.Not):
        return ex.Not(replace_atoms(e.a, by_key))
    if isinstance(e, ex.Implies):
        return ex.Implies(replace_atoms(e.a, by_key), replace_atoms(e.b, by_key))
    if isinstance(e, ex.Ite) and e.kind == "bool":
        return ex.Ite(*(replace_atoms(c, by_key) for c in (e.cond, e.then, e.other)))
    return e


def atoms(e: ex.Expr) -> list[ex.Expr]:
    """The boolean atoms of a condition: what remains below and/or/not/implies/if."""
    if isinstance(e, ex.And | ex.Or | ex.Not | ex.Implies) or (
        isinstance(e, ex.Ite) and e.kind == "bool"
    ):
        return [a for c in e.children() for a in atoms(c)]
    if isinstance(e, ex.Const):
        return []
    return [e]
