"""The JSON API: each endpoint is one CLI command, read with the command's own options and
answered with the command's own `--format json` document.

Why through the CLI's options: a request `{"gpus": 0, ...}` is turned into the argument
list `--gpus 0 ...` and parsed by the very click command `meshsat plan` uses, without
running it. The checks, limits and error lines are the CLI's, word for word
(`meshsat: error: Invalid value for '--gpus' / '-n': ...`), and an option the CLI gains
shows up here without a line of web code. The documents come from the same builders
(`plan_document`, `validate_document`, ...), so the two cannot drift.

Nothing here reads this machine's files: options that name a path (`--config`,
`--sglang-file`, a layout command's `--model`, `--plot`) are refused, a plan's model is an
embedded repository id or a pasted config.json, and a pasted command's `--model-path` is
looked up in the embedded catalogue only.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from meshsat.solver.errors import InputError, MeshsatError
from meshsat.solver.lang.checkpoint_files import with_sglang_quantization
from meshsat.solver.lang.limits import check_shape, shown
from meshsat.solver.web.work import Answer, Work

#: Seconds a plan may run before it stops with the CLI's timeout error; the page's Cancel
#: button stops it sooner.
PLAN_DEADLINE_S = 120.0
#: Longest `fix` search a request may ask for (`--timeout`, the CLI's default is 10 s).
MAX_FIX_TIMEOUT_S = 30.0


class FieldError(InputError):
    """Bad input, with the request field it is about (the page shows the line beside it)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Endpoint:
    """One API path: the CLI command whose options it reads and how it answers."""

    command: str
    answer: Callable[[Mapping[str, Any], Mapping[str, Any], Work], Answer]
    #: Request fields other than the command's options (a pasted config.json).
    extra: frozenset[str] = frozenset()
    #: Seconds of work allowed.
    deadline_s: float = PLAN_DEADLINE_S


#: Options that name a file on this machine, or only change how the CLI prints.
REFUSED = frozenset({"config", "sglang_file", "format", "json", "verbose", "plot", "rewrite"})
#: Per command: options that change the document's shape (`groups --rank` shows one rank),
#: and a layout command's `--model`, which is a path (plan's is a catalogue id).
REFUSED_IN = {
    "groups": frozenset({"rank", "model"}),
    "validate": frozenset({"model"}),
    # The page downloads a plan's manifest; a fix's is `meshsat fix --emit lws`.
    "fix": frozenset({"model", "emit", "name", "image"}),
    "diff": frozenset({"model"}),
}


@functools.cache
def _commands() -> Mapping[str, Any]:
    """The click commands of the CLI's command functions (built from the functions, not
    from the `meshsat` app, which imports `serve` and so this module)."""
    import typer

    from meshsat.solver.cli.diff_cmd import diff_cmd
    from meshsat.solver.cli.fix_cmd import fix_cmd
    from meshsat.solver.cli.groups_cmd import groups_cmd
    from meshsat.solver.cli.plan_cmd import plan_cmd
    from meshsat.solver.cli.validate_cmd import validate_cmd

    app = typer.Typer()
    for name, command in (
        ("validate", validate_cmd),
        ("fix", fix_cmd),
        ("groups", groups_cmd),
        ("plan", plan_cmd),
        ("diff", diff_cmd),
    ):
        app.command(name)(command)
    group: Any = typer.main.get_command(app)
    return dict(group.commands)


def _key(opts: list[str]) -> str:
    longs = [o for o in opts if o.startswith("--")] or opts
    return longs[0].lstrip("-").replace("-", "_")


