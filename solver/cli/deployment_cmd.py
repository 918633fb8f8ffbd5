"""`validate` and `fix` on a PD deployment: a launch script with a router or servers of more
than one role (`meshsat.solver.deployment`). Each server is read, checked and fixed as
the single-server commands do it, one entry per server, and the deployment rules
(`meshsat.solver.catalogue.pd_pairs`) are checked between them. A script of one job never
comes here: those commands behave as before."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from rich.markup import escape
from rich.table import Table

from meshsat.solver.cli.deployment_view import deployment_head, server_heading
from meshsat.solver.cli.formats import OutputFormat, emit
from meshsat.solver.cli.launch_checks import unstartable, with_launch_checks
from meshsat.solver.cli.output import note, out
from meshsat.solver.cli.report_view import (
    CHANGE_COLUMNS,
    VIOLATION_COLUMNS,
    print_report,
    violation_rows,
)
from meshsat.solver.deployment.fix import DeploymentFix, ServerFix, fix_deployment
from meshsat.solver.deployment.model import Deployment
from meshsat.solver.deployment.reader import OneJob, read_deployment, read_script
from meshsat.solver.deployment.validate import (
    DeploymentReport,
    RoleReport,
    judge,
    server_report,
)
from meshsat.solver.errors import InputError
from meshsat.solver.inputs.launch import read_launch_commands
from meshsat.solver.inputs.layout_input import (
    MAX_SCRIPT_BYTES,
    LayoutInput,
    LayoutSources,
    load_layout,
    script_folders,
    with_script,
)
from meshsat.solver.inputs.rewrite import applied, rewrite_each, set_env_values, set_flags
from meshsat.solver.lang.limits import listed
from meshsat.solver.packs import Pack, get_pack
from meshsat.solver.validation.report import Report


def deployment_input(
    sources: LayoutSources, sglang_version: str | None
) -> tuple[Deployment | OneJob, LayoutSources]:
    """The deployment the sources' launch text holds, or the one job it is, with the
    sources to read it from: the launch text is read once here (`with_script`) and parsed
    at most once, so `read_layout(sources, job=...)` reads neither again (standard input
    and pipes give their text only once)."""
    if sources.sglang is not None and sources.sglang_file is not None:
        raise InputError("give --sglang or --sglang-file, not both")
    sources = with_script(sources)
    text = sources.script
    if text is None or len(text) > MAX_SCRIPT_BYTES:
        return OneJob(), sources  # a larger text: the single-job reader refuses it in its words
    release = get_pack(sglang_version).version
    rest = replace(sources, sglang=None, sglang_file=None, script=None)
    found = read_script(text, _loader(release), rest, search=script_folders(sources))
    return found, sources


def pasted_deployment(text: str, sets: tuple[str, ...], release: str) -> Deployment | None:
    """The deployment a pasted text holds, read with nothing from this machine (the web
    app's requests): repository ids from the embedded catalogue only."""
    if len(text) > MAX_SCRIPT_BYTES or text.strip() == "-":
        return None
    return read_deployment(text, _loader(release, local_files=False), LayoutSources(sets=sets))


def _loader(release: str, *, local_files: bool = True) -> Any:
    """Each server read as `read_layout` reads one job: repository ids from the embedded
    catalogue, the release's flag table (its notes go to stderr, prefixed with the
    server, when it is validated)."""
    from meshsat.solver.memory.models import catalogue_config, model_config

    catalogue = model_config if local_files else catalogue_config

    def load(rest: LayoutSources, **kw: Any) -> LayoutInput:
        return load_layout(
            rest, catalogue=catalogue, release=release, local_files=local_files, **kw
        )

    return load


def validate_deployment_cmd(
    deployment: Deployment,
    sglang_version: str | None,
    fmt: OutputFormat,
    *,
    strict: bool,
    verbose: bool,
    memory: Callable[[Report, LayoutInput], Report] | None = None,
    notes: Sequence[str] = (),
) -> int:
    """`meshsat validate` on a deployment; the exit status. `memory` folds each server's
    memory verdict into its report (MEM-FIT, with `--gpu`); `notes` follow the servers'
    reading notes (how each server's memory is sized: `server_sizing_notes`)."""
    for server in deployment.servers:
        for text in server.layout.notes:
            note(f"{server.name}: {text}")
    for text in notes:
        note(text)
    verdict = judged(deployment, sglang_version, strict=strict, memory=memory)
    if fmt is OutputFormat.table:
        print_deployment(verdict, verbose=verbose)
    else:
        emit(fmt, verdict.to_dict(), _rows(verdict), columns=("server", *VIOLATION_COLUMNS))
    return 0 if verdict.valid else 1


def server_sizing_notes(
    deployment: Deployment, mem_fraction_static: float | None, context_length: int | None
) -> list[str]:
    """`sizing_notes` of each server's own command, prefixed with the server: each is sized
    with its own memory flags under meshsat's options."""
    from meshsat.solver.cli.memory_options import sizing_notes

    return [
        f"{server.name}: {text}"
        for server in deployment.servers
        for text in sizing_notes(server.layout.memory_flags, mem_fraction_static, context_length)
    ]


def judged(
    deployment: Deployment,
    sglang_version: str | None,
    *,
    strict: bool,
    memory: Callable[[Report, LayoutInput], Report] | None = None,
) -> DeploymentReport:
    """The deployment's verdict with each server's launch checks as `validate` makes them
    for one job (flags the release refuses: CMD-UNKNOWN-FLAG, an error with `strict`)."""
    pack = get_pack(sglang_version)
    reports: dict[str, Report] = {}
    for server in deployment.servers:
        report = server_report(server, pack)
        # server_report made the job's violations and each node's own GPU-id checks, and
        # left undecided what the launch's unknown values leave open
        layout = replace(server.layout, job=(), nodes=(), unknown={})
        report = with_launch_checks(report, layout, strict=strict)
        reports[server.name] = report if memory is None else memory(report, server.layout)
    return judge(deployment, pack, reports)


def _rows(verdict: DeploymentReport) -> list[dict[str, Any]]:
    rows = [{"server": r.server, **row} for r in verdict.roles for row in violation_rows(r.report)]
    rows += [
        {"server": "/".join(f.servers) or "deployment", "severity": f.severity, "rule": f.rule,
         "message": f.message, "detail": ""}
        for f in verdict.findings
    ]  # fmt: skip
    return rows


def print_deployment(verdict: DeploymentReport, *, verbose: bool = False) -> None:
    for role in verdict.roles:
        out.print(
            server_heading(role.server, role.role, role.lines, _gpus(role), role.replicas),
            highlight=False,
        )
        print_report(role.report, verbose=verbose)
    print_findings(verdict, verbose=verbose)
    mark = (
        "[green]✓ valid deployment[/green]" if verdict.valid else "[red]✗ invalid deployment[/red]"
    )
    out.print(mark)


def _gpus(role: RoleReport) -> int | None:
    """The server's GPU count, None where it reads a value its launch leaves unknown."""
    return None if role.report.reads_unknown("gpus_used") else role.gpus


def print_findings(verdict: DeploymentReport, *, verbose: bool = False) -> None:
    """The deployment's head line and what its rules found between the servers (`validate`
    and `groups` on a deployment)."""
    known = all(_gpus(role) is not None for role in verdict.roles)
    head = deployment_head(verdict.servers, verdict.routers, verdict.gpus if known else None)
    if not verdict.findings:
        out.print(f"[green]✓[/green] {head}: the servers agree (SGLang {verdict.sglang_version})")
    else:
        table = Table(title=head, title_justify="left", show_lines=True)
        for col in ("rule", "servers", "says", "fix"):
            table.add_column(col, no_wrap=col == "rule")
        for f in verdict.findings:
            rule = f.rule if f.severity == "error" else f"{f.rule} (warning)"
            table.add_row(
                escape(rule), escape(listed(f.servers, ", ")), escape(f.message), escape(f.hint)
            )
        out.print(table)
    if verdict.undecided and verbose:
        out.print("[dim]not decided here:[/dim] " + escape(", ".join(verdict.undecided)))


def fix_deployment_cmd(
    deployment: Deployment,
    sglang_version: str | None,
    fmt: OutputFormat,
    *,
    pins: tuple[str, ...],
    objective: str,
    timeout_s: float,
) -> int:
    """`meshsat fix` on a deployment; the exit status."""
    result = fix_deployment(
        deployment,
        sglang_version=sglang_version,
        pins=pins,
        objective=objective,
        timeout_s=timeout_s,
    )
    result = in_user_words(result, deployment, get_pack(sglang_version))
    result = with_unstartable(result, deployment)
    if fmt is OutputFormat.table:
        _print_fix(result)
    else:
        rows: list[dict[str, Any]] = [
            {"server": s.server, "field": c.field, "old": c.old, "new": c.new}
            for s in result.servers
            for c in (*s.forced, *(s.report.best.changes if s.ok else ()))
        ]
        rows += [
            {"server": s.server, "field": flag, "old": None, "new": value}
            for s in result.servers
            for flag, value in s.flags
        ]
        rows += [
            {"server": f"router@{r.line}", "field": "--" + kind, "old": None, "new": url}
            for r in result.routers
            for url, kind in r.moves
        ]
        rows += [
            {"server": f"router@{r.line}", "field": f"bootstrap port of {p.url}", "old": p.old,
             "new": p.new}
            for r in result.routers
            for p in r.ports
        ]  # fmt: skip
        emit(fmt, result.to_dict(), rows, columns=("server", *CHANGE_COLUMNS))
    return 0 if result.ok else 1


def with_unstartable(result: DeploymentFix, deployment: Deployment) -> DeploymentFix:
    """The fix, each server's verdict after it holding that server's flags (or values) no
    recorded release's parser takes (`launch_checks.unstartable`): the fix edits only
    layouts, so a deployment with one is not fixed (exit 1, `fixed` false), as `fix` says
    of one server."""
    refused = {s.name: unstartable(s.layout) for s in deployment.servers}
    if result.after is None or not any(refused.values()):
        return result
    roles = []
    for role in result.after.roles:
        v = refused.get(role.server)
        if v is not None:
            violations = (*role.report.violations, v)
            role = replace(role, report=replace(role.report, valid=False, violations=violations))
        roles.append(role)
    return replace(result, after=replace(result.after, roles=tuple(roles), valid=False))


def in_user_words(result: DeploymentFix, deployment: Deployment, pack: Pack) -> DeploymentFix:
    """Each server's fixes as its own launch (its first node's) with the layout edited
    (`fixed_command`, what `fix` prints for one server) and the flags it takes from its
    prefill set (`set_flags`, as `--rewrite` sets them): every other word stays as typed.
    A manifest's list is not shell text; its servers keep the rendered command, with the
    model they name (SGLang needs `--model-path`), as `fix` renders one server's."""
    from meshsat.solver.inputs.rewrite import fixed_command
    from meshsat.solver.repair.fix import command_line

    spelling = "attn_dp_size" not in pack.absent_fields
    servers = {s.name: s for s in deployment.servers}
    fixed: list[ServerFix] = []
    for found in result.servers:
        server = servers.get(found.server)
        if server is None:
            fixed.append(found)
            continue
        if server.commands[0].form != "shell":
            path = server.layout.model_path
            rendered = tuple(
                replace(f, command_line=command_line(f.config, pack, path))
                for f in found.report.fixes
            )
            fixed.append(replace(found, report=replace(found.report, fixes=rendered)))
            continue
        text, launch = deployment.text, server.commands[0]
        if found.flags or found.relisted is not None:
            index = server.indices[0]
            text = set_flags(text, {index: list(found.flags)})
            text = set_env_values(text, {index: _relisted_values(found)})[0]
            launch = read_launch_commands(text)[index]
        path = server.layout.model_path
        fixes = tuple(
            replace(
                f,
                command_line=fixed_command(
                    text, launch, f.config, attn_dp_spelling=spelling, model_path=path
                ),
            )
            for f in found.report.fixes
        )
        fixed.append(replace(found, report=replace(found.report, fixes=fixes)))
    return replace(result, servers=tuple(fixed))


def _relisted_values(found: ServerFix) -> list[tuple[str, str]]:
    """The visible-devices list a server's fix moves it to, as the value to write."""
    relisted = found.relisted
    return [] if relisted is None else [(relisted.variable, ",".join(map(str, relisted.new)))]


def _print_fix(result: DeploymentFix) -> None:
    for s in result.servers:
        if not s.ok:
            out.print(
                f"[red]✗ {escape(s.server)}: no fix[/red] (meshsat fix on its command says why)"
            )
            continue
        changes = [*s.forced, *s.report.best.changes]
        said = ", ".join(f"{c.field}: {c.old} -> {c.new}" for c in changes) or _unchanged(s)
        flags = ", ".join(f"{f} {v}" for f, v in s.flags)
        out.print(
            f"[bold]{escape(s.server)}[/bold]: {escape(said)}"
            + (f"; {escape(flags)}" if flags else "")
        )
        command = s.report.best.command_line
        out.print(f"  [bold]command:[/bold] {escape(command)}", soft_wrap=True)
        for said in s.notes:
            out.print(f"  [yellow]note:[/yellow] {escape(said)}", soft_wrap=True)
    for repair in result.routers:
        for said in repair.said():
            out.print(escape(said), soft_wrap=True)
    if result.after is not None:
        print_deployment(result.after)


def _prefill_url(words: Sequence[Any], url: str) -> int | None:
    """The index of `url` among a router's `--prefill` values (None: not there as a word
    of its own)."""
    flag = ""
    for i, word in enumerate(words):
        if word.text.startswith("--"):
            flag = word.text
        elif flag == "--prefill" and word.text == url:
            return i
    return None


def _port_edit(words: Sequence[Any], url: str, port: int) -> tuple[int, int, str] | None:
    """The edit that gives a `--prefill URL` the bootstrap port `port`: the port written
    after it replaced, else the port added after the URL."""
    at = _prefill_url(words, url)
    if at is None:
        return None
    after = words[at + 1].text if at + 1 < len(words) else ""
    if after.isdigit() or after.lower() == "none":
        return words[at + 1].pos, words[at + 1].end, str(port)
    return words[at].end, words[at].end, f" {port}"


def _unchanged(found: ServerFix) -> str:
    """What a server's fix says when its first node's layout stays."""
    if not found.every_node:
        return "no layout change"
    lines = ", ".join(map(str, found.every_node))
    return (
        f"the node(s) on line(s) {lines} take this layout (JOB-ONE-LAYOUT; "
        "validate --rewrite writes it into every node)"
    )


def _role_edit(words: Sequence[Any], url: str, kind: str) -> tuple[int, int, str] | None:
    """The edit that lists a router's `url` under `--{kind}`: its flag word turned into
    the other, written apart (`--prefill URL`) or joined (`--prefill=URL`) where it
    stands as written (not through a variable); None where no flag names it so."""
    for i, word in enumerate(words):
        if word.via is not None:
            continue
        name, eq, inline = word.text.partition("=")
        if name not in ("--prefill", "--decode"):
            continue
        if eq and inline == url:
            return word.pos, word.pos + len(name), f"--{kind}"
        if not eq and i + 1 < len(words) and words[i + 1].text == url:
            return word.pos, word.end, f"--{kind}"
    return None


def _rewritten_routers(text: str, result: DeploymentFix) -> tuple[str, list[str]]:
    """The routers' repairs written in: a moved URL's `--prefill`/`--decode` flag turned
    into the other (when the flag names that URL alone), `--pd-disaggregation` added."""
    routers = [c for c in read_launch_commands(text, routers=True) if c.router]
    by_line = {c.line: c for c in routers}
    edits: list[tuple[int, int, str]] = []
    notes: list[str] = []
    for repair in result.routers:
        command = by_line.get(repair.line)
        if command is None or command.form != "shell":
            notes.append(f"line {repair.line}: repair the router by hand")
            continue
        words = command.words
        for url, kind in repair.moves:
            edit = _role_edit(words, url, kind)
            if edit is None:
                notes.append(f"line {repair.line}: move {url} to --{kind} by hand")
                continue
            edits.append(edit)
            notes.append(f"router@{repair.line}: {url} -> --{kind}")
        if repair.add_pd:
            edits.append((words[-1].end, words[-1].end, " --pd-disaggregation"))
            notes.append(f"router@{repair.line}: --pd-disaggregation")
        for port in repair.ports:
            edit = _port_edit(words, port.url, port.new)
            if edit is None:
                said = f"give {port.url} bootstrap port {port.new} by hand"
                notes.append(f"line {repair.line}: {said}")
                continue
            edits.append(edit)
        notes += [line for line in repair.said() if "bootstrap port" in line]
    return applied(text, edits), notes


def rewritten_deployment(deployment: Deployment, pack: Pack) -> tuple[str | None, list[str]]:
    refused = {s.name: unstartable(s.layout) for s in deployment.servers}
    said = [f"{name}: {v.message}; {v.hint}" for name, v in refused.items() if v is not None]
    if said:  # the rewrite edits only layouts: the script would not start
        return None, [f"the script is not rewritten: {text}" for text in said]
    result = fix_deployment(deployment, sglang_version=pack)
    if result.fixed is None:
        return None, [
            "a server has no valid layout near its own (meshsat fix says why); the script "
            "is unchanged"
        ]
    flags: dict[int, list[tuple[str, str]]] = {}
    by_name = {s.server: s for s in result.servers}
    for server in result.fixed.servers:
        for index in server.indices:
            flags.setdefault(index, []).extend(by_name[server.name].flags)
    text = set_flags(deployment.text, flags)
    lists: dict[int, list[tuple[str, str]]] = {}
    for server in result.fixed.servers:
        lists.setdefault(server.indices[0], []).extend(_relisted_values(by_name[server.name]))
    text, notes = set_env_values(text, lists)
    spelling = "attn_dp_size" not in pack.absent_fields
    targets = [(server.layout.config, server.indices) for server in result.fixed.servers]
    text, said_of = rewrite_each(text, targets, attn_dp_spelling=spelling)
    for server, said in zip(result.fixed.servers, said_of, strict=True):
        notes += said
        fix = by_name[server.name]
        changes = [*fix.forced, *(fix.report.best.changes if fix.ok else ())]
        notes += [f"{server.name}: {c.field}: {c.old} -> {c.new}" for c in changes]
        notes += [f"{server.name}: {f} {v}" for f, v in fix.flags]
        notes += [f"{server.name}: {note}" for note in fix.notes]
    text, said = _rewritten_routers(text, result)
    notes += said
    if not result.ok and result.after is not None:
        left = ", ".join(result.after.broken)
        notes.append(f"still broken after the rewrite (fix by hand): {left}")
    return text, notes
