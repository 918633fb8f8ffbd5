"""A rule pack: one SGLang release's rules and silent steps, as the base catalogue plus a diff.

SGLang's parallel rules change every few weeks, and users run whatever release they installed.
A pack is what every feature (validate, explain, fix, enumerate, groups, `rules`) runs on, so
the answer is the installed release's, not the seed snapshot's. A release is written as a
`PackDiff` against the pack it descends from (rules added, removed or replaced by id; steps
likewise; the order of SGLang's handlers), never as a copy: the catalogue stays declared once.
See docs/architecture.md ("version packs").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Literal, TypeVar

from meshsat.solver.lang.expr import TRUE, Expr, Named, fields_of, is_set, named_in, one_of
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.lang.rule import Resolution, Rule

Stage = Literal["resolution", "launch"]
_T = TypeVar("_T", Rule, Resolution)


@dataclass(frozen=True, eq=False)
class Pack:
    """The rules of one SGLang release. Identity is the version: packs are singletons."""

    version: str
    released: str
    summary: str
    rules: tuple[Rule, ...]
    resolutions: tuple[Resolution, ...]
    #: Rules this release checks only when the server launches (topology, model facts), not
    #: in `ServerArgs` resolution: still errors, since the launch fails.
    launch_only: frozenset[str] = frozenset()
    #: meshsat's own advice: warnings that no SGLang release raises.
    advice: frozenset[str] = frozenset()
    #: Config fields this release has no flag for; setting one is a violation.
    absent_fields: tuple[str, ...] = ()
    #: (field, the values its flag accepts) where the release accepts fewer values than
    #: meshsat's field (the union of every release's choices).
    choices: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        ids = [r.id for r in self.rules]
        if len(set(ids)) != len(ids):  # pragma: no cover - guards the declarations
            raise RuntimeError(f"duplicate rule id in pack {self.version}")
        unknown = (self.launch_only | self.advice) - set(ids)
        if unknown:  # pragma: no cover - guards the declarations
            raise RuntimeError(f"pack {self.version} names unknown rules {sorted(unknown)}")
        # Advice never rejects a layout SGLang accepts: in this release it is a warning.
        advised = tuple(
            replace(r, severity="warning") if r.id in self.advice else r for r in self.rules
        )
        object.__setattr__(self, "rules", advised)

    @cached_property
    def named_widths(self) -> Mapping[str, Named]:
        """The derived widths this release's rules name (`shared_tp`, `mlp_tp`, ...), by
        name, as its rules define them: a release may redefine one (0.5.23's `shared_tp`),
        and `--where` and the memory model read the release's, not a copy."""
        return MappingProxyType(named_in(*(e for r in self.rules for e in (r.when, r.holds))))

    @cached_property
    def errors(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.severity == "error")

    @cached_property
    def warnings(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.severity == "warning")

    @cached_property
    def constraints(self) -> tuple[Rule, ...]:
        """What `enumerate` and `fix` keep: SGLang's errors and meshsat's advice.

        A layout that only breaks advice is valid (SGLang accepts it), but meshsat never
        proposes one: the advice marks layouts that start and then misbehave."""
        return tuple(r for r in self.rules if r.severity == "error" or r.id in self.advice)

    @cached_property
    def by_id(self) -> dict[str, Rule]:
        return {r.id: r for r in self.rules}

    @cached_property
    def reach(self) -> Mapping[str, frozenset[str]]:
        """Per field, the raw fields its resolved value may depend on: a fixpoint over the
        resolution steps that ignores their order and conditions, so it may name too many
        (the safe side for what reads it: pruning a search, leaving a rule undecided)."""
        steps = [step for res in self.resolutions for step in res.steps]
        reach = {name: {name} for name in SPECS}
        changed = True
        while changed:
            changed = False
            for step in steps:
                exprs = (step.when, *(value for _, value in step.sets))
                source = {r for e in exprs for f in fields_of(e) for r in reach.get(f, {f})}
                for name, _ in step.sets:
                    if not source <= reach[name]:
                        reach[name] |= source
                        changed = True
        return MappingProxyType({name: frozenset(fields) for name, fields in reach.items()})

    def stage(self, rule_id: str) -> Stage:
        return "launch" if rule_id in self.launch_only else "resolution"

    def kind(self, rule_id: str) -> str:
        """How `meshsat rules` labels a rule in this release."""
        if rule_id in self.advice:
            return "advice (meshsat's, never an error)"
        rule = self.by_id[rule_id]
        if rule.severity == "warning":
            return "warning"
        return "error at launch" if rule_id in self.launch_only else "error"


@dataclass(frozen=True)
class PackDiff:
    """How one release differs from the pack it descends from."""

    version: str
    released: str
    summary: str
    add_rules: tuple[Rule, ...] = ()
    #: (id, rule): the rule goes right after rule `id`, where SGLang checks it inside one
    #: handler (the first violation is the assert SGLang stops at).
    add_rules_after: tuple[tuple[str, Rule], ...] = ()
    #: (id, rule): the rule goes right before rule `id`.
    add_rules_before: tuple[tuple[str, Rule], ...] = ()
    replace_rules: tuple[Rule, ...] = ()
    remove_rules: tuple[str, ...] = ()
    add_resolutions: tuple[Resolution, ...] = ()  # run before the base's steps
    #: (id, step): the step runs right before step `id` (a handler between two of the base's).
    add_resolutions_before: tuple[tuple[str, Resolution], ...] = ()
    replace_resolutions: tuple[Resolution, ...] = ()
    remove_resolutions: tuple[str, ...] = ()
    #: SGLang's handler order for this release, by rule `source`; unnamed sources keep
    #: their place after the named ones.
    handler_order: tuple[str, ...] | None = None
    launch_only: frozenset[str] | None = None
    advice: frozenset[str] | None = None
    absent_fields: tuple[str, ...] | None = None
    present_fields: tuple[str, ...] = field(default=())
    choices: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    #: Handlers the release renamed, (old, new): rules and steps keep their place but name
    #: the function that raises them now, so a first violation names SGLang's step.
    rename_handlers: tuple[tuple[str, str], ...] = ()


def apply(base: Pack, diff: PackDiff) -> Pack:
    """The pack `diff` describes, built on `base`."""
    rules = _replace(base.rules, diff.replace_rules, diff.remove_rules, "rule")
    steps = _replace(base.resolutions, diff.replace_resolutions, diff.remove_resolutions, "step")
    if diff.rename_handlers:
        renamed = dict(diff.rename_handlers)
        rules = tuple(
            replace(r, source=renamed[r.source]) if r.source in renamed else r for r in rules
        )
        steps = tuple(
            replace(r, source=renamed[r.source]) if r.source in renamed else r for r in steps
        )
    for anchor, res in diff.add_resolutions_before:
        at = next((i for i, r in enumerate(steps) if r.id == anchor), None)
        if at is None:  # pragma: no cover - guards the declarations
            raise RuntimeError(f"pack diff places {res.id} before unknown step {anchor}")
        steps = (*steps[:at], res, *steps[at:])
    placed = [(at, 1, rule) for at, rule in diff.add_rules_after]
    placed += [(at, 0, rule) for at, rule in diff.add_rules_before]
    for anchor, after, rule in placed:  # in order: a rule may follow an added one
        at = next((i for i, r in enumerate(rules) if r.id == anchor), None)
        if at is None:  # pragma: no cover - guards the declarations
            raise RuntimeError(f"pack diff places {rule.id} next to unknown rule {anchor}")
        rules = (*rules[: at + after], rule, *rules[at + after :])
    rules = (*rules, *diff.add_rules)
    if diff.handler_order is not None:
        rules = order_by_handler(rules, diff.handler_order)
    absent = base.absent_fields if diff.absent_fields is None else diff.absent_fields
    absent = tuple(f for f in absent if f not in diff.present_fields)
    choices = base.choices if diff.choices is None else diff.choices
    ids = {r.id for r in rules}
    advice = (base.advice if diff.advice is None else diff.advice) & ids
    if (base.advice & ids) - advice:  # pragma: no cover - guards the declarations
        raise RuntimeError(
            f"pack {diff.version} drops advice {sorted((base.advice & ids) - advice)}: "
            "replace the rule to give it its severity again"
        )
    own = tuple(r for r in rules if not r.id.startswith((ABSENT_PREFIX, CHOICE_PREFIX)))
    return Pack(
        version=diff.version,
        released=diff.released,
        summary=diff.summary,
        rules=_with_absent_field_rules(own, absent, choices),
        resolutions=(*diff.add_resolutions, *steps),
        launch_only=(base.launch_only if diff.launch_only is None else diff.launch_only) & ids,
        advice=advice,
        absent_fields=absent,
        choices=choices,
    )


def base_pack(
    version: str,
    released: str,
    summary: str,
    rules: tuple[Rule, ...],
    resolutions: tuple[Resolution, ...],
    *,
    handler_order: tuple[str, ...],
    advice: frozenset[str],
    absent_fields: tuple[str, ...],
    launch_only: frozenset[str] = frozenset(),
    choices: tuple[tuple[str, tuple[str, ...]], ...] = (),
) -> Pack:
    """The pack every other descends from: the catalogue, ordered like SGLang's handlers."""
    return Pack(
        version,
        released,
        summary,
        _with_absent_field_rules(order_by_handler(rules, handler_order), absent_fields, choices),
        resolutions,
        launch_only=launch_only,
        advice=advice,
        absent_fields=absent_fields,
        choices=choices,
    )


def order_by_handler(rules: Iterable[Rule], handlers: tuple[str, ...]) -> tuple[Rule, ...]:
    """Stable sort by the handler that raises each rule: SGLang stops at the first failing
    handler, so this order makes a report's first violation SGLang's own error."""
    rank = {h: i for i, h in enumerate(handlers)}
    return tuple(sorted(rules, key=lambda r: rank.get(r.source, len(rank))))


def _one_of_or_unset(name: str, allowed: tuple[str, ...]) -> Expr:
    """The raw value is one of `allowed`, or unset where the field is optional."""
    raw = SPECS[name].ref.as_raw
    if SPECS[name].optional:
        return ~is_set(raw) | one_of(raw, *allowed)
    return one_of(raw, *allowed)


ABSENT_PREFIX = "FLAG-ABSENT-"
CHOICE_PREFIX = "FLAG-CHOICE-"


def _with_absent_field_rules(
    rules: tuple[Rule, ...],
    absent: tuple[str, ...],
    choices: tuple[tuple[str, tuple[str, ...]], ...] = (),
) -> tuple[Rule, ...]:
    """A field the release has no flag for must keep its default, and a flag with fewer
    choices than meshsat's field must take one of them: SGLang's own parser would refuse
    the command, so these rules lead the list."""
    narrowed = tuple(
        Rule(
            CHOICE_PREFIX + name.upper().replace("_", "-"),
            TRUE,
            _one_of_or_unset(name, allowed),
            f"argument {SPECS[name].flags[0]}: invalid choice: '{{{name}}}' (this SGLang "
            f"release accepts {', '.join(allowed)})",
            "argparse",
            hint="choose one of those, or the SGLang release that has the value",
        )
        for name, allowed in choices
    )
    own = tuple(
        Rule(
            ABSENT_PREFIX + name.upper().replace("_", "-"),
            TRUE,
            SPECS[name].ref.as_raw == SPECS[name].default,
            f"unrecognized arguments: {SPECS[name].flags[0]} (this SGLang release has no such "
            "flag)",
            "argparse",
            hint=f"remove {SPECS[name].flags[0]}, or choose the SGLang release that has it",
        )
        for name in absent
    )
    return (*own, *narrowed, *rules)


def _replace(
    items: tuple[_T, ...], replace: tuple[_T, ...], remove: tuple[str, ...], what: str
) -> tuple[_T, ...]:
    by_id = {x.id: x for x in replace}
    known = {x.id for x in items}
    missing = (set(by_id) | set(remove)) - known
    if missing:  # pragma: no cover - guards the declarations
        raise RuntimeError(f"pack diff names unknown {what}s {sorted(missing)}")
    return tuple(by_id.get(x.id, x) for x in items if x.id not in remove)