def _scalar(key: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise FieldError(f"{key} must be a string or a number, got {shown(value)}", key)
    return str(value)


def _options(command: str) -> tuple[dict[str, Any], list[Any]]:
    """A command's options a request may give (by request key), and its arguments."""
    refused = REFUSED | REFUSED_IN.get(command, frozenset())
    options, positional = {}, []
    for p in _commands()[command].params:
        if p.param_type_name == "argument":
            positional.append(p)
        elif _key(p.opts) not in refused:
            options[_key(p.opts)] = p
    return options, positional


def options_of(command: str) -> list[str]:
    """The request keys of a command's options (what /api/meta lists)."""
    return sorted(_options(command)[0])


def option_hint(command: str, key: str) -> dict[str, Any]:
    """An option's default and `--help` text, read from the command itself: the page's
    control for it then starts at the CLI's default and hints in the CLI's words."""
    param = _options(command)[0][key]
    default = param.default
    return {"default": getattr(default, "value", default), "help": param.help}


def parse(
    command: str, body: Mapping[str, Any], extra: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The command's parameters for a request, checked by the CLI's own option parser."""
    cmd = _commands()[command]
    options, positional = _options(command)
    # Options as `--flag=value` and the arguments after `--`: a value is then never read
    # as an option (`"old": "--help"` printed the help into the log and ended in a 500).
    argv: list[str] = []
    arguments: list[str] = ["--"]
    for p in positional:
        if p.name not in body:
            raise FieldError(f"Missing argument '{p.name.upper()}'.", p.name)
        arguments.append(_scalar(p.name, body[p.name]))
    names = {p.name for p in positional}
    for key, value in body.items():
        if key in names or key in extra or value is None:
            continue
        param = options.get(key)
        if param is None:
            allowed = ", ".join(sorted(options))
            raise FieldError(
                f"{shown(key)} is not a field of /api/{command} (fields: {allowed})", key
            )
        flag = next(o for o in param.opts if o.startswith("--"))
        if getattr(param, "is_flag", False):
            if not isinstance(value, bool):
                raise FieldError(f"{key} must be true or false, got {shown(value)}", key)
            if value:
                argv.append(flag)
        elif param.multiple:
            items = value if isinstance(value, list) else [value]
            for item in items:
                argv.append(f"{flag}={_scalar(key, item)}")
        else:
            argv.append(f"{flag}={_scalar(key, value)}")
    import typer
    from typer._click import exceptions as click_errors

    try:
        ctx = cmd.make_context(command, argv + arguments, resilient_parsing=False)
    except click_errors.ClickException as exc:
        param = getattr(exc, "param", None)
        field = _key(param.opts) if param is not None and param.opts else None
        raise FieldError(exc.format_message(), field) from None
    except (typer.Exit, typer.Abort):  # an eager option (`--help`); none is reachable now
        raise FieldError(f"/api/{command} cannot answer this request") from None
    return dict(ctx.params)


def _layout(params: Mapping[str, Any], command: str) -> Any:
    """The layout a request gives (a pasted command, `set` fields, an embedded example);
    a pasted PD deployment is refused, naming `command`, which reads one server."""
    from meshsat.solver.deployment.reader import refuse_deployment
    from meshsat.solver.inputs.layout_input import MAX_SCRIPT_BYTES, LayoutSources, load_layout
    from meshsat.solver.memory.models import catalogue_config
    from meshsat.solver.packs import get_pack

    sources = LayoutSources(
        sets=tuple(params.get("sets") or ()),
        sglang=params.get("sglang"),
        example=params.get("example"),
    )
    if not sources.given:
        raise FieldError("give a launch command (sglang), fields (set) or an example", "sglang")
    text = sources.sglang
    job = None  # the one job the text is, parsed once by the deployment test when it had to
    if text is not None and len(text) <= MAX_SCRIPT_BYTES:
        try:
            job = refuse_deployment(text, "the pasted command", command)
        except InputError as exc:
            raise FieldError(str(exc), "sglang") from None
    release = get_pack(params.get("sglang_version")).version
    launch = None if job is None else job.launch
    return load_layout(
        sources, catalogue=catalogue_config, release=release, local_files=False, launch=launch
    )


def _deployment(params: Mapping[str, Any]) -> Any:
    """The PD deployment a pasted script holds (a router, or servers of several roles),
    else None: the request is one job, read by `_layout`."""
    from meshsat.solver.cli.deployment_cmd import pasted_deployment
    from meshsat.solver.packs import get_pack

    text = params.get("sglang")
    if not text:
        return None
    release = get_pack(params.get("sglang_version")).version
    return pasted_deployment(text, tuple(params.get("sets") or ()), release)


def _server_notes(deployment: Any) -> tuple[str, ...]:
    """Each server's reading notes, prefixed with the server."""
    return tuple(f"{s.name}: {n}" for s in deployment.servers for n in s.layout.notes)


def _model(layout: Any, params: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The model config for memory figures: the command's `--model-path`, from the embedded
    catalogue; None without a GPU (the memory options then say what is missing)."""
    from meshsat.solver.memory.models import catalogue_config

    if params.get("gpu") is None and params.get("gpu_memory") is None:
        return None
    if layout.model_source is None:
        raise FieldError("--gpu needs the model: give --model-path in the command", "gpu")
    return catalogue_config(layout.model_source)


def plan_answer(body: Mapping[str, Any], params: Mapping[str, Any], work: Work) -> Answer:
    """`meshsat plan`'s answer, ranked as `--rank` says (the estimates by default)."""
    from meshsat.solver.cli.deadline import checked_timeout
    from meshsat.solver.cli.memory_options import sizing_options
    from meshsat.solver.cli.perf_options import Rank
    from meshsat.solver.cli.plan_cmd import (
        RANKING,
        check_plan_args,
        plan_document,
        plan_gpu,
        plan_layouts,
    )
    from meshsat.solver.cli.plan_perf import (
        Planned,
        no_layout,
        nothing_fits,
        perf_document,
        perf_rows,
        ranking_note,
    )
    from meshsat.solver.memory.models import catalogue_config
    from meshsat.solver.perf.accuracy import AGGREGATED
    from meshsat.solver.perf.context import checked_context_length
    from meshsat.solver.perf.workload import cli_workload

    try:
        g = plan_gpu(params["gpu_name"], params["gpu_memory"])
    except InputError as exc:
        field = "gpu" if params["gpu_memory"] is None else "gpu_memory"
        raise FieldError(str(exc), field) from None
    try:  # `timeout` as the CLI reads it, within the server's own deadline
        timeout = checked_timeout(params["timeout"])
    except MeshsatError as exc:
        raise FieldError(str(exc), "timeout") from None
    if timeout is not None and timeout <= work.deadline_s:
        work.deadline_s = timeout
        # The CLI's error, word for word (`time_limit`); it names `--timeout`, the field.
        work.late = f"plan did not finish within --timeout {params['timeout']:g} s"
    pasted = body.get("model_config")
    model_path: str | None = None
    if pasted is not None:
        if not isinstance(pasted, dict):
            raise FieldError("model_config must be a config.json object", "model_config")
        # No folder beside a pasted config: SGLang's in-config fallbacks only.
        model: Mapping[str, Any] = with_sglang_quantization(pasted, None)
    else:
        try:
            model = catalogue_config(params["model"])
        except InputError as exc:
            raise FieldError(str(exc), "model") from None
        model_path = params["model"]
    gpus, top, per_node = params["gpus"], params["top"], params["gpus_per_node"]
    memory = sizing_options(g, params["mem_fraction_static"], params["free_memory"])
    quantization = params.get("quantization")
    try:  # as the CLI: only --rank kv reads it, but a length no request can have is bad input
        length = checked_context_length(model, params["context_length"], model_path or "the model")
    except InputError as exc:
        raise FieldError(str(exc), "context_length") from None
    if params["disagg"]:
        return disagg_answer(params, work, model, g, memory, model_path, quantization)
    where = params.get("where") or ()
    version = params.get("sglang_version")
    planned = Planned.of(model_path, g, gpus, version)
    none = ""
    if params["rank"] is Rank.perf:
        check_plan_args(gpus, top, per_node)
        workload = cli_workload(
            params["isl"], params["osl"], params["ttft"], params["tpot"], no_sla=params["no_sla"]
        )
        rows_p, _ranked, shapes = perf_rows(
            model, g, gpus, workload, engine=params["engine"].value, gpus_per_node=per_node,
            top=top, memory=memory, where=where, sglang_version=version, model_path=model_path,
            quantization=quantization,
            progress=lambda done, total: work.step(estimated=done, of=total),
        )  # fmt: skip
        document = perf_document(rows_p, workload, planned, shapes)
        none = nothing_fits(rows_p, workload, model_path or "the model", gpus, g.name)
        ranking, found = ranking_note(workload), bool(rows_p) and not none
    else:
        rows = plan_layouts(
            model, g, gpus, context_length=length, gpus_per_node=per_node,
            top=top, where=where, sglang_version=version, model_path=model_path,
            quantization=quantization,
            progress=lambda seen, fit: work.step(examined=seen, fit=fit), **memory,
        )  # fmt: skip
        document, ranking, found = plan_document(rows, planned, length), RANKING, bool(rows)
    if params.get("emit") is not None and found:
        return Answer(lws_document(document, params, g, model_path), 0, ())
    if not found and not none:
        none = no_layout(
            model, model_path or "the model", quantization, g, gpus, version, tuple(where)
        )
    if not found:
        notes: tuple[str, ...] = (none,)
    else:  # under --rank perf, how far its estimates were from measured runs
        notes = (AGGREGATED.text(),) if params["rank"] is Rank.perf else ()
    return Answer(document, 0 if found else 1, (ranking, *notes))


def disagg_answer(
    params: Mapping[str, Any],
    work: Work,
    model: Mapping[str, Any],
    g: Any,
    memory: Mapping[str, Any],
    model_path: str | None,
    quantization: str | None = None,
) -> Answer:
    """`meshsat plan --disagg`'s answer: the CLI's own search (`disagg_plan`, which refuses
    the options it cannot honour) and document; progress counts role layouts, then the
    aggregated baseline's layout shapes."""
    from meshsat.solver.cli.plan_cmd import disagg_plan
    from meshsat.solver.cli.plan_disagg import (
        disagg_document,
        none_note,
        ranking_note,
        search_note,
        verdict,
    )
    from meshsat.solver.cli.plan_perf import Planned
    from meshsat.solver.perf.accuracy import DISAGG

    gpus = params["gpus"]
    rows, search, agg, workload = disagg_plan(
        model, g, gpus, params["top"], params["gpus_per_node"], params["rank"], params["isl"],
        params["osl"], params["ttft"], params["tpot"], params["no_sla"], params["engine"],
        None, params.get("where"), params.get("sglang_version"), None, memory,
        model_path=model_path, progress=lambda done, total: work.step(estimated=done, of=total),
        quantization=quantization,
    )  # fmt: skip
    if params.get("emit") is not None and rows:
        return Answer(disagg_lws_document(rows, params, g, model_path), 0, ())
    planned = Planned.of(model_path, g, gpus, params.get("sglang_version"))
    document = disagg_document(rows, search, agg, workload, planned)
    notes = [
        ranking_note(workload),
        search_note(search),
        DISAGG.text(),
        verdict(rows, agg, gpus).text,
    ]
    if not rows:
        notes.append(none_note(params["model"], gpus, g.name))
    return Answer(document, 0 if rows else 1, tuple(notes))


def lws_document(
    plan: Mapping[str, Any], params: Mapping[str, Any], g: Any, model_path: str | None
) -> dict[str, Any]:
    """`plan --emit lws`: the `pick`-th ranked layout's LeaderWorkerSet, the very text the
    CLI prints, as `{"rank", "command", "manifest"}` (the page's download)."""
    from meshsat.solver.cli.plan_cmd import picked_lws

    commands = [str(row["command"]) for row in plan["layouts"]]
    pick = params["pick"]
    manifest = picked_lws(
        commands, pick, g, params["gpus"], params["gpus_per_node"], model_path,
        params["name"], params["image"],
    )  # fmt: skip
    return {"rank": pick, "command": commands[pick - 1], "manifest": manifest}


def disagg_lws_document(
    rows: list[Any], params: Mapping[str, Any], g: Any, model_path: str | None
) -> dict[str, Any]:
    """`plan --disagg --emit lws`: the `pick`-th ranked deployment as the CLI prints it (a
    LeaderWorkerSet per role, the router's Deployment + Service), as `{"rank", "manifest"}`
    (the page's download)."""
    from meshsat.solver.cli.node_launch import node_size
    from meshsat.solver.cli.plan_cmd import picked_disagg

    pick = params["pick"]
    per_node = node_size(g, params["gpus"], params["gpus_per_node"])
    manifest = picked_disagg(
        rows, pick, per_node, model=model_path, name=params["name"], image=params["image"]
    )
    return {"rank": pick, "manifest": manifest}


def validate_answer(body: Mapping[str, Any], params: Mapping[str, Any], work: Work) -> Answer:
    from meshsat.solver.cli.launch_checks import with_launch_checks
    from meshsat.solver.cli.memory_options import (
        report_pack,
        sizing_notes,
        with_gpu_class,
        with_memory,
    )
    from meshsat.solver.cli.validate_cmd import validate_document
    from meshsat.solver.validation.validate import validate

    version = params.get("sglang_version")
    fraction, length = params.get("mem_fraction_static"), params.get("context_length")

    def memory(report: Any, layout: Any) -> Any:
        """The layout's memory verdict, as `meshsat validate --gpu` makes it."""
        return with_memory(
            report, _model(layout, params), params.get("gpu"), params.get("gpu_memory"),
            length, report_pack(version), fraction, params.get("free_memory"),
            launch=layout.memory_flags,
        )  # fmt: skip

    sized = params.get("gpu") is not None or params.get("gpu_memory") is not None
    deployment = _deployment(params)
    if deployment is not None:  # a PD script: one entry per server (docs/disaggregation.md)
        from meshsat.solver.cli.deployment_cmd import judged, server_sizing_notes

        strict = bool(params.get("strict"))
        verdict = judged(
            deployment, version, strict=strict, memory=lambda r, lay: memory(r, lay)[0]
        )
        said = server_sizing_notes(deployment, fraction, length) if sized else []
        notes = (*_server_notes(deployment), *said)
        return Answer(verdict.to_dict(), 0 if verdict.valid else 1, notes)
    layout = with_gpu_class(_layout(params, "validate"), params.get("gpu"))
    report = validate(layout.config, layout.model, sglang_version=version)
    report = with_launch_checks(report, layout, strict=bool(params.get("strict")))
    report, mem = memory(report, layout)
    document = validate_document(report, mem, manifest=layout.manifest)
    said = sizing_notes(layout.memory_flags, fraction, length) if sized else []
    return Answer(document, 0 if report.valid else 1, (*layout.notes, *said))


def fix_answer(body: Mapping[str, Any], params: Mapping[str, Any], work: Work) -> Answer:
    from meshsat.solver.cli.fix_cmd import (
        fix_document,
        fix_input,
        fix_status,
        unfixed_launch,
        unknown_note,
        with_commands,
    )
    from meshsat.solver.cli.memory_options import (
        layout_memory,
        report_pack,
        sizing_notes,
        with_gpu_class,
    )

    version = params.get("sglang_version")
    deployment = _deployment(params)
    if deployment is not None:  # a deployment: fixed server by server, as `meshsat fix` does
        from meshsat.solver.cli.deployment_cmd import in_user_words, with_unstartable
        from meshsat.solver.deployment.fix import fix_deployment
        from meshsat.solver.packs import get_pack

        if (
            params.get("gpus") is not None
            or params["top"] != 1
            or params.get("gpu")
            or params.get("gpu_memory")
        ):
            raise FieldError(
                f"{deployment.kind} is fixed server by server: gpus, top and gpu apply to one "
                "server (fix its command alone)",
                "sglang",
            )
        result = fix_deployment(
            deployment,
            sglang_version=version,
            pins=tuple(params.get("pin") or ()),
            objective=params["objective"],
            timeout_s=min(params["timeout"], MAX_FIX_TIMEOUT_S),
        )
        result = in_user_words(result, deployment, get_pack(version))
        result = with_unstartable(result, deployment)
        return Answer(result.to_dict(), 0 if result.ok else 1, _server_notes(deployment))
    layout = with_gpu_class(_layout(params, "fix"), params.get("gpu"))
    fraction = params.get("mem_fraction_static")
    memory = layout_memory(
        layout, _model(layout, params), params.get("gpu"), params.get("gpu_memory"),
        report_pack(version), fraction, params.get("free_memory"),
    )  # fmt: skip
    said = sizing_notes(layout.memory_flags, fraction) if memory is not None else []
    start = fix_input(layout, params.get("gpus"), params.get("pin") or (), version)
    report = start.search(
        layout,
        version,
        objective=params["objective"],
        top=params["top"],
        timeout_s=min(params["timeout"], MAX_FIX_TIMEOUT_S),
        memory=memory,
    )
    said += [text for text in (start.said, unknown_note(layout, report)) if text is not None]
    report = with_commands(report.also_repairing(start.fitted), layout, version)
    unfixed = unfixed_launch(layout, report, version)
    notes = (*layout.notes, *said)
    return Answer(fix_document(report, unfixed), fix_status(report, unfixed), notes)


def rewrite_answer(body: Mapping[str, Any], params: Mapping[str, Any], work: Work) -> Answer:
    from meshsat.solver.cli.validate_cmd import rewritten

    deployment = _deployment(params)
    if deployment is not None:  # each server rewritten under the pair rules (validate --rewrite)
        from meshsat.solver.cli.deployment_cmd import rewritten_deployment
        from meshsat.solver.packs import get_pack

        script, said = rewritten_deployment(deployment, get_pack(params.get("sglang_version")))
        document = {"script": script, "notes": said}
        return Answer(document, 0 if script is not None else 1, _server_notes(deployment))
    layout = _layout(params, "rewrite")
    text, notes = rewritten(layout, params.get("sglang_version"))
    return Answer({"script": text, "notes": notes}, 0 if text is not None else 1, layout.notes)


def groups_answer(body: Mapping[str, Any], params: Mapping[str, Any], work: Work) -> Answer:
    from meshsat.solver.cli.groups_cmd import need_widths
    from meshsat.solver.cli.groups_view import groups_document, with_violations
    from meshsat.solver.cli.launch_checks import launch_violations
    from meshsat.solver.groups import plan_layout
    from meshsat.solver.packs import get_pack
    from meshsat.solver.validation.report import InvalidLayoutError

    deployment = _deployment(params)
    if deployment is not None:  # a PD script: one entry per server (docs/disaggregation.md)
        import meshsat.solver.cli.groups_deployment as gd

        version = params.get("sglang_version")
        found = gd.plan_deployment(deployment, version)
        document = gd.deployment_groups_document(deployment, found)
        return Answer(document, found.status, tuple(gd.server_notes(deployment)))
    layout = _layout(params, "groups")
    try:  # as the CLI: SGLang's default in place of `--tp $TP` would be another launch's groups
        need_widths(layout)
    except InputError as exc:
        raise FieldError(str(exc), "sglang") from None
    try:
        # The CLI's default, the newest pack (`chosen_pack`); `plan_layout`'s own default
        # is the installed SGLang's, which is the library's, not the command's.
        planned = plan_layout(
            layout.config,
            layout.model,
            explain=None,
            sglang_version=get_pack(params.get("sglang_version")),
        )
    except InvalidLayoutError as invalid:
        return Answer(invalid.report.to_dict(), 1, layout.notes)
    wrong = launch_violations(planned.report, layout)
    return Answer(with_violations(groups_document(planned), wrong), int(bool(wrong)), layout.notes)


def diff_answer(body: Mapping[str, Any], params: Mapping[str, Any], work: Work) -> Answer:
    from meshsat.solver.cli.diff_cmd import diff_document
    from meshsat.solver.inputs.layout_input import LayoutSources
    from meshsat.solver.packs import get_pack

    a, b = get_pack(params["old"]), get_pack(params["new"])
    given = LayoutSources(
        sets=tuple(params.get("sets") or ()),
        sglang=params.get("sglang"),
        example=params.get("example"),
    ).given
    layout = _layout({**params, "sglang_version": params["new"]}, "diff") if given else None
    return Answer(diff_document(a, b, layout), 0, () if layout is None else layout.notes)


ENDPOINTS: Mapping[str, Endpoint] = {
    "plan": Endpoint("plan", plan_answer, frozenset({"model_config"})),
    "validate": Endpoint("validate", validate_answer),
    "fix": Endpoint("fix", fix_answer, deadline_s=MAX_FIX_TIMEOUT_S),
    "rewrite": Endpoint("validate", rewrite_answer, deadline_s=MAX_FIX_TIMEOUT_S),
    "groups": Endpoint("groups", groups_answer),
    "diff": Endpoint("diff", diff_answer),
}


def prepare(name: str, body: Any) -> tuple[Endpoint, dict[str, Any]]:
    """The endpoint and its parsed parameters, or a `FieldError` (bad input, exit 2)."""
    endpoint = ENDPOINTS.get(name)
    if endpoint is None:
        raise FieldError(f"no endpoint /api/{shown(name)} (endpoints: {', '.join(ENDPOINTS)})")
    if not isinstance(body, dict):
        raise FieldError(f"the request must be a JSON object, got {type(body).__name__}")
    check_shape(body, "the request")
    body = dict(body)
    if name == "plan" and body.get("model_config") is not None and not body.get("model"):
        body["model"] = "(pasted config.json)"
    params = parse(endpoint.command, body, endpoint.extra)
    for key in _RELEASE_KEYS:
        _release(key, params.get(key))
    if name == "plan":
        params["quantization"] = _quantization(params.get("quantization"))
    return endpoint, params


#: The request keys that name a release (`--sglang-version`, diff's OLD and NEW).
_RELEASE_KEYS = ("sglang_version", "old", "new")


def _release(key: str, version: Any) -> None:
    """A release checked before any work, so that its error names the request key (the
    CLI's line says no flag: the page had nowhere to show it). `installed` is looked up
    while answering, where its stand-in note becomes the request's."""
    from meshsat.solver.packs import get_pack

    if version is None or version == "installed":
        return
    try:
        get_pack(version)
    except InputError as exc:
        raise FieldError(str(exc), key) from None


def stand_in_notes(params: Mapping[str, Any], answer: Answer) -> Answer:
    """`answer` with the note of which pack stands in for `installed`, for every request
    that asks for it (the warning itself is said once per process)."""
    from dataclasses import replace

    from meshsat.solver.packs.registry import installed_note

    if not any(params.get(key) == "installed" for key in _RELEASE_KEYS):
        return answer
    note = installed_note()
    if note is None or note in answer.notes:
        return answer
    return replace(answer, notes=(*answer.notes, note))


def _quantization(text: str | None) -> str | None:
    """`plan --quantization` checked as the CLI checks it, but before a job starts: its
    option is a plain string that the CLI checks once the search begins, with a line
    (`quantization must be one of ...`) that names no flag for the page to place."""
    from meshsat.solver.cli.memory_options import checked_quantization

    try:
        return checked_quantization(text)
    except InputError as exc:
        raise FieldError(str(exc), "quantization") from None


_FLAG = re.compile(r"--([a-z][a-z-]*)")


def field_of(exc: BaseException, default: str | None) -> str | None:
    """The request field an error is about: the one it says, else the first option it names,
    else the view's main one."""
    field = getattr(exc, "field", None)
    if field is not None:
        return str(field)
    m = _FLAG.search(str(exc))
    return m.group(1).replace("-", "_") if m else default
