"""The resolved parallel widths the memory model divides by, as plain integers.

Why its own value: the memory arithmetic runs per enumerated layout (≤ 2 µs each), so it
reads a small frozen record rather than a `Report`. The widths are never re-derived here:
`from_resolved` copies SGLang's resolved fields and meshsat's derived widths
(`attn_tp`, `attn_dp`, `moe_tp`) from `meshsat.solver.validate(...)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The resolved config fields and derived widths `Parallel.from_resolved` reads.
CONFIG_FIELDS: tuple[str, ...] = (
    "tp_size",
    "pp_size",
    "dp_size",
    "enable_dp_attention",
    "attn_cp_size",
    "ep_size",
    "moe_dp_size",
    "dcp_size",
    "moe_dense_tp_size",
    "moe_a2a_backend",
    "enable_dp_lm_head",
    "chunked_prefill_size",
    "ep_num_redundant_experts",
    "page_size",
)
DERIVED_FIELDS: tuple[str, ...] = ("attn_tp", "attn_dp", "moe_tp")


@dataclass(frozen=True)
class Parallel:
    """One engine's widths (one replica: `tp * pp` ranks)."""

    tp: int = 1
    pp: int = 1
    attn_tp: int = 1
    attn_dp: int = 1
    attn_cp: int = 1
    ep: int = 1
    moe_tp: int = 1
    moe_dp: int = 1
    dcp: int = 1
    #: `--moe-dense-tp-size`; None shards dense MLPs over all of `tp`.
    moe_dense_tp: int | None = None
    #: `--moe-a2a-backend` as resolved: any backend but "none" keeps shared experts whole.
    moe_a2a_backend: str = "none"
    dp_attention: bool = False
    dp_lm_head: bool = False
    #: Independent engine replicas (dp_size without DP attention).
    replicas: int = 1
    chunked_prefill_size: int | None = None
    #: `--ep-num-redundant-experts`: expert slots beyond the model's, spread over EP
    #: (`weights.WeightModel.experts_per_rank`).
    redundant_experts: int = 0
    #: The KV page the server runs, as R-PAGE-SIZE resolved it (`page.py`); None: the
    #: layout carries none, and the memory model resolves its own (`MemoryModel.page_size`).
    page_size: int | None = None

    @property
    def ranks(self) -> int:
        return self.tp * self.pp

    @property
    def gpus(self) -> int:
        return self.ranks * self.replicas

    @property
    def whole(self) -> bool:
        """Whether these widths are an engine SGLang could build: every width at least one,
        attention's (attn_dp, attn_cp, attn_tp) and MoE's (moe_dp, ep, moe_tp) each
        multiplying out to `tp` (docs/rules.md §2), the dense-MLP width and decode CP
        dividing it. A layout the rules refuse for its widths (`--tp 8 --ep 16`: moe_tp is
        8 // 16 = 0) is not one, and the memory model does not size it."""
        sizes = (self.tp, self.pp, self.attn_tp, self.attn_dp, self.attn_cp, self.ep,
                 self.moe_tp, self.moe_dp, self.dcp, self.replicas)  # fmt: skip
        dense = self.moe_dense_tp
        return (
            min(sizes) >= 1
            and self.attn_dp * self.attn_cp * self.attn_tp == self.tp
            and self.moe_dp * self.ep * self.moe_tp == self.tp
            and self.tp % self.dcp == 0
            and (dense is None or (dense >= 1 and self.tp % dense == 0))
        )

    @classmethod
    def from_resolved(cls, resolved: Mapping[str, Any], derived: Mapping[str, Any]) -> Parallel:
        """From a `Report`'s `.resolved` and `.derived` (or an enumerated layout's)."""
        dp_attn = bool(resolved.get("enable_dp_attention"))
        tp = int(resolved["tp_size"])
        dense_tp = resolved.get("moe_dense_tp_size")
        return cls(
            tp=tp,
            pp=int(resolved.get("pp_size") or 1),
            attn_tp=int(derived["attn_tp"]),
            attn_dp=int(derived["attn_dp"]),
            attn_cp=int(resolved.get("attn_cp_size") or 1),
            ep=int(resolved.get("ep_size") or 1),
            moe_tp=int(derived["moe_tp"]),
            moe_dp=int(resolved.get("moe_dp_size") or 1),
            dcp=int(resolved.get("dcp_size") or 1),
            # Dense MLPs over all of `tp` either way: one shape, not two.
            moe_dense_tp=None if dense_tp == tp else dense_tp,
            moe_a2a_backend=str(resolved.get("moe_a2a_backend") or "none"),
            dp_attention=dp_attn,
            dp_lm_head=bool(resolved.get("enable_dp_lm_head")),
            replicas=int(derived["replicas"]),
            chunked_prefill_size=resolved.get("chunked_prefill_size"),
            redundant_experts=int(resolved.get("ep_num_redundant_experts") or 0),
            page_size=int(page) if (page := resolved.get("page_size")) else None,
        )
