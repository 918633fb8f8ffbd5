"""Which servers of a deployment run on one machine, and which physical GPUs each takes.

Why: SGLang places one server's ranks (solver/placement.py) but never looks across
servers; two servers started on one machine over the same GPUs both start, and the second
fails at memory profiling or runs out of memory. A script says where a server runs only
indirectly, so meshsat decides it (docs/placement.md, "Servers on one machine"):

- A server may share a machine only when it is one node of a shell script: one launch,
  `--nnodes 1`, not run by a manifest object (each pod has its own GPUs) and not started
  through a remote runner (`ssh host ...`, `srun ...`).
- Two such servers are on different machines when their `--host`, or the host of their
  `--dist-init-addr`, is written differently (neither a loopback or wildcard address),
  or when they listen on the same port (one machine cannot bind it twice).
  Any other two are on one machine.

A server's physical GPUs are its local GPU ids (SGLang's placement of its ranks with its
`--base-gpu-id`/`--gpu-id-step`) read through its visible-devices list when it has one:
`CUDA_VISIBLE_DEVICES`, or `ASCEND_RT_VISIBLE_DEVICES` on Ascend.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from meshsat.solver.deployment.model import Router, Server
from meshsat.solver.deployment.reader import LOOPBACK, WILDCARD_HOSTS, flag_text, same_host
from meshsat.solver.groups import Widths
from meshsat.solver.inputs.accelerator import CUDA_VISIBLE_DEVICES_ENV, VISIBLE_DEVICES_ENV
from meshsat.solver.inputs.launch import LaunchCommand
from meshsat.solver.placement import launches

#: The variable that lists a process's devices, per platform (CUDA's for every other).
VISIBLE_ENV: dict[str, str] = {"npu": VISIBLE_DEVICES_ENV}

#: How a message names a container's device list (`LaunchCommand.container_gpus`), which
#: `fix` does not rewrite (`apart.moved_apart`).
DOCKER_GPUS = "docker --gpus device"
#: Programs that run the command they are given on another machine.
REMOTE_RUNNERS = frozenset({"ssh", "srun", "mpirun", "mpiexec", "pdsh", "kubectl", "salloc"})
_ANY_HOST = LOOPBACK | WILDCARD_HOSTS


@dataclass(frozen=True)
class Devices:
    """One server's GPUs on its machine."""

    server: Server
    #: The local GPU ids its ranks take, in SGLang's launch order.
    local: tuple[int, ...]
    #: The variable and list that map them to the machine's GPUs (None: no list given).
    visible: tuple[str, tuple[int, ...]] | None
    #: The machine's GPU ids: `local` read through `visible`; ids past the list's end are
    #: left out (the server fails on its own there: invalid device ordinal).
    physical: frozenset[int]
    #: Whether the script chose them (a visible-devices list, `--base-gpu-id` or
    #: `--gpu-id-step`): a script that places servers by hand means one machine.
    chosen: bool = False

    def text(self) -> str:
        """How a message says where the GPUs come from."""
        if self.visible is not None:
            name, ids = self.visible
            return f"{name}={','.join(map(str, ids))}"
        name = VISIBLE_ENV.get(self.server.layout.config.platform, CUDA_VISIBLE_DEVICES_ENV)
        return f"GPUs {ranges(self.local)}, no {name}"


def visible_ids(text: str) -> tuple[int, ...] | None:
    """The device ids a visible-devices value lists, up to the first one the runtime cannot
    read (CUDA and CANN both stop there); None when the value is a shell expansion or names
    devices otherwise (`GPU-<uuid>`, `MIG-...`): not known here."""
    if "$" in text or "`" in text:
        return None
    ids: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            break
        ids.append(int(part))
    if not ids and text.strip():
        return None
    return tuple(ids)


def visible_list(command: LaunchCommand, platform: str) -> tuple[str, str | None]:
    """The variable that lists a launch's devices on its platform, and the value the launch
    gives it last (None: it gives none)."""
    name = VISIBLE_ENV.get(platform, CUDA_VISIBLE_DEVICES_ENV)
    given = [value for var, value in command.env if var == name]
    return name, given[-1] if given else None


