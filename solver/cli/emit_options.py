"""`--emit lws` for `plan` and `fix`: the chosen layout as a Kubernetes LeaderWorkerSet
(solver/inputs/k8s.py writes it), declared once for both commands."""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass, replace
from enum import Enum
from typing import Annotated

import typer

from meshsat.solver.catalogue.pd_pairs import DEFAULT_PORT
from meshsat.solver.cli.node_launch import NODE_FIELDS, NodeLaunch, node_launch
from meshsat.solver.errors import InputError
from meshsat.solver.inputs.command import worker_router_command
from meshsat.solver.inputs.k8s import (
    DIST_PORT,
    launch_words,
    leader_urls,
    lws_manifest,
    router_manifest,
)
from meshsat.solver.inputs.sglang_cmdline import parse_sglang_command
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.limits import shown
from meshsat.solver.validation.validate import validate


class Emit(str, Enum):
    lws = "lws"


EmitOpt = Annotated[
    Emit | None,
    typer.Option(
        "--emit",
        help="lws: print the chosen layout as a Kubernetes LeaderWorkerSet (leader and worker "
        "templates with the SGLang command, size = nodes, GPUs per pod; the leader's address "
        "and the worker index become --dist-init-addr, --nnodes, --node-rank) instead of the "
        "report. Plain DP replicas (no DP attention) that span nodes become one group per "
        "replica (replicas = dp_size, --dp-size dropped; SGLang refuses plain DP across "
        "nodes) and a router Deployment + Service in front, its --worker-urls the leader "
        "pods' DNS names. With `plan --disagg`: a LeaderWorkerSet per role and "
        "the router's Deployment + Service, its URLs the leader pods' DNS names. Read it "
        "back with `meshsat validate --sglang-file`.",
        show_default=False,
    ),
]
ImageOpt = Annotated[
    str, typer.Option("--image", metavar="IMAGE", help="Container image of the emitted pods.")
]
#: The longest suffix the manifests add to `--name` (`-prefill`, `-router`, `-decode`).
_SUFFIX = len("-prefill")
#: Kubernetes names the objects and their pods by RFC 1123 labels (at most 63 characters);
#: LeaderWorkerSet's pods add `-<group>-<index>` and its headless service the name again.
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
MAX_NAME = 40


def checked_name(name: str) -> str:
    """`--name` as Kubernetes takes it, else one line (exit 2): the API server refuses an
    object named otherwise, so `kubectl apply` would fail after the manifest was written."""
    if not _LABEL.fullmatch(name) or len(name) > MAX_NAME:
        raise InputError(
            f"--name {shown(name)} is not a Kubernetes name: lower-case letters, digits and "
            f"'-', starting and ending with a letter or digit, at most {MAX_NAME} characters "
            f"(the manifests add up to {_SUFFIX} more and LeaderWorkerSet its pod indices)"
        )
    return name


NameOpt = Annotated[
    str,
    typer.Option(
        "--name",
        metavar="NAME",
        callback=checked_name,
        help="Name of the emitted LeaderWorkerSet (a Kubernetes name: lower-case letters, "
        "digits and '-').",
    ),
]


def print_lws(
    command_line: str,
    gpus: int,
    gpus_per_node: int,
    *,
    model_path: str | None,
    name: str,
    image: str,
) -> None:
    """The manifest for one rendered launch command on `gpus` GPUs, on stdout."""
    sys.stdout.write(
        lws_for(command_line, gpus, gpus_per_node, model_path=model_path, name=name, image=image)
    )


@dataclass(frozen=True)
class ServerLaunch:
    """One rendered launch command as the pods of a LeaderWorkerSet run it: the words
    without node flags, the environment, and `node_launch`'s form."""

    words: list[str]
    env: list[tuple[str, str]]
    form: NodeLaunch

    @property
    def port(self) -> int:
        return port_of(self.words)

    def manifest(self, *, groups: int, name: str, image: str) -> str:
        """The LeaderWorkerSet `name` running `groups` groups of this server's pods (what
        `plan --emit lws` and `plan --disagg --emit lws` write per server)."""
        return lws_manifest(
            self.words,
            nodes=self.form.nodes,
            gpus_per_node=self.form.gpus_per_pod,
            replicas=groups,
            env=self.env,
            name=name,
            image=image,
            port=self.port,
        )


