"""The MaxSMT search behind `fix`: hard rules, soft "keep what the user had", in Z3.

Optimisation is a descent on the SMT solver rather than z3's `Optimize`: each step asks for
a strictly better objective value, so a search cut short by the timeout still holds the
best layout found, and the last, unsatisfiable step is the proof of optimality. Variables
start at the input's values (`set_initial_value`), so the first layout is already close,
and the count of changed fields is a pseudo-Boolean constraint, which Z3 bounds several
times faster than the same sum of If-terms.

The objective is in tiers (`meshsat.solver.repair.objective.ORDERS`), minimised one after the
other: each tier's optimum is proven (the last, unsatisfiable step) and then asserted as an
equality while the next one descends, which is a lexicographic optimum with a proof per
tier. When the first fix relaxes the GPU count or the feature set, `explain` asks for an
unsatisfiable core of "keep it" under the rules and pins, which names what conflicts.

After the objectives, the remaining ties go field by field in declaration order to keeping
the input's value, else the nearest one. The answer is then the least layout of a total
order, whatever Z3 met first and whatever earlier calls left in the cached solver.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from meshsat.solver.backends.z3exp import Num
from meshsat.solver.catalogue.literals import open_literals
from meshsat.solver.lang.derived import gpus_used
from meshsat.solver.lang.expr import And, Cmp, IsSet, fields_of
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.repair.features import FEATURES, binding, turned_on
from meshsat.solver.repair.objective import ORDERS, prime_mbits, size_mbits
from meshsat.solver.repair.pins import pin_holds
from meshsat.solver.repair.problem import EXACT_RULE, Problem, changeable


@dataclass
class Found:
    """One fix: the new values of the changeable fields; whether every tier is proven."""

    values: dict[str, Any]
    optimal: bool
    #: Per tier, in the order minimised: proven minimal, and the milliseconds it took.
    proven: dict[str, bool] = field(default_factory=dict)
    tier_ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Relaxed:
    """Why a tier could not be kept: a minimal conflict of rules, pins and features."""

    tier: str
    rules: tuple[str, ...]
    pins: tuple[str, ...]
    #: Names of the features that cannot all be kept (tier "features").
    features: tuple[str, ...] = ()


@dataclass
class Outcome:
    found: list[Found] = field(default_factory=list)
    #: (pins, rule ids) of a minimal conflict.
    conflict: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    timed_out: bool = False
    #: The first check ran out its slice (`Search.first_check_ms`) with time left: ask a
    #: fresh problem.
    stalled: bool = False
    #: Why the first fix relaxes a tier, per relaxed tier.
    relaxed: list[Relaxed] = field(default_factory=list)


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def ms(self) -> int:
        return max(0, int((self.end - time.monotonic()) * 1000))


class Goal:
    """An objective to minimise: its value in a model, and the constraints that bound it."""

    def value(self, model: Any) -> int:
        raise NotImplementedError

    def below(self, bound: int) -> Any:
        raise NotImplementedError

    def equal(self, bound: int) -> Any:
        raise NotImplementedError


class TermGoal(Goal):
    def __init__(self, term: Any) -> None:
        self.term = term

    def value(self, model: Any) -> int:
        return int(model.eval(self.term, model_completion=True).as_long())

    def below(self, bound: int) -> Any:
        return self.term < bound

    def equal(self, bound: int) -> Any:
        return self.term == bound


class PbGoal(TermGoal):
    """A weighted count of literals, bounded with Z3's pseudo-Boolean constraints.

    The argument arrays are built once: the Python API rebuilds them on every `PbLe`.
    """

    def __init__(self, pairs: list[tuple[Any, int]], total: Any) -> None:
        super().__init__(total)
        self.ctx = z3.main_ctx()
        self.n = len(pairs)
        self.args = (z3.Ast * self.n)(*(b.as_ast() for b, _ in pairs))
        self.coeffs = (ctypes.c_int * self.n)(*(w for _, w in pairs))
        self.pairs = pairs  # keeps the literals alive while the arrays point at them

    def below(self, bound: int) -> Any:
        ast = z3.Z3_mk_pble(self.ctx.ref(), self.n, self.args, self.coeffs, bound - 1)
        return z3.BoolRef(ast, self.ctx)

    def equal(self, bound: int) -> Any:
        ast = z3.Z3_mk_pbeq(self.ctx.ref(), self.n, self.args, self.coeffs, bound)
        return z3.BoolRef(ast, self.ctx)


class Search:
    """One `fix` question on a cached `Problem`: objectives, ties, top K, or a conflict."""

    def __init__(
        self,
        prob: Problem,
        old: Mapping[str, Any],
        user: frozenset[str],
        gpus_before: int | None,
        deadline: Deadline,
    ) -> None:
        """`old`: the input's values; `user`: the fields the user set; `gpus_before`: the
        input's GPU count to keep in tier 1 (None: --gpus already fixes it)."""
        self.p, self.enc, self.s = prob, prob.enc, prob.solver
        self.old, self.user, self.deadline = old, user, deadline
        self.gpus_before = gpus_before
        self.fields = changeable(prob.key.pack)
        self.keep = {n: prob.is_value(n, old[n]) for n in self.fields}
        self.was_on = turned_on(old)
        self.binds = binding(self.was_on)
        self.model: Any = None
        self.first_model: Any = None
        #: The most time (ms) the first feasibility check may take (None: all that is left).
        self.first_check_ms: int | None = None
        #: Constraints of this call only (memory shapes that do not load): asserted inside
        #: each run's scope, so the cached problem never keeps them.
        self.blocked: list[Any] = []
        #: Rules a conflict names rather than others that say the same, first most: the
        #: input's violations as `validate` orders them (`core`).
        self.prefer: tuple[str, ...] = ()

    # --- the question --------------------------------------------------------------------
    def run(self, objective: str, pins: Sequence[str], top: int, *, why: bool = True) -> Outcome:
        """The `top` best fixes; with `why`, also why the best gives up a tier (`explain`:
        an unsat core per tier, the costliest step). A caller that may discard the answer
        (`fix`'s memory loop, which asks again while a fix does not load) asks for the
        reason once, of the answer it keeps (`explained`)."""
        out = self._run(objective, pins, top)
        return self.explained(out, pins) if why else out

    def explained(self, out: Outcome, pins: Sequence[str]) -> Outcome:
        """`out` with why its best fix relaxes a tier, while time is left."""
        if out.found and self.deadline.ms() > 0:
            out.relaxed = self.explain(out.found[0], pins)
        return out

    def _run(self, objective: str, pins: Sequence[str], top: int) -> Outcome:
        out = Outcome()
        self.s.push()
        try:
            self.s.add(*self.blocked, *self.held())
            for name in self.fields:
                if SPECS[name].kind == "enum" and not SPECS[name].choices:
                    options = self.enum_values(name)
                    self.s.add(z3.Or([self.p.is_value(name, v) for v in options]))
            pin_lits = {name: z3.Bool(f"pin:{name}") for name in pins}
            for name, lit in pin_lits.items():
                self.s.add(z3.Implies(lit, self.pin_term(name)))
            # Per-call terms read raw fields only, which carry no quotient: nothing to
            # assert, but an exactness condition met here must hold like the others.
            self.s.add(*self.enc.take_side())
            self.start_at_input()
            result = self.check([self.p.all, *pin_lits.values()], self.first_check_ms)
            if result == z3.unsat:
                out.conflict = self.core(pin_lits)
                out.timed_out = out.conflict is None
                return out
            if result != z3.sat:
                out.timed_out = True
                out.stalled = self.first_check_ms is not None and self.deadline.ms() > 0
                return out
            self.model = self.s.model()
            self.s.add(self.p.all, *pin_lits.values())
            goals = self.tier_goals(objective)
            self.s.add(*self.enc.take_side())
            for k in range(top):
                if k:
                    result = self.check([])
                    if result != z3.sat:
                        out.timed_out = result != z3.unsat  # else: no more alternatives
                        break
                    self.model = self.s.model()
                found = self.best(goals)
                if not k:
                    self.first_model = self.model
                out.found.append(found)
                if self.deadline.ms() <= 0:
                    out.timed_out = k + 1 < top
                    break
                # A later fix must keep a field this one changes: an alternative changes
                # other fields, not the same ones to other values, nor more of them.
                changed = [n for n, v in found.values.items() if not _same(v, self.old[n])]
                if not changed:
                    break
                self.s.add(z3.Or([self.keep[n] for n in changed]))
                if not k:
                    # Nor the same change spelled as an alias SGLang rewrites into it: with
                    # the first fix's `--moe-a2a-backend deepep`, the next was
                    # `--moe-runner-backend megamoe`, kept as "another field" though SGLang
                    # runs it as `--moe-a2a-backend megamoe` (R-MEGAMOE-ALIAS). The first
                    # fix prefers the canonical spelling among equals (`break_ties`).
                    self.s.add(*(z3.Not(self.rewritten(n)) for n in self.fields))
        finally:
            self.s.pop()
        return out

    def best(self, goals: Sequence[tuple[str, Goal]]) -> Found:
        """The least layout: tiers in order, then ties field by field."""
        self.s.push()
        try:
            proven: dict[str, bool] = {}
            tier_ms: dict[str, float] = {}
            for tier, goal in goals:
                t0 = time.perf_counter()
                proven[tier] = self.minimize(goal)
                tier_ms[tier] = (time.perf_counter() - t0) * 1000
            if self.deadline.ms() > 0:
                t0 = time.perf_counter()
                self.break_ties()
                tier_ms["ties"] = (time.perf_counter() - t0) * 1000
            values = {n: self.enc.decode(self.model, n) for n in self.fields}
            return Found(values, all(proven.values()), proven, tier_ms)
        finally:
            self.s.pop()

    def check(self, assumptions: Sequence[Any], cap_ms: int | None = None) -> Any:
        ms = self.deadline.ms() if cap_ms is None else min(cap_ms, self.deadline.ms())
        if ms <= 0:
            return z3.unknown
        self.s.set("timeout", ms)
        return self.s.check(*assumptions)

    def minimize(self, goal: Goal) -> bool:
        """Lower `goal` step by step and hold it at its best value. True: proven minimal."""
        best = goal.value(self.model)
        proven = True
        while best > 0:
            lit = z3.FreshBool()
            self.s.add(z3.Implies(lit, goal.below(best)))
            result = self.check([lit])
            if result != z3.sat:
                proven = result == z3.unsat
                break
            self.model = self.s.model()
            best = goal.value(self.model)
        self.s.add(goal.equal(best))
        return proven

    def break_ties(self) -> None:
        """First the fewest changed fields that SGLang rewrites: a tie goes to the canonical
        spelling (`--moe-a2a-backend megamoe`) over an alias SGLang turns into it
        (`--moe-runner-backend megamoe`, R-MEGAMOE-ALIAS), which reads as a second feature
        and prints a silent change. Then lexicographic over fields: keep, else the nearest
        value. Tool-only facts (environment variables) first, so that a tie goes to a flag
        the command shows rather than a variable it hides; then declaration order."""
        if not self.minimize(self.count([self.rewritten(n) for n in self.fields])):
            return
        for name in sorted(self.fields, key=lambda n: not SPECS[n].tool_only):
            if z3.is_true(self.model.eval(self.keep[name], model_completion=True)):
                self.s.add(self.keep[name])
            elif not self.minimize(TermGoal(self.rank(name))):
                return

    def core(
        self,
        pin_lits: Mapping[str, Any],
        loose: Callable[[Sequence[str]], Sequence[str]] | None = None,
    ) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """A minimal set of pins and rules that cannot hold together (deletion-based).

        None when the time runs out before even one conflict is shown. fix's own exactness
        constraint (FIX-EXACT-DIV) restates catalogue rules (`z3exp`: each quotient sits
        next to a rule demanding the same exactness), so a core is first sought without
        it: it then names the rule `validate` reports (DPATTN-TP-DIV), whichever core the
        solver's state would have found first; FIX-EXACT-DIV is named only when no core
        exists without it. Rules that restate each other (DPATTN-TP-DIV and TOPO-ATTN-TP)
        leave the one tried last: the input's own violations (`prefer`) are tried last,
        the first of them at the very end, so the conflict names the error SGLang raises.
        `loose`: of the core's rules, those that do not bind (`explain`); each is swapped
        for the literals of `pin_lits` that say the same, where they do.
        """
        asked = list(pin_lits.values())
        rank = {r: i for i, r in enumerate(self.prefer)}
        tracked = sorted(self.p.tracked.items(), key=lambda kv: -rank.get(kv[0], len(rank)))
        catalogue = [lit for rule, lit in tracked if rule != EXACT_RULE]
        hard = [*catalogue, *asked]
        if self.check(hard) != z3.unsat:
            hard = [*(lit for _, lit in tracked), *asked]
            if self.check(hard) != z3.unsat:
                return None
        # The input's violations join the solver's core, to be tried last: whichever core
        # the solver's state met first, one that a violation can replace goes.
        preferred = [lit for rule, lit in tracked if rule in rank]
        core = self.minimal(self.unsat_core(hard, keep=preferred), preferred)
        if loose is not None:
            core = self.bound(core, loose, list(pin_lits.values()), preferred)
        pins = tuple(n for n, lit in pin_lits.items() if any(lit.eq(c) for c in core))
        rules = tuple(r for r, lit in self.p.tracked.items() if any(lit.eq(c) for c in core))
        return pins, rules

    def minimal(self, core: list[Any], preferred: Sequence[Any]) -> list[Any]:
        """`core` less every literal it stays unsatisfiable without, first to last."""
        for lit in list(core):
            if any(lit.eq(c) for c in core):
                trial = [a for a in core if not a.eq(lit)]
                if self.check(trial) == z3.unsat:
                    core = self.unsat_core(trial, keep=preferred)
        return core

    def bound(
        self,
        core: list[Any],
        loose: Callable[[Sequence[str]], Sequence[str]],
        spare: list[Any],
        preferred: Sequence[Any],
    ) -> list[Any]:
        """`core` with each rule that does not bind (`loose`) swapped for the `spare`
        literals (pins, features) that rule out the same, where they do: a minimal core
        is not unique, and one that holds DWDP-NO-TBO where the feature "DWDP off" (kept
        by the fix) says the same cites a rule that applies to no layout in question."""
        named = {r: lit for r, lit in self.p.tracked.items() if any(lit.eq(c) for c in core)}
        for rule in loose(list(named)):
            lit = named[rule]
            if not any(lit.eq(c) for c in core):
                continue
            rest = [a for a in core if not a.eq(lit)]
            trial = [*rest, *(x for x in spare if not any(x.eq(c) for c in rest))]
            if self.check(trial) == z3.unsat:
                core = self.minimal(self.unsat_core(trial, keep=preferred), preferred)
        return core

    def unsat_core(self, among: list[Any], keep: Sequence[Any] = ()) -> list[Any]:
        """The last check's core among `among`, and those of `keep` among them."""
        core = [*self.s.unsat_core(), *keep]
        return [a for a in among if any(a.eq(c) for c in core)]

    def start_at_input(self) -> None:
        """Let the first layout Z3 tries be the input, as far as it is representable."""
        for name in self.fields:
            sym, value = self.enc.raw[name], self.old[name]
            n = sym.val
            if isinstance(n, Num) and n.exps is not None:
                exps = self.enc.universe.exponents(value)
                for var, x in zip(n.exps, exps or (), strict=False):
                    self.s.set_initial_value(var, x)
            elif isinstance(n, Num):
                if sym.is_set is not None:
                    self.s.set_initial_value(sym.is_set, z3.BoolVal(value is not None))
                self.s.set_initial_value(n.val, 0 if value is None else value)
            elif SPECS[name].kind == "bool":
                self.s.set_initial_value(sym.val, z3.BoolVal(bool(value)))
            else:
                self.s.set_initial_value(sym.val, self.enc.codes.code(value))

    # --- why a tier is relaxed ---------------------------------------------------------
    def explain(self, found: Found, pins: Sequence[str]) -> list[Relaxed]:
        """For the GPU count and the feature set, when `found` gives them up: a minimal
        set of rules, pins (and features) that cannot hold with them."""
        out: list[Relaxed] = []
        keep_gpus = self.gpus_before is not None and not self._holds(self.same_gpus())
        toggled = [i for i in self.live_features() if not self._holds(self.feature_kept(i))]
        if not keep_gpus and not toggled:
            return out
        self.s.push()
        try:
            self.s.add(*self.held())
            extra: dict[str, Any] = {}
            pin_lits = {}
            for name in pins:
                lit = z3.Bool(f"why-pin:{name}")
                self.s.add(z3.Implies(lit, self.pin_term(name)))
                pin_lits[name] = lit
            self.s.add(*self.enc.take_side())
            if keep_gpus:
                extra["gpus"] = self.same_gpus()
            else:
                if self.gpus_before is not None:
                    self.s.add(self.same_gpus())
                for i in self.live_features():
                    extra[FEATURES[i].name] = self.feature_kept(i)
            lits = {}
            for key, term in extra.items():
                lits[key] = z3.Bool(f"why:{key}")
                self.s.add(z3.Implies(lits[key], term))
            named = {**{f"pin:{n}": x for n, x in pin_lits.items()}, **lits}
            if self.blocked:  # the layouts that do not load, as one rule of the explanation
                named["memory"] = z3.Bool("why:memory")
                self.s.add(z3.Implies(named["memory"], z3.And(self.blocked)))
            givens = [x for k, x in named.items() if k != "memory"]
            loose = None if keep_gpus else (lambda rules: self.unbound(rules, givens))
            core = self.core(named, loose)
            if core is None:
                return out
            pin_names, rule_ids = core
            if "memory" in pin_names:
                rule_ids = (*rule_ids, "MEM-FIT")
            kept = tuple(k for k in pin_names if k in lits)
            pin_names = tuple(k.removeprefix("pin:") for k in pin_names if k.startswith("pin:"))
            tier = "gpus" if keep_gpus else "features"
            out.append(Relaxed(tier, rule_ids, pin_names, () if keep_gpus else kept))
            return out
        finally:
            self.s.pop()

    def unbound(self, rules: Sequence[str], givens: Sequence[Any]) -> list[str]:
        """Those of `rules` whose condition no layout meets under `givens` (the pins and
        the kept states of the features, as literals): they bind only where a feature
        the fix keeps would be toggled, which that feature's literal says itself."""
        pack = self.p.key.pack
        out = []
        for rule in rules:
            if rule not in pack.by_id:  # fix's own constraints apply to every layout
                continue
            applies = z3.FreshBool()
            when = self.enc.formula(pack.by_id[rule].when)
            self.s.add(z3.Implies(applies, z3.And(when, *self.enc.take_side())))
            if self.check([applies, *givens]) == z3.unsat:
                out.append(rule)
        return out

    def _holds(self, term: Any) -> bool:
        """Does `term` hold in the first fix's model."""
        return bool(z3.is_true(self.first_model.eval(term, model_completion=True)))

    # --- objective terms, cached per (field, input value) on the problem ------------------
    def tier_goals(self, objective: str) -> list[tuple[str, Goal]]:
        """The tiers in the order `objective` minimises them."""
        user = [n for n in self.fields if n in self.user]
        other = [n for n in self.fields if n not in self.user]
        goals: dict[str, Goal] = {
            "gpus": self.gpus_goal(),
            "features": self.count(
                [
                    self.p.memo(
                        ("toggled", i, self.was_on[i], self.binds[i]),
                        z3.Not,
                        self.feature_kept(i),
                    )
                    for i in self.live_features()
                ]
            ),
            "user_fields": self.count([self.changed(n) for n in user]),
            "other_fields": self.count([self.changed(n) for n in other]),
            "size": self.distance_goal(),
        }
        return [(tier, goals[tier]) for tier in ORDERS[objective]]

    def count(self, lits: list[Any]) -> Goal:
        """How many of `lits` hold, bounded as a pseudo-Boolean constraint."""
        if not lits:
            return TermGoal(z3.IntVal(0))
        return PbGoal([(b, 1) for b in lits], _sum([z3.If(b, 1, 0) for b in lits]))

    def pin_term(self, name: str) -> Any:
        """The pin of `name`: the input's value, typed and as SGLang runs it
        (`meshsat.solver.repair.pins`)."""
        old = self.old[name]
        key = ("pin", name, type(old).__name__, old)
        spelling = "attn_dp_size" not in self.p.key.pack.absent_fields
        return self.p.memo(key, self.enc.formula, pin_holds(name, old, spelling))

    def changed(self, name: str) -> Any:
        old = self.old[name]
        return self.p.memo(("changed", name, type(old).__name__, old), z3.Not, self.keep[name])

    def rewritten(self, name: str) -> Any:
        """The fix changes `name` to a value SGLang runs as another. Unset is no value:
        SGLang picking its own for a flag the fix drops is no rewrite of one it types
        (`--dcp-comm-backend a2a` without decode CP was fixed to `ag_rs`, a flag that still
        does nothing, because unset resolves to ag_rs)."""
        old = self.old[name]
        spec = SPECS[name]
        ref = spec.ref
        other = Cmp("!=", ref, ref.as_raw)
        typed = And(IsSet(ref.as_raw), other) if spec.optional else other
        key = ("rewritten", name, type(old).__name__, old)
        return self.p.memo(
            key,
            lambda: z3.And(self.changed(name), self.enc.formula(typed)),
        )

    def same_gpus(self) -> Any:
        assert self.gpus_before is not None
        key = ("gpus", self.gpus_before)
        return self.p.memo(key, self.enc.formula, gpus_used == self.gpus_before)

    def gpus_goal(self) -> Goal:
        """0 when the layout uses the input's GPU count; constant 0 under --gpus."""
        if self.gpus_before is None:
            return TermGoal(z3.IntVal(0))
        return TermGoal(z3.If(self.same_gpus(), 0, 1))

    def held(self) -> list[Any]:
        """The hard features the input has off, kept off (`Feature.hard`)."""
        return [
            self.feature_kept(i)
            for i in self.live_features()
            if FEATURES[i].hard and not self.was_on[i]
        ]

    def live_features(self) -> list[int]:
        """Features whose fields fix may change (the others cannot toggle)."""
        return _live_features(frozenset(self.fields))

    def feature_kept(self, i: int) -> Any:
        """The feature keeps the input's state: off stays off, on stays on and works."""
        f, on = FEATURES[i], self.was_on[i]
        if not self.binds[i]:
            return z3.BoolVal(True)
        return self.p.memo(("feature", i, on), self.enc.formula, f.works if on else ~f.on)

    def distance_goal(self) -> Goal:
        """Sum over sizes of |mbits(new) - mbits(old)|, linear in the exponents."""
        terms = []
        for name in self.fields:
            if self.enc.exponents(name) is not None:
                key = ("distance", name, self.old[name])
                terms.append(self.p.memo(key, self.distance_term, name))
        return TermGoal(_sum(terms))

    def distance_term(self, name: str) -> Any:
        exps = self.enc.exponents(name) or ()
        weights = [prime_mbits(p) for p in self.enc.universe.primes]
        bits = _sum([c * e for c, e in zip(weights, exps, strict=True)])
        before = size_mbits(self.old[name])
        return z3.If(bits >= before, bits - before, before - bits)

    def rank(self, name: str) -> Any:
        old = self.old[name]
        key = ("rank", name, type(old).__name__, old)
        return self.p.memo(key, self.rank_term, name)

    def rank_term(self, name: str) -> Any:
        """0 for the input's value, then the other values, nearest first (injective)."""
        spec, old, sym = SPECS[name], self.old[name], self.enc.raw[name]
        if spec.kind == "bool":
            return z3.If(self.keep[name], 0, 1)
        n = sym.val
        if isinstance(n, Num) and n.exps is not None:
            order = sorted(
                self.enc.universe.divisors(),
                key=lambda d: (d != old, abs(size_mbits(d) - size_mbits(old)), d),
            )
            return self._chain(name, order, len(order))
        if isinstance(n, Num):
            if sym.is_set is None:
                return _zigzag(n.val - old)
            if old is None and name in _TYPED_NEAR:
                # Nearest SGLang's own default, in round steps: the chunk a fix types for
                # A2A-PPLX-DISPATCH under DP attention 2 is 256 (128 a group), not 1 (0 a
                # group: chunked prefill off) nor 257.
                target, step = _TYPED_NEAR[name]
                near = 1 + _zigzag(target - n.val)
                return z3.If(sym.is_set, z3.If(n.val % step == 0, near, _ROUND_FIRST + near), 0)
            if old is None:
                return z3.If(sym.is_set, 1 + _zigzag(n.val), 0)
            return z3.If(sym.is_set, 2 * _zigzag(n.val - old), 1)
        others = [v for v in self.enum_values(name) if not _same(v, old)]
        return self._chain(name, [old, *others], len(others) + 1)

    def _chain(self, name: str, values: list[Any], otherwise: int) -> Any:
        term: Any = z3.IntVal(otherwise)
        for i, v in reversed(list(enumerate(values))):
            term = z3.If(self.p.is_value(name, v), i, term)
        return term

    def enum_values(self, name: str) -> list[Any]:
        """The values fix may give an enum field (for open ones, see `open_literals`)."""
        spec = SPECS[name]
        if spec.choices:
            return list(spec.choices)
        values = dict.fromkeys(open_literals()[name])
        values.setdefault(spec.default, None)
        if spec.optional:
            values.setdefault(None, None)
        values.setdefault(self.old[name], None)
        return list(values)


