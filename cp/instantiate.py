"""From a legal layout to process groups and a bound CP strategy.

The rank plan is `meshsat.solver.groups` (pure, torch-free); this module is the thin layer that
turns it into `torch.distributed` groups. `torch.distributed.new_group` is collective:
every process must call it for every group, in the same order, even for groups it is not
in. So each rank walks the whole plan in `GROUP_KINDS` order, groups with identical
members share one process group, and the rank keeps the ones it belongs to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

from meshsat.cp.base import CPStrategy
from meshsat.cp.comm import ProcessGroupComm
from meshsat.cp.kinds import CPConfigError, CPStrategyKind, UnknownStrategyError
from meshsat.cp.registry import bind_cp_strategy
from meshsat.solver import Config, ModelSpec
from meshsat.solver.groups import GROUP_KINDS, RankInfo, RankMap, plan_layout
from meshsat.solver.packs import Pack


@dataclass(frozen=True)
class LayoutHandle:
    """What one rank holds once the layout is instantiated."""

    rank: int
    world_size: int
    #: The configuration SGLang would run (after its silent changes).
    resolved: Mapping[str, Any]
    plan: RankMap
    coords: RankInfo
    #: This rank's process group per kind (`GROUP_KINDS`).
    groups: Mapping[str, dist.ProcessGroup]
    #: The global ranks of each of this rank's groups.
    members: Mapping[str, tuple[int, ...]]
    #: The strategy bound to this rank's attention-CP group; None when CP is inactive.
    strategy: CPStrategy | None

    def comm(self, kind: str) -> ProcessGroupComm:
        """A `Comm` over one of this rank's groups (e.g. "attn_tp")."""
        return ProcessGroupComm(self.groups[kind])


def instantiate(
    config: Config | Mapping[str, Any],
    rank: int | None = None,
    world_size: int | None = None,
    *,
    model: ModelSpec | Mapping[str, Any] | None = None,
    strategy: str | None = None,
    sglang_version: str | Pack | None = None,
) -> LayoutHandle:
    """Validate the layout, create every process group it needs and bind the CP strategy.

    Call it on every rank after `dist.init_process_group`. `rank` and `world_size`
    default to the default group's and must match it when given. An invalid layout raises
    `solver.InvalidLayoutError` (the validator's messages) before any group is created, and
    so does a world size other than the layout's GPU count. `strategy` overrides the layout's
    `cp_strategy` with any of this package's names, "ring" included (not an SGLang value, so
    the layout itself cannot name it); an unknown name raises `UnknownStrategyError` (a
    `CPConfigError`) even where the layout leaves CP off. `sglang_version` picks the release
    whose rules validate the layout ("0.5.23", "installed"); by default the installed
    SGLang's, as the process about to run it has that SGLang (the newest pack, said once,
    when none is).
    """
    if strategy is not None:  # a typo whatever the layout, also where CP stays off
        if not isinstance(strategy, str):
            raise UnknownStrategyError(
                f"strategy must be a strategy name or None; got {type(strategy).__name__}"
            )
        CPStrategyKind.parse(strategy)
    planned = plan_layout(config, model, sglang_version=sglang_version)
    resolved, rank_map = planned.report.resolved, planned.rank_map
    if not (dist.is_available() and dist.is_initialized()):
        raise CPConfigError(
            "instantiate needs torch.distributed initialised (dist.init_process_group, or "
            "run under torchrun) before process groups can be created"
        )
    actual_rank, actual_world = dist.get_rank(), dist.get_world_size()
    if rank is not None and rank != actual_rank:
        raise CPConfigError(f"rank {rank} was asked for, but this process is rank {actual_rank}")
    if world_size is not None and world_size != actual_world:
        raise CPConfigError(
            f"world_size {world_size} was asked for, but the process group has {actual_world}"
        )
    needed = rank_map.widths.world
    if actual_world != needed:
        raise CPConfigError(
            f"the layout uses {needed} GPU(s) (gpus_used); the process group has "
            f"{actual_world} process(es)"
        )
    created: dict[tuple[int, ...], dist.ProcessGroup] = {}
    groups: dict[str, dist.ProcessGroup] = {}
    members: dict[str, tuple[int, ...]] = {}
    for kind in GROUP_KINDS:
        for ranks in rank_map.groups[kind]:
            group = created.get(ranks)
            if group is None:
                made = dist.new_group(ranks=list(ranks))
                if made is None:  # pragma: no cover - torch returns None only off-group in old APIs
                    raise CPConfigError(f"torch.distributed refused a {kind} group {ranks}")
                group = created[ranks] = made
            if actual_rank in ranks:
                groups[kind], members[kind] = group, ranks
    # Whether CP runs is the catalogue's derived `cp_active` (prefill CP on, attn_cp > 1, a
    # strategy set), decided once for the report, the plan and this binding.
    active = bool(planned.report.derived["cp_active"])
    bound = bind_cp_strategy(
        enable_prefill_cp=active,
        cp_size=rank_map.widths.attn_cp,
        cp_strategy=(resolved["cp_strategy"] if strategy is None else strategy) if active else None,
        comm_or_group=groups["attn_cp"],
    )
    return LayoutHandle(
        rank=actual_rank,
        world_size=actual_world,
        resolved=resolved,
        plan=rank_map,
        coords=rank_map.ranks[actual_rank],
        groups=groups,
        members=members,
        strategy=bound,
    )
