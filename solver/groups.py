"""Which global rank belongs to which group: a pure function of the layout's widths.

The plan follows SGLang's rank layout (docs/rules.md §5). Inside one pipeline stage the
local index `l = rank % tp_size` is split two ways, last coordinate fastest:
attention as (attn_dp, attn_cp, attn_tp) and MoE as (moe_dp, ep, moe_tp). Stages are
`tp_size` apart; without DP attention each of the `dp_size` replicas is a whole engine
offset by `tp_size * pp_size` GPUs. Creating process groups is a thin layer on top
(`meshsat.cp.instantiate`), so the plan can be table-tested without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Any

from meshsat.solver.backends.pyeval import compiled
from meshsat.solver.errors import InputError
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.fields import CONFIG_SPECS
from meshsat.solver.lang.limits import MAX_GPUS
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import Pack
from meshsat.solver.placement import Job, LaunchFacts, seats
from meshsat.solver.validation.report import Report
from meshsat.solver.validation.validate import check

#: Group kinds, in the order process groups are created (every rank must agree on it).
GROUP_KINDS = ("tp", "pp", "attn_tp", "attn_cp", "attn_dp", "ep", "moe_tp", "moe_dp", "dcp")


@dataclass(frozen=True)
class Widths:
    """The widths a rank plan needs, as the catalogue derives them (`meshsat.solver.lang.derived`).

    `attn_dp`, `attn_tp`, `moe_tp` and `replicas` are never recomputed here: `of` reads them
    from the compiled derivation, so the plan, the rules and `meshsat.cp.instantiate` share one
    definition of each width.
    """

    tp: int
    pp: int
    replicas: int
    attn_dp: int
    attn_cp: int
    attn_tp: int
    ep: int
    moe_dp: int
    moe_tp: int
    dcp: int
    gpus_per_node: int
    #: What SGLang places ranks by (`meshsat.solver.placement`); nnodes 1 is the planning
    #: view, nodes of `gpus_per_node` in rank order.
    launch: LaunchFacts = field(default_factory=LaunchFacts)

    @property
    def world(self) -> int:
        return self.replicas * self.tp * self.pp

    @property
    def job(self) -> Job:
        return Job(self.tp, self.pp, self.replicas, self.launch)

    @property
    def nnodes(self) -> int:
        return self.launch.nnodes

    @property
    def nodes(self) -> int:
        """Nodes the layout occupies: --nnodes, or in the planning view the nodes of
        `gpus_per_node` its ranks fill."""
        return self.nnodes if self.nnodes > 1 else -(-self.world // self.gpus_per_node)

    def check(self) -> None:
        """Reject widths that do not tile a stage; `plan_layout()` validates before this."""
        for name in (
            "tp",
            "pp",
            "replicas",
            "attn_dp",
            "attn_cp",
            "ep",
            "moe_dp",
            "dcp",
            "gpus_per_node",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.attn_dp * self.attn_cp * self.attn_tp != self.tp:
            raise ValueError(
                f"attn_dp·attn_cp = {self.attn_dp}·{self.attn_cp} does not divide tp {self.tp}"
            )
        if self.ep * self.moe_dp * self.moe_tp != self.tp:
            raise ValueError(f"ep·moe_dp = {self.ep}·{self.moe_dp} does not divide tp {self.tp}")

    @classmethod
    def of(cls, resolved: Mapping[str, Any], release: str | None = None) -> Widths:
        """Widths of a resolved configuration (a report's `resolved`, or any mapping of
        config fields: fields it lacks take their defaults)."""
        values = {**_DEFAULTS, **resolved}
        derived = compiled().derived(values)
        return cls(
            tp=values["tp_size"],
            pp=values["pp_size"],
            replicas=derived["replicas"],
            attn_dp=derived["attn_dp"],
            attn_cp=values["attn_cp_size"],
            attn_tp=derived["attn_tp"],
            ep=values["ep_size"],
            moe_dp=values["moe_dp_size"],
            moe_tp=derived["moe_tp"],
            dcp=values["dcp_size"],
            gpus_per_node=values["gpus_per_node"],
            launch=LaunchFacts(
                nnodes=values["nnodes"],
                base_gpu_id=values["base_gpu_id"],
                gpu_id_step=values["gpu_id_step"],
                release=release,
                scale_joiner=values["ep_join_mode"] == "scale",
            ),
        )


_DEFAULTS: dict[str, Any] = {name: spec.default for name, spec in CONFIG_SPECS.items()}


@dataclass(frozen=True)
class RankInfo:
    """One GPU's coordinates in every parallel dimension."""

    rank: int
    replica: int
    pp: int
    attn_dp: int
    attn_cp: int
    attn_tp: int
    moe_dp: int
    ep: int
    moe_tp: int
    dcp: int
    node: int
    local_gpu: int
    #: Index inside the pipeline stage: `rank % tp_size` within its replica.
    local: int


