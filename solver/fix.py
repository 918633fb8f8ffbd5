"""`fix`: the nearest layout SGLang accepts, keeping what the user cares about.

A MaxSMT question over the single rule declaration: every error rule is hard (through the
exponent encoding of `solver.z3exp`), so are the pinned fields, the model facts, the hardware
(`gpus_per_node`, `platform`) and, with `gpus`, the GPU count; keeping each field's value is
soft. Fields no rule reads never change.

The objective, defined here once (the tests' brute-force oracle re-derives it from these
words, not from this code):
- changes: the weighted number of changed fields. A field weighs 2 if it is a size, else 1,
  doubled if the user set it: sizes weigh more than flags, and the user's own values more
  than defaults.
- distance: the total size change, sum over sizes of |mbits(new) - mbits(old)|, where
  mbits(x) = sum over the prime factors p of x (with multiplicity) of round(1000*log2 p):
  1000*|log2(new/old)| with log2 p rounded to milli-bits, so that it is an exact integer.
Objective "changes" minimises changes, then distance; "distance" the reverse. Remaining ties
go, field by field in declaration order, to keeping the input's value, else the nearest one
(`fix_search`), so the same input always gives the same answer.

The search space: with `gpus=N` every size is a divisor of N (every size of a layout on N
GPUs divides N). Without it, sizes range over the divisors of M, the least common multiple of
the sizes the user set and the GPUs the input uses: fix then never grows a size beyond the
user's scale, but the GPU count may change, and the result says so.
"""

from __future__ import annotations

import math
import re
import shlex
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from solver.catalogue import BY_ID
from solver.config import Config
from solver.errors import InputError
from solver.fields import CONFIG_SPECS, SPECS
from solver.inputs import as_config, as_model
from solver.inputs.convert import unknown_field
from solver.inputs.sglang_cmdline import ENV_FACTS
from solver.model_spec import MODEL_FACT_NAMES, ModelSpec
from solver.render import condition, fmt_value
from solver.report import Note
from solver.validate import environment, validate

OBJECTIVES = ("changes", "distance")
LAUNCHER = "python -m sglang.launch_server"
_ENV_VARS = {name: var for var, name in ENV_FACTS.items()}


# --- the objective ----------------------------------------------------------------------------
def change_weight(name: str, user_set: Iterable[str]) -> int:
    return (2 if SPECS[name].size else 1) * (2 if name in user_set else 1)


def prime_mbits(p: int) -> int:
    return round(1000 * math.log2(p))


def size_mbits(value: int) -> int:
    from solver.z3exp import factorize

    return sum(k * prime_mbits(p) for p, k in factorize(value).items())


@dataclass(frozen=True)
class Objective:
    """The objective values of a fix (see the module docstring)."""

    changes: int
    fields_changed: int
    distance_mbits: int

    @property
    def distance(self) -> float:
        """Total size change in bits (sum of |log2(new/old)|)."""
        return self.distance_mbits / 1000

    def key(self, objective: str) -> tuple[int, int]:
        """What `objective` minimises, in order."""
        if objective == "changes":
            return (self.changes, self.distance_mbits)
        return (self.distance_mbits, self.changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "changes": self.changes,
            "fields_changed": self.fields_changed,
            "distance": self.distance,
            "distance_mbits": self.distance_mbits,
        }


def objective_of(old: Config, new: Config) -> Objective:
    user = old.user_set()
    changes = weight = mbits = 0
    for name in CONFIG_SPECS:
        a, b = getattr(old, name), getattr(new, name)
        if _same(a, b):
            continue
        changes += 1
        weight += change_weight(name, user)
        if SPECS[name].size:
            mbits += abs(size_mbits(b) - size_mbits(a))
    return Objective(weight, changes, mbits)


# --- results ------------------------------------------------------------------------------------
class Change(NamedTuple):
    field: str
    old: Any
    new: Any


@dataclass(frozen=True)
class FixResult:
    """One valid layout near the input: the new value, what changed, and what SGLang will do."""

    config: Config
    changes: tuple[Change, ...]
    #: SGLang's silent changes to the fixed layout (validate's resolution notes).
    notes: tuple[Note, ...]
    #: Both objectives proven minimal; False: the best found before the timeout.
    optimal: bool
    objective: Objective
    #: The fixed layout as one SGLang launch command (tool-only facts in a trailing comment).
    command_line: str
    gpus_used: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.model_dump(mode="json"),
            "changes": [{"field": c.field, "old": c.old, "new": c.new} for c in self.changes],
            "notes": [n.to_dict() for n in self.notes],
            "optimal": self.optimal,
            "objective": self.objective.to_dict(),
            "gpus_used": self.gpus_used,
            "command_line": self.command_line,
        }


