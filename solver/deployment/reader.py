"""A launch script → a `Deployment`: which launches are nodes of one server, which role
each server plays, and what each router says about the servers.

How launches are grouped into servers (docs/disaggregation.md):
- The role is `--disaggregation-mode` (prefill, decode; unset or null: aggregated).
  Servers of different roles are never nodes of each other.
- Within a role, launches with `--nnodes N > 1` and the same `--dist-init-addr` as written
  (a shell expansion compares as its text, so `${PREFILL_MASTER}:5000` groups the prefill
  nodes of a template) and the same N are the nodes of one server; a `--node-rank` seen
  again starts the next server of that family, unless the address is literal text (one
  address is one rendezvous: a repeated rank is JOB-NODE-RANKS). A node template (its
  `--node-rank` an expansion) written again word for word is the same server's template
  pasted twice (`_same_template`). A launch with one node is a server.
- A manifest object's `spec.replicas` (a LeaderWorkerSet's groups) makes its server that
  many servers of the role (`Server.replicas`), each its own job of `size` nodes: one
  entry, counted that many times.
- A script is a deployment when it holds a router, servers of more than one role, or
  several launches of which one runs on one node (a server of its own); any other script
  is one job, read as before (`parse_sglang_command`, the JOB-* rules).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from meshsat.solver.catalogue.pd_pairs import (
    DEFAULT_BACKEND,
    DEFAULT_BOOTSTRAP_PORT,
    DEFAULT_KV_CACHE_DTYPE,
    DEFAULT_PORT,
)
from meshsat.solver.deployment.model import (
    Deployment,
    Endpoint,
    Facts,
    Role,
    Router,
    Server,
    Target,
    kind_text,
)
from meshsat.solver.errors import InputError
from meshsat.solver.inputs.accelerator import CUDA_VISIBLE_DEVICES_ENV
from meshsat.solver.inputs.k8s import ReplicasError, looks_like_manifest, pods_are_nodes
from meshsat.solver.inputs.launch import (
    LAUNCH_MODULES,
    ROUTER_MODULES,
    LaunchCommand,
    Word,
    read_launch_commands,
)
from meshsat.solver.inputs.layout_input import LayoutInput, LayoutSources
from meshsat.solver.inputs.sglang_cmdline import ParsedCommandLine, parse_job

#: How a deployment's servers are read into layouts: `load_layout` with the caller's
#: catalogue, release and model (the CLI's `read_layout` or the API's own).
LoadServer = Callable[..., LayoutInput]

#: Hosts that accept any address: a router's URL to any host may reach them.
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "[::]"})
#: Hosts that reach only the machine they are named on.
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass(frozen=True)
class _Flag:
    """A flag's value in one launch: its text, and whether it is a shell expansion."""

    text: str
    expansion: bool


def _flag(command: LaunchCommand, *names: str) -> _Flag | None:
    """The last value given to any of `names` (`--flag value` or `--flag=value`)."""
    found: _Flag | None = None
    words = command.words
    for i, word in enumerate(words):
        name, eq, inline = word.text.partition("=")
        if name not in names:
            continue
        if eq:
            found = _Flag(inline, word.expansion is not None)
        elif i + 1 < len(words) and not words[i + 1].text.startswith("--"):
            found = _Flag(words[i + 1].text, words[i + 1].expansion is not None)
    return found


def flag_text(command: LaunchCommand, name: str) -> str | None:
    """A flag's last value as written (a shell expansion as its text); None when absent."""
    found = _flag(command, name)
    return None if found is None else found.text


def _has(command: LaunchCommand, name: str) -> bool:
    return any(w.text == name or w.text.startswith(name + "=") for w in command.words)


def _int(command: LaunchCommand, name: str, default: int | None) -> int | None:
    """A flag's integer value; its default when absent; None when not known here. A value
    that is no integer is refused as SGLang's argparse refuses it (`type=int`), with the
    launch's line."""
    flag = _flag(command, name)
    if flag is None:
        return default
    if flag.expansion:
        return None
    try:
        return int(flag.text)
    except ValueError:
        raise InputError(
            f"line {command.line}: argument {name}: invalid int value: {flag.text!r}"
        ) from None


def _text(flag: _Flag | None, default: str | None) -> str | None:
    if flag is None:
        return default
    return None if flag.expansion else flag.text