def devices(server: Server, resolved: Mapping[str, Any], release: str) -> Devices | None:
    """The server's GPUs on its machine; None when they are not known here (a visible list
    that is a shell expansion, a layout SGLang would refuse before placing ranks)."""
    try:
        widths = Widths.of(resolved, release)
    except ValueError:
        return None
    local = tuple(x.gpu for x in launches(widths.job))
    command = server.commands[0]
    name, given = visible_list(command, server.layout.config.platform)
    placed = bool({"base_gpu_id", "gpu_id_step"} & server.layout.config.user_set())
    container = command.container_gpus
    if given is None and container is None:
        return Devices(server, local, None, frozenset(local), placed)
    ids = visible_ids(given) if given is not None else tuple(range(len(container or ())))
    if ids is None:
        return None
    if container is not None:  # the container's GPU i is the machine's container[i]
        ids = tuple(container[i] for i in ids if 0 <= i < len(container))
        name = DOCKER_GPUS if given is None else f"{name} of {DOCKER_GPUS}"
    physical = frozenset(ids[i] for i in local if 0 <= i < len(ids))
    return Devices(server, local, (name, ids), physical, True)


def may_share(server: Server, text: str) -> bool:
    """Whether the server may share a machine with another of the script's servers: one
    shell launch of one node, not started through a remote runner."""
    command = server.commands[0]
    if len(server.commands) > 1 or server.replicas > 1 or command.form != "shell":
        return False
    if server.layout.config.nnodes > 1 or command.owner:
        return False
    return not _remote(command, text)


def _remote(command: LaunchCommand, text: str) -> bool:
    """Whether a shell launch is started through a remote runner (`ssh host ...`)."""
    end = command.words[0].pos if command.words else command.span[1]
    before = text[max(command.span[0], 0) : end].split()
    return any(word.rsplit("/", 1)[-1] in REMOTE_RUNNERS for word in before)


def by_hand(server: Server) -> bool:
    """Whether the script chose the server's GPUs (`Devices.chosen`, read from the launch
    alone): a script that places servers by hand means one machine."""
    config = server.layout.config
    if {"base_gpu_id", "gpu_id_step"} & config.user_set():
        return True
    command = server.commands[0]
    return (
        command.container_gpus is not None or visible_list(command, config.platform)[1] is not None
    )


def loopback_routed(server: Server, routers: Iterable[Router]) -> bool:
    """Whether a router of the script sends to the server at a loopback URL: a loopback
    address reaches only the router's own machine, wherever the router runs."""
    return any(
        target.endpoint.host in LOOPBACK and target.endpoint.port == server.endpoint.port
        for router in routers
        for target in (*router.prefill, *router.decode, *router.workers)
    )


def known_together(a: Server, b: Server, text: str, routers: Iterable[Router]) -> bool:
    """Whether meshsat knows two servers run on one machine, as a port clash needs: both
    `may_share` and no flag tells them apart (`one_machine`, less its port test), and
    something says one machine: the same `--host` written, a router of the script that
    reaches both at loopback URLs, or, on different ports, a placement by hand (what makes
    a GPU overlap HOST-GPU-OVERLAP rather than HOST-GPU-UNPLACED)."""
    if not (may_share(a, text) and may_share(b, text)):
        return False
    ha, hb = _hosts(a), _hosts(b)
    if any(flag in hb and ha[flag] != hb[flag] for flag in ha):
        return False
    host = ha.get("--host")
    if host is not None and host == hb.get("--host") and "$" not in host:
        return True
    routers = tuple(routers)
    if loopback_routed(a, routers) and loopback_routed(b, routers):
        return True
    return one_machine(a, b) and (by_hand(a) or by_hand(b))


