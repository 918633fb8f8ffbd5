"""`meshsat fix`: the nearest layout SGLang accepts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from meshsat.solver.backends.render import fmt_value
from meshsat.solver.cli.emit_options import EmitOpt, ImageOpt, NameOpt, node_command, print_lws
from meshsat.solver.cli.formats import FormatOpt, OutputFormat, VerboseOpt, chosen, emit
from meshsat.solver.cli.launch_checks import unstartable
from meshsat.solver.cli.layout_options import JsonOpt, layout_inputs, read_layout
from meshsat.solver.cli.memory_options import (
    FreeMemoryOpt,
    GpuMemoryOpt,
    GpuOpt,
    LaunchMemFractionOpt,
    beyond_every_gpu,
    layout_memory,
    report_pack,
    sizing_notes,
    with_gpu_class,
)
from meshsat.solver.cli.output import note, out
from meshsat.solver.cli.report_view import CHANGE_COLUMNS
from meshsat.solver.cli.version_option import SglangVersionOpt
from meshsat.solver.errors import InputError
from meshsat.solver.inputs.layout_input import LayoutInput, LayoutSources
from meshsat.solver.inputs.sglang_cmdline import (
    GROUP_SIZE_RULE,
    ONE_LAYOUT_RULE,
    size_field,
    standing,
)
from meshsat.solver.lang.config import Config
from meshsat.solver.packs import Pack, get_pack
from meshsat.solver.repair.fix import command_line, fix
from meshsat.solver.repair.results import FixReport, FixResult
from meshsat.solver.validation.job_checks import job_violations, node_violations
from meshsat.solver.validation.report import Violation
from meshsat.solver.validation.validate import validate

if TYPE_CHECKING:
    from meshsat.solver.memory import MemoryModel

PinOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--pin",
        "-p",
        metavar="FIELD",
        help=(
            "Keep this field's value, as typed and as SGLang runs it after its silent changes "
            "(an unset field stays unset). Repeatable; pins that cannot all hold are explained."
        ),
        show_default=False,
    ),
]
GpusOpt = Annotated[
    int | None,
    typer.Option(
        "--gpus",
        metavar="N",
        help="The layout must use exactly N GPUs; sizes are then divisors of N. Without it, "
        "the GPU count may change.",
        show_default=False,
    ),
]
TopOpt = Annotated[
    int,
    typer.Option(
        "--top",
        metavar="K",
        help="Up to K best fixes; each later one leaves at least one field that each earlier "
        "one changes as it was (the same fields set to other values are no alternative) and "
        "prints another command, so fewer may come back.",
    ),
]
ObjectiveOpt = Annotated[
    str,
    typer.Option(
        "--objective",
        metavar="changes|distance",
        help="After keeping the GPU count and your features: changes: fewest changed "
        "fields, then the smallest size change; distance: the reverse.",
    ),
]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        "--timeout", metavar="S", help="Seconds for the whole search; the best found is kept."
    ),
]


@layout_inputs()
def fix_cmd(
    sources: LayoutSources,
    pin: PinOpt = None,
    gpus: GpusOpt = None,
    top: TopOpt = 1,
    objective: ObjectiveOpt = "changes",
    timeout: TimeoutOpt = 10.0,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    verbose: VerboseOpt = False,
    sglang_version: SglangVersionOpt = None,
    gpu: GpuOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    mem_fraction_static: LaunchMemFractionOpt = None,
    free_memory: FreeMemoryOpt = None,
    emit_as: EmitOpt = None,
    image: ImageOpt = "lmsysorg/sglang:latest",
    name: NameOpt = "sglang",
) -> None:
    """Find the nearest layout SGLang accepts, keeping what you pinned.

    Every rule is a hard constraint. Then, in tiers, each given up only when no layout
    keeps it: the GPU count, your feature set (nothing you left off is turned on, nothing
    you turned on is turned off), the fewest changed fields you set, then other fields,
    then the smallest size change. Prints the changes, the rules they repair, the tiers
    kept (and why one is not), SGLang's silent changes, and the fixed layout as an SGLang
    command line. With --gpu (or --gpu-memory) and --model, only layouts that load the
    model's weights with SGLang's reserve are proposed (the best among them); whether a
    request of some context length fits is not a condition (see validate --context-length).

    Exit status: 0 fixed (or already valid), 1 no fix (the pins conflict, or nothing was
    found in time) or a launch the fix leaves wrong (nodes that disagree, a flag no SGLang
    release takes), 2 bad input.

    Examples:

    \b
      meshsat fix --example dp-cp-conflict
      meshsat fix --set tp_size=8 --set dp_size=3 --set attn_cp_size=2 --gpus 8 --top 3
      meshsat fix --sglang "sglang serve --tp 16 --ep 4 --moe-dp-size 2" --pin tp_size --json
      meshsat fix --set tp_size=2 --model deepseek-ai/DeepSeek-V3 --gpu H200 --gpus 16
      meshsat fix --sglang-file lws.yaml --emit lws > lws.fixed.yaml
      meshsat fix --sglang-file pd.sh --json   # a PD deployment: every server, under the pair rules
    """
    import meshsat.solver.cli.deployment_cmd as deployment_cmd
    from meshsat.solver.deployment.model import Deployment

    deployment, sources = deployment_cmd.deployment_input(sources, sglang_version)
    if isinstance(deployment, Deployment):
        if gpus is not None or emit_as is not None or top != 1 or gpu or gpu_memory:
            raise InputError(
                f"{deployment.kind} is fixed server by server: --gpus, --top, --emit and "
                "--gpu/--gpu-memory apply to one server (fix its command alone)"
            )
        raise typer.Exit(
            deployment_cmd.fix_deployment_cmd(
                deployment,
                sglang_version,
                chosen(fmt, as_json),
                pins=tuple(pin or ()),
                objective=objective,
                timeout_s=timeout,
            )
        )
    layout = with_gpu_class(
        read_layout(sources, sglang_version, command="fix", job=deployment), gpu
    )
    start = fix_input(layout, gpus, pin or (), sglang_version)
    if start.said is not None:
        note(start.said)
    memory = layout_memory(
        layout, sources.model or layout.model_source, gpu, gpu_memory,
        report_pack(sglang_version), mem_fraction_static, free_memory,
    )  # fmt: skip
    if memory is not None:
        for text in sizing_notes(layout.memory_flags, mem_fraction_static):
            note(text)
    report = start.search(
        layout, sglang_version, objective=objective, top=top, timeout_s=timeout, memory=memory
    )
    said = unknown_note(layout, report)
    if said is not None:
        note(said)
    if memory is None and report.fixes:
        model = sources.model or layout.model_source
        checked = _checked(report.best, layout, sglang_version)
        said = beyond_every_gpu(layout, model, checked, report_pack(sglang_version))
        if said is not None:
            note(said)
    report = with_commands(report.also_repairing(start.fitted), layout, sglang_version)
    if emit_as is not None and report.fixes:
        refused = unstartable(layout)
        if refused is not None:  # a manifest whose server's parser exits is no fix
            note(f"nothing emitted: {refused.rule}: {refused.message}; {refused.hint}")
            raise typer.Exit(1)
        best = report.best
        per_node = pod_gpus(best.config.nnodes, best.gpus_used, best.config.gpus_per_node)
        model = str(sources.model) if sources.model is not None else layout.model_source
        command = best.command_line
        if layout.launch is not None:  # what the pod runs: no wrapper, no redirection
            command = _user_command(layout, best.config, sglang_version, bare=True)
        print_lws(command, best.gpus_used, per_node, model_path=model, name=name, image=image)
        raise typer.Exit(0)
    unfixed = unfixed_launch(layout, report, sglang_version)
    chosen_fmt = chosen(fmt, as_json)
    if chosen_fmt is OutputFormat.table:
        nodes = (layout.config.nnodes, start.config.nnodes)
        refitted = f"--nnodes {nodes[0]} → {nodes[1]} ({GROUP_SIZE_RULE})"
        print_fix(
            report,
            verbose=verbose,
            unfixed=unfixed,
            refitted=refitted if len(set(nodes)) > 1 else None,
            gpus_why=start.gpus_why,
        )
    else:
        rows = [
            {"fix": i, "field": c.field, "old": c.old, "new": c.new}
            for i, f in enumerate(report.fixes, 1)
            for c in f.changes
        ]
        emit(chosen_fmt, fix_document(report, unfixed), rows, columns=("fix", *CHANGE_COLUMNS))
    raise typer.Exit(fix_status(report, unfixed))


def _checked(result: FixResult, layout: LayoutInput, version: str | None) -> Any:
    """The validation report of a fix's layout (its widths, as SGLang resolves them)."""
    return validate(result.config, layout.model, explain=False, sglang_version=get_pack(version))