def role_of(command: LaunchCommand) -> Role:
    mode = _text(_flag(command, "--disaggregation-mode"), "null")
    if mode == "prefill":
        return "prefill"
    return "decode" if mode == "decode" else "aggregated"


#: The flag SGLang reads for each fact the pair rules compare (`Facts`' field -> flag); the
#: decode's fix sets the same flags (`fix.py`).
FACT_FLAGS: dict[str, str] = {
    "model": "--model-path",
    "backend": "--disaggregation-transfer-backend",
    "page_size": "--page-size",
    "kv_cache_dtype": "--kv-cache-dtype",
    "bootstrap_port": "--disaggregation-bootstrap-port",
}
#: Where a server listens (`endpoint_of`), which the router rules read.
ENDPOINT_FLAGS = ("--host", "--port")
#: The flags `facts_of` and `endpoint_of` read, and the GPU list HOST-GPU-OVERLAP reads: a
#: deployment's rules check them, so a server of a deployment does not list them among the
#: flags meshsat does not check.
DEPLOYMENT_FLAGS = frozenset((*FACT_FLAGS.values(), *ENDPOINT_FLAGS, CUDA_VISIBLE_DEVICES_ENV))


def facts_of(command: LaunchCommand) -> Facts:
    """The flags the pair rules read, with SGLang's defaults for what is absent (page size:
    "default", which SGLang resolves per attention backend)."""
    model = _flag(command, FACT_FLAGS["model"], "--model")
    backend = _text(_flag(command, FACT_FLAGS["backend"]), DEFAULT_BACKEND)
    if backend == "mooncake_tcp":  # 0.5.x: mooncake with its TCP transport forced
        backend = "mooncake"
    page = _flag(command, FACT_FLAGS["page_size"])
    return Facts(
        model=None if model is None else model.text,
        backend=backend,
        bootstrap_port=_int(command, FACT_FLAGS["bootstrap_port"], DEFAULT_BOOTSTRAP_PORT),
        page_size=_text(page, "default"),
        kv_cache_dtype=_text(_flag(command, FACT_FLAGS["kv_cache_dtype"]), DEFAULT_KV_CACHE_DTYPE),
    )


def _server_job(nodes: tuple[LaunchCommand, ...], search: tuple[Path, ...]) -> ParsedCommandLine:
    """One server's nodes read as one job, without the flags the deployment rules read
    among the unchecked ones."""
    job = parse_job(nodes, search)
    job.ignored = [flag for flag in job.ignored if flag not in DEPLOYMENT_FLAGS]
    return job


def endpoint_of(command: LaunchCommand) -> Endpoint:
    host_flag, port_flag = ENDPOINT_FLAGS
    host = _text(_flag(command, host_flag), "127.0.0.1")
    return Endpoint(host, _int(command, port_flag, DEFAULT_PORT))


def _family(command: LaunchCommand) -> tuple[Role, str | None, int | None]:
    addr = _flag(command, "--dist-init-addr")
    return (
        role_of(command),
        None if addr is None else addr.text,
        _int(command, "--nnodes", 1),
    )


def _literal_addr(command: LaunchCommand) -> bool:
    """Whether the launch gives `--dist-init-addr` as literal text: one address is one
    rendezvous, so launches of several nodes that give it are nodes of one job even where a
    `--node-rank` repeats (a copied line whose rank was not edited: JOB-NODE-RANKS). A
    template's `${MASTER}:5000` may be a different address each time it runs."""
    addr = _flag(command, "--dist-init-addr")
    return addr is not None and not addr.expansion and "$" not in addr.text


def group_servers(
    commands: tuple[LaunchCommand, ...],
) -> list[tuple[Role, list[int]]]:
    """Server launches → servers, each its role and the indices of its launches."""
    open_jobs: dict[tuple[Role, str | None, int | None], tuple[list[int], set[object]]] = {}
    servers: list[tuple[Role, list[int]]] = []
    for i, command in enumerate(commands):
        family = _family(command)
        role, _, nnodes = family
        rank_flag = _flag(command, "--node-rank")
        rank: object = rank_flag.text if rank_flag is not None else "0"
        if nnodes == 1:
            servers.append((role, [i]))
            continue
        job = open_jobs.get(family)
        if job is not None and rank_flag is not None and _same_template(command, commands, job[0]):
            job[0].append(i)  # one template pasted again: the same server's nodes
            continue
        if job is None or (rank in job[1] and not _literal_addr(command)):
            job = ([i], {rank})
            open_jobs[family] = job
            servers.append((role, job[0]))
            continue
        job[0].append(i)
        job[1].add(rank)
    return servers


