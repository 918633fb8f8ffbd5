"""Servers of one machine moved onto GPUs of their own: the repair of HOST-GPU-OVERLAP.

Why: two servers a script starts on one machine over the same GPUs both start, and the
second fails at memory profiling or runs out of memory (`hosts`). The usual cause is a
copied line whose placement was not edited (`CUDA_VISIBLE_DEVICES=2,3` twice, or a second
server at the default `--base-gpu-id 0`). The repair an operator makes is to move the later
server to GPUs no earlier one takes: here, first the lowest `--base-gpu-id` at which its
GPUs (read through its visible-devices list, when it has one) meet no earlier server's on
the machine and stay on it (within its list, else the machine's `gpus_per_node`), with the
server's own rules still holding. A server whose list holds no free GPU at any base id (the
same `CUDA_VISIBLE_DEVICES=2,3` on both lines: ids index into the list) gets a new list
instead: the lowest GPUs of the machine no earlier server takes, one run where there is one,
as many as its ranks index (`relisted`). The machine's size is the one the sources give
(`gpus_per_node` set on a server without a list, else the platform's node: 8 GPUs, 16 NPUs
on Ascend), and at least the highest id any list names. The earlier server's placement is
kept: it is the fixed point, as a prefill is for its decode. Where the machine has too few
free GPUs, the server is left as it is and the fix says so (`Apart.short`). Pairs that only
warn (HOST-GPU-UNPLACED: neither chose its GPUs, so they may be on two machines) are left
alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from meshsat.solver.deployment import hosts
from meshsat.solver.deployment.model import Server
from meshsat.solver.deployment.validate import server_report
from meshsat.solver.inputs.accelerator import DEFAULT_NODE_DEVICES
from meshsat.solver.lang.fields import CONFIG_SPECS
from meshsat.solver.packs import Pack


@dataclass(frozen=True)
class Relisted:
    """A server's new visible-devices list: the variable, the list it had, the new one."""

    variable: str
    old: tuple[int, ...]
    new: tuple[int, ...]


@dataclass(frozen=True)
class Apart:
    """How the servers that overlap an earlier one on their machine move, by name."""

    #: The `--base-gpu-id` a server moves to.
    bases: dict[str, int] = field(default_factory=dict)
    #: The visible-devices list a server gets where no base id frees it.
    lists: dict[str, Relisted] = field(default_factory=dict)
    #: Why a server that overlaps is left as it is (too few free GPUs on its machine).
    short: dict[str, str] = field(default_factory=dict)


def _placed(server: Server, pack: Pack) -> hosts.Devices | None:
    report = server_report(server, pack)
    if not report.valid:
        return None
    return hosts.devices(server, report.resolved, pack.version)


def _with_base(server: Server, base: int) -> Server:
    config = server.layout.config.model_copy(update={"base_gpu_id": base})
    return replace(server, layout=replace(server.layout, config=config))


def _fits(d: hosts.Devices) -> bool:
    """Every rank on a GPU of the machine: within the list (no id past its end), else
    within `gpus_per_node`."""
    if d.visible is not None:
        return len(d.physical) == len(set(d.local))
    return max(d.local) < d.server.layout.config.gpus_per_node


def with_list(server: Server, variable: str, ids: Sequence[int]) -> Server:
    """The server launched with `variable` listing `ids` (set last: the value it runs with)."""
    command = server.commands[0]
    env = (*command.env, (variable, ",".join(map(str, ids))))
    spans = (*command.env_spans, *[(-1, -1)] * (len(command.env) - len(command.env_spans)))
    command = replace(command, env=env, env_spans=(*spans, (-1, -1)))
    return replace(server, commands=(command, *server.commands[1:]))


def machine_size(placed: Sequence[hosts.Devices]) -> int:
    """How many GPUs the machine of `placed` (servers on one machine) has (module docstring)."""
    given = [
        d.server.layout.config.gpus_per_node
        for d in placed
        if d.visible is None and "gpus_per_node" in d.server.layout.config.user_set()
    ]
    platform = placed[-1].server.layout.config.platform
    default = CONFIG_SPECS["gpus_per_node"].default
    assert isinstance(default, int)
    default = DEFAULT_NODE_DEVICES.get(platform, (default, ""))[0]
    listed = [max(d.visible[1]) + 1 for d in placed if d.visible is not None and d.visible[1]]
    return max([*(given or [default]), *listed])


def lowest_free(size: int, taken: frozenset[int], count: int) -> tuple[int, ...] | None:
    """The lowest run of `count` GPUs of `size` none of `taken`, else the lowest `count` free
    ones; None when fewer are free."""
    free = [g for g in range(size) if g not in taken]
    for start in free:
        run = tuple(range(start, start + count))
        if run[-1] < size and not taken.intersection(run):
            return run
    return tuple(free[:count]) if len(free) >= count else None