#: Every emitted server and router listens on all addresses: SGLang's default host
#: (127.0.0.1) cannot be reached from another pod (a Service, a router).
ANY_HOST = "0.0.0.0"


def server_launch(
    command_line: str, gpus: int, gpus_per_node: int, *, model_path: str | None
) -> ServerLaunch:
    """How `command_line` on `gpus` GPUs in nodes of `gpus_per_node` is launched, as
    `node_launch` decides: plain DP replicas that span nodes lose `--dp-size` (each is
    its own server); a command without `--host` listens on `ANY_HOST`."""
    words, env = launch_words(command_line)
    form = node_launch(gpus, gpus_per_node, *_dp_of(words))
    drop = ["--dist-init-addr", *(f for field in NODE_FIELDS for f in _flags(field))]
    if form.split:
        drop += _flags("dp_size")
    words = _without(words, drop)
    if model_path is not None and "--model-path" not in words and "--model" not in words:
        words[3:3] = ["--model-path", model_path]  # after `python -m sglang.launch_server`
    if not _names_host(words):
        words += ["--host", ANY_HOST]
    return ServerLaunch(words, env, form)


def _names_host(words: list[str]) -> bool:
    return any(w == "--host" or w.startswith("--host=") for w in words)


#: Where `NodeCommand.how` points for Kubernetes.
LWS_TOO = "--emit lws writes a Kubernetes form of it"


@dataclass(frozen=True)
class NodeCommand:
    """What an operator runs on each node for one ranked layout: `servers` independent
    SGLang servers, each on `nodes` nodes of `gpus_per_node` GPUs, each node running
    `command` (the `node_launch` form `--emit lws` writes, as a shell line). Why `plan`
    prints it: its one-engine command for more GPUs than a node holds does not start as
    typed (every rank on one host; plain DP across nodes refused, TOPO-MULTINODE-DP)."""

    servers: int
    nodes: int
    gpus_per_node: int
    command: str

    @property
    def single_node(self) -> bool:
        return self.servers == 1 and self.nodes == 1

    def how(self) -> str:
        """One line saying where `command` runs (empty on one node)."""
        if self.single_node:
            return ""
        if self.nodes == 1:
            return (
                f"{self.servers} servers, one per node ({self.gpus_per_node} GPUs each); "
                "SGLang runs plain DP across nodes only as separate servers: put "
                f"sglang_router in front ({LWS_TOO}):"
            )
        ranks = (
            f"on {self.nodes} nodes ({self.gpus_per_node} GPUs each): run on each with "
            f"NODE_RANK 0..{self.nodes - 1} and LEADER_ADDR the address of its node 0"
        )
        if self.servers == 1:
            return f"one server {ranks} ({LWS_TOO}):"
        return (
            f"{self.servers} servers, each {ranks}; SGLang runs plain DP across nodes only "
            f"as separate servers: put sglang_router in front ({LWS_TOO}):"
        )


def reachable(command: NodeCommand) -> NodeCommand:
    """The command listening on every address (`ANY_HOST`) where it named none: a server a
    router on another host reaches (`plan --disagg`'s roles, at `http://prefill-1:30000`)
    cannot keep SGLang's default, 127.0.0.1. Across nodes `server_launch` has added it."""
    if _names_host(launch_words(command.command)[0]):
        return command
    return replace(command, command=f"{command.command} --host {ANY_HOST}")


