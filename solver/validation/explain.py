"""Which user-set fields jointly conflict: a minimal unsat core over per-field pins.

Every rule is hard; each field the user set is pinned by an assumption `field == value`,
and the fields left unset keep their defaults (that is the layout SGLang will run), as
do model facts. The core is minimal: freeing any one of its fields (letting it take any
value) makes the rest satisfiable, so changing one of them is necessary. Which other
fields to change as well, defaults included, is `fix`'s question.

(Freeing the defaults too was measured here: it names slightly different fields but
needs Z3 to prove unsatisfiability over some sixty free integers, 5-180 ms and erratic
per check, against about a millisecond for the whole core with defaults pinned.)

The core is grown by insertion (see `Explainer.core`), and each "can every rule hold
with these fields free?" question takes the cheapest exact route:
1. a violated rule that reads none of the free fields stays violated: unsat;
2. a witness found by the compiled Python back-end (a small repair search) proves sat;
3. a violated rule that is unsatisfiable on its own under the pins proves unsat;
4. otherwise Z3 decides on every rule, with the pinned fields substituted.
Z3's nonlinear `mod` costs milliseconds per check over many free integers, so routes
1-3 are what keep an explanation at a few milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import z3

from meshsat.solver.backends.pyeval import compiled
from meshsat.solver.backends.z3enc import Z3Encoder
from meshsat.solver.backends.z3lock import z3_locked
from meshsat.solver.catalogue.literals import open_literals
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.fields import SPECS, FieldSpec
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import Pack

#: Budget for one full Z3 check. A check that runs out counts as "not proven unsat", so
#: the core stays an unsat set (possibly not minimal); it never hangs.
CHECK_TIMEOUT_MS = 2000
#: Budget for the one-rule unsatisfiability shortcut before the full check.
RULE_TIMEOUT_MS = 100
#: Most candidate layouts the witness search evaluates before handing over to Z3.
WITNESS_BUDGET = 300
#: How many fields the witness search changes at most.
REPAIR_DEPTH = 3


class Explainer:
    """Built once per process and pack: Z3 terms of every error rule and their footprints."""

    def __init__(self, pack: Pack) -> None:
        self.pack = pack
        self.errors = frozenset(i for i, r in enumerate(pack.rules) if r.severity == "error")
        self.enc = Z3Encoder(pack.resolutions)
        self.terms = {i: self.enc.rule_term(pack.rules[i]) for i in sorted(self.errors)}
        var_field = {}
        for name, sym in self.enc.raw.items():
            var_field[sym.val.decl().name()] = name
            if sym.is_set is not None:
                var_field[sym.is_set.decl().name()] = name
        self.reads: dict[int, frozenset[str]] = {
            i: frozenset(var_field[v] for v in _const_names(t) if v in var_field)
            for i, t in self.terms.items()
        }
        self.domain: dict[str, list[Any]] = {n: [] for n in SPECS}
        for c in self.enc.domain:
            for v in _const_names(c):
                if v in var_field:
                    self.domain[var_field[v]].append(c)
                    break

    # --- one satisfiability question --------------------------------------------------
    def satisfiable(
        self, raw: Mapping[str, Any], violated: list[int], free: frozenset[str]
    ) -> bool | None:
        """Can every rule hold with the `free` fields unpinned? None: the solver gave up."""
        if any(not (self.reads[i] & free) for i in violated):
            return False
        if self._witness(raw, free):
            return True
        if any(self._rule_alone_unsat(i, raw, free) for i in violated):
            return False
        return self._z3(raw, free)

    def _rule_alone_unsat(self, i: int, raw: Mapping[str, Any], free: frozenset[str]) -> bool:
        """One violated rule that no value of the free fields can satisfy on its own.

        Sound (a subset of the rules is already unsatisfiable) and cheap: the formula is
        one rule with the pinned values substituted, where the full check carries all.
        """
        mine = self.reads[i] & free
        pairs = [p for n in sorted(self.reads[i] - free) for p in self.enc.constants(n, raw[n])]
        formula = z3.simplify(
            z3.substitute(z3.And(self.terms[i], *(d for n in mine for d in self.domain[n])), *pairs)
        )
        if z3.is_false(formula):
            return True
        solver = z3.Then("simplify", "propagate-values", "solve-eqs", "smt").solver()
        solver.set("timeout", RULE_TIMEOUT_MS)
        solver.add(formula)
        return bool(solver.check() == z3.unsat)

    def _witness(self, raw: Mapping[str, Any], changeable: frozenset[str]) -> bool:
        """Look for a valid assignment that changes only `changeable` fields.

        Iterative deepening over repairs: at depth d, take the first violated rule and
        try each candidate value of each changeable field it reads, then recurse with
        d - 1. Finding one proves satisfiability; failing within the budget proves
        nothing and the question goes to Z3.
        """
        c = compiled(self.pack)
        budget = [WITNESS_BUDGET]
        pools: dict[str, list[Any]] = {}

        def failing(env: dict[str, Any]) -> list[int] | None:
            budget[0] -= 1
            resolved, _ = c.resolve(env)
            return [i for i in c.violations(resolved, env) if i in self.errors]

        def search(env: dict[str, Any], failed: list[int], depth: int) -> bool:
            for name in sorted(self.reads[failed[0]] & changeable):
                if name not in pools:
                    pools[name] = self._candidates(SPECS[name], raw)
                for value in pools[name]:
                    if budget[0] <= 0:
                        return False
                    if value == env[name] and type(value) is type(env[name]):
                        continue
                    trial = {**env, name: value}
                    still = failing(trial)
                    if not still:
                        return True
                    if depth > 1 and search(trial, still, depth - 1):
                        return True
            return False

        # Two starting points: the freed fields back at their defaults (the defaults are a
        # valid layout, so this is often valid or one repair away), then as given.
        starts = [{**raw, **{n: SPECS[n].default for n in changeable}}, dict(raw)]
        for start in starts:
            first = failing(start)
            if not first:
                return True
            if any(search(start, first, d) for d in range(1, REPAIR_DEPTH + 1)):
                return True
        return False

    def _candidates(self, spec: FieldSpec, raw: Mapping[str, Any]) -> list[Any]:
        if spec.kind == "bool":
            return [False, True]
        if spec.choices:
            return list(spec.choices)
        if spec.kind == "enum":
            literals = open_literals()[spec.name]
            return [*([None] if spec.optional else []), *literals, raw[spec.name]]
        if spec.kind == "float":
            return [raw[spec.name], 1.0]
        return list(_int_candidates(spec, raw))

    def _z3(self, raw: Mapping[str, Any], free: frozenset[str]) -> bool | None:
        relevant = [t for i, t in self.terms.items() if self.reads[i] & free]
        pinned = set().union(*(self.reads[i] for i in self.terms if self.reads[i] & free))
        pairs = [p for n in sorted(pinned - free) for p in self.enc.constants(n, raw[n])]
        formula = z3.And(*relevant, *(d for n in free for d in self.domain[n]))
        solver = z3.Then("simplify", "propagate-values", "solve-eqs", "smt").solver()
        solver.set("timeout", CHECK_TIMEOUT_MS)
        solver.add(z3.simplify(z3.substitute(formula, *pairs)))
        result = solver.check()
        return None if result == z3.unknown else result == z3.sat

    # --- the core ------------------------------------------------------------------------
    def core(self, raw: Mapping[str, Any], user: frozenset[str]) -> tuple[str, ...]:
        """Insertion-based minimal unsat subset of the user's pins.

        Pin a growing prefix of the candidates until the pins become unsatisfiable; the
        field that tipped it belongs to the core, and only the fields before it can
        complete the core. Each round costs one unsat proof (the expensive kind) and a
        few satisfiability checks that the witness search answers in microseconds;
        deletion-based minimisation would need one unsat proof per field *not* in the core.
        """
        c = compiled(self.pack)
        resolved, _ = c.resolve(raw)
        violated = [i for i in c.violations(resolved, raw) if i in self.errors]
        if not violated:
            return ()
        # Sizes first: when a layout holds several independent conflicts, the numeric one
        # (the hard one to see) is the one reported; the violation list names them all.
        candidates = sorted((n for n in SPECS if n in user), key=lambda n: not SPECS[n].size)
        core: list[str] = []
        while True:
            if self.satisfiable(raw, violated, user - set(core)) is False:
                break
            pinned = list(core)
            for index, name in enumerate(candidates):
                pinned.append(name)
                if self.satisfiable(raw, violated, user - set(pinned)) is False:
                    core.append(name)
                    candidates = candidates[:index]
                    break
            else:  # the solver gave up on every prefix: fall back to the whole set
                return tuple(n for n in SPECS if n in user)
        return tuple(n for n in SPECS if n in core)


def _const_names(term: Any) -> Iterator[str]:
    """Names of the uninterpreted constants of a Z3 term (each shared sub-term visited once).

    Why the C API: the explainer walks every error rule's term once per process, and
    `ExprRef.children()` builds a Python wrapper per argument; on 0.5.23's pack that walk
    was most of a cold `validate` of an invalid layout (2.4 CPU s, 0.8 s with raw handles).
    """
    ref = term.ctx.ref()
    seen: set[int] = set()
    stack = [term.as_ast()]
    while stack:
        ast = stack.pop()
        key = z3.Z3_get_ast_id(ref, ast)
        if key in seen:
            continue
        seen.add(key)
        if z3.Z3_get_ast_kind(ref, ast) != z3.Z3_APP_AST:
            continue
        app = z3.Z3_to_app(ref, ast)
        n = z3.Z3_get_app_num_args(ref, app)
        if n:
            stack.extend(z3.Z3_get_app_arg(ref, app, k) for k in range(n))
            continue
        decl = z3.Z3_get_app_decl(ref, app)
        if z3.Z3_get_decl_kind(ref, decl) == z3.Z3_OP_UNINTERPRETED:
            yield z3.Z3_get_symbol_string(ref, z3.Z3_get_decl_name(ref, decl))


def _int_candidates(spec: FieldSpec, raw: Mapping[str, Any]) -> Iterator[int | None]:
    """Likely values first: small numbers, then divisors and multiples of the pinned ints."""
    low = spec.minimum if spec.minimum is not None else 0
    seen: set[int | None] = set()
    if spec.optional:
        seen.add(None)
        yield None
    pinned = sorted({v for v in raw.values() if type(v) is int and 0 < v <= 1 << 20})
    pool = list(range(low, 17))
    for v in pinned:
        pool += [d for d in range(1, min(v, 4096) + 1) if v % d == 0]
        pool += [v * k for k in (2, 3, 4, 8)] + [v + 1, v - 1]
    for v in pool:
        if v >= low and v not in seen:
            seen.add(v)
            yield v


@cache
def explainer(pack: Pack) -> Explainer:
    return Explainer(pack)


@z3_locked
def conflict_core(
    config: Config, model: ModelSpec | None, raw: Mapping[str, Any], pack: Pack
) -> tuple[str, ...]:
    """The minimal set of user-set fields that cannot all hold together."""
    return explainer(pack).core(raw, config.user_set())
