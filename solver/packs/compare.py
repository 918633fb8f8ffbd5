"""What changed between two releases: the migration question users ask on every upgrade."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshsat.solver.backends.render import condition, text
from meshsat.solver.inputs.sglang_cmdline import DEPRECATED, release_dests, release_flags
from meshsat.solver.lang import expr as ex
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.lang.rule import Resolution, Rule
from meshsat.solver.packs.pack import ABSENT_PREFIX, Pack


@dataclass(frozen=True)
class PackChanges:
    """Rules, steps and fields that differ from `old` to `new` (ids only; `to_dict` has text)."""

    old: Pack
    new: Pack
    rules_added: tuple[str, ...]
    rules_removed: tuple[str, ...]
    rules_changed: tuple[str, ...]
    steps_added: tuple[str, ...]
    steps_removed: tuple[str, ...]
    steps_changed: tuple[str, ...]
    fields_added: tuple[str, ...]
    fields_removed: tuple[str, ...]
    #: (field, option): spellings of a field both releases have that only `new`'s parser
    #: takes, or only `old`'s (`--disable-piecewise-cuda-graph` left after 0.5.19).
    flags_added: tuple[tuple[str, str], ...] = ()
    flags_removed: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        old, new = self.old.by_id, self.new.by_id
        return {
            "from": self.old.version,
            "to": self.new.version,
            "rules": {
                "added": [_rule(new[i], self.new) for i in self.rules_added],
                "removed": [_rule(old[i], self.old) for i in self.rules_removed],
                "changed": [
                    {
                        "id": i,
                        "from": _rule(old[i], self.old),
                        "to": _rule(new[i], self.new),
                        "definitions": _definitions_changed(old[i], new[i]),
                    }
                    for i in self.rules_changed
                ],
            },
            "resolution_steps": {
                "added": list(self.steps_added),
                "removed": list(self.steps_removed),
                "changed": list(self.steps_changed),
            },
            "fields": {"added": list(self.fields_added), "removed": list(self.fields_removed)},
            "flags": {
                "added": [{"field": f, "flag": o} for f, o in self.flags_added],
                "removed": [{"field": f, "flag": o} for f, o in self.flags_removed],
            },
        }


def _rule(rule: Rule, pack: Pack) -> dict[str, Any]:
    return {
        "id": rule.id,
        "kind": pack.kind(rule.id),
        "condition": condition(rule),
        "message": rule.message,
        "source": rule.source,
    }


def _named(rule: Rule) -> dict[str, ex.Expr]:
    """The derived widths a rule names (`shared_tp`, `moe_tp`, ...), each with its body: a
    condition is rendered with their names, so a release that redefines one changes the
    rule without changing its text."""
    return {name: w.body for name, w in ex.named_in(rule.when, rule.holds).items()}


def _definitions_changed(old: Rule, new: Rule) -> list[dict[str, str]]:
    """The names both rules use whose definitions read differently, with each release's
    body (a body that reads the same changed through a name inside it, listed itself)."""
    was, now = _named(old), _named(new)
    bodies = ((name, text(was[name]), text(body)) for name, body in now.items() if name in was)
    return [{"name": n, "from": a, "to": b} for n, a, b in sorted(bodies) if a != b]


def _rule_key(rule: Rule, pack: Pack) -> tuple[object, ...]:
    return (rule.when.key(), rule.holds.key(), rule.message, rule.severity, pack.kind(rule.id))


def _step_key(res: Resolution) -> tuple[object, ...]:
    return tuple((text(s.when), tuple((n, text(v)) for n, v in s.sets), s.quiet) for s in res.steps)


def spellings(version: str) -> dict[str, tuple[str, ...]]:
    """Each field's option strings `version`'s parser takes: meshsat's spellings of it
    (with the `--no-X` twin of a BooleanOptionalAction and a deprecated flag meshsat reads
    as it), then the other options the parser stores into it (its argparse dest). Empty
    for a release with no recorded flag table."""
    table = release_flags(version)
    if table is None:
        return {}
    own = {
        name: [*s.flags, *(f for f, (t, _) in DEPRECATED.items() if t == name)]
        for name, s in SPECS.items()
    }
    claimed = {f for flags in own.values() for f in flags}
    out: dict[str, tuple[str, ...]] = {}
    for name, flags in own.items():
        listed = [f for f in flags if f in table]
        listed += [f"--no-{f[2:]}" for f in listed if f"--no-{f[2:]}" in table]
        listed += [
            option
            for option, dest in release_dests(version).items()
            if dest == name and option not in claimed and option not in listed
        ]
        if listed:
            out[name] = tuple(dict.fromkeys(listed))
    return out


def _flag_changes(
    old: Pack, new: Pack
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(added, removed) spellings of the fields both releases have."""
    was, now = spellings(old.version), spellings(new.version)
    if not was or not now:
        return (), ()
    both = [n for n in SPECS if n not in old.absent_fields and n not in new.absent_fields]
    added = tuple((n, f) for n in both for f in now.get(n, ()) if f not in was.get(n, ()))
    removed = tuple((n, f) for n in both for f in was.get(n, ()) if f not in now.get(n, ()))
    return added, removed


def compare(old: Pack, new: Pack) -> PackChanges:
    """The differences between two packs, in `new`'s order (removed ones in `old`'s)."""
    # A release's missing flags are fields, not rules: they are listed under fields.
    old_rules = {i: r for i, r in old.by_id.items() if not i.startswith(ABSENT_PREFIX)}
    new_rules = {i: r for i, r in new.by_id.items() if not i.startswith(ABSENT_PREFIX)}
    old_steps = {r.id: r for r in old.resolutions}
    new_steps = {r.id: r for r in new.resolutions}
    flags_added, flags_removed = _flag_changes(old, new)
    return PackChanges(
        old,
        new,
        rules_added=tuple(i for i in new_rules if i not in old_rules),
        rules_removed=tuple(i for i in old_rules if i not in new_rules),
        rules_changed=tuple(
            i
            for i, r in new_rules.items()
            if i in old_rules and _rule_key(r, new) != _rule_key(old_rules[i], old)
        ),
        steps_added=tuple(i for i in new_steps if i not in old_steps),
        steps_removed=tuple(i for i in old_steps if i not in new_steps),
        steps_changed=tuple(
            i
            for i, s in new_steps.items()
            if i in old_steps and _step_key(s) != _step_key(old_steps[i])
        ),
        fields_added=tuple(f for f in old.absent_fields if f not in new.absent_fields),
        fields_removed=tuple(f for f in new.absent_fields if f not in old.absent_fields),
        flags_added=flags_added,
        flags_removed=flags_removed,
    )
