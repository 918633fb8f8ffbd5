"""The inputs every layout command takes, declared once (validate, fix, groups, ...)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_type_hints

import typer

from meshsat.solver.inputs.layout_input import (
    MAX_SCRIPT_BYTES,
    LayoutInput,
    LayoutSources,
    load_layout,
    script_folders,
    with_script,
)
from meshsat.solver.inputs.sglang_cmdline import recorded_releases
from meshsat.solver.lang.limits import clipped, listed

if TYPE_CHECKING:
    from meshsat.solver.deployment.reader import OneJob

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Layout file (JSON, YAML or TOML) of field: value pairs; "
        "an optional `model:` entry holds model facts or an HF config.",
        show_default=False,
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        "-s",
        metavar="FIELD=VALUE",
        help="Set one field (repeatable), e.g. --set tp_size=8. `meshsat fields` "
        "lists the fields and their values.",
        show_default=False,
    ),
]
SglangOpt = Annotated[
    str | None,
    typer.Option(
        "--sglang",
        metavar="CMDLINE",
        help='An SGLang launch command as pasted, e.g. "python -m sglang.launch_server --tp 8 '
        '--attn-dp-size 2" (continuations, env prefixes, docker run, redirections are fine); '
        "'-' reads it from standard input. Non-layout flags are listed in one note.",
        show_default=False,
    ),
]
SglangFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--sglang-file",
        metavar="SCRIPT",
        help="A launch script ('-' reads standard input; a pipe such as <(cat x.sh) works too: "
        "it is read once); launches of several nodes in it are the nodes of one job, which "
        "must agree on the layout. A script with a router, prefill and decode servers, or "
        "several one-node launches is a deployment: validate, fix and groups answer per "
        "server; the others refuse it.",
        show_default=False,
    ),
]
ModelOpt = Annotated[
    Path | None,
    typer.Option(
        "--model",
        "-m",
        metavar="CONFIG_JSON",
        help="Hugging Face config.json (or its folder), or an embedded repo id "
        "(deepseek-ai/DeepSeek-V3): heads, KV heads, experts and layers prune layouts.",
        show_default=False,
    ),
]
ExampleOpt = Annotated[
    str | None,
    typer.Option(
        "--example",
        metavar="NAME",
        help="Start from an embedded example (dp-cp-conflict, "
        "deepseek-v3-prefill-cp, qwen3-moe-dp-attention).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]


_INPUTS: tuple[tuple[str, Any], ...] = (
    ("config", ConfigOpt),
    ("sets", SetOpt),
    ("sglang", SglangOpt),
    ("sglang_file", SglangFileOpt),
    ("model", ModelOpt),
    ("example", ExampleOpt),
)

R = TypeVar("R")


def layout_inputs(*names: str) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Give a command the layout input options (all of them, or those named), declared once
    here, and call it with one `sources: LayoutSources` value in their place.

    Typer builds options from a function's signature, so the decorator shows typer the
    command's own parameters with the input options inserted after its required ones, and
    folds what typer passes back into `LayoutSources`."""
    chosen = [(n, t) for n, t in _INPUTS if not names or n in names]

    def decorate(command: Callable[..., R]) -> Callable[..., R]:
        hints = get_type_hints(command, include_extras=True)
        own = [
            p.replace(annotation=hints[p.name], kind=inspect.Parameter.KEYWORD_ONLY)
            for p in inspect.signature(command).parameters.values()
            if p.name != "sources"
        ]
        required = [p for p in own if p.default is inspect.Parameter.empty]
        rest = [p for p in own if p.default is not inspect.Parameter.empty]
        inputs = [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=t)
            for n, t in chosen
        ]

        @functools.wraps(command)
        def run(**kwargs: Any) -> R:
            given = {n: kwargs.pop(n) for n, _ in chosen}
            given["sets"] = tuple(given.get("sets") or ())
            return command(sources=LayoutSources(**given), **kwargs)

        params = [*required, *inputs, *rest]
        run.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
        return run

    return decorate