def _same_template(
    command: LaunchCommand, commands: tuple[LaunchCommand, ...], job: list[int]
) -> bool:
    """Whether `command` is a node template (its `--node-rank` a shell expansion: one line
    that every node of its server runs, `--node-rank $NODE_RANK`) written word for word as
    one already among `job`'s launches: the same template pasted twice is the same
    server's nodes, not a second server of as many GPUs (a plan's node commands pasted
    twice read as twice the servers and GPUs)."""
    rank = _flag(command, "--node-rank")
    if rank is None or (not rank.expansion and "$" not in rank.text):
        return False
    words = [w.text for w in command.words]
    return any([w.text for w in commands[j].words] == words for j in job)


def _may_be_deployment(text: str) -> bool:
    """Whether the text can hold a router, a PD role or several launches at all: a cheap
    test before the shell is read (a pasted megabyte of one job is read once, as before;
    a text of several launches is read once too, its launches handed to the one-job
    reader when they are the nodes of one job)."""
    if "disaggregation-mode" in text or any(m in text for m in ROUTER_MODULES):
        return True
    return sum(text.count(m) for m in LAUNCH_MODULES) + text.count("sglang serve") > 1


def is_deployment(commands: tuple[LaunchCommand, ...]) -> bool:
    """A router, servers of more than one role, or several launches of which one runs on
    one node (no launch of `--nnodes 1` is a node of another's job: SGLang starts each as a
    server of its own; a page that shows a two-node job and then a one-node alternative
    is not three nodes that disagree): what makes a script a deployment. Launches of
    several nodes each stay one job, whose disagreements the JOB-* rules report (two
    `--node-rank 0` are a numbering mistake, not two servers), and so does a text whose
    `--nnodes` is not a number."""
    launches = tuple(c for c in commands if not c.router)
    roles = {role_of(c) for c in launches}
    if any(c.router for c in commands) or len(roles) > 1:
        return True
    try:
        return len(launches) > 1 and any(_family(c)[2] == 1 for c in launches)
    except InputError:
        return False


def _launches(text: str) -> tuple[LaunchCommand, ...] | None:
    """Every launch of a text that may be a deployment, routers included; None when it
    names no PD flag or router, or when the shell refuses it (the single-job reader then
    says what is wrong, in its own words)."""
    if not _may_be_deployment(text):
        return None
    try:
        return _read(text)
    except ReplicasError:
        raise  # a server scaled to nothing: no reading of the text checks it
    except InputError:
        return None


def _read(text: str) -> tuple[LaunchCommand, ...]:
    return tuple(_pods_as_nodes(c) for c in read_launch_commands(text, routers=True))


def _pods_as_nodes(command: LaunchCommand) -> LaunchCommand:
    """A StatefulSet whose pods are the nodes of one server (`k8s.pods_are_nodes`) runs one
    server, not `spec.replicas` of them: its replicas become the job's group of pods, which
    JOB-GROUP-SIZE holds `--nnodes` to, as a LeaderWorkerSet's group size."""
    try:
        nnodes = _int(command, "--nnodes", 1)
    except InputError:
        return command
    if command.router or not pods_are_nodes(command.owner, nnodes):
        return command
    return replace(command, replicas=1, group_size=command.replicas)


@dataclass(frozen=True)
class OneJob:
    """A launch text found to be one job, not a deployment, with the job's layout when the
    test had to parse the text (`parse_job` of its launches): `load_layout(launch=...)`
    takes it instead of parsing the text again. None when the text was not parsed here (no
    PD flag or router in it, a shell error) or is a Kubernetes manifest, whose single-job
    reading judges one container, not every launch the manifest lists."""

    launch: ParsedCommandLine | None = None


def _one_job(
    commands: tuple[LaunchCommand, ...] | None, text: str, search: tuple[Path, ...]
) -> OneJob:
    if commands is None or looks_like_manifest(text):
        return OneJob()
    return OneJob(parse_job(commands, search))


@dataclass(frozen=True)
class Shape:
    """How many servers and routers a deployment's script holds, read without reading any
    server's layout: what a command that takes one server says when it refuses one."""

    servers: int
    routers: int

    def text(self) -> str:
        def counted(n: int, noun: str) -> str:
            return f"{n} {noun}" + ("" if n == 1 else "s")

        return f"{counted(self.servers, 'server')}, {counted(self.routers, 'router')}"


