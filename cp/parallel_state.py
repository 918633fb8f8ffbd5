"""The process's attention-CP group, where SGLang's strategies read it (`get_parallel()`).

SGLang's `ContextParallelStrategy.cp_rank` is concrete: it reads the attention-CP rank of the
process-wide parallel state, and `init_cp_strategy` constructs a strategy without handing it a
group. This module is that state for meshsat: `init_cp_strategy`, `bind_cp_strategy` and
`instantiate` register the group they bind; a strategy built before any group exists holds a
`DeferredComm` that resolves on first use, so construction never needs torch.distributed and
only a collective (or `cp_rank` in a multi-process run) does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import torch.distributed as dist
from torch import Tensor

from meshsat.cp.comm import Comm, ProcessGroupComm, SoloComm
from meshsat.cp.kinds import CPConfigError

_lock = threading.Lock()
_registered: Comm | None = None


def set_attn_cp_comm(comm: Comm | None) -> None:
    """Register (None: forget) the attention-CP group of this process."""
    global _registered
    with _lock:
        _registered = comm


def registered_attn_cp_comm() -> Comm | None:
    with _lock:
        return _registered


def attn_cp_comm() -> Comm:
    """The registered attention-CP group; else the default (world) group when
    torch.distributed is initialised; else the group of this process alone (rank 0 of 1),
    which is what SGLang's parallel state reports when CP is off."""
    with _lock:
        registered = _registered
    if registered is not None:
        return registered
    if dist.is_available() and dist.is_initialized():
        return ProcessGroupComm()
    return SoloComm()


def attn_cp_rank() -> int:
    """This process's rank in its attention-CP group (SGLang's `get_parallel().attn_cp_rank`)."""
    return attn_cp_comm().rank


class DeferredComm(Comm):
    """The attention-CP group of a strategy constructed with none (as SGLang's
    `init_cp_strategy` does): `attn_cp_comm()` looked up on first use and then kept, refused
    with a `CPConfigError` if its size is not the strategy's cp size."""

    def __init__(self, cp_size: int, who: str) -> None:
        self._cp_size, self._who = cp_size, who
        self._comm: Comm | None = None

    def resolve(self) -> Comm:
        if self._comm is None:
            comm = attn_cp_comm()
            if comm.world_size != self._cp_size:
                raise CPConfigError(
                    f"{self._who}: cp_size {self._cp_size} but the attention-CP group found at "
                    f"first use has {comm.world_size} rank(s); initialise torch.distributed "
                    "with cp_size ranks, or bind a group (init_cp_strategy(..., "
                    "comm_or_group=group), or the strategy's comm=) first"
                )
            self._comm = comm
        return self._comm

    @property
    def rank(self) -> int:
        return self.resolve().rank

    @property
    def world_size(self) -> int:
        return self._cp_size

    def all_gather(self, x: Tensor) -> Tensor:
        return self.resolve().all_gather(x)

    def check_peers(self, tensors: Sequence[Tensor], plan: Sequence[int] = ()) -> None:
        self.resolve().check_peers(tensors, plan)

    def ring_pass_start(
        self, tensors: Sequence[Tensor], out: Sequence[Tensor] | None = None
    ) -> Callable[[], list[Tensor]]:
        return self.resolve().ring_pass_start(tensors, out)
