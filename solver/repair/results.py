"""What `fix` returns: frozen values, separate from the search that finds them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from meshsat.solver.inputs.command import without_facts
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.repair.objective import ORDERS, TIER_WORDS, Objective
from meshsat.solver.validation.report import Note


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
    #: The error rules of the input this fix repairs (all of them: the fix is valid).
    repairs: tuple[str, ...] = ()
    #: Per tier, in the order minimised: proven minimal (empty for a valid input).
    proven: dict[str, bool] = field(default_factory=dict)
    #: Per tier (and "ties"), milliseconds of Z3 search.
    tier_ms: dict[str, float] = field(default_factory=dict, compare=False)
    #: The layout as SGLang runs it (validate's `resolved_env`), which the feature tier
    #: reads: `objective` told again from another input (a PD decode's) needs it.
    resolved: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def tiers(self) -> list[dict[str, Any]]:
        """Each tier, most important first: what it keeps, its cost, proven or not."""
        order = [t for t in ORDERS["changes"] if t in self.proven] or list(ORDERS["changes"])
        return [
            {
                "tier": t,
                "keeps": TIER_WORDS[t],
                "cost": getattr(self.objective, t),
                "kept": getattr(self.objective, t) == 0,
                "proven": self.proven.get(t, True),
            }
            for t in order
        ]

    def to_dict(self) -> dict[str, Any]:
        command, not_flags = without_facts(self.command_line)
        return {
            "config": self.config.model_dump(mode="json"),
            "changes": [{"field": c.field, "old": c.old, "new": c.new} for c in self.changes],
            "repairs": list(self.repairs),
            "notes": [n.to_dict() for n in self.notes],
            "optimal": self.optimal,
            "objective": self.objective.to_dict(),
            "tiers": self.tiers(),
            "gpus_used": self.gpus_used,
            # The command as a program runs it, and apart the facts no flag says.
            "command_line": command,
            "not_flags": list(not_flags),
        }


class RuleRef(NamedTuple):
    """A rule of a conflict: its id, its condition in words and SGLang's wording."""

    id: str
    condition: str
    message: str


@dataclass(frozen=True)
class Relaxation:
    """A tier the best fix gives up, and why: what no layout keeps under the rules."""

    tier: str
    #: One sentence: "no layout on 8 GPUs keeps ...; the GPU count changes".
    text: str
    #: A minimal set of rules (with the pins and features below) that rules the tier out.
    rules: tuple[RuleRef, ...]
    pins: tuple[str, ...]
    features: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "why": self.text,
            "rules": [r._asdict() for r in self.rules],
            "pins": list(self.pins),
            "features": list(self.features),
        }


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
    #: Tiers the best fix gives up, each with why.
    relaxed: tuple[Relaxation, ...] = ()
    #: Ids of meshsat's advice the input breaks: SGLang accepts it, but `fix` proposes only
    #: layouts that keep the advice, so such an input is repaired too.
    advice: tuple[str, ...] = ()
    #: Pinned fields SGLang's resolution rewrites in the input itself: a valid input that
    #: does not run with its pins is repaired too (`meshsat.solver.repair.pins`).
    unpinned: tuple[str, ...] = ()
    #: Ids of the rules the input breaks only at SGLang's default for a value the launch
    #: leaves unknown (`fix(..., unknown=...)`): not repaired, since they are not known to
    #: fail (`meshsat.solver.validation.undecided`).
    undecided: tuple[str, ...] = ()

    @property
    def best(self) -> FixResult:
        if not self.fixes:
            raise LookupError("no fix was found")
        return self.fixes[0]

    def distinct(self) -> FixReport:
        """The report with each command once: a later fix whose command an earlier one
        prints already goes. Two layouts of the search can be one command (0.5.23 writes
        `--dp-size 2 --enable-dp-attention` as `--attn-dp-size 2`: pplx under `--top 8`
        listed it twice), and an alternative that is no other command is none."""
        seen: set[str] = set()
        fixes = []
        for f in self.fixes:
            if f.command_line not in seen:
                seen.add(f.command_line)
                fixes.append(f)
        return self if len(fixes) == len(self.fixes) else replace(self, fixes=tuple(fixes))

    def also_repairing(self, rules: Sequence[str]) -> FixReport:
        """The report with each fix also repairing `rules`: what was done to the input
        before the search (a launch fitted to its pods or its device list) or after it,
        which the search never saw broken."""
        if not rules:
            return self
        fixes = tuple(
            replace(f, repairs=tuple(dict.fromkeys((*f.repairs, *rules)))) for f in self.fixes
        )
        return replace(self, fixes=fixes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid_input": self.valid_input,
            "violations": list(self.violations),
            "undecided": list(self.undecided),
            "advice": list(self.advice),
            "unpinned": list(self.unpinned),
            "objective": self.objective,
            "gpus": self.gpus,
            "gpus_before": self.gpus_before,
            "size_bound": self.size_bound,
            "fixes": [f.to_dict() for f in self.fixes],
            "conflict": self.conflict.to_dict() if self.conflict else None,
            "timed_out": self.timed_out,
            "relaxed": [r.to_dict() for r in self.relaxed],
        }


class FixSelfCheckError(RuntimeError):
    """fix produced a layout that validate rejects: a bug in the encoding, never the user's."""
