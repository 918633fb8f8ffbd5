"""`meshsat diff A B`: what changed between two SGLang releases, and for a layout."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from meshsat.solver.cli.formats import FormatOpt, OutputFormat, chosen, emit
from meshsat.solver.cli.layout_options import JsonOpt, layout_inputs, read_layout
from meshsat.solver.cli.output import out
from meshsat.solver.inputs.layout_input import LayoutInput, LayoutSources
from meshsat.solver.packs import Pack, get_pack
from meshsat.solver.packs.compare import compare
from meshsat.solver.validation.validate import validate

VersionArg = Annotated[str, typer.Argument(metavar="VERSION", show_default=False)]


def diff_document(a: Pack, b: Pack, layout: LayoutInput | None = None) -> dict[str, Any]:
    """`meshsat diff --format json`'s document (and the web API's `/api/diff`): the rule
    changes from release `a` to `b` and, given a layout, its verdict on each."""
    data: dict[str, Any] = compare(a, b).to_dict()
    if layout is not None:
        before = validate(layout.config, layout.model, explain=False, sglang_version=a)
        after = validate(layout.config, layout.model, explain=False, sglang_version=b)
        data["layout"] = {
            "valid": {a.version: before.valid, b.version: after.valid},
            "violations": {
                a.version: [v.rule for v in before.violations],
                b.version: [v.rule for v in after.violations],
            },
            "resolved_changes": {
                k: {a.version: before.resolved[k], b.version: after.resolved[k]}
                for k in before.resolved
                if before.resolved[k] != after.resolved[k]
            },
        }
    return data


@layout_inputs()
def diff_cmd(
    old: VersionArg,
    new: VersionArg,
    sources: LayoutSources,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
) -> None:
    """What changed from SGLang release OLD to NEW: rules added, removed and changed,
    silent resolution steps, and fields (flags) that appeared or went away.

    Given a layout, also how its verdict, violations and resolved values differ between
    the two releases: the question to ask before an upgrade.

    Examples:

      meshsat diff 0.5.19 0.5.23

      meshsat diff 0.5.19 0.5.23 --set tp_size=8 --set dp_size=2 --set attn_cp_size=2
    """
    a, b = get_pack(old), get_pack(new)
    given = sources.given
    data = diff_document(a, b, read_layout(sources, new, command="diff") if given else None)
    chosen_fmt = chosen(fmt, as_json)
    if chosen_fmt is not OutputFormat.table:
        rows = [
            {"what": "rule", "change": kind, "id": r["id"]}
            for kind, items in data["rules"].items()
            for r in items
        ]
        rows += [
            {"what": "resolution step", "change": kind, "id": step}
            for kind, steps in data["resolution_steps"].items()
            for step in steps
        ]
        rows += [
            {"what": "field", "change": kind, "id": name}
            for kind, names in data["fields"].items()
            for name in names
        ]
        rows += [
            {"what": "flag", "change": kind, "id": f"{item['flag']} ({item['field']})"}
            for kind, items in data["flags"].items()
            for item in items
        ]
        emit(chosen_fmt, data, rows, columns=("what", "change", "id"))
        return
    out.print(f"SGLang {a.version} → {b.version}", markup=False, highlight=False)
    rules = data["rules"]
    for label, key in (("added", "added"), ("removed", "removed")):
        for r in rules[key]:
            line = f"  rule {label}: {r['id']} ({r['kind']}): {r['message']}"
            out.print(line, markup=False, highlight=False)
    for r in rules["changed"]:
        was, now = r["from"], r["to"]
        if was["condition"] != now["condition"]:
            line = f"  rule changed: {r['id']}: {was['condition']} [{was['kind']}]"
            out.print(line, markup=False, highlight=False)
            line = f"      now: {now['condition']} [{now['kind']}]"
            out.print(line, markup=False, highlight=False)
        elif was["kind"] != now["kind"]:
            line = f"  rule changed: {r['id']}: now {now['kind']} (was {was['kind']})"
            out.print(line, markup=False, highlight=False)
        elif was["message"] != now["message"]:
            line = f"  rule changed: {r['id']}: SGLang's message was: {was['message']}"
            out.print(line, markup=False, highlight=False)
            out.print(f"      now: {now['message']}", markup=False, highlight=False)
        else:
            out.print(f"  rule changed: {r['id']}", markup=False, highlight=False)
        for d in r["definitions"]:  # a name in the condition that now means something else
            line = f"      {d['name']} was: {d['from']}\n      {d['name']} now: {d['to']}"
            out.print(line, markup=False, highlight=False)
    for key, items in data["resolution_steps"].items():
        for step in items:
            out.print(f"  resolution step {key}: {step}", markup=False, highlight=False)
    for key, fields in data["fields"].items():
        for name in fields:
            out.print(f"  field {key}: {name}", markup=False, highlight=False)
    for key, spelled in data["flags"].items():
        for item in spelled:
            line = f"  flag {key}: {item['flag']} ({item['field']})"
            out.print(line, markup=False, highlight=False)
    if given:
        lay = data["layout"]
        for version in (a.version, b.version):
            verdict = "valid" if lay["valid"][version] else "invalid"
            broken = ", ".join(lay["violations"][version]) or "no violation"
            out.print(f"  layout on {version}: {verdict} ({broken})", markup=False, highlight=False)
        for name, values in lay["resolved_changes"].items():
            out.print(
                f"  resolved {name}: {values[a.version]} → {values[b.version]}",
                markup=False,
                highlight=False,
            )
