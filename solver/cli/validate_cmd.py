"""`meshsat validate`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from meshsat.solver.cli.formats import FormatOpt, OutputFormat, VerboseOpt, chosen, emit
from meshsat.solver.cli.launch_checks import unstartable, with_launch_checks
from meshsat.solver.cli.layout_options import JsonOpt, layout_inputs, read_layout
from meshsat.solver.cli.memory_options import (
    FreeMemoryOpt,
    GpuMemoryOpt,
    GpuOpt,
    LaunchContextLengthOpt,
    LaunchMemFractionOpt,
    checkpoint_line,
    memory_line,
    report_pack,
    sizing_notes,
    with_gpu_class,
    with_memory,
)
from meshsat.solver.cli.output import note, out
from meshsat.solver.cli.report_view import VIOLATION_COLUMNS, print_report, violation_rows
from meshsat.solver.cli.version_option import SglangVersionOpt, chosen_pack
from meshsat.solver.errors import InputError
from meshsat.solver.inputs.k8s import ManifestLaunch
from meshsat.solver.inputs.layout_input import LayoutInput, LayoutSources
from meshsat.solver.inputs.sglang_cmdline import ONE_LAYOUT_RULE, standing
from meshsat.solver.memory import Memory
from meshsat.solver.memory.models import checkpoint_bytes
from meshsat.solver.validation.report import Report
from meshsat.solver.validation.validate import validate

StrictOpt = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Kept for scripts that pass it: a flag (or value) the chosen SGLang release's "
        "parser refuses is an error (CMD-UNKNOWN-FLAG) with or without it, naming the "
        "recorded releases that take it.",
    ),
]

RewriteOpt = Annotated[
    bool,
    typer.Option(
        "--rewrite",
        help="With --sglang-file (or --sglang): print the launch script with the nearest "
        "valid layout (meshsat fix, default objective) written into it in the release's "
        "spelling; only changed layout flags are edited, every other byte is kept. Exit 0 "
        "with the script, 1 (no script) when no fix exists or a flag no SGLang release takes "
        "is in it.",
    ),
]


@layout_inputs()
def validate_cmd(
    sources: LayoutSources,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    verbose: VerboseOpt = False,
    sglang_version: SglangVersionOpt = None,
    gpu: GpuOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    context_length: LaunchContextLengthOpt = None,
    mem_fraction_static: LaunchMemFractionOpt = None,
    free_memory: FreeMemoryOpt = None,
    strict: StrictOpt = False,
    rewrite: RewriteOpt = False,
) -> None:
    """Check a layout against every rule and say everything that is wrong with it.

    Lists every violated rule (not just the first, in the order SGLang's handlers run) with
    SGLang's wording and the arithmetic behind it, the user-set fields that jointly
    conflict, what SGLang would silently change, and the derived widths and GPU count. With
    --gpu and --model, memory per rank too, and "does not fit" as a violation, sized with
    the launch command's own --mem-fraction-static, --context-length, --kv-cache-dtype and
    --page-size (this command's --mem-fraction-static and --context-length, given, win).

    From a launch script, also the nodes of a multi-node job that disagree (JOB-*) and
    flags the chosen release does not have (CMD-UNKNOWN-FLAG: an error, naming the
    recorded releases that take them and the -V that would).
    A script with a router or with prefill and decode servers is a PD deployment: each
    server is checked on its own (one entry per server in the JSON), then the rules
    between them (PD-*, ROUTER-*: same model, transfer backend, page size, KV dtype,
    attention TP mapping, bootstrap port, the router's view); --rewrite fixes every server.

    Exit status: 0 valid, 1 invalid, 2 bad input.

    Examples:

    \b
      meshsat validate --set tp_size=8 --set dp_size=3 --set enable_dp_attention=true
      meshsat validate --sglang "python -m sglang.launch_server --tp 8 --attn-cp-size 2"
      meshsat validate --sglang-file launch.sh --sglang-version 0.5.23
      meshsat validate --model deepseek-ai/DeepSeek-V3 --gpu H200 --set tp_size=8
      meshsat validate --sglang-file launch.sh --rewrite > launch.fixed.sh
      meshsat validate --sglang-file pd.sh --sglang-version 0.5.23 --json
    """
    import meshsat.solver.cli.deployment_cmd as deployment_cmd
    from meshsat.solver.deployment.model import Deployment

    deployment, sources = deployment_cmd.deployment_input(sources, sglang_version)
    if isinstance(deployment, Deployment):
        if rewrite:
            answer = deployment_cmd.rewritten_deployment(deployment, chosen_pack(sglang_version))
            raise typer.Exit(rewrite_out(*answer, chosen(fmt, as_json)))
        fmt_chosen = chosen(fmt, as_json)

        def memory(report: Report, layout: LayoutInput) -> Report:
            """Each server's MEM-FIT with --gpu, the model its --model-path names."""
            model = sources.model or (Path(layout.model_source) if layout.model_source else None)
            pack = report_pack(sglang_version)
            return with_memory(
                report, model, gpu, gpu_memory, context_length, pack, mem_fraction_static,
                free_memory, named=layout.model_path, launch=layout.memory_flags,
            )[0]  # fmt: skip

        sized = gpu is not None or gpu_memory is not None
        notes = deployment_cmd.server_sizing_notes(deployment, mem_fraction_static, context_length)
        raise typer.Exit(
            deployment_cmd.validate_deployment_cmd(
                deployment,
                sglang_version,
                fmt_chosen,
                strict=strict,
                verbose=verbose,
                memory=memory,
                notes=notes if sized else (),
            )
        )
    layout = with_gpu_class(
        read_layout(
            sources, sglang_version, launch_notes=False, command="validate", job=deployment
        ),
        gpu,
    )
    if rewrite:
        raise typer.Exit(rewrite_out(*rewritten(layout, sglang_version), chosen(fmt, as_json)))
    report = validate(layout.config, layout.model, sglang_version=sglang_version)
    report = with_launch_checks(report, layout, strict=strict)
    model = sources.model or (Path(layout.model_source) if layout.model_source else None)
    report, mem = with_memory(
        report, model, gpu, gpu_memory, context_length, report_pack(sglang_version),
        mem_fraction_static, free_memory, named=layout.model_path, launch=layout.memory_flags,
    )  # fmt: skip
    if mem is not None:
        for text in sizing_notes(layout.memory_flags, mem_fraction_static, context_length):
            note(text)
    chosen_fmt = chosen(fmt, as_json)
    copies = layout.manifest
    if chosen_fmt is OutputFormat.table:
        print_report(report, verbose=verbose)
        if copies is not None and copies.replicas > 1:
            out.print(replicas_line(report, copies), markup=False, highlight=False)
        if mem is not None:
            out.print(memory_line(mem), markup=False, highlight=False)
            disk = checkpoint_line(model, mem)
            if disk is not None:
                out.print(disk, markup=False, highlight=False)
    else:
        document = validate_document(report, mem, model, copies)
        emit(chosen_fmt, document, violation_rows(report), columns=VIOLATION_COLUMNS)
    raise typer.Exit(0 if report.valid else 1)


def manifest_copies(report: Report, manifest: ManifestLaunch) -> dict[str, Any]:
    """The object that runs the server judged, its replicas, and their GPUs in all (the
    report is one copy's)."""
    gpus = manifest.replicas * int(report.derived.get("gpus_used", 0))
    return {"object": manifest.owner, "replicas": manifest.replicas, "gpus": gpus}


def replicas_line(report: Report, manifest: ManifestLaunch) -> str:
    """`LeaderWorkerSet/sglang runs 8 replicas of this server: 16 GPU(s) in all`."""
    copies = manifest_copies(report, manifest)
    return (
        f"{copies['object']} runs {copies['replicas']} replicas of this server: "
        f"{copies['gpus']} GPU(s) in all"
    )


def validate_document(
    report: Report,
    mem: Memory | None = None,
    model: Path | None = None,
    manifest: ManifestLaunch | None = None,
) -> dict[str, Any]:
    """`meshsat validate --format json`'s document (and the web API's `/api/validate`):
    the report, with the memory figures when a GPU was given, the checkpoint's size when
    a local config has its index beside it, and from a Kubernetes manifest the object that
    runs the server with its replicas and their GPUs (the report is one copy's)."""
    data = report.to_dict()
    if manifest is not None:
        data["manifest"] = manifest_copies(report, manifest)
    if mem is not None:
        data["memory"] = mem.to_dict()
        size = checkpoint_bytes(str(model)) if model is not None else None
        if size is not None:
            data["memory"]["checkpoint_gib"] = size / (1 << 30)
    return data


def rewrite_out(text: str | None, notes: list[str], fmt: OutputFormat) -> int:
    """`--rewrite`'s answer and exit status: the script on stdout and the notes on stderr;
    with --json (or --format) the web API's `/api/rewrite` document instead, `script` null
    when no fix exists (the script alone is not JSON, and was printed regardless)."""
    from meshsat.solver.cli.output import rewritten_out

    if fmt is OutputFormat.table:
        return rewritten_out(text, notes)
    row = {"script": text, "notes": "\n".join(notes)}
    emit(fmt, {"script": text, "notes": notes}, [row], columns=tuple(row))
    return 0 if text is not None else 1


def rewritten(layout: LayoutInput, sglang_version: str | None) -> tuple[str | None, list[str]]:
    """The launch text with the nearest valid layout written in (None when no fix exists),
    and the notes that say what changed: `--rewrite`'s answer (and the web API's
    `/api/rewrite`)."""
    from meshsat.solver.inputs.rewrite import rewrite_script
    from meshsat.solver.packs import get_pack

    if layout.script is None:
        raise InputError("--rewrite needs a launch command: give --sglang-file or --sglang")
    from meshsat.solver.cli.fix_cmd import fix_input, unknown_note

    refused = unstartable(layout)
    if refused is not None:  # the rewrite edits only the layout: the script would not start
        return None, [f"the script is not rewritten: {refused.message}; {refused.hint}"]
    pack = get_pack(sglang_version)
    # Fitted as `fix` fits it: to the pods its object starts, to its visible-devices list.
    start = fix_input(layout, None, (), pack.version)
    report = start.search(layout, pack)
    if not report.fixes:
        return None, [
            "no valid layout near this one (meshsat fix says why); the script is unchanged"
        ]
    best = report.best
    text, notes = rewrite_script(
        layout.script, best.config, attn_dp_spelling="attn_dp_size" not in pack.absent_fields
    )
    nnodes = (layout.config.nnodes, best.config.nnodes)
    # Said once: a refit to the pods, or the fix's own change of the node count.
    moved = nnodes[0] != nnodes[1] and all(c.field != "nnodes" for c in best.changes)
    refit = [f"nnodes: {nnodes[0]} -> {nnodes[1]}"] if moved else []
    said = [*refit, *(f"{change.field}: {change.old} -> {change.new}" for change in best.changes)]
    said += notes
    said += [text for text in (start.said, unknown_note(layout, report)) if text is not None]
    if not best.changes and text == layout.script and report.undecided:
        said.append("nothing to fix on the values known here; the script is unchanged")
    elif not best.changes and text == layout.script:
        said.append("the layout is already valid; the script is unchanged")
    elif not best.changes and (layout.nodes or layout.job):
        said.append("the first node's layout is valid; the other nodes now carry it")
    elif not best.changes:
        said.append("the layout is valid; the script now carries the values given with --set")
    # Only layout flags are edited: the nodes' addresses and ranks stay as they were.
    pods = layout.manifest.group_size if layout.manifest is not None else None
    said += [
        f"not rewritten, edit by hand: {issue.rule}: {issue.message}"
        for issue in standing(layout.job, best.config.nnodes, pods)
        if issue.rule != ONE_LAYOUT_RULE
    ]
    return text, said
