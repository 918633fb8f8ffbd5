"""The one collective CP needs (an all-gather along dim 0), behind a small interface.

Strategies never read a global rank: they ask their `Comm`, which is bound to one process group.
That lets an engine run several CP groups side by side (one per attention-CP subgroup) and lets
unit tests run every rank of a group as threads of one process (tests/cp_helpers.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from meshsat.cp.kinds import CPConfigError, CPShapeError


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

    def ring_pass_start(
        self, tensors: Sequence[Tensor], out: Sequence[Tensor] | None = None
    ) -> Callable[[], list[Tensor]]:
        """Start sending `tensors` to rank + 1 and receiving the same shapes from rank - 1 (mod
        the group size) into `out` (fresh tensors when None); the returned function waits and
        gives the received tensors, so the caller computes while the transfer is in flight.
        This fallback completes at once through an all-gather (for groups without
        point-to-point sends); `ProcessGroupComm` uses `batch_isend_irecv`."""
        prev = (self.rank - 1) % self.world_size
        got = [self.all_gather(t.unsqueeze(0).contiguous())[prev] for t in tensors]
        if out is not None:
            for buf, t in zip(out, got, strict=True):
                buf.copy_(t)
            got = list(out)
        return lambda: got

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
        # dist.new_group returns a sentinel (not a group) on the ranks outside the group
        non_member = _is_non_member(group)
        if group is not None and not non_member and not isinstance(group, dist.ProcessGroup):
            raise CPConfigError(
                f"ProcessGroupComm: group must be a torch.distributed ProcessGroup or None (the "
                f"default group); got {type(group).__name__} {group!r:.60}"
            )
        if not (dist.is_available() and dist.is_initialized()):
            raise CPConfigError(
                "ProcessGroupComm needs torch.distributed to be initialised "
                "(dist.init_process_group) before a CP strategy is bound to a group"
            )
        rank = -1 if non_member else dist.get_rank(group)
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

    def ring_pass_start(
        self, tensors: Sequence[Tensor], out: Sequence[Tensor] | None = None
    ) -> Callable[[], list[Tensor]]:
        nxt = self._global((self._rank + 1) % self._world_size)
        prev = self._global((self._rank - 1) % self._world_size)
        bufs = [torch.empty_like(t) for t in tensors] if out is None else list(out)
        ops = [dist.P2POp(dist.isend, t.contiguous(), nxt, self.group) for t in tensors]
        ops += [dist.P2POp(dist.irecv, b, prev, self.group) for b in bufs]
        reqs = dist.batch_isend_irecv(ops)

        def wait() -> list[Tensor]:
            for req in reqs:
                req.wait()
            return bufs

        return wait

    def _global(self, group_rank: int) -> int:
        return group_rank if self.group is None else dist.get_global_rank(self.group, group_rank)


def _is_non_member(group: object) -> bool:
    sentinel = getattr(dist.GroupMember, "NON_GROUP_MEMBER", None)
    return sentinel is not None and type(group) is type(sentinel) and group == sentinel


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