def per_host(replicas: int, world: int, gpus: int, gpus_per_node: int) -> int:
    """How many plain DP replicas of `world` GPUs one host runs as one server: the most
    that fill the fewest hosts evenly (12 H100 of 1-GPU replicas: 6 on each of 2 hosts;
    3 replicas of 4 GPUs: 1 on each of 3), never more than a host holds."""
    for hosts in range(-(-gpus // gpus_per_node), replicas + 1):
        share = replicas // hosts
        if replicas % hosts == 0 and share * world <= gpus_per_node:
            return share
    return 1


def node_command(
    command_line: str, gpus: int, gpus_per_node: int, *, model_path: str | None
) -> NodeCommand:
    """How `command_line` on `gpus` GPUs runs on nodes of `gpus_per_node` (`server_launch`):
    each node's command with `--nnodes` and the shell variables NODE_RANK and LEADER_ADDR
    where one server spans nodes; the command unchanged on one node. Plain DP replicas
    smaller than a node share it as one server per node (`--dp-size` replicas on its
    GPUs, which SGLang runs within a node; `per_host`) rather than several servers per
    host, each needing its own `--base-gpu-id` and port."""
    if gpus <= gpus_per_node:
        return NodeCommand(1, 1, gpus, command_line)
    launch = server_launch(command_line, gpus, gpus_per_node, model_path=model_path)
    form, words = launch.form, launch.words
    per_node = form.gpus_per_pod
    servers = form.replicas
    if form.split and form.nodes == 1:
        share = per_host(form.replicas, per_node, gpus, gpus_per_node)
        if share > 1:
            at = words.index("--host") if "--host" in words else len(words)
            words = [*words[:at], "--dp-size", str(share), *words[at:]]
            servers, per_node = servers // share, per_node * share
    env = [f"{k}={shlex.quote(v)}" for k, v in launch.env]
    line = " ".join([*env, shlex.join(words)])
    if form.nodes > 1:  # shell variables the operator sets per node: not quoted
        line += (
            f" --nnodes {form.nodes} --node-rank $NODE_RANK"
            f" --dist-init-addr $LEADER_ADDR:{DIST_PORT}"
        )
    return NodeCommand(servers, form.nodes, per_node, line)


def lws_for(
    command_line: str,
    gpus: int,
    gpus_per_node: int,
    *,
    model_path: str | None,
    name: str = "sglang",
    image: str = "lmsysorg/sglang:latest",
) -> str:
    """The LeaderWorkerSet for one rendered launch command (`plan`'s or `fix`'s) on
    `gpus` GPUs in nodes of `gpus_per_node`, launched as `node_launch` decides: plain DP
    replicas that span nodes become `replicas:` groups of one server each, with a router
    (`<name>-router`, regular mode) naming each group's leader, so clients have one
    endpoint; one group needs none."""
    launch = server_launch(command_line, gpus, gpus_per_node, model_path=model_path)
    groups = launch.form.replicas
    text = launch.manifest(groups=groups, name=name, image=image)
    if groups == 1:
        return text
    urls = leader_urls(name, groups, launch.port)
    return text + "---\n" + router_for(worker_router_command(urls), name=name, image=image)


def router_for(command_line: str, *, name: str, image: str) -> str:
    """The Deployment + Service `<name>-router` running a router's launch command,
    listening on `ANY_HOST` at SGLang's default port (what its Service forwards)."""
    words = [*shlex.split(command_line), "--host", ANY_HOST, "--port", str(DEFAULT_PORT)]
    return router_manifest(words, name=f"{name}-router", port=DEFAULT_PORT, image=image)


def port_of(words: list[str]) -> int:
    """The port a server's launch words listen on: its last `--port`, else SGLang's
    default."""
    port = DEFAULT_PORT
    for i, w in enumerate(words):
        flag, eq, value = w.partition("=")
        if flag == "--port" and (eq or i + 1 < len(words)):
            port = int(value if eq else words[i + 1])
    return port


def _dp_of(words: list[str]) -> tuple[int, bool]:
    """SGLang's resolved dp_size and DP-attention flag of a launch (`--attn-dp-size` reads
    as DP attention), as `validate` resolves them."""
    values = parse_sglang_command(shlex.join(words)).values
    resolved = validate(Config.model_validate(values), explain=False).resolved
    return int(resolved["dp_size"]), bool(resolved["enable_dp_attention"])


def _flags(field: str) -> list[str]:
    extra = Config.model_fields[field].json_schema_extra
    assert isinstance(extra, dict)
    return [str(f) for f in extra["flags"]]  # type: ignore[union-attr]


def _without(words: list[str], flags: list[str]) -> list[str]:
    """`words` less each of `flags` with its value (`--flag V` or `--flag=V`)."""
    out: list[str] = []
    skip = False
    for w in words:
        if skip:
            skip = False
        elif w in flags:
            skip = True
        elif w.partition("=")[0] not in flags:
            out.append(w)
    return out
