"""Human rendering of a validation report (shared by validate and fix)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from meshsat.solver.backends.render import fmt_value
from meshsat.solver.cli.output import out
from meshsat.solver.validation.report import Report, Violation


def _violation_table(rows: tuple[Violation, ...], title: str) -> Table:
    table = Table(title=title, title_justify="left", show_lines=True, expand=False)
    table.add_column("rule", style="bold", no_wrap=True)
    table.add_column("SGLang says")
    table.add_column("because")
    for v in rows:
        # Messages quote user values: never let them be read as rich markup.
        because = escape(v.detail) + (f"\n[dim]hint: {escape(v.hint)}[/dim]" if v.hint else "")
        table.add_row(escape(v.rule), escape(v.message), because)
    return table


def gpu_summary(report: Report) -> str:
    d = report.derived
    unknown = report.reads_unknown("gpus_used")
    if unknown:  # SGLang's default stands in for the launch's value: no count to show
        return f"GPU count not known here (it reads {', '.join(unknown)})"
    used = d["gpus_used"]
    mode = "with DP attention" if report.resolved["enable_dp_attention"] else "without DP attention"
    return (
        f"{used} GPU(s) {mode} (with DP attention: {d['gpus_with_dp_attention']}; "
        f"without: {d['gpus_without_dp_attention']})"
    )


def derived_line(report: Report) -> str:
    d = report.derived
    read: dict[str, None] = {}

    def shown(name: str, value: Any) -> str:
        unknown = report.reads_unknown(name)
        read.update(dict.fromkeys(unknown))
        return "?" if unknown else fmt_value(value)

    r = report.resolved

    def width(name: str, divisor: Any) -> str:
        """A quotient width; an inexact one as the fraction (an invalid layout's: its
        rounded-down value, `attn_tp 5` for tp 16 over attention DP 3, is no width)."""
        tp = r.get("tp_size")
        if (
            not report.reads_unknown(name)
            and isinstance(tp, int)
            and isinstance(divisor, int)
            and divisor > 0
            and tp % divisor
        ):
            return f"{tp}/{divisor} (not whole)"
        return shown(name, d[name])

    attn_cp, ep, moe_dp = (r.get(k) for k in ("attn_cp_size", "ep_size", "moe_dp_size"))
    parts = [
        f"attn_dp {shown('attn_dp', d['attn_dp'])}",
        f"attn_tp {width('attn_tp', _product(d['attn_dp'], attn_cp))}",
        f"moe_tp {width('moe_tp', _product(ep, moe_dp))}",
        f"engine world {shown('engine_world', d['engine_world'])}",
        # Off whatever the unknown widths are, unless prefill CP is switched on.
        "CP strategy active: "
        + (shown("cp_active", d["cp_active"]) if report.resolved["enable_prefill_cp"] else "false"),
    ]
    if read:
        parts.append(f"? reads {', '.join(read)}, unknown here")
    return " · ".join(parts)


def _product(a: Any, b: Any) -> int | None:
    return a * b if isinstance(a, int) and isinstance(b, int) else None


#: The columns of `violation_rows`.
VIOLATION_COLUMNS = ("severity", "rule", "message", "detail")
#: The CSV columns of a fix's change (after the fix's number, or its server's name).
CHANGE_COLUMNS = ("field", "old", "new")


def violation_rows(report: Report) -> list[dict[str, Any]]:
    """The rows of `--format csv`: every violated rule, errors then warnings."""
    return [
        {"severity": v.severity, "rule": v.rule, "message": v.message, "detail": v.detail}
        for v in (*report.violations, *report.warnings)
    ]


def print_report(report: Report, *, verbose: bool = False) -> None:
    if report.valid and report.undecided:
        n = len(report.undecided)
        out.print(
            f"[green]✓ valid[/green] on the values known here, [yellow]{n} rule"
            f"{'s' if n != 1 else ''} not checked[/yellow] (see the warnings); "
            f"{gpu_summary(report)}"
        )
    elif report.valid and report.reads_unknown("gpus_used"):
        out.print(f"[green]✓ valid[/green] layout; {gpu_summary(report)}")
    elif report.valid:
        out.print(f"[green]✓ valid[/green] layout on {gpu_summary(report)}")
    else:
        n = len(report.violations)
        out.print(
            f"[red]✗ invalid[/red]: {n} rule{'s' if n != 1 else ''} violated; {gpu_summary(report)}"
        )
        out.print(_violation_table(report.violations, "violations"))
    if report.conflict:
        values = escape(
            ", ".join(f"{f}={fmt_value(report.config.__dict__[f])}" for f in report.conflict)
        )
        if len(report.conflict) == 1:
            out.print(
                f"[bold]conflict:[/bold] {values} cannot hold with the other fields as they "
                "are; change it"
            )
        else:
            out.print(
                f"[bold]conflict:[/bold] {values} cannot all hold (with the other fields as "
                "they are); change at least one of them"
            )
    elif report.conflict == () and not report.valid:
        out.print(
            "[bold]conflict:[/bold] none among the fields you set; the failing rules "
            "need fields you left at their defaults (see the hints)"
        )
    if report.warnings:
        out.print(_violation_table(report.warnings, "warnings"))
    for change in report.notes:
        if not (change.visible or verbose):
            continue
        out.print(f"[cyan]note:[/cyan] {escape(change.text)} [dim]({change.resolution})[/dim]")
    out.print(f"[dim]derived:[/dim] {derived_line(report)}")
