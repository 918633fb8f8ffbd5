"""TOPO-STAGE-GPUS: two of one engine's schedulers on one GPU (pipeline stages interleaved by
--gpu-id-step), meshsat's advice in every pack.

Oracles: the GPU id every scheduler gets in each release's own launch code, recorded in
`tests/fixtures/placement/` (`fidelity/placement.py`: tp, pp, nnodes, replicas, base and
step 1-2 over the grid), and brute force over `meshsat.solver.placement.launches` (which
`tests/test_placement.py` replays against those records) for steps and depths the grid
lacks. SGLang itself checks nothing here: its resolution and check_server_args() accept
`--tp 4 --pp 2 --gpu-id-step 2` (0.4.6.post5 to 0.5.23, fidelity/runner.py), so the rule is
a warning, never an error.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver import validate
from meshsat.solver.backends.pyeval import compiled
from meshsat.solver.packs import get_pack
from meshsat.solver.placement import Job, LaunchFacts
from meshsat.solver.validation.validate import environment
from tests.test_gpu_ids import _config
from tests.test_placement import RELEASES, job_of, recorded, rows

RULE = "TOPO-STAGE-GPUS"


def _fires(job: Job, release: str) -> bool:
    pack = get_pack(release)
    checker = compiled(pack)
    env = environment(_config(job, 64), None)
    resolved, _ = checker.resolve(env)
    return any(pack.rules[i].id == RULE for i in checker.violations(resolved, env))


def _starts_each_rank_once(job: Job, launched: list[list[int]]) -> bool:
    """Every (replica, stage, TP rank) started once (for a scale joiner, whose nodes start
    every TP rank of their stages: the same split without the joiner): the even splits."""
    if job.facts.scale_joiner:
        plain = replace(job, facts=replace(job.facts, scale_joiner=False))
        return _starts_each_rank_once(plain, rows(plain))
    keys = sorted(tuple(x[1:4]) for x in launched)
    every = [(d, p, t) for d in range(job.replicas) for p in range(job.pp) for t in range(job.tp)]
    return keys == every


def _engine_shares_a_gpu(launched: list[list[int]]) -> bool:
    """Two schedulers of one replica on one GPU of one node."""
    seats = [(x[0], x[1], x[4]) for x in launched]
    return len(set(seats)) < len(seats)


@pytest.mark.parametrize("release", RELEASES)
def test_rule_equals_the_recorded_launches(release: str) -> None:
    """On every recorded even split, the advice fires exactly when the release's own
    launch code gives two schedulers of one replica the same GPU of a node."""
    checked = fired = 0
    for point in recorded(release)["points"]:
        job = job_of(point, release)
        if not _starts_each_rank_once(job, point["launches"]):
            continue
        expected = _engine_shares_a_gpu(point["launches"])
        assert _fires(job, release) == expected, {k: v for k, v in point.items() if k != "launches"}
        checked += 1
        fired += expected
    assert checked > 500 and 50 < fired < checked, (checked, fired)


@st.composite
def stepped_jobs(draw: st.DrawFn) -> Job:
    release = draw(st.sampled_from(RELEASES))
    facts = LaunchFacts(
        nnodes=draw(st.sampled_from((1, 1, 2, 4))),
        base_gpu_id=draw(st.integers(0, 3)),
        gpu_id_step=draw(st.integers(1, 9)),
        release=release,
        scale_joiner=release != "0.4.6.post5" and draw(st.booleans()),
    )
    tp = draw(st.sampled_from((1, 2, 3, 4, 6, 8, 12)))
    return Job(tp, draw(st.integers(1, 12)), 1, facts)


@settings(max_examples=500, deadline=None, derandomize=True)
@given(stepped_jobs())
def test_rule_equals_brute_force(job: Job) -> None:
    """Steps up to 9 and up to 12 stages: the rule against every launch SGLang makes."""
    launched = rows(job)
    if not _starts_each_rank_once(job, launched):
        return
    assert _fires(job, job.facts.release or RELEASES[-1]) == _engine_shares_a_gpu(launched)


@pytest.mark.parametrize("release", RELEASES)
def test_a_warning_not_an_error(release: str) -> None:
    """--tp 2 --pp 2 --gpu-id-step 2: stage 0 on GPUs 0 and 2, stage 1 on 2 and 4. SGLang
    accepts it, so the layout stays valid, with the advice among the warnings."""
    report = validate(
        {"tp_size": 2, "pp_size": 2, "gpu_id_step": 2}, explain=False, sglang_version=release
    )
    assert report.valid, report.violations
    assert [w.rule for w in report.warnings] == [RULE]
    report = validate(
        {"tp_size": 2, "pp_size": 2, "gpu_id_step": 3}, explain=False, sglang_version=release
    )
    assert report.valid and not report.warnings
