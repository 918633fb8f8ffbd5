"""How many requests SGLang's scheduler starts at once (`schedule.admission_capacity`), what
that does to an estimate beyond the whole-context KV limit, and the build bound of a measured
run that records no version (`MeasuredRun.build`)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.memory import Parallel
from meshsat.solver.perf import PerfModel, Workload
from meshsat.solver.perf.measured import RELEASED, MeasuredRun, load_runs
from meshsat.solver.perf.schedule import CLIP_MAX_NEW_TOKENS, admission_capacity


def admitted_by_simulation(kv_tokens: int, isl: int, osl: int) -> int:
    """Reference: SGLang's `PrefillAdder` budget walked request by request, each running
    request holding its prompt plus its output clipped at 4,096 tokens at the starting
    `new_token_ratio` 0.7 (rounded up)."""
    reserve = isl + -(-7 * min(osl, 4096) // 10)
    free, n = kv_tokens, 0
    while free >= reserve:
        free -= reserve
        n += 1
    return n


sizes = st.integers(min_value=1, max_value=20000)


@settings(max_examples=60, deadline=None)
@given(kv=st.integers(min_value=0, max_value=3_000_000), isl=sizes, osl=sizes)
def test_admission_matches_the_schedulers_budget(kv: int, isl: int, osl: int) -> None:
    cap = admission_capacity(kv, isl, osl)
    assert cap == admitted_by_simulation(kv, isl, osl)
    # never fewer than the requests whose whole context fits, and longer requests never
    # admit more; output beyond the clip reserves no more
    assert cap >= kv // (isl + osl)
    assert admission_capacity(kv, isl + 1, osl) <= cap
    assert admission_capacity(kv, isl, osl + 1) <= cap
    if osl >= CLIP_MAX_NEW_TOKENS:
        assert admission_capacity(kv, isl, osl + 1000) == cap


def test_requests_the_scheduler_admits_do_not_queue_for_a_slot() -> None:
    """1,024 + 8,192 tokens: the whole-context limit is below what SGLang starts at once
    (the measured runs at 128 requests on four B200 with room for 101 whole contexts show
    0.7 s TTFT); a queue wait of a running request's latency begins only past admission."""
    layout = Parallel(tp=8, attn_tp=8, ep=8, moe_tp=1)
    pm = PerfModel("deepseek-ai/DeepSeek-V3", "H200", Workload(1024, 8192), engine="roofline")
    kv = pm.memory.of(layout).max_total_num_tokens
    whole, admit = kv // (1024 + 8192), admission_capacity(kv, 1024, 8192)
    assert admit > whole + 2
    inside = pm.estimate(layout, concurrency=admit)
    beyond = pm.estimate(layout, concurrency=admit + admit // 2)
    latency = 8191 * inside.tpot_ms
    assert inside.ttft_ms < 0.1 * latency
    assert beyond.ttft_ms > 0.4 * latency
    # the SLA search itself stays within the whole-context limit
    assert pm.estimate(layout).concurrency <= whole


RUN = MeasuredRun(
    id="x", model="m", gpu="B200", system="b200_sxm", sglang="unknown", quant="nvfp4",
    isl=1024, osl=1024, concurrency=8, tp_size=4, pp_size=1, dp_size=1, ep_size=1,
    ttft_ms=1.0, tpot_ms=1.0, normalised=False,
)  # fmt: skip


def test_a_run_without_a_version_is_bounded_by_its_measurement_day() -> None:
    assert replace(RUN, measured="2025-11-10").build == "<=0.5.5.post1"
    assert replace(RUN, measured="2025-11-18").build == "<=0.5.5.post3"
    assert replace(RUN, measured="2025-01-01").build == "unknown"
    assert RUN.build == "unknown"
    assert replace(RUN, sglang="0.5.9", measured="2026-03-25").build == "0.5.9"
    days = [day for _, day in RELEASED]
    assert days == sorted(days)


def test_every_measured_run_without_a_version_gets_a_bound() -> None:
    pytest.importorskip("aiconfigurator_core")
    unrecorded = [r for r in load_runs() if r.sglang == "unknown"]
    assert len(unrecorded) == 122
    assert all(r.build.startswith("<=0.5.") for r in unrecorded)


def test_each_aggregated_measurement_counts_once() -> None:
    """A copy under another id and model name (TTFT differing in the last binary digit, as
    the sample's do) is dropped, the first in file order stays; another concurrency or
    TPOT is another measurement. On the sample: keys unique, every row's key kept."""
    from meshsat.solver.perf.measured import distinct_runs, measurement_key

    a = replace(RUN, id="a", ttft_ms=3882.7718854580326)
    copy = replace(a, id="a-copy", model="deepseek-ai/DeepSeek-V3", ttft_ms=3882.771885458033)
    other = replace(a, id="b", concurrency=16)
    slower = replace(a, id="c", tpot_ms=2.0)
    printed = replace(a, id="a-printed", ttft_ms=3882.77, tpot_ms=round(a.tpot_ms, 2))
    assert [r.id for r in distinct_runs([a, copy, other, slower, copy, printed])] == [
        "a",
        "b",
        "c",
    ]
    runs = load_runs()
    if runs:
        kept = distinct_runs(runs)
        keys = [measurement_key(r) for r in kept]
        assert len(keys) == len(set(keys)) < len(runs)
        assert {measurement_key(r) for r in runs} == set(keys)


@settings(max_examples=60, deadline=None)
@given(
    ttfts=st.lists(st.floats(50.0, 20_000.0), min_size=2, max_size=4, unique=True),
    guess=st.floats(1.0, 50_000.0),
)
def test_repeats_floor_bounds_any_single_estimate(ttfts: list[float], guess: float) -> None:
    """Measurements of one configuration on other days form one group, and no single value
    serves the group's worst-served measurement better than the stated floor (the brute
    check: any guess); a configuration measured once, or another layout, is no group."""
    from meshsat.solver.perf.measured import repeated_configurations

    group = [replace(RUN, id=f"r{i}", ttft_ms=t) for i, t in enumerate(ttfts)]
    alone = replace(RUN, id="alone", tp_size=RUN.tp_size * 2, ttft_ms=ttfts[0])
    rep = repeated_configurations([*group, alone])
    distinct = {f"{t:.2f}" for t in ttfts}
    if len(distinct) < 2:
        assert rep.groups == ()
        return
    assert len(rep.groups) == 1 and len(rep.groups[0]) == len(distinct)
    (floor,) = rep.floor("ttft_ms")
    worst = max(abs(guess / r.ttft_ms - 1) for r in rep.groups[0])
    assert worst >= floor - 1e-12
    lo, hi = min(ttfts), max(ttfts)
    best = 2 * lo * hi / (lo + hi)
    assert max(abs(best / t - 1) for t in (lo, hi)) == pytest.approx(floor)