def unknown_note(layout: LayoutInput, report: FixReport) -> str | None:
    """What a fix did with the launch's values unknown here. Rules that fail only through
    them are not known to fail, so an input that breaks nothing else is left as it is
    (said, with the rules not checked); otherwise a fix needs a layout and takes SGLang's
    default for each (said). Either way, how to give the value. A node's rank or placement
    is not the layout's and is not said."""
    if not layout.unknown_widths:
        return None
    listed, give = layout.unknown_text()
    if report.valid_input and report.undecided:
        rules = ", ".join(report.undecided)
        return f"not checked, and not fixed: {rules} read {listed}, unknown here ({give})"
    if report.valid_input:
        return None
    return f"unknown here, fixed from SGLang's default: {listed} ({give})"


def pod_gpus(nnodes: int, gpus: int, node_size: int) -> int:
    """GPUs per pod of the LeaderWorkerSet `fix --emit lws` writes: the layout's own split
    where it spans nodes (a valid `--tp 16` group of 4 pods of 4 GPUs stays 4 pods, it
    was re-split into 2 of 8), else the node size (a tool-only fact SGLang never reads)."""
    return gpus // nnodes if nnodes > 1 and gpus % nnodes == 0 else node_size


def fix_document(report: FixReport, unfixed: list[Violation]) -> dict[str, Any]:
    """`meshsat fix --format json`'s document (and the web API's `/api/fix`): the report,
    with what the fix leaves wrong in a launch (`unfixed_launch`)."""
    data = report.to_dict()
    data["unfixed"] = [v.to_dict() for v in unfixed]
    data["valid_input"] = report.valid_input and not unfixed
    return data