@dataclass(frozen=True)
class RankMap:
    """Every rank's coordinates and every group, each group a tuple of global ranks."""

    widths: Widths
    ranks: tuple[RankInfo, ...]
    #: Read-only: kind -> groups.
    groups: Mapping[str, tuple[tuple[int, ...], ...]]
    #: True when the MoE-DP communicator is the attention-CP group (attn_cp > moe_dp).
    moe_dp_is_attn_cp: bool

    def group_of(self, kind: str, rank: int) -> tuple[int, ...]:
        for g in self.groups[kind]:
            if rank in g:
                return g
        raise KeyError(f"rank {rank} is in no {kind} group")

    def within_nodes(self, kind: str) -> bool:
        """Every group of this kind lies inside one node."""
        node = {r.rank: r.node for r in self.ranks}
        return all(len({node[x] for x in g}) == 1 for g in self.groups[kind])

    def to_dict(self) -> dict[str, Any]:
        w = self.widths
        return {
            "world": w.world,
            "gpus_per_node": w.gpus_per_node,
            "nnodes": w.nnodes,
            "placement": placement_kind(w),
            "widths": {
                "tp": w.tp,
                "pp": w.pp,
                "replicas": w.replicas,
                "attn_dp": w.attn_dp,
                "attn_cp": w.attn_cp,
                "attn_tp": w.attn_tp,
                "ep": w.ep,
                "moe_dp": w.moe_dp,
                "moe_tp": w.moe_tp,
                "dcp": w.dcp,
            },
            "moe_dp_is_attn_cp": self.moe_dp_is_attn_cp,
            "ranks": [
                {k: getattr(r, k) for k in RankInfo.__dataclass_fields__} for r in self.ranks
            ],
            "groups": {k: [list(g) for g in v] for k, v in self.groups.items()},
        }


def placement_kind(w: Widths) -> str:
    """How `node` and `local_gpu` were found: `sglang`, as SGLang's launcher fills the
    --nnodes nodes (or, on one node, the GPU ids --base-gpu-id and --gpu-id-step choose),
    or `planning` (nnodes 1, default GPU ids: nodes of gpus_per_node in rank order)."""
    return "sglang" if w.launch.placed else "planning"


