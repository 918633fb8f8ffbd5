"""meshsat's rank placement under --nnodes equals what SGLang's launcher does, per release.

The oracle is `tests/fixtures/placement/<v>.json.gz`: the launch statements of each
installed release, run by `fidelity/placement.py` over a grid of (tp, pp, nnodes, replicas,
base_gpu_id, gpu_id_step, scale joiner) and every node rank. The properties cover the space
between the grid points.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.groups import Widths, plan, plan_layout
from meshsat.solver.placement import (
    Job,
    LaunchFacts,
    PlacementError,
    global_rank,
    launches,
    seats,
)

FIXTURES = Path(__file__).parent / "fixtures" / "placement"
RELEASES = ("0.4.6.post5", "0.5.18", "0.5.19", "0.5.23")


@cache
def recorded(release: str) -> dict[str, Any]:
    with gzip.open(FIXTURES / f"{release}.json.gz", "rt", encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def job_of(point: dict[str, Any], release: str) -> Job:
    facts = LaunchFacts(
        point["nnodes"], point["base_gpu_id"], point["gpu_id_step"], release, point["scale_joiner"]
    )
    return Job(point["tp"], point["pp"], point["replicas"], facts)


def rows(job: Job) -> list[list[int]]:
    """meshsat's launches in the fixture's row form: [node, replica, pp, tp, gpu]."""
    return [[x.node, x.replica, x.pp_rank, x.tp_rank, x.gpu] for x in launches(job)]


@pytest.mark.parametrize("release", RELEASES)
def test_launches_equal_sglang_on_the_recorded_grid(release: str) -> None:
    data = recorded(release)
    assert data["sglang"] == release
    points = data["points"]
    assert len(points) >= 1000
    for point in points:
        got = rows(job_of(point, release))
        assert got == point["launches"], {k: v for k, v in point.items() if k != "launches"}


def _well_formed(job: Job, recorded_launches: list[list[int]]) -> bool:
    """SGLang starts every rank of the engine exactly once, each on a GPU of its own."""
    keys = [tuple(x[1:4]) for x in recorded_launches]
    every = {(d, p, t) for d in range(job.replicas) for p in range(job.pp) for t in range(job.tp)}
    gpus = [(x[0], x[4]) for x in recorded_launches]
    return sorted(keys) == sorted(every) and len(set(gpus)) == len(gpus)


@pytest.mark.parametrize("release", RELEASES)
def test_seats_follow_sglang_or_refuse_what_sglang_would_break(release: str) -> None:
    """Where SGLang's split is a bijection, every rank's (node, gpu) is the recorded one;
    where it is not, `seats` refuses (multi-node points only: nnodes 1 is the planning
    view)."""
    placed = refused = 0
    for point in recorded(release)["points"]:
        job = job_of(point, release)
        if job.facts.nnodes == 1:
            continue
        if not _well_formed(job, point["launches"]):
            with pytest.raises(PlacementError):
                seats(job, gpus_per_node=8)
            refused += 1
            continue
        where = seats(job, gpus_per_node=8)
        for node, replica, pp_rank, tp_rank, gpu in point["launches"]:
            seat = where[global_rank(job, replica, pp_rank, tp_rank)]
            assert (seat.node, seat.gpu) == (node, gpu), point
        placed += 1
    assert placed > 100 and refused > 100, (placed, refused)


def test_the_reported_case_tp16_on_four_nodes() -> None:
    """`groups --set tp_size=16 --set nnodes=4`: SGLang starts tp ranks 4n..4n+3 on node n,
    GPUs 0-3 (recorded), not 8 per node; the header says so."""
    point = next(
        p
        for p in recorded("0.5.23")["points"]
        if (p["tp"], p["pp"], p["nnodes"], p["replicas"], p["base_gpu_id"], p["gpu_id_step"])
        == (16, 1, 4, 1, 0, 1)
        and not p["scale_joiner"]
    )
    m = plan_layout({"tp_size": 16, "nnodes": 4}, sglang_version="0.5.23").rank_map
    assert sorted((r.node, r.local_gpu, r.rank) for r in m.ranks) == sorted(
        (x[0], x[4], x[3]) for x in point["launches"]
    )
    assert m.to_dict()["placement"] == "sglang"
    assert (
        plan_layout({"tp_size": 16}, sglang_version="0.5.23").rank_map.to_dict()["placement"]
        == "planning"
    )


def test_nnodes_one_is_the_planning_view() -> None:
    """One node: ranks cut every gpus_per_node, whatever SGLang does on the one machine."""
    w = Widths.of({"tp_size": 8, "pp_size": 2, "gpus_per_node": 4})
    m = plan(w)
    assert [(r.node, r.local_gpu) for r in m.ranks] == [divmod(r, 4) for r in range(16)]


def test_replica_stride_differs_between_04_and_05() -> None:
    """0.4.6.post5 starts DP replica d at d·tp·step GPUs, 0.5.x at d·tp·pp·step: the
    recorded launches of (tp 2, pp 2, nnodes 1, 2 replicas) differ exactly there."""

    def replica1_gpus(release: str) -> list[int]:
        p = next(
            p
            for p in recorded(release)["points"]
            if (p["tp"], p["pp"], p["nnodes"], p["replicas"], p["base_gpu_id"], p["gpu_id_step"])
            == (2, 2, 1, 2, 0, 1)
            and not p["scale_joiner"]
        )
        return sorted(x[4] for x in p["launches"] if x[1] == 1)

    assert replica1_gpus("0.4.6.post5") == [2, 3, 4, 5]  # replica 0 holds GPUs 0-3
    assert replica1_gpus("0.5.23") == [4, 5, 6, 7]


@st.composite
def jobs(draw: st.DrawFn) -> Job:
    facts = LaunchFacts(
        nnodes=draw(st.integers(2, 16)),
        base_gpu_id=draw(st.integers(0, 4)),
        gpu_id_step=draw(st.integers(1, 3)),
        release=draw(st.sampled_from(RELEASES)),
    )
    return Job(draw(st.integers(1, 24)), draw(st.integers(1, 8)), draw(st.integers(1, 3)), facts)


def _splits_evenly(job: Job) -> bool:
    """The split SGLang's arithmetic handles: whole stages per node (nnodes | pp), or a
    whole number of nodes per stage that divides tp (pp | nnodes, nnodes/pp | tp); each
    node's GPU ids then stay apart when the step is 1 or a node holds one stage, and the
    replicas' when their stride covers a node's stages (always from 0.5 on)."""
    f = job.facts
    per_node_pp = job.pp // f.nnodes
    if f.nnodes <= job.pp:
        split = job.pp % f.nnodes == 0
    else:
        split = f.nnodes % job.pp == 0 and job.tp % (f.nnodes // job.pp) == 0
    apart = f.gpu_id_step == 1 or per_node_pp <= 1
    replicas_apart = job.replicas == 1 or per_node_pp <= 1 or f.release != "0.4.6.post5"
    return split and apart and replicas_apart


@settings(max_examples=300, deadline=None)
@given(jobs())
def test_sglang_placement_properties(job: Job) -> None:
    """Every rank placed once, world/nnodes ranks per node, distinct GPU ids per node, and
    node n holding the engine ranks [n·P, (n+1)·P), P = tp·pp/nnodes, wherever the split is
    even; `seats` refuses exactly the jobs SGLang would start wrongly."""
    try:
        where = seats(job, gpus_per_node=8)
    except PlacementError:
        assert not _splits_evenly(job)
        assert not _well_formed(job, rows(job))
        return
    assert len(where) == job.world
    per_node: dict[int, list[int]] = {}
    for seat in where:
        per_node.setdefault(seat.node, []).append(seat.gpu)
    nnodes = job.facts.nnodes
    assert sorted(per_node) == list(range(nnodes))
    assert all(len(g) == job.world // nnodes for g in per_node.values())
    assert all(len(set(g)) == len(g) for g in per_node.values())
    if _splits_evenly(job):
        block = job.tp * job.pp // nnodes
        assert all(s.node == (r % (job.tp * job.pp)) // block for r, s in enumerate(where))