_LIVE: dict[frozenset[str], list[int]] = {}

#: Integer fields a fix may set where the input left them unset, with the value to come
#: nearest (SGLang's own default on an 80 GB GPU) and the step of the values preferred.
_TYPED_NEAR = {"chunked_prefill_size": (8192, 64)}
#: Ranks a value off the step behind every value on it (within 2**40 of the target).
_ROUND_FIRST = 1 << 42


def _live_features(fields: frozenset[str]) -> list[int]:
    if fields not in _LIVE:
        _LIVE[fields] = [
            i for i, f in enumerate(FEATURES) if {*fields_of(f.on), *fields_of(f.works)} <= fields
        ]
    return _LIVE[fields]


def _sum(terms: list[Any]) -> Any:
    """Sum of integer terms in one API call (z3.Sum re-checks every argument's sort)."""
    if len(terms) < 2:
        return terms[0] if terms else z3.IntVal(0)
    ctx = terms[0].ctx
    args = (z3.Ast * len(terms))(*(t.as_ast() for t in terms))
    return z3.ArithRef(z3.Z3_mk_add(ctx.ref(), len(terms), args), ctx)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _zigzag(k: Any) -> Any:
    """0, -1, 1, -2, 2, ... to 0, 1, 2, 3, 4, ...: an injective rank of an offset."""
    return z3.If(k >= 0, 2 * k, -2 * k - 1)
