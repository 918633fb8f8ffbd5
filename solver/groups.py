"""Which global rank belongs to which group: a pure function of the layout's widths.

The plan follows SGLang's rank layout (rules.md §5). Inside one pipeline stage the
local index `l = rank % tp_size` is split two ways, last coordinate fastest:
attention as (attn_dp, attn_cp, attn_tp) and MoE as (moe_dp, ep, moe_tp). Stages are
`tp_size` apart; without DP attention each of the `dp_size` replicas is a whole engine
offset by `tp_size * pp_size` GPUs. Creating process groups is a thin layer on top
(`cp.instantiate`), so the plan can be table-tested without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from solver.lang.config import Config
from solver.lang.model_spec import ModelSpec
from solver.validation.report import InvalidLayoutError

#: Group kinds, in the order process groups are created (every rank must agree on it).
GROUP_KINDS = ("tp", "pp", "attn_tp", "attn_cp", "attn_dp", "ep", "moe_tp", "moe_dp", "dcp")


@dataclass(frozen=True)
class Widths:
    """The resolved sizes a rank plan needs; every product here divides `tp`."""

    tp: int
    pp: int = 1
    replicas: int = 1
    attn_dp: int = 1
    attn_cp: int = 1
    ep: int = 1
    moe_dp: int = 1
    dcp: int = 1
    gpus_per_node: int = 8

    @property
    def attn_tp(self) -> int:
        return self.tp // (self.attn_dp * self.attn_cp)

    @property
    def moe_tp(self) -> int:
        return self.tp // (self.ep * self.moe_dp)

    @property
    def world(self) -> int:
        return self.replicas * self.tp * self.pp

    def check(self) -> None:
        """Reject widths that do not tile a stage; `groups()` validates before this."""
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
        if self.tp % (self.attn_dp * self.attn_cp):
            raise ValueError(
                f"attn_dp·attn_cp = {self.attn_dp}·{self.attn_cp} does not divide tp {self.tp}"
            )
        if self.tp % (self.ep * self.moe_dp):
            raise ValueError(f"ep·moe_dp = {self.ep}·{self.moe_dp} does not divide tp {self.tp}")
        if self.attn_tp % self.dcp:
            raise ValueError(f"dcp {self.dcp} does not divide attn_tp {self.attn_tp}")

    @classmethod
    def of(cls, resolved: Mapping[str, Any]) -> Widths:
        """Widths of a resolved configuration (a report's `resolved`)."""
        dp_attn = bool(resolved["enable_dp_attention"])
        return cls(
            tp=resolved["tp_size"],
            pp=resolved["pp_size"],
            replicas=1 if dp_attn else resolved["dp_size"],
            attn_dp=resolved["dp_size"] if dp_attn else 1,
            attn_cp=resolved["attn_cp_size"],
            ep=resolved["ep_size"],
            moe_dp=resolved["moe_dp_size"],
            dcp=resolved["dcp_size"],
            gpus_per_node=resolved["gpus_per_node"],
        )


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


def plan(w: Widths) -> RankMap:
    """The rank plan for these widths (a pure function; no validation of rules)."""
    w.check()
    a_tp, m_tp = w.attn_tp, w.moe_tp
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
                dcp=tp_r % w.dcp,
                node=rank // w.gpus_per_node,
                local_gpu=rank % w.gpus_per_node,
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
        "dcp": lambda r: (r.replica, r.pp, r.attn_dp, r.attn_cp, r.attn_tp // w.dcp),
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


def groups(
    config: Config | Mapping[str, Any], model: ModelSpec | Mapping[str, Any] | None = None
) -> RankMap:
    """The rank plan of a valid layout, after SGLang's silent changes.

    An invalid layout raises `InvalidLayoutError` carrying the validator's messages.
    """
    from solver.validation.validate import validate

    report = validate(config, model, explain=False)
    if not report.valid:
        raise InvalidLayoutError(report)
    return plan(Widths.of(report.resolved))
