"""Rule trees as text: conditions in words, and the arithmetic of a failure.

Messages show the numbers, never just the verdict: for a failed
`divides(dp_size * attn_cp_size, tp_size)` the detail reads
"tp_size = 8 is not divisible by dp_size·attn_cp_size = 3·2 = 6".
Both texts come from the same tree the back-ends evaluate, so they cannot drift.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.lang import expr as ex
from meshsat.solver.lang.expr import TRUE
from meshsat.solver.lang.rule import Rule
from meshsat.solver.lang.visitor import ExprVisitor

_OPS = {"*": "·", "//": "/", "%": " % ", "+": " + ", "-": " - "}
_NEG = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def fmt_value(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    return str(v)


def _atomic(e: ex.Expr) -> bool:
    return isinstance(e, ex.Const | ex.Field | ex.Named)


def text(e: ex.Expr) -> str:
    """The expression in compact infix, with field and width names."""
    return _TEXT.visit(e)


class _Text(ExprVisitor[str]):
    """Infix text of every node type (stateless: one shared instance)."""

    def visit_const(self, e: ex.Const) -> str:
        return repr(e.value) if isinstance(e.value, str) else fmt_value(e.value)

    def visit_field(self, e: ex.Field) -> str:
        return f"{e.name} (as given)" if e.raw else e.name

    def visit_named(self, e: ex.Named) -> str:
        return e.name

    def visit_arith(self, e: ex.Arith) -> str:
        return f"{_wrap(e.a)}{_OPS[e.op]}{_wrap(e.b)}"

    def visit_cmp(self, e: ex.Cmp) -> str:
        if e.a.kind == "bool" and isinstance(e.b, ex.Const) and e.b.value is True:
            return text(e.a)
        return f"{text(e.a)} {e.op} {text(e.b)}"

    def visit_divides(self, e: ex.Divides) -> str:
        return f"{_wrap(e.d)} divides {_wrap(e.n)}"

    def visit_and(self, e: ex.And) -> str:
        return " and ".join(_wrap(a) for a in e.args)

    def visit_or(self, e: ex.Or) -> str:
        return " or ".join(_wrap(a) for a in e.args)

    def visit_not(self, e: ex.Not) -> str:
        return _negated(e.a)

    def visit_implies(self, e: ex.Implies) -> str:
        return f"if {text(e.a)} then {text(e.b)}"

    def visit_ite(self, e: ex.Ite) -> str:
        return f"({text(e.then)} if {text(e.cond)} else {text(e.other)})"

    def visit_in(self, e: ex.In) -> str:
        vals = ", ".join(fmt_value(v) for v in e.values)
        return f"{text(e.x)} in {{{vals}}}"

    def visit_is_set(self, e: ex.IsSet) -> str:
        return f"{text(e.x)} is set"


_TEXT = _Text()
#: Longer value lists are summarised in a failure's detail.
_LISTED = 24


def _negated(a: ex.Expr) -> str:
    if isinstance(a, ex.IsSet):
        return f"{text(a.x)} is unset"
    if isinstance(a, ex.In):
        vals = ", ".join(fmt_value(v) for v in a.values)
        return f"{text(a.x)} not in {{{vals}}}"
    if isinstance(a, ex.Cmp):
        return f"{text(a.a)} {_NEG[a.op]} {text(a.b)}"
    if isinstance(a, ex.Field | ex.Named):
        return f"not {text(a)}"
    return f"not ({text(a)})"


def _wrap(e: ex.Expr) -> str:
    return text(e) if _atomic(e) or isinstance(e, ex.Not | ex.IsSet) else f"({text(e)})"


def condition(rule: Rule) -> str:
    """`meshsat rules`' condition column."""
    if rule.when is TRUE:
        return text(rule.holds)
    return f"if {text(rule.when)}: {text(rule.holds)}"


# --- the arithmetic of a failure ------------------------------------------------------


