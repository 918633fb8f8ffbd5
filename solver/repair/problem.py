"""The hard part of `fix`: the catalogue in one Z3 solver, built once and kept.

Every error rule (through the exponent encoding of `meshsat.solver.backends.z3exp`) sits behind a
tracking literal, so that a conflict names rules and pins. Translating the catalogue costs more than
a fix's solving, so a `Problem` is cached per (sizes searched, --gpus, model facts,
hardware) and each call enters its solver with push/pop.

Which fields fix may change is derived from the same declarations: the fields an error rule
reads, directly or through a resolution step that sets one ("live"), less the model facts
and the hardware. A field no rule reads never changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import z3

from meshsat.solver.backends.z3exp import ExpEncoder, Universe
from meshsat.solver.lang.derived import gpus_used
from meshsat.solver.lang.expr import fields_of
from meshsat.solver.lang.fields import CONFIG_SPECS
from meshsat.solver.lang.rule import Assign, Resolution
from meshsat.solver.packs import Pack

#: Fix's own constraints, tracked like rules so that a conflict always names a rule.
GPUS_RULE = "FIX-GPUS"
DIVIDE_RULE = "FIX-GPUS-DIVIDE"
EXACT_RULE = "FIX-EXACT-DIV"
#: Hardware facts: what the machine is, not a choice fix may revise.
HARDWARE = ("gpus_per_node", "platform")
#: Facts of the launch fix keeps as given: the machine, and the LoRA adapters it serves
#: (--lora-paths, which no command meshsat writes spells) and the shapes LoRA is set up
#: for without them (--max-lora-rank, --lora-target-modules), and UNO's draft adapter
#: (--uno-lora-path).
FIXED_FACTS = (*HARDWARE, "lora_paths", "max_lora_rank", "lora_target_modules", "uno_lora_path")
#: Cached per-field terms per problem; the cache is emptied beyond this many.
_MEMO_LIMIT = 50_000


@cache
def live_fields(pack: Pack) -> frozenset[str]:
    """Fields an error rule reads, directly or through a resolution step that sets one."""
    live: set[str] = set()
    for r in pack.constraints:
        live.update(r.fields)
    grown = True
    while grown:
        grown = False
        for res in pack.resolutions:
            for step in res.steps:
                if not any(name in live for name, _ in step.sets):
                    continue
                reads = set(fields_of(step.when))
                for _, value in step.sets:
                    reads.update(fields_of(value))
                if not reads <= live:
                    live |= reads
                    grown = True
    return frozenset(live)


@cache
def resolved_beyond(pack: Pack, pinned: frozenset[str]) -> frozenset[str]:
    """Pinned fields no rule reads that a resolution step still sets (`--schedule-
    conservativeness` under DP attention), and the dead fields those steps read, to the
    fixpoint. A pin holds the value SGLang runs with (`meshsat.solver.repair.pins`), so
    these steps join the encoding; fix changes none of these fields, so the encoder takes
    them as constants at the input's values."""
    live = live_fields(pack)
    steps = [s for res in pack.resolutions for s in res.steps]
    beyond: set[str] = set()
    todo = [n for n in pinned if n not in live]
    while todo:
        name = todo.pop()
        for step in steps:
            if name not in (n for n, _ in step.sets):
                continue
            beyond.add(name)
            reads = {*fields_of(step.when), *(f for _, v in step.sets for f in fields_of(v))}
            todo += [r for r in reads if r not in live and r not in beyond]
            beyond |= reads - live
    return frozenset(beyond)


@cache
def live_resolutions(pack: Pack, beyond: frozenset[str] = frozenset()) -> tuple[Resolution, ...]:
    """The resolution steps with their assignments to dead fields dropped (but to the
    fields of `resolved_beyond`)."""
    live = live_fields(pack) | beyond
    return tuple(
        Resolution(
            res.id,
            res.source,
            res.because,
            tuple(
                Assign(s.when, tuple((n, v) for n, v in s.sets if n in live), s.quiet)
                for s in res.steps
            ),
        )
        for res in pack.resolutions
    )


