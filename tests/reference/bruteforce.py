"""The reference enumerator: a plain product over the space, each point validated.

Slow on purpose and independent of the generator on purpose: it never looks at a rule
tree. It takes the domains from `meshsat.solver.enumeration.space`, runs `validate` on every
candidate, and keeps a candidate when the report is valid, resolution left the varied fields
unchanged, the GPU count is right, every `where` filter holds (`meshsat.solver.backends.interp`) and
every `intra_node` group kind stays in a node (`meshsat.solver.groups.plan`).

Two cuts keep it affordable, both implied by the rules and written without consulting
them: the GPU count must be tp·pp or dp·tp·pp, and the widths SGLang carves out of one
stage must fit in it (attn_dp·attn_cp·dcp and moe_dp·ep divide tp). Three more are the
conditions of the rules that rejected most candidates at 384 GPUs (1.9 million
candidates, 45,000 legal): decode CP with prefill CP (DCP-NO-PREFILL-CP), MoE DP with
PP (MOEDP-NO-PP) or with a different attention CP (CP-MOEDP-MATCH). If a cut ever
dropped a legal layout, the generator would list it and the comparison in the tests
would fail, so the cuts are checked too.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.backends.pyeval import compiled
from meshsat.solver.enumeration.space import DEFAULT_VARY, dims_of, divisors, varied_fields
from meshsat.solver.enumeration.where import parse
from meshsat.solver.groups import GROUP_KINDS, Widths, plan
from meshsat.solver.inputs import as_config, as_model
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.expr import Expr
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import NEWEST
from meshsat.solver.validation.validate import environment, validate

#: Sizes that must divide tp_size (TOPO-ATTN-TP, TOPO-MOE-TP, DCP-IN-ATTN-TP).
WITHIN_TP = ("attn_cp_size", "moe_dp_size", "ep_size", "dcp_size")
#: Rules a listed layout keeps: SGLang's errors and meshsat's advice (as `enumerate` does).
_KEPT = tuple(r in NEWEST.constraints for r in NEWEST.rules)


@dataclass(frozen=True)
class Found:
    """A legal layout as the reference sees it: the varied values and the resolution."""

    values: tuple[Any, ...]
    resolved: Mapping[str, Any]
    derived: Mapping[str, Any]
    #: The resolved environment: config fields and model facts (what filters read).
    env: Mapping[str, Any]


@lru_cache(maxsize=100_000)
def locality(widths: Widths) -> dict[str, bool]:
    """Which group kinds stay inside one node, from the full rank plan."""
    rank_map = plan(widths)
    return {kind: rank_map.within_nodes(kind) for kind in GROUP_KINDS}


def candidates(
    gpus: int, base: Config, vary: Iterable[str] = DEFAULT_VARY
) -> Iterator[dict[str, Any]]:
    """Every point of the space for `gpus`, minus the cuts, as varied-field dicts."""
    dims = dims_of(vary)
    first = [d for d in dims if d.name not in WITHIN_TP]
    varied = {d.name for d in dims}
    for a in itertools.product(*(d.domain(gpus) for d in first)):
        point: dict[str, Any] = {
            f: v
            for d, vals in zip(first, a, strict=True)
            for f, v in zip(d.fields, vals, strict=True)
        }
        tp: int = point.get("tp_size", base.tp_size)
        pp: int = point.get("pp_size", base.pp_size)
        dp: int = point.get("dp_size", base.dp_size)
        if gpus not in (tp * pp, dp * tp * pp):
            continue
        attn_dp = dp if point.get("enable_dp_attention", base.enable_dp_attention) else 1
        if tp % attn_dp:
            continue
        yield from _within_tp(point, base, varied, tp, attn_dp, pp)


def _within_tp(
    point: dict[str, Any], base: Config, varied: set[str], tp: int, attn_dp: int, pp: int
) -> Iterator[dict[str, Any]]:
    """attn_dp·attn_cp·dcp and moe_dp·ep divide tp: the products SGLang's rank layout
    carves out of one stage (a varied size ranges over what is left of tp). The rule
    cuts (module docstring) skip what one rule alone rejects."""

    def over(name: str, limit: int) -> tuple[int, ...]:
        return divisors(limit) if name in varied else (getattr(base, name),)

    prefill_cp = point.get("enable_prefill_cp", base.enable_prefill_cp)
    for cp in over("attn_cp_size", tp // attn_dp):
        attn_tp = tp // (attn_dp * cp) if tp % (attn_dp * cp) == 0 else 1
        for dcp in over("dcp_size", attn_tp):
            if dcp > 1 and prefill_cp:  # DCP-NO-PREFILL-CP
                continue
            for moe_dp in over("moe_dp_size", tp):
                if moe_dp > 1 and (pp > 1 or cp != moe_dp):  # MOEDP-NO-PP, CP-MOEDP-MATCH
                    continue
                ep_limit = tp // moe_dp if tp % moe_dp == 0 else 1
                for ep in over("ep_size", ep_limit):
                    full = dict(point)
                    sizes = (
                        ("attn_cp_size", cp),
                        ("dcp_size", dcp),
                        ("moe_dp_size", moe_dp),
                        ("ep_size", ep),
                    )
                    full.update((n, v) for n, v in sizes if n in varied)
                    yield full


def brute_force(
    gpus: int,
    base: Config | Mapping[str, Any] | None = None,
    model: ModelSpec | Mapping[str, Any] | None = None,
    vary: Iterable[str] = DEFAULT_VARY,
    where: Iterable[str | Expr] = (),
    gpus_per_node: int | None = None,
    intra_node: Iterable[str] = (),
    *,
    up_to: bool = False,
) -> Iterator[Found]:
    """The layouts `meshsat.solver.enumerate` must list, found the slow way."""
    cfg = as_config(base if base is not None else {})
    if gpus_per_node is not None:
        cfg = as_config({**cfg.__dict__, "gpus_per_node": gpus_per_node})
    spec = as_model(model)
    vary = tuple(vary)
    fields = varied_fields(dims_of(vary))
    filters = [parse(w) if isinstance(w, str) else w for w in where]
    kinds = tuple(intra_node)
    checker = compiled()
    base_env = environment(cfg, spec)
    for n in range(1, gpus + 1) if up_to else (gpus,):
        for point in candidates(n, cfg, vary):
            # validate()'s own decision procedure, without formatting the messages of
            # the (many) rejected candidates; every accepted one goes through validate().
            raw = {**base_env, **point}
            resolved, _ = checker.resolve(raw)
            if any(_KEPT[i] for i in checker.violations(resolved, raw)):
                continue
            if any(resolved[f] != point[f] for f in fields):
                continue
            if checker.derived(resolved)["gpus_used"] != n:
                continue
            report = validate(cfg.model_copy(update=point), spec, explain=False)
            if not report.valid:  # pragma: no cover - the two paths are one procedure
                raise AssertionError(f"validate() rejects {point}")
            if report.derived["gpus_used"] != n:  # pragma: no cover - as checked above
                raise AssertionError(f"validate() uses {report.derived['gpus_used']} GPUs")
            if not all(evaluate(w, report.resolved_env) for w in filters):
                continue
            if kinds:
                local = locality(Widths.of(report.resolved_env))
                if not all(local[k] for k in kinds):
                    continue
            yield Found(
                tuple(point[f] for f in fields),
                report.resolved,
                report.derived,
                report.resolved_env,
            )
