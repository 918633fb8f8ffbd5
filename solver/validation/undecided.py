"""Rules a launch's unknown values leave undecided.

A launch can give a layout field a value meshsat cannot know (`--tp $1`, `--tp
$TP_FROM_THE_CALLER`): the field is left unset, so validation sees SGLang's default. A
rule that then fails may fail only because of that default (`--tp $TP --nnodes 2` broke
TOPO-NNODES at tp 1), and saying "invalid" would be a guess presented as a verdict. So a
violation whose rule reads such a field, directly or through what SGLang's resolution
derives from it, is reported as a warning that says it was not checked, with the value
that left it open; the layout is invalid only by the rules its known values break.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import cache

from meshsat.solver.lang.expr import fields_of
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.packs import Pack, get_pack
from meshsat.solver.validation.report import Report, Violation


@cache
def _rule_ids(version: str) -> frozenset[str]:
    """The pack's own rules: a violation's `fields` are what its rule reads only for
    these (a job's or a manifest's findings name fields they compare, not read)."""
    return frozenset(rule.id for rule in get_pack(version or None).rules)


@cache
def _reach(version: str) -> Mapping[str, frozenset[str]]:
    """Per field, the raw fields its resolved value may depend on: a fixpoint over the
    pack's resolution steps that ignores their order and conditions (so it may name too
    many, which only leaves more undecided, never fewer)."""
    pack: Pack = get_pack(version or None)
    steps = [step for res in pack.resolutions for step in res.steps]
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
    return {name: frozenset(fields) for name, fields in reach.items()}


def undecided(report: Report, unknown: Mapping[str, str]) -> Report:
    """`report` with each violation that reads a field of `unknown` (field -> the value as
    written) turned into a warning that it was not checked (module docstring)."""
    if not unknown or not report.violations:
        return report
    reach = _reach(report.sglang_version)
    kept: list[Violation] = []
    open_: list[Violation] = []
    rules = _rule_ids(report.sglang_version)
    for v in report.violations:
        if v.rule not in rules:
            kept.append(v)
            continue
        read = {r for f in v.fields for r in reach.get(f, {f})}
        why = [f"{name} = {unknown[name]}" for name in sorted(read & set(unknown))]
        if not why:
            kept.append(v)
            continue
        message = (
            f"not checked: it reads {', '.join(why)}, unknown here; at SGLang's default "
            f"it fails: {v.message}"
        )
        open_.append(replace(v, message=message, severity="warning"))
    if not open_:
        return report
    return replace(
        report,
        valid=not kept,
        violations=tuple(kept),
        warnings=(*open_, *report.warnings),
        conflict=report.conflict if kept else None,
    )