def fix_status(report: FixReport, unfixed: list[Violation]) -> int:
    """0 fixed (or already valid), 1 no fix, or a script the fix leaves wrong."""
    return 0 if report.fixes and not unfixed else 1


def unfixed_launch(layout: LayoutInput, report: FixReport, version: str | None) -> list[Violation]:
    """What `validate` refuses in a launch that the fix of its layout leaves wrong: flags
    (or values) no recorded release's parser takes (CMD-UNKNOWN-FLAG, `unstartable`: a
    typo the fix cannot guess; a flag another release takes is not one), nodes that
    disagree (JOB-*), a node's own GPU ids, and a visible-devices list too short for the
    fixed layout's ranks (JOB-VISIBLE-DEVICES, as with --gpus past the list), checked on
    the fixed layout. The fix answers for the first node's layout, so without these a
    script that `validate` refuses read "already valid" (exit 0)."""
    from meshsat.solver.deployment.visible import visible_violations

    refused = unstartable(layout)
    found = [refused] if refused is not None else []
    if not layout.job and not layout.nodes and layout.launch is None:
        return found
    config = report.best.config if report.fixes else layout.config
    checked = validate(config, layout.model, explain=False, sglang_version=get_pack(version))
    pods = layout.manifest.group_size if layout.manifest is not None else None
    # JOB-GROUP-SIZE holds the command's --nnodes, which the fix has set to the group size.
    issues = standing(layout.job, config.nnodes, pods)
    found += job_violations(issues) + node_violations(checked, layout.nodes)
    if layout.launch is not None:
        found += visible_violations([layout.launch], checked.resolved, checked.sglang_version)
    return found


#: Why `fix` holds a GPU count the user gave (the tiers line).
ASKED = "as --gpus asks"


