"""Which node and which local GPU every rank runs on: SGLang's launcher, restated once.

With `--nnodes N` every node runs the same command with its own `--node-rank` and starts
only the (pp_rank, tp_rank) schedulers that rank owns, each on
`base_gpu_id + (pp_rank % pp_per_node)·tp_per_node + (tp_rank % tp_per_node)·gpu_id_step`
(docs/placement.md). The split is SGLang's, read from each release:

- 0.5.18 to 0.5.23: `_calculate_rank_ranges` in `sglang/srt/entrypoints/engine.py`
  (0.5.23 takes only the node rank and reads the sizes from `get_parallel()`), and the
  `gpu_id` expression of
  `Engine._launch_scheduler_processes` / `DataParallelController.launch_tensor_parallel_group`;
- 0.4.6.post5: the same arithmetic written inline in `engine._launch_subprocesses` and in
  `DataParallelController.launch_tensor_parallel_group`.

The releases differ in one place: without DP attention the data-parallel controller starts
replica `d` at GPU `d·tp_size·pp_size·gpu_id_step` (0.5.x, `launch_dp_schedulers`) but at
`d·tp_size·gpu_id_step` in 0.4.6.post5, which ignores pp. `fidelity/placement.py` evaluates
those lines of every installed release and `tests/test_placement.py` replays its record.

A single-node job (nnodes 1) with the default `--base-gpu-id 0 --gpu-id-step 1` is shown as
a *planning view* instead: ranks cut into nodes of `gpus_per_node` in rank order, the machine
the layout would need, since SGLang itself then puts every rank on the one node it was
started on. A single-node job that gives either flag is placed as SGLang places it: those
flags say which GPUs of that one node it takes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from meshsat.solver.errors import InputError

#: When SGLang's arithmetic starts every rank once (the hint of a refusal).
EVEN_SPLIT = (
    "SGLang splits evenly when nnodes divides pp_size, or is pp_size·k with k dividing tp_size"
)


class PlacementError(InputError):
    """SGLang's launcher would start a rank twice, never, outside the engine, or two ranks
    on one GPU: the launch hangs or fails at process-group creation."""


@dataclass(frozen=True)
class NodeShare:
    """The schedulers one node starts (SGLang's `_calculate_rank_ranges` answer)."""

    pp_ranks: range
    tp_ranks: range
    pp_per_node: int
    tp_per_node: int


def node_share(nnodes: int, pp: int, tp: int, node_rank: int) -> NodeShare:
    """What `--node-rank node_rank` of `--nnodes nnodes` starts: a whole number of pipeline
    stages when nnodes ≤ pp, else a slice of one stage's TP ranks."""
    pp_per_node = max(pp // nnodes, 1)
    nodes_per_stage = max(nnodes // pp, 1)  # SGLang's nnodes_per_pp_rank = nnodes_per_tp_group
    tp_per_node = tp // nodes_per_stage
    stage_block = node_rank // nodes_per_stage
    tp_block = node_rank % nodes_per_stage
    return NodeShare(
        range(pp_per_node * stage_block, pp_per_node * (stage_block + 1)),
        range(tp_per_node * tp_block, tp_per_node * (tp_block + 1)),
        pp_per_node,
        tp_per_node,
    )


def replica_gpu_stride(tp: int, pp: int, gpu_id_step: int, release: str | None) -> int:
    """GPUs between two DP replicas' first GPUs without DP attention (`launch_dp_schedulers`):
    tp·pp·step from 0.5.18 on, tp·step in 0.4.x. None is the newest release."""
    numbers = tuple(int(x) for x in re.findall(r"\d+", release or ""))
    return tp * gpu_id_step * (1 if numbers and numbers < (0, 5) else pp)


@dataclass(frozen=True)
class Launch:
    """One scheduler process as SGLang starts it."""

    node: int
    replica: int
    pp_rank: int
    tp_rank: int
    gpu: int


@dataclass(frozen=True)
class LaunchFacts:
    """What SGLang places ranks by besides the widths (its flag names)."""

    nnodes: int = 1
    base_gpu_id: int = 0
    gpu_id_step: int = 1
    #: The release whose launcher places the ranks (None: the newest).
    release: str | None = None
    #: An elastic-EP scale joiner (--elastic-ep-join-mode scale): SGLang's controller then
    #: starts every TP rank of the node's stages (`launch_tensor_parallel_group`, 0.5.18 on).
    scale_joiner: bool = False

    @property
    def placed(self) -> bool:
        """Whether ranks sit where SGLang's launcher puts them rather than in the planning
        view: several nodes, or GPU ids the user chose on the one node."""
        return self.nnodes > 1 or self.base_gpu_id != 0 or self.gpu_id_step != 1


@dataclass(frozen=True)
class Job:
    """One job's widths and launch facts: all that placement reads."""

    tp: int
    pp: int
    replicas: int = 1
    facts: LaunchFacts = LaunchFacts()

    @property
    def world(self) -> int:
        return self.replicas * self.tp * self.pp


def _node_launches(job: Job, node: int) -> Iterator[tuple[int, int, int, int]]:
    """(replica, pp rank, tp rank, GPU id) of every scheduler `node` starts, in SGLang's
    loop order."""
    f = job.facts
    stride = replica_gpu_stride(job.tp, job.pp, f.gpu_id_step, f.release)
    s = node_share(f.nnodes, job.pp, job.tp, node)
    if f.scale_joiner:
        s = replace(s, tp_ranks=range(job.tp), tp_per_node=job.tp)
    for replica in range(job.replicas):
        for pp_rank in s.pp_ranks:
            for tp_rank in s.tp_ranks:
                gpu = (
                    f.base_gpu_id
                    + replica * stride
                    + (pp_rank % s.pp_per_node) * s.tp_per_node
                    + (tp_rank % s.tp_per_node) * f.gpu_id_step
                )
                yield replica, pp_rank, tp_rank, gpu


def launches(job: Job) -> tuple[Launch, ...]:
    """Every scheduler every node starts, in SGLang's loop order, without any check: a
    malformed split shows here as a missing, repeated or out-of-engine (pp, tp) pair."""
    return tuple(
        Launch(node, *x) for node in range(job.facts.nnodes) for x in _node_launches(job, node)
    )


def node_gpus(job: Job, node: int) -> frozenset[int]:
    """The local GPU ids the schedulers of `node` take: `launches` of one node without a
    record per rank (a million-rank job's ids in a fraction of the time)."""
    return frozenset(x[3] for x in _node_launches(job, node))


@dataclass(frozen=True)
class Seat:
    """Where one global rank runs."""

    node: int
    gpu: int


def global_rank(job: Job, replica: int, pp_rank: int, tp_rank: int) -> int:
    """meshsat's rank numbering (docs/rules.md §5): replicas tp·pp apart, stages tp apart."""
    return (replica * job.pp + pp_rank) * job.tp + tp_rank


def seats(job: Job, gpus_per_node: int, *, stages_may_share: bool = False) -> tuple[Seat, ...]:
    """Node and local GPU of every global rank (index = rank).

    Not `placed` (nnodes 1, default GPU ids): the planning view (`gpus_per_node` ranks per
    node in rank order). Otherwise SGLang's placement, or `PlacementError` when it does not
    start every rank exactly once on a GPU of its own. With `stages_may_share`, two ranks of
    one engine on one GPU (stages interleaved by --gpu-id-step) are placed as SGLang places
    them: SGLang starts both schedulers there, and TOPO-STAGE-GPUS only advises against it,
    so a rank plan of the layout `validate` accepts shows them on their one GPU. Replicas on
    one GPU (0.4.6.post5's offset, TOPO-DP-REPLICA-GPUS, an error) are still refused."""
    nnodes = job.facts.nnodes
    if not job.facts.placed:
        return tuple(Seat(r // gpus_per_node, r % gpus_per_node) for r in range(job.world))
    placed: dict[int, Seat] = {}
    taken: dict[Seat, int] = {}
    for x in launches(job):
        if not (0 <= x.pp_rank < job.pp and 0 <= x.tp_rank < job.tp):
            raise PlacementError(
                f"--nnodes {nnodes}: SGLang's node {x.node} would start pp rank "
                f"{x.pp_rank} tp rank {x.tp_rank}, outside pp_size {job.pp} x tp_size {job.tp} "
                f"({EVEN_SPLIT})"
            )
        rank = global_rank(job, x.replica, x.pp_rank, x.tp_rank)
        seat = Seat(x.node, x.gpu)
        if rank in placed:
            raise PlacementError(
                f"--nnodes {nnodes}: SGLang would start rank {rank} on node "
                f"{placed[rank].node} and again on node {x.node}"
            )
        if seat in taken and not (stages_may_share and _one_engine(job, taken[seat], rank)):
            raise PlacementError(_shared_gpu(job, taken[seat], rank, seat))
        placed[rank] = seat
        taken.setdefault(seat, rank)
    missing = [r for r in range(job.world) if r not in placed]
    if missing:
        raise PlacementError(
            f"--nnodes {nnodes}: no node starts rank(s) {_listed(missing)} ({EVEN_SPLIT})"
        )
    return tuple(placed[r] for r in range(job.world))


def _one_engine(job: Job, first: int, rank: int) -> bool:
    """Two global ranks of one DP replica (one engine of tp·pp ranks)."""
    engine = job.tp * job.pp
    return first // engine == rank // engine


def _shared_gpu(job: Job, first: int, rank: int, seat: Seat) -> str:
    """Why two ranks got one GPU: replicas placed too close (0.4.x's replica offset counts
    no pipeline stages), or one engine's stages and TP ranks interleaved by gpu_id_step."""
    f = job.facts
    engine = job.tp * job.pp
    where = f"GPU {seat.gpu} of node {seat.node}"
    if not _one_engine(job, first, rank):
        stride = replica_gpu_stride(job.tp, job.pp, f.gpu_id_step, f.release)
        return (
            f"--nnodes {f.nnodes}: SGLang would start rank {first} (DP replica "
            f"{first // engine}) and rank {rank} (DP replica {rank // engine}) both on {where}: "
            f"replicas start {stride} GPUs apart ("
            + (
                "tp_size·pp_size·gpu_id_step"
                if stride == engine * f.gpu_id_step
                else "tp_size·gpu_id_step: this release's data-parallel controller does not "
                "count the pipeline stages"
            )
            + f") while each replica places {job.pp} stage(s) tp_size GPUs apart"
        )
    return (
        f"--nnodes {f.nnodes}: SGLang would start ranks {first} and {rank} both on {where} "
        f"(gpu_id_step {f.gpu_id_step} with several pipeline stages per node)"
    )


def _listed(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:8]))
    return shown + (f" ... ({len(ranks)} in all)" if len(ranks) > 8 else "")