def _shape(commands: tuple[LaunchCommand, ...]) -> Shape:
    launches = tuple(c for c in commands if not c.router)
    try:
        servers = sum(launches[nodes[0]].replicas for _, nodes in group_servers(launches))
    except InputError:  # a non-integer --nnodes: count the launches
        servers = sum(c.replicas for c in launches)
    return Shape(servers, sum(c.router for c in commands))


def refuse_deployment(text: str, where: str, command: str, search: tuple[Path, ...] = ()) -> OneJob:
    """The one job `text` is, for `command`, which reads one server; an `InputError` when
    `text` is a deployment: taking the script's first server would answer for a server
    the user did not ask about. `search`: where a `--config FILE` may be."""
    commands = _launches(text)
    if commands is not None and is_deployment(commands):
        kind = kind_text((role_of(c) for c in commands if not c.router), _shape(commands).routers)
        raise InputError(
            f"{where} holds {kind} ({_shape(commands).text()}): {command} takes one "
            "server; check the deployment with validate or fix, or give one server's command"
        )
    return _one_job(commands, text, search)


def read_script(
    text: str,
    load: LoadServer,
    sources: LayoutSources | None = None,
    *,
    search: tuple[Path, ...] = (),
) -> Deployment | OneJob:
    """The deployment `text` launches, or the one job it is: the text is parsed once here,
    and a job's layout handed on (`OneJob`) for the single-server path. `load(sources,
    launch=parsed)` reads one server's layout (model facts, release); `search`: where a
    `--config FILE` may be."""
    commands = _launches(text)
    if commands is None or not is_deployment(commands):
        return _one_job(commands, text, search)
    return _deployment(commands, text, load, sources or LayoutSources(), search)


def read_deployment(
    text: str,
    load: LoadServer,
    sources: LayoutSources | None = None,
    *,
    always: bool = False,
    search: tuple[Path, ...] = (),
) -> Deployment | None:
    """The deployment `text` launches, or None when it is one job (the single-server path;
    with `always`, a deployment of that one server). `load(sources, launch=parsed)` reads
    one server's layout (model facts, release); `search`: where a `--config FILE` may be."""
    if not always:
        found = read_script(text, load, sources, search=search)
        return found if isinstance(found, Deployment) else None
    commands = _read(text)
    if is_deployment(commands):
        return _deployment(commands, text, load, sources or LayoutSources(), search)
    launches = tuple(commands)  # one job: its launches are its nodes, as before
    layout = load(sources or LayoutSources(), launch=parse_job(launches, search))
    server = Server(
        role_of(launches[0]),
        launches,
        tuple(range(len(launches))),
        layout,
        endpoint_of(launches[0]),
        facts_of(launches[0]),
        launches[0].replicas,
    )
    return Deployment((server,), (), text)


def _deployment(
    commands: tuple[LaunchCommand, ...],
    text: str,
    load: LoadServer,
    sources: LayoutSources,
    search: tuple[Path, ...],
) -> Deployment:
    launches = tuple(c for c in commands if not c.router)
    servers: list[Server] = []
    for role, indices in group_servers(launches):
        nodes = tuple(launches[i] for i in indices)
        layout = load(sources, launch=_server_job(nodes, search))
        head = nodes[0]
        servers.append(
            Server(
                role, nodes, tuple(indices), layout, endpoint_of(head), facts_of(head),
                head.replicas,
            )
        )  # fmt: skip
    routers = tuple(router_of(c) for c in commands if c.router)
    return Deployment(tuple(servers), routers, text)


def _endpoint(url: str, command: LaunchCommand | None = None, flag: str = "") -> Endpoint:
    """Where a router's URL points. A URL without a port is reached at its scheme's
    (80, or 443 for https), as the router's HTTP client reaches it; a port that is no number
    (or out of range) is refused with the router's line: the router cannot reach the
    server, and matching it to every server hid that. A shell expansion or placeholder in
    the URL leaves what it may stand for unknown here (None)."""
    unknown = "$" in url or "<" in url
    parts = urlsplit(url if "://" in url else "http://" + url)
    try:
        port = parts.port
    except ValueError:
        if unknown:
            return Endpoint(None, None)
        where = "" if command is None else f"line {command.line}: "
        raise InputError(
            f"{where}{_module(command)}argument {flag}: the port of {url!r} is not a "
            "number from 0 to 65535: the router cannot reach that server"
        ) from None
    if port is None:
        port = 443 if parts.scheme.lower() == "https" else 80
    host = parts.hostname
    if host is not None and unknown:
        host = None
    return Endpoint(host, port)


