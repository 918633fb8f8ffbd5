"""The rule catalogue: every rule and resolution step, declared once.

Order follows SGLang's handler order, so reports list violations in the order a user
fixing them one launch at a time would meet them.
"""

from __future__ import annotations

from meshsat.solver.catalogue import (
    a2a,
    context_parallel,
    data_parallel,
    decode_cp,
    deterministic,
    disaggregation,
    dwdp,
    elastic_ep,
    eplb,
    kv4,
    kv_cache,
    model,
    moe_kernel,
    resolution,
    serving,
    speculative,
    speculative_names,
    topology,
    weight_shapes,
)
from meshsat.solver.lang.rule import Resolution, Rule

RULES: tuple[Rule, ...] = (
    *kv_cache.RULES,
    *context_parallel.RULES,
    *decode_cp.RULES,
    *data_parallel.RULES,
    *dwdp.RULES,
    *elastic_ep.RULES,
    *deterministic.RULES,
    *kv4.RULES,
    *moe_kernel.RULES,
    *a2a.RULES,
    *serving.HICACHE_RULES,
    # handle_cache_compatibility checks the ratio after its host-pool and offload checks.
    kv_cache.SWA_RATIO,
    *eplb.RULES,
    *speculative.RULES,
    speculative_names.UNKNOWN_ALGORITHM,
    *disaggregation.RULES,
    *topology.RULES,
    *model.RULES,
    *weight_shapes.RULES,
)
#: SGLang's silent changes in its order; the speculative handler's (and the page size its
#: checks read) come last, as that handler runs after the parallel ones: it opens by
#: upper-casing the algorithm's name.
RESOLUTIONS: tuple[Resolution, ...] = (
    *resolution.RESOLUTIONS,
    speculative_names.UPPER_CASE,
    *speculative.RESOLUTIONS,
)
ERRORS: tuple[Rule, ...] = tuple(r for r in RULES if r.severity == "error")
WARNINGS: tuple[Rule, ...] = tuple(r for r in RULES if r.severity == "warning")
BY_ID: dict[str, Rule] = {r.id: r for r in RULES}
if len(BY_ID) != len(RULES):  # pragma: no cover - guards the declaration itself
    raise RuntimeError("duplicate rule id in the catalogue")

__all__ = ["BY_ID", "ERRORS", "RESOLUTIONS", "RULES", "WARNINGS", "Resolution", "Rule"]
