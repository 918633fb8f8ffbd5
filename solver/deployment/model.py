"""A PD deployment as meshsat reads it: servers in roles, and the routers in front.

Why its own types: a launch script of a disaggregated deployment holds several servers
(each possibly several nodes) and routers; the single-server `LayoutInput` is one job's
layout. A `Server` is one job: the launches of its nodes, read and merged as one layout
(`parse_job`), plus the flags the pair rules read beyond the layout (`Facts`). A `Router`
is what the router's command says about the servers it sends work to.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from meshsat.solver.inputs.launch import LaunchCommand
from meshsat.solver.inputs.layout_input import LayoutInput

Role = Literal["prefill", "decode", "aggregated"]
ROLES: tuple[Role, ...] = ("prefill", "decode", "aggregated")


@dataclass(frozen=True)
class Endpoint:
    """Where a server listens or a router sends: host as written (None: a shell expansion
    or a wildcard, which matches any host) and port."""

    host: str | None
    port: int | None

    def text(self) -> str:
        return f"{self.host or '*'}:{self.port if self.port is not None else '*'}"


@dataclass(frozen=True)
class Facts:
    """What the pair rules read of a server's flags beyond its layout, as SGLang resolves
    them from what is written (None: a shell expansion, not known here)."""

    model: str | None
    backend: str | None
    bootstrap_port: int | None
    #: As written; "default" when unset. The pair rules read the page the server resolves
    #: (its layout's `page_size`, `R-PAGE-SIZE`); this says only whether it is known.
    page_size: str | None
    kv_cache_dtype: str | None


@dataclass(frozen=True)
class Server:
    """One server of a deployment: a job of one or more nodes in one role."""

    role: Role
    #: Its launches, in script order (one per node), and their indices among the script's
    #: server launches (what `--rewrite` edits).
    commands: tuple[LaunchCommand, ...]
    indices: tuple[int, ...]
    layout: LayoutInput
    endpoint: Endpoint
    facts: Facts
    #: Copies of this server its manifest object runs apart (a LeaderWorkerSet's
    #: `spec.replicas`; 1 in a script): each its own job of these nodes, never a node of
    #: another, so a deployment's servers and GPUs count every copy (`per_role`).
    replicas: int = 1

    @property
    def line(self) -> int:
        return self.commands[0].line

    @property
    def name(self) -> str:
        """`prefill@3`: the role and the first line, how reports name a server."""
        return f"{self.role}@{self.line}"


def kind_text(roles: Iterable[Role], routers: int) -> str:
    """How messages name a deployment: PD only where a server is a prefill or a decode;
    otherwise aggregated servers (`plan --emit lws`'s split replicas) behind their router."""
    if set(roles) & {"prefill", "decode"}:
        return "a PD deployment"
    return "a deployment of aggregated servers" + (" behind a router" if routers else "")


def per_role(servers: Iterable[tuple[Role, int]]) -> dict[Role, int]:
    """Servers of each role, from each entry's role and replicas: what a deployment's
    document counts (an LWS of `replicas: 3` is three prefill servers, not one)."""
    counts = dict.fromkeys(ROLES, 0)
    for role, replicas in servers:
        counts[role] += replicas
    return counts


@dataclass(frozen=True)
class Target:
    """A server a router names: its URL, where that is, and the bootstrap port the router
    gives with it (None: the router gives none; the receiving server's own is used)."""

    url: str
    endpoint: Endpoint
    bootstrap_port: int | None = None


@dataclass(frozen=True)
class Router:
    line: int
    program: str
    #: Whether the router runs in PD mode (`--pd-disaggregation`; mini_lb and launch_lb
    #: always do).
    pd: bool
    prefill: tuple[Target, ...]
    decode: tuple[Target, ...]
    #: mini_lb's `--prefill-bootstrap-ports`, as given (None: the flag is absent).
    bootstrap_ports: tuple[int, ...] | None = None
    #: The regular mode's `--worker-urls`: aggregated servers it sends whole requests to.
    workers: tuple[Target, ...] = ()
    #: Where the router itself listens (`--host`/`--port`, else its program's defaults;
    #: None: not known here): a server of its machine cannot bind that port too.
    listens: Endpoint | None = None
    #: Its launch (None: a router made, not read), for where it runs (`hosts`).
    command: LaunchCommand | None = None


@dataclass(frozen=True)
class Deployment:
    """The servers and routers of one script, in script order."""

    servers: tuple[Server, ...]
    routers: tuple[Router, ...]
    #: The script's text, for `--rewrite`.
    text: str

    def of_role(self, role: Role) -> tuple[Server, ...]:
        return tuple(s for s in self.servers if s.role == role)

    @property
    def kind(self) -> str:
        """What messages call this deployment (`kind_text`)."""
        return kind_text((s.role for s in self.servers), len(self.routers))
