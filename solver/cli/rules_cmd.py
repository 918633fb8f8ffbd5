"""`meshsat rules` and `meshsat fields`: the catalogue and the vocabulary, from the
declarations themselves."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from meshsat.solver.backends.render import condition, fmt_value, text
from meshsat.solver.cli.formats import FormatOpt, OutputFormat, chosen, emit
from meshsat.solver.cli.layout_options import JsonOpt
from meshsat.solver.cli.output import out
from meshsat.solver.cli.version_option import SglangVersionOpt, chosen_pack
from meshsat.solver.inputs.convert import accepted
from meshsat.solver.inputs.sglang_cmdline import (
    DEPRECATED,
    missing_from_release,
    release_choices,
    release_defaults,
    release_flags,
)
from meshsat.solver.lang.fields import SPECS, FieldSpec


def rules_cmd(
    as_json: JsonOpt = False, fmt: FormatOpt = None, sglang_version: SglangVersionOpt = None
) -> None:
    """List one SGLang release's rules in the order its handlers run: id, condition in
    words, SGLang's message, source handler, and whether it is an error, an error only at
    launch, a warning, or meshsat's own advice.

    Resolution steps (what SGLang changes silently, in order) follow the rules, then the
    rules between the servers of a PD deployment (docs/disaggregation.md) that the release
    has.
    """
    pack = chosen_pack(sglang_version)
    rules: list[dict[str, Any]] = [
        {
            "id": r.id,
            "severity": r.severity,
            "kind": pack.kind(r.id),
            "stage": pack.stage(r.id),
            "condition": condition(r),
            "message": r.message,
            "source": r.source,
            "fields": list(r.fields),
            "hint": r.hint,
        }
        for r in pack.rules
    ]
    resolutions: list[dict[str, Any]] = [
        {
            "id": res.id,
            "source": res.source,
            "because": res.because,
            "steps": [
                {"when": text(s.when), "sets": {name: text(v) for name, v in s.sets}}
                for s in res.steps
            ],
        }
        for res in pack.resolutions
    ]
    deployment = _deployment_rules(pack.version)
    chosen_fmt = chosen(fmt, as_json)
    if chosen_fmt is not OutputFormat.table:
        data = {
            "sglang_version": pack.version,
            "rules": rules,
            "resolutions": resolutions,
            "deployment_rules": deployment,
        }
        emit(chosen_fmt, data, rules, listing=True)
        return
    title = f"{len(rules)} rules of SGLang {pack.version}, in handler order"
    table = Table(title=title, title_justify="left", show_lines=True)
    for col in ("id", "kind", "condition", "SGLang says", "source"):
        table.add_column(col, no_wrap=col == "id")
    for r in rules:
        cells = (r["id"], r["kind"], r["condition"], r["message"], r["source"])
        table.add_row(*(escape(c) for c in cells))
    out.print(table)
    res_table = Table(title="silent resolution, in order", title_justify="left", show_lines=True)
    for col in ("id", "when", "sets", "source"):
        res_table.add_column(col, no_wrap=col == "id")
    for res in resolutions:
        for s in res["steps"]:
            sets = ", ".join(f"{k} = {v}" for k, v in s["sets"].items())
            res_table.add_row(*(escape(c) for c in (res["id"], s["when"], sets, res["source"])))
    out.print(res_table)
    pd_title = "between the servers of a PD deployment"
    pd_table = Table(title=pd_title, title_justify="left", show_lines=True)
    for col in ("id", "severity", "between", "says", "source"):
        pd_table.add_column(col, no_wrap=col == "id")
    for d in deployment:
        cells = (d["id"], d["severity"], d["between"], d["message"], d["source"])
        pd_table.add_row(*(escape(c) for c in cells))
    out.print(pd_table)


def _deployment_rules(release: str) -> list[dict[str, Any]]:
    """The PD deployment rules `release` has (`catalogue/pd_pairs.py`), with their severity
    there: pair rules between every prefill and decode server, then the deployment's."""
    from meshsat.solver.catalogue.pd_pairs import (
        DEPLOYMENT_RULES,
        PAIR_RULES,
        DeploymentRule,
        PairRule,
    )

    pairs: list[tuple[PairRule | DeploymentRule, str]] = [(r, "prefill/decode") for r in PAIR_RULES]
    whole: list[tuple[PairRule | DeploymentRule, str]] = [
        (r, "deployment") for r in DEPLOYMENT_RULES
    ]
    return [
        {
            "id": r.id,
            "severity": r.severity(release),
            "between": between,
            "message": r.message,
            "source": r.source,
            "hint": r.hint,
        }
        for r, between in (*pairs, *whole)
        if r.severity(release) is not None
    ]


