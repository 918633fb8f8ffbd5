"""The process-wide strategy binding an engine consults from deep inside a model forward.

One module-level slot, set by `init_cp_strategy` and cleared by `reset_cp_strategy`; nothing
here reads the environment or server arguments. A failed `init_cp_strategy` leaves the previous
binding untouched.
"""

from __future__ import annotations

import torch.distributed as dist

from cp.base import CPStrategy
from cp.comm import Comm, ProcessGroupComm
from cp.interleave import InterleaveStrategy
from cp.kinds import CPConfigError, CPStrategyKind
from cp.zigzag import ZigzagStrategy

_STRATEGIES: dict[CPStrategyKind, type[CPStrategy]] = {
    CPStrategyKind.ZIGZAG: ZigzagStrategy,
    CPStrategyKind.INTERLEAVE: InterleaveStrategy,
}

_bound: CPStrategy | None = None


def init_cp_strategy(
    *,
    enable_prefill_cp: bool,
    cp_size: int,
    cp_strategy: str | None,
    comm_or_group: Comm | dist.ProcessGroup | None = None,
) -> CPStrategy | None:
    """Bind (and return) the strategy for this process, or bind None when prefill CP is off or
    cp_size is 1. The strategy's group is `comm_or_group`: a `Comm`, a process group, or the
    default (world) group when None."""
    global _bound
    if isinstance(cp_size, bool) or not isinstance(cp_size, int) or cp_size < 1:
        raise CPConfigError(f"cp_size must be an int >= 1, got {cp_size!r}")
    kind = None if cp_strategy is None else CPStrategyKind.from_string(cp_strategy)
    if enable_prefill_cp and kind in (None, CPStrategyKind.NONE):
        raise CPConfigError(
            f"enable_prefill_cp needs cp_strategy 'zigzag' or 'interleave'; got {cp_strategy!r}"
        )
    strategy: CPStrategy | None = None
    if enable_prefill_cp and cp_size > 1 and kind is not None:
        comm = comm_or_group if isinstance(comm_or_group, Comm) else ProcessGroupComm(comm_or_group)
        strategy = _STRATEGIES[kind](cp_size, comm=comm)
    _bound = strategy
    return strategy


def reset_cp_strategy() -> None:
    """Unbind; for tests and for engines that tear down and re-initialise in one process."""
    global _bound
    _bound = None


def get_cp_strategy() -> CPStrategy | None:
    return _bound


def get_cp_strategy_kind() -> CPStrategyKind:
    return CPStrategyKind.NONE if _bound is None else _bound.kind


def is_cp_enabled() -> bool:
    return _bound is not None


def is_zigzag() -> bool:
    return get_cp_strategy_kind() == CPStrategyKind.ZIGZAG


def is_interleave() -> bool:
    return get_cp_strategy_kind() == CPStrategyKind.INTERLEAVE
