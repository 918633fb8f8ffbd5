"""The plain-Python back-end: rule trees compiled to Python source, once per process.

Start-up validation has a budget of tens of microseconds, which a tree-walking
interpreter cannot meet (one Python call per node). So each tree becomes one Python
expression over local variables, and the whole catalogue becomes three generated
functions: `resolve`, `violations` and `derived`. `solver.backends.interp` walks the same trees
node by node; tests check that both agree.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from solver.packs import Pack

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
from solver.lang.rule import Resolution, Rule

Env = Mapping[str, Any]
#: (resolution index, step index, field, old value, new value)
Change = tuple[int, int, str, Any, Any]


class PyCompiler:
    """Turns expression trees into Python source over `v_<field>` / `u_<field>` locals.

    `v_` names hold resolved values, `u_` names the user's raw values. `//` and `%`
    by zero give 0, the convention every back-end shares.
    """

    def __init__(self) -> None:
        self._tmp = itertools.count()
        self.reads: dict[str, None] = {}
        self.raw_reads: dict[str, None] = {}

    def var(self, field: Field) -> str:
        if field.raw:
            self.raw_reads.setdefault(field.name, None)
            return f"u_{field.name}"
        self.reads.setdefault(field.name, None)
        return f"v_{field.name}"

    def code(self, e: Expr) -> str:
        if isinstance(e, Const):
            return repr(e.value)
        if isinstance(e, Field):
            return self.var(e)
        if isinstance(e, Named):
            return self.code(e.body)
        if isinstance(e, Arith):
            a, b = self.code(e.a), self.code(e.b)
            if e.op in ("//", "%"):
                t = f"_t{next(self._tmp)}"
                return f"(({a}) {e.op} {t} if ({t} := ({b})) else 0)"
            return f"({a} {e.op} {b})"
        if isinstance(e, Cmp):
            if isinstance(e.b, Const) and e.b.value is None:
                op = {"==": "is", "!=": "is not"}[e.op]
                return f"({self.code(e.a)} {op} None)"
            return f"({self.code(e.a)} {e.op} {self.code(e.b)})"
        if isinstance(e, Divides):
            t = f"_t{next(self._tmp)}"
            n = self.code(e.n)
            return f"(({n}) % {t} == 0 if ({t} := ({self.code(e.d)})) else ({n}) == 0)"
        if isinstance(e, And):
            return "(" + " and ".join(self.code(a) for a in e.args) + ")"
        if isinstance(e, Or):
            return "(" + " or ".join(self.code(a) for a in e.args) + ")"
        if isinstance(e, Not):
            return f"(not {self.code(e.a)})"
        if isinstance(e, Implies):
            return f"(not {self.code(e.a)} or {self.code(e.b)})"
        if isinstance(e, Ite):
            return f"({self.code(e.then)} if {self.code(e.cond)} else {self.code(e.other)})"
        if isinstance(e, In):
            return f"({self.code(e.x)} in {tuple(e.values)!r})"
        if isinstance(e, IsSet):
            return f"({self.code(e.x)} is not None)"
        raise TypeError(f"no Python translation for {type(e).__name__}")


def _bind(names: Iterable[str], prefix: str, source: str) -> list[str]:
    return [f"    {prefix}{n} = {source}[{n!r}]" for n in names]


def _exec(src: str, name: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(compile(src, f"<meshsat:{name}>", "exec"), namespace)
    fn: Callable[..., Any] = namespace[name]
    fn.__meshsat_source__ = src  # type: ignore[attr-defined]
    return fn


def compile_resolution(
    resolutions: tuple[Resolution, ...], fields: tuple[str, ...]
) -> Callable[[Env], tuple[dict[str, Any], list[Change]]]:
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
    return _exec("\n".join([*head, *body, ret]), "resolve")


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
    return _exec("\n".join([*head, *body, "    return out"]), "violations")


def compile_values(named: tuple[Named, ...]) -> Callable[[Env], dict[str, Any]]:
    """`derived(resolved) -> {name: value}` for the derived widths."""
    c = PyCompiler()
    items = [f"{n.name!r}: {c.code(n.body)}" for n in named]
    head = ["def derived(v):", *_bind(c.reads, "v_", "v")]
    return _exec("\n".join([*head, "    return {" + ", ".join(items) + "}"]), "derived")


def compile_predicate(expr: Expr, params: tuple[str, ...]) -> Callable[..., Any]:
    """One expression as a function of named resolved fields, for generators and tests."""
    c = PyCompiler()
    code = c.code(expr)
    missing = [n for n in (*c.reads, *c.raw_reads) if n not in params]
    if missing:
        raise ValueError(f"expression reads {missing} beyond the parameters {params}")
    args = ", ".join(f"v_{p}" for p in params)
    return _exec(f"def predicate({args}):\n    return {code}", "predicate")


@dataclass(frozen=True)
class Compiled:
    resolve: Callable[[Env], tuple[dict[str, Any], list[Change]]]
    violations: Callable[[Env, Env], list[int]]
    derived: Callable[[Env], dict[str, Any]]


def compiled(pack: Pack | None = None) -> Compiled:
    """A pack's catalogue compiled once per process and pack (about a millisecond each);
    the newest pack without one."""
    from solver.packs import NEWEST

    return _compiled(NEWEST if pack is None else pack)


@cache
def _compiled(pack: Pack) -> Compiled:
    from solver.lang.derived import DERIVED
    from solver.lang.fields import SPECS

    return Compiled(
        resolve=compile_resolution(pack.resolutions, tuple(SPECS)),
        violations=compile_checks(pack.rules),
        derived=compile_values(DERIVED),
    )