def router_together(router: Router, server: Server, text: str) -> bool:
    """Whether meshsat knows a router runs on the server's machine, as a port clash
    needs: both started by this shell (the server `may_share`; the router a shell launch
    not started through a remote runner), no `--host` written differently, and something
    that says one machine: the router reaches the server at a loopback URL (a loopback
    address reaches only the router's own machine), or both write the same `--host`."""
    command = router.command
    if command is None or command.form != "shell" or _remote(command, text):
        return False
    if not may_share(server, text):
        return False
    mine, theirs = flag_text(command, "--host"), _hosts(server).get("--host")
    if mine is not None and mine not in _ANY_HOST and theirs is not None:
        return mine == theirs and "$" not in mine
    return loopback_routed(server, (router,))


def same_address(a: str | None, b: str | None) -> bool:
    """Whether two listening addresses of one machine take one port: the same address,
    both loopback, or either a wildcard (which binds every address). None: a shell
    expansion, not known here."""
    return a is not None and b is not None and same_host(a, b)


def _hosts(server: Server) -> dict[str, str]:
    """The machine a server names for itself, as written, per flag: `--host` and the host
    part of `--dist-init-addr`; loopback and wildcard addresses name none."""
    command = server.commands[0]
    named: dict[str, str] = {}
    for name in ("--host", "--dist-init-addr"):
        value = flag_text(command, name)
        if value is None:
            continue
        host = value.rsplit(":", 1)[0] if name == "--dist-init-addr" else value
        if host not in _ANY_HOST:
            named[name] = host
    return named


def one_machine(a: Server, b: Server) -> bool:
    """Whether two servers that `may_share` run on the same machine (module docstring).
    Either flag written differently tells machines apart: SGLang's Ascend recipe gives both
    servers `--host ${local_ip}` (each machine's own address) but each its own
    `--dist-init-addr`."""
    ha, hb = _hosts(a), _hosts(b)
    if any(flag in hb and ha[flag] != hb[flag] for flag in ha):
        return False
    pa, pb = a.endpoint.port, b.endpoint.port
    return pa is None or pb is None or pa != pb


#: The flags that name a server's machine (`_hosts`), as sorted pairs: hashable.
Signature = tuple[tuple[str, str], ...]


def signature(server: Server) -> Signature:
    """What `one_machine` compares of a server besides its port, read once."""
    return tuple(sorted(_hosts(server).items()))


def agreeing(signatures: list[Signature]) -> list[frozenset[int]]:
    """For each signature, those (by index, itself included) that no flag written in both
    tells apart (`one_machine` less its port test), found through an index by flag and
    value: a script of servers on a thousand hosts is not a million comparisons."""
    named = [dict(sig) for sig in signatures]
    flags = {flag for sig in signatures for flag, _ in sig}
    by_value: dict[tuple[str, str], set[int]] = {}
    lacking: dict[str, set[int]] = {flag: set() for flag in flags}
    for i, hosts in enumerate(named):
        for flag in flags:
            if flag in hosts:
                by_value.setdefault((flag, hosts[flag]), set()).add(i)
            else:
                lacking[flag].add(i)
    everyone = frozenset(range(len(signatures)))
    out = []
    for sig in signatures:
        found = everyone
        for flag, host in sig:
            found = found & (by_value[(flag, host)] | lacking[flag])
        out.append(found)
    return out


@dataclass(frozen=True)
class Clash:
    """Servers on one machine over the same GPUs (`overlaps`), said once for two kinds of
    launch: the first two servers that clash, and every server of the two kinds that does."""

    a: Devices
    b: Devices
    #: Every server that clashes with one of the other kind (or its own), script order.
    servers: tuple[Devices, ...]
    shared: frozenset[int]


@dataclass
class _Kind:
    """Servers whose launches place them alike: one signature, role, set of GPUs and way
    of choosing them (`Devices.text`). Only their ports tell them apart."""

    signature: Signature
    physical: frozenset[int]
    members: list[int] = field(default_factory=list)
    ports: Counter[int | None] = field(default_factory=Counter)


