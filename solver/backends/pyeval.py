"""The plain-Python back-end: rule trees compiled to Python source, once per process.

Start-up validation has a budget of tens of microseconds, which a tree-walking
interpreter cannot meet (one Python call per node). So each tree becomes one Python
expression over local variables, and the whole catalogue becomes three generated
functions: `resolve`, `violations` and `derived`. `meshsat.solver.backends.interp` walks the same
trees node by node; tests check that both agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from meshsat.solver.packs import Pack

from meshsat.solver.backends.pycompile import compile_function
from meshsat.solver.lang import expr as ex
from meshsat.solver.lang.expr import fields_of
from meshsat.solver.lang.rule import Resolution, Rule
from meshsat.solver.lang.visitor import ExprVisitor

Env = Mapping[str, Any]
#: (resolution index, step index, field, old value, new value)
StepChange = tuple[int, int, str, Any, Any]


class PyCompiler(ExprVisitor[str]):
    """Turns expression trees into Python source over `v_<field>` / `u_<field>` locals.

    `v_` names hold resolved values, `u_` names the user's raw values. `//` and `%`
    by zero give 0, the convention every back-end shares. A compound divisor is held in
    a walrus temporary named after what it computes (`w_attn_tp`, `d_dp_size_attn_cp_size`);
    one name always stands for one divisor text, so within one expression (where every
    local is fixed) a reused name holds the same value and nesting cannot clobber it.
    """

    def __init__(self) -> None:
        self.reads: dict[str, None] = {}
        self.raw_reads: dict[str, None] = {}
        self._temps: dict[str, str] = {}

    def var(self, field: ex.Field) -> str:
        if field.raw:
            self.raw_reads.setdefault(field.name, None)
            return f"u_{field.name}"
        self.reads.setdefault(field.name, None)
        return f"v_{field.name}"

    def code(self, e: ex.Expr) -> str:
        return self.visit(e)

    def _divisor(self, e: ex.Expr) -> tuple[str, str]:
        """(the test, the name to divide by) for a divisor evaluated once."""
        code = self.visit(e)
        if isinstance(e, ex.Field):
            return code, code
        temp = self._temps.get(code)
        if temp is None:
            base = f"w_{e.name}" if isinstance(e, ex.Named) else f"d_{_label(e)}"
            temp, k = base, 1
            while temp in self._temps.values():
                k += 1
                temp = f"{base}_{k}"
            self._temps[code] = temp
        return f"({temp} := ({code}))", temp

    def visit_const(self, e: ex.Const) -> str:
        return repr(e.value)

    def visit_field(self, e: ex.Field) -> str:
        return self.var(e)

    def visit_named(self, e: ex.Named) -> str:
        return self.visit(e.body)

    def visit_arith(self, e: ex.Arith) -> str:
        a = self.visit(e.a)
        if e.op in ("//", "%"):
            test, d = self._divisor(e.b)
            return f"(({a}) {e.op} {d} if {test} else 0)"
        return f"({a} {e.op} {self.visit(e.b)})"

    def visit_cmp(self, e: ex.Cmp) -> str:
        if isinstance(e.b, ex.Const) and e.b.value is None:
            op = {"==": "is", "!=": "is not"}[e.op]
            return f"({self.visit(e.a)} {op} None)"
        return f"({self.visit(e.a)} {e.op} {self.visit(e.b)})"

    def visit_divides(self, e: ex.Divides) -> str:
        n = self.visit(e.n)
        test, d = self._divisor(e.d)
        return f"(({n}) % {d} == 0 if {test} else ({n}) == 0)"

    def visit_and(self, e: ex.And) -> str:
        return "(" + " and ".join(self.visit(a) for a in e.args) + ")"

    def visit_or(self, e: ex.Or) -> str:
        return "(" + " or ".join(self.visit(a) for a in e.args) + ")"

    def visit_not(self, e: ex.Not) -> str:
        return f"(not {self.visit(e.a)})"

    def visit_implies(self, e: ex.Implies) -> str:
        return f"(not {self.visit(e.a)} or {self.visit(e.b)})"

    def visit_ite(self, e: ex.Ite) -> str:
        return f"({self.visit(e.then)} if {self.visit(e.cond)} else {self.visit(e.other)})"

    def visit_in(self, e: ex.In) -> str:
        return f"({self.visit(e.x)} in {tuple(e.values)!r})"

    def visit_is_set(self, e: ex.IsSet) -> str:
        return f"({self.visit(e.x)} is not None)"


def _label(e: ex.Expr) -> str:
    """A short identifier for a divisor: its width and field names (`attn_dp_attn_cp_size`)."""
    if isinstance(e, ex.Field | ex.Named):
        return e.name
    if isinstance(e, ex.Arith):
        return f"{_label(e.a)}_{_label(e.b)}"
    if isinstance(e, ex.Const) and isinstance(e.value, int):
        return str(e.value).replace("-", "minus")
    return "_".join(fields_of(e)) or "const"


def _bind(names: Iterable[str], prefix: str, source: str) -> list[str]:
    return [f"    {prefix}{n} = {source}[{n!r}]" for n in names]


def compile_resolution(
    resolutions: tuple[Resolution, ...], fields: tuple[str, ...]
) -> Callable[[Env], tuple[dict[str, Any], list[StepChange]]]:
    """`resolve(raw) -> (resolved, changes)`: SGLang's silent changes, in order."""
    c = PyCompiler()
    body: list[str] = []
    for ri, res in enumerate(resolutions):
        for si, step in enumerate(res.steps):
            body.append(f"    if {c.code(step.when)}:")
            for k, (_, value) in enumerate(step.sets):
                body.append(f"        n{k} = {c.code(value)}")
            for k, (name, _) in enumerate(step.sets):
                body.append(f"        if n{k} != v_{name}:")
                body.append(f"            ch.append(({ri}, {si}, {name!r}, v_{name}, n{k}))")
                body.append(f"            v_{name} = n{k}")
    head = ["def resolve(u):", *_bind(fields, "v_", "u"), "    ch = []"]
    ret = "    return {" + ", ".join(f"{n!r}: v_{n}" for n in fields) + "}, ch"
    return compile_function("\n".join([*head, *body, ret]), "resolve", cache=True)


