"""`meshsat validate`."""

from __future__ import annotations

import typer

from solver.cli.formats import FormatOpt, OutputFormat, VerboseOpt, chosen, emit
from solver.cli.layout_options import (
    ConfigOpt,
    ExampleOpt,
    JsonOpt,
    ModelOpt,
    SetOpt,
    SglangOpt,
    read_layout,
)
from solver.cli.report_view import print_report, violation_rows
from solver.validation.validate import validate


def validate_cmd(
    config: ConfigOpt = None,
    sets: SetOpt = None,
    sglang: SglangOpt = None,
    model: ModelOpt = None,
    example: ExampleOpt = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Check a layout against every rule and say everything that is wrong with it.

    Lists every violated rule (not just the first) with SGLang's wording and the
    arithmetic behind it, the user-set fields that jointly conflict, what SGLang would
    silently change, and the derived widths and GPU count.

    Exit status: 0 valid, 1 invalid, 2 bad input.

    Examples:

    \b
      meshsat validate --set tp_size=8 --set dp_size=3 --set enable_dp_attention=true
      meshsat validate --sglang "python -m sglang.launch_server --tp 8 --attn-cp-size 2"
      meshsat validate --config layout.yaml --model ./DeepSeek-V3/config.json --json
    """
    layout = read_layout(config, sets, sglang, model, example)
    report = validate(layout.config, layout.model)
    chosen_fmt = chosen(fmt, as_json)
    if chosen_fmt is OutputFormat.table:
        print_report(report, verbose=verbose)
    else:
        emit(chosen_fmt, report.to_dict(), violation_rows(report))
    raise typer.Exit(0 if report.valid else 1)
