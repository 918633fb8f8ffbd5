"""The process-wide strategy binding an engine consults from deep inside a model forward.

One module-level slot holds the bound core strategy; `bind_cp_strategy` (explicit arguments) and
the seed-interface `init_cp_strategy(server_args)` both set it, and `reset_cp_strategy` clears
it together with the registered server arguments and attention-CP group. A failed bind leaves
the previous binding untouched.
"""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from meshsat.cp.base import CPStrategy
from meshsat.cp.comm import Comm, ProcessGroupComm
from meshsat.cp.interleave import InterleaveStrategy
from meshsat.cp.kinds import CPConfigError, CPStrategyKind
from meshsat.cp.limits import check_cp_size
from meshsat.cp.parallel_state import set_attn_cp_comm
from meshsat.cp.server_args import global_server_args, server_arg, set_global_server_args
from meshsat.cp.zigzag import ZigzagStrategy

_STRATEGIES: dict[CPStrategyKind, type[CPStrategy]] = {
    CPStrategyKind.ZIGZAG: ZigzagStrategy,
    CPStrategyKind.INTERLEAVE: InterleaveStrategy,
}

_bound: CPStrategy | None = None


def register_strategy(kind: CPStrategyKind, cls: type[CPStrategy]) -> None:
    """Make `kind` bindable (the ring layout registers itself this way, keeping this module free
    of its import)."""
    _STRATEGIES[kind] = cls


def bind_cp_strategy(
    *,
    enable_prefill_cp: bool,
    cp_size: int,
    cp_strategy: str | None,
    comm_or_group: Comm | dist.ProcessGroup | None = None,
) -> CPStrategy | None:
    """Bind (and return) the strategy for this process, or bind None when prefill CP is off or
    cp_size is 1. `cp_strategy` takes every name of this package ('ring' included). The
    strategy's group is `comm_or_group`: a `Comm` or a process group (registered as this
    process's attention-CP group), or None: the process's attention-CP group, found at first use
    when none exists yet (`meshsat.cp.parallel_state`)."""
    global _bound
    check_cp_size(cp_size)
    kind = None if cp_strategy is None else CPStrategyKind.parse(cp_strategy)
    if enable_prefill_cp and kind in (None, CPStrategyKind.NONE):
        names = ", ".join(repr(k.cli_value) for k in _STRATEGIES)
        raise CPConfigError(
            f"enable_prefill_cp needs cp_strategy one of {names}; got {cp_strategy!r}"
        )
    strategy: CPStrategy | None = None
    if enable_prefill_cp and cp_size > 1 and kind is not None:
        cls = _STRATEGIES.get(kind)
        if cls is None:
            raise CPConfigError(f"cp_strategy {cp_strategy!r} has no registered implementation")
        comm: Comm | None = None
        if isinstance(comm_or_group, Comm):
            comm = comm_or_group
        elif comm_or_group is not None:
            comm = ProcessGroupComm(comm_or_group)
        strategy = cls(cp_size, comm=comm)
        if comm is not None:
            set_attn_cp_comm(comm)
    _bound = strategy
    return strategy


def bound_strategy() -> CPStrategy | None:
    """The bound core strategy, without lazy initialisation."""
    return _bound


# ---- SGLang's module functions (`sglang.srt.layers.cp.base`) ---------------------------------


def init_cp_strategy(
    server_args: Any, *, comm_or_group: Comm | dist.ProcessGroup | None = None
) -> None:
    """Bind the configured CP strategy for this process, by SGLang's rules: nothing (and no
    look at `cp_strategy`) when `enable_prefill_cp` is off or `attn_cp_size` <= 1; otherwise
    `cp_strategy` must be 'zigzag' or 'interleave' (`ValueError` subclass otherwise).

    `server_args`: anything with SGLang's attribute names, or a mapping. The strategy's group is
    the keyword-only `comm_or_group` (not in SGLang); without it the strategy is constructed
    as SGLang constructs it, and finds the process's attention-CP group at first use.
    """
    set_global_server_args(server_args)
    cp_size = server_arg(server_args, "attn_cp_size", 1)
    if not server_arg(server_args, "enable_prefill_cp", False) or (
        isinstance(cp_size, int) and cp_size <= 1
    ):
        bind_cp_strategy(enable_prefill_cp=False, cp_size=1, cp_strategy=None)
        return
    kind = CPStrategyKind.from_string(server_arg(server_args, "cp_strategy", None))
    bind_cp_strategy(
        enable_prefill_cp=True,
        cp_size=cp_size,
        cp_strategy=kind.cli_value,
        comm_or_group=comm_or_group,
    )


def get_cp_strategy() -> CPStrategy | None:
    """The bound strategy, initialised lazily from the registered server arguments: a worker
    process that re-imported the package recovers its binding on first use."""
    registered = global_server_args()
    if _bound is None and server_arg(registered, "enable_prefill_cp", False):
        init_cp_strategy(registered)
    return _bound


def get_cp_strategy_kind() -> CPStrategyKind:
    strategy = get_cp_strategy()
    return CPStrategyKind.NONE if strategy is None else strategy.kind


def is_cp_enabled() -> bool:
    return get_cp_strategy() is not None


def is_zigzag() -> bool:
    return get_cp_strategy_kind() == CPStrategyKind.ZIGZAG


def is_interleave() -> bool:
    return get_cp_strategy_kind() == CPStrategyKind.INTERLEAVE


def is_ring() -> bool:
    return get_cp_strategy_kind() == CPStrategyKind.RING


def reset_cp_strategy() -> None:
    """Unbind and forget the server arguments; for tests and for engines that tear down and
    re-initialise in one process."""
    global _bound
    _bound = None
    set_global_server_args(None)
    set_attn_cp_comm(None)