class _Shower:
    """The values behind a failure. Not an `ExprVisitor`: it asks only about the shapes
    a message can explain (divisibility, comparisons, connectives) and words every other
    node the same way, so a new node type needs no case here."""

    def __init__(self, resolved: Mapping[str, Any], raw: Mapping[str, Any]) -> None:
        self.v, self.u = resolved, raw

    def val(self, e: ex.Expr) -> Any:
        return evaluate(e, self.v, self.u)

    def subst(self, e: ex.Expr) -> str:
        """The expression with every leaf replaced by its value."""
        if isinstance(e, ex.Arith):
            a, b = self.subst(e.a), self.subst(e.b)
            a = a if _atomic(e.a) else f"({a})"
            b = b if _atomic(e.b) else f"({b})"
            return f"{a}{_OPS[e.op]}{b}"
        return fmt_value(self.val(e))

    def show(self, e: ex.Expr) -> str:
        """`name = value`, with the arithmetic spelled out for compound terms."""
        if isinstance(e, ex.Const):
            return fmt_value(e.value)
        if isinstance(e, ex.Arith):
            return f"{text(e)} = {self.subst(e)} = {fmt_value(self.val(e))}"
        return f"{text(e)} = {fmt_value(self.val(e))}"

    def why_false(self, e: ex.Expr) -> list[str]:
        """Short reasons why `e` evaluates to false."""
        if isinstance(e, ex.Const):
            return []
        if isinstance(e, ex.Divides):
            if isinstance(e.n, ex.Named) and isinstance(e.n.body, ex.Arith):
                # A per-rank shard: "dense_mlp_shard = 18432 / 32 = 576, not a multiple
                # of 128 (quant_block_n)".
                # A sum: "physical_experts = 256 + 4 = 260, not a multiple of 8 (ep_size)".
                body = e.n.body
                op = " / " if body.op == "//" else _OPS[body.op]
                return [
                    f"{e.n.name} = {self.subst(body.a)}{op}{self.subst(body.b)} = "
                    f"{fmt_value(self.val(e.n))}, not a multiple of {fmt_value(self.val(e.d))}"
                    f" ({text(e.d)})"
                ]
            return [f"{self.show(e.n)} is not divisible by {self.show(e.d)}"]
        if isinstance(e, ex.Cmp):
            if e.a.kind == "bool":
                return [f"{self.show(e.a)}, needs {text(e.b)}"]
            return [f"{self.show(e.a)} {_NEG[e.op]} {self.show(e.b)}"]
        if isinstance(e, ex.And):
            # Every false conjunct is worth showing (TOPO-POSITIVE lists each bad size), but a
            # conjunct may be guarded by an earlier one (`x is set and x <= y`): where one
            # cannot be evaluated, the short-circuit `and` of every back-end stops too.
            reasons: list[str] = []
            for a in e.args:
                try:
                    holds = self.val(a)
                except TypeError:
                    break
                if not holds:
                    reasons += self.why_false(a)
            return reasons
        if isinstance(e, ex.Or):
            # An alternative whose first conjunct (its guard: "an FP8 checkpoint and ...")
            # is false does not apply: where one does, only those are worded.
            args = [a for a in e.args if not self._guard_false(a)] or list(e.args)
            parts = [r for a in args for r in self.why_false(a)]
            return ["none holds: " + "; ".join(parts)] if len(parts) > 1 else parts
        if isinstance(e, ex.Not):
            return [self.why_true(e.a)]
        if isinstance(e, ex.IsSet):
            return [f"{text(e.x)} is unset"]
        if isinstance(e, ex.In):
            if len(e.values) > _LISTED:
                # A registry of hundreds of names: say how many, not every one.
                head = ", ".join(fmt_value(v) for v in e.values[:4])
                return [f"{self.show(e.x)}, not one of the {len(e.values)} ({head}, ...)"]
            vals = ", ".join(fmt_value(v) for v in e.values)
            return [f"{self.show(e.x)}, not one of {{{vals}}}"]
        if isinstance(e, ex.Field | ex.Named):
            return [f"{text(e)} is false"]
        return [f"{text(e)} does not hold"]

    def _guard_false(self, e: ex.Expr) -> bool:
        if not isinstance(e, ex.And):
            return False
        try:
            return not self.val(e.args[0])
        except TypeError:
            return False

    def why_true(self, e: ex.Expr) -> str:
        if isinstance(e, ex.IsSet):
            return f"{self.show(e.x)} is set"
        if isinstance(e, ex.In):
            return f"{self.show(e.x)}"
        if isinstance(e, ex.Field | ex.Named):
            return f"{text(e)} is true"
        if isinstance(e, ex.And):
            return " and ".join(self.why_true(a) for a in e.args)
        if isinstance(e, ex.Cmp) and e.a.kind != "bool":
            return f"{self.show(e.a)} {e.op} {self.show(e.b)}"
        return f"{text(e)} holds"


def failure_detail(rule: Rule, resolved: Mapping[str, Any], raw: Mapping[str, Any]) -> str:
    """Why a violated rule failed, with the numbers."""
    return "; ".join(_Shower(resolved, raw).why_false(rule.holds))


def format_message(rule: Rule, resolved: Mapping[str, Any]) -> str:
    """SGLang's wording with `{field}` placeholders filled from the resolved values."""
    if "{" not in rule.message:
        return rule.message
    return rule.message.format_map(_Values(resolved, rule))


class _Shown(str):
    """A placeholder's text. `{field:upper}` shows it upper-cased, as SGLang quotes a value
    it has upper-cased itself (`--speculative-algorithm mtp` is "MTP" in its words) where
    meshsat keeps the value as typed (a name it does not know has no resolved spelling)."""

    __slots__ = ()

    def __format__(self, spec: str) -> str:
        return self.upper() if spec == "upper" else format(str(self), spec)


class _Values(dict[str, str]):
    """Placeholders: a field's resolved value, or a derived width the rule reads
    (`{mlp_tp}`, `{dense_mlp_shard}`), so a message can quote SGLang's own numbers."""

    def __init__(self, env: Mapping[str, Any], rule: Rule) -> None:
        super().__init__()
        self.env = env
        self.rule = rule

    def __missing__(self, key: str) -> str:
        if key in self.env:
            return _Shown(fmt_value(self.env[key]))
        width = ex.named_in(self.rule.when, self.rule.holds).get(key)
        if width is None:
            raise KeyError(key)
        return _Shown(fmt_value(evaluate(width, self.env, self.env)))