def plan(w: Widths) -> RankMap:
    """The rank plan for these widths (a pure function; no validation of rules)."""
    w.check()
    a_tp, m_tp = w.attn_tp, w.moe_tp
    # Stages sharing a GPU are SGLang's placement (TOPO-STAGE-GPUS warns): shown, not refused.
    where = seats(w.job, w.gpus_per_node, stages_may_share=True)
    ranks = []
    for rank in range(w.world):
        replica, in_engine = divmod(rank, w.tp * w.pp)
        pp, local = divmod(in_engine, w.tp)
        tp_r = local % a_tp
        ranks.append(
            RankInfo(
                rank=rank,
                replica=replica,
                pp=pp,
                attn_dp=local // (a_tp * w.attn_cp),
                attn_cp=(local // a_tp) % w.attn_cp,
                attn_tp=tp_r,
                moe_dp=local // (m_tp * w.ep),
                ep=(local // m_tp) % w.ep,
                moe_tp=local % m_tp,
                dcp=local % w.dcp,
                node=where[rank].node,
                local_gpu=where[rank].gpu,
                local=local,
            )
        )
    keys: dict[str, Callable[[RankInfo], tuple[int, ...]]] = {
        "tp": lambda r: (r.replica, r.pp),
        "pp": lambda r: (r.replica, r.local),
        "attn_tp": lambda r: (r.replica, r.pp, r.attn_dp, r.attn_cp),
        "attn_cp": lambda r: (r.replica, r.pp, r.attn_dp, r.attn_tp),
        "attn_dp": lambda r: (r.replica, r.pp, r.attn_cp, r.attn_tp),
        "ep": lambda r: (r.replica, r.pp, r.moe_dp, r.moe_tp),
        "moe_tp": lambda r: (r.replica, r.pp, r.moe_dp, r.ep),
        "moe_dp": lambda r: (r.replica, r.pp, r.ep, r.moe_tp),
        # SGLang's initialize_model_parallel: runs of dcp_size consecutive ranks of each
        # TP group (the last run shorter when dcp_size does not divide tp_size). Inside
        # one attention-TP group exactly when dcp_size divides attn_tp (DCP-IN-ATTN-TP).
        "dcp": lambda r: (r.replica, r.pp, r.local // w.dcp),
    }
    groups = {kind: _group_by(ranks, keys[kind]) for kind in GROUP_KINDS}
    shared = w.attn_cp > w.moe_dp
    if shared:
        # SGLang then builds the MoE-DP communicator from the attention-CP group, so a
        # rank's MoE-DP coordinate is its index there, its attention-CP coordinate (the
        # ep and moe_tp groups above still come from the MoE split of the stage).
        groups["moe_dp"] = groups["attn_cp"]
        ranks = [replace(r, moe_dp=r.attn_cp) for r in ranks]
    return RankMap(w, tuple(ranks), MappingProxyType(groups), shared)


def _group_by(
    ranks: list[RankInfo], key: Callable[[RankInfo], tuple[int, ...]]
) -> tuple[tuple[int, ...], ...]:
    buckets: dict[tuple[int, ...], list[int]] = {}
    for r in ranks:
        buckets.setdefault(key(r), []).append(r.rank)
    return tuple(sorted(tuple(v) for v in buckets.values()))


@dataclass(frozen=True)
class PlannedLayout:
    """A valid layout's report, its widths and (built on first use) its rank plan: a caller
    that only needs the widths of a huge layout never pays for every rank."""

    report: Report
    widths: Widths

    @cached_property
    def rank_map(self) -> RankMap:
        return plan(self.widths)


def plan_layout(
    config: Config | Mapping[str, Any],
    model: ModelSpec | Mapping[str, Any] | None = None,
    *,
    explain: bool | None = False,
    sglang_version: str | Pack | None = None,
) -> PlannedLayout:
    """Validate once and plan: the one path from a config to (report, rank map).

    An invalid layout raises `InvalidLayoutError` carrying the report (explained when
    `explain` asks for it, as in `validate`), before any rank is planned.
    """
    report = check(config, model, explain=explain, sglang_version=sglang_version)
    widths = Widths.of(report.resolved, release=report.sglang_version or None)
    widths.check()
    if widths.world > MAX_GPUS:  # each size is bounded, their product is not: a rank map
        # of 2^40 ranks would never finish (`limits.MAX_GPUS`)
        raise InputError(f"the layout uses {widths.world} GPUs; above the limit of {MAX_GPUS} GPUs")
    return PlannedLayout(report, widths)


def groups(
    config: Config | Mapping[str, Any],
    model: ModelSpec | Mapping[str, Any] | None = None,
    *,
    sglang_version: str | Pack | None = None,
) -> RankMap:
    """The rank plan of a valid layout, after SGLang's silent changes, judged by the rule
    pack of `sglang_version` (as every API call: None is the installed release's pack)."""
    return plan_layout(config, model, sglang_version=sglang_version).rank_map
