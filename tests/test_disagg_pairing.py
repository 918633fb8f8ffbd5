"""`plan --disagg`'s shortcuts against what they replace: the whole search against the plain
pairing it had (every pair of layouts judged by the rules read afresh, the bound and the
SLA search written out from the formulas), each pair rule against the fields it declares
it reads, the roofline's shared answers against the fields it declares, and the memory
model's memos against a fresh model."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from dataclasses import fields, replace
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat import solver
from meshsat.solver.catalogue.pd_pairs import PAIR_RULES, Side
from meshsat.solver.cli.plan_disagg import deployment_rules
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import MemoryModel, Parallel
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.memory.models import model_config
from meshsat.solver.memory.weights import WeightModel
from meshsat.solver.perf import PerfModel, Workload
from meshsat.solver.perf.disagg import (
    DecodeCost,
    DisaggPlan,
    DisaggSearch,
    PairVerdict,
    PrefillCost,
    RoleCosts,
    RoleLayout,
    _decode_dominates,
    _decode_order,
    _point,
    _prefill_dominates,
    _prefill_order,
    _undominated,
    link_gbps,
    pass_prompts,
    plan_disagg,
    role_layouts,
    sort_key,
)
from meshsat.solver.perf.roofline import RooflineSteps
from meshsat.solver.perf.schedule import ISL_REF
from tests.test_perf_disagg import _rules_afresh

DEEPSEEK = "deepseek-ai/DeepSeek-V3"

# ---- the search against the plain pairing -------------------------------------------------


def _plain_rates(
    pc: PrefillCost, x: int, conc: int, tpot: float, isl: int, osl: int
) -> tuple[float, float]:
    """TTFT and requests/s as the module docstring states them, computed from the cost's
    fields in the order the search before its speed-up computed them."""
    full = pass_prompts(pc.role.parallel, isl)
    p_ranks = x * pc.role.ranks
    r = -(-conc // p_ranks)
    n = min(r, full)
    if n <= 1:
        per_prompt = pc.one_ms
    else:
        per_prompt = (pc.one_ms + (n - 1) * (pc.full_ms - pc.one_ms) / (full - 1)) / n
    c = pc.calibration
    scale: float = (ISL_REF / isl) ** c.isl_power
    queue = c.queue * (r - 1) / 2 * per_prompt * scale
    ttft = c.overhead_ms + pc.one_ms + queue + pc.transfer_ms
    decode_ms = (osl - 1) * tpot
    prefill_rps = p_ranks * 1e3 / per_prompt
    rate = conc * 1e3 / (ttft + decode_ms)
    if rate > prefill_rps:
        rate = prefill_rps
        ttft = conc * 1e3 / rate - decode_ms
    return ttft, rate


def _plain_pairing(
    pm: PerfModel,
    gpus: int,
    pcs: list[PrefillCost],
    dcs: list[DecodeCost],
    check: Callable[[RoleLayout, RoleLayout], PairVerdict],
    top: int | None,
) -> tuple[list[DisaggPlan], int, int]:
    """The pairing of `plan_disagg` as it was: every (prefill, decode) pair in order, the
    rules asked of each pair that fits, the bound of each accepted pair term by term, the
    SLA search of each (x, y) the bound lets through."""
    w = pm.workload
    sla = w.met_by
    plans: list[DisaggPlan] = []
    leaders: list[tuple[Any, ...]] = []
    refused = runs = 0
    for pc in pcs:
        a = pc.role.gpus
        c = pc.calibration
        base = c.overhead_ms + pc.one_ms + pc.transfer_ms
        for dc in dcs:
            b = dc.role.gpus
            if a + b > gpus:
                continue
            if not check(pc.role, dc.role).ok:
                refused += 1
                continue
            most = 0.0
            for bd, tpot in dc.tpot:
                if sla(base, tpot):
                    most = max(most, bd / (base + (w.osl - 1) * tpot))
            per_gpu = dc.role.ranks * w.osl * 1e3 * most
            reach = (False, not (pc.is_aic and dc.is_aic), -per_gpu / b)
            if top is not None and len(leaders) >= top and leaders[top - 1] < reach:
                continue
            best: tuple[Any, ...] | None = None
            for x in range(1, (gpus - b) // a + 1):
                for y in range(1, (gpus - x * a) // b + 1):
                    met = None if best is None or best[0][0] else -best[0][1]
                    if met is not None and per_gpu * y / (x * a + y * b) < met:
                        continue
                    runs += 1
                    n = x * a + y * b
                    ranks = y * dc.role.ranks
                    found: tuple[Any, ...] | None = None
                    for bd, tpot in dc.tpot:
                        ttft, rate = _plain_rates(pc, x, bd * ranks, tpot, w.isl, w.osl)
                        if not sla(ttft, tpot):
                            break
                        tps_gpu = rate * w.osl / n
                        if found is None or tps_gpu >= -found[0][1]:
                            found = ((False, -tps_gpu, ttft), bd, tpot)
                    if found is None:
                        bd, tpot = dc.tpot[0]
                        ttft, rate = _plain_rates(pc, x, bd * ranks, tpot, w.isl, w.osl)
                        found = ((True, -rate * w.osl / n, ttft), bd, tpot)
                    key = (*found[0], n)
                    if best is None or key < best[0]:
                        best = (key, x, y, found[1], found[2])
            if best is not None:
                _k, x, y, bd, tpot = best
                plan = _point(pc, dc, x, y, bd, tpot, w.isl, w.osl, sla)
                plans.append(plan)
                if top is not None:
                    bisect.insort(leaders, sort_key(plan))
                    del leaders[top:]
    plans.sort(key=sort_key)
    return (plans if top is None else plans[:top]), refused, runs


@cache
def _search_input(
    model: str, n: int
) -> tuple[PerfModel, ModelSpec, tuple[Any, ...], tuple[Any, ...]]:
    pm = PerfModel(model, "H200", Workload(1024, 1024, 2000, 30), engine="roofline")
    spec = ModelSpec.from_hf_config(pm.config)

    def lays(mode: str) -> tuple[Any, ...]:
        base = {"disaggregation_mode": mode}
        return tuple(solver.enumerate(n, base=base, model=spec, up_to=True))

    return pm, spec, lays("prefill"), lays("decode")


@pytest.mark.parametrize(
    ("model", "n", "release", "top"),
    [(DEEPSEEK, 24, "0.5.23", 5), (DEEPSEEK, 24, "0.5.23", None),
     ("Qwen/Qwen3-32B", 8, "0.4.6.post5", 3)],
)  # fmt: skip
def test_the_search_is_the_plain_pairing(model: str, n: int, release: str, top: int | None) -> None:
    """The plans, the refused pairs and the (pair, x, y) runs of `plan_disagg` (the
    release's memoised rules grouped by the fields they read, the optimistic bound, the
    per-layout rate tables) are those of the plain pairing over the same role costs, by
    the roofline: DeepSeek-V3 (MLA) on 24 H200, where PP, DCP, attention CP and DP
    attention occur and 0.5.23 refuses pairs on PP and attention TP, with and without
    `top`; Qwen3-32B (not MLA) on 8, which 0.4.6.post5 refuses on attention TP."""
    pm, spec, pre_lays, dec_lays = _search_input(model, n)
    got = plan_disagg(pm, n, pre_lays, dec_lays, pair_check=deployment_rules(spec, release),
                      top=top)  # fmt: skip
    costs, gbps = RoleCosts(pm), link_gbps(pm, n)
    pcs = [c for r in role_layouts(pre_lays, pm, "prefill") if (c := costs.prefill(r, gbps))]
    dcs = [c for r in role_layouts(dec_lays, pm, "decode") if (c := costs.decode(r))]
    pcs = _undominated(pcs, _prefill_order, _prefill_dominates)
    dcs = _undominated(dcs, _decode_order, _decode_dominates)
    plans, refused, runs = _plain_pairing(pm, n, pcs, dcs, _rules_afresh(spec, release), top)
    assert plans and refused > 0
    assert got == DisaggSearch(plans, got.prefill_layouts, got.decode_layouts, len(pcs),
                               len(dcs), refused, runs)  # fmt: skip


# ---- the pair rules against the fields they declare ------------------------------------------

_side_values: dict[str, st.SearchStrategy[Any]] = {
    "role": st.sampled_from(["prefill", "decode"]),
    "model": st.sampled_from([None, "a/X", "/mnt/X", "b/Y", "$MODEL"]),
    "backend": st.sampled_from([None, "mooncake", "nixl"]),
    "bootstrap_port": st.sampled_from([None, 8998, 9000]),
    "page_size": st.sampled_from([None, 1, 16, 64]),
    "kv_cache_dtype": st.sampled_from([None, "auto", "fp8_e4m3"]),
    "tp": st.sampled_from([1, 2, 4, 8, 16]),
    "dp": st.sampled_from([1, 2, 4, 8]),
    "dp_attention": st.booleans(),
    "attn_tp": st.sampled_from([1, 2, 3, 4, 8, 16]),
    "attn_cp": st.sampled_from([1, 2, 4]),
    "pp": st.sampled_from([1, 2, 4]),
    "dcp": st.sampled_from([1, 2, 8]),
    "mla": st.sampled_from([None, True, False]),
    "line": st.integers(min_value=0, max_value=9),
    "allocation_policy": st.sampled_from(["early", "prefill_complete"]),
}
sides = st.builds(Side, **_side_values)


@settings(max_examples=150, deadline=None)
@given(p=sides, d=sides, p2=sides, d2=sides)
def test_each_pair_rule_reads_only_what_it_declares(p: Side, d: Side, p2: Side, d2: Side) -> None:
    """Any two pairs of servers equal on a rule's `reads` get the same answer from it: the
    second pair takes the first's declared fields and random others. What lets
    `plan_disagg` judge one pair of layouts per pair of keys."""
    for rule in PAIR_RULES:
        assert rule.reads is not None, rule.id
        same = {name: getattr(p, name) for name in rule.reads}
        same_d = {name: getattr(d, name) for name in rule.reads}
        assert rule.check(replace(p2, **same), replace(d2, **same_d)) == rule.check(p, d), rule.id
    assert {f.name for f in fields(Side)} == set(_side_values)


# ---- the roofline's shared answers against the fields it declares --------------------------

widths = st.sampled_from([1, 2, 4, 8])


@st.composite
def _parallels(draw: st.DrawFn, attn_cp: tuple[int, ...] = (1, 2)) -> Parallel:
    tp, pp = draw(widths), draw(st.sampled_from([1, 2, 3]))
    attn_dp = draw(st.sampled_from([d for d in (1, 2, 4, 8) if tp % d == 0]))
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if tp % e == 0]))
    return Parallel(
        tp=tp, pp=pp, attn_tp=tp // attn_dp, attn_dp=attn_dp, dp_attention=attn_dp > 1,
        attn_cp=draw(st.sampled_from(attn_cp)), ep=ep, moe_tp=tp // ep,
        dcp=draw(st.sampled_from([1, 2])), replicas=draw(st.sampled_from([1, 2, 5])),
        moe_dense_tp=draw(st.sampled_from([None, 1])), dp_lm_head=draw(st.booleans()),
        chunked_prefill_size=draw(st.sampled_from([None, 4096])),
    )  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(p=_parallels(), q=_parallels(), batch=st.sampled_from([1, 7, 64]))
def test_roofline_answers_depend_on_its_layout_inputs_alone(
    p: Parallel, q: Parallel, batch: int
) -> None:
    """Two roofline sources equal on `layout_inputs` (the second layout takes the first's
    declared widths, its other fields random; the same weight bytes) step alike, which is
    what lets `RoleCosts` share their answers."""
    pm = PerfModel(DEEPSEEK, "H200", engine="roofline")
    same = {k: getattr(p, k) for k in ("tp", "pp", "attn_tp", "attn_dp", "attn_cp", "ep",
                                       "moe_tp", "dcp")}  # fmt: skip
    q = replace(q, **same)
    a = RooflineSteps(pm.facts, p, pm.gpu, 8, 1e10)
    b = RooflineSteps(pm.facts, q, pm.gpu, 8, 1e10)
    assert a.layout_inputs() == b.layout_inputs()
    assert a.prefill_ms(batch, 2048) == b.prefill_ms(batch, 2048)
    assert a.decode_ms(batch, 2048, 512) == b.decode_ms(batch, 2048, 512)


# ---- the memory model's memos against a fresh model ------------------------------------------


@cache
def _shared_memory(model: str) -> MemoryModel:
    return MemoryModel(model_config(model), gpu("H200"))


@settings(max_examples=30, deadline=None)
@given(
    model=st.sampled_from([DEEPSEEK, "Qwen/Qwen3-32B"]),
    ps=st.lists(_parallels(attn_cp=(1,)), max_size=4),
)
def test_memoised_stages_answer_as_a_fresh_model(model: str, ps: list[Parallel]) -> None:
    """One memory model asked layout after layout (its stage, per-rank and pool memos
    warm, shared across examples) answers each as a model that never saw another.
    Attention CP stays 1: `MemoryModel.of`'s own cache (older than these memos) leaves it
    out of its key although the default fraction reads it, so a CP layout asked after
    its CP-1 twin gets the twin's fraction; that is a matter of its own."""
    shared = _shared_memory(model)
    for p in ps:
        fresh = MemoryModel(model_config(model), gpu("H200"))
        assert shared.of(p) == fresh.of(p)
        wm = WeightModel(fresh.facts, fresh.gpu)
        assert shared.weights.per_rank(p) == wm.per_rank(p)
        for s in range(p.pp):
            assert shared.weights.stage(p, s) == WeightModel(fresh.facts, fresh.gpu).stage(p, s)