@dataclass(frozen=True)
class FixInput:
    """What `fix` searches from for a launch: the layout, the GPU count (None: the search's
    own), the fields held (the user's pins, and what the launch's environment fixes), and
    a note on what was fitted (None: nothing)."""

    config: Config
    gpus: int | None
    pins: tuple[str, ...]
    said: str | None = None
    #: Why the search holds `gpus`, as the tiers line says it.
    gpus_why: str = ASKED
    #: The launch rules the fitting itself repairs (JOB-GROUP-SIZE, JOB-VISIBLE-DEVICES):
    #: the search sees the fitted layout, so its fixes name them through
    #: `FixReport.also_repairing`.
    fitted: tuple[str, ...] = ()

    def search(
        self,
        layout: LayoutInput,
        sglang_version: str | Pack | None,
        *,
        objective: str = "changes",
        top: int = 1,
        timeout_s: float = 10.0,
        memory: MemoryModel | None = None,
    ) -> FixReport:
        """`fix` from here, for `layout`'s launch: its model, and its values unknown here
        (a rule that fails only through them is not repaired)."""
        return fix(
            self.config,
            layout.model,
            pins=self.pins,
            gpus=self.gpus,
            objective=objective,
            top=top,
            timeout_s=timeout_s,
            sglang_version=sglang_version,
            memory=memory,
            unknown=layout.unknown,
        )


def fix_input(
    layout: LayoutInput, gpus: int | None, pins: Sequence[str], version: str | None
) -> FixInput:
    """The layout, GPU count and pins to fix a launch with (`pods.fit_launch`): a manifest
    object that starts other than the launch's `--nnodes` pods (JOB-GROUP-SIZE) moves the
    layout onto its pods (`nnodes` held); without --gpus, a launch whose visible-devices
    list is shorter than its ranks' GPU ids (JOB-VISIBLE-DEVICES) is fitted to the list.
    `meshsat fix`, `validate --rewrite` and the web API's `/api/fix` fit alike."""
    from meshsat.solver.deployment.pods import fit_launch

    manifest = layout.manifest
    launch = () if layout.launch is None else (layout.launch,)
    fit = fit_launch(
        layout.config,
        layout.job,
        manifest.group_size if manifest is not None else None,
        launch,
        layout.model,
        get_pack(version),
        gpus=gpus,
    )
    why, notes = ASKED, []
    if fit.pods is not None and manifest is not None:
        if gpus is None and fit.gpus is not None:
            why = f"for the {fit.pods} pods {manifest.owner} starts"
        notes.append(
            f"setting --nnodes to {fit.pods}, the pods {manifest.owner} starts for the job "
            f"({GROUP_SIZE_RULE}); or set its {size_field(manifest.owner)} to "
            f"{layout.config.nnodes}"
        )
    if fit.listed is not None:
        short = fit.listed
        why = f"for the {len(short.ids)} GPU(s) {short.name} lists on each node"
        notes.append(
            f"fitting the layout to the {len(short.ids)} GPU(s) {short.name} lists on each "
            f"of its {fit.config.nnodes} node(s) (JOB-VISIBLE-DEVICES); pass --gpus N for "
            "another count"
        )
    pinned = (*pins, *fit.pins)
    return FixInput(fit.config, fit.gpus, pinned, "; ".join(notes) or None, why, fit.rules)


def with_commands(report: FixReport, layout: LayoutInput, version: str | None) -> FixReport:
    """The fixes' commands as the user will paste them: their own command, edited, when
    they gave one (`fixed_command`: every flag and environment variable the fix does not
    change stays as typed); else rendered with the model they named. `fix` and the web
    API's `/api/fix` answer alike. Each command once (`FixReport.distinct`): two layouts
    can be one command in the user's words too."""
    if layout.script is not None and layout.launch is not None:
        return _in_user_words(report, layout, version).distinct()
    if layout.model_path is not None:
        return _with_model_path(report, layout.model_path, version).distinct()
    return report


def _with_model_path(report: FixReport, model_path: str, version: str | None) -> FixReport:
    """The fixes' commands with the model the user named: SGLang needs `--model-path`, and
    the API's `fix` knows only the model's facts, not where its weights are."""
    fixes = tuple(
        replace(f, command_line=command_line(f.config, get_pack(version), model_path))
        for f in report.fixes
    )
    return replace(report, fixes=fixes)