def compile_checks(rules: tuple[Rule, ...]) -> Callable[[Env, Env], list[int]]:
    """`violations(resolved, raw) -> [rule index]` for every rule whose `when ⇒ holds` fails."""
    c = PyCompiler()
    body = [
        f"    if {c.code(r.when)} and not {c.code(r.holds)}: out.append({i})"
        for i, r in enumerate(rules)
    ]
    head = [
        "def violations(v, u):",
        *_bind(c.reads, "v_", "v"),
        *_bind(c.raw_reads, "u_", "u"),
        "    out = []",
    ]
    return compile_function("\n".join([*head, *body, "    return out"]), "violations", cache=True)


def compile_values(named: tuple[ex.Named, ...]) -> Callable[[Env], dict[str, Any]]:
    """`derived(resolved) -> {name: value}` for the derived widths."""
    c = PyCompiler()
    items = [f"{n.name!r}: {c.code(n.body)}" for n in named]
    head = ["def derived(v):", *_bind(c.reads, "v_", "v")]
    source = "\n".join([*head, "    return {" + ", ".join(items) + "}"])
    return compile_function(source, "derived", cache=True)


def compile_predicate(expr: ex.Expr, params: tuple[str, ...]) -> Callable[..., Any]:
    """One expression as a function of named resolved fields, for generators and tests."""
    c = PyCompiler()
    code = c.code(expr)
    missing = [n for n in (*c.reads, *c.raw_reads) if n not in params]
    if missing:
        raise ValueError(f"expression reads {missing} beyond the parameters {params}")
    args = ", ".join(f"v_{p}" for p in params)
    return compile_function(f"def predicate({args}):\n    return {code}", "predicate")


@dataclass(frozen=True)
class Compiled:
    resolve: Callable[[Env], tuple[dict[str, Any], list[StepChange]]]
    violations: Callable[[Env, Env], list[int]]
    derived: Callable[[Env], dict[str, Any]]


def compiled(pack: Pack | None = None) -> Compiled:
    """A pack's catalogue compiled once per process and pack (about a millisecond each);
    the newest pack without one."""
    from meshsat.solver.packs import NEWEST

    return _compiled(NEWEST if pack is None else pack)


@cache
def _compiled(pack: Pack) -> Compiled:
    from meshsat.solver.lang.derived import DERIVED
    from meshsat.solver.lang.fields import SPECS

    return Compiled(
        resolve=compile_resolution(pack.resolutions, tuple(SPECS)),
        violations=compile_checks(pack.rules),
        derived=compile_values(DERIVED),
    )
