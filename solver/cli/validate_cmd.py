"""`meshsat validate`."""

from __future__ import annotations

import typer

from solver.cli.formats import FormatOpt, OutputFormat, VerboseOpt, chosen, emit
from solver.cli.layout_options import JsonOpt, layout_inputs, read_layout
from solver.cli.memory_options import (
    ContextLengthOpt,
    GpuMemoryOpt,
    GpuOpt,
    memory_line,
    with_memory,
)
from solver.cli.output import out
from solver.cli.report_view import print_report, violation_rows
from solver.cli.version_option import SglangVersionOpt
from solver.inputs.layout_input import LayoutSources
from solver.validation.validate import validate


@layout_inputs()
def validate_cmd(
    sources: LayoutSources,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    verbose: VerboseOpt = False,
    sglang_version: SglangVersionOpt = None,
    gpu: GpuOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    context_length: ContextLengthOpt = 4096,
) -> None:
    """Check a layout against every rule and say everything that is wrong with it.

    Lists every violated rule (not just the first, in the order SGLang's handlers run) with
    SGLang's wording and the arithmetic behind it, the user-set fields that jointly
    conflict, what SGLang would silently change, and the derived widths and GPU count. With
    --gpu and --model, memory per rank too, and "does not fit" as a violation.

    Exit status: 0 valid, 1 invalid, 2 bad input.

    Examples:

    \b
      meshsat validate --set tp_size=8 --set dp_size=3 --set enable_dp_attention=true
      meshsat validate --sglang "python -m sglang.launch_server --tp 8 --attn-cp-size 2"
      meshsat validate --sglang-file launch.sh --sglang-version 0.5.23
      meshsat validate --model deepseek-ai/DeepSeek-V3 --gpu H200 --set tp_size=8
    """
    layout = read_layout(sources)
    report = validate(layout.config, layout.model, sglang_version=sglang_version)
    report, mem = with_memory(report, sources.model, gpu, gpu_memory, context_length)
    chosen_fmt = chosen(fmt, as_json)
    if chosen_fmt is OutputFormat.table:
        print_report(report, verbose=verbose)
        if mem is not None:
            out.print(memory_line(mem), markup=False, highlight=False)
    else:
        data = report.to_dict()
        if mem is not None:
            data["memory"] = mem.to_dict()
        emit(chosen_fmt, data, violation_rows(report))
    raise typer.Exit(0 if report.valid else 1)