def _in_user_words(report: FixReport, layout: LayoutInput, version: str | None) -> FixReport:
    fixes = tuple(
        replace(f, command_line=_user_command(layout, f.config, version)) for f in report.fixes
    )
    return replace(report, fixes=fixes)


def _user_command(
    layout: LayoutInput, config: Config, version: str | None, *, bare: bool = False
) -> str:
    from meshsat.solver.inputs.rewrite import fixed_command

    assert layout.script is not None and layout.launch is not None
    spelling = "attn_dp_size" not in get_pack(version).absent_fields
    return fixed_command(
        layout.script,
        layout.launch,
        config,
        attn_dp_spelling=spelling,
        model_path=layout.model_path,
        bare=bare,
    )


def print_fix(
    report: FixReport,
    *,
    verbose: bool = False,
    unfixed: list[Violation] | None = None,
    refitted: str | None = None,
    gpus_why: str = ASKED,
) -> None:
    """`refitted`: what the launch had changed before the layout was fixed (a
    LeaderWorkerSet's --nnodes set to its group size), so a layout valid as it stands is
    not said to need nothing; `gpus_why`: why the search held its GPU count
    (`FixInput.gpus_why`)."""
    _print_fix(
        report, verbose=verbose, script_wrong=bool(unfixed), refitted=refitted, gpus_why=gpus_why
    )
    for v in unfixed or ():
        out.print(f"[red]✗ not fixed:[/red] {escape(v.rule)}: {escape(v.message)}")
        if v.hint:
            out.print(f"  [dim]hint:[/dim] {escape(v.hint)}")
    if any(v.rule == ONE_LAYOUT_RULE for v in unfixed or ()):
        out.print(
            "[dim]hint:[/dim] `meshsat validate --sglang-file SCRIPT --rewrite` writes the "
            "fixed layout into every node"
        )


def _print_fix(
    report: FixReport,
    *,
    verbose: bool,
    script_wrong: bool,
    refitted: str | None = None,
    gpus_why: str = ASKED,
) -> None:
    if report.valid_input:
        best = report.best
        if script_wrong:
            head = "[yellow]the layout is valid[/yellow] on {} GPU(s), but not the script:"
        elif refitted is not None:
            head = f"[green]✓ fixed the launch[/green] ({escape(refitted)}): valid on {{}} GPU(s)"
        elif report.undecided:
            head = "[green]✓ nothing to fix[/green] on the values known here"
        else:
            head = "[green]✓ already valid[/green] on {} GPU(s): nothing to change"
        out.print(head.format(best.gpus_used))
        _print_notes(best, verbose)
        out.print(f"[bold]command:[/bold] {escape(best.command_line)}", soft_wrap=True)
        return
    if report.violations:
        broken = ", ".join(report.violations)
    elif report.advice:
        broken = f"valid for SGLang, but breaks meshsat's advice {', '.join(report.advice)}"
    elif report.unpinned:
        broken = f"valid, but SGLang does not run the pinned {', '.join(report.unpinned)} as given"
    elif report.gpus is not None and report.gpus != report.gpus_before:
        broken = f"uses {report.gpus_before} GPUs, not {report.gpus}"
    else:
        broken = "valid, but does not load the model on this GPU (MEM-FIT)"
    out.print(f"[dim]input:[/dim] {broken}")
    if report.conflict is not None:
        memory = any(r.id == "MEM-FIT" for r in report.conflict.rules)
        why = "no layout that loads the model" if memory else "the pinned fields cannot all hold"
        out.print(f"[red]✗ no fix:[/red] {why}")
        pins = ", ".join(f"{f}={fmt_value(v)}" for f, v in report.conflict.pins) or "(none)"
        out.print(f"[bold]pins:[/bold] {escape(pins)}")
        table = Table(title="conflicting rules", title_justify="left", show_lines=True)
        for col in ("rule", "condition", "SGLang says"):
            table.add_column(col, no_wrap=col == "rule")
        for rule in report.conflict.rules:
            table.add_row(escape(rule.id), escape(rule.condition), escape(rule.message))
        out.print(table)
        return
    if not report.fixes:
        out.print("[red]✗ no fix found[/red] within the timeout; pass a larger --timeout")
        return
    for relaxed in report.relaxed:
        out.print(f"[yellow]relaxed:[/yellow] {escape(relaxed.text)}")
    for i, result in enumerate(report.fixes, 1):
        if len(report.fixes) > 1:
            out.print(f"\n[bold]fix {i} of {len(report.fixes)}[/bold]")
        _print_result(report, result, first=i == 1, verbose=verbose, gpus_why=gpus_why)
    if report.timed_out:
        out.print(f"[yellow]the timeout cut the search: {len(report.fixes)} fix(es) found[/yellow]")