def _relisted(
    d: hosts.Devices, mine: Sequence[hosts.Devices], pack: Pack
) -> tuple[hosts.Devices, Relisted] | str:
    """The server on a list of free GPUs of its machine, or why there is none."""
    assert d.visible is not None
    variable, old = d.visible
    taken = frozenset().union(*(e.physical for e in mine))
    size = machine_size([*mine, d])
    need = max(d.local) + 1
    new = lowest_free(size, taken, need)
    if new is None:
        free = sum(g not in taken for g in range(size))
        return (
            f"{variable}: its ranks need a list of {need} GPU(s) but {free} of the machine's "
            f"{size} are "
            f"free of the earlier servers ({hosts.ranges(taken)} taken): run it on another "
            "machine (its own --host)"
        )
    candidate = _placed(with_list(d.server, variable, new), pack)
    if candidate is None or not _fits(candidate) or candidate.physical & taken:
        return f"{variable}: no list of free GPUs keeps its layout valid"
    return candidate, Relisted(variable, old, new)


class _Earlier:
    """The servers placed so far, for a server to look among those on its machine: by
    signature (`hosts.signature`), the GPUs they take, counted in all and by port (one port,
    two machines: `hosts.one_machine`), and apart for those that chose their GPUs. Why:
    every earlier server compared with every later one was 2·10^6 `one_machine` calls,
    each reading flags again, for a 2,000-line script (20 s of a 31 s `--rewrite`)."""

    def __init__(self, agree: list[frozenset[int]]) -> None:
        self.agree = agree
        self.placed: dict[int, list[hosts.Devices]] = {}
        self.gpus: dict[tuple[int, bool], Counter[int]] = {}
        self.on_port: dict[tuple[int, bool, int], Counter[int]] = {}

    def add(self, sig: int, d: hosts.Devices) -> None:
        self.placed.setdefault(sig, []).append(d)
        port = d.server.endpoint.port
        for chosen in {False, d.chosen}:  # every server, and again among the chosen
            self.gpus.setdefault((sig, chosen), Counter()).update(d.physical)
            if port is not None:
                self.on_port.setdefault((sig, chosen, port), Counter()).update(d.physical)

    def taken(self, sig: int, d: hosts.Devices, *, chosen: bool = False) -> frozenset[int]:
        """The GPUs earlier servers on `d`'s machine take (with `chosen`, only those that
        chose theirs)."""
        port = d.server.endpoint.port
        out: set[int] = set()
        for other in self.agree[sig]:
            counts = self.gpus.get((other, chosen))
            if not counts:
                continue
            same: Mapping[int, int] = (
                {} if port is None else self.on_port.get((other, chosen, port), {})
            )
            out.update(g for g, n in counts.items() if n > same.get(g, 0))
        return frozenset(out)

    def mine(self, sig: int, d: hosts.Devices) -> list[hosts.Devices]:
        """The earlier servers on `d`'s machine, in script order (`_relisted` reads them)."""
        port = d.server.endpoint.port
        found = [
            e
            for other in self.agree[sig]
            for e in self.placed.get(other, ())
            if port is None or e.server.endpoint.port != port
        ]
        return sorted(found, key=lambda e: e.server.line)


def moved_apart(servers: Sequence[Server], text: str, pack: Pack) -> Apart:
    """How each server that overlaps an earlier one on its machine moves (module
    docstring); servers nothing frees are left as they are (their finding stays), with
    why in `Apart.short` where a new list could not be found."""
    shared = [s for s in servers if hosts.may_share(s, text)]
    signatures = [hosts.signature(s) for s in shared]
    numbers = {sig: n for n, sig in enumerate(dict.fromkeys(signatures))}
    earlier = _Earlier(hosts.agreeing(list(numbers)))
    moves = Apart()
    for server, signature in zip(shared, signatures, strict=True):
        d = _placed(server, pack)
        if d is None:
            continue
        sig = numbers[signature]
        # A clash that moves the server: it chose its GPUs, or an earlier one it meets did.
        if d.physical & earlier.taken(sig, d, chosen=not d.chosen):
            taken = earlier.taken(sig, d)
            limit = (
                len(d.visible[1]) if d.visible is not None else d.server.layout.config.gpus_per_node
            )
            for base in range(limit):
                candidate = _placed(_with_base(server, base), pack)
                if candidate is not None and _fits(candidate) and not candidate.physical & taken:
                    moves.bases[server.name] = base
                    d = candidate
                    break
            else:
                if d.visible is not None and hosts.DOCKER_GPUS in d.visible[0]:
                    moves.short[server.name] = (
                        f"{d.visible[0]}: give the container other GPUs by hand (docker's "
                        "--gpus is not rewritten)"
                    )
                elif d.visible is not None:
                    found = _relisted(d, earlier.mine(sig, d), pack)
                    if isinstance(found, str):
                        moves.short[server.name] = found
                    else:
                        d, moves.lists[server.name] = found
        earlier.add(sig, d)
    return moves