@cache
def changeable(pack: Pack) -> tuple[str, ...]:
    """Config fields fix may change, in declaration order."""
    live = live_fields(pack)
    return tuple(n for n in CONFIG_SPECS if n in live and n not in FIXED_FACTS)


@dataclass(frozen=True)
class Key:
    """What a `Problem` depends on: the sizes searched, --gpus, and the fixed facts."""

    universe: Universe
    gpus: int | None
    fixed: tuple[tuple[str, Any], ...]
    pack: Pack
    #: The fields of `resolved_beyond` (also in `fixed`): empty unless such a field is pinned.
    beyond: frozenset[str] = frozenset()


class Problem:
    """The catalogue in one solver, every constraint behind a tracking literal."""

    def __init__(self, key: Key) -> None:
        self.key = key
        #: Calls share the solver (push/pop): one at a time.
        self.lock = threading.Lock()
        #: How many `fix` calls have asked it (under `lock`).
        self.calls = 0
        self.enc = ExpEncoder(key.universe, live_resolutions(key.pack, key.beyond), dict(key.fixed))
        self.solver = z3.SimpleSolver()  # the SMT core: it honours set_initial_value
        self.solver.add(*self.enc.domain)
        #: Tracking literal and formula of each constraint, by rule id.
        self.tracked: dict[str, Any] = {}
        self.formulas: dict[str, Any] = {}
        self._memo: dict[tuple[Any, ...], Any] = {}
        for rule in key.pack.constraints:
            self._track(rule.id, self.enc.rule_term(rule))
        self._track(DIVIDE_RULE, z3.And(self.enc.bounds))
        if key.gpus is not None:
            self._track(GPUS_RULE, self.enc.formula(gpus_used == key.gpus))
        self._track(EXACT_RULE, z3.And(self.enc.take_side()))
        #: One literal for all of them: an ordinary check assumes this one only (the
        #: Python API converts every assumption, which costs more than the check).
        self.all = z3.Bool("rules:all")
        self.solver.add(z3.Implies(self.all, z3.And(list(self.tracked.values()))))

    def _track(self, rule_id: str, formula: Any) -> None:
        lit = z3.Bool(f"rule:{rule_id}")
        self.tracked[rule_id] = lit
        self.formulas[rule_id] = formula
        self.solver.add(z3.Implies(lit, formula))

    def memo(self, key: tuple[Any, ...], build: Callable[..., Any], *args: Any) -> Any:
        """Per-field terms (keep a value, its rank, its distance), shared between calls."""
        if len(self._memo) > _MEMO_LIMIT:
            self._memo.clear()
        if key not in self._memo:
            self._memo[key] = build(*args)
        return self._memo[key]

    def is_value(self, name: str, value: Any) -> Any:
        """`name == value` over the input field (also: the soft constraint that keeps it)."""
        key = ("is", name, type(value).__name__, value)
        return self.memo(key, self.enc.value_term, name, value)


@lru_cache(maxsize=16)
def problem(key: Key) -> Problem:
    return Problem(key)


#: The least time (ms) the first check on a problem that has served before gets (a quarter
#: of what is left, at least this) before `fix` calls it stale. Why: the shared solver keeps
#: lemmas from earlier questions; after fifteen padded `fix` calls of
#: `fidelity.kept_flags`, `--tp 16 --ep 3 --moe-dp-size 2` ran out 120 s on the shared
#: solver and took 0.2 s on a fresh one.
STALE_CHECK_MS = 1500


def fresh_problem(key: Key) -> Problem:
    """A new `Problem` for `key`, in the cache from now on (the cache has no per-key
    eviction: it is emptied, the other problems are rebuilt when next asked)."""
    problem.cache_clear()
    return problem(key)