def _print_result(
    report: FixReport,
    result: FixResult,
    first: bool,
    verbose: bool = False,
    gpus_why: str = ASKED,
) -> None:
    n = len(result.changes)
    best = "optimal" if first else "the best alternative to the fixes above"
    proof = (
        f"proven {best} tier by tier"
        if result.optimal
        else "best found within the timeout (not proven optimal)"
    )
    out.print(
        f"[green]✓ fixed[/green] with {n} change{'s' if n != 1 else ''}, {proof}; "
        f"repairs {', '.join(result.repairs) or '-'}"
    )
    out.print(f"[dim]tiers:[/dim] {escape(_tiers(result, report, gpus_why))}")
    table = Table(show_header=True, expand=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("old")
    table.add_column("new")
    for change in result.changes:
        table.add_row(change.field, escape(fmt_value(change.old)), escape(fmt_value(change.new)))
    out.print(table)
    if result.gpus_used != report.gpus_before:
        hint = "" if report.gpus is not None else " (pass --gpus N to keep a GPU count)"
        out.print(
            f"[yellow]GPU count changes:[/yellow] {report.gpus_before} → {result.gpus_used}{hint}"
        )
    else:
        out.print(f"[dim]GPUs:[/dim] {result.gpus_used}")
    _print_notes(result, verbose)
    out.print(f"[bold]command:[/bold] {escape(result.command_line)}", soft_wrap=True)
    _print_nodes(result)


def _print_nodes(result: FixResult) -> None:
    """Where a fix needs more GPUs than the layout's node holds and launches on one node
    (`--tp 8` fixed to `--tp 16` on nodes of 8), the command as typed does not start (every
    rank on one host): what each node runs instead, as `plan` prints it."""
    per_node = result.config.gpus_per_node
    if result.config.nnodes != 1 or result.gpus_used <= per_node:
        return
    # launch_words drops the tool facts' `# not SGLang flags` comment of the command line.
    launch = node_command(result.command_line, result.gpus_used, per_node, model_path=None)
    out.print(
        f"[yellow]nodes:[/yellow] {result.gpus_used} GPUs are more than one node of "
        f"{per_node} (--set gpus_per_node=N for another size); {escape(launch.how())}"
    )
    out.print(f"[bold]on each node:[/bold] {escape(launch.command)}", soft_wrap=True)


def _tiers(result: FixResult, report: FixReport, gpus_why: str = ASKED) -> str:
    """Each tier as kept, or what it costs: "GPU count kept, features kept, 1 of yours".
    Under --gpus the count is the one asked for, not the input's (the search keeps it as a
    hard constraint): "kept" would contradict the "GPU count changes" line below."""
    obj = result.objective
    if report.gpus is not None and report.gpus != report.gpus_before:
        count = f"GPU count {report.gpus_before} → {report.gpus} {gpus_why}"
    else:
        count = "GPU count " + ("changes" if obj.gpus else "kept")
    words = [
        count,
        f"{obj.features} feature(s) toggled" if obj.features else "features kept",
        f"{obj.user_fields} field(s) you set changed, {obj.other_fields} other(s)",
        f"size change {obj.distance:g} bit(s)",
    ]
    return "; ".join(words)


def _print_notes(result: FixResult, verbose: bool = False) -> None:
    for change in result.notes:
        if not (change.visible or verbose):
            continue
        out.print(f"[cyan]note:[/cyan] {escape(change.text)} [dim]({change.resolution})[/dim]")