def _module(command: LaunchCommand | None) -> str:
    return "" if command is None else command.program.removeprefix("python -m ") + ": "


#: The router of SGLang's PD deployments: its `--prefill URL [BOOTSTRAP_PORT]`.
LAUNCH_ROUTER = "sglang_router.launch_router"
#: Where each router program listens when its launch gives no `--host`/`--port`:
#: sglang_router's `RouterArgs` (host 127.0.0.1, port 30000; `router_args.py`), 0.4.6's
#: mini_lb (`--host` 0.0.0.0, `--port` 8000). launch_lb's are not modelled (None: its
#: listening port is checked only where written).
ROUTER_LISTENS: dict[str, Endpoint] = {
    LAUNCH_ROUTER: Endpoint("127.0.0.1", 30000),
    "sglang.srt.disaggregation.mini_lb": Endpoint("0.0.0.0", 8000),
}


def router_of(command: LaunchCommand) -> Router:
    """What a router's launch names: `launch_router --prefill URL [PORT] --decode URL`,
    or in its regular mode `--worker-urls URL...`; `mini_lb`/`launch_lb --prefill URL...
    --decode URL... --prefill-bootstrap-ports P...`.

    Each flag takes the words its argparse declaration gives it (`_taken`), in either
    spelling (`--flag value`, `--flag=value`): the words a flag does not take are the
    parser's "unrecognized arguments", which it refuses (`--decode URL1 URL2`: `--decode`
    takes one URL; `--prefill=URL 8998`: the `=` form takes one word), so meshsat refuses
    them too rather than count servers the router never sees."""
    module = command.program.removeprefix("python -m ")
    prefill: list[Target] = []
    decode: list[Target] = []
    workers: list[Target] = []
    ports: list[int] | None = None
    unrecognized: list[str] = []
    for flag, taken, rest in _router_flags(command):
        unrecognized += [w.text for w in rest]
        values = [w.text for w in taken]
        if not values and flag in _URL_LISTS:
            raise InputError(
                f"line {command.line}: {module}: argument {flag}: expected "
                f"{_EXPECTED[_nargs(module, flag)]} (its argparse refuses the command)"
            )
        if flag == "--prefill" and module == LAUNCH_ROUTER:
            prefill.append(_prefill_target(command, module, taken))
        elif flag == "--prefill":
            prefill += _targets(values, command, flag)
        elif flag == "--decode":
            decode += _targets(values, command, flag)
        elif flag == "--worker-urls":
            workers += [Target(v, _endpoint(v, command, flag)) for v in values]
        elif flag == "--prefill-bootstrap-ports":
            ports = [int(v) for v in values if v.isdigit()]
    if unrecognized:
        raise InputError(
            f"line {command.line}: {module}: unrecognized arguments: "
            f"{' '.join(unrecognized)} (its argparse refuses the command)"
        )
    pd = module != LAUNCH_ROUTER or _has(command, "--pd-disaggregation")
    return Router(
        command.line, module, pd, tuple(prefill), tuple(decode), _opt(ports), tuple(workers),
        _listens(command, module), command,
    )  # fmt: skip


#: The router flags read here, each with how many words it takes without `=` (None: every
#: word up to the next flag; its nargs="+" or "*").
_READ = frozenset({"--prefill", "--decode", "--worker-urls", "--prefill-bootstrap-ports"})


def _router_flags(command: LaunchCommand) -> Iterator[tuple[str, list[Word], list[Word]]]:
    """Each flag of `_READ` in a router's launch, the words it takes, and the words after
    it that no flag takes (argparse's extras). `--flag=value` takes its one inline value
    (argparse matches an explicit value as one argument, whatever the nargs); `--decode
    URL` of sglang_router takes one word (nargs=1); the lists take every word up to the
    next flag (nargs "+" or "*")."""
    module = command.program.removeprefix("python -m ")
    words = command.words
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        given: list[Word] = []
        while i < len(words) and not words[i].text.startswith("--"):
            given.append(words[i])
            i += 1
        name, eq, inline = word.text.partition("=")
        if name not in _READ:
            continue
        if eq:
            yield name, [word._replace(text=inline)], given
        elif _nargs(module, name) == "1":
            yield name, given[:1], given[1:]
        else:
            yield name, given, []


