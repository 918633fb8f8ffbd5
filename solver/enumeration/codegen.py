"""One specialised generator function per flag combination, written as Python source.

The numeric fields are bound in nested loops. Each conjunct of the specialised rules
is compiled with `PyCompiler` and checked at the shallowest loop where all its fields
are bound, so a branch dies as soon as it is hopeless. Loops do not run over every
divisor of N: a conjunct that pins a field down is turned into its candidate list —
- `P·x·U | n` (P bound, U still-unbound sizes ≥ 1) gives x ∈ divisors(n / P);
- `P·x·U == n` gives the same, or the single value n / P when nothing is unbound;
- `A(x) ∧ G ⇒ one of those`, with A reading only x and G only bound fields, gives the
  x failing A (computed once per N) plus that list whenever G holds.
Candidates only narrow: every conjunct is still checked, so a narrowing can lose
nothing but time. Loop order is greedy: next, the field with the tightest narrowing.

At the innermost loop the numeric atoms of the flag constraints form the signature;
its completions come from a cached `completions.Table`, and rows stream out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from meshsat.solver.backends.pycompile import compile_function
from meshsat.solver.backends.pyeval import PyCompiler
from meshsat.solver.enumeration.space import Dim
from meshsat.solver.lang.expr import And, Arith, Cmp, Divides, Expr, Field, Implies, fields_of

#: The parameters every generated function takes, in order.
PARAMS = ("v___gpus", "D", "DS", "divs", "merge", "memo", "solve")


@dataclass(frozen=True)
class Narrowing:
    """Candidates for one field from one conjunct (see the module docstring)."""

    score: int
    n: Expr
    bound_factors: tuple[Expr, ...]
    single: bool
    unless: tuple[Expr, ...] = ()
    guard: tuple[Expr, ...] = ()


def _factors(e: Expr) -> list[Expr]:
    if isinstance(e, Arith) and e.op == "*":
        return [*_factors(e.a), *_factors(e.b)]
    return [e]


def _reads(e: Expr) -> set[str]:
    return set(fields_of(e))


def _product_narrowing(
    prod: Expr, n: Expr, x: str, bound: set[str], sizes: set[str], eq: bool
) -> Narrowing | None:
    if not _reads(n) <= bound:
        return None
    factors = _factors(prod)
    hits = [f for f in factors if isinstance(f, Field) and f.name == x and not f.raw]
    if len(hits) != 1:
        return None
    bound_factors: list[Expr] = []
    unbound = False
    for f in factors:
        if f is hits[0]:
            continue
        reads = _reads(f)
        if reads <= bound:
            bound_factors.append(f)
        elif isinstance(f, Field) and f.name in sizes and not f.raw and f.name != x:
            unbound = True
        else:
            return None
    single = eq and not unbound
    return Narrowing(3 if single else 2, n, tuple(bound_factors), single)


def narrowing(c: Expr, x: str, bound: set[str], sizes: set[str]) -> Narrowing | None:
    """What conjunct `c` says about the values of size field `x`, given `bound`."""
    if isinstance(c, Divides):
        return _product_narrowing(c.d, c.n, x, bound, sizes, eq=False)
    if isinstance(c, Cmp) and c.op == "==" and c.a.kind == "int":
        return _product_narrowing(c.a, c.b, x, bound, sizes, eq=True) or _product_narrowing(
            c.b, c.a, x, bound, sizes, eq=True
        )
    if isinstance(c, Implies):
        inner = narrowing(c.b, x, bound, sizes)
        if inner is None or inner.unless:
            return None
        parts = list(c.a.args) if isinstance(c.a, And) else [c.a]
        unless = tuple(p for p in parts if x in _reads(p))
        guard = tuple(p for p in parts if x not in _reads(p))
        if not unless or any(_reads(p) != {x} for p in unless):
            return None
        if any(not _reads(g) <= bound for g in guard):
            return None
        return Narrowing(1, inner.n, inner.bound_factors, inner.single, unless, guard)
    return None


def choose_order(
    names: Sequence[str], constraints: Sequence[Expr], always: set[str]
) -> list[tuple[str, Narrowing | None]]:
    """Greedy loop order: next the field with the tightest narrowing (declared order
    breaks ties), each with the narrowing its loop will use."""
    sizes = set(names)
    bound = set(always)
    remaining = list(names)
    order: list[tuple[str, Narrowing | None]] = []
    while remaining:
        best: tuple[int, int, str, Narrowing | None] | None = None
        for i, x in enumerate(remaining):
            found = [n for c in constraints if (n := narrowing(c, x, bound, sizes))]
            top = max(found, key=lambda n: n.score, default=None)
            key = (top.score if top else 0, -i, x, top)
            if best is None or key[:2] > best[:2]:
                best = key
        assert best is not None
        order.append((best[2], best[3]))
        bound.add(best[2])
        remaining.remove(best[2])
    return order


@dataclass(frozen=True)
class Spec:
    """Everything one generated function is made of."""

    numeric: tuple[str, ...]
    inner: tuple[Dim, ...]
    constraints: tuple[Expr, ...]
    atoms: tuple[Expr, ...]
    columns: tuple[Expr, ...]


def generate(spec: Spec, mode: str, always: Iterable[str] = ("__gpus",)) -> Callable[..., Any]:
    """Compile `spec` into `rows(...)` (a generator of row tuples, `mode="rows"`) or
    `count(...)` (the number of rows, `mode="count"`), both taking `PARAMS`."""
    return compile_function(source(spec, mode, set(always)), "run", f"enumerate-{mode}")


def source(spec: Spec, mode: str, always: set[str]) -> str:
    c = PyCompiler()
    order = choose_order(spec.numeric, spec.constraints, always)
    depth_of = {name: i for i, (name, _) in enumerate(order)}

    def depth(e: Expr) -> int:
        return max((depth_of.get(f, -1) for f in fields_of(e)), default=-1)

    checks: dict[int, list[Expr]] = {}
    for con in spec.constraints:
        checks.setdefault(depth(con), []).append(con)

    counting = mode == "count"
    empty = "return 0" if counting else "return"
    lines = [f"def run({', '.join(PARAMS)}):"]
    if counting:
        lines.append("    total = 0")
    for con in checks.get(-1, []):
        lines.append(f"    if not {c.code(con)}: {empty}")
    inner_fields = [f for d in spec.inner for f in d.fields]
    target = ", ".join(f"v_{f}" for f in inner_fields) + ("," if len(inner_fields) == 1 else "")
    constant_sig = not spec.atoms
    if spec.inner and constant_sig:
        lines += [
            "    completions = memo.get(())",
            "    if completions is None: completions = solve(())",
            f"    if not completions: {empty}",
        ]

    for name, nw in order:
        if nw is not None and nw.unless:
            # The values a conditional narrowing must keep: computed once per N.
            cond = c.code(And(*nw.unless) if len(nw.unless) > 1 else nw.unless[0])
            lines.append(f"    keep_{name} = tuple(v_{name} for v_{name} in D if not {cond})")
    ind = "    "
    for i, (name, nw) in enumerate(order):
        lines.append(f"{ind}for v_{name} in {_candidates(c, name, nw)}:")
        ind += "    "
        here = checks.get(i, [])
        if here:
            lines.append(f"{ind}if not ({' and '.join(c.code(x) for x in here)}): continue")

    if spec.inner and not constant_sig:
        sig = ", ".join(c.code(a) for a in spec.atoms) + ("," if len(spec.atoms) == 1 else "")
        lines += [
            f"{ind}signature = ({sig})",
            f"{ind}completions = memo.get(signature)",
            f"{ind}if completions is None: completions = solve(signature)",
        ]
    if counting:
        lines.append(f"{ind}total += {'len(completions)' if spec.inner else '1'}")
        lines.append("    return total")
    else:
        hoisted: list[str] = []
        cols: list[str] = []
        for k, col in enumerate(spec.columns):
            reads = set(fields_of(col))
            code = c.code(col)
            if spec.inner and not reads & set(inner_fields) and not isinstance(col, Field):
                lines.append(f"{ind}column_{k} = {code}")
                hoisted.append(f"column_{k}")
                cols.append(f"column_{k}")
            else:
                cols.append(code)
        row = "(" + ", ".join(cols) + ("," if len(cols) == 1 else "") + ")"
        if spec.inner:
            lines.append(f"{ind}for {target} in completions:")
            lines.append(f"{ind}    yield {row}")
        else:
            lines.append(f"{ind}yield {row}")
    return "\n".join(lines) + "\n"


def _candidates(c: PyCompiler, name: str, nw: Narrowing | None) -> str:
    """The values loop `name` runs over: `n_<name>` is the number it must divide or equal,
    `p_<name>` the product of the other, bound factors, `q_<name>` their quotient."""
    if nw is None:
        return "D"
    n = c.code(nw.n)
    a, b, q = f"n_{name}", f"p_{name}", f"q_{name}"
    if nw.bound_factors:
        p = " * ".join(c.code(f) for f in nw.bound_factors)
        if nw.single:
            core = (
                f"((({q},) if {a} % {b} == 0 and ({q} := {a} // {b}) in DS else ()) "
                f"if ({a} := {n}) > 0 and ({b} := {p}) > 0 else D)"
            )
        else:
            core = (
                f"((divs({a} // {b}) if {a} % {b} == 0 else ()) "
                f"if ({a} := {n}) > 0 and ({b} := {p}) > 0 else D)"
            )
    elif nw.single:
        core = f"(({a},) if ({a} := {n}) in DS else ())"
    else:
        core = f"(divs({a}) if ({a} := {n}) > 0 else D)"
    if not nw.unless:
        return core
    guard = " and ".join(c.code(g) for g in nw.guard) or "True"
    return f"(merge(keep_{name}, {core}) if {guard} else D)"
