"""The one collective CP needs (an all-gather along dim 0), behind a small interface.

Strategies never read a global rank: they ask their `Comm`, which is bound to one process group.
That lets an engine run several CP groups side by side (one per attention-CP subgroup) and lets
unit tests run every rank of a group as threads of one process (tests/cp_helpers.py).
"""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from meshsat.cp.kinds import CPCommError, CPConfigError, CPShapeError, CPStrategyKind


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

    def check_peers(self, tensors: Sequence[Tensor], plan: Sequence[int] = ()) -> None:
        """Raise `CPCommError` on every rank when the ranks' `tensors` (dtype and shape) or
        `plan` (a few ints that describe the forward, see `plan_summary`) differ, before a
        collective that would otherwise fail (gloo aborts the process) or mix up data.

        The base communicator checks nothing: a group that is not a real process group has
        its own means (the tests' simulated group compares shapes inside its all-gather).
        `ProcessGroupComm` exchanges a small header."""
        return None

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
    """A `torch.distributed` process group (gloo on CPU, NCCL on GPU); the world when None.

    `check`: whether each collective is preceded by `check_peers`, a small all-gather of
    every rank's dtype, shape and plan summary, so that ranks that disagree raise
    `CPCommError` on every rank (with the disagreeing ranks and values) instead of gloo
    aborting the process or a collective returning another rank's misread bytes. None (the
    default) checks collectives of CPU tensors (gloo), where the header stays on the host
    and costs one small collective; it skips CUDA tensors, where reading the header back is
    a host-device synchronisation per collective (the layer's path has none, and CUDA graph
    capture forbids one). True checks every collective (e.g. to debug NCCL), False none.
    Every rank of the group must use the same setting: the check is itself a collective.
    """

    def __init__(
        self, group: dist.ProcessGroup | None = None, *, check: bool | None = None
    ) -> None:
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
        if check is not None and not isinstance(check, bool):
            raise CPConfigError(
                f"ProcessGroupComm: check must be True, False or None; got {check!r:.60}"
            )
        self.group = group
        self.check = check
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
        if self._checks(x):
            self._exchange(_ALL_GATHER, [x], ())
        out = x.new_empty((self._world_size * x.shape[0], *x.shape[1:]))
        _all_gather_single(out, x, group=self.group)
        return out

    def check_peers(self, tensors: Sequence[Tensor], plan: Sequence[int] = ()) -> None:
        if tensors and self._checks(tensors[0]):
            self._exchange(_CHECK, tensors, plan)

    def ring_pass_start(
        self, tensors: Sequence[Tensor], out: Sequence[Tensor] | None = None
    ) -> Callable[[], list[Tensor]]:
        if tensors and self._checks(tensors[0]):
            self._exchange(_RING_PASS, tensors, ())
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

    def _checks(self, x: Tensor) -> bool:
        return self.check if self.check is not None else x.device.type == "cpu"

    def _exchange(self, op: int, tensors: Sequence[Tensor], plan: Sequence[int]) -> None:
        """All-gather every rank's header (`_header`) and raise `CPCommError` on every rank,
        naming the ranks and their values, when they differ. Every rank sees every header, so
        all of them raise alike and none has posted the collective the header precedes: the
        group stays usable."""
        mine = _header(op, tensors, plan)
        if self._world_size == 1:
            return
        device = tensors[0].device if tensors else torch.device("cpu")
        local = torch.tensor(mine, dtype=torch.long, device=device)
        every = local.new_empty(self._world_size * local.numel())
        _all_gather_single(every, local, group=self.group)
        rows = every.view(self._world_size, -1).tolist()
        if any(row != rows[0] for row in rows):
            raise CPCommError(_disagreement(_OP_NAMES[op], rows, len(tensors)))


# ---- the header check_peers exchanges ------------------------------------------------------

_ALL_GATHER, _RING_PASS, _CHECK = 1, 2, 3
_OP_NAMES = {_ALL_GATHER: "all_gather", _RING_PASS: "ring_pass_start", _CHECK: "check_peers"}
# Tensors described field by field (more are folded into the digest), dims per tensor (more
# are folded into the last), and the plan summary's length (`plan_summary`).
_TENSORS, _DIMS, _PLAN = 2, 6, 6
_TENSOR_FIELDS = 2 + _DIMS
_DTYPE_NAMES = {
    zlib.crc32(str(d).encode()): str(d)
    for d in (getattr(torch, n) for n in dir(torch))
    if isinstance(d, torch.dtype)
}