def _listens(command: LaunchCommand, module: str) -> Endpoint | None:
    """Where the router itself listens: its `--host`/`--port`, else its program's defaults
    (`ROUTER_LISTENS`); None where neither is known."""
    default = ROUTER_LISTENS.get(module)
    host = _text(_flag(command, "--host"), None if default is None else default.host)
    try:
        port = _int(command, "--port", None if default is None else default.port)
    except InputError:
        return None
    if port is None and host is None:
        return None
    return Endpoint(host, port)


#: The router flags that take values, which a router's argparse refuses without one:
#: sglang_router's `--prefill URL [PORT]` (nargs="+") and `--decode URL` (nargs=1);
#: mini_lb's and launch_lb's lists (nargs="+").
_URL_LISTS = frozenset({"--prefill", "--decode", "--prefill-bootstrap-ports"})
#: argparse's words for a missing value, by nargs (`argparse._match_argument`).
_EXPECTED = {"+": "at least one argument", "1": "1 argument"}


def _prefill_target(command: LaunchCommand, module: str, taken: list[Word]) -> Target:
    """sglang_router's `--prefill URL [BOOTSTRAP_PORT ...]` as its `_parse_prefill_urls`
    reads it: the first word the URL, the second its bootstrap port (a number, or `none`:
    none given), any further word not read at all (`prefill_args[1]`; the last was read
    before, where the router reads the first)."""
    _check_bootstrap_port(command, module, taken)
    url = taken[0].text
    port = None
    if len(taken) > 1 and taken[1].expansion is None:
        port = _port_word(taken[1].text)
    return Target(url, _endpoint(url, command, "--prefill"), port)


def _port_word(text: str) -> int | None:
    """A bootstrap port word as the router converts it: `int(...)`, or None for `none`."""
    return None if text.lower() == "none" else int(text)


def _check_bootstrap_port(command: LaunchCommand, module: str, given: list[Word]) -> None:
    """sglang_router's `--prefill URL [PORT]`: what follows the URL is its bootstrap port,
    which the router's `_parse_prefill_urls` refuses unless `int()` reads it or it is
    `none` (`--prefill http://p:30000 abc` does not name a second server; mini_lb's
    `--prefill` is a list of URLs). A shell expansion (or a placeholder) is not known here."""
    if module != LAUNCH_ROUTER or len(given) < 2 or given[1].expansion:
        return
    port = given[1].text
    try:
        _port_word(port)
    except ValueError:
        raise InputError(
            f"line {command.line}: {module}: Invalid bootstrap port: {port}. Must be a "
            "number or 'none' (the router refuses the command)"
        ) from None


def _nargs(module: str, flag: str) -> str:
    return "1" if module == LAUNCH_ROUTER and flag == "--decode" else "+"


def _opt(ports: list[int] | None) -> tuple[int, ...] | None:
    return None if ports is None else tuple(ports)


def _targets(values: list[str], command: LaunchCommand, flag: str) -> list[Target]:
    """URLs, each optionally followed by its bootstrap port (a number, or `none`)."""
    out: list[Target] = []
    for value in values:
        if out and (value.isdigit() or value.lower() == "none"):
            last = out[-1]
            port = int(value) if value.isdigit() else None
            out[-1] = Target(last.url, last.endpoint, port)
            continue
        out.append(Target(value, _endpoint(value, command, flag)))
    return out


def reaches(target: Endpoint, server: Endpoint) -> bool:
    """Whether a router's URL may name the server: the same port, and hosts that are the
    same (host names are case-blind, and `urlsplit` lowers a URL's), both loopback, or one
    unknown or a wildcard."""
    if target.port is None or server.port is None or target.port != server.port:
        return target.port is None or server.port is None
    a, b = target.host, server.host
    return a is None or b is None or same_host(a, b)


def same_host(a: str, b: str) -> bool:
    """Whether two known hosts meet on one port: the same name (case-blind), both
    loopback, or either a wildcard, which listens on every address."""
    if a in WILDCARD_HOSTS or b in WILDCARD_HOSTS:
        return True
    return a.lower() == b.lower() or (a in LOOPBACK and b in LOOPBACK)