def overlaps(placed: list[Devices]) -> list[Clash]:
    """The servers on one machine that share GPUs, grouped. Servers whose launches place
    them alike are one kind (`_Kind`); each kind with itself, and each two kinds whose
    GPUs meet, is one `Clash` naming all the servers that clash, first two first.

    Why grouped: N copies of one launch on N ports are N²/2 pairs, and one finding per
    pair was 31,125 findings for a 250-line script (29 s to print, half a gigabyte). Kinds
    meet only through a GPU id they share and signatures that agree (an index by both), and
    within two kinds only the
    ports tell servers apart (`one_machine`: one port, two machines), which are counted:
    the work is linear in servers, and in kinds but for those that do clash."""
    kinds: dict[tuple[object, ...], _Kind] = {}
    for i, d in enumerate(placed):
        sig = signature(d.server)
        kind = kinds.setdefault(
            (sig, d.physical, d.chosen, d.server.role, d.text()), _Kind(sig, d.physical)
        )
        kind.members.append(i)
        kind.ports[d.server.endpoint.port] += 1
    listed = list(kinds.values())
    sigs = list(dict.fromkeys(kind.signature for kind in listed))
    sig_of = {sig: n for n, sig in enumerate(sigs)}
    agree = agreeing(sigs)
    by_gpu: dict[tuple[int, int], list[int]] = {}
    for k, kind in enumerate(listed):
        for gpu in kind.physical:
            by_gpu.setdefault((gpu, sig_of[kind.signature]), []).append(k)
    meet: set[tuple[int, int]] = set()
    for k, kind in enumerate(listed):
        for gpu in kind.physical:
            for n in agree[sig_of[kind.signature]]:
                meet.update((k, m) for m in by_gpu.get((gpu, n), ()) if k <= m)
    found: list[tuple[int, int, Clash]] = []
    for k, m in sorted(meet):
        one, two = listed[k], listed[m]
        sides = ((one, two),) if k == m else ((one, two), (two, one))
        involved = sorted(
            i
            for mine, other in sides
            for i in mine.members
            if _partner(placed[i].server.endpoint.port, other, self_in=k == m)
        )
        if not involved:
            continue
        first = involved[0]
        other = two if first in one.members else one
        second = next(i for i in other.members if i != first and _together(placed, first, i))
        a, b = sorted((first, second))
        servers = tuple(placed[i] for i in involved)
        found.append((a, b, Clash(placed[a], placed[b], servers, one.physical & two.physical)))
    return [clash for _, _, clash in sorted(found, key=lambda f: f[:2])]


def _partner(port: int | None, other: _Kind, *, self_in: bool) -> bool:
    """Whether a server on `port` has one of `other`'s servers (itself left out, when it is
    one of them) on a port that does not say another machine."""
    others = len(other.members) - self_in
    if port is None:
        return others > 0
    return others - (other.ports[port] - self_in) > 0


def _together(placed: list[Devices], i: int, j: int) -> bool:
    """Whether two servers of agreeing signatures are on one machine: not on one port."""
    pi, pj = placed[i].server.endpoint.port, placed[j].server.endpoint.port
    return pi is None or pj is None or pi != pj


def machine(placed: list[Devices]) -> list[Devices] | None:
    """The servers as one machine's, when there are two or more and every two of them are
    on one machine (the single-machine demo); None otherwise (several machines, or a
    grouping this reading cannot settle). Every two are (`one_machine`) when no flag names
    two machines among them and no port is taken twice: one pass, not every pair."""
    if len(placed) < 2:
        return None
    named: dict[str, str] = {}
    ports: set[int] = set()
    for d in placed:
        for flag, host in signature(d.server):
            if named.setdefault(flag, host) != host:
                return None
        port = d.server.endpoint.port
        if port is not None:
            if port in ports:
                return None
            ports.add(port)
    return placed


def ranges(ids: Iterable[int]) -> str:
    """`0-3, 6`: ids as sorted runs."""
    runs: list[list[int]] = []
    for i in sorted(set(ids)):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)