def _describe(t: Tensor) -> list[int]:
    """(dtype code, ndim, dims padded with -1); dims past `_DIMS` multiply into the last."""
    dims = list(t.shape)
    if len(dims) > _DIMS:
        tail = 1
        for d in dims[_DIMS - 1 :]:
            tail *= d
        dims = [*dims[: _DIMS - 1], tail]
    return [zlib.crc32(str(t.dtype).encode()), t.dim(), *dims, *[-1] * (_DIMS - len(dims))]


def _header(op: int, tensors: Sequence[Tensor], plan: Sequence[int]) -> list[int]:
    """A fixed-length int64 row, the same length on every rank whatever it passes (ranks with
    different arguments must still complete the exchange): operation, tensor count, the first
    `_TENSORS` tensors' descriptions, a digest of all of them, the plan summary."""
    described = [_describe(t) for t in tensors]
    digest = zlib.crc32(repr(described).encode())
    fields: list[int] = []
    for i in range(_TENSORS):
        fields += described[i] if i < len(described) else [-1] * _TENSOR_FIELDS
    plan = [int(p) for p in plan][:_PLAN]
    return [op, len(tensors), *fields, digest, len(plan), *plan, *[-1] * (_PLAN - len(plan))]


def plan_summary(
    kind: int, cp_size: int, extend_lens: Sequence[int], prefix_lens: Sequence[int]
) -> tuple[int, ...]:
    """What ranks must agree on about a forward's plan, in `_PLAN` ints: strategy kind, cp
    size, requests, tokens in the forward, cached tokens, and a digest of the lengths (two
    plans with the same padded shapes but other lengths would otherwise gather silently)."""
    lens = ",".join(map(str, (*extend_lens, -1, *prefix_lens)))
    return (
        int(kind),
        cp_size,
        len(extend_lens),
        sum(extend_lens),
        sum(prefix_lens),
        zlib.crc32(lens.encode()),
    )


def _disagreement(op: str, rows: list[list[int]], n_tensors: int) -> str:
    """Every field the ranks disagree on, as 'value on rank(s) [..]; value on rank(s) [..]'."""

    def grouped(values: list[str]) -> str:
        by_value: dict[str, list[int]] = {}
        for rank, value in enumerate(values):
            by_value.setdefault(value, []).append(rank)
        return "; ".join(f"{v} on rank(s) {r}" for v, r in by_value.items())

    def tensor(row: list[int], i: int) -> tuple[str, str]:
        base = 2 + i * _TENSOR_FIELDS
        code, ndim = row[base], row[base + 1]
        dims = tuple(row[base + 2 : base + 2 + min(ndim, _DIMS)]) if ndim >= 0 else ()
        return _DTYPE_NAMES.get(code, f"dtype #{code}"), str(dims)

    head = f"ProcessGroupComm.{op}: the ranks of the group disagree on "
    ops = [row[0] for row in rows]
    if len(set(ops)) > 1:  # the rest of the headers describe different calls
        return head + "the collective: " + grouped([_OP_NAMES.get(o, str(o)) for o in ops])
    counts = [row[1] for row in rows]
    if len(set(counts)) > 1:
        return head + "the tensor count: " + grouped([str(c) for c in counts])
    found = []
    for i in range(min(n_tensors, _TENSORS)):
        described = [tensor(row, i) for row in rows]
        for field, j in (("dtype", 0), ("shape", 1)):
            values = [d[j] for d in described]
            if len(set(values)) > 1:
                found.append(f"tensor {i}'s {field}: " + grouped(values))
    plan_at = 2 + _TENSORS * _TENSOR_FIELDS + 1
    if not found and len({tuple(row[:plan_at]) for row in rows}) > 1:
        found.append(f"the shapes or dtypes of tensors past the first {_TENSORS}")
    plans = [row[plan_at + 1 : plan_at + 1 + row[plan_at]] for row in rows]
    if any(p != plans[0] for p in plans):
        found.append("the forward's batch: " + grouped([_plan_text(p) for p in plans]))
    return head + " | ".join(found)


def _plan_text(plan: list[int]) -> str:
    if len(plan) != _PLAN:
        return f"plan {plan}"
    kind, cp, bs, tokens, cached, digest = plan
    known = {k.value: k.cli_value for k in CPStrategyKind}
    name = known.get(kind, f"kind {kind}")
    return (
        f"{name} cp {cp}, {bs} request(s), {tokens} tokens (+{cached} cached), lengths "
        f"digest {digest:#010x}"
    )


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
