"""Rank legal layouts by their estimate: what `meshsat plan` prints and autotuners call.

Why prune first: estimating is the expensive step, so layouts that do not load are dropped
before it, and layouts the estimate cannot tell apart (the same `memory.Parallel` widths:
they differ only in flags the estimate does not read; for a dense model the expert widths
are among those) are estimated once, the first of them standing for the rest.

The order: layouts that meet the SLA first; then layouts the engine (AIConfigurator's measured
kernels) estimated before those only the roofline could (the two sources are not on one
scale: the roofline is optimistic at large batches, see benchmarks/RESULTS-perf.md, so
mixing them in one order would promote whatever the engine cannot express); then most
output tokens/s per GPU, the lower TTFT, fewer GPUs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from meshsat.solver.memory import Memory, MemoryModel, Parallel
from meshsat.solver.perf.estimator import Estimate, PerfModel

#: `rank_layouts`' further test of a layout: (values, config, derived) -> keep it.
Keep = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], bool]


@dataclass(frozen=True)
class Ranked:
    """One layout with its memory and estimate."""

    config: Mapping[str, Any]
    derived: Mapping[str, Any]
    #: What the user launches: the enumerated values (`Layout.values`; the resolved config
    #: for inputs without them).
    values: Mapping[str, Any]
    parallel: Parallel
    memory: Memory
    estimate: Estimate
    #: Other fitting layouts with the same widths (not estimated again).
    same_widths: int


def memory_shape(
    memory: MemoryModel, config: Mapping[str, Any], derived: Mapping[str, Any]
) -> tuple[Parallel, bool]:
    """What a layout's memory and estimate read of it: its canonical widths and whether it
    runs DWDP. Layouts with the same shape differ only in flags neither reads, so a planner
    lists (and estimates) one of them."""
    p = memory.weights.canonical(Parallel.from_resolved(config, derived))
    return p, int(config.get("dwdp_size") or 1) > 1


def sort_key(e: Estimate) -> tuple[bool, bool, float, float, int]:
    ttft = e.ttft_ms if e.ttft_ms == e.ttft_ms else float("inf")
    return (not e.meets_sla, not e.source.startswith("aic"), -e.tokens_per_s_gpu, ttft, e.gpus)


def rank_layouts(
    layouts: Iterable[Any],
    pm: PerfModel,
    *,
    top: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    keep: Keep | None = None,
) -> list[Ranked]:
    """Estimate and rank `layouts` (anything with `.config` and `.derived`, e.g.
    `solver.enumerate(...)`'s); the `top` best, or all. `keep(values, config, derived)`:
    a further test, asked of a shape's members in order only until one passes (that one
    stands for the shape; none: the shape is dropped), so it costs about one call a shape
    (`plan`'s launch check across nodes)."""
    shapes: dict[tuple[Parallel, bool], list[Any]] = {}
    for lay in layouts:
        cfg, der = lay.config, lay.derived
        p, dwdp = memory_shape(pm.memory, cfg, der)
        if not pm.memory.of(p).fits:
            continue
        values = getattr(lay, "values", cfg)
        shapes.setdefault((p, dwdp), []).append((dict(cfg), dict(der), dict(values)))
    out = []
    for i, ((p, dwdp), members) in enumerate(shapes.items()):
        chosen = members[0]
        if keep is not None:
            found = next((m for m in members if keep(m[2], m[0], m[1])), None)
            if found is None:
                if progress is not None:
                    progress(i + 1, len(shapes))
                continue
            chosen = found
        est = pm.estimate(p, dwdp=dwdp)
        cfg, der, values = chosen
        out.append(Ranked(cfg, der, values, p, pm.memory.of(p), est, len(members) - 1))
        if progress is not None:
            progress(i + 1, len(shapes))
    out.sort(key=lambda r: sort_key(r.estimate))
    return out if top is None else out[:top]
