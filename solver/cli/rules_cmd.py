"""`meshsat rules` and `meshsat fields`: the catalogue and the vocabulary, from the
declarations themselves."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from solver.backends.render import condition, fmt_value, text
from solver.catalogue import RESOLUTIONS, RULES
from solver.cli.formats import FormatOpt, OutputFormat, chosen, emit
from solver.cli.layout_options import JsonOpt
from solver.cli.output import out
from solver.inputs.convert import accepted
from solver.lang.fields import SPECS


def rules_cmd(as_json: JsonOpt = False, fmt: FormatOpt = None) -> None:
    """List every rule: id, condition in words, SGLang's message and its source handler.

    Resolution steps (what SGLang changes silently, in order) follow the rules.
    """
    rules: list[dict[str, Any]] = [
        {
            "id": r.id,
            "severity": r.severity,
            "condition": condition(r),
            "message": r.message,
            "source": r.source,
            "fields": list(r.fields),
            "hint": r.hint,
        }
        for r in RULES
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
        for res in RESOLUTIONS
    ]
    chosen_fmt = chosen(fmt, as_json)
    if chosen_fmt is not OutputFormat.table:
        emit(chosen_fmt, {"rules": rules, "resolutions": resolutions}, rules, listing=True)
        return
    table = Table(title=f"{len(rules)} rules", title_justify="left", show_lines=True)
    for col in ("id", "condition", "SGLang says", "source"):
        table.add_column(col, no_wrap=col == "id")
    for r in rules:
        rid = r["id"] if r["severity"] == "error" else f"{r['id']} (warning)"
        table.add_row(*(escape(c) for c in (rid, r["condition"], r["message"], r["source"])))
    out.print(table)
    res_table = Table(title="silent resolution, in order", title_justify="left", show_lines=True)
    for col in ("id", "when", "sets", "source"):
        res_table.add_column(col, no_wrap=col == "id")
    for res in resolutions:
        for s in res["steps"]:
            sets = ", ".join(f"{k} = {v}" for k, v in s["sets"].items())
            res_table.add_row(*(escape(c) for c in (res["id"], s["when"], sets, res["source"])))
    out.print(res_table)


def fields_cmd(as_json: JsonOpt = False, fmt: FormatOpt = None) -> None:
    """List every field: type and accepted values, default, SGLang flags, meaning."""
    rows: list[dict[str, Any]] = [
        {
            "field": s.name,
            "type": s.describe_type(),
            "accepts": accepted(s, full=True),
            "default": s.default,
            "flags": list(s.flags),
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
        flags = " ".join(r["flags"]) or ("(model fact)" if r["model_fact"] else "(tool only)")
        cells = (r["field"], r["accepts"], fmt_value(r["default"]), flags, r["help"])
        table.add_row(*(escape(c) for c in cells))
    out.print(table)