class RuleRef(NamedTuple):
    """A rule of a conflict: its id, its condition in words and SGLang's wording."""

    id: str
    condition: str
    message: str


@dataclass(frozen=True)
class Conflict:
    """Pins that cannot all hold: a minimal set of pins and rules (an unsat core)."""

    pins: tuple[tuple[str, Any], ...]
    rules: tuple[RuleRef, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pins": [{"field": f, "value": v} for f, v in self.pins],
            "rules": [r._asdict() for r in self.rules],
        }


@dataclass(frozen=True)
class FixReport:
    """What `fix` found. `fixes` is best first; empty on a conflict or a timeout."""

    config: Config
    model: ModelSpec | None
    objective: str
    gpus: int | None
    #: The input is valid (and uses `gpus` GPUs when given): it is returned unchanged.
    valid_input: bool
    #: Ids of the error rules the input breaks.
    violations: tuple[str, ...]
    gpus_before: int
    #: Sizes were chosen among the divisors of this number.
    size_bound: int
    fixes: tuple[FixResult, ...]
    conflict: Conflict | None = None
    #: The time ran out: no fix at all, or fewer than asked for.
    timed_out: bool = False

    @property
    def best(self) -> FixResult:
        if not self.fixes:
            raise LookupError("no fix was found")
        return self.fixes[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid_input": self.valid_input,
            "violations": list(self.violations),
            "objective": self.objective,
            "gpus": self.gpus,
            "gpus_before": self.gpus_before,
            "size_bound": self.size_bound,
            "fixes": [f.to_dict() for f in self.fixes],
            "conflict": self.conflict.to_dict() if self.conflict else None,
            "timed_out": self.timed_out,
        }


class FixSelfCheckError(RuntimeError):
    """fix produced a layout that validate rejects: a bug in the encoding, never the user's."""


# --- the command line -----------------------------------------------------------------------
def command_line(config: Config) -> str:
    """SGLang flags for every non-default field; environment variables lead, other
    tool-only facts follow in a comment because SGLang has no flag for them."""
    env: list[str] = []
    flags: list[str] = []
    facts: list[str] = []
    for name, spec in CONFIG_SPECS.items():
        value = getattr(config, name)
        if _same(value, spec.default):
            continue
        if name in _ENV_VARS:
            if value is not None:
                env.append(f"{_ENV_VARS[name]}={1 if value else 0}")
        elif spec.tool_only or not spec.flags or value is None or value is False:
            facts.append(f"{name}={fmt_value(value)}")
        elif value is True:
            flags.append(spec.flags[0])
        else:
            flags.append(f"{spec.flags[0]} {shlex.quote(str(value))}")
    line = " ".join([*env, LAUNCHER, *flags])
    if facts:
        line += "  # not SGLang flags: " + " ".join(facts)
    return line


# --- the API --------------------------------------------------------------------------------
def fix(
    config: Config | Mapping[str, Any],
    model: ModelSpec | Mapping[str, Any] | None = None,
    pins: Iterable[str] = (),
    gpus: int | None = None,
    objective: str = "changes",
    top: int = 1,
    timeout_s: float = 10,
) -> FixReport:
    """The `top` nearest valid layouts to `config`, best first, as a `FixReport`.

    `pins` name fields that keep the input's value; `gpus` makes the layout use exactly
    that many GPUs; `objective` is "changes" or "distance" (module docstring). A valid
    input (on `gpus` GPUs, when given) comes back unchanged as the only fix. With `top`
    above 1, each later fix drops or alters a change of every earlier one (a fix that only
    adds changes to an earlier one is no alternative), so fewer may come back.

    Pins that cannot all hold give `conflict`, a minimal set of pins and rules, and no fix.
    Every Z3 call is bounded by what is left of `timeout_s`: `optimal` says whether a fix
    is proven best, `timed_out` whether the time ran out (if it runs out while ties are
    broken, the objectives stay proven but which of the equals is returned may vary). Bad
    arguments raise `InputError`.
    Calls are serialised per cached problem, so threads may share `fix`.
    """
    pinned = _check_args(pins, gpus, objective, top, timeout_s)
    deadline_s = time.monotonic() + timeout_s
    cfg, spec = as_config(config), as_model(model)
    report = validate(cfg, spec, explain=False)
    before = int(report.derived["gpus_used"])
    violations = tuple(v.rule for v in report.violations)
    user = cfg.user_set()
    from solver.z3exp import Universe

    if gpus is not None:
        universe = Universe.dividing(gpus)
    else:
        given = [getattr(cfg, n) for n in user if SPECS[n].size and not SPECS[n].tool_only]
        universe = Universe.dividing(math.lcm(before, *given))
    base = FixReport(
        cfg, spec, objective, gpus, False, violations, before, universe.bound, fixes=()
    )
    if report.valid and gpus in (None, before):
        unchanged = FixResult(
            cfg, (), report.notes, True, Objective(0, 0, 0), command_line(cfg), before
        )
        return _replace(base, valid_input=True, fixes=(unchanged,))
    from solver import fix_problem as fp
    from solver.fix_search import Deadline, Search

    for name in pinned:
        value = getattr(cfg, name)
        if name in fp.changeable() and SPECS[name].size and not universe.divides_bound(value):
            rule = _rule_ref(fp.DIVIDE_RULE, gpus, universe.bound)
            return _replace(base, conflict=Conflict(((name, value),), (rule,)))
    env = environment(cfg, spec)
    fixed = tuple((n, env[n]) for n in (*fp.HARDWARE, *MODEL_FACT_NAMES))
    prob = fp.problem(fp.Key(universe, gpus, fixed))
    weights = {n: change_weight(n, user) for n in fp.changeable()}
    search = Search(prob, env, weights, Deadline(deadline_s - time.monotonic()))
    with prob.lock:
        outcome = search.run(objective, [n for n in pinned if n in fp.changeable()], top)
    if outcome.conflict is not None:
        pin_names, rule_ids = outcome.conflict
        conflict = Conflict(
            tuple((n, getattr(cfg, n)) for n in pin_names),
            tuple(_rule_ref(r, gpus, universe.bound) for r in rule_ids),
        )
        return _replace(base, conflict=conflict)
    fixes = tuple(_result(cfg, spec, f.values, f.optimal, gpus) for f in outcome.found)
    return _replace(base, fixes=fixes, timed_out=outcome.timed_out)


