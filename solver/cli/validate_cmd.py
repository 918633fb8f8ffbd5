"""`meshsat validate`."""

from __future__ import annotations

import typer

from solver.cli.layout_options import (
    ConfigOpt,
    ExampleOpt,
    JsonOpt,
    ModelOpt,
    SetOpt,
    SglangFileOpt,
    SglangOpt,
    read_layout,
)
from solver.cli.memory_options import (
    ContextLengthOpt,
    GpuMemoryOpt,
    GpuOpt,
    memory_line,
    with_memory,
)
from solver.cli.output import emit_json, out
from solver.cli.report_view import print_report
from solver.cli.version_option import SglangVersionOpt
from solver.validation.validate import validate


def validate_cmd(
    config: ConfigOpt = None,
    sets: SetOpt = None,
    sglang: SglangOpt = None,
    sglang_file: SglangFileOpt = None,
    model: ModelOpt = None,
    example: ExampleOpt = None,
    as_json: JsonOpt = False,
    sglang_version: SglangVersionOpt = None,
    gpu: GpuOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    context_length: ContextLengthOpt = 4096,
) -> None:
    """Check a layout against every rule and say everything that is wrong with it.

    Lists every violated rule (not just the first) with SGLang's wording and the
    arithmetic behind it, the user-set fields that jointly conflict, what SGLang would
    silently change, and the derived widths and GPU count.

    Exit status: 0 valid, 1 invalid, 2 bad input.

    Examples:

      meshsat validate --set tp_size=8 --set dp_size=3 --set enable_dp_attention=true

      meshsat validate --sglang "python -m sglang.launch_server --tp 8 --attn-cp-size 2"

      meshsat validate --config layout.yaml --model ./DeepSeek-V3/config.json --json

      meshsat validate --model deepseek-ai/DeepSeek-V3 --gpu H200 --set tp_size=8
    """
    layout = read_layout(config, sets, sglang, model, example, sglang_file)
    report = validate(layout.config, layout.model, sglang_version=sglang_version)
    report, mem = with_memory(report, model, gpu, gpu_memory, context_length)
    if as_json:
        data = report.to_dict()
        if mem is not None:
            data["memory"] = mem.to_dict()
        emit_json(data)
    else:
        print_report(report)
        if mem is not None:
            out.print(memory_line(mem), markup=False, highlight=False)
    raise typer.Exit(0 if report.valid else 1)