def test_every_pair_rule_declares_its_fields() -> None:
    """A rule without `reads` would make the planner judge every pair of layouts (safe,
    slow): each rule of the table says what it reads, every name a `Side` field."""
    names = {f.name for f in fields(Side)}
    for rule in PAIR_RULES:
        assert rule.reads and set(rule.reads) <= names, rule.id
    assert list(itertools.chain.from_iterable(r.reads or () for r in PAIR_RULES))


@pytest.mark.parametrize(
    ("model", "n", "release"), [(DEEPSEEK, 24, "0.5.23"), ("Qwen/Qwen3-32B", 8, "0.4.6.post5")]
)
def test_accepts_is_the_verdict_without_its_wording(model: str, n: int, release: str) -> None:
    """`PlannedPairRules.accepts` (what the search asks) against the verdict of the rules
    read afresh, on pairs of role layouts, both answers seen."""
    pm, spec, pre_lays, dec_lays = _search_input(model, n)
    rules, afresh = deployment_rules(spec, release), _rules_afresh(spec, release)
    pre = role_layouts(pre_lays, pm, "prefill")[::9]
    dec = role_layouts(dec_lays, pm, "decode")[::9]
    seen = set()
    for p, d in itertools.product(pre, dec):
        ok = afresh(p, d).ok
        assert rules.accepts(p, d) == ok == rules(p, d).ok
        seen.add(ok)
    assert seen == {True, False}
