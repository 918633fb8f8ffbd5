"""The one collective CP needs (an all-gather along dim 0), behind a small interface.

Strategies never read a global rank: they ask their `Comm`, which is bound to one process group.
That lets an engine run several CP groups side by side (one per attention-CP subgroup) and lets
unit tests run every rank of a group as threads of one process (`LocalSimComm`).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TypeVar, cast

import torch
import torch.distributed as dist
from torch import Tensor

from cp.kinds import CPCommError, CPConfigError, CPShapeError

T = TypeVar("T")


class Comm(ABC):
    """A CP group as seen from one rank."""

    @property
    @abstractmethod
    def rank(self) -> int: ...

    @property
    @abstractmethod
    def world_size(self) -> int: ...

    @abstractmethod
    def all_gather(self, x: Tensor) -> Tensor:
        """Every rank's `x` (same shape on every rank), concatenated rank-major along dim 0."""

    def all_gather_padded(self, x: Tensor, counts: Sequence[int], physical: int) -> Tensor:
        """Gather rows whose real count differs per rank: pad to `physical`, gather, cut.

        `x` holds this rank's `counts[rank]` real rows, optionally already padded to `physical`.
        Returns the `sum(counts)` real rows, rank-major.
        """
        if len(counts) != self.world_size:
            raise CPShapeError(f"{len(counts)} row counts for a group of {self.world_size} ranks")
        if physical < max(counts, default=0):
            raise CPShapeError(f"physical rows {physical} < largest real count {max(counts)}")
        real = counts[self.rank]
        if x.shape[0] not in (real, physical):
            raise CPShapeError(
                f"rank {self.rank} holds {x.shape[0]} rows; expected its {real} real rows "
                f"or {physical} padded rows"
            )
        if x.shape[0] < physical:
            x = torch.cat([x, x.new_zeros((physical - x.shape[0], *x.shape[1:]))])
        gathered = self.all_gather(x)
        return torch.cat([gathered[r * physical : r * physical + n] for r, n in enumerate(counts)])


# torch 2.13 renamed all_gather_into_tensor (now deprecated) to all_gather_single; the
# project's torch range reaches back to releases that only have the old name.
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


class ProcessGroupComm(Comm):
    """A `torch.distributed` process group (gloo on CPU, NCCL on GPU); the world when None."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        if not (dist.is_available() and dist.is_initialized()):
            raise CPConfigError(
                "ProcessGroupComm needs torch.distributed to be initialised "
                "(dist.init_process_group) before a CP strategy is bound to a group"
            )
        rank = dist.get_rank(group)
        if rank < 0:
            raise CPConfigError(
                f"global rank {dist.get_rank()} is not a member of the given process group"
            )
        self.group = group
        self._rank = rank
        self._world_size = dist.get_world_size(group)

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._world_size

    def all_gather(self, x: Tensor) -> Tensor:
        x = x.contiguous()
        out = x.new_empty((self._world_size * x.shape[0], *x.shape[1:]))
        _all_gather_single(out, x, group=self.group)
        return out


class SoloComm(Comm):
    """The trivial group of one rank, for cp_size 1 without any process group."""

    @property
    def rank(self) -> int:
        return 0

    @property
    def world_size(self) -> int:
        return 1

    def all_gather(self, x: Tensor) -> Tensor:
        return x


class _PeerFailed(CPCommError):
    """Raised in a simulated rank whose barrier another rank broke; never the root cause."""


class _SimHub:
    def __init__(self, world_size: int, timeout_s: float) -> None:
        self.world_size = world_size
        self.barrier = threading.Barrier(world_size, timeout=timeout_s)
        self.slots: list[Tensor | None] = [None] * world_size


class LocalSimComm(Comm):
    """For unit tests only: one rank of a group whose ranks are threads of this process.

    Each all-gather is two barrier rounds (publish, then read), so a rank that fails or never
    arrives breaks the barrier and every peer raises `CPCommError` instead of hanging.
    """

    def __init__(self, hub: _SimHub, rank: int) -> None:
        self._hub = hub
        self._rank = rank

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._hub.world_size

    def _wait(self) -> None:
        try:
            self._hub.barrier.wait()
        except threading.BrokenBarrierError:
            raise _PeerFailed(
                f"simulated rank {self._rank}: a peer failed or timed out in all_gather"
            ) from None

    def all_gather(self, x: Tensor) -> Tensor:
        self._hub.slots[self._rank] = x
        self._wait()
        parts = [p for p in self._hub.slots if p is not None]
        self._wait()
        shapes = [(tuple(p.shape), p.dtype) for p in parts]
        if len(set(shapes)) != 1:
            listed = ", ".join(f"rank {r}: {s[0]} {s[1]}" for r, s in enumerate(shapes))
            raise CPCommError(f"all_gather needs one shape and dtype on every rank; got {listed}")
        return torch.cat([p.to(x.device) for p in parts])


def local_sim_comms(world_size: int, timeout_s: float = 60.0) -> list[LocalSimComm]:
    """The comms of one simulated group, one per rank, to be used from `world_size` threads."""
    if world_size < 1:
        raise CPConfigError(f"world_size must be >= 1, got {world_size}")
    hub = _SimHub(world_size, timeout_s)
    return [LocalSimComm(hub, r) for r in range(world_size)]


def run_local_ranks(
    world_size: int, fn: Callable[[LocalSimComm], T], timeout_s: float = 60.0
) -> list[T]:
    """Run `fn(comm)` for every rank of a simulated group, each in a thread; results by rank.

    The lowest rank's own error is re-raised, not the barrier errors it causes in its peers.
    """
    comms = local_sim_comms(world_size, timeout_s)
    results: list[T | None] = [None] * world_size
    errors: list[BaseException | None] = [None] * world_size

    def body(comm: LocalSimComm) -> None:
        try:
            results[comm.rank] = fn(comm)
        except BaseException as exc:
            errors[comm.rank] = exc
            comm._hub.barrier.abort()

    threads = [threading.Thread(target=body, args=(c,), daemon=True) for c in comms]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    raised = [e for e in errors if e is not None]
    if raised:
        primary = [e for e in raised if not isinstance(e, _PeerFailed)]
        raise (primary or raised)[0]
    return cast("list[T]", results)
