"""Rules a launch's unknown values leave undecided.

A launch can give a layout field a value meshsat cannot know (`--tp $1`, `--tp
$TP_FROM_THE_CALLER`): the field is left unset, so validation sees SGLang's default. A
rule that then fails may fail only because of that default (`--tp $TP --nnodes 2` broke
TOPO-NNODES at tp 1), and saying "invalid" would be a guess presented as a verdict. So a
violation whose rule reads such a field, directly or through what SGLang's resolution
derives from it, is reported as a warning that says it was not checked, with the value
that left it open; the layout is invalid only by the rules its known values break.

What resolution derives from an unknown value (`open_fields`) is found by running SGLang's
resolution steps in their order over what is known: a step whose condition the known values
decide false derives nothing (`--tp $TP --ep 5` with no all-to-all backend: the step that
sets ep to tp does not run, so MODEL-EXPERTS, 256 experts over ep 5, fails whatever tp
is); a step whose condition or value reads an open value opens what it sets. `Pack.reach`,
which ignores conditions and order, named too much: every rule reading ep was left open.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from meshsat.solver.backends.interp import Evaluator
from meshsat.solver.packs import Pack, get_pack
from meshsat.solver.validation.report import Report, Violation
from meshsat.solver.validation.validate import environment


class _Open(Exception):
    """A read of a value that may depend on the launch's unknown values."""


class _Known(Mapping[str, Any]):
    """An environment whose open names cannot be read (`_Open`)."""

    def __init__(self, env: Mapping[str, Any], open_: set[str]) -> None:
        self.env, self.open = env, open_

    def __getitem__(self, name: str) -> Any:
        if name in self.open:
            raise _Open(name)
        return self.env[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.env)

    def __len__(self) -> int:
        return len(self.env)


def open_fields(pack: Pack, raw: Mapping[str, Any], unknown: set[str]) -> frozenset[str]:
    """The fields whose resolved values may depend on the `unknown` raw fields (module
    docstring): resolution run step by step as SGLang runs it (each step's values read
    before any is set), a value that reads an open one being open, and every field a step
    sets open when whether it runs reads an open value."""
    return _opened(pack, raw, unknown)[0]


def _opened(
    pack: Pack, raw: Mapping[str, Any], unknown: set[str]
) -> tuple[frozenset[str], frozenset[str]]:
    """`open_fields`, and of them those a step may or may not set at all (whether it runs
    reads an open value): SGLang's change to such a field is itself unknown, not only its
    value."""
    resolved = dict(raw)
    opened = set(unknown)
    maybe: set[str] = set()
    raw_known = _Known(raw, set(unknown))
    for resolution in pack.resolutions:
        for step in resolution.steps:
            evaluator = Evaluator(_Known(resolved, opened), raw_known)
            try:
                runs: bool | None = bool(evaluator.visit(step.when))
            except _Open:
                runs = None
            if runs is False:
                continue
            values: dict[str, Any] = {}
            for name, value in step.sets if runs else ():
                try:
                    values[name] = evaluator.visit(value)
                except _Open:
                    continue
            for name, _ in step.sets:
                if runs is None:
                    maybe.add(name)
                if name in values:
                    resolved[name] = values[name]
                    opened.discard(name)
                    maybe.discard(name)
                else:
                    opened.add(name)
    return frozenset(opened | unknown), frozenset(maybe)


def undecided(report: Report, unknown: Mapping[str, str]) -> Report:
    """`report` with each violation that reads a field of `unknown` (field -> the value as
    written) turned into a warning that it was not checked (module docstring); the report
    keeps `unknown`, and the ids of those rules as `undecided`."""
    if not unknown:
        return report
    pack = get_pack(report.sglang_version or None)
    opened, maybe = _opened(pack, environment(report.config, report.model), set(unknown))
    reach = pack.reach

    def follows(names: set[str]) -> str:
        read = {r for f in names & opened for r in reach.get(f, {f})}
        return ", ".join(f"{name} = {unknown[name]}" for name in sorted(read & set(unknown)))

    notes = tuple(
        replace(n, follows=follows({n.field}) or None, conditional=n.field in maybe)
        if n.field in opened
        else n
        for n in report.notes
    )
    report = replace(
        report, unknown=MappingProxyType(dict(unknown)), open_fields=opened, notes=notes
    )
    if not report.violations:
        return report
    kept: list[Violation] = []
    open_: list[Violation] = []
    for v in report.violations:
        # Only the pack's own rules: their `fields` are what the rule reads (a job's or a
        # manifest's findings name fields they compare, not read).
        if v.rule not in pack.by_id:
            kept.append(v)
            continue
        why = follows(set(v.fields))
        if not why:
            kept.append(v)
            continue
        message = (
            f"not checked: it reads {why}, unknown here; at SGLang's default it fails: {v.message}"
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