def _check_args(
    pins: Iterable[str], gpus: int | None, objective: str, top: int, timeout_s: float
) -> tuple[str, ...]:
    names = []
    for pin in pins:
        name = pin.strip().replace("-", "_")
        if name not in CONFIG_SPECS:
            raise unknown_field(name)
        names.append(name)
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1):
        raise InputError(f"--gpus must be a positive integer, got {gpus!r}")
    if objective not in OBJECTIVES:
        raise InputError(f"--objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InputError(f"--top must be a positive integer, got {top!r}")
    number = isinstance(timeout_s, int | float) and not isinstance(timeout_s, bool)
    if not number or not 0 < timeout_s < math.inf:
        raise InputError(f"--timeout must be a positive number of seconds, got {timeout_s!r}")
    return tuple(dict.fromkeys(names))


def _result(
    cfg: Config,
    spec: ModelSpec | None,
    values: Mapping[str, Any],
    optimal: bool,
    gpus: int | None,
) -> FixResult:
    changed = [n for n, v in values.items() if not _same(v, getattr(cfg, n))]
    keep = set(cfg.user_set()) | set(changed)
    data = {n: (values[n] if n in values else getattr(cfg, n)) for n in CONFIG_SPECS if n in keep}
    new = Config.model_validate(data)
    report = validate(new, spec, explain=False)
    used = int(report.derived["gpus_used"])
    if not report.valid or (gpus is not None and used != gpus):
        broken = ", ".join(v.rule for v in report.violations) or f"uses {used} GPUs"
        raise FixSelfCheckError(f"fix produced an invalid layout ({broken}): {data}")
    changes = tuple(
        Change(n, getattr(cfg, n), getattr(new, n)) for n in CONFIG_SPECS if n in changed
    )
    return FixResult(
        new, changes, report.notes, optimal, objective_of(cfg, new), command_line(new), used
    )


def _rule_ref(rule_id: str, gpus: int | None, bound: int) -> RuleRef:
    """A catalogue rule, or one of fix's own constraints, for a conflict."""
    if rule_id in BY_ID:
        rule = BY_ID[rule_id]
        # The wording's {field} placeholders have no single value in a conflict.
        return RuleRef(rule_id, condition(rule), re.sub(r"\{\w+\}", "…", rule.message))
    if rule_id == "FIX-GPUS":
        return RuleRef(rule_id, f"gpus_used == {gpus}", f"the layout must use {gpus} GPUs (--gpus)")
    if rule_id == "FIX-GPUS-DIVIDE":
        if gpus is not None:
            return RuleRef(
                rule_id, f"every size divides {gpus}", f"a size on {gpus} GPUs divides {gpus}"
            )
        return RuleRef(
            rule_id,
            f"every size divides {bound}",
            f"sizes are searched among the divisors of {bound}, the least common multiple of "
            "the sizes given and the GPUs used; pass --gpus N to search others",
        )
    return RuleRef(
        rule_id,
        "SGLang's integer divisions of sizes are exact",
        "fix searches layouts whose size quotients (attn_tp, tp / attn_dp) are whole",
    )


def _replace(report: FixReport, **changes: Any) -> FixReport:
    from dataclasses import replace

    return replace(report, **changes)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b