def _accepts(spec: FieldSpec, version: str) -> str:
    """What `version`'s parser takes for the field: its own choices where it lists them
    (argparse refuses the rest), else what meshsat's field takes; unset is SGLang's None
    (the flag left out), not the string `none` some back-end flags take."""
    choices = release_choices(version)
    listed = next((choices[f] for f in spec.flags if f in choices), None)
    if listed is None and not spec.choices:
        return accepted(spec, full=True)
    values = list(listed) if listed is not None else [c for c in spec.choices if c is not None]
    shown = "one of " + ", ".join(fmt_value(v) for v in values)
    return shown + (" (or unset)" if spec.optional else "")


def _negated(flags: list[str], parser_flags: dict[str, int]) -> list[str]:
    """The spellings with the `--no-X` twins the release's parser has for them
    (BooleanOptionalAction: `--dcp-replicate-q-proj` / `--no-dcp-replicate-q-proj`)."""
    twins = ["--no-" + f[2:] for f in flags if "--no-" + f[2:] in parser_flags]
    return flags + [t for t in twins if t not in flags]


def fields_cmd(
    as_json: JsonOpt = False, fmt: FormatOpt = None, sglang_version: SglangVersionOpt = None
) -> None:
    """List every field: type and accepted values, default, SGLang flags, meaning; fields
    the chosen SGLang release has no flag for say so."""
    pack = chosen_pack(sglang_version)
    absent = set(pack.absent_fields)
    # A field's spellings span releases (`--disable-piecewise-cuda-graph` left in 0.5.23):
    # only those the chosen release's parser takes are listed, with the deprecated ones
    # that set it there (0.4.6.post5 has no --moe-a2a-backend: --enable-deepep-moe).
    spelled = [f for s in SPECS.values() for f in s.flags] + list(DEPRECATED)
    refused = {f for f, _ in missing_from_release(spelled, pack.version)}
    old_spellings = {
        name: [f for f, (target, _) in DEPRECATED.items() if target == name and f not in refused]
        for name in SPECS
    }
    parser_flags = release_flags(pack.version) or {}
    rows: list[dict[str, Any]] = [
        {
            "field": s.name,
            "type": s.describe_type(),
            "accepts": _accepts(s, pack.version),
            "default": release_defaults(pack.version).get(s.name, s.default),
            "flags": []
            if s.name in absent
            else _negated(
                [f for f in s.flags if f not in refused] + old_spellings[s.name], parser_flags
            ),
            "in_release": s.name not in absent,
            "group": s.group,
            "tool_only": s.tool_only,
            "model_fact": s.model_fact,
            "help": s.help,
        }
        for s in SPECS.values()
    ]
    chosen_fmt = chosen(fmt, as_json)
    if chosen_fmt is not OutputFormat.table:
        emit(chosen_fmt, {"fields": rows}, rows, listing=True)
        return
    table = Table(title=f"{len(rows)} fields", title_justify="left")
    for col in ("field", "accepts", "default", "SGLang flags", "meaning"):
        table.add_column(col, no_wrap=col in ("field", "default"))
    for r in rows:
        flags = " ".join(r["flags"]) or (
            "(model fact)"
            if r["model_fact"]
            else "(not in this release)"
            if not r["in_release"]
            else "(tool only)"
            if r["tool_only"]
            else "(no flag in this release)"
        )
        default = "unset" if r["default"] is None else fmt_value(r["default"])
        cells = (r["field"], r["accepts"], default, flags, r["help"])
        table.add_row(*(escape(c) for c in cells))
    out.print(table)