def read_layout(
    sources: LayoutSources,
    sglang_version: str | None = None,
    *,
    launch_notes: bool = True,
    command: str,
    job: OneJob | None = None,
) -> LayoutInput:
    """`load_layout` for a command, with repository ids looked up in the embedded model
    catalogue and the command's flags judged by `sglang_version`'s flag table; its notes go
    to stderr. `launch_notes=False`: the caller reports the job disagreements and refused
    flags itself (validate makes them violations). A PD deployment is refused, naming
    `command` (`one_server`): a command that reads it has not asked for one. `job`: the
    sources were found to be one job already (`deployment_input`), its layout parsed there
    when the test parsed the text; nothing is read or parsed twice."""
    from meshsat.solver.cli.output import note
    from meshsat.solver.memory.models import model_config
    from meshsat.solver.packs import get_pack

    release = get_pack(sglang_version).version
    if job is None:
        sources, job = one_server(sources, command)
    layout = load_layout(sources, catalogue=model_config, release=release, launch=job.launch)
    for text in layout.notes:
        note(text)
    if launch_notes:
        from meshsat.solver.deployment.visible import visible_violations

        for issue in layout.job:
            note(f"{issue.rule}: {issue.message}")
        launches = [layout.launch] if layout.launch is not None else []
        for v in visible_violations(launches, layout.config.model_dump(), release):
            note(f"{v.rule}: {v.message}")
        # `fix` says a refused flag in its verdict ("✗ not fixed: ..."), once.
        for everywhere in () if command == "fix" else (True, False):
            said = missing_flags_text(layout, everywhere=everywhere)
            if said is not None:
                note(said)
    return layout


def missing_flags_text(layout: LayoutInput, *, everywhere: bool) -> str | None:
    """One line: the flags (or values) the release would refuse that no recorded release
    takes (`everywhere`: the launch starts on no SGLang) or that another recorded release
    takes (named: a flag of the release the command was written for), each with the
    closest it has or the values it accepts; the first few, then how many more; None when
    there are none. Only the flag as typed is clipped (a pasted one may be a megabyte):
    the hint is whole, being the release's own words and options (an ambiguous
    abbreviation's candidates, the choices of a refused value, SGLang's message naming
    what to use instead), bounded by its flag table."""
    refused = [item for item in layout.missing_flags if (item[0] in layout.elsewhere) != everywhere]
    if not refused:
        return None
    shown = listed([_refusal_text(layout, flag, hint) for flag, hint in refused], clip=False)
    n = len(refused)
    if not layout.missing_in:
        return f"{n} flag(s) no SGLang release has (its parser would refuse them): {shown}"
    if everywhere:
        releases = ", ".join(recorded_releases())
        return (
            f"SGLang's parser refuses {shown} on every recorded release ({releases}): the "
            "launch starts on none"
        )
    return f"{n} flag(s) SGLang {layout.missing_in}'s parser would refuse: {shown}"


def _refusal_text(layout: LayoutInput, flag: str, hint: str | None) -> str:
    """`--flag (hint; 0.5.19 takes it)`: one refusal, with the releases that take it."""
    said = [hint] if hint is not None else []
    takers = layout.elsewhere.get(flag)
    if takers:
        said.append(f"{', '.join(takers)} take{'s' if len(takers) == 1 else ''} it")
    return f"{clipped(flag)} ({'; '.join(said)})" if said else clipped(flag)


def one_server(sources: LayoutSources, command: str) -> tuple[LayoutSources, OneJob]:
    """The sources, with their launch text read once (`with_script`), and the one job it
    is; an `InputError` when it is a PD deployment (`refuse_deployment`)."""
    from meshsat.solver.deployment.reader import OneJob, refuse_deployment

    if (sources.sglang is None) == (sources.sglang_file is None):
        return sources, OneJob()  # no launch text, or both (load_layout refuses that)
    if "-" in (sources.sglang, str(sources.sglang_file)):
        where = "standard input"
    elif sources.sglang_file is not None:
        where = str(sources.sglang_file)
    else:
        where = "the --sglang command"
    sources = with_script(sources)
    text = sources.script or ""
    if len(text) > MAX_SCRIPT_BYTES:  # load_layout refuses it in its own words
        return sources, OneJob()
    return sources, refuse_deployment(text, where, command, script_folders(sources))
