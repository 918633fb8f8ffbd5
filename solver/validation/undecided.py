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
from types import MappingProxyType

from meshsat.solver.packs import get_pack
from meshsat.solver.validation.report import Report, Violation


def undecided(report: Report, unknown: Mapping[str, str]) -> Report:
    """`report` with each violation that reads a field of `unknown` (field -> the value as
    written) turned into a warning that it was not checked (module docstring); the report
    keeps `unknown`, and the ids of those rules as `undecided`."""
    if not unknown:
        return report
    report = replace(report, unknown=MappingProxyType(dict(unknown)))
    if not report.violations:
        return report
    pack = get_pack(report.sglang_version or None)
    reach = pack.reach
    kept: list[Violation] = []
    open_: list[Violation] = []
    for v in report.violations:
        # Only the pack's own rules: their `fields` are what the rule reads (a job's or a
        # manifest's findings name fields they compare, not read).
        if v.rule not in pack.by_id:
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
        undecided=tuple(v.rule for v in open_),
    )
