"""Servers of one machine moved onto GPUs of their own: the repair of HOST-GPU-OVERLAP.

Why: two servers a script starts on one machine over the same GPUs both start, and the
second fails at memory profiling or runs out of memory (`hosts`). The usual cause is a
copied line whose placement was not edited (`CUDA_VISIBLE_DEVICES=2,3` twice, or a second
server at the default `--base-gpu-id 0`). The repair an operator makes is to move the later
server to GPUs no earlier one takes: here, the lowest `--base-gpu-id` at which its GPUs
(read through its visible-devices list, when it has one) meet no earlier server's on the
machine and stay on it (within its list, else the machine's `gpus_per_node`), with the
server's own rules still holding. Only `--base-gpu-id` moves: it is a layout field, which
the rewrite writes in the user's words; a visible-devices list is the operator's own
placement and stays as typed. Pairs that only warn (HOST-GPU-UNPLACED: neither chose its
GPUs, so they may be on two machines) are left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from meshsat.solver.deployment import hosts
from meshsat.solver.deployment.model import Server
from meshsat.solver.deployment.validate import server_report
from meshsat.solver.packs import Pack


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


def moved_apart(servers: Sequence[Server], text: str, pack: Pack) -> dict[str, int]:
    """The `--base-gpu-id` each server that overlaps an earlier one on its machine moves to
    (module docstring), by name; servers no base id frees are left out (their finding
    stays)."""
    earlier: list[hosts.Devices] = []
    moves: dict[str, int] = {}
    for server in servers:
        if not hosts.may_share(server, text):
            continue
        d = _placed(server, pack)
        if d is None:
            continue
        mine = [e for e in earlier if hosts.one_machine(e.server, server)]
        clash = [e for e in mine if e.physical & d.physical]
        if clash and (d.chosen or any(e.chosen for e in clash)):
            taken = frozenset().union(*(e.physical for e in mine))
            limit = (
                len(d.visible[1]) if d.visible is not None else d.server.layout.config.gpus_per_node
            )
            for base in range(limit):
                candidate = _placed(_with_base(server, base), pack)
                if candidate is not None and _fits(candidate) and not candidate.physical & taken:
                    moves[server.name] = base
                    d = candidate
                    break
        earlier.append(d)
    return moves
